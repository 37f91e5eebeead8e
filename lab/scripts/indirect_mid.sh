#!/usr/bin/env bash
# PoPE's headline at a scale where the task can be learned (make indirect-mid [ARMS="mechanism full"]):
# RoPE against PoPE on indirect indexing with heads 64 wide (D 256, 4 heads, 4 layers: 3.2M
# parameters), the paper's optimiser, seeds 1-2, one thread a run, two runs at a time:
#   results/indirect-mid-mechanism  preset mid-mechanism: shifts ±3..±5, one query, 30k updates
#   results/indirect-mid            preset mid: the paper's task (strings 20-40, shifts ±1..±15),
#                                   50k updates
# The products run in bf16 (--precision bf16: float32 accumulation, weights and optimiser in
# float32), measured twice as fast as float32 at this shape on an Intel Xeon with AMX (bench_train
# --config M, one thread: 6.3-6.8k against 3.1-3.2k tokens/s); PELAB_MID_PRECISION=fp32 chooses
# float32 (a CPU without AVX512-BF16, or one where `pelab train` says bf16 is slower).
# Each run validates every 1,000 updates; the record keeps those lines (RUN/log-val.jsonl, the
# learning curve). At 6k tokens/s a run: about 2.5 h a run of the mechanism arm and 4 h of the
# full task, two at a time (float32: 5 h and 8 h).
# The runs live in $PELAB_MID_RUNS (runs/indirect-mid) and checkpoint every 1,000 updates:
# an interrupted call continues them from their last checkpoint (finished ones are reused).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${PELAB_MID_RUNS:-runs/indirect-mid}
precision=${PELAB_MID_PRECISION:-bf16}
for arm in ${*:-mechanism full}; do
    case $arm in
        mechanism) table=indirect-mid-mechanism preset=mid-mechanism ;;
        full) table=indirect-mid preset=mid ;;
        *) echo "indirect_mid: no arm '$arm' (mechanism, full)" >&2; exit 2 ;;
    esac
    cmp=(./pelab compare --task indirect --preset "$preset" --pe rope,pope --precision "$precision" --jobs 2 --threads 2 --keep 1
         --out "$runs/$arm")
    # seed 1 of both encodings first, so that a comparison stands as soon as two runs finish;
    # the record's call then reuses them
    "${cmp[@]}" --seeds 1
    bash lab/scripts/record.sh "$table" "${cmp[@]}" --seeds 2
done
