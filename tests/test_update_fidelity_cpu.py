"""Update fidelity on the CPU: launch attributes and edge types are part of the topology (no GPU).

``cuGraphExecKernelNodeSetParams`` cannot change a node's launch attributes (cluster shape, priority,
cooperative, ``attributes=``) or the type of its incoming edges (programmatic, launch order, plain), and
``cuGraphExecUpdate`` keeps attributes it cannot update silently. So two definitions that differ only there
never share an executable: their topology signatures differ (the cache keeps one executable each),
``exe.update`` refuses naming the node and the difference, or re-instantiates when asked to and says so.

``Executable.update`` runs end to end over a stub driver, as in ``tests/test_cache_cpu.py``: the per-node
sets (``Executable._set_node``), the lowerings (``lower``: a new driver graph), the instantiations and the
driver's ``cuGraphExecUpdate`` / ``cuGraphExecDestroy`` are recorded, so what reached the driver is checked
exactly.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.driver.api as _api
import cudagraph.executable.executable as _executable
import cudagraph.executable.updating as _updating
from cudagraph.definition import diff as _diff
from cudagraph.definition.diff import (
    LaunchSignature,
    describe_topology_diff,
    has_bodies,
    launch_differences,
    node_state,
)
from cudagraph.definition.kinds.kernel import LaunchAttrs, launch_signature
from cudagraph.definition.nodes import ChildGraphNode
from cudagraph.errors import DefinitionError
from cudagraph.executable import compare as _compare
from cudagraph.executable.executable import Executable, UpdateResult
from cudagraph.materialize.explicit import LoweredGraph, node_params_uses
from cudagraph.ops.kinds.kernel import KernelWriter
from test_cache_cpu import StubDriver  # (the same stub of the driver calls an update makes)


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K = CUkernel()
A = np.float32(1.0)
N = np.int32(32)

#: Launch variants of the second kernel of :func:`build` (``None``: a plain launch after a plain edge).
VARIANTS = (
    None,
    "programmatic",
    "launch_order",
    "cluster",
    "cluster4",
    "priority",
    "priority2",
    "cooperative",
    "attributes",
    "attributes2",
)

#: Pairs of definitions that differ only in a launch attribute or an edge type, and the message naming it
#: (``old vs new``: the executable's definition first).
PAIRS = [
    (None, "programmatic", "edge kernel#0 'a' -> kernel#1 'b': plain vs programmatic"),
    ("programmatic", None, "edge kernel#0 'a' -> kernel#1 'b': programmatic vs plain"),
    ("programmatic", "launch_order", "edge kernel#0 'a' -> kernel#1 'b': programmatic vs launch_order"),
    (None, "cluster", "kernel#1 'b': launch attributes differ: none vs cluster=(2, 1, 1)"),
    ("cluster", None, "kernel#1 'b': launch attributes differ: cluster=(2, 1, 1) vs none"),
    ("cluster", "cluster4", "kernel#1 'b': launch attributes differ: cluster=(2, 1, 1) vs cluster=(4, 1, 1)"),
    (None, "priority", "kernel#1 'b': launch attributes differ: none vs priority=1"),
    ("priority", "priority2", "kernel#1 'b': launch attributes differ: priority=1 vs priority=2"),
    (None, "cooperative", "kernel#1 'b': launch attributes differ: not cooperative vs cooperative"),
    (None, "attributes", "kernel#1 'b': launch attributes differ: none vs mem_sync_domain=1"),
    ("attributes", None, "kernel#1 'b': launch attributes differ: mem_sync_domain=1 vs none"),
    ("attributes", "attributes2", "kernel#1 'b': launch attributes differ: none vs cluster_scheduling_policy=1"),
]
PAIR_IDS = [f"{a}-{b}" for a, b, _ in PAIRS]


def build(variant: str | None = None, scale: float = 1.0, name: str = "g") -> cg.Graph:
    """kernel a -> kernel b -> memcpy: b launched as ``variant`` says; a's arguments hold ``scale``."""
    g = cg.Graph(name)
    a = g.kernel(K, 4, 32, (0x1000, np.float32(scale), N), name="a")
    kw: dict[str, Any] = {
        None: {},
        "programmatic": {"programmatic": a},
        "launch_order": {},
        "cluster": {"cluster": (2, 1, 1)},
        "cluster4": {"cluster": 4},
        "priority": {"priority": 1},
        "priority2": {"priority": 2},
        "cooperative": {"cooperative": True},
        "attributes": {"attributes": {"mem_sync_domain": 1}},
        "attributes2": {"attributes": {"mem_sync_domain": 1, "cluster_scheduling_policy": 1}},
    }[variant]
    if variant == "launch_order":
        b = g.kernel(K, 4, 32, (0x2000, A, N), name="b")
        g.add_edge(a, b, programmatic="launch_order")
    else:
        b = g.kernel(K, 4, 32, (0x2000, A, N), after=a, name="b", **kw)
    g.memcpy(0x3000, 0x2000, 16, after=b, name="out")
    return g


