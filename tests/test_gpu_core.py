"""GPU tests of cudagraph: every node kind, the graph shapes, kernel argument checking, parameters,
lifetime, host-callback errors, the executable, explicit construction, the eager runner and typed
driver errors. Every result is read back and compared with numpy.

All tests are marked ``gpu`` and skip (with the reason shown) where no NVIDIA driver/GPU works;
fixtures come from ``conftest.py`` (``device``, ``stream``, ``gpu``, ``kernels``, ``nvrtc``).
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import os
import subprocess
import sys
import textwrap
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors

pytestmark = pytest.mark.gpu

N = 256
BLOCK = 128
F4 = 4
SRC = str(Path(__file__).resolve().parents[1] / "src")


def grid_for(n: int) -> int:
    return (n + BLOCK - 1) // BLOCK


def scale_add(g, kernels, ptr, n, a, k, *, after=None, name=None):
    """Add ``x[0:n] = x[0:n] * a + k`` on the floats at ``ptr``."""
    return g.kernel(
        kernels.scale_add,
        grid_for(n),
        BLOCK,
        (ptr, np.float32(a), np.float32(k), np.int32(n)),
        after=after,
        name=name,
    )


def host_sync(stream) -> None:
    """Synchronize ``stream`` through cuda.bindings (releases the GIL for host nodes)."""
    from cuda.bindings import driver

    (err,) = driver.cuStreamSynchronize(stream.handle)
    assert not err, err


def launch_once(g, stream, **params) -> None:
    """Instantiate ``g``, launch it once on ``stream``, wait, and close the executable."""
    with g.instantiate(**params) as exe:
        exe.launch(stream)
        host_sync(stream)
        exe.check()


class StreamProto:
    """A stream known only through ``__cuda_stream__`` (as other libraries expose theirs)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def __cuda_stream__(self):
        return (0, int(self._stream.handle))


class DevArray:
    """Device memory seen only through ``__cuda_array_interface__`` (version 3)."""

    def __init__(self, buf, n: int) -> None:
        self._buf = buf
        self.__cuda_array_interface__ = {
            "shape": (n,),
            "typestr": "<f4",
            "data": (int(buf.handle), False),
            "version": 3,
            "strides": None,
        }


# =============================================================================== node kinds


def test_kernel_node_axpb(gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    dx, dy = gpu.upload(x), gpu.upload(np.zeros(N, np.float32))
    g = cg.Graph("axpb")
    node = g.kernel(kernels.axpb, grid_for(N), BLOCK, (dy, dx, np.float32(2.5), np.float32(-1.0), np.int32(N)))
    assert isinstance(node, cg.KernelNode)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
        np.testing.assert_allclose(gpu.read(dy, N), 2.5 * x - 1.0, rtol=1e-6)
        np.testing.assert_array_equal(gpu.read(dx, N), x)
        gpu.write(dx, x + 1)
        exe.launch(stream)
        stream.sync()
    np.testing.assert_allclose(gpu.read(dy, N), 2.5 * (x + 1) - 1.0, rtol=1e-6)


def test_memcpy_host_to_device_device_to_device_device_to_host(gpu, kernels, stream):
    host_in = np.arange(N, dtype=np.float32) * 3 + 1
    host_out = np.zeros(N, np.float32)
    da = gpu.upload(np.zeros(N, np.float32))
    db = gpu.upload(np.zeros(N, np.float32))
    g = cg.Graph("copies")
    h2d = g.memcpy(da, host_in, name="h2d")
    d2d = g.memcpy(db, da, after=h2d, name="d2d")
    k = scale_add(g, kernels, db, N, 2, 1, after=d2d)
    d2h = g.memcpy(host_out, db, after=k, name="d2h")
    assert [n.nbytes for n in (h2d, d2d, d2h)] == [N * F4] * 3
    exe = g.instantiate()
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(da, N), host_in)
    np.testing.assert_array_equal(gpu.read(db, N), host_in * 2 + 1)
    np.testing.assert_array_equal(host_out, host_in * 2 + 1)
    # The graph copies from/to the arrays' memory at every launch.
    host_in[:] = 7
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(host_out, np.full(N, 15, np.float32))
    exe.close()


def test_memcpy_partial_nbytes_and_raw_addresses(gpu, stream):
    src = np.arange(N, dtype=np.float32)
    dst_dev = gpu.upload(np.full(N, -1, np.float32))
    host_out = np.full(N, -2, np.float32)
    g = cg.Graph("partial")
    # 16 floats into the middle of the device buffer, through raw int addresses.
    c1 = g.memcpy(int(dst_dev.handle) + 8 * F4, src, nbytes=16 * F4)
    g.memcpy(host_out, dst_dev, nbytes=32 * F4, after=c1)
    launch_once(g, stream)
    expect_dev = np.full(N, -1, np.float32)
    expect_dev[8:24] = src[:16]
    np.testing.assert_array_equal(gpu.read(dst_dev, N), expect_dev)
    expect_host = np.full(N, -2, np.float32)
    expect_host[:32] = expect_dev[:32]
    np.testing.assert_array_equal(host_out, expect_host)


def test_memcpy_pinned_host_memory(gpu, kernels, stream):
    nbytes = N * F4
    pin_in, view_in = gpu.pinned(nbytes)
    pin_out, view_out = gpu.pinned(nbytes)
    vals = np.arange(N, dtype=np.float32) - 100
    view_in.view(np.float32)[:] = vals
    view_out.view(np.float32)[:] = 0
    dx = gpu.alloc(nbytes)
    g = cg.Graph("pinned")
    c1 = g.memcpy(dx, pin_in, name="pinned->dev")
    k = scale_add(g, kernels, dx, N, 2, 3, after=c1)
    g.memcpy(pin_out, dx, after=k, name="dev->pinned")
    exe = g.instantiate()
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(view_out.view(np.float32), vals * 2 + 3)
    np.testing.assert_array_equal(gpu.read(dx, N), vals * 2 + 3)
    exe.close()
    del pin_in, pin_out


