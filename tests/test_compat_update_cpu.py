"""cudagraph.compat's cuda.core 1.2.2 additions without a GPU: definition nodes' ``update`` (omitted values
kept, bad values refused with the node unchanged), ``type``, ``handle`` refused by name, ``Graph`` and
``exe[node]`` handing a compat node to its own view."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.errors import DefinitionError, NodeNotFoundError, OperandError, StateError, UnsupportedError
from cudagraph.frontends.compat import definition as compat_definition
from cudagraph.frontends.compat import exec_views
from cudagraph.frontends.compat.lifetimes import OWNERS

drv = pytest.importorskip("cuda.bindings.driver")

compat = cg.compat
T = drv.CUgraphNodeType


class CUkernel:  # the definition layer recognises kernels by type name
    pass


class CUevent:
    pass


class LaunchConfig:  # a stand-in for cuda.core's (same attribute names)
    def __init__(self, grid: Any = None, block: Any = None, shmem_size: int = 0, cluster: Any = None) -> None:
        self.grid, self.block, self.shmem_size, self.cluster = grid, block, shmem_size, cluster
        self.is_cooperative = False
        self.programmatic_stream_serialization = False


K, K2 = CUkernel(), CUkernel()
CFG = LaunchConfig(grid=4, block=64)


def test_kernel_update_changes_only_what_is_given():
    gd = compat.GraphDefinition()
    k = gd.launch(CFG, K, np.int32(1), np.float32(2.0))
    k.update(args=(np.int32(5), np.float32(6.0)))
    assert k.node.args == (np.int32(5), np.float32(6.0)) and k.kernel is K and k.grid == (4, 1, 1)
    k.update(config=LaunchConfig(grid=(8, 2), block=32, shmem_size=256))
    assert (k.grid, k.block, k.shmem_size, k.node.args[0]) == ((8, 2, 1), (32, 1, 1), 256, 5)
    k.update(kernel=K2, args=())
    assert k.kernel is K2 and k.node.args == () and k.grid == (8, 2, 1)
    k.update()  # nothing given: nothing changes
    assert k.kernel is K2 and k.shmem_size == 256


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"kernel": K2}, DefinitionError, "compat KernelNode.update: args: a new kernel needs its arguments (args=()"),
        ({"args": 5}, OperandError, "compat KernelNode.update: args: expected a tuple or list, got int"),
        ({"args": ("x",)}, OperandError, "argument 0: str cannot be a kernel argument"),
        (
            {"config": LaunchConfig(grid=2, block=32, cluster=2)},
            NotImplementedError,
            "updating clustered or cooperative kernel nodes is not supported",
        ),
        ({"config": LaunchConfig(grid=2)}, OperandError, "config: grid and block must both be given"),
    ],
)
def test_a_bad_kernel_update_is_refused_and_changes_nothing(kwargs, error, text):
    gd = compat.GraphDefinition()
    k = gd.launch(CFG, K, np.int32(1))
    with pytest.raises(error) as info:
        k.update(**kwargs)
    assert text in str(info.value)
    assert k.kernel is K and k.node.args == (np.int32(1),) and k.grid == (4, 1, 1)


def test_memcpy_and_memset_updates_keep_what_is_omitted():
    gd = compat.GraphDefinition()
    c = gd.memcpy(0x2000, 0x1000, 64)
    c.update(size=32)
    assert (c.dst, c.src, c.size) == (0x2000, 0x1000, 32)
    owner = object()
    c.update(src=0x3000, src_owner=owner)
    assert (c.dst, c.src, c.size) == (0x2000, 0x3000, 32) and owner in OWNERS[c.node]
    with pytest.raises(DefinitionError, match=r"^dst_owner requires dst$"):  # (cuda.core's ValueError, word for word)
        c.update(dst_owner=owner)
    with pytest.raises(OverflowError):  # (cuda.core's size_t)
        c.update(size=-1)
    with pytest.raises(DefinitionError):
        c.update(size=0)
    assert c.size == 32

    f = gd.memset(0x4000, np.float32(1.0), 16)
    f.update(value=7)  # an int fills bytes: the element size becomes 1
    assert (f.dptr, f.value, f.element_size, f.width, f.height) == (0x4000, 7, 1, 16, 1)
    f.update(value=np.uint16(0xBEEF), width=4, height=3, pitch=0)  # pitch 0: rows of width elements
    assert (f.value, f.element_size, f.width, f.height, f.pitch) == (0xBEEF, 2, 4, 3, 8)
    f.update(pitch=16)
    assert f.pitch == 16 and f.width == 4
    with pytest.raises(
        DefinitionError, match=r"compat MemsetNode.update: value: a fill value of 8 bytes"
    ):  # (ValueError)
        f.update(value=np.float64(1.0))
    assert (f.value, f.element_size) == (0xBEEF, 2)


def test_a_2d_copy_is_no_compat_memcpy_node():
    gd = compat.GraphDefinition()
    gd.graph.memcpy2d(0x2000, 256, 0x1000, 256, 64, 4, name="tile")
    node = gd._wrap(gd.graph.nodes[0])
    assert type(node) is compat.GraphNode and not hasattr(node, "update")  # as cuda.core: no multi-D update
    assert node.type == T.CU_GRAPH_NODE_TYPE_MEMCPY


def test_callback_event_and_child_updates():
    def first() -> None:
        pass

    def second() -> None:
        pass

    e1, e2 = CUevent(), CUevent()
    gd = compat.GraphDefinition()
    cb, rec, wait = gd.callback(first), gd.record(e1), gd.wait(e1)
    cb.update(second)
    rec.update(e2)
    wait.update(e2)
    assert (cb.callback, rec.event, wait.event) == (second, e2, e2)
    with pytest.raises(DefinitionError, match=r"user_data is only supported .*\(compat HostCallbackNode.update\)"):
        cb.update(first, user_data=b"x")
    assert cb.callback is second

    inner, other = compat.GraphDefinition(), compat.GraphDefinition()
    inner.launch(CFG, K)
    emb = gd.embed(inner)
    emb.update(other)
    assert emb.child_graph.graph is other.graph
    with pytest.raises(OperandError, match=r"compat ChildGraphNode.update: child: Graph; only a compat"):
        emb.update(other.graph)
    outer = compat.GraphDefinition()
    outer.embed(gd)  # outer contains gd: gd cannot come to contain outer
    with pytest.raises(DefinitionError, match=r"contains Graph"):
        emb.update(outer)
    assert emb.child_graph.graph is other.graph


def test_a_destroyed_node_is_not_updated():
    gd = compat.GraphDefinition()
    k = gd.launch(CFG, K, np.int32(1))
    k.destroy()
    with pytest.raises(StateError, match=r"compat KernelNode.update: GraphNode has been destroyed"):
        k.update(args=(np.int32(2),))


def test_node_types_are_the_driver_types():
    gd = compat.GraphDefinition()
    a = gd.allocate(64)
    nodes = [
        gd.launch(CFG, K),
        gd.empty(),
        gd.memset(0x1000, 0, 8),
        gd.memcpy(0x2000, 0x1000, 8),
        a,
        a.deallocate(a.dptr),
        gd.embed(compat.GraphDefinition()),
        gd.record(CUevent()),
        gd.wait(CUevent()),
        gd.callback(lambda: None),
        gd.if_then(gd.create_condition()),
        gd.switch(gd.create_condition(), 2),
    ]
    assert [n.type for n in nodes] == [
        T.CU_GRAPH_NODE_TYPE_KERNEL,
        T.CU_GRAPH_NODE_TYPE_EMPTY,
        T.CU_GRAPH_NODE_TYPE_MEMSET,
        T.CU_GRAPH_NODE_TYPE_MEMCPY,
        T.CU_GRAPH_NODE_TYPE_MEM_ALLOC,
        T.CU_GRAPH_NODE_TYPE_MEM_FREE,
        T.CU_GRAPH_NODE_TYPE_GRAPH,
        T.CU_GRAPH_NODE_TYPE_EVENT_RECORD,
        T.CU_GRAPH_NODE_TYPE_WAIT_EVENT,
        T.CU_GRAPH_NODE_TYPE_HOST,
        T.CU_GRAPH_NODE_TYPE_CONDITIONAL,
        T.CU_GRAPH_NODE_TYPE_CONDITIONAL,
    ]
    assert compat.GraphNode(gd, None).type is None
    nodes[2].destroy()
    assert nodes[2].type is None and nodes[2].handle is None  # a destroyed node, as in cuda.core


class _Lowered:
    """A driver graph as ``lower`` returns it: its handle, every node's driver node, ``destroy``."""

    made: ClassVar[list[Any]] = []

    def __init__(self, graph: Any) -> None:
        self.handle = f"graph{len(_Lowered.made)}"
        self.all_nodes = {id(n): (n, f"{self.handle}/node{n.index}") for n in graph.nodes}
        for body in graph._descendants():
            self.all_nodes.update({id(n): (n, f"{self.handle}/{body.name}/node{n.index}") for n in body.nodes})
        self.destroyed = False
        self.handed_out = 0
        _Lowered.made.append(self)

    def hand_out(self) -> str:
        self.handed_out += 1
        return self.handle

    def destroy(self) -> None:
        self.destroyed = True


