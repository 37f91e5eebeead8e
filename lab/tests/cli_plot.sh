#!/usr/bin/env bash
# PNG figures (cairo): analyze freq's heatmaps, analyze bias's per-layer line plots (a BIAS
# encoding and PoPE's δ) and plot lines of a sweep-like CSV are valid PNG files (signature, chunk
# CRCs, IHDR size as asked, the pixel data inflating to height rows of width pixels, more than a
# few colours); a failed figure leaves neither it nor the CSV behind and keeps an older file;
# bad CSV input is a one-line error naming the file and line or the columns there are.
# Without cairo: --png and plot are one-line usage errors naming libcairo2-dev; the test skips.
set -u
. "$(dirname "$0")/../../tests/lib/cli.sh"
TINY="--d-model 32 --heads 4 --layers 3 --batch 16 --threads 1 --indirect-val-size 32 --indirect-test-size 32"


train_tiny() { # name pe [options...]
    local name=$1; shift
    "$P" train --task indirect $TINY --steps 3 --warmup 1 --eval-every 0 --out "$W/$name" --pe "$@" \
        >/dev/null 2>"$W/err" || fail "train --pe $*: exit $?: $(tail -2 "$W/err")"
}

printf 'pe,length,nll,ppl\nrope,64,2.1,8.2\nrope,128,2.5,12.2\nrope,256,3.9,49.4\npope,64,2.0,7.4\npope,256,2.3,9.9\npope,128,2.1,8.2\n' >"$W/sweep.csv"

if ! "$P" --version | grep -q ", cairo)"; then
    train_tiny pope pope
    expect 2 "--png: this pelab was built without cairo" -- analyze freq --model "$W/pope" --png "$W/f.png"
    grep -qF "install libcairo2-dev" "$W/err" || fail "the message does not name libcairo2-dev"
    expect 2 "built without cairo" -- plot lines --csv "$W/sweep.csv" --x length --y ppl --png "$W/s.png"
    [ ! -e "$W/f.png" ] && [ ! -e "$W/s.png" ] || fail "a PNG was written without cairo"
    echo "skip: pelab was built without cairo (install libcairo2-dev, e.g. make deps, and rebuild)"
    exit 77
fi

