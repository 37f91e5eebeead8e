#!/usr/bin/env bash
# The indirect-indexing experiment switches from the command line, and pelab analyze probe:
#  - --pope-delta-init offset --pope-delta-train off: after training, δ is still Kθ_c wrapped into
#    (−2π, 0] (with training on it moves), and the probe says every head prefers distance K;
#  - --pope-delta-clamp off: from δ = 0 training takes entries above 0, and analyze bias shows
#    them as they are (the saved weights, unclamped);
#  - the switches and --indirect-shift-zero are kept in config.json: a resume continues with them
#    and sample shows shifts of +0 on the test split;
#  - analyze probe: one row per kept checkpoint, layer and head, masses between 0 and 1.
set -u
. "$(dirname "$0")/../../tests/lib/cli.sh"
TINY="--task indirect --d-model 32 --heads 4 --layers 2 --batch 16 --threads 1 --indirect-min-len 6
      --indirect-max-len 10 --indirect-max-shift 2 --indirect-val-size 64 --indirect-test-size 64"

train_tiny() { # name [options...]
    local name=$1; shift
    "$P" train $TINY --warmup 2 --lr 3e-3 --eval-every 0 --out "$W/$name" "$@" >/dev/null 2>"$W/err" ||
        fail "train $*: exit $?: $(tail -2 "$W/err")"
}
# delta_check NAME K FROZEN: analyze bias's δ against Kθ_c mod 2π, equal (frozen) or not (learnt)
delta_check() {
    "$P" analyze bias --model "$W/$1" --out "$W/$1.csv" 2>"$W/err" || fail "analyze bias $1: $(cat "$W/err")"
    /usr/bin/python3 - "$W/$1.csv" "$2" "$3" <<'PY' || fail "$1: δ against offset $2 (frozen $3)"
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
K, frozen = int(sys.argv[2]), sys.argv[3] == "1"
assert len(rows) == 2 * 4 * 8, len(rows)
worst = 0
for r in rows:
    theta, delta = float(r["theta"]), float(r["delta"])
    a = math.fmod(K * theta, 2 * math.pi)
    want = a - 2 * math.pi if a > 0 else 0.0
    worst = max(worst, abs(delta - want))
print("largest |δ − Kθ wrapped|:", worst)
assert (worst < 1e-6) if frozen else (worst > 1e-3), worst
PY
}

train_tiny frozen --pe pope --pope-delta-init offset --pope-delta-offset 2 --pope-delta-train off --steps 30 --save-every 10 --keep 5
delta_check frozen 2 1
train_tiny learnt --pe pope --pope-delta-init offset --pope-delta-offset 2 --steps 30
delta_check learnt 2 0
"$P" train --resume "$W/frozen" --steps 40 >/dev/null 2>"$W/err" || fail "resume: $(cat "$W/err")"
grep -q '"pope-delta-train": "off"' "$W/frozen/config.json" || fail "config.json lacks pope-delta-train off"
delta_check frozen 2 1

# the probe: 4 checkpoints (10, 20, 30, 40; model.safetensors is the step-40 one) × 2 layers × 4 heads
"$P" analyze probe --model "$W/frozen" --threads 1 --out "$W/probe.csv" 2>"$W/err" || fail "probe: $(cat "$W/err")"
/usr/bin/python3 - "$W/probe.csv" <<'PY' || fail "probe CSV: $(head -3 "$W/probe.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [int(r["step"]) for r in rows[::8]] == [10, 20, 30, 40], [r["step"] for r in rows]
assert len(rows) == 32, len(rows)
for r in rows:
    assert int(r["delta_pref"]) == 2 and abs(float(r["delta_cos1"]) - 1) > 1e-3, r  # tuned to 2, not 1
    for k in ("acc", "prev_mass", "ans_src", "ans_prev", "ans_next", "ans_target", "ans_letter"):
        assert 0 <= float(r[k]) <= 1, (k, r)
    assert float(r["ans_src"]) > 0 and float(r["ans_letter"]) > 0, r
