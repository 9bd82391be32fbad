"""Every builder of the definition layer, with the fields of the node it makes checked exactly (GPU-free)."""

from __future__ import annotations

import ctypes
import functools
import gc
import itertools
import weakref
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.operands import Deferred, normalize_kernel_args
from cudagraph.errors import StateError

# --------------------------------------------------------------------------- fake operands


class CUkernel:
    """Stands in for cuda.bindings.driver.CUkernel (the library checks the type name)."""


class CUfunction:
    """Stands in for cuda.bindings.driver.CUfunction."""


class Kernel:
    """Stands in for cuda.core Kernel: a ``handle`` whose type is named ``CUkernel``."""

    def __init__(self) -> None:
        self.handle = CUkernel()


class CUevent:
    """Stands in for cuda.bindings.driver.CUevent."""


class Event:
    """Stands in for cuda.core Event."""

    def __init__(self) -> None:
        self.handle = CUevent()


class DevArray:
    """A device array seen through ``__cuda_array_interface__`` (version 3)."""

    def __init__(self, addr: int, shape: tuple[int, ...] = (16,), typestr: str = "<f4", strides=None) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (addr, False),
            "version": 3,
            "strides": strides,
        }


class Buffer:
    """Stands in for cuda.core Buffer."""

    def __init__(self, handle: int, size: int) -> None:
        self.handle = handle
        self.size = size
        self.memory_resource = object()


class DLPackOnly:
    """An object that only speaks DLPack (its address needs CUDA to read)."""

    def __dlpack__(self, stream=None):  # pragma: no cover - never called by the definition layer
        raise AssertionError("the definition layer must not call __dlpack__")

    def __dlpack_device__(self):  # pragma: no cover
        return (2, 0)


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int32), ("b", ctypes.c_float)]


def _node_refs(node) -> list:
    """Every object a node holds on to (its args/operands and its keep-alive slot)."""
    refs = []
    for slot in ("args", "_keep", "kernel", "dst", "src", "fn", "event", "body"):
        v = getattr(node, slot, None)
        if isinstance(v, (tuple, list)):
            refs.extend(v)
        elif v is not None:
            refs.append(v)
    return refs


# --------------------------------------------------------------------------- kernel


@pytest.mark.parametrize(
    ("grid", "expected"),
    [
        (1, (1, 1, 1)),
        (7, (7, 1, 1)),
        (2**31 - 1, (2**31 - 1, 1, 1)),
        ((3,), (3, 1, 1)),
        ((2, 3), (2, 3, 1)),
        ([2, 3, 4], (2, 3, 4)),
        ((np.int32(5), np.int64(6)), (5, 6, 1)),
        (np.int32(9), (9, 1, 1)),
        ((2**31 - 1, 65535, 65535), (2**31 - 1, 65535, 65535)),
    ],
)
def test_kernel_grid_normalised_to_3_tuple(grid, expected):
    g = cg.Graph("g")
    k = g.kernel(Kernel(), grid=grid, block=1)
    assert k.grid == expected
    assert type(k.grid) is tuple
    assert all(type(d) is int for d in k.grid)
    assert k.block == (1, 1, 1)


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (1, (1, 1, 1)),
        (256, (256, 1, 1)),
        (1024, (1024, 1, 1)),
        ((16, 16), (16, 16, 1)),
        ([8, 8, 8], (8, 8, 8)),
        ((32, 32, 1), (32, 32, 1)),
        ((1, 1, 64), (1, 1, 64)),
        ((1, 1024), (1, 1024, 1)),
        (np.uint16(128), (128, 1, 1)),
    ],
)
def test_kernel_block_normalised_to_3_tuple(block, expected):
    g = cg.Graph("g")
    k = g.kernel(Kernel(), grid=1, block=block)
    assert k.block == expected
    assert type(k.block) is tuple
    assert all(type(d) is int for d in k.block)


