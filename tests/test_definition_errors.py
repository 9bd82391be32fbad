"""Every validation error of the definition layer: type, message, and a graph left unchanged (GPU-free)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.errors import (
    CudaGraphError,
    CycleError,
    DefinitionError,
    DuplicateEdgeError,
    ForeignNodeError,
    KernelArgumentError,
    OperandError,
)

# --------------------------------------------------------------------------- fakes


class CUkernel:
    pass


class Kernel:
    def __init__(self) -> None:
        self.handle = CUkernel()


class CUevent:
    pass


class Event:
    def __init__(self) -> None:
        self.handle = CUevent()


class DevArray:
    def __init__(self, addr: int, shape: tuple[int, ...] = (16,), typestr: str = "<f4") -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (addr, False), "version": 3}


class Buffer:
    def __init__(self, handle: int, size: int) -> None:
        self.handle = handle
        self.size = size
        self.memory_resource = object()


class DLPackOnly:
    def __dlpack__(self, stream=None):  # pragma: no cover
        raise AssertionError("not called")

    def __dlpack_device__(self):  # pragma: no cover
        return (2, 0)


# --------------------------------------------------------------------------- helpers


def snapshot(g: cg.Graph):
    """Everything observable about a graph's structure."""
    return (
        len(g),
        tuple((n.kind, n.name, n.index) for n in g.nodes),
        tuple((s.index, d.index) for s, d in g.edges),
        tuple((n.index, tuple(s.index for s in n.successors)) for n in g.nodes),
        g.num_edges,
        tuple(sorted(g.params)),
    )


def base_graph(name: str = "g") -> tuple[cg.Graph, list[cg.Node]]:
    """A small graph with two nodes and one edge, so that new nodes get index 2."""
    g = cg.Graph(name)
    a = g.empty(name="a")
    b = g.empty(after=a, name="b")
    return g, [a, b]


def expect_error(g: cg.Graph, exc: type, fragments: list[str], fn, *args, **kwargs) -> BaseException:
    """Call ``fn``; it must raise ``exc`` whose message holds every fragment; the graph must not change."""
    before = snapshot(g)
    with pytest.raises(exc) as info:
        fn(*args, **kwargs)
    assert type(info.value) is exc, f"expected exactly {exc.__name__}, got {type(info.value).__name__}"
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    assert snapshot(g) == before
    g.validate()  # the graph is still valid
    return info.value


def expect_error_at_build_or_validate(g: cg.Graph, exc: type, fragments: list[str], fn, *args, **kwargs):
    """Kernel arguments may be checked by the builder or, at the latest, by ``validate()``.

    If the builder raises, the graph must be unchanged; if it accepts, ``validate()`` must raise.
    """
    before = snapshot(g)
    try:
        fn(*args, **kwargs)
    except CudaGraphError as e:
        assert type(e) is exc
        for frag in fragments:
            assert frag in str(e), f"{frag!r} not in {str(e)!r}"
        assert snapshot(g) == before
        return e
    with pytest.raises(exc) as info:
        g.validate()
    assert type(info.value) is exc
    for frag in fragments:
        assert frag in str(info.value), f"{frag!r} not in {str(info.value)!r}"
    return info.value


# --------------------------------------------------------------------------- hierarchy


def test_error_hierarchy():
    assert issubclass(DefinitionError, CudaGraphError) and issubclass(DefinitionError, ValueError)
    for cls in (CycleError, ForeignNodeError, DuplicateEdgeError):
        assert issubclass(cls, DefinitionError)
    assert issubclass(OperandError, CudaGraphError) and issubclass(OperandError, TypeError)
    assert issubclass(KernelArgumentError, OperandError)
    assert not issubclass(OperandError, ValueError)
    assert not issubclass(DefinitionError, TypeError)
    e = CycleError("m", [1, 2, 1])
    assert e.cycle == [1, 2, 1] and str(e) == "m"


