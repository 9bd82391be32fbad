"""The catalogue of misuses: every one raises a typed error naming the node and the argument.

CPU cases need no GPU; GPU cases (marked) check what only the driver and the
kernel's real parameter layout can tell. After every error the definition is
unchanged and still usable.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.errors import (
    CudaGraphError,
    CycleError,
    DefinitionError,
    DuplicateEdgeError,
    ExecutableClosedError,
    ForeignNodeError,
    KernelArgumentError,
    OperandError,
    UnsupportedError,
)


class CUkernel:  # recognised as a kernel handle by type name
    pass


class CUevent:  # recognised as an event handle by type name
    pass


class Mem:
    """Device memory as seen through ``__cuda_array_interface__``."""

    def __init__(self, nbytes: int, addr: int = 0x7F0000000000) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (addr, False), "version": 3}


class Raw:
    """An object with the ``__cuda_array_interface__`` given, however malformed."""

    def __init__(self, iface: Any) -> None:
        self.__cuda_array_interface__ = iface


class HostTensor:
    """A DLPack object in host memory (``kDLCPU``)."""

    def __dlpack__(self, stream: Any = None) -> Any:
        raise AssertionError("not exported by the definition layer")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class HostBuffer:
    """A cuda.core-style Buffer of host-only memory."""

    handle, size, memory_resource = 0x1000, 64, None
    is_device_accessible = False


K = CUkernel()
EV = CUevent()
MEM = Mem(1024)


def make() -> tuple[cg.Graph, dict[str, Any]]:
    g = cg.Graph("cat")
    a = g.memset(MEM, 0, count=16, element_size=4, name="a")
    b = g.kernel(K, 1, 32, (MEM, np.float32(1.0)), after=a, name="b")
    c = g.empty(after=b, name="c")
    other = cg.Graph("other")
    o = other.empty(name="o")
    return g, {"a": a, "b": b, "c": c, "other": other, "o": o}


Case = tuple[str, Callable[[cg.Graph, dict[str, Any]], Any], type, tuple[str, ...]]

CPU_CASES: list[Case] = [
    # kernel builder
    ("kernel-not-a-kernel", lambda g, n: g.kernel("saxpy", 1, 1), OperandError, ("kernel#3", "CUkernel")),
    ("kernel-none", lambda g, n: g.kernel(None, 1, 1), OperandError, ("kernel#3", "got NoneType")),
    ("grid-zero", lambda g, n: g.kernel(K, 0, 1), DefinitionError, ("kernel#3", "grid[0] must be positive")),
    ("grid-negative", lambda g, n: g.kernel(K, -4, 1), DefinitionError, ("kernel#3", "grid[0]")),
    ("grid-y-too-big", lambda g, n: g.kernel(K, (1, 70000), 1), DefinitionError, ("kernel#3", "grid[1]", "65535")),
    ("grid-x-too-big", lambda g, n: g.kernel(K, 2**31, 1), DefinitionError, ("kernel#3", "grid[0]", "2147483647")),
    ("grid-4-dims", lambda g, n: g.kernel(K, (1, 1, 1, 1), 1), DefinitionError, ("kernel#3", "grid", "1 to 3")),
    ("grid-float", lambda g, n: g.kernel(K, 1.5, 1), OperandError, ("kernel#3", "grid")),
    ("grid-str-dims", lambda g, n: g.kernel(K, ("a",), 1), OperandError, ("kernel#3", "grid must be integers")),
    ("block-zero", lambda g, n: g.kernel(K, 1, 0), DefinitionError, ("kernel#3", "block[0]")),
    ("block-1025", lambda g, n: g.kernel(K, 1, 1025), DefinitionError, ("kernel#3", "block[0]", "1024")),
    ("block-z-65", lambda g, n: g.kernel(K, 1, (1, 1, 65)), DefinitionError, ("kernel#3", "block[2]", "64")),
    ("block-threads", lambda g, n: g.kernel(K, 1, (64, 32)), DefinitionError, ("kernel#3", "2048 threads")),
    ("smem-negative", lambda g, n: g.kernel(K, 1, 1, shared_mem=-1), DefinitionError, ("kernel#3", "shared_mem")),
    ("smem-float", lambda g, n: g.kernel(K, 1, 1, shared_mem=1.5), DefinitionError, ("kernel#3", "shared_mem")),
    ("args-not-tuple", lambda g, n: g.kernel(K, 1, 1, args=5), OperandError, ("kernel#3", "args must be a tuple")),
    (
        "arg-float",
        lambda g, n: (g.kernel(K, 1, 1, (1.5,), name="f"), g.validate()),
        OperandError,
        ("kernel#3 'f'", "argument 0", "np.float32"),
    ),
    (
        "arg-bool",
        lambda g, n: (g.kernel(K, 1, 1, (True,), name="f"), g.validate()),
        OperandError,
        ("kernel#3 'f'", "argument 0", "bool"),
    ),
    (
        "arg-none",
        lambda g, n: (g.kernel(K, 1, 1, (0x10000, None), name="f"), g.validate()),
        OperandError,
        ("kernel#3 'f'", "argument 1", "None"),
    ),
    (
        "arg-str",
        lambda g, n: (g.kernel(K, 1, 1, ("x",), name="f"), g.validate()),
        OperandError,
        ("kernel#3 'f'", "argument 0", "str"),
    ),
    (
        "arg-negative-int",
        lambda g, n: (g.kernel(K, 1, 1, (-1,), name="f"), g.validate()),
        OperandError,
        ("kernel#3 'f'", "argument 0", "np.int64"),
    ),
    (
        "arg-huge-int",
        lambda g, n: (g.kernel(K, 1, 1, (2**64,), name="f"), g.validate()),
        OperandError,
        ("kernel#3 'f'", "argument 0"),
    ),
    (
        "arg-object",
        lambda g, n: (g.kernel(K, 1, 1, (object(),), name="f"), g.validate()),
        OperandError,
        ("kernel#3 'f'", "argument 0", "object"),
    ),
    (
        "arg-numpy-str",
        lambda g, n: (g.kernel(K, 1, 1, (np.str_("x"),), name="f"), g.validate()),
        OperandError,
        ("kernel#3 'f'", "argument 0"),
    ),
    (
        "arg-scalar-param-kind",
        lambda g, n: g.memcpy(g.param("s", np.float32), MEM, 4),
        OperandError,
        ("memcpy#3", "dst", "param 's'"),
    ),
    # memcpy
    ("memcpy-null-dst", lambda g, n: g.memcpy(0, MEM, 4), OperandError, ("memcpy#3", "dst", "null pointer")),
    ("memcpy-null-src", lambda g, n: g.memcpy(MEM, 0, 4), OperandError, ("memcpy#3", "src", "null pointer")),
    ("memcpy-float-dst", lambda g, n: g.memcpy(1.0, MEM, 4), OperandError, ("memcpy#3", "dst", "float")),
    ("memcpy-str-src", lambda g, n: g.memcpy(MEM, "abc", 4), OperandError, ("memcpy#3", "src", "str")),
    ("memcpy-object", lambda g, n: g.memcpy(MEM, object(), 4), OperandError, ("memcpy#3", "src", "object")),
    (
        "memcpy-zero",
        lambda g, n: g.memcpy(MEM, Mem(8, 0x10000), 0),
        DefinitionError,
        ("memcpy#3", "nbytes must be positive"),
    ),
    ("memcpy-negative", lambda g, n: g.memcpy(MEM, Mem(8, 0x10000), -8), DefinitionError, ("memcpy#3", "nbytes")),
    (
        "memcpy-overflow",
        lambda g, n: g.memcpy(0x10000, 0x20000, 2**64),
        DefinitionError,
        ("memcpy#3", "nbytes", "64 bits"),
    ),
    (
        "memcpy-past-src",
        lambda g, n: g.memcpy(MEM, Mem(8, 0x10000), 16),
        DefinitionError,
        ("memcpy#3", "exceeds the 8 bytes of src"),
    ),
    (
        "memcpy-past-dst",
        lambda g, n: g.memcpy(Mem(8, 0x10000), MEM, 16),
        DefinitionError,
        ("memcpy#3", "exceeds the 8 bytes of dst"),
    ),
    (
        "memcpy-unknown-size",
        lambda g, n: g.memcpy(0x10000, 0x20000),
        DefinitionError,
        ("memcpy#3", "nbytes is required"),
    ),
    (
        "memcpy-nbytes-str",
        lambda g, n: g.memcpy(0x10000, 0x20000, "8"),
        OperandError,
        ("memcpy#3", "nbytes must be an integer"),
    ),
    ("memcpy-address-too-big", lambda g, n: g.memcpy(2**64, 0x20000, 8), OperandError, ("memcpy#3", "dst", "outside")),
    # memset
    (
        "memset-value-too-big",
        lambda g, n: g.memset(MEM, 256, count=4),
        OperandError,
        ("memset#3", "value 256", "1 byte"),
    ),
    ("memset-value-too-small", lambda g, n: g.memset(MEM, -129, count=4), OperandError, ("memset#3", "value -129")),
    (
        "memset-element-size-3",
        lambda g, n: g.memset(MEM, 0, count=4, element_size=3),
        DefinitionError,
        ("memset#3", "element_size"),
    ),
    (
        "memset-element-size-8",
        lambda g, n: g.memset(MEM, np.float64(1), count=4),
        DefinitionError,
        ("memset#3", "element_size"),
    ),
    (
        "memset-value-size-mismatch",
        lambda g, n: g.memset(MEM, np.float32(1), count=4, element_size=2),
        OperandError,
        ("memset#3", "4-byte float32", "element_size is 2"),
    ),
    (
        "memset-value-float",
        lambda g, n: g.memset(MEM, 1.5, count=4),
        OperandError,
        ("memset#3", "value must be an int"),
    ),
    (
        "memset-count-zero",
        lambda g, n: g.memset(MEM, 0, count=0),
        DefinitionError,
        ("memset#3", "count must be positive"),
    ),
    (
        "memset-width-and-count",
        lambda g, n: g.memset(MEM, 0, count=4, width=4),
        DefinitionError,
        ("memset#3", "count or width"),
    ),
    (
        "memset-pitch-small",
        lambda g, n: g.memset(MEM, 0, width=16, height=2, pitch=8),
        DefinitionError,
        ("memset#3", "pitch 8 is smaller"),
    ),
    (
        "memset-pitch-unaligned",
        lambda g, n: g.memset(MEM, 0, width=2, height=2, pitch=10, element_size=4),
        DefinitionError,
        ("memset#3", "pitch 10", "multiple"),
    ),
    (
        "memset-past-dst",
        lambda g, n: g.memset(MEM, 0, count=2048),
        DefinitionError,
        ("memset#3", "covers 2048 bytes", "1024"),
    ),
    ("memset-2d-no-width", lambda g, n: g.memset(MEM, 0, height=2), DefinitionError, ("memset#3", "width is required")),
    ("memset-null", lambda g, n: g.memset(0, 0, count=4), OperandError, ("memset#3", "dst", "null")),
    ("memset-height-zero", lambda g, n: g.memset(MEM, 0, width=4, height=0), DefinitionError, ("memset#3", "height")),
    # host, events, child
    ("host-not-callable", lambda g, n: g.host(42), OperandError, ("host#3", "callable")),
    ("record-not-event", lambda g, n: g.record(42), OperandError, ("record#3", "event", "Event")),
    ("wait-not-event", lambda g, n: g.wait("ev"), OperandError, ("wait#3", "event", "Event")),
    ("child-not-graph", lambda g, n: g.child(42), OperandError, ("child#3", "cudagraph.Graph")),
    ("child-self", lambda g, n: g.child(g), DefinitionError, ("child#3", "cannot contain itself")),
    (
        "child-contains-parent",
        lambda g, n: (lambda h: (h.child(g), g.child(h)))(cg.Graph("h")),
        DefinitionError,
        ("child#3", "contains Graph 'cat'"),
    ),
    # edges and dependencies
    (
        "after-foreign",
        lambda g, n: g.empty(after=n["o"]),
        ForeignNodeError,
        ("empty#3", "empty#0 'o'", "Graph 'other'"),
    ),
    (
        "after-foreign-in-list",
        lambda g, n: g.empty(after=[n["a"], n["o"]]),
        ForeignNodeError,
        ("empty#3", "Graph 'other'"),
    ),
    (
        "after-duplicate",
        lambda g, n: g.empty(after=(n["a"], n["a"])),
        DuplicateEdgeError,
        ("empty#3", "memset#0 'a' twice"),
    ),
    ("after-not-node", lambda g, n: g.empty(after=[1]), OperandError, ("empty#3", "after=", "int")),
    ("after-wrong-type", lambda g, n: g.empty(after=5), OperandError, ("empty#3", "after=")),
    ("edge-self-loop", lambda g, n: g.add_edge(n["b"], n["b"]), CycleError, ("kernel#1 'b'", "itself")),
    (
        "edge-cycle",
        lambda g, n: g.add_edge(n["c"], n["a"]),
        CycleError,
        ("empty#2 'c' -> memset#0 'a'", "memset#0 'a' -> kernel#1 'b' -> empty#2 'c' -> memset#0 'a'"),
    ),
    (
        "edge-duplicate",
        lambda g, n: g.add_edge(n["a"], n["b"]),
        DuplicateEdgeError,
        ("memset#0 'a' -> kernel#1 'b'", "exists"),
    ),
    ("edge-foreign-src", lambda g, n: g.add_edge(n["o"], n["b"]), ForeignNodeError, ("add_edge: src", "Graph 'other'")),
    ("edge-foreign-dst", lambda g, n: g.add_edge(n["a"], n["o"]), ForeignNodeError, ("add_edge: dst", "Graph 'other'")),
    ("edge-not-node", lambda g, n: g.add_edge(n["a"], "b"), OperandError, ("add_edge: dst", "str")),
    (
        "remove-missing-edge",
        lambda g, n: g.remove_edge(n["a"], n["c"]),
        DefinitionError,
        ("no edge memset#0 'a' -> empty#2 'c'",),
    ),
    ("join-foreign", lambda g, n: g.join(n["a"], n["o"]), ForeignNodeError, ("empty#3 'join'", "Graph 'other'")),
    ("path-after-foreign", lambda g, n: g.path(after=n["o"]), ForeignNodeError, ("path", "Graph 'other'")),
    # parameters
    ("param-bad-name", lambda g, n: g.param("not an identifier"), DefinitionError, ("param name", "identifier")),
    ("param-reserved", lambda g, n: g.param("device_launch"), DefinitionError, ("'device_launch'", "reserved")),
    (
        "param-kind-clash",
        lambda g, n: (g.param("p"), g.param("p", np.float32)),
        DefinitionError,
        ("param 'p'", "already exists"),
    ),
    ("param-coerce-wrong", lambda g, n: g.param("q", np.int32).coerce("x"), OperandError, ("param 'q'", "int32")),
    ("param-coerce-overflow", lambda g, n: g.param("q", np.int8).coerce(1000), OperandError, ("param 'q'",)),
    ("param-pointer-float", lambda g, n: g.param("p").coerce(1.5), OperandError, ("param 'p'", "float")),
    # (numpy would make an array of a sequence, NaN of None and parse a string: none is a scalar)
    ("param-coerce-tuple", lambda g, n: g.param("q", np.float32).coerce((1.0,)), OperandError, ("got tuple",)),
    ("param-coerce-array", lambda g, n: g.param("q", np.float32).coerce(np.ones(2)), OperandError, ("got ndarray",)),
    ("param-coerce-none", lambda g, n: g.param("q", np.float32).coerce(None), OperandError, ("got NoneType",)),
    ("param-coerce-str", lambda g, n: g.param("q", np.float32).coerce("1.0"), OperandError, ("got str",)),
    ("instantiate-flag", lambda g, n: g.instantiate(device_launch=np.ones(2)), OperandError, ("device_launch", "bool")),
    # node updates on the definition
    (
        "update-unknown-keyword",
        lambda g, n: n["b"].update(nbytes=4),
        DefinitionError,
        ("kernel#1 'b'", "unknown keyword", "nbytes"),
    ),
    ("update-bad-grid", lambda g, n: n["b"].update(grid=0), DefinitionError, ("kernel#1 'b'", "grid[0]")),
    ("update-memset-value", lambda g, n: n["a"].update(value=2**40), OperandError, ("memset#0 'a'", "value")),
    # refused by the call that receives them (no validate() needed)
    (
        "karg-numpy-array",
        lambda g, n: g.kernel(K, 1, 1, (np.zeros(4, np.float32),), name="f"),
        OperandError,
        ("kernel#3 'f'", "argument 0", "host memory"),
    ),
    (
        "karg-numpy-0d",
        lambda g, n: g.kernel(K, 1, 1, (np.array(1, np.int32),), name="f"),
        OperandError,
        ("kernel#3 'f'", "argument 0", "numpy scalar"),
    ),
    (
        "karg-dlpack-cpu",
        lambda g, n: g.kernel(K, 1, 1, (HostTensor(),), name="f"),
        OperandError,
        ("kernel#3 'f'", "argument 0", "kDLCPU"),
    ),
    (
        "karg-host-buffer",
        lambda g, n: g.kernel(K, 1, 1, (HostBuffer(),), name="f"),
        OperandError,
        ("kernel#3 'f'", "argument 0", "is_device_accessible"),
    ),
    (
        "karg-float-at-build",
        lambda g, n: g.kernel(K, 1, 1, (MEM, 2.5), name="f"),
        OperandError,
        ("kernel#3 'f'", "argument 1", "np.float32(2.5)"),
    ),
    ("karg-bool-at-build", lambda g, n: g.kernel(K, 1, 1, (False,)), OperandError, ("kernel#3", "argument 0", "bool")),
    (
        "memcpy-cai-negative-address",
        lambda g, n: g.memcpy(Mem(8, -8), MEM, 8),
        OperandError,
        ("memcpy#3", "dst", "outside 0..2**64-1"),
    ),
    (
        "memcpy-reversed-host",
        lambda g, n: g.memcpy(MEM, np.zeros(8, np.uint8)[::-1]),
        OperandError,
        ("memcpy#3", "src", "negative strides"),
    ),
    (
        "memcpy-cai-no-data",
        lambda g, n: g.memcpy(MEM, Raw({"shape": (8,), "typestr": "|u1"}), 8),
        OperandError,
        ("memcpy#3", "src", "['data']"),
    ),
    ("smem-2-80", lambda g, n: g.kernel(K, 1, 1, shared_mem=2**80), DefinitionError, ("kernel#3", "shared_mem")),
    ("priority-2-100", lambda g, n: g.kernel(K, 1, 1, priority=2**100), DefinitionError, ("kernel#3", "priority")),
    ("grid-bool", lambda g, n: g.kernel(K, True, 1), OperandError, ("kernel#3", "grid", "bool")),
    ("switch-too-many", lambda g, n: g.switch(g.condition(), 2**63), DefinitionError, ("switch#3", "65536")),
    (
        "set-condition-overflow",
        lambda g, n: g.set_condition(g.condition(), MEM, ">", 1e39, np.float32),
        OperandError,
        ("set_condition#3", "value", "overflows float32"),
    ),
    ("memset-numpy-str", lambda g, n: g.memset(MEM, np.str_("x"), count=4), OperandError, ("memset#3", "value")),
    ("write-bits-float", lambda g, n: g.write_value(MEM, 1, bits=32.0), OperandError, ("write_value#3", "bits")),
    ("wait-cmp-list", lambda g, n: g.wait_value(MEM, 1, cmp=["eq"]), OperandError, ("wait_value#3", "cmp")),
    ("name-not-str", lambda g, n: g.memset(MEM, 0, count=4, name=3), OperandError, ("memset#3", "name", "int")),
    (
        "update-cooperative-str",
        lambda g, n: n["b"].update(cooperative="yes"),
        OperandError,
        ("kernel#1 'b'", "cooperative"),
    ),
    (
        "update-memset-height-none",
        lambda g, n: n["a"].update(height=None),
        OperandError,
        ("memset#0 'a'", "height", "NoneType"),
    ),
    # graph object misuse
    ("graph-name-not-str", lambda g, n: cg.Graph(5), OperandError, ("Graph name", "str")),
    ("cache-maxsize", lambda g, n: cg.ExecutableCache(-1), OperandError, ("maxsize",)),
]


def _edges(g: cg.Graph) -> list[tuple[int, int]]:
    return [(a.index, b.index) for a, b in g.edges]


@pytest.mark.parametrize("case", CPU_CASES, ids=[c[0] for c in CPU_CASES])
def test_cpu_misuse(case: Case) -> None:
    _id, fn, exc, parts = case
    g, nodes = make()
    before = (len(g), _edges(g), [n.kind for n in g.nodes])
    state_b = (nodes["b"].grid, nodes["b"].args, nodes["a"].value)
    with pytest.raises(exc) as info:
        fn(g, nodes)
    assert isinstance(info.value, CudaGraphError)
    for part in parts:
        assert part in str(info.value), f"{part!r} not in {str(info.value)!r}"
    if _id.startswith("arg-"):
        return  # the kernel was added; validate() caught its argument
    assert (len(g), _edges(g), [n.kind for n in g.nodes]) == before
    assert (nodes["b"].grid, nodes["b"].args, nodes["a"].value) == state_b
    g.validate()  # still a valid, usable definition
    g.empty(after=nodes["c"])


def test_catalogue_size() -> None:
    assert len(CPU_CASES) + len(GPU_CASES) >= 60


# ---------------------------------------------------------------------- GPU
GPU_SRC = r"""
extern "C" __global__ void k3(float* x, float a, int n) { int i = threadIdx.x; if (i < n) x[i] *= a; }
extern "C" __global__ void big_smem(float* x) { extern __shared__ float s[]; s[threadIdx.x] = 1; x[0] = s[0]; }
"""


def _gpu_cases() -> list[tuple[str, Callable[..., Any], type, tuple[str, ...]]]:
    return [
        (
            "too-few-args",
            lambda k, buf, s: _inst(k.k3, (buf,)),
            KernelArgumentError,
            ("kernel#0 'k'", "'k3'", "takes 3 parameters", "got 1"),
        ),
        (
            "too-many-args",
            lambda k, buf, s: _inst(k.k3, (buf, np.float32(1), np.int32(1), np.int32(2))),
            KernelArgumentError,
            ("'k3'", "got 4"),
        ),
        (
            "float64-for-float",
            lambda k, buf, s: _inst(k.k3, (buf, np.float64(1), np.int32(1))),
            KernelArgumentError,
            ("kernel#0 'k'", "parameter 1", "expected 4 bytes", "got 8"),
        ),
        (
            "pyint-for-int",
            lambda k, buf, s: _inst(k.k3, (buf, np.float32(1), 5)),
            KernelArgumentError,
            ("parameter 2", "expected 4 bytes", "Python int"),
        ),
        (
            "int32-for-pointer",
            lambda k, buf, s: _inst(k.k3, (np.int32(0), np.float32(1), np.int32(1))),
            KernelArgumentError,
            ("parameter 0", "expected 8 bytes", "got 4"),
        ),
        (
            "bytes-wrong-size",
            lambda k, buf, s: _inst(k.k3, (buf, b"\x00" * 8, np.int32(1))),
            KernelArgumentError,
            ("parameter 1", "expected 4 bytes", "got 8 bytes (bytes)"),
        ),
        (
            "ctypes-wrong-size",
            lambda k, buf, s: _inst(k.k3, (buf, ctypes.c_double(1.0), np.int32(1))),
            KernelArgumentError,
            ("parameter 1", "got 8"),
        ),
        (
            "smem-over-limit",
            lambda k, buf, s: _inst(k.big_smem, (buf,), shared_mem=10**9),
            OperandError,
            ("kernel#0 'k'", "shared_mem", "1000000000 bytes", "limit of"),
        ),
        ("bogus-address-copy", lambda k, buf, s: _copy_inst(0x10, buf), OperandError, ("memcpy#0", "src", "0x10")),
        (
            "host-array-kernel-arg",
            lambda k, buf, s: _inst(k.k3, (np.zeros(32, np.float32), np.float32(1), np.int32(1))),
            OperandError,
            ("kernel#0 'k'", "argument 0", "host memory"),
        ),
        ("closed-launch", lambda k, buf, s: _closed(k, buf).launch(s), ExecutableClosedError, ("closed", "Graph 'c'")),
        ("closed-bind", lambda k, buf, s: _closed(k, buf).bind(p=buf), ExecutableClosedError, ("closed",)),
        ("closed-node-view", lambda k, buf, s: _closed(k, buf).handle, ExecutableClosedError, ("closed",)),
        (
            "unbound-param",
            lambda k, buf, s: _param_graph(k).instantiate(),
            DefinitionError,
            ("unbound parameter(s) 'p'",),
        ),
        (
            "unknown-param-bind",
            lambda k, buf, s: _param_graph(k).instantiate(p=buf).bind(q=buf),
            OperandError,
            ("no parameter 'q'",),
        ),
        (
            "unknown-param-instantiate",
            lambda k, buf, s: _param_graph(k).instantiate(p=buf, q=buf),
            OperandError,
            ("no parameter(s) 'q'",),
        ),
        (
            "bad-stream",
            lambda k, buf, s: _param_graph(k).instantiate(p=buf).launch("stream"),
            OperandError,
            ("stream", "str"),
        ),
        ("disable-host-node", lambda k, buf, s: _host_exe()[1], UnsupportedError, ("host#0", "enabled or disabled")),
        (
            "update-foreign-graph-node",
            lambda k, buf, s: _param_graph(k).instantiate(p=buf)[cg.Graph("x").empty()],
            KeyError,
            ("empty#0",),
        ),
    ]


def _inst(kernel: Any, args: tuple[Any, ...], shared_mem: int = 0) -> Any:
    g = cg.Graph("bad")
    g.kernel(kernel, 1, 32, args, shared_mem=shared_mem, name="k")
    return g.instantiate()


def _copy_inst(src: int, dst: Any) -> Any:
    g = cg.Graph("bad")
    g.memcpy(dst, src, 4)
    return g.instantiate()


def _closed(k: Any, buf: Any) -> Any:
    g = cg.Graph("c")
    p = g.param("p")
    g.kernel(k.k3, 1, 32, (p, np.float32(1), np.int32(1)))
    exe = g.instantiate(p=buf)
    exe.close()
    exe.close()  # twice is fine
    return exe


def _param_graph(k: Any) -> cg.Graph:
    g = cg.Graph("pg")
    p = g.param("p")
    g.kernel(k.k3, 1, 32, (p, np.float32(1), np.int32(1)))
    return g


def _host_exe() -> tuple[Any, Any]:
    g = cg.Graph("h")
    h = g.host(print)
    exe = g.instantiate()
    return exe, exe[h].disable()


GPU_CASES = _gpu_cases()


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_gpu_misuse(case: Any, nvrtc: Any, gpu: Any, stream: Any) -> None:
    _id, fn, exc, parts = case
    k = nvrtc(GPU_SRC, ("k3", "big_smem"))
    buf = gpu.alloc(4096)
    with pytest.raises(exc) as info:
        fn(k, buf, stream)
    if exc is not KeyError:
        assert isinstance(info.value, CudaGraphError)
    for part in parts:
        assert part in str(info.value), f"{part!r} not in {str(info.value)!r}"
    # the process and the context are still fine
    g = cg.Graph("after")
    g.kernel(k.k3, 1, 32, (buf, np.float32(2), np.int32(1)))
    with g.instantiate() as exe:
        exe.launch(stream)
    stream.sync()
