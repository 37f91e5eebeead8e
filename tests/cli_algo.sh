#!/usr/bin/env bash
# The algorithmic tasks from the command line: a tiny copy run evaluates its test split size by
# size (sizes 1..2L, the trained ones marked) as a table, JSON and CSV with one row per size whose
# examples add up to the whole split; every task trains; bad options are one line, exit 2, and
# leave no run directory. compare has a column per bucket of sizes (one row per run, then mean and
# std over seeds), each the mean of the run's per-size exact matches in its sizes.json, and writes
# sizes.csv. Randomised positions and the attention-similarity analysis on these runs. (tests/
# test_algo.c checks the examples themselves.)
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 4 --layers 2 --batch 16 --threads 1 --steps 3 --warmup 1 --eval-every 0"

for task in copy reverse sort parity sum addition poly lego duplicate-string stack-manipulation binary-addition selective-copy; do
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

# compare: buckets of sizes, the auto ones (the trained sizes, the untrained in 4 parts, all the
# untrained) and given ones, each the mean of its sizes' exact matches
"$P" compare --task copy --pe nope,rope --seeds 2 $TINY --algo-train-max 4 --algo-test-per-size 5 \
    --out "$W/cmp" >"$W/ct" 2>"$W/e" || fail "compare: $(cat "$W/e")"
grep -q "^| encoding | seed | EM 1-4 (trained) | EM 5 | EM 6 | EM 7 | EM 8 | EM 5-8 | time |$" "$W/ct" &&
    [ "$(grep -c '^| \(nope\|rope\) | [12] |' "$W/ct")" = 4 ] && grep -q "^| rope\(†\)\? | .* ± " "$W/ct" ||
    fail "compare's tables: $(cat "$W/ct")"
/usr/bin/python3 - "$W/cmp" <<'PY' || fail "compare.json and sizes.csv disagree with the runs' sizes.json"
import csv, json, statistics, sys
d = sys.argv[1]
c = json.load(open(d + "/compare.json"))
assert c["buckets"] == ["1-4", "5", "6", "7", "8", "5-8"] and c["train_max"] == 4 and c["test_max"] == 8, c
ranges = [(1, 4), (5, 5), (6, 6), (7, 7), (8, 8), (5, 8)]
for r in c["runs"]:
    rows = json.load(open(r["dir"] + "/sizes.json"))["rows"]
    em = [x["exact_match"] for x in rows]
    assert r["size_em"] == em and len(em) == 8, r
    for (lo, hi), b in zip(ranges, r["sweep_em"]):
        assert abs(b - statistics.mean(em[lo - 1:hi])) < 1e-12, (r, lo, hi)
for e in c["encodings"]:
    mine = [r["size_em"] for r in c["runs"] if r["pe"] == e["pe"]]
    assert e["seeds"] == 2 and all(abs(m - statistics.mean(x)) < 1e-12 for m, x in zip(e["size_em_mean"], zip(*mine))), e
rows = list(csv.DictReader(open(d + "/sizes.csv")))
assert [(r["pe"], int(r["size"]), r["trained"]) for r in rows] == \
    [(p, s, "1" if s <= 4 else "0") for p in ("nope", "rope") for s in range(1, 9)], rows
PY
"$P" compare --task copy --pe rope --seeds 1 $TINY --algo-train-max 4 --algo-test-per-size 5 --buckets 1-4,8,5-8 \
    --out "$W/cmp" >"$W/ct" 2>"$W/e" || fail "compare --buckets: $(cat "$W/e")"
grep -q "^| encoding | EM 1-4 (trained) | EM 8 | EM 5-8 | time per run |$" "$W/ct" || fail "--buckets: $(cat "$W/ct")"
expect 2 "--buckets: 7-9 is not within the test sizes 1..8 of task copy" -- compare --task copy --pe rope --seeds 1 $TINY --algo-train-max 4 --buckets 1-4,7-9 --out "$W/bad4"
expect 2 "--buckets: 'x' is not a range of sizes" -- compare --task copy --pe rope --seeds 1 $TINY --algo-train-max 4 --buckets x --out "$W/bad5"
expect 2 "--buckets: task indirect has no instance sizes" -- compare --task indirect --pe rope --seeds 1 $TINY --buckets 1-4 --out "$W/bad6"
expect 2 "--lengths: task copy is swept over instance sizes" -- compare --task copy --pe rope --seeds 1 $TINY --lengths 2x --out "$W/bad7"
# the test split runs past the training context: an encoding that cannot take its positions is
# refused before anything trains
expect 2 "task copy tests beyond the training context of 9 positions, up to 17: --pe learned: position 16 is beyond the table of 9 positions" \
    -- train --task copy --pe learned $TINY --algo-train-max 4 --out "$W/bad8"