def test_graph_name_must_be_str():
    with pytest.raises(OperandError, match="Graph name must be a str, got int"):
        cg.Graph(3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- kernel: dimensions


@pytest.mark.parametrize(
    ("kw", "exc", "fragment"),
    [
        ({"grid": 0}, DefinitionError, "grid[0] must be positive, got 0"),
        ({"grid": -3}, DefinitionError, "grid[0] must be positive, got -3"),
        ({"grid": (4, 0)}, DefinitionError, "grid[1] must be positive, got 0"),
        ({"grid": (4, 1, -1)}, DefinitionError, "grid[2] must be positive, got -1"),
        ({"grid": (1, 1, 1, 1)}, DefinitionError, "grid must have 1 to 3 dimensions, got 4"),
        ({"grid": ()}, DefinitionError, "grid must have 1 to 3 dimensions, got 0"),
        ({"grid": 2**31}, DefinitionError, "grid[0] = 2147483648 exceeds the CUDA limit 2147483647"),
        ({"grid": (1, 65536)}, DefinitionError, "grid[1] = 65536 exceeds the CUDA limit 65535"),
        ({"grid": (1, 1, 65536)}, DefinitionError, "grid[2] = 65536 exceeds the CUDA limit 65535"),
        ({"grid": 1.5}, OperandError, "grid must be an int or a tuple of ints, got float"),
        ({"grid": "8"}, OperandError, "grid must be an int or a tuple of ints, got str"),
        ({"grid": (2, 1.0)}, OperandError, "grid must be integers, got (2, 1.0)"),
        ({"block": 0}, DefinitionError, "block[0] must be positive, got 0"),
        ({"block": -32}, DefinitionError, "block[0] must be positive, got -32"),
        ({"block": 1025}, DefinitionError, "block[0] = 1025 exceeds the CUDA limit 1024"),
        ({"block": (1, 1025)}, DefinitionError, "block[1] = 1025 exceeds the CUDA limit 1024"),
        ({"block": (1, 1, 65)}, DefinitionError, "block[2] = 65 exceeds the CUDA limit 64"),
        ({"block": (1, 2, 3, 4)}, DefinitionError, "block must have 1 to 3 dimensions, got 4"),
        ({"block": (64, 32)}, DefinitionError, "block (64, 32, 1) has 2048 threads; the CUDA limit is 1024"),
        ({"block": (16, 16, 8)}, DefinitionError, "block (16, 16, 8) has 2048 threads; the CUDA limit is 1024"),
        ({"block": (1024, 2)}, DefinitionError, "block (1024, 2, 1) has 2048 threads; the CUDA limit is 1024"),
        ({"block": None}, OperandError, "block must be an int or a tuple of ints, got NoneType"),
    ],
)
def test_kernel_bad_dimensions(kw, exc, fragment):
    g, _ = base_graph()
    call = {"grid": 1, "block": 1, **kw}
    expect_error(g, exc, ["kernel#2 'k': ", fragment], g.kernel, Kernel(), call["grid"], call["block"], name="k")


def test_kernel_error_label_defaults_to_kernel():
    g = cg.Graph("g")
    expect_error(g, DefinitionError, ["kernel#0 'kernel': grid[0] must be positive"], g.kernel, Kernel(), 0, 1)


@pytest.mark.parametrize(
    ("shared_mem", "fragment"),
    [
        (-1, "shared_mem must be a non-negative int, got -1"),
        (np.int32(-8), "shared_mem must be a non-negative int, got np.int32(-8)"),
        (1.5, "shared_mem must be a non-negative int, got 1.5"),
        ("64", "shared_mem must be a non-negative int, got '64'"),
        (True, "shared_mem must be a non-negative int, got True"),
        (np.array([1, 2]), "shared_mem must be a non-negative int, got array([1, 2])"),  # (no truth value)
    ],
)
def test_kernel_bad_shared_mem(shared_mem, fragment):
    g, _ = base_graph()
    expect_error(
        g, DefinitionError, ["kernel#2 'k': ", fragment], g.kernel, Kernel(), 1, 1, shared_mem=shared_mem, name="k"
    )


@pytest.mark.parametrize("shared_mem", [0.0, False, ""])
def test_kernel_falsy_non_int_shared_mem(shared_mem):
    g, _ = base_graph()
    expect_error(
        g, DefinitionError, ["kernel#2 'k': shared_mem"], g.kernel, Kernel(), 1, 1, shared_mem=shared_mem, name="k"
    )


def test_kernel_dimensions_and_shared_mem_are_normalized():
    g = cg.Graph("g")
    a = g.kernel(Kernel(), 4, 256)
    b = g.kernel(Kernel(), (4,), [256, 1], shared_mem=np.int32(64), after=a)
    c = g.kernel(Kernel(), 3_000_000, (8, 4, 2), shared_mem=65536, after=b)
    d = g.kernel(Kernel(), 3_000_000, 1024, after=c)
    assert (a.grid, a.block, a.shared_mem) == ((4, 1, 1), (256, 1, 1), 0)
    assert (b.grid, b.block, b.shared_mem) == ((4, 1, 1), (256, 1, 1), 64)
    assert type(b.shared_mem) is int
    assert (c.grid, c.block, c.shared_mem) == ((3_000_000, 1, 1), (8, 4, 2), 65536)
    # 1-D sizes are shared tuples: lowering compares dimensions by identity.
    assert a.block is b.block and c.grid is d.grid
    assert a.attrs is None and b.attrs is None and c.attrs is not None and d.attrs is None
    assert [n.predecessors for n in (a, b, c, d)] == [(), (a,), (b,), (c,)]


@pytest.mark.parametrize("kernel", [42, "saxpy", None, object(), CUevent()])
def test_kernel_not_a_kernel(kernel):
    g, _ = base_graph()
    tname = type(kernel).__name__
    expect_error(
        g,
        OperandError,
        ["kernel#2 'k': expected a cuda.core Kernel or a CUkernel/CUfunction handle, got " + tname],
        g.kernel,
        kernel,
        1,
        1,
        name="k",
    )


def test_kernel_wrapper_with_bad_handle_is_rejected_by_validate():
    class KernelWrapper:
        def __init__(self, handle) -> None:
            self.handle = handle

    g = cg.Graph("g")
    g.kernel(KernelWrapper(CUkernel()), 1, 1, name="good")
    g.validate()
    h = cg.Graph("h")
    try:
        h.kernel(KernelWrapper(None), 1, 1, name="bad")
    except OperandError as e:
        assert "kernel#0 'bad'" in str(e)
        assert len(h) == 0
        return
    with pytest.raises(OperandError, match=re.escape("kernel#0 'bad'")):
        h.validate()


def test_kernel_type_cache_does_not_skip_the_handle_check():
    class KernelWrapper2:
        def __init__(self, handle) -> None:
            self.handle = handle

    g = cg.Graph("g")
    g.kernel(KernelWrapper2(CUkernel()), 1, 1)
    expect_error(
        g, OperandError, ["kernel#1 'bad'", "got KernelWrapper2"], g.kernel, KernelWrapper2(None), 1, 1, name="bad"
    )


def test_kernel_args_not_a_sequence():
    g, _ = base_graph()
    expect_error(
        g,
        OperandError,
        ["kernel#2 'k': args must be a tuple of kernel arguments, got str"],
        g.kernel,
        Kernel(),
        1,
        1,
        "abc",
        name="k",
    )


# --------------------------------------------------------------------------- kernel: arguments


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        ((np.int32(1), 1.5), ["argument 1: Python float is ambiguous", "np.float32(1.5) or np.float64(1.5)"]),
        ((True,), ["argument 0: Python bool is ambiguous; pass np.bool_ or np.int32"]),
        ((False,), ["argument 0: Python bool is ambiguous"]),
        ((np.int32(0), np.int32(1), None), ["argument 2: None is not a kernel argument (use 0 for a null pointer)"]),
        (("hello",), ["argument 0: str cannot be a kernel argument"]),
        ((object(),), ["argument 0: object cannot be a kernel argument"]),
        ((-1,), ["argument 0: Python int -1 is taken as a 64-bit pointer and is out of range", "np.int64(-1)"]),
        ((2**64,), [f"argument 0: Python int {2**64} is taken as a 64-bit pointer and is out of range"]),
        ((np.str_("x"),), ["argument 0: numpy str_ cannot be a kernel argument"]),
        ((np.datetime64("2020-01-01"),), ["argument 0: numpy datetime64 cannot be a kernel argument"]),
        ((1 + 2j,), ["argument 0: complex cannot be a kernel argument"]),
    ],
)
def test_kernel_bad_args(args, fragments):
    g, _ = base_graph()
    expect_error_at_build_or_validate(
        g, OperandError, ["kernel#2 'k': ", *fragments], g.kernel, Kernel(), 1, 1, args, name="k"
    )


