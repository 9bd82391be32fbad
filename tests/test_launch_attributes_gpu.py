"""GPU tests of kernel launch attributes in graph nodes (and in eager runs): thread-block clusters,
cooperative launch with a grid-wide barrier, node priority, programmatic dependent launch edges,
and dynamic shared memory above 48 KiB.

Marked ``gpu``: they skip (with the reason shown) where no NVIDIA driver/GPU works.
"""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors

pytestmark = pytest.mark.gpu

N = 4096

SOURCE = r"""
extern "C" __global__ void cluster_shape(unsigned int* out) {
    unsigned int nx = 1, ny = 1, nz = 1, rank = 0;
#if __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(nx));
    asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(ny));
    asm volatile("mov.u32 %0, %%cluster_nctaid.z;" : "=r"(nz));
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
    unsigned int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (threadIdx.x == 0) {
        out[4 * b + 0] = nx;
        out[4 * b + 1] = ny;
        out[4 * b + 2] = nz;
        out[4 * b + 3] = rank;
    }
}

// A grid-wide barrier: correct only when every block is resident at once (cooperative launch).
__device__ void grid_barrier(unsigned int* count, volatile unsigned int* gen, unsigned int nblocks) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int g = *gen;
        __threadfence();
        if (atomicAdd(count, 1u) == nblocks - 1) {
            *count = 0;
            __threadfence();
            atomicAdd((unsigned int*)gen, 1u);
        } else {
            while (*gen == g) { }
        }
        __threadfence();
    }
    __syncthreads();
}

extern "C" __global__ void coop_rotate(unsigned int* sync, int* data, int* out, int rounds) {
    unsigned int n = gridDim.x;
    int b = blockIdx.x;
    for (int r = 0; r < rounds; ++r) {
        if (threadIdx.x == 0) ((volatile int*)data)[b] = b * 1000 + r;
        grid_barrier(sync, sync + 1, n);
        if (threadIdx.x == 0) out[r * n + b] = ((volatile int*)data)[(b + 1) % n];
        grid_barrier(sync, sync + 1, n);
    }
}

extern "C" __global__ void add_one(int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}

extern "C" __global__ void primary(int* x, int n, int salt) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = 0;
        for (int k = 0; k < 2000; ++k) v += (i ^ k) & 1;  // some work before the write
        x[i] = i * 3 + salt + (v - v);
    }
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

extern "C" __global__ void smem_sum(int* out, int n) {
    extern __shared__ int s[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = i & 7;
    __syncthreads();
    if (threadIdx.x == 0) {
        int acc = 0;
        for (int i = 0; i < n; ++i) acc += s[i];
        out[blockIdx.x] = acc;
    }
}
"""
NAMES = ("cluster_shape", "coop_rotate", "add_one", "primary", "secondary", "smem_sum")


@pytest.fixture(scope="module")
def k(nvrtc):
    return nvrtc(SOURCE, NAMES)


@pytest.fixture(scope="module")
def sm90(device):
    if int(device.arch) < 90:
        pytest.skip(f"needs compute capability 9.0 (clusters, griddepcontrol); this GPU is sm_{device.arch}")


def node_attribute(lowered, node, attr):
    from cuda.bindings import driver

    err, value = driver.cuGraphKernelNodeGetAttribute(lowered.driver_nodes[node.index], attr)
    assert not err, err
    return value


# =============================================================================== clusters


