#!/usr/bin/env bash
# Runs a recorded table's command again from scratch and prints each of its numbers beside the
# record, with the relative drift (make reproduce TABLE=NAME; long: it trains every run again).
#
#   bash scripts/reproduce.sh NAME       (NAME: a directory of results/, e.g. demo)
#
# The runs go to runs/reproduce/NAME (removed first, so that nothing is reused); the command is
# the record's own (results/NAME/record.json) with only its --out changed. How close another
# machine comes: the same binary, SIMD level, BLAS kernels and thread count give the same bits;
# another CPU or kernel sums in another order (docs/TESTING.md, "What repeats exactly").
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-}
results=${PELAB_RESULTS:-results} # another directory for the tests
[ -n "$name" ] && [ -f "$results/$name/record.json" ] ||
    { echo "usage: make reproduce TABLE=NAME, NAME one of: $(ls "$results" 2>/dev/null | tr '\n' ' ')" >&2; exit 2; }
out=${PELAB_REPRODUCE_OUT:-runs/reproduce/$name}
what=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["command"][1])' "$results/$name/record.json")
[ "$what" = compare ] || { echo "reproduce: $results/$name records a pelab $what of existing runs, not a training;" \
    "reproduce the tables of its runs, then run its command ($results/$name/record.json) on them" >&2; exit 2; }
mapfile -t cmd < <(/usr/bin/python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["command"]
i = next(i for i, w in enumerate(c) if w == "--out" or w.startswith("--out="))
if c[i] == "--out":
    c[i + 1] = sys.argv[2]
else:
    c[i] = "--out=" + sys.argv[2]
print("\n".join(c))' "$results/$name/record.json" "$out")
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
for k, v in json.load(open(sys.argv[1])).get("environment", {}).items(): print("%s=%s" % (k, v))' "$results/$name/record.json")
rm -rf "$out"
echo "reproduce: ${env[*]} ${cmd[*]}"
env "${env[@]}" "${cmd[@]}"
echo
echo "$results/$name against $out ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)):"
/usr/bin/python3 scripts/tables.py --drift "$name" "$out/compare.json"
