"""``g.instantiate()`` records nothing for a later update; edits in place are still seen (no GPU).

An executable records its definition's topology signature and node states
(what ``Executable.update`` diffs against) when an update first needs them, or
just before the definition is edited in place (``cudagraph.definition.edits``).
The driver is faked: lowering makes a ``LoweredGraph`` of stand-in driver nodes,
instantiation returns a name, and node updates are recorded. Every edit is run
twice, once on an executable that records at instantiation (as every executable
used to) and once on one that defers, and the two must agree exactly.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.driver.api as _api
import cudagraph.executable.base as _base
import cudagraph.executable.executable as _executable
import cudagraph.executable.updating as _updating
from cudagraph.definition import edits as _edits
from cudagraph.definition.diff import node_state
from cudagraph.definition.nodes import ChildGraphNode
from cudagraph.errors import CudaGraphError
from cudagraph.executable import compare as _compare
from cudagraph.executable.executable import Executable, UpdateResult
from cudagraph.materialize.explicit import LoweredGraph, node_params_uses
from cudagraph.ops.kinds.kernel import KernelWriter

drv = pytest.importorskip("cuda.bindings.driver")


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K1, K2, K3 = CUkernel(), CUkernel(), CUkernel()
A = np.float32(1.0)
N = np.int32(32)
X = 0x7F00_0000_0000


class StubLowering:
    """What LoweredGraph reads of a Lowering: node map, parameter users, bodies, host keys."""

    def __init__(self, graph: cg.Graph, driver_nodes: list[str]) -> None:
        self.host_keys: list[int] = []
        self.state = None
        self.bodies: list[cg.Graph] = []
        self.param_users: dict[str, list[Any]] = {}
        self.map: dict[int, tuple[Any, Any]] = {}
        self._walk(graph, driver_nodes)

    def _walk(self, graph: cg.Graph, driver_nodes: list[str]) -> None:
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


class FakeDriver:
    CUgraphInstantiate_flags = drv.CUgraphInstantiate_flags

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def cuGraphExecUpdate(self, exec_handle: Any, graph_handle: Any) -> tuple[int, Any]:
        self.calls.append(("cuGraphExecUpdate", exec_handle))
        return 0, None

    def cuGraphExecDestroy(self, exec_handle: Any) -> None:
        self.calls.append(("cuGraphExecDestroy", exec_handle))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``g.instantiate()`` and ``Executable.update`` with every driver call faked and recorded."""
    rec: dict[str, Any] = {"set": [], "lowered": 0, "made": [], "driver": FakeDriver()}

    def lower(graph: cg.Graph, bindings: dict[str, Any], sink: list[Any]) -> LoweredGraph:
        rec["lowered"] += 1
        return lowered_for(graph, tag=f"L{rec['lowered']}-")

    def instantiate_lowered(lowered: LoweredGraph, flags: int, stream: Any) -> str:
        return f"exec{rec['lowered']}"

    def set_node(self: Executable, node: Any, dnode: Any, bindings: Any, prepared: Any = None) -> None:
        rec["set"].append((node.index, dnode.split("-")[-1]))

    monkeypatch.setattr(_api, "require_driver", lambda: rec["driver"])
    monkeypatch.setattr(_executable, "require_driver", lambda: rec["driver"])
    for module in (_executable, _updating):
        monkeypatch.setattr(module, "lower", lower)
        monkeypatch.setattr(module, "_instantiate_lowered", instantiate_lowered)
    monkeypatch.setattr(_executable, "ensure_context", lambda: "ctx")
    monkeypatch.setattr(_base, "ensure_context", lambda: "ctx")
    monkeypatch.setattr(Executable, "_set_node", set_node)
    monkeypatch.setattr(KernelWriter, "run", lambda self, nodes, start, driver_nodes, teach=None, bindings=None: start)
    monkeypatch.setattr(KernelWriter, "write", lambda self, *args: False)
    yield rec
    for exe in rec["made"]:
        exe._finalizer.detach()


def instantiate(rec: dict[str, Any], g: cg.Graph, eager: bool = False) -> Executable:
    exe = g.instantiate()
    rec["made"].append(exe)
    if eager:
        exe._record()  # what instantiation did before it deferred the records
    return exe


def user_style(n: int = 12) -> cg.Graph:
    """Three kernels interleaved, a fresh argument tuple per node, every fourth node with two dependencies,
    a fill and a copy."""
    g = cg.Graph("user")
    kernels = (K1, K2, K3)
    m = g.memset(0x10000, 0, count=32, element_size=4, name="zero")
    prev, before = m, None
    for i in range(n):
        after = [prev, before] if before is not None and i % 4 == 3 else prev
        node = g.kernel(kernels[i % 3], 1, 32, (0x10000 + 0x100 * (i % 2), np.float32(i), N), after=after)
        before, prev = prev, node
    g.memcpy(0x20000, 0x10000, 128, after=prev, name="out")
    return g


