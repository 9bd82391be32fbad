"""The cache-hit path on the CPU: signatures, state diffs, and ``Executable.update`` over a stub driver.

``Executable.update`` is run end to end with the driver calls replaced by
recorders (``Executable._set_node``, ``lower``, ``cuGraphExecUpdate``), so the
choice of mode, the nodes touched, the bindings passed and the bookkeeping
after an update are checked exactly without a GPU.
"""

from __future__ import annotations

import gc
import random
import weakref
from array import array
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.driver.api as _api
import cudagraph.executable.executable as _executable
import cudagraph.executable.updating as _updating
from cudagraph.definition import diff as _diff
from cudagraph.definition.diff import flat_signature, has_bodies, node_state, same_value, type_code
from cudagraph.definition.nodes import ChildGraphNode, EmptyNode, KernelNode, MemcpyNode, MemsetNode
from cudagraph.errors import DefinitionError, NodeNotFoundError, OperandError
from cudagraph.executable import compare as _compare
from cudagraph.executable.executable import Executable, UpdateResult
from cudagraph.executable.updating import _moved_users, _NodeMap
from cudagraph.materialize.explicit import LoweredGraph, node_params_uses
from cudagraph.ops.kinds.kernel import KernelWriter
from random_graphs import random_graph


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K = CUkernel()
K2 = CUkernel()
A = np.float32(1.0)
N = np.int32(32)


def chain(args: list[tuple[Any, ...]], name: str = "chain") -> cg.Graph:
    g = cg.Graph(name)
    prev = None
    for a in args:
        prev = g.kernel(K, 1, 32, a, after=prev)
    return g


@pytest.fixture(params=["python", "native"])
def impl(request: pytest.FixtureRequest) -> Any:
    """The signature and diff functions: the definition layer's, or the compiled ones the executable uses."""
    if request.param == "python":
        return _diff
    if _compare._layout() is None:
        pytest.skip("cudagraph.driver._native was not built")
    return _compare


# --------------------------------------------------------------------------- reference implementations
# The functions as they were before the hit path was made cheap: the new ones must agree with them.


