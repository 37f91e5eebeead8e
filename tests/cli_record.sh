#!/usr/bin/env bash
# The provenance machinery on a tiny compare (two encodings, two seeds, a 1x-2x sweep):
# scripts/record.sh keeps a record (the command, the commit the binary names, the environment, the
# CPU; each run's settings, summary, sweep and log tail, no weights); scripts/tables.py writes a
# table from it whose cells are the runs' mean ± sample standard deviation, and --check catches a
# changed record; scripts/reproduce.sh trains it all again and finds no drift (same binary, same
# machine: the same bits), and refuses a name with a path, an output directory it did not make
# and a record whose command has no --out, removing nothing. An algorithmic task's record makes a
# table of exact matches per bucket; an analysis's record keeps its --json output, or its CSV.
set -u
. "$(dirname "$0")/lib/cli.sh"
D=$W/data
install_sotu "$D"
export PELAB_RESULTS=$W/results
TXT="--task text --dataset sotu --tokenizer byte --data-dir $D --d-model 16 --heads 2 --layers 1 --batch 4
     --threads 1 --eval-every 0 --seq-len 32 --steps 3"
# (--out=DIR: record.sh and reproduce.sh read the option in either form)
bash scripts/record.sh tiny "$P" compare $TXT --pe rope,nope --seeds 2 --lengths 1x,2x --out="$W/cmp" \
    >"$W/o" 2>"$W/e" || fail "record.sh: $(tail -3 "$W/e")"
R=$W/results/tiny
grep -q "^record: $R (" "$W/o" || fail "record.sh's last line: $(tail -1 "$W/o")"
commit=$("$P" --version | sed -n 's/^pelab [^ ]* (commit \([^,]*\),.*/\1/p')
[ "$(json "$R/record.json" 'j["commit"], j["command"][1], j["command"][-1], j["cores"] > 0')" = \
  "('$commit', 'compare', '--out=$W/cmp', True)" ] || fail "record.json: $(cat "$R/record.json")"
for run in rope-s1 rope-s2 nope-s1 nope-s2; do
    for f in config.json summary.json sweep.json log-tail.jsonl log-val.jsonl; do
        [ -s "$R/runs/$run/$f" ] || fail "the record has no $run/$f"
    done
    grep '"val_loss"' "$W/cmp/$run/log.jsonl" | cmp -s - "$R/runs/$run/log-val.jsonl" ||
        fail "$run/log-val.jsonl is not the run's validation lines (its learning curve)"
done
[ -z "$(find "$R" -name '*.safetensors')" ] || fail "the record holds weights"

# the table: one row per encoding, the mean and sample standard deviation of the runs' numbers
printf '# t\n\n<!-- results:tiny -->\n<!-- /results:tiny -->\n' >"$W/README.md"
/usr/bin/python3 scripts/tables.py "$W/README.md" >/dev/null || fail "tables.py could not write the table"
/usr/bin/python3 - "$W/README.md" "$R/compare.json" <<'PY' || fail "the table is not the record's"
import json, statistics, sys
text, c = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
rope = [r for r in c["runs"] if r["pe"] == "rope"]
row = next(l for l in text.splitlines() if l.startswith("| RoPE |"))
cells = [x.strip() for x in row.strip("|").split("|")]
want = ["%.3f ± %.3f" % (statistics.mean(v), statistics.stdev(v)) for v in
        ([r["test_ppl"] for r in rope], [r["sweep_ppl"][0] for r in rope], [r["sweep_ppl"][1] for r in rope])]
assert cells[1:] == want, (cells, want)
assert "seeds 1, 2" in text and "| 2× (64) |" in text, text
PY
/usr/bin/python3 scripts/tables.py --check "$W/README.md" >/dev/null || fail "--check fails on the table it wrote"
sed -i 's/"test_ppl": \([0-9]\)/"test_ppl": 1\1/' "$R/compare.json"
/usr/bin/python3 scripts/tables.py --check "$W/README.md" >/dev/null && fail "--check passes a changed record"
cp "$W/cmp/compare.json" "$R/compare.json" # the record as it was

