#!/usr/bin/env bash
# The tasks of documents from the command line, on small datasets installed here from sources made
# by the test (no network, no installed data needed): text, music and dna train, evaluate and
# sample; eval's NLL equals an independent computation (windows cut in Python from the cache, the
# PyTorch twin); a resumed text run equals an uninterrupted one; `eval --lengths` gives one row
# per length, its 1x row equal to `eval --split long`, and works with RoPE's length extension;
# `eval --lengths --csv` writes the same rows as CSV that `plot lines` draws; `analyze bias` and
# `analyze seqpe` work on a run whose dataset is not installed (freq, which reads it, says so);
# bad input (a dataset not installed, a damaged cache, a length no document reaches, a learned
# table too short, options of another task) is one line with exit status 1 or 2; `compare` adds
# the extrapolation columns, checks its lengths before training and reuses each run's sweep.
set -u
. "$(dirname "$0")/lib/cli.sh"
D=$W/data
S=$D/sources
export PELAB_FETCH=/bin/false # the sources are all here: any fetch is a bug
export PELAB_DATA=$W/nowhere  # every command names --data-dir (or reads the run's)

# ---- sources: 16 speeches (the 8 longest are the long split; speech 3 is val, 8 test), chorales,
# 23 stretches of "chromosome X" of which 4 are kept (0 train, 11 and 21 val, 22 test), P. falciparum
mkdir -p "$S/jsb" "$S/dna-human" "$S/dna-pfal"
sotu_sources "$S"
/usr/bin/python3 - "$S/jsb/Jsb16thSeparated.json" <<'PY'
import json, random, sys
random.seed(5)
def chorale(steps):
    return [[random.choice([-1] + list(range(40, 82))) for _ in range(4)] for _ in range(steps)]
data = {"train": [chorale(random.randint(10, 60)) for _ in range(12)],
        "valid": [chorale(random.randint(10, 60)) for _ in range(3)],
        "test": [chorale(s) for s in (20, 40, 70)]}
json.dump(data, open(sys.argv[1], "w"))
PY
awk 'BEGIN { srand(3); print ">X  chrX"; s = ""
             for (d = 0; d < 23; d++) for (i = 0; i < 120000; i++) {
                 s = s ((d == 0 || d == 11 || d >= 21) ? substr("ACGT", int(rand() * 4) + 1, 1) : "N")
                 if (length(s) == 60) { print s; s = "" } }
             print s }' >"$S/dna-human/hs37chrXtrunc.fa"
awk 'BEGIN { srand(4); print ">MAL1"; s = ""
             for (i = 0; i < 30000; i++) { s = s substr("AATTTACG", int(rand() * 8) + 1, 1); if (length(s) == 60) { print s; s = "" } }
             print s }' >"$S/dna-pfal/genome_1.fa"
"$P" data install sotu jsb dna-human dna-pfal --data-dir "$D" >"$W/out" 2>&1 || fail "install: $(cat "$W/out")"

TINY0="--d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --eval-every 0"
TINY="$TINY0 --data-dir $D"

# ---- text: train, evaluate, compare with the independent computation ----
T="$TINY --task text --tokenizer byte --seq-len 32"
"$P" train $T --steps 6 --save-every 3 --out "$W/t" >/dev/null 2>"$W/e" || fail "train text: $(cat "$W/e")"
for k in test_ppl test_bpb; do grep -q "\"$k\"" "$W/t/summary.json" || fail "summary.json lacks $k"; done
"$P" eval --threads 1 --model "$W/t" --json >"$W/ev" 2>"$W/e" || fail "eval text: $(cat "$W/e")"
close() { /usr/bin/python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > float(sys.argv[3]) * abs(b))' "$@"; }
# (another batch size: float sums in another order inside the forward pass)
close "$(json "$W/ev" 'j["loss"]')" "$(json "$W/t/summary.json" 'j["test_loss"]')" 1e-6 ||
    fail "eval's test loss differs from summary.json's"
