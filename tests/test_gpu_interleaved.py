"""Kernels interleaved node by node, as users write them, on the GPU: built, run and updated in one pass.

The lowering loop (and the executable's kernel writer) knows every kernel it was shown and switches
between them itself; these graphs alternate three kernels on every node, with a fresh argument tuple
per node, a second dependency on every fourth node and, in the middle, a node with a launch attribute
(handed back to Python, then the loop goes on). Every value is an exact float32 integer, so the results
are compared exactly with numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg

pytestmark = pytest.mark.gpu

N = 256
STEPS = 60


def _plan(seed: int) -> list[tuple[int, int]]:
    """(kernel 0..2, a small integer scalar) per node."""
    rng = np.random.default_rng(seed)
    return [(j % 3, int(rng.integers(-5, 6))) for j in range(STEPS)]


def _build(kernels: Any, bufs: tuple[Any, Any, Any], plan: list[tuple[int, int]], attribute_at: int = 30) -> cg.Graph:
    f, i, y = bufs
    n = np.int32(N)
    g = cg.Graph("interleaved")
    prev = before = None
    for j, (which, v) in enumerate(plan):
        after = [prev, before] if before is not None and j % 4 == 3 else prev
        prio = 0 if j == attribute_at else None
        if which == 0:  # f = f * -1 + v
            k, args = kernels.scale_add, (f, np.float32(-1.0), np.float32(v), n)
        elif which == 1:  # i += v
            k, args = kernels.add_i32, (i, np.int32(v), n)
        else:  # y = 2 * f + v
            k, args = kernels.axpb, (y, f, np.float32(2.0), np.float32(v), n)
        node = g.kernel(k, 1, N, args, after=after, priority=prio)
        before, prev = prev, node
    return g


def _expected(plan: list[tuple[int, int]], f0: np.ndarray, i0: np.ndarray) -> tuple[np.ndarray, ...]:
    f, i, y = f0.copy(), i0.copy(), np.zeros(N, np.float32)
    for which, v in plan:
        if which == 0:
            f = f * np.float32(-1.0) + np.float32(v)
        elif which == 1:
            i = i + np.int32(v)
        else:
            y = np.float32(2.0) * f + np.float32(v)
    return f, i, y


def test_interleaved_kernels_build_run_and_update(gpu, kernels, stream):
    f0 = np.arange(N, dtype=np.float32)
    i0 = np.arange(N, dtype=np.int32) * 3
    bufs = (gpu.upload(f0), gpu.upload(i0), gpu.alloc(4 * N))
    plan = _plan(1)
    exe = _build(kernels, bufs, plan).instantiate()
    exe.launch(stream)
    f, i, y = _expected(plan, f0, i0)
    np.testing.assert_array_equal(gpu.read(bufs[0], N), f)
    np.testing.assert_array_equal(gpu.read(bufs[1], N, np.int32), i)
    np.testing.assert_array_equal(gpu.read(bufs[2], N), y)

    # Same topology, other scalars in fresh tuples: every node is set again, kernels interleaved.
    gpu.write(bufs[0], f0)
    gpu.write(bufs[1], i0)
    plan2 = _plan(2)
    result = exe.update(_build(kernels, bufs, plan2))
    assert result.mode == "per-node"
    # The nodes whose scalar changed, and node 30 (its launch attributes are a new object: set again).
    assert result.nodes_updated == len({j for j, (a, b) in enumerate(zip(plan, plan2)) if a != b} | {30})
    exe.launch(stream)
    f, i, y = _expected(plan2, f0, i0)
    np.testing.assert_array_equal(gpu.read(bufs[0], N), f)
    np.testing.assert_array_equal(gpu.read(bufs[1], N, np.int32), i)
    np.testing.assert_array_equal(gpu.read(bufs[2], N), y)
    exe.close()


def test_interleaved_kernels_in_a_child_graph_and_after_it(gpu, kernels, stream):
    """A body lowered in the middle of the parent (it packs the same kernels' buffers), then parent nodes
    that pass the very argument tuples the parent used before the body: they must be packed again."""
    f0 = np.arange(N, dtype=np.float32)
    i0 = np.zeros(N, np.int32)
    bufs = (gpu.upload(f0), gpu.upload(i0), gpu.alloc(4 * N))
    plan = _plan(3)
    body = _build(kernels, bufs, plan[:12], attribute_at=-1)
    g = _build(kernels, bufs, plan[12:24], attribute_at=5)
    last_args: dict[int, Any] = {id(n.kernel): n.args for n in g.nodes}  # type: ignore[attr-defined]  # last tuples
    prev: Any = g.child(body, after=g.nodes[-1])
    for k in (kernels.scale_add, kernels.add_i32, kernels.axpb):
        prev = g.kernel(k, 1, N, last_args[id(k)], after=prev)
    tail = [(w, plan[12 + 9 + w][1]) for w in (0, 1, 2)]  # the parent's last node of kernel w is its node 9 + w
    exe = g.instantiate()
    exe.launch(stream)
    f, i, y = _expected(plan[12:24] + plan[:12] + tail, f0, i0)
    np.testing.assert_array_equal(gpu.read(bufs[0], N), f)
    np.testing.assert_array_equal(gpu.read(bufs[1], N, np.int32), i)
    np.testing.assert_array_equal(gpu.read(bufs[2], N), y)
    exe.close()
