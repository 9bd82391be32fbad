"""Hardening of the graph core: foreign params, typed errors for bad arguments, edge edits at scale,
deep nesting, and concurrent building (GPU-free)."""

from __future__ import annotations

import itertools
import random

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
    # each removed entry's place is taken by the list's last one
    assert [p.index for p in list.__iter__(hub._preds)] == [*range(10), *range(48, 38, -1), *range(20, 39)]
    assert g.num_edges == 39
    assert set(list.__iter__(hub._preds)) == set(ns[:10] + ns[20:49])


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


# ---------------------------------------------------------------- deep nesting
DEEP = 2000


def _deep_children(levels: int, leaf: str = "leaf") -> cg.Graph:
    """``levels`` graphs, each the child of the one before; the innermost holds one empty node.

    Built from the outside in, so that each ``child()`` call sees an empty graph.
    """
    root = g = cg.Graph("g0")
    for i in range(1, levels):
        g = g.child(cg.Graph(f"g{i}"), name=f"c{i}").body
    g.empty(name=leaf)
    return root


def _deep_conditionals(levels: int, leaf: str = "leaf") -> cg.Graph:
    """An if node whose body holds an if node ... ``levels`` deep; the innermost body holds one empty node."""
    g = cg.Graph("root")
    body = g.if_(g.condition(default=1), name="if0").body
    for i in range(1, levels):
        body = body.if_(g.condition(default=1), name=f"if{i}").body
    body.empty(name=leaf)
    return g


@pytest.mark.parametrize(
    "make, node",
    [(_deep_children, "child#0 'c129' of Graph 'g128'"), (_deep_conditionals, "if#0 'if128' of Graph 'root/")],
    ids=["children", "conditionals"],
)
def test_deep_nesting_refused_by_validate_and_instantiate(make, node) -> None:  # type: ignore[no-untyped-def]
    from cudagraph.definition.core import MAX_NESTING

    g = make(DEEP)
    for call in (g.validate, g.instantiate, g.run):
        with pytest.raises(DefinitionError) as e:
            call()
        msg = str(e.value)
        assert msg.startswith(node), msg[:200]
        assert f"its body is nested {MAX_NESTING + 1} levels deep" in msg
        assert f"nest at most {MAX_NESTING} levels" in msg


@pytest.mark.parametrize(
    "make, extra", [(_deep_children, 1), (_deep_conditionals, 0)], ids=["children", "conditionals"]
)
def test_nesting_at_the_limit_validates_one_more_is_refused(make, extra) -> None:  # type: ignore[no-untyped-def]
    from cudagraph.definition.core import MAX_NESTING

    make(MAX_NESTING + extra).validate()  # MAX_NESTING levels of bodies
    with pytest.raises(DefinitionError, match=f"nested {MAX_NESTING + 1} levels deep"):
        make(MAX_NESTING + extra + 1).validate()


def test_graph_containing_itself_still_refused() -> None:
    g = cg.Graph("loop")
    g.empty()
    node = g.child(cg.Graph("inner"))
    node.body = g  # type: ignore[attr-defined]
    with pytest.raises(DefinitionError) as e:
        g.validate()
    assert "Graph 'loop' contains itself through child nodes" in str(e.value)


