#!/usr/bin/env bash
# The image task from the command line, on synthetic 8 × 8 IDX files (tests/lib/make_idx.py) with
# 4 × 4 patches (a 2 × 2 grid, 5 tokens with the class token): each 2-D encoding (SeqPE's
# included) trains,
# evaluates (accuracy of the 4 test images, as the JSON's counts say) and samples (image index,
# prediction, truth); --resolutions reports every side asked, its grid and token count, as a
# table, JSON and CSV; a 1-D encoding needs --positions raster (and a bidirectional one); a 2-D
# encoding on a text task, a side the patch does not divide and a causal-only encoding are each
# one line and exit 2.
set -u
. "$(dirname "$0")/lib/cli.sh"
D=$W/data
install_images "$D"
export PELAB_DATA=$D
TINY="--task image --image-side 8 --patch 4 --d-model 16 --heads 2 --layers 1 --batch 8 --threads 1 --eval-every 0 --eval-batches 1"

for pe in rope2d rope2d-mixed pope2d sinusoidal2d learned2d nope seqpe "seqpe --seqpe-mode attn-mul" \
    "rope --positions raster" "pope --positions raster" "learned --positions raster"; do
    R="$W/$(tr ' ' '_' <<<"$pe")"
    "$P" train $TINY --pe $pe --steps 6 --out "$R" >/dev/null 2>"$W/err" || fail "train --pe $pe: $(tail -3 "$W/err")"
    [ "$(json_text "$R/config.json" 'j["training"]["task"], j["model"]["pe"]')" = "('image', '${pe%% *}')" ] ||
        fail "$pe: config.json: $(head -c 300 "$R/config.json")"
    "$P" eval --model "$R" --json >"$W/e.json" 2>"$W/err" || fail "eval --pe $pe: $(cat "$W/err")"
    [ "$(json_text "$W/e.json" 'j["task"], j["examples"], j["targets"], 0 <= j["accuracy"] <= 1, j["accuracy"] * 4 == round(j["accuracy"] * 4)')" = \
      "('image', 4, 4, True, True)" ] || fail "eval --pe $pe: $(cat "$W/e.json")"
done

# 2-D SeqPE: two coordinates of two digits each (the defaults on a grid), recorded as resolved
# (with the encoder's width and heads, d-model and heads by default)
[ "$(json_text "$W/seqpe/config.json" '[j["encoding"][k] for k in ("seqpe-dims", "seqpe-digits", "seqpe-width", "seqpe-heads")]')" = "[2, 2, 16, 2]" ] ||
    fail "seqpe on images: config.json: $(head -c 400 "$W/seqpe/config.json")"
"$P" eval --model "$W/seqpe_--seqpe-mode_attn-mul" --resolutions 8,16 --json >"$W/r.json" 2>"$W/err" ||
    fail "seqpe --resolutions: $(cat "$W/err")"

# resolution sweep: 8 (2x2), 12 (3x3), 16 (4x4); learned2d interpolates its 2x2 table
R=$W/learned2d
"$P" eval --model "$R" --resolutions 8,12,2x --json --csv "$W/res.csv" >"$W/r.json" 2>"$W/err" || fail "--resolutions: $(cat "$W/err")"
[ "$(json_text "$W/r.json" '[(r["side"], r["grid"], r["tokens"], r["examples"]) for r in j["rows"]], j["train_side"], j["patch"]')" = \
  "([(8, 2, 5, 4), (12, 3, 10, 4), (16, 4, 17, 4)], 8, 4)" ] || fail "--resolutions JSON: $(cat "$W/r.json")"
"$P" eval --model "$R" --json >"$W/e.json" 2>/dev/null
[ "$(json_text "$W/r.json" 'j["rows"][0]["accuracy"]')" = "$(json_text "$W/e.json" 'j["accuracy"]')" ] ||
    fail "the sweep at the trained side differs from eval: $(cat "$W/r.json") vs $(cat "$W/e.json")"
