#!/usr/bin/env bash
# Data-parallel training across MPI ranks (docs/DISTRIBUTED.md), on tiny models:
#   - mpirun -np 2 (shares of 3 and 2 rows of 5) and -np 3 (2, 2 and 1) give the losses,
#     accuracies and validation losses of one process with the same global batch, to float32
#     rounding (|a − b| ≤ 1e-6·max(1, |a|), about 8 float32 ulps), over 20 updates, for rope, pope with
#     gradient accumulation, t5 (a bias encoding with weights) and seqpe with shifted starts and
#     its regularisers; and is far from one process at the per-rank batch (the control that
#     shows the tolerance can fail);
#   - with dropout 0.1 (rope) too, on 2 and 3 ranks, and one process at --batch 10 equals 2 ranks
#     at --batch 5 --accum 2 (the masks follow each row's place in the update's batch); the
#     control: the run without dropout is far from it;
#   - a rank killed mid-run (rank 1 of rope; rank 0 of seqpe with dropout and accumulation)
#     ends the job with mpirun's error naming it, leaves its checkpoints whole, and the resumed
#     job equals the uninterrupted one bit for bit (same ranks) or to rounding (rope in one
#     process; seqpe with dropout and accumulation on 3 ranks);
#   - ranks whose weights drift apart stop at the checkpoint's checksum, with one error line;
#   - a NaN gradient stops with one error line; a rollback (rank 0 reads the checkpoint and
#     sends it) equals one process's;
#   - eval of a split and a length sweep give one process's numbers;
#   - usage errors and commands that do not share work print one line under mpirun.
# Skipped (exit 77) when pelab was built without MPI or mpirun is missing.
set -u
. "$(dirname "$0")/lib/cli.sh"
"$P" --version | grep -q ", MPI," || { echo "skip: pelab built without MPI (libopenmpi-dev)"; exit 77; }
command -v mpirun >/dev/null || { echo "skip: no mpirun (openmpi-bin)"; exit 77; }
# CI runs as root; a 2-core machine runs 3 ranks oversubscribed; ranks not pinned to cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# one host: shared memory only, no network probing; copies through a shared segment, which
# containers allow (the single-copy mechanism, CMA, needs ptrace rights they often withhold)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() { local n=$1; shift; mpirun --oversubscribe --bind-to none -np "$n" "$P" "$@"; }

M="--d-model 16 --heads 2 --layers 1 --batch 5 --threads 1"
TINY="$M --indirect-val-size 16 --indirect-test-size 16"
S="$TINY --steps 20 --warmup 5 --log-every 1 --eval-every 10 --eval-batches 1"

# every key of every log line (but speed and time) within float32 rounding: "close", or apart
# by more than 1e-3 somewhere: "far"
compare() { /usr/bin/python3 - "$@" <<'PY'
import json, sys
mode, a, b = sys.argv[1:4]
A = [json.loads(l) for l in open(a + "/log.jsonl")]
B = [json.loads(l) for l in open(b + "/log.jsonl")]
skip = {"tokens_per_s", "elapsed_s"}
worst = 0
assert [r["step"] for r in A] == [r["step"] for r in B], "steps differ"
for x, y in zip(A, B):
    assert set(x) == set(y), (x, y)
    for k in x:
        if k in skip: continue
        d = abs(x[k] - y[k]) / max(1, abs(x[k]))
        if mode == "close" and d > 1e-6: sys.exit("step %d %s: %r vs %r" % (x["step"], k, x[k], y[k]))
        worst = max(worst, d)
if mode == "far" and worst <= 1e-3: sys.exit("no difference above 1e-3 (largest %g)" % worst)
sa, sb = json.load(open(a + "/summary.json")), json.load(open(b + "/summary.json"))
for k in ["val_loss", "val_acc", "test_loss", "test_acc", "train_loss"]:
    d = abs(sa[k] - sb[k]) / max(1, abs(sa[k]))
    if mode == "close" and d > 1e-6: sys.exit("summary %s: %r vs %r" % (k, sa[k], sb[k]))
PY
}
# every log line but speed and time, exactly

# ---- the same global batch, one process or several ----
for cfg in "rope" "pope --accum 2" "t5" "seqpe --seqpe-shift-prob 0.5" "fox" "cope --accum 2"; do
    name=${cfg%% *}
    "$P" train $S --pe $cfg --out "$W/$name-1" >/dev/null 2>"$W/e" || fail "$cfg, one process: $(cat "$W/e")"
    mpi 2 train $S --pe $cfg --out "$W/$name-2" >"$W/o" 2>"$W/e" || fail "$cfg, 2 ranks: $(cat "$W/e")"
    msg=$(compare close "$W/$name-1" "$W/$name-2") || fail "$cfg: 2 ranks differ from one process: $msg"
