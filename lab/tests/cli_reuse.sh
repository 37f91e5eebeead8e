#!/usr/bin/env bash
# compare reuses a run its --out holds only when the run was made with the settings asked:
#  - a finished run asked again with other --steps and --lr, or another --d-model, is refused
#    before anything trains, the differing settings named, the run left as it was; the same
#    settings at another --threads are reused;
#  - an interrupted run asked again with other settings is refused; with its own, it resumes;
#  - a fine-tune whose source run was trained again is refused (its source's step and checksum);
#  - two variants differing in any setting never share a run directory, however their values
#    are spelled (init-from=pre/a_b and init-from=pre/a/b), and a long value gives a bounded name;
#  - an --out its user may not write: the runs are read, compare.json refused in one line, nothing
#    changed; a new --out there refused in one line;
#  - lab/scripts/record.sh over an --out of other settings fails and keeps no record.
set -u
. "$(dirname "$0")/../../tests/lib/cli.sh"
TINY="--task indirect --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 16 --indirect-test-size 16 --seeds 1 --eval-every 0"
sums() { (cd "$1" && find . -type f | sort | xargs md5sum); }

# ---- a finished run ----
"$P" compare $TINY --pe rope --steps 3 --out "$W/X" >/dev/null 2>"$W/err" || fail "compare: $(cat "$W/err")"
sums "$W/X" >"$W/before"
expect 2 "$W/X/rope-s1 holds a run of other settings: --steps 3 (asked: 300), --lr 0.001 (asked: 0.005)" -- \
    compare $TINY --pe rope --steps 300 --lr 5e-3 --out "$W/X"
[ -s "$W/o" ] && fail "a refused compare printed a table: $(cat "$W/o")"
expect 2 "holds a run of other settings: --d-model 16 (asked: 32)" -- compare $TINY --pe rope --steps 3 --d-model 32 --out "$W/X"
sums "$W/X" | diff - "$W/before" >/dev/null || fail "a refused compare changed the runs"
# the same settings, spelled otherwise and on other threads: the run itself
"$P" compare $TINY --pe rope --steps 3 --lr 0.001 --threads 2 --out "$W/X" >/dev/null 2>"$W/err" ||
    fail "the same settings were refused: $(cat "$W/err")"
grep -q "finished earlier: $W/X/rope-s1" "$W/err" || fail "the finished run was not reused: $(cat "$W/err")"

# ---- an interrupted run ----
"$P" compare $TINY --pe rope --steps 100000 --save-every 5 --out "$W/I" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    [ -n "$(ls "$W/I/rope-s1/checkpoints" 2>/dev/null)" ] && break
    sleep 0.05
done
kill -TERM $pid
wait $pid
[ -f "$W/I/rope-s1/config.json" ] && [ ! -f "$W/I/rope-s1/summary.json" ] || fail "no interrupted run to ask again"
expect 2 "$W/I/rope-s1 holds a run of other settings: --steps 100000 (asked: 100), --lr 0.001 (asked: 0.01)" -- \
    compare $TINY --pe rope --steps 100 --lr 1e-2 --save-every 5 --out "$W/I"
[ -f "$W/I/rope-s1/summary.json" ] && fail "a refused compare resumed the run"

# ---- fine-tunes: their sources, and variants that must not share a directory ----
mkdir -p "$W/pre/a"
"$P" compare $TINY --pe rope --steps 3 --out "$W/pre/a_b" >/dev/null 2>&1 || fail "source a_b"
"$P" compare $TINY --pe rope --steps 4 --out "$W/pre/a/b" >/dev/null 2>&1 || fail "source a/b"
FT="rope:init-from=$W/pre/a_b/rope-s{seed},rope:init-from=$W/pre/a/b/rope-s{seed}"
"$P" compare $TINY --pe "$FT" --steps 3 --out "$W/F" >"$W/o" 2>"$W/err" || fail "fine-tunes: $(cat "$W/err")"
grep -q "shares the run" "$W/err" && fail "two fine-tunes of other sources shared a run: $(cat "$W/err")"
[ "$(ls "$W/F" | grep -c '^rope+init-from-.*_pre_a_b_rope-s_seed_~[0-9a-f]\{12\}-s1$')" -eq 2 ] ||
    fail "not two runs named by a readable stem and a hash: $(ls "$W/F")"
/usr/bin/python3 - "$W/F/compare.json" "$W/pre" <<'PY' || fail "the fine-tunes' runs are not their own"
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
cfg = {json.load(open(r["dir"] + "/config.json"))["training"]["init-from"] for r in runs}
assert cfg == {sys.argv[2] + "/a_b/rope-s1", sys.argv[2] + "/a/b/rope-s1"}, cfg
PY
# a source trained again: its fine-tune is not the one asked for
rm -r "$W/pre/a/b"
"$P" compare $TINY --pe rope --steps 5 --out "$W/pre/a/b" >/dev/null 2>&1 || fail "source a/b again"
expect 2 "init-from-step 4 (now: 5)" -- compare $TINY --pe "$FT" --steps 3 --out "$W/F"
# a long value: a bounded name that a file system takes
long=$W/pre/$(printf 'x%.0s' $(seq 1 60))/$(printf 'y%.0s' $(seq 1 60))/$(printf 'z%.0s' $(seq 1 60))/$(printf 'w%.0s' $(seq 1 60))
mkdir -p "$(dirname "$long")"
"$P" compare $TINY --pe rope --steps 2 --out "$long" >/dev/null 2>&1 || fail "source under a long path"
"$P" compare $TINY --pe "rope:init-from=$long/rope-s{seed}" --steps 2 --out "$W/L" >/dev/null 2>"$W/err" ||
    fail "a fine-tune of a long path: $(cat "$W/err")"
name=$(ls "$W/L" | grep -v compare.json)
[ ${#name} -le 230 ] || fail "a run name of ${#name} characters: $name"

# ---- an --out its user may not write (as nobody: root writes anywhere) ----
if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null && chmod 755 "$W" &&
    runuser -u nobody -- "$P" --version >/dev/null 2>&1; then
    sums "$W/X" >"$W/before"
    runuser -u nobody -- "$P" compare $TINY --pe rope --steps 3 --out "$W/X" >/dev/null 2>"$W/e"
    [ $? -eq 1 ] && grep -q "^pelab: $W/X/compare.json: cannot create a temporary file beside it: Permission denied$" "$W/e" ||
        fail "a compare over runs it may not write: $(cat "$W/e")"
    sums "$W/X" | diff - "$W/before" >/dev/null || fail "a compare that could not write changed the runs"
    runuser -u nobody -- "$P" compare $TINY --pe rope --steps 3 --out "$W/X/new" >/dev/null 2>"$W/e"
    [ $? -eq 1 ] && grep -q "^pelab: $W/X/new: cannot create directory: Permission denied$" "$W/e" ||
        fail "a compare into a directory it may not create: $(cat "$W/e")"
else
    echo "notice: not root with runuser and a binary user nobody may run: the read-only --out checks are left out"
fi

# ---- a record over an --out of other settings ----
export PELAB_RESULTS=$W/results
expect_record() { bash lab/scripts/record.sh "$@" >"$W/o" 2>"$W/e"; }
expect_record reuse "$P" compare $TINY --pe rope --steps 7 --out "$W/X" &&
    fail "record.sh over runs of other settings succeeded"
grep -q "holds a run of other settings: --steps 3 (asked: 7)" "$W/e" || fail "record.sh: $(cat "$W/e")"
[ -e "$W/results/reuse" ] && fail "a refused record was kept"
echo "ok"
