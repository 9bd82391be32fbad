"""cudagraph.compat without a GPU: cuda.core's GraphDefinition API builds the expected cudagraph definition
(exact nodes and edges), and unsupported signatures are refused by name with nothing added."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

import cudagraph as cg
from cudagraph.errors import DefinitionError, OperandError
from cudagraph.frontends.compat import common

compat = cg.compat


class CUkernel:  # the definition layer recognises kernels by type name
    pass


class LaunchConfig:  # a stand-in for cuda.core's (same attribute names)
    def __init__(self, grid: Any = None, block: Any = None, shmem_size: int = 0, cluster: Any = None) -> None:
        self.grid, self.block, self.shmem_size, self.cluster = grid, block, shmem_size, cluster
        self.is_cooperative = False
        self.programmatic_stream_serialization = False


K = CUkernel()
CFG = LaunchConfig(grid=4, block=64)


def pairs(gd: Any) -> set[tuple[int, int]]:
    return {(a.node.index, b.node.index) for a, b in gd.edges()}


def test_a_fluent_chain_is_a_path():
    gd = compat.GraphDefinition()
    a = gd.launch(CFG, K, np.int32(1))
    c = a.launch(CFG, K, np.int32(2)).memset(0x1000, np.float32(1.0), 8).memcpy(0x2000, 0x1000, 32)
    assert isinstance(a, compat.KernelNode) and isinstance(c, compat.MemcpyNode)
    assert [n.kind for n in gd.graph.nodes] == ["kernel", "kernel", "memset", "memcpy"]
    assert pairs(gd) == {(0, 1), (1, 2), (2, 3)}
    m = gd.graph.nodes[2]
    assert m.element_size == 4 and m.value == int.from_bytes(np.float32(1.0).tobytes(), "little") and m.width == 8
    assert a.grid == (4, 1, 1) and a.block == (64, 1, 1) and a.shmem_size == 0 and a.kernel is K
    assert len(gd.nodes()) == 4 and a in gd.nodes() and a.succ == {gd._wrap(gd.graph.nodes[1])}


def test_entry_points_and_join():
    gd = compat.GraphDefinition()
    a = gd.launch(CFG, K)
    b = gd.launch(CFG, K)
    j = gd.join(a, b)
    d = j.launch(CFG, K)
    e = a.join(d)
    assert isinstance(j, compat.EmptyNode) and isinstance(e, compat.EmptyNode)
    assert pairs(gd) == {(0, 2), (1, 2), (2, 3), (0, 4), (3, 4)}
    assert a.pred == set() and j.pred == {a, b}


def test_conditionals_have_definition_bodies():
    gd = compat.GraphDefinition()
    cond = gd.create_condition(default_value=1)
    setter = gd.launch(CFG, K, cond)
    assert setter.node.args == (cond.condition,)
    w = setter.while_loop(cond)
    w.body.launch(CFG, K, cond.handle).launch(CFG, K)
    ie = w.if_else(gd.create_condition())
    ie.then.launch(CFG, K)
    ie.else_.memset(0x1000, 0, 4)
    sw = ie.switch(gd.create_condition(0), 3)
    assert isinstance(w, compat.WhileNode) and isinstance(ie, compat.IfElseNode) and isinstance(sw, compat.SwitchNode)
    assert len(sw.branches) == 3 and w.body is w.body
    assert [n.kind for n in w.node.body.nodes] == ["kernel", "kernel"]
    assert [n.kind for n in ie.node.else_.nodes] == ["memset"]
    assert pairs(gd) == {(0, 1), (1, 2), (2, 3)}
    gd.graph.validate()


def test_child_graph_callback_events_allocations():
    child = compat.GraphDefinition()
    child.launch(CFG, K)
    gd = compat.GraphDefinition()

    class CUevent:
        pass

    ev = CUevent()
    alloc = gd.allocate(1024)
    k = alloc.launch(CFG, K, alloc.dptr)
    emb = k.embed(child)
    cb = emb.callback(print)
    r = cb.record(ev)
    w = r.wait(ev)
    f = w.deallocate(alloc.dptr)
    kinds = [type(x).__name__ for x in (alloc, k, emb, cb, r, w, f)]
    assert kinds == [
        "AllocNode",
        "KernelNode",
        "ChildGraphNode",
        "HostCallbackNode",
        "EventRecordNode",
        "EventWaitNode",
        "FreeNode",
    ]
    assert alloc.bytesize == 1024 and emb.node.body is child.graph
    assert pairs(gd) == {(i, i + 1) for i in range(6)}
    gd.graph.validate()


def test_allocate_takes_cuda_cores_device_memory_type_and_peer_access():
    class GraphMemoryType:  # what allocate reads of cuda.core's enum: its value
        value = "managed"

    gd = compat.GraphDefinition()
    plain = gd.allocate(64)
    host = plain.allocate(128, memory_type="host", peer_access=[0, 1])
    managed = host.allocate(256, device=1, memory_type=GraphMemoryType(), peer_access=(2,))
    assert (plain.device_id, plain.memory_type, plain.peer_access) == (None, "device", ())
    assert (host.device_id, host.memory_type, host.peer_access) == (None, "host", (0, 1))
    assert (managed.device_id, managed.memory_type, managed.peer_access, managed.bytesize) == (1, "managed", (2,), 256)
    assert managed.dptr.alloc.describe() == "256 B managed on device 1 peers 2 never freed"
    assert pairs(gd) == {(0, 1), (1, 2)}


def test_nodes_read_back_what_they_were_built_with():
    class CUevent:  # recognised by type name
        pass

    def fn() -> None:
        pass

    ev = CUevent()
    child = compat.GraphDefinition()
    gd = compat.GraphDefinition()
    a = gd.allocate(64)
    fill = a.memset(a.dptr, np.float32(2.0), 16)
    copy = fill.memcpy(0x2000, a.dptr, 64)
    free = copy.deallocate(a.dptr)
    emb, rec, wait, cb = free.embed(child), gd.record(ev), gd.wait(ev), gd.callback(fn)
    conds = [gd.create_condition(1) for _ in range(4)]
    nodes = [gd.if_then(conds[0]), gd.if_else(conds[1]), gd.while_loop(conds[2]), gd.switch(conds[3], 3)]
    assert (fill.dptr.alloc, fill.value, fill.element_size, fill.width, fill.height, fill.pitch) == (
        a.node,
        int.from_bytes(np.float32(2.0).tobytes(), "little"),
        4,
        16,
        1,
        0,  # one row: no pitch (the driver does not read it), as cuda.core reads it back
    )
    assert (copy.dst, copy.src.alloc, copy.size) == (0x2000, a.node, 64) and free.dptr.alloc is a.node
    assert emb.child_graph.graph is emb.node.body and (rec.event, wait.event, cb.callback) == (ev, ev, fn)
    assert [n.cond_type for n in nodes] == ["if", "if", "while", "switch"]
    from cuda.core.typing import GraphConditionalType  # (cuda-core is installed beside the tests)

    assert all(isinstance(n.cond_type, GraphConditionalType) for n in nodes)  # cuda.core's enum, as it gives
    assert all(n.condition == c and hash(n.condition) == hash(c) for n, c in zip(nodes, conds))
    assert conds[0] != conds[1]
    k = gd.launch(LaunchConfig(grid=(4, 2), block=64, shmem_size=128), K)
    assert (k.config.grid, k.config.block, k.config.shmem_size) == ((4, 2, 1), (64, 1, 1), 128)


def test_debug_dot_print_writes_the_dot(tmp_path):
    gd = compat.GraphDefinition()
    gd.launch(CFG, K).empty()
    out = tmp_path / "g.dot"
    gd.debug_dot_print(str(out))
    assert out.read_text() == gd.graph.to_dot()


@pytest.mark.parametrize(
    "call, text",
    [
        (lambda gd: gd.callback("print"), "compat GraphNode.callback: fn: expected a Python callable or a ctypes"),
        (lambda gd: gd.callback(42), "compat GraphNode.callback: fn: expected a Python callable or a ctypes function"),
        (
            lambda gd: gd.allocate(64, peer_access=["x"]),
            "alloc#1 'alloc': peer_access: device must be a cuda.core Device",
        ),
        (lambda gd: gd.deallocate(0x1000), "compat GraphNode.deallocate: dptr: int; only the dptr of an allocate()"),
        (lambda gd: gd.embed(cg.Graph("x")), "compat GraphNode.embed: child: Graph; only a compat GraphDefinition"),
        (lambda gd: gd.memset(0x1000, 300, 4), "compat GraphNode.memset: value: an int fills bytes: expected 0..255"),
        (lambda gd: gd.memset(0x1000, "a", 4), "compat GraphNode.memset: value: expected an int or a buffer"),
        (lambda gd: gd.while_loop(1), "compat GraphNode.while_loop: condition: expected a GraphCondition"),
        (lambda gd: gd.debug_dot_print("x", options=1), "compat GraphDefinition.debug_dot_print: options"),
        (lambda gd: gd.join(1), "compat GraphNode.join: nodes[0]: expected a GraphNode, got int"),
        (lambda gd: gd.join(compat.GraphDefinition().empty()), "nodes[0]: a node of another GraphDefinition"),
        (lambda gd: gd.launch({"grid": 1}, K), "cudagraph.GraphDefinition.launch: config: expected a cuda.core"),
        (lambda gd: gd.launch(CFG, "k"), "cudagraph.GraphDefinition.launch: kernel: expected a cuda.core Kernel"),
        (lambda gd: gd.memcpy(0x1000, 0x2000, None), "compat GraphNode.memcpy: size must be an integer, got NoneType"),
        (
            lambda gd: gd.allocate(64, device="x"),
            "alloc#1 'alloc': device must be a cuda.core Device or an int ordinal, got str",
        ),
        (lambda gd: gd.debug_dot_print(1), "GraphDefinition.debug_dot_print: path must be a str or a path-like object"),
        (lambda gd: gd.instantiate(3), "compat instantiate: options must be a GraphCompleteOptions"),
    ],
)
def test_unsupported_signatures_are_refused_by_name_and_add_nothing(call, text):
    gd = compat.GraphDefinition()
    gd.launch(CFG, K)
    with pytest.raises(OperandError) as info:
        call(gd)
    assert text in str(info.value)
    assert len(gd.graph) == 1 and len(gd.nodes()) == 1


def test_a_fill_value_of_another_size_is_a_value_error_as_cuda_cores():
    gd = compat.GraphDefinition()
    with pytest.raises(DefinitionError, match=r"compat GraphNode.memset: value: a fill value of 8 bytes") as info:
        gd.memset(0x1000, np.float64(1), 4)
    assert isinstance(info.value, ValueError) and len(gd.graph) == 0


def test_a_config_the_kernel_cannot_take_adds_nothing():
    gd = compat.GraphDefinition()
    with pytest.raises(DefinitionError, match=r"GraphDefinition.launch: config.block\[0\] = 2000"):
        gd.launch(LaunchConfig(grid=1, block=2000), K)
    assert len(gd.graph) == 0


def test_instantiate_passes_the_options(monkeypatch):
    seen: dict[str, Any] = {}
    gd = compat.GraphDefinition()
    gd.launch(CFG, K)
    monkeypatch.setattr(common, "instantiate_executable", lambda g, **kw: seen.update(kw) or "exe")
    opts = compat.GraphCompleteOptions(auto_free_on_launch=True, upload_stream="s", use_node_priority=True)
    assert gd.instantiate(opts) == "exe"
    assert seen == {
        "params": {},
        "upload_stream": "s",
        "auto_free_on_launch": True,
        "device_launch": False,
        "use_node_priority": True,
    }


def test_an_address_into_an_allocation_stays_the_allocation_in_every_graph_built():
    gd = compat.GraphDefinition()
    a = gd.allocate(64)
    inner = a.dptr + 16
    assert int(inner) == int(a.dptr) + 16 and (inner - 8).offset == 8 and (8 + a.dptr).offset == 8
    assert type(inner - a.dptr) is int and inner - a.dptr == 16  # (a distance is an int)
    fill = a.memset(inner, 0, 4)
    assert repr(fill.node.dst) == "<AllocOffset alloc#0 'alloc' + 16>"  # built with its own graph's address
    with pytest.raises(DefinitionError, match=r"alloc#0 'alloc': offset 64 is outside the 64-byte allocation"):
        a.memset(a.dptr + 64, 0, 4)


def test_edges_of_a_graph_with_graph_memory_are_not_removed_as_the_driver_refuses():
    from cudagraph.frontends.compat.common import DriverRefusal

    gd = compat.GraphDefinition()
    a = gd.allocate(64)
    cb = a.callback(lambda: None)
    lone = gd.empty()
    with pytest.raises(DriverRefusal, match=r"GraphNode.destroy: host#1 .*no edge from a graph that holds allocation"):
        cb.destroy()
    with pytest.raises(DriverRefusal, match=r"no edge from a graph that holds allocation or free nodes"):
        cb.pred.discard(a)
    assert cb.is_valid and cb in gd.nodes() and (a, cb) in gd.edges()
    lone.destroy()  # (a node with no edge: nothing to remove)
    assert not lone.is_valid
    plain = compat.GraphDefinition()
    e = plain.empty()
    f = e.empty()
    f.destroy()  # (no graph memory: the edge goes with the node)
    assert list(e.succ) == []


def test_an_allocation_on_the_current_device_names_that_device_as_cuda_core_does(monkeypatch):
    from cudagraph.frontends.compat import node_kinds

    class Device:
        device_id = 3

    monkeypatch.setattr(node_kinds, "cuda_core_device", lambda d: Device())
    gd = compat.GraphDefinition()
    assert gd.allocate(64).device_id == 3 and gd.allocate(64, memory_type="managed").device_id == 3
    assert gd.allocate(64, device=1).device_id == 1 and gd.allocate(64, memory_type="host").device_id is None
