"""Raw errors a red-team sweep found, each now a typed error naming the node and the argument, nothing half-built.

- compat ``GraphNode.pred`` / ``succ``: full mutable sets as cuda.core's (the operators give plain sets, the
  in-place ones and assignment change the edges all or nothing; what is no node is refused as a TypeError,
  which cuda.core raises, and typed);
- compat ``memset`` shapes and fill values, ``Graph.alloc(peer_access=)``, ``Graph.add_edge(programmatic=)``,
  ``Graph.wait_value(flush=)``, ``Graph.host_function(user_data=)`` with values of no truth value or that
  cannot be read;
- ``pickle`` of a Graph, a node, a Param, a Condition, a Path: refused by name, as ``copy.copy`` is;
- ``host_function`` of an address in the null page (the eager run would jump there); the graph source of
  ``lift`` looked at before the driver; a ``str`` subclass as a kernel's name.
"""

from __future__ import annotations

import ctypes
import pickle
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import compat
from cudagraph.errors import CudaGraphError, CycleError, DefinitionError, ForeignNodeError, OperandError


def _edges(gd: compat.GraphDefinition) -> list[tuple[int, int]]:
    """The edges of ``gd`` by node index, in the order of each node's predecessor list (what a half-built
    edit would change)."""
    return [(p.index, n.index) for n in gd.graph.nodes for p in n.predecessors]


def _chain() -> tuple[compat.GraphDefinition, Any, Any, Any, Any]:
    """``a -> b -> c`` and ``d`` on its own."""
    gd = compat.GraphDefinition()
    a = gd.empty()
    b = a.empty()
    c = b.empty()
    d = gd.empty()
    return gd, a, b, c, d


# ------------------------------------------------------------------------------------------ pred / succ
def test_the_set_operators_give_plain_sets_and_change_no_edge() -> None:
    gd, a, b, c, d = _chain()
    before = _edges(gd)
    assert b.pred | {d} == {a, d} and type(b.pred | {d}) is set
    assert b.pred & {a, d} == {a}
    assert b.pred - {a} == set()
    assert b.pred ^ {a, d} == {d}
    assert b.succ | [d] == {c, d}  # any iterable, as a set's operators take it
    assert {d} | b.pred == {a, d}  # reflected
    assert b.pred <= {a, d} and b.pred.isdisjoint({c, d}) and b.pred == {a}
    assert _edges(gd) == before


def test_the_in_place_operators_change_the_edges() -> None:
    gd, a, b, c, d = _chain()
    p = b.pred
    p |= {d}
    assert b.pred == {a, d} and _edges(gd) == [(0, 1), (3, 1), (1, 2)]
    p -= {a}
    assert b.pred == {d}
    p ^= {a, d}
    assert b.pred == {a}
    p &= {d}
    assert b.pred == set()
    b.pred |= {a, d}  # through the property: the assignment that follows changes nothing more
    assert b.pred == {a, d}
    b.succ -= b.succ
    assert b.succ == set() and c.pred == set()


@pytest.mark.parametrize(
    "edit",
    [
        lambda a, c, f: setattr(a, "pred", [c]),  # d -> a removed first, then c -> a refused
        lambda a, c, f: setattr(c, "succ", [a]),  # c -> e removed first, then c -> a refused
        lambda a, c, f: a.pred.update([f], [c]),  # f -> a added first, then c -> a refused
        lambda a, c, f: a.pred.__ior__([f, c]),
        lambda a, c, f: c.succ.__ixor__([f, a]),  # c -> f added first, then c -> a refused
    ],
    ids=["pred=", "succ=", "update", "|=", "^="],
)
def test_an_edit_refused_for_a_cycle_leaves_every_edge_as_it_was(edit: Any) -> None:
    gd, a, _b, c, d = _chain()
    e, f = gd.empty(), gd.empty()
    a.pred = [d]
    c.succ = [e]
    before = _edges(gd)
    with pytest.raises(CycleError) as err:
        edit(a, c, f)
    assert "would close the cycle" in str(err.value) and "empty#2" in str(err.value)
    assert _edges(gd) == before and a.pred == {d} and c.succ == {e}
    assert f.succ == set() and f.pred == set()


