#!/usr/bin/env bash
# The length-generalisation records of docs/results/lengthgen.md (results/lengthgen-TASK): every
# encoding, and every one that reads positions with randomised positions too, on each algorithmic
# task at its cpu preset, two runs at a time (make lengthgen TASKS="copy reverse"; default all).
# Each encoding trains at its own learning rate: compare --tune trains it at each rate of
# PELAB_LENGTHGEN_TUNE on a tuning seed and keeps the one of least validation loss (the trained
# sizes only), then trains PELAB_LENGTHGEN_SEEDS evaluation seeds (default 5) at that rate. Runs
# live in $PELAB_LENGTHGEN_RUNS (runs/lengthgen); finished ones are reused, so an interrupted
# sitting continues where it stopped. A task is 160 runs of one to two minutes of one core: about
# 1.5 hours on two cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${PELAB_LENGTHGEN_RUNS:-runs/lengthgen}
tune=${PELAB_LENGTHGEN_TUNE:-lr=1e-3,3e-3,1e-2}
seeds=${PELAB_LENGTHGEN_SEEDS:-5}
tasks=${*:-copy reverse addition parity stack-manipulation duplicate-string sort sum poly lego binary-addition selective-copy}
pes=nope,learned,sinusoidal,rope,pope,alibi,t5,fire,xpos,seqpe,fox,cope
for pe in learned sinusoidal rope pope alibi t5 fire xpos; do pes=$pes,$pe:random-positions=256; done
for task in $tasks; do
    bash lab/scripts/record.sh "lengthgen-$task" ./pelab compare --task "$task" --preset cpu --pe "$pes" \
        --tune "$tune" --seeds "$seeds" --jobs 2 --threads 2 --out "$runs/$task"
done