def test_kernel_python_int_range_edges_are_accepted():
    g = cg.Graph("g")
    g.kernel(Kernel(), 1, 1, (0, 2**64 - 1))
    g.validate()


def test_kernel_scalar_param_and_pointer_param_args_validate():
    g = cg.Graph("g")
    g.kernel(Kernel(), 1, 1, (g.param("x"), g.param("n", np.int32)))
    g.validate()


def test_kernel_dlpack_arg_validates():
    g = cg.Graph("g")
    g.kernel(Kernel(), 1, 1, (DLPackOnly(),))
    g.validate()


# --------------------------------------------------------------------------- memcpy


@pytest.mark.parametrize(
    ("dst", "src", "nbytes", "exc", "fragment"),
    [
        (0, 0x1000, 8, OperandError, "dst: null pointer (address 0)"),
        (0x1000, 0, 8, OperandError, "src: null pointer (address 0)"),
        (DevArray(0), 0x1000, 8, OperandError, "dst: null pointer in __cuda_array_interface__"),
        (0x1000, DevArray(0), 8, OperandError, "src: null pointer in __cuda_array_interface__"),
        (Buffer(0, 64), 0x1000, 8, OperandError, "dst: the Buffer is closed or empty (address 0)"),
        (-16, 0x1000, 8, OperandError, "dst: address -16 is outside 0..2**64-1"),
        (2**64, 0x1000, 8, OperandError, f"dst: address {2**64} is outside 0..2**64-1"),
        ("abc", 0x1000, 8, OperandError, "dst: expected device memory or an address, got str 'abc'"),
        (0x1000, 1.5, 8, OperandError, "src: expected device memory or an address, got float 1.5"),
        (0x1000, True, 8, OperandError, "src: expected device memory or an address, got bool True"),
        (0x1000, object(), 8, OperandError, "src: expected an int address, a cuda.core Buffer"),
        (0x1000, 0x2000, 0, DefinitionError, "nbytes must be positive, got 0"),
        (0x1000, 0x2000, -4, DefinitionError, "nbytes must be positive, got -4"),
        (0x1000, 0x2000, 2**63, DefinitionError, f"nbytes = {2**63} overflows 64 bits"),
        (0x1000, 0x2000, 8.0, OperandError, "nbytes must be an integer, got float"),
        (0x1000, 0x2000, None, DefinitionError, "nbytes is required when neither operand has a known size"),
        (0x1000, DevArray(0x2000), 65, DefinitionError, "nbytes = 65 exceeds the 64 bytes of src"),
        (Buffer(0x1000, 32), 0x2000, 33, DefinitionError, "nbytes = 33 exceeds the 32 bytes of dst"),
        (Buffer(0x1000, 32), DevArray(0x2000), None, DefinitionError, "nbytes = 64 exceeds the 32 bytes of dst"),
        (np.zeros(2, np.float32), 0x2000, 9, DefinitionError, "nbytes = 9 exceeds the 8 bytes of dst"),
    ],
)
def test_memcpy_errors(dst, src, nbytes, exc, fragment):
    g, _ = base_graph()
    expect_error(g, exc, ["memcpy#2 'cp': " + fragment], g.memcpy, dst, src, nbytes, name="cp")


