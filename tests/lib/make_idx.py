# Synthetic Fashion-MNIST sources for the command-line tests: the four IDX files (u8 images
# (n, rows, cols), u8 labels (n)) in DIR, with pixel (i·7 + r·31 + c·3 + 100·f) mod 256 and label
# (3i + f) mod 10 for image i of file f (0 train, 1 test). Prints the pixel mean and standard
# deviation of v/255 over the training split (all but the file's last 5000 images) and the CRC-32
# of the four files in install order.
#   python3 make_idx.py DIR N_TRAIN N_TEST ROWS COLS
import math, struct, sys, zlib

d, n_train, n_test, rows, cols = sys.argv[1], *map(int, sys.argv[2:6])
files = [("train-images-idx3-ubyte", "train-labels-idx1-ubyte", n_train, 0),
         ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", n_test, 1)]
crc, s1, s2, npix = 0, 0, 0, 0
for images, labels, n, f in files:
    px = bytes((i * 7 + r * 31 + c * 3 + 100 * f) % 256 for i in range(n) for r in range(rows) for c in range(cols))
    img = struct.pack(">BBBBIII", 0, 0, 8, 3, n, rows, cols) + px
    lab = struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes((3 * i + f) % 10 for i in range(n))
    for name, data in ((images, img), (labels, lab)):
        open(f"{d}/{name}", "wb").write(data)
        crc = zlib.crc32(data, crc)
    if f == 0:
        train = px[: (n - 5000) * rows * cols]
        s1, s2, npix = sum(train), sum(v * v for v in train), len(train)
mean = s1 / npix / 255
print(f"{mean:.12f} {math.sqrt(s2 / npix / 255 ** 2 - mean ** 2):.12f} {crc:08x}")