# reproduce: the same command again, its numbers beside the record's: no drift
PELAB_REPRODUCE_OUT=$W/again bash scripts/reproduce.sh tiny >"$W/o" 2>"$W/e" || fail "reproduce.sh: $(tail -3 "$W/e")"
[ "$(grep -cE '^(rope|nope) +[0-9]+ ' "$W/o")" -eq 12 ] || fail "reproduce: not 12 numbers: $(cat "$W/o")"
grep -q "^largest drift: 0.000 %$" "$W/o" || fail "reproduce on the same machine and binary drifts: $(tail -14 "$W/o")"
[ -f "$W/again/.made-by-reproduce" ] || fail "reproduce did not mark its directory as its own"
# reproduce removes only what it made: a name is a directory of results/ (no path), and an --out
# it did not make is refused and kept; its own directory it replaces
refused() { # CODE PATTERN NAME: reproduce NAME exits CODE with one line on stderr containing PATTERN
    bash scripts/reproduce.sh "$3" >"$W/o" 2>"$W/e"; local rc=$?
    [ $rc -eq "$1" ] && [ "$(wc -l <"$W/e")" -eq 1 ] && grep -qF -- "$2" "$W/e" ||
        fail "reproduce $3: exit $rc, expected $1 and one line with '$2': $(head -c 2000 "$W/e")"
}
mkdir "$W/victim" && cp "$R/record.json" "$W/victim/" && echo precious >"$W/victim/file"
# from results/ and from runs/reproduce/ alike, this name leads to $W/victim
refused 2 "is not a table name" "../../../../../../../../../..$W/victim"
mkdir "$W/mine" && echo precious >"$W/mine/file"
PELAB_REPRODUCE_OUT=$W/mine refused 2 "$W/mine exists and was not made by reproduce" tiny
ln -s "$W/mine" "$W/link"
PELAB_REPRODUCE_OUT=$W/link refused 2 "$W/link exists and was not made by reproduce" tiny
[ "$(cat "$W/victim/file" "$W/mine/file")" = "$(printf 'precious\nprecious')" ] && [ -f "$W/victim/record.json" ] ||
    fail "a refused reproduce removed a directory it did not make"
mkdir "$W/results/no-out" && /usr/bin/python3 -c '
import json, sys
json.dump({"command": [sys.argv[1], "compare", "--task", "indirect"], "environment": {}}, open(sys.argv[2], "w"))' \
    "$P" "$W/results/no-out/record.json"
PELAB_REPRODUCE_OUT=$W/none refused 2 "its command names no --out DIR" no-out
[ ! -e "$W/none" ] || fail "a refused reproduce made its directory"
PELAB_REPRODUCE_OUT=$W/again bash scripts/reproduce.sh tiny >"$W/o" 2>"$W/e" || fail "reproduce into its own directory: $(tail -3 "$W/e")"
grep -q "^largest drift: 0.000 %$" "$W/o" || fail "reproduce into its own directory: $(tail -14 "$W/o")"
# an algorithmic task's record: its table has a column per bucket of sizes, exact match in %
ALG="--task copy --d-model 16 --heads 2 --layers 1 --batch 8 --threads 1 --eval-every 0 --steps 3 --algo-train-max 4 --algo-test-per-size 5"
bash scripts/record.sh algo "$P" compare $ALG --pe rope,rope:random-positions=32 --seeds 2 --buckets 1-4,5-8 \
    --out "$W/cmpa" >"$W/o" 2>"$W/e" || fail "record.sh of an algorithmic task: $(tail -3 "$W/e")"