def test_memcpy_scalar_param_is_not_a_pointer():
    g, _ = base_graph()
    n = g.param("n", np.float32)
    expect_error(
        g,
        OperandError,
        ["memcpy#2 'memcpy': src: param 'n' is a float32 scalar, expected a pointer param"],
        g.memcpy,
        0x1000,
        n,
        4,
    )


@pytest.mark.parametrize("kind", ["memcpy", "memset"])
def test_dlpack_operand_validates(kind):
    g = cg.Graph("g")
    if kind == "memcpy":
        g.memcpy(DLPackOnly(), 0x1000, 16)
    else:
        g.memset(DLPackOnly(), 0, 16)
    g.validate()


# --------------------------------------------------------------------------- memset


@pytest.mark.parametrize(
    ("dst", "value", "kw", "exc", "fragment"),
    [
        (0x1000, 256, {"count": 4}, OperandError, "value 256 does not fit in 1 byte(s)"),
        (0x1000, -129, {"count": 4}, OperandError, "value -129 does not fit in 1 byte(s)"),
        (0x1000, 65536, {"count": 4, "element_size": 2}, OperandError, "value 65536 does not fit in 2 byte(s)"),
        (0x1000, -32769, {"count": 4, "element_size": 2}, OperandError, "value -32769 does not fit in 2 byte(s)"),
        (0x1000, 2**32, {"count": 4, "element_size": 4}, OperandError, f"value {2**32} does not fit in 4 byte(s)"),
        (0x1000, -(2**31) - 1, {"count": 4, "element_size": 4}, OperandError, "value -2147483649 does not fit"),
        (0x1000, 1, {"count": 4, "element_size": 3}, DefinitionError, "element_size must be 1, 2 or 4, got 3"),
        (0x1000, 1, {"count": 4, "element_size": 8}, DefinitionError, "element_size must be 1, 2 or 4, got 8"),
        (0x1000, np.float64(1.0), {"count": 4}, DefinitionError, "element_size must be 1, 2 or 4, got 8"),
        (
            0x1000,
            np.float32(1.0),
            {"count": 4, "element_size": 2},
            OperandError,
            "value is a 4-byte float32, but element_size is 2",
        ),
        (
            0x1000,
            np.int16(1),
            {"count": 4, "element_size": 3},
            OperandError,
            "value is a 2-byte int16, but element_size is 3",
        ),
        (0x1000, 1.0, {"count": 4}, OperandError, "value must be an int or a numpy scalar, got float"),
        (0x1000, True, {"count": 4}, OperandError, "value must be an int or a numpy scalar, got bool"),
        (0x1000, None, {"count": 4}, OperandError, "value must be an int or a numpy scalar, got NoneType"),
        (0, 1, {"count": 4}, OperandError, "dst: null pointer (address 0)"),
        ("x", 1, {"count": 4}, OperandError, "dst: expected device memory or an address, got str 'x'"),
        (0x1000, 1, {"count": 4, "width": 4}, DefinitionError, "give count or width, not both"),
        (0x1000, 1, {}, DefinitionError, "count is required when dst has no known size"),
        (Buffer(0x1000, 64), 1, {"height": 2}, DefinitionError, "width is required for a 2-D fill"),
        (0x1000, 1, {"count": 0}, DefinitionError, "count must be positive, got 0"),
        (0x1000, 1, {"count": -5}, DefinitionError, "count must be positive, got -5"),
        (Buffer(0x1000, 3), np.float32(0), {}, DefinitionError, "count must be positive, got 0"),
        (0x1000, 1, {"width": 4, "height": 0}, DefinitionError, "height must be positive, got 0"),
        (0x1000, 1, {"count": 4.0}, OperandError, "count must be an integer, got float"),
        (
            0x1000,
            1,
            {"width": 10, "height": 2, "pitch": 39, "element_size": 4},
            DefinitionError,
            "pitch 39 is smaller than a row (10 x 4 = 40 bytes)",
        ),
        (
            0x1000,
            1,
            {"width": 10, "height": 1, "pitch": 9},
            DefinitionError,
            "pitch 9 is smaller than a row (10 x 1 = 10 bytes)",
        ),
        (
            0x1000,
            1,
            {"width": 10, "height": 2, "pitch": 42, "element_size": 4},
            DefinitionError,
            "pitch 42 is not a multiple of element_size 4",
        ),
        (0x1000, 1, {"width": 10, "height": 2, "pitch": 0}, DefinitionError, "pitch must be positive, got 0"),
        (Buffer(0x1000, 64), 1, {"count": 65}, DefinitionError, "the fill covers 65 bytes but dst has 64"),
        (
            Buffer(0x1000, 64),
            np.float32(1.0),
            {"count": 17},
            DefinitionError,
            "the fill covers 68 bytes but dst has 64",
        ),
        (
            Buffer(0x1000, 256),
            1,
            {"width": 10, "height": 5, "pitch": 64, "element_size": 4},
            DefinitionError,
            "the fill covers 296 bytes but dst has 256",
        ),
        (
            DevArray(0x1000, shape=(8,), typestr="<u2"),
            0,
            {"count": 9, "element_size": 2},
            DefinitionError,
            "the fill covers 18 bytes but dst has 16",
        ),
    ],
)
def test_memset_errors(dst, value, kw, exc, fragment):
    g, _ = base_graph()
    expect_error(g, exc, ["memset#2 'fill': " + fragment], g.memset, dst, value, name="fill", **kw)