@pytest.mark.parametrize("make", [_deep_children, _deep_conditionals], ids=["children", "conditionals"])
def test_deep_nesting_signature_diff_and_param_walks(make) -> None:  # type: ignore[no-untyped-def]
    from cudagraph.definition.bindings import body_uses_params
    from cudagraph.definition.core import MAX_NESTING
    from cudagraph.definition.diff import describe_topology_diff, topology_signature
    from cudagraph.definition.node import bodies_of

    def innermost(g: cg.Graph) -> cg.Graph:
        while g.nodes[-1].body_fields:
            g = bodies_of(g.nodes[-1])[0]
        return g

    a = make(DEEP)
    sig = topology_signature(a)  # made without recursion (comparing two such nested tuples recurses in C,
    assert type(sig) is tuple and len(sig) == 2  # but definitions this deep are not instantiated)
    small = [make(MAX_NESTING), make(MAX_NESTING), make(MAX_NESTING, leaf="other")]
    assert topology_signature(small[0]) == topology_signature(small[1]) == topology_signature(small[2])
    innermost(small[1]).empty()
    assert topology_signature(small[0]) != topology_signature(small[1])
    c = make(DEEP)
    inner = innermost(c)
    leaf = inner.nodes[-1]
    inner.add_edge(inner.empty(name="extra"), leaf)
    diffs = describe_topology_diff(a, c)
    assert len(diffs) == 2, diffs[:3]
    assert diffs[0].startswith("edge added in /") and diffs[0].endswith("#1 -> empty#0 'leaf'")
    assert diffs[0].count("/") >= DEEP - 1
    assert diffs[1].endswith(
        "node added in " + diffs[0][len("edge added in ") : diffs[0].index(": #1")] + ": empty#1 'extra'"
    )
    p = c.param("x")
    inner.memset(p, 0, count=4, element_size=4, name="user")
    assert body_uses_params(c.nodes[-1], {"x"})
    assert not body_uses_params(c.nodes[-1], {"y"})


class _FakeDriver:
    """Just enough of ``cuda.bindings.driver`` to lower empty nodes and child graphs (explicit construction)."""

    class CUgraphNodeType:
        CU_GRAPH_NODE_TYPE_KERNEL = "kernel"
        CU_GRAPH_NODE_TYPE_EMPTY = "empty"
        CU_GRAPH_NODE_TYPE_GRAPH = "graph"

    class CUgraphChildGraphNodeOwnership:
        CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE = "move"

    CUgraphNode = int
    CUresult = int

    def __init__(self) -> None:
        self.graphs = 0
        self.added: list[tuple[int, str, object]] = []  # (driver graph, node type, child graph or None)
        self.destroyed: list[int] = []

    def cuGraphCreate(self, flags: int) -> tuple[int, int]:
        self.graphs += 1
        return 0, self.graphs

    def cuGraphDestroy(self, handle: int) -> tuple[int]:
        self.destroyed.append(handle)
        return (0,)

    def CUgraphNodeParams(self):  # type: ignore[no-untyped-def]
        from types import SimpleNamespace

        p = SimpleNamespace(type=None, kernel=SimpleNamespace(), graph=SimpleNamespace(graph=None, ownership=None))
        p.getPtr = lambda: id(p)
        return p

    def cuGraphAddNode(self, graph, deps, *rest):  # type: ignore[no-untyped-def]
        params = rest[-1]
        self.added.append((graph, params.type, params.graph.graph))
        return 0, 1000 + len(self.added)