def test_clustered_kernel_reads_its_cluster_shape(gpu, k, stream, sm90):
    from cuda.bindings import driver

    from cudagraph.materialize.explicit import lower

    grid = (4, 2, 1)
    nblocks = 8
    out_plain = gpu.upload(np.zeros(4 * nblocks, np.uint32))
    out_cluster = gpu.upload(np.zeros(4 * nblocks, np.uint32))
    g = cg.Graph("clusters")
    plain = g.kernel(k.cluster_shape, grid, 32, (out_plain,), name="plain")
    clustered = g.kernel(k.cluster_shape, grid, 32, (out_cluster,), cluster=(2, 2), name="clustered")
    assert plain.attrs is None and clustered.attrs.cluster == (2, 2, 1)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    got = gpu.read(out_cluster, 4 * nblocks, np.uint32).reshape(nblocks, 4)
    np.testing.assert_array_equal(got[:, :3], np.tile([2, 2, 1], (nblocks, 1)))
    assert sorted(got[:, 3].tolist()) == [0, 0, 1, 1, 2, 2, 3, 3]
    base = gpu.read(out_plain, 4 * nblocks, np.uint32).reshape(nblocks, 4)
    np.testing.assert_array_equal(base[:, :3], np.ones((nblocks, 3)))

    lowered = lower(g, {}, [])
    try:
        v = node_attribute(lowered, clustered, driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
        assert (v.clusterDim.x, v.clusterDim.y, v.clusterDim.z) == (2, 2, 1)
    finally:
        lowered.destroy()

    # Eagerly, through cuLaunchKernelEx.
    gpu.write(out_cluster, np.zeros(4 * nblocks, np.uint32))
    g.run(stream)
    stream.sync()
    got = gpu.read(out_cluster, 4 * nblocks, np.uint32).reshape(nblocks, 4)
    np.testing.assert_array_equal(got[:, :3], np.tile([2, 2, 1], (nblocks, 1)))


# =============================================================================== cooperative


def test_cooperative_kernel_uses_a_grid_wide_barrier(device, gpu, k, stream):
    from cuda.bindings import driver

    from cudagraph.materialize.explicit import lower

    n = device.properties.multiprocessor_count
    rounds = 5
    sync = gpu.upload(np.zeros(2, np.uint32))
    data = gpu.upload(np.zeros(n, np.int32))
    out = gpu.upload(np.zeros(rounds * n, np.int32))
    g = cg.Graph("coop")
    z = g.memset(sync, 0, count=1, element_size=4, name="reset barrier")
    node = g.kernel(k.coop_rotate, n, 64, (sync, data, out, np.int32(rounds)), cooperative=True, after=z)
    assert node.attrs.cooperative
    expect = np.array([[((b + 1) % n) * 1000 + r for b in range(n)] for r in range(rounds)], np.int32).ravel()
    with g.instantiate() as exe:
        for _ in range(3):
            gpu.write(out, np.zeros(rounds * n, np.int32))
            exe.launch(stream)
            stream.sync()
            np.testing.assert_array_equal(gpu.read(out, rounds * n, np.int32), expect)
    lowered = lower(g, {}, [])
    try:
        v = node_attribute(lowered, node, driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
        assert v.cooperative == 1
    finally:
        lowered.destroy()
    gpu.write(out, np.zeros(rounds * n, np.int32))
    g.run(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(out, rounds * n, np.int32), expect)


def test_cooperative_grid_too_large_is_a_typed_driver_error(device, gpu, k, stream):
    n = device.properties.multiprocessor_count * 64
    x = gpu.upload(np.zeros(n * 1024, np.int32))
    g = cg.Graph("coop_too_large")
    g.kernel(k.add_one, n, 1024, (x, np.int32(n * 1024)), cooperative=True, name="huge")
    exe = None
    with pytest.raises(errors.DriverError) as ei:
        exe = g.instantiate()
        exe.launch(stream)
        stream.sync()
    if exe is not None:
        exe.close()
    e = ei.value
    assert e.name.startswith("CUDA_ERROR_") and e.call in str(e)


# =============================================================================== priority


def test_node_priority_is_set_and_the_graph_runs(gpu, k, stream):
    from cuda.bindings import driver

    from cudagraph.materialize.explicit import lower

    err, least, greatest = driver.cuCtxGetStreamPriorityRange()
    assert not err
    x = gpu.upload(np.zeros(N, np.int32))
    g = cg.Graph("priority")
    a = g.kernel(k.add_one, N // 256, 256, (x, np.int32(N)), priority=greatest, name="urgent")
    b = g.kernel(k.add_one, N // 256, 256, (x, np.int32(N)), priority=least, after=a, name="relaxed")
    assert a.attrs.priority == greatest
    with g.instantiate(use_node_priority=True) as exe:
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, 2))
    lowered = lower(g, {}, [])
    try:
        P = driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_PRIORITY
        assert node_attribute(lowered, a, P).priority == greatest
        assert node_attribute(lowered, b, P).priority == least
    finally:
        lowered.destroy()


# =============================================================================== programmatic dependent launch


@pytest.mark.parametrize("how", ["kernel_keyword", "add_edge", "launch_order"])
def test_programmatic_dependent_launch(gpu, k, stream, sm90, how):
    from cuda.bindings import driver

    from cudagraph.materialize.explicit import lower

    x = gpu.upload(np.zeros(N, np.int32))
    y = gpu.upload(np.zeros(N, np.int32))
    g = cg.Graph("pdl")
    salt = g.param("salt", np.int32)
    p = g.kernel(k.primary, N // 128, 128, (x, np.int32(N), salt), name="primary")
    if how == "kernel_keyword":
        s = g.kernel(k.secondary, N // 128, 128, (x, y, np.int32(N)), programmatic=p, name="secondary")
    else:
        s = g.kernel(k.secondary, N // 128, 128, (x, y, np.int32(N)), name="secondary")
        g.add_edge(p, s, programmatic=True if how == "add_edge" else "launch_order")
    assert s.attrs.port_of(p) == ("launch_order" if how == "launch_order" else "programmatic")
    for salt_value in (0, 7, 11):
        with g.instantiate(salt=salt_value) as exe:
            for _ in range(20):
                exe.launch(stream)
            stream.sync()
        want = np.arange(N, dtype=np.int32) * 3 + salt_value + 1
        np.testing.assert_array_equal(gpu.read(y, N, np.int32), want)

    lowered = lower(g, {"salt": np.int32(0)}, [])
    try:
        res = driver.cuGraphGetEdges(lowered.handle, 1)
        assert not res[0], res[0]
        assert len(res) == 5, "cuda-bindings 13 returns edge data"
        edge = res[3][0]
        assert edge.type == driver.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
        port = (
            driver.CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER
            if how == "launch_order"
            else driver.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
        )
        assert int(edge.from_port) == int(port)
    finally:
        lowered.destroy()


# =============================================================================== large shared memory


@pytest.mark.parametrize("kib", [64, 100])
def test_dynamic_shared_memory_above_48_kib(device, gpu, k, stream, kib):
    nbytes = kib * 1024
    n = nbytes // 4
    out = gpu.upload(np.zeros(2, np.int32))
    g = cg.Graph("smem")
    node = g.kernel(k.smem_sum, 2, 256, (out, np.int32(n)), shared_mem=nbytes)
    assert node.attrs is not None and node.attrs.smem_optin
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(gpu.read(out, 2, np.int32), [n // 8 * 28] * 2)
    gpu.write(out, np.zeros(2, np.int32))
    g.run(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(out, 2, np.int32), [n // 8 * 28] * 2)
