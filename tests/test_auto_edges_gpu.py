"""Edges from data on the GPU: a random 64-node program written in sequential style with access declarations
only, built with ``Graph(edges="auto")`` and launched, gives what the same program gives run eagerly node by
node; its critical path is shorter than the chain; a graph with one needed edge removed has that race.

Run on a GPU machine: ``PYTHONPATH=src python3 -m pytest -q tests/test_auto_edges_gpu.py``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import cudagraph as cg

pytestmark = pytest.mark.gpu

N = 4096  # floats per buffer
BUFFERS = 8
NODES = 64


def program(seed: int) -> list[tuple[str, tuple[int, ...]]]:
    """``NODES`` operations on buffer numbers: ``scale`` (in place), ``axpb`` (dst, src), ``combine`` (dst, a, b),
    ``copy`` (dst, src), ``zero`` (dst, first half only)."""
    rng = random.Random(seed)
    out: list[tuple[str, tuple[int, ...]]] = []
    for _ in range(NODES):
        kind = rng.choices(["scale", "axpb", "combine", "copy", "zero"], [4, 4, 1.5, 1, 0.5])[0]
        picks = rng.sample(range(BUFFERS), 3)
        out.append((kind, tuple(picks[: {"scale": 1, "axpb": 2, "combine": 3, "copy": 2, "zero": 1}[kind]])))
    return out


def add(g: Any, kernels: Any, bufs: list[Any], op: tuple[str, tuple[int, ...]], after: Any = None) -> Any:
    """One operation on ``g``: every kernel argument that is memory wrapped with its access."""
    kind, b = op
    n, grid, block = np.int32(N), (N + 255) // 256, 256
    if kind == "scale":
        return g.kernel(
            kernels.scale_add, grid, block, (cg.InOut(bufs[b[0]]), np.float32(0.5), np.float32(1.0), n), after=after
        )
    if kind == "axpb":
        args = (cg.Out(bufs[b[0]]), cg.In(bufs[b[1]]), np.float32(0.5), np.float32(2.0), n)
        return g.kernel(kernels.axpb, grid, block, args, after=after)
    if kind == "combine":
        args = (cg.Out(bufs[b[0]]), cg.In(bufs[b[1]]), cg.In(bufs[b[2]]), n)
        return g.kernel(kernels.combine, grid, block, args, after=after)
    if kind == "copy":
        return g.memcpy(bufs[b[0]], bufs[b[1]], 4 * N, after=after)
    return g.memset(bufs[b[0]], 0, count=N // 2, element_size=4, after=after)


def initial() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [rng.uniform(-1, 1, N).astype(np.float32) for _ in range(BUFFERS)]


def critical_path(g: cg.Graph) -> int:
    """The number of nodes on the longest path."""
    depth: dict[int, int] = {}
    for node in g.topological_order():
        depth[node.index] = 1 + max((depth[p.index] for p in node.predecessors), default=0)
    return max(depth.values())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_auto_edge_program_gives_what_it_gives_run_eagerly(gpu, kernels, stream, seed):
    ops = program(seed)
    start = initial()
    # The graph: sequential style, declarations only.
    bufs = [gpu.upload(a) for a in start]
    g = cg.Graph("auto", edges="auto")
    for op in ops:
        add(g, kernels, bufs, op)
    g.validate(races=True)
    assert critical_path(g) < NODES  # parallel branches: shorter than the chain
    assert len(g.roots()) > 1 or any(len(n.successors) > 1 for n in g.nodes)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
        got = [gpu.read(b, N) for b in bufs]
    # The reference: the same operations one after another, run eagerly (no graph), node by node.
    ref_bufs = [gpu.upload(a) for a in start]
    seq = cg.Graph("sequential")
    with seq.path() as path:
        for op in ops:
            add(path, kernels, ref_bufs, op)
    seq.run(stream)
    stream.sync()
    want = [gpu.read(b, N) for b in ref_bufs]
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=f"buffer {i}")
    assert any(not np.array_equal(a, s) for a, s in zip(got, start))  # the program did something
    # The profile: the critical path, weighted by each node's measured GPU time, is shorter than the nodes
    # one after another (the branches the declarations leave parallel are parallel in the graph).
    profile = g.profile(stream, repeats=3)
    assert len(profile.nodes) == NODES
    assert len(profile.critical_path) < NODES
    assert profile.critical_path_us < sum(t.median_us for t in profile.nodes)


def test_a_needed_edge_removed_by_hand_is_named_by_races(gpu, kernels, stream):
    ops = program(7)
    bufs = [gpu.alloc(4 * N) for _ in range(BUFFERS)]
    auto = cg.Graph("auto", edges="auto")
    for op in ops:
        add(auto, kernels, bufs, op)
    assert auto.races() == []
    # The same program with the inferred edges written by hand, less one.
    victim = next(n for n in reversed(auto.nodes) if n.predecessors)
    cut = victim.predecessors[0]
    hand = cg.Graph("hand")
    for node, op in zip(auto.nodes, ops):
        preds = [hand.nodes[p.index] for p in node.predecessors if not (node is victim and p is cut)]
        add(hand, kernels, bufs, op, after=preds or None)
    races = hand.races()
    assert (cut.index, victim.index) in {(r.first.index, r.second.index) for r in races}
    race = next(r for r in races if (r.first.index, r.second.index) == (cut.index, victim.index))
    assert race.hi > race.lo and race.memory.startswith("0x")
    with pytest.raises(cg.errors.RaceError):
        hand.validate(races=True)
    # With the edge back, the graph is the auto graph again: it instantiates and launches.
    hand.add_edge(hand.nodes[cut.index], hand.nodes[victim.index])
    assert hand.races() == []
    with hand.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