PY
train_tiny rope --pe rope --steps 10
"$P" analyze probe --model "$W/rope" --threads 1 --out - >"$W/rp.csv" 2>"$W/err" || fail "probe rope: $(cat "$W/err")"
[ "$(wc -l <"$W/rp.csv")" -eq 9 ] && ! cut -d, -f5 "$W/rp.csv" | tail -n +2 | grep -q . ||
    fail "probe rope: 8 rows with no δ columns expected: $(head -3 "$W/rp.csv")"

# clamp off: δ from 0 is pushed above 0 and stays visible there; with the clamp it is shown in range
train_tiny free --pe pope --pope-delta-init zero --pope-delta-clamp off --steps 30
train_tiny clamped --pe pope --pope-delta-init zero --steps 30
"$P" analyze bias --model "$W/free" --out "$W/free.csv" 2>"$W/err" || fail "analyze free: $(cat "$W/err")"
"$P" analyze bias --model "$W/clamped" --out "$W/clamped.csv" 2>"$W/err" || fail "analyze clamped: $(cat "$W/err")"
above() { awk -F, 'NR > 1 && $5 > 0 { n++ } END { print n + 0 }' "$1"; }
[ "$(above "$W/free.csv")" -gt 0 ] || fail "--pope-delta-clamp off: no δ above 0 after 30 steps from 0"
[ "$(above "$W/clamped.csv")" -eq 0 ] || fail "clamped δ shown above 0"

# shift 0 in the task, kept in config.json: the test split holds copies (+0)
train_tiny zero --pe rope --indirect-shift-zero on --steps 2
"$P" sample --model "$W/zero" --count 40 >"$W/sample" 2>"$W/err" || fail "sample: $(cat "$W/err")"
grep -q ', +0, ' "$W/sample" || fail "--indirect-shift-zero on: no +0 shift among 40 test examples"
train_tiny nozero --pe rope --steps 2
"$P" sample --model "$W/nozero" --count 40 >"$W/sample" 2>"$W/err" || fail "sample: $(cat "$W/err")"
grep -q ', +0, ' "$W/sample" && fail "a +0 shift without --indirect-shift-zero"

# documented options; the probe refuses other tasks' runs
h=$("$P" help train) || fail "help train"
for o in pope-delta-clamp pope-delta-train pope-delta-offset indirect-shift-zero; do
    grep -qE -- "^  --$o " <<<"$h" || fail "pelab help train lacks --$o"
done
grep -q "offset" <<<"$(grep -A2 -- '--pope-delta-init' <<<"$h")" || fail "help: --pope-delta-init lacks offset"
"$P" analyze probe --help | grep -q -- "--batches" || fail "analyze probe --help"
"$P" analyze probe >"$W/out" 2>"$W/err"; [ $? -eq 2 ] || fail "probe without --model: not a usage error"
# --batches costs time, not memory: the batches are filled one at a time (1,400 batches of 64 held
# at once would take about 20 MB more than 2 do)
"$P" train --task indirect --d-model 16 --heads 2 --layers 1 --batch 16 --threads 1 --indirect-min-len 6 \
    --indirect-max-len 10 --indirect-max-shift 2 --indirect-val-size 64 --indirect-test-size 64 --steps 2 \
    --eval-every 0 --out "$W/small" >/dev/null 2>"$W/err" || fail "train small: $(cat "$W/err")"
/usr/bin/python3 - "$P" "$W/small" <<'PY' || fail "analyze probe: memory grows with --batches"
import os, subprocess, sys
def peak_kb(batches):  # this child's own peak resident size (wait4's rusage)
    p = subprocess.Popen([sys.argv[1], "analyze", "probe", "--model", sys.argv[2], "--batches", str(batches),
                          "--batch", "64", "--out", "/dev/null", "--threads", "1"], stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    assert status == 0, "analyze probe --batches %d: status %d" % (batches, status)
    return usage.ru_maxrss
few, many = peak_kb(2), peak_kb(1400)
assert many < few + 5000, "peak %d KB with 2 batches, %d KB with 1400" % (few, many)
PY
exit 0
