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

# check CODE PATTERN -- ARGS...: exactly one line on stderr, starting "pelab: ".
check() {
    local code=$1 pattern=$2; shift 3
    "$P" "$@" >"$W/out" 2>"$W/err" <"$W/dna"; local rc=$?
    [ $rc -eq "$code" ] || fail "pelab $*: exit $rc, expected $code ($(cat "$W/err"))"
    [ "$(wc -l <"$W/err")" -eq 1 ] && grep -q '^pelab: ' "$W/err" || fail "pelab $*: stderr is not one 'pelab:' line: $(cat "$W/err")"
    grep -qF -- "$pattern" "$W/err" || fail "pelab $*: '$pattern' not in: $(cat "$W/err")"
}
mkdir -p "$W/v1" "$W/v2" "$W/v3"
check 1 "$W/v1/encoder.json: not found: the GPT-2 vocabulary is not installed (run: pelab data install gpt2)" -- tokenize --tokenizer gpt2 --vocab-dir "$W/v1" "$W/dna"
printf '{"a": 0, "b": 1' >"$W/v2/encoder.json"
check 1 "$W/v2/encoder.json: not GPT-2's encoder.json" -- tokenize --tokenizer gpt2 --vocab-dir "$W/v2" "$W/dna"
printf '{"a": 0, "b": 1}' >"$W/v3/encoder.json"
printf '#version: 0.2\na b c\n' >"$W/v3/vocab.bpe"
check 1 "$W/v3/vocab.bpe: line 2: expected a merge of two symbols, found 3" -- tokenize --tokenizer gpt2 --vocab-dir "$W/v3" "$W/dna"
printf 'ACGTU' >"$W/rna"
check 1 "$W/rna: byte 4: 0x55 is not a nucleotide" -- tokenize --tokenizer dna "$W/rna"
printf '60 61 62 200\n' >"$W/pitch"
check 1 "$W/pitch: byte 9: '200' is not a MIDI pitch in 21..108 or -1 (silence)" -- tokenize --tokenizer jsb "$W/pitch"
printf '12 x3\n' >"$W/ids"
check 1 "$W/ids: byte 3: 'x3' is not a token id" -- tokenize --decode "$W/ids"
printf '12 300\n' >"$W/ids"
check 1 "$W/ids: token 1: id 300 is outside the byte vocabulary (0..257)" -- tokenize --decode "$W/ids"
check 1 "$W/missing: cannot open" -- tokenize "$W/missing"
check 2 "--tokenizer: 'bpe'" -- tokenize --tokenizer bpe "$W/dna"
check 2 "tokenize takes one file" -- tokenize "$W/dna" "$W/jsb"
check 2 "unknown option --foo" -- tokenize --foo 1
echo "ok"
