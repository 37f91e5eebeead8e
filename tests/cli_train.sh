#!/usr/bin/env bash
# train → eval → sample on a tiny model: every run-directory file exists and is valid; eval and
# sample work; progress goes to stderr as plain lines when stderr is not a terminal.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 8 --threads 1 --indirect-val-size 64 --indirect-test-size 64"

for pe in rope pope nope; do
    R="$W/$pe"
    "$P" train --task indirect --pe $pe $TINY --steps 30 --log-every 10 --eval-every 15 \
        --save-every 20 --eval-batches 2 --out "$R" >"$W/out" 2>"$W/err" ||
        fail "train --pe $pe exited $?: $(tail -3 "$W/err")"
    for f in config.json model.safetensors log.jsonl summary.json \
        checkpoints/state-0000000020.safetensors checkpoints/state-0000000030.safetensors; do
        [ -s "$R/$f" ] || fail "$pe: $f missing or empty"
    done
    [ "$(ls "$R/checkpoints" | wc -l)" -eq 2 ] || fail "$pe: --keep 2 kept: $(ls "$R/checkpoints")"
    ls -A "$R" "$R/checkpoints" | grep -q '\.tmp\.' && fail "$pe: temporary files left: $(ls "$R")"
    grep -q "^step 30/30" "$W/err" || fail "$pe: no plain progress line for step 30"
    /usr/bin/python3 - "$R" "$pe" <<'PY' || fail "$pe: run directory contents"
import json, struct, sys
d, pe = sys.argv[1], sys.argv[2]
cfg = json.load(open(d + "/config.json"))
assert cfg["pelab-version"], "no pelab-version"
t, m = cfg["training"], cfg["model"]
for k in ["steps", "batch", "accum", "lr", "min-lr", "warmup", "decay-steps", "weight-decay",
          "beta1", "beta2", "eps", "clip", "seed", "threads", "eval-every", "eval-batches",
          "log-every", "save-every", "out", "task", "preset"]:
    assert k in t, "config.json training lacks " + k
assert t["steps"] == 30 and t["decay-steps"] == 30 and t["lr"] == 1e-3, t
assert m["pe"] == pe and m["d-model"] == 32 and m["heads"] == 2, m
assert "indirect-max-len" in cfg["task"], cfg["task"]
if pe == "rope": assert "rope-base" in cfg["encoding"], cfg["encoding"]
if pe == "pope": assert "pope-delta-init" in cfg["encoding"], cfg["encoding"]
log = [json.loads(l) for l in open(d + "/log.jsonl")]
assert [r["step"] for r in log] == [10, 15, 20, 30], [r["step"] for r in log]
for r in log:
    for k in ["step", "lr", "loss", "tokens_per_s", "elapsed_s"]:
        assert k in r, "log line lacks " + k
assert "val_loss" in log[1] and "val_acc" in log[1] and "val_loss" not in log[0], log
s = json.load(open(d + "/summary.json"))
for k in ["steps", "train_loss", "val_loss", "val_acc", "test_loss", "test_acc", "wall_s",
          "tokens_per_s", "parameters"]:
    assert k in s, "summary.json lacks " + k
assert s["steps"] == 30 and s["test_examples"] == 64 and 0 <= s["test_acc"] <= 1, s
for name, fmt in [("model", "pelab-model"), ("checkpoints/state-0000000030", "pelab-state")]:
    b = open(d + "/" + name + ".safetensors", "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__")
    assert meta["format"] == fmt, meta
    end = max(v["data_offsets"][1] for v in h.values())
    assert 8 + n + end == len(b), "data section size"
    assert "pelab.data-crc32" in meta and "pelab.header-crc32" in meta, meta
    if fmt == "pelab-state":
        assert meta["step"] == "30" and "data-cursor" in meta and meta["adam-step"] == "30", meta
        assert meta["format-version"] == "2" and meta["pelab.config.pe"] == pe, meta
        assert any(k.startswith("adam.m.") for k in h) and any(k.startswith("adam.v.") for k in h)
    else:
        assert meta["pelab.config.pe"] == pe, meta
PY
    "$P" eval --model "$R" >"$W/out" 2>"$W/err" || fail "$pe: eval exited $?: $(cat "$W/err")"
    grep -q "^test: accuracy" "$W/out" || fail "$pe: eval output: $(cat "$W/out")"
    "$P" eval --model "$R" --split val --json --batch 16 >"$W/out" 2>"$W/err" ||
        fail "$pe: eval --json exited $?: $(cat "$W/err")"
    /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["split"] == "val" and r["examples"] == 64 and r["targets"] == 64, r
assert 0 <= r["accuracy"] <= 1 and r["loss"] > 0, r' "$W/out" || fail "$pe: eval --json output"
    # The summary's test metrics are a whole-split evaluation: eval with the training run's
    # batch and threads must agree (other shapes sum in another order, in float).
    "$P" eval --model "$R" --json --batch 8 --threads 1 >"$W/out" 2>"$W/err" || fail "$pe: eval exited $?"
    /usr/bin/python3 -c '
import json, sys
e, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert abs(e["loss"] - s["test_loss"]) < 1e-9 and e["accuracy"] == s["test_acc"], (e, s)' \
        "$W/out" "$R/summary.json" || fail "$pe: eval disagrees with summary.json"
    "$P" sample --model "$R" --count 3 >"$W/out" 2>"$W/err" || fail "$pe: sample exited $?"
    [ "$(grep -c "truth '" "$W/out")" -eq 3 ] || fail "$pe: sample output: $(cat "$W/out")"
    grep -qE '^#0 +[A-Za-z]+, [A-Za-z], [+-][0-9]+, ' "$W/out" || fail "$pe: sample input text: $(cat "$W/out")"
done

# A preset fills defaults; explicit options win.
"$P" train --preset cpu --d-model 32 --heads 2 --steps 3 --batch 4 --threads 1 \
    --indirect-val-size 8 --indirect-test-size 8 --out "$W/preset" >/dev/null 2>"$W/err" ||
    fail "train --preset cpu exited $?: $(cat "$W/err")"
layers=$("$P" help presets | sed -n 's/.*d-model=.* layers=\([0-9]*\) .*/\1/p' | sed -n 2p)
/usr/bin/python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
assert c["training"]["preset"] == "cpu" and c["training"]["steps"] == 3, c["training"]
assert c["model"]["layers"] == int(sys.argv[2]) and c["model"]["d-model"] == 32, c["model"]' \
    "$W/preset/config.json" "$layers" ||
    fail "preset cpu not applied as expected"
echo "ok"
