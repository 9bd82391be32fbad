"""Updates of definitions with graph memory and control flow, and removals of conditional nodes (no GPU).

``exe.update(g)`` and ``ExecutableCache.get(g)`` of a definition holding an allocation, a free or a
conditional node once raised a raw ``TypeError`` (``AllocNode has no single-node driver parameters``) even
for an identical rebuild, and the cache entry failed on every later get. Now:

- a rebuilt definition's allocations and conditions are compared by place: an identical rebuild is
  ``"unchanged"`` (no driver call), and the lowered graph's addresses and condition handles follow the new
  objects, so a changed fill of an allocation is set node by node at the allocation's address;
- a node that no update changes (alloc, free) is refused by name before any driver call, or re-instantiated
  when asked to; a conditional or ``set_condition`` node takes the whole-graph path (``cuGraphExecUpdate``),
  which an executable holding graph allocations refuses the same way (a graph built anew would place them
  elsewhere);
- ``exe[node].update()`` of such a node, and the kinds' own ``exec_set`` / ``params``, raise typed errors.

``Graph.remove`` of a conditional node once left the condition tied to the removed node (no new conditional
node could use it; with a ``set_condition`` node left, the graph never validated again). Now the condition is
released, or the removal is refused by name while other nodes still set the condition (as for an allocation
still used).

``Executable.update`` runs in-process over a recording driver (the real per-node path: the kinds'
``exec_set``, ``node_params``, the lowered graph's ``LowerState``), and end to end in a fresh interpreter
under the fake ``libcuda.so.1`` of ``bench/fake_driver`` (built with the system C compiler).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.driver.api as _api
import cudagraph.executable.executable as _executable
import cudagraph.executable.updating as _updating
from cudagraph.definition.bindings import node_params_uses
from cudagraph.definition.node import bodies_of
from cudagraph.errors import CudaGraphError, DefinitionError, UnsupportedError
from cudagraph.executable.executable import Executable, UpdateResult
from cudagraph.materialize.explicit import LoweredGraph
from cudagraph.ops.kinds.base import KindOps
from cudagraph.ops.kinds.kernel import KernelWriter
from cudagraph.ops.lower_state import LowerState
from cudagraph.ops.registry import ops_for

drv = pytest.importorskip("cuda.bindings.driver")

ROOT = Path(__file__).resolve().parents[1]


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K = CUkernel()

# --------------------------------------------------------------------------- definitions


def alloc_graph(value: int = 0, nbytes: int = 256, memory_type: str = "device") -> cg.Graph:
    """alloc -> fill of the allocation -> free."""
    g = cg.Graph("mem")
    a = g.alloc(nbytes, memory_type=memory_type, name="scratch")
    m = g.memset(a, value, count=64, element_size=4, after=a, name="fill")
    g.free(a, after=m, name="release")
    return g


def loop_graph(limit: float = 1.0, default: int = 1, value: int = 0) -> cg.Graph:
    """A while loop whose body fills memory and sets its condition."""
    g = cg.Graph("loop")
    c = g.condition(default=default, name="c")
    w = g.while_(c, name="loop")
    m = w.body.memset(0x10000, value, count=4, element_size=4, name="work")
    w.body.set_condition(c, 0x10000, ">", limit, np.float32, after=m, name="test")
    return g


def alloc_loop_graph(limit: float = 1.0, value: int = 0) -> cg.Graph:
    """An allocation holding a loop counter, a while loop testing it, and the free."""
    g = cg.Graph("both")
    a = g.alloc(256, name="counter")
    z = g.memset(a, value, count=4, element_size=4, after=a, name="zero")
    c = g.condition(default=1, name="c")
    w = g.while_(c, after=z, name="loop")
    w.body.set_condition(c, a, "<", limit, np.float32, name="test")
    g.free(a, after=w, name="release")
    return g


def branches_graph(value: int = 0) -> cg.Graph:
    """if, if/else and switch nodes (one nested in another's body) on conditions of the top graph."""
    g = cg.Graph("branches")
    c1, c2, c3, c4 = (g.condition(default=d, name=f"c{d}") for d in range(4))
    i = g.if_(c1, name="if")
    i.body.memset(0x10000, value, count=4, element_size=4, name="then")
    e = g.if_else(c2, after=i, name="ifelse")
    e.then.memset(0x10000, 1, count=4, element_size=4)
    inner = e.else_.if_(c4, name="inner")
    inner.body.empty()
    s = g.switch(c3, 3, after=e, name="switch")
    s.cases[2].memset(0x10000, 2, count=4, element_size=4)
    return g


BUILDERS = {"alloc": alloc_graph, "loop": loop_graph, "alloc+loop": alloc_loop_graph, "branches": branches_graph}

# --------------------------------------------------------------------------- a recording driver

_ADDRESSES = itertools.count(0x7F00_0000_0000, 0x10_0000)
_HANDLES = itertools.count(0x5000, 0x10)


class StubLowering:
    """What ``LoweredGraph`` reads of a ``Lowering``, with a real ``LowerState``: each allocation an address,
    each graph a driver graph handle, each declared condition a handle (as a construction would have them)."""

    def __init__(self, graph: cg.Graph, tag: str) -> None:
        self.host_keys: list[int] = []
        self.bodies: list[cg.Graph] = []
        self.param_users: dict[str, list[Any]] = {}
        self.map: dict[int, tuple[Any, Any]] = {}
        self.state = LowerState(None)
        self.driver_nodes = [f"{tag}{i}" for i in range(len(graph))]
        self._walk(graph, self.driver_nodes)

    def _walk(self, graph: cg.Graph, driver_nodes: list[str]) -> None:
        handle = next(_HANDLES)
        self.state.register_graph(graph, handle)
        for cond in graph._conditions:
            self.state.conds[(id(cond), handle)] = next(_HANDLES)
        for n, d in zip(graph._nodes, driver_nodes):
            self.map[id(n)] = (n, d)
            for name in node_params_uses(n):
                self.param_users.setdefault(name, []).append(n)
            if n.kind == "alloc":
                self.state.allocs[id(n)] = (n, next(_ADDRESSES))  # type: ignore[assignment]
            for j, body in enumerate(bodies_of(n)):
                self.bodies.append(body)
                self._walk(body, [f"{d}/{j}.{k}" for k in range(len(body))])

    def node_map(self) -> dict[int, tuple[Any, Any]]:
        return dict(self.map)


def lowered_for(graph: cg.Graph, tag: str = "d") -> LoweredGraph:
    lowering = StubLowering(graph, tag)
    return LoweredGraph(None, graph, lowering.driver_nodes, lowering)  # type: ignore[arg-type]


class Recorder:
    """The driver module as ``Executable.update`` and ``set_node_params`` see it: the executable calls are
    recorded (fills with their address and value), the rest is cuda.bindings' own (structures only)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(drv, name)

    def cuGraphExecNodeSetParams(self, exec_handle: Any, driver_node: Any, p: Any) -> tuple[int]:
        entry: tuple[Any, ...] = ("set", exec_handle, driver_node, p.type.name)
        if p.type == drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMSET:
            entry += (int(p.memset.dst), int(p.memset.value))
        self.calls.append(entry)
        return (0,)

    def cuGraphExecUpdate(self, exec_handle: Any, graph_handle: Any) -> tuple[int, Any]:
        self.calls.append(("cuGraphExecUpdate", exec_handle))
        return 0, None

    def cuGraphExecDestroy(self, exec_handle: Any) -> tuple[int]:
        self.calls.append(("cuGraphExecDestroy", exec_handle))
        return (0,)


@pytest.fixture
def rec(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Every driver call of ``Executable.update`` recorded; lowerings and instantiations are stand-ins."""
    r = Recorder()
    r.lowered = []  # type: ignore[attr-defined]

    def lower(graph: cg.Graph, bindings: dict[str, Any], sink: list[Any]) -> LoweredGraph:
        r.lowered.append(graph)  # type: ignore[attr-defined]
        return lowered_for(graph, tag=f"L{len(r.lowered)}-")  # type: ignore[attr-defined]

    monkeypatch.setattr(_api, "require_driver", lambda: r)
    monkeypatch.setattr(_updating, "lower", lower)
    monkeypatch.setattr(_updating, "_instantiate_lowered", lambda lw, flags, stream: f"exec{len(r.lowered)}")  # type: ignore[attr-defined]
    # No kernel node is set in these tests; the writer's compiled loop needs a real executable handle.
    monkeypatch.setattr(KernelWriter, "run", lambda self, nodes, start, *args, **kwargs: start)
    monkeypatch.setattr(KernelWriter, "write", lambda self, *args: False)
    return r


def make_exe(graph: cg.Graph, **bindings: Any) -> Executable:
    exe = Executable(graph, lowered_for(graph), "exec0", [], dict(bindings))
    exe._finalizer.detach()
    exe._ctx = drv.CUcontext()
    return exe


def snapshot(exe: Executable) -> dict[str, Any]:
    """What a refused update must leave as it was."""
    state = exe._lowered.state
    return {
        "graph": exe.graph,
        "exec": exe._exec,
        "lowered": exe._lowered,
        "definition": exe._lowered.definition,
        "nodes": list(exe._lowered.nodes),
        "bindings": dict(exe._bindings),
        "states": list(exe._states or []),
        "update_calls": exe.update_calls,
        "allocs": dict(state.allocs),
        "conds": dict(state.conds),
        "graphs": dict(state.graphs),
    }


def address_of(exe: Executable, alloc: Any) -> int:
    return exe._lowered.state.alloc_address(alloc, "test")


# --------------------------------------------------------------------------- identical rebuilds


@pytest.mark.parametrize("kind", list(BUILDERS))
@pytest.mark.parametrize("reinstantiate", [False, True])
def test_an_identical_rebuild_is_unchanged(rec, kind, reinstantiate):
    build = BUILDERS[kind]
    g1 = build()
    exe = make_exe(g1)
    for _ in range(3):
        g = build()
        assert exe.update(g, reinstantiate_if_needed=reinstantiate) == UpdateResult("unchanged")
        assert exe.graph is g and exe._lowered.nodes == list(g.nodes)
    assert rec.calls == [] and rec.lowered == [] and exe.update_calls == 0  # type: ignore[attr-defined]
    assert exe._exec == "exec0"


def test_the_addresses_and_handles_follow_the_rebuilt_objects_and_stay_bounded(rec):
    g1 = alloc_loop_graph()
    exe = make_exe(g1)
    state = exe._lowered.state
    addr = address_of(exe, g1.nodes[0])
    cond1 = g1.conditions[0]
    handle = state.condition_handle(cond1, g1.nodes[2])
    sizes = (len(state.allocs), len(state.conds), len(state.graphs))
    g = g1
    for _ in range(4):
        g = alloc_loop_graph()
        assert exe.update(g) == UpdateResult("unchanged")
        # The rebuilt allocation has the executable's address, the rebuilt condition its handle (no new one).
        assert address_of(exe, g.nodes[0]) == addr
        assert state.condition_handle(g.conditions[0], g.nodes[2]) == handle
        # The definition lowered keeps its entries (the nested nodes of the node map are its own) and one
        # rebuilt definition at a time has entries of its own.
        assert address_of(exe, g1.nodes[0]) == addr
        assert (len(state.allocs), len(state.conds), len(state.graphs)) == (
            2 * sizes[0],
            2 * sizes[1],
            2 * sizes[2],
        )
    # The definition lowered, run again: its entries stay (none is dropped as a rebuilt one's).
    assert exe.update(g1) == UpdateResult("unchanged")
    assert exe.update(alloc_loop_graph()) == UpdateResult("unchanged")
    assert address_of(exe, g1.nodes[0]) == addr and state.condition_handle(cond1, g1.nodes[2]) == handle
    assert rec.calls == []


def test_a_body_shared_by_rebuilt_definitions_keeps_its_handles(rec):
    def loop_body() -> cg.Graph:
        body = cg.Graph("body")
        c = body.condition(default=1, name="c")
        w = body.while_(c, name="loop")
        w.body.set_condition(c, 0x10000, ">", 1.0, np.float32, name="test")
        return body

    def parent(body: cg.Graph) -> cg.Graph:
        g = cg.Graph("parent")
        g.child(body, name="child")
        return g

    exe = make_exe(parent(loop_body()))
    state = exe._lowered.state
    handle = next(iter(state.conds.values()))
    shared = loop_body()  # one body object in every later definition
    sizes = None
    for _ in range(3):
        assert exe.update(parent(shared)) == UpdateResult("unchanged")
        assert state.condition_handle(shared.conditions[0], shared.nodes[0]) == handle
        now = (len(state.conds), len(state.graphs))
        assert sizes is None or now == sizes  # bounded: the shared body's entries are kept, not added again
        sizes = now
    assert rec.calls == []


# --------------------------------------------------------------------------- changes applied


def test_a_changed_fill_of_an_allocation_is_set_at_the_executables_address(rec):
    g1 = alloc_graph()
    exe = make_exe(g1)
    addr = address_of(exe, g1.nodes[0])
    g2 = alloc_graph(value=7)
    assert exe.update(g2) == UpdateResult("per-node", 1)
    assert rec.calls == [("set", "exec0", "d1", "CU_GRAPH_NODE_TYPE_MEMSET", addr, 7)]
    assert exe.graph is g2 and rec.lowered == []  # type: ignore[attr-defined]
    assert exe.update(alloc_graph(value=7)) == UpdateResult("unchanged")


@pytest.mark.parametrize(
    "change",
    [
        {"limit": 2.0},  # the set_condition node in the body
        {"value": 3},  # a fill in the body
        {"default": 0},  # the condition's default (updated by cuGraphExecUpdate)
    ],
    ids=["set_condition", "body", "default"],
)
def test_a_changed_conditional_takes_the_whole_graph_update(rec, change):
    exe = make_exe(loop_graph())
    g2 = loop_graph(**change)
    assert exe.update(g2) == UpdateResult("whole-graph", 1)
    assert rec.calls == [("cuGraphExecUpdate", "exec0")]
    assert rec.lowered == [g2] and exe.graph is g2  # type: ignore[attr-defined]
    assert exe.update(loop_graph(**change)) == UpdateResult("unchanged")


# --------------------------------------------------------------------------- changes refused, or re-instantiated


@pytest.mark.parametrize(
    "change",
    [{"nbytes": 512}, {"memory_type": "managed"}],
    ids=["nbytes", "memory_type"],
)
def test_a_changed_allocation_is_refused_by_name_and_nothing_changes(rec, change):
    g1 = alloc_graph()
    exe = make_exe(g1)
    exe.update(alloc_graph())  # (a rebuilt definition run now: its entries must survive the refusal too)
    before = snapshot(exe)
    g2 = alloc_graph(value=5, **change)
    with pytest.raises(DefinitionError) as info:
        exe.update(g2)
    msg = str(info.value)
    assert msg.startswith("cannot update the executable of Graph 'mem' from Graph 'mem': alloc#0 'scratch' changed: ")
    assert "the driver fixes alloc nodes at instantiation" in msg and "reinstantiate_if_needed=True" in msg
    assert snapshot(exe) == before and rec.calls == [] and rec.lowered == []  # type: ignore[attr-defined]
    # Asked to, the executable is instantiated afresh and says why.
    res = exe.update(g2, reinstantiate_if_needed=True)
    assert res.mode == "reinstantiated" and res.nodes_updated == 3
    assert res.reason.startswith("alloc#0 'scratch' changed: the driver fixes alloc nodes")
    assert rec.calls == [("cuGraphExecDestroy", "exec0")] and rec.lowered == [g2]  # type: ignore[attr-defined]
    assert exe.graph is g2 and exe._exec == "exec1"
    assert exe.update(alloc_graph(value=5, **change)) == UpdateResult("unchanged")


@pytest.mark.parametrize("change", [{"limit": 2.0}, {"value": 3}], ids=["set_condition", "fill"])
def test_a_whole_graph_update_of_an_executable_holding_allocations_is_refused(rec, change):
    exe = make_exe(alloc_loop_graph())
    before = snapshot(exe)
    g2 = alloc_loop_graph(**change)
    changed = "while#2 'loop'" if "limit" in change else "memset#1 'zero'"
    if "value" in change:  # a fill of the allocation: set node by node, no whole-graph update needed
        assert exe.update(g2) == UpdateResult("per-node", 1)
        assert [c[:4] for c in rec.calls] == [("set", "exec0", "d1", "CU_GRAPH_NODE_TYPE_MEMSET")]
        return
    with pytest.raises(DefinitionError) as info:
        exe.update(g2)
    msg = str(info.value)
    assert f"{changed} changed: an instantiated graph takes while nodes only through a whole-graph update" in msg
    assert "graph allocations (alloc#0 'counter'), which a graph built anew" in msg
    assert snapshot(exe) == before and rec.calls == [] and rec.lowered == []  # type: ignore[attr-defined]
    res = exe.update(g2, reinstantiate_if_needed=True)
    assert res.mode == "reinstantiated" and changed in res.reason
    assert rec.calls == [("cuGraphExecDestroy", "exec0")] and exe.graph is g2


def test_the_node_view_refuses_kinds_it_cannot_set(rec):
    g = alloc_loop_graph()
    exe = make_exe(g)
    before = snapshot(exe)
    loop, test = g.nodes[2], g.nodes[2].body.nodes[0]
    with pytest.raises(DefinitionError, match=r"^exe\[node\]\.update\(\): while#2 'loop': an instantiated graph "):
        exe[loop].update()
    with pytest.raises(DefinitionError, match=r"set_condition#0 'test': an instantiated graph takes set_condition"):
        exe[test].update()
    with pytest.raises(DefinitionError, match=r"alloc#0 'counter': the driver fixes alloc nodes at instantiation"):
        exe[g.nodes[0]].update()
    with pytest.raises(DefinitionError, match=r"free#3 'release': the driver fixes free nodes"):
        exe[g.nodes[3]].update()
    assert snapshot(exe) == before and rec.calls == [] and exe._overrides == {}


def test_the_kinds_refuse_a_single_node_set_with_a_typed_error():
    g = alloc_loop_graph()
    alloc, loop, free = g.nodes[0], g.nodes[2], g.nodes[3]

    class Setter:
        def set_params(self, node: Any, driver_node: Any) -> None:
            raise AssertionError("no set call may be made")

    assert ops_for(alloc).exec_update is None and ops_for(free).exec_update is None
    assert ops_for(loop).exec_update == "graph" and ops_for(loop.body.nodes[0]).exec_update == "graph"
    assert ops_for(g.nodes[1]).exec_update == "node"
    for node, text in ((alloc, "the driver fixes alloc nodes"), (free, "the driver fixes free nodes"), (loop, "whole")):
        with pytest.raises(UnsupportedError) as info:
            ops_for(node).exec_set(Setter(), node, "d")  # type: ignore[arg-type]
        assert str(info.value).startswith(f"{node.label}: ") and text in str(info.value) and info.value.node is node
    for node in (alloc, loop):
        with pytest.raises(UnsupportedError, match=rf"^{node.label}: a {node.kind} node has no single-node driver"):
            ops_for(node).params(node, None)  # type: ignore[arg-type]
        with pytest.raises(UnsupportedError):
            KindOps().params(node, None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the cache


@pytest.fixture
def cached(rec: Recorder, monkeypatch: pytest.MonkeyPatch) -> list[Executable]:
    made: list[Executable] = []

    def instantiate(graph: cg.Graph, **kwargs: Any) -> Executable:
        exe = make_exe(graph)
        made.append(exe)
        return exe

    monkeypatch.setattr(_executable, "instantiate", instantiate)
    return made


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_the_cache_hits_rebuilt_definitions_with_memory_and_control_flow(rec, cached, kind):
    build = BUILDERS[kind]
    cache = cg.ExecutableCache()
    exe = cache.get(build())
    for _ in range(3):
        g = build()
        assert cache.get(g) is exe and exe.graph is g
    assert cache.stats() == {"hits": 3, "misses": 1, "evictions": 0, "size": 1, "maxsize": 16}
    assert rec.calls == [] and len(cached) == 1


def test_the_cache_reinstantiates_what_no_update_takes_and_stays_usable(rec, cached):
    cache = cg.ExecutableCache()
    exe = cache.get(alloc_loop_graph())
    g = alloc_graph  # (another shape: its own entry)
    e2 = cache.get(g())
    assert cache.get(g(nbytes=1024)) is e2 and e2._exec == "exec1"  # re-instantiated in place
    assert cache.get(g(nbytes=1024)) is e2 and e2._exec == "exec1"  # then a plain hit
    assert cache.get(alloc_loop_graph(limit=3.0)) is exe and exe._exec == "exec2"
    assert cache.get(alloc_loop_graph(limit=3.0)) is exe and exe._exec == "exec2"
    assert cache.stats() == {"hits": 4, "misses": 2, "evictions": 0, "size": 2, "maxsize": 16}


def test_a_failed_get_leaves_the_cache_usable(rec, cached, monkeypatch):
    cache = cg.ExecutableCache()
    exe = cache.get(alloc_graph())
    # A typed refusal (here: an unknown parameter): the entry is kept, still running its definition.
    with pytest.raises(CudaGraphError):
        cache.get(alloc_graph(), nope=1)
    assert cache.stats()["size"] == 1 and not exe.closed
    assert cache.get(alloc_graph(value=2)) is exe and rec.calls[-1][4:] == (address_of(exe, exe.graph.nodes[0]), 2)
    # An unexpected failure: the executable is dropped (closed), and the next get instantiates afresh.
    real = Executable.update
    monkeypatch.setattr(Executable, "update", lambda self, graph, **kw: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        cache.get(alloc_graph())
    assert exe.closed and cache.stats() == {"hits": 1, "misses": 1, "evictions": 0, "size": 0, "maxsize": 16}
    monkeypatch.setattr(Executable, "update", real)
    again = cache.get(alloc_graph())
    assert again is not exe and not again.closed and cache.get(alloc_graph()) is again
    assert cache.stats() == {"hits": 2, "misses": 2, "evictions": 0, "size": 1, "maxsize": 16}


# --------------------------------------------------------------------------- Graph.remove of conditional nodes


def test_removing_a_loop_releases_its_condition():
    g = cg.Graph("g")
    c = g.condition(default=1, name="c")
    w = g.while_(c, name="loop")
    w.body.set_condition(c, 0x10000, ">", 1.0, np.float32, name="test")  # leaves with the loop
    g.remove(w)
    assert c.nodes == () and g.nodes == () and w.graph.name == "<removed from g>"
    g.validate()
    w2 = g.while_(c, name="again")  # the condition drives a new loop
    w2.body.set_condition(c, 0x10000, ">", 2.0, np.float32)
    assert c.nodes == (w2,)
    g.validate()


def test_removing_a_conditional_still_set_elsewhere_is_refused_by_name():
    g = cg.Graph("g")
    c = g.condition(name="c")
    init = g.set_condition(c, 0x10000, "<", 1.0, np.float32, name="init")
    w = g.while_(c, after=init, name="loop")
    w.body.set_condition(c, 0x10000, ">", 1.0, np.float32, name="test")
    k = g.kernel(K, 1, 32, (c, np.float32(1), np.int32(1)), after=w, name="setter")
    before = (g.nodes, [(s.index, d.index) for s, d in g.edges], c.nodes, w.graph)
    with pytest.raises(DefinitionError) as info:
        g.remove(w)
    assert str(info.value) == (
        "remove: while#1 'loop' drives condition#0 'c' of Graph 'g', which set_condition#0 'init', kernel#2 "
        "'setter' still set; remove those first (a condition that no conditional node uses cannot be set)"
    )
    assert (g.nodes, [(s.index, d.index) for s, d in g.edges], c.nodes, w.graph) == before
    g.validate()
    g.remove(k)
    with pytest.raises(DefinitionError, match=r"which set_condition#0 'init' still sets; remove those first"):
        g.remove(w)
    g.remove(init)
    g.remove(w)
    assert c.nodes == () and g.nodes == ()
    g.validate()


def test_removing_a_conditional_releases_the_conditions_of_the_conditionals_inside_it():
    g = cg.Graph("g")
    outer_c, inner_c = g.condition(name="outer"), g.condition(default=1, name="inner")
    outer = g.if_(outer_c, name="outer")
    inner = outer.body.while_(inner_c, name="inner")
    inner.body.set_condition(inner_c, 0x10000, ">", 1.0, np.float32)
    own = outer.body.condition(default=1, name="own")  # declared inside: leaves with the body
    mine = outer.body.while_(own, after=inner, name="mine")
    mine.body.set_condition(own, 0x10000, ">", 1.0, np.float32)
    init = g.set_condition(inner_c, 0x10000, "<", 1.0, np.float32, name="init")
    with pytest.raises(DefinitionError, match=r"^remove: if#0 'outer' \(through while#0 'inner' inside it\) drives "):
        g.remove(outer)
    assert outer_c.nodes == (outer,) and inner_c.nodes == (inner,) and g.nodes == (outer, init)
    g.validate()
    g.remove(init)
    g.remove(outer)
    assert outer_c.nodes == () and inner_c.nodes == () and own.nodes == (mine,)
    g.validate()
    g.if_(outer_c).body.empty()
    g.while_(inner_c).body.set_condition(inner_c, 0x10000, ">", 1.0, np.float32)
    g.validate()


def test_removing_a_conditional_inside_a_body_releases_an_outer_condition():
    g = cg.Graph("g")
    c_outer, c_inner = g.condition(default=1, name="a"), g.condition(name="b")
    loop = g.while_(c_outer, name="loop")
    loop.body.set_condition(c_outer, 0x10000, ">", 1.0, np.float32, name="test")
    branch = loop.body.if_(c_inner, name="branch")
    branch.body.empty()
    loop.body.remove(branch)
    assert c_inner.nodes == () and loop.body.nodes == (loop.body.nodes[0],)
    g.validate()
    loop.body.if_(c_inner).body.empty()
    g.validate()


# --------------------------------------------------------------------------- end to end under the fake driver

SCRIPT = r"""
import json
import numpy as np
from cuda.core import Device, ObjectCode
import cudagraph as cg
from cudagraph.errors import DefinitionError

dev = Device(0)
dev.set_current()
k = ObjectCode.from_cubin(b"\0" * 64).get_kernel("inc")  # inc(float* x, float a, int n)
out = {}


def mem(scale=1.0, nbytes=256, value=0):
    g = cg.Graph("mem")
    a = g.alloc(nbytes, name="scratch")
    m = g.memset(a, value, count=64, element_size=4, after=a, name="fill")
    kn = g.kernel(k, 1, 32, (a, np.float32(scale), np.int32(64)), after=m, name="scale")
    g.free(a, after=kn, name="release")
    return g


def flow(scale=1.0, default=0):
    g = cg.Graph("flow")
    c1, c2 = g.condition(default=default, name="c1"), g.condition(default=0, name="c2")
    i = g.if_(c1, name="if")
    i.body.kernel(k, 1, 32, (0x10000, np.float32(scale), np.int32(4)), name="inside")
    w = g.while_(c2, after=i, name="loop")
    w.body.kernel(k, 1, 32, (0x10000, np.float32(1.0), np.int32(4)), name="work")
    return g


def mode(fn):
    try:
        r = fn()
        return [r.mode, r.nodes_updated] if isinstance(r, cg.UpdateResult) else ["ok", exe.update_calls]
    except Exception as exc:
        return [type(exc).__name__, str(exc)]


g = mem()
exe = g.instantiate()
out["mem identical"] = mode(lambda: exe.update(mem()))
out["mem identical again"] = mode(lambda: exe.update(mem(), reinstantiate_if_needed=True))
out["mem fill"] = mode(lambda: exe.update(mem(value=3)))
out["mem kernel"] = mode(lambda: exe.update(mem(scale=2.0)))
g4 = mem(scale=2.0, value=3)
out["mem both"] = mode(lambda: exe.update(g4))
out["node view kernel"] = mode(lambda: exe[g4.nodes[2]].update(args=(g4.nodes[0], np.float32(5.0), np.int32(64))))

out["node view alloc"] = mode(lambda: exe[g4.nodes[0]].update())
out["mem nbytes"] = mode(lambda: exe.update(mem(nbytes=512)))
out["mem nbytes reinstantiated"] = mode(lambda: exe.update(mem(nbytes=512), reinstantiate_if_needed=True))
exe.launch(dev.create_stream())
exe.close()

def setter(scale=1.0):
    g = cg.Graph("setter")
    c = g.condition(default=1, name="c")
    kn = g.kernel(k, 1, 32, (c, np.float32(scale), np.int32(4)), name="set")  # the condition as an argument
    w = g.while_(c, after=kn, name="loop")
    w.body.kernel(k, 1, 32, (c, np.float32(1.0), np.int32(4)), name="work")
    return g


sx = setter().instantiate()
out["setter identical"] = mode(lambda: sx.update(setter()))
out["setter kernel"] = mode(lambda: sx.update(setter(2.0)))
out["setter kernel again"] = mode(lambda: sx.update(setter(3.0)))
sg = setter(3.0)
out["setter identical again"] = mode(lambda: sx.update(sg))
sx[sg.nodes[0]].update(args=(sg.conditions[0], np.float32(4.0), np.int32(4)))
sx.close()

f = flow()
fx = f.instantiate()
out["flow identical"] = mode(lambda: fx.update(flow()))
out["flow body"] = mode(lambda: fx.update(flow(scale=3.0)))
out["flow default"] = mode(lambda: fx.update(flow(scale=3.0, default=1)))
fx.close()

cache = cg.ExecutableCache()
first = [cache.get(build()) for build in (mem, flow)]
for _ in range(3):
    assert [cache.get(build()) for build in (mem, flow)] == first
out["cache"] = cache.stats()
cache.get(mem(nbytes=1024))
cache.get(flow(scale=2.0))
assert cache.get(mem(nbytes=1024)) is first[0]
out["cache after changes"] = cache.stats()
cache.clear()
print(json.dumps(out))
"""

#: The fake driver's cuGraphAddNode, taught to hand back the body graphs of a conditional node (as the
#: driver does through ``CUDA_CONDITIONAL_NODE_PARAMS.phGraph_out``).
_ADD = "CUresult cuGraphAddNode(H *n, H g, H const *deps, void const *edata, size_t nd, void *params) {\n"
_CONDITIONAL_BODIES = r"""
    if (params && *(const int *)params == 13) { /* CU_GRAPH_NODE_TYPE_CONDITIONAL */
        unsigned size;
        memcpy(&size, (const char *)params + 28, sizeof size);
        H *bodies = calloc(size ? size : 1, sizeof(H));
        for (unsigned i = 0; i < size; i++) bodies[i] = new_obj(K_GRAPH);
        memcpy((char *)params + 32, &bodies, sizeof bodies);
    }
"""


def test_updates_end_to_end_under_the_fake_driver(tmp_path: Path) -> None:
    pytest.importorskip("cuda.core")
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake driver library")
    source = (ROOT / "bench" / "fake_driver" / "fake_libcuda.c").read_text()
    if _ADD not in source:
        pytest.skip("the fake driver's cuGraphAddNode changed: teach this test its conditional bodies again")
    (tmp_path / "fake.c").write_text(source.replace(_ADD, _ADD + _CONDITIONAL_BODIES))
    lib = tmp_path / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(tmp_path / "fake.c"), "-ldl"], check=True)
    import cudagraph

    env = dict(os.environ, CUDAGRAPH_FAKE_DRIVER=str(tmp_path))
    env["LD_LIBRARY_PATH"] = f"{tmp_path}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else str(tmp_path)
    env["PYTHONPATH"] = str(Path(cudagraph.__file__).resolve().parents[1])
    r = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["mem identical"] == ["unchanged", 0]
    assert out["mem identical again"] == ["unchanged", 0]
    assert out["mem fill"] == ["per-node", 1]
    assert out["mem kernel"] == ["per-node", 2]  # the kernel (its allocation argument resolved) and the fill back
    assert out["mem both"] == ["per-node", 1]  # the fill only
    assert out["node view kernel"] == ["ok", 5]  # its allocation argument resolved: one more set call
    assert out["node view alloc"][0] == "DefinitionError" and "alloc#0 'scratch'" in out["node view alloc"][1]
    assert out["mem nbytes"][0] == "DefinitionError"
    assert "alloc#0 'scratch' changed: the driver fixes alloc nodes" in out["mem nbytes"][1]
    assert out["mem nbytes reinstantiated"] == ["reinstantiated", 4]
    assert out["setter identical"] == ["unchanged", 0]
    assert out["setter kernel"] == ["per-node", 1]  # its condition argument given the executable's handle
    assert out["setter kernel again"] == ["per-node", 1]
    assert out["setter identical again"] == ["unchanged", 0]
    assert out["flow identical"] == ["unchanged", 0]
    assert out["flow body"] == ["whole-graph", 1]
    assert out["flow default"] == ["whole-graph", 1]
    assert out["cache"] == {"hits": 6, "misses": 2, "evictions": 0, "size": 2, "maxsize": 16}
    assert out["cache after changes"] == {"hits": 9, "misses": 2, "evictions": 0, "size": 2, "maxsize": 16}
