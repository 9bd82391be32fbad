"""``Graph.remove(node)`` and the compat ``GraphNode.destroy`` / mutable ``pred`` and ``succ``, without a GPU:
the node leaves with its edges, later nodes move down, a removed node is refused everywhere, the derived
state (successor lists, edge count, topological order, signature) agrees with a graph built without it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import compat
from cudagraph.definition import removal
from cudagraph.definition.diff import topology_signature as twin_signature
from cudagraph.errors import CycleError, DefinitionError, DuplicateEdgeError, ForeignNodeError, OperandError
from cudagraph.executable.compare import topology_signature


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K = CUkernel()


def _args(i: int) -> tuple[Any, ...]:
    return (0x1000 + 64 * i, np.float32(i), np.int32(i))


def _same_shape(a: cg.Graph, b: cg.Graph) -> None:
    """``a`` and ``b`` agree on node kinds, indices, edges, successors, edge count and signature."""
    assert [(n.kind, n.index, n.name) for n in a.nodes] == [(n.kind, n.index, n.name) for n in b.nodes]
    assert [(s.index, d.index) for s, d in a.edges] == [(s.index, d.index) for s, d in b.edges]
    assert [[s.index for s in n.successors] for n in a.nodes] == [[s.index for s in n.successors] for n in b.nodes]
    assert a.num_edges == b.num_edges
    assert topology_signature(a) == topology_signature(b) == twin_signature(a) == twin_signature(b)


def test_a_node_leaves_with_its_edges_and_later_nodes_move_down():
    g = cg.Graph("g")
    a = g.kernel(K, 1, 32, _args(0), name="a")
    b = g.kernel(K, 1, 32, _args(1), after=a, name="b")
    c = g.kernel(K, 1, 32, _args(2), after=[a, b], name="c")
    d = g.empty(after=c, name="d")
    assert g.num_edges == 4
    g.remove(b)
    assert g.nodes == (a, c, d) and (a.index, c.index, d.index) == (0, 1, 2)
    assert c.predecessors == (a,) and a.successors == (c,) and b.predecessors == () and b.successors == ()
    assert b.label == "kernel#1 'b'" and b.graph.name == "<removed from g>"
    want = cg.Graph("g")
    wa = want.kernel(K, 1, 32, _args(0), name="a")
    wc = want.kernel(K, 1, 32, _args(2), after=wa, name="c")
    want.empty(after=wc, name="d")
    _same_shape(g, want)
    g.validate()
    e = g.kernel(K, 1, 32, _args(3), after=d, name="e")  # the next node takes the next free index
    assert e.index == 3 and g.nodes[-1] is e


def test_a_removed_node_is_refused_everywhere():
    g = cg.Graph("g")
    a = g.kernel(K, 1, 32, _args(0), name="a")
    b = g.kernel(K, 1, 32, _args(1), after=a, name="b")
    g.remove(a)
    removed = "kernel#0 'a' of Graph '<removed from g>'"
    for build in (
        lambda: g.kernel(K, 1, 32, _args(2), after=a),
        lambda: g.kernel(K, 1, 32, _args(2), after=[b, a]),
        lambda: g.empty(after=a),
        lambda: g.join(b, a),
        lambda: g.memset(0x2000, np.float32(0), count=4, after=a),
    ):
        with pytest.raises(ForeignNodeError) as info:
            build()
        assert removed in str(info.value) or "kernel#0 'a' belongs to Graph '<removed from g>'" in str(info.value)
        assert g.nodes == (b,)
    with pytest.raises(ForeignNodeError, match=r"add_edge: src: kernel#0 'a' belongs to Graph '<removed from g>'"):
        g.add_edge(a, b)
    with pytest.raises(ForeignNodeError, match=r"remove: kernel#0 'a' belongs to Graph '<removed from g>'"):
        g.remove(a)
    with pytest.raises(OperandError, match=r"remove: expected a node, got int"):
        g.remove(0)  # type: ignore[arg-type]


def test_the_topological_order_kept_by_backward_edges_survives_a_removal():
    g = cg.Graph("g")
    n = [g.empty(name=f"n{i}") for i in range(5)]
    g.add_edge(n[4], n[1])  # backward by index: the graph keeps an order of its own
    g.add_edge(n[1], n[0])
    assert g._order
    g.remove(n[2])
    assert [x.index for x in g.nodes] == [0, 1, 2, 3] and sorted(g._order) == [0, 1, 2, 3]
    with pytest.raises(CycleError, match=r"would close the cycle"):
        g.add_edge(n[0], n[4])  # n4 -> n1 -> n0 -> n4
    g.add_edge(n[3], n[4])
    g.validate()
    pos = {id(x): i for i, x in enumerate(g.topological_order())}
    assert len(pos) == 4 and all(pos[id(s)] < pos[id(d)] for s, d in g.edges)


def test_allocations_in_use_are_refused_and_a_free_node_frees_nothing_once_removed():
    g = cg.Graph("g")
    a = g.alloc(64, name="buf")
    k = g.kernel(K, 1, 32, (a, np.float32(1), np.int32(1)), after=a, name="user")
    f = g.free(a, after=k, name="release")
    with pytest.raises(DefinitionError, match=r"remove: alloc#0 'buf' is freed by free#2 'release'"):
        g.remove(a)
    g.remove(f)
    assert a.freed_by is None and g.nodes == (a, k)
    with pytest.raises(DefinitionError, match=r"remove: alloc#0 'buf' is used by kernel#1 'user'; remove its users"):
        g.remove(a)
    g.remove(k)
    g.remove(a)
    assert len(g) == 0 and g.num_edges == 0


def test_a_body_added_after_a_removal_is_seen():
    from cudagraph.definition.diff import is_flat

    g = cg.Graph("g")
    a = g.empty(name="a")
    g.empty(after=a, name="b")
    assert is_flat(g)
    g.remove(a)
    g.child(cg.Graph("body"), name="nested")  # as many nodes as the graph had when it was last found flat
    assert not is_flat(g)


def test_a_subclass_whose_init_takes_other_arguments_removes_too():
    class Named(cg.Graph):
        __slots__ = ()

        def __init__(self, prefix: str, number: int) -> None:
            super().__init__(f"{prefix}{number}")

    g = Named("g", 1)
    a = g.empty(name="a")
    g.remove(a)
    assert a.graph.name == "<removed from g1>" and type(a.graph) is Named and len(g) == 0


def test_a_node_of_a_body_is_removed_from_its_body():
    body = cg.Graph("body")
    x = body.empty(name="x")
    y = body.empty(after=x, name="y")
    g = cg.Graph("g")
    g.child(body)
    body.remove(x)
    assert body.nodes == (y,) and y.index == 0 and y.predecessors == ()
    with pytest.raises(ForeignNodeError, match=r"remove: empty#0 'y' belongs to Graph 'body', not 'g'"):
        g.remove(y)


def test_the_executables_watching_the_definition_are_told_first(monkeypatch):
    told: list[Any] = []
    monkeypatch.setattr(removal, "before_edit", lambda graph: told.append((graph, len(graph))))
    g = cg.Graph("g")
    a = g.empty()
    g.empty(after=a)
    g.remove(a)
    assert told == [(g, 2)]  # before the node left


# ------------------------------------------------------------------ compat: destroy, pred, succ


def test_compat_destroy_and_is_valid():
    gd = compat.GraphDefinition()
    a = gd.empty()
    b = a.empty()
    c = b.empty()
    assert a.is_valid is True and b.is_valid is True and gd.is_valid is True
    b.destroy()
    assert b.is_valid is False and a.is_valid and len(gd.nodes()) == 2 and gd.edges() == set()
    b.destroy()  # a destroyed node: nothing
    cg.compat.GraphNode(gd, None).destroy()  # the entry point: nothing
    assert c.pred == set() and a.succ == set()


def test_compat_pred_and_succ_are_live_mutable_sets():
    gd = compat.GraphDefinition()
    a, b, c = gd.empty(), gd.empty(), gd.empty()
    a.succ.add(b)
    c.pred.add(b)
    assert gd.edges() == {(a, b), (b, c)} and b in a.succ and a in b.pred and len(b.succ) == 1
    a.succ.add(b)  # present: nothing
    with pytest.raises(CycleError):
        c.succ.add(a)  # a -> b -> c -> a
    b.pred.discard(a)
    b.pred.discard(a)  # absent: nothing
    assert gd.edges() == {(b, c)}
    c.pred = {a, b}
    assert c.pred == {a, b} and gd.edges() == {(a, c), (b, c)}
    c.pred = [a]
    assert gd.edges() == {(a, c)}
    a.succ.clear()
    assert gd.edges() == set()
    with pytest.raises(OperandError, match=r"compat GraphNode.pred.add: expected a GraphNode of the definition, got"):
        a.pred.add(3)  # type: ignore[arg-type]
    with pytest.raises(OperandError, match=r"the entry point has no edges"):
        cg.compat.GraphNode(gd, None).succ.add(a)
    other = compat.GraphDefinition().empty()
    with pytest.raises(ForeignNodeError):
        a.succ.add(other)
    with pytest.raises(DuplicateEdgeError):
        gd.graph.add_edge(a.node, b.node) or gd.graph.add_edge(a.node, b.node)  # type: ignore[func-returns-value]
