#!/usr/bin/env bash
# What a hostile user tried, each kept as a repro (bad input is one line before any work and loses
# nothing; what was fine works):
#  - a damaged split that training reads only at its end (an image test label out of range) stops
#    a new run and a resumed one before their first update, naming the file and the image, and
#    writes nothing;
#  - PELAB_SIMD and PELAB_SUBNORMALS hold a name the kernels know (in any case: AVX2 caps the
#    level at avx2), and summary.json records the SIMD level and the subnormal mode that ran;
#  - compare --jobs stopped by SIGTERM counts no stopped run as done; a second compare on one --out
#    waits for the run the first trains (naming its process) and reads it; a resume meanwhile
#    names that process;
#  - an --out that is a symbolic link to nothing is named as such (not "File exists");
#  - a CSV for plot lines may begin with a UTF-8 byte order mark.
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

# ---- the kernels' settings: a value they do not know is refused; the run records what ran ----
PELAB_SIMD=bogus expect 2 "PELAB_SIMD=bogus: expected portable, avx2 or avx512 (in any case)" -- train $TINY --out "$W/k"
PELAB_SUBNORMALS=xyz expect 2 "PELAB_SUBNORMALS=xyz: expected flush or keep (in any case)" -- train $TINY --out "$W/k"
[ ! -e "$W/k" ] || fail "a run with a bad kernel setting was written"
level() { sed -n 's/.*, \([a-z0-9]*\) kernels, subnormals \([a-z]*\),.*/\1 \2/p'; } # of pelab --version
kernels() { json_text "$1/summary.json" '"%s %s" % (j["simd"], j["subnormals"])'; }
train $TINY --out "$W/k"
[ "$(kernels "$W/k")" = "$("$P" --version | level)" ] || fail "summary.json's kernels: $(cat "$W/k/summary.json")"
# AVX2, in any case, caps the level at avx2 (on a CPU that runs it, whatever more it runs)
want=$(PELAB_SIMD=avx2 "$P" --version | level)
grep -qw avx2 /proc/cpuinfo && [ "${want% *}" != avx2 ] && fail "PELAB_SIMD=avx2 runs ${want% *} on an AVX2 CPU"
PELAB_SIMD=AVX2 PELAB_SUBNORMALS=Keep train $TINY --out "$W/avx2"
[ "$(kernels "$W/avx2")" = "${want% *} kept" ] || fail "PELAB_SIMD=AVX2 PELAB_SUBNORMALS=Keep: $(cat "$W/avx2/summary.json")"

# ---- compare's messages ----
# SIGTERM to compare --jobs 2 stops both runs: neither is counted as done
"$P" compare $TINY --steps 1000000 --pe rope,nope --seeds 1 --jobs 2 --threads 2 --out "$W/term" >/dev/null 2>"$W/e" &
pid=$!
for _ in $(seq 300); do [ "$(grep -c '  training ' "$W/e")" -ge 2 ] && break; sleep 0.1; done
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 143 ] && [ "$(grep -c '^compare: 0 of 2 runs done, [12] stopped in [0-9hms]*$' "$W/e")" -eq 2 ] &&
    ! grep -q '^compare: [1-9]' "$W/e" || fail "compare after SIGTERM: exit $rc, $(cat "$W/e")"
# two compares on one --out: the second waits for the run the first is training, with a line
# naming it, then reads it rather than stopping; a resume by hand meanwhile names the process
C="compare $TINY --steps 1500 --eval-every 0 --pe rope,nope --seeds 1 --out $W/two"
"$P" $C >"$W/a.out" 2>"$W/a.err" &
a=$!
for _ in $(seq 300); do grep -q '^\[rope s1\]  training' "$W/a.err" && break; sleep 0.05; done
expect 1 "$W/two/rope-s1: process $a is training this run" -- train --resume "$W/two/rope-s1"
"$P" $C >"$W/b.out" 2>"$W/b.err"
rb=$?
wait $a
ra=$?
[ $ra -eq 0 ] && [ $rb -eq 0 ] || fail "two compares on one --out: exit $ra and $rb: $(tail -3 "$W/a.err" "$W/b.err")"
grep -q "^\[rope s1\]  waits for process $a, which is training $W/two/rope-s1$" "$W/b.err" &&
    grep -q "^\[rope s1\]  finished by process $a: $W/two/rope-s1$" "$W/b.err" ||
    fail "the second compare did not wait for the first: $(grep -v ' step ' "$W/b.err")"
diff <(grep '^|' "$W/a.out") <(grep '^|' "$W/b.out") >/dev/null || fail "two compares, two tables: $(cat "$W/a.out" "$W/b.out")"
for r in rope-s1 nope-s1; do # each trained once, from step 1 to the last
    /usr/bin/python3 -c '
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
assert steps == sorted(set(steps)) and steps[-1] == 1500, steps' "$W/two/$r/log.jsonl" || fail "$r trained twice"
done

# ---- an --out that is a symbolic link to nothing: named as such, and nothing made ----
ln -s "$W/gone" "$W/dangling"
expect 1 "$W/dangling is a symbolic link to a missing '$W/gone'" -- train $TINY --out "$W/dangling"
expect 1 "$W/dangling/c: $W/dangling is a symbolic link to a missing '$W/gone'" -- \
    compare $TINY --pe rope --seeds 1 --out "$W/dangling/c"
[ ! -e "$W/gone" ] || fail "the link's target was made"

# ---- a CSV that begins with a UTF-8 byte order mark: the mark is no part of the first column ----
if "$P" --version | grep -q ", cairo)"; then
    printf '\xef\xbb\xbflength,ppl\n64,8.2\n128,12.2\n' >"$W/bom.csv"
    "$P" plot lines --csv "$W/bom.csv" --x length --y ppl --png "$W/bom.png" >/dev/null 2>"$W/e" ||
        fail "plot lines of a CSV with a byte order mark: $(cat "$W/e")"
    printf '\xef\xbb\xbf' >"$W/bom-only.csv"
    expect 1 "$W/bom-only.csv: empty: a CSV file needs a header line" -- plot lines --csv "$W/bom-only.csv" --x length \
        --y ppl --png "$W/bom.png"
fi

echo "cli_refusals: ok"
