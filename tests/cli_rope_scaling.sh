#!/usr/bin/env bash
# RoPE's length extension at evaluation: eval and sample of a rope run take --rope-scaling
# pi|ntk|dynamic-ntk|yarn|llama3 with --rope-scale and YaRN's options; each method at scale 1
# evaluates exactly as plain RoPE (a scale given with none, which would do nothing, is refused);
# a method at scale 4 changes the result. The options are refused, with one line naming the option and exit 2, on runs of other
# encodings (pope, nope), by training, and where a value makes no sense.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 8 --threads 1 --indirect-val-size 32 --indirect-test-size 32"

for pe in rope pope nope; do
    "$P" train --task indirect --pe $pe $TINY --steps 10 --eval-every 0 --out "$W/$pe" \
        >/dev/null 2>"$W/err" || fail "train --pe $pe exited $?: $(tail -3 "$W/err")"
done
R="$W/rope"

loss() { # ARGS... → the loss of `pelab eval --model R --json ARGS`, full precision
    "$P" eval --model "$R" --json "$@" >"$W/out" 2>"$W/err" ||
        fail "eval $* exited $?: $(cat "$W/err")"
    /usr/bin/python3 -c 'import json, sys; print(repr(json.load(open(sys.argv[1]))["loss"]))' "$W/out"
}
plain=$(loss)
"$P" eval --model "$R" --rope-scaling none --rope-scale 4 >"$W/out" 2>"$W/err"
[ $? -eq 2 ] && grep -q "^pelab: --rope-scale 4 does nothing without a length extension" "$W/err" ||
    fail "a scale with none is not refused: $(cat "$W/err")"
for m in pi ntk dynamic-ntk yarn llama3; do
    [ "$(loss --rope-scaling $m --rope-scale 1)" = "$plain" ] || fail "$m at scale 1 differs from plain RoPE"
done
# dynamic-ntk acts only beyond L_train: the evaluated length (the training context) is within it.
[ "$(loss --rope-scaling dynamic-ntk --rope-scale 4)" = "$plain" ] || fail "dynamic-ntk acted within L_train"
[ "$(loss --rope-scaling dynamic-ntk --rope-scale 4 --rope-original-len 20)" != "$plain" ] ||
    fail "dynamic-ntk beyond --rope-original-len changed nothing"
for m in pi ntk yarn llama3; do
    [ "$(loss --rope-scaling $m --rope-scale 4)" != "$plain" ] || fail "$m at scale 4 changed nothing"
done
[ "$(loss --rope-scaling llama3 --rope-scale 4 --llama3-high-freq-factor 2)" != \
  "$(loss --rope-scaling llama3 --rope-scale 4)" ] || fail "Llama 3.1's options changed nothing"
[ "$(loss --rope-scaling yarn --rope-scale 4 --yarn-beta-fast 16 --yarn-beta-slow 2 --rope-original-len 2048)" != \
  "$(loss --rope-scaling yarn --rope-scale 4)" ] || fail "YaRN's options changed nothing"
# LongRoPE: factors of 1 at scale 1 are plain RoPE; others change the loss; the count must match
echo '{"short_factor": [1, 1, 1, 1, 1, 1, 1, 1], "long_factor": [1, 1, 1, 1, 1, 1, 1, 1]}' >"$W/ones.json"
echo '{"rope_scaling": {"short_factor": [1, 1, 2, 2, 4, 4, 8, 8], "long_factor": [1, 2, 4, 8, 16, 32, 64, 128]}}' >"$W/lr.json"
[ "$(loss --rope-scaling longrope --longrope-factors "$W/ones.json")" = "$plain" ] ||
    fail "longrope with factors of 1 at scale 1 differs from plain RoPE"
[ "$(loss --rope-scaling longrope --rope-scale 4 --longrope-factors "$W/lr.json")" != "$plain" ] ||
    fail "longrope's factors changed nothing"
[ "$(loss --rope-scaling longrope --longrope-factors geometric:1,1)" = "$plain" ] ||
    fail "longrope geometric:1,1 at scale 1 differs from plain RoPE"
[ "$(loss --rope-scaling longrope --rope-scale 4 --longrope-factors geometric:8,128)" != "$plain" ] ||
    fail "longrope geometric:8,128 changed nothing"
