"""Input checks of the definition layer: each bad input is refused by the call that receives it.

Every case asserts the exception type (a ``CudaGraphError``), that the message
names the node (or the builder call) and the argument, and that the graph is
left as it was. CPU fakes stand for device memory, DLPack objects and
``cuda.core`` Buffers; the GPU tests at the end use the real ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition import operands
from cudagraph.definition.kinds.conditionals import MAX_SWITCH_CASES
from cudagraph.errors import CudaGraphError, DefinitionError, ForeignNodeError, OperandError


class CUkernel:  # recognised as a kernel handle by type name
    pass


K = CUkernel()


class Mem:
    """Device memory as seen through ``__cuda_array_interface__``."""

    def __init__(self, nbytes: int, addr: int = 0x7F0000000000) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (addr, False), "version": 3}


class Iface:
    """An object whose ``__cuda_array_interface__`` is whatever the test gives."""

    def __init__(self, iface: Any) -> None:
        self.__cuda_array_interface__ = iface


class RaisingIface:
    """Like a torch CUDA tensor with ``requires_grad=True``: reading the interface raises."""

    @property
    def __cuda_array_interface__(self) -> Any:
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")


class DLTensor:
    """A DLPack-only object on the given ``DLDeviceType`` (1 CPU, 2 CUDA, 3 CUDA host, 13 managed)."""

    def __init__(self, device_type: int) -> None:
        self.device_type = device_type

    def __dlpack__(self, stream: Any = None) -> Any:
        raise AssertionError("the definition layer must not export the tensor")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, 0)


class Buffer:
    """A cuda.core-style Buffer; ``is_device_accessible`` is read from the class's property."""

    def __init__(self, handle: Any = 0x7E0000000000, size: Any = 256, device: bool = True) -> None:
        self.handle = handle
        self.size = size
        self.memory_resource = None
        self._device = device

    @property
    def is_device_accessible(self) -> bool:
        return self._device


class RaisingBuffer(Buffer):
    @property
    def handle(self) -> Any:  # type: ignore[override]
        raise ValueError("buffer is closed")

    @handle.setter
    def handle(self, value: Any) -> None:
        pass


class BadIndex:
    """An ``__index__`` that raises something other than TypeError."""

    def __index__(self) -> int:
        raise ValueError("no index today")


MEM = Mem(1024)


def make() -> tuple[cg.Graph, dict[str, Any]]:
    g = cg.Graph("inp")
    a = g.memset(MEM, 0, count=16, element_size=4, name="fill")
    b = g.kernel(K, 1, 32, (MEM, np.float32(1.0)), after=a, name="k")
    c = g.memcpy(Mem(64, 0x10000), Mem(64, 0x20000), name="cp", after=b)
    h = g.host(print, "x", name="h", after=c)
    ch = g.child(cg.Graph("body"), name="ch")
    return g, {"fill": a, "k": b, "cp": c, "h": h, "ch": ch}


Case = tuple[str, Callable[[cg.Graph, dict[str, Any]], Any], type, tuple[str, ...]]

