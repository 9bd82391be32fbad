"""Hardening of the graph core: foreign params, typed errors for bad arguments, edge edits at scale,
deep nesting, and concurrent building (GPU-free)."""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.errors import CudaGraphError, DefinitionError, ForeignNodeError, OperandError


class CUkernel:  # recognised as a kernel handle by type name
    pass


K = CUkernel()
PTR = 0x10000


# ---------------------------------------------------------------- foreign params
def test_foreign_param_kernel_argument_clashing_with_own_refused() -> None:
    other = cg.Graph("other")
    p = other.param("x")
    g = cg.Graph("main")
    g.param("x")
    with pytest.raises(ForeignNodeError) as e:
        g.kernel(K, 1, 32, (np.int32(1), p), name="k")
    msg = str(e.value)
    assert "kernel#0 'k'" in msg and "argument 1" in msg and "'x'" in msg
    assert "'other'" in msg and "'main'" in msg
    assert len(g.nodes) == 0


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda g, p: g.memcpy(p, PTR, nbytes=4, name="n"), "dst"),
        (lambda g, p: g.memcpy(PTR, p, nbytes=4, name="n"), "src"),
        (lambda g, p: g.memset(p, 0, count=4, element_size=4, name="n"), "dst"),
    ],
)
def test_foreign_param_pointer_operand_clashing_with_own_refused(build, field) -> None:  # type: ignore[no-untyped-def]
    other = cg.Graph("other")
    p = other.param("x")
    g = cg.Graph("main")
    g.param("x", np.int32)
    with pytest.raises(ForeignNodeError) as e:
        build(g, p)
    msg = str(e.value)
    assert "'n'" in msg and field in msg and "'other'" in msg and "'main'" in msg
    assert len(g.nodes) == 0


@pytest.mark.parametrize(
    "build",
    [
        lambda g, p: g.kernel(K, 1, 32, (np.int32(1), p)),
        lambda g, p: g.memcpy(p, PTR, nbytes=4),
        lambda g, p: g.memset(p, 0, count=4, element_size=4),
        lambda g, p: g.kernel(K, 1, 32, (np.int32(1),)).update(args=(p,)),
    ],
)
def test_foreign_param_is_taken_in_and_must_be_bound(build) -> None:  # type: ignore[no-untyped-def]
    other = cg.Graph("other")
    p = other.param("x")
    g = cg.Graph("main")
    build(g, p)
    assert g.params == {"x": p}  # listed, so instantiate() requires it bound
    g.validate()


def test_foreign_param_taken_in_while_the_building_graph_has_params_too() -> None:
    g = cg.Graph("main")
    own = g.param("n", np.int32)
    other = cg.Graph("other")
    p = other.param("x")
    g.kernel(K, 1, 32, (own, p))
    assert g.params == {"n": own, "x": p}


def test_own_and_enclosing_params_accepted() -> None:
    other = cg.Graph("other")
    other.param("y")  # two graphs with params: every kernel looks at its arguments
    g = cg.Graph("main")
    p = g.param("x")
    g.kernel(K, 1, 32, (p,))
    g.memset(p, 0, count=4, element_size=4)
    cond = g.condition(default=1)
    node = g.if_(cond)
    k = node.body.kernel(K, 1, 32, (p,))  # a conditional body uses its enclosing graph's params
    node.body.memcpy(p, PTR, nbytes=4)
    k.update(args=(p, np.int32(2)))  # and so does an update of one of its nodes
    assert node.body.params == g.params == {"x": p}  # a body shares its parent's params
    g.validate()


def test_body_refuses_foreign_param_shadowing_an_enclosing_one() -> None:
    g = cg.Graph("main")
    g.param("x")
    node = g.if_(g.condition(default=1))
    p = cg.Graph("other").param("x")
    with pytest.raises(ForeignNodeError) as e:
        node.body.kernel(K, 1, 32, (p,), name="k")
    assert "argument 0" in str(e.value) and "'other'" in str(e.value) and "'main'" in str(e.value)


# ---------------------------------------------------------------- typed errors for bad arguments
@pytest.mark.parametrize("dtype", ["notadtype", object, np.str_, "U4", "M8", 3.5])
def test_param_bad_dtype_refused(dtype) -> None:  # type: ignore[no-untyped-def]
    g = cg.Graph("main")
    with pytest.raises(OperandError) as e:
        g.param("x", dtype)
    assert "param 'x'" in str(e.value) and "dtype" in str(e.value)
    assert g.params == {}


def test_param_bad_dtype_on_redeclaration_refused() -> None:
    g = cg.Graph("main")
    g.param("x", np.int32)
    with pytest.raises(OperandError) as e:
        g.param("x", "notadtype")
    assert "param 'x'" in str(e.value) and "notadtype" in str(e.value)


