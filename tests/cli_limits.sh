#!/usr/bin/env bash
# Requests beyond what the input holds, each kept as a repro:
#  - analyze freq counts no example twice: a batch larger than the split gives the numbers of one
#    batch of the whole split, --batches beyond the split those of the batches that cover it,
#    each with one notice line saying what ran; a request within the split says nothing.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--task indirect --d-model 32 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 32 --indirect-test-size 32 --steps 4"

train $TINY --pe rope --out "$W/rope"

# ---- analyze freq: the val split holds 32 examples ----
freq() { # NAME ARGS...: analyze freq of the rope run into $W/NAME.csv, its stderr in $W/NAME.err
    local name=$1; shift
    "$P" analyze freq --model "$W/rope" --threads 1 --out "$W/$name.csv" "$@" 2>"$W/$name.err" ||
        fail "analyze freq $*: exit $?: $(cat "$W/$name.err")"
}
freq whole --batch 32 --batches 1
[ ! -s "$W/whole.err" ] || fail "a request within the split said: $(cat "$W/whole.err")"
freq huge --batch 5000 --batches 3
cmp -s "$W/huge.csv" "$W/whole.csv" || fail "--batch 5000 counted examples twice"
[ "$(wc -l <"$W/huge.err")" -eq 1 ] &&
    grep -qF "notice: the val split holds 32 examples, each counted once: 32 in 1 batch of 32, not the 15000 of 3 batches of 5000 asked for" "$W/huge.err" ||
    fail "--batch 5000: no notice: $(cat "$W/huge.err")"
freq covering --batch 10 --batches 4
freq beyond --batch 10 --batches 10
cmp -s "$W/beyond.csv" "$W/covering.csv" || fail "--batches 10 of 10 differs from the 4 that cover the split"
grep -qF "32 in 4 batches of 10, not the 100 of 10 batches of 10 asked for" "$W/beyond.err" ||
    fail "--batches 10: no notice: $(cat "$W/beyond.err")"
echo "ok"
