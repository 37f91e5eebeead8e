#!/usr/bin/env bash
# Greedy generation tokens/s at long contexts with the KV cache and recomputing the whole context
# for every token (build/bench/bench_generate, configurations C and D, rope), and with the cache
# reading bf16 weights, and bf16 weights and a bf16 cache, printed as a table with the speedups and
# each cached rate as a fraction of its memory-bandwidth bound (a read pass over the bytes a token
# reads, at that size: the last-level cache serves what fits), then batched decoding (several
# sequences stepped together) against one sequence, all written to bench/last_generate.json. Run
# by `make bench` after the training table, or alone (after `make bench` has built
# bench_generate).
#
#   BENCH_GENERATE="C:1024 C:8192 D:1024"  configuration:context rows ("none": skip)
#   BENCH_GEN_TOKENS="16 3"     tokens generated (and timed) with the cache and without
#   BENCH_REPS=3                runs of each cached rate and of the bandwidth, back to back
#                               (float32, bf16 weights, bf16 weights and cache, float32, ...):
#                               medians; recomputing runs once
#   BENCH_GEN_BATCH="C:1024:8 D:1024:8"  configuration:context:B rows of batched decoding (B
#                               sequences stepped together, pelab_kv_batch) in float32 and with
#                               bf16 weights, against one sequence ("none": skip)
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
blas_core_env
# The bound of decoding with the cache: the bytes a token reads (every weight and the cached keys
# and values) over the rate at which a read pass over that many bytes runs (bench_stream --mib,
# medians of $reps). Measured at the token's own size because the last-level cache serves what
# fits in it: on a Xeon with a 300 MiB L3, a 64 MiB pass reads at 40 GB/s and 2 GiB at 24, and
# configuration C's 74 MB a token decoded at 1.4x a bound taken at 256 MiB.
declare -A read_gbs=()
# sets rate: the GB/s of a read pass over $1 bytes, or null (measured once per size)
read_rate() {
    rate=null
    [ "$1" = null ] && return 0
    local mib
    mib=$(awk -v b="$1" 'BEGIN { m = int(b / 1048576 + 0.5); print m < 1 ? 1 : m }')
    if [ -z "${read_gbs[$mib]:-}" ]; then
        local g=null
        [ -x build/bench/bench_stream ] &&
            g=$(for r in $(seq "$reps"); do build/bench/bench_stream --threads "$threads" --mib "$mib"; done |
                fields read_gbs | median)
        read_gbs[$mib]=${g:-null}
    fi
    rate=${read_gbs[$mib]}
}
echo
echo "generation (rope, greedy, $threads threads, medians of $reps): tokens/s at a context of N tokens;" \
     "bound: the bytes a token reads over the rate of a read pass over as many bytes (bench_stream --mib)"
