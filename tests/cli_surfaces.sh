#!/usr/bin/env bash
# The surfaces added since the hostile-input audit of cli_hostile.sh (images and IDX data,
# --init-from, sample, analyses, compare variants, resume), each under the input that broke it:
# analyze freq works on image runs; every --resolutions side is checked before any work; an image
# run evaluates after its data moved, and a damaged test file stops only what reads it; FIFOs,
# devices and impossible pixel statistics are refused in one line; SeqPE records its settings as
# resolved; sample generates exactly --tokens tokens whatever the prompt, and escapes control bytes
# on a terminal; the confusing messages of the audit each say what is wrong. (The MPI agreement
# is in cli_mpi.sh, byte-identical resumes in cli_kill.sh, a fine-tune's dropped settings in
# cli_init_from.sh, the probe's memory in cli_probe.sh.)
set -u
. "$(dirname "$0")/lib/cli.sh"
D=$W/data
install_images "$D"
IMG="--task image --image-side 8 --patch 4 --d-model 16 --heads 2 --layers 1 --batch 8 --threads 1 --eval-every 0 --eval-batches 1 --data-dir $D"

# 1. analyze freq on image runs with a 1-D QK encoding on raster positions
for pe in rope pope; do
    train $IMG --pe $pe --positions raster --steps 2 --out "$W/img-$pe"
    "$P" analyze freq --model "$W/img-$pe" --out "$W/freq.csv" >"$W/o" 2>"$W/e" ||
        fail "analyze freq on an image $pe run: exit $? ($(cat "$W/e"))"
    [ "$(head -n 1 "$W/freq.csv")" = "layer,freq,theta,query_norm,key_norm" ] && [ "$(wc -l <"$W/freq.csv")" -gt 1 ] ||
        fail "analyze freq on an image $pe run: $(head -n 3 "$W/freq.csv")"
    /usr/bin/python3 - "$W/freq.csv" <<'PY' || fail "analyze freq on an image $pe run: magnitudes"
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert all(math.isfinite(float(r["query_norm"])) and float(r["query_norm"]) > 0 for r in rows), rows[:3]
PY
done
# 5, 11. every requested side is checked before any work: SeqPE's digits (here 1 a coordinate:
# coordinates count from 1: grids below 10, sides below 40 with 4-pixel patches), and at most 8x the training side
train $IMG --pe seqpe --seqpe-digits 1 --steps 2 --out "$W/img-seqpe"
start=$SECONDS
expect 2 "--resolutions: side 40: --pe seqpe: coordinate 1 of a position 10 has more than 1 digits in base 10" -- \
    eval --model "$W/img-seqpe" --resolutions 8,36,40 --threads 1
expect 2 "--resolutions: side 40: --pe seqpe: coordinate 1" -- \
    compare $IMG --pe seqpe --seqpe-digits 1 --steps 2 --resolutions 8,40 --out "$W/cmp-seqpe"
[ ! -e "$W/cmp-seqpe" ] || fail "compare trained before refusing a side SeqPE cannot take"
expect 2 "--resolutions: '9x': at most 8x the training side, 64 pixels here" -- eval --model "$W/img-rope" --resolutions 1x,9x
expect 2 "--resolutions: '4100': a side is 4 (the patch size) to 4096 pixels" -- eval --model "$W/img-rope" --resolutions 4100
[ $((SECONDS - start)) -lt 20 ] || fail "the refusals took $((SECONDS - start)) s: work before the check"

# config.json records SeqPE's automatic settings as resolved; a run written before (0:
# automatic, in config.json and the weights' metadata alike) still opens and evaluates the same
[ "$(json "$W/img-seqpe/config.json" '[j["encoding"][k] for k in ("seqpe-dims", "seqpe-digits", "seqpe-width", "seqpe-heads")]')" = "[2, 1, 16, 2]" ] ||
    fail "SeqPE's resolved settings: $(cat "$W/img-seqpe/config.json")"
"$P" eval --model "$W/img-seqpe" --json --threads 1 >"$W/new.json" 2>"$W/e" || fail "eval: $(cat "$W/e")"
cp -r "$W/img-seqpe" "$W/img-seqpe-old"
for k in seqpe-dims seqpe-width seqpe-heads; do
    sed -i "s/\"$k\": [0-9]*/\"$k\": 0/" "$W/img-seqpe-old/config.json"
    /usr/bin/python3 tests/lib/st_edit.py "$W/img-seqpe-old/model.safetensors" meta "pelab.config.$k" 0 || fail "st_edit"