@pytest.mark.parametrize("kernel_factory", [Kernel, CUkernel, CUfunction], ids=["Kernel", "CUkernel", "CUfunction"])
def test_kernel_fields(kernel_factory):
    g = cg.Graph("g")
    e = g.empty(name="e")
    kern = kernel_factory()
    args = (np.int32(3), np.float32(2.5))
    k = g.kernel(kern, (4, 2), 128, args, shared_mem=512, after=e, name="saxpy")
    assert isinstance(k, cg.KernelNode)
    assert k.kind == "kernel"
    assert k.kernel is kern
    assert k.grid == (4, 2, 1)
    assert k.block == (128, 1, 1)
    assert k.shared_mem == 512
    assert tuple(k.args) == args
    assert k.graph is g
    assert k.index == 1
    assert k.name == "saxpy"
    assert k.label == "kernel#1 'saxpy'"
    assert k.predecessors == (e,)
    assert e.successors == (k,)
    assert k.successors == ()
    assert g.nodes == (e, k)
    assert g.num_edges == 1
    assert k.describe() == "grid=(4, 2, 1) block=(128, 1, 1) smem=512 args=2"
    assert repr(k) == "<KernelNode #1 'saxpy' grid=(4, 2, 1) block=(128, 1, 1) smem=512 args=2 of Graph 'g'>"


def test_kernel_defaults():
    g = cg.Graph("g")
    k = g.kernel(Kernel(), 1, 32)
    assert k.name == "kernel"
    assert k.label == "kernel#0 'kernel'"
    assert k.shared_mem == 0
    assert tuple(k.args) == ()
    assert k.predecessors == ()


def test_kernel_shared_mem_numpy_integer_becomes_int():
    g = cg.Graph("g")
    k = g.kernel(Kernel(), 1, 1, shared_mem=np.int64(4096))
    assert k.shared_mem == 4096
    assert type(k.shared_mem) is int


def test_kernel_args_list_becomes_tuple():
    g = cg.Graph("g")
    k = g.kernel(Kernel(), 1, 1, [np.int32(1), np.int64(2)])
    assert type(k.args) is tuple
    assert k.args == (np.int32(1), np.int64(2))


def test_kernel_args_normalisation():
    """Memory objects become their int address, ctypes values and bytearrays become bytes."""
    g = cg.Graph("g")
    dev = DevArray(0xDEAD0000)
    buf = Buffer(0xBEEF0000, 256)
    p = g.param("x")
    raw = bytearray(b"\x01\x02\x03")
    mv = memoryview(b"\x09\x08")
    args = (
        dev,
        buf,
        np.float32(2.0),
        np.int64(-5),
        ctypes.c_int32(7),
        ctypes.c_double(1.5),
        Pair(3, 4.0),
        raw,
        mv,
        b"\xff\x00",
        0x1000,
        0,
        p,
    )
    k = g.kernel(Kernel(), 1, 1, args, name="k")
    norm = normalize_kernel_args(k.args, k.label)
    expected = (
        0xDEAD0000,
        0xBEEF0000,
        np.float32(2.0),
        np.int64(-5),
        (7).to_bytes(4, "little"),
        bytes(ctypes.c_double(1.5)),
        (3).to_bytes(4, "little") + np.float32(4.0).tobytes(),
        b"\x01\x02\x03",
        b"\x09\x08",
        b"\xff\x00",
        0x1000,
        0,
        p,
    )
    assert len(norm) == len(expected)
    for i, (got, want) in enumerate(zip(norm, expected)):
        assert type(got) is type(want), (i, got, want)
        if isinstance(want, np.generic):
            assert got.dtype == want.dtype and got == want, i
        else:
            assert got == want, i
    assert norm[12] is p
    # normalisation is idempotent
    assert normalize_kernel_args(norm, k.label) == norm
    g.validate()


def test_kernel_args_dlpack_is_deferred():
    obj = DLPackOnly()
    norm = normalize_kernel_args((obj,), "kernel#0 'k'")
    assert len(norm) == 1
    assert isinstance(norm[0], Deferred)
    assert norm[0].obj is obj