train --task copy --pe learned --ape-max-len 17 $TINY --algo-train-max 4 --algo-test-per-size 5 --out "$W/learned"

# randomised positions: recorded in the run's model settings; the evaluation draws them per
# example, so the batch size does not change it; refused where they cannot apply, before training
train --task copy --pe rope --random-positions 64 $TINY --algo-train-max 4 --algo-test-per-size 5 --out "$W/rp"
[ "$(json "$W/rp/config.json" 'j["model"]["random-positions"]')" = 64 ] || fail "random-positions not in config.json"
"$P" eval --model "$W/rp" --threads 1 --batch 3 --json >"$W/rp3" 2>"$W/e" && "$P" eval --model "$W/rp" --threads 1 \
    --batch 40 --json >"$W/rp40" 2>>"$W/e" || fail "eval of a random-positions run: $(cat "$W/e")"
/usr/bin/python3 - "$W/rp3" "$W/rp40" <<'PY' || fail "random positions depend on the batch"
import json, sys
a, b = (json.load(open(f))["rows"] for f in sys.argv[1:3])
# the same positions: the same predictions; the loss to rounding (the batch's shape picks kernels)
assert [(r["exact_match"], r["accuracy"]) for r in a] == [(r["exact_match"], r["accuracy"]) for r in b], (a, b)
assert all(abs(x["loss"] - y["loss"]) <= 1e-6 * y["loss"] for x, y in zip(a, b)), (a, b)
PY
expect 2 "--random-positions: --pe nope reads no positions" -- train --task copy --pe nope --random-positions 64 $TINY --out "$W/bad9"
expect 2 "--random-positions: --pe fox reads no positions" -- train --task copy --pe fox --random-positions 64 $TINY --out "$W/bad9"
expect 2 "--random-positions: --pe cope reads no positions" -- train --task copy --pe cope --random-positions 64 $TINY --out "$W/bad9"
expect 2 "--random-positions with --pe seqpe is not supported" -- train --task copy --pe seqpe --random-positions 64 $TINY --out "$W/bad10"
expect 2 "--random-positions 12 holds no 17 distinct positions" -- train --task copy --pe rope --random-positions 12 $TINY --algo-train-max 4 --out "$W/bad11"
expect 2 "--random-positions 5 is below the training context of 9 positions" -- train --task copy --pe rope --random-positions 5 $TINY --algo-train-max 4 --out "$W/bad12"
"$P" compare --task copy --pe rope,rope:random-positions=64 --seeds 1 $TINY --algo-train-max 4 --algo-test-per-size 5 \
    --out "$W/cmp" >"$W/ct" 2>"$W/e" || fail "compare with a random-positions variant: $(cat "$W/e")"
grep -q "^| rope:random-positions=64\(†\)\? |" "$W/ct" && [ -f "$W/cmp/rope+random-positions-64-s1/sizes.json" ] ||
    fail "the random-positions variant: $(cat "$W/ct")"

# attention similarity of runs of one task: D(A, A) = 0 for a run given twice, symmetric, the
# group entries the means over pairs of distinct runs, each layer's minimum below its mean
"$P" analyze attn-similarity --models "$W/cmp/nope-s1,$W/cmp/nope-s2,$W/cmp/rope-s1,$W/cmp/rope-s1" --examples 5 --threads 1 \
    --json "$W/as.json" --out "$W/as.csv" >"$W/ast" 2>"$W/e" || fail "attn-similarity: $(cat "$W/e")"
grep -q "^| nope | " "$W/ast" && grep -q "of size 8, JSD in nats" "$W/ast" || fail "attn-similarity's table: $(cat "$W/ast")"
/usr/bin/python3 - "$W/as.json" "$W/as.csv" <<'PY' || fail "attn-similarity's JSON or CSV: $(cat "$W/as.json")"
import csv, json, statistics, sys
j = json.load(open(sys.argv[1]))
d = [r["d"] for r in j["runs"]]
assert j["groups"] == ["nope", "rope"] and j["size"] == 8 and j["examples"] == 5, j
assert all(d[a][b] == d[b][a] and d[a][a] == 0 for a in range(4) for b in range(4)), d
assert d[2][3] == 0 and d[0][1] > 0 and all(0 < d[a][b] < 0.7 for a in (0, 1) for b in (2, 3)), d
assert j["mean"][0][0] == d[0][1] and j["mean"][1][1] == 0, j["mean"]
assert abs(j["mean"][0][1] - statistics.mean(d[a][b] for a in (0, 1) for b in (2, 3))) < 1e-12, j["mean"]
rows = list(csv.DictReader(open(sys.argv[2])))
assert len(rows) == 6 * 2 and all(float(r["min"]) <= float(r["mean"]) for r in rows), rows
for a in range(4):
    for b in range(a + 1, 4):
        mine = [float(r["min"]) for r in rows if r["run_a"] == j["runs"][a]["dir"] and r["run_b"] == j["runs"][b]["dir"]]
        assert abs(statistics.mean(mine) - d[a][b]) < 1e-8, (a, b, mine, d[a][b])