[ "$(head -1 "$W/res.csv")" = "pe,side,grid,multiple,tokens,examples,accuracy,loss" ] && [ "$(wc -l <"$W/res.csv")" -eq 4 ] &&
    grep -q "^learned2d,16,4,2,17,4," "$W/res.csv" || fail "--resolutions CSV: $(cat "$W/res.csv")"
"$P" eval --model "$W/rope2d" --resolutions 8,16 >"$W/out" 2>"$W/err" || fail "--resolutions table: $(cat "$W/err")"
grep -q "^resolution extrapolation: .* trained at 8x8 (grid 2x2 of 4x4 patches), test images" "$W/out" &&
    grep -Eq "^16 +4x4 +2.00 +17 +4 " "$W/out" || fail "--resolutions table: $(cat "$W/out")"
expect 2 "resolution 10 is not a multiple of the patch size 4 (8 and 12 are)" -- eval --model "$R" --resolutions 8,10
# rope2d's evaluation-time --rope2d-extend interpolate: the training side unchanged, a larger one
# evaluated with its coordinates scaled into the training grid; another encoding's run refuses it
"$P" eval --model "$W/rope2d" --resolutions 8,16 --json >"$W/x.json" 2>"$W/err" &&
    "$P" eval --model "$W/rope2d" --resolutions 8,16 --rope2d-extend interpolate --json >"$W/i.json" 2>>"$W/err" ||
    fail "eval --rope2d-extend interpolate: $(cat "$W/err")"
[ "$(json_text "$W/x.json" 'j["rows"][0]["loss"]')" = "$(json_text "$W/i.json" 'j["rows"][0]["loss"]')" ] &&
    [ "$(json_text "$W/x.json" 'j["rows"][1]["loss"]')" != "$(json_text "$W/i.json" 'j["rows"][1]["loss"]')" ] ||
    fail "--rope2d-extend interpolate: $(cat "$W/x.json") vs $(cat "$W/i.json")"
expect 2 "--rope2d-extend applies to runs of --pe rope2d" -- eval --model "$R" --rope2d-extend interpolate

# analyze seqpe on an image run: the five picks (corners, centre) against every cell of the grid,
# at the training grid and a larger one; the dot product is symmetric across picks; 1-D options refused
"$P" analyze seqpe --model "$W/seqpe" --grid 3 --out "$W/grid.csv" 2>"$W/err" || fail "analyze seqpe on an image run: $(cat "$W/err")"
/usr/bin/python3 - "$W/grid.csv" <<'PY' || fail "analyze seqpe on an image run: the grid"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
assert rows[0] == ["p_row", "p_col", "row", "col", "dot"], rows[0]
dot = {(int(r[0]), int(r[1]), int(r[2]), int(r[3])): float(r[4]) for r in rows[1:]}
picks = [(1, 1), (1, 3), (2, 2), (3, 1), (3, 3)]
assert len(rows) == 1 + 5 * 9 and sorted({k[:2] for k in dot}) == sorted(picks), sorted({k[:2] for k in dot})
for a in picks:
    for b in picks:
        assert abs(dot[a + b] - dot[b + a]) <= 1e-6 * (1 + abs(dot[a + b])), (a, b)
PY
"$P" analyze seqpe --model "$W/seqpe" --out "$W/grid2.csv" 2>"$W/err" && [ "$(wc -l <"$W/grid2.csv")" -eq $((1 + 5 * 4)) ] ||
    fail "analyze seqpe at the training grid: $(cat "$W/err") $(head -3 "$W/grid2.csv")"
