#!/usr/bin/env bash
# compare: every encoding × seed trained in OUT/<pe>-s<seed>/ with otherwise identical settings,
# a Markdown table and OUT/compare.json; a second call reuses the finished runs; --jobs 2 trains
# two runs at a time in child processes, with the results of --jobs 1; a line after each run says
# how many are done and about how long the rest take. A run reused from another build (its
# summary.json's trained-by and float32-products) is said to be so, with what trained it.
set -u
. "$(dirname "$0")/../../tests/lib/cli.sh"
TINY="--d-model 32 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 16 --indirect-test-size 16"

"$P" compare --task indirect --pe rope,nope --seeds 2 $TINY --steps 6 --rope-base 500 \
    --out "$W/cmp" >"$W/out" 2>"$W/err" || fail "compare exited $?: $(tail -3 "$W/err")"
grep -q '^| encoding | test acc' "$W/out" || fail "no table header: $(cat "$W/out")"
grep -qE '^\| rope \| [0-9.]+ ± [0-9.]+ % \| [0-9.]+ ± [0-9.]+ \|' "$W/out" || fail "no rope row: $(cat "$W/out")"
# One seed has no spread to show: plain numbers.
"$P" compare --task indirect --pe rope --seeds 1 $TINY --steps 2 --out "$W/one" >"$W/one.out" 2>/dev/null ||
    fail "compare of one seed exited $?"
grep -qE '^\| rope \| [0-9.]+ % \| [0-9.]+ \| [0-9hms]+ \|$' "$W/one.out" || fail "one-seed row: $(cat "$W/one.out")"
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
# the 95 % interval of each mean: t(0.975, 1) = 12.706205 (two seeds) times sd / sqrt(2); the pair
# of encodings on test accuracy, seed by seed
for e in c["encodings"]:
    for k in ("test_acc", "test_loss"):
        assert abs(e[k + "_ci95"] - 12.706205 * e[k + "_std"] / 2 ** 0.5) < 1e-9, (k, e)
acc = {(r["pe"], r["seed"]): r["test_acc"] for r in c["runs"]}
p = c["pairs"]
assert p["metric"] == "test_acc" and p["higher_better"] and len(p["rows"]) == 1, p
row = p["rows"][0]
assert (row["a"], row["b"]) == ("rope", "nope") and row["diff"] == [acc["rope", s] - acc["nope", s] for s in (1, 2)], row
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
grep 'finished earlier' "$W/err" | grep -q '(' && fail "runs of this build said to be of another: $(cat "$W/err")"
commit=$(build_commit)
/usr/bin/python3 - "$W/cmp" <<'PY' || fail "editing summaries"
import json, sys
for run, edit in (("rope-s1", {"trained-by": ["0123456789ab", "ba9876543210"]}), ("rope-s2", {"trained-by": None}),
                  ("nope-s1", {"float32-products": "no such library 0.0"})):
    path = "%s/%s/summary.json" % (sys.argv[1], run)
    s = json.load(open(path))
    for k, v in edit.items():
        if v is None: s.pop(k)
        else: s[k] = v
    json.dump(s, open(path, "w"))
PY
"$P" compare --task indirect --pe rope,nope --seeds 2 $TINY --steps 6 --rope-base 500 \
    --out "$W/cmp" >"$W/out3" 2>"$W/err" || fail "third compare exited $?"
for want in "rope-s1 (trained by commit 0123456789ab, ba9876543210; this build is $commit)" \
    "rope-s2 (trained by a build that did not record its commit; this build is $commit)" \
    "nope-s1 (trained by commit $commit with float32 products: no such library 0.0; this build is $commit with" \
    "nope-s2"; do
    grep -qF "finished earlier: $W/cmp/$want" "$W/err" || fail "reused runs of other builds: no '$want': $(cat "$W/err")"
done

# The statistics over seeds on an algorithmic task (copy of 1..2 symbols: 500 updates, where RoPE
# fits its trained sizes in some seeds and NoPE in none): a run fits its trained sizes when its exact
# match over them is at least 90 %; an entry that fits in fewer than all its seeds is marked † with
# a line under the table; a cell whose seeds split between solved (≥ 90 %) and not says "k of n
# solved"; the 95 % interval of each mean; each pair of entries on the trained sizes' exact match,
# its interval from t(0.975, 2) = 4.302653, "ahead" only when it excludes 0.
S="--task copy --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --algo-train-max 2 --algo-test-max 4
   --warmup 0 --lr 1e-2 --steps 500"
