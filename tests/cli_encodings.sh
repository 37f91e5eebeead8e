#!/usr/bin/env bash
# The absolute encodings, xPos, FoX and CoPE train, evaluate and sample from the command line; their
# options land in config.json; a learned run evaluates with --ape-extend interpolate (an
# evaluation-time option) and refuses it at training; RoPE's resonance is a training option. A
# sinusoidal run recorded before --sin-scale existed evaluates, resumes and is reused by compare
# as the σ = 1 run it was.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 8 --threads 1 --indirect-val-size 32 --indirect-test-size 32"

for case in "learned" "sinusoidal" "xpos" "learned --ape-max-len 64" "sinusoidal --sin-base 500 --sin-scale 1" \
            "xpos --xpos-scale-base 64" "rope --rope-resonance on" "rope --rope-fraction 0.5 --rope-p 0.5" \
            "fox" "fox --fox-gate bias --fox-bias-init 2" "cope" "cope --cope-max-pos 8 --cope-table shared"; do
    set -- $case
    pe=$1
    R="$W/$(tr ' ' '_' <<<"$case")"
    "$P" train --task indirect --pe $case $TINY --steps 12 --eval-every 6 --eval-batches 1 \
        --out "$R" >/dev/null 2>"$W/err" || fail "train --pe $case exited $?: $(tail -3 "$W/err")"
    [ -s "$R/model.safetensors" ] && [ -s "$R/summary.json" ] || fail "$case: run directory incomplete"
    /usr/bin/python3 - "$R" "$case" <<'PY' || fail "$case: config.json"
import json, sys
d, case = sys.argv[1], sys.argv[2].split()
cfg = json.load(open(d + "/config.json"))
enc = cfg["encoding"]
want = {"learned": {"ape-max-len"}, "sinusoidal": {"sin-base", "sin-scale"},
        "xpos": {"xpos-base", "xpos-scale-base", "xpos-gamma"},
        "rope": {"rope-base", "rope-layout", "rope-resonance", "rope-fraction", "rope-p"},
        "fox": {"fox-gate", "fox-bias-init"}, "cope": {"cope-max-pos", "cope-table"}}[case[0]]
assert cfg["model"]["pe"] == case[0] and set(enc) == want, (cfg["model"], enc)
for k, v in zip(case[1::2], case[2::2]):
    assert str(enc[k[2:]]) == v or enc[k[2:]] == float(v), (k, v, enc)
s = json.load(open(d + "/summary.json"))
assert s["steps"] == 12 and s["test_loss"] > 0, s
PY
    "$P" eval --model "$R" --json >"$W/out" 2>"$W/err" || fail "$case: eval exited $?: $(cat "$W/err")"
    /usr/bin/python3 -c '
