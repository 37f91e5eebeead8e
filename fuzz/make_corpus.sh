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
rm -f $C/safetensors/* $C/state/* $C/config/* $C/options/*

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
ls -l $C/*
