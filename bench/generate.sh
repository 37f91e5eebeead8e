#!/usr/bin/env bash
# Greedy generation tokens/s at long contexts with the KV cache and recomputing the whole context
# for every token (build/bench/bench_generate, configurations C and D, rope), and with the cache reading
# bf16 weights, one run each, printed as a table with the speedups and each cached rate as a
# fraction of its memory-bandwidth bound, and written to bench/last_generate.json. Run by `make bench` after the
# training table, or alone (after `make bench` has built bench_generate).
#
#   BENCH_GENERATE="C:1024 C:8192 D:1024"  configuration:context rows ("none": skip)
#   BENCH_GEN_TOKENS="16 3"     tokens generated (and timed) with the cache and without
#   BENCH_REPS=3                runs of each cached rate and of the bandwidth, back to back
#                               (float32, bf16, float32, ...): medians; recomputing runs once
#   BENCH_THREADS=N             threads (default: all cores)
set -u
cd "$(dirname "$0")/.."
rows=${BENCH_GENERATE:-C:1024 C:8192 D:1024}
[ "$rows" = none ] && exit 0
threads=${BENCH_THREADS:-$(nproc 2>/dev/null || echo 1)}
gen_bin=build/bench/bench_generate
if [ ! -x "$gen_bin" ]; then
    echo "bench: $gen_bin is missing; run 'make bench'" >&2
    exit 1
fi
read -r gen_on gen_off <<<"${BENCH_GEN_TOKENS:-16 3}"
reps=${BENCH_REPS:-3}
. bench/lib.sh
status=0
# the bound of decoding with the cache: memory bandwidth (a read pass, bench_stream) over the bytes
# a token must read (every weight and the cached keys and values)
bw=null
[ -x build/bench/bench_stream ] &&
    bw=$(for r in $(seq "$reps"); do build/bench/bench_stream --threads "$threads"; done | fields read_gbs | median)
bw=${bw:-null}
echo
echo "generation (rope, greedy, $threads threads, medians of $reps): tokens/s at a context of N tokens;" \
     "memory read at $bw GB/s (bench_stream); bound: that rate over the bytes a token reads"
# "bound fraction" of a rate at bytes per token, or "null null"
of_bound() {
    if [ "$bw" != null ] && [ "$2" != null ] && [ "$1" != null ]; then
        awk -v a="$1" -v g="$bw" -v b="$2" 'BEGIN { u = g * 1e9 / b; printf "%.1f %.2f\n", u, a / u }'
    else
        echo "null null"
    fi
}
grows=()
gjson="["
for row in $rows; do
    [[ $row == *:* ]] || row=C:$row # a bare context: configuration C
    cfg=${row%%:*} n=${row#*:}
    gen() { "$gen_bin" --config "$cfg" --context "$n" --threads "$threads" "$@"; }
    on="" half=""
    for r in $(seq "$reps"); do
        on+=$(gen --cache on --tokens "$gen_on")$'\n' || {
            echo "bench: bench_generate failed at $cfg:$n with the cache" >&2; status=1; }
        half+=$(gen --cache on --weights bf16 --tokens "$gen_on")$'\n' || {
            echo "bench: bench_generate failed at $cfg:$n with bf16 weights" >&2; status=1; }
    done
    off=$(gen --cache off --tokens "$gen_off") || {
        echo "bench: bench_generate failed at $cfg:$n without the cache" >&2; status=1; }
    a=$(printf '%s' "$on" | fields tokens_per_s | median); b=$(printf '%s\n' "$off" | field tokens_per_s)
    pre=$(printf '%s' "$on" | fields prefill_s | median)
    bytes=$(printf '%s' "$on" | field bytes_per_token)
    h=$(printf '%s' "$half" | fields tokens_per_s | median); hbytes=$(printf '%s' "$half" | field bytes_per_token)
    a=${a:-null} b=${b:-null} pre=${pre:-null} bytes=${bytes:-null} h=${h:-null} hbytes=${hbytes:-null}
    ratio=null hratio=null
    [ "$a" != null ] && [ "$b" != null ] && ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", a / b }')
    [ "$a" != null ] && [ "$h" != null ] && hratio=$(awk -v a="$h" -v b="$a" 'BEGIN { printf "%.2f", a / b }')
    read -r bound frac < <(of_bound "$a" "$bytes")
    read -r hbound hfrac < <(of_bound "$h" "$hbytes")
    grows+=("$(printf '%-8s %12s %11s %8s %10s %8s %8s %12s %8s %8s %9s' "$row" "$a" "$b" "$ratio" "$pre" "$bound" \
               "$frac" "$h" "$hbound" "$hfrac" "$hratio")")
    [ "$gjson" != "[" ] && gjson+=","
    gjson+=$(printf '\n  {"config": "%s", "context": %s, "cache_tokens_per_s": %s, "recompute_tokens_per_s": %s, "speedup": %s, "prefill_s": %s, "bytes_per_token": %s, "read_gbs": %s, "bound_tokens_per_s": %s, "of_bound": %s, "bf16_tokens_per_s": %s, "bf16_bytes_per_token": %s, "bf16_bound_tokens_per_s": %s, "bf16_of_bound": %s, "bf16_speedup": %s, "threads": %s}' \
             "$cfg" "$n" "$a" "$b" "$ratio" "$pre" "$bytes" "$bw" "$bound" "$frac" "$h" "$hbytes" "$hbound" "$hfrac" "$hratio" "$threads")
done
gjson+=$'\n]\n'
printf '%-8s %12s %11s %8s %10s %8s %8s %12s %8s %8s %9s\n' "config:N" "cache tok/s" recompute speedup "prefill s" \
       bound "of bound" "bf16 tok/s" bound "of bound" "bf16/fp32"
printf '%s\n' "${grows[@]}"
tmp=$(mktemp bench/last_generate.json.XXXXXX) && printf '%s' "$gjson" >"$tmp" &&
    mv "$tmp" bench/last_generate.json && echo "wrote bench/last_generate.json"
exit $status