# --------------------------------------------------------------------------- host, events, child


@pytest.mark.parametrize("fn", [42, "print", None, (print,)])
def test_host_not_callable(fn):
    g, _ = base_graph()
    tname = type(fn).__name__
    expect_error(g, OperandError, [f"host#2 'h': fn must be callable, got {tname}"], g.host, fn, name="h")


@pytest.mark.parametrize("builder", ["record", "wait"])
@pytest.mark.parametrize("event", [7, "ev", None, object(), CUkernel()])
def test_event_nodes_need_an_event(builder, event):
    g, _ = base_graph()
    tname = type(event).__name__
    expect_error(
        g,
        OperandError,
        [f"{builder}#2 'ev': event: expected a cuda.core Event or a CUevent, got {tname}"],
        getattr(g, builder),
        event,
        name="ev",
    )


@pytest.mark.parametrize("builder", ["record", "wait"])
def test_event_named_class_without_handle_is_rejected(builder):
    class Event:  # shadows the module-level fake on purpose: no ``handle``
        pass

    g, _ = base_graph()
    expect_error(
        g, OperandError, [f"{builder}#2 '{builder}': event: expected", "got Event"], getattr(g, builder), Event()
    )


def test_child_of_itself():
    g, _ = base_graph("self")
    expect_error(
        g,
        DefinitionError,
        ["child#2 'c': Graph 'self' contains Graph 'self'; a graph cannot contain itself"],
        g.child,
        g,
        name="c",
    )


def test_child_that_contains_the_parent():
    parent = cg.Graph("parent")
    parent.empty()
    middle = cg.Graph("middle")
    inner = cg.Graph("inner")
    parent.child(middle)
    middle.child(inner)
    # inner would contain parent, which (through middle) contains inner
    expect_error(
        inner,
        DefinitionError,
        ["child#0 'loop': Graph 'parent' contains Graph 'inner'; a graph cannot contain itself"],
        inner.child,
        parent,
        name="loop",
    )
    expect_error(
        middle,
        DefinitionError,
        ["child#1 'child': Graph 'parent' contains Graph 'middle'"],
        middle.child,
        parent,
    )
    assert len(parent) == 2 and len(middle) == 1 and len(inner) == 0
    parent.validate()


def test_child_not_a_graph():
    g, _ = base_graph()
    expect_error(g, OperandError, ["child#2 'c': expected a cudagraph.Graph, got str"], g.child, "g", name="c")


# --------------------------------------------------------------------------- after=


@pytest.mark.parametrize("builder", ["empty", "kernel", "memcpy", "memset", "host", "record", "wait", "child", "join"])
@pytest.mark.parametrize("form", ["node", "list", "tuple"])
def test_after_foreign_node(builder, form):
    g, (a, _b) = base_graph("mine")
    other = cg.Graph("other")
    foreign = other.empty(name="x")
    after = {"node": foreign, "list": [a, foreign], "tuple": (foreign,)}[form]
    call, label = _builder_call(g, builder, after)
    expect_error(
        g,
        ForeignNodeError,
        [f"{label}: after= names empty#0 'x' of Graph 'other', not of 'mine'"],
        call,
    )
    assert len(other) == 1 and foreign.successors == ()