[ -s "$W/results/algo/runs/rope-s1/sizes.json" ] || fail "the record has no sizes.json"
printf '<!-- results:algo -->\n<!-- /results:algo -->\n' >"$W/README2.md"
/usr/bin/python3 scripts/tables.py "$W/README2.md" >/dev/null || fail "tables.py on an algorithmic record"
/usr/bin/python3 - "$W/README2.md" "$W/results/algo/compare.json" <<'PY' || fail "the algorithmic table: $(cat "$W/README2.md")"
import json, statistics, sys
text, c = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
assert "| encoding | sizes 1-4 (trained) | sizes 5-8 |" in text, text
for pe, name in (("rope", "RoPE"), ("rope:random-positions=32", "RoPE + random positions (32)")):
    runs = [r for r in c["runs"] if r["pe"] == pe]
    row = next(l for l in text.splitlines() if l.startswith("| %s |" % name))
    want = ["%.1f ± %.1f" % (statistics.mean(v), statistics.stdev(v)) for v in
            ([100 * r["sweep_em"][i] for r in runs] for i in range(2))]
    assert [x.strip() for x in row.strip("|").split("|")][1:] == want, (row, want)
assert "exact match in %, mean ± sample standard deviation over seeds 1, 2" in text, text
PY
# a qa fine-tuning's record (each seed from the text run of its seed): span perplexity, then EM
# in %, at each length; the row is named by its encoding, not by the run it started from
bash scripts/record.sh qa "$P" compare --task qa --seq-len 128 --qa-digits 2 --batch 2 --steps 2 --threads 1 \
    --eval-every 0 --qa-val-size 4 --qa-test-size 4 --lengths 1x,2x --pe "rope:init-from=$W/cmp/rope-s{seed}" \
    --seeds 2 --out "$W/cmpq" >"$W/o" 2>"$W/e" || fail "record.sh of a qa fine-tuning: $(tail -3 "$W/e")"
printf '<!-- results:qa -->\n<!-- /results:qa -->\n' >"$W/README4.md"
/usr/bin/python3 scripts/tables.py "$W/README4.md" >/dev/null || fail "tables.py on a qa record"
/usr/bin/python3 - "$W/README4.md" "$W/results/qa/compare.json" <<'PY' || fail "the qa table: $(cat "$W/README4.md")"
import json, statistics, sys
text, c = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
assert "| encoding | test span NLL | span ppl 1× (128) | span ppl 2× (256) | EM 1× (128) | EM 2× (256) |" in text, text
row = next(l for l in text.splitlines() if l.startswith("| RoPE |"))
sd = lambda v, d: "%.*f ± %.*f" % (d, statistics.mean(v), d, statistics.stdev(v))
runs = c["runs"]
want = [sd([r["test_loss"] for r in runs], 3)] + [sd([r["sweep_span_ppl"][i] for r in runs], 3) for i in range(2)] \
    + [sd([100 * r["sweep_em"][i] for r in runs], 1) for i in range(2)]
assert [x.strip() for x in row.strip("|").split("|")][1:] == want, (row, want)
assert "paper" not in text, text  # the paper's rows only at its four lengths
PY
# an analysis is recorded with its --json output
bash scripts/record.sh algo-attn "$P" analyze attn-similarity --models "$W/cmpa/rope-s1,$W/cmpa/rope-s2" --examples 2 \
    --threads 1 --json "$W/as.json" >"$W/o" 2>"$W/e" || fail "record.sh of an analysis: $(tail -3 "$W/e")"
cmp -s "$W/as.json" "$W/results/algo-attn/analysis.json" || fail "the record's analysis.json is not the analysis's"
[ "$(json "$W/results/algo-attn/record.json" 'j["command"][1:3], j["commit"]')" = "(['analyze', 'attn-similarity'], '$commit')" ] ||
    fail "the analysis's record.json: $(cat "$W/results/algo-attn/record.json")"
# an analysis whose first group has a single run (no pair on its diagonal) renders a dash there
bash scripts/record.sh algo-attn2 "$P" analyze attn-similarity --models "$W/cmpa/rope-s1,$W/cmpa/rope-s2" --groups x,y \
    --examples 2 --threads 1 --json "$W/as2.json" >/dev/null 2>"$W/e" || fail "record.sh of an analysis: $(tail -3 "$W/e")"
