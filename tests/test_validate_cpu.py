"""``Graph.validate``: its structural checks, and its fast path for plain kernel nodes against the full checks.

A kernel node without launch attributes is validated by ``plain_kernel_passes`` first (a type lookup per
argument, memory objects read once per pass); it must accept exactly what ``KernelNode._check`` (that is,
``normalize_kernel_args``) accepts, and anything else must get the full check's error, word for word.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.kinds.kernel import plain_kernel_passes
from cudagraph.definition.operands import kernel_args_pass, normalize_kernel_args
from cudagraph.errors import CudaGraphError, DefinitionError, DuplicateEdgeError, ForeignNodeError, OperandError


class CUkernel:  # recognised by type name
    pass


K = CUkernel()


class Buffer:
    """A cuda.core Buffer stand-in; ``reads`` counts the reads of ``is_device_accessible``."""

    reads = 0

    def __init__(self, handle: Any, size: Any = 64, accessible: Any = True) -> None:
        self.handle = handle
        self.size = size
        self.memory_resource = None
        self._accessible = accessible

    @property
    def is_device_accessible(self) -> Any:
        Buffer.reads += 1
        return self._accessible


class RaisingBuffer(Buffer):
    @property
    def is_device_accessible(self) -> Any:
        raise RuntimeError("no driver")


class DevArray:
    def __init__(self, ptr: Any) -> None:
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (4,), "typestr": "<f4", "version": 3}


class DLPackOnly:
    def __dlpack__(self, stream: Any = None) -> Any:
        raise NotImplementedError

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)


class Point(ctypes.Structure):
    _fields_ = [("x", ctypes.c_float), ("y", ctypes.c_float)]


def _values(g: cg.Graph) -> list[Any]:
    """Kernel arguments of every kind the definition layer meets, good and bad."""
    return [
        0,
        0x9000,
        2**64 - 1,
        2**64,
        -1,
        np.float32(1.5),
        np.int64(-3),
        np.bool_(True),
        np.complex64(1j),
        np.str_("x"),
        np.datetime64("2020-01-01"),
        b"\x01\x02",
        bytearray(b"\x01\x02"),
        memoryview(b"\x01\x02"),
        ctypes.c_int(3),
        Point(1.0, 2.0),
        g.param("p"),
        g.param("s", np.int32),
        Buffer(0x1000),
        Buffer(0),  # closed: a null pointer is a valid kernel argument
        Buffer(0x1000, accessible=False),
        Buffer(-5),
        Buffer(2**64),
        Buffer(1.5),
        Buffer(0x1000, size=-1),
        Buffer(0x1000, size=True),
        RaisingBuffer(0x1000),
        DevArray(0x2000),
        DevArray("nope"),
        DLPackOnly(),
        np.zeros(4, np.float32),
        1.5,
        True,
        None,
        1 + 2j,
        "text",
        object(),
    ]


def _outcome(fn: Any) -> tuple[type, str] | None:
    try:
        fn()
    except CudaGraphError as e:
        return type(e), str(e)
    except (TypeError, ValueError) as e:  # (a released memoryview: bytes() raises ValueError, as before)
        return type(e), str(e)
    return None


def test_the_fast_path_accepts_exactly_what_the_full_check_accepts():
    g = cg.Graph("g")
    values = _values(g)
    for a in values:
        for b in (0x9000, np.float32(2.0), Buffer(0x3000)):
            args = (b, a)
            full = _outcome(lambda args=args: normalize_kernel_args(args, "k"))
            if kernel_args_pass(args, set()):
                assert full is None, (a, full)
            g2 = cg.Graph("v")
            node = g2.kernel(K, 1, 32, (0x9000,), name="k")
            node.args = args  # type: ignore[attr-defined]  # past the builder's checks, as validate must cope
            reference = _outcome(node._check)
            got = _outcome(g2.validate)
            assert got == reference, (a, got, reference)


def test_the_common_arguments_take_the_fast_path():
    g = cg.Graph("g")
    common = (0x9000, np.float32(1.0), np.int32(3), b"xy", bytearray(2), Buffer(0x10), g.param("p"))
    assert kernel_args_pass(common + (ctypes.c_int(1), Point(1.0, 2.0), DLPackOnly(), DevArray(0x10)), set())
    node = g.kernel(K, 1, 32, common)
    assert plain_kernel_passes(node, set())
    for bad in ((-1,), (np.str_("x"),), (memoryview(b"x"),), [0x9000], (1.5,)):
        assert not kernel_args_pass(bad, set())


def test_a_memory_object_shared_by_many_nodes_is_read_once_per_validate():
    buf = Buffer(0x1000)
    g = cg.Graph("g")
    prev = None
    for i in range(50):
        prev = g.kernel(K, 1, 32, (buf, np.float32(i)), after=prev)
    Buffer.reads = 0
    g.validate()
    assert Buffer.reads == 1
    g.validate()
    assert Buffer.reads == 2  # once per pass: a buffer may change between two calls
    buf._accessible = False
    with pytest.raises(OperandError, match=re.escape("kernel#0 'kernel': argument 0: the Buffer is host memory")):
        g.validate()


def test_plain_kernel_passes_leaves_other_kernels_to_the_full_check():
    class Wrapper:  # a kernel known only through its handle: decided per object by the full check
        def __init__(self, handle: Any) -> None:
            self.handle = handle

    g = cg.Graph("g")
    good = g.kernel(Wrapper(CUkernel()), 1, 32, (0x9000,))
    assert not plain_kernel_passes(good, set())
    g.validate()
    good.kernel = Wrapper(None)  # type: ignore[attr-defined]
    with pytest.raises(OperandError, match=re.escape("kernel#0 'kernel': expected a cuda.core Kernel")):
        g.validate()


def test_late_operands_still_get_the_whole_tree_checks():
    g = cg.Graph("g")
    a = g.alloc(64)
    k = g.kernel(K, 1, 32, (a, np.int32(1)), after=a)
    g.free(a, after=k)
    assert not plain_kernel_passes(k, set())
    g.validate()
    g2 = cg.Graph("g2")
    a2 = g2.alloc(64)
    g2.kernel(K, 1, 32, (a2, np.int32(1)))  # not ordered after the allocation
    g2.free(a2)
    with pytest.raises(DefinitionError, match="is not ordered after it"):
        g2.validate()


# --------------------------------------------------------------------------- structure


def _chain(n: int, fan: int = 0) -> tuple[cg.Graph, list[Any]]:
    g = cg.Graph("s")
    nodes = [g.kernel(K, 1, 32, (0x9000,))]
    for _ in range(n - 1):
        nodes.append(g.kernel(K, 1, 32, (0x9000,), after=nodes[-1]))
    for _ in range(fan):
        nodes.append(g.kernel(K, 1, 32, (0x9000,), after=nodes[0]))
    return g, nodes


@pytest.mark.parametrize("count", [2, 3])
def test_a_duplicate_dependency_is_named(count):
    g, nodes = _chain(4)
    nodes[3]._preds[:] = [nodes[2]] * count
    with pytest.raises(DuplicateEdgeError, match=re.escape("kernel#3 'kernel' has a duplicate dependency")):
        g.validate()


def test_foreign_nodes_are_named():
    g, nodes = _chain(3)
    _other, theirs = _chain(1)
    nodes[2]._preds.append(theirs[0])
    with pytest.raises(ForeignNodeError, match=re.escape("kernel#2 'kernel' depends on kernel#0 'kernel' of Graph")):
        g.validate()
    g, nodes = _chain(3)
    nodes[1].index = 7
    with pytest.raises(ForeignNodeError, match=re.escape("kernel#7 'kernel' is not a node of this graph")):
        g.validate()


# --------------------------------------------------------------------------- after= lists


def test_after_lists_and_tuples_are_checked_as_before():
    g = cg.Graph("g")
    a, b, c = (g.kernel(K, 1, 32, (0x9000,)) for _ in range(3))
    for after in ([a, b], (a, b, c), [c]):
        node = g.kernel(K, 1, 32, (0x9000,), after=after)
        assert node.predecessors == tuple(after)
        assert all(node in p.successors for p in after)
        assert node.predecessors is not after and node._preds is not after
    with pytest.raises(DuplicateEdgeError, match=re.escape("kernel#6 'kernel': after= names kernel#0 'kernel' twice")):
        g.kernel(K, 1, 32, (0x9000,), after=[a, a])
    with pytest.raises(DuplicateEdgeError, match="names kernel#1 'kernel' twice"):
        g.kernel(K, 1, 32, (0x9000,), after=(a, b, c, b))
    h = cg.Graph("h")
    x = h.empty()
    with pytest.raises(ForeignNodeError, match=re.escape("after= names empty#0 'empty' of Graph 'h', not of 'g'")):
        g.kernel(K, 1, 32, (0x9000,), after=[a, x])
    with pytest.raises(OperandError, match=re.escape("after= must hold nodes, got int")):
        g.kernel(K, 1, 32, (0x9000,), after=[a, 3])
    assert len(g) == 6 and g.num_edges == 6 and [len(n.successors) for n in (a, b, c)] == [2, 2, 2]
    g.validate()
