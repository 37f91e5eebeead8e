#!/usr/bin/env bash
# SeqPE's regulariser ablation (docs/results/seqpe.md), the text half of the paper's Table IV,
# under both regulariser profiles (make seqpe-table4 [PROFILES="paper authors"]). For each profile:
#   results/seqpe-table4-PROFILE      the flat configuration (attn-bias, L_max 10T, half
#                                     the windows shifted) with α, β ∈ {0, 0.1}; the authors'
#                                     profile also with β = 1.6, which gives its L_OOD about the
#                                     paper's strength (theirs divides by m·m where the paper's
#                                     divides by m, and adds the reverse KL: about m/2 = 16 times
#                                     weaker at m = 32); perplexity at 1T..10T
#   results/seqpe-table4-PROFILE-far  its β-only runs again (trained once, reused) at 16T and 20T,
#                                     beyond every position training saw (L_max = 10T)
# and, with PROFILES=arms,
#   results/seqpe-table4-arms         the arm the two profiles rank apart, L_delta alone (α 0.1,
#                                     β 0), on the paper's profile with one of the authors'
#                                     differences at a time: the local window placed anywhere, the
#                                     hard global edits, the encoder's final norm, and the rest
#                                     (global share 0.4, shifts per step from a pool of 320)
# and, with PROFILES=lmax,
#   results/seqpe-lmax39              both regularisers (α = β = 0.1) under each profile at the
#                                     paper's ratio of L_max to T (20,000 / 512 ≈ 39: L_max 4,992 at
#                                     T 128) with 10 % of the windows shifted (the paper's App. A.5),
#                                     perplexity at 1T..20T
# Three seeds at the demo preset, two runs at a time: training takes 6-9 minutes a run, a sweep
# to 20T ten more. Runs live in $PELAB_SEQPE_RUNS (runs/seqpe-table4); finished ones are reused.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${PELAB_SEQPE_RUNS:-runs/seqpe-table4}
S=seqpe:seqpe-mode=attn-bias:seqpe-max-pos=1280:seqpe-shift-prob=0.5
for profile in ${*:-paper authors}; do
    if [ "$profile" = lmax ]; then
        L=seqpe:seqpe-mode=attn-bias:seqpe-max-pos=4992:seqpe-shift-prob=0.1
        bash lab/scripts/record.sh seqpe-lmax39 ./pelab compare --task text --preset demo \
            --pe "$L:seqpe-reg-profile=paper,$L:seqpe-reg-profile=authors" \
            --seeds 3 --jobs 2 --threads 1 --lengths 1x,2x,4x,8x,10x,16x,20x --out "$runs/lmax"
        continue
    fi
    if [ "$profile" = arms ]; then
        P=$S:seqpe-reg-profile=paper:seqpe-beta=0
        pes=$P:seqpe-local-window=anywhere,$P:seqpe-global-edits=authors,$P:seqpe-final-norm=on
        pes=$pes,$P:seqpe-global-frac=0.4:seqpe-shift-unit=step:seqpe-shift-pool=320
        bash lab/scripts/record.sh seqpe-table4-arms ./pelab compare --task text --preset demo --pe "$pes" \
            --seeds 3 --jobs 2 --threads 1 --lengths 1x,2x,4x,8x,10x --out "$runs/arms"
        continue
    fi
    P=$S:seqpe-reg-profile=$profile
    pes=$P,$P:seqpe-alpha=0,$P:seqpe-beta=0,$P:seqpe-alpha=0:seqpe-beta=0
    [ "$profile" = authors ] && pes=$pes,$P:seqpe-alpha=0:seqpe-beta=1.6
    bash lab/scripts/record.sh "seqpe-table4-$profile" ./pelab compare --task text --preset demo --pe "$pes" \
        --seeds 3 --jobs 2 --threads 1 --lengths 1x,2x,4x,8x,10x --out "$runs/$profile"
    bash lab/scripts/record.sh "seqpe-table4-$profile-far" ./pelab compare --task text --preset demo \
        --pe "$P:seqpe-alpha=0" --seeds 3 --jobs 2 --threads 1 --lengths 1x,10x,16x,20x --out "$runs/$profile"
done
