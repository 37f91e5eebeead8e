#!/usr/bin/env python3
"""Data-parallel scaling of pelab (docs/DISTRIBUTED.md): measured on this machine, projected to a
cluster.

  python3 bench/mpi_scaling.py measure [--configs A B C D] [--reps 3] [--out bench/mpi_last.json]
  python3 bench/mpi_scaling.py project [--in bench/mpi_last.json] [--batch 64] [--accum 1 8]
                                       [--node-speed 1 32]

measure: bench_train (make bench) on each configuration, 1 rank x 2 threads and 2 ranks x 1
thread (mpirun) run alternately, `reps` times each; the medians of tokens/s, of the step time and
(2 ranks) of the time a rank waits for the other before the allreduce and of the allreduce itself
go to the JSON file with the parameter count.

project: for N = 2..64 nodes of this machine's speed, a fixed global batch of `batch` sequences
per micro-batch and `accum` micro-batches per update (the same global batch for any N, as
`mpirun pelab train` keeps it), each node computes batch/N rows per micro-batch and the gradient
is summed once per update by a ring allreduce:

  t_compute(N) = accum * batch * t_row / N       t_row: measured step time / B, 1 rank x 2 threads
  t_comm(N)    = 2 (N-1)/N * G / bandwidth         G: gradient bytes, 4 per parameter (float32)

(bandwidth only: latency and the overlap of communication with the backward pass are left out).
Communication dominates once t_comm > t_compute, that is from

  N* = 1 + accum * batch * t_row * bandwidth / (2 G)

nodes on: accumulation moves N* out in proportion to accum, and nodes k times as fast as the
measuring machine (--node-speed k) bring it in k times.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

NETWORKS = [("25 Gb/s Ethernet", 25e9 / 8), ("100 Gb/s InfiniBand", 100e9 / 8)]
NODES = [2, 4, 8, 16, 32, 64]
BATCH = {"A": 32, "B": 64, "C": 8, "D": 4}  # B of each configuration (bench/bench_train.c)
BENCH = "build/bench/bench_train"


def run(cmd, env):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads([l for l in out.splitlines() if l.startswith("{")][-1])


def measure(args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_WAIT_POLICY="passive", OMPI_MCA_btl="self,vader")
    if not os.access(BENCH, os.X_OK):
        sys.exit(f"{BENCH} is missing: run 'make bench' (or make {BENCH})")
    results = []
    for c in args.configs:
        one, two = [], []
        for _ in range(args.reps):
            one.append(run([BENCH, "--config", c, "--pe", args.pe, "--threads", "2"], env))
            two.append(run(["mpirun", "--bind-to", "none", "-np", "2", BENCH, "--config", c,
                            "--pe", args.pe, "--threads", "1"], env))
            print(c, "1x2", one[-1]["tokens_per_s"], "2x1", two[-1]["tokens_per_s"],
                  file=sys.stderr)
        med = lambda rs, k: statistics.median(r[k] for r in rs)
        results.append({
            "config": c, "pe": args.pe, "B": BATCH[c], "params": one[0]["params"],
            "reps": args.reps,
            "one_rank_two_threads": {"tokens_per_s": med(one, "tokens_per_s"),
                                     "step_ms": med(one, "step_ms"),
                                     "runs": [r["tokens_per_s"] for r in one]},
            "two_ranks_one_thread": {"tokens_per_s": med(two, "tokens_per_s"),
                                     "step_ms": med(two, "step_ms"),
                                     "wait_ms": med(two, "wait_ms"),
                                     "allreduce_ms": med(two, "allreduce_ms"),
                                     "runs": [r["tokens_per_s"] for r in two]},
        })
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print("config  params      1 rank x 2 threads   2 ranks x 1 thread   ratio   "
          "per step: wait, allreduce, step")
    for r in results:
        a, b = r["one_rank_two_threads"], r["two_ranks_one_thread"]
        print(f"{r['config']:<7} {r['params']:>10,}  {a['tokens_per_s']:>12,.0f} tok/s  "
              f"{b['tokens_per_s']:>12,.0f} tok/s  {b['tokens_per_s'] / a['tokens_per_s']:5.2f}"
              f"  {b['wait_ms']:.1f}, {b['allreduce_ms']:.1f}, {b['step_ms']:.0f} ms")


def project(args):
    with open(args.input) as f:
        results = json.load(f)
    print(f"global batch {args.batch} sequences per micro-batch; t_update: one node's compute per "
          f"update; N*: nodes from which t_comm > t_compute; efficiency t_compute / (t_compute + "
          f"t_comm) at {', '.join(map(str, NODES))} nodes\n")
    print("| config | gradient | node speed | accum | t_update, 1 node | network | N* | "
          + " | ".join(f"{n}" for n in NODES) + " |")
    print("|---" * (7 + len(NODES)) + "|")
    for r in results:
        G = 4 * r["params"]
        for speed in args.node_speed:
            t_row = r["one_rank_two_threads"]["step_ms"] / 1e3 / r["B"] / speed
            for accum in args.accum:
                t_all = accum * args.batch * t_row
                for name, bw in NETWORKS:
                    nstar = 1 + t_all * bw / (2 * G)
                    cells = []
                    for n in NODES:
                        tc, tm = t_all / n, 2 * (n - 1) / n * G / bw
                        cells.append(f"{100 * tc / (tc + tm):.0f}%")
                    print(f"| {r['config']} | {G / 1e6:.1f} MB | {speed:g}x | {accum} | "
                          f"{t_all:.2f} s | {name} | {nstar:,.0f} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--configs", nargs="+", default=["A", "B", "C", "D"])
    m.add_argument("--pe", default="rope")
    m.add_argument("--reps", type=int, default=3)
    m.add_argument("--out", default="bench/mpi_last.json")
    p = sub.add_parser("project")
    p.add_argument("--in", dest="input", default="bench/mpi_last.json")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--accum", type=int, nargs="+", default=[1, 8])
    p.add_argument("--node-speed", type=float, nargs="+", default=[1],
                   help="nodes this many times as fast as the measuring machine (t_row / speed)")
    args = ap.parse_args()
    measure(args) if args.cmd == "measure" else project(args)


if __name__ == "__main__":
    main()