done
"$P" eval --model "$W/img-seqpe-old" --json --threads 1 >"$W/old.json" 2>"$W/e" || fail "eval of a run with automatic settings: $(cat "$W/e")"
[ "$(json "$W/old.json" 'j["loss"]')" = "$(json "$W/new.json" 'j["loss"]')" ] || fail "automatic and resolved settings evaluate differently"

# 6. an image run evaluates and samples from data that moved (--data-dir), as a text run does
cp -r "$D" "$W/moved"
"$P" eval --model "$W/img-rope" --data-dir "$W/moved" --threads 1 >"$W/o" 2>"$W/e" || fail "eval --data-dir on an image run: $(cat "$W/e")"
"$P" sample --model "$W/img-rope" --data-dir "$W/moved" --count 1 >"$W/o" 2>"$W/e" || fail "sample --data-dir on an image run: $(cat "$W/e")"
expect 1 "dataset 'fashion-mnist' is not installed in $W/nowhere" -- eval --model "$W/img-rope" --data-dir "$W/nowhere"

# a damaged test file stops what reads the test split, and nothing else
cp -r "$D" "$W/dtest"
printf 'X' | dd of="$W/dtest/sources/fashion-mnist/t10k-images-idx3-ubyte" bs=1 seek=100 conv=notrunc 2>/dev/null
"$P" eval --model "$W/img-rope" --data-dir "$W/dtest" --split val --threads 1 >"$W/o" 2>"$W/e" ||
    fail "eval --split val with a damaged test file: $(cat "$W/e")"
expect 1 "t10k-images-idx3-ubyte: CRC-32" -- eval --model "$W/img-rope" --data-dir "$W/dtest" --split test --threads 1
expect 1 "t10k-images-idx3-ubyte: CRC-32" -- sample --model "$W/img-rope" --data-dir "$W/dtest" --split test --count 1

# 8. an IDX source that is a FIFO, or a link to /dev/zero: refused at once, nothing installed
for kind in fifo zero; do
    cat >"$W/fetch-$kind" <<EOS
