#!/usr/bin/env bash
# Long-context evaluation, tiled attention against the reference (and the PyTorch twin if asked):
# configuration C (V 8192, D 384, 6 layers, 6 heads), batch 1, one process per (kernel, T) so
# ru_maxrss is that run's alone. Prints a Markdown table (bench/RESULTS.md holds a measured one).
#
#   EVAL_TS="1024 2048 4096 8192"   context lengths
#   EVAL_KERNELS="tiled ref"        kernels
#   EVAL_PE=rope                    encoding
#   EVAL_FORWARD=eval               eval: the evaluation-only forward; train: the training
#                                   forward, which keeps every activation for a backward pass
#   EVAL_THREADS=N                  threads (default: all cores)
#   EVAL_TWIN_TS=""                 lengths at which the PyTorch twin's forward is timed too
#                                   (bench/twin_bench.py --eval-T; it materialises (H,T,T)
#                                   scores per layer: about 5 GiB at 8192)
#   EVAL_MEM_GIB=16                 address-space cap of each run, so a reference run that cannot
#                                   fit fails with a message instead of pushing the machine into
#                                   swap or the OOM killer
# Every run first does one untimed forward pass: the first touch of freshly allocated activations
# costs seconds per GiB on this virtual machine (T 4096, tiled: 11.5 s cold, 3.8 s warm), and an
# evaluation of many batches pays it once. Lengths up to 2048 then time 2 passes, longer ones 1.
set -u
cd "$(dirname "$0")/.."
bin=build/bench/bench_eval
[ -x "$bin" ] || { echo "eval_sweep: $bin is missing; run 'make build/bench/bench_eval'" >&2; exit 1; }
ts=${EVAL_TS:-1024 2048 4096 8192}
kernels=${EVAL_KERNELS:-tiled ref}
pe=${EVAL_PE:-rope}
forward=${EVAL_FORWARD:-eval}
twin_ts=${EVAL_TWIN_TS:-}
threads=${EVAL_THREADS:-$(nproc 2>/dev/null || echo 1)}
cap_gib=${EVAL_MEM_GIB:-16}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
. bench/lib.sh
echo "| T | kernel | tokens/s | forward (s) | peak RSS (MiB) |"
echo "|---|---|---|---|---|"
for T in $ts; do
    for k in $kernels; do
        if [ "$T" -le 2048 ]; then reps=2; else reps=1; fi
        out=$( (ulimit -v $((cap_gib * 1024 * 1024)); "$bin" --T "$T" --attention "$k" --pe "$pe" \
                 --reps $reps --warmup 1 --threads "$threads" --forward "$forward") 2>&1 )
        if printf '%s' "$out" | grep -q tokens_per_s; then
            printf '| %s | %s | %s | %s | %s |\n' "$T" "$k" "$(printf '%s' "$out" | field tokens_per_s)" \
                "$(printf '%s' "$out" | field forward_s)" "$(printf '%s' "$out" | field peak_rss_mib)"
        else
            printf '| %s | %s | — | — | does not fit in %s GiB: %s |\n' "$T" "$k" "$cap_gib" \
                "$(printf '%s' "$out" | tail -n 1 | sed 's/^bench_eval: //')"
        fi
    done
done
for T in $twin_ts; do
    out=$(/usr/bin/python3 bench/twin_bench.py --config C --pe "$pe" --eval-T "$T" --threads "$threads" 2>&1)
    if printf '%s' "$out" | grep -q tokens_per_s; then
        printf '| %s | PyTorch twin | %s | %s | %s |\n' "$T" "$(printf '%s' "$out" | field tokens_per_s)" \
            "$(printf '%s' "$out" | field forward_s)" "$(printf '%s' "$out" | field peak_rss_mib)"
    else
        printf '| %s | PyTorch twin | — | — | failed: %s |\n' "$T" "$(printf '%s' "$out" | tail -n 1)"
    fi
done
