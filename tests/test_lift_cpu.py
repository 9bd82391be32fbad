"""Lifting without a GPU: struct layouts, the ctypes graph reader and ``lift`` over a fake driver."""

from __future__ import annotations

import ctypes
import random
from collections import deque
from typing import Any

import pytest

drv = pytest.importorskip("cuda.bindings.driver")

import cudagraph as cg  # noqa: E402
from cudagraph.driver import graph_reader as _c_read  # noqa: E402
from cudagraph.driver.graph_reader import KERNEL_NODE_TYPE, KERNEL_PARAMS, KERNEL_PARAMS_SIZE  # noqa: E402
from cudagraph.errors import DriverError, UnsupportedError  # noqa: E402
from cudagraph.materialize import lift as _lift  # noqa: E402
from lift_fakes import EMPTY, GRAPH, KERNEL, MEM_ALLOC, FakeBindings, FakeDriver, make_fake  # noqa: E402


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeDriver, FakeBindings, list[Any]]:
    return make_fake(monkeypatch)


# ------------------------------------------------------------------ layouts
def _raw(obj: Any, size: int) -> bytes:
    return ctypes.string_at(obj.getPtr(), size)


def test_kernel_params_layout_matches_cuda_bindings():
    p = drv.CUDA_KERNEL_NODE_PARAMS()
    p.func = drv.CUfunction(0x1111_2222_3333_4444)
    p.gridDimX, p.gridDimY, p.gridDimZ = 11, 12, 13
    p.blockDimX, p.blockDimY, p.blockDimZ = 21, 22, 23
    p.sharedMemBytes = 0xABCD
    p.kernelParams = 0x5555_6666_7777_8888
    p.extra = 0x1234_5678
    p.kern = drv.CUkernel(0x9999_AAAA_BBBB_CCCC)
    raw = _raw(p, KERNEL_PARAMS_SIZE)
    assert KERNEL_PARAMS.unpack_from(raw) == (
        0x1111_2222_3333_4444,
        11,
        12,
        13,
        21,
        22,
        23,
        0xABCD,
        0x5555_6666_7777_8888,
        0x1234_5678,
        0x9999_AAAA_BBBB_CCCC,
    )


def test_kernel_params_size_ends_after_ctx():
    p = drv.CUDA_KERNEL_NODE_PARAMS()
    before = _raw(p, KERNEL_PARAMS_SIZE)
    p.ctx = drv.CUcontext(0x0102_0304_0506_0708)
    after = _raw(p, KERNEL_PARAMS_SIZE)
    changed = [i for i in range(KERNEL_PARAMS_SIZE) if before[i] != after[i]]
    assert changed == list(range(64, 72))  # ctx is the last field: 72 bytes in all
    assert KERNEL_PARAMS.size == 64


def test_kernel_node_type_and_edge_data_layout():
    assert int(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL) == KERNEL_NODE_TYPE
    e = drv.CUgraphEdgeData()
    e.from_port, e.to_port, e.type = 1, 2, 3
    assert _raw(e, _c_read.EDGE_DATA_SIZE)[:3] == b"\x01\x02\x03"


# -------------------------------------------------------------- fake driver


ARGS = [b"\x00\x10\x00\x00\x00\x7f\x00\x00", b"\x00\x00\x80?", b" \x00\x00\x00"]


# -------------------------------------------------------------------- tests
def test_reader_nodes_edges_and_kernel_params():
    f = FakeDriver()
    g = f.graph()
    a = f.kernel(g, ARGS, grid=(4, 2, 1), block=(64, 1, 1), smem=128)
    b = f.node(g, EMPTY, (a,))
    r = f.reader()
    assert r.nodes(g) == [a, b]
    assert r.edges([a, b]) == ([a], [b])
    t, kp = r.read(a)
    assert t == KERNEL and kp is not None
    func, gx, gy, gz, bx, by, bz, smem, address, extra, kern = kp
    assert (func, gx, gy, gz, bx, by, bz, smem, extra, kern) == (0xF00, 4, 2, 1, 64, 1, 1, 128, 0, 0)
    assert address
    assert r.read(b) == (EMPTY, None)
    assert f.calls["cuGraphKernelNodeGetParams_v2"] == 1  # not called for the empty node
    empty = f.graph()
    assert r.nodes(empty) == [] and r.edges([]) == ([], [])


