#!/usr/bin/env bash
# train --init-from RUN: the new run starts from the source's weights bit for bit (a run with
# learning rate 0 keeps them), records the source (path, step, checksum) in config.json, and
# keeps the source's model and encoding; a run of another width, encoding, vocabulary or table
# size, a missing or damaged source, are refused with one line and nothing written. Length
# extension by fine-tuning: --rope-scaling with --init-from is recorded (yarn's L_train is the
# source's context) and eval and sample use it by default; without --init-from, or for a run of
# another encoding, it is one usage error. compare's NAME:init-from=RUN takes {seed} and the scaling.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 16 --heads 2 --layers 1 --batch 8 --threads 1 --eval-every 0 --indirect-val-size 32 --indirect-test-size 32"
FROZEN="--steps 1 --lr 0 --min-lr 0 --warmup 0 --threads 1 --eval-every 0"

crc() { # a model file's data checksum, from its header
    /usr/bin/python3 -c '
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
print(json.loads(b[8:8 + n])["__metadata__"]["pelab.data-crc32"])' "$1"
}

for pe in rope alibi learned; do
    "$P" train --task indirect --pe $pe $TINY --steps 10 --out "$W/$pe" >/dev/null 2>"$W/err" ||
        fail "train --pe $pe exited $?: $(tail -3 "$W/err")"
done
S="$W/rope"

# ---- the initial weights are the source's; the run records where they came from ----
"$P" train --init-from "$S" $FROZEN --out "$W/ft" >/dev/null 2>"$W/err" ||
    fail "train --init-from exited $?: $(cat "$W/err")"
same_weights "$S/model.safetensors" "$W/ft/model.safetensors" ||
    fail "a fine-tuned run at learning rate 0 does not hold the source's weights"
"$P" train --task indirect --pe rope $TINY $FROZEN --out "$W/fresh" >/dev/null 2>"$W/err" ||
    fail "train (fresh, lr 0) exited $?: $(cat "$W/err")"
same_weights "$S/model.safetensors" "$W/fresh/model.safetensors" &&
    fail "a fresh run's weights equal the trained source's (the comparison sees nothing)"
[ "$(json "$W/ft/config.json" 'j["training"]["init-from"]')" = "'$S'" ] || fail "config.json lacks init-from"
[ "$(json "$W/ft/config.json" 'j["derived"]["init-from-step"]')" = 10 ] || fail "init-from-step is not 10"
[ "$(json "$W/ft/config.json" 'j["derived"]["init-from-checksum"]')" = "'$(crc "$S/model.safetensors")'" ] ||
    fail "init-from-checksum is not the source model's data checksum"
[ "$(json "$W/ft/config.json" 'j["model"]["d-model"]')" = 16 ] || fail "the source's width was not carried"
# the same evaluation as the source's, bit for bit
[ "$(json <("$P" eval --model "$S" --json --threads 1) 'j["loss"]')" = \
  "$(json <("$P" eval --model "$W/ft" --json --threads 1) 'j["loss"]')" ] ||
    fail "the fine-tuned run at learning rate 0 evaluates differently from its source"
# the new run trains on (a fresh optimizer), and resumes as any run
"$P" train --init-from "$S" --steps 4 --threads 1 --eval-every 0 --save-every 2 --out "$W/ft2" \
    >/dev/null 2>"$W/err" || fail "train --init-from --steps 4 exited $?: $(cat "$W/err")"
same_weights "$S/model.safetensors" "$W/ft2/model.safetensors" && fail "fine-tuning changed no weight"
"$P" train --resume "$W/ft2" --steps 6 >/dev/null 2>"$W/err" || fail "resume of a fine-tuned run: $(cat "$W/err")"
[ "$(json "$W/ft2/config.json" 'j["derived"]["init-from-step"]')" = 10 ] || fail "a resume lost init-from-step"
# a resume that finds no checkpoint starts over from the source, if it is still the recorded one
cp -r "$W/ft2" "$W/ft3"
rm -rf "$W/ft3/checkpoints" "$W/ft3/model.safetensors" "$W/ft3/summary.json"
"$P" train --resume "$W/ft3" >/dev/null 2>"$W/err" || fail "resume from the start: $(cat "$W/err")"
cmp -s "$W/ft2/model.safetensors" "$W/ft3/model.safetensors" ||
    same_weights "$W/ft2/model.safetensors" "$W/ft3/model.safetensors" ||
    fail "a fine-tuned run started over from its source differs from the first time"
