#!/usr/bin/env bash
# Reproducibility: a 16-step run checkpointed at 8 and an 8-step run resumed to 16 log the same
# per-step losses bit for bit (same threads); the same seed twice gives the same losses; another
# seed does not. Also with dropout and gradient accumulation, where the masks and micro-steps
# must line up across the resume. summary.json names the builds that trained a run: this one's
# commit alone, and the checkpoint's builds first when another build (or one from before the
# list) made the checkpoint it resumed.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 4 --threads 2 --indirect-val-size 32 --indirect-test-size 32"
# Fixed schedule length, so the 8-step run and the 16-step run share their learning rates.
S="$TINY --warmup 5 --decay-steps 16 --log-every 1 --eval-every 4 --eval-batches 1"



for extra in "--pe pope" "--pe rope --dropout 0.1 --accum 2"; do
    rm -rf "$W"/full "$W"/part "$W"/again "$W"/other
    train $S $extra --steps 16 --save-every 8 --out "$W/full"
    train $S $extra --steps 8 --out "$W/part"
    train --resume "$W/part" --steps 16
    [ "$(wc -l <"$W/full/log.jsonl")" -eq 16 ] || fail "$extra: full log has $(wc -l <"$W/full/log.jsonl") lines"
    diff <(losses "$W/full") <(losses "$W/part") >"$W/diff" ||
        fail "$extra: resumed run differs from the uninterrupted one: $(head -5 "$W/diff")"
    same_weights "$W/full/model.safetensors" "$W/part/model.safetensors" ||
        fail "$extra: final weights differ after resume"
    train $S $extra --steps 16 --save-every 8 --out "$W/again"
    diff <(losses "$W/full") <(losses "$W/again") >/dev/null || fail "$extra: same seed, different losses"
    train $S $extra --steps 16 --save-every 8 --seed 2 --out "$W/other"
    diff <(losses "$W/full") <(losses "$W/other") >/dev/null && fail "$extra: seeds 1 and 2 gave the same losses"
done

# A run killed after its checkpoint at step 8: its state is the step-8 one, its log holds
# lines past the checkpoint and a torn last line. The resume cuts the log back to step 8 and
# ends with exactly the uninterrupted run's log.
rm -rf "$W/full" "$W/s8" "$W/killed"
train $S --pe rope --steps 16 --out "$W/full"
train $S --pe rope --steps 8 --out "$W/s8"
mkdir "$W/killed"
cp -r "$W/full/config.json" "$W/s8/checkpoints" "$W/s8/model.safetensors" "$W/killed/"
sed -i "s|$W/full|$W/killed|" "$W/killed/config.json"
head -n 11 "$W/full/log.jsonl" >"$W/killed/log.jsonl"
printf '{"step": 12, "lo' >>"$W/killed/log.jsonl"
train --resume "$W/killed"
grep -q "^resuming $W/killed at step 8/16" "$W/err" || fail "killed run: not resumed at step 8: $(cat "$W/err")"
diff <(losses "$W/full") <(losses "$W/killed") >"$W/diff" ||
    fail "killed run resumed differently: $(head -5 "$W/diff")"
same_weights "$W/full/model.safetensors" "$W/killed/model.safetensors" || fail "killed run: final weights differ"

# trained-by: this build's commit; a checkpoint's own list first, a byte no commit holds as '?'
# (a quote, a backslash, the two bytes of é), a list too long to keep as its first build and this
commit=$(build_commit)
[ -n "$commit" ] || fail "no commit in pelab --version"
by() { /usr/bin/python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["trained-by"]))' "$1/summary.json"; }
[ "$(by "$W/full")" = "[\"$commit\"]" ] || fail "uninterrupted run: trained-by $(by "$W/full")"
[ "$(by "$W/killed")" = "[\"$commit\"]" ] || fail "run resumed by its own build: trained-by $(by "$W/killed")"
long=$(printf '%s,' $(seq -w 100 130) | sed 's/,$//') # 31 builds of 3 characters (123 with commas)
long=$long,$long,$long,$long # too many to keep beside this build's
for old in '0123456789ab' - 'a"b\cé,0123456789ab' "$long"; do
    rm -rf "$W/s8x" && cp -r "$W/s8" "$W/s8x"
    sed -i "s|$W/s8|$W/s8x|" "$W/s8x/config.json"
    /usr/bin/python3 tests/lib/st_edit.py "$W/s8x/checkpoints/state-0000000008.safetensors" meta trained-by "$old" ||
        fail "st_edit"
    train --resume "$W/s8x" --steps 16
    case $old in
    -) want="[\"unrecorded\", \"$commit\"]" ;;
    0*) want="[\"$old\", \"$commit\"]" ;;
    1*) want="[\"100\", \"...\", \"$commit\"]" ;;
    *) want="[\"a?b?c??\", \"0123456789ab\", \"$commit\"]" ;; # not a commit's bytes: '?'s
    esac
    [ "$(by "$W/s8x")" = "$want" ] || fail "resumed from a checkpoint of builds '$old': trained-by $(by "$W/s8x"), want $want"
    diff <(losses "$W/full") <(losses "$W/s8x") >/dev/null || fail "resumed from builds '$old': another run"
done
echo "ok"
