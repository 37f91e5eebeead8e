#!/usr/bin/env bash
# What OpenBLAS's choice of kernels costs: its float32 product (bench_sgemm's OpenBLAS column,
# 1024³ on one thread and 2048³ on all cores) with each OpenBLAS core this CPU can run, from its
# generic "Prescott" SSE3 kernels (what OpenBLAS 0.3.21 falls back to on a CPU model it does not
# know) to the best one the CPU's instructions allow (what pelab runs: src/kernels/cpu/blas_kernels.h),
# and pelab's own float32 product beside them (oneDNN's sgemm in a build with oneDNN, whichever
# OpenBLAS core is set). With oneDNN, OpenBLAS runs pelab's one-row products (decoding) and the
# float64 build's: a training step no longer depends on its core. Medians of BENCH_REPS (3) runs,
# back to back; the header names the CPU, the commit and the library.
#
#   bash bench/blas_kernels.sh          (after make bench: build/bench/bench_sgemm)
set -u
cd "$(dirname "$0")/.."
reps=${BENCH_REPS:-3}
threads=$(nproc 2>/dev/null || echo 1)
sgemm=build/bench/bench_sgemm
[ -x "$sgemm" ] || { echo "bench: $sgemm is missing; run 'make bench'" >&2; exit 1; }
./pelab --version | grep -q "^BLAS: OpenBLAS" || { echo "bench: pelab was built without OpenBLAS" >&2; exit 1; }
best=$(env -u OPENBLAS_CORETYPE bash scripts/blas-core.sh ./pelab)
. bench/lib.sh

echo "CPU: $(cpu_model), $threads cores; commit $(commit_of);" \
     "$(./pelab --version | sed -n 's/^BLAS: //p'); medians of $reps"
# the cores to try: the generic one, then each level up to the best (OpenBLAS refuses a core the
# CPU cannot run and falls back, so a level above the CPU's is not tried)
cores="Prescott"
for c in Sandybridge Haswell SkylakeX Cooperlake; do
    cores+=" $c"
    [ "$c" = "$best" ] && break
done
printf '%-12s %14s %14s %14s\n' core "OpenBLAS 1 thr" "OpenBLAS $threads thr" "pelab $threads thr"
for c in $cores; do
    run() { OPENBLAS_CORETYPE=$c "$@"; }
    s1="" s2="" p2=""
    for ((r = 1; r <= reps; r++)); do
        s1+="$(run "$sgemm" --threads 1 --size 1024 | field openblas_gflops)"$'\n'
        out=$(run "$sgemm" --threads "$threads")
        s2+="$(printf '%s\n' "$out" | field openblas_gflops)"$'\n'
        p2+="$(printf '%s\n' "$out" | field gflops)"$'\n'
    done
    ran=$(OPENBLAS_CORETYPE=$c ./pelab --version | sed -n 's/^BLAS: OpenBLAS [^ ]* \([^ ]*\) kernels.*/\1/p')
    label=$c
    [ "$ran" != "$c" ] && label="$c($ran)"
    [ "$c" = "$best" ] && label="$label*"
    printf '%-12s %14s %14s %14s\n' "$label" "$(printf '%s' "$s1" | median)" "$(printf '%s' "$s2" | median)" \
        "$(printf '%s' "$p2" | median)"
done
echo "(* the core pelab runs here; GFLOP/s; pelab: $(./pelab --version | sed -n 's/^float32 products: //p'))"
