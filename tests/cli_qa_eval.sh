#!/usr/bin/env bash
# The SeqPE paper's Table II evaluation from the command line, on a small text dataset installed
# here: a tiny text run fine-tuned on qa (--init-from) until it copies some pass keys, then
# `eval --lengths 1x,2x`: per length the answer-span NLL and perplexity (exp of the NLL), the
# exact match of a greedy generation with the KV cache, and the teacher-forced one; the
# generations that begin with the answer's tokens are exactly the teacher-forced exact matches
# (generation and the forward pass agree), and with byte tokens every teacher-forced match is a
# generated match; the same questions at every length (same keys, same relative depths); the
# table, JSON and CSV agree, and `plot lines` draws the CSV; multi answers are scored whole;
# `compare --task qa` with each encoding's own --init-from has the span perplexity and EM columns
# and reads a run's qa_sweep.json again; GPT-2 tokens where the vocabulary is installed; a length
# the encoding cannot reach, a question longer than the context, --gen-tokens without a qa sweep
# and --split long are one usage error each.
set -u
. "$(dirname "$0")/lib/cli.sh"
D="$W/data"
install_sotu "$D"
MODEL="--d-model 32 --heads 2 --layers 2 --threads 1 --eval-every 0"
QA="--task qa --seq-len 112 --qa-digits 1 --qa-val-size 32 --qa-test-size 32"

"$P" train --task text --tokenizer byte --data-dir "$D" --seq-len 32 $MODEL --batch 4 --steps 3 \
    --out "$W/text" >/dev/null 2>"$W/err" || fail "train text: $(cat "$W/err")"
"$P" train --init-from "$W/text" $QA --batch 16 --steps 300 --lr 3e-3 --threads 1 --eval-every 0 \
    --out "$W/ft" >/dev/null 2>"$W/err" || fail "fine-tune on qa: $(cat "$W/err")"

"$P" eval --model "$W/ft" --lengths 1x,2x --threads 1 --csv "$W/q.csv" >"$W/table" 2>"$W/err" ||
    fail "eval --lengths on qa: $(cat "$W/err")"
"$P" eval --model "$W/ft" --lengths 1x,2x --threads 1 --json >"$W/j1" 2>"$W/err" || fail "eval --json: $(cat "$W/err")"
"$P" eval --model "$W/ft" --lengths 1x,2x --threads 1 --json >"$W/j2" 2>"$W/err" || fail "eval --json again"
/usr/bin/python3 - "$W/table" "$W/j1" "$W/j2" "$W/q.csv" <<'PY' || fail "the qa sweep: $(cat "$W/table" "$W/j1")"
import csv, json, math, sys
table, j, j2 = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
assert j["task"] == "qa" and j["variant"] == "passkey" and j["split"] == "test", j
assert j["train_length"] == 112 and j["gen_tokens"] == 16, j
rows = j["rows"]
assert [r["length"] for r in rows] == [112, 224], rows
for r in rows:
    assert r["examples"] == 32 and r["answer_tokens"] == 2 * 32, r  # one digit and the "."
    assert abs(r["span_perplexity"] - math.exp(r["span_nll"])) < 1e-9 * r["span_perplexity"], r
    assert r["exact_match"] == r["exact"] / 32 and r["forced_exact_match"] == r["forced_exact"] / 32, r
    # generation with the cache and the teacher-forced pass agree on every question
    assert r["generated_answer_tokens"] == r["forced_exact"], r
    # bytes: an answer generated token for token is a generated match
    assert r["exact"] >= r["forced_exact"], r
    assert r["kv_cache"] is True and r["generated_tokens"] >= r["answer_tokens"], r
assert rows[0]["forced_exact"] >= 2, rows[0]  # the fine-tuned model copies some keys
for a, b in zip(rows, j2["rows"]):
    a.pop("seconds"); b.pop("seconds")
    assert a == b, (a, b)  # the same questions, the same answers, run to run
lines = [l.split() for l in table.splitlines() if l.startswith(("1x", "2x"))]
assert len(lines) == 2 and "span ppl" in table and "forced EM" in table, table
for l, r in zip(lines, rows):
    assert int(l[1]) == r["length"] and abs(float(l[6]) - r["span_perplexity"]) < 6e-4 * r["span_perplexity"], (l, r)
    assert abs(float(l[7]) - r["exact_match"]) < 6e-4 and abs(float(l[8]) - r["forced_exact_match"]) < 6e-4, (l, r)
c = list(csv.DictReader(open(sys.argv[4])))
assert list(c[0].keys()) == "pe,label,length,multiple,examples,tokens,nll,ppl,em,forced_em".split(","), c[0]
assert [x["label"] for x in c] == ["1x", "2x"] and all(x["pe"] == "rope" for x in c), c
for x, r in zip(c, rows):
    assert float(x["em"]) == r["exact_match"] and abs(float(x["ppl"]) - r["span_perplexity"]) < 1e-6 * r["span_perplexity"], (x, r)
