#!/usr/bin/env bash
# The recorded tables (<!-- results:NAME --> blocks) of README.md and of every document under docs/
# are what their records in results/ give (scripts/tables.py, make tables): no number typed by hand.
# Nothing is trained here: the tables are made from the records alone. An edit of one digit in a
# table of any of those files, or a record's number, is caught, naming the file; so is a record of
# a build from uncommitted changes.
set -u
. "$(dirname "$0")/lib/cli.sh"
out=$(/usr/bin/python3 scripts/tables.py --check 2>&1) || fail "the recorded tables differ from results/: $out"
# no record names a path of the machine that made it, and no document a directory of one
# (scripts/recordpaths.py check: every absolute path in results/; /work/, /tmp/, /home/, /root/,
# /Users/ in README.md and docs/)
out=$(/usr/bin/python3 scripts/recordpaths.py check 2>&1) || fail "the records or documents name paths of a machine: $out"
# the check itself, on made-up records: an absolute path in a command, a run's config.json and an
# analysis's CSV is one line each; "1/2", a URL, a relative path and a role path are none
mkdir -p "$W/abs/r/runs/a" "$W/abs/docs"
cat >"$W/abs/r/record.json" <<'JSON'
{"command": ["./pelab", "compare", "--pe", "rope:init-from=/home/x/pre/rope-s{seed},nope", "--lr", "1/2",
 "--out", "runs/record/r"], "note": "https://example.org/a/b", "environment": {"PELAB_SIMD": "avx2"}}
JSON
echo '{"training": {"out": "/srv/runs/a", "init-from": "runs/record/q/rope-s1"}}' >"$W/abs/r/runs/a/config.json"
printf 'model,grid,part\n/data/x/seqpe-s1,7,rows\nruns/record/x/seqpe-s1,7,rows\n' >"$W/abs/r/analysis.csv"
printf 'tokens/s, 1/2, `/usr/bin/python3`, (runs/x)\nran in /work/runs/x\n' >"$W/abs/docs/a.md"
/usr/bin/python3 scripts/recordpaths.py check "$W/abs/r" "$W/abs/docs/a.md" >"$W/o" 2>&1 && fail "the check passed absolute paths"
[ "$(sed -E 's/^paths: ([^ ]*) names (\/[^ ,]*|a directory of a machine).*/\1 \2/' "$W/o" | sed "s|$W/abs/||" | sort | tr '\n' ' ')" = \
  "docs/a.md:2 a directory of a machine r/analysis.csv /data/x/seqpe-s1 r/record.json /home/x/pre/rope-s{seed} r/runs/a/config.json /srv/runs/a " ] ||
    fail "the check of absolute paths: $(cat "$W/o")"
# the files tables.py checks are every Markdown file that holds a block
/usr/bin/python3 scripts/tables.py --list >"$W/listed" || fail "tables.py --list: $(cat "$W/listed")"
find . \( -path ./.git -o -path ./results -o -path ./runs -o -path ./data -o -path ./build \) -prune -o \
    -name '*.md' -print | sed 's|^\./||' | xargs grep -l '^<!-- results:' | sort >"$W/marked"
[ "$(sort "$W/listed")" = "$(cat "$W/marked")" ] ||
    fail "tables.py covers $(tr '\n' ' ' <"$W/listed"), the files with a block are $(tr '\n' ' ' <"$W/marked")"