@pytest.mark.parametrize("builder", ["empty", "kernel", "memcpy", "memset", "host", "record", "wait", "child", "join"])
def test_after_duplicate(builder):
    g, (a, b) = base_graph()
    call, label = _builder_call(g, builder, (b, a, b))
    expect_error(g, DuplicateEdgeError, [f"{label}: after= names empty#1 'b' twice"], call)


def _builder_call(g: cg.Graph, builder: str, after):
    body = cg.Graph("body")
    calls = {
        "empty": (lambda: g.empty(after=after, name="n"), "empty#2 'n'"),
        "kernel": (lambda: g.kernel(Kernel(), 1, 1, after=after, name="n"), "kernel#2 'n'"),
        "memcpy": (lambda: g.memcpy(0x1000, 0x2000, 8, after=after, name="n"), "memcpy#2 'n'"),
        "memset": (lambda: g.memset(0x1000, 0, 8, after=after, name="n"), "memset#2 'n'"),
        "host": (lambda: g.host(print, after=after, name="n"), "host#2 'n'"),
        "record": (lambda: g.record(CUevent(), after=after, name="n"), "record#2 'n'"),
        "wait": (lambda: g.wait(Event(), after=after, name="n"), "wait#2 'n'"),
        "child": (lambda: g.child(body, after=after, name="n"), "child#2 'n'"),
        "join": (
            lambda: g.join(*(after if isinstance(after, (list, tuple)) else [after]), name="n"),
            "empty#2 'n'",
        ),
    }
    return calls[builder]


@pytest.mark.parametrize(
    ("after", "fragment"),
    [
        (5, "after= must be a node or a sequence of nodes, got int"),
        ("a", "after= must be a node or a sequence of nodes, got str"),
        ({1}, "after= must be a node or a sequence of nodes, got set"),
        ([5], "after= must hold nodes, got int"),
        ((None,), "after= must hold nodes, got NoneType"),
    ],
)
def test_after_not_nodes(after, fragment):
    g, _ = base_graph()
    expect_error(g, OperandError, [f"empty#2 'n': {fragment}"], g.empty, after=after, name="n")


def test_path_after_errors():
    g, (a, _b) = base_graph()
    other = cg.Graph("other")
    x = other.empty(name="x")
    expect_error(g, ForeignNodeError, ["path: after= names empty#0 'x' of Graph 'other'"], g.path, after=x)
    expect_error(g, DuplicateEdgeError, ["path: after= names empty#0 'a' twice"], g.path, after=[a, a])
    p = g.path(after=a)
    expect_error(g, ForeignNodeError, ["after= names empty#0 'x' of Graph 'other'"], p.empty, after=x)
    n = p.empty(name="n")  # the failed op did not move the path on
    assert n.predecessors == (a,)


# --------------------------------------------------------------------------- edges


def chain(n: int, name: str = "g") -> tuple[cg.Graph, list[cg.Node]]:
    g = cg.Graph(name)
    nodes: list[cg.Node] = []
    for i in range(n):
        nodes.append(g.empty(after=nodes[-1] if nodes else None, name=f"n{i}"))
    return g, nodes


def test_add_edge_duplicate():
    g, (a, b) = base_graph()
    expect_error(g, DuplicateEdgeError, ["add_edge: empty#0 'a' -> empty#1 'b' exists already"], g.add_edge, a, b)
    c = g.empty(name="c")
    g.add_edge(c, b)  # a backward edge, added once...
    expect_error(g, DuplicateEdgeError, ["add_edge: empty#2 'c' -> empty#1 'b' exists already"], g.add_edge, c, b)


def test_add_edge_self_loop():
    g, (a, _b) = base_graph()
    e = expect_error(g, CycleError, ["add_edge: empty#0 'a' cannot depend on itself"], g.add_edge, a, a)
    assert e.cycle == [a, a]
    assert all(x is a for x in e.cycle)


def test_add_edge_closing_a_cycle_of_two():
    g, (a, b) = base_graph()
    e = expect_error(
        g,
        CycleError,
        ["add_edge: empty#1 'b' -> empty#0 'a' would close the cycle empty#0 'a' -> empty#1 'b' -> empty#0 'a'"],
        g.add_edge,
        b,
        a,
    )
    assert e.cycle == [a, b, a]


def test_add_edge_closing_a_long_cycle():
    g, nodes = chain(5)
    spelled = " -> ".join(f"empty#{i} 'n{i}'" for i in [0, 1, 2, 3, 4, 0])
    e = expect_error(
        g,
        CycleError,
        [f"add_edge: empty#4 'n4' -> empty#0 'n0' would close the cycle {spelled}"],
        g.add_edge,
        nodes[4],
        nodes[0],
    )
    assert [n.index for n in e.cycle] == [0, 1, 2, 3, 4, 0]
    assert e.cycle[0] is nodes[0] and e.cycle[-1] is nodes[0]
    e = expect_error(g, CycleError, ["would close the cycle"], g.add_edge, nodes[3], nodes[1])
    assert e.cycle == [nodes[1], nodes[2], nodes[3], nodes[1]]