done
grep -q '"loss_ood"' "$W/seqpe-2/log.jsonl" || fail "seqpe: the regularisers were not on"
mpi 3 train $S --pe rope --out "$W/rope-3" >/dev/null 2>"$W/e" || fail "rope, 3 ranks: $(cat "$W/e")"
msg=$(compare close "$W/rope-1" "$W/rope-3") || fail "rope: 3 ranks differ from one process: $msg"
# the control: one process at the batch of rank 0 (3 of 5 rows) is another run
"$P" train $S --pe rope --batch 3 --out "$W/rope-half" >/dev/null 2>&1 || fail "rope, batch 3"
msg=$(compare far "$W/rope-2" "$W/rope-half") || fail "rope at batch 3 is as close as 2 ranks: $msg"
# dropout: every rank draws the masks one process draws at its rows, and so do the micro-batches
# of an update (--eval-batches 2 of 5 rows: the validation rows of one batch of 10)
DROP="$S --pe rope --dropout 0.1"
"$P" train $DROP --out "$W/drop-1" >/dev/null 2>"$W/e" || fail "dropout, one process: $(cat "$W/e")"
for n in 2 3; do
    mpi $n train $DROP --out "$W/drop-$n" >/dev/null 2>"$W/e" || fail "dropout, $n ranks: $(cat "$W/e")"
    msg=$(compare close "$W/drop-1" "$W/drop-$n") || fail "dropout: $n ranks differ from one process: $msg"
done
"$P" train $DROP --batch 10 --out "$W/drop-b10" >/dev/null 2>"$W/e" || fail "dropout, batch 10: $(cat "$W/e")"
mpi 2 train $DROP --accum 2 --eval-batches 2 --out "$W/drop-a2" >/dev/null 2>"$W/e" ||
    fail "dropout, 2 ranks, accum 2: $(cat "$W/e")"
msg=$(compare close "$W/drop-b10" "$W/drop-a2") ||
    fail "dropout: 2 ranks at --batch 5 --accum 2 differ from one process at --batch 10: $msg"
msg=$(compare far "$W/drop-1" "$W/rope-1") || fail "dropout 0.1 is as close as the ranks to no dropout: $msg"
# rank 0 alone wrote the run directory, and printed the progress
[ "$(grep -c '^done ' "$W/o")" -eq 0 ] && [ "$(grep -c '^done ' "$W/e")" -eq 1 ] ||
    fail "2 ranks: expected one 'done' line: $(cat "$W/o" "$W/e")"

# ---- a rank killed mid-run; its resume ----
# rank 1 of a rope run; rank 0 (the one that writes) of a seqpe run with shifted starts, its
# regularisers, dropout and accumulation, whose draws and data cursor must line up after resume
K="$S --pe rope --save-every 5 --keep 2"
for cfg in "1:rope" "0:seqpe --seqpe-shift-prob 0.5 --dropout 0.1 --accum 2"; do
    rank=${cfg%%:*} opts="$S --pe ${cfg#*:} --save-every 5 --keep 2"
    rm -rf "$W/full" "$W/killed"
    mpi 2 train $opts --out "$W/full" >/dev/null 2>"$W/e" || fail "$cfg: uninterrupted run: $(cat "$W/e")"
    PELAB_TEST_RANK_FAULT=13:$rank:kill mpi 2 train $opts --out "$W/killed" >/dev/null 2>"$W/e" &&
        fail "$cfg: a job with a killed rank exited 0"
    grep -q "process rank $rank .*exited on signal 9" "$W/e" || fail "$cfg: no error names the killed rank: $(cat "$W/e")"
    [ "$(ls "$W/killed/checkpoints")" = "$(printf 'state-0000000005.safetensors\nstate-0000000010.safetensors')" ] ||
        fail "$cfg: checkpoints after the kill: $(ls -a "$W/killed/checkpoints")"
    rm -rf "$W/killed-$rank" "$W/full-$rank" && cp -a "$W/killed" "$W/killed-$rank" && cp -a "$W/full" "$W/full-$rank"
    mpi 2 train --resume "$W/killed" >/dev/null 2>"$W/e" || fail "$cfg: resume on 2 ranks: $(cat "$W/e")"
    grep -q "step 10" "$W/e" || fail "$cfg: the resume did not start from step 10: $(cat "$W/e")"
    [ "$(losses "$W/full")" = "$(losses "$W/killed")" ] || fail "$cfg: resumed on 2 ranks: log differs"
    same_weights "$W/full/model.safetensors" "$W/killed/model.safetensors" ||
        fail "$cfg: resumed on 2 ranks: weights differ from the uninterrupted run"