CASES: list[Case] = [
    # 1. host memory as a kernel argument, refused by g.kernel
    (
        "kernel-numpy-array",
        lambda g, n: g.kernel(K, 1, 1, (MEM, np.zeros(4, np.float32)), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 1", "host memory", "__array_interface__"),
    ),
    (
        "kernel-numpy-0d",
        lambda g, n: g.kernel(K, 1, 1, (np.array(2.0, np.float32),), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 0", "host memory", "numpy scalar"),
    ),
    (
        "kernel-dlpack-cpu",
        lambda g, n: g.kernel(K, 1, 1, (np.int32(1), MEM, DLTensor(1)), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 2", "kDLCPU"),
    ),
    (
        "kernel-dlpack-rocm",
        lambda g, n: g.kernel(K, 1, 1, (DLTensor(10),), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 0", "DLPack device type 10", "kDLCUDA=2"),
    ),
    (
        "kernel-buffer-host-only",
        lambda g, n: g.kernel(K, 1, 1, (Buffer(device=False),), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 0", "is_device_accessible is False"),
    ),
    (
        "kernel-list-args-host",
        lambda g, n: g.kernel(K, 1, 1, [np.ones(2)], name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 0", "host memory"),
    ),
    (
        "kernel-update-host-arg",
        lambda g, n: n["k"].update(args=(np.zeros(4),)),
        OperandError,
        ("kernel#1 'k'", "argument 0", "host memory"),
    ),
    # 3. addresses outside 0..2**64-1 refused when the node is added
    (
        "memcpy-cai-negative",
        lambda g, n: g.memcpy(Mem(64, -16), MEM, 64, name="m"),
        OperandError,
        ("memcpy#5 'm'", "dst", "-16", "outside 0..2**64-1"),
    ),
    (
        "memcpy-buffer-minus-one",
        lambda g, n: g.memcpy(MEM, Buffer(-1, 64), 64, name="m"),
        OperandError,
        ("memcpy#5 'm'", "src", "-1", "outside 0..2**64-1"),
    ),
    (
        "memset-buffer-2-70",
        lambda g, n: g.memset(Buffer(2**70, 64), 0, count=4, name="m"),
        OperandError,
        ("memset#5 'm'", "dst", str(2**70), "outside"),
    ),
    (
        "kernel-cai-negative-validate",
        lambda g, n: (g.kernel(K, 1, 1, (Mem(64, -16),), name="kn"), g.validate()),
        OperandError,
        ("kernel#5 'kn'", "argument 0", "-16", "outside"),
    ),
    # 4. negative strides
    (
        "memcpy-reversed-host-array",
        lambda g, n: g.memcpy(MEM, np.arange(64, dtype=np.uint8)[::-1], name="m"),
        OperandError,
        ("memcpy#5 'm'", "src", "negative strides", "ascontiguousarray"),
    ),
    (
        "memcpy-reversed-rows",
        lambda g, n: g.memcpy(np.zeros((4, 4), np.float32)[::-1], MEM, 64, name="m"),
        OperandError,
        ("memcpy#5 'm'", "dst", "negative strides"),
    ),
    # 5. ranges and types, refused by the call that receives them
    (
        "shared-mem-2-80",
        lambda g, n: g.kernel(K, 1, 1, shared_mem=2**80, name="kn"),
        DefinitionError,
        ("kernel#5 'kn'", "shared_mem", "32-bit"),
    ),
    (
        "priority-2-100",
        lambda g, n: g.kernel(K, 1, 1, priority=2**100, name="kn"),
        DefinitionError,
        ("kernel#5 'kn'", "priority", "int range"),
    ),
    (
        "priority-update-2-100",
        lambda g, n: n["k"].update(priority=-(2**40)),
        DefinitionError,
        ("kernel#1 'k'", "priority"),
    ),
    (
        "set-condition-f32-overflow",
        lambda g, n: g.set_condition(g.condition(), MEM, ">", 1e300, np.float32, name="sc"),
        OperandError,
        ("set_condition#5 'sc'", "value", "overflows float32"),
    ),
    (
        "set-condition-list",
        lambda g, n: g.set_condition(g.condition(), MEM, ">", [1.0], np.float32, name="sc"),
        OperandError,
        ("set_condition#5 'sc'", "value", "list"),
    ),
    (
        "set-condition-array",
        lambda g, n: g.set_condition(g.condition(), MEM, "<", np.ones(2), np.float64, name="sc"),
        OperandError,
        ("set_condition#5 'sc'", "value", "ndarray"),
    ),
    (
        "memset-numpy-str",
        lambda g, n: g.memset(MEM, np.str_("a"), count=4, name="ms"),
        OperandError,
        ("memset#5 'ms'", "value", "str_"),
    ),
    ("grid-true", lambda g, n: g.kernel(K, True, 1, name="kn"), OperandError, ("kernel#5 'kn'", "grid", "bool")),
    (
        "grid-tuple-true",
        lambda g, n: g.kernel(K, (2, True), 1, name="kn"),
        OperandError,
        ("kernel#5 'kn'", "grid", "bool"),
    ),
    ("block-true", lambda g, n: g.kernel(K, 1, True, name="kn"), OperandError, ("kernel#5 'kn'", "block", "bool")),
    (
        "update-grid-true",
        lambda g, n: n["k"].update(grid=np.True_),
        OperandError,
        ("kernel#1 'k'", "grid", "bool"),
    ),
    (
        "update-cooperative-yes",
        lambda g, n: n["k"].update(cooperative="yes"),
        OperandError,
        ("kernel#1 'k'", "cooperative", "'yes'"),
    ),
    (
        "switch-2-63",
        lambda g, n: g.switch(g.condition(), 2**63, name="sw"),
        DefinitionError,
        ("switch#5 'sw'", "cases", str(MAX_SWITCH_CASES)),
    ),
    (
        "kernel-python-float",
        lambda g, n: g.kernel(K, 1, 1, (MEM, 1.5), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 1", "Python float is ambiguous", "np.float32(1.5)"),
    ),
    (
        "kernel-python-bool",
        lambda g, n: g.kernel(K, 1, 1, (True,), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 0", "Python bool is ambiguous"),
    ),
    (
        "kernel-none-arg",
        lambda g, n: g.kernel(K, 1, 1, (MEM, None), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 1", "None"),
    ),
    (
        "kernel-object-arg",
        lambda g, n: g.kernel(K, 1, 1, (object(),), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 0", "object cannot be a kernel argument"),
    ),
    ("kernel-name-int", lambda g, n: g.kernel(K, 1, 1, name=5), OperandError, ("kernel#5", "name", "int")),
    ("memcpy-name-bytes", lambda g, n: g.memcpy(MEM, MEM, 4, name=b"m"), OperandError, ("memcpy#5", "name", "bytes")),
    ("empty-name-list", lambda g, n: g.empty(name=["e"]), OperandError, ("empty#5", "name", "list")),
    # 6. raw exceptions turned into CudaGraphErrors naming the node and the argument
    (
        "cai-no-data",
        lambda g, n: g.memcpy(Iface({"shape": (4,), "typestr": "|u1", "version": 3}), MEM, 4, name="m"),
        OperandError,
        ("memcpy#5 'm'", "dst", "['data']"),
    ),
    (
        "cai-data-str",
        lambda g, n: g.memcpy(MEM, Iface({"shape": (4,), "typestr": "|u1", "data": ("0x10", False)}), 4, name="m"),
        OperandError,
        ("memcpy#5 'm'", "src", "must be an int", "str"),
    ),
    (
        "cai-not-a-dict",
        lambda g, n: g.memset(Iface(7), 0, count=4, name="m"),
        OperandError,
        ("memset#5 'm'", "dst", "must be a dict"),
    ),
    (
        "cai-bad-typestr",
        lambda g, n: g.memcpy(Iface({"shape": (4,), "typestr": "zz", "data": (0x1000, False)}), MEM, 4, name="m"),
        OperandError,
        ("memcpy#5 'm'", "dst", "malformed", "'zz'"),
    ),
    (
        "cai-shape-int",
        lambda g, n: g.memcpy(Iface({"shape": 4, "typestr": "<f4", "data": (0x1000, False)}), MEM, 4, name="m"),
        OperandError,
        ("memcpy#5 'm'", "dst", "malformed"),
    ),
    (
        "cai-raises",
        lambda g, n: g.memcpy(RaisingIface(), MEM, 4, name="m"),
        OperandError,
        ("memcpy#5 'm'", "dst", "RuntimeError", "requires grad"),
    ),
    (
        "cai-raises-kernel-arg",
        lambda g, n: g.kernel(K, 1, 1, (RaisingIface(),), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "argument 0", "RuntimeError"),
    ),
    (
        "buffer-handle-str",
        lambda g, n: g.memcpy(Buffer("0x10"), MEM, 4, name="m"),
        OperandError,
        ("memcpy#5 'm'", "dst", "Buffer handle", "str"),
    ),
    (
        "buffer-size-none",
        lambda g, n: g.memcpy(MEM, Buffer(0x1000, None), name="m"),
        OperandError,
        ("memcpy#5 'm'", "src", "size"),
    ),
    (
        "buffer-handle-raises",
        lambda g, n: g.memcpy(RaisingBuffer(), MEM, 4, name="m"),
        OperandError,
        ("memcpy#5 'm'", "dst", "ValueError", "closed"),
    ),
    (
        "bits-float",
        lambda g, n: g.write_value(0x1000, 1, bits=32.0, name="w"),
        OperandError,
        ("write_value#5 'w'", "bits", "float"),
    ),
    (
        "bits-array",
        lambda g, n: g.wait_value(0x1000, 1, bits=np.array([32, 64]), name="w"),
        OperandError,
        ("wait_value#5 'w'", "bits", "ndarray"),
    ),
    ("bits-48", lambda g, n: g.write_value(0x1000, 1, bits=48, name="w"), DefinitionError, ("write_value#5", "bits")),
    (
        "element-size-float",
        lambda g, n: g.memset(MEM, 0, count=4, element_size=4.0, name="ms"),
        OperandError,
        ("memset#5 'ms'", "element_size", "float"),
    ),
    (
        "element-size-array",
        lambda g, n: g.memset(MEM, 0, count=4, element_size=np.array([4, 4]), name="ms"),
        OperandError,
        ("memset#5 'ms'", "element_size", "ndarray"),
    ),
    (
        "cooperative-array",
        lambda g, n: g.kernel(K, 1, 1, cooperative=np.array([1, 1]), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "cooperative", "ndarray"),
    ),
    (
        "programmatic-array",
        lambda g, n: g.kernel(K, 1, 1, programmatic=np.array([1, 1]), after=n["k"], name="kn"),
        OperandError,
        ("kernel#5 'kn'", "programmatic"),
    ),
    (
        "op-unhashable",
        lambda g, n: g.set_condition(g.condition(), MEM, [">"], 1, np.int32, name="sc"),
        OperandError,
        ("set_condition#5 'sc'", "op", "['>']"),
    ),
    (
        "cmp-unhashable",
        lambda g, n: g.wait_value(0x1000, 1, cmp={"eq": 1}, name="w"),
        OperandError,
        ("wait_value#5 'w'", "cmp"),
    ),
    (
        "child-update-body-int",
        lambda g, n: n["ch"].update(body=5),
        OperandError,
        ("child#4 'ch'", "body", "int"),
    ),
    (
        "memset-update-height-none",
        lambda g, n: n["fill"].update(height=None),
        OperandError,
        ("memset#0 'fill'", "height", "NoneType"),
    ),
    (
        "host-update-args-int",
        lambda g, n: n["h"].update(args=5),
        OperandError,
        ("host#3 'h'", "args", "int"),
    ),
    ("index-grid", lambda g, n: g.kernel(K, BadIndex(), 1, name="kn"), OperandError, ("kernel#5 'kn'", "grid")),
    (
        "index-block-tuple",
        lambda g, n: g.kernel(K, 1, (BadIndex(), 1), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "block"),
    ),
    ("index-nbytes", lambda g, n: g.memcpy(MEM, MEM, BadIndex(), name="m"), OperandError, ("memcpy#5 'm'", "nbytes")),
    ("index-count", lambda g, n: g.memset(MEM, 0, count=BadIndex(), name="m"), OperandError, ("memset#5 'm'", "count")),
    (
        "index-priority",
        lambda g, n: g.kernel(K, 1, 1, priority=BadIndex(), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "priority"),
    ),
    (
        "index-cluster",
        lambda g, n: g.kernel(K, 2, 1, cluster=BadIndex(), name="kn"),
        OperandError,
        ("kernel#5 'kn'", "cluster"),
    ),
    (
        "index-switch",
        lambda g, n: g.switch(g.condition(), BadIndex(), name="sw"),
        OperandError,
        ("switch#5 'sw'", "number of cases"),
    ),
    (
        "index-condition-default",
        lambda g, n: g.condition(default=BadIndex(), name="c"),
        OperandError,
        ("condition#0 'c'", "default"),
    ),
    (
        "index-set-condition-value",
        lambda g, n: g.set_condition(g.condition(), MEM, "<", BadIndex(), np.int64, name="sc"),
        OperandError,
        ("set_condition#5 'sc'", "value"),
    ),
    (
        "index-alloc-offset",
        lambda g, n: g.alloc(64, name="al").offset(BadIndex()),
        OperandError,
        ("alloc#5 'al'", "offset"),
    ),
]


def _state(g: cg.Graph, nodes: dict[str, Any]) -> Any:
    k, f, c, h, ch = nodes["k"], nodes["fill"], nodes["cp"], nodes["h"], nodes["ch"]
    return (
        [n.kind for n in g.nodes if n.kind != "alloc"],
        [(a.index, b.index) for a, b in g.edges],
        (k.grid, k.block, k.args, k.shared_mem, k.attrs),
        (f.dst, f.value, f.width, f.height, f.pitch),
        (c.dst, c.src, c.nbytes),
        (h.fn, h.args),
        ch.body,
    )


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_by_the_call(case: Case) -> None:
    _id, fn, exc, parts = case
    g, nodes = make()
    before = _state(g, nodes)
    with pytest.raises(exc) as info:
        fn(g, nodes)
    assert type(info.value) is exc, f"expected exactly {exc.__name__}, got {type(info.value).__name__}"
    assert isinstance(info.value, CudaGraphError)
    for part in parts:
        assert part in str(info.value), f"{part!r} not in {str(info.value)!r}"
    if not _id.endswith("-validate"):
        assert _state(g, nodes) == before
        g.validate()


# ------------------------------------------------------------------ what is still accepted


@pytest.mark.parametrize("device_type", [2, 3, 13], ids=["cuda", "cuda-host", "cuda-managed"])
def test_dlpack_memory_the_gpu_reads_is_a_kernel_argument(device_type: int) -> None:
    g = cg.Graph("ok")
    t = DLTensor(device_type)
    k = g.kernel(K, 1, 1, (t, np.int32(3)))
    assert k.args[0] is t
    norm = operands.normalize_kernel_args(k.args, k.label)
    assert type(norm[0]) is operands.Deferred and norm[0].obj is t


def test_device_and_pinned_buffers_are_kernel_arguments() -> None:
    g = cg.Graph("ok")
    buf = Buffer(0x7E0000001000, 64)
    k = g.kernel(K, 1, 1, (buf, Mem(16), 0x1000, np.float32(2)))
    assert k.args[0] is buf
    assert operands.normalize_kernel_args(k.args, k.label)[:3] == (0x7E0000001000, 0x7F0000000000, 0x1000)
    # The Buffer's type is learnt: later launches with it take the hot path (one attribute read).
    assert Buffer in operands.ARG_BUFFER_TYPES
    assert {int, np.float32} <= operands.ARG_TYPES_OK
    # The attribute is read per object: a host-only Buffer of the same type is still refused.
    with pytest.raises(OperandError, match=r"kernel#1 'kernel': argument 0: .*is_device_accessible is False"):
        g.kernel(K, 1, 1, (Buffer(0x1000, 64, device=False),))
    assert len(g) == 1


def test_copies_still_take_pageable_host_memory() -> None:
    g = cg.Graph("h2d")
    host = np.arange(16, dtype=np.float32)
    c = g.memcpy(MEM, host)
    assert (c.src, c.nbytes) == (host.ctypes.data, 64)
    pitched = np.zeros((4, 8), np.float32)[:, :4]  # positive strides, not contiguous
    d = g.memcpy(pitched, MEM, 4 * 8 * 3 + 16)
    assert d.nbytes == 112  # 3 whole rows of 32 bytes and the 16 bytes of the last
    with pytest.raises(DefinitionError, match=r"memcpy#2 'memcpy': nbytes = 113 exceeds the 112 bytes of dst"):
        g.memcpy(pitched, MEM, 113)


def test_set_condition_accepts_infinities_given_as_such() -> None:
    g = cg.Graph("inf")
    node = g.set_condition(g.condition(), MEM, "<", float("inf"), np.float32)
    assert node.value == np.float32(np.inf) and type(node.value) is np.float32


def test_switch_takes_the_documented_maximum() -> None:
    g = cg.Graph("sw")
    assert len(g.switch(g.condition(), 3).cases) == 3
    with pytest.raises(DefinitionError, match=rf"switch#1 'switch': {MAX_SWITCH_CASES + 1} cases"):
        g.switch(g.condition(), MAX_SWITCH_CASES + 1)


def test_cooperative_update_takes_bools_and_0_1() -> None:
    g = cg.Graph("coop")
    k = g.kernel(K, 4, 32)
    k.update(cooperative=np.True_)
    assert k.attrs is not None and k.attrs.cooperative is True
    k.update(cooperative=0)
    assert k.attrs is None


# ------------------------------------------------------------------ 2. update applies graph-memory checks


def test_update_to_an_allocation_of_another_graph_is_refused_by_validate() -> None:
    g = cg.Graph("g")
    other = cg.Graph("other")
    foreign = other.alloc(64, name="buf")
    cp = g.memcpy(Mem(64, 0x10000), Mem(64, 0x20000), name="cp")
    fill = g.memset(Mem(64, 0x30000), 0, count=16, name="fill")
    g.validate()
    cp.update(dst=foreign)
    with pytest.raises(ForeignNodeError) as info:
        g.validate()
    assert "memcpy#0 'cp'" in str(info.value) and "dst is alloc#0 'buf' of Graph 'other'" in str(info.value)
    cp.update(dst=Mem(64, 0x10000))
    g.validate()
    fill.update(dst=foreign.offset(8))
    with pytest.raises(ForeignNodeError, match=r"memset#1 'fill'.*dst is alloc#0 'buf' of Graph 'other'"):
        g.validate()


def test_update_to_an_unordered_allocation_of_the_graph_is_refused_by_validate() -> None:
    g = cg.Graph("g")
    cp = g.memcpy(Mem(64, 0x10000), Mem(64, 0x20000), name="cp")
    a = g.alloc(64, name="buf")
    g.free(a, after=a)
    cp.update(src=a)  # the copy is not ordered after the allocation
    with pytest.raises(DefinitionError, match=r"memcpy#0 'cp'") as info:
        g.validate()
    assert "alloc#1 'buf'" in str(info.value)


def test_update_to_an_allocation_in_order_is_accepted() -> None:
    g = cg.Graph("g")
    a = g.alloc(64, name="buf")
    cp = g.memcpy(Mem(64, 0x10000), Mem(64, 0x20000), name="cp", after=a)
    g.free(a, after=cp)
    cp.update(src=a)
    assert cp.src is a
    g.validate()


# ------------------------------------------------------------------ GPU: the real objects


@pytest.mark.gpu
def test_gpu_pinned_buffer_kernel_argument_runs(kernels: Any, gpu: Any, stream: Any) -> None:
    buf, view = gpu.pinned(4 * 32)
    view[:] = 0
    assert buf.is_device_accessible is True
    g = cg.Graph("pinned")
    g.kernel(kernels.add_i32, 1, 32, (buf, np.int32(5), np.int32(32)))
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(view.view(np.int32), np.full(32, 5, np.int32))


@pytest.mark.gpu
def test_gpu_host_only_buffer_is_refused_without_a_driver_call(kernels: Any, gpu: Any) -> None:
    from cuda.core import Buffer as CoreBuffer
    from cuda.core import MemoryResource

    class HostOnly(MemoryResource):
        def allocate(self, size: int, stream: Any = None) -> Any:
            raise NotImplementedError

        def deallocate(self, ptr: Any, size: int, stream: Any = None) -> None:
            pass

        @property
        def is_device_accessible(self) -> bool:
            return False

        @property
        def is_host_accessible(self) -> bool:
            return True

        @property
        def device_id(self) -> int:
            return -1

    host = np.zeros(32, np.int32)
    try:
        buf = CoreBuffer.from_handle(host.ctypes.data, host.nbytes, mr=HostOnly())
        device_accessible = buf.is_device_accessible
    except Exception as exc:  # how cuda.core learns a pageable pointer's attributes varies
        pytest.skip(f"cuda.core cannot describe a pageable Buffer: {type(exc).__name__}: {exc}")
    if device_accessible:
        pytest.skip("this cuda.core reports the pageable buffer as device-accessible")
    g = cg.Graph("host")
    with pytest.raises(OperandError, match=r"kernel#0 'kernel': argument 0: .*is_device_accessible is False"):
        g.kernel(kernels.add_i32, 1, 32, (buf, np.int32(5), np.int32(32)))
    with pytest.raises(OperandError, match=r"kernel#0 'kernel': argument 0: .*host memory"):
        g.kernel(kernels.add_i32, 1, 32, (host, np.int32(5), np.int32(32)))
    assert len(g) == 0


@pytest.mark.gpu
def test_gpu_torch_tensors_cpu_refused_and_requires_grad_named(kernels: Any, device: Any) -> None:
    torch = pytest.importorskip("torch")
    g = cg.Graph("torch")
    cpu = torch.zeros(32, dtype=torch.int32)
    with pytest.raises(OperandError, match=r"kernel#0 'kernel': argument 0: .*kDLCPU"):
        g.kernel(kernels.add_i32, 1, 32, (cpu, np.int32(5), np.int32(32)))
    grad = torch.zeros(32, dtype=torch.float32, device="cuda", requires_grad=True)
    with pytest.raises(OperandError, match=r"memcpy#0 'memcpy': src: .*RuntimeError"):
        g.memcpy(cpu, grad, 128)
    k = g.kernel(kernels.scale_add, 1, 32, (grad, np.float32(2), np.float32(1), np.int32(32)), name="sa")
    with pytest.raises(OperandError, match=r"kernel#0 'sa': argument 0: .*RuntimeError"):
        g.validate()
    k.update(args=(grad.detach(), np.float32(2), np.float32(1), np.int32(32)))
    g.validate()