@pytest.fixture(params=["python", "native"])
def impl(request: pytest.FixtureRequest) -> Any:
    """The signature functions: the definition layer's, or the compiled ones the executable and cache use."""
    if request.param == "python":
        return _diff
    if _compare._layout() is None:
        pytest.skip("cudagraph.driver._native was not built")
    return _compare


# --------------------------------------------------------------------------- signatures


def test_each_launch_variant_has_its_own_signature(impl):
    sigs = [impl.topology_signature(build(v)) for v in VARIANTS]
    for i, v in enumerate(VARIANTS):
        assert impl.topology_signature(build(v, scale=3.0)) == sigs[i], v  # parameters are not topology
        for j in range(i):
            assert sigs[i] != sigs[j], (VARIANTS[j], v)
    assert len(set(sigs)) == len(VARIANTS)  # (hashable, and hashed apart)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_compiled_signature_equals_the_python_twin(variant):
    if _compare._layout() is None:
        pytest.skip("cudagraph.driver._native was not built")
    g = build(variant)
    assert _compare.topology_signature(g) == _diff.topology_signature(g)
    assert not has_bodies(_diff.topology_signature(g))  # still a flat graph: no re-check of its structure


def test_a_plain_graph_keeps_its_flat_signature_and_its_record():
    g = build()
    if cg.Graph._record_type is not None:  # (cudagraph.definition._define built)
        assert len(g._topo) == 3  # the record speaks for the graph: its signature reads no node
    assert type(_diff.topology_signature(g)) is bytes and type(_compare.topology_signature(g)) is bytes


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v is not None])
def test_an_attributed_graph_signs_its_launches(variant):
    g = build(variant)
    assert g._topo is None  # the record holds no launch attributes: the signature reads the nodes
    sig = _diff.topology_signature(g)
    assert type(sig) is tuple and len(sig) == 2 and type(sig[0]) is bytes
    assert sig[1] == LaunchSignature(((1, g.nodes[1].attrs.signature()),))
    assert sig[0] == _diff.topology_signature(build())  # the same kinds, order and edges as the plain graph


def test_the_compiled_layout_signs_kinds_and_edges_and_python_adds_the_launches():
    layout = _compare._layout()
    if layout is None:
        pytest.skip("cudagraph.driver._native was not built")
    g = build("cluster")
    assert g._attributed  # the graph knows it may hold launch attributes
    assert not build()._attributed
    _compare.topology_signature(g)  # (codes the classes)
    plain = layout.signature(g._nodes, _diff.CODED_CLASSES)
    assert plain == _diff.topology_signature(build())  # kinds, order, edges: the launches come on top
    assert (
        _compare.topology_signature(g)
        == _diff.topology_signature(g)
        == (
            plain,
            LaunchSignature(((1, g.nodes[1].attrs.signature()),)),
        )
    )