done
# on another number of ranks: rope in one process, seqpe (dropout, accumulation) on 3 ranks
"$P" train --resume "$W/killed-1" >/dev/null 2>"$W/e" || fail "resume in one process: $(cat "$W/e")"
msg=$(compare close "$W/full-1" "$W/killed-1") || fail "resumed in one process: $msg"
mpi 3 train --resume "$W/killed-0" >/dev/null 2>"$W/e" || fail "seqpe: resume on 3 ranks: $(cat "$W/e")"
msg=$(compare close "$W/full-0" "$W/killed-0") || fail "seqpe with dropout: resumed on 3 ranks: $msg"

# ---- ranks that drift apart ----
PELAB_TEST_RANK_FAULT=7:1:diverge mpi 2 train $K --out "$W/apart" >/dev/null 2>"$W/e" &&
    fail "diverged ranks exited 0"
[ "$(grep -c '^pelab: ' "$W/e")" -eq 1 ] &&
    grep -q "^pelab: step 10: the weights of MPI rank 1 differ from rank 0's .*the checkpoint of step 5 is kept" "$W/e" ||
    fail "diverged ranks: expected one error line: $(cat "$W/e")"
[ "$(ls "$W/apart/checkpoints")" = "state-0000000005.safetensors" ] || fail "diverged ranks wrote a checkpoint"

# ---- non-finite values: one error line; a rollback (rank 0 reads the checkpoint) as one process ----
PELAB_TEST_NAN=7:grad mpi 2 train $K --out "$W/nan" >/dev/null 2>"$W/e" && fail "a NaN gradient on 2 ranks exited 0"
[ "$(grep -c '^pelab: ' "$W/e")" -eq 1 ] &&
    grep -q "^pelab: step 7: the gradient norm is not finite (nan; .*the checkpoint of step 5 is kept" "$W/e" ||
    fail "a NaN gradient on 2 ranks: expected one error line: $(cat "$W/e")"
PELAB_TEST_NAN=7:grad:once "$P" train $K --on-nan rollback --out "$W/rb-1" >/dev/null 2>"$W/e" ||
    fail "rollback, one process: $(cat "$W/e")"
PELAB_TEST_NAN=7:grad:once mpi 2 train $K --on-nan rollback --out "$W/rb-2" >/dev/null 2>"$W/e" ||
    fail "rollback, 2 ranks: $(cat "$W/e")"
[ "$(grep -c "rolled back to step 5" "$W/e")" -eq 1 ] || fail "rollback on 2 ranks: $(cat "$W/e")"
msg=$(compare close "$W/rb-1" "$W/rb-2") || fail "rollback: 2 ranks differ from one process: $msg"

# ---- evaluation: a split, a length sweep ----
# 16 test examples in passes of 3: six passes, the last short, shared by 2 and 3 ranks; each pass
# holds the examples it holds in one process, so only the double sums differ
"$P" eval --threads 1 --model "$W/rope-1" --split test --batch 3 --json >"$W/ev1" || fail "eval"
for n in 2 3; do
    mpi $n eval --threads 1 --model "$W/rope-1" --split test --batch 3 --json >"$W/ev$n" 2>"$W/e" ||
        fail "eval, $n ranks: $(cat "$W/e")"
    /usr/bin/python3 - "$W/ev1" "$W/ev$n" <<'PY' || fail "eval on $n ranks differs: $(cat "$W/ev1" "$W/ev$n")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in a:
    if isinstance(a[k], float): assert abs(a[k] - b[k]) <= 1e-12 * max(1, abs(a[k])), k
    else: assert a[k] == b[k], k
PY
done
D=$W/data
export PELAB_FETCH=/bin/false PELAB_DATA=$W/nowhere
install_sotu "$D"
"$P" train $M --eval-every 0 --data-dir "$D" --task text --tokenizer byte --seq-len 32 --steps 4 \
    --out "$W/t" >/dev/null 2>"$W/e" || fail "train text: $(cat "$W/e")"