import json, sys
e, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert e["examples"] == 32 and e["loss"] > 0, e' "$W/out" "$R/summary.json" || fail "$case: eval output"
    "$P" sample --model "$R" --count 2 >"$W/out" 2>"$W/err" || fail "$case: sample exited $?"
    [ "$(grep -c "truth '" "$W/out")" -eq 2 ] || fail "$case: sample output: $(cat "$W/out")"
done

# --ape-extend is an evaluation-time option of learned runs: eval and sample take it (the
# evaluated length fits the table here, so the result is the plain one), training refuses it.
R="$W/learned"
"$P" eval --model "$R" --json >"$W/plain" 2>&1 || fail "eval: $(cat "$W/plain")"
"$P" eval --model "$R" --json --ape-extend interpolate >"$W/interp" 2>"$W/err" ||
    fail "eval --ape-extend interpolate exited $?: $(cat "$W/err")"
cmp -s "$W/plain" "$W/interp" || fail "--ape-extend interpolate changed an evaluation that fits the table"
"$P" sample --model "$R" --count 1 --ape-extend interpolate >/dev/null 2>"$W/err" ||
    fail "sample --ape-extend interpolate exited $?: $(cat "$W/err")"
grep -q '"ape-extend"' "$R/config.json" && fail "config.json records an evaluation-time option"

# A sinusoidal run made before --sin-scale existed: its config.json, weights and checkpoint record
# no sin-scale, and it added P unscaled. It reads as σ = 1: evaluates as the same run made with
# --sin-scale 1, resumes to the same weights (and then records sin-scale 1), and compare reuses it
# for --sin-scale 1 and refuses it for the default, naming the option.
R1="$W/sinusoidal_--sin-base_500_--sin-scale_1"
OLD=$W/sinusoidal-old
cp -r "$R1" "$OLD"
/usr/bin/python3 - "$OLD/config.json" <<'PY' || fail "editing config.json"
import json, sys
c = json.load(open(sys.argv[1]))
del c["encoding"]["sin-scale"]
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
for f in "$OLD/model.safetensors" "$OLD"/checkpoints/*.safetensors; do
    /usr/bin/python3 tests/lib/st_edit.py "$f" meta pelab.config.sin-scale - || fail "st_edit $f"
done
"$P" eval --model "$R1" --json --threads 1 >"$W/new.json" 2>"$W/err" || fail "eval: $(cat "$W/err")"
"$P" eval --model "$OLD" --json --threads 1 >"$W/old.json" 2>"$W/err" || fail "eval of a run without sin-scale: $(cat "$W/err")"
[ "$(json "$W/old.json" '[j["loss"], j["accuracy"]]')" = "$(json "$W/new.json" '[j["loss"], j["accuracy"]]')" ] ||
    fail "a run without sin-scale evaluates unlike the --sin-scale 1 run: $(cat "$W/old.json") $(cat "$W/new.json")"
cp -r "$R1" "$W/sinusoidal-1-resumed"
for r in "$OLD" "$W/sinusoidal-1-resumed"; do
    "$P" train --resume "$r" --steps 14 --threads 1 >/dev/null 2>"$W/err" || fail "resume $r: $(cat "$W/err")"
done
same_weights "$OLD/model.safetensors" "$W/sinusoidal-1-resumed/model.safetensors" ||
    fail "a resumed run without sin-scale trains unlike the --sin-scale 1 run"
[ "$(json "$OLD/config.json" 'j["encoding"]["sin-scale"]')" = 1 ] || fail "the resumed run does not record sin-scale 1"
# compare's reuse: a run directory of compare's layout, made before the option
mkdir -p "$W/cmp-old" && cp -r "$R1" "$W/cmp-old/sinusoidal-s1"
/usr/bin/python3 - "$W/cmp-old/sinusoidal-s1/config.json" <<'PY' || fail "editing config.json"
import json, sys
c = json.load(open(sys.argv[1]))
del c["encoding"]["sin-scale"]
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
CMP="--task indirect --pe sinusoidal --sin-base 500 $TINY --steps 12 --eval-every 6 --eval-batches 1 --seeds 1 --out $W/cmp-old"
"$P" compare $CMP --sin-scale 1 >"$W/o" 2>"$W/err" || fail "compare --sin-scale 1 on a run without it: $(cat "$W/err")"
grep -q "finished earlier: $W/cmp-old/sinusoidal-s1" "$W/err" || fail "compare did not reuse the run: $(cat "$W/err")"
"$P" compare $CMP >"$W/o" 2>"$W/err"; rc=$?
[ $rc -eq 2 ] && grep -qF -- "--sin-scale 1 (a run from before the option; asked: 0.02)" "$W/err" ||
    fail "compare with the default on a run without sin-scale: exit $rc, $(cat "$W/err")"

expect 2 "--ape-extend is an option of eval and sample (for --pe learned runs)" -- \
    train --pe learned --ape-extend interpolate $TINY --out "$W/no"
expect 2 "--ape-extend applies to runs of --pe learned" -- eval --model "$W/sinusoidal" --ape-extend interpolate
expect 2 "--ape-extend: 'extrapolate'" -- eval --model "$R" --ape-extend extrapolate
expect 2 "--ape-max-len 10 is shorter than the training context" -- \
    train --pe learned --ape-max-len 10 $TINY --out "$W/no"
expect 2 "--xpos-scale-base does not apply to --pe rope" -- train --pe rope --xpos-scale-base 8 $TINY --out "$W/no"
[ -e "$W/no" ] && fail "a refused run left $W/no behind"
echo "ok"
