#!/usr/bin/env bash
# lab/scripts/curves.py: a record's learning curves as one CSV, checked on results/demo-tuned
# (20 evaluation runs, 12 tuning runs): one row per line of every run's log-val.jsonl, its values
# as the line holds them, tuning runs only with --tuning; a run without its curve, or a directory
# with no runs, is an error naming it.
set -u
. "$(dirname "$0")/../../tests/lib/cli.sh"
R=results/demo-tuned
C=lab/scripts/curves.py
/usr/bin/python3 $C $R >"$W/c.csv" || fail "curves of $R"
want=$(cat $R/runs/*-s*/log-val.jsonl | wc -l)
[ "$want" -gt 20 ] || fail "$R's evaluation runs hold $want validation lines"
[ "$(($(wc -l <"$W/c.csv") - 1))" = "$want" ] || fail "$(wc -l <"$W/c.csv") CSV lines for $want validation lines"
head -1 "$W/c.csv" | grep -qx 'entry,seed,run,step,val_loss,val_acc' || fail "header: $(head -1 "$W/c.csv")"
[ "$(cut -d, -f3 "$W/c.csv" | sort -u | grep -c ' s')" = 20 ] || fail "not 20 runs: $(cut -d, -f3 "$W/c.csv" | sort -u)"
# the second validation of pope s3, as its log holds it
line=$(sed -n 2p $R/runs/pope+lr-4e-3-s3/log-val.jsonl)
want=$(/usr/bin/python3 -c 'import json,sys; v=json.loads(sys.argv[1]); print("pope+lr-4e-3,3,pope+lr-4e-3 s3,%d,%r,%r" % (v["step"], v["val_loss"], v["val_acc"]))' "$line")
grep -qxF "$want" "$W/c.csv" || fail "pope s3's second validation: want '$want'"
n=$(/usr/bin/python3 $C $R --tuning | wc -l)
[ "$n" = "$(($(cat $R/runs/*-s*/log-val.jsonl $R/runs/tune/*/log-val.jsonl | wc -l) + 1))" ] || fail "--tuning gave $n lines"
grep -q s1001 "$W/c.csv" && fail "a tuning run without --tuning"
# refusals: a run without log-val.jsonl; no runs at all
mkdir -p "$W/r/runs" && cp -r $R/runs/rope+lr-4e-3-s1 $R/runs/rope+lr-4e-3-s2 "$W/r/runs/"
rm "$W/r/runs/rope+lr-4e-3-s2/log-val.jsonl"
/usr/bin/python3 $C "$W/r" >/dev/null 2>"$W/e" && fail "a run without log-val.jsonl passed"
grep -q 'rope+lr-4e-3-s2 has no log-val.jsonl' "$W/e" || fail "refusal: $(cat "$W/e")"
/usr/bin/python3 $C "$W" >/dev/null 2>"$W/e" && fail "a directory with no runs passed"
grep -q 'holds no runs' "$W/e" || fail "refusal: $(cat "$W/e")"
echo "cli_curves: ok"