"$P" eval --threads 1 --model "$W/t" --lengths 1x,2x --json >"$W/sw1" || fail "sweep"
mpi 2 eval --threads 1 --model "$W/t" --lengths 1x,2x --json --csv "$W/sw.csv" >"$W/sw2" 2>"$W/e" ||
    fail "sweep, 2 ranks: $(cat "$W/e")"
/usr/bin/python3 - "$W/sw1" "$W/sw2" <<'PY' || fail "sweep on 2 ranks differs: $(cat "$W/sw1" "$W/sw2")"
import json, sys
a, b = (json.load(open(p))["rows"] for p in sys.argv[1:3])
assert len(a) == len(b) == 2
for x, y in zip(a, b):
    for k in x:
        if k == "seconds": continue
        if isinstance(x[k], float): assert abs(x[k] - y[k]) <= 1e-12 * max(1, abs(x[k])), k
        else: assert x[k] == y[k], k
PY
[ "$(wc -l <"$W/sw.csv")" -eq 3 ] || fail "sweep, 2 ranks: CSV $(cat "$W/sw.csv")"

# ---- one line for what cannot be ----
mpi 2 train $S --pe rope --batch 1 --out "$W/b1" >/dev/null 2>"$W/e"; rc=$?
[ $rc -ne 0 ] && [ "$(grep -c '^pelab: ' "$W/e")" -eq 1 ] &&
    grep -q "^pelab: --batch 1 is below the 2 MPI ranks" "$W/e" || fail "--batch 1 on 2 ranks: $(cat "$W/e")"
[ ! -e "$W/b1" ] || fail "--batch 1 on 2 ranks made a run directory"
mpi 2 sample --model "$W/rope-1" >/dev/null 2>"$W/e"; rc=$?
[ $rc -ne 0 ] && [ "$(grep -c '^pelab: ' "$W/e")" -eq 1 ] && grep -q "^pelab: pelab sample runs in one process" "$W/e" ||
    fail "sample on 2 ranks: $(cat "$W/e")"
mpi 2 eval --model "$W/rope-1" --split long >/dev/null 2>"$W/e"; rc=$?
[ $rc -eq 2 ] && [ "$(grep -c '^pelab: ' "$W/e")" -eq 1 ] && grep -q "^pelab: --split long: task indirect" "$W/e" ||
    fail "eval --split long on 2 ranks: exit $rc: $(cat "$W/e")"
# ranks that run different command lines (mpirun's "A : B" form) stop before any collective: one
# line naming the first setting that differs, exit 2 on every rank, no rank left running, no run
mpmd() { timeout 60 mpirun --oversubscribe --bind-to none -np 1 "$P" $1 : -np 1 "$P" $2; }
for pair in "--d-model 32|--d-model 64|'--d-model 64' where rank 0 has '--d-model 32'" \
            "--pe rope|--pe pope|'--pe pope' where rank 0 has '--pe rope'" \
            "--steps 20|--steps 21|'--steps 21' where rank 0 has '--steps 20'" \
            "--lr 1e-3|--lr 2e-3|'--lr 2e-3' where rank 0 has '--lr 1e-3'"; do
    IFS='|' read -r a b want <<<"$pair"
    rm -rf "$W/mm"
    base="--heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 16 --indirect-test-size 16 --eval-every 0 --out $W/mm"
    mpmd "train --d-model 32 --pe rope --steps 20 --lr 1e-3 $base $a" "train --d-model 32 --pe rope --steps 20 --lr 1e-3 $base $b" \
        >/dev/null 2>"$W/e"; rc=$?
    [ $rc -eq 2 ] && [ "$(grep -c '^pelab: ' "$W/e")" -eq 1 ] &&
        grep -qF "pelab: rank 1's command line differs from rank 0's: it has $want" "$W/e" ||
        fail "ranks with $a and $b: exit $rc: $(cat "$W/e")"
    [ ! -e "$W/mm" ] || fail "ranks with $a and $b made a run directory"
done
mpmd "train $S --pe rope --out $W/mix" "eval --model $W/rope-1" >/dev/null 2>"$W/e"; rc=$?
[ $rc -eq 2 ] && [ "$(grep -c '^pelab: ' "$W/e")" -eq 1 ] &&
    grep -qF "pelab: rank 1's command line differs from rank 0's: it has 'eval' where rank 0 has 'train'" "$W/e" ||
    fail "train and eval in one launch: exit $rc: $(cat "$W/e")"
# (this test's own ranks: other tests may be running the same binary at the same time)
pgrep -f "$P (train|eval) .*$W/" >/dev/null && fail "a rank is left running"
echo "ok"