def test_a_node_with_only_the_shared_memory_opt_in_launches_plainly():
    g1 = cg.Graph("g")
    g1.kernel(K, 1, 32, (0x1000, A, N), shared_mem=64 * 1024)
    g2 = cg.Graph("g")
    g2.kernel(K, 1, 32, (0x1000, A, N), shared_mem=1024)
    assert g1.nodes[0].attrs is not None and g1.nodes[0].attrs.smem_optin and g2.nodes[0].attrs is None
    assert launch_signature(g1.nodes[0].attrs) is None
    assert _diff.topology_signature(g1) == _diff.topology_signature(g2)  # shared_mem is a parameter
    assert describe_topology_diff(g1, g2) == []


def test_bodies_carry_the_launches_of_their_kernels(impl):
    def parent(cluster: Any) -> cg.Graph:
        body = cg.Graph("body")
        body.kernel(K, 4, 32, (0x1000, A, N), cluster=cluster, name="inner")
        g = cg.Graph("parent")
        g.child(body, name="c")
        return g

    assert impl.topology_signature(parent(None)) != impl.topology_signature(parent(2))
    assert impl.topology_signature(parent(2)) == impl.topology_signature(parent(2))
    assert impl.topology_signature(parent(2)) != impl.topology_signature(parent(4))
    assert has_bodies(impl.topology_signature(parent(2)))
    assert describe_topology_diff(parent(None), parent(2)) == [
        "kernel#0 'inner' in /child#0 'c': launch attributes differ: none vs cluster=(2, 1, 1)"
    ]


# --------------------------------------------------------------------------- describing the differences


@pytest.mark.parametrize(("old", "new", "message"), PAIRS, ids=PAIR_IDS)
def test_differences_name_the_node_and_what_differs(old, new, message):
    assert describe_topology_diff(build(old), build(new)) == [message]
    assert describe_topology_diff(build(old), build(old, scale=5.0)) == []


def test_launch_differences_list_every_attribute_and_port():
    a, b = build("cluster"), build("programmatic")
    texts, ports = launch_differences(a.nodes[1].attrs, b.nodes[1].attrs)
    assert texts == ["cluster=(2, 1, 1) vs none"] and ports == {0: (None, "programmatic")}
    assert launch_differences(None, None) == ([], {})
    assert launch_differences(a.nodes[1].attrs, build("cluster").nodes[1].attrs) == ([], {})


def test_an_added_programmatic_edge_says_its_port():
    g1 = cg.Graph("g")
    x = g1.kernel(K, 1, 32, (0x1000, A, N), name="x")
    g1.kernel(K, 1, 32, (0x1000, A, N), name="y")
    g2 = cg.Graph("g")
    x2 = g2.kernel(K, 1, 32, (0x1000, A, N), name="x")
    g2.kernel(K, 1, 32, (0x1000, A, N), after=x2, programmatic=True, name="y")
    assert x is not None
    assert describe_topology_diff(g1, g2) == ["edge added: #0 -> kernel#1 'y' (programmatic)"]
    assert describe_topology_diff(g2, g1) == ["edge removed: #0 -> kernel#1 'y' (programmatic)"]


def test_launch_attributes_compare_by_what_the_driver_holds():
    a1, a2 = build("cluster").nodes[1].attrs, build("cluster").nodes[1].attrs
    assert a1 is not a2 and a1 == a2 and hash(a1) == hash(a2)
    assert a1 != build("cluster4").nodes[1].attrs and a1 != build("priority").nodes[1].attrs
    assert node_state(build("cluster").nodes[1]) == node_state(build("cluster").nodes[1])


def test_edge_edits_replace_the_attributes_instead_of_changing_them():
    g = build("cluster")
    a, b = g.nodes[0], g.nodes[1]
    before = b.attrs
    g.remove_edge(a, b)
    g.add_edge(a, b, programmatic=True)
    assert b.attrs is not before and before.programmatic == [] and b.attrs.programmatic == [(a, "programmatic")]
    held = b.attrs
    g.remove_edge(a, b)
    assert held.programmatic == [(a, "programmatic")] and b.attrs.programmatic == [] and b.attrs.cluster == (2, 1, 1)


# --------------------------------------------------------------------------- Executable.update on a stub driver


