#!/usr/bin/env bash
# pelab analyze bias: tiny runs of each bias encoding (and PoPE) train from the command line with
# a falling loss, and the CSV holds, per layer and head, the bias the saved weights give at each
# distance (checked against the formulas evaluated here from model.safetensors), or PoPE's
# clamped δ per frequency. Encodings with neither, and bad invocations, are one-line usage errors.
set -u
. "$(dirname "$0")/../../tests/lib/cli.sh"
TINY="--d-model 32 --heads 4 --layers 2 --batch 16 --threads 1 --indirect-val-size 32 --indirect-test-size 32"

train_tiny() { # name pe [options...]
    local name=$1; shift
    "$P" train --task indirect $TINY --steps 60 --warmup 5 --lr 3e-3 --log-every 10 --eval-every 0 \
        --out "$W/$name" --pe "$@" >/dev/null 2>"$W/err" || fail "train --pe $*: exit $?: $(tail -2 "$W/err")"
    /usr/bin/python3 -c '
import json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
assert log[-1]["loss"] < log[0]["loss"] - 0.1, [r["loss"] for r in log]' "$W/$name/log.jsonl" ||
        fail "--pe $*: the training loss did not fall"
}

# verify NAME CSV [query-pos]: the CSV against the formulas on NAME's saved weights.
verify() {
    /usr/bin/python3 - "$W/$1" "$2" "${3:--1}" <<'PY' || fail "$1: CSV does not match the weights ($2)"
import csv, json, math, struct, sys
d, path, qpos = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = json.load(open(d + "/config.json"))
m, enc, T = cfg["model"], cfg["encoding"], cfg["derived"]["max-seq"]
L_, H, pe = m["layers"], m["heads"], m["pe"]
b = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n]); head.pop("__metadata__")
def tensor(name):
    info = head[name]; lo, hi = info["data_offsets"]
    vals = struct.unpack("<%df" % ((hi - lo) // 4), b[8 + n + lo:8 + n + hi])
    return vals, info["shape"]
rows = list(csv.reader(open(path)))
if pe == "pope":
    dh = m["d-model"] // H
    assert rows[0] == ["layer", "head", "freq", "theta", "delta"], rows[0]
    assert len(rows) == 1 + L_ * H * dh, len(rows)
    for r in rows[1:]:
        l, h, c = map(int, r[:3])
        delta = tensor("blocks.%d.attn.pope.delta" % l)[0][h * dh + c]
        assert abs(float(r[3]) - enc["pope-base"] ** (-c / dh)) <= 1e-7 * float(r[3]), r
        used = min(0.0, max(-2 * math.pi, delta)) if enc.get("pope-delta-clamp", "on") == "on" else delta
        assert abs(float(r[4]) - used) <= 1e-6, (r, delta)
    sys.exit(0)
assert rows[0] == ["layer", "head", "distance", "bias"], rows[0]
rows = rows[1:]
D = len(rows) // (L_ * H)
assert len(rows) == L_ * H * D and [int(r[2]) for r in rows[:D]] == list(range(D)), len(rows)
def slopes(h_):
    geo = lambda k: [2.0 ** (-8.0 * (i + 1) / k) for i in range(k)]
    c = 1 << (h_.bit_length() - 1)
    return geo(c) if c == h_ else geo(c) + geo(2 * c)[0::2][:h_ - c]
def bias(l, h, dist):
    t = dist if qpos < 0 else qpos
    s = t - dist
    if pe == "alibi":
        return -slopes(H)[h] * dist
    if pe == "t5":
        nb, maxd5 = enc["t5-buckets"], enc["t5-max-distance"]
        ex, k = nb // 2, max(dist, 0)
        bk = k if k < ex else min(nb - 1, ex + int(math.log(k / ex) / math.log(maxd5 / ex) * (nb - ex)))
        name = "pe.t5.bias" if enc["t5-table"] == "shared" else "blocks.%d.attn.t5.bias" % l
        return tensor(name)[0][bk * H + h]
    p = "pe.fire" if pe == "fire-shared" else "blocks.%d.attn.fire" % l
    c, ell = tensor(p + ".c")[0][0], tensor(p + ".ell")[0][0]
    psi = lambda x: math.log(abs(c * x) + 1)
    a = [psi(t - s) / (psi(max(t, abs(ell) * T)) + 1e-6)]
    depth = enc["fire-depth"]
    for i in range(depth + 1):
        w, (o, k) = tensor("%s.layers.%d.weight" % (p, i))
        bb = tensor("%s.layers.%d.bias" % (p, i))[0] if i < depth else [0.0] * o
        z = [bb[j] + sum(w[j * k + q] * a[q] for q in range(k)) for j in range(o)]
        a = [max(v, 0.0) for v in z] if i < depth else z
    return a[h]
worst = 0
for r in rows:
    l, h, dist = map(int, r[:3])
    want = bias(l, h, dist)
    worst = max(worst, abs(float(r[3]) - want) / max(1.0, abs(want)))
assert worst < 2e-5, worst
if pe in ("t5", "fire", "fire-shared"):  # learned: the trained bias is not constant
    assert len({r[3] for r in rows}) > 1, "constant bias"
PY
}

train_tiny alibi alibi
train_tiny t5 t5 --t5-buckets 8 --t5-max-distance 20
train_tiny t5l t5 --t5-table per-layer
train_tiny fire fire
train_tiny fires fire-shared --fire-width 8 --fire-depth 1
train_tiny pope pope --pope-delta-init uniform

for r in alibi t5 t5l fire fires pope; do
    "$P" analyze bias --model "$W/$r" --out "$W/$r.csv" >"$W/out" 2>"$W/err" || fail "analyze $r: exit $?: $(cat "$W/err")"
    [ -s "$W/$r.csv" ] && [ ! -s "$W/out" ] || fail "analyze $r --out: file empty or output on stdout"
    verify "$r" "$W/$r.csv"
done
# stdout, another distance range, another query position (FIRE: rows past L use ψ(t))
"$P" analyze bias --model "$W/fire" --max-distance 7 --out - >"$W/f7.csv" 2>"$W/err" || fail "analyze --out -: $(cat "$W/err")"
[ "$(wc -l <"$W/f7.csv")" -eq $((1 + 2 * 4 * 8)) ] || fail "--max-distance 7: $(wc -l <"$W/f7.csv") lines"
verify fire "$W/f7.csv"
"$P" analyze bias --model "$W/fire" --query-pos 200 --out "$W/fq.csv" 2>"$W/err" || fail "--query-pos: $(cat "$W/err")"
verify fire "$W/fq.csv" 200
cmp -s "$W/fire.csv" "$W/fq.csv" && fail "--query-pos 200 gave FIRE's default curve"
"$P" analyze bias --model "$W/t5" --query-pos 200 --out "$W/tq.csv" 2>"$W/err" || fail "t5 --query-pos: $(cat "$W/err")"
cmp -s "$W/t5.csv" "$W/tq.csv" || fail "t5's bias depends on the query position"
h=$("$P" help analyze) || fail "pelab help analyze exited $?"
for o in model out png width height edited max-distance query-pos batches batch split threads; do
    grep -qE -- "^  --$o " <<<"$h" || fail "pelab help analyze lacks --$o"
done
[ "$(grep -c '(default: ' <<<"$h")" -eq 12 ] || fail "pelab help analyze: not every option shows its default"
"$P" help | grep -q "^  analyze " || fail "pelab help does not list analyze"

# usage errors: exit 2, one line
"$P" train --task indirect $TINY --steps 2 --eval-every 0 --out "$W/rope" --pe rope >/dev/null 2>&1 || fail "train rope"
expect 2 "encoding 'rope' has no attention bias or phase bias δ to show (bias: alibi, t5, fire, fire-shared; δ: pope)" -- \
    analyze bias --model "$W/rope"
"$P" train --task indirect $TINY --steps 2 --eval-every 0 --out "$W/pnd" --pe pope --pope-delta off >/dev/null 2>&1 || fail "train pope"
expect 2 "$W/pnd: a PoPE run without δ (--pope-delta off): no bias to show" -- analyze bias --model "$W/pnd"
expect 2 "needs an analysis" -- analyze --model "$W/t5"
expect 2 "unknown analysis 'attention'" -- analyze attention --model "$W/t5"
expect 2 "--model DIR is required" -- analyze bias
expect 2 "unknown option --steps" -- analyze bias --model "$W/t5" --steps 3
expect 2 "--query-pos: -2 is out of range" -- analyze bias --model "$W/t5" --query-pos -2
echo "ok"
