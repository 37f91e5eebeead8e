#!/usr/bin/env bash
# Damaged and foreign files. A checkpoint that is truncated, bit-flipped, of another format
# version, malformed (bad JSON, offsets past the end, overlapping tensors), of another model or
# run, or holding impossible values is passed over when resuming: one warning line naming the
# file and the fault, then the previous checkpoint, and the finished run still equals an
# uninterrupted one. A damaged model.safetensors is rewritten from the checkpoint on resume and
# refused by eval and sample. A faulty config.json is refused by every command. Every refusal is
# one line naming the file and the fault, and changes nothing in the run directory.
# (tests/lib/st_edit.py makes the damage; most edits recompute both checksums, so that the
# fault itself is what pelab finds.)
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 32 --indirect-test-size 32"
S="$TINY --steps 12 --warmup 3 --decay-steps 12 --log-every 1 --save-every 3 --keep 3 --eval-every 3 --eval-batches 1"
ED="/usr/bin/python3 tests/lib/st_edit.py"
cases=0

# Whether two runs logged the same values (but speed and time) and end with the same weights.
same_run() { /usr/bin/python3 -c '
import json, struct, sys
def log(d):
    return [{k: v for k, v in json.loads(l).items() if k not in ("tokens_per_s", "elapsed_s")}
            for l in open(d + "/log.jsonl")]
def weights(d):
    b = open(d + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); h.pop("__metadata__")
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
a, b = sys.argv[1:]
if log(a) != log(b): sys.exit("the logs differ")
if weights(a) != weights(b): sys.exit("the final weights differ")' "$1" "$2"; }

train $S --steps 9 --out "$W/base"                 # checkpoints of steps 3, 6 and 9
train $S --steps 9 --lr 2e-3 --out "$W/other-lr"   # another run of the same model
train $S --steps 9 --d-model 16 --out "$W/other-d" # another model
CK=checkpoints/state-0000000009.safetensors

# The run in $W/d, resumed to its end, equals the uninterrupted one.
finishes_like_ref() {
    same_run "$W/base" "$W/d" 2>"$W/diff" || fail "$1: resumed to its end: $(cat "$W/diff")"
}

# fallback PATTERN EDIT...: the step-9 checkpoint damaged by EDIT; the resume says so and goes on
# from step 6.
fallback() {
    local pattern=$1; shift
    rm -rf "$W/d" && cp -r "$W/base" "$W/d"
    if [ "$1" = cp ]; then cp "$2" "$W/d/$CK"; else $ED "$W/d/$CK" "$@" || fail "st_edit $*"; fi
    "$P" train --resume "$W/d" >/dev/null 2>"$W/err" || fail "$*: resume failed: $(cat "$W/err")"
    local line; line=$(grep '^warning: .*falling back' "$W/err")
    [ "$(grep -c 'falling back' "$W/err")" -eq 1 ] || fail "$*: not one fallback warning: $(cat "$W/err")"
    case "$line" in "warning: $W/d/$CK: "*"; falling back to the checkpoint of step 6") ;;
        *) fail "$*: warning does not name the file and the step: $line" ;; esac
    grep -qF -- "$pattern" <<<"$line" || fail "$*: '$pattern' not in: $line"
    grep -q "^resuming $W/d at step 6/9" "$W/err" || fail "$*: not resumed at step 6: $(cat "$W/err")"
    finishes_like_ref "$*"
    cases=$((cases + 1))
}
fallback "file is truncated"                     raw-cut 3000
fallback "file is truncated (0 bytes"            raw-cut 0
fallback "data checksum mismatch"                raw-flip -5
fallback "header checksum mismatch"              raw-sub '"format":"pelab-state"' '"format":"pelab-statf"'
fallback "header checksum mismatch"              raw-sub '"step":"9"' '"step":"8"'
fallback "header is not valid JSON"              raw-json
fallback "checkpoint format version 1; this pelab reads version 2" meta format-version 1
fallback "checkpoint format version 1 (pelab 0.1.0)" meta format-version -
fallback "not a pelab checkpoint (format 'pelab-model')" meta format pelab-model
fallback "holds step 8, its name says 9"         meta step 8
fallback "metadata 'data-cursor' is not a count: '-1'" meta data-cursor -1
fallback "metadata 'lr-scale' 2 is not in (0, 1]" meta lr-scale 0x1p+1
fallback "counters do not fit step 9"            meta adam-step 10
fallback "metadata 'elapsed-s' is not a finite number >= 0: 'inf'" meta elapsed-s inf
fallback "written with lr = 0.005, the run's config.json has 0.001" meta pelab.config.lr 0.005
fallback "written with lr = 0.002, the run's config.json has 0.001 (a checkpoint of another run?)" cp "$W/other-lr/$CK"
fallback "written with d-model = 16"              cp "$W/other-d/$CK"
fallback "tensor 'blocks.0.mlp.fc.weight' holds nan at element 0" nan blocks.0.mlp.fc.weight
fallback "tensor 'adam.v.final_norm.weight' holds -1 at element 0" set adam.v.final_norm.weight -1
fallback "tensor 'adam.m.tok_emb.weight' is not F32 or F64" dtype adam.m.tok_emb.weight I32
fallback "tensor 'tok_emb.weight' has another shape than the model's" shape tok_emb.weight 32,67
fallback "holds 23 tensors, the model needs 24" drop adam.m.final_norm.weight
fallback "tensor 'adam.m.blocks.0.attn_norm.weight' is missing" rename adam.m.blocks.0.attn_norm.weight adam.m.extra
fallback "past the end of the data"              offsets final_norm.weight 0 99999999
fallback "overlap"                               offsets final_norm.weight 0 128
fallback "a pelab-state file without the checksums" nocrc