cp -r "$S" "$W/src2"
"$P" train --init-from "$W/src2" --steps 2 --threads 1 --eval-every 0 --out "$W/ft4" >/dev/null 2>"$W/err" ||
    fail "train --init-from src2: $(cat "$W/err")"
"$P" train --resume "$W/src2" --steps 12 >/dev/null 2>"$W/err" || fail "resume src2: $(cat "$W/err")"
rm -rf "$W/ft4/checkpoints" "$W/ft4/model.safetensors" "$W/ft4/summary.json"
expect 1 "--init-from $W/src2: that run's model is now step 12" -- train --resume "$W/ft4"
[ -e "$W/ft4/model.safetensors" ] && fail "a refused start-over wrote a model"

# ---- incompatible or unusable sources: one line, nothing written ----
expect 2 "--init-from $S: that run has --d-model 16, not 32" -- train --init-from "$S" --d-model 32 $FROZEN --out "$W/x"
expect 2 "--init-from $S: that run has --heads 2, not 4" -- train --init-from "$S" --heads 4 $FROZEN --out "$W/x"
expect 2 "--init-from $S: that run has --layers 1, not 2" -- train --init-from "$S" --layers 2 $FROZEN --out "$W/x"
expect 2 "--init-from $S: that run has --pe rope, not alibi" -- train --init-from "$S" --pe alibi $FROZEN --out "$W/x"
expect 2 "--init-from $S: that run has --rope-base 10000, not 500" -- \
    train --init-from "$S" --rope-base 500 $FROZEN --out "$W/x"
expect 2 "--init-from $W/learned: tensor pos_emb.weight is (50, 16) there and (60, 16) here" -- \
    train --init-from "$W/learned" --indirect-max-len 50 $FROZEN --out "$W/x"
expect 1 "--init-from: $W/none is not a pelab run directory (no config.json)" -- \
    train --init-from "$W/none" $FROZEN --out "$W/x"
cp -r "$S" "$W/damaged"
printf 'xx' | dd of="$W/damaged/model.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
expect 1 "--init-from: $W/damaged/model.safetensors" -- train --init-from "$W/damaged" $FROZEN --out "$W/x"
rm "$W/damaged/model.safetensors"
expect 1 "--init-from: $W/damaged: no model saved yet (missing model.safetensors)" -- \
    train --init-from "$W/damaged" $FROZEN --out "$W/x"
[ -e "$W/x" ] && fail "a refused --init-from left $W/x behind"

# ---- length extension by fine-tuning (text: another vocabulary, and RoPE's scaling) ----
D="$W/data"
install_sotu "$D"
TEXT="--task text --tokenizer byte --data-dir $D"
expect 2 "--init-from $S: that run's vocabulary has 67 tokens, task text here has 258" -- \
    train --init-from "$S" $TEXT $FROZEN --out "$W/x"
"$P" train $TEXT --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --eval-every 0 --seq-len 32 \
    --steps 10 --out "$W/t" >/dev/null 2>"$W/err" || fail "train text: $(cat "$W/err")"
"$P" train --init-from "$W/t" --seq-len 64 --rope-scaling yarn --rope-scale 2 --batch 4 --steps 3 \
    --threads 1 --eval-every 0 --out "$W/ty" >/dev/null 2>"$W/err" || fail "fine-tune with yarn: $(cat "$W/err")"
[ "$(json "$W/ty/config.json" '[j["encoding"][k] for k in ("rope-scaling", "rope-scale", "rope-original-len")]')" = \
  "['yarn', 2, 32]" ] || fail "config.json does not record yarn, scale 2, L_train 32: $(cat "$W/ty/config.json")"
[ "$(json "$W/ty/config.json" 'j["task"]["seq-len"]')" = 64 ] || fail "the new --seq-len was not kept"
[ "$(json "$W/ty/config.json" 'j["task"]["dataset"]')" = "'sotu'" ] || fail "the source's dataset was not carried"
loss() { json <("$P" eval --model "$W/ty" --json --threads 1 "$@") 'j["loss"]'; }
recorded=$(loss)
[ "$recorded" = "$(loss --rope-scaling yarn --rope-scale 2 --rope-original-len 32)" ] ||
    fail "eval does not use the recorded scaling by default"