PY
# a setting the KV cache cannot hold (dynamic NTK): generation recomputes, and still agrees
"$P" eval --model "$W/ft" --lengths 1x,2x --rope-scaling dynamic-ntk --threads 1 --json >"$W/jd" \
    2>"$W/err" || fail "eval with dynamic NTK: $(cat "$W/err")"
/usr/bin/python3 -c '
import json, sys; j = json.load(open(sys.argv[1]))
for r in j["rows"]:
    assert r["kv_cache"] is False and r["generated_answer_tokens"] == r["forced_exact"], r' "$W/jd" ||
    fail "eval with dynamic NTK: $(cat "$W/jd")"
"$P" plot lines --csv "$W/q.csv" --x length --y em --group pe --png "$W/em.png" >/dev/null 2>"$W/err" &&
    [ -s "$W/em.png" ] || fail "plot lines of the qa CSV: $(cat "$W/err")"

# the same questions at every length: a run at twice the length asks example i with the same key,
# planted at the same relative depth of a longer haystack
"$P" train --init-from "$W/text" $QA --seq-len 224 --batch 4 --steps 1 --threads 1 --eval-every 0 \
    --out "$W/ft2" >/dev/null 2>"$W/err" || fail "qa at 224: $(cat "$W/err")"
"$P" sample --model "$W/ft" --count 16 --threads 1 >"$W/s1" 2>"$W/err" || fail "sample: $(cat "$W/err")"
"$P" sample --model "$W/ft2" --count 16 --threads 1 >"$W/s2" 2>"$W/err" || fail "sample 224: $(cat "$W/err")"
/usr/bin/python3 - "$W/s1" "$W/s2" <<'PY' || fail "the questions differ between lengths: $(head -8 "$W/s1" "$W/s2")"
import re, sys
def examples(path):
    text = re.sub(r"\n\d+ of \d+ right\n$", "\n", open(path).read())
    out = []
    for b in re.split(r"^#", text, flags=re.M)[1:]:
        head = "\n".join(r for r in b.split("\n") if not re.match(r"\s+at \d+ predicted", r))
        head = head[7:].rstrip("\n")  # after "#%-6d "
        m = re.search(r" The pass key is (\d)\. Remember it\. \d is the pass key\. ", head)
        q = head.index(" What is the pass key?")
        out.append((m.group(1), m.start() / (q - len(m.group(0))), q))  # depth / haystack
    return out
a, b = examples(sys.argv[1]), examples(sys.argv[2])
assert len(a) == len(b) == 16
assert len({k for k, _, _ in a}) >= 5, a  # the keys differ between examples
for (k1, d1, q1), (k2, d2, q2) in zip(a, b):
    assert k1 == k2, (k1, k2)
    assert q2 > q1 + 90, (q1, q2)  # a longer haystack
    assert abs(d1 - d2) < 0.06, (d1, d2)  # the same relative depth, to a character at 112
PY

# kv and multi: the whole answer scored and generated (multi: all three values, ", " between)
"$P" train --init-from "$W/text" --task qa --qa-variant multi --qa-facts 3 --seq-len 192 --qa-digits 2 \
    --qa-val-size 8 --qa-test-size 8 --batch 4 --steps 2 --threads 1 --eval-every 0 --out "$W/multi" \
    >/dev/null 2>"$W/err" || fail "multi: $(cat "$W/err")"
"$P" eval --model "$W/multi" --lengths 1x,2x --gen-tokens 4 --json --threads 1 >"$W/jm" 2>"$W/err" ||
    fail "eval multi: $(cat "$W/err")"
/usr/bin/python3 -c '
import json, sys; j = json.load(open(sys.argv[1]))
assert j["variant"] == "multi" and j["gen_tokens"] == 4, j
for r in j["rows"]:
    assert r["answer_tokens"] == 8 * 11, r  # "12, 34, 56."
    assert r["generated_tokens"] <= 8 * 11 and r["generated_answer_tokens"] == r["forced_exact"], r' "$W/jm" ||
    fail "eval multi: $(cat "$W/jm")"

# compare on qa: each encoding fine-tunes its own text run; span perplexity and EM columns at each
# length, in compare.json and sweep.csv; a run's qa_sweep.json is what a second compare reads
"$P" train --task text --tokenizer byte --data-dir "$D" --seq-len 32 $MODEL --pe alibi --batch 4 --steps 3 \
    --out "$W/text-alibi" >/dev/null 2>"$W/err" || fail "train text alibi: $(cat "$W/err")"
CMP="--task qa --pe rope:init-from=$W/text,alibi:init-from=$W/text-alibi --seeds 1 --seq-len 112
     --qa-digits 1 --qa-val-size 8 --qa-test-size 8 --steps 2 --batch 4 --threads 1 --eval-every 0
     --lengths 1x,2x --out $W/cmp"