def test_add_edge_cycle_through_a_branch():
    g = cg.Graph("g")
    a = g.empty(name="a")
    b = g.empty(after=a, name="b")
    c = g.empty(after=a, name="c")
    d = g.empty(after=c, name="d")
    e = expect_error(g, CycleError, ["empty#3 'd' -> empty#0 'a'"], g.add_edge, d, a)
    assert e.cycle == [a, c, d, a]
    assert b not in e.cycle


def test_add_edge_cycle_through_backward_edges():
    """Edges added against creation order are followed too."""
    g = cg.Graph("g")
    a, b, c, d = g.empty(name="a"), g.empty(name="b"), g.empty(name="c"), g.empty(name="d")
    g.add_edge(a, d)
    g.add_edge(d, c)  # backward (index 3 -> 2)
    assert [n.name for n in g.topological_order()] == ["a", "b", "d", "c"]
    e = expect_error(
        g,
        CycleError,
        [
            "add_edge: empty#2 'c' -> empty#0 'a' would close the cycle "
            "empty#0 'a' -> empty#3 'd' -> empty#2 'c' -> empty#0 'a'"
        ],
        g.add_edge,
        c,
        a,
    )
    assert e.cycle == [a, d, c, a]
    assert b.successors == () and b.predecessors == ()


def test_add_edge_forward_index_edge_closing_a_cycle():
    g = cg.Graph("g")
    a, _b, c = g.empty(name="a"), g.empty(name="b"), g.empty(name="c")
    g.add_edge(c, a)  # backward, fine
    e = expect_error(g, CycleError, ["add_edge: empty#0 'a' -> empty#2 'c' would close the cycle"], g.add_edge, a, c)
    assert e.cycle == [c, a, c]


def test_add_edge_foreign_and_non_nodes():
    g, (a, b) = base_graph("mine")
    other = cg.Graph("other")
    x = other.empty(name="x")
    expect_error(
        g, ForeignNodeError, ["add_edge: src: empty#0 'x' belongs to Graph 'other', not 'mine'"], g.add_edge, x, a
    )
    expect_error(
        g, ForeignNodeError, ["add_edge: dst: empty#0 'x' belongs to Graph 'other', not 'mine'"], g.add_edge, a, x
    )
    expect_error(g, OperandError, ["add_edge: src: expected a node, got int"], g.add_edge, 0, b)
    expect_error(g, OperandError, ["add_edge: dst: expected a node, got str"], g.add_edge, a, "b")
    expect_error(g, ForeignNodeError, ["remove_edge: src: empty#0 'x' belongs to Graph 'other'"], g.remove_edge, x, a)
    assert x.successors == () and x.predecessors == ()


def test_precede_succeed_errors():
    g, (a, b) = base_graph()
    expect_error(g, CycleError, ["add_edge: empty#1 'b' -> empty#0 'a' would close the cycle"], b.precede, a)
    expect_error(g, DuplicateEdgeError, ["exists already"], b.succeed, a)


def test_remove_edge_missing():
    g, (a, b) = base_graph()
    c = g.empty(name="c")
    expect_error(g, DefinitionError, ["remove_edge: there is no edge empty#1 'b' -> empty#0 'a'"], g.remove_edge, b, a)
    expect_error(g, DefinitionError, ["remove_edge: there is no edge empty#0 'a' -> empty#2 'c'"], g.remove_edge, a, c)
    expect_error(g, DefinitionError, ["remove_edge: there is no edge empty#2 'c' -> empty#2 'c'"], g.remove_edge, c, c)
    g.remove_edge(a, b)
    assert g.num_edges == 0 and a.successors == () and b.predecessors == ()
    expect_error(g, DefinitionError, ["remove_edge: there is no edge empty#0 'a' -> empty#1 'b'"], g.remove_edge, a, b)


# --------------------------------------------------------------------------- params


@pytest.mark.parametrize("name", ["1x", "a b", "", "x-y", "é-1", "x.y"])
def test_param_name_not_identifier(name):
    g, _ = base_graph()
    expect_error(g, DefinitionError, [f"param name must be a Python identifier, got {name!r}"], g.param, name)


def test_param_name_not_a_str():
    g, _ = base_graph()
    expect_error(g, DefinitionError, ["param name must be a Python identifier, got 5"], g.param, 5)


@pytest.mark.parametrize(
    ("first", "second", "fragment"),
    [
        (None, np.float32, "param 'x' already exists with dtype None"),
        (np.int32, None, "param 'x' already exists with dtype int32"),
        (np.int32, np.int64, "param 'x' already exists with dtype int32"),
        (np.float32, np.float64, "param 'x' already exists with dtype float32"),
        (np.uint8, np.int8, "param 'x' already exists with dtype uint8"),
    ],
)
def test_param_redeclared_with_other_dtype(first, second, fragment):
    g, _ = base_graph()
    p = g.param("x", first)
    expect_error(g, DefinitionError, [fragment], g.param, "x", second)
    assert g.params == {"x": p}
    assert p.dtype == (None if first is None else np.dtype(first))


