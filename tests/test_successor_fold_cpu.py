"""Successor lists and the edge count, derived from the predecessor lists when read (``GraphCore._fold``).

Builders record a new node's edges in its own predecessor list only; the first read of a successor
list, of ``num_edges`` or of ``leaves()``, and every ``add_edge`` / ``remove_edge``, folds the nodes
added since into their predecessors' successor lists and the count. These tests hold the derived
lists to a model that records every edge when it is made (the eager bookkeeping the fold replaced):
same lists, same order, same count, at any moment of any mix of builds, edits and reads; and the
capture backend's compiled sinks (``Layout.sinks``) to ``leaves()``, their twin.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.node import Node
from cudagraph.definition.nodes import KernelNode
from cudagraph.driver.c_entry import NATIVE
from cudagraph.errors import CycleError
from cudagraph.materialize.capture import _leaves

needs_native = pytest.mark.skipif(NATIVE is None, reason="cudagraph.driver._native was not built")


class CUkernel:  # recognised as a kernel handle by type name
    pass


K = CUkernel()


def build(g: cg.Graph, rng: random.Random, model: dict[int, list[Node]]) -> Node:
    """A node after a random set of ``g``'s nodes, by a random builder; its edges recorded in ``model``."""
    nodes = list(g.nodes)
    after = rng.sample(nodes, rng.randrange(min(len(nodes), 3) + 1)) if nodes else []
    how = rng.randrange(5)
    if how == 0:  # the compiled kernel builder (a list, a single node, nothing)
        dep: Any = after if len(after) != 1 else after[0]
        node = g.kernel(K, 1, 32, (0x9000, np.int32(len(nodes))), after=dep or None)
    elif how == 1:  # the Python kernel builder (a launch attribute)
        node = g.kernel(K, 1, 32, (0x9000,), after=tuple(after), priority=1)
    elif how == 2:
        node = g.empty(after=after)
    elif how == 3 and after:
        node = g.join(*after)
    else:
        node = g.memset(0x9000, 1, 16, after=after)
    model[id(node)] = []
    for p in after:
        model[id(p)].append(node)
    return node


def assert_matches(g: cg.Graph, model: dict[int, list[Node]]) -> None:
    """Every successor list is the model's, in order, and the edge count is the number of edges."""
    for n in g.nodes:
        assert [s.index for s in n.successors] == [s.index for s in model[id(n)]], n.label
    assert g.num_edges == sum(len(n.predecessors) for n in g.nodes) == sum(len(v) for v in model.values())
    assert g.leaves() == [n for n in g.nodes if not model[id(n)]]


def test_builders_record_edges_only_in_the_new_nodes_predecessor_lists() -> None:
    g = cg.Graph("lazy")
    rng = random.Random(1)
    model: dict[int, list[Node]] = {}
    for _ in range(60):
        build(g, rng, model)
    assert g._succs_upto == 0 and g._nedges == 0
    assert not any(hasattr(n, "_succ_list") for n in g.nodes)  # no successor list made yet
    g.validate()  # needs none either, nor leaves() (the capture backend's question)
    assert g.leaves() == [n for n in g.nodes if not model[id(n)]] and g._succs_upto == 0
    assert g.num_edges == sum(len(v) for v in model.values()) and g._succs_upto == 0
    assert_matches(g, model)
    assert g._succs_upto == len(g) == 60
    first = g.nodes[0]._succ_list
    build(g, rng, model)
    assert g.nodes[0]._succ_list is first and g._succs_upto == 60  # folded lists are kept, not rebuilt
    assert_matches(g, model)


