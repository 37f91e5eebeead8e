#!/usr/bin/env bash
# Bad input: each case exits 2 (usage) or 1 (runtime) with exactly one line on stderr naming the
# offender, and leaves no file behind. Damaged files: tests/cli_corrupt.sh; NaNs: tests/cli_nan.sh.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 8 --threads 1 --indirect-val-size 32 --indirect-test-size 32"

# Each in an empty directory ($W/case), which it must leave empty; the line starts "pelab: ".
E=(-p -C "$W/case")

expect 2 "unknown option --foo" "${E[@]}"            -- train --foo 1 $TINY --out r
expect 2 "--lr: 'abc'" "${E[@]}"                     -- train --lr abc $TINY --out r
expect 2 "--lr: 100 is out of range" "${E[@]}"       -- train --lr=100 $TINY --out r
expect 2 "--steps: '1.5'" "${E[@]}"                  -- train --steps 1.5 $TINY --out r
expect 2 "--steps needs a value" "${E[@]}"           -- train $TINY --out r --steps
expect 2 "--rope-layout: 'diagonal'" "${E[@]}"       -- train --rope-layout diagonal $TINY --out r
expect 2 "--rope-base does not apply to --pe nope" "${E[@]}" -- train --pe nope --rope-base 500 $TINY --out r
expect 2 "--pope-delta-init does not apply to --pe rope" "${E[@]}" -- train --pe rope --pope-delta-init uniform $TINY --out r
expect 2 "--heads 3" "${E[@]}"                       -- train $TINY --heads 3 --out r
expect 2 "rope" "${E[@]}"                            -- train $TINY --d-model 6 --heads 2 --pe rope --out r
expect 2 "unknown task 'nosuch'" "${E[@]}"           -- train --task nosuch $TINY --out r
expect 2 "unknown encoding 'nosuch'" "${E[@]}"       -- train --pe nosuch $TINY --out r
expect 2 "no preset 'huge'" "${E[@]}"                -- train --preset huge $TINY --out r
expect 2 "--min-lr" "${E[@]}"                        -- train --lr 1e-4 --min-lr 1e-3 $TINY --out r
expect 2 "--indirect-max-shift" "${E[@]}"            -- train --indirect-max-len 10 --indirect-min-len 5 --indirect-max-shift 12 $TINY --out r
expect 2 "unexpected argument 'stray'" "${E[@]}"     -- train stray $TINY --out r
expect 2 "unknown option --pr\nset (see" "${E[@]}"    -- train $'--pr\nset' x $TINY --out r  # still one line
expect 2 "unknown command 'trian'" "${E[@]}"         -- trian
expect 2 "unknown option --foo" "${E[@]}"            -- eval --model x --foo 1
expect 2 "--model DIR is required" "${E[@]}"         -- eval
expect 2 "--split: 'dev'" "${E[@]}"                  -- eval --model x --split dev
expect 1 "missing is not a pelab run directory (no config.json)" "${E[@]}" -- eval --model missing
expect 1 "missing is not a pelab run directory (no config.json)" "${E[@]}" -- sample --model missing
expect 1 "missing is not a pelab run directory (no config.json)" "${E[@]}" -- train --resume missing
expect 2 "unknown option --foo" "${E[@]}"            -- compare --pe rope,pope --foo 1 $TINY --out r
expect 2 "unknown encoding 'nosuch'" "${E[@]}"       -- compare --pe rope,nosuch $TINY --out r
expect 2 "--rope-base does not apply to --pe pope,nope" "${E[@]}" -- compare --pe pope,nope --rope-base 9 $TINY --out r
expect 2 "--t5-buckets does not apply to --pe alibi" "${E[@]}" -- train --pe alibi --t5-buckets 8 $TINY --out r
expect 2 "--fire-width does not apply to --pe t5" "${E[@]}"   -- train --pe t5 --fire-width 8 $TINY --out r
expect 2 "--t5-buckets: 1 is out of range" "${E[@]}"        -- train --pe t5 --t5-buckets 1 $TINY --out r
expect 2 "--t5-max-distance 16 must exceed --t5-buckets/2 = 16" "${E[@]}" -- train --pe t5 --t5-max-distance 16 $TINY --out r
expect 2 "--fire-width: -4 is out of range" "${E[@]}"       -- train --pe fire --fire-width -4 $TINY --out r
expect 2 "--fire-depth: 9 is out of range" "${E[@]}"        -- train --pe fire-shared --fire-depth 9 $TINY --out r
# Numbers: decimal only, in range; integers whole.
expect 2 "--steps: ' 5' is not an integer" "${E[@]}" -- train --steps " 5" $TINY --out r
expect 2 "--steps: '0x10' is not an integer" "${E[@]}" -- train --steps 0x10 $TINY --out r
expect 2 "--lr: '1e999' is not a number" "${E[@]}"   -- train --lr 1e999 $TINY --out r
expect 2 "--lr: 'inf' is not a number" "${E[@]}"     -- train --lr inf $TINY --out r
expect 2 "--lr: '' is not a number" "${E[@]}"        -- train --lr= $TINY --out r
expect 2 "--seed: -1 is out of range [0, 9007199254740991]" "${E[@]}" -- train --seed -1 $TINY --out r
expect 2 "--seed: '1.5' is not an integer" "${E[@]}" -- train --seed 1.5 $TINY --out r
expect 2 "--batch: 0 is out of range" "${E[@]}"      -- train $TINY --batch 0 --out r
expect 2 "--threads: 5000 is out of range" "${E[@]}" -- train $TINY --threads 5000 --out r
expect 2 "--dropout: 1 is out of range [0, 0.95]" "${E[@]}" -- train --dropout 1 $TINY --out r
expect 2 "--beta1: 1 is out of range" "${E[@]}"      -- train --beta1 1 $TINY --out r
expect 2 "--eps: 0 is out of range [1e-30, 1]" "${E[@]}" -- train --eps 0 $TINY --out r
expect 2 "--tied: 'yes' is not on|off" "${E[@]}"     -- train --tied yes $TINY --out r
# Checkpoints and non-finite values.
expect 2 "--keep: 0 is out of range [1, 1000000]" "${E[@]}" -- train --keep 0 $TINY --out r
expect 2 "--on-nan: 'ignore' is not one of stop|skip|rollback" "${E[@]}" -- train --on-nan ignore $TINY --out r
expect 2 "--nan-lr-factor: 1 is out of range [1e-06, 0.999999]" "${E[@]}" -- train --nan-lr-factor 1 $TINY --out r
expect 2 "--nan-lr-factor: 0 is out of range" "${E[@]}" -- train --nan-lr-factor 0 $TINY --out r
expect 2 "--nan-retries: -1 is out of range" "${E[@]}" -- train --nan-retries -1 $TINY --out r
expect 2 "--check-finite: 'maybe' is not on|off" "${E[@]}" -- train --check-finite maybe $TINY --out r
expect 2 "--on-nan rollback needs checkpoints to roll back to (--save-every N > 0; it is 0)" "${E[@]}" -- train --on-nan rollback --save-every 0 $TINY --out r
# Too big for memory (more than a 47-bit address space, so refused even with overcommit):
# refused before anything is written.
expect 1 "out of memory allocating 52776696807424 parameters (844427.1 GB" "${E[@]}" -- train --d-model 65536 --heads 64 --layers 1024 --threads 1 --out r
# eval, sample, compare.
expect 2 "--examples: -1 is out of range" "${E[@]}"  -- eval --model x --examples -1
expect 2 "--batch: 0 is out of range" "${E[@]}"      -- eval --model x --batch 0
expect 2 "--json: 'yes' is not on|off" "${E[@]}"     -- eval --model x --json yes
expect 2 "--threads: -1 is out of range" "${E[@]}"   -- eval --model x --threads -1
expect 2 "--model needs a value" "${E[@]}"           -- eval --model
expect 2 "--count: 0 is out of range [1, 1000]" "${E[@]}" -- sample --model x --count 0
expect 2 "--count: 1001 is out of range" "${E[@]}"   -- sample --model x --count 1001
expect 2 "--first: -5 is out of range" "${E[@]}"     -- sample --model x --first -5
expect 2 "--split: 'dev' is not one of val|test|train" "${E[@]}" -- sample --model x --split dev
expect 2 "unknown option --steps (see 'pelab help sample')" "${E[@]}" -- sample --model x --steps 3
expect 2 "--seeds: 0 is out of range [1, 100]" "${E[@]}" -- compare --seeds 0 $TINY --out r
expect 2 "--jobs: 0 is out of range" "${E[@]}"       -- compare --jobs 0 $TINY --out r
expect 2 "--pe ',': an empty entry" "${E[@]}"      -- compare --pe , $TINY --out r
expect 2 "--pe: 'rope' is listed twice" "${E[@]}"    -- compare --pe rope,pope,rope $TINY --out r
expect 2 "--lr: 'x' is not a number" "${E[@]}"       -- compare --lr x $TINY --out r

