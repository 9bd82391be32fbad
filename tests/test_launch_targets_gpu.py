"""One step function, every target: run eagerly on a stream, recorded by stream capture (cuda.core's
GraphBuilder and cudagraph's capture), and built as an explicit graph on a Path; same numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.errors import DefinitionError, KernelArgumentError

pytestmark = pytest.mark.gpu

N = 1024
F = np.float32


def step(t: Any, k: Any, bufs: dict[str, Any], seen: list[str]) -> Any:
    """x = 2x+1; fork: y = 3x | z = 5-x; join; out = y - 2z; copy = out; a host callback."""
    from cuda.core import LaunchConfig

    cfg = LaunchConfig(grid=N // 128, block=128)
    n = np.int32(N)
    x, y, z, out, copy = (bufs[name] for name in ("x", "y", "z", "out", "copy"))
    cg.launch(t, cfg, k.scale_add, x, F(2), F(1), n)
    side = cg.fork(t)
    cg.memset(side, y, np.int32(0), N)
    cg.launch(side, cfg, k.axpb, y, x, F(3), F(0), n)
    cg.launch(t, (N // 256, 256), k.axpb, z, x, F(-1), F(5), n)
    cg.join(t, side)
    cg.launch(t, cfg, k.combine, out, y, z, n)
    cg.memcpy(t, copy, out, 4 * N)
    cg.host(t, seen.append, "done")
    return side


def expected() -> np.ndarray:
    x = np.arange(N, dtype=F) / F(N)
    x = x * F(2) + F(1)
    return (F(3) * x) - F(2) * (F(5) - x)


@pytest.fixture
def bufs(gpu):
    names = ("x", "y", "z", "out", "copy")
    out = {name: gpu.alloc(4 * N) for name in names}

    def reset() -> None:
        gpu.write(out["x"], np.arange(N, dtype=F) / F(N))
        for name in names[1:]:
            gpu.write(out[name], np.full(N, -7, F))

    out["reset"] = reset  # type: ignore[assignment]
    return out


def run_eager(device, k, bufs, seen):
    s = device.create_stream()
    step(s, k, bufs, seen)
    s.sync()


def run_cuda_core_capture(device, k, bufs, seen):
    gb = device.create_graph_builder()
    gb.begin_building()
    side = step(gb, k, bufs, seen)
    gb.end_building()
    graph = gb.complete()
    del side
    s = device.create_stream()
    graph.launch(s)
    s.sync()


def run_cudagraph_capture(device, k, bufs, seen):
    g = cg.Graph.capture(lambda s: step(s, k, bufs, seen))
    assert [n.kind for n in g.nodes].count("kernel") == 4
    s = device.create_stream()
    with g.instantiate() as exe:
        exe.launch(s)
        s.sync()


def run_explicit(device, k, bufs, seen):
    g = cg.Graph("step")
    p = g.path()
    step(p, k, bufs, seen)
    kinds = sorted(n.kind for n in g.nodes)
    assert kinds == sorted(["kernel"] * 4 + ["memset", "empty", "memcpy", "host"])
    s = device.create_stream()
    with g.instantiate() as exe:
        exe.launch(s)
        s.sync()


@pytest.mark.parametrize("mode", [run_eager, run_cuda_core_capture, run_cudagraph_capture, run_explicit])
def test_one_step_function_on_every_target_gives_the_same_numbers(device, gpu, kernels, bufs, mode):
    bufs["reset"]()
    seen: list[str] = []
    mode(device, kernels, bufs, seen)
    gpu.sync()
    np.testing.assert_allclose(gpu.read(bufs["copy"], N), expected(), rtol=1e-6)
    np.testing.assert_allclose(gpu.read(bufs["out"], N), expected(), rtol=1e-6)
    assert seen == ["done"]


def test_every_target_agrees_bit_for_bit(device, gpu, kernels, bufs):
    results = []
    for mode in (run_eager, run_cuda_core_capture, run_cudagraph_capture, run_explicit):
        bufs["reset"]()
        mode(device, kernels, bufs, [])
        results.append(gpu.read(bufs["copy"], N))
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_explicit_dag_has_the_fork_join_shape(kernels, bufs):
    g = cg.Graph("step")
    step(g.path(), kernels, bufs, [])
    kinds = [n.kind for n in g.nodes]
    preds = {n.index: sorted(p.index for p in n.predecessors) for n in g.nodes}
    # 0 scale_add; 1 memset <- 0; 2 axpb(y) <- 1; 3 axpb(z) <- 0; 4 join <- 3, 2; 5 combine <- 4; 6 copy; 7 host
    assert kinds == [
        "kernel",
        "memset",
        "kernel",
        "kernel",
        "empty",
        "kernel",
        "memcpy",
        "host",
    ]
    assert preds == {0: [], 1: [0], 2: [1], 3: [0], 4: [2, 3], 5: [4], 6: [5], 7: [6]}


@pytest.mark.parametrize("target", ["stream", "path"])
def test_launch_config_with_a_cluster_counts_clusters(device, gpu, kernels, target):
    if device.compute_capability.major < 9:
        pytest.skip("clusters need compute capability 9.0")
    from cuda.core import LaunchConfig

    n = 512
    x = gpu.upload(np.arange(n, dtype=F))
    y = gpu.upload(np.zeros(n, F))
    cfg = LaunchConfig(grid=2, cluster=2, block=128)  # 2 clusters of 2 blocks: 512 threads
    s = device.create_stream()
    if target == "stream":
        cg.launch(s, cfg, kernels.axpb, y, x, F(2), F(1), np.int32(n))
    else:
        g = cg.Graph("cluster")
        node = cg.launch(g.path(), cfg, kernels.axpb, y, x, F(2), F(1), np.int32(n))
        assert node.grid == (4, 1, 1)
        g.instantiate().launch(s)
    s.sync()
    np.testing.assert_array_equal(gpu.read(y, n), np.arange(n, dtype=F) * 2 + 1)


def test_launch_on_a_stream_matches_cuda_core_launch(device, gpu, kernels):
    from cuda.core import LaunchConfig, launch

    n = 256
    a = gpu.upload(np.ones(n, F))
    b = gpu.upload(np.ones(n, F))
    s = device.create_stream()
    cfg = LaunchConfig(grid=2, block=128)
    for _ in range(3):
        cg.launch(s, cfg, kernels.scale_add, a, F(2), F(1), np.int32(n))
        launch(s, cfg, kernels.scale_add, b, F(2), F(1), np.int32(n))
    s.sync()
    np.testing.assert_array_equal(gpu.read(a, n), gpu.read(b, n))
    np.testing.assert_array_equal(gpu.read(a, n), np.full(n, 15, F))


def test_a_raw_int_kernel_handle_on_a_stream(device, gpu, kernels):
    n = 128
    x = gpu.upload(np.zeros(n, np.int32))
    s = device.create_stream()
    cg.launch(s, (1, n), int(kernels.add_i32.handle), x, np.int32(4), np.int32(n))
    s.sync()
    np.testing.assert_array_equal(gpu.read(x, n, np.int32), np.full(n, 4, np.int32))


def test_stream_errors_are_typed_and_name_the_kernel(device, kernels):
    s = device.create_stream()
    with pytest.raises(KernelArgumentError, match=r"cudagraph\.launch: kernel 'add_i32' takes 3 parameters .*got 1"):
        cg.launch(s, (1, 32), kernels.add_i32, 0)
    with pytest.raises(DefinitionError, match=r"config\.block\[0\] = 4096"):
        cg.launch(s, (1, 4096), kernels.add_i32, 0, np.int32(1), np.int32(1))
    s.sync()


def test_a_captured_host_callback_lifts_typed_and_runs_every_launch(device):
    """The host node a capture records names this library's trampoline: lifted as a HostNode, run 3 times."""
    seen: list[int] = []
    g = cg.Graph.capture(lambda s: cg.host(s, seen.append, 7))
    assert [n.kind for n in g.nodes] == ["host"] and seen == []
    s = device.create_stream()
    with g.instantiate() as exe:
        for _ in range(3):
            exe.launch(s)
        s.sync()
    assert seen == [7, 7, 7]