printf '<!-- results:algo-attn2 -->\n<!-- /results:algo-attn2 -->\n' >"$W/README3.md"
/usr/bin/python3 scripts/tables.py "$W/README3.md" >/dev/null || fail "tables.py on an analysis with a null cell"
grep -q "^| JSD (nats) | [0-9.]* ± [0-9.]* | — |$" "$W/README3.md" || fail "the null cell: $(cat "$W/README3.md")"
# an analysis that writes a CSV (--out FILE.csv, here in the form --out=FILE.csv) is recorded with
# it: the grid variance of two image runs at two sides, a table of each run's shares in percent
install_images "$D"
IMG="--task image --data-dir $D --image-side 8 --d-model 16 --heads 2 --layers 1 --batch 8 --threads 1 --eval-every 0
     --eval-batches 1 --pe seqpe --steps 2"
for s in 1 2; do
    "$P" train $IMG --patch 4 --seed $s --out "$W/img$s" >/dev/null 2>"$W/e" || fail "train an image run: $(tail -3 "$W/e")"
done
bash scripts/record.sh grid-var "$P" analyze seqpe --variance --model "$W/img1,$W/img2" --grid=0,3 --out="$W/var.csv" \
    >/dev/null 2>"$W/e" || fail "record.sh of a CSV analysis: $(tail -3 "$W/e")"
cmp -s "$W/var.csv" "$W/results/grid-var/analysis.csv" || fail "the record's analysis.csv is not the analysis's"
bash scripts/reproduce.sh grid-var >/dev/null 2>"$W/e"; rc=$?
[ $rc -eq 2 ] && grep -q "^reproduce: $W/results/grid-var records a pelab analyze of existing runs, not a training" "$W/e" ||
    fail "reproduce of an analysis's record: exit $rc, $(cat "$W/e")"
printf '<!-- results:grid-var -->\n<!-- /results:grid-var -->\n' >"$W/README4.md"
/usr/bin/python3 scripts/tables.py "$W/README4.md" >/dev/null || fail "tables.py on a grid variance"
/usr/bin/python3 - "$W/README4.md" "$W/var.csv" <<'PY' || fail "the grid variance table: $(cat "$W/README4.md")"
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
share = {(r["model"].rsplit("/", 1)[1], r["grid"], r["part"]): "%.2f %%" % (100 * float(r["of_variation"]))
         for r in csv.DictReader(open(sys.argv[2])) if r["part"] != "mean"}
assert lines[1] == "| run | rows (2 × 2) | columns (2 × 2) | interaction (2 × 2) | columns (3 × 3) |", lines[1]
for k, run in enumerate(("img1", "img2")):
    want = [share[run, "2", p] for p in ("rows", "columns", "interaction")] + [share[run, "3", "columns"]]
    assert lines[3 + k] == "| `%s` | %s |" % (run, " | ".join(want)), (lines[3 + k], want)
PY
# runs of different training grids: a side asked as 0 is each run's own, named "training grid"; two
# runs of one name in two directories are told apart by their directories
"$P" train $IMG --patch 2 --out "$W/img4" >/dev/null 2>"$W/e" || fail "train an image run of patch 2: $(tail -3 "$W/e")"
mkdir "$W/copy" && cp -r "$W/img1" "$W/copy/"
bash scripts/record.sh grid-var2 "$P" analyze seqpe --variance --model "$W/img1,$W/img4,$W/copy/img1" --grid 0,3 --out "$W/var2.csv" \
    >/dev/null 2>"$W/e" || fail "record.sh of a CSV analysis: $(tail -3 "$W/e")"
printf '<!-- results:grid-var2 -->\n<!-- /results:grid-var2 -->\n' >"$W/README5.md"
/usr/bin/python3 scripts/tables.py "$W/README5.md" >/dev/null 2>"$W/e" || fail "tables.py on runs of two grids: $(cat "$W/e")"
grep -q "^| run | rows (training grid) | columns (training grid) | interaction (training grid) | columns (3 × 3) |$" \
    "$W/README5.md" || fail "the table of runs of two grids: $(cat "$W/README5.md")"
[ "$(grep -o '^| `[^`]*` |' "$W/README5.md" | tr '\n' ' ')" = "| \`${W##*/}/img1\` | | \`img4\` | | \`copy/img1\` | " ] ||
    fail "runs of one name in two directories: $(cat "$W/README5.md")"
echo "cli_record: ok"
