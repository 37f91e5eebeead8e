#!/usr/bin/env bash
# Requests beyond what the input holds, each kept as a repro:
#  - analyze freq counts no example twice: a batch larger than the split gives the numbers of one
#    batch of the whole split, --batches beyond the split those of the batches that cover it,
#    each with one notice line saying what ran; a request within the split says nothing;
#  - a JSON file (--longrope-factors, a run's config.json, --init-from's) that is /dev/zero, a
#    FIFO, a directory or larger than 64 MiB is refused in one line, at once: each runs with 1 GB
#    of address space and 20 s at most, so that a read without a limit fails the test rather
#    than the machine;
#  - --threads beyond the cores the process may use (taskset: one) runs on those cores, said in
#    one notice line, for eval, analyze and train; config.json records the request as given;
#  - analyze bias killed by SIGTERM while it writes its CSV leaves no temporary file (nor the
#    CSV), and a --max-distance whose table would pass 2^24 rows is refused in one line.
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--task indirect --d-model 32 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 32 --indirect-test-size 32 --steps 4"

train $TINY --pe rope --out "$W/rope"

# ---- analyze freq: the val split holds 32 examples ----
freq() { # NAME ARGS...: analyze freq of the rope run into $W/NAME.csv, its stderr in $W/NAME.err
    local name=$1; shift
    "$P" analyze freq --model "$W/rope" --threads 1 --out "$W/$name.csv" "$@" 2>"$W/$name.err" ||
        fail "analyze freq $*: exit $?: $(cat "$W/$name.err")"
}
freq whole --batch 32 --batches 1
[ ! -s "$W/whole.err" ] || fail "a request within the split said: $(cat "$W/whole.err")"
freq huge --batch 5000 --batches 3
cmp -s "$W/huge.csv" "$W/whole.csv" || fail "--batch 5000 counted examples twice"
[ "$(wc -l <"$W/huge.err")" -eq 1 ] &&
    grep -qF "notice: the val split holds 32 examples, each counted once: 32 in 1 batch of 32, not the 15000 of 3 batches of 5000 asked for" "$W/huge.err" ||
    fail "--batch 5000: no notice: $(cat "$W/huge.err")"
freq covering --batch 10 --batches 4
freq beyond --batch 10 --batches 10
cmp -s "$W/beyond.csv" "$W/covering.csv" || fail "--batches 10 of 10 differs from the 4 that cover the split"
grep -qF "32 in 4 batches of 10, not the 100 of 10 batches of 10 asked for" "$W/beyond.err" ||
    fail "--batches 10: no notice: $(cat "$W/beyond.err")"

# ---- JSON files: a regular file of at most 64 MiB ----
cat >"$W/bounded" <<EOS
#!/bin/sh
ulimit -v 1000000
exec timeout 20 "$P" "\$@"
EOS
chmod +x "$W/bounded"
bounded() { local p=$P; P=$W/bounded; expect "$@"; P=$p; } # expect, with pelab bounded
mkfifo "$W/fifo"
mkdir "$W/dir"
truncate -s 65M "$W/huge.json"
LR="eval --model $W/rope --threads 1 --rope-scaling longrope --longrope-factors"
bounded 1 "--longrope-factors: /dev/zero: a character device, not a regular file" -- $LR /dev/zero
bounded 1 "--longrope-factors: $W/fifo: a FIFO, not a regular file" -- $LR "$W/fifo"
bounded 1 "--longrope-factors: $W/dir: cannot read: Is a directory" -- $LR "$W/dir"
bounded 1 "--longrope-factors: $W/huge.json: larger than 64 MiB, the most pelab reads of a JSON or vocabulary file" \
    -- $LR "$W/huge.json"
cp -r "$W/rope" "$W/cfg"
ln -sf /dev/zero "$W/cfg/config.json"
bounded 1 "$W/cfg/config.json: a character device, not a regular file" -- eval --model "$W/cfg" --threads 1
rm "$W/cfg/config.json" && mkfifo "$W/cfg/config.json"
bounded 1 "$W/cfg/config.json: a FIFO, not a regular file" -- train --init-from "$W/cfg" $TINY --pe rope --out "$W/ft"
[ ! -e "$W/ft" ] || fail "a refused --init-from left a run directory"
rm "$W/cfg/config.json" && truncate -s 65M "$W/cfg/config.json"
bounded 1 "$W/cfg/config.json: larger than 64 MiB" -- train --resume "$W/cfg"

# ---- --threads: at most the cores this process may use ----
ONE_CORE="notice: --threads 4096 is more than the 1 core this process can use; running on 1"
one=$(/usr/bin/python3 -c 'import os; print(min(os.sched_getaffinity(0)))') # a core this test may use
taskset -c "$one" "$P" eval --model "$W/rope" --threads 4096 >/dev/null 2>"$W/e" || fail "eval --threads 4096: $(cat "$W/e")"
[ "$(cat "$W/e")" = "$ONE_CORE" ] || fail "eval --threads 4096: not the notice alone: $(cat "$W/e")"
taskset -c "$one" "$P" analyze freq --model "$W/rope" --threads 4096 --batches 1 >/dev/null 2>"$W/e" ||
    fail "analyze freq --threads 4096: $(cat "$W/e")"
[ "$(cat "$W/e")" = "$ONE_CORE" ] || fail "analyze freq --threads 4096: not the notice alone: $(cat "$W/e")"
TINY4096=${TINY/--threads 1/--threads 4096}
taskset -c "$one" "$P" train $TINY4096 --pe rope --out "$W/t4096" >/dev/null 2>"$W/e" || fail "train --threads 4096: $(cat "$W/e")"
[ "$(grep -c "notice" "$W/e")" -eq 1 ] && grep -qxF "$ONE_CORE" "$W/e" || fail "train --threads 4096: no notice: $(cat "$W/e")"
[ "$(json "$W/t4096/config.json" 'j["training"]["threads"]')" = 4096 ] || fail "config.json does not record --threads 4096"

# ---- analyze bias: a killed write leaves nothing; 2^24 rows at most ----
train $TINY --pe alibi --out "$W/alibi"
# 1 layer × 2 heads × 8388608 distances: the largest table allowed, 0.4 GB of CSV, killed once
# its temporary file holds rows (pelab_check_output's empty one comes and goes before)
"$P" analyze bias --model "$W/alibi" --max-distance 8388607 --out "$W/bias.csv" 2>"$W/e" &
pid=$!
for _ in $(seq 1500); do # 30 s at most
    tmp=$(ls "$W"/bias.csv.tmp.* 2>/dev/null | head -1)
    [ -n "$tmp" ] && [ -s "$tmp" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.02
done
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
[ $rc -eq 143 ] || fail "analyze bias was not ended by SIGTERM while writing (exit $rc): $(cat "$W/e")"
left=$(ls "$W" | grep '\.tmp\.')
[ -z "$left" ] || { rm -f "$W"/*.tmp.*; fail "SIGTERM left $left"; }
[ ! -e "$W/bias.csv" ] || fail "a killed analyze bias left its CSV"
expect 2 "--max-distance 8388608: 16777218 rows (1 layer × 2 heads × 8388609 distances), more than the 16777216 (2^24) analyze bias writes" \
    -- analyze bias --model "$W/alibi" --max-distance 8388608 --out "$W/bias.csv"
[ ! -e "$W/bias.csv" ] || fail "a refused analyze bias wrote its CSV"
echo "ok"