def _without(lowered: _Lowered, node: Any) -> _Lowered:
    del lowered.all_nodes[id(node)]
    return lowered


def test_handles_are_built_once_per_change_and_kept_until_the_definition_goes(monkeypatch):
    import gc

    from cudagraph.frontends.compat import handles

    _Lowered.made = []
    monkeypatch.setattr(handles, "lower", lambda graph, bindings, sink: _Lowered(graph))
    gd = compat.GraphDefinition()
    a = gd.launch(CFG, K, np.int32(1))
    assert (gd.handle, a.handle, gd.handle) == ("graph0", "graph0/node0", "graph0")  # built once
    assert compat.GraphNode(gd, None).handle is None
    b = a.launch(CFG, K, np.int32(2))  # a node added: built again
    assert (b.handle, a.handle) == ("graph1/node1", "graph1/node0")
    a.update(args=(np.int32(3),))  # a node updated in place
    assert gd.handle == "graph2"
    gd.graph.remove_edge(a.node, b.node)  # an edge removed
    assert gd.handle == "graph3" and gd.handle == "graph3"
    cond = gd.if_then(gd.create_condition(1))
    inner = cond.then.launch(CFG, K, np.int32(4))  # a node in a body: its handle is in the outer graph
    assert inner.handle == f"graph4/{cond.node.body.name}/node0"
    cond.then.launch(CFG, K, np.int32(5))  # a body grows: built again
    assert gd.handle == "graph5"
    with pytest.raises(OperandError, match=r"compat GraphDefinition.handle: handle: the driver graph of a body"):
        cond.then.handle  # noqa: B018
    child = compat.GraphDefinition()
    deep = child.launch(CFG, K)
    emb = gd.embed(child)
    lowered = _Lowered.made
    hidden = deep.node
    monkeypatch.setattr(handles, "lower", lambda graph, bindings, sink, h=hidden: _without(_Lowered(graph), h))
    with pytest.raises(UnsupportedError, match=r"compat GraphNode.handle: kernel#0 .* is inside a child graph"):
        emb.child_graph._wrap(hidden).handle  # noqa: B018  (a driver that copies child graphs)
    made = list(lowered)
    assert not any(m.destroyed for m in made)  # the handles given out stay valid
    assert all(m.handed_out for m in made)  # each given out as a graph a program may copy
    del gd, a, b, cond, inner, child, deep, emb, hidden
    gc.collect()
    assert all(m.destroyed for m in made)


