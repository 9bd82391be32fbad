"""Lifting driver graphs made by others, capture regions, and round trips (GPU)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.diff import node_state

pytestmark = pytest.mark.gpu

N = 256


def _kinds_and_edges(g: cg.Graph) -> tuple[list[str], set[tuple[int, int]]]:
    return [n.kind for n in g.nodes], {(a.index, b.index) for a, b in g.edges}


def _canonical(g: cg.Graph) -> tuple:
    """Kinds, edges and parameters in a form that compares across two lifts."""
    out = []
    for n in g.nodes:
        st = node_state(n)
        if n.kind == "kernel":
            st = (int(n.kernel), n.grid, n.block, n.shared_mem, n.args)
        out.append((n.kind, st, tuple(p.index for p in n.predecessors)))
    return tuple(out)


def test_lift_our_graph_round_trip(gpu, kernels, stream):
    x = gpu.upload(np.arange(N, dtype=np.float32))
    y = gpu.alloc(4 * N)
    g = cg.Graph("rt")
    z = g.memset(y, 0, count=N, element_size=4)
    k = g.kernel(kernels.axpb, 1, N, (y, x, np.float32(3.0), np.float32(1.0), np.int32(N)), after=z)
    e = g.empty(after=k)
    g.memcpy(x, y, 4 * N, after=e)
    with g.instantiate() as exe:
        lifted = cg.lift(exe.graph_handle)
    assert _kinds_and_edges(lifted) == _kinds_and_edges(g)
    assert lifted.nodes[1].grid == (1, 1, 1) and lifted.nodes[1].block == (N, 1, 1)
    assert lifted.nodes[1].args[2] == np.float32(3.0).tobytes()
    assert lifted.nodes[3].nbytes == 4 * N
    # lower the lifted definition, lift again: the same definition
    with lifted.instantiate() as exe2:
        again = cg.Graph.from_cuda_graph(exe2.graph_handle)
        exe2.launch(stream)
    assert _canonical(again) == _canonical(lifted)
    np.testing.assert_allclose(gpu.read(x, N), np.arange(N, dtype=np.float32) * 3 + 1)


def test_lift_cuda_core_graph_definition(gpu, kernels, stream):
    from cuda.core import LaunchConfig
    from cuda.core.graph import GraphDefinition

    x = gpu.upload(np.ones(N, np.float32))
    y = gpu.upload(np.ones(N, np.float32))
    cfg = LaunchConfig(grid=1, block=N)
    gd = GraphDefinition()
    a = gd.launch(cfg, kernels.scale_add, x, np.float32(2.0), np.float32(1.0), np.int32(N))
    b = a.launch(cfg, kernels.scale_add, x, np.float32(2.0), np.float32(1.0), np.int32(N))
    # The parallel branch works on its own buffer: two branches writing x would race.
    c = a.launch(cfg, kernels.scale_add, y, np.float32(3.0), np.float32(0.0), np.int32(N))
    gd.join(b, c)
    lifted = cg.lift(gd)
    kinds, edges = _kinds_and_edges(lifted)
    assert sorted(kinds) == ["empty", "kernel", "kernel", "kernel"]
    assert len(edges) == 4
    roots = [n for n in lifted.nodes if not n.predecessors]
    assert len(roots) == 1 and roots[0].kind == "kernel" and len(roots[0].successors) == 2
    with lifted.instantiate() as exe:
        exe.launch(stream)
    np.testing.assert_allclose(gpu.read(x, N), np.full(N, 7.0, np.float32))  # (1*2+1)*2+1
    np.testing.assert_allclose(gpu.read(y, N), np.full(N, 3.0, np.float32))  # 1*3+0


def test_lift_cuda_core_capture(gpu, kernels, device):
    from cuda.core import LaunchConfig, launch

    x = gpu.upload(np.zeros(N, np.float32))
    cfg = LaunchConfig(grid=1, block=N)
    gb = device.create_graph_builder()
    gb.begin_building()
    for _ in range(3):
        launch(gb, cfg, kernels.scale_add, x, np.float32(1.0), np.float32(2.0), np.int32(N))
    gb.end_building()
    lifted = cg.lift(gb)
    assert [n.kind for n in lifted.nodes] == ["kernel"] * 3
    assert {(a.index, b.index) for a, b in lifted.edges} == {(0, 1), (1, 2)}
    s = device.create_stream()
    with lifted.instantiate() as exe:
        exe.launch(s)
    np.testing.assert_allclose(gpu.read(x, N), np.full(N, 6.0, np.float32))


def test_graph_capture_function(gpu, kernels, device):
    from cuda.core import LaunchConfig, launch

    x = gpu.upload(np.ones(N, np.float32))
    cfg = LaunchConfig(grid=1, block=N)

    def body(s):
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # a cuda.core Stream, as cuda.core 1.2 asks
            core = s.core()
            launch(core, cfg, kernels.scale_add, x, np.float32(3.0), np.float32(0.0), np.int32(N))
        assert int(core.handle) == int(s.handle)
        launch(core, cfg, kernels.scale_add, x, np.float32(1.0), np.float32(1.0), np.int32(N))

    g = cg.Graph.capture(body)
    assert [n.kind for n in g.nodes] == ["kernel", "kernel"]
    s = device.create_stream()
    with g.instantiate() as exe:
        exe.launch(s)
        exe.launch(s)
    np.testing.assert_allclose(gpu.read(x, N), np.full(N, 13.0, np.float32))  # ((1*3+1)*3+1)


def test_lift_torch_graph(gpu, stream):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y.copy_(x * 2 + 1)  # warm up outside capture
    torch.cuda.synchronize()
    with torch.cuda.graph(g, stream=s):
        y.copy_(x * 2 + 1)
    lifted = cg.lift(g)
    assert lifted.nodes and all(n.kind in ("kernel", "memcpy", "memset", "empty", "opaque") for n in lifted.nodes)
    assert any(n.kind == "kernel" for n in lifted.nodes)
    y.zero_()
    torch.cuda.synchronize()
    with lifted.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    assert torch.equal(y.cpu(), (torch.arange(N, dtype=torch.float32) * 2 + 1))


def test_lift_cupy_graph(gpu, stream):
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(N, dtype=cupy.float32)
    cupy.multiply(x, 2, out=x)  # compile and load the kernels before capture
    cupy.add(x, 1, out=x)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        cupy.multiply(x, 2, out=x)
        cupy.add(x, 1, out=x)
        graph = s.end_capture()
    try:
        lifted = cg.lift(graph)
    except cg.errors.OperandError as exc:
        pytest.skip(f"this CuPy's Graph exposes no CUgraph handle ({exc}); use cg.Graph.capture with s.cupy()")
    assert [n.kind for n in lifted.nodes] == ["kernel", "kernel"]
    first, second = lifted.nodes
    assert lifted.edges == [(first, second)]
    x[...] = cupy.arange(N, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    with lifted.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(cupy.asnumpy(x), np.arange(N, dtype=np.float32) * 2 + 1)


def test_capture_region_with_cupy_ops(gpu, kernels, stream):
    # CuPy refuses cuBLAS calls under any stream capture, so this region records elementwise ops.
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(1)
    a_h = rng.standard_normal((64, 64)).astype(np.float32)
    b_h = rng.standard_normal((64, 64)).astype(np.float32)
    a = cupy.asarray(a_h)
    b = cupy.asarray(b_h)
    c = cupy.empty((64, 64), dtype=cupy.float32)
    cupy.multiply(a, b, out=c)  # compiles and loads the elementwise kernels before capture
    cupy.add(c, a, out=c)
    cupy.cuda.runtime.deviceSynchronize()
    out = np.zeros((64, 64), np.float32)
    g = cg.Graph("elementwise")
    scale = g.kernel(kernels.scale_add, 1, 256, (a, np.float32(2.0), np.float32(0.0), np.int32(256)))
    with g.capture(after=scale, name="ops") as region_stream:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # no deprecated CuPy stream wrapper
            cupy_stream = region_stream.cupy()
        assert cupy_stream.ptr == int(region_stream.handle)
        with cupy_stream:
            cupy.multiply(a, b, out=c)
            cupy.add(c, a, out=c)
    node = g.nodes[-1]
    assert node.kind == "child" and node.predecessors == (scale,)
    assert [n.kind for n in node.body.nodes] == ["kernel", "kernel"]
    g.memcpy(out, c, c.nbytes, after=node)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    expect = a_h.copy()
    expect.reshape(-1)[:256] *= 2
    np.testing.assert_allclose(out, expect * b_h + expect, rtol=1e-6)


def test_capture_region_with_torch_matmul(gpu, kernels, stream):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    rng = np.random.default_rng(2)
    a_h = rng.standard_normal((64, 64)).astype(np.float32)
    b_h = rng.standard_normal((64, 64)).astype(np.float32)
    a = torch.from_numpy(a_h).cuda()
    b = torch.from_numpy(b_h).cuda()
    c = torch.empty((64, 64), dtype=torch.float32, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.matmul(a, b, out=c)  # cuBLAS handle and workspace for this stream, made outside capture
    torch.cuda.synchronize()
    out = np.zeros((64, 64), np.float32)
    g = cg.Graph("mm")
    scale = g.kernel(kernels.scale_add, 1, 256, (a, np.float32(2.0), np.float32(0.0), np.int32(256)))
    with g.capture(after=scale, name="matmul", stream=side) as region_stream:
        with torch.cuda.stream(region_stream.torch()):
            torch.matmul(a, b, out=c)
    node = g.nodes[-1]
    assert node.kind == "child" and node.predecessors == (scale,)
    assert any(n.kind == "kernel" for n in node.body.nodes)
    g.memcpy(out, c, 64 * 64 * 4, after=node)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    expect = a_h.copy()
    expect.reshape(-1)[:256] *= 2
    np.testing.assert_allclose(out, expect @ b_h, rtol=1e-3, atol=1e-3)


def test_capture_region_refuses_legacy_default_stream(gpu):
    g = cg.Graph("legacy")
    with pytest.raises(cg.errors.OperandError, match="capture region 'r': stream: the legacy default stream"):
        with g.capture(name="r", stream=0):
            pass
    assert g.nodes == ()


def test_capture_region_invalidated_by_uncapturable_call(gpu, kernels):
    from cuda.bindings import driver as drv

    g = cg.Graph("bad-region")
    first = g.empty(name="first")
    with pytest.raises(cg.errors.DriverError, match=r"capture region 'alloc'.*not capturable") as info:
        with g.capture(after=first, name="alloc"):
            drv.cuMemAlloc(16)  # allocation is refused under capture and invalidates it
    assert info.value.name == "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"
    assert [n.name for n in g.nodes] == ["first"]


def test_capture_region_body_exception_propagates(gpu, kernels, stream):
    g = cg.Graph("raising-region")
    first = g.empty(name="first")
    with pytest.raises(ZeroDivisionError):
        with g.capture(after=first, name="raises"):
            raise ZeroDivisionError("inside the region")
    assert [n.name for n in g.nodes] == ["first"]
    from cuda.core import LaunchConfig, launch

    buf = gpu.upload(np.zeros(256, np.float32))
    with g.capture(after=first, name="ok") as s:
        cfg = LaunchConfig(grid=1, block=256)
        launch(s.core(), cfg, kernels.scale_add, buf, np.float32(1.0), np.float32(3.0), np.int32(256))
    out = np.zeros(256, np.float32)
    g.memcpy(out, buf, 256 * 4, after=g.nodes[-1])
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(out, np.full(256, 3.0, np.float32))
