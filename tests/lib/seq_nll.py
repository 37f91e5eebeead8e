"""seq_nll — the mean NLL of a pelab run on an evaluation cut of a token cache, computed
independently of pelab: the cache parsed from its documented layout (docs/FORMATS.md, "Token
caches"), the windows cut here from the rule in docs/DATA.md ("Windows"), the model run by the
PyTorch twin (tests/ref/pelab_twin.py) in float64, one window at a time without padding.

    /usr/bin/python3 tests/lib/seq_nll.py RUN CACHE SPLIT L CUT FULL
        RUN    run directory (its model.safetensors)
        CACHE  the .ptok file the run's task reads
        SPLIT  train | val | test | long (long: the test documents when the cache has none), or
               several, comma-separated: one line each
        L      window length (the run's seq-len for a plain evaluation)
        CUT    tile | crop
        FULL   1: only documents of at least L+1 tokens
    prints per split: mean NLL (repr), scored tokens, windows
"""
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import pelab_twin  # noqa: E402

SPLITS = {"train": 0, "val": 1, "test": 2, "long": 3}


def read_cache(path):
    """-> (tokens: np.ndarray, docs: [(start, count, split)])"""
    b = open(path, "rb").read()
    assert b[:8] == b"PELABTOK", "not a token cache"
    width, = struct.unpack_from("<I", b, 12)
    n_docs, = struct.unpack_from("<I", b, 44)
    n_tokens, = struct.unpack_from("<Q", b, 48)
    dtype = {1: "<u1", 2: "<u2", 4: "<u4"}[width]
    tokens = np.frombuffer(b, dtype=dtype, count=n_tokens, offset=72).astype(np.int64)
    table = 72 + (n_tokens * width + 7) // 8 * 8
    docs = []
    for i in range(n_docs):
        start, count, _, _, split, _ = struct.unpack_from("<QQIHBB", b, table + 24 * i)
        docs.append((start, count, split))
    return tokens, docs


def windows(n, L, cut, full):
    """(start, length in tokens, first scored position) of each window of a document of n tokens"""
    if n < 2 or (full and n < L + 1):
        return []
    if cut == "crop" or n <= L + 1:
        return [(0, min(n, L + 1), 0)]
    k = (n - 2) // L + 1
    out = [(j * L, L + 1, 0) for j in range(k - 1)]
    last = n - 1 - L
    out.append((last, L + 1, (k - 1) * L - last))
    return out


def main():
    run, cache, split, L, cut, full = sys.argv[1:7]
    L, full = int(L), full == "1"
    arrays, meta = pelab_twin.read_safetensors(os.path.join(run, "model.safetensors"))
    cfg = {k[len("pelab.config."):]: v for k, v in meta.items() if k.startswith("pelab.config.")}
    twin = pelab_twin.Twin(cfg, dtype=torch.float64)
    twin.load_arrays(arrays)
    tokens, docs = read_cache(cache)
    for name in split.split(","):
        print(*nll(twin, tokens, docs, name, L, cut, full))


def nll(twin, tokens, docs, split, L, cut, full):
    """-> (mean NLL, scored tokens, windows) of the cut of one split"""
    want = SPLITS[split]
    if want == 3 and not any(d[2] == 3 for d in docs):
        want = 2
    total, count, n_windows = 0.0, 0, 0
    with torch.no_grad():
        for start, n, s in docs:
            if s != want:
                continue
            for off, length, first in windows(n, L, cut, full):
                w = torch.from_numpy(tokens[start + off:start + off + length].copy())
                x, y = w[:-1].unsqueeze(0), w[1:]
                pos = torch.arange(length - 1).unsqueeze(0)
                logits, _ = twin(x, pos)
                nll_ = -F.log_softmax(logits[0], dim=-1).gather(1, y.unsqueeze(1)).squeeze(1)
                total += float(nll_[first:].sum())
                count += length - 1 - first
                n_windows += 1
    return repr(total / count), count, n_windows

if __name__ == "__main__":
    main()
