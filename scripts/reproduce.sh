#!/usr/bin/env bash
# Runs a recorded table's command again from scratch and prints each of its numbers beside the
# record, with the relative drift (make reproduce TABLE=NAME; long: it trains every run again).
#
#   bash scripts/reproduce.sh NAME       (NAME: a directory of results/, e.g. demo)
#
# The runs go to runs/reproduce/NAME, a directory this script makes and marks as its own (the file
# .made-by-reproduce in it): the next reproduce of NAME removes it and starts again, so that
# nothing is reused, and it removes nothing else (a directory there without the mark, or a
# symbolic link, is refused). The command is the record's own (results/NAME/record.json) with only
# its --out changed. How close another machine comes: the same binary, SIMD level, BLAS kernels
# and thread count give the same bits; another CPU or kernel sums in another order
# (docs/TESTING.md, "What repeats exactly").
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-}
results=${PELAB_RESULTS:-results} # another directory for the tests
tables() { ls "$results" 2>/dev/null | tr '\n' ' '; }
case $name in # a directory of results/, named as scripts/record.sh names them
"") echo "usage: make reproduce TABLE=NAME, NAME one of: $(tables)" >&2; exit 2 ;;
*/* | .*) echo "reproduce: '$name' is not a table name (one of: $(tables))" >&2; exit 2 ;;
esac
record=$results/$name/record.json
[ -f "$record" ] || { echo "reproduce: $record is missing (NAME one of: $(tables))" >&2; exit 2; }
out=${PELAB_REPRODUCE_OUT:-runs/reproduce/$name}
mark=.made-by-reproduce
if [ -e "$out" ] || [ -L "$out" ]; then
    [ -d "$out" ] && [ ! -L "$out" ] && [ -f "$out/$mark" ] ||
        { echo "reproduce: $out exists and was not made by reproduce (it has no $mark): move it away" \
            "or remove it yourself" >&2; exit 2; }
fi
# the record's command, a word a line, with its --out replaced; a record that cannot be run again
# is one line on stderr
words=$(/usr/bin/python3 - "$record" "$out" <<'PY'
import json, sys
record, out = sys.argv[1], sys.argv[2]
def refuse(why):
    print("reproduce: " + why, file=sys.stderr)
    sys.exit(2)
try:
    c = json.load(open(record))["command"]
except (OSError, ValueError, KeyError, TypeError) as e:
    refuse("%s is not a record with a command (%s)" % (record, e))
if not isinstance(c, list) or len(c) < 2 or not all(isinstance(w, str) for w in c):
    refuse("%s: its command is not a list of words" % record)
if c[1] != "compare":
    refuse("%s records a pelab %s of existing runs, not a training; reproduce the tables of its runs, "
           "then run its command (%s) on them" % (record.rsplit("/", 1)[0], c[1], record))
i = next((i for i, w in enumerate(c) if w == "--out" or w.startswith("--out=")), None)
if i is None or (c[i] == "--out" and i + 1 == len(c)):
    refuse("%s: its command names no --out DIR, which reproduce would replace" % record)
if c[i] == "--out":
    c[i + 1] = out
else:
    c[i] = "--out=" + out
print("\n".join(c))
PY
) || exit
mapfile -t cmd <<<"$words"
# the datasets its runs read, installed where they read them when missing (pelab data install
# leaves an installed one alone)
mapfile -t installs < <(/usr/bin/python3 -c '
import glob, json, sys
seen = set()
for p in sorted(glob.glob(sys.argv[1] + "/runs/*/config.json")):
    task = json.load(open(p)).get("task", {})
    if task.get("dataset"):
        seen.add((task["dataset"], task.get("data-dir", "")))
for d, dd in sorted(seen): print(d + ("\t--data-dir\t" + dd if dd else ""))' "$results/$name")
for line in "${installs[@]}"; do
    IFS=$'\t' read -r -a args <<<"$line"
    "${cmd[0]}" data install "${args[@]}" >/dev/null ||
        { echo "reproduce: dataset ${args[0]} could not be installed (above)" >&2; exit 1; }
done
# the record's environment (PELAB_SIMD, OPENBLAS_CORETYPE, ...), as it ran
mapfile -t env < <(/usr/bin/python3 -c '
import json, sys
for k, v in json.load(open(sys.argv[1])).get("environment", {}).items(): print("%s=%s" % (k, v))' "$record")
rm -rf "$out"
mkdir -p "$out"
echo "made by scripts/reproduce.sh $name, which removes this directory when it runs again" >"$out/$mark"
echo "reproduce: ${env[*]} ${cmd[*]}"
env "${env[@]}" "${cmd[@]}"
echo
echo "$results/$name against $out ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)):"
/usr/bin/python3 scripts/tables.py --drift "$name" "$out/compare.json"