def test_assigning_replaces_the_set_all_or_nothing() -> None:
    gd, a, b, c, d = _chain()
    c.pred = [a, d, a]  # duplicates count once
    assert c.pred == {a, d} and sorted(_edges(gd)) == [(0, 1), (0, 2), (3, 2)]
    c.pred = b  # one GraphNode, as cuda.core takes it
    assert c.pred == {b}
    c.succ = ()
    assert c.succ == set()
    d.succ = (x for x in [b])
    assert b.pred == {a, d}


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        (
            5,
            OperandError,
            "compat GraphNode.pred assignment: expected a GraphNode or an iterable of GraphNodes, got int",
        ),
        (None, OperandError, "got NoneType"),
        (np.array(3), OperandError, "got ndarray (it cannot be iterated)"),
        ([5], OperandError, "compat GraphNode.pred assignment: expected a GraphNode of the definition, got int"),
        (["x"], OperandError, "got str"),
        ("ab", OperandError, "got str"),
        ([compat.GraphDefinition().empty()], ForeignNodeError, "is a node of another GraphDefinition"),
    ],
)
def test_assigning_what_is_no_node_is_refused_by_name_and_changes_nothing(value: Any, error: Any, text: str) -> None:
    gd, a, b, _c, _d = _chain()
    before = _edges(gd)
    with pytest.raises(error) as e:
        b.pred = value
    assert text in str(e.value)
    assert isinstance(e.value, TypeError) == (error is OperandError)  # cuda.core: TypeError
    assert _edges(gd) == before and b.pred == {a}  # the old edge is kept


def test_the_entry_point_and_a_bad_member_are_refused_before_any_edge_changes() -> None:
    gd, a, b, c, d = _chain()
    before = _edges(gd)
    with pytest.raises(OperandError, match=r"compat GraphNode.succ.update: expected a GraphNode of the definition"):
        d.succ.update([c], [b, 1])
    with pytest.raises(OperandError, match=r"compat GraphNode.pred \|=: the entry point has no edges"):
        d.pred |= {a, compat.GraphNode(gd, None)}
    with pytest.raises(OperandError, match=r"the entry point has no edges"):
        compat.GraphNode(gd, None).pred = [a]
    compat.GraphNode(gd, None).pred = []  # nothing to do: allowed
    assert _edges(gd) == before
    with pytest.raises(TypeError):  # a set operator with a non-iterable: Python's (and cuda.core's) TypeError
        b.pred | 5  # type: ignore[operator]
    with pytest.raises(TypeError):
        p = b.pred
        p &= 5  # type: ignore[operator]
    assert _edges(gd) == before
    b.pred.discard(5)  # type: ignore[arg-type]  # not a member: nothing, as cuda.core
    b.pred -= {5}
    assert _edges(gd) == before


# --------------------------------------------------------------------------------- compat memset
@pytest.mark.parametrize(
    ("kw", "error", "text"),
    [
        ({"height": "2"}, OperandError, "compat GraphNode.memset: height: expected an int, got str"),
        ({"height": None}, OperandError, "height: expected an int, got NoneType"),
        ({"height": 2, "pitch": "8"}, OperandError, "pitch: expected an int, got str"),
        ({"pitch": "8"}, OperandError, "pitch: expected an int, got str"),  # checked for one row too
        ({"height": 2, "pitch": np.array([8, 8])}, OperandError, "pitch: expected an int, got ndarray"),
        ({"height": 0}, DefinitionError, "height: must be positive"),  # was taken as one row
        ({"height": -1}, DefinitionError, "height: must be positive"),
        ({"pitch": -1}, DefinitionError, "pitch: must be 0 (rows of width elements) or positive"),
        ({"width": None}, OperandError, "width: expected an int, got NoneType"),
    ],
)
def test_compat_memset_shapes_are_refused_by_name(kw: dict[str, Any], error: Any, text: str) -> None:
    gd = compat.GraphDefinition()
    a = gd.empty()
    args = {"width": 4, **kw}
    with pytest.raises(error) as e:
        a.memset(0x10000, 0, args.pop("width"), **args)
    assert text in str(e.value)
    assert len(gd.nodes()) == 1 and _edges(gd) == []


