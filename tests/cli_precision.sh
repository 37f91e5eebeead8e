#!/usr/bin/env bash
# --precision fp32|bf16 on train, eval and sample (pelab/precision.h).
#   - Where bf16 cannot run it is refused in one line with exit 2 and nothing written. The test
#     simulates a CPU without AVX512-BF16 with oneDNN's own ONEDNN_MAX_CPU_ISA=AVX512_CORE, which
#     caps the instructions oneDNN will use (and pelab asks oneDNN what it may use), with
#     PELAB_BF16_EMULATION unset; with it, such a CPU runs bf16 on oneDNN's emulation, said in one
#     line (tests/run.sh sets it on an AVX-512 CPU without AVX512-BF16, so the rest runs there).
#   - fp32 is the default and --precision fp32 changes no bit of a run.
#   - The first bf16 run of a process measures bf16 against float32 once per CPU (cached) and says
#     so in one line where bf16 is the slower.
#   - A bf16 run records its precision in config.json, trains to losses near the fp32 run's but
#     not equal to them, and resumes bit for bit; a run is evaluated in either precision.
# Skips (77) after the refusal checks when this machine or build cannot run bf16.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 4 --threads 2 --indirect-val-size 32 --indirect-test-size 32"
S="$TINY --warmup 5 --decay-steps 16 --log-every 1 --eval-every 4 --eval-batches 1"