def test_memset_sizes_and_pitched_every_byte(gpu, stream):
    nb = 256
    buf = gpu.upload(np.full(nb, 0xAB, np.uint8))
    whole = gpu.upload(np.zeros(16, np.int32))
    base = int(buf.handle)
    g = cg.Graph("memsets")
    g.memset(base + 0, 0x5A, count=10, name="m8")
    g.memset(base + 16, 0x1234, count=5, element_size=2, name="m16")
    g.memset(base + 32, 0xDEADBEEF, count=4, element_size=4, name="m32")
    g.memset(base + 48, np.float32(1.5), count=3, name="mf32")
    g.memset(base + 64, 0x11223344, width=3, height=4, pitch=32, element_size=4, name="m2d32")
    g.memset(base + 176, 0x07, width=5, height=3, pitch=8, name="m2d8")
    g.memset(base + 200, -1, count=2, element_size=2, name="neg16")
    g.memset(base + 208, np.uint16(0xBEEF), count=3, name="u16")
    g.memset(base + 216, 0x0102, width=2, height=2, pitch=8, element_size=2, name="m2d16")
    g.memset(whole, np.int32(-2), name="whole")  # count from the Buffer's size
    assert all(isinstance(n, cg.MemsetNode) for n in g.nodes)
    launch_once(g, stream)

    u8 = np.uint8
    exp = np.full(nb, 0xAB, u8)
    exp[0:10] = 0x5A
    exp[16:26] = np.full(5, 0x1234, "<u2").view(u8)
    exp[32:48] = np.full(4, 0xDEADBEEF, "<u4").view(u8)
    exp[48:60] = np.full(3, 1.5, "<f4").view(u8)
    for r in range(4):
        exp[64 + 32 * r : 64 + 32 * r + 12] = np.full(3, 0x11223344, "<u4").view(u8)
    for r in range(3):
        exp[176 + 8 * r : 176 + 8 * r + 5] = 0x07
    exp[200:204] = 0xFF
    exp[208:214] = np.full(3, 0xBEEF, "<u2").view(u8)
    for r in range(2):
        exp[216 + 8 * r : 216 + 8 * r + 4] = np.full(2, 0x0102, "<u2").view(u8)
    got = gpu.read(buf, nb, u8)
    bad = np.nonzero(got != exp)[0]
    assert bad.size == 0, f"bytes differ at offsets {bad[:16].tolist()}: got {got[bad[:16]]}, expected {exp[bad[:16]]}"
    np.testing.assert_array_equal(gpu.read(whole, 16, np.int32), np.full(16, -2, np.int32))


def test_host_nodes_run_in_order_and_see_copied_data(gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    host_out = np.zeros(N, np.float32)
    counter = itertools.count()
    log = []

    def note(tag, arr=None):
        log.append((next(counter), tag, None if arr is None else arr.copy()))

    g = cg.Graph("host")
    with g.path() as p:
        p.host(note, "start", name="start")
        p.kernel(kernels.scale_add, grid_for(N), BLOCK, (dx, np.float32(2), np.float32(1), np.int32(N)))
        p.memcpy(host_out, dx)
        p.host(note, "after1", host_out, name="after1")
        p.kernel(kernels.scale_add, grid_for(N), BLOCK, (dx, np.float32(3), np.float32(0), np.int32(N)))
        p.memcpy(host_out, dx)
        p.host(note, "after2", host_out, name="after2")
    assert sum(isinstance(n, cg.HostNode) for n in g.nodes) == 3
    exe = g.instantiate()
    exe.launch(stream)
    host_sync(stream)
    exe.check()
    assert [(i, t) for i, t, _ in log] == [(0, "start"), (1, "after1"), (2, "after2")]
    np.testing.assert_array_equal(log[1][2], x * 2 + 1)
    np.testing.assert_array_equal(log[2][2], (x * 2 + 1) * 3)
    exe.launch(stream)
    host_sync(stream)
    assert [(i, t) for i, t, _ in log[3:]] == [(3, "start"), (4, "after1"), (5, "after2")]
    np.testing.assert_array_equal(log[5][2], ((x * 2 + 1) * 3 * 2 + 1) * 3)
    exe.close()


def test_event_record_and_wait_across_graphs(device, gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    ev = device.create_event()
    s2 = device.create_stream()
    g1 = cg.Graph("producer")
    k1 = scale_add(g1, kernels, dx, N, 2, 1)
    rec = g1.record(ev, after=k1, name="rec")
    g2 = cg.Graph("consumer")
    w = g2.wait(ev.handle, name="wait")  # a raw CUevent works too
    scale_add(g2, kernels, dx, N, 3, 0, after=w)
    assert isinstance(rec, cg.EventRecordNode) and isinstance(w, cg.EventWaitNode)
    e1, e2 = g1.instantiate(), g2.instantiate()
    e1.launch(stream)
    e2.launch(s2)
    s2.sync()
    np.testing.assert_array_equal(gpu.read(dx, N), (x * 2 + 1) * 3)
    ev.sync()
    assert ev.is_done
    e1.launch(stream)
    e2.launch(s2)
    s2.sync()
    np.testing.assert_array_equal(gpu.read(dx, N), ((x * 2 + 1) * 3 * 2 + 1) * 3)
    e1.close()
    e2.close()


def test_child_graph_runs_twice_and_parent_kernel_args_survive(gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    body = cg.Graph("body")
    scale_add(body, kernels, dx, N, 3, 0, name="body_k")
    parent = cg.Graph("parent")
    # The same args tuple before and after the child: the child's kernel (same Kernel, other
    # args) must not leak its argument values into the parent's last kernel.
    args = (dx, np.float32(2), np.float32(1), np.int32(N))
    k1 = parent.kernel(kernels.scale_add, grid_for(N), BLOCK, args, name="first")
    c1 = parent.child(body, after=k1, name="c1")
    c2 = parent.child(body, after=c1, name="c2")
    parent.kernel(kernels.scale_add, grid_for(N), BLOCK, args, after=c2, name="last")
    assert isinstance(c1, cg.ChildGraphNode) and c1.body is body
    exe = parent.instantiate()
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(dx, N), (x * 2 + 1) * 9 * 2 + 1)
    exe.close()


def test_empty_and_join(gpu, kernels, stream):
    half = N // 2
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    base = int(dx.handle)
    g = cg.Graph("join")
    k1 = scale_add(g, kernels, base, half, 2, 1, name="left")
    k2 = scale_add(g, kernels, base + half * F4, half, 3, 2, name="right")
    j = g.join(k1, k2)
    e = g.empty(after=j, name="sync")
    scale_add(g, kernels, base, N, 2, 5, after=e, name="all")
    lone = g.empty(name="lone")
    assert isinstance(j, cg.EmptyNode) and isinstance(lone, cg.EmptyNode)
    assert set(j.predecessors) == {k1, k2}
    launch_once(g, stream)
    exp = x.copy()
    exp[:half] = exp[:half] * 2 + 1
    exp[half:] = exp[half:] * 3 + 2
    exp = exp * 2 + 5
    np.testing.assert_array_equal(gpu.read(dx, N), exp)


def test_empty_graph_instantiates_and_launches(device, stream):
    g = cg.Graph("nothing")
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    assert exe.closed


# =============================================================================== shapes

Q, H = N // 4, N // 2
# Each op: (first element, count, a, k, indices of the ops it depends on); x[s:s+c] = x[s:s+c] * a + k.
# Ops on overlapping ranges are always ordered by edges, so list order is a valid reference order.
SHAPES = {
    "single": [(0, N, 2, 1, [])],
    "chain": [(0, N, 2, 1, []), (0, N, 3, 2, [0]), (0, N, 2, -1, [1]), (0, N, 1, 5, [2])],
    "fan_out": [(0, N, 2, 1, []), (0, Q, 3, 1, [0]), (Q, Q, 3, 2, [0]), (2 * Q, Q, 3, 3, [0]), (3 * Q, Q, 3, 4, [0])],
    "fan_in": [
        (0, Q, 3, 1, []),
        (Q, Q, 3, 2, []),
        (2 * Q, Q, 3, 3, []),
        (3 * Q, Q, 3, 4, []),
        (0, N, 2, 1, [0, 1, 2, 3]),
    ],
    "diamond": [(0, N, 2, 1, []), (0, H, 3, 1, [0]), (H, H, 3, 2, [0]), (0, N, 2, 7, [1, 2])],
    "disconnected": [(0, H, 2, 1, []), (0, H, 3, 2, [0]), (H, H, 3, 1, []), (H, H, 2, 5, [2])],
}


def _apply(x: np.ndarray, ops) -> np.ndarray:
    x = x.copy()
    for s, c, a, k, _ in ops:
        x[s : s + c] = x[s : s + c] * np.float32(a) + np.float32(k)
    return x


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shapes_results_follow_edges(gpu, kernels, stream, shape):
    ops = SHAPES[shape]
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    base = int(dx.handle)
    g = cg.Graph(shape)
    nodes = []
    for i, (s, c, a, k, deps) in enumerate(ops):
        nodes.append(scale_add(g, kernels, base + s * F4, c, a, k, after=[nodes[d] for d in deps], name=f"op{i}"))
    assert g.num_edges == sum(len(op[4]) for op in ops)
    exe = g.instantiate()
    exe.launch(stream)
    stream.sync()
    once = _apply(x, ops)
    np.testing.assert_array_equal(gpu.read(dx, N), once)
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(dx, N), _apply(once, ops))
    exe.close()


# =============================================================================== kernel arguments


def test_wrong_argument_count_names_node_kernel_expected_given(gpu, kernels):
    dx = gpu.alloc(N * F4)
    g = cg.Graph("argcount")
    g.kernel(kernels.scale_add, 1, 32, (dx, np.float32(1.0)), name="k")
    with pytest.raises(errors.KernelArgumentError) as ei:
        g.instantiate()
    e = ei.value
    msg = str(e)
    assert "kernel#0 'k'" in msg
    assert "scale_add" in msg
    assert "4" in msg and "2" in msg
    assert (e.kernel, e.expected, e.given) == ("scale_add", 4, 2)
    assert isinstance(e, errors.OperandError) and isinstance(e, TypeError)


@pytest.mark.parametrize(
    "bad_index, make_args, expected, given",
    [
        (1, lambda p: (p, np.float64(2.0), np.float32(1.0), np.int32(N)), 4, 8),
        (3, lambda p: (p, np.float32(2.0), np.float32(1.0), N), 4, 8),
        (2, lambda p: (p, np.float32(2.0), np.int16(1), np.int32(N)), 4, 2),
        (0, lambda p: (np.int32(5), np.float32(2.0), np.float32(1.0), np.int32(N)), 8, 4),
    ],
    ids=["float64-for-float", "python-int-for-int", "int16-for-float", "int32-for-pointer"],
)
def test_wrong_argument_size(gpu, kernels, bad_index, make_args, expected, given):
    dx = gpu.alloc(N * F4)
    g = cg.Graph("argsize")
    g.kernel(kernels.scale_add, 1, 32, make_args(dx), name="sized")
    with pytest.raises(errors.KernelArgumentError) as ei:
        g.instantiate()
    e = ei.value
    assert (e.index, e.expected, e.given) == (bad_index, expected, given)
    assert e.kernel == "scale_add"
    assert "kernel#0 'sized'" in str(e) and f"parameter {bad_index}" in str(e)


def test_wrong_argument_size_in_eager_run(gpu, kernels, stream):
    dx = gpu.alloc(N * F4)
    g = cg.Graph("eager_argsize")
    g.kernel(kernels.scale_add, 1, 32, (dx, np.float64(2.0), np.float32(1.0), np.int32(N)), name="e")
    with pytest.raises(errors.KernelArgumentError) as ei:
        g.run(stream)
    assert (ei.value.index, ei.value.expected, ei.value.given) == (1, 4, 8)


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_double), ("b", ctypes.c_int)]


