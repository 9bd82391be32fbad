"""The reused ``CUgraphNodeParams`` of explicit construction (``cudagraph.driver.node_params_pool``), no GPU.

A structure is taken zeroed with its type set, never handed to two takers at once, handed back after
the one driver call that reads it, and only real ``cuda.bindings`` structures are kept; parameters
made for a patch plan or an update are fresh.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

import cudagraph as cg
from cudagraph.driver import node_params_pool as pool
from cudagraph.materialize import explicit
from cudagraph.ops.kinds.base import NodeEnv

drv = pytest.importorskip("cuda.bindings.driver")
T = drv.CUgraphNodeType


def raw(p: Any) -> bytes:
    return ctypes.string_at(p.getPtr(), pool.NODE_PARAMS_SIZE)


def recording_lowering(monkeypatch: pytest.MonkeyPatch, add: Any) -> None:
    """Explicit construction over ``add`` as ``cuGraphAddNode``, in a made-up context and graph, every node
    through the cuda.bindings path (no compiled loop)."""
    monkeypatch.setattr(drv, "cuGraphAddNode", add)
    monkeypatch.setattr(explicit, "ensure_context", lambda: drv.CUcontext(0x77))
    monkeypatch.setattr(explicit, "create_graph", lambda: drv.CUgraph(0x5000))
    monkeypatch.setattr(explicit, "kernel_loop", lambda *a: None)


@pytest.fixture(autouse=True)
def empty_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool, "_free", [])


def test_a_structure_comes_back_zeroed_with_its_type():
    p = pool.take(T.CU_GRAPH_NODE_TYPE_MEMSET)
    p.memset.dst = 0xDEAD0000
    p.memset.value = 7
    p.memset.width = 99
    p.memset.elementSize = 4
    assert raw(p)[16:].strip(b"\0")  # dirty
    pool.give(p)
    q = pool.take(T.CU_GRAPH_NODE_TYPE_EMPTY)
    assert q is p
    assert q.type == T.CU_GRAPH_NODE_TYPE_EMPTY
    assert raw(q)[4:] == bytes(pool.NODE_PARAMS_SIZE - 4)  # only the type is set
    assert int.from_bytes(raw(q)[:4], "little") == int(T.CU_GRAPH_NODE_TYPE_EMPTY)


def test_two_takers_never_share_one_and_only_a_few_are_kept():
    a, b = pool.take(T.CU_GRAPH_NODE_TYPE_EMPTY), pool.take(T.CU_GRAPH_NODE_TYPE_EMPTY)
    assert a is not b and a.getPtr() != b.getPtr()
    made = [pool.take(T.CU_GRAPH_NODE_TYPE_EMPTY) for _ in range(pool.KEEP + 3)]
    for p in made:
        pool.give(p)
    assert len(pool._free) == pool.KEEP


def test_a_structure_given_twice_is_kept_once():
    p = pool.take(T.CU_GRAPH_NODE_TYPE_EMPTY)
    pool.give(p)
    pool.give(p)
    assert pool._free == [p]
    a, b = pool.take(T.CU_GRAPH_NODE_TYPE_EMPTY), pool.take(T.CU_GRAPH_NODE_TYPE_EMPTY)
    assert a is p and b is not p


def test_only_structures_of_the_driver_in_use_are_kept(monkeypatch):
    class Foreign:  # a stand-in a test's fake driver makes
        type = None

        def getPtr(self) -> int:
            return id(self)  # writing 256 bytes here would break the interpreter

    pool.give(Foreign())
    assert pool._free == []
    pool._free.append(Foreign())  # (even one that got in is not written)
    p = pool.take(T.CU_GRAPH_NODE_TYPE_EMPTY)
    assert type(p) is drv.CUgraphNodeParams


def test_parameters_for_a_patch_plan_or_an_update_are_fresh():
    kept = pool.take(T.CU_GRAPH_NODE_TYPE_EMPTY)
    pool.give(kept)
    env = NodeEnv(drv.CUcontext(0), {}, [], [], None)
    p = env.node_params(T.CU_GRAPH_NODE_TYPE_MEMSET)
    assert p is not kept and pool._free == [kept]
    assert p.type == T.CU_GRAPH_NODE_TYPE_MEMSET


def test_lowering_hands_every_structure_back_and_each_node_gets_its_own_fields(monkeypatch):
    """Fills, empty nodes and a child graph of fills (a lowering inside a lowering), over a recording
    cuGraphAddNode: each add reads the fields of its own node, and the structures come back."""
    added: list[tuple[Any, ...]] = []

    def add(graph: Any, deps: Any, edata: Any, n: int, p: Any) -> tuple[Any, Any]:
        if p.type == T.CU_GRAPH_NODE_TYPE_MEMSET:
            m = p.memset
            added.append(("memset", int(m.dst), int(m.value), int(m.width), int(m.elementSize)))
        else:
            added.append((p.type.name, raw(p)[16:] == bytes(240)))
        return (drv.CUresult.CUDA_SUCCESS, drv.CUgraphNode(0x100 + len(added)))

    recording_lowering(monkeypatch, add)
    monkeypatch.setattr(drv, "cuGraphDestroy", lambda h: (drv.CUresult.CUDA_SUCCESS,))
    import cudagraph.ops.kinds.structure as structure

    monkeypatch.setattr(structure, "create_graph", lambda node: drv.CUgraph(0x6000))
    child = cg.Graph("child")
    c1 = child.memset(0xC000, 3, count=16, element_size=4)
    child.memset(0xC100, 4, count=32, element_size=2, after=c1)
    g = cg.Graph("outer")
    a = g.memset(0xA000, 1, count=8, element_size=1)
    j = g.join(a)
    e = g.child(child, after=j)
    g.memset(0xB000, 2, count=64, element_size=4, after=e)
    g.validate()
    lowered = explicit.lower(g, {}, [])
    assert added == [
        ("memset", 0xA000, 1, 8, 1),
        ("CU_GRAPH_NODE_TYPE_EMPTY", True),
        ("memset", 0xC000, 3, 16, 4),
        ("memset", 0xC100, 4, 32, 2),
        ("CU_GRAPH_NODE_TYPE_GRAPH", False),
        ("memset", 0xB000, 2, 64, 4),
    ]
    # every structure taken came back: the kernel one of each of the two lowerings, and the fills' and
    # the empty node's (the same one again and again, as they were added one at a time)
    assert 1 <= len(pool._free) <= 3
    assert all(type(p) is drv.CUgraphNodeParams for p in pool._free)
    del lowered


def test_a_batch_memory_operation_after_reused_structures_keeps_its_array(monkeypatch):
    """cuda.bindings writes paramArray's address only when its length changes: a memop node must get a
    structure of its own, whatever was added before it."""
    seen: list[tuple[str, int, int]] = []

    def add(graph: Any, deps: Any, edata: Any, n: int, p: Any) -> tuple[Any, Any]:
        b = raw(p)
        seen.append((p.type.name, int.from_bytes(b[24:28], "little"), int.from_bytes(b[32:40], "little")))
        return (drv.CUresult.CUDA_SUCCESS, drv.CUgraphNode(0x100 + len(seen)))

    recording_lowering(monkeypatch, add)
    import cudagraph.ops.kinds.memop as memop

    monkeypatch.setattr(memop, "pointer_attribute", lambda attribute, ptr: 0)  # (not pool memory)
    g = cg.Graph("memops")
    prev = None
    for i in range(3):
        prev = g.memset(0xA000, 1, count=8, element_size=4, after=prev)
        prev = g.write_value(0xB000 + 8 * i, i, after=prev)
    g.validate()
    explicit.lower(g, {}, [])
    memops = [s for s in seen if s[0] == "CU_GRAPH_NODE_TYPE_BATCH_MEM_OP"]
    assert len(memops) == 3 and all(count == 1 and array != 0 for _, count, array in memops)


def test_a_per_node_update_sets_each_node_from_a_reused_structure(monkeypatch):
    from cudagraph.ops.node_params import node_params
    from cudagraph.ops.node_update import set_node_params

    calls: list[tuple[int, int, int, int]] = []
    structs: list[Any] = []

    def set_params(exe: Any, dn: Any, p: Any) -> tuple[Any]:
        structs.append(p)
        calls.append((int(dn), int(p.memset.dst), int(p.memset.value), int(p.memset.width)))
        return (drv.CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(drv, "cuGraphExecNodeSetParams", set_params)
    g = cg.Graph("update")
    a = g.memset(0xA000, 1, count=8, element_size=4)
    b = g.memset(0xB000, 2, count=16, element_size=2, after=a)
    ctx = drv.CUcontext(0x77)
    set_node_params(0x1, a, drv.CUgraphNode(0x10), ctx, {}, [], [])
    set_node_params(0x1, b, drv.CUgraphNode(0x11), ctx, {}, [], [])
    assert calls == [(0x10, 0xA000, 1, 8), (0x11, 0xB000, 2, 16)]
    assert structs[0] is structs[1] and pool._free == [structs[0]]  # taken, handed back, taken again
    kept = node_params(a, ctx, {}, [], [])  # (a patch plan keeps its structure: a fresh one)
    assert kept is not structs[0] and pool._free == [structs[0]]
