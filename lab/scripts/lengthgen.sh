#!/usr/bin/env bash
# The length-generalisation records of docs/results/lengthgen.md (results/lengthgen-TASK): every
# encoding, and every one that reads positions with randomised positions too, on each algorithmic
# task at its cpu preset, three seeds, two runs at a time (make lengthgen TASKS="copy reverse";
# default all). Runs live in $PELAB_LENGTHGEN_RUNS (runs/lengthgen); finished ones are reused,
# so an interrupted sitting continues where it stopped. Each task takes 1-2 hours on two cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${PELAB_LENGTHGEN_RUNS:-runs/lengthgen}
tasks=${*:-copy reverse addition parity stack-manipulation duplicate-string sort sum poly lego binary-addition selective-copy}
pes=nope,learned,sinusoidal,rope,pope,alibi,t5,fire,xpos,seqpe,fox,cope
for pe in learned sinusoidal rope pope alibi t5 fire xpos; do pes=$pes,$pe:random-positions=256; done
for task in $tasks; do
    bash lab/scripts/record.sh "lengthgen-$task" ./pelab compare --task "$task" --preset cpu --pe "$pes" \
        --seeds 3 --jobs 2 --threads 2 --out "$runs/$task"
done