# Two damaged: two warnings, then step 3.
rm -rf "$W/d" && cp -r "$W/base" "$W/d"
$ED "$W/d/$CK" raw-cut 100 && $ED "$W/d/checkpoints/state-0000000006.safetensors" raw-flip -1
train --resume "$W/d"
[ "$(grep -c 'falling back' "$W/err")" -eq 2 ] && grep -q "at step 3/9" "$W/err" || fail "two damaged: $(cat "$W/err")"
finishes_like_ref "two damaged"
cases=$((cases + 1))

# expect_fail CODE PATTERN ARGS...: one line "pelab: PATTERN..." (a resume may first have warned
# about each checkpoint it passed over), exit CODE, the run unchanged.
expect_fail() {
    expect "$1" "pelab: $2" -x '^warning: ' -u "$W/d" -- "${@:3}"
    cases=$((cases + 1))
}

# None usable: the resume stops, naming the newest fault.
rm -rf "$W/d" && cp -r "$W/base" "$W/d"
for f in "$W"/d/checkpoints/*; do $ED "$f" raw-flip -1; done
expect_fail 1 "$W/d/checkpoints: none of the 3 checkpoints is usable (the newest: $W/d/$CK: data checksum mismatch" \
    train --resume "$W/d"
# A run directory of pelab 0.1.0 (state.safetensors, no checkpoints/).
rm -rf "$W/d" && cp -r "$W/base" "$W/d" && mv "$W/d/$CK" "$W/d/state.safetensors" && rm -r "$W/d/checkpoints"
expect_fail 1 "$W/d/state.safetensors: a checkpoint of pelab 0.1.0 (format version 1)" train --resume "$W/d"

# model.safetensors damaged: a resume rewrites it from the checkpoint (one warning); eval and
# sample refuse it, naming the fault.
repair() {
    local pattern=$1; shift
    rm -rf "$W/d" && cp -r "$W/base" "$W/d"
    if [ "$1" = rm ]; then rm "$W/d/model.safetensors"; else $ED "$W/d/model.safetensors" "$@"; fi
    "$P" train --resume "$W/d" >/dev/null 2>"$W/err" || fail "$*: resume failed: $(cat "$W/err")"
    grep -q "^warning: $W/d/model.safetensors.*$pattern.*; rewriting it from the checkpoint of step 9$" "$W/err" ||
        fail "model $*: $(cat "$W/err")"
    finishes_like_ref "model $*"
    cases=$((cases + 1))
}
repair "is missing"                 rm
repair "file is truncated"          raw-cut 1000
repair "data checksum mismatch"     raw-flip -1
repair "holds step 3"               meta step 3
repair "holds other weights"        set tok_emb.weight 0.5

refuse() { # PATTERN EDIT...: eval and sample of $W/d with its model.safetensors damaged by EDIT
    local pattern=$1; shift
    rm -rf "$W/d" && cp -r "$W/base" "$W/d" && $ED "$W/d/model.safetensors" "$@"
    expect_fail 1 "$W/d/model.safetensors: $pattern" eval --model "$W/d" --threads 1
    expect_fail 1 "$W/d/model.safetensors: $pattern" sample --model "$W/d" --count 2 --threads 1
}
refuse "file is truncated (8-byte header length says" raw-cut 500
refuse "data checksum mismatch"               raw-flip -3
refuse "header checksum mismatch"             raw-sub '"format":"pelab-model"' '"format":"pelab-modem"'
refuse "header is not valid JSON (JSON: at byte 1: expected"  raw-json
refuse "tensor 'final_norm.weight': data_offsets [0, 99999999] past the end of the data" offsets final_norm.weight 0 99999999
refuse "tensors 'final_norm.weight' and 'tok_emb.weight' overlap (bytes [0, 128) of the data)" offsets final_norm.weight 0 128
refuse "tensor 'final_norm.weight': unknown dtype 'BF16'" dtype final_norm.weight BF16
refuse "tensor 'final_norm.weight' has dtype I32; parameters must be F32 or F64" dtype final_norm.weight I32
rm -rf "$W/d" && cp -r "$W/base" "$W/d" && cp "$W/other-d/model.safetensors" "$W/d/"
expect_fail 1 "$W/d/model.safetensors was trained with d-model = 16, but the run's config.json has 32" eval --model "$W/d" --threads 1
refuse "tensor 'blocks.0.attn.qkv.weight' holds nan at element 0" nan blocks.0.attn.qkv.weight
refuse "tensor 'final_norm.weight' is missing" drop final_norm.weight
refuse "unexpected tensor 'extra' (not a parameter of this model)" add extra
refuse "not a pelab model file (format 'pelab-state')" meta format pelab-state
refuse "a pelab-model file without the checksums" nocrc
# A model file of pelab 0.1.0 (the data checksum alone, under its old name) still loads, checked.
rm -rf "$W/d" && cp -r "$W/base" "$W/d" && $ED "$W/d/model.safetensors" old
"$P" eval --model "$W/d" --threads 1 >/dev/null 2>"$W/err" || fail "a model file of pelab 0.1.0: $(cat "$W/err")"
$ED "$W/d/model.safetensors" raw-flip -1
expect_fail 1 "$W/d/model.safetensors: data checksum mismatch (pelab.crc32 says" eval --model "$W/d" --threads 1

# config.json faults: eval, sample and resume each refuse, naming the file and the fault.
cfgfault() { # PATTERN EDIT: EDIT is python code changing the parsed config `c`, or raw:TEXT
    local pattern=$1 edit=$2
    rm -rf "$W/d" && cp -r "$W/base" "$W/d"
    if [ "${edit#raw:}" != "$edit" ]; then
        printf '%b' "${edit#raw:}" >"$W/d/config.json"
    else
        /usr/bin/python3 -c "
import json, sys
c = json.load(open(sys.argv[1]))
$edit
json.dump(c, open(sys.argv[1], 'w'))" "$W/d/config.json" || fail "config edit $edit"
    fi
    expect_fail 1 "$pattern" eval --model "$W/d" --threads 1
    expect_fail 1 "$pattern" sample --model "$W/d" --threads 1
    expect_fail 1 "$pattern" train --resume "$W/d"
}
C="$W/d/config.json"
cfgfault "$C: JSON: at byte 0: expected a value" "raw:"
cfgfault "$C: JSON: at byte 40: expected '\"' to start a key" 'raw:{"pelab-version": "0.1.0", "training": {'
cfgfault "$C: JSON: at byte 0: expected a value" 'raw:\x00\xff\x10binary'
cfgfault "$C is not a pelab config (no \"pelab-version\")" "raw:[1, 2]"
cfgfault "$C: group \"model\" is missing" 'del c["model"]'
cfgfault "$C: \"model\" is not an object" 'c["model"] = [1]'
cfgfault "$C: \"training\".\"lr\" is not a number or a string" 'c["training"]["lr"] = [1]'
cfgfault "$C: --lr: 'abc' is not a number" 'c["training"]["lr"] = "abc"'
cfgfault "$C: --steps: -5 is out of range" 'c["training"]["steps"] = -5'
cfgfault "$C: --d-model: 1e+300 is out of range" 'c["model"]["d-model"] = 1e300'
cfgfault "$C: --heads 3 does not divide --d-model 32" 'c["model"]["heads"] = 3'
cfgfault "$C: --on-nan: 'maybe' is not one of stop|skip|rollback" 'c["training"]["on-nan"] = "maybe"'
cfgfault "$C: unknown option --foo" 'c["training"]["foo"] = 1'
cfgfault "$C: --pope-base does not apply to --pe rope" 'c["encoding"]["pope-base"] = 100'
cfgfault "$C: --pe: unknown encoding 'nosuch'" 'c["model"]["pe"] = "nosuch"'
cfgfault "$C: unknown task 'nosuch' (known: indirect, text, dna, music, qa, image, copy, reverse, sort, parity, sum, addition, poly, lego, duplicate-string, stack-manipulation, binary-addition, selective-copy)" 'c["training"]["task"] = "nosuch"'
cfgfault "$C: \"training\".\"out\" is longer than 1023 characters" 'c["training"]["out"] = "x" * 1100'
# Settings that pass every check but are not the run's: the checkpoints say so.
rm -rf "$W/d" && cp -r "$W/base" "$W/d"
sed -i 's/"lr": 0.001/"lr": 0.002/' "$C"
expect_fail 1 "$W/d/checkpoints: none of the 3 checkpoints is usable (the newest: $W/d/$CK: written with lr = 0.001, the run's config.json has 0.002" \
    train --resume "$W/d"
# (Token caches and tokenizer files join these cases when the tasks that read them exist.)
echo "ok: $cases cases"