@pytest.mark.parametrize("config", ["LaunchConfig", "tuple"])
def test_repeated_launches_take_the_learned_path_with_the_same_results(device, gpu, kernels, config):
    """The first launch teaches the compiled launcher (target, config, kernel, argument kinds); the
    next ones are made by it: every one must land, with its own arguments."""
    from cuda.core import LaunchConfig

    n = 256
    x = gpu.upload(np.arange(n, dtype=F))
    cfg = LaunchConfig(grid=n // 128, block=128) if config == "LaunchConfig" else (n // 128, 128)
    s = device.create_stream()
    expect = np.arange(n, dtype=F)
    for i in range(20):  # x = a*x + k
        a, k = F(1 + (i % 3)), F(i)
        target = s if i % 2 else int(s.handle)
        cg.launch(target, cfg, kernels.scale_add, x if i % 4 < 2 else int(x.handle), a, k, np.int32(n))
        expect = expect * a + k
    s.sync()
    np.testing.assert_allclose(gpu.read(x, n), expect, rtol=1e-6)


@pytest.mark.parametrize("backend", ["run", "capture", "explicit"])
def test_a_fan_out_fan_in_dag_gives_the_same_numbers_on_every_materializer(device, gpu, kernels, stream, backend):
    """The capture backend sets each node's dependencies to its predecessors' nodes: a diamond of
    chains must order every write as the definition does."""
    n = 256
    x = gpu.upload(np.arange(n, dtype=F))
    y = gpu.upload(np.zeros(n, F))
    z = gpu.upload(np.zeros(n, F))
    out = gpu.upload(np.zeros(n, F))
    nn = np.int32(n)
    g = cg.Graph("diamond")
    root = g.kernel(kernels.scale_add, 2, 128, (x, F(2), F(1), nn))  # x = 2x + 1
    left = right = root
    for _ in range(5):
        left = g.kernel(kernels.scale_add, 2, 128, (x, F(1), F(1), nn), after=left)  # x += 1 (5 times)
    right = g.kernel(kernels.axpb, 2, 128, (y, x, F(0), F(3), nn), after=right)  # y = 3
    for _ in range(4):
        right = g.kernel(kernels.scale_add, 2, 128, (y, F(2), F(0), nn), after=right)  # y *= 2 (4 times)
    j = g.join(left, right)
    g.kernel(kernels.axpb, 2, 128, (z, x, F(1), F(0), nn), after=j)  # z = x
    g.kernel(kernels.combine, 2, 128, (out, x, y, nn), after=j)  # out = x - 2y
    if backend == "run":
        g.run(stream)
    else:
        with g.instantiate(backend=backend) as exe:
            exe.launch(stream)
    stream.sync()
    xv = np.arange(n, dtype=F) * F(2) + F(1) + F(5)
    np.testing.assert_allclose(gpu.read(x, n), xv, rtol=1e-6)
    np.testing.assert_allclose(gpu.read(y, n), np.full(n, 48, F), rtol=1e-6)
    np.testing.assert_allclose(gpu.read(z, n), xv, rtol=1e-6)
    np.testing.assert_allclose(gpu.read(out, n), xv - F(96), rtol=1e-6)
