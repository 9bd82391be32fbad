"""``Graph.remove`` and the compat edge edits on a GPU: a definition edited in place computes what a definition
built without the removed node computes, executables made before keep running what they were built from, and
``exe.update`` of the edited definition re-instantiates (the topology changed) or refuses, as asked.

Marked ``gpu``: they skip (with the reason shown) where no NVIDIA driver/GPU works.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors

pytestmark = pytest.mark.gpu

N = 256
BLOCK = 128


def _chain(kernels: Any, x: Any, steps: list[tuple[float, float]]) -> tuple[cg.Graph, list[Any]]:
    """x = a x + k for each (a, k), in order."""
    g = cg.Graph("chain")
    nodes: list[Any] = []
    for i, (a, k) in enumerate(steps):
        args = (x, np.float32(a), np.float32(k), np.int32(N))
        nodes.append(
            g.kernel(kernels.scale_add, N // BLOCK, BLOCK, args, after=nodes[-1] if nodes else None, name=f"s{i}")
        )
    return g, nodes


def _expect(x0: np.ndarray, steps: list[tuple[float, float]]) -> np.ndarray:
    x = x0.copy()
    for a, k in steps:
        x = x * np.float32(a) + np.float32(k)
    return x


def test_a_removed_kernel_is_not_run_and_earlier_executables_keep_it(gpu, kernels, stream):
    x0 = np.arange(N, dtype=np.float32)
    x = gpu.upload(x0)
    steps = [(2.0, 1.0), (3.0, 0.0), (1.0, -5.0)]
    g, nodes = _chain(kernels, x, steps)
    before = g.instantiate()
    g.remove(nodes[1])  # s1 leaves; s2 now follows nothing
    g.add_edge(nodes[0], nodes[2])  # ...and is ordered after s0 again
    with before:
        with g.instantiate() as after:
            after.launch(stream)
            stream.sync()
            np.testing.assert_array_equal(gpu.read(x, N), _expect(x0, [steps[0], steps[2]]))
            cg.memcpy(stream, x, x0, x0.nbytes)
            stream.sync()
            before.launch(stream)  # built before the removal: all three
            stream.sync()
            np.testing.assert_array_equal(gpu.read(x, N), _expect(x0, steps))
            with pytest.raises(errors.DefinitionError):
                before.update(g)  # the topology changed
            result = before.update(g, reinstantiate_if_needed=True)
            assert result.mode == "reinstantiated"
            cg.memcpy(stream, x, x0, x0.nbytes)
            before.launch(stream)
            stream.sync()
            np.testing.assert_array_equal(gpu.read(x, N), _expect(x0, [steps[0], steps[2]]))


def test_compat_edge_edits_and_destroy_build_what_they_say(gpu, kernels, stream):
    from cuda.core import LaunchConfig

    from cudagraph import compat

    x0 = np.arange(N, dtype=np.float32)
    x = gpu.upload(x0)
    cfg = LaunchConfig(grid=N // BLOCK, block=BLOCK)
    gd = compat.GraphDefinition()
    a = gd.launch(cfg, kernels.scale_add, x, np.float32(2), np.float32(1), np.int32(N))
    b = gd.launch(cfg, kernels.scale_add, x, np.float32(3), np.float32(0), np.int32(N))
    c = gd.launch(cfg, kernels.scale_add, x, np.float32(1), np.float32(-5), np.int32(N))
    a.succ.add(b)  # a -> b -> c, by the live sets
    c.pred = {b}
    unused = gd.launch(cfg, kernels.scale_add, x, np.float32(100), np.float32(0), np.int32(N))
    unused.destroy()
    assert gd.edges() == {(a, b), (b, c)} and len(gd.nodes()) == 3
    with gd.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(gpu.read(x, N), _expect(x0, [(2.0, 1.0), (3.0, 0.0), (1.0, -5.0)]))