def test_param_unhashable_name_refused() -> None:
    g = cg.Graph("main")
    with pytest.raises(DefinitionError) as e:
        g.param(["x"])  # type: ignore[arg-type]
    assert "param name" in str(e.value) and "['x']" in str(e.value)


@pytest.mark.parametrize("limit, words", [("x", "limit must be an int, got str"), (-1, "non-negative"), (1.5, "float")])
def test_summary_bad_limit_refused(limit, words) -> None:  # type: ignore[no-untyped-def]
    g = cg.Graph("main")
    g.empty()
    with pytest.raises(OperandError) as e:
        g.summary(limit=limit)
    assert "summary" in str(e.value) and words in str(e.value)
    assert isinstance(e.value, CudaGraphError)


def test_summary_numpy_limit_accepted() -> None:
    g = cg.Graph("main")
    g.empty()
    g.empty()
    assert g.summary(limit=np.int64(1)) == g.summary(limit=1)


def test_param_gate_follows_live_graphs() -> None:
    import gc

    from cudagraph.definition.param import _LIVE, PARAM_GRAPH

    g = cg.Graph("main")
    g.param("x")
    other = cg.Graph("other")
    p = other.param("x")
    assert PARAM_GRAPH[0] == -1  # two graphs with params: kernels look at their arguments
    g2 = cg.Graph("g2")
    g2.kernel(K, 1, 32, (p,))
    assert g2.params == {"x": p}
    ids = {id(g), id(other)}
    assert ids <= set(_LIVE) and id(g2) not in _LIVE  # g2 took p in: it declared none
    del g, g2, other, p
    gc.collect()
    assert not ids & set(_LIVE)  # collected graphs no longer count


# ---------------------------------------------------------------- edge edits at scale
class _NoScan(list):  # type: ignore[type-arg]
    """A predecessor list that refuses to be scanned from Python (the edge tests must not walk it)."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("the predecessor list was scanned")


def test_add_and_remove_edge_do_not_scan_the_predecessors() -> None:
    g = cg.Graph("main")
    ns = [g.empty(name=f"n{i}") for i in range(50)]
    hub = ns[-1]
    g.add_edge(ns[0], hub)
    hub._preds = _NoScan(hub._preds)
    for n in ns[1:-1]:
        g.add_edge(n, hub)
    with pytest.raises(cg.errors.DuplicateEdgeError) as e:
        g.add_edge(ns[3], hub)
    assert "empty#3 'n3' -> empty#49 'n49' exists already" in str(e.value)
    for n in ns[10:20]:
        g.remove_edge(n, hub)
    with pytest.raises(DefinitionError) as e2:
        g.remove_edge(ns[10], hub)
    assert "no edge empty#10 'n10' -> empty#49 'n49'" in str(e2.value)
    assert [p.index for p in list.__iter__(hub._preds)] == [*range(10), *range(20, 49)]  # order kept
    assert g.num_edges == 39


def test_add_edge_cycle_search_is_not_run_on_every_edge_after_a_backward_one(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from cudagraph.definition import graph as graph_mod

    g = cg.Graph("main")
    ns = [g.empty(name=f"n{i}") for i in range(100)]
    g.add_edge(ns[99], ns[0])  # backward by index: the index order is no longer a topological order

    def no_search(src, dst):  # type: ignore[no-untyped-def]
        raise AssertionError("a whole-graph path search ran")

    monkeypatch.setattr(graph_mod, "find_path", no_search)
    for i in range(1, 98):
        g.add_edge(ns[i], ns[i + 1])  # forward edges cannot close a cycle
    g.add_edge(ns[99], ns[50])  # backward by index, closes no cycle: settled among the nodes in between
    monkeypatch.undo()
    with pytest.raises(cg.errors.CycleError) as e:
        g.add_edge(ns[60], ns[3])  # 3 -> ... -> 60 along the chain
    msg = str(e.value)
    assert "add_edge: empty#60 'n60' -> empty#3 'n3' would close the cycle empty#3 'n3' -> empty#4 'n4'" in msg
    assert e.value.cycle[0] is ns[3] and e.value.cycle[-2] is ns[60] and len(e.value.cycle) == 59
    with pytest.raises(cg.errors.CycleError) as e:
        g.add_edge(ns[50], ns[99])  # 99 -> 50 exists
    assert "would close the cycle empty#99 'n99' -> empty#50 'n50' -> empty#99 'n99'" in str(e.value)
    assert g.num_edges == 99
    order = {n.index: i for i, n in enumerate(g.topological_order())}
    assert all(order[s.index] < order[d.index] for s, d in g.edges)
    g.validate()