def _ref_same_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_ref_same_value(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return False


def _ref_signature(graph: cg.Graph) -> tuple[Any, ...]:
    from cudagraph.definition.diff import bodies_of

    out: list[Any] = []
    for n in graph._nodes:
        preds = n._preds
        key = (type(n), preds[0].index) if len(preds) == 1 else (type(n), tuple(p.index for p in preds))
        bodies = bodies_of(n)
        if type(n) is ChildGraphNode or bodies:
            out.append((key, tuple(_ref_signature(b) for b in bodies)))
        else:
            out.append(key)
    return tuple(out)


def _ref_changed(old_states: list[tuple[Any, ...]], graph: cg.Graph) -> list[int]:
    return [n.index for n, old in zip(graph._nodes, old_states) if not _ref_same_value(node_state(n), old)]


# --------------------------------------------------------------------------- topology_signature


def test_signature_is_flat_kinds_bodies_and_predecessors(impl):
    g = cg.Graph("g")
    a = g.memset(0x10000, 0, count=4, element_size=4)
    b = g.kernel(K, 1, 32, (0x10000, A), after=a)
    c = g.memcpy(0x20000, 0x10000, 16, after=b)
    g.empty(after=[c, a])
    g.empty()
    items = (MemsetNode, KernelNode, 0, MemcpyNode, 1, EmptyNode, 2, 0, EmptyNode)
    assert impl.topology_signature(g) == flat_signature(items)  # a flat graph: bytes, one int32 an item
    words = [2 * type_code(i) + 1 if type(i) is type else 2 * i for i in items]  # type: ignore[arg-type]
    assert flat_signature(items) == array("i", words).tobytes()
    assert not has_bodies(impl.topology_signature(g))

    body = cg.Graph("body")
    m = body.memset(0x10000, 1, count=4)
    body.memset(0x10000, 2, count=4, after=m)
    parent = cg.Graph("parent")
    e = parent.empty()
    parent.child(body, after=e)
    sig = impl.topology_signature(parent)
    assert sig == (EmptyNode, ChildGraphNode, (flat_signature((MemsetNode, MemsetNode, 0)),), 0)
    assert has_bodies(sig)
    assert hash(sig) == hash(impl.topology_signature(parent))


def test_signature_keeps_edge_order_and_separates_nodes(impl):
    def fan(order: tuple[int, int], third_edge: bool = False) -> cg.Graph:
        g = cg.Graph()
        roots = [g.empty(), g.empty(), g.empty()]
        j = g.empty(after=[roots[i] for i in order])
        if third_edge:
            g.add_edge(roots[2], j)
        return g

    assert impl.topology_signature(fan((0, 1))) == impl.topology_signature(fan((0, 1)))
    assert impl.topology_signature(fan((0, 1))) != impl.topology_signature(fan((1, 0)))
    assert impl.topology_signature(fan((0, 1))) != impl.topology_signature(fan((0, 1), third_edge=True))
    # One predecessor more on one node and one less on the next is not the same graph.
    g1 = cg.Graph()
    a1 = g1.empty()
    b1 = g1.empty(after=a1)
    g1.empty(after=[a1, b1])
    g1.empty(after=a1)
    g2 = cg.Graph()
    a2 = g2.empty()
    b2 = g2.empty(after=a2)
    g2.empty(after=a2)
    g2.empty(after=[a2, b2])
    assert impl.topology_signature(g1) != impl.topology_signature(g2)


def test_signature_agrees_with_the_nested_form_on_random_graphs(impl):
    rng = random.Random(5)
    graphs = []
    for size in range(0, 9):
        for seed in range(12):
            graphs.append(random_graph(random.Random(rng.random() + seed), size, K, (0x10000, A)))
    for a in graphs:
        for b in graphs[::3]:
            same = impl.topology_signature(a) == impl.topology_signature(b)
            assert same == (_ref_signature(a) == _ref_signature(b))


# --------------------------------------------------------------------------- same_value and diff_states


def test_same_value_cases():
    assert same_value((1, (2, 3)), (1, (2, 3)))
    assert not same_value((1, (2, 3)), (1, (2, 4)))
    assert not same_value((1, 2), (1, 2, 3))
    assert not same_value(np.float32(2.0), np.float64(2.0))
    assert not same_value(1, True)
    assert not same_value(1, 1.0)
    assert same_value(np.float32(2.0), np.float32(2.0))

    class Boom:
        def __eq__(self, other: object) -> bool:
            raise ValueError("no")

        __hash__ = object.__hash__

    b = Boom()
    assert same_value(b, b) and not same_value(Boom(), Boom())
    assert not same_value((b, Boom()), (b, Boom()))


def test_unchanged_nodes_keep_their_state_objects(impl):
    fixed = (0x1000, A, N)
    g1 = chain([fixed] * 6)
    states = [node_state(n) for n in g1.nodes]
    changed, new = impl.diff_states(states, chain([fixed] * 6))
    assert changed == [] and new is not states
    assert all(x is y for x, y in zip(new, states))
    # A new tuple of the same objects: still unchanged, the old state is kept.
    changed, new = impl.diff_states(states, chain([tuple(fixed)] + [(0x1000, A, N) for _ in range(5)]))
    assert changed == [] and all(x is y for x, y in zip(new, states))


def test_changed_nodes_are_found_and_their_states_are_fresh(impl):
    g1 = chain([(0x1000, A, N)] * 5)
    states = [node_state(n) for n in g1.nodes]
    g2 = chain(
        [
            (0x1000, A, N),
            (0x2000, A, N),  # another pointer
            (0x1000, np.float64(1.0), N),  # an equal value of another type
            (0x1000, np.float32(1.0), N),  # an equal value, another object: unchanged
            (0x1000, A),  # fewer arguments
        ]
    )
    changed, new = impl.diff_states(states, g2)
    assert [n.index for n in changed] == [1, 2, 4]
    assert new == [node_state(n) for n in g2.nodes]
    assert new[0] is states[0]
    assert new[3] is not states[3] and new[3][4] is g2.nodes[3].args
    assert states == [node_state(n) for n in g1.nodes]  # the recorded states are not modified


def test_kernel_fields_other_than_args_are_compared(impl):
    g1 = chain([(0x1000, A, N)] * 4)
    states = [node_state(n) for n in g1.nodes]
    g2 = chain([(0x1000, A, N)] * 4)
    g2.nodes[0].update(grid=2)
    g2.nodes[1].update(kernel=K2)
    g2.nodes[2].update(shared_mem=128)
    assert [n.index for n in impl.diff_states(states, g2)[0]] == [0, 1, 2]
    g3 = chain([(0x1000, A, N)] * 4)
    g3.nodes[3].update(block=(32, 1, 1))  # an equal tuple: unchanged
    assert impl.diff_states(states, g3)[0] == []


def test_same_graph_changed_in_place_is_seen(impl):
    g = chain([(0x1000, A, N)] * 3)
    states = [node_state(n) for n in g.nodes]
    g.nodes[2].update(args=(0x3000, A, N))
    changed, new = impl.diff_states(states, g)
    assert changed == [g.nodes[2]] and new[2] == node_state(g.nodes[2])


def test_other_kinds_and_bodies_are_compared_through_their_states(impl):
    def build(value: int, inner: int) -> cg.Graph:
        body = cg.Graph("body")
        body.memset(0x10000, inner, count=4)
        g = cg.Graph()
        m = g.memset(0x10000, value, count=4)
        g.child(body, after=m)
        g.kernel(K, 1, 32, (0x1000, A), after=m)
        return g

    states = [node_state(n) for n in build(0, 0).nodes]
    assert [n.index for n in impl.diff_states(states, build(1, 0))[0]] == [0]
    assert [n.index for n in impl.diff_states(states, build(0, 5))[0]] == [1]
    assert impl.diff_states(states, build(0, 0))[0] == []


def test_states_of_other_kinds_fall_back_to_a_plain_comparison(impl):
    kernels = chain([(0x1000, A, N)] * 2)
    other = cg.Graph()
    other.empty()
    other.memset(0x10000, 0, count=4)
    changed, new = impl.diff_states([node_state(n) for n in other.nodes], kernels)
    assert [n.index for n in changed] == [0, 1]
    assert new == [node_state(n) for n in kernels.nodes]


def test_diff_agrees_with_the_reference_on_random_changes(impl):
    rng = random.Random(11)
    ptrs = [0x1000, 0x2000]
    scalars = [A, np.float32(1.0), np.float64(1.0), np.float32(2.0)]
    for _ in range(60):
        size = rng.randint(1, 12)
        base = [(rng.choice(ptrs), rng.choice(scalars), N) for _ in range(size)]
        g1 = chain(base)
        states = [node_state(n) for n in g1.nodes]
        mutated = [
            a if rng.random() < 0.5 else (rng.choice(ptrs), rng.choice(scalars), N) if rng.random() < 0.9 else a[:2]
            for a in base
        ]
        g2 = chain(mutated)
        if rng.random() < 0.3:
            g2.nodes[rng.randrange(size)].update(grid=rng.choice([1, 2]))
        changed, new = impl.diff_states(states, g2)
        assert [n.index for n in changed] == _ref_changed(states, g2)
        assert all(_ref_same_value(x, node_state(n)) for x, n in zip(new, g2.nodes))


# --------------------------------------------------------------------------- helpers of Executable


def test_node_map_merges_nested_entries_with_the_current_top_level():
    g = chain([(0x1000, A, N)] * 3)
    inner = cg.Graph("inner").empty()
    nested = {id(inner): (inner, "d-inner")}
    m = _NodeMap(nested, list(g.nodes), ["d0", "d1", "d2"]).node_map()
    assert m == {id(inner): (inner, "d-inner"), **{id(n): (n, f"d{i}") for i, n in enumerate(g.nodes)}}
    assert m is not nested and len(nested) == 1


def test_moved_users_swap_top_level_nodes_only():
    old, new = chain([(0x1000, A, N)] * 3), chain([(0x1000, A, N)] * 3)
    inner = cg.Graph("inner").empty()
    users = {"p": [old.nodes[2], inner, old.nodes[0]], "q": []}
    moved = _moved_users(users, list(old.nodes), list(new.nodes))
    assert moved == {"p": [new.nodes[2], inner, new.nodes[0]], "q": []}
    assert users["p"][0] is old.nodes[2]


# --------------------------------------------------------------------------- Executable.update on a stub driver


class StubLowering:
    """What LoweredGraph reads of a Lowering: the node map, parameter users, bodies and host keys."""

    def __init__(self, graph: cg.Graph, driver_nodes: list[Any]) -> None:
        self.host_keys: list[int] = []
        self.state = None
        self.bodies: list[cg.Graph] = []
        self.param_users: dict[str, list[Any]] = {}
        self.map: dict[int, tuple[Any, Any]] = {}
        self._walk(graph, driver_nodes)

    def _walk(self, graph: cg.Graph, driver_nodes: list[Any]) -> None:
        for n, d in zip(graph._nodes, driver_nodes):
            self.map[id(n)] = (n, d)
            for name in node_params_uses(n):
                self.param_users.setdefault(name, []).append(n)
            if type(n) is ChildGraphNode:
                body = n.body  # type: ignore[attr-defined]
                self.bodies.append(body)
                self._walk(body, [f"{d}/{i}" for i in range(len(body))])

    def node_map(self) -> dict[int, tuple[Any, Any]]:
        return dict(self.map)


def lowered_for(graph: cg.Graph, tag: str = "d") -> LoweredGraph:
    dn = [f"{tag}{i}" for i in range(len(graph))]
    return LoweredGraph(None, graph, dn, StubLowering(graph, dn))  # type: ignore[arg-type]


class StubDriver:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def cuGraphExecUpdate(self, exec_handle: Any, graph_handle: Any) -> tuple[int, Any]:
        self.calls.append(("cuGraphExecUpdate", exec_handle))
        return 0, None

    def cuGraphExecDestroy(self, exec_handle: Any) -> None:
        self.calls.append(("cuGraphExecDestroy", exec_handle))


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Replace every driver call of ``Executable.update``; records what was asked."""
    rec: dict[str, Any] = {"set": [], "lower": [], "validate": 0, "driver": StubDriver()}

    def set_node(self: Executable, node: Any, dnode: Any, bindings: Any, prepared: Any = None) -> None:
        rec["set"].append((node, dnode, dict(bindings)))

    def lower(graph: cg.Graph, bindings: dict[str, Any], sink: list[Any]) -> LoweredGraph:
        rec["lower"].append((weakref.ref(graph), dict(bindings)))
        return lowered_for(graph, tag=f"L{len(rec['lower'])}-")

    real_validate = cg.Graph._validate_structure

    def validate(self: cg.Graph) -> None:
        rec["validate"] += 1
        real_validate(self)

    monkeypatch.setattr(Executable, "_set_node", set_node)
    # Every node goes through the recorded _set_node: the kernel writer takes none directly.
    monkeypatch.setattr(KernelWriter, "run", lambda self, nodes, start, driver_nodes, teach=None, bindings=None: start)
    monkeypatch.setattr(KernelWriter, "write", lambda self, *args: False)
    monkeypatch.setattr(_updating, "lower", lower)
    monkeypatch.setattr(_api, "require_driver", lambda: rec["driver"])
    monkeypatch.setattr(_updating, "_instantiate_lowered", lambda lw, flags, stream: f"exec{len(rec['lower'])}")
    monkeypatch.setattr(cg.Graph, "_validate_structure", validate)
    return rec


def make_exe(graph: cg.Graph, **bindings: Any) -> Executable:
    exe = Executable(graph, lowered_for(graph), "exec0", [], dict(bindings))
    exe._finalizer.detach()
    exe._ctx = "ctx"
    return exe


def test_update_unchanged_and_per_node(stub):
    bufs = [(0x1000, A, N), (0x2000, A, N)]
    g1 = chain([bufs[0]] * 10)
    exe = make_exe(g1)
    same = chain([bufs[0]] * 10)
    assert exe.update(same) == UpdateResult("unchanged")
    assert stub["set"] == [] and stub["validate"] == 0  # same topology as a checked graph: no re-check
    assert exe.graph is same and exe._lowered.nodes == list(same.nodes)
    args = [bufs[0]] * 10
    args[3] = args[7] = bufs[1]
    g2 = chain(args)
    assert exe.update(g2) == UpdateResult("per-node", 2)
    assert [(n, d) for n, d, _ in stub["set"]] == [(g2.nodes[3], "d3"), (g2.nodes[7], "d7")]
    assert exe.update_calls == 2
    # The node map follows the definition run now, and only that one.
    assert exe.driver_node(g2.nodes[7]) == "d7"
    with pytest.raises(NodeNotFoundError, match=r"^kernel#7 'kernel' is not a node of the executable of "):
        exe.driver_node(g1.nodes[7])
    with pytest.raises(KeyError):  # (a KeyError too)
        exe.driver_node(same.nodes[7])
    with pytest.raises(OperandError, match=r"^exe\[node\]: expected a node of Graph '.*', got NoneType$"):
        exe[None]  # (a TypeError: not a node at all)
    assert exe[g2.nodes[0]].node is g2.nodes[0]
    assert exe.update(chain(args)) == UpdateResult("unchanged")


def test_update_of_the_same_graph_changed_in_place(stub):
    g = chain([(0x1000, A, N)] * 4)
    exe = make_exe(g)
    g.nodes[1].update(args=(0x5000, A, N))
    assert exe.update(g) == UpdateResult("per-node", 1)
    assert stub["set"][0][:2] == (g.nodes[1], "d1")
    assert exe.update(g) == UpdateResult("unchanged")
    assert exe.driver_node(g.nodes[1]) == "d1"


def test_update_of_many_nodes_is_per_node_by_default(stub):
    exe = make_exe(chain([(0x1000, A, N)] * 4))
    g2 = chain([(0x2000, A, N)] * 3 + [(0x1000, A, N)])
    assert exe.update(g2) == UpdateResult("per-node", 3)
    assert [(n, d) for n, d, _ in stub["set"]] == [(g2.nodes[i], f"d{i}") for i in range(3)]
    assert stub["lower"] == [] and stub["driver"].calls == []


def test_update_of_many_nodes_above_the_threshold_is_whole_graph(stub, monkeypatch):
    monkeypatch.setattr(_updating, "WHOLE_GRAPH_THRESHOLD", 0.5)
    exe = make_exe(chain([(0x1000, A, N)] * 4))
    g2 = chain([(0x2000, A, N)] * 3 + [(0x1000, A, N)])
    assert exe.update(g2) == UpdateResult("whole-graph", 3)
    assert [g() for g, _ in stub["lower"]] == [g2] and stub["set"] == []
    assert stub["driver"].calls == [("cuGraphExecUpdate", "exec0")]
    assert exe._lowered.definition is g2 and exe.driver_node(g2.nodes[0]) == "L1-0"
    # The states recorded are g2's: the next update of the same values changes nothing.
    assert exe.update(chain([(0x2000, A, N)] * 3 + [(0x1000, A, N)])) == UpdateResult("unchanged")


def _refuse_node(stub: dict[str, Any], monkeypatch: pytest.MonkeyPatch, at: int) -> set[int]:
    """Make the recorded _set_node refuse the update of the nodes whose index is in the set returned."""
    from cuda.bindings import driver as drv

    from cudagraph.driver.calls import raise_error

    refused = {at}

    def set_node(self: Executable, node: Any, dnode: Any, bindings: Any, prepared: Any = None) -> None:
        if node.index in refused:
            raise_error(drv.CUresult.CUDA_ERROR_INVALID_VALUE, "cuGraphExecKernelNodeSetParams", node)
        stub["set"].append((node, dnode, dict(bindings)))

    monkeypatch.setattr(Executable, "_set_node", set_node)
    return refused


def test_refused_node_update_falls_back_to_the_whole_graph(stub, monkeypatch):
    _refuse_node(stub, monkeypatch, at=2)
    exe = make_exe(chain([(0x1000, A, N)] * 4))
    g2 = chain([(0x2000, A, N)] * 4)
    res = exe.update(g2)
    assert res.mode == "whole-graph" and res.nodes_updated == 4
    assert "refused a node's update" in res.reason and "kernel#2" in res.reason
    assert [n.index for n, _, _ in stub["set"]] == [0, 1]  # set before the refusal
    assert stub["driver"].calls == [("cuGraphExecUpdate", "exec0")]
    assert exe.graph is g2 and exe.update(chain([(0x2000, A, N)] * 4)) == UpdateResult("unchanged")


def test_refused_node_and_whole_graph_updates_leave_the_nodes_set_stale(stub, monkeypatch):
    from cuda.bindings import driver as drv

    from cudagraph.errors import DriverError

    refused = _refuse_node(stub, monkeypatch, at=2)

    class Info:
        result = drv.CUgraphExecUpdateResult.CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED
        errorNode = None

    stub["driver"].cuGraphExecUpdate = lambda e, g: (drv.CUresult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, Info())
    g1 = chain([(0x1000, A, N)] * 4)
    exe = make_exe(g1)
    with pytest.raises(DriverError, match="cuGraphExecUpdate"):
        exe.update(chain([(0x2000, A, N)] * 4))
    assert exe.graph is g1 and [n.index for n, _, _ in stub["set"]] == [0, 1]
    # Nodes 0 and 1 hold 0x2000 in the executable now and node 2 is unknown: an update
    # to g1's own values sets the three again (node 3 was never touched).
    refused.clear()
    stub["set"].clear()
    assert exe.update(chain([(0x1000, A, N)] * 4)) == UpdateResult("per-node", 3)
    assert [n.index for n, _, _ in stub["set"]] == [0, 1, 2]
    assert exe.update(chain([(0x1000, A, N)] * 4)) == UpdateResult("unchanged")


def test_topology_changes_raise_or_reinstantiate(impl, stub):
    g1 = chain([(0x1000, A, N)] * 3)
    exe = make_exe(g1)
    g2 = chain([(0x1000, A, N)] * 3)
    g2.add_edge(g2.nodes[0], g2.nodes[2])
    with pytest.raises(DefinitionError, match=r"the topology differs: edge added: #0 -> kernel#2"):
        exe.update(g2)
    assert stub["validate"] == 1  # a new topology is checked
    assert exe.graph is g1
    res = exe.update(g2, reinstantiate_if_needed=True)
    assert res == UpdateResult("reinstantiated", 3, "edge added: #0 -> kernel#2 'kernel'")
    assert exe._exec == "exec1" and exe._signature() == impl.topology_signature(g2)
    assert exe._writer._exec == "exec1"  # the kernel writer sets the new executable
    g3 = chain([(0x1000, A, N)] * 3)
    g3.add_edge(g3.nodes[0], g3.nodes[2])
    assert exe.update(g3) == UpdateResult("unchanged")
    with pytest.raises(OperandError, match=r"expects a cudagraph\.Graph"):
        exe.update("g")  # type: ignore[arg-type]


def test_graphs_with_bodies_or_special_nodes_are_checked(stub):
    def parent() -> cg.Graph:
        body = cg.Graph("body")
        body.memset(0x10000, 0, count=4)
        g = cg.Graph("parent")
        g.child(body)
        return g

    exe = make_exe(parent())
    assert exe.update(parent()) == UpdateResult("unchanged")
    assert stub["validate"] == 1


def test_parameters_are_carried_rebound_and_moved(stub):
    def build(p_users: tuple[int, ...]) -> cg.Graph:
        g = cg.Graph("p")
        p = g.param("p")
        prev = None
        for i in range(6):
            prev = g.kernel(K, 1, 32, (p if i in p_users else 0x1000, A, N), after=prev)
        return g

    g1 = build((1, 4))
    exe = make_exe(g1, p=0x7000)
    g2 = build((1, 4))
    # Each definition has Param objects of its own: the same name and dtype is the same slot, and
    # p keeps its value, so nothing changed.
    assert exe.update(g2) == UpdateResult("unchanged")
    assert stub["set"] == []
    assert exe._lowered.param_users == {"p": [g2.nodes[1], g2.nodes[4]]}
    assert exe.update(g2) == UpdateResult("unchanged")
    # The same definition with a new value: the users of p are found through param_users.
    stub["set"].clear()
    assert exe.update(g2, p=0x8000) == UpdateResult("per-node", 2)
    assert stub["set"] == [(g2.nodes[1], "d1", {"p": 0x8000}), (g2.nodes[4], "d4", {"p": 0x8000})]
    assert exe.bindings == {"p": 0x8000}
    g3 = build((1, 4))
    g3.nodes[2].update(args=(0x2000, A, N))
    stub["set"].clear()
    assert exe.update(g3, p=0x9000) == UpdateResult("per-node", 3)
    assert [(n.index, b) for n, _, b in stub["set"]] == [(1, {"p": 0x9000}), (2, {"p": 0x9000}), (4, {"p": 0x9000})]
    assert exe._lowered.param_users == {"p": [g3.nodes[1], g3.nodes[4]]}
    with pytest.raises(OperandError, match=r"no parameter\(s\) 'q'"):
        exe.update(build((1, 4)), q=1)


def test_parameter_used_in_a_body_takes_the_whole_graph_path(stub):
    def build() -> cg.Graph:
        g = cg.Graph("parent")
        p = g.param("p")
        body = cg.Graph("body")
        body.memset(p, 0, count=4)
        g.child(body)
        g.empty()
        return g

    exe = make_exe(build(), p=0x7000)
    # The child node counts as changed: its body's state holds the Param of each new definition.
    assert exe.update(build(), p=0x8000) == UpdateResult("whole-graph", 1)
    assert stub["lower"][0][1] == {"p": 0x8000}


def test_update_keeps_no_earlier_definition_alive(stub):
    exe = make_exe(chain([(0x1000, A, N)] * 4))
    refs = []
    for step in range(3):
        g = chain([(0x1000 + 0x1000 * (step % 2), A, N)] + [(0x1000, A, N)] * 3)  # per-node updates
        refs.append(weakref.ref(g.nodes[0]))
        exe.update(g)
        del g
    stub["set"].clear()  # the recorder holds the nodes it was given
    gc.collect()
    assert [r() is None for r in refs] == [True, True, False]
    assert len(exe._lowered.all_nodes) == 4  # read (and built) between two updates
    exe.update(chain([(0x1000, A, N)] * 4))
    gc.collect()
    assert refs[2]() is None
    assert stub["lower"] == []


def test_nested_driver_nodes_survive_updates(stub):
    def build(value: int) -> cg.Graph:
        body = cg.Graph("body")
        body.memset(0x10000, 0, count=4)
        g = cg.Graph("parent")
        g.child(body)
        g.memset(0x10000, value, count=4)
        return g

    g1 = build(0)
    inner = g1.nodes[0].body.nodes[0]  # type: ignore[attr-defined]
    exe = make_exe(g1)
    assert exe.driver_node(inner) == "d0/0"
    g2 = build(1)
    assert exe.update(g2) == UpdateResult("per-node", 1)
    assert exe.driver_node(inner) == "d0/0"  # the body lowered is still the one run
    assert exe.driver_node(g2.nodes[1]) == "d1"
    g3 = build(2)
    exe.update(g3)
    assert exe.driver_node(g3.nodes[0]) == "d0" and exe.driver_node(inner) == "d0/0"


# --------------------------------------------------------------------------- ExecutableCache on a stub driver


@pytest.fixture
def cache_stub(stub, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    made: list[Executable] = []
    sigs: list[Any] = []
    real_update = Executable.update

    def instantiate(graph: cg.Graph, **kwargs: Any) -> Executable:
        exe = make_exe(graph)
        made.append(exe)
        return exe

    def update(self: Executable, graph: cg.Graph, **kwargs: Any) -> UpdateResult:
        sigs.append(kwargs.get("_signature"))
        return real_update(self, graph, **kwargs)

    monkeypatch.setattr(_executable, "instantiate", instantiate)
    monkeypatch.setattr(Executable, "update", update)
    stub["made"], stub["sigs"] = made, sigs
    return stub


def test_cache_hits_update_by_signature_identity(cache_stub):
    cache = cg.ExecutableCache(maxsize=2)
    e1 = cache.get(chain([(0x1000, A, N)] * 3))
    e2 = cache.get(chain([(0x2000, A, N)] * 3))
    assert e1 is e2 and cache.stats() == {"hits": 1, "misses": 1, "evictions": 0, "size": 1, "maxsize": 2}
    assert cache_stub["sigs"][0] is e1._signature()  # recognised without comparing
    # Every node changed: all three set one by one, nothing lowered.
    assert [(n, d) for n, d, _ in cache_stub["set"]] == [(e1.graph.nodes[i], f"d{i}") for i in range(3)]
    assert cache_stub["lower"] == []


def test_cache_evicts_the_least_recently_used(cache_stub):
    cache = cg.ExecutableCache(maxsize=2)
    three, four, five = (chain([(0x1000, A, N)] * k) for k in (3, 4, 5))
    e3 = cache.get(three)
    e4 = cache.get(four)
    assert cache.get(chain([(0x1000, A, N)] * 3)) is e3  # 3 is now the most recent
    e5 = cache.get(five)
    assert e4.closed and not e3.closed and not e5.closed
    assert cache.stats() == {"hits": 1, "misses": 3, "evictions": 1, "size": 2, "maxsize": 2}
    assert cache.get(chain([(0x1000, A, N)] * 5)) is e5
    # An executable closed by someone is replaced, and the new one is the most recent.
    e3.close()
    e3b = cache.get(chain([(0x1000, A, N)] * 3))
    assert e3b is not e3 and not e3b.closed
    cache.get(chain([(0x1000, A, N)] * 6))
    assert e5.closed and not e3b.closed
    assert cache.stats() == {"hits": 2, "misses": 5, "evictions": 2, "size": 2, "maxsize": 2}
    cache.clear()
    assert len(cache) == 0 and e3b.closed


def test_cache_hit_on_an_executable_updated_elsewhere_reinstantiates(impl, cache_stub):
    cache = cg.ExecutableCache()
    exe = cache.get(chain([(0x1000, A, N)] * 3))
    exe.update(chain([(0x1000, A, N)] * 4), reinstantiate_if_needed=True)
    res_before = len(cache_stub["lower"])
    assert cache.get(chain([(0x1000, A, N)] * 3)) is exe
    assert len(cache_stub["lower"]) == res_before + 1 and len(exe.graph) == 3
    assert exe._signature() == impl.topology_signature(exe.graph)


def test_whole_graph_update_forgets_the_nested_nodes_of_the_graph_replaced(stub, monkeypatch):
    monkeypatch.setattr(_updating, "WHOLE_GRAPH_THRESHOLD", 0.5)

    def build(value: int) -> cg.Graph:
        body = cg.Graph("body")
        body.memset(0x10000, value, count=4)
        g = cg.Graph("parent")
        g.child(body)
        g.memset(0x10000, 0, count=4)
        g.memset(0x10000, 0, count=4)
        return g

    g1 = build(0)
    inner = weakref.ref(g1.nodes[0].body.nodes[0])  # type: ignore[attr-defined]
    exe = make_exe(g1)
    del g1
    assert exe.update(build(0)) == UpdateResult("unchanged")  # equal bodies: unchanged
    assert exe._sig.nested  # the body entries, kept for the next updates
    g3 = build(1)
    g3.nodes[1].update(value=1)
    assert exe.update(g3) == UpdateResult("whole-graph", 2)
    assert exe._sig.nested is None
    stub["set"].clear()
    gc.collect()
    assert inner() is None
    assert exe.driver_node(g3.nodes[0].body.nodes[0]) == "L1-0/0"  # type: ignore[attr-defined]


def test_same_value_compares_arrays_by_identity_and_scalars_by_value() -> None:
    import numpy as np

    from cudagraph.definition.diff import same_value

    a, b = np.zeros(1, np.float32), np.zeros(1, np.float32)
    assert same_value(a, a)
    assert not same_value(a, b)  # equal contents, different memory: a pointer change
    assert same_value(np.float32(1.5), np.float32(1.5))
    assert not same_value(np.float32(1.5), np.float32(2.5))
    assert not same_value(np.float32(1.5), np.float64(1.5))
    assert same_value((1, np.int32(2)), (1, np.int32(2)))
    assert not same_value((a,), (b,))


def test_refused_whole_graph_update_reinstantiates_on_request(stub, monkeypatch):
    from cuda.bindings import driver as drv

    monkeypatch.setattr(_updating, "WHOLE_GRAPH_THRESHOLD", 0.5)
    from cudagraph.errors import DriverError

    class Info:
        result = drv.CUgraphExecUpdateResult.CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED
        errorNode = None

    def refuse(exec_handle: Any, graph_handle: Any) -> tuple[Any, Any]:
        stub["driver"].calls.append(("cuGraphExecUpdate", exec_handle))
        return drv.CUresult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, Info()

    stub["driver"].cuGraphExecUpdate = refuse
    g1 = chain([(0x1000, A, N)] * 4)
    exe = make_exe(g1)
    g2 = chain([(0x2000, A, N)] * 4)
    with pytest.raises(DriverError, match=r"cuGraphExecUpdate failed.*PARAMETERS_CHANGED") as info:
        exe.update(g2)
    assert info.value.call == "cuGraphExecUpdate"
    assert exe.graph is g1 and exe._exec == "exec0"  # unchanged after the refusal
    res = exe.update(g2, reinstantiate_if_needed=True)
    assert res.mode == "reinstantiated" and res.nodes_updated == 4
    assert "the driver refused the update" in res.reason and "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE" in res.reason
    assert exe.graph is g2 and exe._lowered.definition is g2
    assert ("cuGraphExecDestroy", "exec0") in stub["driver"].calls
    assert exe.update(chain([(0x2000, A, N)] * 4)) == UpdateResult("unchanged")


def test_definition_edited_in_place_after_instantiate_is_a_topology_change(stub):
    g = chain([(0x1000, A, N)] * 3)
    extra = g.kernel(K, 1, 32, (0x1000, A, N), name="extra")
    exe = make_exe(g)
    g.add_edge(g.nodes[0], extra)  # after instantiation, before the first update
    with pytest.raises(DefinitionError, match=r"the topology differs: the definition was edited in place"):
        exe.update(g)
    assert stub["set"] == [] and stub["lower"] == []


def test_rebuilt_definition_with_its_own_param_objects_is_unchanged(stub):
    def build() -> cg.Graph:
        g = cg.Graph("p")
        p = g.param("p")
        prev = None
        for _ in range(5):
            prev = g.kernel(K, 1, 32, (p, A, N), after=prev)
        return g

    exe = make_exe(build(), p=0x1000)
    assert exe.update(build()) == UpdateResult("unchanged")  # new Param objects, same slot and value
    assert stub["set"] == []
    res = exe.update(build(), p=0x2000)  # a new value: every user of p changes
    assert res.nodes_updated == 5 and res.mode in ("per-node", "whole-graph")


def test_same_value_learns_per_type_only_what_instances_cannot_change() -> None:
    from types import SimpleNamespace

    plain = SimpleNamespace(x=1)
    assert same_value(plain, SimpleNamespace(x=1))  # no memory interface: compared by ==
    # Instances of the same type that carry an interface are compared by identity.
    a = SimpleNamespace(__cuda_array_interface__={"data": (0x1000, False)})
    b = SimpleNamespace(__cuda_array_interface__={"data": (0x1000, False)})
    assert not same_value(a, b) and same_value(a, a)

    class Slotted:
        __slots__ = ("v",)

        def __init__(self, v: int) -> None:
            self.v = v

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Slotted) and other.v == self.v

        __hash__ = None  # type: ignore[assignment]

    assert same_value(Slotted(1), Slotted(1)) and not same_value(Slotted(1), Slotted(2))


def test_a_compat_source_of_another_topology_is_refused_as_the_driver_refuses_it(stub):
    from cudagraph.frontends.compat.common import DriverRefusal

    gd = cg.compat.GraphDefinition()
    gd.empty()
    exe = make_exe(gd.graph)
    other = cg.compat.GraphDefinition()
    other.empty().empty()
    with pytest.raises(DriverRefusal, match=r"the topology differs: node added: empty#1"):
        exe.update(other)  # (cuda.core's CUDAError where cuda.core is installed; a DefinitionError too)
    with pytest.raises(DefinitionError, match=r"the topology differs") as info:
        exe.update(chain([(0x1000, A, N)]))  # a native Graph: the native refusal
    assert type(info.value) is DefinitionError


def test_an_executable_keeps_what_its_nodes_were_built_with_across_edits_in_place(stub):
    import gc

    class Memory:  # device memory owned by a Python object (as a Buffer or a tensor)
        def __init__(self, ptr: int) -> None:
            self.__cuda_array_interface__ = {"shape": (64,), "typestr": "|u1", "data": (ptr, False), "version": 3}

    g = cg.Graph("kept")
    first = Memory(0x1000)
    g.memcpy(0x2000, first, 8)
    exe = make_exe(g)
    alive = weakref.ref(first)
    del first
    g.nodes[0].update(src=Memory(0x2800))  # an edit in place: the node keeps the new operand, not the first
    gc.collect()
    assert alive() is not None  # the executable still runs the copy from the first operand
    second = Memory(0x3000)
    g.nodes[0].update(src=second)
    assert exe.update(g) == UpdateResult("per-node", 1)  # now it runs the edited node
    gc.collect()
    assert alive() is None
    running = weakref.ref(second)
    del second
    g.nodes[0].update(src=Memory(0x4000))  # edited again after the executable adopted it: seen at this edit
    gc.collect()
    assert running() is not None
    assert exe.update(g) == UpdateResult("per-node", 1)
    gc.collect()
    assert running() is None


def test_updates_that_find_nothing_changed_register_no_more_watchers(stub):
    from cudagraph.definition.edits import watched

    g = chain([(0x1000, A, N)] * 3)
    exe = make_exe(g)
    g.nodes[0].update(args=(0x2000, A, N))
    exe.update(g)
    for _ in range(50):
        assert exe.update(g) == UpdateResult("unchanged")
    assert watched(g) == 1  # (one pending watcher, not one per update)
