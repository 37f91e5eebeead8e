#!/usr/bin/env bash
# Writes the seed corpora of the fuzz targets, fuzz/corpus/<name>/, from a tiny run of ./pelab
# (the run of FUZZ_TINY_RUN in fuzz/fuzz.h, so that its checkpoint is one fuzz_state accepts) and
# a few hand-made inputs. The seeds are committed; rerun this after a format changes.
set -eu
cd "$(dirname "$0")/.."
run=$(sed -n '/#define FUZZ_TINY_RUN/,/^$/p' fuzz/fuzz.h | grep -o '"[^"]*"' | tr -d '"' | tr -s ' ')
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
./pelab train $run --steps 2 --threads 1 --out "$W/run" >/dev/null 2>&1
C=fuzz/corpus
mkdir -p $C/tokcache $C/bpe $C/csv
rm -f $C/safetensors/* $C/state/* $C/config/* $C/options/* $C/tokcache/* $C/bpe/* $C/csv/*

cp "$W/run/checkpoints/state-0000000002.safetensors" $C/state/tiny-step2
cp "$W/run/model.safetensors" $C/safetensors/tiny-model
# safetensors as other tools write them: no metadata, several dtypes, a scalar, an empty tensor.
/usr/bin/python3 - "$C/safetensors" <<'PY'
import json, struct, sys
def write(path, tensors, meta=None):
    h, data = {}, b""
    if meta is not None: h["__metadata__"] = meta
    for name, dt, shape, raw in tensors:
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(h).encode()
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data)
d = sys.argv[1]
write(d + "/foreign", [("a", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
                       ("b", "I64", [], struct.pack("<q", -5)), ("e", "F64", [0, 3], b""),
                       ("c", "I32", [3], struct.pack("<3i", 7, 8, 9))], {"format": "other"})
write(d + "/empty", [])
PY

cp "$W/run/config.json" $C/config/tiny-config
printf '{"a": [1, -2.5e-3, true, false, null, "x\\u00e9\\n", {"b": {}}], "c": []}' >$C/config/json-kinds
printf '{"pelab-version": "0.1.0", "training": {"steps": 3}, "model": {}, "encoding": {}, "task": {}}' \
    >$C/config/minimal

seed() { local name=$1; shift; printf '%s\0' "$@" | head -c -1 >"$C/options/$name"; }
seed tiny $run --steps 2 --out r
seed preset --preset cpu --pe rope --rope-layout half --rope-base=500
seed switches --tied --dropout 0.1 --accum 2 --on-nan rollback --nan-lr-factor 0.25 --check-finite
seed errors --lr abc --steps --heads 3 stray

# Token caches written by pelab's own builder: bytes (width 1), ids of widths 2 and 4, no
# documents; then two damaged copies (truncated; a changed token, so the data checksum fails).
cat >"$W/caches.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include "pelab/tokcache.h"
static void must(int rc) { if (rc) exit(1); }
int main(int argc, char **argv) {
    char p[4096];
    struct pelab_tokcache_builder b;
    must(argc != 2);
    must(pelab_tokcache_begin(&b, "text", 7, 256));
    must(pelab_tokcache_add_bytes(&b, "gen/1", 0, "In the beginning", 16));
    must(pelab_tokcache_add_bytes(&b, "gen/2", 1, "", 0));
    must(pelab_tokcache_add_bytes(&b, "gen/3", 3, "And the earth was", 17));
    snprintf(p, sizeof p, "%s/text", argv[1]);
    must(pelab_tokcache_commit(&b, p));
    int32_t ids[] = {5, 300, 4106, 0, 77, 4000, 12};
    must(pelab_tokcache_begin(&b, "dna", 42, 4107));
    must(pelab_tokcache_add(&b, "chrX:0", 0, ids, 4));
    must(pelab_tokcache_add(&b, "chrX:1", 2, ids + 4, 3));
    snprintf(p, sizeof p, "%s/dna-width2", argv[1]);
    must(pelab_tokcache_commit(&b, p));
    int32_t wide[] = {50256, 70000, 1, 99999};
    must(pelab_tokcache_begin(&b, "wide", 1234567, 100000));
    must(pelab_tokcache_add(&b, "w", 0, wide, 4));
    snprintf(p, sizeof p, "%s/width4", argv[1]);
    must(pelab_tokcache_commit(&b, p));
    must(pelab_tokcache_begin(&b, "byte", 9, 258));
    snprintf(p, sizeof p, "%s/empty", argv[1]);
    must(pelab_tokcache_commit(&b, p));
    return 0;
}
C
libs=$(make -s -n -B pelab | sed -n '/-o pelab /s/.* libpelab\.a //p') # the link line of ./pelab
cc -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -o "$W/caches" "$W/caches.c" libpelab.a $libs
"$W/caches" $C/tokcache
head -c 100 $C/tokcache/text >$C/tokcache/text-truncated
cp $C/tokcache/dna-width2 $C/tokcache/dna-bad-crc
printf '\377' | dd of=$C/tokcache/dna-bad-crc bs=1 seek=73 conv=notrunc 2>/dev/null

# IDX files for fuzz_idx: images and labels as Fashion-MNIST has them, f64 and i16, a truncated one.
mkdir -p $C/idx && rm -f $C/idx/*
/usr/bin/python3 - $C/idx <<'PY'
import struct, sys
C = sys.argv[1] + '/'
open(C + 'images-u8', 'wb').write(struct.pack('>BBBBIII', 0, 0, 8, 3, 2, 3, 4) + bytes(range(24)))
open(C + 'labels-u8', 'wb').write(struct.pack('>BBBBI', 0, 0, 8, 1, 5) + bytes([0, 9, 3, 3, 1]))
open(C + 'f64-rank2', 'wb').write(struct.pack('>BBBBII', 0, 0, 0x0E, 2, 1, 2) + struct.pack('>dd', 1.5, -0.25))
open(C + 'i16', 'wb').write(struct.pack('>BBBBI', 0, 0, 0x0B, 1, 3) + struct.pack('>hhh', -2, 258, 7))
open(C + 'truncated', 'wb').write(struct.pack('>BBBBIII', 0, 0, 8, 3, 2, 3, 4) + bytes(range(20)))
PY

# GPT-2 vocabularies for fuzz_bpe (encoder.json, a NUL byte, vocab.bpe), hand-made and tiny.
# GPT-2's byte alphabet writes a space as "Ġ" (U+0120).
bpe() { printf '%s\0%s' "$2" "${3-}" >"$C/bpe/$1"; }
bpe tiny '{"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "Ġab": 5, "abc": 6, "<|endoftext|>": 7}' \
    $'#version: 0.2\na b\nĠ ab\nab c\n'
bpe all-bytes "$(/usr/bin/python3 -c '
import json
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256 + n); n += 1
v = {chr(c): i for i, c in enumerate(cs)}
v.update({"\u0120t": 256, "he": 257, "\u0120the": 258, "<|endoftext|>": 259})
print(json.dumps(v, ensure_ascii=False))')" $'#version: 0.2\nĠ t\nh e\nĠt he\n'
bpe bad-id '{"a": 0, "b": 5}' $'#version: 0.2\na b\n'
bpe bad-merge '{"a": 0, "b": 1}' $'#version: 0.2\na b c\n'
printf '{"a": 0}' >$C/bpe/no-separator

# CSV tables for fuzz_csv, as pelab writes them (eval --lengths --csv, compare's sweep.csv, analyze
# bias with CRLF line ends) and as the reader refuses them.
printf 'pe,label,length,multiple,documents,windows,tokens,nll,ppl,bpb\nrope,1x,32,1,8,40,1271,2.71,15.03,3.91\nrope,2x,64,2,6,18,1140,3.05,21.1,4.4\n' >$C/csv/eval-sweep
printf 'pe,label,length,ppl_mean,ppl_std\nrope,1x,32,14.5,0.25\npope,1x,32,nan,inf\npope,2x,64,-inf,1e-320' >$C/csv/compare-sweep
printf 'layer,head,distance,bias\r\n0,0,0,0\r\n0,0,1,-0.5\r\n0,1,0x1p3, 2 \r\n\r\n\n' >$C/csv/crlf
printf 'a,b\n1,"2"\n' >$C/csv/quoted
printf 'pe,"le,n ""x"""\r\n"a\nb",3\n"",4' >$C/csv/quoted-breaks
printf 'a,b\n"1,2\n' >$C/csv/quote-open
printf 'a,b\n"1"x,2\n1,2"\n' >$C/csv/quote-stray
printf 'a,b,a\n1,2,3\n' >$C/csv/twice
printf 'a,,c\n1,2,3\n' >$C/csv/unnamed
printf 'x,y\n1,2\n\n3,4\n' >$C/csv/empty-line
printf 'x,y\n1,2,3\n4\n' >$C/csv/ragged
printf 'x,y\n1e999,abc\n' >$C/csv/not-numbers
printf 'length\n' >$C/csv/header-only
ls -l $C/*
