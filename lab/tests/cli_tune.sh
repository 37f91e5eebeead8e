#!/usr/bin/env bash
# compare --tune: every entry trains at each point of the grid on the tuning seeds (--seed + 1000,
# ...) in OUT/tune/<name>+lr-<v>-s<seed>/; the point of least mean validation loss (the runs'
# summary.json val_loss) is the entry's, ties to the smaller value; its evaluation runs train
# there as <name>+lr-<v>-s<seed>; compare.json keeps the grid and the choice, the table a column
# lr; a second call reuses every run, an interrupted tuning run is resumed; --jobs 2 chooses and
# reports the same; an option that cannot be tuned is refused in one line before anything runs.
set -u
. "$(dirname "$0")/../../tests/lib/cli.sh"
# copy of 1..2 symbols: a run of a few hundred updates takes well under a second
TINY="--task copy --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --algo-train-max 2 --algo-test-max 4
      --steps 200 --warmup 0"

"$P" compare $TINY --pe rope,nope --seeds 2 --tune lr=1e-3,1e-2,10 --out "$W/t" >"$W/out" 2>"$W/err" ||
    fail "compare --tune exited $?: $(tail -3 "$W/err")"
for r in {rope,nope}+lr-{1e-3,1e-2,10}-s1001; do
    [ -f "$W/t/tune/$r/summary.json" ] || fail "tuning run $r: no summary.json ($(ls "$W/t/tune"))"
done
/usr/bin/python3 - "$W/t" <<'PY' || fail "the grid and the choice in compare.json"
import json, os, sys
d = sys.argv[1]
c = json.load(open(d + "/compare.json"))
assert c["tune"] == {"options": ["lr"], "values": {"lr": [0.001, 0.01, 10]}, "seeds": [1001], "metric": "val_loss"}, c["tune"]
text = {0.001: "1e-3", 0.01: "1e-2", 10: "10"}
for e in c["encodings"]:
    pe, grid = e["pe"], e["tune"]["grid"]
    assert [g["lr"] for g in grid] == [0.001, 0.01, 10], grid
    for g in grid:
        run = "%s/tune/%s+lr-%s-s1001" % (d, pe, text[g["lr"]])
        assert g["dirs"] == [run], (g["dirs"], run)
        summary = json.load(open(run + "/summary.json"))
        config = json.load(open(run + "/config.json"))
        assert g["val_loss"] == [summary["val_loss"]], (g, summary["val_loss"])  # the validation split, not test
        assert g["val_loss_mean"] == summary["val_loss"], g
        assert config["training"]["lr"] == g["lr"] and config["training"]["seed"] == 1001, config["training"]
    # the choice: the least mean validation loss, a tie to the smaller lr
    best = min(grid, key=lambda g: (g["val_loss_mean"], g["lr"]))
    assert e["tune"]["chosen"] == {"lr": best["lr"]}, (pe, e["tune"]["chosen"], grid)
    assert len({g["val_loss_mean"] for g in grid}) == 3, "the grid's losses do not tell its points apart"
    # the evaluation runs: seeds 1 and 2 at the chosen lr, named apart from untuned runs
    runs = [r for r in c["runs"] if r["pe"] == pe]
    assert [r["seed"] for r in runs] == [1, 2], runs
    for r in runs:
        assert r["dir"] == "%s/%s+lr-%s-s%d" % (d, pe, text[best["lr"]], r["seed"]), r["dir"]
        t = json.load(open(r["dir"] + "/config.json"))["training"]
        assert t["lr"] == best["lr"] and t["seed"] == r["seed"], t
