#!/usr/bin/env bash
# What subnormal floats cost: the same short training run with them kept (PELAB_SUBNORMALS=keep,
# IEEE gradual underflow) and flushed to zero (pelab's default, src/kernels/cpu/threads.c), one
# thread, BENCH_REPS (3) times each, back to back; prints the CPU seconds of each run, their
# medians and the ratio, and whether the two modes end at the same loss.
#
#   bash bench/subnormals.sh TRAIN_OPTIONS...     (after make: ./pelab)
#
# The cost depends on the model: a fresh one makes almost none; a trained model whose attention
# scores have spread makes many (e^(S − m) underflows). What bench/RESULTS.md records is a SeqPE
# fine-tune from a pre-trained run of make qa-table2:
#   bash bench/subnormals.sh --task qa --seq-len 256 --qa-digits 2 --batch 16 --lr 2e-3 \
#       --warmup 30 --qa-val-size 64 --qa-test-size 64 --eval-every 0 --steps 20 --pe seqpe \
#       --seqpe-reg-profile authors --init-from runs/qa-table2/pre/seqpe+seqpe-reg-profile-authors-s1
set -u
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
reps=${BENCH_REPS:-3}
[ -x ./pelab ] || { echo "bench: ./pelab is missing; run 'make'" >&2; exit 1; }
. bench/lib.sh
blas_core_env
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "CPU: $(cpu_model); commit $(commit_of); 1 thread; medians of $reps; options: $*"
declare -A med loss
for mode in keep flush; do
    secs=()
    for ((r = 1; r <= reps; r++)); do
        rm -rf "$out/run"
        # CPU seconds (user + system) of the whole run: steady under other load, unlike wall time
        TIMEFORMAT='%U %S'
        { time PELAB_SUBNORMALS=$mode ./pelab train "$@" --threads 1 --out "$out/run" \
              >/dev/null 2>"$out/err"; } 2>"$out/time" ||
            { echo "bench: the run failed:" >&2; cat "$out/err" >&2; exit 1; }
        read -r user sys <"$out/time"
        secs+=("$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')")
        loss[$mode]=$(tr -d ' \n' <"$out/run/summary.json" | tr ',' '\n' | field train_loss)
    done
    med[$mode]=$(printf '%s\n' "${secs[@]}" | median)
    printf 'subnormals %-6s CPU s: %s  median %s  (final training loss %s)\n' "$mode" "${secs[*]}" "${med[$mode]}" "${loss[$mode]}"
done
awk -v k="${med[keep]}" -v f="${med[flush]}" 'BEGIN { printf "kept / flushed: %.2fx\n", k / f }'
echo "the same final loss in both modes: $([ "${loss[keep]}" = "${loss[flush]}" ] && echo yes || echo no)"
