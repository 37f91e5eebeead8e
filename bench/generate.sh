#!/usr/bin/env bash
# Greedy generation tokens/s at long contexts with the KV cache and recomputing the whole context
# for every token (build/bench/bench_generate, configuration C, rope), one run each, printed as a
# table with the speedup and written to bench/last_generate.json. Run by `make bench` after the
# training table, or alone (after `make bench` has built bench_generate).
#
#   BENCH_GENERATE="1024 8192"  contexts ("none": skip)
#   BENCH_GEN_TOKENS="16 3"     tokens generated (and timed) with the cache and without
#   BENCH_THREADS=N             threads (default: all cores)
set -u
cd "$(dirname "$0")/.."
contexts=${BENCH_GENERATE:-1024 8192}
[ "$contexts" = none ] && exit 0
threads=${BENCH_THREADS:-$(nproc 2>/dev/null || echo 1)}
gen_bin=build/bench/bench_generate
if [ ! -x "$gen_bin" ]; then
    echo "bench: $gen_bin is missing; run 'make bench'" >&2
    exit 1
fi
read -r gen_on gen_off <<<"${BENCH_GEN_TOKENS:-16 3}"
field() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p" | tail -n 1; }
status=0
# the bound of decoding with the cache: memory bandwidth (a read pass, bench_stream) over the bytes
# a token must read (every weight and the cached keys and values)
bw=null
[ -x build/bench/bench_stream ] && bw=$(build/bench/bench_stream --threads "$threads" | field read_gbs)
bw=${bw:-null}
echo
echo "generation (configuration C, rope, greedy, $threads threads): tokens/s at a context of N tokens;" \
     "memory read at $bw GB/s (bench_stream)"
grows=()
gjson="["
for n in $contexts; do
    on=$("$gen_bin" --context "$n" --cache on --tokens "$gen_on" --threads "$threads") || {
        echo "bench: bench_generate failed at context $n with the cache" >&2; status=1; }
    off=$("$gen_bin" --context "$n" --cache off --tokens "$gen_off" --threads "$threads") || {
        echo "bench: bench_generate failed at context $n without the cache" >&2; status=1; }
    a=$(printf '%s\n' "$on" | field tokens_per_s); b=$(printf '%s\n' "$off" | field tokens_per_s)
    pre=$(printf '%s\n' "$on" | field prefill_s)
    bytes=$(printf '%s\n' "$on" | field bytes_per_token)
    a=${a:-null} b=${b:-null} pre=${pre:-null} bytes=${bytes:-null} ratio=null bound=null frac=null
    [ "$a" != null ] && [ "$b" != null ] && ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", a / b }')
    if [ "$bw" != null ] && [ "$bytes" != null ] && [ "$a" != null ]; then
        bound=$(awk -v g="$bw" -v b="$bytes" 'BEGIN { printf "%.1f", g * 1e9 / b }')
        frac=$(awk -v a="$a" -v b="$bound" 'BEGIN { printf "%.2f", a / b }')
    fi
    grows+=("$(printf '%-8s %14s %14s %8s %10s %10s %8s' "$n" "$a" "$b" "$ratio" "$pre" "$bound" "$frac")")
    [ "$gjson" != "[" ] && gjson+=","
    gjson+=$(printf '\n  {"context": %s, "cache_tokens_per_s": %s, "recompute_tokens_per_s": %s, "speedup": %s, "prefill_s": %s, "bytes_per_token": %s, "read_gbs": %s, "bound_tokens_per_s": %s, "of_bound": %s, "threads": %s}' \
             "$n" "$a" "$b" "$ratio" "$pre" "$bytes" "$bw" "$bound" "$frac" "$threads")
done
gjson+=$'\n]\n'
printf '%-8s %14s %14s %8s %10s %10s %8s\n' context "cache tok/s" "recompute" speedup "prefill s" "bound" "of bound"
printf '%s\n' "${grows[@]}"
tmp=$(mktemp bench/last_generate.json.XXXXXX) && printf '%s' "$gjson" >"$tmp" &&
    mv "$tmp" bench/last_generate.json && echo "wrote bench/last_generate.json"
exit $status