# --------------------------------------------------------------------------- nothing recorded at instantiation


def test_instantiate_calls_neither_node_state_nor_the_signature(fake, monkeypatch):
    calls = {"state": 0, "signature": 0}
    real_state, real_sig = _updating.node_state, _compare.topology_signature

    def counted_state(n: Any) -> Any:
        calls["state"] += 1
        return real_state(n)

    def counted_sig(g: Any) -> Any:
        calls["signature"] += 1
        return real_sig(g)

    monkeypatch.setattr(_updating, "node_state", counted_state)
    monkeypatch.setattr(_compare, "topology_signature", counted_sig)
    monkeypatch.setattr(_updating, "topology_signature", counted_sig)
    g = user_style()
    exe = instantiate(fake, g)
    assert calls == {"state": 0, "signature": 0}
    assert exe._states is None and exe._sig is None
    assert _edits.watched(g) == 1
    # The first update records both, from the nodes lowered.
    assert exe.update(g) == UpdateResult("unchanged")
    assert calls == {"state": len(g), "signature": 2}  # the executable's, then g's own
    assert exe._states == [node_state(n) for n in g.nodes]


def test_states_recorded_on_first_update_equal_those_recorded_at_instantiation(fake, monkeypatch):
    g1 = user_style()
    eager_states = [node_state(n) for n in g1.nodes]
    eager_sig = _compare.topology_signature(g1)
    exe = instantiate(fake, g1)
    seen: list[Any] = []
    real_diff = _updating.diff_states

    def spy(old_states: list[Any], graph: cg.Graph) -> Any:
        seen.append(list(old_states))
        return real_diff(old_states, graph)

    monkeypatch.setattr(_updating, "diff_states", spy)
    g2 = user_style()
    g2.nodes[3].update(args=(0x9000, A, N))
    assert exe.update(g2) == UpdateResult("per-node", 1)
    assert fake["set"] == [(3, "3")]
    assert seen == [eager_states]
    assert all(a is b or (a == b and type(a) is type(b)) for x, y in zip(seen[0], eager_states) for a, b in zip(x, y))
    assert exe._signature() == eager_sig


def test_the_cache_records_only_on_a_hit(fake):
    cache = cg.ExecutableCache()
    exe = cache.get(user_style())
    assert exe._states is None and exe._sig is not None  # the cache knew the signature already
    g2 = user_style()
    g2.nodes[5].update(args=(0x9000, A, N))
    assert cache.get(g2) is exe
    assert fake["set"] == [(5, "5")]
    assert exe._states == [node_state(n) for n in g2.nodes]
    cache.clear()


def test_a_definition_with_nested_graphs_is_recorded_at_instantiation(fake):
    body = cg.Graph("body")
    inner = body.memset(0x10000, 0, count=4)
    g = cg.Graph("parent")
    g.child(body)
    g.kernel(K1, 1, 32, (0x1000, A, N))
    exe = instantiate(fake, g)
    assert exe._states == [node_state(n) for n in g.nodes] and exe._sig is not None
    assert _edits.watched(g) == 0
    inner.update(value=3)  # the body knows nothing of its parent's executables
    assert exe.update(g) == UpdateResult("per-node", 1)


def test_nested_graphs_are_recorded_whatever_the_lowering_kept_of_them(fake):
    body = cg.Graph("body")
    body.memset(0x10000, 0, count=4)
    g = cg.Graph("parent")
    g.child(body)
    lowered = lowered_for(g)
    lowered.bodies = []  # the capture backend inlines bodies: it keeps none
    exe = Executable(g, lowered, "exec0", [], {})
    exe._finalizer.detach()
    assert exe._states == [node_state(n) for n in g.nodes] and exe._sig is not None


# --------------------------------------------------------------------------- edits in place, as before


def _update_args(g: cg.Graph) -> None:
    g.nodes[2].update(args=(0x9000, A, N))


def _same_args_new_tuple(g: cg.Graph) -> None:
    g.nodes[2].update(args=tuple(g.nodes[2].args))  # type: ignore[attr-defined]


def _equal_args_new_objects(g: cg.Graph) -> None:
    old = g.nodes[2].args  # type: ignore[attr-defined]
    g.nodes[2].update(args=(old[0], np.float32(float(old[1])), np.int32(int(old[2]))))


def _scalar_of_another_type(g: cg.Graph) -> None:
    old = g.nodes[2].args  # type: ignore[attr-defined]
    g.nodes[2].update(args=(old[0], np.float64(float(old[1])), old[2]))


def _equal_grid(g: cg.Graph) -> None:
    g.nodes[4].update(grid=1)


