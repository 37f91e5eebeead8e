#!/usr/bin/env bash
# pelab analyze freq: on tiny trained RoPE (both pair layouts), xPos, PoPE and 2-D PoPE runs the CSV holds
# one row per layer and frequency (d/2 for the rotary encodings, d for PoPE) with the encoding's
# θ_c and finite, non-negative mean magnitudes; more batches change the means, the same batches
# give the same bytes on stdout and in a file. (tests/test_freq.c checks the values against the
# weights.) Encodings without frequencies and bad invocations are one-line errors.
set -u
. "$(dirname "$0")/../../tests/lib/cli.sh"
TINY="--d-model 32 --heads 4 --layers 2 --batch 16 --threads 1 --indirect-val-size 32 --indirect-test-size 32"

train_tiny() { # name steps pe [options...]
    local name=$1 steps=$2; shift 2
    "$P" train --task indirect $TINY --steps "$steps" --warmup 5 --lr 3e-3 --log-every 10 --eval-every 0 \
        --out "$W/$name" --pe "$@" >/dev/null 2>"$W/err" || fail "train --pe $*: exit $?: $(tail -2 "$W/err")"
}

# check NAME CSV FREQS EXPONENT: rows (layers × FREQS), θ_c = base^(−EXPONENT·c/d), values ≥ 0.
check() {
    /usr/bin/python3 - "$W/$1" "$2" "$3" "$4" <<'PY' || fail "$1: bad frequency CSV ($2)"
import csv, json, math, sys
d, path, F, e = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
cfg = json.load(open(d + "/config.json"))
m, enc = cfg["model"], cfg["encoding"]
N, dh = m["layers"], m["d-model"] // m["heads"]
base = [v for k, v in enc.items() if k.endswith("-base") and "scale" not in k][0]
rows = list(csv.reader(open(path)))
assert rows[0] == ["layer", "freq", "theta", "query_norm", "key_norm"], rows[0]
rows = rows[1:]
assert len(rows) == N * F, (len(rows), N, F)
assert [(int(r[0]), int(r[1])) for r in rows] == [(l, c) for l in range(N) for c in range(F)]
for r in rows:
    c = int(r[1])
    assert abs(float(r[2]) - base ** (-e * c / dh)) <= 1e-7 * float(r[2]), r
    q, k = float(r[3]), float(r[4])
    assert math.isfinite(q) and math.isfinite(k) and q >= 0 and k >= 0, r
    assert q > 0 and k > 0, r  # a trained layer uses every frequency a little
assert len({r[3] for r in rows}) > 1, "constant query norms"
PY
}

train_tiny rope 30 rope
train_tiny half 30 rope --rope-layout half
train_tiny xpos 2 xpos
train_tiny pope 30 pope --pope-delta-init uniform
train_tiny popeoff 2 pope --pope-softplus off

for r in rope:4:2 half:4:2 xpos:4:2 pope:8:1 popeoff:8:1; do
    IFS=: read -r name F e <<<"$r"
    "$P" analyze freq --model "$W/$name" --threads 1 --out "$W/$name.csv" >"$W/out" 2>"$W/err" ||
        fail "analyze freq $name: exit $?: $(cat "$W/err")"
    [ -s "$W/$name.csv" ] && [ ! -s "$W/out" ] || fail "analyze freq $name --out: file empty or output on stdout"
    check "$name" "$W/$name.csv" "$F" "$e"
done
"$P" analyze freq --model "$W/rope" --threads 1 >"$W/stdout.csv" 2>"$W/err" || fail "--out -: $(cat "$W/err")"
cmp -s "$W/stdout.csv" "$W/rope.csv" || fail "stdout and --out differ for the same batches"
"$P" analyze freq --model "$W/rope" --threads 1 --batches 1 --batch 8 --split test --out "$W/b1.csv" 2>"$W/err" ||
    fail "--batches 1: $(cat "$W/err")"
check rope "$W/b1.csv" 4 2
cmp -s "$W/b1.csv" "$W/rope.csv" && fail "other batches gave the same means"

# pope2d on an image's grid: d components, the row's d/2 frequencies base^(−j/(d/2)), then the
# column's the same
install_images "$W/images"
"$P" train --task image --data-dir "$W/images" --image-side 8 --patch 4 --d-model 16 --heads 2 --layers 1 \
    --batch 8 --threads 1 --eval-every 0 --pe pope2d --steps 3 --out "$W/pope2d" >/dev/null 2>"$W/err" ||
    fail "train pope2d: $(tail -2 "$W/err")"
"$P" analyze freq --model "$W/pope2d" --threads 1 --batches 1 --out "$W/pope2d.csv" 2>"$W/err" ||
    fail "analyze freq pope2d: $(cat "$W/err")"
/usr/bin/python3 - "$W/pope2d.csv" <<'PY' || fail "pope2d: bad frequency CSV"
import csv, math, sys
rows = list(csv.reader(open(sys.argv[1])))[1:]
d, h = 8, 4
assert [(int(r[0]), int(r[1])) for r in rows] == [(0, c) for c in range(d)], rows
for r in rows:
    c = int(r[1])
    assert abs(float(r[2]) - 10000 ** (-(c % h) / h)) <= 1e-7 * float(r[2]), r
    assert float(r[3]) > 0 and float(r[4]) > 0, r
PY

# errors: one line, exit 2 (usage) or 1 (runtime)
train_tiny alibi 1 alibi
expect 2 "encoding 'alibi' has no frequencies to analyse (those with: rope, pope, xpos, pope2d)" -- analyze freq --model "$W/alibi"
expect 1 "$W/none" -- analyze freq --model "$W/none"
expect 2 "--max-distance is an option of analyze bias, not of analyze freq" -- analyze freq --model "$W/rope" --max-distance 3
expect 2 "--batches is an option of analyze freq, not of analyze bias" -- analyze bias --model "$W/pope" --batches 3
expect 2 "--batches: 0 is out of range" -- analyze freq --model "$W/rope" --batches 0
expect 2 "unknown analysis 'attention'" -- analyze attention --model "$W/rope"
[ ! -e "$W/none.csv" ] || fail "a failed analysis left a file"
expect 1 "$W/nodir/x.csv" -- analyze freq --model "$W/rope" --out "$W/nodir/x.csv"
echo "ok"
