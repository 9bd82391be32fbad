"""Rebinding parameters, node views, whole-graph updates and the executable cache, on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.executable.updating as _updating
from cudagraph.errors import DefinitionError, OperandError, UnsupportedError

pytestmark = pytest.mark.gpu

N = 256


def _chain(kernels, count: int = 4):
    """dst = src * 2**count + (2**count - 1) through ``count`` in-place steps of x*2+1."""
    g = cg.Graph("chain")
    x = g.param("x")
    y = g.param("y")
    n = np.int32(N)
    first = g.kernel(kernels.axpb, 1, N, (y, x, np.float32(1.0), np.float32(0.0), n), name="copy")
    prev = first
    for i in range(count):
        prev = g.kernel(kernels.scale_add, 1, N, (y, np.float32(2.0), np.float32(1.0), n), after=prev, name=f"s{i}")
    return g


def test_rebinding_input_pointer_every_launch(gpu, kernels, stream):
    inputs = [gpu.upload(np.full(N, v, np.float32)) for v in (1.0, 2.0, 3.0)]
    out = gpu.alloc(4 * N)
    g = _chain(kernels)
    exe = g.instantiate(x=inputs[0], y=out)
    for step in range(6):
        buf = inputs[step % 3]
        exe.launch(stream, x=buf)
        got = gpu.read(out, N)
        v = (1.0, 2.0, 3.0)[step % 3]
        np.testing.assert_array_equal(got, np.full(N, v * 16 + 15, np.float32))
    exe.close()


def test_scalar_parameter_changes_result(gpu, kernels, stream):
    x = gpu.upload(np.arange(N, dtype=np.float32))
    y = gpu.alloc(4 * N)
    g = cg.Graph("scalar")
    a = g.param("a", np.float32)
    g.kernel(kernels.axpb, 1, N, (y, x, a, np.float32(0.5), np.int32(N)))
    exe = g.instantiate(a=2.0)
    exe.launch(stream)
    np.testing.assert_array_equal(gpu.read(y, N), np.arange(N, dtype=np.float32) * 2 + 0.5)
    assert exe.bind(a=np.float32(-3.0)) == 1
    exe.launch(stream)
    np.testing.assert_array_equal(gpu.read(y, N), np.arange(N, dtype=np.float32) * -3 + 0.5)
    with pytest.raises(OperandError, match="param 'a'"):
        exe.bind(a="three")
    with pytest.raises(OperandError, match="no parameter 'b'"):
        exe.bind(b=1.0)
    exe.close()


def test_same_value_costs_no_driver_call(gpu, kernels, stream):
    buf = gpu.upload(np.ones(N, np.float32))
    other = gpu.upload(np.ones(N, np.float32))
    out = gpu.alloc(4 * N)
    g = _chain(kernels)
    exe = g.instantiate(x=buf, y=out)
    assert exe.update_calls == 0
    for _ in range(5):
        exe.launch(stream, x=buf)  # same object
        exe.launch(stream, x=int(buf.handle))  # same address, as an int
    assert exe.update_calls == 0
    assert exe.bind(x=other) == 1  # one node (the copy kernel) uses x
    assert exe.update_calls == 1
    assert exe.bind(x=other) == 0
    assert exe.update_calls == 1
    exe.close()


def test_param_shared_by_100_nodes_in_child_graph(gpu, kernels, stream):
    bufs = [gpu.upload(np.zeros(N, np.int32)) for _ in range(2)]
    g = cg.Graph("shared")
    p = g.param("p")
    body = cg.Graph("body")
    prev = None
    for _ in range(50):
        prev = body.kernel(kernels.add_i32, 1, N, (p, np.int32(1), np.int32(N)), after=prev)
    c = g.child(body)
    prev = c
    for _ in range(50):
        prev = g.kernel(kernels.add_i32, 1, N, (p, np.int32(1), np.int32(N)), after=prev)
    exe = g.instantiate(p=bufs[0])
    exe.launch(stream)
    np.testing.assert_array_equal(gpu.read(bufs[0], N, np.int32), np.full(N, 100, np.int32))
    assert exe.bind(p=bufs[1]) == 100
    exe.launch(stream)
    np.testing.assert_array_equal(gpu.read(bufs[1], N, np.int32), np.full(N, 100, np.int32))
    np.testing.assert_array_equal(gpu.read(bufs[0], N, np.int32), np.full(N, 100, np.int32))
    exe.close()


def test_param_in_memcpy_and_memset(gpu, stream):
    a = gpu.upload(np.arange(N, dtype=np.float32))
    b = gpu.upload(np.arange(N, dtype=np.float32) + 1000)
    dst = gpu.alloc(4 * N)
    host = np.zeros(N, np.float32)
    g = cg.Graph("copies")
    src = g.param("src")
    z = g.memset(dst, 0, count=N, element_size=4)
    c = g.memcpy(dst, src, 4 * N, after=z)
    g.memcpy(host, dst, 4 * N, after=c)
    exe = g.instantiate(src=a)
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(host, np.arange(N, dtype=np.float32))
    exe.launch(stream, src=b)
    stream.sync()
    np.testing.assert_array_equal(host, np.arange(N, dtype=np.float32) + 1000)
    exe.close()


def test_node_view_update_enable_disable(gpu, kernels, stream):
    x = gpu.upload(np.zeros(N, np.int32))
    g = cg.Graph("toggle")
    k1 = g.kernel(kernels.add_i32, 1, N, (x, np.int32(1), np.int32(N)))
    k2 = g.kernel(kernels.add_i32, 1, N, (x, np.int32(10), np.int32(N)), after=k1)
    h = g.host(lambda: None, after=k2)
    exe = g.instantiate()
    exe.launch(stream)
    assert gpu.read(x, 1, np.int32)[0] == 11
    assert exe[k2].is_enabled
    exe[k2].disable()
    assert not exe[k2].is_enabled
    exe.launch(stream)
    assert gpu.read(x, 1, np.int32)[0] == 12
    exe[k2].enable()
    exe[k1].update(args=(x, np.int32(100), np.int32(N)))
    exe.launch(stream)
    assert gpu.read(x, N, np.int32).tolist() == [122] * N
    # the definition is unchanged by an executable node update
    assert k1.args[1] == np.int32(1)
    with pytest.raises(UnsupportedError, match="host#2"):
        exe[h].disable()
    with pytest.raises(DefinitionError, match="unknown keyword"):
        exe[k1].update(nbytes=4)
    with pytest.raises(cg.errors.KernelArgumentError, match="parameter 1"):
        exe[k1].update(args=(x, np.float64(1.0), np.int32(N)))
    exe.launch(stream)  # still usable after the failed updates, with the last good values
    assert gpu.read(x, 1, np.int32)[0] == 232
    other = cg.Graph("other").empty()
    with pytest.raises(KeyError):
        exe[other]
    exe.close()


def test_definition_node_update_then_whole_update(gpu, kernels, stream):
    x = gpu.upload(np.zeros(N, np.int32))
    g = cg.Graph("upd")
    k1 = g.kernel(kernels.add_i32, 1, N, (x, np.int32(1), np.int32(N)))
    g.kernel(kernels.add_i32, 1, N, (x, np.int32(2), np.int32(N)), after=k1)
    exe = g.instantiate()
    exe.launch(stream)
    assert gpu.read(x, 1, np.int32)[0] == 3
    k1.update(args=(x, np.int32(5), np.int32(N)))
    exe.launch(stream)  # not applied yet
    assert gpu.read(x, 1, np.int32)[0] == 6
    res = exe.update(g)
    assert res.mode == "per-node" and res.nodes_updated == 1
    exe.launch(stream)
    assert gpu.read(x, 1, np.int32)[0] == 13
    assert exe.update(g).mode == "unchanged"
    exe.close()


def test_whole_graph_update_same_topology_and_mismatch(gpu, kernels, stream, monkeypatch):
    # Two independent chains; each increments its own buffer (x[i] += v is not atomic, so
    # chains that run concurrently must not share one).
    a = [gpu.upload(np.zeros(N, np.int32)) for _ in range(2)]
    b = [gpu.upload(np.zeros(N, np.int32)) for _ in range(2)]

    def build(bufs, add, extra_edge=False, extra_node=False):
        g = cg.Graph("g")
        k = [g.kernel(kernels.add_i32, 1, N, (bufs[i // 2], np.int32(add), np.int32(N))) for i in range(4)]
        g.add_edge(k[0], k[1])
        g.add_edge(k[2], k[3])
        if extra_edge:
            g.add_edge(k[1], k[2])
        if extra_node:
            g.empty(after=k[3])
        return g

    def values(bufs):
        return [set(gpu.read(x, N, np.int32).tolist()) for x in bufs]

    exe = build(a, 1).instantiate()
    exe.launch(stream)
    assert values(a) == [{2}, {2}]
    res = exe.update(build(b, 3))  # every node changed: set one by one
    assert res.mode == "per-node" and res.nodes_updated == 4
    exe.launch(stream)
    assert values(b) == [{6}, {6}]
    assert values(a) == [{2}, {2}]
    monkeypatch.setattr(_updating, "WHOLE_GRAPH_THRESHOLD", 0.5)
    res = exe.update(build(a, 1))  # above the threshold: cuGraphExecUpdate
    assert res.mode == "whole-graph" and res.nodes_updated == 4
    exe.launch(stream)
    assert values(a) == [{4}, {4}]
    assert values(b) == [{6}, {6}]
    with pytest.raises(DefinitionError, match=r"edge added: #1 -> kernel#2"):
        exe.update(build(a, 1, extra_edge=True))
    with pytest.raises(DefinitionError, match=r"node added: empty#4"):
        exe.update(build(a, 1, extra_node=True))
    exe.launch(stream)  # unchanged after the refused updates
    assert values(a) == [{6}, {6}]
    res = exe.update(build(b, 2, extra_node=True), reinstantiate_if_needed=True)
    assert res.mode == "reinstantiated" and "node added" in res.reason
    exe.launch(stream)
    assert values(b) == [{10}, {10}]
    assert values(a) == [{6}, {6}]
    exe.close()


def test_update_the_driver_may_refuse_node_by_node_still_runs_the_new_graph(gpu, stream):
    """A copy whose destination moves from device to host memory: whatever way the driver
    accepts (node by node, whole graph, or neither: re-instantiation), the new copy runs."""
    src = gpu.upload(np.arange(N, dtype=np.float32))
    dev_dst = gpu.alloc(4 * N)
    host = np.zeros(N, np.float32)

    def build(dst):
        g = cg.Graph("copy")
        g.memcpy(dst, src, 4 * N, name="copy")
        return g

    exe = build(dev_dst).instantiate()
    exe.launch(stream)
    np.testing.assert_array_equal(gpu.read(dev_dst, N), np.arange(N, dtype=np.float32))
    res = exe.update(build(host), reinstantiate_if_needed=True)
    print(f"device -> host copy destination: {res}")
    assert res.mode in ("per-node", "whole-graph", "reinstantiated") and res.nodes_updated == 1
    if res.mode != "per-node":
        assert "refused" in res.reason
    if res.mode == "whole-graph":  # the per-node refusal, naming the node
        assert "memcpy#0 'copy'" in res.reason
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(host, np.arange(N, dtype=np.float32))
    exe.close()


def test_executable_cache_hits_misses_evictions(gpu, kernels, stream):
    bufs = [gpu.upload(np.zeros(N, np.int32)) for _ in range(3)]
    cache = cg.ExecutableCache(maxsize=2)

    def build(buf, n_nodes):
        g = cg.Graph("step")
        prev = None
        for _ in range(n_nodes):
            prev = g.kernel(kernels.add_i32, 1, N, (buf, np.int32(1), np.int32(N)), after=prev)
        return g

    for step in range(6):
        exe = cache.get(build(bufs[step % 3], 3))
        exe.launch(stream)
    assert cache.stats() == {"hits": 5, "misses": 1, "evictions": 0, "size": 1, "maxsize": 2}
    for i, expect in enumerate((6, 6, 6)):
        assert gpu.read(bufs[i], 1, np.int32)[0] == expect
    cache.get(build(bufs[0], 4)).launch(stream)
    cache.get(build(bufs[0], 5)).launch(stream)
    assert cache.stats()["evictions"] == 1 and cache.misses == 3
    assert gpu.read(bufs[0], 1, np.int32)[0] == 15
    cache.clear()
    assert len(cache) == 0


@pytest.mark.parametrize("path", ["native", "bindings"])
def test_native_and_bindings_paths_agree(gpu, kernels, stream, monkeypatch, path):
    """Kernel nodes are added and rebound through the compiled module or cuda.bindings, alike."""
    import cudagraph.materialize.explicit as explicit
    import cudagraph.ops.kinds.kernel as kernel_writer

    if path == "bindings":
        monkeypatch.setattr(explicit, "kernel_loop", lambda graph, params: None)
        monkeypatch.setattr(kernel_writer, "kernel_loop", lambda *args, **kw: None)
        monkeypatch.setattr(kernel_writer, "_SET_KERNEL_ADDR", None)
    elif explicit.kernel_loop(1, 1) is None or not kernel_writer.native_rebind():
        pytest.skip("no compiled module, or no cuGraphAddNode_v2 / cuGraphExecKernelNodeSetParams_v2 in the driver")
    n = np.int32(N)
    bufs = [gpu.upload(np.full(N, float(i), np.float32)) for i in range(3)]

    def build(scale: float) -> cg.Graph:
        g = cg.Graph(path)
        x = g.param("x")
        fill = g.memset(bufs[2], np.float32(0.0), count=N, name="zero")  # a bindings-path node among kernels
        roots = [g.kernel(kernels.scale_add, 1, N, (x, np.float32(2.0), np.float32(1.0), n), name="root")]
        roots.append(g.kernel(kernels.scale_add, 1, N, (bufs[1], np.float32(scale), np.float32(0.0), n), name="triple"))
        both = g.kernel(kernels.combine, 1, N, (bufs[2], x, bufs[1], n), after=[*roots, fill], name="sum")
        g.kernel(kernels.scale_add, 1, N, (bufs[2], np.float32(0.5), np.float32(0.0), n), after=both, name="half")
        return g

    g = build(3.0)
    exe = g.instantiate(x=bufs[0])
    assert {(a.name, b.name) for a, b in g.edges} == {
        ("root", "sum"),
        ("triple", "sum"),
        ("zero", "sum"),
        ("sum", "half"),
    }
    exe.launch(stream)
    # x = 0*2+1 = 1; bufs[1] = 1*3 = 3; combine is a-2b: -5; halved: -2.5
    np.testing.assert_array_equal(gpu.read(bufs[2], N), np.full(N, -2.5, np.float32))
    other = gpu.upload(np.full(N, 10.0, np.float32))
    assert exe.bind(x=other) == 2
    exe.launch(stream)
    # x = 10*2+1 = 21; bufs[1] = 3*3 = 9; (21-18)/2 = 1.5
    np.testing.assert_array_equal(gpu.read(bufs[2], N), np.full(N, 1.5, np.float32))
    np.testing.assert_array_equal(gpu.read(other, N), np.full(N, 21.0, np.float32))
    # A rebuilt definition with another scale: the changed node is set in place.
    result = exe.update(build(4.0))
    assert result.mode == "per-node" and result.nodes_updated == 1
    exe.launch(stream)
    # x = 21*2+1 = 43; bufs[1] = 9*4 = 36; (43-72)/2 = -14.5
    np.testing.assert_array_equal(gpu.read(bufs[2], N), np.full(N, -14.5, np.float32))
    np.testing.assert_array_equal(gpu.read(bufs[1], N), np.full(N, 36.0, np.float32))
    exe.close()
