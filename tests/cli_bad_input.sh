#!/usr/bin/env bash
# Bad input: each case exits 2 (usage) or 1 (runtime) with exactly one line on stderr naming the
# offender, and leaves no file behind. Damaged files: tests/cli_corrupt.sh; NaNs: tests/cli_nan.sh.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 8 --threads 1 --indirect-val-size 32 --indirect-test-size 32"

# check CODE PATTERN -- ARGS...: runs pelab in an empty directory.
check() {
    local code=$1 pattern=$2; shift 3
    local d="$W/case"; rm -rf "$d"; mkdir "$d"
    (cd "$d" && "$P" "$@" >"$W/out" 2>"$W/err.all"); local rc=$?
    # A sanitizer build (make test-asan) may say that an allocation failed: not pelab's output.
    grep -v '^==[0-9]*==WARNING: AddressSanitizer failed to allocate' "$W/err.all" >"$W/err"
    [ $rc -eq "$code" ] || fail "pelab $*: exit $rc, expected $code ($(cat "$W/err"))"
    [ "$(wc -l <"$W/err")" -eq 1 ] || fail "pelab $*: stderr is not one line: $(cat "$W/err")"
    grep -q '^pelab: ' "$W/err" || fail "pelab $*: stderr does not start with 'pelab: '"
    grep -qF -- "$pattern" "$W/err" || fail "pelab $*: '$pattern' not in: $(cat "$W/err")"
    [ -z "$(ls -A "$d")" ] || fail "pelab $*: left files behind: $(ls -A "$d")"
}

check 2 "unknown option --foo"            -- train --foo 1 $TINY --out r
check 2 "--lr: 'abc'"                     -- train --lr abc $TINY --out r
check 2 "--lr: 100 is out of range"       -- train --lr=100 $TINY --out r
check 2 "--steps: '1.5'"                  -- train --steps 1.5 $TINY --out r
check 2 "--steps needs a value"           -- train $TINY --out r --steps
check 2 "--rope-layout: 'diagonal'"       -- train --rope-layout diagonal $TINY --out r
check 2 "--rope-base does not apply to --pe nope" -- train --pe nope --rope-base 500 $TINY --out r
check 2 "--pope-delta-init does not apply to --pe rope" -- train --pe rope --pope-delta-init uniform $TINY --out r
check 2 "--heads 3"                       -- train $TINY --heads 3 --out r
check 2 "rope"                            -- train $TINY --d-model 6 --heads 2 --pe rope --out r
check 2 "unknown task 'nosuch'"           -- train --task nosuch $TINY --out r
check 2 "unknown encoding 'nosuch'"       -- train --pe nosuch $TINY --out r
check 2 "no preset 'huge'"                -- train --preset huge $TINY --out r
check 2 "--min-lr"                        -- train --lr 1e-4 --min-lr 1e-3 $TINY --out r
check 2 "--indirect-max-shift"            -- train --indirect-max-len 10 --indirect-min-len 5 --indirect-max-shift 12 $TINY --out r
check 2 "unexpected argument 'stray'"     -- train stray $TINY --out r
check 2 "unknown option --pr\nset (see"    -- train $'--pr\nset' x $TINY --out r  # still one line
check 2 "unknown command 'trian'"         -- trian
check 2 "unknown option --foo"            -- eval --model x --foo 1
check 2 "--model DIR is required"         -- eval
check 2 "--split: 'dev'"                  -- eval --model x --split dev
check 1 "missing is not a pelab run directory (no config.json)" -- eval --model missing
check 1 "missing is not a pelab run directory (no config.json)" -- sample --model missing
check 1 "missing is not a pelab run directory (no config.json)" -- train --resume missing
check 2 "unknown option --foo"            -- compare --pe rope,pope --foo 1 $TINY --out r
check 2 "unknown encoding 'nosuch'"       -- compare --pe rope,nosuch $TINY --out r
check 2 "--rope-base does not apply to --pe pope,nope" -- compare --pe pope,nope --rope-base 9 $TINY --out r
check 2 "--t5-buckets does not apply to --pe alibi" -- train --pe alibi --t5-buckets 8 $TINY --out r
check 2 "--fire-width does not apply to --pe t5"   -- train --pe t5 --fire-width 8 $TINY --out r
check 2 "--t5-buckets: 1 is out of range"        -- train --pe t5 --t5-buckets 1 $TINY --out r
check 2 "--t5-max-distance 16 must exceed --t5-buckets/2 = 16" -- train --pe t5 --t5-max-distance 16 $TINY --out r
check 2 "--fire-width: -4 is out of range"       -- train --pe fire --fire-width -4 $TINY --out r
check 2 "--fire-depth: 9 is out of range"        -- train --pe fire-shared --fire-depth 9 $TINY --out r
# Numbers: decimal only, in range; integers whole.
check 2 "--steps: ' 5' is not an integer" -- train --steps " 5" $TINY --out r
check 2 "--steps: '0x10' is not an integer" -- train --steps 0x10 $TINY --out r
check 2 "--lr: '1e999' is not a number"   -- train --lr 1e999 $TINY --out r
check 2 "--lr: 'inf' is not a number"     -- train --lr inf $TINY --out r
check 2 "--lr: '' is not a number"        -- train --lr= $TINY --out r
check 2 "--seed: -1 is out of range [0, 9007199254740991]" -- train --seed -1 $TINY --out r
check 2 "--seed: '1.5' is not an integer" -- train --seed 1.5 $TINY --out r
check 2 "--batch: 0 is out of range"      -- train $TINY --batch 0 --out r
check 2 "--threads: 5000 is out of range" -- train $TINY --threads 5000 --out r
check 2 "--dropout: 1 is out of range [0, 0.95]" -- train --dropout 1 $TINY --out r
check 2 "--beta1: 1 is out of range"      -- train --beta1 1 $TINY --out r
check 2 "--eps: 0 is out of range [1e-30, 1]" -- train --eps 0 $TINY --out r
check 2 "--tied: 'yes' is not on|off"     -- train --tied yes $TINY --out r
# Checkpoints and non-finite values.
check 2 "--keep: 0 is out of range [1, 1000000]" -- train --keep 0 $TINY --out r
check 2 "--on-nan: 'ignore' is not one of stop|skip|rollback" -- train --on-nan ignore $TINY --out r
check 2 "--nan-lr-factor: 1 is out of range [1e-06, 0.999999]" -- train --nan-lr-factor 1 $TINY --out r
check 2 "--nan-lr-factor: 0 is out of range" -- train --nan-lr-factor 0 $TINY --out r
check 2 "--nan-retries: -1 is out of range" -- train --nan-retries -1 $TINY --out r
check 2 "--check-finite: 'maybe' is not on|off" -- train --check-finite maybe $TINY --out r
check 2 "--on-nan rollback needs checkpoints to roll back to (--save-every N > 0; it is 0)" -- train --on-nan rollback --save-every 0 $TINY --out r
# Too big for memory (more than a 47-bit address space, so refused even with overcommit):
# refused before anything is written.
check 1 "out of memory allocating 52776696807424 parameters (844427.1 GB" -- train --d-model 65536 --heads 64 --layers 1024 --threads 1 --out r
# eval, sample, compare.
check 2 "--examples: -1 is out of range"  -- eval --model x --examples -1
check 2 "--batch: 0 is out of range"      -- eval --model x --batch 0
check 2 "--json: 'yes' is not on|off"     -- eval --model x --json yes
check 2 "--threads: -1 is out of range"   -- eval --model x --threads -1
check 2 "--model needs a value"           -- eval --model
check 2 "--count: 0 is out of range [1, 1000]" -- sample --model x --count 0
check 2 "--count: 1001 is out of range"   -- sample --model x --count 1001
check 2 "--first: -5 is out of range"     -- sample --model x --first -5
check 2 "--split: 'dev' is not one of val|test|train" -- sample --model x --split dev
check 2 "unknown option --steps (see 'pelab help sample')" -- sample --model x --steps 3
check 2 "--seeds: 0 is out of range [1, 100]" -- compare --seeds 0 $TINY --out r
check 2 "--jobs: 0 is out of range"       -- compare --jobs 0 $TINY --out r
check 2 "--pe ',': an empty entry"      -- compare --pe , $TINY --out r
check 2 "--pe: 'rope' is listed twice"    -- compare --pe rope,pope,rope $TINY --out r
check 2 "--lr: 'x' is not a number"       -- compare --lr x $TINY --out r