class _FakeExe:
    """An executable's lookup: which cudagraph nodes it has."""

    def __init__(self, nodes: list[Any]) -> None:
        self.nodes = nodes

    def driver_node(self, node: Any) -> Any:
        if not any(node is n for n in self.nodes):
            raise NodeNotFoundError(f"{node.label} is not a node of the executable")
        return 1


def test_executable_views_by_kind_and_the_lookup():
    gd = compat.GraphDefinition()
    made = [gd.launch(CFG, K), gd.memcpy(0x2000, 0x1000, 8), gd.memset(0x1000, 0, 8)]
    made += [gd.callback(lambda: None), gd.record(CUevent()), gd.wait(CUevent()), gd.embed(compat.GraphDefinition())]
    empty, alloc = gd.empty(), gd.allocate(64)
    exe = _FakeExe([n.node for n in (*made, empty, alloc)])
    views = [exec_views.executable_view(n, exe) for n in made]  # type: ignore[arg-type]
    assert [type(v).__name__ for v in views] == [
        "ExecutableKernelNode",
        "ExecutableMemcpyNode",
        "ExecutableMemsetNode",
        "ExecutableHostCallbackNode",
        "ExecutableEventRecordNode",
        "ExecutableEventWaitNode",
        "ExecutableChildGraphNode",
    ]
    assert all(isinstance(v, compat.ExecutableGraphNode) for v in views)
    assert [hasattr(v, "disable") for v in views] == [True, True, True] + [False] * 4
    for node, kind in ((empty, "empty"), (alloc, "alloc")):
        with pytest.raises(OperandError, match=rf"is a {kind} node, which does not support executable updates"):
            exec_views.executable_view(node, exe)  # type: ignore[arg-type]
    later = gd.launch(CFG, K)
    with pytest.raises(NodeNotFoundError, match=r"kernel#9 .* is not a node of the executable"):
        exec_views.executable_view(later, exe)  # type: ignore[arg-type]
    with pytest.raises(OperandError, match=r"the entry point of a GraphDefinition is not a node of an executable"):
        exec_views.executable_view(compat.GraphNode(gd, None), exe)  # type: ignore[arg-type]
    made[0].destroy()
    with pytest.raises(StateError, match=r"^GraphNode has been destroyed \(.*kernel#0 .* was destroyed"):
        exec_views.executable_view(made[0], exe)  # type: ignore[arg-type]
    with pytest.raises(ValueError):  # (and a ValueError, as cuda.core 1.2.0 raised)
        exec_views.executable_view(made[0], exe)  # type: ignore[arg-type]