# "bound fraction" of $1 tokens/s at $2 bytes a token read at $3 GB/s, or "null null"
of_bound() {
    if [ "$3" != null ] && [ "$2" != null ] && [ "$1" != null ]; then
        awk -v a="$1" -v g="$3" -v b="$2" 'BEGIN { u = g * 1e9 / b; printf "%.1f %.2f\n", u, a / u }'
    else
        echo "null null"
    fi
}
grows=()
gjson="["
# the three cached settings, run back to back within each repetition
variants=("--cache on" "--cache on --weights bf16" "--cache bf16 --weights bf16")
for row in $rows; do
    [[ $row == *:* ]] || row=C:$row # a bare context: configuration C
    cfg=${row%%:*} n=${row#*:}
    gen() { "$gen_bin" --config "$cfg" --context "$n" --threads "$threads" "$@"; }
    runs=("" "" "")
    for r in $(seq "$reps"); do
        for v in 0 1 2; do
            runs[v]+=$(gen ${variants[v]} --tokens "$gen_on")$'\n' || {
                echo "bench: bench_generate failed at $cfg:$n with ${variants[v]}" >&2; status=1; }
        done
    done
    off=$(gen --cache off --tokens "$gen_off") || {
        echo "bench: bench_generate failed at $cfg:$n without the cache" >&2; status=1; }
    b=$(printf '%s\n' "$off" | field tokens_per_s); b=${b:-null}
    pre=$(printf '%s' "${runs[0]}" | fields prefill_s | median)
    cols=() js=""
    for v in 0 1 2; do # tokens/s, its bound and the fraction, and against float32's tokens/s
        t=$(printf '%s' "${runs[v]}" | fields tokens_per_s | median); t=${t:-null}
        bytes=$(printf '%s' "${runs[v]}" | field bytes_per_token); bytes=${bytes:-null}
        read_rate "$bytes" && gbs=$rate
        read -r bound frac < <(of_bound "$t" "$bytes" "$gbs")
        [ "$v" = 0 ] && a=$t
        x=null
        [ "$a" != null ] && [ "$t" != null ] && x=$(awk -v t="$t" -v a="$a" 'BEGIN { printf "%.2f", t / a }')
        cols+=("$t" "$bound" "$frac")
        [ "$v" != 0 ] && cols+=("$x")
        js+=$(printf ', "%s": {"tokens_per_s": %s, "bytes_per_token": %s, "read_gbs": %s, "bound_tokens_per_s": %s, "of_bound": %s, "of_fp32": %s}' \
              "$(echo "${variants[v]}" | sed 's/--cache on/fp32/; s/--cache bf16 --weights bf16/bf16_weights_cache/; s/fp32 --weights bf16/bf16_weights/')" \
              "$t" "$bytes" "$gbs" "$bound" "$frac" "$x")
    done
    ratio=null
    [ "$a" != null ] && [ "$b" != null ] && ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", a / b }')
    grows+=("$(printf '%-8s %9s %7s %5s %9s %7s %8s %9s %7s %5s %6s %9s %7s %5s %6s' "$row" "${cols[0]}" "${cols[1]}" \
               "${cols[2]}" "$b" "$ratio" "$pre" "${cols[@]:3}")")
    [ "$gjson" != "[" ] && gjson+=","
    gjson+=$(printf '\n  {"config": "%s", "context": %s, "recompute_tokens_per_s": %s, "speedup": %s, "prefill_s": %s, "threads": %s%s}' \
             "$cfg" "$n" "$b" "$ratio" "$pre" "$threads" "$js")
done
echo "(fp32: float32 weights and cache; bf16 w: bf16 weights; bf16 w+kv: bf16 weights and cache; bound: at the read rate;"
echo " ×: tokens/s against fp32's)"
printf '%-8s %9s %7s %5s %9s %7s %8s %9s %7s %5s %6s %9s %7s %5s %6s\n' "config:N" "fp32" bound frac recompute speedup \
       "prefill" "bf16 w" bound frac "×" "w+kv" bound frac "×"
printf '%s\n' "${grows[@]}"

# batched decoding: B sequences' tokens per pass over the weights, tokens/s of all B (its bound:
# the weights' bytes shared by B), against one sequence's, back to back within each repetition
batch_rows=${BENCH_GEN_BATCH:-C:1024:8 D:1024:8}
[ "$batch_rows" = none ] && batch_rows=""
bjson=""
[ -n "$batch_rows" ] && echo && echo "batched decoding (B sequences stepped together; tokens/s of all B, medians of $reps):" &&
    printf '%-8s %3s %9s %9s %6s %7s %5s %9s %9s %6s %7s %5s\n' "config:N" B "fp32 1" "fp32 B" "×" bound frac \
           "bf16w 1" "bf16w B" "×" bound frac
for row in $batch_rows; do
    cfg=${row%%:*} rest=${row#*:} n=${rest%%:*} B=${rest#*:}
    runs=("" "" "" "")
    for r in $(seq "$reps"); do
        i=0
        for w in fp32 bf16; do
            for b in 1 "$B"; do
                runs[i]+=$("$gen_bin" --config "$cfg" --context "$n" --threads "$threads" --weights $w --batch "$b" \
                           --tokens "$gen_on")$'\n' || { echo "bench: bench_generate --batch $b failed at $row" >&2; status=1; }
                i=$((i + 1))
            done
        done
    done
    cols=() js=""
    for w in 0 1; do # one sequence, B of them, the ratio, B's bound and its fraction
        one=$(printf '%s' "${runs[2 * w]}" | fields tokens_per_s | median); one=${one:-null}
        many=$(printf '%s' "${runs[2 * w + 1]}" | fields tokens_per_s | median); many=${many:-null}
        bytes=$(printf '%s' "${runs[2 * w + 1]}" | field bytes_per_token); bytes=${bytes:-null}
        read_rate "$(awk -v b="$bytes" -v B="$B" 'BEGIN { print b == "null" ? "null" : b * B }')" && gbs=$rate # a pass reads B tokens' bytes
        read -r bound frac < <(of_bound "$many" "$bytes" "$gbs")
        x=null
        [ "$one" != null ] && [ "$many" != null ] && x=$(awk -v a="$many" -v b="$one" 'BEGIN { printf "%.2f", a / b }')
        cols+=("$one" "$many" "$x" "$bound" "$frac")
        js+=$(printf ', "%s": {"one_tokens_per_s": %s, "batch_tokens_per_s": %s, "of_one": %s, "read_gbs": %s, "bound_tokens_per_s": %s, "of_bound": %s}' \
              "$([ $w = 0 ] && echo fp32 || echo bf16_weights)" "$one" "$many" "$x" "$gbs" "$bound" "$frac")
    done
    printf '%-8s %3s %9s %9s %6s %7s %5s %9s %9s %6s %7s %5s\n' "$cfg:$n" "$B" "${cols[@]}"
    [ -n "$bjson" ] && bjson+=","
    bjson+=$(printf '\n  {"config": "%s", "context": %s, "batch": %s, "threads": %s%s}' \
             "$cfg" "$n" "$B" "$threads" "$js")
done
echo "read passes (bench_stream --mib): $(for m in $(printf '%s\n' "${!read_gbs[@]}" | sort -n); do
    printf '%s MiB %s GB/s; ' "$m" "${read_gbs[$m]}"; done)"
gjson+=$'\n]'
gjson="{\"single\": $gjson, \"batched\": [$bjson"$'\n]}\n'
tmp=$(mktemp bench/last_generate.json.XXXXXX) && printf '%s' "$gjson" >"$tmp" &&
    mv "$tmp" bench/last_generate.json && echo "wrote bench/last_generate.json"
exit $status