"$P" eval --threads 1 --model "$W/t" >"$W/o" || fail "eval text (table)"
grep -q "^test: NLL [0-9.]* per token  perplexity [0-9.]*  bits/byte" "$W/o" || fail "eval line: $(cat "$W/o")"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then # the independent computation
    /usr/bin/python3 tests/lib/seq_nll.py "$W/t" "$D/sotu/byte.ptok" test,long 32 tile 0 >"$W/nll" ||
        fail "seq_nll.py failed"
    for split in test long; do
        "$P" eval --threads 1 --model "$W/t" --split $split --json >"$W/ev" || fail "eval --split $split"
        read -r nll scored _ < <(if [ $split = test ]; then head -1 "$W/nll"; else tail -1 "$W/nll"; fi)
        close "$(json "$W/ev" 'j["loss"]')" "$nll" 1e-5 || fail "$split: pelab's NLL $(json "$W/ev" 'j["loss"]') vs independent $nll"
        [ "$(json "$W/ev" 'j["targets"]')" = "$scored" ] || fail "$split: scored tokens differ"
    done
else
    echo "notice: python3-torch is not installed; the independent NLL check is skipped"
fi
# a resumed run reads the same windows: the same weights as an uninterrupted one
"$P" train $T --steps 3 --save-every 3 --out "$W/t3" >/dev/null 2>&1 || fail "train 3 steps"
"$P" train --resume "$W/t3" --steps 6 >/dev/null 2>&1 || fail "resume"
same_weights "$W/t/model.safetensors" "$W/t3/model.safetensors" || fail "a resumed text run differs"

# ---- the sweep ----
# (--batch 64: the passes of eval --split long, so that the 1x row is the same computation)
"$P" eval --threads 1 --model "$W/t" --lengths 1x,2x,128 --batch 64 --json --csv "$W/sw.csv" >"$W/sw" 2>"$W/e" ||
    fail "sweep: $(cat "$W/e")"
/usr/bin/python3 - "$W/sw" "$W/sw.csv" <<'PY' || fail "eval --csv: the CSV differs from the JSON: $(cat "$W/sw.csv")"
import csv, json, sys
j = json.load(open(sys.argv[1]))
rows = list(csv.reader(open(sys.argv[2])))
assert rows[0] == "pe,label,length,multiple,documents,windows,tokens,nll,ppl,bpb".split(","), rows[0]
assert len(rows) == 1 + len(j["rows"]) == 4, len(rows)
for r, o in zip(rows[1:], j["rows"]):
    assert r[:3] == [j["pe"], o["label"], str(o["length"])], r
    assert [int(x) for x in r[4:7]] == [o["documents"], o["windows"], o["tokens"]], r
    for x, k in zip([r[3]] + r[7:], ("multiple", "loss", "perplexity", "bits_per_byte")):
        assert abs(float(x) - o[k]) <= 1e-8 * abs(o[k]), (r, k, o[k])
PY
if "$P" --version | grep -q ", cairo)"; then
    "$P" plot lines --csv "$W/sw.csv" --x length --y ppl --logx --png "$W/sw.png" 2>"$W/e" && [ -s "$W/sw.png" ] ||
        fail "plot lines of eval's CSV: $(cat "$W/e")"
fi
[ "$(json "$W/sw" '[r["length"] for r in j["rows"]]')" = "[32, 64, 128]" ] || fail "sweep rows: $(cat "$W/sw")"
[ "$(json "$W/sw" 'j["split"], j["train_length"], j["attention"]')" = "('long', 32, 'tiled')" ] || fail "sweep: $(cat "$W/sw")"
"$P" eval --threads 1 --model "$W/t" --split long --json >"$W/ev" || fail "eval --split long"
[ "$(json "$W/sw" 'j["rows"][0]["loss"]')" = "$(json "$W/ev" 'j["loss"]')" ] || fail "the 1x row differs from eval --split long"
[ "$(json "$W/sw" 'j["rows"][0]["tokens"]')" = "$(json "$W/ev" 'j["targets"]')" ] || fail "1x: tokens differ"
"$P" eval --threads 1 --model "$W/t" --lengths 1x,4x >"$W/o" || fail "sweep table"
[ "$(grep -c '^[14]x ' "$W/o")" -eq 2 ] && grep -q "bits/byte" "$W/o" || fail "sweep table: $(cat "$W/o")"
expect 2 "--lengths 1000x: a window of 32000 tokens needs a document of 32001; the longest long document of task text has" -- \
    eval --threads 1 --model "$W/t" --lengths 1x,1000x --csv "$W/no.csv"