def test_struct_by_value_as_bytes_and_ctypes(gpu, kernels, stream):
    dt = np.dtype([("a", "<f8"), ("b", "<i4")], align=True)
    assert dt.itemsize == 16 and ctypes.sizeof(Pair) == 16
    out = gpu.upload(np.zeros(3, np.float64))
    base = int(out.handle)
    g = cg.Graph("structs")
    g.kernel(kernels.pair_out, 1, 1, (np.array([(1.25, 7)], dtype=dt).tobytes(), base), name="np-bytes")
    g.kernel(kernels.pair_out, 1, 1, (Pair(2.5, -3), base + 8), name="ctypes-struct")
    g.kernel(kernels.pair_out, 1, 1, (bytearray(np.array([(-4.0, 100)], dtype=dt).tobytes()), base + 16))
    launch_once(g, stream)
    np.testing.assert_array_equal(gpu.read(out, 3, np.float64), [1.25 * 2 + 7, 2.5 * 2 - 3, -4.0 * 2 + 100])

    bad = cg.Graph("short_struct")
    bad.kernel(kernels.pair_out, 1, 1, (b"\x00" * 12, base), name="short")
    with pytest.raises(errors.KernelArgumentError) as ei:
        bad.instantiate()
    assert (ei.value.index, ei.value.expected, ei.value.given) == (0, 16, 12)


