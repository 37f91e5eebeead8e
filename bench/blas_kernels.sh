#!/usr/bin/env bash
# What OpenBLAS's choice of kernels costs: the float32 product (bench_sgemm, 1024³ on one thread and
# 2048³ on all cores) and training steps (bench_train, configurations B and C, all cores) with
# each OpenBLAS core this CPU can run, from its generic "Prescott" SSE3 kernels (what OpenBLAS
# 0.3.21 falls back to on a CPU model it does not know) to the best one the CPU's instructions
# allow (what pelab runs: src/kernels/cpu/blas_kernels.h), and oneDNN's sgemm beside them. Medians
# of BENCH_REPS (3) runs, back to back; the header names the CPU, the commit and the library.
#
#   bash bench/blas_kernels.sh          (after make bench: build/bench/bench_sgemm, bench_train)
set -u
cd "$(dirname "$0")/.."
reps=${BENCH_REPS:-3}
threads=$(nproc 2>/dev/null || echo 1)
sgemm=build/bench/bench_sgemm train=build/bench/bench_train
[ -x "$sgemm" ] && [ -x "$train" ] || { echo "bench: $sgemm or $train is missing; run 'make bench'" >&2; exit 1; }
./pelab --version | grep -q "^matrix products: OpenBLAS" || { echo "bench: pelab was built without OpenBLAS" >&2; exit 1; }
best=$(env -u OPENBLAS_CORETYPE bash scripts/blas-core.sh ./pelab)
. bench/lib.sh

echo "CPU: $(cpu_model), $threads cores; commit $(commit_of);" \
     "$(./pelab --version | sed -n 's/^matrix products: //p'); medians of $reps"
# the cores to try: the generic one, then each level up to the best (OpenBLAS refuses a core the
# CPU cannot run and falls back, so a level above the CPU's is not tried)
cores="Prescott"
for c in Sandybridge Haswell SkylakeX Cooperlake; do
    cores+=" $c"
    [ "$c" = "$best" ] && break
done
printf '%-12s %12s %12s %12s %12s %14s\n' core "sgemm 1 thr" "sgemm $threads thr" "oneDNN $threads thr" "B tok/s" "C tok/s"
for c in $cores; do
    run() { OPENBLAS_CORETYPE=$c "$@"; }
    s1="" s2="" d2="" b="" t=""
    for ((r = 1; r <= reps; r++)); do
        s1+="$(run "$sgemm" --threads 1 --size 1024 | field gflops)"$'\n'
        out=$(run "$sgemm" --threads "$threads")
        s2+="$(printf '%s\n' "$out" | field gflops)"$'\n'
        d2+="$(printf '%s\n' "$out" | field onednn_gflops)"$'\n'
        b+="$(run "$train" --config B --pe rope --threads "$threads" | field tokens_per_s)"$'\n'
        t+="$(run "$train" --config C --pe rope --threads "$threads" | field tokens_per_s)"$'\n'
    done
    ran=$(OPENBLAS_CORETYPE=$c ./pelab --version | sed -n 's/^matrix products: OpenBLAS [^ ]* \([^ ]*\) kernels.*/\1/p')
    label=$c
    [ "$ran" != "$c" ] && label="$c($ran)"
    [ "$c" = "$best" ] && label="$label*"
    printf '%-12s %12s %12s %12s %12s %14s\n' "$label" "$(printf '%s' "$s1" | median)" "$(printf '%s' "$s2" | median)" \
        "$(printf '%s' "$d2" | median)" "$(printf '%s' "$b" | median)" "$(printf '%s' "$t" | median)"
done
echo "(* the core pelab runs here; sgemm and oneDNN in GFLOP/s; B and C: bench_train tokens/s, rope)"
