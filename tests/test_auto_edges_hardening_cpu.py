"""Hardening of access declarations and edges from data, found by ``scripts/red_team.py --access`` (GPU-free).

- A conditional node's edges from data, inferred after the graph's edges were read (``num_edges``,
  ``successors``, a summary), are on both ends: successor lists, edge count, ``remove_edge``, ``remove``.
- An edit in place (``add_edge``, ``remove_edge``, ``remove``) settles a pending conditional node first:
  an edge checked before its edges from data can no longer close a cycle with them.
- A declared range outside the address space (a negative int address, one running past 2**64) is refused
  naming the node and argument, leaving the graph as it was.
"""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.errors import CycleError, OperandError


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K = CUkernel()
A = 0x10000


def _consistent(g: cg.Graph) -> None:
    """Every edge on both ends, the edge count right, and validate() passes."""
    count = 0
    for n in g.nodes:
        count += len(n.predecessors)
        for p in n.predecessors:
            assert sum(s is n for s in p.successors) == 1
    for n in g.nodes:
        for s in n.successors:
            assert n in s.predecessors
    assert g.num_edges == count
    g.validate()


def _writer_then_pending_reader(read_edges_first: bool) -> tuple[cg.Graph, cg.Node, cg.Node]:
    g = cg.Graph("g", edges="auto")
    w = g.kernel(K, 1, 32, (cg.Out(A, nbytes=64),), name="writer")
    cond = g.if_(g.condition(default=1), name="cond")
    cond.body.kernel(K, 1, 32, (cg.In(A, nbytes=64),), name="reader")
    if read_edges_first:
        assert g.num_edges == 0  # (reads the edges: folds them, the conditional's still pending)
        assert w.successors == ()
    return g, w, cond


@pytest.mark.parametrize("settle", ["validate", "races", "next node", "summary then next node"])
def test_pending_conditional_settled_after_edges_were_read_is_linked_on_both_ends(settle: str) -> None:
    g, w, cond = _writer_then_pending_reader(read_edges_first=True)
    if settle == "validate":
        g.validate()
    elif settle == "races":
        assert g.races() == []
    else:
        if settle.startswith("summary"):
            g.summary()
        g.empty(name="next")
    assert cond.predecessors == (w,)
    assert w.successors == (cond,)
    assert g.num_edges == 1
    _consistent(g)


def test_pending_conditional_edge_can_be_removed_after_it_was_linked() -> None:
    g, w, cond = _writer_then_pending_reader(read_edges_first=True)
    g.validate()
    g.remove_edge(w, cond)
    assert cond.predecessors == () and w.successors == () and g.num_edges == 0
    (race,) = g.races()
    assert {race.first, race.second} == {w, cond}
    _consistent(g)


def test_remove_after_a_late_edge_leaves_the_graph_consistent() -> None:
    g, w, cond = _writer_then_pending_reader(read_edges_first=True)
    g.validate()
    g.remove(w)
    assert cond.predecessors == () and g.num_edges == 0
    _consistent(g)


def test_add_edge_settles_a_pending_conditional_first_no_cycle() -> None:
    g, w, cond = _writer_then_pending_reader(read_edges_first=False)
    # Before the fix the edge cond -> w was checked against a graph without w -> cond, then settling added
    # w -> cond: a cycle that validate() could not even name (kahn_order and find_cycle disagreed).
    with pytest.raises(CycleError):
        g.add_edge(cond, w)
    assert cond.predecessors == (w,) and w.predecessors == ()
    _consistent(g)


def test_remove_edge_and_remove_settle_a_pending_conditional_first() -> None:
    g, w, cond = _writer_then_pending_reader(read_edges_first=False)
    g.remove_edge(w, cond)  # the edge from data exists by the time the edit runs
    assert cond.predecessors == () and g.num_edges == 0
    _consistent(g)
    g2, w2, cond2 = _writer_then_pending_reader(read_edges_first=False)
    other = g2.empty(name="other")
    g2.remove(other)
    assert cond2.predecessors == (w2,)
    _consistent(g2)


@pytest.mark.parametrize(
    "wrapped",
    [
        lambda p: cg.In(-8, nbytes=4),
        lambda p: cg.Out(np.int64(-4096), nbytes=64),
        lambda p: cg.InOut(2**64 - 2, nbytes=8),
        lambda p: cg.In(2**64 - 16, offset=8, nbytes=16),
        lambda p: cg.Out(p, offset=2**63, nbytes=2**63 + 1),
    ],
)
@pytest.mark.parametrize("edges", ["auto", "manual"])
def test_declared_range_outside_the_address_space_is_refused(wrapped: object, edges: str) -> None:
    g = cg.Graph("g", edges=edges)
    p = g.param("p")
    before = g.kernel(K, 1, 32, (cg.Out(A, nbytes=64),), name="before")
    w = wrapped(p)  # type: ignore[operator]
    with pytest.raises(
        OperandError, match=r"kernel#1 'k': argument 1: the declared range .* outside the address space"
    ):
        g.kernel(K, 1, 32, (cg.In(A, nbytes=4), w), name="k")
    with pytest.raises(OperandError, match=r"host#1 'h': writes\[0\]: the declared range"):
        g.host(print, writes=[w], name="h")
    assert g.nodes == (before,) and g.num_edges == 0
    assert g._declared is not None and list(g._declared) == [before]
    # Before the fix a region below 0 wrapped around the range table of the race check (bisect gave index
    # -1), and one past 2**64 raised IndexError from races().
    assert g.races() == []


def test_a_range_ending_exactly_at_the_top_of_the_address_space_is_accepted() -> None:
    g = cg.Graph("g", edges="auto")
    a = g.kernel(K, 1, 32, (cg.Out(2**64 - 8, nbytes=8),))
    b = g.kernel(K, 1, 32, (cg.In(2**64 - 4, nbytes=4),))
    assert b.predecessors == (a,)
    assert g.races() == []


@pytest.mark.parametrize("space", ["param", "alloc"])
def test_a_read_at_the_start_of_an_untouched_space_does_not_cover_the_rest_of_it(space: str) -> None:
    # A first read of [0, 32) of a parameter (or allocation) joined the readers of the whole untouched range
    # [0, 2**64): a later write of [48, 64) got an edge from it, with no conflict.
    g = cg.Graph("g", edges="auto")
    mem = g.param("p") if space == "param" else g.alloc(256)
    r = g.kernel(K, 1, 32, (cg.In(mem, nbytes=32),), name="reader")
    w = g.kernel(K, 1, 32, (cg.InOut(mem, offset=48, nbytes=16),), name="writer")
    assert w.predecessors == ((mem,) if space == "alloc" else ())
    w2 = g.kernel(K, 1, 32, (cg.Out(mem, offset=16, nbytes=8),), name="overlaps")
    assert w2.predecessors == (r,)
    assert g.races() == []


def test_body_filled_after_the_conditional_settled_gets_no_edge_and_races_names_it() -> None:
    """The documented limit: a body written to after its conditional node's edges were settled adds no edge
    from data to that node; races() reads the bodies as they are and names what is then missing."""
    g = cg.Graph("g", edges="auto")
    cond = g.if_(g.condition(default=1), name="cond")
    reader = g.kernel(K, 1, 32, (cg.In(A, nbytes=64),), name="reader")  # settles cond (it declared nothing)
    cond.body.kernel(K, 1, 32, (cg.Out(A, nbytes=64),), name="late writer")
    assert reader.predecessors == ()
    (race,) = g.races()
    assert (race.first, race.second, race.accesses) == (cond, reader, "write/read")
    assert (race.lo, race.hi) == (A, A + 64)