def test_param_float64_redeclared_as_pointer():
    g, _ = base_graph()
    g.param("x", np.float64)
    expect_error(g, DefinitionError, ["param 'x' already exists with dtype float64"], g.param, "x")


@pytest.mark.parametrize(
    ("dtype", "value", "fragment"),
    [
        (None, "abc", "param 'x': expected device memory or an address, got str 'abc'"),
        (None, 1.5, "param 'x': expected device memory or an address, got float 1.5"),
        (None, True, "param 'x': expected device memory or an address, got bool True"),
        (None, -1, "param 'x': address -1 is outside 0..2**64-1"),
        (None, object(), "param 'x': expected an int address"),
        (np.int32, True, "param 'x': expected int32, got bool"),
        (np.float32, np.bool_(False), "param 'x': expected float32, got bool"),
        (np.float32, "abc", "param 'x': expected a float32 scalar, got str"),
        (np.int32, object(), "param 'x': expected a int32 scalar, got object"),
        (np.int32, None, "param 'x': expected a int32 scalar, got NoneType"),
        (np.float32, np.float64(1.0), "param 'x': expected 4-byte float32, got 8-byte float64"),
        (np.int64, np.int32(1), "param 'x': expected 8-byte int64, got 4-byte int32"),
    ],
)
def test_param_coerce_errors(dtype, value, fragment):
    g = cg.Graph("g")
    p = g.param("x", dtype)
    with pytest.raises(OperandError) as info:
        p.coerce(value)
    assert type(info.value) is OperandError
    assert fragment in str(info.value)


def test_param_coerce_pointer_rejects_another_param():
    g = cg.Graph("g")
    p = g.param("x")
    with pytest.raises(OperandError, match="param 'x': a pointer value cannot be another param"):
        p.coerce(g.param("y"))


def test_param_coerce_pointer_names_what_only_dlpack_describes():
    g = cg.Graph("g")
    p = g.param("x")
    words = r"param 'x': a {} without __cuda_array_interface__ \(host memory, such as a CPU tensor.*bind device memory"
    with pytest.raises(OperandError, match=words.format("DLPackOnly")):
        p.coerce(DLPackOnly())
    torch = pytest.importorskip("torch")
    with pytest.raises(OperandError, match=words.format("Tensor")):
        p.coerce(torch.zeros(4))


@pytest.mark.parametrize(("dtype", "value"), [(np.int32, 2**40), (np.uint8, 256), (np.uint32, -1)])
def test_param_coerce_out_of_range_int(dtype, value):
    g = cg.Graph("g")
    with pytest.raises(OperandError, match="param 'x'"):
        g.param("x", dtype).coerce(value)


# --------------------------------------------------------------------------- unchanged after many failures


def test_graph_unchanged_after_a_barrage_of_failures():
    g, nodes = chain(4)
    g.add_edge(nodes[3], g.empty(name="tail"))
    g.param("x")
    before = snapshot(g)
    other = cg.Graph("other").empty()
    attempts = [
        lambda: g.kernel(Kernel(), 0, 1, after=nodes[0]),
        lambda: g.kernel(42, 1, 1, after=nodes[0]),
        lambda: g.kernel(Kernel(), 1, (64, 64), after=nodes[1]),
        lambda: g.memcpy(0, 0x1000, 4, after=nodes[2]),
        lambda: g.memcpy(0x1000, DevArray(0x2000), 1000, after=nodes[2]),
        lambda: g.memset(0x1000, 300, 4, after=nodes[3]),
        lambda: g.memset(Buffer(0x1000, 8), 1, 9, after=nodes[3]),
        lambda: g.host(3, after=nodes[0]),
        lambda: g.record(3, after=nodes[0]),
        lambda: g.wait(3, after=nodes[0]),
        lambda: g.child(g, after=nodes[0]),
        lambda: g.empty(after=[nodes[0], other]),
        lambda: g.empty(after=[nodes[1], nodes[1]]),
        lambda: g.join(nodes[0], nodes[0]),
        lambda: g.add_edge(nodes[3], nodes[0]),
        lambda: g.add_edge(nodes[0], nodes[1]),
        lambda: g.add_edge(nodes[2], nodes[2]),
        lambda: g.remove_edge(nodes[0], nodes[2]),
        lambda: g.param("x", np.int32),
        lambda: g.param("not valid"),
    ]
    for attempt in attempts:
        with pytest.raises(CudaGraphError):
            attempt()
        assert snapshot(g) == before
    g.validate()
    assert [n.index for n in g.topological_order()] == [0, 1, 2, 3, 4]
