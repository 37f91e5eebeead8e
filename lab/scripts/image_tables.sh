#!/usr/bin/env bash
# The SeqPE paper's image tables at a preset, 3 seeds, recorded
# (make image-tables [PRESET=cpu-aug] [TABLES="3 5 4"]):
#   results/image-table3-PRESET  Table III: every 2-D encoding (rope2d also evaluated with its
#                                coordinates rescaled, rope2d-extend=interpolate; learned2d is
#                                interpolated), test accuracy at the paper's seven multiples
#                                28 … 84 (its 224 … 672)
#   results/image-table5-PRESET  Table V: SeqPE's three attention modes at 28 … 56
#   results/image-table4-PRESET  Table IV's image half: SeqPE with and without each regulariser
#                                at 28 … 56
# One out dir for the three: the preset's SeqPE (attn-mul, α = β = 0.1) is trained once and
# serves every table (Tables V and IV read its sweep at their four sides from Table III's: a run's
# sweep is kept by side). Training takes 10-20 minutes a run, the seven-side sweep about ten more,
# two runs at a time: about 3 hours for Table III's 24 runs on two cores, 2 more for the 15 of
# Tables V and IV. Runs live in
# $PELAB_IMAGE_RUNS (runs/image-tables-PRESET); finished ones are reused and interrupted ones
# continue from their last checkpoint (every 500 updates).
set -euo pipefail
cd "$(dirname "$0")/../.."
preset=${1:-cpu-aug}
shift || true
tables=${*:-3 5 4}
runs=${PELAB_IMAGE_RUNS:-runs/image-tables-$preset}
C=(./pelab compare --task image --preset "$preset" --seeds 3 --jobs 2 --threads 1 --out "$runs")
for t in $tables; do
    case $t in
        3) bash lab/scripts/record.sh "image-table3-$preset" "${C[@]}" --resolutions 28,40,48,56,64,80,84 \
               --pe nope,sinusoidal2d,learned2d,rope2d,rope2d:rope2d-extend=interpolate,rope2d-mixed,pope2d,seqpe ;;
        5) bash lab/scripts/record.sh "image-table5-$preset" "${C[@]}" --resolutions 28,40,48,56 \
               --pe seqpe:seqpe-mode=attn-add,seqpe:seqpe-mode=attn-bias,seqpe ;;
        4) bash lab/scripts/record.sh "image-table4-$preset" "${C[@]}" --resolutions 28,40,48,56 \
               --pe seqpe:seqpe-alpha=0:seqpe-beta=0,seqpe:seqpe-beta=0,seqpe:seqpe-alpha=0,seqpe ;;
        *) echo "image_tables: no image table '$t' (3, 5 or 4: the SeqPE paper's Tables III, V, IV)" >&2; exit 2 ;;
    esac
done
