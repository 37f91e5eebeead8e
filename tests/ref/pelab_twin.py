"""pelab_twin — an independent PyTorch model of pelab's Transformer, for the twin test and the bench.

    h = E[tokens]                                             (B, T, D)
    per layer:  h += Attn(RMSNorm(h) * g1) @ Wo^T;  h += GELU_tanh(RMSNorm(h) * g2 @ W1^T) @ W2^T
    logits = RMSNorm(h) * gf @ E^T  (tied) or @ lm_head^T      (B, T, V)
    RMSNorm(x) = x / sqrt(mean(x^2) + 1e-5)

Attention per head (d = D / H): scores = q'.k' / sqrt(d) + bias(t, s), causal (key index s <= query
index t), softmax over s, times v. q' and k' come from the positional encoding (`nope`, `rope` with
its resonance and length-extension options, `pope`, `xpos`), bias from the bias encodings (`alibi`,
`t5`, `fire`, `fire-shared`; 0 for the others); `learned` and `sinusoidal` add e(pos) to the token
embedding (`sinusoidal` times its sin-scale); `seqpe` encodes each position's digits with a small Transformer and adds the result to
the token embedding or, projected, to / onto / beside q and k. Positions are an explicit (B, T) integer array. Parameter names are pelab's, so a pelab
model.safetensors loads by name and gradients compare by name.

Also here: a small safetensors reader/writer (struct + json + numpy; no safetensors package) and
torch.optim.AdamW with pelab's decay rule. Written from the formulas in SPEC.md, not from pelab's C.
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# --- safetensors --------------------------------------------------------------------------------
# 8-byte little-endian header length N, N bytes of JSON, then the data section.

_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def read_safetensors(path):
    """-> ({name: numpy array}, {metadata key: str})"""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    data = buf[8 + n:]
    tensors = {}
    for name, info in header.items():
        dt = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype=dt).reshape(info["shape"])
        tensors[name] = arr.astype(dt.newbyteorder("="))
    return tensors, meta


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: numpy array or torch tensor} (F32/F64/I32/I64); metadata: {str: str}."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        raw = a.tobytes()
        header[name] = {"dtype": _NAMES[a.dtype.newbyteorder("=")], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # align the data section to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


# --- configuration --------------------------------------------------------------------------------

DEFAULTS = {
    "mlp-mult": 4, "tied": "on", "dropout": 0.0, "pe": "rope",
    "rope-base": 10000.0, "rope-layout": "interleaved",
    "pope-base": 10000.0, "pope-softplus": "on", "pope-delta": "on", "pope-delta-init": "zero",
    "pope-delta-clamp": "on", "pope-delta-train": "on",
}
_INTS = ("vocab", "max-seq", "d-model", "heads", "layers", "mlp-mult")
_FLOATS = ("dropout", "rope-base", "pope-base")
# learned, sinusoidal, xpos; RoPE's resonance and length extension (SPEC §3)
DEFAULTS.update({
    "ape-max-len": 0, "ape-extend": "error", "sin-base": 10000.0,
    "sin-scale": 1.0,   # a model file without it predates the option: P was added as is
    "xpos-base": 10000.0, "xpos-scale-base": 512.0, "xpos-gamma": 0.4,
    "rope-resonance": "off", "rope-scaling": "none", "rope-scale": 1.0, "rope-original-len": 0,
    "yarn-beta-fast": 32.0, "yarn-beta-slow": 1.0, "rope-fraction": 1.0, "rope-p": 1.0,
    "llama3-low-freq-factor": 1.0, "llama3-high-freq-factor": 4.0, "longrope-factors": "",
})
_INTS += ("ape-max-len", "rope-original-len")
_FLOATS += ("sin-base", "sin-scale", "xpos-base", "xpos-scale-base", "xpos-gamma", "rope-scale", "yarn-beta-fast",
            "yarn-beta-slow", "rope-fraction", "rope-p", "llama3-low-freq-factor",
            "llama3-high-freq-factor")


# the bias encodings' options
DEFAULTS.update({"t5-buckets": 32, "t5-max-distance": 128, "t5-table": "shared",
                 "fire-width": 32, "fire-depth": 2})
_INTS += ("t5-buckets", "t5-max-distance", "fire-width", "fire-depth")

# SeqPE
DEFAULTS.update({"seqpe-mode": "input", "seqpe-proj": "shared", "seqpe-base": 10, "seqpe-digits": 0,
                 "seqpe-dims": 0, "seqpe-layers": 2, "seqpe-width": 0, "seqpe-heads": 0,
                 "seqpe-final-norm": "off"})
_INTS += ("seqpe-base", "seqpe-digits", "seqpe-dims", "seqpe-layers", "seqpe-width", "seqpe-heads")
DEFAULTS.update({"seqpe-alpha": 0.1, "seqpe-beta": 0.1, "seqpe-ood-loss": "paper"})
_FLOATS += ("seqpe-alpha", "seqpe-beta")
# FoX, CoPE
DEFAULTS.update({"fox-gate": "data", "fox-bias-init": 0.0, "cope-max-pos": 64, "cope-table": "per-layer"})
_FLOATS += ("fox-bias-init",)
_INTS += ("cope-max-pos",)


# the image task's patch model (what the task feeds the model) and the 2-D encodings
DEFAULTS.update({"input-dim": 0, "pos-dims": 1, "bidirectional": "off", "grid": 0,
                 "rope2d-base": 10000.0, "sin2d-base": 10000.0, "rope2d-mixed-base": 10.0,
                 "pope2d-base": 10000.0, "pope2d-delta-init": "zero"})
_INTS += ("input-dim", "pos-dims", "grid")
_FLOATS += ("rope2d-base", "sin2d-base", "rope2d-mixed-base", "pope2d-base")


def parse_config(raw):
    """pelab.config metadata (a JSON object, or its text) -> dict with typed values.
    Values may be numbers or strings; switches stay "on"/"off"."""
    if isinstance(raw, str):
        raw = json.loads(raw)
    cfg = dict(DEFAULTS)
    cfg.update(raw)
    for k in _INTS:
        cfg[k] = int(float(cfg[k]))
    for k in _FLOATS:
        cfg[k] = float(cfg[k])
    for k, v in cfg.items():
        if k not in _INTS and k not in _FLOATS:
            cfg[k] = str(v)
    return cfg


def on(value):
    return str(value) in ("on", "1", "true", "yes")


# --- positional encodings -------------------------------------------------------------------------
# Each takes q, k: (B, H, T, d) and pos: (B, T) int, returns q', k': (B, H, T, dq).

def _angles(pos, theta, dtype):
    """pos (B, T) x theta (n,) -> (B, 1, T, n): p * theta in float64, then cast."""
    a = pos.to(torch.float64)[:, None, :, None] * torch.as_tensor(theta, dtype=torch.float64)
    return a.to(dtype)


class NoPE(nn.Module):
    def forward(self, q, k, pos):
        return q, k


class RoPE(nn.Module):
    """Rotate each pair c of q (and k) at position p by p * theta_c, theta_c = base^(-2c/d).
    Pairs are (x_2c, x_2c+1) in the `interleaved` layout, (x_c, x_c+d/2) in `half`.
    Optional: resonance (theta -> 2pi / round(2pi / theta)), a length-extension method (see
    RoPEScaled below), partial RoPE (`fraction`: only the first r/2 pairs, r = 2 floor(f d/2),
    rotate, at theta_c = base^(-2c/r); the other dimensions pass through untouched) and p-RoPE
    (`p`: of those, only the first floor(p r/2), the fastest, rotate)."""

    def __init__(self, d, base, layout, resonance=False, fraction=1.0, p=1.0):
        super().__init__()
        assert d % 2 == 0 and layout in ("interleaved", "half")
        self.d, self.base, self.resonance = d, base, resonance
        self.r = 2 * math.floor(fraction * (d // 2) + 1e-9)                   # rotary width
        self.n_rot = math.floor(p * (self.r // 2) + 1e-9)                     # pairs that turn
        self.theta = self.frequencies(base)                                   # (r/2,)
        self.layout = layout

    def frequencies(self, base):
        theta = base ** (-2.0 * np.arange(self.r // 2, dtype=np.float64) / self.r)
        if self.resonance:
            theta = 2 * math.pi / np.round(2 * math.pi / theta)
        return theta

    def rotate(self, x, cos, sin):
        """Pairs 0..n-1 rotated (n = cos.shape[-1]), every other dimension as it was."""
        n, out = cos.shape[-1], x.clone()
        if self.layout == "interleaved":
            x1, x2 = x[..., 0:2 * n:2], x[..., 1:2 * n:2]
            out[..., 0:2 * n:2], out[..., 1:2 * n:2] = x1 * cos - x2 * sin, x1 * sin + x2 * cos
            return out
        half = x.shape[-1] // 2
        x1, x2 = x[..., :n], x[..., half:half + n]
        out[..., :n], out[..., half:half + n] = x1 * cos - x2 * sin, x1 * sin + x2 * cos
        return out

    amp = 1.0  # the length-extension methods' amplitude on the rotated pairs (RoPEScaled)

    def forward(self, q, k, pos):
        a = _angles(pos, self.theta[:self.n_rot], torch.float64)  # (B, 1, T, n_rot)
        cos, sin = (self.amp * a.cos()).to(q.dtype), (self.amp * a.sin()).to(q.dtype)
        return self.rotate(q, cos, sin), self.rotate(k, cos, sin)


class RoPEScaled(RoPE):
    """RoPE of a trained model evaluated with a length-extension method (SPEC section 3), scale s,
    training context L_train, head width d:
      pi:          positions m -> m / s
      ntk:         base' = base * s^(d / (d - 2))
      dynamic-ntk: base' = base * (s L / L_train - (s - 1))^(d / (d - 2)) when the pass's length
                   L = max position + 1 exceeds L_train
      yarn:        corr(r) = d ln(L_train / (2 pi r)) / (2 ln base), lo = max(0, floor(corr(beta_fast))),
                   hi = min(d - 1, ceil(corr(beta_slow))) (hi = lo + 0.001 when equal),
                   ramp_i = clamp((i - lo) / (hi - lo), 0, 1), keep = 1 - ramp,
                   theta'_i = theta_i / s * (1 - keep) + theta_i * keep; attention logits times
                   (0.1 ln s + 1)^2, as an amplitude 0.1 ln s + 1 on the rotated pairs of q and k.
      longrope:    theta_i / lambda_i, lambda the file's "short_factor" list for a pass with
                   L <= L_train, its "long_factor" list beyond (both at the JSON's top level or
                   under "rope_scaling"); an amplitude sqrt(1 + ln s / ln L_train) on the rotated
                   pairs of q and k when s > 1 (as Hugging Face's `longrope` for Phi-3);
                   "geometric:S,L" in place of the file: lambda_i = S^(i/(n-1)) (short) and
                   L^(i/(n-1)) (long) over the n rotated pairs.
      llama3:      by wavelength w_i = 2 pi / theta_i: theta_i when w_i < L_train / high,
                   theta_i / s when w_i > L_train / low, else (1 - g) theta_i / s + g theta_i with
                   g = (L_train / w_i - low) / (high - low) (Llama 3.1's `apply_scaling`).
    Resonance rounds the frequencies the method starts from (after the base change, before the
    blend). s = 1 with pi, ntk, yarn or llama3 is plain RoPE. With partial RoPE every d here is
    the rotary width r."""

    def __init__(self, d, base, layout, resonance, method, s, original_len, beta_fast, beta_slow,
                 fraction=1.0, p=1.0, low=1.0, high=4.0, factors_path=""):
        super().__init__(d, base, layout, resonance, fraction, p)
        d = self.r
        self.method, self.s, self.L_train = method, s, original_len
        if method == "llama3" and s != 1:
            w = 2 * math.pi / self.theta
            g = (original_len / w - low) / (high - low)
            self.theta = np.where(w < original_len / high, self.theta,
                                  np.where(w > original_len / low, self.theta / s,
                                           (1 - g) * self.theta / s + g * self.theta))
        if method == "longrope" and factors_path.startswith("geometric:"):
            top = dict(zip(("short", "long"), map(float, factors_path[len("geometric:"):].split(","))))
            e = np.arange(d // 2) / max(d // 2 - 1, 1)
            self.factors = {k: top[k] ** e for k in ("short", "long")}
        elif method == "longrope":
            with open(factors_path) as f:
                sets = json.load(f)
            sets = sets.get("rope_scaling", sets)
            self.factors = {k: np.array(sets[k + "_factor"], dtype=np.float64) for k in ("short", "long")}
        if method == "longrope" and s > 1:
            self.amp = math.sqrt(1 + math.log(s) / math.log(original_len))
        if method == "ntk":
            self.theta = self.frequencies(base * s ** (d / (d - 2)))
        if method == "yarn" and s != 1:
            corr = lambda r: d * math.log(original_len / (2 * math.pi * r)) / (2 * math.log(base))
            lo, hi = max(0, math.floor(corr(beta_fast))), min(d - 1, math.ceil(corr(beta_slow)))
            if hi == lo:
                hi += 0.001
            ramp = np.clip((np.arange(d // 2) - lo) / (hi - lo), 0, 1)
            keep = 1 - ramp
            self.theta = self.theta / s * (1 - keep) + self.theta * keep
            self.amp = 0.1 * math.log(s) + 1

    def forward(self, q, k, pos):
        if self.method == "pi":
            a = (pos.to(torch.float64) / self.s)[:, None, :, None] * torch.as_tensor(self.theta[:self.n_rot])
            cos, sin = (self.amp * a.cos()).to(q.dtype), (self.amp * a.sin()).to(q.dtype)
            return self.rotate(q, cos, sin), self.rotate(k, cos, sin)
        if self.method == "dynamic-ntk":
            L = int(pos.max()) + 1
            if L > self.L_train:
                base = self.base * (self.s * L / self.L_train - (self.s - 1)) ** (self.r / (self.r - 2))
                self.theta = self.frequencies(base)
            else:
                self.theta = self.frequencies(self.base)
        if self.method == "longrope":
            L = int(pos.max()) + 1
            self.theta = self.frequencies(self.base) / self.factors["long" if L > self.L_train else "short"]
        return super().forward(q, k, pos)


class XPos(RoPE):
    """xPos (Sun et al. 2022): RoPE whose pair c of q at position t is also scaled by
    zeta_c^(t / scale_base) and of k at s by zeta_c^(-s / scale_base),
    zeta_c = (2c/d + gamma) / (1 + gamma); interleaved pairs."""

    def __init__(self, d, base, scale_base, gamma):
        super().__init__(d, base, "interleaved")
        c = np.arange(d // 2, dtype=np.float64)
        self.zeta = (2 * c / d + gamma) / (1 + gamma)                           # (d/2,)
        self.scale_base = scale_base

    def forward(self, q, k, pos):
        e = pos.to(torch.float64)[:, None, :, None] / self.scale_base            # (B, 1, T, 1)
        up = torch.as_tensor(self.zeta) ** e                                      # (B, 1, T, d/2)
        up = torch.repeat_interleave(up, 2, dim=-1).to(q.dtype)                  # pairs share it
        q, k = super().forward(q, k, pos)
        return q * up, k / up


class PoPE(nn.Module):
    """Polar coordinates: theta_c = base^(-c/d), c = 0..d-1; mu = softplus(x) (or x);
    phase_q = t * theta, phase_k = s * theta + clamp(delta[h], -2pi, 0);
    q' = [mu_q cos phase_q ; mu_q sin phase_q], k' likewise (width 2d), so that
    q'.k' = sum_c mu_q,c mu_k,c cos((t - s) theta_c - delta_c)."""

    def __init__(self, heads, d, base, softplus, delta, clamp=True, train=True):
        super().__init__()
        self.theta = base ** (-np.arange(d, dtype=np.float64) / d)  # (d,)
        self.softplus = softplus
        # (H, d); --pope-delta-train off: kept at its initial value, no gradient
        self.delta = nn.Parameter(torch.zeros(heads, d), requires_grad=train) if delta else None
        self.clamp = clamp  # --pope-delta-clamp off: delta as it is

    def forward(self, q, k, pos):
        mu_q = F.softplus(q) if self.softplus else q                # (B, H, T, d)
        mu_k = F.softplus(k) if self.softplus else k
        a = _angles(pos, self.theta, torch.float64)                 # (B, 1, T, d)
        cq, sq = a.cos().to(q.dtype), a.sin().to(q.dtype)
        if self.delta is None:
            ck, sk = cq, sq
        else:
            delta = self.delta.clamp(-2 * math.pi, 0) if self.clamp else self.delta
            phase_k = a.to(q.dtype) + delta[None, :, None, :]
            ck, sk = phase_k.cos(), phase_k.sin()                   # (B, H, T, d)
        return (torch.cat((mu_q * cq, mu_q * sq), dim=-1),
                torch.cat((mu_k * ck, mu_k * sk), dim=-1))


def make_posenc(cfg):
    d = cfg["d-model"] // cfg["heads"]
    pe = cfg["pe"]
    if pe in ("nope", "fox", "cope") or pe in BIAS_ENCODINGS:  # fox, cope: the layer's attn.fox, attn.cope
        return NoPE()
    if pe == "rope":
        if cfg["rope-scaling"] != "none":
            return RoPEScaled(d, cfg["rope-base"], cfg["rope-layout"], on(cfg["rope-resonance"]),
                              cfg["rope-scaling"], cfg["rope-scale"],
                              cfg["rope-original-len"] or cfg["max-seq"], cfg["yarn-beta-fast"],
                              cfg["yarn-beta-slow"], cfg["rope-fraction"], cfg["rope-p"],
                              cfg["llama3-low-freq-factor"], cfg["llama3-high-freq-factor"],
                              cfg["longrope-factors"])
        return RoPE(d, cfg["rope-base"], cfg["rope-layout"], on(cfg["rope-resonance"]),
                    cfg["rope-fraction"], cfg["rope-p"])
    if pe == "xpos":
        return XPos(d, cfg["xpos-base"], cfg["xpos-scale-base"], cfg["xpos-gamma"])
    if pe in ("learned", "sinusoidal", "seqpe", "learned2d", "sinusoidal2d"):
        return NoPE()  # they act on the embedding (AbsolutePE, AbsolutePE2D, SeqPE below) or after q, k
    if pe == "rope2d":
        return RoPE2D(d, cfg["rope2d-base"])
    if pe in ("rope2d-mixed", "pope2d"):
        return NoPE()  # their parameters are the layer's attn.rope2d_mixed / attn.pope2d (below)
    if pe == "pope":
        return PoPE(cfg["heads"], d, cfg["pope-base"], on(cfg["pope-softplus"]), on(cfg["pope-delta"]),
                    on(cfg["pope-delta-clamp"]), on(cfg["pope-delta-train"]))
    raise ValueError("the twin has no encoding '%s'" % pe)


class AbsolutePE(nn.Module):
    """Absolute encodings, added to the token embedding: e(pos) (B, T, D).
    learned: the table pos_emb.weight (Tmax, D), Tmax = ape-max-len or the training context;
      with ape-extend interpolate, a pass longer than the table (L' = max position + 1 > Tmax)
      reads the table linearly resampled to L' rows (torch's interpolate, align_corners: row p of
      the result sits at p (Tmax - 1) / (L' - 1) of the table).
    sinusoidal: sigma P, P[p, 2i] = sin(p base^(-2i/D)), P[p, 2i+1] = cos(p base^(-2i/D)),
      sigma = sin-scale."""

    def __init__(self, cfg):
        super().__init__()
        self.kind, D = cfg["pe"], cfg["d-model"]
        if self.kind == "learned":
            self.weight = nn.Parameter(torch.zeros(cfg["ape-max-len"] or cfg["max-seq"], D))
            self.interpolate = cfg["ape-extend"] == "interpolate"
        else:
            self.freq = cfg["sin-base"] ** (-np.arange(0, D, 2, dtype=np.float64) / D)   # 2i/D
            self.scale = cfg["sin-scale"]
            self.D = D

    def forward(self, pos):
        if self.kind == "sinusoidal":
            a = pos.to(torch.float64)[..., None] * torch.as_tensor(self.freq)      # (B, T, ceil(D/2))
            e = torch.stack((a.sin(), a.cos()), dim=-1).flatten(-2)[..., :self.D]
            return self.scale * e
        L = int(pos.max()) + 1
        table = self.weight
        if L > table.shape[0]:
            if not self.interpolate:
                raise ValueError("position %d is beyond the learned table" % (L - 1))
            table = F.interpolate(table.t()[None], size=L, mode="linear", align_corners=True)[0].t()
        return table[pos.long()]
class RoPE2D(nn.Module):
    """Axial RoPE (Heo et al. 2024) on pos (B, T, 2) = (row, column): of the d/2 interleaved pairs
    (x_2c, x_2c+1), pair c < d/4 turns by row * theta_c and pair d/4 + c by column * theta_c, with
    theta_c = base^(-2c/(d/2)) the frequencies of a d/2-wide RoPE."""

    def __init__(self, d, base):
        super().__init__()
        self.theta = base ** (-np.arange(0, d // 2, 2, dtype=np.float64) / (d // 2))   # (d/4,)

    def forward(self, q, k, pos):
        th = torch.as_tensor(self.theta)
        p = pos.to(torch.float64)
        a = torch.cat((p[..., 0:1] * th, p[..., 1:2] * th), -1)[:, None]             # (B, 1, T, d/2)
        cos, sin = a.cos().to(q.dtype), a.sin().to(q.dtype)

        def turn(x):
            x0, x1 = x[..., 0::2], x[..., 1::2]
            return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)
        return turn(q), turn(k)


class RoPE2DMixed(nn.Module):
    """RoPE-Mixed (Heo et al. 2024) on pos (B, T, 2): pair i of head h (interleaved) turns by
    theta[0, h, i] * row + theta[1, h, i] * column, theta (2, H, d/2) learned per layer."""

    def __init__(self, heads, d):
        super().__init__()
        self.theta = nn.Parameter(torch.zeros(2, heads, d // 2))

    def forward(self, q, k, pos):
        p = pos.to(torch.float64)                                                    # (B, T, 2)
        th = self.theta.to(torch.float64)
        a = (p[:, None, :, 0, None] * th[0][None, :, None] +
             p[:, None, :, 1, None] * th[1][None, :, None])                         # (B, H, T, d/2)
        cos, sin = a.cos().to(q.dtype), a.sin().to(q.dtype)

        def turn(x):
            x0, x1 = x[..., 0::2], x[..., 1::2]
            return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)
        return turn(q), turn(k)


class PoPE2D(nn.Module):
    """Axial PoPE on pos (B, T, 2): magnitudes softplus(x); component c < d/2 has phase
    row * theta_c, component d/2 + c column * theta_c, theta_c = base^(-c/(d/2)); keys add
    clamp(delta, -2pi, 0), delta (H, d) per layer -> q', k' (B, H, T, 2d) = [mu cos; mu sin]."""

    def __init__(self, heads, d, base):
        super().__init__()
        h = d // 2
        th = base ** (-np.arange(h, dtype=np.float64) / h)
        self.theta = np.concatenate((th, th))                                         # (d,)
        self.h = h
        self.delta = nn.Parameter(torch.zeros(heads, d))

    def forward(self, q, k, pos):
        p = pos.to(torch.float64)                                                    # (B, T, 2)
        th = torch.as_tensor(self.theta)
        coord = torch.cat((p[..., 0:1].expand(-1, -1, self.h), p[..., 1:2].expand(-1, -1, self.h)), -1)
        a = (coord * th)[:, None]                                                    # (B, 1, T, d)
        # the angles in double, the keys' phases with δ in the model's dtype, as PoPE's
        ak = a.to(k.dtype) + self.delta.clamp(-2 * math.pi, 0)[None, :, None]        # (B, H, T, d)
        mq, mk = F.softplus(q), F.softplus(k)
        qo = torch.cat((mq * a.cos().to(q.dtype), mq * a.sin().to(q.dtype)), -1)
        ko = torch.cat((mk * ak.cos(), mk * ak.sin()), -1)
        return qo, ko


class AbsolutePE2D(nn.Module):
    """2-D absolute encodings on pos (B, T, 2), the class token at (0, 0), grid cells from 1:
    sinusoidal2d: the first D/2 channels the 1-D sinusoidal embedding (width D/2) of the row, the
      last D/2 the column's;
    learned2d: pos_emb2d.weight (1 + G^2, D): row 0 the class token's, then the G x G grid
      row-major; a sequence whose largest coordinate is G' reads the grid resized to G' x G' by
      F.interpolate(mode='bilinear', align_corners=False)."""

    def __init__(self, cfg):
        super().__init__()
        self.kind, D = cfg["pe"], cfg["d-model"]
        if self.kind == "learned2d":
            self.G = cfg["grid"]
            self.weight = nn.Parameter(torch.zeros(1 + self.G * self.G, D))
        else:
            h = D // 2
            self.freq = cfg["sin2d-base"] ** (-np.arange(0, h, 2, dtype=np.float64) / h)
            self.h = h

    def forward(self, pos):
        if self.kind == "sinusoidal2d":
            out = []
            for axis in (0, 1):
                a = pos[..., axis].to(torch.float64)[..., None] * torch.as_tensor(self.freq)
                out.append(torch.stack((a.sin(), a.cos()), -1).flatten(-2)[..., :self.h])
            return torch.cat(out, -1)
        rows = []
        grid = self.weight[1:].reshape(self.G, self.G, -1).permute(2, 0, 1)[None]   # (1, D, G, G)
        for b in range(pos.shape[0]):
            Gp = max(int(pos[b].max()), 1)
            g = F.interpolate(grid, size=(Gp, Gp), mode="bilinear", align_corners=False)[0]  # (D, G', G')
            r, c = pos[b, :, 0].long(), pos[b, :, 1].long()
            cell = g[:, (r - 1).clamp(min=0), (c - 1).clamp(min=0)].t()                 # (T, D)
            rows.append(torch.where((r == 0)[:, None], self.weight[0][None], cell))
        return torch.stack(rows)


# --- attention biases ------------------------------------------------------------------------------
# Each maps pos: (B, T) int to bias: (B, H, T, T), bias[b, h, t, s] added to the scaled score of
# query t and key s (entries s > t are masked afterwards).

BIAS_ENCODINGS = ("alibi", "t5", "fire", "fire-shared")


def alibi_slopes(H):
    """Press et al. 2022: H = 2^k heads get m_h = 2^(-8(h+1)/H); otherwise the slopes of the
    largest power of two c < H, then the slopes of 2c heads at even indices until H in all."""
    def geometric(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    c = 1 << (H.bit_length() - 1)
    return geometric(c) if c == H else geometric(c) + geometric(2 * c)[0::2][:H - c]


class ALiBi(nn.Module):
    """bias(t, s) = -m_h (t - s)."""

    def __init__(self, heads):
        super().__init__()
        self.slopes = alibi_slopes(heads)

    def forward(self, pos):
        rel = (pos[:, :, None] - pos[:, None, :]).to(torch.float64)      # (B, T, T): t - s
        m = torch.tensor(self.slopes, dtype=torch.float64)              # (H,)
        return -m[None, :, None, None] * rel[:, None]


class T5Bias(nn.Module):
    """Learned b[bucket(max(t - s, 0)), h]: distances below nb/2 exact, then log-spaced buckets up
    to max_distance, beyond which everything shares the last bucket (Raffel et al. 2020, causal)."""

    def __init__(self, heads, buckets, max_distance):
        super().__init__()
        self.nb, self.maxd = buckets, max_distance
        self.bias = nn.Parameter(torch.zeros(buckets, heads))           # (nb, H)

    def bucket(self, pos):
        n = (pos[:, :, None] - pos[:, None, :]).clamp(min=0).long()     # (B, T, T)
        exact = self.nb // 2
        logn = torch.log(n.clamp(min=1).to(torch.float64) / exact)      # only used where n >= exact
        far = exact + torch.floor(logn / math.log(self.maxd / exact) * (self.nb - exact)).long()
        return torch.where(n < exact, n, far.clamp(max=self.nb - 1))

    def forward(self, pos):
        return self.bias[self.bucket(pos)].permute(0, 3, 1, 2)          # (B, H, T, T)


class FIRE(nn.Module):
    """Li et al. 2024: bias(t, s) = MLP(psi(t - s) / (psi(max(t, L)) + 1e-6)), psi(x) = ln(|c x| + 1),
    L = |ell| * L_train; the MLP is 1 -> width (x depth, ReLU) -> heads, the output layer without a
    bias (a per-head constant that the softmax removes)."""

    def __init__(self, heads, width, depth, L_train):
        super().__init__()
        dims = [1] + [width] * depth + [heads]
        self.layers = nn.ModuleList(nn.Linear(dims[i], dims[i + 1], bias=i < depth)
                                    for i in range(depth + 1))
        self.c = nn.Parameter(torch.tensor([0.1]))
        self.ell = nn.Parameter(torch.tensor([1.0]))
        self.L_train = L_train

    def forward(self, pos):
        dt = self.c.dtype
        t, s = pos[:, :, None].to(dt), pos[:, None, :].to(dt)           # (B, T, 1), (B, 1, T)
        psi = lambda x: torch.log(torch.abs(self.c * x) + 1)
        L = torch.abs(self.ell) * self.L_train
        y = (psi(t - s) / (psi(torch.maximum(t, L)) + 1e-6))[..., None]  # (B, T, T, 1)
        for i, layer in enumerate(self.layers):
            y = layer(y)
            if i + 1 < len(self.layers):
                y = F.relu(y)
        return y.permute(0, 3, 1, 2)                                    # (B, H, T, T)


def make_bias(cfg):
    """-> (attribute name, module) of the bias encoding, or (None, None). The attribute names give
    pelab's parameter names: blocks.{l}.attn.t5.bias, blocks.{l}.attn.fire.*, or pe.t5.bias,
    pe.fire.* for the shared ones."""
    pe, H = cfg["pe"], cfg["heads"]
    if pe == "alibi":
        return "alibi", ALiBi(H)
    if pe == "t5":
        return "t5", T5Bias(H, cfg["t5-buckets"], cfg["t5-max-distance"])
    if pe in ("fire", "fire-shared"):
        return "fire", FIRE(H, cfg["fire-width"], cfg["fire-depth"], cfg["max-seq"])
    return None, None


def bias_is_shared(cfg):
    return cfg["pe"] == "fire-shared" or (cfg["pe"] == "t5" and cfg["t5-table"] == "shared")


class ForgetGate(nn.Module):
    """FoX (Lin et al. 2025): f_t = sigmoid(w_h.x_t + b_h) per head (data), or sigmoid(b_h) (bias);
    the logit of query t and key s gains D[t, s] = sum_{l=s+1..t} ln f_l, here as the whole
    (T, T) matrix c_t - c_s of the cumulative sums c — its query term included, which pelab drops.
    Parameters attn.fox.gate.weight (H, D), attn.fox.gate.bias (H,)."""

    def __init__(self, D, heads, data):
        super().__init__()
        self.gate = nn.Linear(D, heads, bias=True)
        if not data:
            del self.gate.weight
            self.gate.register_parameter("weight", None)
        self.data = data

    def forward(self, x):                              # x (B, T, D) -> D (B, H, T, T)
        z = self.gate(x) if self.data else self.gate.bias.expand(x.shape[0], x.shape[1], -1)
        c = F.logsigmoid(z).transpose(1, 2).cumsum(-1)  # (B, H, T)
        return c.unsqueeze(-1) - c.unsqueeze(-2)


class CoPE(nn.Module):
    """Contextual positions (Golovneva et al. 2024, Sec. 3), as the paper writes them: gates
    sigmoid of the masked logits, positions their reversed cumulative sums clamped at P - 1, the
    logits q.e[p] at integer p gathered at ceil(p) and floor(p) and mixed by p - floor(p).
    Parameter pos_emb (P, d), shared by the heads."""

    def __init__(self, P, d):
        super().__init__()
        self.pos_emb = nn.Parameter(torch.zeros(P, d))

    def forward(self, q, logits):                       # q (B, H, T, d), logits (B, H, T, T) masked
        gates = torch.sigmoid(logits)                   # 0 where masked (-inf)
        pos = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=self.pos_emb.shape[0] - 1)
        z = q @ self.pos_emb.t()                        # (B, H, T, P)
        ceil, floor = pos.ceil().long(), pos.floor().long()
        w = pos - floor
        return z.gather(-1, ceil) * w + z.gather(-1, floor) * (1 - w)


# --- SeqPE -----------------------------------------------------------------------------------------

class SeqPEEncoder(nn.Module):
    """Li et al. 2025. Position p (n coordinates) -> tokens: each coordinate's k digits in base b,
    most significant first (left-padded with 0), the coordinates one after another, then [CLS] = b.
    x_j = digit_emb[tok_j] + place_emb[j] + dim_emb[coordinate of j] (dim_emb only for n >= 2, none
    on [CLS]); L pre-norm blocks (causal attention without positional encoding, GELU MLP 4W);
    e_p = out(h_L[CLS]), or out(RMSNorm(h_L[CLS])) with the final norm."""

    def __init__(self, base, digits, dims, layers, width, heads, final_norm, D):
        super().__init__()
        self.base, self.k, self.n, self.heads = base, digits, dims, heads
        S = dims * digits + 1
        self.digit_emb = nn.Embedding(base + 1, width)
        self.place_emb = nn.Embedding(S, width)
        if dims > 1:
            self.dim_emb = nn.Embedding(dims, width)
        self.enc = nn.ModuleList(SeqPEBlock(width, heads) for _ in range(layers))
        if final_norm:
            self.final_norm = RMSNorm(width)
        self.out = nn.Linear(width, D, bias=False)

    def tokens(self, coords):
        """coords (U, n) int -> (U, S) digit ids, [CLS] last."""
        powers = self.base ** torch.arange(self.k - 1, -1, -1)                   # (k,)
        digits = (coords.long()[:, :, None] // powers) % self.base               # (U, n, k)
        cls = torch.full((coords.shape[0], 1), self.base, dtype=torch.long)
        return torch.cat((digits.reshape(coords.shape[0], -1), cls), 1)

    def forward(self, coords):
        tok = self.tokens(coords)                                                # (U, S)
        U, S = tok.shape
        x = self.digit_emb(tok) + self.place_emb.weight[None]
        if self.n > 1:
            dim = torch.arange(self.n).repeat_interleave(self.k)                # (n k,)
            x = x + F.pad(self.dim_emb(dim), (0, 0, 0, 1))[None]                 # nothing on [CLS]
        mask = torch.ones(S, S, dtype=torch.bool).triu(1)
        for block in self.enc:
            x = block(x, mask)
        h = x[:, -1]                                                             # (U, W)
        if hasattr(self, "final_norm"):
            h = self.final_norm(h)
        return self.out(h)                                                       # (U, D)


class SeqPEBlock(nn.Module):
    def __init__(self, W, heads):
        super().__init__()
        self.attn_norm, self.mlp_norm = RMSNorm(W), RMSNorm(W)
        self.attn = nn.Module()
        self.attn.qkv = nn.Linear(W, 3 * W, bias=False)
        self.attn.proj = nn.Linear(W, W, bias=False)
        self.mlp = nn.Module()
        self.mlp.fc = nn.Linear(W, 4 * W, bias=False)
        self.mlp.proj = nn.Linear(4 * W, W, bias=False)
        self.H, self.d = heads, W // heads

    def forward(self, x, mask):
        U, S, W = x.shape
        q, k, v = self.attn.qkv(self.attn_norm(x)).view(U, S, 3, self.H, self.d).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1) / math.sqrt(self.d)).masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.attn.proj((att @ v).transpose(1, 2).reshape(U, S, W))
        return x + self.mlp.proj(F.gelu(self.mlp.fc(self.mlp_norm(x)), approximate="tanh"))


class SeqPE(SeqPEEncoder):
    """The encoder (its parameters directly under pe.seqpe) and, in the attn modes with
    --seqpe-proj shared, W^p as pe.seqpe.qk, (2D, D): [pq; pk] = W^p e."""

    def __init__(self, cfg):
        D = cfg["d-model"]
        dims = cfg["seqpe-dims"] or cfg["pos-dims"]              # 0: the task's
        digits = cfg["seqpe-digits"] or (5 if dims == 1 else 2)  # 0: 5 for sequences, 2 per coordinate
        super().__init__(cfg["seqpe-base"], digits, dims, cfg["seqpe-layers"],
                         cfg["seqpe-width"] or D, cfg["seqpe-heads"] or cfg["heads"],
                         on(cfg["seqpe-final-norm"]), D)
        self.mode, self.shared = cfg["seqpe-mode"], cfg["seqpe-proj"] == "shared"
        if self.mode != "input" and self.shared:
            self.qk = nn.Linear(D, 2 * D, bias=False)


def seqpe_regularisers(model, delta_pos, target, ood_pos):
    """SeqPE's regularisers on given draws (SPEC 2.3), -> (L_delta, L_OOD, nearest (P,)).
    delta_pos (P, 1+C, n): a pivot, then its candidates; the target is the candidate nearest the
    pivot in Euclidean distance (the first of ties), here recomputed as `nearest` (pelab's `target`
    is only used to report a difference); L_delta = mean over pivots of cross-entropy of the logits
    e_p . e_c at the target. ood_pos (S, 2m, n): m teachers, then m students; with e split into H
    head chunks, L_OOD = mean over sets, heads, rows of KL(softmax(teacher sims) || softmax(student
    sims)), the teachers detached; with --seqpe-ood-loss authors, KL(P||S) + KL(S||P) through
    F.kl_div's default reduction, the mean over every (set, head, i, j), as the SeqPE authors'
    code computes it."""
    enc, H = model.pe.seqpe, model.cfg["heads"]
    P, C1, n = delta_pos.shape
    e = enc(delta_pos.reshape(-1, n)).view(P, C1, -1)                           # (P, 1+C, D)
    logits = (e[:, :1] * e[:, 1:]).sum(-1)                                       # (P, C)
    dist = ((delta_pos[:, 1:] - delta_pos[:, :1]).double() ** 2).sum(-1)         # (P, C)
    nearest = torch.tensor([int(np.argmin(row)) for row in dist.numpy()])       # first of ties
    l_delta = F.cross_entropy(logits, nearest)
    S, M2, _ = ood_pos.shape
    m = M2 // 2
    e = enc(ood_pos.reshape(-1, n)).view(S, M2, H, -1).transpose(1, 2)           # (S, H, 2m, dh)
    t, st = e[:, :, :m].detach(), e[:, :, m:]
    lp = (t @ t.transpose(-1, -2)).log_softmax(-1)
    ls = (st @ st.transpose(-1, -2)).log_softmax(-1)
    if model.cfg["seqpe-ood-loss"] == "authors":
        l_ood = (F.kl_div(ls, lp, log_target=True, reduction="mean")
                 + F.kl_div(lp, ls, log_target=True, reduction="mean"))
    else:
        l_ood = (lp.exp() * (lp - ls)).sum(-1).mean()
    return l_delta, l_ood, nearest


# --- the model -------------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D = cfg["d-model"]
        self.H, self.d = cfg["heads"], D // cfg["heads"]
        self.qkv = nn.Linear(D, 3 * D, bias=False)   # rows: [q; k; v], head h at rows h*d..
        self.proj = nn.Linear(D, D, bias=False)
        self.pope = make_posenc(cfg)                 # 'pope' names its parameter attn.pope.delta
        if cfg["pe"] == "seqpe" and cfg["seqpe-mode"] != "input" and cfg["seqpe-proj"] == "per-layer":
            self.seqpe = nn.Module()                 # blocks.{l}.attn.seqpe.qk.weight, (2D, D)
            self.seqpe.qk = nn.Linear(D, 2 * D, bias=False)
        if cfg["pe"] == "rope2d-mixed":              # blocks.{l}.attn.rope2d_mixed.theta
            self.rope2d_mixed = RoPE2DMixed(self.H, self.d)
        if cfg["pe"] == "pope2d":                    # blocks.{l}.attn.pope2d.delta
            self.pope2d = PoPE2D(self.H, self.d, cfg["pope2d-base"])
        if cfg["pe"] == "fox":                       # blocks.{l}.attn.fox.gate.*
            self.fox = ForgetGate(D, self.H, cfg["fox-gate"] == "data")
        if cfg["pe"] == "cope" and cfg["cope-table"] == "per-layer":  # blocks.{l}.attn.cope.pos_emb
            self.cope = CoPE(cfg["cope-max-pos"], self.d)
        self.bias_name = None                        # a per-layer bias encoding: attn.<name>.*
        if not bias_is_shared(cfg):
            self.bias_name, bias = make_bias(cfg)
            if bias is not None:
                setattr(self, self.bias_name, bias)

    def forward(self, x, pos, mask, shared_bias=None, seqpe=None, cope=None):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.H, self.d).permute(2, 0, 3, 1, 4)  # (B, H, T, d)
        q, k = self.pope(q, k, pos)                                                  # (B, H, T, dq)
        if hasattr(self, "rope2d_mixed"):
            q, k = self.rope2d_mixed(q, k, pos)
        if hasattr(self, "pope2d"):
            q, k = self.pope2d(q, k, pos)
        if seqpe is not None:                                  # (mode, e (B, T, D), shared W^p or None)
            mode, e, qk = seqpe
            pq, pk = (qk if qk is not None else self.seqpe.qk)(e).view(B, T, 2, self.H, self.d).permute(2, 0, 3, 1, 4)
            if mode == "attn-add":
                q, k = q + pq, k + pk
            elif mode == "attn-mul":
                q, k = q * pq, k * pk
            else:                                              # attn-bias: q.k + pq.pk
                q, k = torch.cat((q, pq), -1), torch.cat((k, pk), -1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d)                          # (B, H, T, T)
        bias = getattr(self, self.bias_name)(pos) if self.bias_name else shared_bias
        if bias is not None:
            att = att + bias.to(att.dtype)
        if hasattr(self, "fox"):
            att = att + self.fox(x)
        att = att.masked_fill(mask, float("-inf"))
        cope = getattr(self, "cope", cope)
        if cope is not None:
            att = att + cope(q, att)
        att = att.softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D, M = cfg["d-model"], cfg["mlp-mult"] * cfg["d-model"]
        self.fc = nn.Linear(D, M, bias=False)
        self.proj = nn.Linear(M, D, bias=False)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D = cfg["d-model"]
        self.attn_norm = RMSNorm(D)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(D)
        self.mlp = MLP(cfg)

    def forward(self, h, pos, mask, shared_bias=None, seqpe=None, cope=None):
        h = h + self.attn(self.attn_norm(h), pos, mask, shared_bias, seqpe, cope)
        return h + self.mlp(self.mlp_norm(h))


class Twin(nn.Module):
    def __init__(self, cfg, dtype=torch.float64):
        super().__init__()
        cfg = parse_config(cfg)  # idempotent: accepts raw metadata or a parsed dict
        if float(cfg["dropout"]) != 0:
            raise ValueError("the twin has no dropout (dropout %g)" % cfg["dropout"])
        self.cfg = cfg
        V, D = cfg["vocab"], cfg["d-model"]
        self.patches = cfg["input-dim"] > 0
        if self.patches:      # the image task: patch embedding, class token, classifier
            self.patch_emb = nn.Linear(cfg["input-dim"], D, bias=True)
            self.cls_token = nn.Parameter(torch.zeros(D))
        else:
            self.tok_emb = nn.Embedding(V, D)
        if cfg["pe"] == "learned2d":
            self.pos_emb2d = AbsolutePE2D(cfg)   # its table is pos_emb2d.weight
        elif cfg["pe"] == "sinusoidal2d":
            self.sin2d_emb = AbsolutePE2D(cfg)
        if cfg["pe"] == "learned":
            self.pos_emb = AbsolutePE(cfg)       # its table is pos_emb.weight
        elif cfg["pe"] == "sinusoidal":
            self.sin_emb = AbsolutePE(cfg)       # no parameters
        elif cfg["pe"] == "seqpe":
            self.pe = nn.Module()
            self.pe.seqpe = SeqPE(cfg)           # pe.seqpe.*
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg["layers"]))
        self.final_norm = RMSNorm(D)
        if self.patches:
            self.classifier = nn.Linear(D, V, bias=False)
            self.lm_head = None
        else:
            self.lm_head = None if on(cfg["tied"]) else nn.Linear(D, V, bias=False)
        if bias_is_shared(cfg):                      # one bias for every layer: pe.<name>.*
            name, bias = make_bias(cfg)
            self.pe = nn.Module()
            setattr(self.pe, name, bias)
            self.shared_bias = bias
        else:
            self.shared_bias = None
        if cfg["pe"] == "cope" and cfg["cope-table"] == "shared":   # pe.cope.pos_emb
            self.pe = nn.Module()
            self.pe.cope = CoPE(cfg["cope-max-pos"], D // cfg["heads"])
        self.gpt2_init()
        self.to(dtype)

    def gpt2_init(self, seed=0):
        """N(0, 0.02) matrices, residual projections N(0, 0.02 / sqrt(2N)), gains 1,
        PoPE delta uniform in [-2pi, 0] (when the config says uniform) — for the bench."""
        g = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            with torch.no_grad():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                elif ".t5." in name:
                    p.zero_()
                elif ".fire." in name:
                    if name.endswith(".c"):
                        p.fill_(0.1)
                    elif name.endswith(".ell"):
                        p.fill_(1.0)
                    else:                            # nn.Linear's own init: +-1/sqrt(fan_in)
                        bound = 1 / math.sqrt(self.cfg["fire-width"] if ".layers.0." not in name else 1)
                        p.uniform_(-bound, bound, generator=g)
                elif ".cope." in name:
                    p.zero_()
                elif ".fox.gate.bias" in name:
                    p.fill_(self.cfg["fox-bias-init"])
                elif ".pope." in name:
                    if self.cfg["pope-delta-init"] == "uniform":
                        p.uniform_(-2 * math.pi, 0, generator=g)
                    else:
                        p.zero_()
                else:
                    std = 0.02
                    if name.endswith("attn.proj.weight") or name.endswith("mlp.proj.weight"):
                        std /= math.sqrt(2 * self.cfg["layers"])
                    p.normal_(0, std, generator=g)

    def forward(self, tokens, pos, targets=None, inputs=None):
        """tokens, targets: (B, T) int (targets -1: no loss), pos (B, T) or (B, T, 2); a patch model
        reads inputs (B, T, P) instead of tokens, token 0 being the class token -> logits (B, T, V),
        loss or None."""
        B, T = tokens.shape
        mask = torch.ones(T, T, dtype=torch.bool, device=tokens.device).triu(1)  # s > t masked
        if on(self.cfg["bidirectional"]):
            mask = torch.zeros(T, T, dtype=torch.bool, device=tokens.device)
        if self.patches:
            e = self.patch_emb(inputs.to(self.cls_token.dtype))
            h = torch.cat((self.cls_token.expand(B, 1, -1), e[:, 1:]), 1)
        else:
            h = self.tok_emb(tokens.long())
        for absolute in ("pos_emb", "sin_emb", "pos_emb2d", "sin2d_emb"):
            if hasattr(self, absolute):
                h = h + getattr(self, absolute)(pos).to(h.dtype)
        shared_bias = self.shared_bias(pos) if self.shared_bias is not None else None
        seqpe = None
        if self.cfg["pe"] == "seqpe":
            sq = self.pe.seqpe
            e = sq(pos.reshape(-1, sq.n)).view(B, T, -1)                     # (B, T, D)
            if sq.mode == "input":
                h = h + e
            else:
                seqpe = (sq.mode, e, sq.qk if sq.shared else None)
        cope = self.pe.cope if hasattr(self, "pe") and hasattr(self.pe, "cope") else None
        for block in self.blocks:
            h = block(h, pos, mask, shared_bias, seqpe, cope)
        h = self.final_norm(h)
        if self.patches:
            W = self.classifier.weight
        else:
            W = self.tok_emb.weight if self.lm_head is None else self.lm_head.weight
        logits = h @ W.t()
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1).long(),
                                   ignore_index=-1)
        return logits, loss

    def load_arrays(self, arrays, prefix=""):
        """Sets every parameter from {prefix + name: array}; names must match both ways."""
        own = dict(self.named_parameters())
        theirs = {k[len(prefix):] for k in arrays if k.startswith(prefix)}
        if set(own) != theirs:
            raise ValueError("parameter names differ: only in file %s, only in twin %s"
                             % (sorted(theirs - set(own)), sorted(set(own) - theirs)))
        with torch.no_grad():
            for name, p in own.items():
                a = torch.from_numpy(np.array(arrays[prefix + name]))
                if tuple(a.shape) != tuple(p.shape):
                    raise ValueError("%s: shape %s in file, %s in twin"
                                     % (name, tuple(a.shape), tuple(p.shape)))
                p.copy_(a.to(p.dtype))


def decays(name, p):
    """pelab's rule: decoupled weight decay on matrices (ndim >= 2), never on gains or on the
    positional encoding's parameters (named '.pope.' etc.)."""
    return (p.ndim >= 2 and ".pope." not in name and not name.startswith("pos_emb.")
            and not name.startswith("pos_emb2d.") and ".rope2d_mixed." not in name
            and ".pope2d." not in name and ".cope." not in name
            and ".seqpe." not in name and not is_bias_param(name))


def is_bias_param(name):
    """The bias encodings' parameters: per layer under attn.t5 / attn.fire, shared under pe."""
    return ".t5." in name or ".fire." in name or name.startswith("pe.")


def adamw(model, lr, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, **kw):
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if decays(n, p)], "weight_decay": weight_decay},
              {"params": [p for n, p in named if not decays(n, p)], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, **kw)


def from_safetensors(path, dtype=torch.float64):
    """Builds the twin from a pelab model.safetensors (config in metadata 'pelab.config')."""
    arrays, meta = read_safetensors(path)
    prefix = "pelab.config."                     # one entry per setting, as a run's files have
    raw = meta.get("pelab.config") or {k[len(prefix):]: v for k, v in meta.items() if k.startswith(prefix)}
    if not raw:
        raise ValueError("%s: no 'pelab.config' settings in the metadata" % path)
    model = Twin(parse_config(raw), dtype)
    model.load_arrays(arrays)
    return model


# --- the twin's own checks (run by twin_check.py before comparing with pelab) -----------------------

def self_test():
    """Properties the formulas imply, checked in float64. Returns a list of (name, error, tol)."""
    torch.manual_seed(0)
    out = []
    B, H, T, d = 2, 3, 9, 8
    q, k = torch.randn(B, H, T, d, dtype=torch.float64), torch.randn(B, H, T, d, dtype=torch.float64)
    pos = torch.arange(T)[None].repeat(B, 1) + 5 * torch.arange(B)[:, None]   # (B, T), shifted rows
    for layout in ("interleaved", "half"):
        rope = RoPE(d, 10000.0, layout)
        q2, k2 = rope(q, k, pos)
        out.append(("rope-%s keeps norms" % layout, (q2.norm(dim=-1) - q.norm(dim=-1)).abs().max().item(), 1e-13))
        # q'.k' depends only on t - s: compare with the rotation by (t - s) applied to q alone
        s_ = (q2 @ k2.transpose(-2, -1))
        rel = pos[:, :, None] - pos[:, None, :]                                  # (B, T, T)
        a = rel.to(torch.float64)[..., None] * torch.as_tensor(rope.theta)       # (B, T, T, d/2)
        if layout == "interleaved":
            qa, qb, ka, kb = q[..., 0::2], q[..., 1::2], k[..., 0::2], k[..., 1::2]
        else:
            qa, qb, ka, kb = q[..., :d // 2], q[..., d // 2:], k[..., :d // 2], k[..., d // 2:]
        # Re[(qa + i qb) conj(ka + i kb) e^{i(t-s)theta}]
        direct = ((qa[:, :, :, None] * ka[:, :, None] + qb[:, :, :, None] * kb[:, :, None]) * a.cos()[:, None]
                  + (qa[:, :, :, None] * kb[:, :, None] - qb[:, :, :, None] * ka[:, :, None]) * a.sin()[:, None]).sum(-1)
        out.append(("rope-%s score is relative" % layout, (s_ - direct).abs().max().item(), 1e-12))
    for softplus in (True, False):
        pope = PoPE(H, d, 10000.0, softplus, True).double()
        with torch.no_grad():
            pope.delta.uniform_(-7, 1)   # some outside [-2pi, 0], to exercise the clamp
        q2, k2 = pope(q, k, pos)
        mq = F.softplus(q) if softplus else q
        mk = F.softplus(k) if softplus else k
        delta = pope.delta.clamp(-2 * math.pi, 0)                                 # (H, d)
        rel = (pos[:, :, None] - pos[:, None, :]).to(torch.float64)              # (B, T, T)
        ang = rel[:, None, :, :, None] * torch.as_tensor(pope.theta) - delta[None, :, None, None, :]
        direct = (mq[:, :, :, None] * mk[:, :, None] * ang.cos()).sum(-1)        # (B, H, T, T)
        out.append(("pope (softplus %s) score = sum mu mu cos((t-s)theta - delta)" % ("on" if softplus else "off"),
                    (q2 @ k2.transpose(-2, -1) - direct).abs().max().item(), 1e-12))
    # pelab's clamp passes gradient on [-2pi, 0] inclusive, as torch.clamp does: confirm torch's side
    x = torch.tensor([0.0, -2 * math.pi, 1e-3, -7.0, -1.0], dtype=torch.float64, requires_grad=True)
    x.clamp(-2 * math.pi, 0).sum().backward()
    out.append(("clamp gradient is 1 on [-2pi, 0] inclusive",
                (x.grad - torch.tensor([1.0, 1, 0, 0, 1], dtype=torch.float64)).abs().max().item(), 0.0))
    # whole model: shifting every position by a constant leaves logits unchanged for rope/pope
    for pe in ("rope", "pope"):
        cfg = {"vocab": 11, "max-seq": T, "d-model": 16, "heads": 2, "layers": 2, "pe": pe,
               "pope-delta-init": "uniform"}
        m = Twin(cfg)
        tok = torch.randint(0, 11, (B, T))
        l1, _ = m(tok, pos)
        l2, _ = m(tok, pos + 1000)
        out.append(("%s model is shift invariant" % pe, (l1 - l2).abs().max().item(), 1e-10))
    # xpos is relative too; learned and sinusoidal are absolute
    for pe, relative in (("xpos", True), ("learned", False), ("sinusoidal", False)):
        cfg = {"vocab": 11, "max-seq": T, "d-model": 16, "heads": 2, "layers": 2, "pe": pe,
               "ape-max-len": 2048, "xpos-scale-base": 16}
        m = Twin(cfg)
        tok = torch.randint(0, 11, (B, T))
        l1, _ = m(tok, pos)
        l2, _ = m(tok, pos + 1000)
        change = (l1 - l2).abs().max().item()
        out.append(("%s model is %sshift invariant" % (pe, "" if relative else "not "),
                    change if relative else float(change < 1e-3), 1e-10 if relative else 0.0))
    # each length-extension method at s = 1 is RoPE (dynamic-ntk: up to L_train)
    rope = RoPE(d, 10000.0, "interleaved")
    for method in ("pi", "ntk", "dynamic-ntk", "yarn"):
        scaled = RoPEScaled(d, 10000.0, "interleaved", False, method, 1.0, 64, 32.0, 1.0)
        err = max((a - b).abs().max().item() for a, b in zip(scaled(q, k, pos), rope(q, k, pos)))
        out.append(("rope %s at scale 1 is rope" % method,
                    err + abs(getattr(scaled, "amp", 1.0) - 1), 0.0))
    # bias encodings: published ALiBi slopes; T5 buckets; alibi/t5 models shift invariant; FIRE
    # invariant only while every query stays below L (its normaliser is then the constant psi(L))
    published = {8: [2.0 ** -i for i in range(1, 9)], 16: [2.0 ** (-i / 2) for i in range(1, 17)],
                 12: [2.0 ** -i for i in range(1, 9)] + [2.0 ** -0.5, 2.0 ** -1.5, 2.0 ** -2.5, 2.0 ** -3.5]}
    out.append(("alibi slopes for 8, 12, 16 heads are the published ones",
                max(abs(a - b) for H, ref in published.items() for a, b in zip(alibi_slopes(H), ref)), 0.0))
    t5 = T5Bias(1, 32, 128)
    n = torch.tensor([0, 1, 15, 16, 17, 20, 24, 32, 48, 64, 100, 127, 128, 1000])
    got = t5.bucket(torch.stack((n, torch.zeros_like(n)), 1).reshape(1, -1))[0, 0::2, 1]
    want = torch.tensor([0, 1, 15, 16, 16, 17, 19, 21, 24, 26, 30, 31, 31, 31])
    out.append(("t5 buckets (32 buckets, max distance 128)", float((got - want).abs().max()), 0.0))
    for pe, extra, shift, invariant in (("alibi", {}, 1000, True), ("t5", {"t5-buckets": 8, "t5-max-distance": 6}, 1000, True),
                                        ("fire", {}, 3, True), ("fire", {}, 1000, False)):
        cfg = dict({"vocab": 11, "max-seq": 20, "d-model": 16, "heads": 2, "layers": 2, "pe": pe}, **extra)
        m = Twin(cfg)
        with torch.no_grad():
            for name, p in m.named_parameters():
                if ".t5." in name or name.startswith("pe."):
                    p.normal_(0, 1)
        tok = torch.randint(0, 11, (B, T))
        l1, _ = m(tok, pos)     # every position < 20 = L_train
        l2, _ = m(tok, pos + shift)
        d = (l1 - l2).abs().max().item()
        out.append(("%s model %s under a shift of %d" % (pe, "unchanged" if invariant else "changed", shift),
                    d if invariant else float(d < 1e-6), 1e-10 if invariant else 0.0))
    # SeqPE's digit sequences: 123 in 5 decimal digits; (2, 7) in 2 base-3 digits per coordinate
    e1, e2 = SeqPEEncoder(10, 5, 1, 1, 4, 1, False, 4), SeqPEEncoder(3, 2, 2, 1, 4, 1, False, 4)
    got = e1.tokens(torch.tensor([[123]])).tolist() + e2.tokens(torch.tensor([[2, 7]])).tolist()
    out.append(("seqpe digits of 123 and (2, 7)",
                0.0 if got == [[0, 0, 1, 2, 3, 10], [0, 2, 2, 1, 3]] else 1.0, 0.0))
    # safetensors round trip
    import os
    import tempfile
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1.5, -2.0]),
              "c": np.array([[1, -1]], dtype=np.int32), "d": np.array([7], dtype=np.int64)}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.safetensors")
        write_safetensors(path, arrays, {"x": "y"})
        back, meta = read_safetensors(path)
    same = meta == {"x": "y"} and all(back[n].dtype == a.dtype and np.array_equal(back[n], a)
                                     for n, a in arrays.items())
    out.append(("safetensors round trip", 0.0 if same else 1.0, 0.0))
    return out


if __name__ == "__main__":
    bad = 0
    for name, err, tol in self_test():
        ok = err <= tol
        bad += not ok
        print("%-4s %-62s %.3g (tol %.0e)" % ("ok" if ok else "FAIL", name, err, tol))
    raise SystemExit(1 if bad else 0)