# a file's factors are read as given: the file that holds geometric:1.5,4's sets (λ_i = S^(i/7) for
# the 8 pairs of a head of 16) evaluates as the synthetic sets do, with the short set (the context
# within the training length) and with the long one (beyond --rope-original-len 4)
/usr/bin/python3 -c 'import json; print(json.dumps({"rope_scaling": {"short_factor": [1.5 ** (i / 7) for i in range(8)],
    "long_factor": [4.0 ** (i / 7) for i in range(8)]}}))' >"$W/geo.json"
for orig in "" "--rope-original-len 4"; do
    [ "$(loss --rope-scaling longrope --rope-scale 4 $orig --longrope-factors "$W/geo.json")" = \
      "$(loss --rope-scaling longrope --rope-scale 4 $orig --longrope-factors geometric:1.5,4)" ] ||
        fail "longrope's factors from a file ${orig:+($orig) }differ from the same factors given as geometric:1.5,4"
done
[ "$(loss --rope-scaling longrope --rope-scale 4 --longrope-factors "$W/geo.json")" != \
  "$(loss --rope-scaling longrope --rope-scale 4 --rope-original-len 4 --longrope-factors "$W/geo.json")" ] ||
    fail "longrope's short and long sets gave the same loss"
expect 1 "--longrope-factors: $W/gone.json" -- eval --model "$R" --rope-scaling longrope --longrope-factors "$W/gone.json"
"$P" eval --model "$R" --rope-scaling yarn --rope-scale 4 >"$W/out" 2>"$W/err" ||
    fail "eval --rope-scaling yarn --rope-scale 4 exited $?: $(cat "$W/err")"
grep -q "^test: accuracy" "$W/out" || fail "eval output: $(cat "$W/out")"
"$P" sample --model "$R" --count 2 --rope-scaling yarn --rope-scale 4 >"$W/out" 2>"$W/err" ||
    fail "sample --rope-scaling yarn exited $?: $(cat "$W/err")"
[ "$(grep -c "truth '" "$W/out")" -eq 2 ] || fail "sample output: $(cat "$W/out")"
grep -q "rope-scaling" "$R/config.json" && fail "config.json records an evaluation-time option"
"$P" help eval | grep -q -- "--rope-scaling none|pi|ntk|dynamic-ntk|yarn" || fail "help eval lacks --rope-scaling"
"$P" help sample | grep -q -- "--yarn-beta-fast" || fail "help sample lacks --yarn-beta-fast"

echo '{"short_factor": [1, 1], "long_factor": [1, 1]}' >"$W/two.json"
expect 2 '"short_factor" has 2 factors; this run rotates 8 pairs per head' -- \
    eval --model "$R" --rope-scaling longrope --longrope-factors "$W/two.json"
for pe in pope nope; do
    expect 2 "--rope-scaling applies to runs of --pe rope; $W/$pe was trained with --pe $pe" -- \
        eval --model "$W/$pe" --rope-scaling yarn --rope-scale 4
    expect 2 "--rope-scale applies to runs of --pe rope" -- sample --model "$W/$pe" --rope-scale 2
done
expect 2 "--rope-scaling is an option of eval and sample (for --pe rope runs), not of training" -- \
    train --pe rope --rope-scaling yarn $TINY --out "$W/no"
expect 2 "--rope-scale 0.5: --rope-scaling yarn extends the context s times" -- \
    eval --model "$R" --rope-scaling yarn --rope-scale 0.5
expect 2 "--yarn-beta-fast applies only with --rope-scaling yarn (not ntk)" -- \
    eval --model "$R" --rope-scaling ntk --rope-scale 2 --yarn-beta-fast 16
expect 2 "--rope-original-len applies only with --rope-scaling dynamic-ntk, yarn, llama3 or longrope" -- \
    eval --model "$R" --rope-scaling pi --rope-scale 2 --rope-original-len 64
expect 2 "--rope-scaling: 'rope-2'" -- eval --model "$R" --rope-scaling rope-2
expect 2 "--longrope-factors geometric:2: give geometric:S,L" -- \
    eval --model "$R" --rope-scaling longrope --longrope-factors geometric:2
expect 2 "--rope-scaling longrope needs --longrope-factors FILE" -- eval --model "$R" --rope-scaling longrope
expect 2 "--rope-scale: -1 is out of range" -- eval --model "$R" --rope-scaling pi --rope-scale -1
[ -e "$W/no" ] && fail "a refused run left $W/no behind"
echo "ok"