def test_kernel_keeps_original_operands_alive():
    g = cg.Graph("g")
    dev = DevArray(0xDEAD0000)
    buf = Buffer(0xBEEF0000, 64)
    ct = ctypes.c_int32(3)
    kern = Kernel()
    k = g.kernel(kern, 1, 1, (dev, buf, ct))
    refs = {id(r) for r in _node_refs(k)}
    assert {id(dev), id(buf), id(ct), id(kern)} <= refs
    wrefs = [weakref.ref(o) for o in (dev, buf, ct, kern)]
    del dev, buf, ct, kern
    gc.collect()
    assert all(r() is not None for r in wrefs)
    del k, g
    gc.collect()
    assert all(r() is None for r in wrefs)


# --------------------------------------------------------------------------- memcpy


def test_memcpy_nbytes_inferred_from_src():
    g = cg.Graph("g")
    src = DevArray(0x1000, shape=(16,), typestr="<f4")  # 64 bytes
    dst = Buffer(0x2000, 128)
    m = g.memcpy(dst, src, name="d2d")
    assert isinstance(m, cg.MemcpyNode)
    assert m.kind == "memcpy"
    assert m.dst == 0x2000 and type(m.dst) is int
    assert m.src == 0x1000 and type(m.src) is int
    assert m.nbytes == 64
    assert m._keep == (dst, src)
    assert m.name == "d2d"
    assert m.label == "memcpy#0 'd2d'"
    assert m.describe() == "0x1000 -> 0x2000 64 B"


def test_memcpy_nbytes_inferred_from_dst_when_src_unknown():
    g = cg.Graph("g")
    dst = DevArray(0x3000, shape=(4, 5), typestr="<f8")  # 160 bytes
    m = g.memcpy(dst, 0x4000)
    assert m.nbytes == 160
    assert m.src == 0x4000
    assert m.dst == 0x3000
    assert m._keep == (dst, None)
    assert m.name == "memcpy"


def test_memcpy_strided_interface_size():
    g = cg.Graph("g")
    # 4 float32 elements 8 bytes apart: extent = 3 * 8 + 4 = 28 bytes
    src = DevArray(0x1000, shape=(4,), typestr="<f4", strides=(8,))
    m = g.memcpy(0x2000, src)
    assert m.nbytes == 28


def test_memcpy_host_numpy_arrays():
    g = cg.Graph("g")
    host_in = np.arange(8, dtype=np.float64)  # 64 bytes
    host_out = np.zeros(16, dtype=np.int32)  # 64 bytes
    dev = Buffer(0x5000, 64)
    h2d = g.memcpy(dev, host_in, name="h2d")
    d2h = g.memcpy(host_out, dev, after=h2d, name="d2h")
    assert h2d.src == host_in.ctypes.data
    assert h2d.dst == 0x5000
    assert h2d.nbytes == 64
    assert d2h.dst == host_out.ctypes.data
    assert d2h.src == 0x5000
    assert d2h.nbytes == 64
    assert d2h.predecessors == (h2d,)
    assert h2d._keep == (dev, host_in)
    assert d2h._keep == (host_out, dev)


def test_memcpy_explicit_nbytes_and_int_operands():
    g = cg.Graph("g")
    m = g.memcpy(np.uint64(0x7000), 0x8000, nbytes=np.int32(12))
    assert m.dst == 0x7000 and type(m.dst) is int
    assert m.src == 0x8000
    assert m.nbytes == 12 and type(m.nbytes) is int
    assert m._keep == (None, None)


def test_memcpy_explicit_nbytes_smaller_than_operands():
    g = cg.Graph("g")
    m = g.memcpy(Buffer(0x1000, 100), Buffer(0x2000, 50), 50)
    assert m.nbytes == 50


def test_memcpy_with_pointer_params():
    g = cg.Graph("g")
    x = g.param("x")
    y = g.param("y")
    m = g.memcpy(y, x, 256)
    assert m.dst is y
    assert m.src is x
    assert m.nbytes == 256
    assert m.describe() == "$x -> $y 256 B"