def test_ctypes_scalars_and_mixed_alignment(gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    out = gpu.upload(np.zeros(3, np.float64))
    g = cg.Graph("ctypes")
    g.kernel(kernels.scale_add, grid_for(N), BLOCK, (dx, ctypes.c_float(2.0), ctypes.c_float(1.0), ctypes.c_int(N)))
    # char @0, double @8, short @16, pointer @24: the packing follows the real offsets.
    g.kernel(kernels.mixed, 1, 1, (np.int8(-5), np.float64(3.25), np.int16(1234), out))
    launch_once(g, stream)
    np.testing.assert_array_equal(gpu.read(dx, N), x * 2 + 1)
    np.testing.assert_array_equal(gpu.read(out, 3, np.float64), [-5.0, 3.25, 1234.0])


def test_cuda_array_interface_operands(gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    arr = DevArray(gpu.upload(x), N)
    host_out = np.zeros(N, np.float32)
    g = cg.Graph("cai")
    k = scale_add(g, kernels, arr, N, 2, 1)
    c = g.memcpy(host_out, arr, after=k)
    assert c.nbytes == N * F4
    launch_once(g, stream)
    np.testing.assert_array_equal(host_out, x * 2 + 1)


def test_cupy_array_as_pointer_argument(gpu, kernels, stream):
    cp = pytest.importorskip("cupy")
    try:
        a = cp.arange(N, dtype=cp.float32)
        cp.cuda.Device().synchronize()
    except Exception as exc:
        pytest.skip(f"cupy is not usable: {exc}")
    g = cg.Graph("cupy")
    scale_add(g, kernels, a, N, 2, 1)
    gpu.sync()
    launch_once(g, stream)
    np.testing.assert_array_equal(cp.asnumpy(a), np.arange(N, dtype=np.float32) * 2 + 1)


@pytest.mark.parametrize("form", ["CUkernel", "CUfunction"])
def test_raw_kernel_handles(gpu, kernels, stream, form):
    from cuda.bindings import driver

    if form == "CUkernel":
        handle = kernels.scale_add.handle
    else:
        err, handle = driver.cuKernelGetFunction(kernels.scale_add.handle)
        assert not err, err
    assert type(handle).__name__ == form
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    g = cg.Graph(form)
    g.kernel(handle, grid_for(N), BLOCK, (dx, np.float32(4), np.float32(-3), np.int32(N)))
    launch_once(g, stream)
    np.testing.assert_array_equal(gpu.read(dx, N), x * 4 - 3)
    bad = cg.Graph("raw_count")
    bad.kernel(handle, 1, 1, (dx,), name="raw")
    with pytest.raises(errors.KernelArgumentError) as ei:
        bad.instantiate()
    assert (ei.value.expected, ei.value.given) == (4, 1)
    assert "kernel#0 'raw'" in str(ei.value)


# =============================================================================== params


def test_pointer_and_scalar_params(gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    y = np.arange(N, dtype=np.float32) * -1
    dx, dy = gpu.upload(x), gpu.upload(y)
    host_out = np.zeros(N, np.float32)
    g = cg.Graph("params")
    p = g.param("x")
    a = g.param("a", np.float32)
    b = g.param("b", np.float32, default=1.0)
    assert p.is_pointer and not a.is_pointer
    k = g.kernel(kernels.scale_add, grid_for(N), BLOCK, (p, a, b, np.int32(N)), name="k")
    g.memcpy(host_out, p, after=k, name="out")

    with pytest.raises(errors.DefinitionError) as ei:
        g.instantiate()
    assert "'x'" in str(ei.value) and "'a'" in str(ei.value)
    with pytest.raises(errors.DefinitionError) as ei:
        g.instantiate(x=dx)
    assert "'a'" in str(ei.value) and "'x'" not in str(ei.value)
    with pytest.raises(errors.OperandError) as ei:
        g.instantiate(x=dx, a=2.0, y=dx)
    assert "'y'" in str(ei.value)

    exe = g.instantiate(x=dx, a=2.0)
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(host_out, x * 2 + 1)
    np.testing.assert_array_equal(gpu.read(dx, N), x * 2 + 1)
    assert exe.bindings["x"] == int(dx.handle)

    exe2 = g.instantiate(x=int(dy.handle), a=np.float32(3.0), b=-2.0)
    exe2.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(host_out, y * 3 - 2)
    np.testing.assert_array_equal(gpu.read(dx, N), x * 2 + 1)  # untouched by exe2

    exe3 = g.instantiate(x=DevArray(dy, N), a=1.0, b=0.5)
    exe3.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(host_out, (y * 3 - 2) + 0.5)
    for e in (exe, exe2, exe3):
        e.close()


# =============================================================================== lifetime

LIFE_SOURCE = r"""
extern "C" __global__ void life(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + 0.5f;
}
"""


def _build_owned_graph(gpu, nvrtc, results):
    """A graph whose Buffer, Kernel, callable and host arrays are referenced only by the graph."""
    buf = gpu.alloc(N * F4)
    kern = nvrtc(LIFE_SOURCE, ["life"]).life
    host_in = np.arange(N, dtype=np.float32)
    host_out = np.zeros(N, np.float32)
    g = cg.Graph("owned")
    c1 = g.memcpy(buf, host_in)
    k = g.kernel(kern, grid_for(N), BLOCK, (buf, np.float32(3), np.int32(N)), after=c1)
    c2 = g.memcpy(host_out, buf, after=k)
    g.host(lambda: results.append(host_out.copy()), after=c2, name="collect")
    return g


def test_definition_keeps_operands_alive(gpu, nvrtc, stream):
    results = []
    g = _build_owned_graph(gpu, nvrtc, results)
    for _ in range(3):
        gc.collect()
    expected = np.arange(N, dtype=np.float32) * 3 + 0.5
    exe = g.instantiate()
    exe.launch(stream)
    host_sync(stream)
    exe.check()
    assert len(results) == 1
    np.testing.assert_array_equal(results[0], expected)

    # The executable keeps everything alive once the definition and user references are gone.
    wr = weakref.ref(g)
    del g
    for _ in range(3):
        gc.collect()
    assert wr() is not None
    exe.launch(stream)
    exe.launch(stream)
    host_sync(stream)
    exe.check()
    assert len(results) == 3
    np.testing.assert_array_equal(results[2], expected)

    # Closing and dropping the executable releases the definition.
    exe.close()
    del exe
    for _ in range(3):
        gc.collect()
    if wr() is not None:
        holders = [
            type(r).__name__ + (f" {sorted(map(str, r))[:8]}" if isinstance(r, dict) else "")
            for r in gc.get_referrers(wr())
        ]
        raise AssertionError(f"the graph definition is still referenced after its executable was closed: {holders}")


def test_executable_outlives_definition_built_inline(gpu, nvrtc, stream):
    results = []
    exe = _build_owned_graph(gpu, nvrtc, results).instantiate()
    for _ in range(3):
        gc.collect()
    exe.launch(stream)
    host_sync(stream)
    exe.check()
    np.testing.assert_array_equal(results[-1], np.arange(N, dtype=np.float32) * 3 + 0.5)
    exe.close()


# =============================================================================== host-callback errors


def _failing_graph(gpu, kernels, fail_times):
    """kernel -> host (raises ValueError('boom') the first ``fail_times`` calls) -> kernel."""
    calls = []

    def explode():
        calls.append(len(calls))
        if len(calls) <= fail_times:
            raise ValueError("boom")

    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    g = cg.Graph("hostfail")
    k1 = scale_add(g, kernels, dx, N, 1, 1)
    h = g.host(explode, after=k1, name="explode")
    scale_add(g, kernels, dx, N, 1, 10, after=h)
    return g, h, calls, dx, x


def test_host_callback_error_from_check(gpu, kernels, stream):
    g, h, calls, dx, x = _failing_graph(gpu, kernels, fail_times=1)
    exe = g.instantiate()
    exe.launch(stream)
    host_sync(stream)
    with pytest.raises(errors.HostCallbackError) as ei:
        exe.check()
    e = ei.value
    assert isinstance(e.__cause__, ValueError) and str(e.__cause__) == "boom"
    assert e.node is h
    assert "host#1 'explode'" in str(e) and "boom" in str(e) and "hostfail" in str(e)
    exe.check()  # reported once
    # The graph ran to the end despite the exception; the next launch works normally.
    np.testing.assert_array_equal(gpu.read(dx, N), x + 11)
    exe.launch(stream)
    host_sync(stream)
    exe.check()
    assert calls == [0, 1]
    np.testing.assert_array_equal(gpu.read(dx, N), x + 22)
    exe.close()


def test_host_callback_error_raised_by_next_launch(gpu, kernels, stream):
    g, h, calls, dx, x = _failing_graph(gpu, kernels, fail_times=1)
    exe = g.instantiate()
    exe.launch(stream)
    host_sync(stream)
    with pytest.raises(errors.HostCallbackError) as ei:
        exe.launch(stream)
    assert isinstance(ei.value.__cause__, ValueError)
    assert ei.value.node is h
    host_sync(stream)
    np.testing.assert_array_equal(gpu.read(dx, N), x + 11)  # the failing launch call did not launch
    assert calls == [0]
    exe.launch(stream)
    host_sync(stream)
    exe.check()
    assert calls == [0, 1]
    np.testing.assert_array_equal(gpu.read(dx, N), x + 22)
    exe.close()


def test_host_callback_error_in_eager_run(gpu, kernels, stream):
    g, h, _calls, dx, x = _failing_graph(gpu, kernels, fail_times=1)
    with pytest.raises(errors.HostCallbackError) as ei:
        g.run(stream)
    assert isinstance(ei.value.__cause__, ValueError) and ei.value.node is h
    np.testing.assert_array_equal(gpu.read(dx, N), x + 11)


def test_host_callback_runs_after_executable_dropped_in_flight(stream, gpu):
    # ``g.instantiate().launch(s)`` drops the executable while the launch is in flight. CUDA frees an
    # in-flight executable only when it completes, so its host callbacks must still run.
    started, gate = threading.Event(), threading.Event()
    log = []

    def hold():
        started.set()
        gate.wait(timeout=5)

    g = cg.Graph("in_flight")
    h1 = g.host(hold, name="hold")
    g.host(log.append, "ran", after=h1, name="after_hold")
    exe = g.instantiate()
    exe.launch(stream)
    assert started.wait(timeout=5), "the first host callback did not start"
    del exe
    gc.collect()
    gate.set()
    host_sync(stream)
    assert log == ["ran"], "a host callback of a launched graph was skipped: its executable was collected in flight"


# =============================================================================== executable


def _simple_graph(kernels, dx, a=2, k=1):
    g = cg.Graph("simple")
    scale_add(g, kernels, dx, N, a, k, name="k")
    return g


def test_executable_context_manager_and_close(gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    g = _simple_graph(kernels, dx)
    with g.instantiate() as exe:
        assert not exe.closed
        assert exe.graph is g
        exe.launch(stream)
        stream.sync()
    assert exe.closed
    np.testing.assert_array_equal(gpu.read(dx, N), x * 2 + 1)
    with pytest.raises(errors.ExecutableClosedError):
        exe.launch(stream)
    with pytest.raises(errors.ExecutableClosedError):
        exe.upload(stream)
    with pytest.raises(errors.ExecutableClosedError):
        _ = exe.handle
    exe.close()
    exe.close()
    assert "closed" in repr(exe)
    np.testing.assert_array_equal(gpu.read(dx, N), x * 2 + 1)  # nothing ran after close


def test_executable_upload_and_driver_node(gpu, kernels, stream):
    from cuda.bindings import driver

    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    g = _simple_graph(kernels, dx)
    k = g.nodes[0]
    exe = g.instantiate()
    exe.upload(stream)
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(dx, N), x * 2 + 1)
    err, t = driver.cuGraphNodeGetType(exe.driver_node(k))
    assert not err and t == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
    other = cg.Graph("other").empty()
    with pytest.raises(KeyError):
        exe.driver_node(other)
    exe.close()


@pytest.mark.parametrize("option", ["upload_stream", "auto_free_on_launch", "use_node_priority"])
def test_instantiate_options(gpu, kernels, stream, option):
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    g = _simple_graph(kernels, dx, 3, 2)
    kwargs = {"upload_stream": stream} if option == "upload_stream" else {option: True}
    with g.instantiate(**kwargs) as exe:
        exe.launch(stream)
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(gpu.read(dx, N), (x * 3 + 2) * 3 + 2)


def test_instantiate_device_launch(gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    g = _simple_graph(kernels, dx)
    try:
        exe = g.instantiate(device_launch=True)
    except Exception as exc:  # the driver may refuse; it must say so with a typed error
        assert isinstance(exc, errors.DriverError), f"raw {type(exc).__name__}: {exc}"
        assert exc.call and exc.call in str(exc)
        return
    exe.upload(stream)
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(dx, N), x * 2 + 1)
    exe.close()


@pytest.mark.parametrize("kind", ["cuda.core", "__cuda_stream__", "None", "CUstream"])
def test_launch_stream_kinds(gpu, kernels, stream, kind):
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    g = _simple_graph(kernels, dx, 2, 3)
    s = {"cuda.core": stream, "__cuda_stream__": StreamProto(stream), "None": None, "CUstream": stream.handle}[kind]
    with g.instantiate() as exe:
        exe.launch(s)
        exe.launch(s)  # same stream object again (cached handle)
        gpu.sync()
        np.testing.assert_array_equal(gpu.read(dx, N), (x * 2 + 3) * 2 + 3)
        exe.upload(s)


def test_compiled_launch_alternates_streams_and_rebinds(device, gpu, kernels, stream):
    from cudagraph.driver.c_entry import NATIVE

    if NATIVE is not None:  # the compiled method is in place wherever the driver is found
        assert type(cg.Executable.launch).__name__ == "LaunchMethod"
    x = np.arange(N, dtype=np.float32)
    y = np.arange(N, dtype=np.float32) * -1
    dx, dy = gpu.upload(x), gpu.upload(y)
    g = cg.Graph("two streams")
    p = g.param("p")
    scale_add(g, kernels, p, N, 2, 1)
    other = device.create_stream()
    with g.instantiate(p=dx) as exe:
        for s in (stream, stream, other, other, stream):  # the first launch on each stream goes to the twin
            exe.launch(s)
            s.sync()
        for _ in range(5):
            x = x * 2 + 1
        np.testing.assert_array_equal(gpu.read(dx, N), x)
        exe.launch(stream=other, p=dy)
        exe.launch(other, p=dy)
        other.sync()
        exe.launch(stream, p=dx)
        stream.sync()
        np.testing.assert_array_equal(gpu.read(dy, N), (y * 2 + 1) * 2 + 1)
        np.testing.assert_array_equal(gpu.read(dx, N), x * 2 + 1)
        assert exe.bindings["p"] == int(dx.handle) and exe.update_calls == 2
        for _ in range(3):  # a new object of the same stream per call, as torch.cuda.current_stream() gives
            exe.launch(StreamProto(stream))
        exe.launch(int(stream.handle), p=dy)
        stream.sync()
        np.testing.assert_array_equal(gpu.read(dx, N), ((((x * 2 + 1) * 2 + 1) * 2 + 1) * 2 + 1))
        np.testing.assert_array_equal(gpu.read(dy, N), ((y * 2 + 1) * 2 + 1) * 2 + 1)
    other.close()


def test_torch_tensors_rebind_a_plain_pointer(gpu, kernels, stream, converted):
    """Fresh torch tensors bound to a plain ``g.param`` pointer at each launch: each one is scaled, the first of
    a layout is resolved in full and later ones (compiled) without the Python checks; a tensor that requires
    grad is refused as the full resolution refuses it, and nothing changes."""
    torch = pytest.importorskip("torch")
    from cudagraph.driver.c_entry import NATIVE

    g = cg.Graph("plain torch")
    scale_add(g, kernels, g.param("p"), N, 2, 1)
    tensors = [torch.arange(N, dtype=torch.float32, device="cuda") + i for i in range(4)]
    torch.cuda.synchronize()
    with g.instantiate(p=gpu.alloc(N * F4)) as exe:
        for i, t in enumerate(tensors):
            converted.clear()
            exe.launch(stream, p=t)
            assert converted == (["p"] if i == 0 or NATIVE is None else []), i
            assert exe.bindings["p"] == t.data_ptr()
        stream.sync()
        for i, t in enumerate(tensors):
            np.testing.assert_array_equal(t.cpu().numpy(), (np.arange(N, dtype=np.float32) + i) * 2 + 1)
        grad = torch.zeros(N, device="cuda", requires_grad=True)
        refused = r"param 'p': reading the address of a Tensor failed: .*requires grad"
        with pytest.raises(errors.OperandError, match=refused):
            exe.launch(stream, p=grad)
        assert exe.bindings["p"] == tensors[-1].data_ptr() and exe.update_calls == 4
        exe.launch(stream, p=tensors[0])
        stream.sync()
        np.testing.assert_array_equal(tensors[0].cpu().numpy(), (np.arange(N, dtype=np.float32) * 2 + 1) * 2 + 1)


def test_cuda_tensors_are_read_through_dlpacks_c_exchange_api(gpu, kernels, stream, converted, monkeypatch):
    """Where torch offers DLPack's C exchange API, the compiled rebind reads a CUDA tensor's address, shape,
    strides and device through it: torch's getters for them are not called, slices of one allocation bind at
    their own addresses, and every tensor is scaled in place."""
    torch = pytest.importorskip("torch")
    from cudagraph.driver.c_entry import NATIVE

    if NATIVE is None:
        pytest.skip("the compiled module is not built (tensors are read by the Python reader)")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} has no __dlpack_c_exchange_api__ (the getters are read)")
    g = cg.Graph("dlpack torch")
    scale_add(g, kernels, g.param("p"), N, 2, 1)
    whole = torch.arange(4 * N, dtype=torch.float32, device="cuda")
    views = [whole[i * N : (i + 1) * N] for i in range(4)]  # one allocation, four addresses
    torch.cuda.synchronize()
    read: list[str] = []

    def counted(name: str, getter: Any) -> Any:
        def read_it(self: Any, *args: Any) -> Any:
            read.append(name)
            return getter(self, *args)

        return read_it

    with g.instantiate(p=gpu.alloc(N * F4)) as exe:
        exe.launch(stream, p=torch.zeros(N, device="cuda"))  # the layout resolves in full (the twin)
        with monkeypatch.context() as patch:
            for name in ("data_ptr", "stride", "get_device"):
                patch.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
            for name in ("shape", "is_cuda"):
                patch.setattr(torch.Tensor, name, property(counted(name, getattr(torch.Tensor, name).__get__)))
            for v in views:
                read.clear()
                converted.clear()
                exe.launch(stream, p=v)
                assert converted == [] and read == []
        assert exe.bindings["p"] == views[-1].data_ptr() and exe.update_calls == 5
        stream.sync()
        np.testing.assert_array_equal(whole.cpu().numpy(), np.arange(4 * N, dtype=np.float32) * 2 + 1)


def test_torch_tensors_are_operands_of_every_dtype(kernels, stream):
    """CUDA tensors as kernel arguments (views at their own offsets, in a graph and by ``cg.launch``) and as
    copy operands, float8 included (its ``__cuda_array_interface__`` knows no float8 dtype)."""
    torch = pytest.importorskip("torch")
    whole = torch.arange(4 * N, dtype=torch.float32, device="cuda")
    view = whole[N : 3 * N]
    torch.cuda.synchronize()
    g = cg.Graph("torch operands")
    scale_add(g, kernels, view, 2 * N, 2, 1)
    with g.instantiate() as exe:
        exe.launch(stream)
    cg.launch(stream, (grid_for(N), BLOCK), kernels.scale_add, whole, np.float32(1), np.float32(-1), np.int32(N))
    stream.sync()
    expected = np.arange(4 * N, dtype=np.float32)
    expected[N : 3 * N] = expected[N : 3 * N] * 2 + 1
    expected[:N] -= 1
    np.testing.assert_array_equal(whole.cpu().numpy(), expected)
    for dtype in (torch.bfloat16, getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)):
        if dtype is None:
            continue
        src = torch.arange(256, dtype=torch.uint8, device="cuda").view(dtype)  # 256 bytes
        base = torch.zeros(4, 256, dtype=dtype, device="cuda")
        dst = base[1:3, 64:]  # a view starting (256 + 64) elements into base
        torch.cuda.synchronize()
        c = cg.Graph("copy")
        c.memcpy(dst=dst, src=src, nbytes=256)
        with pytest.raises(errors.DefinitionError, match=r"nbytes = 257 exceeds the 256 bytes of src"):
            c.memcpy(dst=dst, src=src, nbytes=257)
        with c.instantiate() as exe:
            exe.launch(stream)
        stream.sync()
        start = (256 + 64) * dtype.itemsize
        expected_bytes = np.zeros(4 * 256 * dtype.itemsize, dtype=np.uint8)
        expected_bytes[start : start + 256] = np.arange(256)
        np.testing.assert_array_equal(base.view(torch.uint8).cpu().numpy().ravel(), expected_bytes, err_msg=str(dtype))


def test_launch_rejects_non_stream(gpu, kernels):
    dx = gpu.alloc(N * F4)
    with _simple_graph(kernels, dx).instantiate() as exe:
        with pytest.raises(errors.OperandError):
            exe.launch("not a stream")


# =============================================================================== explicit construction


def test_lower_builds_exact_nodes_edges_and_types(device, gpu, kernels):
    from cuda.bindings import driver

    from cudagraph.driver import host_callbacks as _host_callbacks
    from cudagraph.materialize.explicit import lower

    dx = gpu.alloc(N * F4)
    host = np.zeros(N, np.float32)
    ev = device.create_event()
    body = cg.Graph("body")
    bk = scale_add(body, kernels, dx, N, 2, 0)
    body.empty(after=bk)

    g = cg.Graph("all_kinds")
    m = g.memset(dx, 0, count=N * F4, name="zero")
    c = g.memcpy(dx, host, after=m, name="h2d")
    k1 = scale_add(g, kernels, dx, H, 2, 1, after=c, name="k1")
    k2 = scale_add(g, kernels, int(dx.handle) + H * F4, H, 3, 1, after=c, name="k2")
    j = g.join(k1, k2)
    ch = g.child(body, after=j, name="child")
    r = g.record(ev, after=ch, name="rec")
    w = g.wait(ev, after=r, name="wait")
    h = g.host(lambda: None, after=[w, k1], name="h")
    g.empty(name="island")
    g.add_edge(m, h)

    before = len(_host_callbacks._REGISTRY)
    lowered = lower(g, {}, [])
    try:
        h_graph = lowered.handle
        dn = lowered.driver_nodes
        assert len(dn) == len(g.nodes) and all(d is not None for d in dn)

        err, _nodes, count = driver.cuGraphGetNodes(h_graph, 0)
        assert not err, err
        assert count == len(g.nodes)
        err, nodes, count = driver.cuGraphGetNodes(h_graph, count)
        assert not err and {int(n) for n in nodes} == {int(d) for d in dn}

        res = driver.cuGraphGetEdges(h_graph, 0)
        assert not res[0], res[0]
        nedges = res[-1]
        assert nedges == g.num_edges == len(g.edges)
        res = driver.cuGraphGetEdges(h_graph, nedges)
        assert not res[0], res[0]
        frm, to = res[1], res[2]
        got = {(int(a), int(b)) for a, b in zip(frm, to)}
        want = {(int(dn[s.index]), int(dn[d.index])) for s, d in g.edges}
        assert got == want

        T = driver.CUgraphNodeType
        types = {
            "kernel": T.CU_GRAPH_NODE_TYPE_KERNEL,
            "memcpy": T.CU_GRAPH_NODE_TYPE_MEMCPY,
            "memset": T.CU_GRAPH_NODE_TYPE_MEMSET,
            "host": T.CU_GRAPH_NODE_TYPE_HOST,
            "record": T.CU_GRAPH_NODE_TYPE_EVENT_RECORD,
            "wait": T.CU_GRAPH_NODE_TYPE_WAIT_EVENT,
            "child": T.CU_GRAPH_NODE_TYPE_GRAPH,
            "empty": T.CU_GRAPH_NODE_TYPE_EMPTY,
        }
        for node in g.nodes:
            err, t = driver.cuGraphNodeGetType(dn[node.index])
            assert not err and t == types[node.kind], (node.label, t)
            assert lowered.node_for(dn[node.index]) is node

        err, body_graph = driver.cuGraphChildGraphNodeGetGraph(dn[ch.index])
        assert not err
        err, _nodes, body_count = driver.cuGraphGetNodes(body_graph, 0)
        assert not err and body_count == len(body.nodes)
        assert len(_host_callbacks._REGISTRY) == before + 1
    finally:
        lowered.destroy()
    assert lowered.handle is None
    assert len(_host_callbacks._REGISTRY) == before
    lowered.destroy()  # idempotent


# =============================================================================== eager


def _eager_dag(kernels, dx, host_in, host_out, log):
    g = cg.Graph("eager_dag")
    base = int(dx.handle)
    z = g.memset(dx, np.float32(-9.0), name="poison")
    c = g.memcpy(dx, host_in, after=z, name="h2d")
    left = scale_add(g, kernels, base, H, 2, 1, after=c, name="left")
    right = scale_add(g, kernels, base + H * F4, H, 3, -1, after=c, name="right")
    j = g.join(left, right)
    tail = scale_add(g, kernels, base, N, 2, 5, after=j, name="tail")
    out = g.memcpy(host_out, dx, after=tail, name="d2h")
    g.host(lambda: log.append(host_out.copy()), after=out, name="log")
    return g


def test_lower_leaves_out_edges_a_predecessor_implies(gpu, kernels, stream):
    """after=[prev, prev2] with prev2 -> prev: the driver graph has the chain's edges only, the definition
    keeps every edge, and the order of the updates (which do not commute) is kept."""
    from cuda.bindings import driver

    from cudagraph.materialize.explicit import lower

    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    g = cg.Graph("implied")
    r = g.memcpy(dx, x, name="h2d")
    a = scale_add(g, kernels, dx, N, 2, 1, after=r, name="a")
    b = scale_add(g, kernels, dx, N, 3, 0, after=[a, r], name="b")  # r -> a -> b
    c = scale_add(g, kernels, dx, N, 1, 5, after=[r, b, a], name="c")  # r -> a -> b -> c
    d = scale_add(g, kernels, dx, N, 0.5, 0, after=[c, a], name="d")
    assert g.num_edges == 8
    lowered = lower(g, {}, [])
    try:
        dn = lowered.driver_nodes
        res = driver.cuGraphGetEdges(lowered.handle, 0)
        assert not res[0], res[0]
        res = driver.cuGraphGetEdges(lowered.handle, res[-1])
        assert not res[0], res[0]
        got = {(int(f), int(t)) for f, t in zip(res[1], res[2])}
        assert got == {(int(dn[s.index]), int(dn[t.index])) for s, t in ((r, a), (a, b), (b, c), (c, d))}
    finally:
        lowered.destroy()
    with g.instantiate() as exe:
        exe.launch(stream)
        host_sync(stream)
        np.testing.assert_array_equal(gpu.read(dx, N), ((x * 2 + 1) * 3 + 5) * np.float32(0.5))


def test_eager_run_matches_graph(gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    expected = x.copy()
    expected[:H] = expected[:H] * 2 + 1
    expected[H:] = expected[H:] * 3 - 1
    expected = expected * 2 + 5
    results = {}
    for mode in ("eager", "graph"):
        dx = gpu.alloc(N * F4)
        host_out = np.zeros(N, np.float32)
        log = []
        g = _eager_dag(kernels, dx, x.copy(), host_out, log)
        exe = None
        if mode == "eager":
            g.run(stream)
        else:
            exe = g.instantiate()
            exe.launch(stream)
        host_sync(stream)
        if exe is not None:
            exe.check()
            exe.close()
        assert len(log) == 1
        np.testing.assert_array_equal(log[0], expected)
        np.testing.assert_array_equal(gpu.read(dx, N), expected)
        results[mode] = host_out.copy()
    np.testing.assert_array_equal(results["eager"], results["graph"])


def test_eager_run_of_a_long_chain_in_batches_matches_numpy(gpu, kernels, stream):
    """g.run launches runs of kernels in batches (64 launches): 150 kernels of two kernels on two
    buffers, a host node and a copy between them, each kernel with its own scalars."""
    x = np.arange(N, dtype=np.float32)
    y = np.arange(N, dtype=np.float32) * -1
    dx, dy = gpu.upload(x), gpu.upload(y)
    seen: list[np.ndarray] = []
    host = np.zeros(N, np.float32)
    g = cg.Graph("long")
    prev = None
    for i in range(150):
        if i == 90:
            prev = g.memcpy(host, dx, after=prev)
            prev = g.host(lambda: seen.append(host.copy()), after=prev)
        if i % 3 == 2:
            prev = g.kernel(
                kernels.axpb, grid_for(N), BLOCK, (dy, dx, np.float32(1), np.float32(i), np.int32(N)), after=prev
            )
            y = x * 1 + np.float32(i)
        else:
            prev = scale_add(g, kernels, dx, N, 1, i % 7, after=prev)
            x = x + np.float32(i % 7)
        if i == 89:
            at_90 = x.copy()
    g.run(stream)
    host_sync(stream)
    np.testing.assert_array_equal(gpu.read(dx, N), x)
    np.testing.assert_array_equal(gpu.read(dy, N), y)
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], at_90)


