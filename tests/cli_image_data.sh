#!/usr/bin/env bash
# pelab data install fashion-mnist on synthetic IDX files made here (tests/lib/make_idx.py; no
# package needed), fetched by a stand-in for the fetch script: install checks the files and
# writes info.json with the documented splits, the training split's pixel statistics and the
# files' CRC-32 (all computed independently here); list shows it; a second install leaves it
# alone; cat refuses a dataset of images; damaged sources (bad magic, wrong rank, a header that
# disagrees with the file's size, truncation) are one line naming the file, and nothing is
# installed; the real script says which package is missing when it cannot install it.
set -u
. "$(dirname "$0")/lib/cli.sh"
D=$W/data
mkdir -p "$W/src"
read -r mean std crc < <(/usr/bin/python3 tests/lib/make_idx.py "$W/src" 5012 4 6 6) || fail "make_idx.py failed"
# The stand-in: the fetch script's contract (fetch NAME DATA_DIR; files into DATA_DIR/sources/NAME).
cat >"$W/fetch" <<EOS
#!/bin/sh
echo "copying the synthetic IDX files"
mkdir -p "\$3/sources/\$2" && cp "$W/src"/* "\$3/sources/\$2/"
EOS
chmod +x "$W/fetch"
export PELAB_FETCH=$W/fetch

# ---- install ----
"$P" data install fashion-mnist --data-dir "$D" >"$W/out" 2>"$W/err" || fail "install: $(cat "$W/err")"
grep -q "^fashion-mnist: installed: 5016 images of 6x6 (train 12, val 5000, test 4), pixel mean 0.4843, std 0.2291 (CRC-32 $crc)$" "$W/out" ||
    fail "install output: $(cat "$W/out")"
grep -q "notice: fashion-mnist's files have CRC-32 $crc, not the caeb0704 measured" "$W/out" || fail "no notice of other files: $(cat "$W/out")"
I=$D/fashion-mnist/info.json
[ "$(json_text "$I" 'j["images"], j["rows"], j["cols"], j["classes"], j["data_crc32"]')" = "(5016, 6, 6, 10, '$crc')" ] || fail "info.json: $(cat "$I")"
[ "$(json_text "$I" '[(k, s["file"], s["first"], s["images"]) for k, s in j["splits"].items()]')" = \
  "[('train', 'train', 0, 12), ('val', 'train', 12, 5000), ('test', 'test', 0, 4)]" ] || fail "splits: $(cat "$I")"
[ "$(json_text "$I" 'abs(j["pixel_mean"] - '"$mean"') < 1e-11 and abs(j["pixel_std"] - '"$std"') < 1e-11')" = True ] ||
    fail "pixel statistics: $(json_text "$I" 'j["pixel_mean"], j["pixel_std"]') vs $mean $std"
"$P" data list --data-dir "$D" >"$W/list" || fail "list"
grep -q "^fashion-mnist  *image  *yes  *5016 .* $crc " "$W/list" || fail "list: $(cat "$W/list")"
grep -q "^sotu  *text  *no " "$W/list" || fail "list, the others: $(cat "$W/list")"
cp "$I" "$W/info.before"
PELAB_FETCH=/bin/false "$P" data install fashion-mnist --data-dir "$D" >"$W/out" 2>&1 || fail "second install: $(cat "$W/out")"
grep -q "^fashion-mnist: already installed" "$W/out" && cmp -s "$I" "$W/info.before" || fail "second install: $(cat "$W/out")"
[ -z "$(find "$D" -name '*.tmp.*')" ] || fail "temporary files left"

expect 2 "'fashion-mnist' is a dataset of images, not a dataset of documents" -- data cat fashion-mnist --data-dir "$D"

# ---- damaged sources: one line naming the file and the fault; nothing installed ----
# damaged NAME FILE PYTHON-EXPR PATTERN: the sources with FILE's bytes b replaced by PYTHON-EXPR
damaged() {
    local name=$1 file=$2 expr=$3 pattern=$4 d=$W/$1
    mkdir -p "$d/sources/fashion-mnist" && cp "$W/src"/* "$d/sources/fashion-mnist/"
    /usr/bin/python3 -c 'import sys, struct; p = sys.argv[1]; b = open(p, "rb").read(); open(p, "wb").write(eval(sys.argv[2]))' \
        "$d/sources/fashion-mnist/$file" "$expr" || fail "$name: cannot damage $file"
    PELAB_FETCH=/bin/false expect 1 "pelab: $d/sources/fashion-mnist/$file: $pattern" -- data install fashion-mnist --data-dir "$d"
    [ ! -e "$d/fashion-mnist/info.json" ] || fail "$name: installed anyway"
}
damaged magic train-images-idx3-ubyte 'b"\x1f\x8b" + b[2:]' "not an IDX file (magic 1f 8b 08 03"
damaged rank t10k-images-idx3-ubyte 'b[:3] + b"\x02" + b[4:12] + b[16:]' "rank 2, expected 3"
damaged count train-labels-idx1-ubyte 'b[:4] + struct.pack(">I", 5013) + b[8:]' "truncated: the header says 5013 u8 (5021 bytes with the header), the file has 5020"
damaged extra t10k-labels-idx1-ubyte 'b + b"\0"' "1 bytes after the data: the header says 4 u8 (12 bytes with the header), the file has 13"
damaged cut train-images-idx3-ubyte 'b[:1000]' "truncated: the header says 5012x6x6 u8 (180448 bytes with the header), the file has 1000"
damaged header t10k-images-idx3-ubyte 'b[:10]' "truncated: 10 bytes, the header of rank 3 needs 16"
# after install: a damaged source is noticed and refused
/usr/bin/python3 -c 'import sys; p = sys.argv[1]; open(p, "r+b").truncate(100)' "$D/sources/fashion-mnist/t10k-images-idx3-ubyte"
PELAB_FETCH=/bin/false expect 1 "t10k-images-idx3-ubyte: truncated" -- data install fashion-mnist --data-dir "$D"
grep -q "notice: .*t10k-images-idx3-ubyte: truncated.*; installing again" "$W/o" || fail "damaged after install: $(cat "$W/o")"

# ---- the real fetch script without apt-get: the package it needs, on one line ----
mkdir -p "$W/bin" && for t in sh mkdir rm dirname grep; do ln -s "$(command -v $t)" "$W/bin/$t"; done
PATH=$W/bin "$W/bin/sh" scripts/install-data.sh fetch fashion-mnist "$W/d4" >"$W/out"; rc=$?
[ $rc -eq 3 ] && grep -q "^error: Debian package dataset-fashion-mnist is not installed and there is no apt-get to install it" "$W/out" ||
    fail "no apt-get: exit $rc: $(cat "$W/out")"
[ -z "$(ls -A "$W/d4/sources")" ] || fail "no apt-get: left $(ls -A "$W/d4/sources")"
echo "ok"
