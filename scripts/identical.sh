#!/usr/bin/env bash
# Fingerprints of short runs of every encoding, to show that a change of the code left the
# arithmetic alone (make identical BASE=REV: this tree against revision REV, built apart).
#   bash scripts/identical.sh [PELAB_BIN]   one line a case: its name, then SHA-256 prefixes of
#                                           the weights, of summary.json without its wall-clock
#                                           fields, of an evaluation and of a sample
# Cases: each registered encoding (pelab help encodings) trained on copy (1-D) or on made-up
# 8 × 8 images (2-D), plus the paths a variant takes apart: RoPE's fine-tune scaling, random
# positions, the reference attention, dropout, bf16 products where the CPU has them, a resume,
# SeqPE's modes, FIRE-S. One thread, so the products' order is fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PELAB_BIN=$(realpath "${1:-pelab}")
. tests/lib/cli.sh # P, W, install_images
D=$W/data
install_images "$D"
install_sotu "$D"
ALGO="--task copy --d-model 32 --heads 2 --layers 2 --batch 8 --threads 1 --steps 24 --warmup 4
      --eval-every 12 --eval-batches 2 --algo-train-max 6 --algo-test-per-size 4 --save-every 12"
IMG="--task image --image-side 8 --patch 4 --d-model 16 --heads 2 --layers 2 --batch 8 --threads 1
     --steps 12 --warmup 2 --eval-every 6 --eval-batches 1 --data-dir $D"

h() { sha256sum | cut -c1-16; }
weights() { /usr/bin/python3 -c '
import json, struct, sys, hashlib
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n]); head.pop("__metadata__", None)
m = hashlib.sha256()
for k in sorted(head):
    o = head[k]["data_offsets"]; m.update(k.encode()); m.update(b[8 + n + o[0]:8 + n + o[1]])
print(m.hexdigest()[:16])' "$1"; }
summary() { /usr/bin/python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({k: v for k, v in s.items() if k not in ("wall_s", "train_s", "tokens_per_s")}, sort_keys=True))' "$1" | h; }

# evaluation RUN [ARGS]: RUN's evaluation (JSON) as the same bits give it anywhere: the run named
# from its own directory, not by the temporary path each invocation makes, and no wall-clock times
evaluation() { (cd "$W/runs" && "$P" eval --model "$@" --json 2>/dev/null) | sed 's/"seconds": [0-9.e+-]*//g'; }

# case NAME -- TRAIN ARGS: trains NAME, evaluates it on its test split and samples from it
case_() {
    local name=$1; shift 2
    local R=$W/runs/$name
    "$P" train "$@" --out "$R" >/dev/null 2>"$W/err" || fail "$name: train failed: $(tail -2 "$W/err")"
    local e s
    e=$(evaluation "$name" | h)
    s=$("$P" sample --model "$R" --count 2 2>/dev/null | h)
    echo "$name $(weights "$R/model.safetensors") $(summary "$R/summary.json") $e $s"
}

for pe in $("$P" help encodings 2>/dev/null | awk 'NR > 1 && $3 ~ /1-D/ {print $1}'); do
    case_ "$pe" -- $ALGO --pe "$pe" $([ "$pe" = learned ] && echo --ape-max-len 32)
done
for pe in $("$P" help encodings 2>/dev/null | awk 'NR > 1 && $3 ~ /2-D/ {print $1}'); do
    case_ "image-$pe" -- $IMG --pe "$pe"
done
case_ rope-ref -- $ALGO --pe rope --attention ref
case_ pope-dropout -- $ALGO --pe pope --dropout 0.1
case_ rope-random -- $ALGO --pe rope --random-positions 64
case_ fire-random -- $ALGO --pe fire --random-positions 64
case_ pope-random -- $ALGO --pe pope --random-positions 64
case_ rope-resonance -- $ALGO --pe rope --rope-resonance on --rope-fraction 0.5
case_ xpos-ref -- $ALGO --pe xpos --attention ref
case_ cope-shared -- $ALGO --pe cope --cope-max-pos 8 --cope-table shared
case_ fox-bias -- $ALGO --pe fox --fox-gate bias --fox-bias-init 2
for mode in attn-add attn-mul attn-bias; do
    case_ "seqpe-$mode" -- $ALGO --pe seqpe --seqpe-mode $mode
done
case_ rope-yarn-finetune -- --init-from "$W/runs/rope" --algo-train-max 9 --rope-scaling yarn --rope-scale 2 \
    --batch 8 --steps 6 --threads 1 --eval-every 0 --eval-batches 1
if "$P" --help 2>&1 | grep -q '^build:.*bf16 (--precision bf16'; then
    case_ pope-bf16 -- $ALGO --pe pope --precision bf16
    case_ image-pope2d-bf16 -- $IMG --pe pope2d --precision bf16
else
    echo "(no bf16 products on this CPU: the bf16 cases are skipped)" >&2
fi
# a run stopped at its checkpoint and resumed: the same weights as rope's uninterrupted run
"$P" train $ALGO --pe rope --steps 12 --decay-steps 24 --out "$W/runs/resumed" >/dev/null 2>&1
"$P" train --resume "$W/runs/resumed" --steps 24 >/dev/null 2>&1
echo "rope-resumed $(weights "$W/runs/resumed/model.safetensors")"
# text, and its sweep of lengths beyond training
case_ text-pope -- --task text --dataset sotu --tokenizer byte --data-dir "$D" --seq-len 32 --pe pope --d-model 32 --heads 2 \
    --layers 2 --batch 4 --threads 1 --steps 12 --eval-every 0 --eval-batches 1
echo "text-pope-lengths $(evaluation text-pope --lengths 1x,2x | h)"
