"""The data-parallel step of ``examples/data_parallel.py`` on every GPU: one graph launch against eager launches.

One process per GPU (``--world``, default every GPU). Each step is a gradient kernel, an NCCL all-reduce of
the gradient and an update kernel, as the example builds them:

- **graph**: ``exe.launch(stream, x=batch_x, y=batch_y)``, one launch of the explicit definition whose
  all-reduce is a capture region (one child-graph node), the batch rebound every step;
- **eager**: the same work issued one call at a time on the same stream: ``cudagraph.launch`` of each
  kernel and the all-reduce (``torch.distributed`` on the stream, or CuPy's NCCL communicator).

``--steps`` steps per round, ``--rounds`` rounds with the two paths interleaved, every process starting a
round together (an eager all-reduce of a flag); rank 0's times, median of the rounds: the host time of
issuing the steps, and the time per step with the stream synchronized at the end of the round. Printed
with the ratio graph / eager and the time per node of the step.

With one GPU there is one process and NCCL's all-reduce has nothing to sum: PyTorch's in-place all-reduce
returns without launching anything, so the step is the two kernels (say so beside the figures).

Run: ``PYTHONPATH=src python3 bench/multi_gpu.py [--world N] [--steps 200] [--rounds 7] [-n 4096]
[--comm torch|cupy]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import data_parallel as dp  # the example's step, kernels and ranks
from _common import fmt


def rounds(r: dp.Rank, g: Any, steps: int, count: int) -> dict[str, dict[str, list[float]]]:
    """Seconds per step of each path (``g``: the step's definition), host and synchronized, one sample per
    round."""
    import torch

    x0, y0 = r.batches[0]
    exe = g.instantiate(x=x0, y=y0)
    ts = torch.cuda.ExternalStream(int(r.stream.handle), device=torch.device("cuda", r.rank))

    def graph(t: int) -> None:
        x, y = r.batches[t % dp.BATCHES]
        exe.launch(r.stream, x=x, y=y)

    def eager(t: int) -> None:
        x, y = r.batches[t % dp.BATCHES]
        r.eager_step(x, y, ts)

    paths = {"eager": eager, "graph": graph}
    out: dict[str, dict[str, list[float]]] = {p: {"host": [], "synced": []} for p in paths}
    try:
        for rnd in range(count + 1):  # the first round warms up
            for name, step in paths.items():
                r.stream.sync()
                r.agree(True)  # every process starts the round together
                t0 = time.perf_counter()
                for t in range(steps):
                    step(t)
                t1 = time.perf_counter()
                r.stream.sync()
                t2 = time.perf_counter()
                if rnd:
                    out[name]["host"].append((t1 - t0) / steps)
                    out[name]["synced"].append((t2 - t0) / steps)
    finally:
        exe.close()
    return out


def report(world: int, comm: str, nodes: int, times: dict[str, dict[str, list[float]]], kinds: str) -> None:
    """Rank 0's table and ratios."""
    us = {p: {k: statistics.median(v) * 1e6 for k, v in times[p].items()} for p in ("eager", "graph")}
    print(f"{world} process(es), one per GPU; all-reduce through {comm}; the all-reduce region holds {kinds}")
    if world == 1:
        print("(one process: NCCL's all-reduce has nothing to sum and records nothing; the step is its two kernels)")
    print("\n| path | host µs/step | µs/step, synchronized | µs per driver node |")
    print("|---|---:|---:|---:|")
    for p, label in (("eager", "eager: cudagraph.launch x2 + all-reduce"), ("graph", "graph: exe.launch(s, x=, y=)")):
        print(f"| {label} | {fmt(us[p]['host'])} | {fmt(us[p]['synced'])} | {fmt(us[p]['synced'] / max(nodes, 1))} |")
    print(
        f"\nratio graph / eager, host: {us['graph']['host'] / us['eager']['host']:.3f}; "
        f"synchronized: {us['graph']['synced'] / us['eager']['synced']:.3f} ({nodes} nodes a step)"
    )


def worker(rank: int, world: int, opts: argparse.Namespace, rendezvous: Any) -> None:
    r = dp.open_rank(rank, world, opts.n, opts.comm, rendezvous)
    try:
        g = r.step_graph()
        times = rounds(r, g, opts.steps, opts.rounds)
        if rank == 0:
            nodes = len(g) - 1 + len(g.nodes[1].body)  # the region's child graph holds what NCCL recorded
            report(world, r.comm.name, nodes, times, dp.region_kinds(g))
    finally:
        r.comm.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=0, help="processes, one per GPU (default: every GPU)")
    ap.add_argument("--steps", type=int, default=200, help="steps per round (default 200)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    ap.add_argument("-n", type=int, default=4096, help="weights (default 4096)")
    ap.add_argument("--comm", choices=("torch", "cupy"), default="torch", help="who all-reduces (default torch)")
    opts = ap.parse_args()
    import torch
    import torch.multiprocessing as mp

    gpus = torch.cuda.device_count()
    world = opts.world or gpus
    if not 1 <= world <= gpus:
        ap.error(f"--world must be between 1 and the {gpus} GPU(s) here")
    import cudagraph

    print(f"cudagraph {cudagraph.__version__}, {gpus} GPU(s): {torch.cuda.get_device_name(0)}")
    print(f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}\n")
    with tempfile.TemporaryDirectory() as tmp:
        if opts.comm == "cupy":
            from cupy.cuda import nccl

            rendezvous: Any = nccl.get_unique_id()
        else:
            rendezvous = (Path(tmp) / "rendezvous").as_uri()
        mp.spawn(worker, args=(world, opts, rendezvous), nprocs=world)
    return 0


if __name__ == "__main__":
    sys.exit(main())