[ "$recorded" != "$(loss --rope-scaling none)" ] || fail "--rope-scaling none at eval changed nothing"
"$P" sample --model "$W/ty" --count 1 --prompt 8 --tokens 8 --threads 1 >"$W/out" 2>"$W/err" ||
    fail "sample of a fine-tuned run: $(cat "$W/err")"
grep -q "^--- model" "$W/out" || fail "sample output: $(cat "$W/out")"
# a yarn fine-tune fine-tuned again with another scaling: what the new one does not read is left
# out, in one notice, not held against the user
for method in pi none; do
    "$P" train --init-from "$W/ty" --rope-scaling $method --batch 4 --steps 2 --threads 1 --eval-every 0 \
        --out "$W/ty-$method" >/dev/null 2>"$W/err" || fail "fine-tune the yarn run with --rope-scaling $method: $(cat "$W/err")"
    want="--rope-original-len 32"
    [ $method = none ] && want="--rope-scale 2, --rope-original-len 32"
    grep -qF -- "--init-from $W/ty: not carried over, as --rope-scaling $method does not use them: $want" "$W/err" ||
        fail "fine-tune with --rope-scaling $method: the notice: $(cat "$W/err")"
    [ "$(json "$W/ty-$method/config.json" 'j["encoding"].get("rope-original-len")')" = None ] ||
        fail "--rope-scaling $method recorded the source's rope-original-len"
done
[ "$(json "$W/ty-pi/config.json" '[j["encoding"][k] for k in ("rope-scaling", "rope-scale")]')" = "['pi', 2]" ] ||
    fail "--rope-scaling pi did not keep the source's scale: $(cat "$W/ty-pi/config.json")"
# compare: seed s fine-tunes the source run of seed s ({seed}), and the scaling beside init-from
# is the fine-tune's, recorded in each run as train --init-from records it
for s in 1 2; do
    "$P" train $TEXT --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --eval-every 0 --seq-len 32 \
        --steps 4 --seed $s --out "$W/pre/rope-s$s" >/dev/null 2>"$W/err" || fail "train text seed $s: $(cat "$W/err")"
done
# (a shared scaling given beside it is not the fine-tune's: its own stands, in training and sweep)
"$P" compare --task text --pe "rope:init-from=$W/pre/rope-s{seed}:rope-scaling=yarn:rope-scale=2" --seeds 2 --seq-len 64 \
    --batch 4 --steps 2 --threads 1 --eval-every 0 --lengths 1x --rope-scaling pi --rope-scale 4 --out "$W/cft" \
    >/dev/null 2>"$W/err" || fail "compare with init-from=...-s{seed}: $(cat "$W/err")"
for s in 1 2; do
    R=$(ls -d "$W"/cft/rope+init-from-*_pre_rope-s_seed_+rope-scaling-yarn+rope-scale-2~*-s$s)
    swept=$(json "$R/sweep.json" 'j["rows"][0]["loss"]')
    [ "$swept" = "$(json <("$P" eval --model "$R" --lengths 64 --json --threads 1) 'j["rows"][0]["loss"]')" ] &&
        [ "$swept" != "$(json <("$P" eval --model "$R" --lengths 64 --json --threads 1 --rope-scaling pi --rope-scale 4) 'j["rows"][0]["loss"]')" ] ||
        fail "compare's sweep of a yarn fine-tune is not with its own scaling"
    [ "$(json "$R/config.json" 'j["training"]["init-from"]')" = "'$W/pre/rope-s$s'" ] ||
        fail "compare's seed $s did not fine-tune seed $s's run: $(cat "$R/config.json")"
    [ "$(json "$R/config.json" '[j["encoding"][k] for k in ("rope-scaling", "rope-scale")]')" = "['yarn', 2]" ] ||
        fail "compare's fine-tune did not train with its scaling: $(cat "$R/config.json")"
done
expect 2 "not of training (except to fine-tune a trained run at a longer length: --init-from RUN)" -- \
    train $TEXT --rope-scaling pi --rope-scale 2 $FROZEN --out "$W/x"
expect 2 "--rope-scaling applies to runs of --pe rope, not --pe alibi" -- \
    train --init-from "$W/alibi" --rope-scaling pi --rope-scale 2 $FROZEN --out "$W/x"
[ -e "$W/x" ] && fail "a refused --rope-scaling left $W/x behind"
echo "ok"