#!/bin/sh
mkdir -p "\$3/sources/\$2" && cp "$W/src"/* "\$3/sources/\$2/" && rm "\$3/sources/\$2/train-images-idx3-ubyte" &&
if [ $kind = fifo ]; then mkfifo "\$3/sources/\$2/train-images-idx3-ubyte"; else ln -s /dev/zero "\$3/sources/\$2/train-images-idx3-ubyte"; fi
EOS
    chmod +x "$W/fetch-$kind"
    want="a FIFO, not a regular file"
    [ $kind = zero ] && want="a character device, not a regular file"
    # (exit 124: it hangs on an IDX file that is a $kind)
    PELAB_FETCH=$W/fetch-$kind expect 1 "train-images-idx3-ubyte: $want" -c -- \
        timeout 30 "$P" data install fashion-mnist --data-dir "$W/d-$kind"
    [ ! -e "$W/d-$kind/fashion-mnist/info.json" ] || fail "data install with a $kind installed it"
done

# 9. info.json's pixel statistics are checked at load; a non-JSON info.json is named
cp -r "$D" "$W/d9"
I9=$W/d9/fashion-mnist/info.json
/usr/bin/python3 - "$I9" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["pixel_std"] = 1e-300; json.dump(j, open(sys.argv[1], "w"))
PY
expect 1 "$I9: damaged: pixel_mean" -- train $IMG --data-dir "$W/d9" --pe rope2d --steps 2 --out "$W/bad9"
grep -qF "pixel_std 1e-300 are not the statistics of pixels in [0, 1]" "$W/e" || fail "pixel_std 1e-300: $(cat "$W/e")"
echo "not json" >"$I9"
expect 1 "$I9: damaged: JSON" -- train $IMG --data-dir "$W/d9" --pe rope2d --steps 2 --out "$W/bad9"
[ ! -e "$W/bad9" ] || fail "a refused run left a directory"

# confusing messages made clear: an empty --init-from or --out, a variant's option without a
# value or given twice, --rope-scale without a method, --lengths on images, presets of qa
expect 2 "--init-from '': an empty path (give a run directory, or leave --init-from out)" -- train --init-from "" --steps 2
expect 2 "--out '': an empty path" -- train --steps 2 --out ""
expect 2 "--pe rope:init-from=: --init-from has no value (option=value)" -- compare --pe rope:init-from= --steps 2 --out "$W/v"
expect 2 "--pe rope:rope-base=500:rope-base=600: --rope-base is given twice" -- compare --pe rope:rope-base=500:rope-base=600 --steps 2 --out "$W/v"
expect 2 "--rope-scale 2 does nothing without a length extension" -- eval --model "$W/img-rope" --rope-scale 2
expect 2 "--lengths: task image is swept over image sides: give --resolutions" -- compare $IMG --pe rope2d --lengths 1x --steps 2 --out "$W/v"
expect 2 "--preset: task qa has no presets: it fine-tunes a text run" -- train --task qa --preset cpu --steps 2 --out "$W/v"
expect 2 "tensor patch_emb.weight is (16, 16) there and (16, 4) here (the patch embedding is sized by --patch: keep the source's --patch)" -- \
    train --init-from "$W/img-rope" --patch 2 --steps 2 --out "$W/v"
expect 2 "--seqpe-digits 1 in base 10 hold coordinates up to 9; a grid of 10 x 10 patches has coordinates 1 to 10" -- \
    train $IMG --pe seqpe --seqpe-digits 1 --image-side 40 --steps 2 --out "$W/v"
[ ! -e "$W/v" ] || fail "a refused compare left $W/v"
# a bf16 run on a machine without bf16 products (nor their emulation): a usage error that offers float32
unset PELAB_BF16_EMULATION
if ! "$P" --version | grep -q ", bf16,"; then
    "$P" train --task indirect --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 16 \
        --indirect-test-size 16 --eval-every 0 --steps 4 --save-every 2 --out "$W/b16" >/dev/null 2>"$W/e" || fail "train: $(cat "$W/e")"
    sed -i 's/"precision": "fp32"/"precision": "bf16"/' "$W/b16/config.json" # as a bf16 machine wrote it
    expect 2 "$W/b16 trains with --precision bf16, which this machine cannot run" -- train --resume "$W/b16" --steps 6
    grep -qF "resume it with --precision fp32 to go on in float32" "$W/e" || fail "no way offered: $(cat "$W/e")"
    "$P" train --resume "$W/b16" --steps 6 --precision fp32 >/dev/null 2>"$W/e" || fail "resume --precision fp32: $(cat "$W/e")"
fi
# a variant's runs are in directories named without ':' or '='
"$P" compare --task indirect --pe rope:rope-base=500 --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 \
    --indirect-val-size 16 --indirect-test-size 16 --eval-every 0 --steps 2 --seeds 1 --out "$W/cv" >"$W/o" 2>"$W/e" ||
    fail "compare a variant: $(cat "$W/e")"
[ -d "$W/cv/rope+rope-base-500-s1" ] || fail "the variant's run directory: $(ls "$W/cv")"

# 3. sample generates --tokens tokens when the prompt is longer than the window (T = 32)
install_sotu "$D"
TXT="--task text --dataset sotu --tokenizer byte --data-dir $D --d-model 16 --heads 2 --layers 1 --batch 4 --threads 1 --eval-every 0 --seq-len 32"
train $TXT --pe rope --steps 2 --lr 1e-3 --out "$W/txt"
for args in "--prompt 40 --tokens 3:3" ":200" "--prompt 1048576 --tokens 10:10" "--prompt 5 --tokens 7:7"; do
    want=${args##*:}
    for cache in on off; do
        "$P" sample --model "$W/txt" --count 1 ${args%:*} --cache $cache >"$W/o" 2>"$W/e" || fail "sample ${args%:*}: $(cat "$W/e")"
        grep -q "^--- model ($want tokens)$" "$W/o" || fail "sample ${args%:*} --cache $cache: $(grep '^---' "$W/o")"
    done
done

# sample on a terminal: the model's control bytes (ESC, CR, ...) escaped as \xHH; into a pipe, as
# they are (a 2-update byte model at temperature 1 draws nearly uniform bytes)
/usr/bin/python3 - "$P" "$W/txt" <<'PY' || fail "sample on a terminal"
import os, subprocess, sys, tty
args = [sys.argv[1], "sample", "--model", sys.argv[2], "--count", "2", "--prompt", "4", "--tokens", "600"]
master, slave = os.openpty()
tty.setraw(slave)  # no output processing: the bytes as pelab writes them
p = subprocess.Popen(args, stdout=slave, stderr=subprocess.DEVNULL)
os.close(slave)
out = b""
while True:
    try: chunk = os.read(master, 65536)
    except OSError: break
    if not chunk: break
    out += chunk
assert p.wait() == 0
bad = sorted({c for c in out if (c < 0x20 and c not in (9, 10)) or c == 0x7f})
assert not bad, "raw control bytes on the terminal: %r" % bad
assert b"\\x" in out, "no escaped byte in 1,200 drawn bytes"
piped = subprocess.run(args, capture_output=True).stdout
assert any((c < 0x20 and c not in (9, 10)) for c in piped), "no control byte in the piped output"
PY
echo "cli_surfaces: ok"
