#!/usr/bin/env bash
# `make bench`: training tokens/s of pelab and of the PyTorch twin on the same configurations,
# run back to back (pelab, twin, pelab, twin, ...), medians of BENCH_REPS repetitions, printed as a
# table with the ratio pelab / twin, pelab's GFLOP/s (bench_train counts a step's arithmetic) and
# their fraction of the sgemm rate measured first with as many threads (bench_sgemm), and pelab's
# tokens/s as a fraction of the step's roofline (bench_roofline: its products at the rates this
# machine reaches at their shapes, its element-wise and optimiser passes at bench_stream's
# bandwidth), written to bench/last.json (a list of objects). Then greedy generation at long contexts with and without
# the KV cache (bench_generate, configuration C): tokens/s of each and their ratio, written to
# bench/last_generate.json. Last, --precision bf16 against float32 and against the twin under
# torch.autocast (bench/precision.sh, bench/last_precision.json; skipped in one line without bf16).
#
#   BENCH_CONFIGS="A B C D I L M" configurations to run (bench/configs.h; I: images, L: the
#                             length-generalisation model, M: the indirect mid model)
#   BENCH_PES="rope pope"     encodings to run
#   BENCH_EXTRA="L:fire:0 L:fire:256"  more rows, CONFIG:PE:N, N for --random-positions (0: pos = t)
#   BENCH_REPS=3              repetitions of each measurement
#   BENCH_THREADS=N           threads for both (default: all cores)
#   BENCH_GENERATE="C:1024 C:8192 D:1024"  configuration:context rows of the generation benchmark ("none": skip it)
#   BENCH_GEN_TOKENS="16 3"   tokens generated (and timed) with the cache and without
#                             (bench/generate.sh runs that part alone)
set -u
cd "$(dirname "$0")/.."
configs=${BENCH_CONFIGS:-A B C D I L M}
pes=${BENCH_PES:-rope pope}
extra=${BENCH_EXTRA-L:fire:0 L:fire:256}
reps=${BENCH_REPS:-3}
threads=${BENCH_THREADS:-$(nproc 2>/dev/null || echo 1)}
py=/usr/bin/python3
pelab_bin=build/bench/bench_train
sgemm_bin=build/bench/bench_sgemm

if [ ! -x "$pelab_bin" ] || [ ! -x "$sgemm_bin" ]; then
    echo "bench: $pelab_bin or $sgemm_bin is missing; run 'make bench'" >&2
    exit 1
fi
have_twin=1
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    have_twin=0
    echo "notice: python3-torch is not installed (run 'make deps'); reporting pelab alone, without the PyTorch twin"
fi

. bench/lib.sh
tps() { field tokens_per_s; }

blas_core_env # pelab and the twin on the same OpenBLAS kernels
echo "CPU: $(cpu_model)"
export TRIAD_GBS=$(triad_gbs "$threads") # once, for every roofline of this script and those it runs
echo "triad bandwidth (bench_stream, 256 MiB, $threads threads): $TRIAD_GBS GB/s"
echo "pelab: $pelab_bin, twin: PyTorch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)," \
     "$threads threads, $reps repetitions (medians)"
