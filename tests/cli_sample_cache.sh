#!/usr/bin/env bash
# pelab sample generates with a KV cache: for every encoding, the continuation printed with the
# cache is the one recomputing the context for every token gives (--cache off), greedy and
# sampled, with the context sliding (--context shorter than what is generated) and not, the
# samples decoded together in batches (one pass over the weights per step) as one alone. An
# encoding setting that cannot be cached (dynamic NTK past L_train) falls back to recomputation
# with one notice line and the same output; a learned table asked for a context past its end is
# one usage error either way. With --weights bf16 the cached continuation (bf16 copies of the
# matrices) is again the recomputed one (float32 products of the same rounded values); --cache
# bf16 generates.
set -u
. "$(dirname "$0")/lib/cli.sh"
D="$W/data"
install_sotu "$D"
TINY="--task text --tokenizer byte --data-dir $D --seq-len 32 --d-model 16 --heads 2 --layers 2 --batch 4 --threads 1 --eval-every 0 --steps 20"

# the encodings of sequences (1-D positions), as `help encodings` marks them
encodings=$("$P" help encodings | awk 'NR > 1 && $1 ~ /^[a-z]/ && $0 ~ / 1-D/ { print $1 }')
[ "$(echo "$encodings" | wc -w)" -ge 11 ] || fail "help encodings lists: $encodings"
for pe in $encodings; do
    "$P" train $TINY --pe $pe --out "$W/$pe" >/dev/null 2>"$W/err" || fail "train --pe $pe: $(tail -3 "$W/err")"
    for args in "--temperature 0" "--temperature 1 --seed 7" "--temperature 0 --context 12" "--temperature 1 --context 20"; do
        "$P" sample --model "$W/$pe" --count 2 --prompt 6 --tokens 30 --threads 1 $args >"$W/on" 2>"$W/err" ||
            fail "sample --pe $pe $args: $(cat "$W/err")"
        [ -s "$W/err" ] && fail "sample --pe $pe $args wrote to stderr: $(cat "$W/err")"
        "$P" sample --model "$W/$pe" --count 2 --prompt 6 --tokens 30 --threads 1 $args --cache off >"$W/off" 2>"$W/err" ||
            fail "sample --pe $pe $args --cache off: $(cat "$W/err")"
        cmp -s "$W/on" "$W/off" || fail "--pe $pe $args: the cache changes the continuation:
$(diff "$W/on" "$W/off" | head -8)"
        [ "$(grep -c '^--- model (30 tokens)' "$W/on")" -eq 2 ] || fail "--pe $pe $args: output $(cat "$W/on")"
    done
done

# more samples than decode in one batch (8): every group's continuations are the recomputed ones,
# with float32 weights and bf16 ones (several rows at once through the bf16 product)
for pe in rope fox; do
    for w in fp32 bf16; do
        "$P" sample --model "$W/$pe" --count 11 --prompt 6 --tokens 12 --threads 1 --temperature 1 --weights $w \
            >"$W/on" 2>"$W/err" || fail "sample --count 11 --weights $w: $(cat "$W/err")"
        "$P" sample --model "$W/$pe" --count 11 --prompt 6 --tokens 12 --threads 1 --temperature 1 --weights $w \
            --cache off >"$W/off" 2>&1
        cmp -s "$W/on" "$W/off" && [ "$(grep -c '^--- model (12 tokens)' "$W/on")" -eq 11 ] ||
            fail "--pe $pe --count 11 --weights $w: $(diff "$W/on" "$W/off" | head -8)"
    done
done

# bf16 weights: the same continuation with the cache as recomputing; a bad value is one usage error
for pe in rope fox alibi; do
    for cache in on off; do
        "$P" sample --model "$W/$pe" --count 2 --prompt 6 --tokens 30 --threads 1 --temperature 0 \
            --weights bf16 --cache $cache >"$W/bf16-$cache" 2>"$W/err" || fail "sample --pe $pe --weights bf16 --cache $cache: $(cat "$W/err")"
        [ -s "$W/err" ] && fail "sample --weights bf16 wrote to stderr: $(cat "$W/err")"
    done
    cmp -s "$W/bf16-on" "$W/bf16-off" || fail "--pe $pe --weights bf16: the cache changes the continuation:
$(diff "$W/bf16-on" "$W/bf16-off" | head -8)"
done
for bad in "--weights fp16" "--cache fp16"; do
    expect 2 "${bad%% *}" -- sample --model "$W/rope" --count 1 --prompt 6 --tokens 5 $bad
done
# a bf16 cache (its arithmetic is test_attn's): generates, silently, with and without bf16 weights
for w in fp32 bf16; do
    "$P" sample --model "$W/fox" --count 2 --prompt 6 --tokens 30 --threads 1 --cache bf16 --weights $w >"$W/o" 2>"$W/err" ||
        fail "sample --cache bf16 --weights $w: $(cat "$W/err")"
    [ -s "$W/err" ] && fail "--cache bf16 wrote to stderr: $(cat "$W/err")"
    [ "$(grep -c '^--- model (30 tokens)' "$W/o")" -eq 2 ] || fail "--cache bf16 --weights $w: output $(cat "$W/o")"
done

# dynamic NTK past L_train: recomputed, one notice, the same tokens
R="$W/rope"
expect 0 "^notice: generating without the KV cache (every token recomputes the context): --rope-scaling dynamic-ntk" -G -- \
    sample --model "$R" --count 1 --prompt 6 --tokens 50 --context 48 --threads 1 --temperature 0 \
    --rope-scaling dynamic-ntk --rope-scale 2
mv "$W/o" "$W/on"
"$P" sample --model "$R" --count 1 --prompt 6 --tokens 50 --context 48 --threads 1 --temperature 0 \
    --rope-scaling dynamic-ntk --rope-scale 2 --cache off >"$W/off" 2>"$W/err" || fail "sample dynamic-ntk --cache off: $(cat "$W/err")"
[ -s "$W/err" ] && fail "--cache off printed: $(cat "$W/err")"
cmp -s "$W/on" "$W/off" || fail "the fallback differs from --cache off"
# within L_train the same setting is cached: no notice
"$P" sample --model "$R" --count 1 --prompt 6 --tokens 20 --threads 1 --rope-scaling dynamic-ntk \
    --rope-scale 2 >/dev/null 2>"$W/err" || fail "sample dynamic-ntk within L_train: $(cat "$W/err")"
[ -s "$W/err" ] && fail "dynamic-ntk within L_train fell back: $(cat "$W/err")"

# a learned table asked for more context than it has: one usage error, with the cache or without
for cache in on off; do
    expect 2 "beyond the table of 32 positions" -- \
        sample --model "$W/learned" --count 1 --prompt 6 --tokens 50 --context 48 --cache $cache --threads 1
done
echo "ok"
