"""Update fidelity on the GPU: definitions that differ only in an edge type or a launch attribute never share
an executable, and each executable holds (and runs) what its definition says.

Two pairs: a primary and a secondary kernel joined by a plain or a programmatic edge, and a kernel launched
plainly or in clusters of (2, 1, 1). Each pair goes through :class:`cudagraph.ExecutableCache` (rebuilt every
step, alternating) and through ``exe.update(..., reinstantiate_if_needed=True)``; after every step the driver
graph an executable was instantiated from is read back (``cuGraphGetNodes``, ``cuGraphNodeGetDependencies``
with edge data, ``cuGraphKernelNodeGetAttribute``) and compared with the definition, and the results are
compared with numpy.

Marked ``gpu``: they skip (with the reason shown) where no NVIDIA driver/GPU works.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.errors import DefinitionError

pytestmark = pytest.mark.gpu

N = 4096
BLOCKS = 8  # of the cluster kernel: grid (8, 1, 1), clusters of (2, 1, 1) when clustered

SOURCE = r"""
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

extern "C" __global__ void cluster_shape(unsigned int* out, unsigned int tag) {
    unsigned int nx = 1, ny = 1, nz = 1, rank = 0;
#if __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(nx));
    asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(ny));
    asm volatile("mov.u32 %0, %%cluster_nctaid.z;" : "=r"(nz));
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
    unsigned int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (threadIdx.x == 0) {
        out[5 * b + 0] = nx;
        out[5 * b + 1] = ny;
        out[5 * b + 2] = nz;
        out[5 * b + 3] = rank;
        out[5 * b + 4] = tag;
    }
}
"""
NAMES = ("primary", "secondary", "cluster_shape")


@pytest.fixture(scope="module")
def k(nvrtc):
    return nvrtc(SOURCE, NAMES)


@pytest.fixture(scope="module")
def sm90(device):
    if int(device.arch) < 90:
        pytest.skip(f"needs compute capability 9.0 (clusters, griddepcontrol); this GPU is sm_{device.arch}")


# ------------------------------------------------------------------------------ reading the driver graph back


def _ok(res: Any, call: str) -> Any:
    assert not res[0], f"{call}: {res[0]}"
    return res[1:]


def driver_nodes(exe: cg.Executable) -> set[int]:
    """The handles of the nodes of the driver graph ``exe`` was instantiated from (``cuGraphGetNodes``)."""
    from cuda.bindings import driver

    (_, count) = _ok(driver.cuGraphGetNodes(exe.graph_handle, 0), "cuGraphGetNodes")
    nodes, got = _ok(driver.cuGraphGetNodes(exe.graph_handle, count), "cuGraphGetNodes")
    assert got == count
    return {int(n) for n in nodes[:got]}


def incoming(exe: cg.Executable, node: cg.Node) -> list[tuple[int, int, int]]:
    """``(predecessor handle, edge type, from_port)`` of each incoming edge of ``node``'s driver node."""
    from cuda.bindings import driver

    # cuda-bindings 12.3+ return the edge data from the _v2 entry point, 13.x from the plain one.
    get = getattr(driver, "cuGraphNodeGetDependencies_v2", None) or driver.cuGraphNodeGetDependencies
    res = _ok(get(exe.driver_node(node), len(node.predecessors) + 2), "cuGraphNodeGetDependencies")
    assert len(res) == 3, "cuGraphNodeGetDependencies returns no edge data with this cuda-bindings"
    deps, data, count = res
    return [(int(deps[i]), int(data[i].type), int(data[i].from_port)) for i in range(count)]


def cluster_dims(exe: cg.Executable, node: cg.Node) -> tuple[int, int, int]:
    from cuda.bindings import driver

    attr = driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    (value,) = _ok(driver.cuGraphKernelNodeGetAttribute(exe.driver_node(node), attr), "cuGraphKernelNodeGetAttribute")
    return (int(value.clusterDim.x), int(value.clusterDim.y), int(value.clusterDim.z))


def assert_holds(exe: cg.Executable, graph: cg.Graph) -> None:
    """The driver graph of ``exe`` is ``graph``'s: the same nodes, and per kernel node the incoming edges with
    the types and ports and the cluster shape that the definition gives."""
    from cuda.bindings import driver

    assert exe.graph is graph
    assert driver_nodes(exe) == {int(exe.driver_node(n)) for n in graph.nodes}
    programmatic = int(driver.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)
    default = int(driver.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_DEFAULT)
    ports = {
        "programmatic": int(driver.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC),
        "launch_order": int(driver.CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER),
    }
    for node in graph.nodes:
        attrs = node.attrs
        want = []
        for p in node.predecessors:
            port = None if attrs is None else attrs.port_of(p)
            kind, at = (default, 0) if port is None else (programmatic, ports[port])
            want.append((int(exe.driver_node(p)), kind, at))
        assert sorted(incoming(exe, node)) == sorted(want), node.label
        cluster = None if attrs is None else attrs.cluster
        if cluster is None:
            assert cluster_dims(exe, node) in ((0, 0, 0), (1, 1, 1)), node.label  # (how the driver reports none)
        else:
            assert cluster_dims(exe, node) == cluster, node.label


# ------------------------------------------------------------------------------ the two pairs