@pytest.mark.parametrize(
    ("symbol", "call"),
    [
        ("cuGraphGetNodes", "cuGraphGetNodes"),
        ("cuGraphNodeGetDependencies_v2", "cuGraphNodeGetDependencies"),
        ("cuGraphNodeGetType", "cuGraphNodeGetType"),
        ("cuGraphKernelNodeGetParams_v2", "cuGraphKernelNodeGetParams"),
    ],
)
def test_reader_raises_typed_errors_naming_the_call(symbol, call):
    f = FakeDriver()
    g = f.graph()
    a = f.kernel(g, ARGS)
    f.kernel(g, ARGS, after=(a,))
    f.fail[symbol] = 1
    r = f.reader()
    with pytest.raises(DriverError) as info:
        r.nodes(g)
        r.edges(f.graphs[g][0])
        r.read(a)
    assert info.value.call == call and info.value.name == "CUDA_ERROR_INVALID_VALUE"


def test_graph_reader_is_none_without_the_entry_points(monkeypatch):
    monkeypatch.setattr(_c_read, "c_function", lambda symbol: None)
    assert _c_read.graph_reader() is None


def test_lift_chain_reads_the_source_without_cloning(fake):
    f, b, infos = fake
    g = f.graph()
    prev: tuple[int, ...] = ()
    for i in range(5):
        prev = (f.kernel(g, [bytes([i]) * 8, b"abcd", b"wxyz"], after=prev),)
    lifted = cg.lift(g, name="chain")
    assert lifted.name == "chain"
    assert [n.kind for n in lifted.nodes] == ["kernel"] * 5
    assert {(a.index, c.index) for a, c in lifted.edges} == {(0, 1), (1, 2), (2, 3), (3, 4)}
    assert [n.args for n in lifted.nodes] == [(bytes([i]) * 8, b"abcd", b"wxyz") for i in range(5)]
    assert all(n.grid == (1, 1, 1) and n.block == (32, 1, 1) and n.shared_mem == 0 for n in lifted.nodes)
    assert {n.name for n in lifted.nodes} == {"fnf00"}
    assert b.cloned == []  # typed nodes copy what they need
    assert len(infos) == 1 and all(n.kernel is lifted.nodes[0].kernel for n in lifted.nodes)
    assert isinstance(lifted.nodes[0].kernel, drv.CUfunction) and int(lifted.nodes[0].kernel) == 0xF00
    # the argument bytes are copies: the driver's memory may change or go
    f.keep.clear()
    assert lifted.nodes[0].args[0] == b"\x00" * 8


def test_lift_dimensions_shared_memory_and_library_kernels(fake):
    f, _b, infos = fake
    g = f.graph()
    a = f.kernel(g, ARGS, grid=(7, 3, 2), block=(8, 8, 2), smem=1024)
    f.kernel(g, [b"\x01\x02\x03\x04"], after=(a,), func=0, kern=0xABC, grid=(5, 1, 1), block=(128, 1, 1))
    lifted = cg.lift(g)
    k0, k1 = lifted.nodes
    assert (k0.grid, k0.block, k0.shared_mem) == ((7, 3, 2), (8, 8, 2), 1024)
    assert (k1.grid, k1.block) == ((5, 1, 1), (128, 1, 1))
    assert isinstance(k1.kernel, drv.CUkernel) and int(k1.kernel) == 0xABC
    assert k1.name == "libabc" and k1.args == (b"\x01\x02\x03\x04",)
    assert len(infos) == 2


def test_lift_a_node_with_neither_kernel_params_nor_extra_is_refused(fake):
    f, _b, _infos = fake
    g = f.graph()
    n = f.kernel(g, ARGS)
    p = bytearray(f.params[n])
    p[40:48] = bytes(8)  # kernelParams NULL, and no 'extra' either
    f.params[n] = bytes(p)
    with pytest.raises(UnsupportedError, match=r"kernel#0 .*'fnf00'.*no kernelParams and no 'extra'"):
        cg.lift(g)


def test_lift_fan_in_fan_out_and_child_graphs(fake):
    f, b, _infos = fake
    body = f.graph()
    x = f.kernel(body, ARGS)
    f.node(body, EMPTY, (x,))
    g = f.graph()
    root = f.kernel(g, ARGS)
    left = f.kernel(g, ARGS, after=(root,))
    right = f.node(g, EMPTY, (root,))
    child = f.node(g, GRAPH, (left, right))
    f.children[child] = body
    lifted = cg.lift(g)
    assert [n.kind for n in lifted.nodes] == ["kernel", "kernel", "empty", "child"]
    assert [p.index for p in lifted.nodes[3].predecessors] == [1, 2]
    inner = lifted.nodes[3].body
    assert [n.kind for n in inner.nodes] == ["kernel", "empty"]
    assert {(a.index, c.index) for a, c in inner.edges} == {(0, 1)}
    assert b.cloned == []


