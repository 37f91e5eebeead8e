#!/usr/bin/env bash
# PoPE's headline at a scale where the task can be learned (make indirect-mid [ARMS="mechanism full"]):
# RoPE against PoPE on indirect indexing with heads 64 wide (D 256, 4 heads, 4 layers: 3.2M
# parameters), the paper's optimiser, seeds 1-2, one thread a run, two runs at a time:
#   results/indirect-mid-mechanism  preset mid-mechanism: shifts ±3..±5, one query, 30k updates
#   results/indirect-mid            preset mid: the paper's task (strings 20-40, shifts ±1..±15),
#                                   50k updates
# Each run validates every 1,000 updates; the record keeps those lines (RUN/log-val.jsonl, the
# learning curve). Measured at the mid shape: about 4k tokens/s a run on one thread of an Intel
# Xeon (AMX), so about 7 h a run of the mechanism arm and 11 h of the full task, two at a time.
# The runs live in $PELAB_MID_RUNS (runs/indirect-mid) and checkpoint every 1,000 updates:
# an interrupted call continues them from their last checkpoint (finished ones are reused).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${PELAB_MID_RUNS:-runs/indirect-mid}
for arm in ${*:-mechanism full}; do
    case $arm in
        mechanism) table=indirect-mid-mechanism preset=mid-mechanism ;;
        full) table=indirect-mid preset=mid ;;
        *) echo "indirect_mid: no arm '$arm' (mechanism, full)" >&2; exit 2 ;;
    esac
    cmp=(./pelab compare --task indirect --preset "$preset" --pe rope,pope --jobs 2 --threads 2 --keep 1
         --out "$runs/$arm")
    # seed 1 of both encodings first, so that a comparison stands as soon as two runs finish;
    # the record's call then reuses them
    "${cmp[@]}" --seeds 1
    bash scripts/record.sh "$table" "${cmp[@]}" --seeds 2
done