train $S --pe rope --steps 4 --out "$W/fp32run"
# On a CPU without AVX512-BF16 (as oneDNN sees it), bf16 is refused: exit 2, one line on stderr
# naming AVX512-BF16 (or, in a build without oneDNN, saying so), no run directory.
NO_BF16=(env -u PELAB_BF16_EMULATION ONEDNN_MAX_CPU_ISA=AVX512_CORE "$P")
REFUSAL="^pelab: --precision bf16( needs a CPU with AVX512-BF16|: this pelab was built without oneDNN)"
expect 2 "$REFUSAL" -E -n "$W/refused" -c -- "${NO_BF16[@]}" train $S --pe rope --steps 4 --precision bf16 --out "$W/refused"
expect 2 "$REFUSAL" -E -c -- "${NO_BF16[@]}" eval --model "$W/fp32run" --precision bf16
expect 2 "$REFUSAL" -E -c -- "${NO_BF16[@]}" sample --model "$W/fp32run" --precision bf16 --count 1
# where the refusal offers the emulation (a oneDNN build on AVX-512), the emulation runs, said once
if grep -qF "(PELAB_BF16_EMULATION=1 runs its slower emulation)" "$W/e"; then
    PELAB_BF16_EMULATION=1 ONEDNN_MAX_CPU_ISA=AVX512_CORE "$P" train $S --pe rope --steps 2 --precision bf16 \
        --out "$W/emulated" >/dev/null 2>"$W/err" || fail "bf16 on the emulation: $(cat "$W/err")"
    [ "$(grep -c "^pelab: --precision bf16 on oneDNN's emulation" "$W/err")" -eq 1 ] ||
        fail "the emulation is not said in one line: $(cat "$W/err")"
fi
"$P" train $S --pe rope --steps 4 --precision fp16 --out "$W/bad" 2>"$W/err" && fail "--precision fp16 accepted"
grep -q "fp32|bf16" "$W/err" || fail "--precision fp16: $(cat "$W/err")"

# fp32: the default, recorded, and the same bits as without the option
train $S --pe rope --steps 8 --out "$W/default"
train $S --pe rope --steps 8 --precision fp32 --out "$W/fp32"
grep -q '"precision": "fp32"' "$W/default/config.json" || fail "config.json does not record precision fp32"
diff <(losses "$W/default") <(losses "$W/fp32") >/dev/null || fail "--precision fp32 changed the losses"
same_weights "$W/default/model.safetensors" "$W/fp32/model.safetensors" || fail "--precision fp32 changed the weights"

if ! "$P" train $S --pe rope --steps 1 --precision bf16 --out "$W/probe" 2>"$W/err" >/dev/null; then
    grep -q "precision bf16" "$W/err" || fail "bf16 failed for another reason: $(cat "$W/err")"
    echo "skipped: $(sed 's/^pelab: //' "$W/err")"
    exit 77
fi

# the bf16 probe (src/kernels/cpu/bf16_probe.c): one product measured both ways, kept per CPU, bf16
# kernels and thread count in $XDG_CACHE_HOME/pelab/bf16-probe and read back from there; a notice
# when bf16 is the slower (the cached speedups below are written by hand: no timing is tested);
# none on the emulation, whose slowness is said already
probe=$W/cache/pelab/bf16-probe
if [ -z "${PELAB_BF16_EMULATION:-}" ]; then
    [ -f "$probe" ] || fail "no probe measured in $probe"
    /usr/bin/python3 - "$probe" "$("$P" --version 2>/dev/null | sed -n 's/^bf16 products: //p')" <<'EOF' || fail "the probe's line: $(cat "$probe")"
import sys
cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
f = open(sys.argv[1]).read().rstrip("\n").split("\t")
assert f[:3] == [cpu, sys.argv[2], "2"] and 0 < float(f[3]) < 1e3, f
EOF
    key=$(cut -f1-3 "$probe")
    for s in 0.500 2.000; do
        printf '%s\t%s\n' "$key" "$s" >"$probe"
        "$P" eval --model "$W/fp32run" --precision bf16 --threads 2 >/dev/null 2>"$W/err" || fail "eval bf16: $(cat "$W/err")"
        [ "$(cat "$probe")" = "$(printf '%s\t%s' "$key" "$s")" ] || fail "the cached probe was measured again"
        if [ $s = 0.500 ]; then
            grep -q "^pelab: notice: --precision bf16 is slower than float32 on this CPU: its products run at 0.50x float32's here" "$W/err" ||
                fail "bf16 cached as slower, and no notice: $(cat "$W/err")"
        else
            grep -q "slower than float32" "$W/err" && fail "bf16 cached as faster, and a notice: $(cat "$W/err")"
        fi
    done
    printf 'garbage\n' >"$probe"
    "$P" eval --model "$W/fp32run" --precision bf16 --threads 2 >/dev/null 2>&1 && [ "$(cut -f1-3 "$probe")" = "$key" ] ||
        fail "a damaged probe file was not measured again: $(cat "$probe")"
else
    [ -e "$probe" ] && fail "the emulation was probed"
fi

# --version names the instructions of both kinds of bf16 product; oneDNN's cap below AMX keeps the
# attention tiles off AMX too (one setting for every bf16 product)
"$P" --version 2>/dev/null | grep -qE "^bf16 products: linear layers: oneDNN on .*; attention tiles: " ||
    fail "--version does not name the bf16 kernels: $("$P" --version 2>&1)"
if [ -z "${PELAB_BF16_EMULATION:-}" ]; then
    ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 "$P" --version 2>/dev/null |
        grep -qx "bf16 products: linear layers: oneDNN on AVX-512 with BF16; attention tiles: AVX512-BF16" ||
        fail "ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16: $(ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 "$P" --version 2>&1)"
fi

for extra in "--pe pope" "--pe rope --dropout 0.1 --accum 2" "--pe fox" "--pe cope"; do
    rm -rf "$W"/full "$W"/part "$W"/f32
    train $S $extra --precision bf16 --steps 16 --save-every 8 --out "$W/full"
    grep -q '"precision": "bf16"' "$W/full/config.json" || fail "$extra: config.json does not record bf16"
    train $S $extra --precision bf16 --steps 8 --out "$W/part"
    train --resume "$W/part" --steps 16
    diff <(losses "$W/full") <(losses "$W/part") >"$W/diff" ||
        fail "$extra: resumed bf16 run differs from the uninterrupted one: $(head -5 "$W/diff")"
    same_weights "$W/full/model.safetensors" "$W/part/model.safetensors" ||
        fail "$extra: final weights differ after the bf16 resume"
    # bf16 against fp32, same seed: near (1 % at step 1, before the runs part ways), not equal
    train $S $extra --steps 16 --out "$W/f32"
    diff <(losses "$W/full") <(losses "$W/f32") >/dev/null && fail "$extra: bf16 losses equal the fp32 ones"
    /usr/bin/python3 - "$W/full/log.jsonl" "$W/f32/log.jsonl" <<'EOF' || fail "$extra: bf16 step-1 loss not within 1 % of fp32"
import json, sys
a, b = (json.loads(open(p).readline())["loss"] for p in sys.argv[1:3])
print(a, b)
sys.exit(0 if abs(a - b) <= 0.01 * abs(b) else 1)
EOF
done
# a bf16 run may go on in float32 (the way on a machine without bf16): recorded in config.json
"$P" train --resume "$W/full" --steps 18 --precision fp32 >/dev/null 2>"$W/err" || fail "a bf16 run resumed in fp32: $(cat "$W/err")"
[ "$(json "$W/full/config.json" 'j["training"]["precision"]')" = "'fp32'" ] || fail "the fp32 resume is not recorded"

# a run evaluated in either precision: both close to the fp32 evaluation, bf16 not equal to it
for run in full f32; do
    "$P" eval --model "$W/$run" --json >"$W/e32" || fail "eval $run fp32: exit $?"
    "$P" eval --model "$W/$run" --json --precision bf16 >"$W/e16" || fail "eval $run bf16: exit $?"
    /usr/bin/python3 - "$W/e32" "$W/e16" <<'EOF' || fail "eval $run: bf16 loss not within 1 % of fp32, or equal to it"
import json, sys
a, b = (json.load(open(p))["loss"] for p in sys.argv[1:3])
print(a, b)
sys.exit(0 if a != b and abs(a - b) <= 0.01 * abs(a) else 1)
EOF
done
"$P" sample --model "$W/full" --precision bf16 --count 2 >"$W/out" 2>"$W/err" || fail "sample bf16: $(cat "$W/err")"
grep -q " of 2 right" "$W/out" || fail "sample bf16: $(tail -2 "$W/out")"
echo "ok"