def test_lowering_at_the_nesting_limit_cpu(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Explicit construction of MAX_NESTING levels of child graphs fits in Python's default recursion limit."""
    import sys

    from cudagraph.definition.core import MAX_NESTING
    from cudagraph.driver import calls
    from cudagraph.materialize import explicit

    fake = _FakeDriver()
    monkeypatch.setattr(calls, "driver", fake)
    monkeypatch.setattr(explicit, "ensure_context", lambda: None)
    monkeypatch.setattr(explicit, "kernel_loop", lambda *a, **k: None)
    assert sys.getrecursionlimit() <= 1000 or pytest.skip("a raised recursion limit would hide the test")
    g = _deep_children(MAX_NESTING + 1)
    g._validate_structure()

    def nested(depth: int):  # type: ignore[no-untyped-def]  # called from a caller 100 frames deep
        return nested(depth - 1) if depth else explicit.lower(g, {}, [])

    lowered = nested(100)
    # one driver graph per level; each level adds its child node to the graph around it, the innermost an empty node
    assert fake.graphs == MAX_NESTING + 1
    kinds = [t for _, t, _ in fake.added]
    assert kinds == ["empty"] + ["graph"] * MAX_NESTING
    assert [h for h, _, _ in fake.added] == list(range(MAX_NESTING + 1, 0, -1))
    assert [c for _, _, c in fake.added[1:]] == list(range(MAX_NESTING + 1, 1, -1))
    assert lowered.handle == 1


@pytest.mark.parametrize("backend", ["explicit", "capture"])
def test_instantiate_too_deep_refused_before_the_driver_cpu(backend) -> None:  # type: ignore[no-untyped-def]
    from cudagraph.definition.core import MAX_NESTING

    g = _deep_children(DEEP)
    with pytest.raises(DefinitionError) as e:  # not DriverUnavailableError: refused before the driver is needed
        g.instantiate(auto_free_on_launch=True, backend=backend)
    assert f"child#0 'c{MAX_NESTING + 1}' of Graph 'g{MAX_NESTING}'" in str(e.value)


# ---------------------------------------------------------------- several threads building one graph
def test_eight_threads_build_one_graph() -> None:
    import sys
    import threading

    g = cg.Graph("shared")
    root = g.empty(name="root")
    per_thread = 1500
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def build(t: int) -> None:
        try:
            start.wait()
            prev = root
            for i in range(per_thread):
                if i % 3 == 0:
                    prev = g.kernel(K, 1, 32, (np.int32(i),), after=prev, name=f"t{t}")
                elif i % 3 == 1:
                    prev = g.empty(after=[prev, root] if prev is not root else prev, name=f"t{t}")
                else:
                    prev = g.memset(PTR, 0, count=4, element_size=4, after=prev, name=f"t{t}")
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=build, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    nodes = g.nodes
    assert len(nodes) == 1 + 8 * per_thread
    assert [n.index for n in nodes] == list(range(len(nodes)))
    edges = [(p.index, n.index) for n in nodes for p in n.predecessors]
    assert sorted(edges) == sorted((n.index, s.index) for n in nodes for s in n.successors)
    assert g.num_edges == len(edges) == 8 * per_thread + 8 * (per_thread // 3)  # empties also wait on the root
    for t in range(8):  # each thread's nodes form one chain from the root, in the order it added them
        chain = [n for n in nodes if n.name == f"t{t}"]
        assert len(chain) == per_thread
        assert chain[0].predecessors == (root,)
        assert all(b.predecessors[0] is a for a, b in itertools.pairwise(chain))
    g.validate()
    assert g.topological_order()[0] is root


def test_threads_editing_edges_of_one_graph() -> None:
    import sys
    import threading

    g = cg.Graph("shared")
    hub = g.empty(name="hub")
    ns = [g.empty(name=f"n{i}") for i in range(800)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)

    def edit(t: int) -> None:
        mine = ns[t::8]
        for n in mine:
            g.add_edge(n, hub)  # backward by index: each one keeps the topological order up to date
        for n in mine[::2]:
            g.remove_edge(n, hub)

    try:
        threads = [threading.Thread(target=edit, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    kept = {n.index for t in range(8) for n in ns[t::8][1::2]}
    assert {p.index for p in hub.predecessors} == kept
    assert len(hub.predecessors) == len(kept) == 400 == g.num_edges
    assert all(n.successors == ((hub,) if n.index in kept else ()) for n in ns)
    g.validate()
    assert g.topological_order()[-1] is hub


def test_remove_edge_from_a_wide_fan_in_in_any_order_keeps_the_lists_exact() -> None:
    g = cg.Graph("wide")
    hub = g.empty(name="hub")
    srcs = [g.empty(name=f"s{i}") for i in range(300)]
    for s in srcs:
        g.add_edge(s, hub)
    order = list(range(300))
    random.Random(7).shuffle(order)
    kept = set(range(300))
    for step, i in enumerate(order[:200]):
        g.remove_edge(srcs[i], hub)
        kept.discard(i)
        if step % 50 == 49:  # edges added between removals land past the map of positions
            extra = g.empty(name=f"late{step}")
            g.add_edge(extra, hub)
            g.remove_edge(extra, hub)
    assert {p.index for p in hub.predecessors} == {srcs[i].index for i in kept}
    assert len(hub.predecessors) == 100 == g.num_edges
    for i in order[:200]:
        assert srcs[i].successors == ()
        with pytest.raises(DefinitionError, match="no edge"):
            g.remove_edge(srcs[i], hub)
    for i in order[200:]:
        g.remove_edge(srcs[i], hub)
    assert hub.predecessors == () and g.num_edges == 0 and g.edges == []
    g.validate()
