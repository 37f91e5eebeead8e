"""tests/lib/st_edit.py FILE EDIT [ARG...] -- damages a safetensors file the way a test asks.

Every edit but the raw ones rewrites the file with both pelab checksums recomputed
(pelab.data-crc32 over the data, pelab.header-crc32 over the length and the header with its own
digits as zeros), so that only the fault the edit makes can be what pelab refuses it for.

  meta KEY VALUE         set a metadata entry (VALUE "-" removes it)
  nan NAME               element 0 of tensor NAME becomes NaN
  set NAME X             element 0 of tensor NAME becomes X
  dtype NAME DT          tensor NAME declares dtype DT (same bytes)
  shape NAME D0,D1,..    tensor NAME declares another shape
  drop NAME              tensor NAME and its bytes are removed
  offsets NAME B E       tensor NAME declares data_offsets [B, E]
  rename OLD NEW         tensor OLD is called NEW
  add NAME               a tensor NAME of one F32 is appended
  nocrc                  both checksums removed (as another tool would write it)
  old                    the data checksum alone, as pelab 0.1.0 wrote it
  raw-json               the header becomes invalid JSON (same length; checksums untouched)
  raw-flip OFFSET        one byte flipped (OFFSET from the end if negative)
  raw-cut BYTES          the file cut to BYTES bytes
  raw-sub OLD NEW        the first OLD in the header replaced by NEW, of the same length
"""
import json
import struct
import sys
import zlib


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return h, bytearray(b[8 + n:])


def save(path, h, data, crc=True):
    meta = h.setdefault("__metadata__", {})
    meta.pop("pelab.data-crc32", None)
    meta.pop("pelab.header-crc32", None)
    if crc == "old":  # as pelab 0.1.0 wrote it: the data checksum only, under its old name
        meta["pelab.crc32"] = "%08x" % zlib.crc32(bytes(data))
        crc = False
    if crc:
        meta["pelab.data-crc32"] = "%08x" % zlib.crc32(bytes(data))
        meta["pelab.header-crc32"] = "00000000"
    # __metadata__ first, as pelab writes it.
    h = dict([("__metadata__", meta)] + [(k, v) for k, v in h.items() if k != "__metadata__"])
    text = json.dumps(h, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    length = struct.pack("<Q", len(text))
    if crc:
        key = b'"pelab.header-crc32":"'
        at = text.index(key) + len(key)
        digits = b"%08x" % zlib.crc32(length + text)
        text = text[:at] + digits + text[at + 8:]
    open(path, "wb").write(length + text + bytes(data))


def element(h, data, name, value):
    t = h[name]
    o = t["data_offsets"][0]
    fmt = {"F32": "<f", "F64": "<d"}[t["dtype"]]
    data[o:o + struct.calcsize(fmt)] = struct.pack(fmt, value)


def main(path, edit, *args):
    raw = open(path, "rb").read()
    if edit == "raw-json":
        n = struct.unpack("<Q", raw[:8])[0]
        open(path, "wb").write(raw[:8] + b"{" * n + raw[8 + n:])
        return
    if edit == "raw-flip":
        b = bytearray(raw)
        b[int(args[0])] ^= 0x10
        open(path, "wb").write(bytes(b))
        return
    if edit == "raw-sub":
        old, new = args[0].encode(), args[1].encode()
        assert len(old) == len(new) and old in raw
        open(path, "wb").write(raw.replace(old, new, 1))
        return
    if edit == "raw-cut":
        open(path, "wb").write(raw[:int(args[0])])
        return
    h, data = load(path)
    crc = True
    if edit == "meta":
        if args[1] == "-":
            h["__metadata__"].pop(args[0])
        else:
            h["__metadata__"][args[0]] = args[1]
    elif edit == "nan":
        element(h, data, args[0], float("nan"))
    elif edit == "set":
        element(h, data, args[0], float(args[1]))
    elif edit == "dtype":
        h[args[0]]["dtype"] = args[1]
    elif edit == "shape":
        h[args[0]]["shape"] = [int(x) for x in args[1].split(",")]
    elif edit == "drop":
        b, e = h.pop(args[0])["data_offsets"]
        del data[b:e]
        for k, t in h.items():
            if k != "__metadata__" and t["data_offsets"][0] >= e:
                t["data_offsets"] = [x - (e - b) for x in t["data_offsets"]]
    elif edit == "offsets":
        h[args[0]]["data_offsets"] = [int(args[1]), int(args[2])]
    elif edit == "rename":
        h = {(args[1] if k == args[0] else k): v for k, v in h.items()}
    elif edit == "add":
        h[args[0]] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
        data += struct.pack("<f", 1.0)
    elif edit == "nocrc":
        crc = False
    elif edit == "old":
        crc = "old"
    else:
        sys.exit("st_edit.py: unknown edit " + edit)
    save(path, h, data, crc)


if __name__ == "__main__":
    main(*sys.argv[1:])