def test_eager_run_with_params_and_child(gpu, kernels, stream):
    x = np.arange(N, dtype=np.float32)
    dx = gpu.upload(x)
    body = cg.Graph("body")
    scale_add(body, kernels, dx, N, 3, 0)
    g = cg.Graph("eager_params")
    p = g.param("x")
    a = g.param("a", np.float32)
    k = g.kernel(kernels.scale_add, grid_for(N), BLOCK, (p, a, np.float32(1), np.int32(N)))
    g.child(body, after=k)
    g.run(stream, x=dx, a=2.0)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(dx, N), (x * 2 + 1) * 3)
    g.run(None, x=dx, a=1.0)
    gpu.sync()
    np.testing.assert_array_equal(gpu.read(dx, N), ((x * 2 + 1) * 3 + 1) * 3)


# =============================================================================== driver errors


def test_driver_error_is_typed_and_leaves_nothing_behind(gpu, kernels, stream):
    from cudagraph.driver import host_callbacks as _host_callbacks

    # More blocks than can be co-resident: the driver refuses the cooperative attribute.
    blocks = gpu.device.properties.multiprocessor_count * 64
    dx = gpu.alloc(blocks * 1024 * F4)
    before = len(_host_callbacks._REGISTRY)
    g = cg.Graph("too_large")
    h = g.host(lambda: None, name="h")
    big = g.kernel(
        kernels.scale_add,
        blocks,
        1024,
        (dx, np.float32(1), np.float32(0), np.int32(blocks * 1024)),
        cooperative=True,
        after=h,
        name="big",
    )
    exe = None
    with pytest.raises(errors.DriverError) as ei:
        exe = g.instantiate()
        exe.launch(stream)
        host_sync(stream)
    e = ei.value
    assert e.call in ("cuGraphKernelNodeSetAttribute", "cuGraphInstantiateWithParams", "cuGraphLaunch"), e.call
    assert e.call in str(e)
    assert e.name.startswith("CUDA_ERROR_") and e.name in str(e)
    assert e.code != 0 and not isinstance(e, errors.DriverUnavailableError)
    if e.call == "cuGraphKernelNodeSetAttribute":
        assert e.node is big and "kernel#1 'big'" in str(e) and "too_large" in str(e)
    if exe is not None:
        exe.close()
    assert len(_host_callbacks._REGISTRY) == before
    # Shared memory over the device's limit is caught before the driver, naming the node.
    g2 = cg.Graph("too_much_smem")
    g2.kernel(kernels.scale_add, 1, 32, (dx, np.float32(1), np.float32(0), np.int32(32)), shared_mem=1 << 30, name="s")
    with pytest.raises(errors.OperandError, match=r"kernel#0 's' of Graph 'too_much_smem': shared_mem: 1073741824"):
        g2.instantiate()
    assert len(_host_callbacks._REGISTRY) == before


