#!/usr/bin/env bash
# Non-finite values in training, made on purpose with the test-only injector PELAB_TEST_NAN
# (STEP:grad puts a NaN into a gradient after the backward pass of update STEP, STEP:weight into
# a weight before its forward pass, STEP:update an infinity into a weight after the optimizer
# step; ":once" fires the first time only):
#   --on-nan stop (default): exit 1, one line naming the step, the value and where it first
#     appeared; the last checkpoint untouched;
#   --check-finite: the first non-finite activation is named (layer and tensor);
#   --on-nan skip: the update is skipped (its batches consumed), said on stderr, and a log line
#     says so; a run that keeps failing gives up after --nan-retries updates in a row;
#   --on-nan rollback: back to the last checkpoint with the learning rate times
#     --nan-lr-factor; gives up after --nan-retries rollbacks;
#   skipping and rolling back are deterministic: a run resumed across them equals one that was not.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 32 --indirect-test-size 32"
S="$TINY --steps 12 --warmup 3 --decay-steps 12 --log-every 1 --save-every 5 --eval-every 4 --eval-batches 1"

field() { /usr/bin/python3 -c '
import json, sys
print(repr(json.loads(open(sys.argv[1]).readlines()[int(sys.argv[2]) - 1]).get(sys.argv[3])))' "$1/log.jsonl" "$2" "$3"; }
sums() { (cd "$1" && md5sum model.safetensors checkpoints/*); }

# A failing run: one error line after its progress and warnings (expect -x RUN), the injector in
# its environment only.
RUN='^(step |training |resuming |warning: )'
train_env() { env $1 "$P" train "${@:2}" >/dev/null 2>"$W/err" || fail "$1 pelab train ${*:2}: exit $?: $(tail -2 "$W/err")"; }

"$P" train $S --out "$W/ref" >/dev/null 2>&1 || fail "reference run"

# stop: the step, the value and where; the checkpoint of step 5 untouched by the failed run.
PELAB_TEST_NAN=7:weight expect 1 "pelab: step 7: the training loss is not finite (nan; first non-finite activation: blocks.0.mlp.fc output (B,T,M) at [0, 0, 0] = nan); stopped, the checkpoint of step 5 is kept" -x "$RUN" \
    -- train $S --out "$W/stop"
before=$(sums "$W/stop")
PELAB_TEST_NAN=7:grad expect 1 "pelab: step 7: the gradient norm is not finite (nan; first non-finite gradient: tok_emb.weight[0] = nan); stopped, the checkpoint of step 5 is kept" -x "$RUN" \
    -- train --resume "$W/stop"
[ "$before" = "$(sums "$W/stop")" ] || fail "a stopped run changed its checkpoint"
PELAB_TEST_NAN=2:weight expect 1 "pelab: step 2: the training loss is not finite (nan; first non-finite activation: blocks.0.mlp.fc output (B,T,M) at [0, 0, 0] = nan); stopped, no checkpoint was saved" -x "$RUN" \
    -- train $S --out "$W/early"
PELAB_TEST_NAN=7:weight expect 1 "pelab: step 7: an activation is not finite (blocks.0.mlp.fc output (B,T,M) at [0, 0, 0] = nan); stopped" -x "$RUN" \
    -- train $S --check-finite --out "$W/check"
# The resumed run goes on: the injector was only in the environment.
train_env "" --resume "$W/stop"
diff <(losses "$W/ref") <(losses "$W/stop") >/dev/null || fail "a run resumed after a stop differs from the reference"

# skip: said on stderr, logged, the update's batches consumed.
train_env PELAB_TEST_NAN=7:grad $S --on-nan skip --out "$W/skip"
grep -q "^warning: step 7: the gradient norm is not finite (nan; first non-finite gradient: tok_emb.weight\[0\] = nan); update skipped$" "$W/err" ||
    fail "skip warning: $(cat "$W/err")"
[ "$(field "$W/skip" 7 skipped)" = 1 ] && [ "$(field "$W/skip" 7 loss)" = None ] || fail "log line 7 of a skipped update: $(sed -n 7p "$W/skip/log.jsonl")"
[ "$(field "$W/skip" 6 loss)" = "$(field "$W/ref" 6 loss)" ] || fail "skip: step 6 differs from the reference"
[ "$(field "$W/skip" 8 loss)" != "$(field "$W/ref" 8 loss)" ] || fail "skip: the skipped update changed nothing"
[ "$(wc -l <"$W/skip/log.jsonl")" -eq 12 ] || fail "skip: log lines"
# ... and resumed across it, the same bits (steps 1-8, then 9-12; 8 validates either way).
train_env PELAB_TEST_NAN=7:grad $S --on-nan skip --steps 8 --out "$W/skip2"
train_env PELAB_TEST_NAN=7:grad --resume "$W/skip2" --steps 12
diff <(losses "$W/skip") <(losses "$W/skip2") >"$W/diff" || fail "skip, resumed: $(head -3 "$W/diff")"
# A NaN that stays (a poisoned weight) is skipped --nan-retries times in a row, then stops.
PELAB_TEST_NAN=7:weight expect 1 "pelab: step 9: the training loss is not finite (nan; first non-finite activation: blocks.0.mlp.fc output (B,T,M) at [0, 0, 0] = nan); stopped: 3 updates in a row skipped (--nan-retries 2), the checkpoint of step 5 is kept" -x "$RUN" \
    -- train $S --on-nan skip --nan-retries 2 --eval-every 0 --out "$W/skip3"
# A validation pass of a model gone bad says so (here, at step 8, after two skips).
PELAB_TEST_NAN=7:weight expect 1 "pelab: step 8: the val loss is not finite (nan): the model's weights or activations overflow, so there is no result to report" -x "$RUN" \
    -- train $S --on-nan skip --out "$W/skip4"

# rollback: to the checkpoint of step 5, the learning rate halved from there on.
train_env PELAB_TEST_NAN=7:weight:once $S --on-nan rollback --out "$W/rb"
grep -q "^warning: step 7: the training loss is not finite (nan; first non-finite activation: blocks.0.mlp.fc output (B,T,M) at \[0, 0, 0\] = nan); rolled back to step 5 with the learning rate scaled by 0.5 (rollback 1 of at most 3)$" "$W/err" ||
    fail "rollback warning: $(cat "$W/err")"
/usr/bin/python3 - "$W/ref" "$W/rb" <<'PY' || fail "rollback: learning rates or log lines"
import json, sys
ref, rb = ([json.loads(l) for l in open(d + "/log.jsonl")] for d in sys.argv[1:])
assert [r["step"] for r in rb] == list(range(1, 13)), [r["step"] for r in rb]
for a, b in zip(ref, rb):
    want = a["lr"] * (0.5 if a["step"] > 5 else 1)
    assert abs(b["lr"] - want) <= 1e-15 * want, (a, b)
    assert (a["loss"] == b["loss"]) == (a["step"] <= 6), (a, b)  # loss 6: weights of step 5
PY
train_env PELAB_TEST_NAN=7:weight:once $S --on-nan rollback --nan-lr-factor 0.25 --steps 8 --out "$W/rb2"
grep -q "scaled by 0.25 (rollback 1" "$W/err" || fail "--nan-lr-factor 0.25: $(cat "$W/err")"
train_env PELAB_TEST_NAN=7:weight:once $S --on-nan rollback --nan-lr-factor 0.25 --out "$W/rb3"
train_env "" --resume "$W/rb2" --steps 12
diff <(losses "$W/rb3") <(losses "$W/rb2") >"$W/diff" || fail "rollback, resumed: $(head -3 "$W/diff")"
# A NaN that comes back every time: --nan-retries rollbacks, then it stops.
PELAB_TEST_NAN=7:weight expect 1 "pelab: step 7: the training loss is not finite (nan; first non-finite activation: blocks.0.mlp.fc output (B,T,M) at [0, 0, 0] = nan); stopped: 2 rollbacks already (--nan-retries 2), the checkpoint of step 5 is kept" -x "$RUN" \
    -- train $S --on-nan rollback --nan-retries 2 --out "$W/rb4"
[ "$(grep -c '^warning: .*rolled back to step 5' "$W/e")" -eq 2 ] || fail "two rollbacks before giving up: $(cat "$W/e")"

# A weight that overflows in the update itself (STEP:update): stopped before any evaluation or
# checkpoint sees it; an update already made cannot be skipped; a rollback undoes it.
PELAB_TEST_NAN=7:update expect 1 "pelab: step 7: a weight after the update is not finite (first non-finite weight: blocks.0.mlp.fc.weight[0] = inf); stopped, the checkpoint of step 5 is kept" -x "$RUN" \
    -- train $S --out "$W/upd"
PELAB_TEST_NAN=7:update expect 1 "stopped: an update already made cannot be skipped (--on-nan rollback can go back to the checkpoint), the checkpoint of step 5 is kept" -x "$RUN" \
    -- train $S --on-nan skip --out "$W/upd2"
train_env PELAB_TEST_NAN=7:update:once $S --on-nan rollback --out "$W/upd3"
grep -q "^warning: step 7: a weight after the update is not finite .*; rolled back to step 5" "$W/err" ||
    fail "rollback of an overflowed update: $(cat "$W/err")"
diff <(losses "$W/rb") <(losses "$W/upd3") >"$W/diff" ||
    fail "a rollback after the update differs from one before it: $(head -3 "$W/diff")"

# A matrix product that fails (a bf16 product out of memory; PELAB_TEST_GEMM_FAIL=N fails the
# N-th product of the process in any precision) is reported as itself, not as a non-finite loss,
# in a forward pass (the 3rd product here), a backward pass (the 8th) and an evaluation
for n in 3 8; do
    PELAB_TEST_GEMM_FAIL=$n expect 1 "out of memory (PELAB_TEST_GEMM_FAIL)" -x "$RUN" -- train $S --out "$W/gemm$n"
    grep -q "not finite" "$W/e" && fail "a failed product reported as a non-finite value: $(cat "$W/e")"
done
train_env PELAB_TEST_GEMM_FAIL=0 $S --out "$W/whole"
PELAB_TEST_GEMM_FAIL=2 expect 1 "out of memory (PELAB_TEST_GEMM_FAIL)" -x "$RUN" -- eval --model "$W/whole" --threads 1

# The injector is test-only and strict.
PELAB_TEST_NAN=soon expect 2 "PELAB_TEST_NAN (test-only): 'soon' is not STEP:grad, STEP:weight or STEP:update" -x "$RUN" -- train $S --out "$W/x"
PELAB_TEST_NAN=3:grad:twice expect 2 "PELAB_TEST_NAN (test-only)" -x "$RUN" -- train $S --out "$W/x"
[ -e "$W/x" ] && fail "a refused injector left a run directory"
echo "ok"