def test_lift_with_an_opaque_node_reads_a_kept_clone(fake):
    f, b, _infos = fake
    body = f.graph()
    k = f.kernel(body, ARGS)
    f.node(body, MEM_ALLOC, (k,))  # opaque, inside a child graph
    g = f.graph()
    first = f.kernel(g, ARGS)
    child = f.node(g, GRAPH, (first,))
    f.children[child] = body
    lifted = cg.lift(g)
    assert b.cloned == [g]
    inner = lifted.nodes[1].body
    op = inner.nodes[1]
    assert (op.kind, op.name) == ("opaque", "mem_alloc") and op.driver_type == "CU_GRAPH_NODE_TYPE_MEM_ALLOC"
    # the parameters were read from the clone's node, not the source's
    assert op.params[1] not in f.graphs[body][0]
    keeper = op.source
    assert isinstance(keeper, _lift._GraphKeeper)
    clone = int(keeper.handle)
    assert clone != g and clone in f.graphs
    assert [n.args for n in (lifted.nodes[0], inner.nodes[0])] == [tuple(ARGS)] * 2
    del lifted, inner, op, keeper
    import gc

    gc.collect()
    assert b.destroyed == [clone]


def test_an_opaque_node_on_a_driver_without_cuGraphNodeGetParams_is_refused_by_name(fake, monkeypatch):
    """cuda.bindings raises RuntimeError('Function ... not found') for a call the driver lacks (CUDA 13.0 drivers)."""
    f, b, _infos = fake

    def missing(node: Any) -> Any:
        raise RuntimeError('Function "cuGraphNodeGetParams" not found')

    monkeypatch.setattr(b, "cuGraphNodeGetParams", missing, raising=False)
    g = f.graph()
    k = f.kernel(g, ARGS)
    f.node(g, MEM_ALLOC, (k,))
    with pytest.raises(
        cg.errors.UnsupportedError,
        match=r"node #1 of .*mem_alloc node \(CU_GRAPH_NODE_TYPE_MEM_ALLOC\).*"
        r"cuGraphNodeGetParams, which this driver does not provide",
    ):
        cg.lift(g)


@pytest.mark.parametrize("how", ["ctypes", "cuda.bindings"])
def test_both_readers_lift_the_same_definition(fake, monkeypatch, how):
    f, _b, _infos = fake
    if how == "cuda.bindings":
        monkeypatch.setattr(_lift, "graph_reader", lambda: None)
    g = f.graph()
    a = f.kernel(g, ARGS, grid=(3, 2, 1), block=(16, 4, 1), smem=256)
    e = f.node(g, EMPTY, (a,))
    b = f.kernel(g, [b"\x01\x02\x03\x04"], after=(a,), func=0, kern=0xABC)
    f.kernel(g, ARGS, after=(e, b))
    lifted = cg.lift(g)
    assert [n.kind for n in lifted.nodes] == ["kernel", "empty", "kernel", "kernel"]
    assert [[p.index for p in n.predecessors] for n in lifted.nodes] == [[], [0], [0], [1, 2]]
    k0, _e, k2, k3 = lifted.nodes
    assert (k0.grid, k0.block, k0.shared_mem, k0.args) == ((3, 2, 1), (16, 4, 1), 256, tuple(ARGS))
    assert isinstance(k2.kernel, drv.CUkernel) and k2.args == (b"\x01\x02\x03\x04",)
    assert k3.name == "fnf00" and int(k3.kernel) == 0xF00


def _old_topo(nodes: list[int], edges: list[tuple[int, int]]) -> tuple[list[int], dict[int, list[int]]]:
    """The order of the previous implementation (Kahn with a deque), for comparison."""
    index = {n: i for i, n in enumerate(nodes)}
    preds: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
    succs: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
    for a, b in edges:
        ia, ib = index[a], index[b]
        preds[ib].append(ia)
        succs[ia].append(ib)
    indeg = {i: len(p) for i, p in preds.items()}
    ready = deque(i for i in range(len(nodes)) if indeg[i] == 0)
    order: list[int] = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for s in succs[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return order, preds


@pytest.mark.parametrize("seed", range(25))
def test_topological_order_is_unchanged(seed):
    rng = random.Random(seed)
    m = rng.randint(0, 40)
    nodes = rng.sample(range(1, 1 << 48), m)
    rank = list(range(m))
    rng.shuffle(rank)
    edges = set()
    for _ in range(rng.randint(0, 3 * m)):
        if m > 1:
            i, j = sorted(rng.sample(range(m), 2))
            edges.add((nodes[rank[i]], nodes[rank[j]]))
    e = sorted(edges, key=lambda _: rng.random())
    order, preds = _lift._topo(nodes, [a for a, _ in e], [b for _, b in e])
    old_order, old_preds = _old_topo(nodes, e)
    assert order == old_order
    assert preds == [old_preds[i] for i in range(m)]