def _other_grid(g: cg.Graph) -> None:
    g.nodes[4].update(grid=2)


def _other_kernel(g: cg.Graph) -> None:
    g.nodes[1].update(kernel=K3)


def _fill_value(g: cg.Graph) -> None:
    g.nodes[0].update(value=7)


def _new_node(g: cg.Graph) -> None:
    g.kernel(K1, 1, 32, (0x10000, A, N), after=g.nodes[-1])


def _new_root(g: cg.Graph) -> None:
    g.empty()


def _new_edge(g: cg.Graph) -> None:
    g.add_edge(g.nodes[0], g.nodes[6])


def _removed_edge(g: cg.Graph) -> None:
    g.remove_edge(g.nodes[5], g.nodes[6])


def _edge_added_then_removed(g: cg.Graph) -> None:
    g.add_edge(g.nodes[0], g.nodes[6])
    g.remove_edge(g.nodes[0], g.nodes[6])


def _edge_removed_then_added(g: cg.Graph) -> None:
    # Node 4 depends on 3 and 2; removing 3 and adding it back changes the edge order.
    g.remove_edge(g.nodes[3], g.nodes[4])
    g.add_edge(g.nodes[3], g.nodes[4])


def _two_edits(g: cg.Graph) -> None:
    g.nodes[2].update(args=(0x9000, A, N))
    g.nodes[7].update(args=(0x9000, A, N))


def _refused_edit(g: cg.Graph) -> None:
    with pytest.raises(CudaGraphError):
        g.nodes[2].update(grid=0)


EDITS: dict[str, Callable[[cg.Graph], None]] = {
    f.__name__.strip("_"): f
    for f in (
        _update_args,
        _same_args_new_tuple,
        _equal_args_new_objects,
        _scalar_of_another_type,
        _equal_grid,
        _other_grid,
        _other_kernel,
        _fill_value,
        _new_node,
        _new_root,
        _new_edge,
        _removed_edge,
        _edge_added_then_removed,
        _edge_removed_then_added,
        _two_edits,
        _refused_edit,
    )
}

#: What ``exe.update(g)`` gives after each edit (mode and nodes set, or the error's message).
EXPECTED: dict[str, Any] = {
    "update_args": ("per-node", [2]),
    "same_args_new_tuple": ("unchanged", []),
    "equal_args_new_objects": ("unchanged", []),
    "scalar_of_another_type": ("per-node", [2]),
    "equal_grid": ("unchanged", []),
    "other_grid": ("per-node", [4]),
    "other_kernel": ("per-node", [1]),
    "fill_value": ("per-node", [0]),
    "new_node": "edited in place",
    "new_root": "edited in place",
    "new_edge": "edited in place",
    "removed_edge": "edited in place",
    "edge_added_then_removed": ("unchanged", []),
    "edge_removed_then_added": "edited in place",
    "two_edits": ("per-node", [2, 7]),
    "refused_edit": ("unchanged", []),
}


def _outcome(rec: dict[str, Any], exe: Executable, g: cg.Graph) -> Any:
    rec["set"].clear()
    try:
        res = exe.update(g)
    except CudaGraphError as exc:
        return (type(exc).__name__, str(exc))
    return (res, list(rec["set"]))


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edit_in_place_after_instantiate_is_seen_as_before(fake, edit):
    outcomes = []
    for eager in (True, False):
        g = user_style()
        exe = instantiate(fake, g, eager=eager)
        EDITS[edit](g)
        first = _outcome(fake, exe, g)
        again = _outcome(fake, exe, g)  # the states recorded by the first update are g's now
        outcomes.append((first, again))
    assert outcomes[0] == outcomes[1]
    first, again = outcomes[1]
    expected = EXPECTED[edit]
    if isinstance(expected, str):
        assert first[0] == "DefinitionError" and expected in first[1], first
        assert again == first
    else:
        mode, nodes = expected
        res, set_nodes = first
        assert res.mode == mode and [i for i, _ in set_nodes] == nodes
        assert again == (UpdateResult("unchanged"), [])


def test_edits_after_an_update_are_diffed_against_that_update(fake):
    g = user_style()
    exe = instantiate(fake, g)
    assert exe.update(g) == UpdateResult("unchanged")
    g.nodes[3].update(args=(0x9000, A, N))
    fake["set"].clear()
    assert exe.update(g) == UpdateResult("per-node", 1) and fake["set"] == [(3, "3")]


def test_every_executable_of_an_edited_definition_records_it(fake):
    g = user_style()
    first, second = instantiate(fake, g), instantiate(fake, g)
    assert _edits.watched(g) == 2
    g.nodes[2].update(args=(0x9000, A, N))
    assert _edits.watched(g) == 0
    for exe in (first, second):
        assert exe._states is not None and exe._states[2][4] == (0x10100, np.float32(1.0), N)
        fake["set"].clear()
        assert exe.update(g) == UpdateResult("per-node", 1) and [i for i, _ in fake["set"]] == [2]