def test_compat_memset_takes_numpy_integers_and_a_2d_shape() -> None:
    gd = compat.GraphDefinition()
    n = gd.memset(0x10000, 7, np.int32(4), height=np.int64(3), pitch=np.uint32(16))
    assert (n.width, n.height, n.pitch) == (4, 3, 16)
    m = gd.memset(0x10000, 7, 4, height=1, pitch=64)  # one row: the pitch is not used
    assert (m.width, m.height, m.pitch) == (4, 1, 0)


def test_compat_memset_update_shapes_are_refused_and_change_nothing() -> None:
    gd = compat.GraphDefinition()
    n = gd.memset(0x10000, 7, 4, height=2, pitch=8)
    with pytest.raises(OperandError, match=r"compat MemsetNode.update: height: expected an int, got str"):
        n.update(height="3")
    with pytest.raises(OperandError, match=r"compat MemsetNode.update: pitch: expected an int, got ndarray"):
        n.update(pitch=np.array([1, 2]))
    assert (n.width, n.height, n.pitch) == (4, 2, 8)


def test_compat_memset_value_that_cannot_be_read_is_refused_as_cuda_core_refuses_it() -> None:
    gd = compat.GraphDefinition()
    mv = memoryview(b"\x01\x02")
    mv.release()
    with pytest.raises(DefinitionError) as e:
        gd.memset(0x10000, mv, 4)
    assert isinstance(e.value, ValueError)  # cuda.core: ValueError
    assert "compat GraphNode.memset: value: the memoryview cannot be read" in str(e.value)
    assert len(gd.nodes()) == 0
    n = gd.memset(0x10000, 1, 4)
    with pytest.raises(DefinitionError, match=r"compat MemsetNode.update: value: the memoryview cannot be read"):
        n.update(value=mv)
    assert n.value == 1


# ------------------------------------------------------------------------- builders' raw errors
def test_alloc_peer_access_that_cannot_be_iterated_is_refused() -> None:
    g = cg.Graph("g")
    with pytest.raises(OperandError) as e:
        g.alloc(64, peer_access=np.array(3))
    assert "alloc#0 'alloc': peer_access must be an iterable" in str(e.value) and "ndarray" in str(e.value)
    assert len(g) == 0
    assert g.alloc(64, peer_access=np.array([1, 2, 1])).peer_access == (1, 2)


@pytest.mark.parametrize("value", [np.array([1, 2]), np.array(3), 1, 1.0, None, b"programmatic"])
def test_add_edge_programmatic_of_no_kind_is_refused_by_name(value: Any) -> None:
    g = cg.Graph("g")
    a, b = g.empty(name="a"), g.empty(name="b")
    with pytest.raises(OperandError) as e:
        g.add_edge(a, b, programmatic=value)
    assert "add_edge: empty#0 'a' -> empty#1 'b': programmatic must be a bool or one of" in str(e.value)
    assert type(value).__name__ in str(e.value)
    assert g.num_edges == 0 and b.predecessors == ()


def test_add_edge_programmatic_numpy_false_is_a_plain_edge() -> None:
    g = cg.Graph("g")
    a, b = g.empty(), g.empty()
    g.add_edge(a, b, programmatic=np.bool_(False))
    assert b.predecessors == (a,)
    with pytest.raises(DefinitionError, match="a programmatic edge joins two kernel nodes"):
        g.add_edge(b, g.empty(), programmatic=np.bool_(True))  # a bool: the kinds are what is wrong