def test_memcpy_keeps_operands_alive():
    g = cg.Graph("g")
    src = DevArray(0x1000)
    dst = Buffer(0x2000, 64)
    g.memcpy(dst, src)
    wrefs = [weakref.ref(src), weakref.ref(dst)]
    del src, dst
    gc.collect()
    assert all(r() is not None for r in wrefs)
    del g
    gc.collect()
    assert all(r() is None for r in wrefs)


# --------------------------------------------------------------------------- memset


@pytest.mark.parametrize(
    ("value", "element_size", "bits"),
    [
        (0, None, 0x00),
        (7, None, 0x07),
        (255, None, 0xFF),
        (-1, None, 0xFF),
        (-128, 1, 0x80),
        (0x1234, 2, 0x1234),
        (65535, 2, 0xFFFF),
        (-1, 2, 0xFFFF),
        (-32768, 2, 0x8000),
        (0xDEADBEEF, 4, 0xDEADBEEF),
        (-1, 4, 0xFFFFFFFF),
        (-2, 4, 0xFFFFFFFE),
        (-(2**31), 4, 0x80000000),
    ],
)
def test_memset_int_value_bits(value, element_size, bits):
    g = cg.Graph("g")
    m = g.memset(0x1000, value, 8, element_size=element_size)
    es = 1 if element_size is None else element_size
    assert m.value == bits
    assert m.element_size == es
    assert m.width == 8
    assert m.height == 1
    assert m.pitch == 8 * es


@pytest.mark.parametrize(
    ("value", "element_size", "bits"),
    [
        (np.float32(1.0), 4, 0x3F800000),
        (np.float32(-2.0), 4, 0xC0000000),
        (np.float16(1.0), 2, 0x3C00),
        (np.int8(-1), 1, 0xFF),
        (np.uint8(200), 1, 0xC8),
        (np.int16(-2), 2, 0xFFFE),
        (np.uint16(65535), 2, 0xFFFF),
        (np.int32(-2), 4, 0xFFFFFFFE),
        (np.uint32(0xCAFEBABE), 4, 0xCAFEBABE),
        (np.bool_(True), 1, 0x01),
    ],
)
def test_memset_numpy_value_bit_pattern(value, element_size, bits):
    g = cg.Graph("g")
    m = g.memset(0x1000, value, 10)
    assert m.value == bits
    assert m.element_size == element_size
    assert m.width == 10
    assert m.pitch == 10 * element_size
    # an explicit matching element_size is accepted too
    m2 = g.memset(0x1000, value, 10, element_size=element_size)
    assert (m2.value, m2.element_size) == (bits, element_size)


def test_memset_count_inferred_from_dst_size():
    g = cg.Graph("g")
    buf = Buffer(0x9000, 64)
    m1 = g.memset(buf, 7, name="fill")
    assert isinstance(m1, cg.MemsetNode)
    assert m1.kind == "memset"
    assert m1.dst == 0x9000
    assert (m1.value, m1.element_size, m1.width, m1.height, m1.pitch) == (7, 1, 64, 1, 64)
    assert m1._keep == (buf,)
    assert m1.name == "fill"
    assert m1.describe() == "0x9000 = 0x7 (1 B x 64)"
    m4 = g.memset(buf, np.float32(1.0))
    assert (m4.value, m4.element_size, m4.width, m4.height, m4.pitch) == (0x3F800000, 4, 16, 1, 64)
    dev = DevArray(0xA000, shape=(10,), typestr="<u2")  # 20 bytes
    m2 = g.memset(dev, 3, element_size=2)
    assert (m2.width, m2.pitch) == (10, 20)
    assert m2._keep == (dev,)


def test_memset_2d_pitch():
    g = cg.Graph("g")
    buf = Buffer(0xB000, 256)
    m = g.memset(buf, np.int32(-1), width=10, height=4, pitch=64)
    assert m.dst == 0xB000
    assert m.value == 0xFFFFFFFF
    assert m.element_size == 4
    assert m.width == 10
    assert m.height == 4
    assert m.pitch == 64
    assert m.describe() == "0xb000 = 0xffffffff (4 B x 10x4 pitch=64)"


