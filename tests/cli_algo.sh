#!/usr/bin/env bash
# The algorithmic tasks from the command line: a tiny copy run evaluates its test split size by
# size (sizes 1..2L, the trained ones marked) as a table, JSON and CSV with one row per size whose
# examples add up to the whole split; every task trains; bad options are one line, exit 2, and
# leave no run directory. (tests/test_algo.c checks the examples themselves.)
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 4 --layers 2 --batch 16 --threads 1 --steps 3 --warmup 1 --eval-every 0"

for task in copy reverse sort parity sum addition; do
    train --task "$task" $TINY --algo-train-max 4 --algo-test-per-size 5 --out "$W/$task"
done
"$P" eval --model "$W/copy" --threads 1 >"$W/table" 2>"$W/e" || fail "eval: $(cat "$W/e")"
grep -q "^test split by size: $W/copy (task copy, pe rope, step 3), trained on sizes 1..4$" "$W/table" ||
    fail "no by-size table: $(cat "$W/table")"
[ "$(grep -c '^ *[0-9]\+ \+5 ' "$W/table")" = 8 ] && [ "$(grep -c ' trained$' "$W/table")" = 4 ] ||
    fail "not 8 sizes of 5 examples, 4 trained: $(cat "$W/table")"
"$P" eval --model "$W/addition" --threads 1 --json >"$W/j" 2>"$W/e" || fail "eval --json: $(cat "$W/e")"
[ "$(json_text "$W/j" '[r["size"] for r in j["rows"]], j["train_max"], sum(r["examples"] for r in j["rows"]), [r["trained"] for r in j["rows"]].count(True)')" = \
  "([1, 2, 3, 4, 5, 6, 7, 8], 4, 40, 4)" ] || fail "eval --json: $(cat "$W/j")"
"$P" eval --model "$W/parity" --threads 1 --csv "$W/p.csv" >/dev/null 2>"$W/e" || fail "eval --csv: $(cat "$W/e")"
/usr/bin/python3 - "$W/p.csv" <<'PY' || fail "by-size CSV: $(cat "$W/p.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [int(r["size"]) for r in rows] == list(range(1, 9)), rows
assert all(r["pe"] == "rope" and int(r["examples"]) == 5 and 0 <= float(r["exact_match"]) <= 1 for r in rows), rows
assert [r["trained"] for r in rows] == ["1"] * 4 + ["0"] * 4, rows
PY
# the whole split at once: the same examples as the sizes together
"$P" eval --model "$W/copy" --threads 1 --examples 40 >"$W/all" 2>"$W/e" || fail "eval --examples: $(cat "$W/e")"
grep -q "test: exact match .* ([0-9]*/40 examples" "$W/all" || fail "eval --examples 40: $(cat "$W/all")"

expect 2 "--algo-test-max 3 is below --algo-train-max 4" -- train --task copy $TINY --algo-train-max 4 --algo-test-max 3 --out "$W/bad1"
expect 2 "addition-reversed" -- train --task copy $TINY --addition-reversed on --out "$W/bad2"
expect 2 "--algo-train-max: 300 is out of range" -- train --task reverse $TINY --algo-train-max 300 --out "$W/bad3"
[ -e "$W/bad1" ] || [ -e "$W/bad2" ] || [ -e "$W/bad3" ] && fail "a refused run left its directory"
echo "ok"
