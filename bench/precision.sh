#!/usr/bin/env bash
# --precision bf16 against fp32 (bench/RESULTS.md), run by `make bench` after the float32 tables:
# first the matrix products alone (build/bench/bench_gemm_bf16: every product of a training step's
# linear layers, and one 2048³ product, S, the bf16 ceiling), then whole training steps
# (build/bench/bench_train --precision): pelab fp32, pelab bf16 and the PyTorch twin under
# torch.autocast("cpu", bfloat16) (bench/twin_bench.py --precision bf16) alternating back to back,
# medians of BENCH_REPS runs, with the ratios bf16 / fp32 and bf16 / autocast twin and the bf16
# step's GFLOP/s as a fraction of S's and its tokens/s as a fraction of the step's bf16 roofline
# (bench_roofline: each product at the faster of bf16's and float32's rate at its shape). Writes
# bench/last_precision.json. Where bf16 cannot run (a
# build without oneDNN, a CPU without AVX512-BF16) it says so in one line and exits 0 (skipped);
# without python3-torch, one line and no twin column.
#
#   BENCH_CONFIGS="A B C D L M" configurations (bench/configs.h)
#   BENCH_PES="rope"          encodings
#   BENCH_REPS=3              training runs per precision (the products: 5 passes each)
#   BENCH_THREADS=N           threads (default: all cores)
set -u
cd "$(dirname "$0")/.."
configs=${BENCH_CONFIGS:-A B C D L M}
pes=${BENCH_PES:-rope}
reps=${BENCH_REPS:-3}
threads=${BENCH_THREADS:-$(nproc 2>/dev/null || echo 1)}
gemm_bin=build/bench/bench_gemm_bf16
train_bin=build/bench/bench_train
for b in "$gemm_bin" "$train_bin"; do
    [ -x "$b" ] || { echo "bench: $b is missing; run 'make bench'" >&2; exit 1; }
done
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
unset PELAB_BF16_EMULATION # the speed of the bf16 instructions, never of their emulation
if ! why=$("$gemm_bin" --config A --reps 1 --threads 1 2>&1 >/dev/null); then
    echo "skipped: bf16 benchmarks: ${why#bench_gemm_bf16: }"
    exit 0
fi
py=/usr/bin/python3
have_twin=1
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    have_twin=0
    echo "notice: python3-torch is not installed (run 'make deps'); bf16 without the autocast twin"
fi

. bench/lib.sh
export TRIAD_GBS=$(triad_gbs "$threads")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "null" || b == "null") print "null"; else printf "%.2f", a / b }'; }

echo "precision: $threads threads; products: medians of 5 passes; training: medians of $reps runs"
echo "$(./pelab --version 2>/dev/null | grep '^bf16 products:' || echo 'bf16 products: (./pelab not built)')"
json="[" ceiling=null
printf '%-7s %12s %12s %6s\n' products "fp32 GFLOP/s" "bf16 GFLOP/s" ratio
for c in $configs S; do
    out=$("$gemm_bin" --config "$c" --threads "$threads" --reps 5) || { echo "bench: bench_gemm_bf16 --config $c failed" >&2; exit 1; }
    f=$(field fp32_gflops <<<"$out") h=$(field bf16_gflops <<<"$out")
    [ "$c" = S ] && ceiling=$h
    printf '%-7s %12s %12s %6s\n' "$c" "$f" "$h" "$(ratio "$h" "$f")"
    [ "$json" != "[" ] && json+=","
    json+=$'\n'"  {\"kind\": \"products\", \"config\": \"$c\", \"fp32_gflops\": $f, \"bf16_gflops\": $h, \"threads\": $threads}"
done
echo
printf '%-7s %-5s %11s %11s %7s %12s %8s %10s %9s %10s\n' training pe "fp32 tok/s" "bf16 tok/s" bf16/fp32 \
    "twin bf16" bf16/twin "of ceiling" "roofline" "bf16 loss"
status=0
for c in $configs; do
    for pe in $pes; do
        runs_f="" runs_h="" runs_t="" runs_g="" loss_h=""
        for ((r = 1; r <= reps; r++)); do
            for p in fp32 bf16 twin; do
                if [ $p = twin ]; then
                    [ $have_twin = 1 ] || continue
                    out=$("$py" bench/twin_bench.py --config "$c" --pe "$pe" --threads "$threads" --precision bf16) || {
                        echo "bench: the autocast twin failed on config $c, pe $pe" >&2; status=1; continue; }
                    runs_t+="$(field tokens_per_s <<<"$out")"$'\n'
                    continue
                fi
                out=$("$train_bin" --config "$c" --pe "$pe" --threads "$threads" --precision "$p") || {
                    echo "bench: bench_train --config $c --pe $pe --precision $p failed" >&2; status=1; continue; }
                x=$(field tokens_per_s <<<"$out")
                if [ $p = fp32 ]; then runs_f+="$x"$'\n'
                else runs_h+="$x"$'\n' runs_g+="$(field gflops <<<"$out")"$'\n' loss_h=$(field loss <<<"$out"); fi
            done
        done
        f=$(printf '%s' "$runs_f" | median) h=$(printf '%s' "$runs_h" | median)
        t=$(printf '%s' "$runs_t" | median) g=$(printf '%s' "$runs_g" | median)
        bound=$(roofline "$c" "$pe" "$threads" | field bound_bf16_tokens_per_s)
        printf '%-7s %-5s %11s %11s %7s %12s %8s %10s %9s %10s\n' "$c" "$pe" "$f" "$h" "$(ratio "$h" "$f")" "$t" \
            "$(ratio "$h" "$t")" "$(ratio "$g" "$ceiling")" "$(ratio "$h" "${bound:-null}")" "$loss_h"
        json+=$',\n'"  {\"kind\": \"training\", \"config\": \"$c\", \"pe\": \"$pe\", \"fp32_tokens_per_s\": $f, \"bf16_tokens_per_s\": $h, \"twin_autocast_tokens_per_s\": $t, \"bf16_gflops\": $g, \"bf16_ceiling_gflops\": $ceiling, \"bf16_roofline_tokens_per_s\": ${bound:-null}, \"threads\": $threads}"
    done
done
json+=$'\n]\n'
tmp=$(mktemp bench/last_precision.json.XXXXXX) && printf '%s' "$json" >"$tmp" && mv "$tmp" bench/last_precision.json &&
    echo "wrote bench/last_precision.json"
exit $status