grep -qx README.md "$W/listed" || fail "README.md holds no recorded table"
n=$(xargs cat <"$W/listed" | grep -c '^<!-- results:')
[ "$n" -ge 1 ] || fail "no recorded table"
# every committed record names a commit one can check out: none built from a changed tree
dirty=$(grep -l '"commit": "[^"]*+changes"' results/*/record.json || true)
[ -z "$dirty" ] || fail "records of a build from uncommitted changes (record them again from a clean tree): $dirty"
# one digit of the first recorded table's first row changed, in README.md and in the last document
# that holds a table, in a copy of the tree: the check without arguments catches both, with a diff
# naming each file
last=$(tail -1 "$W/listed")
edited=$(printf '%s\n' README.md "$last" | sort -u)
while read -r f; do mkdir -p "$W/tree/$(dirname "$f")" && cp "$f" "$W/tree/$f"; done <"$W/listed"
for f in $edited; do
    /usr/bin/python3 - "$W/tree/$f" <<'PY' || fail "no table row to edit in $f"
import re, sys
p = sys.argv[1]
t = open(p).read()
start = t.index("<!-- results:")
row = re.compile(r"^\| [^|-][^|]* \| (\d+\.\d+)", re.M).search(t, start)
assert row, "no row"
i = row.start(1) + len(row.group(1)) - 1
open(p, "w").write(t[:i] + ("1" if t[i] != "1" else "2") + t[i + 1:])
PY
done
PELAB_DOCS_ROOT=$W/tree /usr/bin/python3 scripts/tables.py --check >"$W/o" 2>&1 && fail "an edited table number passed the check"
for f in $edited; do
    grep -q "^tables: $f differs from its records" "$W/o" && grep -q "^--- $f$" "$W/o" ||
        fail "the check does not name $f: $(cat "$W/o")"
done
[ "$(grep -c '^-| ' "$W/o")" = "$(wc -w <<<"$edited")" ] || fail "the check does not show the edits: $(cat "$W/o")"
# a file given alone: only it is checked
/usr/bin/python3 scripts/tables.py --check "$W/tree/$last" >"$W/o" 2>&1 && fail "an edited file given alone passed the check"
grep -q "differs from its records" "$W/o" && { [ "$last" = README.md ] || ! grep -q "README.md" "$W/o"; } ||
    fail "a file given alone: $(cat "$W/o")"
# a block naming a record that does not exist: the error names the file
mkdir -p "$W/tree/docs"
printf '<!-- results:no-such-record -->\n<!-- /results:no-such-record -->\n' >"$W/tree/docs/missing.md"
PELAB_DOCS_ROOT=$W/tree /usr/bin/python3 scripts/tables.py --check >"$W/o" 2>&1 && fail "a block of a missing record passed"
grep -q "^tables: docs/missing.md names results/no-such-record, which does not exist" "$W/o" ||
    fail "a missing record: $(cat "$W/o")"
# an image compare's record (made up here: two seeds of two SeqPE modes at the sides of the paper's
# Table V): accuracy at each side and its average over the sides, mean ± sample sd over the seeds,
# each row with the paper's row beneath it, and its average where the sides are the paper's
R=$W/results/image-table5-check
mkdir -p "$R/runs/a" "$R/runs/b"
echo '{"task": {"image-side": 28}, "training": {"threads": 1}}' >"$R/runs/a/config.json"
cp "$R/runs/a/config.json" "$R/runs/b/config.json"
cat >"$R/record.json" <<'JSON'
{"command": ["./pelab", "compare"], "commit": "0123456789ab", "cpu": "a CPU", "cores": 2}
JSON
cat >"$R/compare.json" <<'JSON'
{"task": "image", "resolutions": ["28", "40", "48", "56"], "runs": [
 {"pe": "seqpe", "seed": 1, "dir": "x/a", "sweep_acc": [0.80, 0.60, 0.50, 0.40]},
 {"pe": "seqpe", "seed": 2, "dir": "x/a", "sweep_acc": [0.82, 0.62, 0.40, 0.20]},
 {"pe": "seqpe:seqpe-mode=attn-bias", "seed": 1, "dir": "x/b", "sweep_acc": [0.84, 0.70, 0.66, 0.61]},
 {"pe": "seqpe:seqpe-mode=attn-bias", "seed": 2, "dir": "x/b", "sweep_acc": [0.84, 0.70, 0.66, 0.61]}]}
JSON
printf 'x\n<!-- results:image-table5-check -->\n<!-- /results:image-table5-check -->\n' >"$W/IMG.md"
PELAB_RESULTS=$W/results /usr/bin/python3 scripts/tables.py "$W/IMG.md" >"$W/o" 2>&1 || fail "an image record: $(cat "$W/o")"
want='| SeqPE | 81.0 ± 1.4 | 61.0 ± 1.4 | 45.0 ± 7.1 | 30.0 ± 14.1 | 54.2 ± 4.6 |
| *paper: AttnMul* | *81.2* | *81.8* | *81.7* | *81.2* | *81.4* |
| SeqPE seqpe-mode=attn-bias | 84.0 ± 0.0 | 70.0 ± 0.0 | 66.0 ± 0.0 | 61.0 ± 0.0 | 70.2 ± 0.0 |
| *paper: AttnBias* | *80.8* | *80.9* | *80.1* | *79.2* | *80.2* |'
/usr/bin/python3 - "$W/IMG.md" "$want" <<'PY' || fail "an image record's table: $(cat "$W/IMG.md")"
import sys
text = open(sys.argv[1]).read()
assert "| encoding | 28 (224, trained) | 40 (320) | 48 (384) | 56 (448) | AVG |\n|---|---|---|---|---|---|\n" + sys.argv[2] + "\n" in text
PY
# two records in one table (NAME+NAME): each row labelled by the options its command gives that the
# other's does not ('--name=V' as '--name V'); records of two commits refused
cp -r "$R" "$W/results/image-aug-check"
sed -i 's/"compare"\]/"compare", "--aug-scale=0.5,1", "--aug-flip", "--out=d"]/' "$W/results/image-aug-check/record.json"
printf '<!-- results:image-table5-check+image-aug-check -->\n<!-- /results:image-table5-check+image-aug-check -->\n' >"$W/TWO.md"
PELAB_RESULTS=$W/results /usr/bin/python3 scripts/tables.py "$W/TWO.md" >"$W/o" 2>&1 || fail "two records in one table: $(cat "$W/o")"
# a record that stands for none of the paper's tables names our sides alone
printf '<!-- results:image-aug-check -->\n<!-- /results:image-aug-check -->\n' >"$W/AUG.md"
PELAB_RESULTS=$W/results /usr/bin/python3 scripts/tables.py "$W/AUG.md" >"$W/o" 2>&1 || fail "an image record: $(cat "$W/o")"
grep -qF '| encoding | 28 (trained) | 40 | 48 | 56 | AVG |' "$W/AUG.md" && ! grep -q paper "$W/AUG.md" ||
    fail "a record of none of the paper's tables: $(cat "$W/AUG.md")"
[ "$(grep -c '^| SeqPE |' "$W/TWO.md")" = 1 ] && grep -qF '| SeqPE `--aug-scale 0.5,1 --aug-flip` | 81.0 ± 1.4 |' "$W/TWO.md" &&
    grep -qF 'records in `results/image-table5-check`, `results/image-aug-check`' "$W/TWO.md" ||
    fail "two records in one table: $(cat "$W/TWO.md")"
sed -i 's/0123456789ab/ba9876543210/' "$W/results/image-aug-check/record.json"
PELAB_RESULTS=$W/results /usr/bin/python3 scripts/tables.py "$W/TWO.md" >"$W/o" 2>&1 &&
    fail "records of two commits made one table"
grep -q "records of different commits" "$W/o" || fail "two commits: $(cat "$W/o")"
# runs set against runs (BASE>VARIANT): each run of the variant beside the base's of its encoding
# and seed, labelled by the options the variant's command changes (scheduling aside), Δ of the last
# validation loss of training; a variant run the base lacks is refused
for rec in base:1,2 var:1; do
    name=txt-${rec%%:*} R=$W/results/txt-${rec%%:*}
    for s in $(tr , ' ' <<<"${rec#*:}"); do
        mkdir -p "$R/runs/rope-s$s"
        echo '{"task": {"seq-len": 32}, "training": {"threads": 1, "steps": 1200}}' >"$R/runs/rope-s$s/config.json"
        printf '{"step": 1100, "val_loss": 9}\n{"step": 1200, "val_loss": %s}\n{"step": 1200, "test_loss": 2}\n' \
            "$([ "$name" = txt-base ] && echo 1.0 || echo 1.01)" >"$R/runs/rope-s$s/log-tail.jsonl"
    done
done
cat >"$W/results/txt-base/record.json" <<'JSON'
{"command": ["./pelab", "compare", "--task", "text", "--pe", "rope,pope", "--seeds", "2", "--jobs", "2", "--out", "a"], "commit": "0123456789ab", "cpu": "a CPU", "cores": 2}
JSON
cat >"$W/results/txt-var/record.json" <<'JSON'
{"command": ["./pelab", "compare", "--task", "text", "--pe", "rope", "--seeds", "1", "--precision=bf16", "--out", "b"], "commit": "0123456789ab", "cpu": "a CPU", "cores": 2}
JSON
echo '{"task": "text", "lengths": ["1x", "2x"], "runs": [
 {"pe": "rope", "seed": 1, "dir": "a/rope-s1", "test_loss": 2.0, "sweep_ppl": [3.0, 4.0]},
 {"pe": "rope", "seed": 2, "dir": "a/rope-s2", "test_loss": 2.5, "sweep_ppl": [3.5, 4.5]}]}' >"$W/results/txt-base/compare.json"
echo '{"task": "text", "lengths": ["1x", "2x"], "runs": [
 {"pe": "rope", "seed": 1, "dir": "b/rope-s1", "test_loss": 2.1, "sweep_ppl": [3.1, 4.2]}]}' >"$W/results/txt-var/compare.json"
printf '<!-- results:txt-base>txt-var -->\n<!-- /results:txt-base>txt-var -->\n' >"$W/PAIR.md"
PELAB_RESULTS=$W/results /usr/bin/python3 scripts/tables.py "$W/PAIR.md" >"$W/o" 2>&1 || fail "a table of pairs: $(cat "$W/o")"
grep -qxF '| text, RoPE (1,200 updates, seed 1) | `--precision bf16` | 1.00000 | 1.01000 | +1.00 % | 2.00000 | 2.10000 | 3.000, 4.000 | 3.100, 4.200 |' "$W/PAIR.md" &&
    [ "$(grep -c '^| text' "$W/PAIR.md")" = 1 ] && grep -q 'perplexity at each multiple of the training length, 1×, 2× (text)' "$W/PAIR.md" ||
    fail "a table of pairs: $(cat "$W/PAIR.md")"
sed -i 's/"seed": 1, "dir": "b/"seed": 3, "dir": "b/' "$W/results/txt-var/compare.json"
PELAB_RESULTS=$W/results /usr/bin/python3 scripts/tables.py "$W/PAIR.md" >"$W/o" 2>&1 && fail "a variant run without a base run passed"
grep -q "results/txt-base has no run of rope, seed 3" "$W/o" || fail "a variant run without a base run: $(cat "$W/o")"
# A block's options (a made-up indirect record, three seeds): ?ci adds each mean's 95 % confidence
# interval, t(0.975, 2) = 4.302653 times sd/√3 (RoPE's 10, 20, 40 %: 23.3 ± 15.3, half-width 37.9);
# ?solved says "k of n solved" where the seeds split at 90 %; ?pairs=COLUMN sets every two rows
# against each other seed by seed (RoPE − PoPE 2, 2, 2 points: ahead; RoPE − ALiBi −85, −30, −52:
# −55.7, interval −124.4 … +13.1, level; on test loss, less is better). Numbers worked out by hand.
R=$W/results/acc-check
mkdir -p "$R/runs/a"
echo '{"task": {}, "training": {"threads": 1}}' >"$R/runs/a/config.json"
echo '{"command": ["./pelab", "compare", "--task", "indirect"], "commit": "0123456789ab", "cpu": "a CPU", "cores": 2}' >"$R/record.json"
/usr/bin/python3 - "$R/compare.json" <<'PY'
import json, sys
acc = {"rope": [0.1, 0.2, 0.4], "pope": [0.08, 0.18, 0.38], "alibi": [0.95, 0.5, 0.92]}
loss = {"rope": [2.0, 2.5, 3.1], "pope": [3.0, 3.5, 4.1], "alibi": [1.0, 2.0, 1.5]}
runs = [{"pe": pe, "seed": s + 1, "dir": "x/a", "test_acc": acc[pe][s], "test_loss": loss[pe][s]}
        for pe in acc for s in range(3)]
json.dump({"task": "indirect", "runs": runs}, open(sys.argv[1], "w"))
PY
for b in 'acc-check' 'acc-check?ci&solved' 'acc-check?pairs=test_acc' 'acc-check?pairs=test_loss'; do
    printf '<!-- results:%s -->\n<!-- /results:%s -->\n' "$b" "$b"
done >"$W/OPT.md"
PELAB_RESULTS=$W/results /usr/bin/python3 scripts/tables.py "$W/OPT.md" >"$W/o" 2>&1 || fail "a block's options: $(cat "$W/o")"
/usr/bin/python3 - "$W/OPT.md" <<'PY' || fail "a block's options: $(cat "$W/OPT.md")"
import sys
blocks = open(sys.argv[1]).read().split("<!-- results:")[1:]
plain, ci, acc, loss = ("\n".join(l for l in b.splitlines() if l.startswith("|")) for b in blocks)
assert "| RoPE | 23.3 ± 15.3 | 10.0, 20.0, 40.0 | 2.533 ± 0.551 |" in plain.splitlines(), plain  # as it always was
assert "[" not in plain and "solved" not in plain, plain
assert "| RoPE | 23.3 ± 15.3 [−14.6, 61.3] | 10.0, 20.0, 40.0 | 2.533 ± 0.551 [1.165, 3.901] |" in ci.splitlines(), ci
assert ci.splitlines()[4].startswith("| ALiBi | 79.0 ± 25.2 [16.5, 141.5] (2 of 3 solved) | 95.0, 50.0, 92.0 |"), ci
assert "solved" not in ci.splitlines()[3], ci  # PoPE's seeds do not split
assert "in brackets the 95 % confidence interval of the mean (Student t" in blocks[1], blocks[1]
assert acc.splitlines() == [
    "| A − B | each seed | mean difference | 95 % CI | verdict |", "|---|---|---|---|---|",
    "| RoPE − PoPE | +2.0 (1), +2.0 (2), +2.0 (3) | +2.0 | +2.0 … +2.0 | RoPE ahead |",
    "| RoPE − ALiBi | −85.0 (1), −30.0 (2), −52.0 (3) | −55.7 | −124.4 … +13.1 | level |",
    "| PoPE − ALiBi | −87.0 (1), −32.0 (2), −54.0 (3) | −57.7 | −126.4 … +11.1 | level |"], acc
assert "<sub>test accuracy in %, A − B seed by seed" in blocks[2], blocks[2]
assert loss.splitlines()[2] == "| RoPE − PoPE | −1.000 (1), −1.000 (2), −1.000 (3) | −1.000 | −1.000 … −1.000 | RoPE ahead |", loss
PY
# tables.py's t quantiles are compare's (cli/stats.c, whose test checks them against the t density)
/usr/bin/python3 - <<'PY' || fail "tables.py's T975 differs from cli/stats.c's"
import re, sys
sys.path.insert(0, "scripts")
import tables
c = open("cli/stats.c").read()
values = tuple(float(x) for x in re.findall(r"[0-9]+\.[0-9]+", c[c.index("T975[30] = {"):c.index("};", c.index("T975[30]"))]))
assert len(values) == 30 and values == tables.T975, (values, tables.T975)
assert all(abs(tables.t975(df) - want) < 1e-6 for df, want in ((31, 2.039513), (40, 2.021075), (99, 1.984217)))
PY
printf '<!-- results:acc-check?sd -->\n<!-- /results:acc-check?sd -->\n' >"$W/BAD.md"
PELAB_RESULTS=$W/results /usr/bin/python3 scripts/tables.py "$W/BAD.md" >"$W/o" 2>&1 && fail "an unknown option passed"
grep -q "results:acc-check?sd: 'sd' is not an option of a block (ci, solved, pairs=COLUMN)" "$W/o" || fail "an unknown option: $(cat "$W/o")"
printf '<!-- results:acc-check?pairs=nothing -->\n<!-- /results:acc-check?pairs=nothing -->\n' >"$W/BAD.md"
PELAB_RESULTS=$W/results /usr/bin/python3 scripts/tables.py "$W/BAD.md" >"$W/o" 2>&1 && fail "an unknown column passed"
grep -q "pairs=nothing: neither a number of each run" "$W/o" || fail "an unknown column: $(cat "$W/o")"
echo "cli_tables: ok ($n recorded tables in $(wc -l <"$W/listed") files)"
