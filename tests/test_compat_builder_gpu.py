"""Programs written against cuda.core's documented GraphBuilder API (tests/compat_builder_programs.py), each run
in the same test with cuda.core itself (stream capture) and with cudagraph.compat (built explicitly): the
results read back are bit-identical, and match numpy."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import compat_builder_programs as programs
import cudagraph as cg

pytestmark = pytest.mark.gpu

N = programs.N
F = np.float32


@pytest.fixture(scope="module")
def k(nvrtc):
    return nvrtc(programs.SOURCE, programs.NAMES)


def cuda_core_api() -> Any:
    core = pytest.importorskip("cuda.core")
    graph = pytest.importorskip("cuda.core.graph")
    return SimpleNamespace(
        Device=core.Device, GraphBuilder=graph.GraphBuilder, launch=core.launch, LaunchConfig=core.LaunchConfig
    )


def compat_api() -> Any:
    from cuda.core import LaunchConfig

    c = cg.compat
    return SimpleNamespace(Device=c.Device, GraphBuilder=c.GraphBuilder, launch=c.launch, LaunchConfig=LaunchConfig)


def both(run: Any, k: Any, gpu: Any, stream: Any) -> tuple[Any, Any]:
    """``run(api, ...)`` with cuda.core, then with cudagraph.compat; each result must be bit-identical."""
    core = run(cuda_core_api(), k, gpu, stream)
    ours = run(compat_api(), k, gpu, stream)
    for a, b in zip(core if isinstance(core, tuple) else (core,), ours if isinstance(ours, tuple) else (ours,)):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(b, a)
            assert b.dtype == a.dtype and b.tobytes() == a.tobytes()
        else:
            assert b == a
    return core, ours


def complete_and_launch(gb: Any, stream: Any, gpu: Any, times: int = 1) -> Any:
    graph = gb.complete()
    graph.upload(stream)
    for _ in range(times):
        graph.launch(stream)
    gpu.sync()  # releases the GIL, so that host callbacks run
    return graph


# ------------------------------------------------------------------------------------------------ programs
def test_chain(k, gpu, stream):
    def run(api, k, gpu, stream):
        x, y = gpu.upload(np.arange(N, dtype=F)), gpu.alloc(4 * N)
        calls: list[str] = []
        graph = complete_and_launch(programs.chain(api, k, x, y, calls), stream, gpu, times=2)
        graph.close()
        return gpu.read(x, N), gpu.read(y, N), calls

    (x, y, calls), _ = both(run, k, gpu, stream)
    x_ref = ((((np.arange(N, dtype=F) * 2 + 1) * 3) * 2 + 1) * 3).astype(F)
    np.testing.assert_allclose(x, x_ref, rtol=1e-6)
    np.testing.assert_allclose(y, 0.5 * x_ref - 1, rtol=1e-6)
    assert calls == ["done", "done"]


def test_fork_join(k, gpu, stream):
    def run(api, k, gpu, stream):
        x = gpu.upload(np.arange(N, dtype=F))
        y, z, out = gpu.alloc(4 * N), gpu.alloc(4 * N), gpu.alloc(4 * N)
        complete_and_launch(programs.fork_join(api, k, x, y, z, out), stream, gpu)
        return gpu.read(out, N)

    out, _ = both(run, k, gpu, stream)
    x1 = np.arange(N, dtype=F) * 2 + 1
    np.testing.assert_allclose(out, 3 * x1 - 2 * (2 * (5 - x1)), rtol=1e-6)


def test_heat_equation_loop_of_many_launches(k, gpu, stream):
    u0 = np.zeros(N, F)
    u0[N // 2] = 100.0

    def run(api, k, gpu, stream):
        u, v = gpu.upload(u0), gpu.upload(u0)
        gb = programs.heat(api, k, u, v)
        complete_and_launch(gb, stream, gpu)
        return gpu.read(u, N)

    u, _ = both(run, k, gpu, stream)
    ref = u0.astype(np.float64)
    for _ in range(2 * programs.HEAT_STEPS):
        left = np.concatenate([[0.0], ref[:-1]])
        right = np.concatenate([ref[1:], [0.0]])
        ref = ref + float(programs.HEAT_R) * (left - 2 * ref + right)
    np.testing.assert_allclose(u, ref, rtol=1e-3, atol=1e-3)
    assert abs(float(u.sum()) - 100.0) < 1e-2  # heat is conserved away from the edges


def test_if_else_on_a_condition_set_by_a_kernel(k, gpu, stream):
    def run(api, k, gpu, stream):
        x = gpu.upload(np.zeros(N, F))
        flag = gpu.upload(np.array([1], np.int32))
        graph = complete_and_launch(programs.if_else(api, k, x, flag), stream, gpu)  # then: +10, +0.5
        first = gpu.read(x, N)
        gpu.write(flag, np.array([0], np.int32))
        graph.launch(stream)  # else: (x - 1) * 2, +0.5
        graph.launch(stream)
        gpu.sync()
        return first, gpu.read(x, N)

    (first, last), _ = both(run, k, gpu, stream)
    np.testing.assert_array_equal(first, np.full(N, 10.5, F))
    np.testing.assert_array_equal(last, np.full(N, ((10.5 - 1) * 2 + 0.5 - 1) * 2 + 0.5, F))


def test_while_loop_whose_condition_a_kernel_sets(k, gpu, stream):
    def run(api, k, gpu, stream):
        x = gpu.upload(np.full(N, 1.5, F))
        complete_and_launch(programs.while_device_condition(api, k, x), stream, gpu)
        return gpu.read(x, N)

    x, _ = both(run, k, gpu, stream)
    ref = 1.5
    while ref < float(programs.WHILE_LIMIT):
        ref *= 2
    np.testing.assert_array_equal(x, np.full(N, ref, F))


def test_child_graph(k, gpu, stream):
    def run(api, k, gpu, stream):
        x = gpu.upload(np.arange(N, dtype=F))
        complete_and_launch(programs.child_graph(api, k, x), stream, gpu)
        return gpu.read(x, N)

    x, _ = both(run, k, gpu, stream)
    np.testing.assert_array_equal(x, -((np.arange(N, dtype=F) + 1) * 2 + 3))


def test_switch_on_a_value_set_by_a_kernel(k, gpu, stream):
    def run(api, k, gpu, stream):
        x = gpu.upload(np.zeros(N, F))
        value = gpu.upload(np.array([0], np.int32))
        graph = complete_and_launch(programs.switch(api, k, x, value), stream, gpu)
        seen = [gpu.read(x, N)]
        for v in (2, 1, 7):  # 7: no case runs
            gpu.write(value, np.array([v], np.int32))
            graph.launch(stream)
            gpu.sync()
            seen.append(gpu.read(x, N))
        return tuple(seen)

    seen, _ = both(run, k, gpu, stream)
    want = [0 + 1 + 0.25, 1.25 * 2 + 0.25, 2.75 + 10 + 0.25, 13.0 + 0.25]  # cases 0, 2, 1, none
    for got, w in zip(seen, want):
        np.testing.assert_array_equal(got, np.full(N, w, F))


def test_the_compat_builder_and_cuda_core_build_the_same_number_of_nodes_and_edges(k, gpu):
    """The explicit build has the shape of the capture: split and join add no node (graph_definition views)."""
    x, y, z, out = (gpu.alloc(4 * N) for _ in range(4))
    shapes = []
    for api in (cuda_core_api(), compat_api()):
        gb = programs.fork_join(api, k, x, y, z, out)
        g = gb.graph_definition
        shapes.append((len(g.nodes()), len(g.edges())))
    assert shapes[0] == shapes[1] == (5, 5)


def test_a_reused_launch_config_takes_the_compiled_launch_with_the_same_numbers(k, gpu, stream):
    """One cuda.core LaunchConfig reused for 64 launches of a real Kernel: with the compiled module, every launch
    after the first is added by ``compat.launch``'s compiled path; the results equal cuda.core's capture."""
    launches = 64

    def run(api, k, gpu, stream):
        x = gpu.upload(np.arange(N, dtype=F))
        config, n = programs.cfg(api), np.int32(N)
        gb = api.Device().create_graph_builder().begin_building()
        taken = getattr(api.launch, "taken", None)
        for i in range(launches):
            api.launch(gb, config, k.scale_add, x, F(1), F(i % 3), n)
        if taken is not None:
            assert api.launch.taken - taken == launches - 1
        complete_and_launch(gb.end_building(), stream, gpu).close()
        return gpu.read(x, N)

    x, _ = both(run, k, gpu, stream)
    expected = np.arange(N, dtype=F) + F(sum(i % 3 for i in range(launches)))
    np.testing.assert_array_equal(x, expected)