_BOGUS_MEMCPY = textwrap.dedent(
    """
    import sys
    import cudagraph as cg
    from cudagraph import errors
    from cuda.bindings import driver
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    buf = dev.allocate(64, stream=s)
    s.sync()
    g = cg.Graph("bogus")
    g.memcpy(buf, 0x10, nbytes=64, name="from_0x10")
    try:
        exe = g.instantiate()
        exe.launch(s)
    except errors.DriverError as e:
        print("TYPED", type(e).__name__, e.call, "|", e)
        sys.exit(0)
    except Exception as e:
        print("RAW", type(e).__name__, e)
        sys.exit(3)
    (err,) = driver.cuStreamSynchronize(s.handle)
    print("ACCEPTED; stream sync gave", err)
    sys.exit(4)
    """
)


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


_NO_CONTEXT = textwrap.dedent(
    """
    import numpy as np
    from cuda.bindings import driver as drv

    import cudagraph as cg
    from cudagraph.driver import calls
    from cudagraph.driver.c_entry import NATIVE

    (err,) = drv.cuInit(0)
    assert not err, err
    err, ctx = drv.cuCtxGetCurrent()
    print("current before:", int(ctx))
    print("held calls:", calls._held() is not None, "compiled module:", NATIVE is not None)
    ran = []
    g = cg.Graph("no context")
    g.host(lambda: ran.append(np.float32(1)), after=g.empty())
    with g.instantiate() as exe:
        exe.launch(None)
        (err,) = drv.cuCtxSynchronize()
        assert not err, err
        exe.check()
    err, ctx = drv.cuCtxGetCurrent()
    print("current after:", int(ctx) != 0, "ran:", len(ran))
    """
)


