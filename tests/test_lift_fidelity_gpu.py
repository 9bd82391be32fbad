"""Lifting carries everything the driver node holds (GPU): launch attributes, programmatic edges, and the
round-trip check (``cg.lift(obj, verify=True)``) that compares the rebuilt driver graph with the source.

Marked ``gpu``: they skip (with the reason shown) where no NVIDIA driver/GPU works.
"""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors
from cudagraph.definition.kinds.launch_attributes import ATTRIBUTES, FIRST_CLASS_IDS, decode
from cudagraph.driver.node_reads import UNSET, NodeReads
from cudagraph.materialize.explicit import lower

pytestmark = pytest.mark.gpu

N = 4096

SOURCE = r"""
extern "C" __global__ void primary(int* x, int n, int salt) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = i * 3 + salt;
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

extern "C" __global__ void secondary(const int* x, int* y, int n) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1;
}

extern "C" __global__ void cluster_count(unsigned int* out) {
    unsigned int nx = 1;
#if __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(nx));
#endif
    if (threadIdx.x == 0) out[blockIdx.x] = nx;
}
"""
NAMES = ("primary", "secondary", "cluster_count")


@pytest.fixture(scope="module")
def k(nvrtc):
    return nvrtc(SOURCE, NAMES)


@pytest.fixture(scope="module")
def sm90(device):
    if int(device.arch) < 90:
        pytest.skip(f"needs compute capability 9.0 (clusters, griddepcontrol); this GPU is sm_{device.arch}")


def _driver_nodes(handle):
    from cuda.bindings import driver

    _, _, n = driver.cuGraphGetNodes(handle, 0)
    _, nodes, n = driver.cuGraphGetNodes(handle, n)
    return list(nodes[:n])


