"""The compiled ``Graph.memset`` and ``Graph.memcpy`` (``OpMethod``, ``_define_ops.c``) against their Python twins.

The same random calls (int addresses in and out of range, Buffers of a plain class with good, closed, small,
oddly typed or raising properties, array-interface objects, parameters; values, element sizes and sizes of every
type; predecessors and names as the placer's tests make them) are made on two graphs: one through the compiled
method, one through its Python twin (``.func``). Every node slot, the counters, ``summary()`` and every error
must be the same; the common calls must be taken in C; Python code run by a Buffer mid-call, collections and
threads must leave the graph whole.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import cudagraph as cg
from cudagraph.definition.addresses import BUFFER_TYPES, HANDLE_TYPES, HOST_ARRAYS
from cudagraph.definition.builders import COMPILED_KERNEL, COMPILED_OPS
from cudagraph.definition.compiled_ops import OP_SLOTS
from cudagraph.definition.kinds.copy import MemcpyNode
from cudagraph.definition.kinds.memory_ops import FILL_SCALARS, MemsetNode
from cudagraph.definition.node import Node
from cudagraph.errors import CudaGraphError
from test_define_compiled_cpu import assert_finalizers_keep_it_whole, assert_threads_keep_it_whole, graph_state
from test_define_place_cpu import AFTERS, NAMES, _after

pytestmark = pytest.mark.skipif(not COMPILED_OPS, reason="cudagraph.definition._define not built (or off)")


class Handle:
    """An address that is not an int (as cuda.bindings' ``CUdeviceptr``): ``int()`` reads it."""

    __slots__ = ("v",)

    def __init__(self, v: int) -> None:
        self.v = v

    def __int__(self) -> int:
        return self.v


class Buf:
    """A plain class with a cuda.core ``Buffer``'s attributes (learned into ``BUFFER_TYPES`` once read)."""

    __slots__ = ("handle", "size", "memory_resource", "fail")

    def __init__(self, handle: Any, size: Any) -> None:
        self.handle, self.size, self.memory_resource, self.fail = handle, size, None, False


class FlakyBuf:
    """A Buffer class whose ``handle`` property raises (``ValueError``) while ``fail`` is set."""

    __slots__ = ("_h", "size", "memory_resource", "fail")

    def __init__(self, handle: int, size: int, fail: bool) -> None:
        self._h, self.size, self.memory_resource, self.fail = handle, size, None, fail

    @property
    def handle(self) -> int:
        if self.fail:
            raise ValueError("the buffer was freed")
        return self._h


class Cai:
    """Device memory through ``__cuda_array_interface__`` (left to the Python path)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (nbytes,), "typestr": "|u1", "version": 3}


OPERANDS: dict[str, Any] = {
    "int": 0x40000,
    "int-max": (1 << 64) - 1,
    "null": 0,
    "negative": -8,
    "too-big": 1 << 64,
    "bool": True,
    "buf": Buf(0x80000, 4096),
    "buf-small": Buf(0x90000, 8),
    "buf-empty": Buf(0xA0000, 0),
    "buf-closed": Buf(0, 4096),
    "buf-handle-obj": Buf(Handle(0xB0000), 256),
    "buf-handle-float": Buf(2.5, 256),
    "buf-handle-neg": Buf(-1, 256),
    "buf-size-np": Buf(0xC0000, np.int64(64)),
    "buf-size-neg": Buf(0xC0000, -1),
    "buf-size-big": Buf(0xC0000, 1 << 70),
    "flaky-ok": FlakyBuf(0xD0000, 512, False),
    "flaky-fail": FlakyBuf(0xD0000, 512, True),
    "cai": Cai(0xE0000, 1024),
    "host": np.arange(64, dtype=np.float32),
    "host-2d": np.zeros((4, 8), np.int16),
    "host-fortran": np.asfortranarray(np.zeros((4, 8), np.int16)),
    "host-strided": np.arange(64, dtype=np.float32)[::2],
    "host-reversed": np.arange(64, dtype=np.float32)[::-1],
    "host-empty": np.zeros(0, np.uint8),
    "host-readonly": np.frombuffer(bytes(64), np.uint8),
    "host-sub": np.arange(16, dtype=np.uint8).view(np.matrix),
    "np-int": np.uint64(0xF0000),
    "str": "x",
}
VALUES = (0, 1, 255, 256, -1, -128, -129, 0xFFFF, 0xFFFFFFFF, 1 << 40, True, 1.5)
NUMPY_VALUES = (np.float32(1.0), np.float32(-2.5), np.uint16(7), np.int8(-3), np.bool_(True), np.float16(0.5))
NUMPY_VALUES_REFUSED = (np.int64(5), np.float64(1.0), np.uint32(0xFFFFFFFF), np.complex64(1j), np.datetime64(1, "s"))
ELEMENT_SIZES = (None, 1, 2, 4, 3, np.int32(2), True)
SIZES = (None, 1, 8, 16, 64, 100, 4096, 5000, 0, -3, 1 << 63, (1 << 63) - 1, np.int64(8), 2.0)
HEIGHTS = ("absent", 1, 2, 3, 0, np.int64(2))
PITCHES = (None, 64, 3, 1 << 62)


def _mostly(common: tuple[Any, ...], every: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    """One of ``common`` three times in four (the calls the compiled path takes), else any of ``every``."""
    return st.one_of(st.sampled_from(common), st.sampled_from(common), st.sampled_from(common), st.sampled_from(every))


_OPERAND = _mostly(("int", "buf", "buf-handle-obj", "flaky-ok", "host", "host-2d"), tuple(sorted(OPERANDS)))
_memset = st.fixed_dictionaries(
    {
        "dst": _OPERAND,
        "value": _mostly((0, 1, 255, -1) + NUMPY_VALUES, VALUES + NUMPY_VALUES + NUMPY_VALUES_REFUSED),
        "count": _mostly((None, 8, 16), SIZES),
        "element_size": _mostly((None, 1, 2, 4), ELEMENT_SIZES),
        "width": _mostly((None,), (None, 8, 1000)),
        "height": _mostly(("absent", 1), HEIGHTS),
        "pitch": _mostly((None,), PITCHES),
        "positional": st.booleans(),
    }
)
_memcpy = st.fixed_dictionaries(
    {
        "dst": _OPERAND,
        "src": _OPERAND,
        "nbytes": _mostly((None, 8, 64), SIZES),
        "positional": st.booleans(),
    }
)
#: The nodes joined: by name, what ``_join_nodes`` makes of them.
JOINED = ("none", "one", "two", "list", "tuple", "same-twice", "foreign", "None", "not-a-node", "list-sub")
_place_only = st.fixed_dictionaries(
    {"kind": st.sampled_from(("empty", "join")), "nodes": _mostly(("none", "one", "two", "list"), JOINED)}
)
_call = st.tuples(
    st.one_of(_memset, _memcpy, _place_only), _mostly(("none", "last", "two"), AFTERS), _mostly((None, "n"), NAMES)
)


def _apply(g: cg.Graph, foreign: Node, call: tuple[dict[str, Any], str, Any], python: bool) -> Any:
    spec, after_spec, name = call
    kw: dict[str, Any] = {}
    after = _after(g, foreign, after_spec)
    if after is not None:
        kw["after"] = after
    if name is not None:
        kw["name"] = name
    kind = spec.get("kind") or ("memcpy" if "src" in spec else "memset")
    method = COMPILED_OPS[kind].func.__get__(g) if python else getattr(g, kind)
    try:
        if kind == "empty":
            method(**kw)
        elif kind == "join":
            method(*_join_nodes(g, foreign, spec["nodes"]), **kw)
        elif kind == "memcpy":
            dst, src = OPERANDS[spec["dst"]], OPERANDS[spec["src"]]
            if spec["positional"]:
                method(dst, src, spec["nbytes"], **kw)
            else:
                method(dst=dst, src=src, nbytes=spec["nbytes"], **kw)
        else:
            for key in ("element_size", "width", "pitch"):
                if spec[key] is not None:
                    kw[key] = spec[key]
            if spec["height"] != "absent":
                kw["height"] = spec["height"]
            dst = OPERANDS[spec["dst"]]
            if spec["positional"]:
                method(dst, spec["value"], spec["count"], **kw)
            else:
                method(dst=dst, value=spec["value"], count=spec["count"], **kw)
    except (CudaGraphError, TypeError, ValueError) as e:
        return type(e).__name__, str(e)
    return None


class _NodeList(list):  # type: ignore[type-arg]
    """A list subclass: ``join`` takes its items as the nodes, through the Python method."""


def _join_nodes(g: cg.Graph, foreign: Node, spec: str) -> tuple[Any, ...]:
    """The positional arguments of a ``join`` call of ``spec`` (one of :data:`JOINED`)."""
    nodes = g.nodes
    if spec == "none" or not nodes:
        return ()
    return {
        "one": (nodes[-1],),
        "two": (nodes[-1], nodes[0]) if len(nodes) > 1 else (nodes[0],),
        "list": (list(nodes[-3:]),),
        "tuple": (tuple(nodes[-3:]),),
        "same-twice": (nodes[-1], nodes[-1]),
        "foreign": (nodes[-1], foreign),
        "None": (None,),
        "not-a-node": (nodes[-1], 3),
        "list-sub": (_NodeList(nodes[-2:]),),
    }[spec]


def _both(calls: list[tuple[dict[str, Any], str, Any]]) -> tuple[cg.Graph, cg.Graph]:
    foreign = cg.Graph("foreign").empty()
    compiled, python = cg.Graph("g"), cg.Graph("g")
    for call in calls:
        ours = _apply(compiled, foreign, call, python=False)
        theirs = _apply(python, foreign, call, python=True)
        assert ours == theirs, call
        assert graph_state(compiled) == graph_state(python), call
    return compiled, python


def _ms(dst: str, value: Any = 1, count: Any = None, **kw: Any) -> dict[str, Any]:
    spec = {"dst": dst, "value": value, "count": count, "element_size": None, "width": None, "height": "absent"}
    return {**spec, "pitch": None, "positional": False, **kw}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_call, min_size=1, max_size=25))
@example([(_ms("buf", 7, None, element_size=4), "last", None), (_ms("buf", 0, 16, height=2, pitch=64), "two", "")])
@example([({"dst": "buf", "src": "buf-handle-obj", "nbytes": None, "positional": True}, "none", "c")] * 2)
@example([(_ms("flaky-ok", 1, 8), "none", None), (_ms("flaky-fail", 1, 8), "last", None)])
@example([({"kind": "empty", "nodes": "none"}, "none", None), ({"kind": "join", "nodes": "None"}, "none", None)])
@example([({"kind": "empty", "nodes": "none"}, "none", None), ({"kind": "join", "nodes": "one"}, "last", "j")])
def test_compiled_and_python_methods_build_the_same_graphs(calls: list[tuple[dict[str, Any], str, Any]]) -> None:
    _both(calls)


def _teach() -> None:
    """Show the Python methods a Buffer, a Buffer with an object handle and a chain (the C side learns from them)."""
    g = cg.Graph("teach")
    prev = COMPILED_OPS["memset"].func(g, OPERANDS["buf"], 1)
    prev = COMPILED_OPS["memcpy"].func(g, OPERANDS["buf"], OPERANDS["buf-handle-obj"], after=prev)
    g.memset(0x1000, 1, count=4, after=g.memcpy(0x2000, 0x1000, 4, after=prev))
    assert Buf in BUFFER_TYPES and Handle in HANDLE_TYPES


def test_the_common_calls_are_taken_in_c() -> None:
    _teach()
    ms, mc = COMPILED_OPS["memset"], COMPILED_OPS["memcpy"]
    before = ms.taken, mc.taken
    buf, small, obj = OPERANDS["buf"], OPERANDS["buf-small"], OPERANDS["buf-handle-obj"]
    g = cg.Graph("c")
    a = g.memset(buf, 0xAB)  # count from the Buffer's size
    b = g.memset(0x40000, -1, 16, element_size=2, after=a, name="fill")
    c = g.memset(buf, 0x3F800000, width=8, height=4, pitch=64, element_size=4, after=[a, b])
    with pytest.raises(cg.errors.DefinitionError, match=r"memcpy#3 'memcpy': nbytes = 4096 exceeds the 8 bytes of dst"):
        g.memcpy(small, buf, after=c)  # nbytes from src's size: too many for dst (the Python method's error)
    assert (ms.taken - before[0], mc.taken - before[1]) == (3, 0)
    d = g.memcpy(buf, obj, after=c)  # nbytes from src's 256 bytes
    e = g.memcpy(0x50000, buf, 128, after=d, name="")
    assert (ms.taken - before[0], mc.taken - before[1]) == (3, 2)
    g2 = cg.Graph("numpy values")
    f = g2.memset(buf, np.float32(1.0), after=g2.memset(buf, 0))  # a numpy value: its bytes, its size the element size
    h = g2.memset(0x40000, np.int8(-3), 4, element_size=1, after=f)
    assert (f.value, f.element_size, f.width, h.value, h.element_size) == (0x3F800000, 4, 1024, 0xFD, 1)
    assert ms.taken - before[0] == 6
    host, grid = np.arange(64, dtype=np.float32), np.zeros((4, 8), np.int16)
    g3 = cg.Graph("host arrays")
    up = g3.memcpy(buf, host)  # nbytes from the array: its buffer's length
    down = g3.memcpy(grid, buf, 64, after=up)
    with pytest.raises(cg.errors.DefinitionError, match=r"memcpy#2 'memcpy': nbytes = 4096 exceeds the 64 "):
        g3.memcpy(grid, buf, after=down)  # nbytes from src's size
    assert (up.dst, up.src, up.nbytes, up._keep) == (0x80000, host.__array_interface__["data"][0], 256, (buf, host))
    assert (down.dst, down.nbytes, down._keep) == (grid.__array_interface__["data"][0], 64, (grid, buf))
    assert mc.taken - before[1] == 4
    fill = (a.dst, a.value, a.element_size, a.width, a.height, a.pitch, a._keep)
    assert fill == (0x80000, 0xAB, 1, 4096, 1, 4096, (buf,))
    assert (b.value, b.element_size, b.width, b.pitch, b.name, b._keep) == (0xFFFF, 2, 16, 32, "fill", (None,))
    assert (c.value, c.width, c.height, c.pitch, [p.index for p in c._preds]) == (0x3F800000, 8, 4, 64, [0, 1])
    assert (d.dst, d.src, d.nbytes, d._keep) == (0x80000, 0xB0000, 256, (buf, obj))
    assert (e.dst, e.nbytes, e.name, e._keep, e._preds) == (0x50000, 128, "memcpy", (None, buf), [d])
    assert g.num_edges == 5 and [n.index for n in g.nodes] == list(range(5))
    g.validate()


def test_what_the_python_method_must_answer_is_left_to_it() -> None:
    _teach()
    ms = COMPILED_OPS["memset"]
    g = cg.Graph("declined")
    before = ms.taken
    g.memset(0x40000, np.float32(1.0), 4, element_size=np.int64(4))  # a numpy element size
    g.memset(OPERANDS["cai"], 1)  # an array interface
    g.memset(0x40000, 1, np.int64(4))  # a numpy count
    g.memset(OPERANDS["buf-size-np"], 1)  # a Buffer whose size is a numpy int
    p = cg.Graph("another").param("p")  # another graph's parameter (the Python method adopts it)
    g.memset(p, 1, 4)
    assert ms.taken == before and len(g) == 5
    with pytest.raises(cg.errors.OperandError, match=r"memset#5 'memset': value 256 does not fit in 1 byte"):
        g.memset(0x40000, 256, 4)
    with pytest.raises(cg.errors.DefinitionError, match=r"memset#5 'memset': the fill covers 5000 bytes but dst"):
        g.memset(OPERANDS["buf"], 1, 5000)
    with pytest.raises(cg.errors.OperandError, match=r"memset#5 'memset': dst: the Buffer is closed or empty"):
        g.memset(OPERANDS["buf-closed"], 1, 4)
    with pytest.raises(cg.errors.OperandError, match=r"memcpy#5 'memcpy': src: reading the address of a FlakyBuf"):
        g.memcpy(0x40000, OPERANDS["flaky-fail"], 8)
    assert ms.taken == before and len(g) == 5


class _Interrupting:
    """A Buffer class whose handle raises ``KeyboardInterrupt`` (not an ``Exception``) once armed."""

    __slots__ = ("armed", "size", "memory_resource")

    def __init__(self) -> None:
        self.armed, self.size, self.memory_resource = False, 64, None

    @property
    def handle(self) -> int:
        if self.armed:
            raise KeyboardInterrupt
        return 0x60000


def test_an_exception_that_is_not_an_error_goes_through_and_changes_nothing() -> None:
    buf = _Interrupting()
    g = cg.Graph("ki")
    prev = g.memset(buf, 1)
    prev = g.memcpy(buf, 0x40000, 8, after=prev)  # learned: the C side reads the next one
    state = graph_state(g)
    buf.armed = True
    for call in (lambda: g.memset(buf, 1, after=prev), lambda: g.memcpy(0x40000, buf, 8, after=prev)):
        with pytest.raises(KeyboardInterrupt):
            call()
        assert graph_state(g) == state and prev._succs == []


class _Meddling:
    """A Buffer class whose handle adds a node to ``g`` and drops the last item of ``after`` while it is read."""

    __slots__ = ("g", "after", "size", "memory_resource")

    def __init__(self, g: cg.Graph, after: list[Node]) -> None:
        self.g, self.after, self.size, self.memory_resource = g, after, 256, None

    @property
    def handle(self) -> int:
        self.g.empty(name="side")
        if self.after:
            self.after.pop()
        return 0x70000


def test_python_code_run_by_a_buffer_mid_call_is_seen_as_the_python_method_sees_it() -> None:
    teach = cg.Graph("teach")
    teach.memset(_Meddling(teach, []), 1)  # first sight (read twice by the Python method): before both graphs
    graphs = []
    for python in (False, True):
        g = cg.Graph("meddled")
        g.empty()
        for i in range(20):
            after = g._nodes[-3:]
            buf = _Meddling(g, after)
            kind = "memset" if i % 2 else "memcpy"
            method = COMPILED_OPS[kind].func.__get__(g) if python else getattr(g, kind)
            if kind == "memset":
                method(buf, 1, after=after)
            else:
                method(buf, 0x40000, after=after)
        graphs.append(g)

    def shape(g: cg.Graph) -> list[Any]:  # (each graph's Buffers are its own: _keep is compared by type)
        fields = ("dst", "src", "nbytes", "value", "width", "height", "pitch")
        return [g.num_edges, g.summary()] + [
            (type(n), n.index, n.name, [p.index for p in n._preds], [s.index for s in n._succs])
            + tuple(getattr(n, f, None) for f in fields)
            + tuple(type(k).__name__ for k in getattr(n, "_keep", ()))
            for n in g.nodes
        ]

    assert shape(graphs[0]) == shape(graphs[1])
    assert len(graphs[0]) == 41 and COMPILED_OPS["memset"].taken > 0


def test_finalizers_run_by_collections_mid_call_leave_a_consistent_graph() -> None:
    g = cg.Graph("gc")
    g.empty()
    buf = OPERANDS["buf"]

    def add(i: int, after: Any) -> Node:
        return g.memset(buf, 1, 16, after=after) if i % 2 else g.memcpy(0x40000, buf, after=after)

    assert_finalizers_keep_it_whole(g, add)


def test_threads_adding_fills_and_copies_at_once_leave_every_index_and_edge_whole() -> None:
    g = cg.Graph("threads")
    root = g.empty()
    buf = OPERANDS["buf"]

    def add(i: int, after: Any) -> Node:
        return g.memset(buf, 1, 16, after=after) if i % 2 else g.memcpy(0x40000, buf, 64, after=after)

    assert_threads_keep_it_whole(g, root, add)


def test_compiled_methods_look_like_the_python_ones() -> None:
    for kind, method in COMPILED_OPS.items():
        assert method.__wrapped__ is method.func
        assert getattr(cg.Graph, kind) is method and getattr(cg.Graph, kind).__doc__ == method.func.__doc__
        assert getattr(cg.Graph, kind).__name__ == kind
        assert getattr(method, "__cudagraph_builder__", False) is True
        g = cg.Graph("m")
        assert getattr(g, kind).__self__ is g
        with pytest.raises(TypeError):
            getattr(g, kind)(1, 2, 3, 4, 5) if kind != "join" else g.join(after=None, bad=1)  # the Python method's
    path = cg.Graph("p").path()
    path.memset(0x40000, 1, 4)
    path.memcpy(0x50000, 0x40000, 4)
    node = path.last
    assert node.kind == "memcpy" and [p.kind for p in node._preds] == ["memset"]


SOURCES = (BUFFER_TYPES, HANDLE_TYPES, FILL_SCALARS, HOST_ARRAYS)


def test_forget_empties_the_learned_tables() -> None:
    _teach()
    ms = COMPILED_OPS["memset"]
    ms.forget()
    before = ms.taken
    cg.Graph("f").memset(OPERANDS["buf"], 1)  # learned again from BUFFER_TYPES on the spot
    assert ms.taken == before + 1
    with pytest.raises(TypeError, match="OpMethod: kind 'memset', 'memcpy', 'empty' or 'join'"):
        type(ms)("fill", ms.func, COMPILED_KERNEL, MemsetNode, OP_SLOTS["memset"], SOURCES)
    with pytest.raises(TypeError, match="OpMethod: kind 'memset', 'memcpy', 'empty' or 'join'"):
        type(ms)("memset", ms.func, COMPILED_KERNEL, MemsetNode, OP_SLOTS["memset"], SOURCES[:3])
    with pytest.raises(TypeError, match="OpMethod: node_type must keep the base slots"):
        type(ms)("memset", ms.func, COMPILED_KERNEL, object, OP_SLOTS["memset"], SOURCES)
    with pytest.raises(TypeError, match=r"MemcpyNode.value is not an object slot"):
        type(ms)("memset", ms.func, COMPILED_KERNEL, MemcpyNode, OP_SLOTS["memset"], SOURCES)


def test_pointer_parameters_of_the_graph_are_taken_in_c_and_every_other_parameter_is_left_to_python() -> None:
    """A fill's or copy's operand that is a pointer parameter the graph declared is taken in C; a scalar
    parameter, one of another graph (which the Python method adopts) or a call without a size goes to the
    Python method: both build the same graphs and raise the same errors."""
    ms, mc = COMPILED_OPS["memset"], COMPILED_OPS["memcpy"]
    older = cg.Graph("older")
    theirs = older.param("t")

    def build(python: bool) -> tuple[cg.Graph, list[Any]]:
        g = cg.Graph("g")
        x, y, s = g.param("x"), g.param("y"), g.param("s", np.float32)
        memset = COMPILED_OPS["memset"].func.__get__(g) if python else g.memset
        memcpy = COMPILED_OPS["memcpy"].func.__get__(g) if python else g.memcpy
        calls = [
            lambda: memset(x, 0, count=64, element_size=4),
            lambda: memset(x, np.float32(1.5), count=16),
            lambda: memcpy(x, y, 256),
            lambda: memcpy(x, 0x9000, 64),
            lambda: memset(x, 0),  # no size: the Python method names it
            lambda: memset(s, 0, count=4),  # a scalar parameter: refused by the Python method
            lambda: memcpy(y, theirs, 8),  # another graph's parameter: adopted by the Python method
        ]
        out = []
        for call in calls:
            try:
                call()
                out.append(None)
            except CudaGraphError as e:
                out.append((type(e).__name__, str(e)))
        return g, out

    warm = cg.Graph("warm")  # the graph type learned (the first call of a process teaches it)
    warm.memcpy(0x9000, 0x9100, 4, after=warm.memset(0x9000, 0, count=4))
    before = ms.taken, mc.taken
    compiled, errors = build(False)
    assert (ms.taken - before[0], mc.taken - before[1]) == (2, 2)
    python, python_errors = build(True)
    assert errors == python_errors and errors[:4] == [None] * 4 and all(errors[4:6])

    def fields(g: cg.Graph) -> list[Any]:  # a parameter by its name: each graph has its own
        return [
            [(s, getattr(n, s).name if isinstance(getattr(n, s), cg.Param) else getattr(n, s)) for s in n.__slots__]
            + [n.index, n.name, [q.index for q in n.predecessors]]
            for n in g.nodes
        ]

    assert fields(compiled) == fields(python) and compiled.summary() == python.summary()
    assert sorted(compiled.params) == sorted(python.params) == ["s", "t", "x", "y"]
    assert compiled.nodes[0].dst is compiled.params["x"] and compiled.nodes[0]._keep == (None,)
