#!/usr/bin/env python3
"""The learning curves of a record as one CSV (for `pelab plot lines`).

    lab/scripts/curves.py results/NAME [--tuning] > curves.csv
    ./pelab plot lines --csv curves.csv --x step --y val_acc --group run --png curves.png

A record keeps each run's validation lines in results/NAME/runs/RUN/log-val.jsonl
(lab/scripts/record.sh). Prints one row per validation: the run's compare entry (its directory
name without the seed), its seed, the run ("entry s<seed>"), the update and the validation's loss
and accuracy (empty where the task reports no accuracy). Rows go by entry, then seed, then update.
Tuning runs (runs/tune/) are left out unless --tuning. A record with no validation lines, or a run
without log-val.jsonl, is an error naming it: a curve with a run missing would read as complete.
"""
import csv
import json
import os
import re
import sys


def fail(msg):
    sys.stderr.write("curves: %s\n" % msg)
    sys.exit(1)


def runs_of(record, tuning):
    """(entry, seed, directory) of every run of the record, in order."""
    found = []
    bases = [os.path.join(record, "runs")] + ([os.path.join(record, "runs", "tune")] if tuning else [])
    for base in bases:
        if not os.path.isdir(base):
            continue
        for name in os.listdir(base):
            d = os.path.join(base, name)
            m = re.fullmatch(r"(.+)-s(\d+)", name)
            if not m or not os.path.isfile(os.path.join(d, "summary.json")):
                continue
            found.append((m.group(1), int(m.group(2)), d))
    return sorted(found)


def main(argv):
    args = [a for a in argv if a != "--tuning"]
    if len(args) != 1 or args[0].startswith("-"):
        fail("usage: lab/scripts/curves.py results/NAME [--tuning] > curves.csv")
    record = args[0].rstrip("/")
    runs = runs_of(record, "--tuning" in argv)
    if not runs:
        fail("%s holds no runs (results/NAME/runs/RUN/summary.json)" % record)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["entry", "seed", "run", "step", "val_loss", "val_acc"])
    for entry, seed, d in runs:
        path = os.path.join(d, "log-val.jsonl")
        if not os.path.isfile(path):
            fail("%s has no log-val.jsonl (recorded before records kept their curves?)" % d)
        n = 0
        with open(path) as f:
            for i, line in enumerate(f, 1):
                try:
                    v = json.loads(line)
                    step, loss = int(v["step"]), float(v["val_loss"])
                except (ValueError, KeyError, TypeError) as e:
                    fail("%s line %d: not a validation line (%s)" % (path, i, e))
                acc = v.get("val_acc")
                out.writerow([entry, seed, "%s s%d" % (entry, seed), step, repr(loss),
                              "" if acc is None else repr(float(acc))])
                n += 1
        if n == 0:
            fail("%s is empty" % path)


if __name__ == "__main__":
    main(sys.argv[1:])