def test_instantiate_with_no_context_current_makes_device_0s_primary_current(device):
    """ensure_context: the compiled read finds no context; the primary context of device 0 is made current."""
    r = subprocess.run(
        [sys.executable, "-c", _NO_CONTEXT], capture_output=True, text=True, timeout=120, env=_subprocess_env()
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "current before: 0" in r.stdout
    assert "current after: True ran: 1" in r.stdout
    from cudagraph.driver.c_entry import NATIVE

    assert f"held calls: {NATIVE is not None}" in r.stdout


def test_the_real_driver_passes_the_version_check(device):
    """cuDriverGetVersion through cuda.bindings, as ensure_context asks it: at least CUDA 12.3 here, and what
    ``python -m cudagraph info`` reports."""
    from cudagraph.driver import calls
    from cudagraph.frontends import environment

    version = calls.check_driver_version()
    assert version >= calls.MIN_DRIVER_VERSION and calls._driver_checked
    probe = environment.probe()
    assert probe.problem is None and probe.driver_version == version


def test_memcpy_from_non_memory_address_is_a_typed_error(device):
    # In a subprocess: a bad copy may corrupt the context (or crash), which must not hit other tests.
    r = subprocess.run(
        [sys.executable, "-c", _BOGUS_MEMCPY], capture_output=True, text=True, timeout=120, env=_subprocess_env()
    )
    out = r.stdout + r.stderr
    assert r.returncode >= 0, f"the process crashed with signal {-r.returncode}:\n{out}"
    if "RAW OperandError" in r.stdout:
        # Refused before the driver was called: the address cannot be memory.
        assert "memcpy#0 'from_0x10': src: 0x10 is not an address" in r.stdout
        return
    assert r.returncode == 0, f"expected a cudagraph DriverError at instantiate or launch:\n{out}"
    assert "TYPED" in r.stdout
    assert any(call in r.stdout for call in ("cuGraphAddNode", "cuGraphInstantiateWithParams", "cuGraphLaunch"))
    if "cuGraphAddNode" in r.stdout:
        assert "memcpy#0 'from_0x10'" in r.stdout


# =============================================================================== command line


def test_demo_command(device, tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "cudagraph", "demo"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_subprocess_env(),
        cwd=tmp_path,  # the demo writes its DOT picture to the working directory
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "results match numpy" in r.stdout, out
