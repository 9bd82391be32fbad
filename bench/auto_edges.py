"""Edges from data on the CPU: what ``Graph(edges="auto")`` adds to building, and what ``races()`` costs.

A random program of N kernel nodes over 64 buffers of 64 KiB: each node reads one or two random
buffers (whole, or a random 4 KiB slice) and writes one (whole or a slice), every argument wrapped
(``cg.In`` / ``cg.Out`` / ``cg.InOut``). Printed, for N = 1,000 and 10,000:

- build, hand: the same program with the edges the inference found given as ``after=`` (a plain graph);
- build, auto: built with ``Graph(edges="auto")``;
- inference: the difference (the cost of the edges from data), the target being under 50 ms at 10,000;
- races(): the race check of the auto graph (no race), the target being under 50 ms at 10,000.

Each figure is the fastest of ``--repeat`` runs, the hand and auto builds taking turns; each run starts after a
full collection and runs with the cyclic garbage collector paused (as ``timeit`` does: a collection that a run
happens to trigger walks every object of the process, which adds tens of ms to whichever run it falls in).
``cudagraph.definition._ranges`` (the compiled byte ranges, ancestor queries and race check) is used where built;
``CUDAGRAPH_NO_C_ENTRY=1`` measures the Python twins.

Usage: ``PYTHONPATH=src python bench/auto_edges.py [--sizes 1000 10000] [--repeat 5]``. No GPU is needed: the
kernel is a stand-in (the definition layer recognises kernels by type name), the buffers plain addresses.
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import time
from typing import Any

import numpy as np

import cudagraph as cg


class CUkernel:
    """A kernel stand-in."""


K = CUkernel()
BUFFERS, SIZE, SLICE = 64, 1 << 16, 1 << 12
N32 = np.int32(1)


def program(n: int, seed: int = 1) -> list[tuple[Any, ...]]:
    """``n`` nodes' wrapped arguments."""
    rng = random.Random(seed)

    def memory(wrap: Any) -> Any:
        base = 0x1000000 + rng.randrange(BUFFERS) * SIZE
        if rng.random() < 0.5:
            return wrap(base, nbytes=SIZE)
        return wrap(base, offset=rng.randrange(SIZE // SLICE) * SLICE, nbytes=SLICE)

    out = []
    for _ in range(n):
        reads = [memory(cg.In) for _ in range(rng.randint(1, 2))]
        out.append((*reads, memory(cg.Out if rng.random() < 0.7 else cg.InOut), N32))
    return out


def build_auto(args: list[tuple[Any, ...]]) -> cg.Graph:
    g = cg.Graph("auto", edges="auto")
    kernel = g.kernel
    for a in args:
        kernel(K, 1, 32, a)
    return g


def build_hand(args: list[tuple[Any, ...]], preds: list[list[int]]) -> cg.Graph:
    g = cg.Graph("hand")
    kernel, nodes = g.kernel, g._nodes
    for a, p in zip(args, preds):
        kernel(K, 1, 32, a, after=[nodes[i] for i in p] or None)
    return g


def timed(fn: Any) -> tuple[float, Any]:
    """One run of ``fn``: its time (after a full collection, the collector paused) and its result."""
    gc.collect()
    gc.disable()
    try:
        t = time.perf_counter()
        out = fn()
        return time.perf_counter() - t, out
    finally:
        gc.enable()


def best(fns: list[Any], repeat: int) -> list[tuple[float, Any]]:
    """The fastest of ``repeat`` runs of each of ``fns`` (taking turns), with its result."""
    runs: list[list[tuple[float, Any]]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, got in zip(fns, runs):
            got.append(timed(fn))
    return [min(got, key=lambda r: r[0]) for got in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    print(f"{'nodes':>7} {'edges':>7} {'build hand':>11} {'build auto':>11} {'inference':>10} {'races()':>9}")
    for n in opts.sizes:
        args = program(n)
        preds = [[p.index for p in node.predecessors] for node in build_auto(args).nodes]
        (t_auto, g), (t_hand, hand) = best(
            [functools.partial(build_auto, args), functools.partial(build_hand, args, preds)], opts.repeat
        )
        assert [[p.index for p in node.predecessors] for node in g.nodes] == preds
        assert [[p.index for p in node.predecessors] for node in hand.nodes] == preds
        ((t_races, races),) = best([g.races], opts.repeat)
        assert races == []
        infer = t_auto - t_hand
        print(
            f"{n:>7} {g.num_edges:>7} {t_hand * 1e3:>9.1f}ms {t_auto * 1e3:>9.1f}ms "
            f"{infer * 1e3:>8.1f}ms {t_races * 1e3:>7.1f}ms"
        )
        if n == 10000:
            print(
                f"target at 10,000 nodes: inference < 50 ms ({'met' if infer < 0.05 else 'NOT met'}), "
                f"races() < 50 ms ({'met' if t_races < 0.05 else 'NOT met'})"
            )


if __name__ == "__main__":
    main()
