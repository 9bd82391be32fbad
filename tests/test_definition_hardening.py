"""Bad input refused by the builder call that received it (GPU-free)."""

from __future__ import annotations

import copy

import pytest

import cudagraph as cg
from cudagraph.errors import DefinitionError, ForeignNodeError


# ---------------------------------------------------------------- precede / succeed all or nothing
def _edges(g: cg.Graph) -> list[tuple[int, int]]:
    return [(p.index, n.index) for n in g.nodes for p in n.predecessors]


def test_precede_leaves_no_edge_when_a_later_one_closes_a_cycle() -> None:
    from cudagraph.errors import CycleError

    g = cg.Graph("main")
    a, b, c = g.empty(name="a"), g.empty(name="b"), g.empty(name="c")
    g.add_edge(c, a)
    before = _edges(g)
    with pytest.raises(CycleError) as e:
        a.precede(b, c)  # a -> b is fine, a -> c closes c -> a -> c
    assert "'a'" in str(e.value) and "'c'" in str(e.value)
    assert _edges(g) == before and g.num_edges == len(before)
    assert b.predecessors == () and a.successors == ()


def test_succeed_leaves_no_edge_when_a_later_one_is_a_duplicate_or_foreign() -> None:
    from cudagraph.errors import DuplicateEdgeError

    g = cg.Graph("main")
    a, b, c = g.empty(name="a"), g.empty(name="b"), g.empty(name="c")
    with pytest.raises(DuplicateEdgeError) as e:
        c.succeed(a, b, a)
    assert "'a'" in str(e.value)
    assert _edges(g) == [] and g.num_edges == 0
    other = cg.Graph("other")
    x = other.empty(name="x")
    with pytest.raises(ForeignNodeError) as e2:
        c.succeed(a, x)
    assert "'x'" in str(e2.value) and "'other'" in str(e2.value)
    assert _edges(g) == [] and g.num_edges == 0 and a.successors == ()


# ---------------------------------------------------------------- copying
@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_graph_copy_refused(how) -> None:  # type: ignore[no-untyped-def]
    g = cg.Graph("main")
    g.empty()
    with pytest.raises(DefinitionError, match=r"Graph 'main' cannot be copied.*build a new Graph"):
        how(g)
    assert len(g.nodes) == 1


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_node_copy_refused(how) -> None:  # type: ignore[no-untyped-def]
    g = cg.Graph("main")
    a = g.empty(name="a")
    with pytest.raises(DefinitionError, match=r"empty#0 'a' cannot be copied"):
        how(a)
    g.empty(after=a)
    assert len(a.successors) == 1