"$P" compare $S --pe rope,nope --seeds 3 --out "$W/st" >"$W/stout" 2>"$W/err" || fail "compare of copy exited $?: $(tail -3 "$W/err")"
/usr/bin/python3 - "$W/st/compare.json" "$W/stout" <<'PY' || fail "statistics of copy: $(cat "$W/stout")"
import json, math, statistics, sys
c = json.load(open(sys.argv[1]))
out = open(sys.argv[2]).read()
L, T = c["train_max"], 4.302653
fitted_any = unfitted_any = False
for e in c["encodings"]:
    runs = [r for r in c["runs"] if r["pe"] == e["pe"]]
    for r in runs:
        em = sum(r["size_em"][:L]) / L
        assert abs(r["trained_em"] - em) < 1e-12 and r["fits_training"] == (em >= 0.9), r
        fitted_any |= r["fits_training"]
        unfitted_any |= not r["fits_training"]
    k = sum(r["fits_training"] for r in runs)
    assert e["fitted_seeds"] == k, e
    row = next(l for l in out.splitlines() if l.startswith("| %s" % e["pe"]) and " ± " in l)
    assert row.startswith("| %s%s |" % (e["pe"], "†" if k < 3 else "")), row
    note = "† %s fits its trained sizes (≥ 90 %% exact match) in %d of 3 seeds: left out of extrapolation rankings" % (e["pe"], k)
    assert (note in out) == (k < 3), (note, out)
    for i, b in enumerate(c["buckets"]):
        solved = sum(r["sweep_em"][i] >= 0.9 for r in runs)
        assert e["sweep_em_solved"][i] == solved, e
        x = [100 * r["sweep_em"][i] for r in runs]
        sd = statistics.stdev(x)
        assert abs(e["sweep_em_ci95"][i] - T * sd / 100 / math.sqrt(3)) < 1e-12, e
        split = "(%d of 3 solved)" % solved
        assert (split in row.split("|")[2 + i]) == (0 < solved < 3), (row, b, solved)
assert fitted_any and unfitted_any, "no run fitted, or every one did: the marks are untested"
p = c["pairs"]
assert p["metric"] == "trained_em" and len(p["rows"]) == 1, p
row = p["rows"][0]
em = {(r["pe"], r["seed"]): r["trained_em"] for r in c["runs"]}
d = [em["rope", s] - em["nope", s] for s in (1, 2, 3)]
mean, half = statistics.mean(d), T * statistics.stdev(d) / math.sqrt(3)
assert row["diff"] == d and abs(row["mean"] - mean) < 1e-12 and abs(row["ci95"] - half) < 1e-9, row
verdict = "rope ahead" if mean - half > 0 else "nope ahead" if mean + half < 0 else "level"
assert row["verdict"] == verdict, (row, verdict)
sign = lambda x: ("−" if x < 0 else "+") + "%.1f" % abs(x)
line = "rope − nope: %s (95 %% CI %s … %s), %s" % (sign(100 * mean), sign(100 * (mean - half)), sign(100 * (mean + half)), verdict)
assert line in out.splitlines(), (line, out)
PY

# --jobs 2: two runs at a time in child processes, each on --threads 2 / 2 = 1 thread, gives what
# --jobs 1 gives on one thread; a second call retrains nothing.
J="--task indirect --pe rope,nope --seeds 2 --steps 6 --d-model 32 --heads 2 --layers 1 --batch 4
   --indirect-val-size 16 --indirect-test-size 16"
"$P" compare $J --threads 2 --jobs 2 --out "$W/par" >"$W/pout" 2>"$W/perr" \
    || fail "--jobs 2 exited $?: $(tail -3 "$W/perr")"
"$P" compare $J --threads 1 --jobs 1 --out "$W/seq" >"$W/sout" 2>"$W/serr" \
    || fail "--jobs 1 exited $?: $(tail -3 "$W/serr")"
