#!/usr/bin/env bash
# `pelab help` lists the commands; `pelab help <command>` lists every option of every table
# (training, model, each task, each encoding) with its default.
set -u
. "$(dirname "$0")/lib/cli.sh"

out=$("$P" help) || fail "pelab help exited $?"
for c in train eval sample compare; do
    grep -q "^  $c " <<<"$out" || fail "pelab help does not list '$c'"
done

train=$("$P" help train) || fail "pelab help train exited $?"
# Every option line carries its default.
opt_lines=$(grep -E '^  --' <<<"$train")
[ "$(wc -l <<<"$opt_lines")" -ge 30 ] || fail "pelab help train lists too few options"
while IFS= read -r l; do
    name=$(awk '{print $1}' <<<"$l")
    # The default may sit on a wrapped continuation line: look at the option's block.
    block=$(awk -v n="$name" '$1 == n {p=1; print; next} p && /^  --/ {exit} p {print}' <<<"$train")
    grep -q "(default: " <<<"$block" || fail "$name: no default shown"
done <<<"$opt_lines"

# The training table, with its defaults; a sample of the model, task and encoding tables.
expect_default() { # name default
    local block
    block=$(awk -v n="--$1" '$1 == n {p=1; print; next} p && /^  --/ {exit} p {print}' <<<"$train")
    [ -n "$block" ] || fail "--$1 missing from 'pelab help train'"
    grep -q "(default: $2" <<<"$(tr '\n' ' ' <<<"$block" | tr -s ' ')" || fail "--$1: default '$2' not shown"
}
expect_default steps 2000; expect_default batch 64; expect_default accum 1; expect_default lr 1e-3; expect_default min-lr 1e-4
expect_default warmup 100; expect_default decay-steps 0; expect_default weight-decay 0.01; expect_default beta1 0.9
expect_default beta2 0.99; expect_default eps 1e-8; expect_default clip 1.0; expect_default seed 1; expect_default threads 0
expect_default eval-every 200; expect_default eval-batches 8; expect_default log-every 10; expect_default save-every 500
expect_default out none; expect_default task indirect; expect_default preset none; expect_default resume none
for o in pe d-model heads layers mlp-mult tied dropout indirect-max-len indirect-max-shift \
         rope-base rope-layout pope-softplus pope-delta pope-delta-init; do
    grep -qE "^  --$o " <<<"$train" || fail "--$o missing from 'pelab help train'"
done
for g in "training:" "model:" "task indirect:" "encoding rope:" "encoding pope:"; do
    grep -qx "$g" <<<"$train" || fail "group '$g' missing"
done

for c in eval sample compare; do
    h=$("$P" help $c) || fail "pelab help $c exited $?"
    grep -q -- "--model\|--pe" <<<"$h" || fail "pelab help $c lists no options"
done
"$P" help eval | grep -qE -- "^  --csv " || fail "--csv missing from 'pelab help eval'"
"$P" help encodings | grep -q pope || fail "pelab help encodings does not list pope"
[ "$(json <("$P" help encodings --json) '[e["display"] for e in j["encodings"] if e["name"] == "pope"]')" = "['PoPE']" ] ||
    fail "pelab help encodings --json: $("$P" help encodings --json)"
expect 2 "help tasks: unknown argument '--json'" -- help tasks --json
expect 2 "help encodings: unknown argument 'x'" -- help encodings --json x
"$P" train --help | grep -q -- "--steps" || fail "pelab train --help does not list --steps"

"$P" help nosuch 2>/dev/null; [ $? -eq 2 ] || fail "pelab help nosuch: expected exit 2"
"$P" 2>/dev/null; [ $? -eq 2 ] || fail "pelab without a command: expected exit 2"
echo "ok"