"$P" compare $CMP >"$W/c1" 2>"$W/err" || fail "compare qa: $(cat "$W/err")"
grep -q "| encoding | test span NLL | span ppl 1x (112) | span ppl 2x (224) | EM 1x | EM 2x |" "$W/c1" ||
    fail "compare's qa table: $(cat "$W/c1")"
R=$(ls -d "$W"/cmp/rope*-s1)
[ -f "$R/qa_sweep.json" ] && [ "$(ls -d "$W"/cmp/*-s1 | wc -l)" -eq 2 ] || fail "compare's runs: $(ls -R "$W/cmp")"
/usr/bin/python3 - "$W/cmp/compare.json" "$W/cmp/sweep.csv" "$R/qa_sweep.json" <<'PY' || fail "compare.json: $(cat "$W/cmp/compare.json")"
import csv, json, sys
c, rows, q = json.load(open(sys.argv[1])), list(csv.DictReader(open(sys.argv[2]))), json.load(open(sys.argv[3]))
assert c["lengths"] == ["1x", "2x"], c
rope = [r for r in c["runs"] if r["pe"].startswith("rope")][0]
assert rope["sweep_span_ppl"] == [r["span_perplexity"] for r in q["rows"]], (rope, q)
assert rope["sweep_em"] == [r["exact_match"] for r in q["rows"]], (rope, q)
assert [(r["pe"].split(":")[0], r["length"]) for r in rows] == [("rope", "112"), ("rope", "224"), ("alibi", "112"), ("alibi", "224")], rows
assert float(rows[0]["em_mean"]) == q["rows"][0]["exact_match"], rows
PY
/usr/bin/python3 - "$R/qa_sweep.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["rows"][1]["exact_match"] = 0.625
open(sys.argv[1], "w").write(json.dumps(j))
PY
"$P" compare $CMP >"$W/c2" 2>"$W/err" || fail "compare qa again: $(cat "$W/err")"
grep "^| rope" "$W/c2" | grep -q "| 62.5 % |" || fail "the second compare did not read qa_sweep.json: $(cat "$W/c2")"

# GPT-2 tokens, where the vocabulary is installed (DATA_DIR/sources/gpt2, as tests/cli_bpe.sh):
# the same sweep, the answer's tokens those of the number and the "." alone
VOCAB="${PELAB_DATA:-data}/sources/gpt2"
if [ -f "$VOCAB/encoder.json" ]; then
    G="$W/gdata"
    mkdir -p "$G/sources"
    ln -s "$(cd "$VOCAB" && pwd)" "$G/sources/gpt2"
    cp -r "$D/sources/sotu" "$G/sources/sotu"
    PELAB_FETCH=/bin/false "$P" data install sotu --data-dir "$G" >"$W/out" 2>&1 || fail "install gpt2: $(cat "$W/out")"
    "$P" train --task qa --tokenizer gpt2 --data-dir "$G" --seq-len 64 --qa-digits 1 --qa-val-size 8 \
        --qa-test-size 8 --d-model 16 --heads 2 --layers 1 --batch 4 --steps 2 --threads 1 \
        --eval-every 0 --out "$W/g" >/dev/null 2>"$W/err" || fail "qa gpt2: $(cat "$W/err")"
    "$P" eval --model "$W/g" --lengths 1x,2x --json --threads 1 >"$W/jg" 2>"$W/err" || fail "eval gpt2: $(cat "$W/err")"
    /usr/bin/python3 -c '
import json, sys; j = json.load(open(sys.argv[1]))
assert [r["length"] for r in j["rows"]] == [64, 128], j
for r in j["rows"]:
    assert r["answer_tokens"] == 2 * 8 and r["generated_answer_tokens"] == r["forced_exact"], r' "$W/jg" ||
        fail "eval gpt2: $(cat "$W/jg")"
else
    echo "note: no GPT-2 vocabulary in $VOCAB; the gpt2 part is left out"
fi

# refusals: one line each, exit 2
"$P" train $QA --tokenizer byte --data-dir "$D" --pe learned --d-model 16 --heads 2 --layers 1 --steps 1 \
    --threads 1 --eval-every 0 --out "$W/learned" >/dev/null 2>"$W/err" || fail "learned: $(cat "$W/err")"
expect 2 "--lengths 2x (224 tokens): .*ape-extend interpolate" -G -- eval --model "$W/learned" --lengths 1x,2x
expect 2 "--lengths 0.5x (56 tokens): --seq-len 56: a passkey example of 1 digits needs 93 tokens" -- \
    eval --model "$W/ft" --lengths 0.5x,1x
expect 2 "--gen-tokens applies to the length sweep of a qa run" -- eval --model "$W/ft" --gen-tokens 4
expect 2 "--split long: task qa asks its questions on the val and test splits" -- \
    eval --model "$W/ft" --lengths 1x --split long
expect 2 "--csv writes the rows of a length sweep" -n "$W/x.csv" -- eval --model "$W/ft" --csv "$W/x.csv"
echo "ok"