# png FILE WIDTH HEIGHT: a valid PNG of that size that is not blank.
png() {
    /usr/bin/python3 - "$1" "$2" "$3" <<'PY' || fail "$1 is not a valid ${2}x$3 PNG"
import struct, sys, zlib
path, W, H = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
b = open(path, "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", "signature"
i, chunks = 8, []
while i < len(b):
    n, kind = struct.unpack(">I4s", b[i:i + 8])
    data = b[i + 8:i + 8 + n]
    assert struct.unpack(">I", b[i + 8 + n:i + 12 + n])[0] == zlib.crc32(kind + data), "CRC of " + str(kind)
    chunks.append((kind, data))
    i += 12 + n
assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND", [c[0] for c in chunks]
w, h, depth, ctype = struct.unpack(">IIBB", chunks[0][1][:10])
assert (w, h) == (W, H), (w, h)
px = {2: 3, 6: 4}[ctype] * depth // 8
raw = zlib.decompress(b"".join(d for k, d in chunks if k == b"IDAT"))
stride = w * px
assert len(raw) == h * (1 + stride), (len(raw), h, w, px)
# undo the row filters (None, Sub, Up, Average, Paeth) to get the pixels
prev, colours, line, grey = bytearray(stride), set(), [], 0
for r in range(h):
    f, row = raw[r * (1 + stride)], bytearray(raw[r * (1 + stride) + 1:(r + 1) * (1 + stride)])
    for i in range(stride):
        a = row[i - px] if i >= px else 0
        up, c = prev[i], prev[i - px] if i >= px else 0
        if f == 1: row[i] = (row[i] + a) & 255
        elif f == 2: row[i] = (row[i] + up) & 255
        elif f == 3: row[i] = (row[i] + (a + up) // 2) & 255
        elif f == 4:
            p = a + up - c
            pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) & 255
        else: assert f == 0, "filter %d" % f
    colours.update(bytes(row[i:i + 3]) for i in range(0, stride, px))
    grey += sum(1 for i in range(0, stride, px) if 228 <= row[i] <= 231 and row[i] == row[i + 1] == row[i + 2])
    for i in range(0, stride, px):  # the first line's colour (31, 120, 181), drawn at full strength
        if abs(row[i] - 31) + abs(row[i + 1] - 120) + abs(row[i + 2] - 181) < 12:
            line.append(i // px)
    prev = row
white = bytes([255, 255, 255])
assert white in colours and len(colours) > 16, "%d colours: a blank image?" % len(colours)
open(path + ".line", "w").write("%d %d\n" % (len(line), min(line) if line else -1))
open(path + ".grey", "w").write("%d\n" % grey)  # pixels of --shade's band colour
PY
}

train_tiny pope pope --pope-delta-init uniform
train_tiny t5 t5
"$P" analyze freq --model "$W/pope" --threads 1 --out "$W/f.csv" --png "$W/f.png" --width 640 --height 480 \
    2>"$W/err" || fail "analyze freq --png: exit $?: $(cat "$W/err")"
png "$W/f.png" 640 480
[ "$(wc -l <"$W/f.csv")" -eq $((1 + 3 * 8)) ] || fail "analyze freq --png: the CSV is not complete"
"$P" analyze bias --model "$W/pope" --png "$W/d.png" >"$W/d.csv" 2>"$W/err" || fail "bias pope --png: $(cat "$W/err")"
png "$W/d.png" 1000 700
[ "$(wc -l <"$W/d.csv")" -eq $((1 + 3 * 4 * 8)) ] || fail "bias --png without --out: no CSV on stdout"
"$P" analyze bias --model "$W/t5" --png "$W/b.png" --out "$W/b.csv" --height 900 2>"$W/err" || fail "bias t5 --png: $(cat "$W/err")"
png "$W/b.png" 1000 900
"$P" plot lines --csv "$W/sweep.csv" --x length --y ppl --group pe --logx --logy --png "$W/s.png" 2>"$W/err" ||
    fail "plot lines: exit $?: $(cat "$W/err")"
png "$W/s.png" 900 600
"$P" plot lines --csv - --x length --y nll --png "$W/s2.png" --width 300 --height 200 --title "a sweep" \
    <"$W/sweep.csv" 2>"$W/err" || fail "plot lines --csv -: $(cat "$W/err")"
png "$W/s2.png" 300 200
# Axis labels of one's own: drawn instead of the column names (another image).
"$P" plot lines --csv - --x length --y nll --png "$W/s3.png" --width 300 --height 200 --title "a sweep" \
    --xlabel "context length (tokens)" --ylabel "NLL per token" <"$W/sweep.csv" 2>"$W/err" || fail "--xlabel: $(cat "$W/err")"
png "$W/s3.png" 300 200
cmp -s "$W/s2.png" "$W/s3.png" && fail "--xlabel/--ylabel drew the same image as the column names"

# Edge cases of the data: values near ±DBL_MAX draw their line (not a blank plot); ticks of values
# that differ in the 10th digit get labels that tell them apart (wider, so the plot area starts
# further right than the usual 72 pixels); no finite point at all is an error.
printf 'x,y\n1,-1e308\n2,1e308\n3,0\n' >"$W/huge.csv"
printf 'x,y\n1,1\n2,1.0000000001\n3,1.00000000005\n' >"$W/prec.csv"
printf 'x,y\n1,1\n2,3\n3,2\n' >"$W/plain.csv"
for f in huge prec plain; do
    "$P" plot lines --csv "$W/$f.csv" --x x --y y --png "$W/$f.png" 2>"$W/err" || fail "plot $f: $(cat "$W/err")"
    png "$W/$f.png" 900 600
done
read -r n_huge left_huge <"$W/huge.png.line"
read -r n_prec left_prec <"$W/prec.png.line"
read -r n_plain left_plain <"$W/plain.png.line"
[ "$n_huge" -gt 500 ] || fail "values of ±1e308: the line has $n_huge pixels (a blank plot?)"
[ "$n_prec" -gt 500 ] && [ "$left_prec" -gt 100 ] && [ "$left_plain" -lt 90 ] ||
    fail "ticks of 1 and 1.0000000001: line from x = $left_prec (plain: $left_plain), $n_prec pixels"
printf 'x,y\n1,nan\n2,nan\n' >"$W/allnan.csv"
expect 1 "$W/allnan.csv: none of its 2 rows has a finite 'x' and 'y': there is nothing to plot" -- \
    plot lines --csv "$W/allnan.csv" --x x --y y --png "$W/bad.png"
printf 'x,y\n1,0\n2,-1\n' >"$W/nonpos.csv"
expect 1 "none of its 2 rows has a finite 'x' and 'y' with y above 0 (--logy)" -- \
    plot lines --csv "$W/nonpos.csv" --x x --y y --logy --png "$W/bad.png"

# a figure that cannot be written: nothing new is left, an existing CSV is kept
echo old >"$W/keep.csv"
expect 1 "$W/nodir/x.png" -- analyze freq --model "$W/pope" --threads 1 --out "$W/keep.csv" --png "$W/nodir/x.png"
[ "$(cat "$W/keep.csv")" = old ] || fail "a failed --png replaced the CSV"
ls "$W" | grep -q '\.tmp' && fail "temporary files left: $(ls "$W")"

# bad CSV input
printf 'pe,length,ppl\nrope,64,8\nrope,x,9\n' >"$W/nan.csv"
printf 'pe,length,ppl\nrope,64,8\nrope,128\n' >"$W/short.csv"
printf 'pe,length,ppl\n"rope,64,8\n' >"$W/open.csv"
printf 'pe,length,ppl\n"a\nb,""c""",64,8\nrope,6\n' >"$W/multi.csv"
printf 'pe,length,ppl\nro"pe,64,8\n' >"$W/stray.csv"
printf 'pe,length,ppl\n"rope"x,64,8\n' >"$W/after.csv"
printf 'pe,length,length\nrope,64,8\n' >"$W/dup.csv"
printf 'pe,length,ppl\n' >"$W/header.csv"
: >"$W/empty.csv"
printf 'pe,length,ppl\nrope,64,\0\n' >"$W/nul.csv"
/usr/bin/python3 -c 'print(",".join("c%d" % i for i in range(5000))); print(",".join("1" * 5000))' >"$W/wide.csv"
expect 2 "--y: $W/sweep.csv has no column 'loss' (its columns: pe,length,nll,ppl)" -- \
    plot lines --csv "$W/sweep.csv" --x length --y loss --png "$W/bad.png"
expect 2 "--group: $W/sweep.csv has no column 'encoding'" -- \
    plot lines --csv "$W/sweep.csv" --x length --y ppl --group encoding --png "$W/bad.png"
expect 1 "$W/nan.csv:3: column 'length': 'x' is not a number" -- plot lines --csv "$W/nan.csv" --x length --y ppl --png "$W/bad.png"
expect 1 "$W/short.csv:3: 2 fields, but the header has 3" -- plot lines --csv "$W/short.csv" --x length --y ppl --png "$W/bad.png"
# a quoted cell (RFC 4180) holds a line break, a comma and doubled quotes: one cell, and the next row
# is on line 4
expect 1 "$W/multi.csv:4: 2 fields, but the header has 3" -- plot lines --csv "$W/multi.csv" --x length --y ppl --png "$W/bad.png"
expect 1 "$W/open.csv:2: a quote opened here is never closed" -- plot lines --csv "$W/open.csv" --x length --y ppl --png "$W/bad.png"
expect 1 "$W/stray.csv:2: a quote inside a cell that does not begin with one" -- plot lines --csv "$W/stray.csv" --x length --y ppl --png "$W/bad.png"
expect 1 "$W/after.csv:2: text after a quoted cell's closing quote" -- plot lines --csv "$W/after.csv" --x length --y ppl --png "$W/bad.png"
expect 1 "$W/dup.csv:1: column 'length' appears twice" -- plot lines --csv "$W/dup.csv" --x length --y ppl --png "$W/bad.png"
expect 1 "$W/header.csv: a header and no rows" -- plot lines --csv "$W/header.csv" --x length --y ppl --png "$W/bad.png"
expect 1 "$W/empty.csv: empty" -- plot lines --csv "$W/empty.csv" --x length --y ppl --png "$W/bad.png"
expect 1 "$W/nul.csv: not a CSV file (it holds NUL bytes)" -- plot lines --csv "$W/nul.csv" --x length --y ppl --png "$W/bad.png"
expect 1 "$W/wide.csv:1: more than 4096 columns" -- plot lines --csv "$W/wide.csv" --x c0 --y c1 --png "$W/bad.png"
# short lines under a wide header: the reader's memory follows the file's size, not lines x columns
# (40,000 lines under 4,096 columns once asked for 1.3 GB); not under ASan, which needs its shadow
if ! grep -qa __asan_init "$P"; then
    /usr/bin/python3 -c 'print(",".join("c%d" % i for i in range(4096))); print("1\n" * 40000, end="")' >"$W/tall.csv"
    (ulimit -v 1000000 && expect 1 "$W/tall.csv:2: 1 fields, but the header has 4096" \
        -- plot lines --csv "$W/tall.csv" --x c0 --y c1 --png "$W/bad.png") || exit 1
fi
expect 1 "$W/none.csv: cannot open" -- plot lines --csv "$W/none.csv" --x length --y ppl --png "$W/bad.png"
/usr/bin/python3 -c 'print("g,x,y"); [print("g%d,1,2" % i) for i in range(101)]' >"$W/many.csv"
expect 2 "--group: column 'g' of $W/many.csv has more than 100 values" -- \
    plot lines --csv "$W/many.csv" --x x --y y --group g --png "$W/bad.png"
# --shade: a grey band over the x range (the trained sizes of compare's sizes.csv)
"$P" plot lines --csv "$W/sweep.csv" --x length --y ppl --group pe --png "$W/band.png" --shade 64,128 2>"$W/err" ||
    fail "plot lines --shade: $(cat "$W/err")"
png "$W/band.png" 900 600
[ "$(cat "$W/band.png.grey")" -gt $(($(cat "$W/s.png.grey") + 20000)) ] ||
    fail "--shade drew no band: $(cat "$W/band.png.grey") grey pixels, $(cat "$W/s.png.grey") without"
expect 2 "--shade '9,3': give X0,X1 with X0 below X1" -- plot lines --csv "$W/sweep.csv" --x length --y ppl --png "$W/bad.png" --shade 9,3
expect 2 "--png FILE is required" -- plot lines --csv "$W/sweep.csv" --x length --y ppl
expect 2 "--x COL and --y COL are required" -- plot lines --csv "$W/sweep.csv" --y ppl --png "$W/bad.png"
expect 2 "--width: 10 is out of range" -- plot lines --csv "$W/sweep.csv" --x length --y ppl --png "$W/bad.png" --width 10
expect 2 "unknown kind of plot 'bars'" -- plot bars --csv "$W/sweep.csv"
expect 2 "plot needs a kind of plot first" -- plot --csv "$W/sweep.csv"
[ ! -e "$W/bad.png" ] || fail "a failed plot left a PNG"
h=$("$P" help plot) || fail "pelab help plot exited $?"
for o in csv x y group logx logy png title xlabel ylabel width height shade; do
    grep -qE -- "^  --$o " <<<"$h" || fail "pelab help plot lacks --$o"
done
[ "$(grep -c '(default: ' <<<"$h")" -eq 13 ] || fail "pelab help plot: not every option shows its default"
"$P" help | grep -q "^  plot " || fail "pelab help does not list plot"
echo "ok"
