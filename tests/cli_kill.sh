#!/usr/bin/env bash
# Crash safety: real tiny runs are killed with SIGKILL at random moments (many of them inside a
# checkpoint write: with --save-every 1 most of a step's time is the checkpoint's fsyncs) and
# resumed each time, until they finish. Checked:
#   - after every kill, the resume starts from a checkpoint no older than the last one the log
#     proves complete (the log line of step L is written after every checkpoint before L), so
#     a kill loses at most the updates since the last checkpoint;
#   - the finished run equals an uninterrupted one trained in the same directory: every log line
#     (but speed and time), the summary's metrics, the tensors of its kept checkpoints (whose
#     metadata hold the wall time), and its config.json and model.safetensors byte for byte
#     (options recorded in one canonical form: "--lr 1e-3" and the "0.001" a resume reads back
#     from config.json write the same bytes);
#   - no temporary file is left, and at most --keep checkpoints;
#   - a run being trained cannot be resumed by a second process at the same time.
# KILL_TEST_KILLS (default 20) is the fewest kills the test must have made over both runs.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 16 --indirect-test-size 16"
S="$TINY --steps 50 --warmup 5 --log-every 1 --eval-every 10 --eval-batches 1 --lr 1e-3 --eps 1e-8 --min-lr 1E-4"
MIN_KILLS=${KILL_TEST_KILLS:-20}

last_step() { /usr/bin/python3 -c '
import json, sys
s = 0
for l in open(sys.argv[1]):
    try: s = json.loads(l)["step"]
    except ValueError: break
print(s)' "$1/log.jsonl" 2>/dev/null || echo 0; }
metrics() { /usr/bin/python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(*(repr(s[k]) for k in ["steps", "train_loss", "train_acc", "val_loss", "val_acc", "test_loss", "test_acc"]))' "$1/summary.json"; }

total_kills=0 total_in_write=0
for cfg in "--pe rope --save-every 1 --keep 2:1" "--pe pope --dropout 0.1 --accum 2 --save-every 3 --keep 3:3"; do
    opts=${cfg%:*} every=${cfg##*:}
    rm -rf "$W/ref" "$W/run"
    start=$(date +%s%N)
    "$P" train $S $opts --out "$W/run" >/dev/null 2>"$W/err" || fail "reference run: $(tail -2 "$W/err")"
    ref_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    mv "$W/run" "$W/ref" # the killed run trains in the same directory, which its files record
    # Kill after 0 .. max_ms: about three updates' time at first, then adapted so that a segment
    # makes about two updates (the machine may be busy), some none at all.
    max_ms=$(( 3 * ref_ms / 50 > 20 ? 3 * ref_ms / 50 : 20 ))
    kills=0 in_write=0 need=0 segments=0 checked=0 repaired=0
    while :; do
        segments=$((segments + 1))
        [ $segments -gt 400 ] && fail "$opts: no end after 400 segments"
        if [ -f "$W/run/config.json" ]; then
            "$P" train --resume "$W/run" >/dev/null 2>"$W/seg" &
        else
            "$P" train $S $opts --out "$W/run" >/dev/null 2>"$W/seg" &
        fi
        pid=$!
        if [ $kills -lt 40 ]; then # then let it finish
            ms=$((RANDOM % max_ms))
            sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
            kill -KILL $pid 2>/dev/null
        fi
        { wait $pid; } 2>/dev/null; rc=$?
        # A kill never damages a checkpoint (each is renamed into place whole): nothing to pass over.
        grep -q 'falling back' "$W/seg" && fail "$opts: a kill left a damaged checkpoint: $(cat "$W/seg")"
        grep -q 'rewriting it from the checkpoint' "$W/seg" && repaired=$((repaired + 1))
        # The step this segment started from, when it got as far as saying so.
        r=$(sed -n 's/^resuming .* at step \([0-9]*\)\/.*/\1/p' "$W/seg")
        grep -q '^training ' "$W/seg" && r=0
        if [ -n "$r" ]; then
            [ "$r" -ge "$need" ] || fail "$opts: resumed at step $r, but the log proved a checkpoint at $need complete"
            need=0 checked=$((checked + 1))
        fi
        if [ $rc -eq 137 ]; then
            kills=$((kills + 1))
            ls -A "$W/run" "$W/run/checkpoints" 2>/dev/null | grep -q '\.tmp\.' && in_write=$((in_write + 1))
            l=$(last_step "$W/run")
            c=$(( l > 0 ? (l - 1) / every * every : 0 ))
            [ $c -gt $need ] && need=$c
            if [ -z "$r" ]; then max_ms=$((max_ms * 13 / 10 + 1))
            elif [ $((l - r)) -gt 3 ]; then max_ms=$((max_ms * 7 / 10 > 5 ? max_ms * 7 / 10 : 5)); fi
            continue
        fi
        [ $rc -eq 0 ] || fail "$opts: segment $segments exited $rc: $(tail -3 "$W/seg")"
        break
    done
    diff <(losses "$W/ref") <(losses "$W/run") >"$W/diff" ||
        fail "$opts: after $kills kills the log differs from the uninterrupted run: $(head -5 "$W/diff")"
    same_weights "$W/ref/model.safetensors" "$W/run/model.safetensors" ||
        fail "$opts: after $kills kills the final weights differ"
    for f in config.json model.safetensors; do
        cmp -s "$W/ref/$f" "$W/run/$f" || fail "$opts: after $kills kills $f is not byte-identical to the uninterrupted run's"
    done
    for f in $(cd "$W/ref" && ls checkpoints/*); do # their metadata hold the wall time trained
        same_weights "$W/ref/$f" "$W/run/$f" || fail "$opts: after $kills kills $f holds other tensors"
    done
    [ "$(metrics "$W/ref")" = "$(metrics "$W/run")" ] || fail "$opts: summary metrics differ"
    ls -A "$W/run" "$W/run/checkpoints" | grep -q '\.tmp\.' && fail "$opts: temporary files left"
    keep=$(echo "$opts" | sed 's/.*--keep \([0-9]*\).*/\1/')
    [ "$(ls "$W/run/checkpoints" | wc -l)" -le "$keep" ] || fail "$opts: more than $keep checkpoints kept"
    echo "$opts: $kills kills ($in_write left a temporary file, $repaired model files rewritten on" \
         "resume), $checked resume points checked; identical to the uninterrupted run"
    total_kills=$((total_kills + kills)) total_in_write=$((total_in_write + in_write))
done
[ $total_kills -ge "$MIN_KILLS" ] || fail "only $total_kills kills landed (want $MIN_KILLS)"

# One run, one writer: while a process trains a run, another resume of it is refused, naming that
# process (the directory is locked); the lock dies with its holder, even a killed one.
rm -rf "$W/run"
"$P" train $S --pe rope --steps 100000 --save-every 0 --log-every 1000 --out "$W/run" >/dev/null 2>&1 &
pid=$!
for i in $(seq 100); do [ -f "$W/run/log.jsonl" ] && break; sleep 0.05; done
"$P" train --resume "$W/run" >/dev/null 2>"$W/err"; rc=$?
kill -KILL $pid; { wait $pid; } 2>/dev/null
[ $rc -eq 1 ] && grep -q "^pelab: $W/run: process $pid is training this run (a pelab train or compare that holds its lock)$" "$W/err" ||
    fail "a second writer of a run: exit $rc: $(cat "$W/err")"
"$P" train --resume "$W/run" --steps 3 >/dev/null 2>"$W/err" || fail "resume after the holder was killed: $(cat "$W/err")"
echo "ok: $total_kills kills, $total_in_write during a file write"