sgemm_json=$("$sgemm_bin" --threads "$threads")
sgemm=$(printf '%s\n' "$sgemm_json" | field gflops)
openblas=$(printf '%s\n' "$sgemm_json" | field openblas_gflops)
peak=$(printf '%s\n' "$sgemm_json" | field peak_gflops_2fma)
echo "sgemm (2048³, $threads threads): $sgemm GFLOP/s on $(printf '%s\n' "$sgemm_json" | sed -n 's/.*"kernels":"\([^"]*\)".*/\1/p')" \
     "(OpenBLAS's sgemm ${openblas:-not built}; peak at the nominal clock with 2 FMA units a core: ${peak:-unknown})"
status=0
rows=()
json="["
specs=()
for c in $configs; do for pe in $pes; do specs+=("$c:$pe:0"); done; done
for x in $extra; do specs+=("$x"); done
for spec in "${specs[@]}"; do
    IFS=: read -r c pe rp <<<"$spec"
    rp=${rp:-0} label=$pe
    [ "$rp" != 0 ] && label=$pe+rp$rp
    p_runs="" t_runs="" g_runs=""
    for ((r = 1; r <= reps; r++)); do
        out=$("$pelab_bin" --config "$c" --pe "$pe" --threads "$threads" --random-positions "$rp") || {
            echo "bench: pelab failed on config $c, pe $label" >&2; status=1; }
        x=$(printf '%s\n' "$out" | tps); [ -n "$x" ] && p_runs+="$x"$'\n'
        x=$(printf '%s\n' "$out" | field gflops); [ -n "$x" ] && g_runs+="$x"$'\n'
        if [ $have_twin = 1 ]; then
            out=$("$py" bench/twin_bench.py --config "$c" --pe "$pe" --threads "$threads" --random-positions "$rp") || {
                echo "bench: the twin failed on config $c, pe $label" >&2; status=1; }
            x=$(printf '%s\n' "$out" | tps); [ -n "$x" ] && t_runs+="$x"$'\n'
        fi
    done
    bound=$(roofline "$c" "$pe" "$threads" | field bound_fp32_tokens_per_s)
    p=$(printf '%s' "$p_runs" | median)
    t=$(printf '%s' "$t_runs" | median)
    g=$(printf '%s' "$g_runs" | median)
    ratio=null frac=null roof=null
    [ "$p" != null ] && [ -n "$bound" ] && roof=$(awk -v a="$p" -v b="$bound" 'BEGIN { printf "%.2f", a / b }')
    [ "$p" != null ] && [ "$t" != null ] && ratio=$(awk -v a="$p" -v b="$t" 'BEGIN { printf "%.3f", a / b }')
    [ "$g" != null ] && [ -n "$sgemm" ] && frac=$(awk -v a="$g" -v b="$sgemm" 'BEGIN { printf "%.2f", a / b }')
    rows+=("$(printf '%-6s %-12s %14s %14s %7s %8s %6s %9s' "$c" "$label" "$p" "$t" "$ratio" "$g" "$frac" "$roof")")
    echo "  $c $label: pelab $p tok/s ($g GFLOP/s, $frac of sgemm, $roof of the roofline's ${bound:-?}), twin $t tok/s, ratio $ratio" >&2
    [ "$json" != "[" ] && json+=","
    json+=$(printf '\n  {"config": "%s", "pe": "%s", "random_positions": %s, "pelab_tokens_per_s": %s, "twin_tokens_per_s": %s, "ratio": %s, "pelab_gflops": %s, "sgemm_gflops": %s, "sgemm_fraction": %s, "roofline_tokens_per_s": %s, "roofline_fraction": %s, "threads": %s}' \
            "$c" "$pe" "$rp" "$p" "$t" "$ratio" "$g" "${sgemm:-null}" "$frac" "${bound:-null}" "$roof" "$threads")
done
json+=$'\n]\n'

echo
printf '%-6s %-12s %14s %14s %7s %8s %6s %9s\n' config pe "pelab tok/s" "twin tok/s" ratio GFLOP/s sgemm "roofline"
printf '%s\n' "${rows[@]}"
tmp=$(mktemp bench/last.json.XXXXXX) && printf '%s' "$json" >"$tmp" && mv "$tmp" bench/last.json &&
    echo "wrote bench/last.json"

# ---- generation: tokens/s with the KV cache and recomputing the context (bench/generate.sh) ----
BENCH_THREADS=$threads bash bench/generate.sh || status=1

# ---- bf16: against pelab's float32 and the autocast twin (bench/precision.sh) ----
echo
BENCH_THREADS=$threads bash bench/precision.sh || status=1
exit $status
