#!/usr/bin/env bash
# pelab tokenize: ids one per line, --decode back to the same bytes (byte, dna, jsb); and bad input:
# vocabulary files that are missing or do not parse, text a tokenizer has no ids for, ids that are
# not numbers or not in the vocabulary — each one line naming the file, exit 1; usage errors exit 2.
set -u
. "$(dirname "$0")/lib/cli.sh"

head -c 3000 /dev/urandom >"$W/bin"
printf 'plain\n' >>"$W/bin"
"$P" tokenize --tokenizer byte "$W/bin" >"$W/ids" || fail "byte encode"
[ "$(wc -l <"$W/ids")" -eq 3006 ] || fail "byte: one id per byte"
"$P" tokenize --tokenizer byte --decode "$W/ids" >"$W/back" && cmp -s "$W/bin" "$W/back" || fail "byte round trip"
printf 'ACGTACGTTTGCANNACGTAGGGCCCATATAGCGCGATCGATCGNACGT' >"$W/dna"
"$P" tokenize --tokenizer dna <"$W/dna" | "$P" tokenize --tokenizer dna --decode >"$W/back" && cmp -s "$W/dna" "$W/back" || fail "dna round trip"
[ "$(printf 'AAAAAAGGGGGGAC' | "$P" tokenize --tokenizer dna | tr '\n' ' ')" = "4 4099 4100 4102 " ] || fail "dna ids"
printf '65 60 57 53\n72 -1 55 36\n' >"$W/jsb"
"$P" tokenize --tokenizer jsb - <"$W/jsb" | "$P" tokenize --tokenizer jsb --decode >"$W/back" && cmp -s "$W/jsb" "$W/back" || fail "jsb round trip"

# Refusals: one line on stderr, starting "pelab: " (standard input: $W/dna).
mkdir -p "$W/v1" "$W/v2" "$W/v3"
expect 1 "$W/v1/encoder.json: not found: the GPT-2 vocabulary is not installed (run: pelab data install gpt2)" -p -i "$W/dna" -- tokenize --tokenizer gpt2 --vocab-dir "$W/v1" "$W/dna"
printf '{"a": 0, "b": 1' >"$W/v2/encoder.json"
expect 1 "$W/v2/encoder.json: not GPT-2's encoder.json" -p -i "$W/dna" -- tokenize --tokenizer gpt2 --vocab-dir "$W/v2" "$W/dna"
printf '{"a": 0, "b": 1}' >"$W/v3/encoder.json"
printf '#version: 0.2\na b c\n' >"$W/v3/vocab.bpe"
expect 1 "$W/v3/vocab.bpe: line 2: expected a merge of two symbols, found 3" -p -i "$W/dna" -- tokenize --tokenizer gpt2 --vocab-dir "$W/v3" "$W/dna"
printf 'ACGTU' >"$W/rna"
expect 1 "$W/rna: byte 4: 0x55 is not a nucleotide" -p -i "$W/dna" -- tokenize --tokenizer dna "$W/rna"
printf '60 61 62 200\n' >"$W/pitch"
expect 1 "$W/pitch: byte 9: '200' is not a MIDI pitch in 21..108 or -1 (silence)" -p -i "$W/dna" -- tokenize --tokenizer jsb "$W/pitch"
printf '12 x3\n' >"$W/ids"
expect 1 "$W/ids: byte 3: 'x3' is not a token id" -p -i "$W/dna" -- tokenize --decode "$W/ids"
printf '12 300\n' >"$W/ids"
expect 1 "$W/ids: token 1: id 300 is outside the byte vocabulary (0..257)" -p -i "$W/dna" -- tokenize --decode "$W/ids"
expect 1 "$W/missing: cannot open" -p -i "$W/dna" -- tokenize "$W/missing"
expect 2 "--tokenizer: 'bpe'" -p -i "$W/dna" -- tokenize --tokenizer bpe "$W/dna"
expect 2 "tokenize takes one file" -p -i "$W/dna" -- tokenize "$W/dna" "$W/jsb"
expect 2 "unknown option --foo" -p -i "$W/dna" -- tokenize --foo 1
echo "ok"