[ "$(grep -c '\]  done ' "$W/perr")" -eq 4 ] || fail "--jobs 2: not 4 runs done: $(cat "$W/perr")"
# After each run a line says how many are done and about how long the rest take.
for f in "$W/perr" "$W/serr"; do
    [ "$(grep -c '^compare: [1-3] of 4 runs done in [0-9hms]*; about [0-9hms]* left$' "$f")" -eq 3 ] &&
        grep -q '^compare: 4 of 4 runs done in [0-9hms]*$' "$f" || fail "progress lines: $(cat "$f")"
done
/usr/bin/python3 - "$W/par" "$W/seq" <<'PY' || fail "--jobs 2 differs from --jobs 1"
import json, sys
par, seq = (json.load(open(d + "/compare.json")) for d in sys.argv[1:])
untimed = lambda rows: [{k: v for k, v in r.items() if k not in ("wall_s", "wall_s_mean", "dir")}
                        for r in rows]
assert untimed(par["runs"]) == untimed(seq["runs"]), (par["runs"], seq["runs"])
assert untimed(par["encodings"]) == untimed(seq["encodings"]), (par["encodings"], seq["encodings"])
for r in ["rope-s1", "rope-s2", "nope-s1", "nope-s2"]:
    p, s = (json.load(open(d + "/" + r + "/config.json")) for d in sys.argv[1:])
    assert p["training"]["threads"] == 1, (r, "threads", p["training"]["threads"])
    p["training"].pop("out"); s["training"].pop("out")
    assert p == s, (r, p, s)
PY
diff <(grep '^|' "$W/pout" | cut -d'|' -f1-4) <(grep '^|' "$W/sout" | cut -d'|' -f1-4) >/dev/null \
    || fail "--jobs 2 table differs: $(cat "$W/pout")"
before=$(ls -l --time-style=+%s.%N "$W"/par/*/model.safetensors)
"$P" compare $J --threads 2 --jobs 2 --out "$W/par" >"$W/pout2" 2>"$W/perr" \
    || fail "second --jobs 2 exited $?"
[ "$(grep -c 'finished earlier' "$W/perr")" -eq 4 ] || fail "second --jobs 2 retrained: $(cat "$W/perr")"
[ "$before" = "$(ls -l --time-style=+%s.%N "$W"/par/*/model.safetensors)" ] \
    || fail "second --jobs 2 rewrote models"

# A run whose config.json cannot be read is refused before anything starts.
mkdir -p "$W/bad/nope-s1" && echo garbage >"$W/bad/nope-s1/config.json"
"$P" compare $J --threads 2 --jobs 2 --out "$W/bad" >/dev/null 2>"$W/berr"
[ $? -eq 1 ] && grep -q "^pelab: $W/bad/nope-s1/config.json: JSON: at byte 0" "$W/berr" && [ ! -e "$W/bad/rope-s1" ] ||
    fail "an unreadable config.json was not refused before the runs: $(cat "$W/berr")"
# A run failing in its child (one of these settings that lost its checkpoints): the others
# finish, the failure is named with its error, no table, exit 1. A bad option is caught before
# anything starts.
rm -r "$W/bad/nope-s1" && cp -r "$W/par/nope-s1" "$W/bad/" && rm -r "$W/bad/nope-s1/checkpoints" "$W/bad/nope-s1/summary.json"
"$P" compare $J --threads 2 --jobs 2 --out "$W/bad" >"$W/bout" 2>"$W/berr"
rc=$?
[ $rc -eq 1 ] || fail "failed child: exit $rc, not 1"
grep -q '^\[nope s1\]  failed: .*holds no checkpoint to resume from' "$W/berr" || fail "failed run not named: $(cat "$W/berr")"
grep -q 'pelab: 1 of 4 runs failed' "$W/berr" || fail "no failure count: $(cat "$W/berr")"
grep -q '^compare: 3 of 4 runs done, 1 failed in [0-9hms]*$' "$W/berr" || fail "the failed run counted as done: $(cat "$W/berr")"
grep -q '^|' "$W/bout" && fail "a table despite a failed run"
for r in rope-s1 rope-s2 nope-s2; do
    [ -f "$W/bad/$r/summary.json" ] || fail "$r did not finish beside the failed run"
done
"$P" compare $J --jobs 2 --steps 0 --out "$W/usage" >/dev/null 2>&1
[ $? -eq 2 ] && [ ! -e "$W/usage" ] || fail "a bad option was not caught before the runs started"
echo "ok"
