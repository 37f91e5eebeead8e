#!/usr/bin/env bash
# SeqPE from the command line: each integration trains, evaluates and samples; its options land
# in config.json and its parameters in model.safetensors; its regularisers are logged and resume
# exactly; bad settings are one-line usage errors.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 16 --indirect-test-size 16
      --seqpe-layers 1 --seqpe-width 8"

for case in "input" "attn-add --seqpe-proj per-layer" "attn-mul" "attn-bias --seqpe-digits 3"; do
    R="$W/$(tr ' ' '_' <<<"$case")"
    "$P" train --task indirect --pe seqpe --seqpe-mode $case $TINY --steps 6 --eval-every 3 \
        --eval-batches 1 --out "$R" >/dev/null 2>"$W/err" || fail "train --seqpe-mode $case exited $?: $(tail -3 "$W/err")"
    /usr/bin/python3 - "$R" $case <<'PY' || fail "$case: config.json or model.safetensors"
import json, struct, sys
d, case = sys.argv[1], sys.argv[2:]
cfg = json.load(open(d + "/config.json"))
enc = cfg["encoding"]
assert cfg["model"]["pe"] == "seqpe" and enc["seqpe-mode"] == case[0], enc
for k, v in zip(case[1::2], case[2::2]):
    assert str(enc[k[2:]]) == v, (k, v, enc)
b = open(d + "/model.safetensors", "rb").read()
names = set(json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])) - {"__metadata__"}
assert "pe.seqpe.digit_emb.weight" in names and "pe.seqpe.out.weight" in names, names
proj = {n for n in names if n.endswith("seqpe.qk.weight")}
want = set() if case[0] == "input" else (
    {"blocks.0.attn.seqpe.qk.weight"} if "per-layer" in case else {"pe.seqpe.qk.weight"})
assert proj == want, (proj, want)
PY
    "$P" eval --model "$R" --json >"$W/out" 2>"$W/err" || fail "$case: eval exited $?: $(cat "$W/err")"
    "$P" sample --model "$R" --count 1 >"$W/out" 2>"$W/err" || fail "$case: sample exited $?"
done

# The regularisers and shifted starts: log.jsonl has loss_delta and loss_ood (only the terms
# switched on); a run checkpointed at 4 and one resumed from 4 to 8 log the same values and end
# with the same weights (the draws are keyed by step), with accumulation.
REG="$TINY --seqpe-delta-batch 4 --seqpe-candidates 8 --seqpe-ood-batch 2 --seqpe-ood-positions 6
     --seqpe-shift-prob 0.5 --warmup 2 --decay-steps 8 --log-every 1 --eval-every 4 --eval-batches 1 --accum 2"
logged() { /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r["step"], repr(r["loss"]), repr(r.get("loss_delta")), repr(r.get("loss_ood")), repr(r.get("val_loss")))' "$1/log.jsonl"; }
"$P" train --pe seqpe --seqpe-mode attn-bias $REG --steps 8 --save-every 4 --out "$W/full" >/dev/null 2>"$W/err" ||
    fail "train with the regularisers: $(tail -2 "$W/err")"
"$P" train --pe seqpe --seqpe-mode attn-bias $REG --steps 4 --out "$W/part" >/dev/null 2>"$W/err" || fail "$(tail -2 "$W/err")"
"$P" train --resume "$W/part" --steps 8 >/dev/null 2>"$W/err" || fail "resume: $(tail -2 "$W/err")"
logged "$W/full" >"$W/a"
logged "$W/part" >"$W/b"
[ "$(grep -c '"loss_delta": [0-9]' "$W/full/log.jsonl")" -eq 8 ] && [ "$(grep -c '"loss_ood": [0-9]' "$W/full/log.jsonl")" -eq 8 ] ||
    fail "a term missing from log.jsonl: $(head -2 "$W/full/log.jsonl")"
[ "$(wc -l <"$W/a")" -eq 8 ] && diff "$W/a" "$W/b" >/dev/null || fail "resumed run logs differently: $(diff "$W/a" "$W/b" | head -4)"
same_weights "$W/full/model.safetensors" "$W/part/model.safetensors" || fail "weights differ after resume"
"$P" train --pe seqpe $REG --seqpe-alpha 0 --steps 2 --out "$W/beta" >/dev/null 2>"$W/err" || fail "$(tail -2 "$W/err")"
grep -q '"loss_delta"' "$W/beta/log.jsonl" && fail "--seqpe-alpha 0 still logs loss_delta"
grep -q '"loss_ood"' "$W/beta/log.jsonl" || fail "--seqpe-alpha 0 lost loss_ood"

