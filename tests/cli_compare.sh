#!/usr/bin/env bash
# compare: every encoding × seed trained in OUT/<pe>-s<seed>/ with otherwise identical settings,
# a Markdown table and OUT/compare.json; a second call reuses the finished runs.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 16 --indirect-test-size 16"

"$P" compare --task indirect --pe rope,nope --seeds 2 $TINY --steps 6 --rope-base 500 \
    --out "$W/cmp" >"$W/out" 2>"$W/err" || fail "compare exited $?: $(tail -3 "$W/err")"
grep -q '^| encoding | test acc' "$W/out" || fail "no table header: $(cat "$W/out")"
grep -qE '^\| rope \| [0-9.]+ ± [0-9.]+ % \| [0-9.]+ ± [0-9.]+ \|' "$W/out" || fail "no rope row: $(cat "$W/out")"
grep -qE '^\| nope \| ' "$W/out" || fail "no nope row"
for r in rope-s1 rope-s2 nope-s1 nope-s2; do
    [ -f "$W/cmp/$r/summary.json" ] || fail "$r: no summary.json"
done
/usr/bin/python3 - "$W/cmp" <<'PY' || fail "compare.json or run settings"
import json, sys
d = sys.argv[1]
c = json.load(open(d + "/compare.json"))
assert c["task"] == "indirect" and len(c["runs"]) == 4, c
assert [e["pe"] for e in c["encodings"]] == ["rope", "nope"], c["encodings"]
assert all(e["seeds"] == 2 for e in c["encodings"]), c["encodings"]
cfg = {r: json.load(open(d + "/" + r + "/config.json")) for r in ["rope-s1", "rope-s2", "nope-s1", "nope-s2"]}
assert cfg["rope-s1"]["encoding"]["rope-base"] == 500, "rope-base not passed to the rope runs"
assert cfg["nope-s1"]["encoding"] == {}, cfg["nope-s1"]["encoding"]
assert [cfg[r]["training"]["seed"] for r in ["rope-s1", "rope-s2"]] == [1, 2]
for r, v in cfg.items():  # identical settings otherwise
    t = dict(v["training"]); t.pop("seed"); t.pop("out")
    t0 = dict(cfg["rope-s1"]["training"]); t0.pop("seed"); t0.pop("out")
    assert t == t0, (r, t, t0)
    assert v["task"] == cfg["rope-s1"]["task"]
PY
before=$(ls -l --time-style=+%s.%N "$W"/cmp/*/model.safetensors)
"$P" compare --task indirect --pe rope,nope --seeds 2 $TINY --steps 6 --rope-base 500 \
    --out "$W/cmp" >"$W/out2" 2>"$W/err" || fail "second compare exited $?"
[ "$(grep -c 'finished earlier' "$W/err")" -eq 4 ] || fail "second compare retrained: $(cat "$W/err")"
after=$(ls -l --time-style=+%s.%N "$W"/cmp/*/model.safetensors)
[ "$before" = "$after" ] || fail "second compare rewrote models"
diff <(grep '^|' "$W/out") <(grep '^|' "$W/out2") >/dev/null || fail "second table differs"
echo "ok"
