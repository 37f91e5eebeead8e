#!/usr/bin/env bash
# SeqPE from the command line: each integration trains, evaluates and samples; its options land
# in config.json and its parameters in model.safetensors; bad settings are one-line usage errors.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 16 --indirect-test-size 16
      --seqpe-layers 1 --seqpe-width 8"

for case in "input" "attn-add --seqpe-proj per-layer" "attn-mul" "attn-bias --seqpe-digits 3"; do
    R="$W/$(tr ' ' '_' <<<"$case")"
    "$P" train --task indirect --pe seqpe --seqpe-mode $case $TINY --steps 6 --eval-every 3 \
        --eval-batches 1 --out "$R" >/dev/null 2>"$W/err" || fail "train --seqpe-mode $case exited $?: $(tail -3 "$W/err")"
    /usr/bin/python3 - "$R" $case <<'PY' || fail "$case: config.json or model.safetensors"
import json, struct, sys
d, case = sys.argv[1], sys.argv[2:]
cfg = json.load(open(d + "/config.json"))
enc = cfg["encoding"]
assert cfg["model"]["pe"] == "seqpe" and enc["seqpe-mode"] == case[0], enc
for k, v in zip(case[1::2], case[2::2]):
    assert str(enc[k[2:]]) == v, (k, v, enc)
b = open(d + "/model.safetensors", "rb").read()
names = set(json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])) - {"__metadata__"}
assert "pe.seqpe.digit_emb.weight" in names and "pe.seqpe.out.weight" in names, names
proj = {n for n in names if n.endswith("seqpe.qk.weight")}
want = set() if case[0] == "input" else (
    {"blocks.0.attn.seqpe.qk.weight"} if "per-layer" in case else {"pe.seqpe.qk.weight"})
assert proj == want, (proj, want)
PY
    "$P" eval --model "$R" --json >"$W/out" 2>"$W/err" || fail "$case: eval exited $?: $(cat "$W/err")"
    "$P" sample --model "$R" --count 1 >"$W/out" 2>"$W/err" || fail "$case: sample exited $?"
done

expect_usage() { # PATTERN -- ARGS...
    local pattern=$1; shift 2
    "$P" "$@" >/dev/null 2>"$W/err"; local rc=$?
    [ $rc -eq 2 ] || fail "pelab $*: exit $rc, expected 2 ($(cat "$W/err"))"
    [ "$(wc -l <"$W/err")" -eq 1 ] && grep -qF -- "$pattern" "$W/err" ||
        fail "pelab $*: expected one line with '$pattern': $(cat "$W/err")"
    [ -e "$W/no" ] && fail "pelab $*: left $W/no behind"
}
expect_usage "--seqpe-base: 1 is out of range [2, 65536]" -- train --pe seqpe --seqpe-base 1 $TINY --out "$W/no"
expect_usage "--seqpe-digits 1 in base 10 hold positions below 10, fewer than the training context" -- \
    train --pe seqpe --seqpe-digits 1 $TINY --out "$W/no"
expect_usage "--seqpe-dims 2: this model's positions are 1-D" -- train --pe seqpe --seqpe-dims 2 $TINY --out "$W/no"
expect_usage "--seqpe-mode: 'attn-scalar' is not one of" -- train --pe seqpe --seqpe-mode attn-scalar $TINY --out "$W/no"
expect_usage "--seqpe-heads 3 does not divide the encoder width 8" -- train --pe seqpe --seqpe-heads 3 $TINY --out "$W/no"
expect_usage "--seqpe-mode does not apply to --pe rope" -- train --pe rope --seqpe-mode input --out "$W/no"
exit 0