class Pdl:
    """primary -> secondary, the edge plain or programmatic (the variant): y = 3 * i + salt + 1."""

    #: What ``describe_topology_diff`` says, plain -> variant and back.
    forward = "edge kernel#0 'primary' -> kernel#1 'secondary': plain vs programmatic"
    backward = "edge kernel#0 'primary' -> kernel#1 'secondary': programmatic vs plain"

    def __init__(self, gpu: Any, k: Any) -> None:
        self.gpu, self.k = gpu, k
        self.x = gpu.upload(np.zeros(N, np.int32))
        self.y = gpu.upload(np.zeros(N, np.int32))

    def build(self, variant: bool, salt: int) -> cg.Graph:
        g = cg.Graph("pdl")
        p = g.kernel(self.k.primary, N // 128, 128, (self.x, np.int32(N), np.int32(salt)), name="primary")
        g.kernel(
            self.k.secondary,
            N // 128,
            128,
            (self.x, self.y, np.int32(N)),
            after=p,
            programmatic=p if variant else None,
            name="secondary",
        )
        return g

    def reset(self) -> None:
        self.gpu.write(self.x, np.zeros(N, np.int32))
        self.gpu.write(self.y, np.zeros(N, np.int32))

    def verify(self, variant: bool, salt: int) -> None:
        want = np.arange(N, dtype=np.int32) * 3 + salt
        np.testing.assert_array_equal(self.gpu.read(self.x, N, np.int32), want)
        np.testing.assert_array_equal(self.gpu.read(self.y, N, np.int32), want + 1)


class Clusters:
    """One kernel over 8 blocks, plain or in clusters of (2, 1, 1) (the variant); each block writes the
    shape of its cluster, its rank in it and the tag it was given."""

    forward = "kernel#0 'shape': launch attributes differ: none vs cluster=(2, 1, 1)"
    backward = "kernel#0 'shape': launch attributes differ: cluster=(2, 1, 1) vs none"

    def __init__(self, gpu: Any, k: Any) -> None:
        self.gpu, self.k = gpu, k
        self.out = gpu.upload(np.zeros(5 * BLOCKS, np.uint32))

    def build(self, variant: bool, salt: int) -> cg.Graph:
        g = cg.Graph("clusters")
        g.kernel(
            self.k.cluster_shape,
            BLOCKS,
            32,
            (self.out, np.uint32(salt)),
            cluster=(2, 1, 1) if variant else None,
            name="shape",
        )
        return g

    def reset(self) -> None:
        self.gpu.write(self.out, np.zeros(5 * BLOCKS, np.uint32))

    def verify(self, variant: bool, salt: int) -> None:
        got = self.gpu.read(self.out, 5 * BLOCKS, np.uint32).reshape(BLOCKS, 5)
        want = np.zeros((BLOCKS, 5), np.uint32)
        want[:, :3] = (2, 1, 1) if variant else (1, 1, 1)
        want[:, 3] = np.arange(BLOCKS) % 2 if variant else 0  # the rank in a cluster along x
        want[:, 4] = salt
        np.testing.assert_array_equal(got, want)


CASES = {"pdl": Pdl, "clusters": Clusters}


def run_and_check(subject: Any, exe: cg.Executable, graph: cg.Graph, variant: bool, salt: int, stream: Any) -> None:
    """Launch ``exe``, which must run ``graph`` (``variant``, ``salt``): results and driver graph checked."""
    subject.reset()
    exe.launch(stream)
    stream.sync()
    subject.verify(variant, salt)
    assert_holds(exe, graph)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_cache_keeps_one_executable_per_variant(gpu, k, stream, sm90, case):
    subject = CASES[case](gpu, k)
    cache = cg.ExecutableCache(maxsize=4)
    seen: dict[bool, cg.Executable] = {}
    for step in range(6):
        variant = step % 2 == 1  # plain, then the variant, alternating; rebuilt every step
        salt = 10 + step
        g = subject.build(variant, salt)
        exe = cache.get(g)
        assert seen.setdefault(variant, exe) is exe
        run_and_check(subject, exe, g, variant, salt, stream)
    assert seen[False] is not seen[True]
    assert cache.stats() == {"hits": 4, "misses": 2, "evictions": 0, "size": 2, "maxsize": 4}
    cache.clear()


@pytest.mark.parametrize("case", sorted(CASES))
def test_update_refuses_or_reinstantiates_and_runs_the_new_definition(gpu, k, stream, sm90, case):
    subject = CASES[case](gpu, k)
    g_plain = subject.build(False, 1)
    exe = g_plain.instantiate()
    try:
        run_and_check(subject, exe, g_plain, False, 1, stream)
        g_variant = subject.build(True, 2)
        with pytest.raises(DefinitionError) as ei:
            exe.update(g_variant)
        assert f"the topology differs: {subject.forward}" in str(ei.value)
        run_and_check(subject, exe, g_plain, False, 1, stream)  # unchanged by the refusal

        res = exe.update(g_variant, reinstantiate_if_needed=True)
        assert (res.mode, res.reason) == ("reinstantiated", subject.forward)
        run_and_check(subject, exe, g_variant, True, 2, stream)

        same = subject.build(True, 3)  # the same launches, another salt: set in place
        res = exe.update(same)
        assert (res.mode, res.nodes_updated) == ("per-node", 1)
        run_and_check(subject, exe, same, True, 3, stream)

        back = subject.build(False, 4)
        res = exe.update(back, reinstantiate_if_needed=True)
        assert (res.mode, res.reason) == ("reinstantiated", subject.backward)
        run_and_check(subject, exe, back, False, 4, stream)
    finally:
        exe.close()