print("\n".join("%s %s" % (e["pe"], text[e["tune"]["chosen"]["lr"]]) for e in c["encodings"]))
PY
chosen=$(/usr/bin/python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
print(" ".join("%s=%s" % (e["pe"], {0.001: "1e-3", 0.01: "1e-2", 10: "10"}[e["tune"]["chosen"]["lr"]]) for e in c["encodings"]))' "$W/t/compare.json")
grep -q '^| encoding | lr | EM 1-2 (trained) |' "$W/out" || fail "no lr column: $(cat "$W/out")"
for pv in $chosen; do
    grep -qE "^\| ${pv%%=*}†? \| ${pv#*=} \| " "$W/out" || fail "row of ${pv%%=*} at lr ${pv#*=}: $(cat "$W/out")"
    grep -q "^compare: ${pv%%=*} trains at lr=${pv#*=}, " "$W/err" || fail "no line of the choice of ${pv%%=*}"
done
# no evaluation run trained on a tuning seed or at the lr not chosen; no run untuned
[ "$(ls "$W/t" | grep -c -- '-s[0-9]*$')" = 4 ] || fail "evaluation runs: $(ls "$W/t")"

# A second call reuses all 10 runs and reports the same; one tuning run that lost its summary (an
# interruption at its end) is resumed, the rest reused, and the choice stays.
before=$(ls -l --time-style=+%s.%N "$W"/t/*/model.safetensors "$W"/t/tune/*/model.safetensors)
"$P" compare $TINY --pe rope,nope --seeds 2 --tune lr=1e-3,1e-2,10 --out "$W/t" >"$W/out2" 2>"$W/err" ||
    fail "second compare --tune exited $?: $(tail -3 "$W/err")"
[ "$(grep -c 'finished earlier' "$W/err")" -eq 10 ] || fail "second call retrained: $(cat "$W/err")"
[ "$before" = "$(ls -l --time-style=+%s.%N "$W"/t/*/model.safetensors "$W"/t/tune/*/model.safetensors)" ] ||
    fail "second call rewrote models"
diff <(grep '^|' "$W/out") <(grep '^|' "$W/out2") >/dev/null || fail "second table differs"
cp "$W/t/compare.json" "$W/first.json"
rm "$W/t/tune/nope+lr-1e-2-s1001/summary.json"
"$P" compare $TINY --pe rope,nope --seeds 2 --tune lr=1e-3,1e-2,10 --out "$W/t" >/dev/null 2>"$W/err" ||
    fail "third compare --tune exited $?: $(tail -3 "$W/err")"
[ "$(grep -c 'finished earlier' "$W/err")" -eq 9 ] && grep -q 'nope lr=1e-2 s1001' "$W/err" ||
    fail "an interrupted tuning run was not resumed alone: $(cat "$W/err")"
/usr/bin/python3 - "$W/first.json" "$W/t/compare.json" <<'PY' || fail "a resumed grid differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert [e["tune"] for e in a["encodings"]] == [e["tune"] for e in b["encodings"]]
PY

# A record of a tuned comparison (lab/scripts/record.sh; every run reused) keeps the tuning runs too.
PELAB_RESULTS=$W/results bash lab/scripts/record.sh tuned "$P" compare $TINY --pe rope,nope --seeds 2 \
    --tune lr=1e-3,1e-2,10 --out "$W/t" >/dev/null 2>"$W/err" || fail "record.sh of a tuned compare: $(tail -3 "$W/err")"
for r in {rope,nope}+lr-{1e-3,1e-2,10}-s1001; do
    [ -f "$W/results/tuned/runs/tune/$r/summary.json" ] && [ -f "$W/results/tuned/runs/tune/$r/log-val.jsonl" ] ||
        fail "the record lacks tuning run $r: $(find "$W/results/tuned" -name summary.json)"
done
[ "$(ls "$W/results/tuned/runs" | grep -c -- '-s[12]$')" = 4 ] || fail "the record's runs: $(ls "$W/results/tuned/runs")"

# --jobs 2: the same grid, the same choice and the same losses
"$P" compare $TINY --pe rope,nope --seeds 2 --tune lr=1e-3,1e-2,10 --jobs 2 --out "$W/par" >/dev/null 2>"$W/perr" ||
    fail "compare --tune --jobs 2 exited $?: $(tail -3 "$W/perr")"
/usr/bin/python3 - "$W/t/compare.json" "$W/par/compare.json" <<'PY' || fail "--jobs 2 tuned otherwise"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
strip = lambda e: ([dict(g, dirs=None) for g in e["tune"]["grid"]], e["tune"]["chosen"])
assert [strip(e) for e in a["encodings"]] == [strip(e) for e in b["encodings"]], (a["encodings"], b["encodings"])
assert [r["test_loss"] for r in a["runs"]] == [r["test_loss"] for r in b["runs"]]
PY

# Two tuning seeds: seeds 1001 and 1002 at each point, the mean over them decides.
"$P" compare $TINY --pe rope --seeds 1 --tune lr=1e-3,1e-2 --tune-seeds 2 --out "$W/two" >/dev/null 2>"$W/err" ||
    fail "--tune-seeds 2 exited $?: $(tail -3 "$W/err")"
/usr/bin/python3 - "$W/two/compare.json" <<'PY' || fail "two tuning seeds"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["tune"]["seeds"] == [1001, 1002], c["tune"]
grid = c["encodings"][0]["tune"]["grid"]
for g in grid:
    assert len(g["val_loss"]) == 2 and abs(g["val_loss_mean"] - sum(g["val_loss"]) / 2) < 1e-12, g
assert c["encodings"][0]["tune"]["chosen"]["lr"] == min(grid, key=lambda g: (g["val_loss_mean"], g["lr"]))["lr"]
PY

# A grid whose every run stops on a non-finite gradient (PELAB_TEST_NAN, the test-only injector):
# each run is said to diverge, no point is left to choose: exit 1, the last line naming the entry;
# in children (--jobs 2) alike.
for j in 1 2; do
    PELAB_TEST_NAN=3:grad "$P" compare $TINY --pe rope --seeds 1 --tune lr=1e-3,1e-2 --jobs $j --out "$W/nan$j" \
        >/dev/null 2>"$W/err"
    rc=$?
    [ $rc -eq 1 ] && [ "$(grep -c 'lr=1e-[23] s1001\]  diverged, its point is not chosen: .* is not finite' "$W/err")" = 2 ] &&
        [ "$(tail -1 "$W/err")" = "pelab: --tune: no point of the grid trained --pe rope to a finite validation loss" ] &&
        [ ! -e "$W/nan$j/rope+lr-1e-3-s1" ] && [ ! -e "$W/nan$j/rope+lr-1e-2-s1" ] ||
        fail "--jobs $j: a grid that diverged: exit $rc: $(cat "$W/err")"
done

# Refused in one line, before anything runs: an option that places a run, an evaluation-time
# option, the model's, one given beside the grid, a value twice, --tune-seeds alone, a bad value.
expect 2 "--tune: --threads cannot be tuned" -- compare $TINY --pe rope --tune threads=1,2 --out "$W/no"
expect 2 "--tune: --rope-scale is an evaluation-time option" -- compare $TINY --pe rope --tune rope-scale=2,4 --out "$W/no"
expect 2 "--tune: --d-model cannot be tuned" -- compare $TINY --pe rope --tune d-model=16,32 --out "$W/no"
expect 2 "--tune lr: --lr is given too" -- compare $TINY --pe rope --tune lr=1e-3,1e-2 --lr 1e-3 --out "$W/no"
expect 2 "--tune lr: 1e-3 and 0.001 are one value" -- compare $TINY --pe rope --tune lr=1e-3,0.001 --out "$W/no"
expect 2 "--tune-seeds: no --tune grid" -- compare $TINY --pe rope --tune-seeds 2 --out "$W/no"
expect 2 "--tune: --lr: -1 is out of range" -- compare $TINY --pe rope --tune lr=1e-3,-1 --out "$W/no"
expect 2 "--tune: 'lr' is not OPTION=V1,V2" -- compare $TINY --pe rope --tune lr --out "$W/no"
expect 2 "--tune: 1 entries x 256 points x 20 tuning seeds are 5120 runs, at most 3200" -- compare $TINY --pe rope \
    --tune lr=1e-4,2e-4,3e-4,4e-4,5e-4,6e-4,7e-4,8e-4,9e-4,1e-3,2e-3,3e-3,4e-3,5e-3,6e-3,7e-3:weight-decay=0,.01,.02,.03,.04,.05,.06,.07,.08,.09,.1,.11,.12,.13,.14,.15 \
    --tune-seeds 20 --out "$W/no"
[ ! -e "$W/no" ] || fail "a refused --tune left $W/no"
echo "ok"