def test_memset_2d_default_pitch_is_row():
    g = cg.Graph("g")
    m = g.memset(0xB000, 1, width=6, height=3, element_size=2)
    assert (m.width, m.height, m.pitch, m.element_size) == (6, 3, 12, 2)


def test_memset_2d_exactly_fills_dst():
    g = cg.Graph("g")
    # extent = pitch * (height - 1) + row = 64 * 3 + 40 = 232
    m = g.memset(Buffer(0xC000, 232), 0, width=10, height=4, pitch=64, element_size=4)
    assert (m.width, m.height, m.pitch) == (10, 4, 64)


def test_memset_to_pointer_param():
    g = cg.Graph("g")
    x = g.param("x")
    m = g.memset(x, 0, count=1 << 20, element_size=4)
    assert m.dst is x
    assert (m.width, m.pitch) == (1 << 20, 4 << 20)
    assert m.describe() == f"$x = 0x0 (4 B x {1 << 20})"


# --------------------------------------------------------------------------- host, events, child, empty, join


def _cb(*args):
    return args


def test_host_fields():
    g = cg.Graph("g")
    a = g.empty()
    payload = [1, 2]
    h = g.host(_cb, "done", payload, after=a)
    assert isinstance(h, cg.HostNode)
    assert h.kind == "host"
    assert h.fn is _cb
    assert h.args == ("done", payload)
    assert h.args[1] is payload
    assert h.name == "_cb"
    assert h.label == "host#1 '_cb'"
    assert h.predecessors == (a,)
    assert h.describe() == "_cb(+2 args)"


def test_host_names():
    g = cg.Graph("g")
    assert g.host(print).name == "print"
    assert g.host(lambda: None).name == "<lambda>"
    assert g.host(functools.partial(_cb, 1)).name == "host"
    assert g.host(_cb, name="cb").name == "cb"
    assert g.host(_cb).args == ()


def test_host_keeps_callable_and_args_alive():
    class Fn:
        def __call__(self):
            return None

    class Arg:
        pass

    g = cg.Graph("g")
    fn, arg = Fn(), Arg()
    g.host(fn, arg)
    wrefs = [weakref.ref(fn), weakref.ref(arg)]
    del fn, arg
    gc.collect()
    assert all(r() is not None for r in wrefs)


@pytest.mark.parametrize("event_factory", [CUevent, Event], ids=["CUevent", "Event"])
def test_record_and_wait(event_factory):
    g = cg.Graph("g")
    ev = event_factory()
    r = g.record(ev)
    w = g.wait(ev, after=r, name="w")
    assert isinstance(r, cg.EventRecordNode)
    assert isinstance(w, cg.EventWaitNode)
    assert r.kind == "record" and w.kind == "wait"
    assert r.event is ev and w.event is ev
    assert r.name == "record" and w.name == "w"
    assert r.label == "record#0 'record'"
    assert w.label == "wait#1 'w'"
    assert w.predecessors == (r,)
    assert r.successors == (w,)


def test_child_fields():
    body = cg.Graph("body")
    body.empty()
    body.empty()
    g = cg.Graph("outer")
    a = g.empty()
    c = g.child(body, after=a)
    assert isinstance(c, cg.ChildGraphNode)
    assert c.kind == "child"
    assert c.body is body
    assert c.name == "body"
    assert c.label == "child#1 'body'"
    assert c.predecessors == (a,)
    assert c.describe() == "graph='body' (2 nodes)"
    c2 = g.child(body, name="again")
    assert c2.body is body and c2.name == "again"
    # the body is referenced, not copied
    body.empty()
    assert c.describe() == "graph='body' (3 nodes)"


def test_empty_fields():
    g = cg.Graph("g")
    e = g.empty()
    f = g.empty(after=e, name="f")
    assert isinstance(e, cg.EmptyNode)
    assert e.kind == "empty"
    assert e.name == "empty"
    assert e.label == "empty#0 'empty'"
    assert f.label == "empty#1 'f'"
    assert f.predecessors == (e,)
    assert e.successors == (f,)
    assert e.describe() == ""
    assert repr(f) == "<EmptyNode #1 'f' of Graph 'g'>"


