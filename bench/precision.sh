#!/usr/bin/env bash
# --precision bf16 against fp32 (bench/RESULTS.md): first the matrix products alone
# (build/bench/bench_gemm_bf16: every product of a training step's linear layers, and one 2048³
# product, S), then whole training steps (build/bench/bench_train --precision), fp32 and bf16
# alternating back to back, medians of BENCH_REPS runs, with the ratio bf16 / fp32. Writes
# bench/last_precision.json. Needs a build with oneDNN and a CPU with AVX512-BF16; says so in one
# line and exits 1 otherwise. Run `make bench` first (it builds both programs).
#
#   BENCH_CONFIGS="A B C D"   configurations (bench/bench_train.c)
#   BENCH_PES="rope"          encodings
#   BENCH_REPS=3              training runs per precision (the products: 5 passes each)
#   BENCH_THREADS=N           threads (default: all cores)
set -u
cd "$(dirname "$0")/.."
configs=${BENCH_CONFIGS:-A B C D}
pes=${BENCH_PES:-rope}
reps=${BENCH_REPS:-3}
threads=${BENCH_THREADS:-$(nproc 2>/dev/null || echo 1)}
gemm_bin=build/bench/bench_gemm_bf16
train_bin=build/bench/bench_train
for b in "$gemm_bin" "$train_bin"; do
    [ -x "$b" ] || { echo "bench: $b is missing; run 'make bench'" >&2; exit 1; }
done
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

field() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p" | tail -n 1; }
median() { sort -g | awk '{ x[NR] = $1 } END { if (NR == 0) print "null";
    else if (NR % 2) print x[(NR + 1) / 2]; else printf "%.1f\n", (x[NR / 2] + x[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "null" || b == "null") print "null"; else printf "%.2f", a / b }'; }

echo "precision: $threads threads; products: medians of 5 passes; training: medians of $reps runs"
json="["
printf '%-7s %12s %12s %6s\n' products "fp32 GFLOP/s" "bf16 GFLOP/s" ratio
for c in $configs S; do
    out=$("$gemm_bin" --config "$c" --threads "$threads" --reps 5) || { echo "bench: bench_gemm_bf16 --config $c failed" >&2; exit 1; }
    f=$(field fp32_gflops <<<"$out") h=$(field bf16_gflops <<<"$out")
    printf '%-7s %12s %12s %6s\n' "$c" "$f" "$h" "$(ratio "$h" "$f")"
    [ "$json" != "[" ] && json+=","
    json+=$'\n'"  {\"kind\": \"products\", \"config\": \"$c\", \"fp32_gflops\": $f, \"bf16_gflops\": $h, \"threads\": $threads}"
done
echo
printf '%-7s %-5s %12s %12s %6s %10s %10s\n' training pe "fp32 tok/s" "bf16 tok/s" ratio "fp32 loss" "bf16 loss"
status=0
for c in $configs; do
    for pe in $pes; do
        runs_f="" runs_h="" loss_f="" loss_h=""
        for ((r = 1; r <= reps; r++)); do
            for p in fp32 bf16; do
                out=$("$train_bin" --config "$c" --pe "$pe" --threads "$threads" --precision "$p") || {
                    echo "bench: bench_train --config $c --pe $pe --precision $p failed" >&2; status=1; continue; }
                x=$(field tokens_per_s <<<"$out")
                if [ $p = fp32 ]; then runs_f+="$x"$'\n' loss_f=$(field loss <<<"$out"); else runs_h+="$x"$'\n' loss_h=$(field loss <<<"$out"); fi
            done
        done
        f=$(printf '%s' "$runs_f" | median) h=$(printf '%s' "$runs_h" | median)
        printf '%-7s %-5s %12s %12s %6s %10s %10s\n' "$c" "$pe" "$f" "$h" "$(ratio "$h" "$f")" "$loss_f" "$loss_h"
        json+=$',\n'"  {\"kind\": \"training\", \"config\": \"$c\", \"pe\": \"$pe\", \"fp32_tokens_per_s\": $f, \"bf16_tokens_per_s\": $h, \"threads\": $threads}"
    done
done
json+=$'\n]\n'
tmp=$(mktemp bench/last_precision.json.XXXXXX) && printf '%s' "$json" >"$tmp" && mv "$tmp" bench/last_precision.json &&
    echo "wrote bench/last_precision.json"
exit $status
