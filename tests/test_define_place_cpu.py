"""Placing the nodes of every builder but the kernel's in C (``KernelMethod.place``) against the Python path.

The same random builder calls (fills, copies of one, two and three dimensions, empty nodes, joins, host
callbacks, event nodes, word writes and waits, graph allocations and frees, child graphs, conditionals and
condition setters, with predecessors that are plain, repeated, of another graph or not nodes, and names of
every type) are made on two graphs: one built by the compiled builders (``OpMethod``: fills, copies, empty
nodes, joins) and placed by the compiled placer, one by the Python methods with the placer turned off
(``GraphCore._placer = None``, the Python twin ``_deps``, ``_set_base`` and ``_add``). Every node slot, the
counters, ``summary()`` and every error must be the same. Collections that edit the graph mid-call and
threads must leave it whole.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cudagraph as cg
from cudagraph.definition.builders import COMPILED_KERNEL, COMPILED_OPS
from cudagraph.definition.core import GraphCore
from cudagraph.definition.kinds.structure import EmptyNode
from cudagraph.definition.node import Node
from cudagraph.errors import CudaGraphError
from test_define_compiled_cpu import assert_finalizers_keep_it_whole, assert_threads_keep_it_whole, graph_state

pytestmark = pytest.mark.skipif(COMPILED_KERNEL is None, reason="cudagraph.definition._define not built (or off)")


class CUevent:  # recognised by type name, as cuda.bindings' CUevent is
    pass


EVENT = CUevent()
BUILDERS = (
    "memset",
    "memcpy",
    "empty",
    "join",
    "host",
    "record",
    "wait",
    "memcpy2d",
    "memcpy3d",
    "write_value",
    "wait_value",
    "alloc",
    "free",
    "child",
    "if_",
    "set_condition",
)
AFTERS = ("none", "last", "two", "same-twice", "foreign", "not-a-node", "tuple", "empty-list", "many")
NAMES = (None, "", "n", 5, b"x")


def _noop() -> None:
    pass


def _after(g: cg.Graph, foreign: Node, spec: str) -> Any:
    nodes = g.nodes
    if spec == "none" or not nodes:
        return None
    return {
        "last": nodes[-1],
        "two": [nodes[-1], nodes[0]] if len(nodes) > 1 else [nodes[0]],
        "same-twice": [nodes[-1], nodes[-1]],
        "foreign": [nodes[-1], foreign],
        "not-a-node": [nodes[-1], 3],
        "tuple": tuple(nodes[-3:]),
        "empty-list": [],
        "many": list(nodes[-40:]),
    }[spec]


def _builder(g: cg.Graph, kind: str, python: bool) -> Any:
    """``g``'s builder ``kind``; with ``python``, the Python method where a compiled one is installed."""
    return COMPILED_OPS[kind].func.__get__(g) if python and kind in COMPILED_OPS else getattr(g, kind)


def _apply(g: cg.Graph, foreign: Node, call: tuple[str, str, Any], python: bool = False) -> tuple[str, str] | None:
    kind, after_spec, name = call
    after = _after(g, foreign, after_spec)
    kw: dict[str, Any] = {"after": after} if after is not None else {}
    if name is not None:
        kw["name"] = name
    try:
        if kind == "memset":
            _builder(g, kind, python)(0x10000, 1, count=16, **kw)
        elif kind == "memcpy":
            _builder(g, kind, python)(0x20000, 0x10000, 64, **kw)
        elif kind == "empty":
            _builder(g, kind, python)(**kw)
        elif kind == "join":
            _builder(g, kind, python)(*(g.nodes[-2:]), **kw)
        elif kind == "host":
            g.host(_noop, **kw)
        elif kind == "memcpy2d":
            g.memcpy2d(0x20000, 128, 0x10000, 64, 64, 4, **kw)
        elif kind == "memcpy3d":
            g.memcpy3d(0x20000, 0x10000, 32, 4, 2, **kw)
        elif kind == "write_value":
            g.write_value(0x10000, 7, **kw)
        elif kind == "wait_value":
            g.wait_value(0x10008, 1, bits=64, **kw)
        elif kind == "alloc":
            g.alloc(256, **kw)
        elif kind == "free":
            unfreed = [n for n in g.nodes if isinstance(n, cg.AllocNode) and n.freed_by is None]
            g.free(unfreed[-1] if unfreed else foreign.graph.nodes[1], **kw)  # (a foreign allocation)
        elif kind == "child":
            body = cg.Graph("body")
            body.memset(0x10000, 0, count=4, after=body.empty())
            g.child(body, **kw)
        elif kind == "if_":
            g.if_(g.condition(), **kw).body.empty()
        elif kind == "set_condition":
            g.set_condition(g.conditions[-1] if g.conditions else g.condition(), 0x10000, ">", 1, np.int32, **kw)
        else:
            getattr(g, kind)(EVENT, **kw)
    except (CudaGraphError, TypeError, ValueError) as e:
        return type(e).__name__, str(e)
    return None


_call = st.tuples(st.sampled_from(BUILDERS), st.sampled_from(AFTERS), st.sampled_from(NAMES))


def _both(calls: list[tuple[str, str, Any]]) -> tuple[cg.Graph, cg.Graph]:
    foreign = cg.Graph("foreign").empty()
    foreign.graph.alloc(64)
    placed, python = cg.Graph("g"), cg.Graph("g")
    for call in calls:
        ours = _apply(placed, foreign, call)
        placer, GraphCore._placer = GraphCore._placer, None  # the Python twin
        try:
            theirs = _apply(python, foreign, call, python=True)
        finally:
            GraphCore._placer = placer
        assert ours == theirs, call
        assert graph_state(placed) == graph_state(python), call
    return placed, python


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_call, min_size=1, max_size=30))
def test_placed_and_python_paths_build_the_same_graphs(calls: list[tuple[str, str, Any]]) -> None:
    _both(calls)