def test_a_plain_node_reads_the_table_defaults(gpu, k):
    """Every attribute a node never set reads as the table's default (what lifting leaves out), asked through
    cuda.bindings id by id; and the lift's reader sees such a node as plain."""
    import ctypes

    from cuda.bindings import driver

    x = gpu.alloc(4 * N)
    g = cg.Graph("plain")
    g.kernel(k.primary, N // 256, 256, (x, np.int32(N), np.int32(0)))
    lowered = lower(g, {}, [])
    answered = {}
    try:
        node = lowered.driver_nodes[0]
        for attr_id in range(1, 24):
            try:
                key = driver.CUkernelNodeAttrID(attr_id)
            except ValueError:
                continue  # an id this cuda-bindings does not name
            err, value = driver.cuGraphKernelNodeGetAttribute(node, key)
            if not err:
                answered[attr_id] = ctypes.string_at(int(value.getPtr()), 64)
        plain = NodeReads().attributes(int(node))
    finally:
        lowered.destroy()
    for attr in ATTRIBUTES.values():
        if attr.id in answered:
            assert decode(attr, answered[attr.id]) == attr.default, attr
    for attr_id, (name, layout, default) in FIRST_CLASS_IDS.items():
        if attr_id in answered:
            assert layout.unpack_from(answered[attr_id]) == default, name
    assert {4, 5, 8} <= set(answered)  # cluster, scheduling policy, priority: always answered
    # the reader: nothing to carry (an empty dict, or only values equal to the defaults where ids were refused)
    assert all(UNSET.get(i, bytes(64)) == v for i, v in plain.items())


def test_every_launch_attribute_is_lifted_and_verified(gpu, k, stream, sm90):
    """cluster, priority, programmatic edges, sync domain, domain map, carveout, scheduling policy."""
    from cuda.bindings import driver

    x = gpu.upload(np.zeros(N, np.int32))
    y = gpu.upload(np.zeros(N, np.int32))
    counts = gpu.upload(np.zeros(N // 256, np.uint32))
    g = cg.Graph("attributed")
    a = g.kernel(
        k.primary,
        N // 256,
        256,
        (x, np.int32(N), np.int32(7)),
        priority=-1,  # (the device clamps priorities to its range, 0 .. -5 on Hopper)
        attributes={"mem_sync_domain": 1, "preferred_shared_memory_carveout": 50, "cluster_scheduling_policy": 1},
        name="a",
    )
    b = g.kernel(
        k.secondary,
        N // 256,
        256,
        (x, y, np.int32(N)),
        after=a,
        programmatic=True,
        attributes={"mem_sync_domain_map": (1, 1)},
        name="b",
    )
    g.kernel(k.cluster_count, N // 256, 32, (counts,), cluster=(2, 1, 1), after=b, name="c")
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
        lifted = cg.lift(exe.graph_handle, verify=True)
        # the source as the driver holds it, read back
        nodes = _driver_nodes(driver.CUgraph(int(exe.graph_handle)))
        assert len(nodes) == 3
    np.testing.assert_array_equal(gpu.read(y, N, np.int32), np.arange(N, dtype=np.int32) * 3 + 8)
    np.testing.assert_array_equal(gpu.read(counts, N // 256, np.uint32), np.full(N // 256, 2, np.uint32))
    la, lb, lc = lifted.nodes
    assert la.attrs.priority == -1
    assert dict(la.attrs.extra) == {
        "mem_sync_domain": (1,),
        "preferred_shared_memory_carveout": (50,),
        "cluster_scheduling_policy": (1,),
    }
    assert dict(lb.attrs.extra) == {"mem_sync_domain_map": (1, 1)}
    assert lb.attrs.programmatic == [(la, "programmatic")]
    assert lc.attrs.cluster == (2, 1, 1)
    # the lifted graph runs as the source did
    gpu.write(y, np.zeros(N, np.int32))
    gpu.write(counts, np.zeros(N // 256, np.uint32))
    with lifted.instantiate() as exe2:
        exe2.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(gpu.read(y, N, np.int32), np.arange(N, dtype=np.int32) * 3 + 8)
    np.testing.assert_array_equal(gpu.read(counts, N // 256, np.uint32), np.full(N // 256, 2, np.uint32))
    # eagerly too (cuLaunchKernelEx with the attributes)
    gpu.write(y, np.zeros(N, np.int32))
    lifted.run(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(y, N, np.int32), np.arange(N, dtype=np.int32) * 3 + 8)
    # and g itself, lowered, is what the lift rebuilds (the oracle, the other way round)
    lowered = lower(g, {}, [])
    try:
        assert cg.verify_lift(lifted, lowered.handle) == 3
    finally:
        lowered.destroy()


def test_verify_names_the_first_difference(gpu, k, stream):
    """A definition that differs from its source in one launch attribute is refused, naming the node."""
    x = gpu.alloc(4 * N)
    g = cg.Graph("src")
    g.kernel(k.primary, N // 256, 256, (x, np.int32(N), np.int32(1)), name="p")
    g.kernel(k.primary, N // 256, 256, (x, np.int32(N), np.int32(2)), priority=-2, name="q")
    lowered = lower(g, {}, [])
    try:
        lifted = cg.lift(lowered.handle, verify=True)
        lifted.nodes[1].update(priority=None)  # a definition that is no longer its source
        with pytest.raises(errors.LiftMismatchError, match=r"node 1 .*launch attribute id 8"):
            cg.verify_lift(lifted, lowered.handle)
        lifted.nodes[1].update(priority=-2, args=(x, np.int32(N), np.int32(5)))
        with pytest.raises(errors.LiftMismatchError, match=r"node 1 .*argument bytes"):
            cg.verify_lift(lifted, lowered.handle)
    finally:
        lowered.destroy()


def test_cuda_core_and_cupy_graphs_verify(gpu, kernels, device, stream):
    """Graphs made by cuda.core (explicit and captured) and by CuPy round-trip exactly."""
    from cuda.core import LaunchConfig, launch
    from cuda.core.graph import GraphDefinition

    x = gpu.upload(np.ones(N, np.float32))
    cfg = LaunchConfig(grid=N // 256, block=256)
    gd = GraphDefinition()
    a = gd.launch(cfg, kernels.scale_add, x, np.float32(2.0), np.float32(1.0), np.int32(N))
    a.launch(cfg, kernels.scale_add, x, np.float32(2.0), np.float32(1.0), np.int32(N))
    assert len(cg.lift(gd, verify=True).nodes) == 2
    gb = device.create_graph_builder()
    gb.begin_building()
    launch(gb, cfg, kernels.scale_add, x, np.float32(1.0), np.float32(2.0), np.int32(N))
    gb.end_building()
    assert len(cg.lift(gb, verify=True).nodes) == 1
    cp = pytest.importorskip("cupy")
    s = cp.cuda.Stream(non_blocking=True)
    a_ = cp.arange(N, dtype=cp.float32)
    with s:
        s.begin_capture()
        b_ = a_ * 2 + 1
        cp.cumsum(b_, out=b_)
        graph = s.end_capture()
    lifted = cg.lift(graph, verify=True)
    assert len(lifted.nodes) >= 2
    with lifted.instantiate() as exe:
        exe.launch(s)
        s.synchronize()
    np.testing.assert_allclose(cp.asnumpy(b_), np.cumsum(np.arange(N, dtype=np.float32) * 2 + 1), rtol=1e-5)