# --seqpe-reg-profile authors: config.json records what the profile chose, one option given
# otherwise stays as given, and a run resumes exactly (its shifted micro-batches are keyed too)
AUTH="--pe seqpe --seqpe-mode attn-bias --seqpe-reg-profile authors --seqpe-ood-loss paper $REG"
"$P" train $AUTH --steps 8 --out "$W/authors" >/dev/null 2>"$W/err" || fail "the authors' profile: $(tail -2 "$W/err")"
"$P" train $AUTH --steps 4 --out "$W/authors-part" >/dev/null 2>"$W/err" || fail "$(tail -2 "$W/err")"
"$P" train --resume "$W/authors-part" --steps 8 >/dev/null 2>"$W/err" || fail "resume the authors' profile: $(tail -2 "$W/err")"
logged "$W/authors" >"$W/a"
logged "$W/authors-part" >"$W/b"
diff "$W/a" "$W/b" >/dev/null || fail "the authors' profile resumed logs differently: $(diff "$W/a" "$W/b" | head -4)"
same_weights "$W/authors/model.safetensors" "$W/authors-part/model.safetensors" || fail "the authors' profile: weights differ after resume"
[ "$(json_text "$W/authors/config.json" '[j["encoding"][k] for k in ("seqpe-ood-loss", "seqpe-ood-shifts", "seqpe-local-window", "seqpe-global-edits", "seqpe-global-frac", "seqpe-shift-unit", "seqpe-shift-pool", "seqpe-final-norm")]')" = \
  "['paper', 'authors', 'anywhere', 'authors', 0.4, 'step', 320, 'on']" ] ||
    fail "the authors' profile in config.json: $(grep -o '"seqpe-[a-z-]*": [^,]*' "$W/authors/config.json" | tr '\n' ' ')"
# and on an image's grid and a QA task
install_images "$W/images"
"$P" train --task image --data-dir "$W/images" --image-side 8 --patch 4 --d-model 16 --heads 2 --layers 1 \
    --batch 8 --threads 1 --eval-every 0 --pe seqpe --seqpe-reg-profile authors --steps 3 --out "$W/authors-image" \
    >/dev/null 2>"$W/err" ||
    fail "the authors' profile on images: $(tail -2 "$W/err")"
install_sotu "$W/data"
"$P" train --task qa --tokenizer byte --data-dir "$W/data" --seq-len 160 --qa-val-size 16 --qa-test-size 16 \
    --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --eval-every 0 --pe seqpe --seqpe-reg-profile authors \
    --steps 3 --out "$W/authors-qa" >/dev/null 2>"$W/err" || fail "the authors' profile on qa: $(tail -2 "$W/err")"

# analyze seqpe: the similarity matrix e_p·e_q, symmetric, norms on the diagonal, to a file or -.
R="$W/input"
"$P" analyze seqpe --model "$R" --from 3 --to 40 --step 4 --out "$W/sim.csv" 2>"$W/err" || fail "analyze seqpe: $(cat "$W/err")"
"$P" analyze seqpe --model "$R" --from 3 --to 40 --step 4 >"$W/sim2.csv" 2>"$W/err" || fail "analyze seqpe to -: $(cat "$W/err")"
cmp -s "$W/sim.csv" "$W/sim2.csv" || fail "analyze seqpe: --out and standard output differ"
/usr/bin/python3 - "$W/sim.csv" <<'PY' || fail "analyze seqpe: the matrix"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
want = [str(p) for p in range(3, 40, 4)]
assert rows[0] == ["p"] + want and [r[0] for r in rows[1:]] == want, rows[0]
m = [[float(x) for x in r[1:]] for r in rows[1:]]
assert all(m[i][j] == m[j][i] for i in range(10) for j in range(10)), "not symmetric"
assert all(m[i][i] > 0 for i in range(10)), "diagonal"
PY
# --nearest T: each position's nearest embedding of the window 0..T-1 (itself left out), the same
# distances as the dot products give: |e_p - e_q|² = e_p·e_p + e_q·e_q - 2 e_p·e_q.
"$P" analyze seqpe --model "$R" --from 0 --to 24 --step 1 --nearest 8 --out "$W/near.csv" 2>"$W/err" ||
    fail "analyze seqpe --nearest: $(cat "$W/err")"