expect 2 "--nearest: $W/seqpe is a run on images, whose positions are a grid" -- analyze seqpe --model "$W/seqpe" --nearest 4
# the figure's APE-Learn panel: a learned2d run's table rows (model.safetensors), dotted; a larger
# grid interpolates; an encoding without position vectors is refused
"$P" analyze seqpe --model "$W/learned2d" --out "$W/ape.csv" 2>"$W/err" || fail "analyze seqpe on learned2d: $(cat "$W/err")"
/usr/bin/python3 - "$W/ape.csv" "$W/learned2d/model.safetensors" <<'PY' || fail "analyze seqpe on learned2d: the table's dot products"
import csv, json, struct, sys
rows = list(csv.reader(open(sys.argv[1])))[1:]
raw = open(sys.argv[2], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
meta = json.loads(raw[8:8 + n])["pos_emb2d.weight"]
assert meta["dtype"] == "F32", meta
(G2, D), (a, b) = meta["shape"], meta["data_offsets"]
vals = struct.unpack("<%df" % (G2 * D), raw[8 + n + a:8 + n + b])
G = round((G2 - 1) ** 0.5)
row = lambda r, c: vals[(1 + (r - 1) * G + (c - 1)) * D:(2 + (r - 1) * G + (c - 1)) * D]
assert len(rows) == 5 * G * G, len(rows)
for pr, pc, r, c, dot in rows:
    want = sum(x * y for x, y in zip(row(int(pr), int(pc)), row(int(r), int(c))))
    assert abs(float(dot) - want) <= 1e-5 * (1 + abs(want)), (pr, pc, r, c, dot, want)
PY
# --variance: the grid's energy split (mean, rows, columns, interaction), against the table's rows
# split independently: each part's sum of squares from a model fitted as the row and column means
# of several runs and sides in one CSV, in the order asked, each block as the run alone gives it
"$P" analyze seqpe --model "$W/learned2d,$W/seqpe" --grid 0,3 --variance --out "$W/var.csv" 2>"$W/err" ||
    fail "analyze seqpe --variance: $(cat "$W/err")"
"$P" analyze seqpe --model "$W/seqpe" --grid 3 --variance --out "$W/var1.csv" 2>"$W/err" || fail "analyze seqpe --variance: $(cat "$W/err")"
[ "$(tail -n 4 "$W/var.csv")" = "$(tail -n 4 "$W/var1.csv")" ] || fail "--variance of two runs: the last block differs from the run's alone"
/usr/bin/python3 - "$W/var.csv" "$W/learned2d/model.safetensors" "$W" <<'PY' || fail "analyze seqpe --variance: the split"
import csv, json, struct, sys
rows = list(csv.reader(open(sys.argv[1])))
assert rows[0] == ["model", "grid", "part", "sum_of_squares", "of_total", "of_variation"], rows[0]
W = sys.argv[3]
assert [r[:2] for r in rows[1::4]] == [[W + "/learned2d", "2"], [W + "/learned2d", "3"], [W + "/seqpe", "2"], [W + "/seqpe", "3"]], rows
got = {r[2]: r[3:] for r in rows[1:5]}  # learned2d at its training grid
assert list(got) == ["mean", "rows", "columns", "interaction"] and got["mean"][2] == "", got
raw = open(sys.argv[2], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
meta = json.loads(raw[8:8 + n])["pos_emb2d.weight"]
(G2, D), (a, b) = meta["shape"], meta["data_offsets"]
vals = struct.unpack("<%df" % (G2 * D), raw[8 + n + a:8 + n + b])
G = round((G2 - 1) ** 0.5)
e = {(r, c): vals[(1 + r * G + c) * D:(2 + r * G + c) * D] for r in range(G) for c in range(G)}
mean = [sum(e[r, c][k] for r in range(G) for c in range(G)) / (G * G) for k in range(D)]
R = {r: [sum(e[r, c][k] for c in range(G)) / G - mean[k] for k in range(D)] for r in range(G)}
C = {c: [sum(e[r, c][k] for r in range(G)) / G - mean[k] for k in range(D)] for c in range(G)}
want = {"mean": G * G * sum(x * x for x in mean),
        "rows": G * sum(x * x for r in range(G) for x in R[r]),
        "columns": G * sum(x * x for c in range(G) for x in C[c]),
        "interaction": sum((e[r, c][k] - mean[k] - R[r][k] - C[c][k]) ** 2 for r in range(G) for c in range(G) for k in range(D))}
total = sum(x * x for v in e.values() for x in v)
assert abs(sum(want.values()) - total) <= 1e-9 * total
for part, w in want.items():
    ss, of_total, of_var = got[part]
    assert abs(float(ss) - w) <= 1e-5 * total, (part, ss, w)
    assert abs(float(of_total) - w / total) <= 2e-6, (part, of_total, w / total)
    if part != "mean":
        assert abs(float(of_var) - w / (total - want["mean"])) <= 2e-6, (part, of_var)
PY
expect 2 "--variance is CSV only" -- analyze seqpe --model "$W/learned2d" --variance --png "$W/v.png"
expect 2 "several runs are for --variance" -- analyze seqpe --model "$W/learned2d,$W/seqpe"
expect 2 "--grid 3,4: one side here (several are for --variance)" -- analyze seqpe --model "$W/learned2d" --grid 3,4
expect 2 "--grid 3,,4: give one or more sides" -- analyze seqpe --model "$W/learned2d" --grid 3,,4 --variance
expect 2 "--grid 0,2: side 2 twice for $W/learned2d (0 is its training grid, 2)" -- \
    analyze seqpe --model "$W/learned2d" --grid 0,2 --variance
expect 2 "--model $W/seqpe,$W/seqpe: $W/seqpe twice" -- analyze seqpe --model "$W/seqpe,$W/seqpe" --variance
# a run that fails after others were written leaves the CSV as it was
cp "$W/var.csv" "$W/var0.csv"
expect 2 "$W/rope2d: a run of --pe rope2d, which has no position vectors" -- \
    analyze seqpe --model "$W/learned2d,$W/rope2d" --variance --out "$W/var.csv"
cmp -s "$W/var.csv" "$W/var0.csv" && ! ls "$W" | grep -q '\.tmp\.' ||
    fail "a failed --variance changed or left files: $(ls -A "$W")"
"$P" analyze seqpe --model "$W/learned2d" --grid 5 --out "$W/ape5.csv" 2>"$W/err" && [ "$(wc -l <"$W/ape5.csv")" -eq $((1 + 5 * 25)) ] ||
    fail "analyze seqpe on learned2d, a larger grid: $(cat "$W/err")"
expect 2 "a run of --pe rope2d, which has no position vectors" -- analyze seqpe --model "$W/rope2d"
if "$P" --version | grep -q cairo; then
    "$P" analyze seqpe --model "$W/seqpe" --png "$W/grid.png" --out "$W/g.csv" 2>"$W/err" &&
        [ "$(head -c 8 "$W/grid.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "analyze seqpe --png: $(cat "$W/err")"
fi

# compare: a column of test accuracy per side (--resolutions, auto 1x,2x,3x), the same as each run's
# eval --resolutions, in compare.json and DIR/resolutions.csv (mean and std over the seeds)
"$P" compare $TINY --steps 4 --pe rope2d,seqpe --seeds 2 --resolutions 1x,12,2x --out "$W/cmp" >"$W/out" 2>"$W/err" ||
    fail "compare --resolutions: $(tail -3 "$W/err")"
grep -q "^| encoding | test loss | acc 8 (1x) | acc 12 (12) | acc 16 (2x) | time per run |$" "$W/out" ||
    fail "compare --resolutions: the table: $(cat "$W/out")"
"$P" eval --model "$W/cmp/seqpe-s2" --resolutions 1x,12,2x --json >"$W/r.json" 2>"$W/err" || fail "eval of a compared run: $(cat "$W/err")"
/usr/bin/python3 - "$W/cmp" "$W/r.json" <<'PY' || fail "compare --resolutions: compare.json, resolutions.csv"
import csv, json, statistics, sys
d = sys.argv[1]
c = json.load(open(d + "/compare.json"))
assert c["resolutions"] == ["1x", "12", "2x"], c
run = [r for r in c["runs"] if r["pe"] == "seqpe" and r["seed"] == 2][0]
want = [row["accuracy"] for row in json.load(open(sys.argv[2]))["rows"]]
assert run["sweep_acc"] == want, (run["sweep_acc"], want)
rows = list(csv.DictReader(open(d + "/resolutions.csv")))
assert [(r["pe"], r["label"], r["side"]) for r in rows] == [(p, l, s) for p in ("rope2d", "seqpe")
                                                           for l, s in (("1x", "8"), ("12", "12"), ("2x", "16"))], rows
for p in ("rope2d", "seqpe"):
    accs = [r["sweep_acc"] for r in c["runs"] if r["pe"] == p]
    for i, r in enumerate(x for x in rows if x["pe"] == p):
        assert abs(float(r["acc_mean"]) - statistics.mean(a[i] for a in accs)) < 1e-9, (r, accs)
        assert abs(float(r["acc_std"]) - statistics.stdev(a[i] for a in accs)) < 1e-9, (r, accs)
PY
# the sweep is kept by side: sides asked again are read back (a marked accuracy shows it), new ones
# are evaluated and added, and the file lists every side, by size
R=$W/cmp/seqpe-s2/resolutions.json
mark() { # EDITS...: python statements on the file's rows, by side, then written back
    /usr/bin/python3 - "$R" "$@" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
row = {r["side"]: r for r in j["rows"]}
for edit in sys.argv[2:]:
    exec(edit)
json.dump(j, open(sys.argv[1], "w"))
PY
}
mark 'row[16]["accuracy"] = 0.123456'
"$P" compare $TINY --steps 4 --pe seqpe --seeds 2 --resolutions 2x,20,1x --out "$W/cmp" >"$W/out" 2>"$W/err" ||
    fail "compare --resolutions again: $(tail -3 "$W/err")"
"$P" eval --model "$W/cmp/seqpe-s2" --resolutions 20 --json >"$W/r20.json" 2>"$W/err" || fail "eval at 20: $(cat "$W/err")"
/usr/bin/python3 - "$W/cmp" "$W/r.json" "$W/r20.json" <<'PY' || fail "compare --resolutions, kept by side: $(cat "$R")"
import json, sys
d, before, at20 = sys.argv[1], json.load(open(sys.argv[2]))["rows"], json.load(open(sys.argv[3]))["rows"][0]
run = [r for r in json.load(open(d + "/compare.json"))["runs"] if r["seed"] == 2][0]
assert run["sweep_acc"] == [0.123456, at20["accuracy"], before[0]["accuracy"]], (run["sweep_acc"], before, at20)
kept = json.load(open(d + "/seqpe-s2/resolutions.json"))
assert kept["lengths"] == "8,12,16,20" and [r["side"] for r in kept["rows"]] == [8, 12, 16, 20], kept
assert kept["rows"][1]["accuracy"] == before[1]["accuracy"], kept
PY
# a row that is not a whole measurement of this run's test split (here: of fewer images) is measured
# again and the others kept, a null loss (non-finite) among them; a file of other weights (another
# step) or other evaluation-time options counts for none
acc_of() { # SIDES: seed 2's accuracies in compare.json after a compare at SIDES
    "$P" compare $TINY --steps 4 --pe seqpe --seeds 2 --resolutions "$1" --out "$W/cmp" >/dev/null 2>"$W/err" ||
        fail "compare --resolutions $1: $(tail -3 "$W/err")"
    json_text "$W/cmp/compare.json" '[r["sweep_acc"] for r in j["runs"] if r["seed"] == 2][0]'
}
mark 'row[12]["accuracy"] = 0.654321; row[12]["loss"] = None' 'row[20]["examples"] = 1; row[20]["accuracy"] = 0.5'
[ "$(acc_of 12,20)" = "[0.654321, $(json_text "$W/r20.json" 'j["rows"][0]["accuracy"]')]" ] &&
    [ "$(json_text "$R" '[r["loss"] for r in j["rows"] if r["side"] == 12]')" = "[None]" ] ||
    fail "a row of fewer images, a null loss: $(cat "$R")"
mark 'row[12]["accuracy"] = 0.654321' 'j["step"] = 3'
[ "$(acc_of 12)" != "[0.654321]" ] && grep -q '"step": 4' "$R" || fail "a file of another step was reused: $(cat "$R")"
mark 'row[12]["accuracy"] = 0.654321' 'j["eval_options"] = "ape-extend=interpolate"'
[ "$(acc_of 12)" != "[0.654321]" ] || fail "a file of other evaluation-time options was reused: $(cat "$R")"
# two compares adding sides to one run at the same moment keep both's: a compare writes the file
# under its lock (RUN/resolutions.json.lock), reading it again there. Here the lock is held while a
# compare measures side 28, and side 24 is added meanwhile, as another compare would: both stay.
exec 9>"$R.lock" && flock 9 || fail "cannot lock $R.lock"
"$P" compare $TINY --steps 4 --pe seqpe --seeds 2 --resolutions 28 --out "$W/cmp" >/dev/null 2>"$W/err" 9>&- &
pid=$!
waiting="-> FLOCK .*:$(stat -c %i "$R.lock") " # a request blocked on this file, in /proc/locks
for _ in $(seq 300); do grep -q -- "$waiting" /proc/locks && break; sleep 0.1; done
grep -q -- "$waiting" /proc/locks || fail "the compare did not wait for the lock of $R"
mark 'j["rows"].append({"side": 24, "grid": 6, "examples": 4, "accuracy": 0.777, "loss": 1.0})'
exec 9>&-
wait $pid || fail "compare after a held lock: $(tail -3 "$W/err")"
[ "$(json_text "$R" '[r["side"] for r in j["rows"]], [r["accuracy"] for r in j["rows"] if r["side"] == 24]')" = \
  "([12, 24, 28], [0.777])" ] || fail "a side added by another compare was lost: $(cat "$R")"
# an evaluation-time option reaches the image sweep: the learned table interpolated at 2x
"$P" compare $TINY --steps 2 --positions raster --pe learned --ape-extend interpolate --seeds 1 --resolutions 1x,2x \
    --out "$W/cmp2" >"$W/out" 2>"$W/err" || fail "compare --resolutions with --ape-extend: $(tail -3 "$W/err")"
grep -q '"eval_options": "ape-extend=interpolate"' "$W/cmp2/learned-s1/resolutions-ape-extend=interpolate.json" ||
    fail "the image sweep with the evaluation-time option: $(ls "$W/cmp2/learned-s1")"
expect 2 "--resolutions: task indirect has no images" -- compare --task indirect --pe rope --resolutions 1x --out "$W/bad"
expect 2 "resolution 10 is not a multiple of the patch size 4" -- compare $TINY --pe rope2d --resolutions 8,10 --out "$W/bad"

# sample: image index, prediction and truth
"$P" sample --model "$W/rope2d" --count 3 >"$W/out" 2>"$W/err" || fail "sample: $(cat "$W/err")"
[ "$(grep -c "^        at 0   predicted '.*' (p [0-9.]*)  truth '.*'  \(right\|WRONG\)$" "$W/out")" -eq 3 ] &&
    grep -q "^#0 " "$W/out" && grep -q "^[0-3] of 3 right$" "$W/out" || fail "sample: $(cat "$W/out")"

# bad input: one line each
expect 2 "--pe rope: a 1-D encoding, and this task's positions are 2-D (row, column): choose a 2-D encoding" -- \
    train $TINY --pe rope --steps 2 --out "$W/bad"
grep -qF -- "--positions raster" "$W/e" || fail "the 1-D encoding's refusal does not name --positions raster"
expect 2 "--pe rope2d: an encoding of 2-D positions, and this task's positions are 1-D" -- \
    train --task indirect --pe rope2d --steps 2 --out "$W/bad"
expect 2 "--pe alibi: causal only, and this task's attention is bidirectional" -- \
    train $TINY --pe alibi --positions raster --steps 2 --out "$W/bad"
expect 2 "resolution 8 is not a multiple of the patch size 5" -- train $TINY --patch 5 --steps 2 --out "$W/bad"
expect 2 "--seqpe-dims 1: this task's positions are 2-D" -- train $TINY --pe seqpe --seqpe-dims 1 --steps 2 --out "$W/bad"
expect 2 "--seqpe-dims 2: this task's positions are 1-D" -- train --task indirect --pe seqpe --seqpe-dims 2 --steps 2 --out "$W/bad"
# training augmentation: recorded in config.json, drawn per training example, so a run resumed
# mid-way ends with the same weights as one that ran straight through; other images than without it;
# bad ranges refused before training
AUG="--pe rope2d --aug-scale 0.3,1 --aug-flip on --save-every 3"
"$P" train $TINY $AUG --steps 6 --out "$W/aug" >/dev/null 2>"$W/err" || fail "train with augmentation: $(tail -3 "$W/err")"
"$P" train $TINY $AUG --steps 3 --out "$W/aug2" >/dev/null 2>"$W/err" && "$P" train --resume "$W/aug2" --steps 6 \
    >/dev/null 2>"$W/err" || fail "augmented run resumed: $(tail -3 "$W/err")"
same_weights "$W/aug/model.safetensors" "$W/aug2/model.safetensors" || fail "a resumed augmented run differs"
"$P" train $TINY --pe rope2d --steps 6 --out "$W/plain" >/dev/null 2>"$W/err" || fail "train: $(tail -3 "$W/err")"
same_weights "$W/aug/model.safetensors" "$W/plain/model.safetensors" && fail "augmentation changed nothing"
[ "$(json_text "$W/aug/config.json" 'j["task"]["aug-scale"], j["task"]["aug-flip"]')" = "('0.3,1', 'on')" ] ||
    fail "config.json lacks the augmentation: $(head -c 600 "$W/aug/config.json")"
# the augmented preset: DeiT's crop range and flips, recorded; an explicit option still wins
"$P" train $TINY --preset cpu-aug --pe nope --steps 1 --out "$W/preset" >/dev/null 2>"$W/err" ||
    fail "train --preset cpu-aug: $(tail -3 "$W/err")"
[ "$(json_text "$W/preset/config.json" 'j["task"]["aug-scale"], j["task"]["aug-flip"], j["training"]["preset"]')" = "('0.08,1', 'on', 'cpu-aug')" ] ||
    fail "--preset cpu-aug lacks its augmentation: $(head -c 600 "$W/preset/config.json")"
"$P" train $TINY --preset cpu-aug --pe nope --aug-scale off --steps 1 --out "$W/preset-off" >/dev/null 2>"$W/err" ||
    fail "train --preset cpu-aug --aug-scale off: $(tail -3 "$W/err")"
[ "$(json_text "$W/preset-off/config.json" 'j["task"]["aug-scale"]')" = off ] || fail "--aug-scale off lost to the preset"
expect 2 "--aug-scale '0,1': give LO,HI with 0 < LO <= HI <= 1" -- train $TINY --aug-scale 0,1 --steps 2 --out "$W/bad"
expect 2 "--aug-scale '0.5,2'" -- train $TINY --aug-scale 0.5,2 --steps 2 --out "$W/bad"
expect 2 "--aug-ratio '2,1': give LO,HI with 0 < LO <= HI" -- train $TINY --aug-scale 0.5,1 --aug-ratio 2,1 --steps 2 --out "$W/bad"
expect 2 "--aug-scale does not apply to --task copy" -- train --task copy --aug-scale 0.5,1 --steps 2 --out "$W/bad"
[ ! -e "$W/bad" ] || fail "a refused run left a directory"
echo "cli_image: ok"