def test_an_executable_hands_a_compat_node_to_its_view(monkeypatch):
    gd = compat.GraphDefinition()
    k = gd.launch(CFG, K)
    asked: list[Any] = []
    monkeypatch.setattr(compat_definition, "executable_view", lambda node, exe: asked.append((node, exe)) or "view")
    exe = object.__new__(cg.Executable)
    assert exe[k] == "view" and asked == [(k, exe)]  # type: ignore[index]
    assert compat.Graph is cg.Executable


def test_an_executable_updates_from_a_definition_or_an_ended_builder(monkeypatch):
    from cudagraph.executable import updating

    got: list[Any] = []
    monkeypatch.setattr(updating, "topology_signature", lambda graph: got.append(graph) or 1 / 0)
    exe = object.__new__(cg.Executable)
    monkeypatch.setattr(cg.Executable, "_require_open", lambda self: None)
    gd = compat.GraphDefinition()
    with pytest.raises(ZeroDivisionError):  # (stopped right after the source was read)
        exe.update(gd)
    assert got == [gd.graph]
    gb = compat.GraphBuilder().begin_building()
    with pytest.raises(DefinitionError, match=r"^Graph has not finished building \(.*end_building\(\) first"):
        exe.update(gb)
    assert got == [gd.graph]  # refused before anything was read
    with pytest.raises(ValueError):  # as cuda.core's ValueError
        exe.update(gb)
    gb.end_building()
    with pytest.raises(ZeroDivisionError):
        exe.update(gb)
    assert got == [gd.graph, gb.graph]
    with pytest.raises(OperandError, match=r"^update\(\) expects a cudagraph.Graph.*expected GraphBuilder or GraphDef"):
        exe.update("not a graph")  # type: ignore[arg-type]


def test_python_floats_and_complexes_are_passed_as_cuda_core_passes_them():
    """A Python float is a double and a complex a double complex (cuda.core's rule); both launch paths."""
    gd = compat.GraphDefinition()
    k = gd.launch(CFG, K, np.int32(1), 1.5, 2 + 1j)
    assert [type(a) for a in k.node.args] == [np.int32, np.float64, np.complex128]
    assert k.node.args[1:] == (1.5, 2 + 1j)
    k.update(args=(0.25,))
    assert type(k.node.args[0]) is np.float64
    from cudagraph.driver.c_entry import NATIVE

    cfg = LaunchConfig(grid=(4, 1, 1), block=(64, 1, 1))  # fixed dimensions: the compiled path may learn it
    gb = compat.GraphBuilder().begin_building()
    for _ in range(3):  # the first call teaches the compiled path (when built); the others must still convert
        compat.launch(gb, cfg, K, np.int32(1), 0.5)
    assert [type(n.args[1]) for n in gb.graph.nodes] == [np.float64] * 3, NATIVE


def test_an_owner_without_its_value_is_cuda_cores_value_error_word_for_word():
    gd = compat.GraphDefinition()
    for call in (
        lambda: gd.memset(None, 1, 4, dst_owner=object()),
        lambda: gd.memcpy(0x1000, None, 4, src_owner=object()),
    ):
        with pytest.raises(ValueError, match=r"^(dst_owner requires dst|src_owner requires src)$"):
            call()
    assert len(gd.graph) == 0