@pytest.mark.parametrize("seed", range(12))
def test_successors_follow_any_mix_of_builds_edits_and_reads(seed: int) -> None:
    g = cg.Graph("mix")
    rng = random.Random(seed)
    model: dict[int, list[Node]] = {}
    for _ in range(400):
        step = rng.random()
        if step < 0.55 or len(g) < 2:
            build(g, rng, model)
        elif step < 0.75:  # an edge between two nodes (refused when it closes a cycle or exists)
            a, b = rng.sample(list(g.nodes), 2)
            try:
                g.add_edge(a, b)
            except (CycleError, cg.errors.DuplicateEdgeError):
                continue
            model[id(a)].append(b)
        elif step < 0.9:  # a removal: the last successor takes the removed one's place
            edges = g.edges
            if not edges:
                continue
            a, b = rng.choice(edges)
            g.remove_edge(a, b)
            succs = model[id(a)]
            i = succs.index(b)
            succs[i] = succs[-1]
            succs.pop()
        else:
            assert_matches(g, model)
    assert_matches(g, model)
    g.validate()


def test_a_fold_that_fails_changes_nothing() -> None:
    g = cg.Graph("fails")
    a = g.empty(name="a")
    b = g.empty(after=a, name="b")
    assert a.successors == (b,) and g.num_edges == 1  # a and b folded
    c = g.empty(after=[a, b], name="c")
    d = g.empty(after=[b, c], name="d")

    class Refusing(list):  # a successor list that refuses its next entry, as a list out of memory would
        def append(self, item: Any) -> None:
            raise MemoryError("no memory")

    b._succ_list = Refusing(b._succ_list)
    with pytest.raises(MemoryError, match="no memory"):
        len(a.successors)
    # c's entry in a's list, made before the refusal, was taken back; nothing counted or marked folded
    assert a._succ_list == [b] and list(b._succ_list) == [] and g._succs_upto == 2 and g._nedges == 1
    b._succ_list = list(b._succ_list)
    assert g.num_edges == 5
    assert [s.name for s in a.successors] == ["b", "c"] and [s.name for s in b.successors] == ["c", "d"]
    assert c.successors == (d,) and d.successors == ()


# --------------------------------------------------------------------------- the compiled sinks


@needs_native
@pytest.mark.parametrize("seed", range(8))
def test_compiled_sinks_are_the_leaves_folded_or_not(seed: int) -> None:
    layout = NATIVE.Layout(KernelNode, Node)
    g = cg.Graph("sinks")
    rng = random.Random(seed)
    model: dict[int, list[Node]] = {}
    for step in range(300):
        if rng.random() < 0.8 or len(g) < 2:
            build(g, rng, model)
        else:
            a, b = rng.sample(list(g.nodes), 2)
            try:
                g.add_edge(a, b)  # (folds: the next builds are not)
            except (CycleError, cg.errors.DuplicateEdgeError):
                continue
            model[id(a)].append(b)
        if step % 50 == 49:
            expected = [n for n in g.nodes if not model[id(n)]]
            assert layout.sinks(g._nodes) == g.leaves() == _leaves(g) == expected
    assert layout.sinks([]) == [] and cg.Graph("empty").leaves() == []


@needs_native
def test_compiled_sinks_decline_what_is_not_a_graph_of_nodes() -> None:
    layout = NATIVE.Layout(KernelNode, Node)
    g = cg.Graph("g")
    a = g.empty(name="a")
    b = g.empty(after=a, name="b")
    assert layout.sinks(g._nodes) == [b]
    other = cg.Graph("other")
    theirs = other.empty(name="theirs")
    assert layout.sinks([a, b, object()]) is None  # not a node
    assert layout.sinks([b]) is None  # b's predecessor is not in the list
    assert layout.sinks([b, a]) is None  # nor at its index
    b._preds.append(theirs)  # a node of another graph at the same index
    assert layout.sinks(g._nodes) is None
    b._preds.pop()
    b.index = "1"  # not an int: only read as a predecessor's index
    c = g.empty(after=b, name="c")
    assert layout.sinks(g._nodes) is None
    b.index = 1
    assert layout.sinks(g._nodes) == [c]
    with pytest.raises(TypeError, match=r"sinks\(nodes: list\)"):
        layout.sinks((a, b))
    with pytest.raises(RuntimeError, match="not initialized"):
        NATIVE.Layout.__new__(NATIVE.Layout).sinks([])
