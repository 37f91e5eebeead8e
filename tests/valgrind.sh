#!/usr/bin/env bash
# make test-valgrind: a tiny training job, its resume, eval and sample, and a few refusals (a
# damaged checkpoint passed over, a damaged model refused, a NaN stopping a run), a comparison on
# an algorithmic task and the attention similarity of its runs under valgrind
# with the pelab of $PELAB_BIN (the portable build: valgrind emulates no AVX-512, so the
# kernels dispatch to AVX2 under it).
# A valgrind error or a definite leak fails the run (exit 99 from valgrind), as does a pelab
# exit status other than the one expected.
set -u
user_core=${OPENBLAS_CORETYPE-}
. "$(dirname "$0")/lib/cli.sh"
# cli.sh chose OpenBLAS's kernels for this CPU; valgrind emulates no AVX-512, so each run under it
# chooses its own (unless the user chose)
[ -n "$user_core" ] || unset OPENBLAS_CORETYPE
command -v valgrind >/dev/null || { echo "notice: valgrind is not installed ('make deps'); skipped"; exit 0; }
VG="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite --track-origins=yes"
TINY="--d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 16 --indirect-test-size 16"
n=0
vg() { # EXPECTED-EXIT ARGS...
    local want=$1; shift
    $VG "$P" "$@" >"$W/out" 2>"$W/err"; local rc=$?
    n=$((n + 1))
    [ $rc -eq 99 ] && fail "valgrind found errors in pelab $*: $(grep -v '^step ' "$W/err" | head -30)"
    [ $rc -eq "$want" ] || fail "pelab $* under valgrind: exit $rc, expected $want: $(tail -3 "$W/err")"
    echo "ok  pelab $* (exit $rc)"
}
vg 0 train $TINY --pe pope --steps 6 --save-every 2 --eval-every 3 --eval-batches 1 --out "$W/run"
vg 0 train --resume "$W/run" --steps 8
vg 0 eval --model "$W/run" --threads 1
vg 0 sample --model "$W/run" --count 2 --threads 1
/usr/bin/python3 tests/lib/st_edit.py "$W/run/checkpoints/state-0000000008.safetensors" raw-flip -1
vg 0 train --resume "$W/run" --steps 10
grep -q "falling back to the checkpoint of step 6" "$W/err" || fail "no fallback: $(cat "$W/err")"
/usr/bin/python3 tests/lib/st_edit.py "$W/run/model.safetensors" raw-cut 300
vg 1 eval --model "$W/run" --threads 1
PELAB_TEST_NAN=3:weight vg 1 train $TINY --pe rope --steps 6 --save-every 2 --check-finite --out "$W/nan"
PELAB_TEST_NAN=3:weight:once vg 0 train $TINY --pe rope --steps 4 --on-nan rollback --save-every 2 --out "$W/rb"
grep -q "rolled back to step 2" "$W/err" || fail "no rollback: $(cat "$W/err")"
PELAB_TEST_NAN=3:grad vg 0 train $TINY --pe nope --steps 4 --on-nan skip --out "$W/skip"
vg 2 train --lr abc --out "$W/bad"
# an algorithmic task: a compare with a random-positions variant (sizes evaluated each at its own
# length) and the attention similarity of its runs
ALG="--task copy --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --steps 2 --eval-every 0 --algo-train-max 3 --algo-test-per-size 2"
vg 0 compare $ALG --pe rope,rope:random-positions=16 --seeds 1 --out "$W/cmp"
vg 0 analyze attn-similarity --models "$W/cmp/rope-s1,$W/cmp/rope+random-positions-16-s1" --examples 2 --threads 1
echo "ok: $n pelab commands under valgrind, no errors"
