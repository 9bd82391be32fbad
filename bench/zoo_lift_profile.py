"""Where a lift's time goes on a GPU: zoo models captured by PyTorch, lifted again and again.

Per model: the lift's µs per node (median of ``--lifts``), the same with the launch attributes not read (the
reader answering ``{}``: what reading them costs), the lifted nodes by kind, and the functions that took
the most time over ``--profiled`` lifts (cProfile, by own time). Usage::

    python bench/zoo_lift_profile.py resnet50 hf_bert_sdpa embedding_bag
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import io
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import import_cudagraph

import_cudagraph()
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import cudagraph as cg  # noqa: E402
import model_zoo  # noqa: E402
from cudagraph.driver import node_reads  # noqa: E402


def per_node(fn: Any, repeats: int, nodes: int) -> float:
    """The median µs per node of ``repeats`` calls of ``fn()`` (collected before each)."""
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / nodes * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="names of the zoo (bench/zoo.py --list)")
    ap.add_argument("--lifts", type=int, default=7, help="lifts timed per figure (default 7)")
    ap.add_argument("--profiled", type=int, default=3, help="lifts profiled (default 3)")
    ap.add_argument("--top", type=int, default=20, help="functions listed (default 20)")
    args = ap.parse_args()
    import torch

    print(
        f"torch {torch.__version__} on {torch.cuda.get_device_name()}; compiled reads: "
        f"{node_reads.compiled_reads() is not None}"
    )
    for name in args.models:
        cap = model_zoo.capture_entry(torch, name)
        g = cap.graph
        lifted = cg.lift(g)
        n = len(lifted.nodes)
        kinds = collections.Counter(node.kind for node in lifted.nodes)
        del lifted
        read = per_node(lambda g=g: cg.lift(g), args.lifts, n)
        real = node_reads.NodeReads.attributes
        node_reads.NodeReads.attributes = lambda self, node: {}  # type: ignore[method-assign]
        try:
            unread = per_node(lambda g=g: cg.lift(g), args.lifts, n)
        finally:
            node_reads.NodeReads.attributes = real  # type: ignore[method-assign]
        print(f"\n== {name}: {n} nodes ({', '.join(f'{k} {c}' for k, c in sorted(kinds.items()))})")
        print(f"lift {read:.2f} µs/node; attributes not read {unread:.2f} µs/node (reading them: {read - unread:.2f})")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.profiled):
            cg.lift(g)
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
        print(out.getvalue().strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