@pytest.mark.parametrize("value", [np.array([1, 2]), np.array(3), "yes", 2, None])
def test_wait_value_flush_of_no_truth_is_refused_by_name(value: Any) -> None:
    g = cg.Graph("g")
    with pytest.raises(OperandError) as e:
        g.wait_value(0x10000, 1, flush=value)
    assert "wait_value#0 'wait_value': flush must be a bool, got " + type(value).__name__ in str(e.value)
    assert len(g) == 0


def test_wait_value_flush_takes_bools_of_numpy_and_0_or_1() -> None:
    g = cg.Graph("g")
    assert g.wait_value(0x10000, 1, flush=np.bool_(True)).describe().endswith("flush)")
    assert not g.wait_value(0x10000, 1, flush=0).describe().endswith("flush)")


CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@CALLBACK
def _host_fn(data: Any) -> None:  # never called: only its address is read
    pass


def test_host_function_user_data_that_cannot_be_read_is_refused_by_name() -> None:
    g = cg.Graph("g")
    mv = memoryview(b"\x01\x02")
    mv.release()
    with pytest.raises(DefinitionError) as e:
        g.host_function(_host_fn, mv, name="cb")
    assert str(e.value).startswith("host_function#0 'cb': user_data: the memoryview cannot be read")
    assert len(g) == 0
    gd = compat.GraphDefinition()
    with pytest.raises(ValueError, match="user_data: the memoryview cannot be read"):  # cuda.core: ValueError
        gd.callback(_host_fn, user_data=mv)
    assert len(gd.nodes()) == 0
    n = g.host_function(_host_fn, b"\x01")
    with pytest.raises(DefinitionError, match="user_data: the memoryview cannot be read"):
        n.update(user_data=mv)
    assert n.user_data == b"\x01"


# ------------------------------------------------------------------------------------------ pickling
def _objects() -> dict[str, tuple[Any, str]]:
    g = cg.Graph("main")
    a = g.empty(name="a")
    return {
        "graph": (g, "Graph 'main' cannot be pickled"),
        "node": (a, "empty#0 'a' cannot be pickled (it and its edges belong to Graph 'main')"),
        "condition": (g.condition(default=1, name="c"), "condition#0 'c' cannot be pickled or copied"),
        "path": (g.path(after=a), "a Path of Graph 'main' cannot be pickled or copied"),
        "body node": (g.while_(g.condition(default=0)).body.empty(name="x"), "empty#0 'x' cannot be pickled"),
        "param": (g.param("x"), "Graph 'main' cannot be pickled"),  # (reached through its graph)
    }


@pytest.mark.parametrize("what", ["graph", "node", "condition", "path", "body node", "param"])
def test_pickling_is_refused_by_name(what: str) -> None:
    obj, text = _objects()[what]
    graph = getattr(obj, "graph", obj)
    nodes, edges = len(graph), graph.num_edges
    with pytest.raises(DefinitionError) as e:
        pickle.dumps(obj)
    assert isinstance(e.value, CudaGraphError) and text in str(e.value)
    assert len(graph) == nodes and graph.num_edges == edges


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("what", ["graph", "node", "condition", "path"])
def test_pickling_is_refused_in_every_protocol(what: str, protocol: int) -> None:
    obj, text = _objects()[what]
    with pytest.raises(DefinitionError, match=text.split(" cannot")[0]):
        pickle.dumps(obj, protocol=protocol)


@pytest.mark.parametrize("protocol", [0, pickle.DEFAULT_PROTOCOL])
def test_pickling_a_param_names_the_param(protocol: int) -> None:
    g = cg.Graph("main")
    with pytest.raises(DefinitionError, match=r"param 'x'"):
        pickle.dumps(g.param("x"), protocol=protocol)