def _placed_in_c() -> int:
    """Nodes placed by the compiled placer: for other builders (``place``) and by the compiled fill and copy."""
    return int(COMPILED_KERNEL.placed) + sum(m.taken for m in COMPILED_OPS.values())


def test_plain_chains_are_placed_in_c() -> None:
    before = _placed_in_c()
    g = cg.Graph("chain")
    prev = None
    for _ in range(10):
        prev = g.memset(0x10000, 1, count=4, after=prev)
        prev = g.join(prev)
        prev = g.memcpy(0x20000, 0x10000, 16, after=prev)
    assert _placed_in_c() - before >= 27  # (a kind's first nodes teach its type to the placer)
    assert [n.index for n in g.nodes] == list(range(30)) and g.num_edges == 29
    for a, b in zip(g.nodes, g.nodes[1:]):
        assert b._preds == [a] and a._succs == [b]
    g.validate()


def test_a_declined_or_refused_call_changes_nothing() -> None:
    g = cg.Graph("g")
    a = g.empty()
    state = graph_state(g)
    other = cg.Graph("other").empty()
    with pytest.raises(cg.errors.ForeignNodeError, match=r"memset#1 'memset': after= names empty#0 'empty' of "):
        g.memset(0x10000, 0, count=4, after=[a, other])
    with pytest.raises(cg.errors.DuplicateEdgeError, match=r"empty#1 'empty': after= names empty#0 'empty' twice"):
        g.empty(after=[a, a])
    with pytest.raises(cg.errors.OperandError, match=r"empty#1: name must be a str, got int"):
        g.empty(name=3, after=a)
    assert graph_state(g) == state and a._succs == []


@pytest.mark.parametrize("placer", ["compiled", "python"])
def test_a_refused_predecessor_leaves_no_trace_of_any_builder(placer: str) -> None:
    """Every builder marks its node's graph (special nodes, late operands, a freed allocation, a used
    condition) only once the node is placed: a refused ``after=`` leaves the graph as it was."""
    g = cg.Graph("g")
    alloc = g.alloc(256)
    cond = g.condition()
    state = graph_state(g)
    other = cg.Graph("other").empty()
    body = cg.Graph("body")
    body.empty()
    calls = {
        "memcpy2d": lambda kw: g.memcpy2d(0x20000, 128, alloc, 64, 64, 4, **kw),
        "memcpy3d": lambda kw: g.memcpy3d(alloc, 0x10000, 32, 4, 2, **kw),
        "write_value": lambda kw: g.write_value(0x10000, 7, **kw),
        "wait_value": lambda kw: g.wait_value(0x10008, 1, bits=64, **kw),
        "alloc": lambda kw: g.alloc(64, **kw),
        "free": lambda kw: g.free(alloc, **kw),
        "child": lambda kw: g.child(body, **kw),
        "if_": lambda kw: g.if_(cond, **kw),
        "while_": lambda kw: g.while_(cond, **kw),
        "set_condition": lambda kw: g.set_condition(cond, alloc, ">", 1, np.int32, **kw),
    }
    saved, GraphCore._placer = GraphCore._placer, (GraphCore._placer if placer == "compiled" else None)
    try:
        for kind, call in calls.items():
            with pytest.raises(cg.errors.ForeignNodeError, match=r"after= names empty#0 'empty' of Graph 'other'"):
                call({"after": [alloc, other]})
            assert graph_state(g) == state, kind
            assert alloc.freed_by is None and cond._nodes == [] and alloc._succs == [], kind
        calls["free"]({"after": alloc})  # and each is accepted once the predecessor is of this graph
        assert alloc.freed_by is g.nodes[-1] and g._special == 2
        calls["if_"]({"after": alloc})
        assert cond._nodes == [g.nodes[-1]] and g._special == 3
        calls["memcpy3d"]({"after": alloc})
        assert g._special == 4  # the allocation it copies into
    finally:
        GraphCore._placer = saved


def test_place_refuses_what_it_cannot_place() -> None:
    place = COMPILED_KERNEL.place
    g = cg.Graph("g")
    with pytest.raises(TypeError, match=r"place\(graph, node, after, name\)"):
        place(g, EmptyNode.__new__(EmptyNode), None)
    assert place(g, object(), None, "x") is False  # not a node
    assert place(object(), EmptyNode.__new__(EmptyNode), None, "x") is False  # not a graph
    assert place(g, EmptyNode.__new__(EmptyNode), None, 7) is False  # a name that is not a str
    node = g.empty()
    assert place(g, node, None, "again") is False  # placed before: its slots are not taken over
    assert len(g) == 1 and node.name == "empty"


def test_finalizers_run_by_collections_mid_call_leave_a_consistent_graph() -> None:
    g = cg.Graph("gc")
    g.empty()

    def add(i: int, after: Any) -> Node:
        return g.memset(0x10000, 1, count=4, after=after) if i % 2 else g.empty(after=after)

    assert_finalizers_keep_it_whole(g, add)


def test_threads_placing_nodes_at_once_leave_every_index_and_edge_whole() -> None:
    g = cg.Graph("threads")
    root = g.empty()

    def add(i: int, after: Any) -> Node:
        return g.memset(0x10000, 1, count=4, after=after) if i % 2 else g.empty(after=after)

    assert_threads_keep_it_whole(g, root, add)
