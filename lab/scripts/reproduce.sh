#!/usr/bin/env bash
# Runs a recorded table's command again from scratch and prints each of its numbers beside the
# record, with the relative drift (make reproduce TABLE=NAME; long: it trains every run again).
#
#   bash lab/scripts/reproduce.sh NAME       (NAME: a directory of results/, e.g. demo)
#
# The runs go to runs/reproduce/NAME, a directory this script makes and marks as its own (the file
# .made-by-reproduce in it): the next reproduce of NAME removes it and starts again, so that
# nothing is reused, and it removes nothing else (a directory there without the mark, or a
# symbolic link, is refused). The command is the record's own (results/NAME/record.json), run by
# ./pelab ($PELAB_BIN when set) from the repository's root, with its runs/record/NAME (its --out,
# an analysis's files) read as runs/reproduce/NAME (lab/scripts/recordpaths.py).
#
# A chain: a record whose command reads the runs of other records (runs/record/OTHER/...: a
# fine-tune's init-from, an analysis's --models) has them made again first, each the same way into
# runs/reproduce/OTHER (theirs first in turn), and reads them there; each record of the chain
# prints its numbers beside its record. An analysis is compared number by number with the file it
# recorded (analysis.json, analysis.csv).
#
# How close another machine comes: the same binary, SIMD level, BLAS kernels and thread count give
# the same bits; another CPU or kernel sums in another order (docs/TESTING.md, "What repeats
# exactly").
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:-}
results=${PELAB_RESULTS:-results} # another directory for the tests
tables() { ls "$results" 2>/dev/null | tr '\n' ' '; }
case $name in # a directory of results/, named as lab/scripts/record.sh names them
"") echo "usage: make reproduce TABLE=NAME, NAME one of: $(tables)" >&2; exit 2 ;;
*/* | .*) echo "reproduce: '$name' is not a table name (one of: $(tables))" >&2; exit 2 ;;
esac
record=$results/$name/record.json
[ -f "$record" ] || { echo "reproduce: $record is missing (NAME one of: $(tables))" >&2; exit 2; }
# the records to run, those whose runs NAME reads first (a record that cannot be run again, or a
# chain that cannot be ordered, is one line on stderr)
chain=$(/usr/bin/python3 lab/scripts/recordpaths.py chain "$name") || exit
mapfile -t chain <<<"$chain"
declare -A out
for n in "${chain[@]}"; do out[$n]=runs/reproduce/$n; done
out[$name]=${PELAB_REPRODUCE_OUT:-runs/reproduce/$name}
mark=.made-by-reproduce
dirs=()
for n in "${chain[@]}"; do
    dirs+=("$n=${out[$n]}")
    if [ -e "${out[$n]}" ] || [ -L "${out[$n]}" ]; then
        [ -d "${out[$n]}" ] && [ ! -L "${out[$n]}" ] && [ -f "${out[$n]}/$mark" ] ||
            { echo "reproduce: ${out[$n]} exists and was not made by reproduce (it has no $mark): move it away" \
                "or remove it yourself" >&2; exit 2; }
    fi
done
# every command of the chain, a word a line, before any runs
declare -A words
for n in "${chain[@]}"; do
    words[$n]=$(/usr/bin/python3 lab/scripts/recordpaths.py command "$n" "${dirs[@]}") || exit
done
if [ ${#chain[@]} -gt 1 ]; then
    first=$(IFS=,; echo "${chain[*]:0:${#chain[@]}-1}")
    echo "reproduce: $results/$name needs the runs of ${first//,/, }: made again first$([ ${#chain[@]} -eq 2 ] || echo ", in this order")"
fi
for n in "${chain[@]}"; do
    mapfile -t cmd <<<"${words[$n]}"
    cmd[0]=${PELAB_BIN:-./pelab}
    # the datasets its runs read, installed where they read them when missing (pelab data install
    # leaves an installed one alone)
    mapfile -t installs < <(/usr/bin/python3 -c '
import glob, json, sys
seen = set()
for p in sorted(glob.glob(sys.argv[1] + "/runs/*/config.json")):
    task = json.load(open(p)).get("task", {})
    if task.get("dataset"):
        seen.add((task["dataset"], task.get("data-dir", "")))
for d, dd in sorted(seen): print(d + ("\t--data-dir\t" + dd if dd else ""))' "$results/$n")
    for line in "${installs[@]}"; do
        IFS=$'\t' read -r -a args <<<"$line"
        "${cmd[0]}" data install "${args[@]}" >/dev/null ||
            { echo "reproduce: dataset ${args[0]} could not be installed (above)" >&2; exit 1; }
    done
    # the record's environment (PELAB_SIMD, OPENBLAS_CORETYPE, ...), as it ran
    mapfile -t env < <(/usr/bin/python3 -c '
import json, sys
for k, v in json.load(open(sys.argv[1])).get("environment", {}).items(): print("%s=%s" % (k, v))' "$results/$n/record.json")
    rm -rf "${out[$n]}"
    mkdir -p "${out[$n]}"
    echo "made by lab/scripts/reproduce.sh (of $name), which removes this directory when it makes it again" >"${out[$n]}/$mark"
    echo "reproduce: ${env[*]} ${cmd[*]}"
    env "${env[@]}" "${cmd[@]}"
    echo
    echo "$results/$n against ${out[$n]} ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)):"
    /usr/bin/python3 lab/scripts/tables.py --drift "$n" "${out[$n]}" "${dirs[@]}"
done