def test_after_forms():
    g = cg.Graph("g")
    a, b, c = g.empty(name="a"), g.empty(name="b"), g.empty(name="c")
    assert g.empty(after=a).predecessors == (a,)
    assert g.empty(after=[a, b]).predecessors == (a, b)
    assert g.empty(after=(c, a)).predecessors == (c, a)
    assert g.empty(after=[]).predecessors == ()
    assert g.empty(after=()).predecessors == ()
    assert a.successors == tuple(n for n in g.nodes[3:6])
    assert g.num_edges == 5


def test_join():
    g = cg.Graph("g")
    a, b, c = g.empty(name="a"), g.empty(name="b"), g.empty(name="c")
    j = g.join(a, c)
    assert isinstance(j, cg.EmptyNode)
    assert j.name == "join"
    assert j.predecessors == (a, c)
    assert a.successors == (j,) and c.successors == (j,) and b.successors == ()
    j2 = g.join([b, j], name="j2")
    assert j2.name == "j2"
    assert j2.predecessors == (b, j)
    j3 = g.join()
    assert j3.predecessors == ()
    assert g.num_edges == 4


def test_precede_and_succeed():
    g = cg.Graph("g")
    a, b, c, d = (g.empty(name=n) for n in "abcd")
    assert a.precede(b, c) is a
    assert d.succeed(b, c) is d
    assert {(s.name, t.name) for s, t in g.edges} == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")}
    assert d.predecessors == (b, c)


# --------------------------------------------------------------------------- param


def test_param_pointer():
    g = cg.Graph("g")
    x = g.param("x")
    assert isinstance(x, cg.Param)
    assert x.name == "x"
    assert x.dtype is None
    assert x.is_pointer is True
    assert x.nbytes == 8
    assert x.default is None
    assert x.graph is g
    assert g.param("x") is x
    assert g.params == {"x": x}
    assert repr(x) == "<Param 'x' pointer of Graph 'g'>"


@pytest.mark.parametrize(
    ("dtype", "nbytes"),
    [(np.float32, 4), ("float64", 8), (np.int8, 1), (np.dtype(np.uint16), 2), ("i8", 8)],
)
def test_param_scalar(dtype, nbytes):
    g = cg.Graph("g")
    n = g.param("n", dtype, default=3)
    assert n.dtype == np.dtype(dtype)
    assert isinstance(n.dtype, np.dtype)
    assert n.is_pointer is False
    assert n.nbytes == nbytes
    assert n.default == 3
    assert g.param("n", dtype) is n
    assert g.param("n", np.dtype(dtype)) is n
    assert repr(n) == f"<Param 'n' {np.dtype(dtype)} of Graph 'g'>"


def test_params_property_is_a_copy():
    g = cg.Graph("g")
    x = g.param("x")
    y = g.param("y", np.int32)
    ps = g.params
    assert ps == {"x": x, "y": y}
    ps.clear()
    assert g.params == {"x": x, "y": y}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0x1000, 0x1000),
        (0, 0),
        (np.uint64(0x2000), 0x2000),
        (DevArray(0x3000), 0x3000),
        (Buffer(0x4000, 8), 0x4000),
    ],
)
def test_param_coerce_pointer(value, expected):
    g = cg.Graph("g")
    out = g.param("x").coerce(value)
    assert out == expected
    assert type(out) is int


@pytest.mark.parametrize(
    ("dtype", "value", "expected"),
    [
        (np.float32, 3, np.float32(3.0)),
        (np.float32, 2.5, np.float32(2.5)),
        (np.float32, np.float32(1.5), np.float32(1.5)),
        (np.int32, 7, np.int32(7)),
        (np.int32, -7, np.int32(-7)),
        (np.int32, np.uint32(5), np.int32(5)),
        (np.uint8, 255, np.uint8(255)),
        (np.float64, np.float64(0.25), np.float64(0.25)),
        (np.bool_, True, np.bool_(True)),
    ],
)
def test_param_coerce_scalar(dtype, value, expected):
    g = cg.Graph("g")
    out = g.param("n", dtype).coerce(value)
    assert type(out) is np.dtype(dtype).type
    assert out == expected


