#!/usr/bin/env bash
# PoPE's headline at a scale where the task can be learned (make indirect-mid [ARMS="mechanism full"]):
# RoPE against PoPE on indirect indexing with heads 64 wide (D 256, 4 heads, 4 layers: 3.2M
# parameters), the paper's optimiser, seeds 1-2, one thread a run, two runs at a time:
#   results/indirect-mid-mechanism  preset mid-mechanism: shifts ±3..±5, one query, 30k updates
#   results/indirect-mid            preset mid: the paper's task (strings 20-40, shifts ±1..±15),
#                                   50k updates
#   results/indirect-mid-lr-probe   (arm lr-probe, not run by default) the mechanism arm at 5× the
#                                   paper's learning rate, 1e-3 cosine to 1e-4 after 400 warm-up
#                                   updates, 10k updates, seed 1 only: whether this model can leave
#                                   chance at all on a shorter budget (about 1.5 h of both cores);
#                                   its runs keep every checkpoint, so that `analyze probe` reads
#                                   the heads at each 1,000 updates
# The products run in bf16 (--precision bf16: float32 accumulation, weights and optimiser in
# float32), measured twice as fast as float32 at this shape on an Intel Xeon with AMX (bench_train
# --config M, one thread: 6.3-6.8k against 3.1-3.2k tokens/s); PELAB_MID_PRECISION=fp32 chooses
# float32 (a CPU without AVX512-BF16, or one where `pelab train` says bf16 is slower).
# Each run validates every 1,000 updates; the record keeps those lines (RUN/log-val.jsonl, the
# learning curve). At 6k tokens/s a run: about 2.5 h a run of the mechanism arm and 4 h of the
# full task, two at a time (float32: 5 h and 8 h).
# Where an encoding's two seeds split between solved and not, a third is trained and the record
# made again. Each run's final weights are read by `pelab analyze freq` and `analyze probe`, each
# recorded as results/TABLE-freq-RUN and TABLE-probe-RUN; each arm's learning curves are drawn as
# docs/figures/TABLE-curves.png (validation accuracy) and TABLE-loss.png (validation loss).
# The runs live in $PELAB_MID_RUNS (runs/indirect-mid) and checkpoint every 1,000 updates:
# an interrupted call continues them from their last checkpoint (finished ones are reused).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${PELAB_MID_RUNS:-runs/indirect-mid}
precision=${PELAB_MID_PRECISION:-bf16}
for arm in ${*:-mechanism full}; do
    seeds=2 keep=1 optimiser=()
    case $arm in
        mechanism) table=indirect-mid-mechanism preset=mid-mechanism ;;
        full) table=indirect-mid preset=mid ;;
        lr-probe) table=indirect-mid-lr-probe preset=mid-mechanism seeds=1 keep=10
                  optimiser=(--lr 1e-3 --min-lr 1e-4 --warmup 400 --steps 10000) ;;
        *) echo "indirect_mid: no arm '$arm' (mechanism, full, lr-probe)" >&2; exit 2 ;;
    esac
    cmp=(./pelab compare --task indirect --preset "$preset" --pe rope,pope --precision "$precision" --jobs 2 --threads 2 --keep "$keep"
         "${optimiser[@]}" --out "$runs/$arm")
    # seed 1 of both encodings first, so that a comparison stands as soon as two runs finish;
    # the record's call then reuses them
    [ "$seeds" -eq 1 ] || "${cmp[@]}" --seeds 1
    bash lab/scripts/record.sh "$table" "${cmp[@]}" --seeds "$seeds"
    # a third seed where an encoding's two split between solved (test accuracy >= 90 %, as
    # tables.py's ?solved) and not; the record is then made again with the first two reused
    split=
    [ "$seeds" -eq 1 ] || split=$(/usr/bin/python3 - "$runs/$arm" <<'PY'
import json, sys
solved = lambda pe, s: json.load(open("%s/%s-s%d/summary.json" % (sys.argv[1], pe, s)))["test_acc"] >= 0.9
print(" ".join(pe for pe in ("rope", "pope") if solved(pe, 1) != solved(pe, 2)))
PY
)
    if [ -n "$split" ]; then
        echo "indirect_mid: $arm: the two seeds of $split split between solved and not: a third seed"
        bash lab/scripts/record.sh "$table" "${cmp[@]}" --seeds 3
    fi
    # what each run's heads learned, on its final weights: frequency usage and the probe
    for run in "$runs/$arm"/{rope,pope}-s[0-9]; do
        for a in freq probe; do
            bash lab/scripts/record.sh "$table-$a-$(basename "$run")" ./pelab analyze $a --model "$run" \
                --threads 2 --batches 8 --out "$runs/$arm/$a-$(basename "$run").csv"
        done
    done
    # the learning curves (validation every 1,000 updates) of docs/results/indirect.md
    /usr/bin/python3 lab/scripts/curves.py "${PELAB_RESULTS:-results}/$table" >"$runs/$arm/curves.csv"
    ./pelab plot lines --csv "$runs/$arm/curves.csv" --x step --y val_acc --group run \
        --title "indirect indexing, $preset preset: validation accuracy" --ylabel "validation accuracy" \
        --png "docs/figures/$table-curves.png"
    ./pelab plot lines --csv "$runs/$arm/curves.csv" --x step --y val_loss --group run \
        --title "indirect indexing, $preset preset: validation loss" --ylabel "validation loss" \
        --png "docs/figures/$table-loss.png"
done