PY
# --groups names each run's group: two runs of one encoding kept apart; a name with a quote is a
# quoted CSV cell that reads back (RFC 4180), by Python and by pelab plot
"$P" analyze attn-similarity --models "$W/cmp/nope-s1,$W/cmp/nope-s2,$W/cmp/rope-s1" --groups 'a "x",b,b' --examples 5 \
    --threads 1 --json "$W/as2.json" --out "$W/as2.csv" >/dev/null 2>"$W/e" || fail "attn-similarity --groups: $(cat "$W/e")"
[ "$(json "$W/as2.json" 'j["groups"], j["mean"][0][0], abs(j["mean"][0][1] - (j["runs"][0]["d"][1] + j["runs"][0]["d"][2]) / 2) < 1e-15, j["mean"][1][1] == j["runs"][1]["d"][2]')" = "(['a \"x\"', 'b'], None, True, True)" ] ||
    fail "--groups: $(cat "$W/as2.json")"
grep -q '^[^,]*,[^,]*,"a ""x""",b,0,' "$W/as2.csv" &&
    [ "$(/usr/bin/python3 -c 'import csv, sys; print(sorted({r["group_a"] for r in csv.DictReader(open(sys.argv[1]))}))' "$W/as2.csv")" = "['a \"x\"', 'b']" ] &&
    "$P" plot lines --csv "$W/as2.csv" --x layer --y mean --group group_a --png "$W/as2.png" 2>"$W/e" ||
    fail "a group name with a quote in the CSV: $(cat "$W/as2.csv" "$W/e")"
expect 2 "--groups: 2 names for 3 runs" -- analyze attn-similarity --models "$W/cmp/nope-s1,$W/cmp/nope-s2,$W/cmp/rope-s1" --groups a,b --examples 5
# a comparison that would reuse runs trained on other sizes is refused, not mislabelled
"$P" compare --task copy --pe rope --seeds 1 $TINY --algo-train-max 3 --algo-test-per-size 5 --out "$W/cmp" >/dev/null 2>"$W/e"
[ $? -eq 2 ] && [ "$(grep -c '^pelab: ' "$W/e")" = 1 ] &&
    grep -q "rope-s1 holds a run of other settings: --algo-train-max 4 (asked: 3)" "$W/e" ||
    fail "a comparison reusing runs of other sizes: $(cat "$W/e")"
expect 2 "compare runs of one task" -- analyze attn-similarity --models "$W/copy,$W/parity" --examples 5
expect 2 "--examples 10: the test split of task copy has 5 of that size" -- analyze attn-similarity --models "$W/copy,$W/copy"
expect 2 "--models: give two or more run directories" -- analyze attn-similarity --models "$W/copy"
expect 2 "--size 9: the test split of task copy holds sizes 1..8" -- analyze attn-similarity --models "$W/copy,$W/copy" --size 9 --examples 5

expect 2 "--algo-test-max 3 is below --algo-train-max 4" -- train --task copy $TINY --algo-train-max 4 --algo-test-max 3 --out "$W/bad1"
expect 2 "addition-reversed" -- train --task copy $TINY --addition-reversed on --out "$W/bad2"
expect 2 "--algo-train-max: 300 is out of range" -- train --task reverse $TINY --algo-train-max 300 --out "$W/bad3"
expect 2 "--scratchpad does not apply to --task copy" -- train --task copy $TINY --scratchpad on --out "$W/bad13"
expect 2 "test sizes up to 60 (--algo-test-max, or twice --algo-train-max): task lego names each variable by one of 52 letters" -- train --task lego $TINY --algo-test-max 60 --out "$W/bad14"
train --task addition --scratchpad on $TINY --algo-train-max 4 --algo-test-per-size 5 --out "$W/scratch"
"$P" sample --model "$W/scratch" --split test --first 39 --count 1 >"$W/s" 2>"$W/e" || fail "sample: $(cat "$W/e")"
grep -q "^#39 .*|.*=" "$W/s" || fail "no scratchpad in the addition target: $(cat "$W/s")"
for b in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do [ -e "$W/bad$b" ] && fail "a refused run left its directory $W/bad$b"; done
echo "ok"