def test_an_executable_view_is_made_by_the_executable_only():
    with pytest.raises(StateError, match=r"^directly constructing an executable graph node is not supported$"):
        compat.ExecutableGraphNode()
    with pytest.raises(RuntimeError):  # as cuda.core's RuntimeError
        compat.ExecutableKernelNode()


def test_nodes_and_views_repr_as_cuda_core_does(monkeypatch):
    import ctypes

    def on_host() -> None:
        return None

    gd = compat.GraphDefinition()
    cfunc = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _data: None)
    by_ctypes, by_python = gd.callback(cfunc), gd.callback(on_host)
    fill, copy = gd.memset(0x1000, 7, 8), gd.memcpy(0x2000, 0x1000, 8)
    alloc = gd.allocate(64)
    free = alloc.deallocate(alloc.dptr)
    handles = {n.node.index: 0x100 + n.node.index for n in (by_ctypes, by_python, fill, copy, alloc, free)}
    monkeypatch.setattr(compat_definition, "node_handle", lambda n: handles[n._node.index])
    address = ctypes.cast(cfunc, ctypes.c_void_p).value
    assert repr(by_ctypes) == f"<HostCallbackNode handle=0x100 cfunc=0x{address:x}>"
    assert repr(by_python) == "<HostCallbackNode handle=0x101 callback=on_host>"
    assert repr(fill) == "<MemsetNode handle=0x102 dptr=0x1000 value=7>"
    assert repr(copy) == "<MemcpyNode handle=0x103 dst=0x2000 src=0x1000 size=8>"
    assert repr(alloc) == "<AllocNode handle=0x104 dptr=0x0 size=64>"  # (no driver graph built yet: address 0)
    assert repr(free) == "<FreeNode handle=0x105 dptr=0x0>"
    assert repr(compat.GraphNode(gd, None)) == "<GraphNode entry>"
    exe = _FakeExe([by_python.node])
    exe.handle = 0xE0  # type: ignore[attr-defined]
    view = exec_views.executable_view(by_python, exe)  # type: ignore[arg-type]
    assert repr(view) == "<ExecutableHostCallbackNode graph=0xe0 node=0x101>"

    def refused(n: Any) -> Any:
        raise StateError("no driver graph now")

    monkeypatch.setattr(compat_definition, "node_handle", refused)
    assert repr(fill) == f"<MemsetNode {fill.node.label}>"  # (a repr never raises)
    fill.destroy()
    assert repr(fill) == f"<MemsetNode {fill.node.label} (destroyed)>"


def test_numbers_a_c_type_cannot_hold_are_overflow_errors_and_change_nothing():
    gd = compat.GraphDefinition()
    fill, copy = gd.memset(0x1000, 0x11, 4), gd.memcpy(0x2000, 0x1000, 2)
    with pytest.raises(OverflowError, match=r"compat MemsetNode.update: value: an int fills bytes: expected 0..255"):
        fill.update(value=256)
    with pytest.raises(OverflowError, match=r"compat MemcpyNode.update: size: a size_t cannot hold -1"):
        copy.update(size=-1)
    with pytest.raises(OverflowError, match=r"compat GraphNode.memcpy: size: a size_t cannot hold -3"):
        gd.memcpy(0x2000, 0x1000, -3)
    with pytest.raises(OperandError):  # (and compat's own class)
        gd.memset(0x1000, -1, 4)
    assert (fill.value, copy.size, len(gd.nodes())) == (0x11, 2, 2)


def test_a_definition_refuses_clustered_and_cooperative_launches_as_cuda_core_does():
    gd = compat.GraphDefinition()
    cooperative = LaunchConfig(grid=1, block=1)
    cooperative.is_cooperative = True
    for config in (LaunchConfig(grid=2, block=32, cluster=2), cooperative):
        with pytest.raises(NotImplementedError, match=r"^clustered or cooperative kernel launches are not supported"):
            gd.launch(config, K)
    assert len(gd.nodes()) == 0
    b = compat.GraphBuilder().begin_building()  # (a builder takes one, as cuda.core's capture does)
    compat.launch(b, LaunchConfig(grid=2, block=32, cluster=2), K)
    assert b.graph.nodes[0].attrs.cluster == (2, 1, 1)