# A foreign directory: files but no config.json, or a config.json that is not pelab's.
mkdir -p "$W/foreign" && echo hi >"$W/foreign/notes.txt"
expect 1 "is not a pelab run directory" "${E[@]}" -- eval --model "$W/foreign"
echo '{"name": "something else"}' >"$W/foreign/config.json"
expect 1 "not a pelab config" "${E[@]}" -- eval --model "$W/foreign"
expect 1 "not a pelab config" "${E[@]}" -- train --resume "$W/foreign"

# A real run, then damage: a truncated model.safetensors is refused by eval and sample (a resume
# rewrites it from the newest checkpoint: tests/cli_corrupt.sh, with every other kind of damage).
(cd "$W" && "$P" train $TINY --steps 4 --out run >/dev/null 2>&1) || fail "training the small run failed"
expect 2 "--resume takes its settings from" "${E[@]}" -- train --resume "$W/run" --lr 1
expect 2 "--steps: 'abc' is not an integer" "${E[@]}" -- train --resume "$W/run" --steps abc
expect 2 "--steps 2 is below the run's step 4" "${E[@]}" -- train --resume "$W/run" --steps 2
(cd "$W" && "$P" train $TINY --steps 2 --save-every 0 --out run0 >/dev/null 2>&1) || fail "training run0 failed"
expect 2 "--on-nan rollback needs checkpoints to roll back to" "${E[@]}" -- train --resume "$W/run0" --on-nan rollback
cp "$W/run/model.safetensors" "$W/model.orig"
head -c 2000 "$W/model.orig" >"$W/run/model.safetensors"
expect 1 "model.safetensors: file is truncated" "${E[@]}" -- eval --model "$W/run"
expect 1 "model.safetensors: file is truncated" "${E[@]}" -- sample --model "$W/run"
head -c 5 "$W/model.orig" >"$W/run/model.safetensors"
expect 1 "model.safetensors: file is truncated (5 bytes" "${E[@]}" -- eval --model "$W/run"
cp "$W/model.orig" "$W/run/model.safetensors"
# A run directory that already holds a run is not overwritten by a new one.
expect 2 "already holds a run" "${E[@]}" -- train $TINY --steps 4 --out "$W/run"
(cd "$W" && "$P" eval --model run >/dev/null 2>&1) || fail "eval of the restored run failed"
echo "ok"
