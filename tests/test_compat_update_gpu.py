"""cuda.core 1.2.2's node updates, written against its documented API and run with cuda.core itself (where the
installed version has them) and with cudagraph.compat: definition-node ``update`` before instantiation,
``exe[node]`` views updating, disabling and enabling nodes of an executable, ``exe.update(definition)``;
results read back and compared with numpy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg

pytestmark = pytest.mark.gpu

N = 256
F = np.float32


@pytest.fixture
def k(compat_kernels):
    return compat_kernels


@pytest.fixture
def G(graph_api):
    """The graph module (see ``graph_api``), skipped for a cuda.core without the node updates."""
    if not hasattr(graph_api.KernelNode, "update") or not hasattr(graph_api, "ExecutableKernelNode"):
        import cuda.core

        pytest.skip(f"cuda.core {cuda.core.__version__} has no node updates")
    return graph_api


def cfg(n: int = N) -> Any:
    from cuda.core import LaunchConfig

    return LaunchConfig(grid=(n + 127) // 128, block=128)


def test_definition_updates_before_instantiation(G, k, gpu, stream):
    x, y, z = gpu.upload(np.arange(N, dtype=F)), gpu.alloc(4 * N), gpu.alloc(4 * N)
    other = gpu.upload(np.full(N, 7, F))
    n = np.int32(N)
    gd = G.GraphDefinition()
    a = gd.launch(cfg(), k.scale_add, x, F(2), F(1), n)
    fill = a.memset(z, np.float32(1.0), N)
    copy = fill.memcpy(y, x, 4 * N)
    a.update(args=(x, F(3), F(0), n))  # x * 3
    fill.update(value=np.float32(-2.0))
    copy.update(src=other, size=2 * N)  # the first half of y from other
    exe = gd.instantiate()
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(x, N), np.arange(N, dtype=F) * 3)
    np.testing.assert_array_equal(gpu.read(z, N), np.full(N, -2, F))
    got = gpu.read(y, N // 2)
    np.testing.assert_array_equal(got, np.full(N // 2, 7, F))
    exe.close()


def test_node_types_match_cuda_core(k, gpu):
    graph = pytest.importorskip("cuda.core.graph")
    if not hasattr(graph.GraphNode, "type"):
        pytest.skip("this cuda.core has no GraphNode.type")
    x = gpu.alloc(4 * N)
    n = np.int32(N)
    ours, theirs = cg.compat.GraphDefinition(), graph.GraphDefinition()
    got = []
    for gd in (ours, theirs):
        a = gd.launch(cfg(), k.scale_add, x, F(2), F(1), n)
        nodes = [a, a.memset(x, 0, 4 * N), gd.memcpy(x, x, 16), gd.empty(), gd.callback(lambda: None)]
        got.append([nd.type for nd in nodes])
    assert got[0] == got[1]


def test_executable_views_update_disable_enable(G, k, gpu, stream):
    x, y = gpu.upload(np.arange(N, dtype=F)), gpu.alloc(4 * N)
    z = gpu.upload(np.zeros(N, F))
    n = np.int32(N)
    gd = G.GraphDefinition()
    a = gd.launch(cfg(), k.scale_add, x, F(2), F(0), n)
    fill = a.memset(z, np.float32(5.0), N)
    copy = fill.memcpy(y, x, 4 * N)
    exe = gd.instantiate()
    ka, kf, kc = exe[a], exe[fill], exe[copy]
    assert type(ka).__name__ == "ExecutableKernelNode" and type(kc).__name__ == "ExecutableMemcpyNode"
    assert isinstance(ka, G.ExecutableGraphNode) and ka.is_enabled
    ka.update(config=cfg(), kernel=k.scale_add, args=(x, F(1), F(10), n))  # x + 10, the executable only
    exe.launch(stream)
    stream.sync()
    x0 = np.arange(N, dtype=F)
    np.testing.assert_array_equal(gpu.read(x, N), x0 + 10)
    np.testing.assert_array_equal(gpu.read(y, N), x0 + 10)
    np.testing.assert_array_equal(gpu.read(z, N), np.full(N, 5, F))

    ka.disable()
    kf.update(dst=z, value=np.float32(-1.0), width=N // 2)
    kc.update(dst=y, src=z, size=4 * N)
    assert not ka.is_enabled
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(x, N), x0 + 10)  # the kernel skipped
    want = np.concatenate([np.full(N // 2, -1, F), np.full(N // 2, 5, F)])
    np.testing.assert_array_equal(gpu.read(y, N), want)

    ka.enable()
    assert ka.is_enabled
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(x, N), x0 + 20)
    if G is cg.compat:  # the definition was not touched: the kernel node still has its built arguments
        assert a.node.args[1] == F(2) and fill.value == int.from_bytes(F(5).tobytes(), "little")
    exe.close()


def test_host_event_and_child_views(G, k, gpu, stream):
    calls: list[str] = []
    x = gpu.upload(np.zeros(N, F))
    n = np.int32(N)
    child1, child2 = G.GraphDefinition(), G.GraphDefinition()
    child1.launch(cfg(), k.scale_add, x, F(1), F(1), n)  # x + 1
    child2.launch(cfg(), k.scale_add, x, F(1), F(100), n)  # x + 100
    gd = G.GraphDefinition()
    emb = gd.embed(child1)
    cb = emb.callback(lambda: calls.append("first"))
    exe = gd.instantiate()
    exe.launch(stream)
    stream.sync()
    exe[cb].update(lambda: calls.append("second"))
    exe[emb].update(child2)
    exe.launch(stream)
    stream.sync()
    assert calls == ["first", "second"]
    np.testing.assert_array_equal(gpu.read(x, N), np.full(N, 101, F))
    exe.close()


@pytest.mark.parametrize("source", ["GraphDefinition", "GraphBuilder"])
def test_whole_executable_update_from_a_definition_or_a_builder(G, source, k, gpu, stream):
    x = gpu.upload(np.arange(N, dtype=F))
    n = np.int32(N)
    if G is cg.compat:
        Device, launch = cg.compat.Device, cg.compat.launch
    else:
        from cuda.core import Device, launch

    def build(a: float) -> Any:
        if source == "GraphDefinition":
            gd = G.GraphDefinition()
            gd.launch(cfg(), k.scale_add, x, F(a), F(0), n)
            return gd
        gb = Device().create_graph_builder().begin_building()
        launch(gb, cfg(), k.scale_add, x, F(a), F(0), n)
        return gb

    first = build(2.0)
    exe = first.instantiate() if source == "GraphDefinition" else first.end_building().complete()
    unfinished = build(5.0)
    if source == "GraphBuilder":
        with pytest.raises(ValueError, match=r"not finished building"):
            exe.update(unfinished)
        unfinished.end_building()
    exe.update(unfinished)
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(x, N), np.arange(N, dtype=F) * 5)
    with pytest.raises(TypeError):
        exe.update("not a graph")
    assert not exe.is_closed
    exe.close()
    assert exe.is_closed


def test_a_node_of_another_definition_has_no_view(k, gpu):
    x = gpu.alloc(4 * N)
    n = np.int32(N)
    gd, other = cg.compat.GraphDefinition(), cg.compat.GraphDefinition()
    gd.launch(cfg(), k.scale_add, x, F(2), F(1), n)
    stranger = other.launch(cfg(), k.scale_add, x, F(2), F(1), n)
    exe = gd.instantiate()
    with pytest.raises(cg.errors.NodeNotFoundError, match=r"is not a node of the executable"):
        exe[stranger]
    exe.close()


def _driver_nodes(drv: Any, graph: Any) -> list[Any]:
    err, _, count = drv.cuGraphGetNodes(graph, 0)
    assert err == drv.CUresult.CUDA_SUCCESS
    err, nodes, count = drv.cuGraphGetNodes(graph, count)
    assert err == drv.CUresult.CUDA_SUCCESS
    return list(nodes[:count])


def test_handles_are_the_driver_graph_and_its_nodes(G, k, gpu, stream):
    from cuda.bindings import driver as drv

    x, z = gpu.upload(np.arange(N, dtype=F)), gpu.alloc(4 * N)
    n = np.int32(N)
    gd = G.GraphDefinition()
    a = gd.launch(cfg(), k.scale_add, x, F(2), F(1), n)
    fill = a.memset(z, np.float32(3.0), N)
    h = gd.handle
    nodes = _driver_nodes(drv, h)
    assert {int(d) for d in nodes} == {int(a.handle), int(fill.handle)}
    for node in (a, fill):
        err, t = drv.cuGraphNodeGetType(node.handle)
        assert err == drv.CUresult.CUDA_SUCCESS and t == node.type
    got = drv.cuGraphNodeGetDependencies(fill.handle, 1)  # (err, deps, [edge data,] count)
    assert got[0] == drv.CUresult.CUDA_SUCCESS and got[-1] == 1 and int(got[1][0]) == int(a.handle)
    # The driver graph runs as built: instantiated and launched with the driver's own calls.
    err, exe = drv.cuGraphInstantiate(h, 0)
    assert err == drv.CUresult.CUDA_SUCCESS
    assert drv.cuGraphLaunch(exe, stream.handle)[0] == drv.CUresult.CUDA_SUCCESS
    stream.sync()
    drv.cuGraphExecDestroy(exe)
    np.testing.assert_array_equal(gpu.read(x, N), np.arange(N, dtype=F) * 2 + 1)
    np.testing.assert_array_equal(gpu.read(z, N), np.full(N, 3, F))
    if G is cg.compat:  # unchanged: the same graph; edited: built again, the old handle still valid
        assert int(gd.handle) == int(h)
        a.update(args=(x, F(1), F(5), n))
        h2 = gd.handle
        assert int(h2) != int(h) and len(_driver_nodes(drv, h)) == 2 and len(_driver_nodes(drv, h2)) == 2


def test_views_of_nodes_without_updates_or_destroyed_are_refused(G, k, gpu):
    x = gpu.alloc(4 * N)
    gd = G.GraphDefinition()
    empty = gd.empty()
    kern = empty.launch(cfg(), k.scale_add, x, F(2), F(1), np.int32(N))
    exe = gd.instantiate()
    with pytest.raises(TypeError, match=r"does not support executable updates"):
        exe[empty]
    kern.destroy()
    # cuda.core 1.2.2 raises ValueError ("no longer valid"), 1.2.0 RuntimeError ("has been destroyed").
    with pytest.raises(ValueError if G is cg.compat else (ValueError, RuntimeError)):
        exe[kern]
    exe.close()


def test_an_executable_keeps_the_callback_data_it_was_built_with_after_the_node_is_updated(G, stream):
    """A ctypes callback's user_data is copied with the node: an executable made before an update of the node
    reads the first copy (kept by the executable, not freed by the update), one made after reads the new one."""
    import ctypes
    import gc

    seen: list[int] = []

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    def read_byte(data: int) -> None:
        seen.append(ctypes.cast(data, ctypes.POINTER(ctypes.c_uint8))[0])

    gd = G.GraphDefinition()
    node = gd.callback(read_byte, user_data=bytes([0xA1]))
    before = gd.instantiate()
    node.update(read_byte, user_data=bytes([0xB2]))
    after = gd.instantiate()
    for _ in range(3):  # (freed memory would be reused by these)
        junk = [bytes([0x40]) * 64 for _ in range(1000)]
        del junk
        gc.collect()
    before.launch(stream)
    after.launch(stream)
    stream.sync()
    assert seen == [0xA1, 0xB2]
