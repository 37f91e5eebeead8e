#!/usr/bin/env bash
# What a new user and then a hostile one tried, each kept as a repro:
#  - a resume that finds no checkpoint of a run that saved a model stops and changes nothing;
#  - eval, sample and analyze refuse a model.safetensors that is not config.json's model (another
#    run's, an edited setting, a forged step), and load an edited file only with --edited;
#  - sample refuses a model whose outputs are not finite, and --first past the split;
#  - a checkpoint whose data cursor does not fit its step is passed over;
#  - --resume --steps beyond the run's says what the learning rate does; --decay-steps re-plans;
#  - eval --csv is checked before any work; long evaluations report progress with time left;
#  - a run that fails before its config.json leaves no directory; sample --first past a split of
#    windows; compare passes an encoding's evaluation-time option to its runs' sweeps;
#  - empty --lengths and --pe entries are usage errors; a tokenizer error shows bytes as \xNN.
set -u
. "$(dirname "$0")/lib/cli.sh"
ED="/usr/bin/python3 tests/lib/st_edit.py"
TINY="--d-model 32 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 32 --indirect-test-size 32"

sums() { (cd "$1" && find . -type f | sort | xargs md5sum); }
lrs() { /usr/bin/python3 -c '
import json, sys
print(" ".join(repr(json.loads(l)["lr"]) for l in open(sys.argv[1])))' "$1/log.jsonl"; }

# ---- a resume with nothing to resume from ----
train --task indirect --pe pope $TINY --steps 10 --out "$W/r"
rm "$W/r"/checkpoints/*
sums "$W/r" >"$W/before"
expect 1 "holds no checkpoint to resume from" -- train --resume "$W/r" --steps 15
sums "$W/r" | diff - "$W/before" >/dev/null || fail "a refused resume changed the run"
rm -r "$W/r/checkpoints"
expect 1 "nothing was changed" -- train --resume "$W/r" --steps 15
rm "$W/r/model.safetensors"
expect 1 "has saved summary.json" -- train --resume "$W/r"
sums "$W/r" >"$W/before"
# killed before its first checkpoint (config.json and a log only): starts from step 0
rm "$W/r/summary.json"
train --resume "$W/r"
grep -q "^training $W/r: 10 steps" "$W/err" || fail "a run without checkpoints did not start over: $(cat "$W/err")"

# ---- eval, sample, analyze: the model must be config.json's ----
train --task indirect --pe rope $TINY --steps 4 --out "$W/rope"
train --task indirect --pe nope $TINY --steps 4 --out "$W/nope"
for cmd in eval sample "analyze freq"; do
    $P $cmd --model "$W/rope" >/dev/null 2>"$W/e" || fail "$cmd of an untouched run: $(cat "$W/e")"
done
cp -r "$W/rope" "$W/x"
cp "$W/nope/model.safetensors" "$W/x/"
for cmd in eval sample "analyze freq" "analyze bias"; do
    expect 1 "trained with pe = nope, but the run's config.json has rope" -- $cmd --model "$W/x"
done
cp "$W/rope/model.safetensors" "$W/x/"
sed -i 's/"rope-base": 10000/"rope-base": 500/' "$W/x/config.json"
expect 1 "trained with rope-base = 10000, but the run's config.json has 500" -- eval --model "$W/x"
cp "$W/rope/config.json" "$W/x/"
sed -i 's/"indirect-max-shift": [0-9]*/"indirect-max-shift": 7/' "$W/x/config.json"
expect 1 "config.json has 7" -- sample --model "$W/x"
cp "$W/rope/config.json" "$W/x/"
$ED "$W/x/model.safetensors" meta pelab.config.d-model 64
expect 1 "trained with d-model = 64, but the run's config.json has 32" -- eval --model "$W/x"
cp "$W/rope/model.safetensors" "$W/x/"
$ED "$W/x/model.safetensors" meta step 99
expect 1 "metadata 'step' is '99', not a count up to the run's 4 steps" -- eval --model "$W/x"
$ED "$W/x/model.safetensors" meta step -
expect 1 "metadata 'step' is '(missing)'" -- sample --model "$W/x"

# an edited file without its checksum keys (docs/FORMATS.md): refused, loaded with --edited
cp "$W/rope/model.safetensors" "$W/x/"
$ED "$W/x/model.safetensors" nocrc
expect 1 "loads with --edited" -- eval --model "$W/x"
"$P" eval --model "$W/x" --edited >"$W/o" 2>"$W/e" || fail "eval --edited: $(cat "$W/e")"
"$P" eval --model "$W/rope" >"$W/o2" 2>/dev/null
diff <(sed 's/\[.*//' "$W/o") <(sed 's/\[.*//' "$W/o2") >/dev/null || fail "eval --edited differs: $(cat "$W/o")"
$ED "$W/x/model.safetensors" meta pelab.config.pe nope
$ED "$W/x/model.safetensors" nocrc
expect 1 "trained with pe = nope" -- eval --model "$W/x" --edited

# ---- sample: non-finite outputs, --first past the split ----
cp "$W/rope/config.json" "$W/rope/model.safetensors" "$W/x/"
for t in blocks.0.attn_norm.weight blocks.0.mlp_norm.weight final_norm.weight; do
    $ED "$W/x/model.safetensors" set $t 3e38
done
expect 1 "the model's output is not finite (nan)" -- sample --model "$W/x" --count 2
[ -s "$W/o" ] && fail "sample printed from a model with non-finite outputs: $(head -3 "$W/o")"
expect 1 "the model's weights or activations overflow, so there is no result to report" -- eval --model "$W/x"
expect 2 "--first 32: the test split has 32 examples (0 to 31)" -- sample --model "$W/rope" --first 32
"$P" sample --model "$W/rope" --first 30 --count 5 >"$W/o" 2>"$W/e" || fail "sample --first 30: $(cat "$W/e")"
[ "$(grep -c '^#' "$W/o")" -eq 2 ] && grep -q '^#31 ' "$W/o" || fail "sample --first 30 --count 5: $(cat "$W/o")"

# ---- a forged data cursor: passed over for the checkpoint before ----
train --task indirect --pe rope $TINY --steps 8 --save-every 4 --keep 2 --out "$W/c"
$ED "$W/c/checkpoints/state-0000000008.safetensors" meta data-cursor 5
"$P" train --resume "$W/c" >/dev/null 2>"$W/e" || fail "resume after a forged cursor: $(cat "$W/e")"
grep -q "metadata 'data-cursor' 5 does not fit step 8 .*falling back to the checkpoint of step 4" "$W/e" ||
    fail "forged cursor not refused: $(cat "$W/e")"
grep -q "^resuming $W/c at step 4/8" "$W/e" || fail "not resumed from step 4: $(cat "$W/e")"

# ---- resume beyond the run's steps: said, or re-planned ----
S="$TINY --warmup 2 --log-every 1"
train --task indirect --pe rope $S --steps 6 --out "$W/s"
cp -r "$W/s" "$W/s2"
train --resume "$W/s" --steps 10
grep -q "warning: updates 7 to 10 run at --min-lr 0.0001: the cosine schedule, fixed when the run began, ends at update 6" "$W/err" ||
    fail "resume beyond the schedule not said: $(cat "$W/err")"
[ "$(lrs "$W/s" | cut -d' ' -f7-)" = "0.0001 0.0001 0.0001 0.0001" ] || fail "extra updates not at min-lr: $(lrs "$W/s")"
train --resume "$W/s2" --steps 10 --decay-steps 0
grep -q "warning: the cosine schedule is re-planned to reach --min-lr at update 10 (it was 6): the learning rate of update 7 is 0.00055" "$W/err" ||
    fail "re-planned schedule not said: $(cat "$W/err")"
grep -q '"decay-steps": 10,' "$W/s2/config.json" || fail "re-planned schedule not recorded in config.json"
train $S --task indirect --pe rope --steps 10 --decay-steps 10 --out "$W/s3"
[ "$(lrs "$W/s2" | cut -d' ' -f7-)" = "$(lrs "$W/s3" | cut -d' ' -f7-)" ] ||
    fail "re-planned rates $(lrs "$W/s2") are not a 10-step schedule's $(lrs "$W/s3")"
"$P" eval --model "$W/s2" >/dev/null 2>"$W/e" || fail "eval after a re-planned resume: $(cat "$W/e")"

# ---- eval --csv checked first; progress ----
mkdir "$W/csvdir"
expect 2 "--csv $W/csvdir: is a directory" -- eval --model "$W/rope" --lengths 1x --csv "$W/csvdir"
expect 1 "--csv: $W/no/such.csv: cannot create" -- eval --model "$W/rope" --lengths 1x --csv "$W/no/such.csv"
PELAB_PROGRESS_EVERY=0 "$P" eval --model "$W/rope" --batch 8 >/dev/null 2>"$W/e" || fail "eval with progress"
grep -q "^evaluating the test split: 50% (16/32 examples), [0-9hm]*[0-9]s, about [0-9hm]*[0-9]s left$" "$W/e" ||
    fail "no progress line: $(cat "$W/e")"
"$P" eval --model "$W/rope" --batch 8 >/dev/null 2>"$W/e"
[ -s "$W/e" ] && fail "a short evaluation printed progress: $(cat "$W/e")"
PELAB_PROGRESS_EVERY=0 "$P" train --task indirect --pe rope $TINY --steps 2 --eval-batches 0 --out "$W/fin" >/dev/null 2>"$W/e" ||
    fail "train with progress: $(cat "$W/e")"
grep -q "^evaluating the val split: 100% (32/32 examples)" "$W/e" && grep -q "^evaluating the test split: 100% (32/32 examples)" "$W/e" &&
    [ "$(tail -1 "$W/e" | cut -c1-5)" = "done " ] || fail "the final evaluation's progress: $(cat "$W/e")"

# ---- empty lists, and a tokenizer error quoting binary bytes ----
expect 2 "--lengths: an empty list" -- eval --model "$W/rope" --lengths ""
expect 2 "--csv: an empty file name" -- eval --model "$W/rope" --lengths 1x --csv ""
expect 2 "--pe 'rope,': an empty entry" -- compare --task indirect --pe rope, --out "$W/cmp2"
expect 2 "--pe 'rope,,nope': an empty entry" -- compare --task indirect --pe rope,,nope --out "$W/cmp2"
expect 2 "--lengths: an empty list" -- compare --task indirect --pe rope --lengths "" --out "$W/cmp2"
[ -e "$W/cmp2" ] && fail "a refused compare left its directory"
printf '60 \001\002\377\300 62\n' >"$W/bad.jsb"
expect 1 "byte 3: '\x01\x02\xff\xc0' is not a MIDI pitch" -- tokenize --tokenizer jsb "$W/bad.jsb"
LC_ALL=C grep -q '[^ -~]' "$W/e" && fail "the error quotes raw bytes: $(od -c "$W/e" | head -3)"

# ---- a new run that cannot write its config.json (a full disk: here a file-size limit of 0)
# leaves no directory behind; an --out that existed before is kept ----
mkdir "$W/full"
err=$( (trap '' XFSZ; ulimit -f 0; "$P" train --task indirect --pe rope $TINY --steps 2 --out "$W/full/a/b" 2>&1 >/dev/null) )
[ "$err" = "pelab: $W/full/a/b/config.json: cannot write: File too large" ] || fail "full disk: $err"
[ -z "$(ls -A "$W/full")" ] || fail "a failed run left $(find "$W/full")"
mkdir "$W/full/kept"
err=$( (trap '' XFSZ; ulimit -f 0; "$P" train --task indirect --pe rope $TINY --steps 2 --out "$W/full/kept" 2>&1 >/dev/null) )
[ -d "$W/full/kept" ] && [ -z "$(ls -A "$W/full/kept")" ] || fail "a failed run in an existing --out: $err; $(find "$W/full")"

# ---- tasks of documents: a small State of the Union installed here ----
D=$W/data
export PELAB_FETCH=/bin/false
install_sotu "$D"
TT="--d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --eval-every 0 --data-dir $D --task text --tokenizer byte --seq-len 32"
train $TT --pe rope --steps 2 --out "$W/t"
# the data may move (config.json's data-dir edited); the model's own settings may not
cp -r "$D" "$W/moved" && cp -r "$W/t" "$W/t2"
sed -i "s|\"data-dir\": \"$D\"|\"data-dir\": \"$W/moved\"|" "$W/t2/config.json"
grep -q "\"data-dir\": \"$W/moved\"" "$W/t2/config.json" || fail "config.json has no data-dir to edit"
"$P" eval --model "$W/t2" >/dev/null 2>"$W/e" || fail "eval with the data moved: $(cat "$W/e")"
sed -i 's/"seq-len": 32/"seq-len": 16/' "$W/t2/config.json"
expect 1 "trained with seq-len = 32, but the run's config.json has 16" -- eval --model "$W/t2"
n=$("$P" eval --model "$W/t" --json | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["examples"])')
expect 2 "--first $n: the test split has $n windows (0 to $((n - 1)))" -- sample --model "$W/t" --first "$n"
"$P" sample --model "$W/t" --first $((n - 1)) --count 3 --tokens 4 >"$W/o" 2>"$W/e" || fail "sample the last window: $(cat "$W/e")"
[ "$(grep -c '^test window' "$W/o")" -eq 1 ] || fail "sample past the last window: $(cat "$W/o")"
# a continuation from non-finite outputs is refused before anything is printed
cp -r "$W/t" "$W/t3"
for t in blocks.0.attn_norm.weight blocks.0.mlp_norm.weight final_norm.weight; do
    $ED "$W/t3/model.safetensors" set $t 3e38
done
expect 1 "window 0, position 32: the model's output is not finite (nan)" -- sample --model "$W/t3" --prompt 32 --tokens 4
[ -s "$W/o" ] && fail "sample printed a continuation of non-finite outputs: $(head -3 "$W/o")"
# a sweep's progress: one span over every length, the length running named
PELAB_PROGRESS_EVERY=0 "$P" eval --model "$W/t" --lengths 1x,2x --batch 2 >/dev/null 2>"$W/e" || fail "sweep: $(cat "$W/e")"
grep -q "^length sweep of 2 lengths at 1x: [0-9]*% ([0-9]*/[0-9]* windows), [0-9hm]*[0-9]s, about [0-9hm]*[0-9]s left$" "$W/e" &&
    grep -q "^length sweep of 2 lengths at 2x: 100% " "$W/e" || fail "sweep progress: $(cat "$W/e")"
# a learned table joins an extrapolation compare with its evaluation-time --ape-extend
expect 2 "position 63 is beyond the table of 32 positions (--ape-max-len); evaluate with --ape-extend interpolate" -- compare $TT --pe learned,rope --seeds 1 --steps 2 --lengths 1x,2x --out "$W/cmp0"
"$P" compare $TT --pe learned,rope --seeds 1 --steps 2 --lengths 1x,2x --ape-extend interpolate --out "$W/cmp" \
    >"$W/o" 2>"$W/e" || fail "compare with --ape-extend: $(cat "$W/e")"
grep -qE '^\| learned \| ' "$W/o" || fail "no learned row: $(cat "$W/o")"
grep -q '"eval_options": "ape-extend=interpolate"' "$W/cmp/learned-s1/sweep-ape-extend=interpolate.json" ||
    fail "learned sweep not made with --ape-extend"
grep -q 'eval_options' "$W/cmp/rope-s1/sweep.json" && fail "--ape-extend reached the rope runs"
PELAB_PROGRESS_EVERY=0 "$P" compare $TT --pe learned:ape-extend=interpolate,rope --seeds 1 --steps 2 --lengths 1x,2x --out "$W/cmpv" \
    >"$W/o2" 2>"$W/e" || fail "compare with a variant's --ape-extend: $(cat "$W/e")"
grep -q '"eval_options": "ape-extend=interpolate"' "$W/cmpv/learned-s1/sweep-ape-extend=interpolate.json" ||
    fail "the variant's sweep not made with --ape-extend"
grep -q "^\[learned:ape-extend=interpolate s1\]  length sweep of 2 lengths at 2x: 100% " "$W/e" ||
    fail "compare's sweep progress not labelled with its run: $(cat "$W/e")"
# entries that differ only in evaluation-time options share their runs and keep a sweep each; an
# ablation's --pe list (here 9 entries, over 255 characters) is one value
LIST=rope,rope:rope-scaling=pi:rope-scale=2
for s in 3 4 5 6 7 8 9; do LIST=$LIST,rope:rope-scaling=pi:rope-scale=$s.25; done
[ ${#LIST} -gt 255 ] || fail "the long --pe list is ${#LIST} characters"
"$P" compare $TT --pe "$LIST" --seeds 1 --steps 2 --lengths 1x,2x --out "$W/cmps" \
    >"$W/o3" 2>"$W/e" || fail "compare with an evaluation-only variant: $(cat "$W/e")"
[ "$(ls -d "$W/cmps"/*-s1)" = "$W/cmps/rope-s1" ] || fail "an evaluation-only variant trained its own run: $(ls "$W/cmps")"
grep -q "^\[rope:rope-scaling=pi:rope-scale=2 s1\]  shares the run: $W/cmps/rope-s1$" "$W/e" || fail "sharing not said: $(cat "$W/e")"
grep -q '"eval_options": "rope-scaling=pi,rope-scale=2"' "$W/cmps/rope-s1/sweep-rope-scaling=pi,rope-scale=2.json" &&
    ! grep -q 'eval_options' "$W/cmps/rope-s1/sweep.json" || fail "the two sweeps of the shared run: $(ls "$W/cmps/rope-s1")"
[ "$(grep -c '^| rope' "$W/o3")" = 9 ] || fail "not a row per entry: $(cat "$W/o3")"
expect 2 "--ape-extend applies to the runs of --pe learned, which --pe does not list" -- \
    compare $TT --pe rope --seeds 1 --steps 2 --ape-extend interpolate --out "$W/cmp1"
[ -e "$W/cmp0" ] || [ -e "$W/cmp1" ] && fail "a refused compare left a directory"
echo "ok"