# A foreign directory: files but no config.json, or a config.json that is not pelab's.
mkdir -p "$W/foreign" && echo hi >"$W/foreign/notes.txt"
check 1 "is not a pelab run directory" -- eval --model "$W/foreign"
echo '{"name": "something else"}' >"$W/foreign/config.json"
check 1 "not a pelab config" -- eval --model "$W/foreign"
check 1 "not a pelab config" -- train --resume "$W/foreign"

# A real run, then damage: a truncated model.safetensors is refused by eval and sample (a resume
# rewrites it from the newest checkpoint: tests/cli_corrupt.sh, with every other kind of damage).
(cd "$W" && "$P" train $TINY --steps 4 --out run >/dev/null 2>&1) || fail "training the small run failed"
check 2 "--resume takes its settings from" -- train --resume "$W/run" --lr 1
check 2 "--steps: 'abc' is not an integer" -- train --resume "$W/run" --steps abc
check 2 "--steps 2 is below the run's step 4" -- train --resume "$W/run" --steps 2
(cd "$W" && "$P" train $TINY --steps 2 --save-every 0 --out run0 >/dev/null 2>&1) || fail "training run0 failed"
check 2 "--on-nan rollback needs checkpoints to roll back to" -- train --resume "$W/run0" --on-nan rollback
cp "$W/run/model.safetensors" "$W/model.orig"
head -c 2000 "$W/model.orig" >"$W/run/model.safetensors"
check 1 "model.safetensors: file is truncated" -- eval --model "$W/run"
check 1 "model.safetensors: file is truncated" -- sample --model "$W/run"
head -c 5 "$W/model.orig" >"$W/run/model.safetensors"
check 1 "model.safetensors: file is truncated (5 bytes" -- eval --model "$W/run"
cp "$W/model.orig" "$W/run/model.safetensors"
# A run directory that already holds a run is not overwritten by a new one.
check 2 "already holds a run" -- train $TINY --steps 4 --out "$W/run"
(cd "$W" && "$P" eval --model run >/dev/null 2>&1) || fail "eval of the restored run failed"
echo "ok"