class StubLowering:
    """What LoweredGraph reads of a Lowering: the node map, parameter users, bodies and host keys."""

    def __init__(self, graph: cg.Graph, driver_nodes: list[Any]) -> None:
        self.host_keys: list[int] = []
        self.state = None
        self.bodies: list[cg.Graph] = []
        self.param_users: dict[str, list[Any]] = {}
        self.map: dict[int, tuple[Any, Any]] = {}
        for n, d in zip(graph._nodes, driver_nodes):
            self.map[id(n)] = (n, d)
            for name in node_params_uses(n):
                self.param_users.setdefault(name, []).append(n)
            if type(n) is ChildGraphNode:
                self.bodies.append(n.body)  # type: ignore[attr-defined]

    def node_map(self) -> dict[int, tuple[Any, Any]]:
        return dict(self.map)


def lowered_for(graph: cg.Graph, tag: str = "d") -> LoweredGraph:
    dn = [f"{tag}{i}" for i in range(len(graph))]
    return LoweredGraph(None, graph, dn, StubLowering(graph, dn))  # type: ignore[arg-type]


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Replace every driver call of ``Executable.update``; records what was asked."""
    rec: dict[str, Any] = {"set": [], "lower": [], "instantiated": [], "driver": StubDriver()}

    def set_node(self: Executable, node: Any, dnode: Any, bindings: Any, prepared: Any = None) -> None:
        rec["set"].append((node, dnode))

    def lower(graph: cg.Graph, bindings: dict[str, Any], sink: list[Any]) -> LoweredGraph:
        rec["lower"].append(weakref.ref(graph))
        return lowered_for(graph, tag=f"L{len(rec['lower'])}-")

    def instantiate_lowered(lw: LoweredGraph, flags: int, stream: Any) -> str:
        rec["instantiated"].append(lw.definition)
        return f"exec{len(rec['lower'])}"

    monkeypatch.setattr(Executable, "_set_node", set_node)
    # Every node goes through the recorded _set_node: the kernel writer takes none directly.
    monkeypatch.setattr(KernelWriter, "run", lambda self, nodes, start, driver_nodes, teach=None, bindings=None: start)
    monkeypatch.setattr(KernelWriter, "write", lambda self, *args: False)
    monkeypatch.setattr(_updating, "lower", lower)
    monkeypatch.setattr(_api, "require_driver", lambda: rec["driver"])
    monkeypatch.setattr(_updating, "_instantiate_lowered", instantiate_lowered)
    return rec


def make_exe(graph: cg.Graph) -> Executable:
    exe = Executable(graph, lowered_for(graph), "exec0", [], {})
    exe._finalizer.detach()
    exe._ctx = "ctx"
    return exe


def assert_untouched(stub: dict[str, Any]) -> None:
    """Nothing reached the driver: no node set, no graph lowered or instantiated, no exec updated or destroyed."""
    assert stub["set"] == [] and stub["lower"] == [] and stub["instantiated"] == [] and stub["driver"].calls == []


@pytest.mark.parametrize(("old", "new", "message"), PAIRS, ids=PAIR_IDS)
def test_update_refuses_naming_the_node_and_the_difference(stub, old, new, message):
    g1, g2 = build(old), build(new)
    exe = make_exe(g1)
    with pytest.raises(DefinitionError) as ei:
        exe.update(g2)
    text = str(ei.value)
    assert f"the topology differs: {message} " in text and "reinstantiate_if_needed=True" in text
    assert_untouched(stub)
    assert exe.graph is g1 and exe._exec == "exec0"


@pytest.mark.parametrize(("old", "new", "message"), PAIRS, ids=PAIR_IDS)
def test_update_reinstantiates_on_request_and_says_why(stub, old, new, message):
    g1, g2 = build(old), build(new)
    exe = make_exe(g1)
    res = exe.update(g2, reinstantiate_if_needed=True)
    assert res == UpdateResult("reinstantiated", 3, message)
    assert [r() for r in stub["lower"]] == [g2] and stub["instantiated"] == [g2]  # a new driver graph, of g2
    assert stub["driver"].calls == [("cuGraphExecDestroy", "exec0")]  # never cuGraphExecUpdate
    assert stub["set"] == []
    assert exe.graph is g2 and exe._exec == "exec1" and exe._lowered.definition is g2
    assert exe._signature() == _compare.topology_signature(g2)
    # Rebuilds of g2 take the fast path from now on: nothing unchanged is set, nothing lowered again.
    assert exe.update(build(new)) == UpdateResult("unchanged")
    res = exe.update(build(new, scale=2.0))
    assert res == UpdateResult("per-node", 1)
    assert [n.name for n, _ in stub["set"]] == ["a"] and len(stub["lower"]) == 1
    assert stub["driver"].calls == [("cuGraphExecDestroy", "exec0")]


@pytest.mark.parametrize("variant", VARIANTS)
def test_identical_rebuilds_take_the_per_node_path(stub, variant):
    exe = make_exe(build(variant))
    assert exe.update(build(variant)) == UpdateResult("unchanged")
    assert exe.update(build(variant, scale=4.0)) == UpdateResult("per-node", 1)
    assert [(n.name, d) for n, d in stub["set"]] == [("a", "d0")]
    assert stub["lower"] == [] and stub["instantiated"] == [] and stub["driver"].calls == []


def test_launch_differences_never_take_the_whole_graph_path(stub, monkeypatch):
    monkeypatch.setattr(_updating, "WHOLE_GRAPH_THRESHOLD", 0.0)  # every change would go through cuGraphExecUpdate
    exe = make_exe(build())
    with pytest.raises(DefinitionError, match="none vs cluster"):
        exe.update(build("cluster", scale=2.0))
    assert_untouched(stub)
    assert exe.update(build("cluster", scale=2.0), reinstantiate_if_needed=True).mode == "reinstantiated"
    assert ("cuGraphExecUpdate", "exec0") not in stub["driver"].calls


def test_definition_edited_in_place_is_compared_with_what_was_run(stub):
    g = build()
    exe = make_exe(g)
    g.nodes[1].update(cluster=(2, 1, 1))  # launch keywords only: the executable records the definition first
    with pytest.raises(DefinitionError, match=r"kernel#1 'b': launch attributes differ: none vs cluster=\(2, 1, 1\)"):
        exe.update(g)
    assert_untouched(stub)
    res = exe.update(g, reinstantiate_if_needed=True)
    assert (res.mode, res.reason) == (
        "reinstantiated",
        "kernel#1 'b': launch attributes differ: none vs cluster=(2, 1, 1)",
    )
    assert [r() for r in stub["lower"]] == [g]
    # An edge made programmatic in place (removed, then added back with a port).
    a, b = g.nodes[0], g.nodes[1]
    g.remove_edge(a, b)
    g.add_edge(a, b, programmatic=True)
    with pytest.raises(DefinitionError, match=r"edge kernel#0 'a' -> kernel#1 'b': plain vs programmatic"):
        exe.update(g)
    assert len(stub["lower"]) == 1


def test_a_signature_that_missed_the_attributes_is_caught_by_the_node_comparison(stub):
    """Attributes given to a node after its graph recorded it (as a lift gives them) leave the recorded
    topology silent about them; the node comparison still refuses to set such a node per node."""
    g1, g2 = build(), build()
    attrs = LaunchAttrs()
    attrs.cluster = (2, 1, 1)
    g2.nodes[1].attrs = attrs  # bypasses the builders, as the lift's carry does
    exe = make_exe(g1)
    exe._shape()  # recorded from g1
    with pytest.raises(DefinitionError, match=r"kernel#1 'b': launch attributes differ: none vs cluster=\(2, 1, 1\)"):
        exe.update(g2, _signature=exe._signature())  # as the cache passes a signature it found equal
    assert_untouched(stub)
    res = exe.update(g2, reinstantiate_if_needed=True, _signature=exe._signature())
    assert res.mode == "reinstantiated" and [r() for r in stub["lower"]] == [g2]


# --------------------------------------------------------------------------- node views


def test_node_views_refuse_launch_attribute_changes(stub, monkeypatch):
    monkeypatch.setattr(_updating, "PreparedKernel", lambda node, bindings: None)  # (reads no kernel here)
    g = build("cluster")
    exe = make_exe(g)
    b = g.nodes[1]
    for changes in ({"cluster": (4, 1, 1)}, {"priority": 3}, {"cooperative": False}, {"attributes": None}):
        with pytest.raises(DefinitionError) as ei:
            exe[b].update(**changes)
        text = str(ei.value)
        assert text.startswith("kernel#1 'b': exe[node].update() cannot change ")
        assert f"{next(iter(changes))}=" in text and "reinstantiate_if_needed=True" in text
    with pytest.raises(DefinitionError, match="programmatic="):
        exe[b].update(programmatic=g.nodes[0])
    # A new grid is checked against the cluster the node keeps.
    with pytest.raises(DefinitionError, match=r"kernel#1 'b': grid\[0\] = 5 is not a multiple of cluster\[0\] = 2"):
        exe[b].update(grid=5)
    assert_untouched(stub)
    # Parameters are set, and the node keeps its launch attributes.
    exe[b].update(grid=8, args=(0x4000, A, N))
    assert [(n.grid, d) for n, d in stub["set"]] == [((8, 1, 1), "d1")]
    assert stub["set"][0][0].attrs.cluster == (2, 1, 1)


# --------------------------------------------------------------------------- ExecutableCache on a stub driver


@pytest.fixture
def cache_stub(stub: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    made: list[Executable] = []

    def instantiate(graph: cg.Graph, **kwargs: Any) -> Executable:
        exe = make_exe(graph)
        made.append(exe)
        return exe

    monkeypatch.setattr(_executable, "instantiate", instantiate)
    stub["made"] = made
    return stub


@pytest.mark.parametrize(("old", "new", "message"), PAIRS, ids=PAIR_IDS)
def test_the_cache_never_shares_an_executable_between_launch_variants(cache_stub, old, new, message):
    cache = cg.ExecutableCache(maxsize=4)
    e_old = cache.get(build(old))
    e_new = cache.get(build(new))
    assert e_old is not e_new and cache_stub["made"] == [e_old, e_new]
    assert cache.stats()["misses"] == 2 and cache.stats()["hits"] == 0
    # Rebuilt every step, alternating: each definition goes to its own executable, updated per node.
    for step in range(3):
        g_old, g_new = build(old, scale=step), build(new, scale=step)
        assert cache.get(g_old) is e_old and e_old.graph is g_old
        assert cache.get(g_new) is e_new and e_new.graph is g_new
    assert cache.stats() == {"hits": 6, "misses": 2, "evictions": 0, "size": 2, "maxsize": 4}
    assert cache_stub["lower"] == [] and cache_stub["instantiated"] == [] and cache_stub["driver"].calls == []
    # Node "a" changed in steps 0 (scale 1 -> 0) and 1, 2 for each executable; "b" never.
    assert [n.name for n, _ in cache_stub["set"]] == ["a"] * 6
    assert e_old._lowered.nodes[1].attrs == build(old).nodes[1].attrs
    assert e_new._lowered.nodes[1].attrs == build(new).nodes[1].attrs


def test_a_cache_hit_with_a_signature_that_missed_the_attributes_reinstantiates(cache_stub):
    cache = cg.ExecutableCache()
    exe = cache.get(build())
    g2 = build()
    attrs = LaunchAttrs()
    attrs.priority = 2
    g2.nodes[1].attrs = attrs  # after the record saw the node (as a lift does): the key misses it
    if g2._topo is None or _compare._layout() is None:
        pytest.skip("no topology record (the compiled modules are not built): the key reads the nodes")
    assert _compare.topology_signature(g2) == _compare.topology_signature(build())
    assert cache.get(g2) is exe and exe.graph is g2
    assert [r() for r in cache_stub["lower"]] == [g2]
    assert cache_stub["driver"].calls == [("cuGraphExecDestroy", "exec0")]
