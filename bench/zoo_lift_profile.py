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


def kernel_handles(graph: Any) -> list[int]:
    """The handles (ints) of the kernel nodes of the driver graph under ``graph``."""
    from cuda.bindings import driver as drv

    from cudagraph.materialize.graph_handles import cuda_graph_handle

    handle = drv.CUgraph(int(cuda_graph_handle(graph)))
    _, _, count = drv.cuGraphGetNodes(handle, 0)
    _, nodes, _ = drv.cuGraphGetNodes(handle, count)
    kernel = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
    return [int(n) for n in nodes if drv.cuGraphNodeGetType(n)[1] == kernel]


def reads_breakdown(graph: Any, repeats: int, nodes: int) -> str:
    """Where reading the attributes goes, in µs per lifted node: the reader's answer for every kernel node
    (``NodeReads.attributes``), the compiled reads alone (``AttributeReads.read``) and one id's reads alone
    (the driver's cost of one ``cuGraphKernelNodeGetAttribute``, times the ids asked)."""
    handles = kernel_handles(graph)
    reader = node_reads.NodeReads()
    reader.attributes(handles[0])
    whole = per_node(lambda: [reader.attributes(h) for h in handles], repeats, nodes)
    module = node_reads.compiled_reads()
    if module is None:
        return f"reader {whole:.2f} µs/node over {len(handles)} kernel nodes (no compiled reads)"
    ids = tuple(reader.ids)
    reads = module.AttributeReads(ids, b"".join(node_reads.UNSET.get(i, bytes(64)) for i in ids))
    compiled = per_node(lambda: [reads.read(h) for h in handles], repeats, nodes)
    one = module.AttributeReads(ids[:1], node_reads.UNSET.get(ids[0], bytes(64)))
    single = per_node(lambda: [one.read(h) for h in handles], repeats, nodes)
    return (
        f"{len(handles)} kernel nodes, {len(ids)} ids asked: reader {whole:.2f} µs/node, compiled reads "
        f"{compiled:.2f}, one id {single:.2f} (x{len(ids)} = {single * len(ids):.2f})"
    )


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
        print(reads_breakdown(g, args.lifts, n))
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
