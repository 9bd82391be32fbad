"""Six programs written against cuda.core's documented GraphDefinition API, run with cuda.core itself and
with cudagraph.compat (built explicitly on a cudagraph Graph): identical results, checked against numpy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg

pytestmark = pytest.mark.gpu

N = 256
F = np.float32


@pytest.fixture
def k(compat_kernels):
    return compat_kernels


def cfg(n: int = N) -> Any:
    from cuda.core import LaunchConfig

    return LaunchConfig(grid=(n + 127) // 128, block=128)


def run(gd: Any, stream: Any, times: int = 1) -> Any:
    exe = gd.instantiate()
    for _ in range(times):
        exe.launch(stream)
    stream.sync()
    return exe


# ------------------------------------------------------------------------------------------ the programs
def chain(GD, k, gpu, stream):
    x = gpu.upload(np.arange(N, dtype=F))
    y = gpu.alloc(4 * N)
    gd = GD()
    n = np.int32(N)
    gd.launch(cfg(), k.scale_add, x, F(2), F(1), n).launch(cfg(), k.scale_add, x, F(3), F(0), n).memcpy(y, x, 4 * N)
    run(gd, stream)
    return gpu.read(y, N), (np.arange(N, dtype=F) * 2 + 1) * 3


def fork_join(GD, k, gpu, stream):
    x = gpu.upload(np.arange(N, dtype=F))
    y, z, out = gpu.alloc(4 * N), gpu.alloc(4 * N), gpu.alloc(4 * N)
    n = np.int32(N)
    gd = GD()
    a = gd.launch(cfg(), k.scale_add, x, F(2), F(1), n)
    left = a.launch(cfg(), k.axpb, y, x, F(3), F(0), n)
    right = a.memset(z, np.float32(1.0), N).launch(cfg(), k.axpb, z, x, F(-1), F(5), n)
    gd.join(left, right).launch(cfg(), k.combine, out, y, z, n)
    run(gd, stream)
    x1 = np.arange(N, dtype=F) * 2 + 1
    return gpu.read(out, N), 3 * x1 - 2 * (5 - x1)


def heat(GD, k, gpu, stream, steps: int = 6):
    u0 = np.zeros(N, F)
    u0[N // 2] = 100.0
    u, v = gpu.upload(u0), gpu.upload(u0)
    counter = gpu.upload(np.array([steps], np.int32))
    n, r = np.int32(N), F(0.25)
    gd = GD()
    cond = gd.create_condition(default_value=1)
    loop = gd.while_loop(cond)
    loop.body.launch(cfg(), k.heat_step, v, u, r, n).launch(cfg(), k.heat_step, u, v, r, n).launch(
        cfg(1), k.countdown, cond, counter
    )
    run(gd, stream)
    ref = u0.copy()
    for _ in range(2 * steps):
        left = np.concatenate([[0], ref[:-1]])
        right = np.concatenate([ref[1:], [0]])
        ref = ref + r * (left - 2 * ref + right)
    return gpu.read(u, N), ref


def if_else(GD, k, gpu, stream):
    x = gpu.upload(np.zeros(N, F))
    flag = gpu.upload(np.array([1], np.int32))
    n = np.int32(N)
    gd = GD()
    cond = gd.create_condition()
    node = gd.launch(cfg(1), k.set_if_positive, cond, flag).if_else(cond)
    node.then.launch(cfg(), k.scale_add, x, F(1), F(10), n)
    node.else_.launch(cfg(), k.scale_add, x, F(1), F(-1), n)
    exe = run(gd, stream)  # +10
    gpu.write(flag, np.array([0], np.int32))
    exe.launch(stream)  # -1
    exe.launch(stream)  # -1
    stream.sync()
    return gpu.read(x, N), np.full(N, 8, F)


def while_device_condition(GD, k, gpu, stream):
    x = gpu.upload(np.full(N, 1.5, F))
    n = np.int32(N)
    gd = GD()
    cond = gd.create_condition(default_value=0)
    loop = gd.launch(cfg(1), k.set_while_below, cond, x, F(100)).while_loop(cond)
    loop.body.launch(cfg(), k.scale_add, x, F(2), F(0), n).launch(cfg(1), k.set_while_below, cond, x, F(100))
    run(gd, stream)
    ref = 1.5
    while ref < 100:
        ref *= 2
    return gpu.read(x, N), np.full(N, ref, F)


def child_graph(GD, k, gpu, stream):
    x = gpu.upload(np.arange(N, dtype=F))
    n = np.int32(N)
    child = GD()
    child.launch(cfg(), k.scale_add, x, F(2), F(0), n).launch(cfg(), k.scale_add, x, F(1), F(3), n)
    gd = GD()
    gd.launch(cfg(), k.scale_add, x, F(1), F(1), n).embed(child).launch(cfg(), k.scale_add, x, F(-1), F(0), n)
    run(gd, stream)
    return gpu.read(x, N), -((np.arange(N, dtype=F) + 1) * 2 + 3)


PROGRAMS = [chain, fork_join, heat, if_else, while_device_condition, child_graph]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_program_matches_numpy(GD, k, gpu, stream, program):
    got, want = program(GD, k, gpu, stream)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_cuda_core_and_compat_give_identical_results(k, gpu, stream, program):
    graph = pytest.importorskip("cuda.core.graph")
    core, _ = program(graph.GraphDefinition, k, gpu, stream)
    ours, _ = program(cg.compat.GraphDefinition, k, gpu, stream)
    np.testing.assert_array_equal(ours, core)


def test_compat_nodes_and_edges_match_cuda_core(k, gpu):
    graph = pytest.importorskip("cuda.core.graph")
    x = gpu.upload(np.zeros(N, F))
    n = np.int32(N)
    shapes = []
    for GD in (graph.GraphDefinition, cg.compat.GraphDefinition):
        gd = GD()
        a = gd.launch(cfg(), k.scale_add, x, F(1), F(1), n)
        b = a.launch(cfg(), k.scale_add, x, F(1), F(1), n)
        c = a.join()  # an empty node after a (cuda.core nodes have no .empty())
        gd.join(b, c)
        shapes.append((len(gd.nodes()), len(gd.edges())))
    assert shapes[0] == shapes[1] == (4, 4)
