#!/usr/bin/env bash
# Input that must be refused in one line, before any work, losing nothing:
#  - a damaged split that training reads only at its end (an image test label out of range) stops
#    a new run and a resumed one before their first update, naming the file and the image, and
#    writes nothing;
set -u
. "$(dirname "$0")/lib/cli.sh"
TINY="--task indirect --d-model 32 --heads 2 --layers 1 --batch 4 --threads 1 --indirect-val-size 32
      --indirect-test-size 32 --steps 4"

# ---- a damaged test split, found before training ----
D=$W/data
install_images "$D"
IMG="--task image --data-dir $D --image-side 8 --patch 4 --d-model 16 --heads 2 --layers 1 --batch 8 --threads 1
     --eval-every 0 --steps 2 --pe rope2d"
train $IMG --out "$W/done"
sums() { (cd "$1" && find . -type f | sort | xargs md5sum); }
sums "$W/done" >"$W/before"
labels=$D/sources/fashion-mnist/t10k-labels-idx1-ubyte
printf '\310' | dd of="$labels" bs=1 seek=10 conv=notrunc status=none # image 2's label: 200
expect 1 "$labels: label 200 of image 2 is not a class 0..9" -- train $IMG --out "$W/img"
[ ! -e "$W/img" ] || fail "a run with a damaged test split was written: $(ls -R "$W/img")"
expect 1 "pelab: $labels: label 200 of image 2 is not a class 0..9" -- train --resume "$W/done" --steps 4
sums "$W/done" | cmp -s - "$W/before" || fail "a resume refused for a damaged test split changed the run"

echo "cli_refusals: ok"