"$P" analyze seqpe --model "$R" --from 0 --to 24 --step 1 --out "$W/dots.csv" 2>"$W/err" || fail "analyze seqpe 0..24"
/usr/bin/python3 - "$W/near.csv" "$W/dots.csv" <<'PY' || fail "analyze seqpe --nearest: the distances"
import csv, math, sys
near = list(csv.reader(open(sys.argv[1])))
dots = [[float(x) for x in r[1:]] for r in list(csv.reader(open(sys.argv[2])))[1:]]
assert near[0] == ["p", "nearest", "distance", "norm"], near[0]
assert [int(r[0]) for r in near[1:]] == list(range(24)), near
for r in near[1:]:
    p, q, dist, norm = int(r[0]), int(r[1]), float(r[2]), float(r[3])
    d2 = lambda a, b: dots[a][a] + dots[b][b] - 2 * dots[a][b]
    want = min((d2(p, k), k) for k in range(8) if k != p)
    assert q == want[1] and q != p and 0 <= q < 8, (p, q, want)
    assert abs(dist - math.sqrt(max(want[0], 0))) <= 1e-4 * (1 + dist), (p, dist, want)
    assert abs(norm - math.sqrt(dots[p][p])) <= 1e-5 * norm, (p, norm)
PY

# --png: the matrix as a heatmap (the paper's Figure 2), the CSV unchanged beside it
if "$P" --version | grep -q cairo; then
    "$P" analyze seqpe --model "$R" --from 3 --to 40 --step 4 --out "$W/sim3.csv" --png "$W/sim.png" 2>"$W/err" &&
        [ "$(head -c 8 "$W/sim.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && cmp -s "$W/sim.csv" "$W/sim3.csv" ||
        fail "analyze seqpe --png: $(cat "$W/err")"
fi

# --checkpoints: the same distances at every kept checkpoint and the final model, as band means;
# the final step's rows are the means of --nearest on model.safetensors, and step 4's differ.
"$P" analyze seqpe --model "$W/full" --from 0 --to 24 --step 1 --nearest 8 --checkpoints --out "$W/bands.csv" \
    2>"$W/err" || fail "analyze seqpe --checkpoints: $(cat "$W/err")"
"$P" analyze seqpe --model "$W/full" --from 0 --to 24 --step 1 --nearest 8 --out "$W/near8.csv" 2>"$W/err" ||
    fail "analyze seqpe --nearest on the full run: $(cat "$W/err")"
/usr/bin/python3 - "$W/bands.csv" "$W/near8.csv" <<'PY' || fail "analyze seqpe --checkpoints: the bands"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
assert rows[0] == ["step", "from", "to", "distance", "norm", "relative"], rows[0]
got = {(int(r[0]), int(r[1])): [float(x) for x in r[3:]] for r in rows[1:]}
assert sorted(got) == [(s, b) for s in (4, 8) for b in (0, 8, 16)], sorted(got)
near = [[float(x) for x in r] for r in list(csv.reader(open(sys.argv[2])))[1:]]
for b in (0, 8, 16):
    band = [r for r in near if b <= r[0] < b + 8]
    want = [sum(r[2] for r in band) / 8, sum(r[3] for r in band) / 8, sum(r[2] / r[3] for r in band) / 8]
    for g, w in zip(got[(8, b)], want):
        assert abs(g - w) <= 1e-5 * (1 + abs(w)), (b, got[(8, b)], want)
    assert got[(4, b)] != got[(8, b)], ("step 4 equals step 8", b)
PY

# The regulariser ablation as one compare: variants NAME:option=value:... of one encoding.
"$P" compare --task indirect --pe seqpe:seqpe-alpha=0:seqpe-beta=0,seqpe:seqpe-beta=0,seqpe --seeds 1 \
    $TINY --seqpe-delta-batch 4 --seqpe-ood-batch 2 --steps 2 --out "$W/abl" >"$W/out" 2>"$W/err" ||
    fail "compare of variants: $(tail -2 "$W/err")"
/usr/bin/python3 - "$W/abl" <<'PY' || fail "compare of variants: compare.json or the runs' settings"
import json, sys
d = sys.argv[1]
c = json.load(open(d + "/compare.json"))
labels = ["seqpe:seqpe-alpha=0:seqpe-beta=0", "seqpe:seqpe-beta=0", "seqpe"]
assert [e["pe"] for e in c["encodings"]] == labels, c["encodings"]
want = {labels[0]: (0, 0), labels[1]: (0.1, 0), labels[2]: (0.1, 0.1)}
for l, (a, b) in want.items():
    cfg = json.load(open("%s/%s-s1/config.json" % (d, l.replace(":", "+").replace("=", "-"))))
    assert cfg["model"]["pe"] == "seqpe" and cfg["encoding"]["seqpe-alpha"] == a and cfg["encoding"]["seqpe-beta"] == b, (l, cfg["encoding"])
    assert cfg["encoding"]["seqpe-delta-batch"] == 4, "shared options reach every variant"
PY

expect 2 "--seqpe-base: 1 is out of range [2, 65536]" -n "$W/no" -- train --pe seqpe --seqpe-base 1 $TINY --out "$W/no"
expect 2 "--seqpe-digits 1 in base 10 hold positions below 10, fewer than the training context's 50" -n "$W/no" -- \
    train --pe seqpe --seqpe-digits 1 $TINY --out "$W/no"
expect 2 "--seqpe-dims 2: this task's positions are 1-D" -n "$W/no" -- train --pe seqpe --seqpe-dims 2 $TINY --out "$W/no"
expect 2 "--seqpe-mode: 'attn-scalar' is not one of" -n "$W/no" -- train --pe seqpe --seqpe-mode attn-scalar $TINY --out "$W/no"
expect 2 "--seqpe-heads 3 does not divide the encoder width 8" -n "$W/no" -- train --pe seqpe --seqpe-heads 3 $TINY --out "$W/no"
expect 2 "--seqpe-mode does not apply to --pe rope" -n "$W/no" -- train --pe rope --seqpe-mode input --out "$W/no"
expect 2 "--seqpe-max-pos 2000 is beyond what --seqpe-digits 3 in base 10 hold" -n "$W/no" -- \
    train --pe seqpe --seqpe-digits 3 --seqpe-max-pos 2000 $TINY --out "$W/no"
expect 2 "--seqpe-max-pos 40 leaves no room to shift the training context" -n "$W/no" -- \
    train --pe seqpe --seqpe-max-pos 40 $TINY --out "$W/no"
expect 2 "--seqpe-alpha: -1 is out of range" -n "$W/no" -- train --pe seqpe --seqpe-alpha -1 $TINY --out "$W/no"
expect 2 "--seqpe-reg-profile: 'author' is not one of" -n "$W/no" -- train --pe seqpe --seqpe-reg-profile author $TINY --out "$W/no"
expect 2 "--seqpe-global-frac -0.5: give a fraction in [0, 1], or -1" -n "$W/no" -- \
    train --pe seqpe --seqpe-global-frac -0.5 $TINY --out "$W/no"
expect 2 "--seqpe-max-pos 60 leaves no room to shift the training context (50) by at least 12" -n "$W/no" -- \
    train --pe seqpe --seqpe-ood-shifts authors --seqpe-max-pos 60 $TINY --out "$W/no"
expect 2 "position 1000 has more than 3 digits in base 10" -n "$W/no" -- \
    analyze seqpe --model "$W/attn-bias_--seqpe-digits_3" --from 992 --to 1010 --out "$W/no"
"$P" train --pe rope --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --steps 1 --indirect-val-size 16 --indirect-test-size 16 --out "$W/rope" >/dev/null 2>&1 || fail "train rope"
expect 2 "a run of --pe rope, which has no position vectors; analyze seqpe needs a --pe seqpe run" -n "$W/no" -- analyze seqpe --model "$W/rope" --out "$W/no"
expect 2 "--to 5 must be above --from 5" -n "$W/no" -- analyze seqpe --model "$W/input" --from 5 --to 5 --out "$W/no"
expect 2 "--nearest 1: position 0 would have no other to be near" -n "$W/no" -- analyze seqpe --model "$W/input" --nearest 1 --out "$W/no"
expect 2 "--checkpoints summarises --nearest T" -n "$W/no" -- analyze seqpe --model "$W/full" --checkpoints --out "$W/no"
expect 2 "--png draws the matrix (or an image run's grids); --nearest is CSV only" -n "$W/no" -- analyze seqpe --model "$W/full" --nearest 8 --png "$W/no.png"
expect 2 "is a run on sequences; --grid is for runs on images" -n "$W/no" -- analyze seqpe --model "$W/full" --grid 4 --out "$W/no"
expect 2 "is a run on sequences; --variance is for runs on images" -n "$W/no" -- analyze seqpe --model "$W/full" --variance --out "$W/no"
expect 2 "--pe seqpe:rope-base=5: --rope-base is not an option of --pe seqpe" -n "$W/no" -- \
    compare --pe seqpe:rope-base=5 $TINY --out "$W/no"
expect 2 "--pe seqpe:seqpe-alpha: 'seqpe-alpha' is not option=value" -n "$W/no" -- compare --pe seqpe:seqpe-alpha $TINY --out "$W/no"
expect 2 "--seqpe-beta: -2 is out of range" -n "$W/no" -- compare --pe seqpe:seqpe-beta=-2 $TINY --out "$W/no"
exit 0
