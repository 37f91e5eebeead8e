"""twin_bench — training throughput of the PyTorch twin, as bench/bench_train does it.

    /usr/bin/python3 bench/twin_bench.py --config NAME --pe rope|pope [--steps N] [--warmup N]
                                         [--threads N] [--eval-T N] [--precision fp32|bf16]

float32 by default; --precision bf16 runs the forward pass (and the loss) under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's CPU mixed precision: its matrix products
take bf16 operands, the weights and the optimizer stay float32.

The configurations of bench/configs.h, same step (zero_grad, forward, backward, clip_grad_norm_(1.0), AdamW),
random tokens with a target at every position, pos = t; prints one JSON line like bench_train.
With --eval-T N it times instead what build/bench/bench_eval does: forward passes of the
configuration at batch 1 and length N under torch.no_grad() (one untimed, then --steps, default
1), and prints tokens/s, seconds per forward and the peak RSS, like bench_eval.
"""
import argparse
import json
import os
import resource
import re
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import pelab_twin  # noqa: E402



def read_configs():
    """bench/configs.h's table, one row a line: {"A", V, D, layers, heads, T, B, steps, warmup,
    patch_dim, grid}. Returns {name: (V, D, layers, heads, T, B, steps, warmup)} and {name: (patch
    width, grid side)} for the image configurations."""
    configs, image = {}, {}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs.h")
    for line in open(path):
        m = re.match(r'\s*\{"(\w+)",([\d,\s]+)\},?\s*$', line)
        if m:
            v = [int(x) for x in m.group(2).split(",") if x.strip()]
            configs[m.group(1)] = tuple(v[:8])
            if v[8]:
                image[m.group(1)] = (v[8], v[9])
    return configs, image


CONFIGS, IMAGE = read_configs()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--pe", required=True, choices=["nope", "rope", "pope", "fire", "fox", "cope"],
                    help="configuration I (images) takes rope or pope, in their 2-D forms")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default per configuration)")
    ap.add_argument("--warmup", type=int, default=-1, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    ap.add_argument("--eval-T", type=int, default=0, help="time evaluation forwards at batch 1, this length")
    ap.add_argument("--random-positions", type=int, default=0,
                    help="N: every step draws each row's positions, a sorted random subset of [0, N)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: the forward under torch.autocast(cpu, bfloat16)")
    a = ap.parse_args()
    if a.eval_T > 0:
        return evaluate(a)
    V, D, layers, heads, T, B, steps, warmup = CONFIGS[a.config]
    steps = a.steps if a.steps > 0 else steps
    warmup = a.warmup if a.warmup >= 0 else warmup
    torch.set_num_threads(a.threads if a.threads > 0 else os.cpu_count())

    cfg = {"vocab": V, "max-seq": T, "d-model": D, "heads": heads, "layers": layers, "pe": a.pe,
           "pope-softplus": "on", "pope-delta": "on"}
    image = a.config in IMAGE
    if image:  # as bench_train: the 2-D forms of rope and pope, bidirectional, labels on token 0
        P, G = IMAGE[a.config]
        cfg.update({"pe": a.pe + "2d", "input-dim": P, "pos-dims": 2, "bidirectional": "on", "grid": G})
    model = pelab_twin.Twin(cfg, torch.float32)
    model.train()
    # foreach: torch 1.13's faster multi-tensor AdamW (same arithmetic as the default loop)
    opt = pelab_twin.adamw(model, lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, foreach=True)
    params = list(model.parameters())
    g = torch.Generator().manual_seed(42)
    tokens = torch.randint(0, V, (B, T), generator=g)
    targets = torch.randint(0, V, (B, T), generator=g)
    pos = torch.arange(T).repeat(B, 1)
    inputs = None
    if image:
        tokens.zero_()
        targets[:, 1:] = -1
        t = torch.arange(1, T)
        grid = torch.stack((1 + (t - 1) // G, 1 + (t - 1) % G), 1)              # (T-1, 2)
        pos = torch.cat((torch.zeros(1, 2, dtype=torch.long), grid)).repeat(B, 1, 1)
        inputs = torch.randn(B, T, P, generator=g)

    t0 = 0.0
    for s in range(warmup + steps):
        if s == warmup:
            t0 = time.perf_counter()
        if a.random_positions:  # as bench_train: T of [0, N) per row, sorted (timed: pelab's draw is)
            pos = torch.rand(B, a.random_positions, generator=g).argsort(1)[:, :T].sort(1).values
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            _, loss = model(tokens, pos, targets, inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    elapsed = time.perf_counter() - t0
    print(json.dumps({"config": a.config, "pe": a.pe, "random_positions": a.random_positions,
                      "precision": a.precision,
                      "images_per_s": round(B * steps / elapsed, 1) if image else 0,
                      "tokens_per_s": round(B * T * steps / elapsed, 1),
                      "step_ms": round(1e3 * elapsed / steps, 3), "steps": steps,
                      "threads": torch.get_num_threads(), "loss": round(loss.item(), 4)},
                     separators=(",", ":")))


def evaluate(a):
    V, D, layers, heads, _, _, _, _ = CONFIGS[a.config]
    T = a.eval_T
    steps = a.steps if a.steps > 0 else 1
    torch.set_num_threads(a.threads if a.threads > 0 else os.cpu_count())
    cfg = {"vocab": V, "max-seq": T, "d-model": D, "heads": heads, "layers": layers, "pe": a.pe,
           "pope-softplus": "on", "pope-delta": "on"}
    model = pelab_twin.Twin(cfg, torch.float32)
    model.eval()
    g = torch.Generator().manual_seed(42)
    tokens = torch.randint(0, V, (1, T), generator=g)
    targets = torch.randint(0, V, (1, T), generator=g)
    pos = torch.arange(T).unsqueeze(0)
    with torch.no_grad():
        for s in range(1 + steps):
            if s == 1:
                t0 = time.perf_counter()
            _, loss = model(tokens, pos, targets)
    per = (time.perf_counter() - t0) / steps
    print(json.dumps({"T": T, "config": a.config, "pe": a.pe, "forward": "twin",
                      "tokens_per_s": round(T / per, 1), "forward_s": round(per, 3),
                      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "threads": torch.get_num_threads(), "loss": round(loss.item(), 4)},
                     separators=(",", ":")))


if __name__ == "__main__":
    main()