def test_a_compat_node_is_refused_through_its_graph() -> None:
    gd = compat.GraphDefinition()
    with pytest.raises(DefinitionError, match="Graph 'GraphDefinition' cannot be pickled"):
        pickle.dumps(gd.empty())


# ------------------------------------------------------------------- null-page functions, lift, names
@pytest.mark.parametrize("fn", [32, 1, 0xFFFF, ctypes.c_void_p(32).value])
def test_host_function_refuses_an_address_in_the_null_page(fn: Any) -> None:
    g = cg.Graph("g")
    with pytest.raises(OperandError) as e:
        g.host_function(fn, name="cb")
    assert str(e.value).startswith(f"host_function#0 'cb': fn: {fn:#x} is not a function address (below 0x10000")
    assert len(g) == 0
    n = g.host_function(_host_fn)
    with pytest.raises(OperandError, match=r"fn: 0x20 is not a function address"):
        n.update(fn=32)
    assert n.fn is _host_fn


@pytest.mark.parametrize("fn", [0, -1, 1 << 64])
def test_host_function_refuses_what_is_no_address(fn: int) -> None:
    g = cg.Graph("g")
    with pytest.raises(OperandError, match=r"fn: -?0x[0-9a-f]+ is not a function address"):
        g.host_function(fn)
    assert len(g) == 0


def test_host_function_takes_an_address_above_the_null_page() -> None:
    g = cg.Graph("g")
    assert g.host_function(0x10000).fn_address == 0x10000


class _NoGraph:
    graph = "not an int"


@pytest.mark.parametrize(
    ("obj", "text"),
    [
        (None, "cannot find a CUgraph in NoneType: expected a CUgraph, a positive int handle"),
        (True, "cannot find a CUgraph in bool"),
        (np.bool_(True), "cannot find a CUgraph in bool"),
        (0, "cannot find a CUgraph in int (the int is 0x0, not a handle)"),
        (-5, "cannot find a CUgraph in int (the int is -0x5, not a handle)"),
        (1 << 64, "not a handle"),
        (np.int64(-1), "cannot find a CUgraph in int64"),
        ("graph", "cannot find a CUgraph in str"),
        (object(), "cannot find a CUgraph in object"),
        (_NoGraph(), "cannot find a CUgraph in _NoGraph"),
        (cg.Graph("g"), "cannot find a CUgraph in Graph"),
    ],
)
def test_a_lift_source_is_refused_by_its_type_before_any_driver_call(
    obj: Any, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cudagraph.materialize import graph_handles

    def no_driver() -> Any:
        raise AssertionError("the driver was asked for before the source was looked at")

    monkeypatch.setattr(graph_handles, "require_driver", no_driver)
    with pytest.raises(OperandError) as e:
        graph_handles.cuda_graph_handle(obj)
    assert text in str(e.value)


def test_a_positive_int_is_still_a_raw_cugraph_handle() -> None:
    pytest.importorskip("cuda.bindings")
    from cudagraph.materialize.graph_handles import cuda_graph_handle

    assert int(cuda_graph_handle(0x1234)) == 0x1234
    assert int(cuda_graph_handle(np.uint64(0x5678))) == 0x5678


@pytest.mark.parametrize("obj", [None, True, object()])
def test_lift_names_the_type_of_what_is_no_graph_before_the_driver(obj: Any) -> None:
    with pytest.raises(OperandError, match=f"cannot find a CUgraph in {type(obj).__name__}"):
        cg.lift(obj)


class CUkernel:  # a kernel handle by its type's name
    pass


def test_kernel_takes_a_str_subclass_as_name_as_every_builder() -> None:
    g = cg.Graph("g")
    for build in (lambda n: g.empty(name=n), lambda n: g.memset(0x10000, 0, 4, name=n)):
        assert build(np.str_("k")).name == "k"
    assert g.kernel(CUkernel(), 1, 32, (), name=np.str_("k")).name == "k"
