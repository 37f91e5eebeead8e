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
    (cd "$d" && "$P" "$@" >"$W/out" 2>"$W/err"); local rc=$?
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
