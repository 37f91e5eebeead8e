#!/usr/bin/env bash
# docs/results/cpu-presets.md's tables, 3 seeds, recorded (make cpu-tables [TASKS="music text"]):
#   results/cpu-TASK   RoPE, PoPE and NoPE at the task's cpu preset, seeds 1-3, one thread a run,
#                      two runs at a time: test accuracy for indirect; for music (JSB chorales),
#                      dna (human chromosome X) and text (sotu bytes) the test perplexity and the
#                      perplexity at 1x..10x on the long documents (those of the lengths they hold)
# About half an hour of both cores for indirect, an hour for each task of documents. Runs live in
# $PELAB_CPU_RUNS (runs/cpu-tables); finished ones are reused and interrupted ones continue from
# their last checkpoint.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${PELAB_CPU_RUNS:-runs/cpu-tables}
for task in ${*:-indirect music dna text}; do
    case $task in
        indirect | music | dna | text) ;; # text: sotu, the task's default dataset
        *) echo "cpu_tables: no cpu-preset table for task '$task' (indirect, music, dna, text)" >&2; exit 2 ;;
    esac
    bash lab/scripts/record.sh "cpu-$task" ./pelab compare --task "$task" --preset cpu \
        --pe rope,pope,nope --seeds 3 --jobs 2 --threads 1 --out "$runs/$task"
done