# --------------------------------------------------------------------------- path


def test_path_chains_each_op_after_the_previous():
    g = cg.Graph("g")
    ev = CUevent()
    body = cg.Graph("body")
    with g.path() as p:
        assert p.graph is g
        assert p.last is None
        k = p.kernel(Kernel(), 2, 32, (np.int32(1),), name="k")
        assert p.last is k
        m = p.memcpy(0x2000, 0x1000, 16)
        s = p.memset(0x2000, 0, 16)
        h = p.host(_cb, 1)
        r = p.record(ev)
        w = p.wait(ev)
        c = p.child(body)
        e = p.empty(name="end")
    chain = [k, m, s, h, r, w, c, e]
    assert list(g.nodes) == chain
    assert k.predecessors == ()
    for prev, nxt in itertools.pairwise(chain):
        assert nxt.predecessors == (prev,)
    assert g.num_edges == len(chain) - 1
    assert p.last is e
    assert k.grid == (2, 1, 1) and k.block == (32, 1, 1)
    assert (m.dst, m.src, m.nbytes) == (0x2000, 0x1000, 16)
    assert s.width == 16
    assert h.args == (1,)
    assert c.body is body
    assert e.name == "end"
    assert repr(p) == "<Path in Graph 'g', last=empty#7 'end'>"


def test_path_starts_after_and_adds_extra_dependencies():
    g = cg.Graph("g")
    a, b, x = g.empty(name="a"), g.empty(name="b"), g.empty(name="x")
    p = g.path(after=[a, b])
    assert p.last is None
    n1 = p.empty(name="n1")
    assert n1.predecessors == (a, b)
    n2 = p.empty(after=x, name="n2")
    assert n2.predecessors == (n1, x)
    n3 = p.empty(after=[n2, x], name="n3")  # the previous op is not added twice
    assert n3.predecessors == (n2, x)
    q = g.path(after=a)
    first = q.empty(name="q1")
    assert first.predecessors == (a,)
    assert q.last is first


def test_path_failed_op_keeps_the_tail():
    g = cg.Graph("g")
    p = g.path()
    a = p.empty(name="a")
    with pytest.raises(cg.errors.OperandError):
        p.host(42)
    assert p.last is a
    b = p.empty(name="b")
    assert b.predecessors == (a,)
    assert len(g) == 2


# --------------------------------------------------------------------------- graph container


def test_graph_container_protocol():
    g = cg.Graph("box")
    other = cg.Graph("other")
    a = g.empty(name="a")
    b = g.empty(after=a, name="b")
    o = other.empty()
    assert g.name == "box"
    assert len(g) == 2
    assert list(g) == [a, b]
    assert a in g and b in g
    assert o not in g
    assert "a" not in g
    assert g.nodes == (a, b)
    assert type(g.nodes) is tuple
    assert g.edges == [(a, b)]
    assert repr(g) == "<Graph 'box': 2 nodes, 1 edges>"
    assert cg.Graph().name == "graph"


def test_a_closed_event_is_refused_at_the_builder_and_at_update():
    class CUeventValue:  # a CUevent that reads as an int (0: null)
        def __init__(self, value: int) -> None:
            self.value = value

        def __int__(self) -> int:
            return self.value

    class Event:  # a cuda.core Event: its handle reads 0 once closed
        def __init__(self) -> None:
            self.handle: Any = CUeventValue(0x10)

        def close(self) -> None:
            self.handle = CUeventValue(0)

    g = cg.Graph()
    live, closed = Event(), Event()
    closed.close()
    r = g.record(live)
    with pytest.raises(StateError, match=r"^record#1 'record': event: the Event is closed"):
        g.record(closed)
    with pytest.raises(RuntimeError, match=r"wait#1 'wait': event: the Event is closed"):
        g.wait(closed)
    with pytest.raises(StateError, match=r"the Event is closed"):
        r.update(event=closed)
    assert r.event is live and len(g) == 1