def test_parametrize_after_instantiate_is_an_edit(fake):
    def build() -> cg.Graph:
        g = cg.Graph("lifted")
        a = g.kernel(K1, 1, 32, (struct.pack("<Q", X + 8), struct.pack("<i", 4)))
        g.kernel(K2, 1, 32, (struct.pack("<Q", 0x5000), struct.pack("<i", 4)), after=a)
        return g

    results = []
    for eager in (True, False):
        g = build()
        exe = instantiate(fake, g, eager=eager)
        g.parametrize(x=(X, 64))
        results.append(_outcome(fake, exe, g))
    assert results[0] == results[1]
    res, set_nodes = results[1]
    assert res.mode == "per-node" and [i for i, _ in set_nodes] == [0]


def test_watchers_of_dead_executables_are_dropped(fake):
    g = user_style()
    exe = instantiate(fake, g)
    fake["made"].remove(exe)
    exe._finalizer.detach()
    del exe
    gc.collect()
    assert _edits.watched(g) == 0
    g.nodes[2].update(args=(0x9000, A, N))  # nobody to tell: nothing happens
    for _ in range(40):
        e = instantiate(fake, g)
        fake["made"].remove(e)
        e._finalizer.detach()
        del e
    gc.collect()
    entry = _edits._WATCHERS[id(g)]
    assert len(entry[1]) < 40  # pruned on the way


def test_a_forgotten_definition_leaves_no_entry(fake):
    g = user_style()
    exe = instantiate(fake, g)
    key = id(g)
    assert key in _edits._WATCHERS
    fake["made"].remove(exe)
    exe._finalizer.detach()
    del exe, g
    gc.collect()
    assert key not in _edits._WATCHERS


# --------------------------------------------------------------------------- the checks instantiation skips


@pytest.fixture
def walks(fake, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count the structure checks and the parameter walks of ``g.instantiate()``."""
    calls = {"validate": 0, "unfreed": 0}
    real_validate, real_unfreed = cg.Graph._validate_structure, cg.Graph._unfreed_allocs

    def validate(self: cg.Graph) -> None:
        calls["validate"] += 1
        real_validate(self)

    def unfreed(self: cg.Graph) -> list[Any]:
        calls["unfreed"] += 1
        return real_unfreed(self)

    monkeypatch.setattr(cg.Graph, "_validate_structure", validate)
    monkeypatch.setattr(cg.Graph, "_unfreed_allocs", unfreed)
    return calls


def test_a_flat_forward_graph_is_not_walked(fake, walks):
    g = user_style()
    exe = instantiate(fake, g)
    assert walks == {"validate": 0, "unfreed": 0} and exe.bindings == {}
    p = cg.Graph("p")
    x = p.param("x")
    p.kernel(K1, 1, 32, (x, A, N))
    with pytest.raises(cg.errors.DefinitionError, match=r"unbound parameter\(s\) 'x'"):
        p.instantiate()
    exe = p.instantiate(x=0x5000)
    fake["made"].append(exe)
    assert exe.bindings == {"x": 0x5000}
    with pytest.raises(cg.errors.OperandError, match=r"has no parameter\(s\) 'y'"):
        g.instantiate(y=1)
    assert walks == {"validate": 0, "unfreed": 0}


def test_a_backward_edge_a_body_or_an_allocation_is_checked(fake, walks):
    g = cg.Graph("backward")
    a, b = g.empty(), g.empty()
    g.add_edge(b, a)  # the order of creation is no longer a topological order
    instantiate(fake, g)
    assert walks == {"validate": 1, "unfreed": 0}

    body = cg.Graph("body")
    body.alloc(64)
    parent = cg.Graph("parent")
    parent.child(body)
    with pytest.raises(cg.errors.DefinitionError, match="never freed"):
        parent.instantiate()
    assert walks["unfreed"] == 1  # one walk (an explicit stack) covers the parent and its body

    flat = cg.Graph("flat")
    flat.alloc(64)
    with pytest.raises(cg.errors.DefinitionError, match="never freed"):
        flat.instantiate()


def test_is_flat_sees_a_nested_graph_added_after_a_flat_answer():
    from cudagraph.definition.diff import is_flat

    g = user_style(4)
    assert is_flat(g) and is_flat(g)
    g.kernel(K1, 1, 32, (0x1000, A, N))
    assert is_flat(g)
    body = cg.Graph("body")
    body.empty()
    g.child(body)
    assert not is_flat(g) and not is_flat(g)
    assert is_flat(body)