expect 2 "--csv writes the rows of a length sweep: give --lengths too" -- eval --threads 1 --model "$W/t" --csv "$W/no.csv"
[ -e "$W/no.csv" ] && fail "a refused eval --csv left $W/no.csv behind"
expect 2 "--lengths: 'x2' is neither" -- eval --threads 1 --model "$W/t" --lengths 1x,x2
expect 2 "--examples does not apply with --lengths" -- eval --threads 1 --model "$W/t" --lengths 1x --examples 3
# a run trained with the reference kernel is swept on the tiled one (same function, linear memory)
"$P" train $T --attention ref --steps 2 --out "$W/r" >/dev/null 2>&1 || fail "train --attention ref"
"$P" eval --threads 1 --model "$W/r" --split long --json >"$W/ev" || fail "eval ref run"
"$P" eval --threads 1 --model "$W/r" --lengths 1x --json >"$W/y" || fail "sweep ref run"
close "$(json "$W/y" 'j["rows"][0]["loss"]')" "$(json "$W/ev" 'j["loss"]')" 1e-6 || fail "tiled sweep of a ref run differs"
# RoPE's length extension applies at every length; a learned table stops at its length
"$P" eval --threads 1 --model "$W/t" --lengths 4x --rope-scaling yarn --rope-scale 4 --json >"$W/y" || fail "sweep with yarn"
[ "$(json "$W/y" 'j["rows"][0]["loss"]')" != "$(json "$W/sw" 'j["rows"][2]["loss"]')" ] || fail "yarn changed nothing at 4x"
[ "$(json "$W/y" 'j["eval_options"]["rope-scaling"]')" = "'yarn'" ] || fail "the sweep JSON lacks its options"
"$P" train $T --pe learned --steps 2 --out "$W/l" >/dev/null 2>&1 || fail "train learned"
expect 2 "evaluate with --ape-extend interpolate" -- eval --threads 1 --model "$W/l" --lengths 1x,2x
"$P" eval --threads 1 --model "$W/l" --lengths 1x,2x --ape-extend interpolate >/dev/null 2>"$W/e" || fail "learned, interpolated: $(cat "$W/e")"

# ---- compare: the extrapolation columns, each run's sweep kept in its directory and reused ----
"$P" compare $T --pe rope,pope --seeds 2 --steps 3 --lengths 1x,2x --out "$W/c" >"$W/o" 2>"$W/e" ||
    fail "compare text: $(cat "$W/e")"
grep -q "| ppl 1x (32) | ppl 2x (64) |" "$W/o" || fail "compare table lacks the length columns: $(cat "$W/o")"
[ "$(json "$W/c/compare.json" 'j["lengths"], len(j["encodings"][1]["sweep_ppl_mean"])')" = "(['1x', '2x'], 2)" ] ||
    fail "compare.json lengths: $(cat "$W/c/compare.json")"
"$P" eval --threads 1 --model "$W/c/pope-s2" --lengths 1x,2x --json >"$W/y" || fail "eval of a compared run"
[ "$(json "$W/c/compare.json" '[r for r in j["runs"] if r["dir"].endswith("pope-s2")][0]["sweep_ppl"]')" = \
  "$(json "$W/y" '[r["perplexity"] for r in j["rows"]]')" ] || fail "compare's sweep differs from eval --lengths"
[ "$(head -1 "$W/c/sweep.csv")" = "pe,label,length,ppl_mean,ppl_std" ] && [ "$(grep -c '^pope,2x,64,' "$W/c/sweep.csv")" = 1 ] ||
    fail "compare's sweep.csv: $(cat "$W/c/sweep.csv")"
