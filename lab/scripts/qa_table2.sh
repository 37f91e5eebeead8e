#!/usr/bin/env bash
# The long-context QA of docs/results/qa.md (the SeqPE paper's Table II at CPU scale), 3 seeds,
# recorded (make qa-table2):
#   results/qa-pretrain     the pre-trained models: make demo's text preset (Moby Dick bytes,
#                           T 128, 600 updates) for NoPE, RoPE, ALiBi, PoPE and SeqPE (attn-bias),
#                           SeqPE under both regulariser profiles; perplexity at 1T and 2T
#   results/qa-table2       each fine-tuned for 500 updates on the qa task's passkeys at 256
#                           tokens (2T, as the paper's 512 -> 1,024), seed s from seed s's
#                           pre-trained run; answer-span perplexity and exact match at 1x..8x
#   results/qa-seqpe-2000   SeqPE under the authors' profile fine-tuned for 2,000 updates (4 times
#                           as many), three runs at a time
# One thread a run: about 40 minutes of pre-training, 70 of fine-tuning and 90 for the longer
# SeqPE fine-tuning. Runs live in $PELAB_QA_RUNS (runs/qa-table2); finished ones
# are reused and interrupted ones continue from their last checkpoint.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${PELAB_QA_RUNS:-runs/qa-table2}
A=seqpe:seqpe-reg-profile=authors
bash lab/scripts/record.sh qa-pretrain ./pelab compare --task text --preset demo \
    --pe nope,rope,alibi,pope,seqpe,$A --seeds 3 --jobs 2 --threads 1 --lengths 1x,2x --out "$runs/pre"

# a run's directory name in a compare: its entry with ':' as '+' and '=' as '-' (lab/compare_variant.c)
from() { echo "$1:init-from=$runs/pre/$(sed 's/:/+/g; s/=/-/g' <<<"$1")-s{seed}"; }
FT=(./pelab compare --task qa --seq-len 256 --qa-digits 2 --batch 16 --lr 2e-3 --warmup 30
    --qa-val-size 64 --qa-test-size 64 --eval-every 0 --seeds 3 --threads 1 --lengths 1x,2x,4x,8x)
pes=$(from nope),$(from rope),$(from alibi),$(from pope),$(from seqpe),$(from $A)
bash lab/scripts/record.sh qa-table2 "${FT[@]}" --jobs 2 --steps 500 --pe "$pes" --out "$runs/ft500"
bash lab/scripts/record.sh qa-seqpe-2000 "${FT[@]}" --jobs 3 --steps 2000 --pe "$(from $A)" --out "$runs/ft2000"
