#!/usr/bin/env bash
# make demo: what pelab is for, in minutes. Trains RoPE, PoPE, ALiBi and NoPE byte-level language
# models on Moby Dick at the text task's demo preset (two runs at a time), then evaluates each at
# 1x to 10x its training length (128 bytes) and prints the perplexity table; draws the curves
# into OUT/extrapolation.png. A second run reuses the finished runs and prints the table at once.
#
#   bash lab/scripts/demo.sh            # after `make setup` and `make pelab`; `make demo` does all three
#   DEMO_OUT=DIR DEMO_PE=rope,pope bash lab/scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${DEMO_OUT:-runs/demo}
pe=${DEMO_PE:-rope,pope,alibi,nope}

./pelab data install moby-dick >/dev/null || { echo "demo: the moby-dick dataset could not be installed (above)" >&2; exit 1; }

start=$SECONDS
./pelab compare --task text --preset demo --pe "$pe" --seeds 1 --jobs 2 --lengths 1x,2x,4x,8x,10x \
    --out "$out"

png="$out/extrapolation.png"
if ./pelab plot lines --csv "$out/sweep.csv" --x length --y ppl_mean --group pe --logx \
    --title "Trained on 128 bytes of context, evaluated at 1x-10x (Moby Dick)" \
    --xlabel "context length (bytes)" --ylabel "perplexity per byte" \
    --png "$png" 2>"$out/plot.err"; then
    echo "figure: $png"
else
    echo "notice: no figure: $(tail -n 1 "$out/plot.err")" >&2
fi
rm -f "$out/plot.err"
echo "demo: $((SECONDS - start)) s; the runs, their logs and models are in $out (pelab eval --model $out/pope-s1 ...)"