[ "$(grep '^pope,2x,' "$W/c/sweep.csv" | cut -d, -f4)" = "$(json "$W/c/compare.json" '"%.9g" % j["encodings"][1]["sweep_ppl_mean"][1]' | tr -d "'")" ] ||
    fail "sweep.csv differs from compare.json"
touch -d '2001-01-01' "$W/c/rope-s1/sweep.json"
"$P" compare $T --pe rope,pope --seeds 2 --steps 3 --lengths 1x,2x --out "$W/c" >"$W/o2" 2>/dev/null || fail "compare again"
# --jobs 2: each child sweeps its own run after training; the same perplexities as --jobs 1, and
# the progress line after each run.
"$P" compare $T --pe rope,pope --seeds 2 --steps 3 --lengths 1x,2x --jobs 2 --threads 2 --out "$W/cj" \
    >"$W/oj" 2>"$W/e" || fail "compare --jobs 2: $(cat "$W/e")"
[ "$(json "$W/cj/compare.json" '[r["sweep_ppl"] for r in j["runs"]]')" = \
  "$(json "$W/c/compare.json" '[r["sweep_ppl"] for r in j["runs"]]')" ] || fail "--jobs 2 sweeps differ from --jobs 1"
for r in rope-s1 rope-s2 pope-s1 pope-s2; do [ -f "$W/cj/$r/sweep.json" ] || fail "no sweep.json in $r"; done
grep -q '^compare: 1 of 4 runs done in .*; about .* left$' "$W/e" && grep -q '^compare: 4 of 4 runs done in ' "$W/e" ||
    fail "compare --jobs 2: no progress lines: $(cat "$W/e")"
# The demo preset's settings are all valid options (explicit ones win: here the dataset and T).
"$P" train $T --preset demo --dataset sotu --steps 1 --out "$W/demo" >/dev/null 2>"$W/e" || fail "--preset demo: $(cat "$W/e")"
[ "$(json "$W/demo/config.json" 'j["training"]["lr"], j["task"]["dataset"], j["task"]["seq-len"]')" = "(0.002, 'sotu', 32)" ] ||
    fail "--preset demo settings: $(cat "$W/demo/config.json")"
[ "$(stat -c %Y "$W/c/rope-s1/sweep.json")" = "$(date -d 2001-01-01 +%s)" ] || fail "compare evaluated a finished sweep again"
cmp -s <(grep '^| ' "$W/o") <(grep '^| ' "$W/o2") || fail "compare again: another table"

# ---- sample: a prompt from the test documents, continued; seeded ----
"$P" sample --threads 1 --model "$W/t" --count 2 --tokens 20 --prompt 10 >"$W/s1" 2>"$W/e" || fail "sample: $(cat "$W/e")"
[ "$(grep -c '^--- model (20 tokens)' "$W/s1")" -eq 2 ] && grep -q '^--- prompt (10 tokens)' "$W/s1" &&
    grep -q '^Speech 8,' "$W/s1" || fail "sample output: $(cat "$W/s1")"
"$P" sample --threads 1 --model "$W/t" --count 2 --tokens 20 --prompt 10 >"$W/s2" && cmp -s "$W/s1" "$W/s2" || fail "sample is not deterministic"
"$P" sample --threads 1 --model "$W/t" --count 2 --tokens 20 --prompt 10 --seed 2 >"$W/s2" && ! cmp -s "$W/s1" "$W/s2" || fail "--seed changed nothing"
"$P" sample --threads 1 --model "$W/t" --count 1 --tokens 5 --temperature 0 --split long >/dev/null || fail "greedy sample of the long split"

# ---- music and dna ----
"$P" train $TINY --task music --seq-len 64 --steps 3 --out "$W/m" >/dev/null 2>"$W/e" || fail "train music: $(cat "$W/e")"
"$P" eval --threads 1 --model "$W/m" --lengths 1x,2x,4x --json --csv "$W/m.csv" >"$W/ev" 2>"$W/e" || fail "music sweep: $(cat "$W/e")"
[ "$(head -1 "$W/m.csv")" = "pe,label,length,multiple,documents,windows,tokens,nll,ppl" ] && [ "$(wc -l <"$W/m.csv")" -eq 4 ] ||
    fail "music sweep CSV (no bpb column): $(cat "$W/m.csv")"
# the long split is the test chorales (80, 160, 280 tokens): 3, 2 and 1 of them reach 65, 129, 257
[ "$(json "$W/ev" '[r["documents"] for r in j["rows"]]')" = "[3, 2, 1]" ] || fail "music sweep: $(cat "$W/ev")"
# compare checks its lengths before training: auto keeps those the long documents hold, a
# length none holds is refused before any run starts
"$P" compare $TINY --task music --seq-len 64 --pe rope --seeds 1 --steps 2 --out "$W/cm" >"$W/o" 2>"$W/e" ||
    fail "compare music: $(cat "$W/e")"
grep -q "^notice: --lengths auto leaves out 8x,10x: the longest long document of task music has 280 tokens" "$W/e" &&
    grep -q "| ppl 4x (256) | time per run |" "$W/o" || fail "compare music, auto lengths: $(cat "$W/e" "$W/o")"
expect 2 "--lengths 8x: a window of 512 tokens needs a document of 513; the longest long document of task music has 280" -- \
    compare $TINY --task music --seq-len 64 --pe rope --seeds 1 --steps 2 --lengths 1x,8x --out "$W/cm2"
[ ! -e "$W/cm2/rope-s1" ] || fail "compare trained before refusing its lengths"
"$P" sample --threads 1 --model "$W/m" --count 1 --prompt 8 --tokens 8 >"$W/o" || fail "sample music"
[ "$(sed -n '/^--- model/,/^---/p' "$W/o" | grep -c '^[0-9-]* [0-9-]* [0-9-]* [0-9-]*$')" -eq 2 ] || fail "music sample: $(cat "$W/o")"
"$P" train $TINY --task dna --seq-len 64 --steps 2 --out "$W/d" >/dev/null 2>"$W/e" || fail "train dna: $(cat "$W/e")"
"$P" eval --threads 1 --model "$W/d" --json >"$W/h" || fail "eval dna"
"$P" eval --threads 1 --model "$W/d" --test-genome pfal --json >"$W/pf" 2>"$W/e" || fail "eval dna on pfal: $(cat "$W/e")"
[ "$(json "$W/h" 'j["targets"]')" = 19999 ] && [ "$(json "$W/pf" 'j["targets"]')" = 4999 ] ||
    fail "dna: $(cat "$W/h" "$W/pf")"
"$P" eval --threads 1 --model "$W/d" --lengths 1x,10x >/dev/null 2>"$W/e" || fail "dna sweep: $(cat "$W/e")"

# ---- the analyses that read no data open a run whose dataset is not installed ----
# (trained with $PELAB_DATA, so config.json names no data directory; then $PELAB_DATA is empty)
mkdir -p "$W/empty"
for pe in alibi seqpe; do
    PELAB_DATA=$D "$P" train $TINY0 --task text --tokenizer byte --seq-len 32 --pe $pe --steps 1 \
        --out "$W/nd-$pe" >/dev/null 2>"$W/e" || fail "train --pe $pe with \$PELAB_DATA: $(cat "$W/e")"
done
export PELAB_DATA=$W/empty
"$P" analyze bias --model "$W/nd-alibi" --out "$W/nd.csv" 2>"$W/e" || fail "analyze bias without the dataset: $(cat "$W/e")"
[ "$(head -1 "$W/nd.csv")" = "layer,head,distance,bias" ] && [ "$(wc -l <"$W/nd.csv")" -eq $((1 + 2 * 33)) ] ||
    fail "analyze bias without the dataset: $(head -3 "$W/nd.csv")"
"$P" analyze seqpe --model "$W/nd-seqpe" --to 16 --step 4 --out "$W/nd.csv" 2>"$W/e" || fail "analyze seqpe without the dataset: $(cat "$W/e")"
[ "$(head -1 "$W/nd.csv")" = "p,0,4,8,12" ] || fail "analyze seqpe without the dataset: $(head -1 "$W/nd.csv")"
expect 1 "pelab data install sotu" -- analyze freq --threads 1 --model "$W/nd-alibi"
export PELAB_DATA=$W/nowhere

# ---- bad input ----
expect 1 "dataset 'bible' is not installed in $D (run: pelab data install bible --data-dir $D)" -- \
    train $T --dataset bible --steps 1 --out "$W/no"
[ -e "$W/no" ] && fail "a run without data left $W/no behind"
expect 1 "pelab data install sotu" -- eval --threads 1 --model "$W/t" --data-dir "$W/empty"
expect 2 "--test-genome applies to runs of --task dna; $W/t was trained with --task text" -- \
    eval --threads 1 --model "$W/t" --test-genome pfal
expect 2 "--test-genome is an option of eval and sample (for --task dna runs), not of training" -- \
    train $TINY --task dna --test-genome pfal --out "$W/no"
expect 2 "--tokenizer does not apply to --task music" -- train $TINY --task music --tokenizer byte --out "$W/no"
cp -r "$D" "$W/bad" && printf '\377' | dd of="$W/bad/sotu/byte.ptok" bs=1 seek=200 conv=notrunc 2>/dev/null
expect 1 "$W/bad/sotu/byte.ptok" -- eval --threads 1 --model "$W/t" --data-dir "$W/bad"
"$P" train --task indirect --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --steps 1 --eval-every 0 \
    --indirect-val-size 8 --indirect-test-size 8 --out "$W/i" >/dev/null 2>&1 || fail "train indirect"
expect 2 "--lengths: task indirect has no documents" -- eval --threads 1 --model "$W/i" --lengths 2x
expect 2 "--split long: task indirect has no long documents" -- eval --threads 1 --model "$W/i" --split long
expect 2 "--temperature applies to the tasks of documents" -- sample --threads 1 --model "$W/i" --temperature 0
echo "ok"
