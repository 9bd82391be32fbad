"""GPU tests of graph memory (alloc/free nodes, auto-free, trimming the pool), pitched 2-D/3-D
copies and memory-operation nodes (write value / wait value), in graphs and in eager runs.

Marked ``gpu``: they skip (with the reason shown) where no NVIDIA driver/GPU works.
"""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors

pytestmark = pytest.mark.gpu

N = 256
BLOCK = 128


def grid(n):
    return (n + BLOCK - 1) // BLOCK


def scale_add(g, kernels, ptr, a, k, *, after=None, n=N, name=None):
    return g.kernel(
        kernels.scale_add, grid(n), BLOCK, (ptr, np.float32(a), np.float32(k), np.int32(n)), after=after, name=name
    )


def _alloc_graph(kernels, host_in, out):
    g = cg.Graph("alloc3")
    a = g.alloc(N * 4, name="tmp")
    h2d = g.memcpy(a, host_in, N * 4, after=a, name="in")
    k1 = scale_add(g, kernels, a, 2, 1, after=h2d, name="k1")
    k2 = scale_add(g, kernels, a, 3, 0, after=k1, name="k2")
    k3 = g.kernel(
        kernels.axpb, grid(N), BLOCK, (out, a, np.float32(1), np.float32(-1), np.int32(N)), after=k2, name="k3"
    )
    f = g.free(a, after=k3, name="release")
    return g, a, f


def test_alloc_used_by_three_kernels_then_freed_100_launches_no_growth(device, gpu, kernels, stream):
    host_in = np.arange(N, dtype=np.float32)
    out = gpu.upload(np.zeros(N, np.float32))
    g, a, f = _alloc_graph(kernels, host_in, out)
    assert isinstance(a, cg.AllocNode) and isinstance(f, cg.FreeNode) and a.freed_by is f
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
        np.testing.assert_array_equal(gpu.read(out, N), (host_in * 2 + 1) * 3 - 1)
        first = cg.graph_memory_usage(device)
        from cuda.bindings import driver

        err, free_before, _total = driver.cuMemGetInfo()
        assert not err
        for i in range(100):
            host_in[:] = i
            exe.launch(stream)
        stream.sync()
        np.testing.assert_array_equal(gpu.read(out, N), (np.full(N, 99, np.float32) * 2 + 1) * 3 - 1)
        after = cg.graph_memory_usage(device)
        err, free_after, _total = driver.cuMemGetInfo()
        assert not err
    # Freed inside the graph: nothing is held between launches and the pool does not grow.
    assert after["used"] == first["used"]
    assert after["reserved"] == first["reserved"]
    assert first["used_high"] >= N * 4
    assert free_after >= free_before - (2 << 20)


def test_alloc_as_fill_and_copy_operand_with_offset(gpu, kernels, stream):
    out = np.zeros(N, np.float32)
    g = cg.Graph("alloc_ops")
    a = g.alloc(N * 4)
    fill = g.memset(a, np.float32(2.0), after=a)  # count from the allocation's size
    assert fill.width == N
    half = g.memset(a.offset(N * 2), np.float32(5.0), count=N // 2, after=fill)
    k = scale_add(g, kernels, a, 10, 1, after=half)
    c = g.memcpy(out, a, after=k)
    assert c.nbytes == N * 4
    g.free(a, after=c)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    expect = np.full(N, 2.0, np.float32)
    expect[N // 2 :] = 5.0
    np.testing.assert_array_equal(out, expect * 10 + 1)


def test_rebinding_a_copy_out_of_a_graph_allocation(gpu, kernels, stream):
    """A copy reading a graph allocation is set again when its destination parameter is rebound,
    after another graph with allocations was built in between (the addresses come from the executable's own
    construction)."""
    g = cg.Graph("alloc_rebind")
    x = g.param("x")
    a = g.alloc(N * 4)
    fill = g.memset(a, np.float32(3.0), after=a)
    c = g.memcpy(x, a, N * 4, after=fill)
    g.free(a, after=c)
    first, second = gpu.upload(np.zeros(N, np.float32)), gpu.upload(np.zeros(N, np.float32))
    with g.instantiate(x=first) as exe:
        other = cg.Graph("other")
        b = other.alloc(1024)
        other.free(b, after=b)
        other.instantiate().close()
        exe.launch(stream, x=second)
        stream.sync()
        np.testing.assert_array_equal(gpu.read(second, N), np.full(N, 3.0, np.float32))
        np.testing.assert_array_equal(gpu.read(first, N), np.zeros(N, np.float32))


def test_unfreed_allocation_needs_auto_free(device, gpu, kernels, stream):
    out = gpu.upload(np.zeros(N, np.float32))
    g = cg.Graph("unfreed")
    a = g.alloc(N * 4, name="leak")
    z = g.memset(a, np.float32(1.0), after=a)
    g.kernel(kernels.axpb, grid(N), BLOCK, (out, a, np.float32(4), np.float32(0), np.int32(N)), after=z)
    with pytest.raises(errors.DefinitionError) as ei:
        g.instantiate()
    assert "alloc#0 'leak'" in str(ei.value) and "auto_free_on_launch" in str(ei.value)
    with g.instantiate(auto_free_on_launch=True) as exe:
        for _ in range(5):
            exe.launch(stream)
        stream.sync()
        assert cg.graph_memory_usage(device)["used"] >= N * 4  # still held until the next launch
    np.testing.assert_array_equal(gpu.read(out, N), np.full(N, 4.0, np.float32))


def test_trim_graph_memory_releases_the_pool(device, gpu, kernels, stream):
    host_in = np.arange(N, dtype=np.float32)
    out = gpu.upload(np.zeros(N, np.float32))
    g, _a, _f = _alloc_graph(kernels, host_in, out)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    gpu.sync()
    before = cg.graph_memory_usage(device)
    cg.trim_graph_memory(device)
    cg.trim_graph_memory()  # the current device
    after = cg.graph_memory_usage()
    assert after["reserved"] <= before["reserved"]
    assert after["used"] <= before["used"]


def test_eager_run_with_alloc_and_free(gpu, kernels, stream):
    host_in = np.arange(N, dtype=np.float32)
    out = gpu.upload(np.zeros(N, np.float32))
    g, _a, _f = _alloc_graph(kernels, host_in, out)
    g.run(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(out, N), (host_in * 2 + 1) * 3 - 1)


def test_alloc_and_free_driver_node_types(gpu, kernels):
    from cuda.bindings import driver

    from cudagraph.materialize.explicit import lower

    out = gpu.upload(np.zeros(N, np.float32))
    g, a, f = _alloc_graph(kernels, np.zeros(N, np.float32), out)
    lowered = lower(g, {}, [])
    try:
        T = driver.CUgraphNodeType
        for node, want in ((a, T.CU_GRAPH_NODE_TYPE_MEM_ALLOC), (f, T.CU_GRAPH_NODE_TYPE_MEM_FREE)):
            err, t = driver.cuGraphNodeGetType(lowered.driver_nodes[node.index])
            assert not err and t == want
    finally:
        lowered.destroy()


def test_allocation_used_after_free_is_rejected_before_the_driver(gpu, kernels):
    g = cg.Graph("uaf")
    a = g.alloc(N * 4, name="buf")
    f = g.free(a, after=a, name="release")
    scale_add(g, kernels, a, 1, 1, after=f, name="late")
    with pytest.raises(errors.DefinitionError) as ei:
        g.instantiate()
    assert "kernel#2 'late'" in str(ei.value) and "after it is freed" in str(ei.value)


# =============================================================================== pitched copies


def test_memcpy2d_host_to_pitched_device_and_back(gpu, stream):
    rows, cols = 7, 20  # floats
    width = cols * 4
    dpitch = 128
    src = (np.arange(rows * cols, dtype=np.float32) + 1).reshape(rows, cols)
    dev = gpu.upload(np.full(rows * dpitch // 4, -1, np.float32))
    back = np.full((rows, cols + 4), -2, np.float32)  # host pitch 96 bytes
    g = cg.Graph("2d")
    up = g.memcpy2d(dev, dpitch, src, width, width, rows, name="up")
    down = g.memcpy2d(back, (cols + 4) * 4, dev, dpitch, width, rows, after=up, name="down")
    assert isinstance(up, cg.Memcpy2DNode) and down.depth == 1
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    got = gpu.read(dev, rows * dpitch // 4).reshape(rows, dpitch // 4)
    np.testing.assert_array_equal(got[:, :cols], src)
    np.testing.assert_array_equal(got[:, cols:], -1)  # padding untouched
    np.testing.assert_array_equal(back[:, :cols], src)
    np.testing.assert_array_equal(back[:, cols:], -2)
    # The same definition, eagerly.
    gpu.write(dev, np.zeros(rows * dpitch // 4, np.float32))
    back[:] = 0
    g.run(stream)
    stream.sync()
    np.testing.assert_array_equal(back[:, :cols], src)


def test_memcpy3d_device_to_device_with_pitches_and_heights(gpu, stream):
    w, h, d = 3, 4, 2  # floats, rows, slices
    sp, sh = 8, 5  # source: pitch 8 floats, 5 rows per slice
    dp, dh = 4, 6
    src = np.arange(sp * sh * d, dtype=np.float32)
    dsrc = gpu.upload(src)
    ddst = gpu.upload(np.full(dp * dh * d, -1, np.float32))
    g = cg.Graph("3d")
    node = g.memcpy3d(ddst, dsrc, w * 4, h, d, dst_pitch=dp * 4, src_pitch=sp * 4, dst_height=dh, src_height=sh)
    assert isinstance(node, cg.Memcpy3DNode)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    got = gpu.read(ddst, dp * dh * d).reshape(d, dh, dp)
    want = np.full((d, dh, dp), -1, np.float32)
    want[:, :h, :w] = src.reshape(d, sh, sp)[:, :h, :w]
    np.testing.assert_array_equal(got, want)


def test_memcpy2d_into_graph_allocation(gpu, kernels, stream):
    rows, cols = 4, 8
    src = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    out = np.zeros((rows, cols), np.float32)
    g = cg.Graph("2d_alloc")
    a = g.alloc(rows * 64)
    up = g.memcpy2d(a, 64, src, cols * 4, cols * 4, rows, after=a)
    down = g.memcpy2d(out, cols * 4, a, 64, cols * 4, rows, after=up)
    g.free(a, after=down)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(out, src)


# =============================================================================== memory operations


@pytest.fixture
def word(gpu):
    """64 bytes from cuMemAlloc: the memory kind the driver's memory operations accept."""
    from cuda.bindings import driver

    err, ptr = driver.cuMemAlloc(64)
    assert not err, err
    gpu.write(int(ptr), np.zeros(16, np.uint32))
    yield int(ptr)
    gpu.sync()
    driver.cuMemFree(ptr)


@pytest.mark.parametrize("bits", [32, 64])
def test_write_value_then_wait_value_then_kernel(gpu, kernels, stream, word, bits):
    dtype = np.uint32 if bits == 32 else np.uint64
    x = gpu.upload(np.zeros(N, np.float32))
    value = 7 if bits == 32 else (1 << 40) + 7
    g = cg.Graph(f"memops{bits}")
    w = g.write_value(word, value, bits=bits, name="signal")
    wt = g.wait_value(word, value, cmp="eq", bits=bits, after=w, name="wait")
    scale_add(g, kernels, x, 1, 3, after=wt)
    assert isinstance(w, cg.WriteValueNode) and isinstance(wt, cg.WaitValueNode) and wt.cmp == "eq"
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    assert int(gpu.read(word, 1, dtype)[0]) == value
    np.testing.assert_array_equal(gpu.read(x, N), np.full(N, 3, np.float32))
    # Eagerly: cuStreamWriteValue / cuStreamWaitValue.
    gpu.write(word, np.zeros(1, dtype))
    g.run(stream)
    stream.sync()
    assert int(gpu.read(word, 1, dtype)[0]) == value
    np.testing.assert_array_equal(gpu.read(x, N), np.full(N, 6, np.float32))


def test_wait_value_geq_and_batch_memop_node_type(gpu, kernels, stream, word):
    from cuda.bindings import driver

    from cudagraph.materialize.explicit import lower

    gpu.write(word, np.array([5], np.uint32))
    x = gpu.upload(np.zeros(N, np.float32))
    g = cg.Graph("geq")
    wt = g.wait_value(word, 3, cmp="geq")  # 5 >= 3: passes at once
    w = g.write_value(word, 9, after=wt)
    scale_add(g, kernels, x, 1, 1, after=w)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    assert gpu.read(word, 1, np.uint32)[0] == 9
    np.testing.assert_array_equal(gpu.read(x, N), np.ones(N, np.float32))
    lowered = lower(g, {}, [])
    try:
        err, t = driver.cuGraphNodeGetType(lowered.driver_nodes[wt.index])
        assert not err and t == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_BATCH_MEM_OP
    finally:
        lowered.destroy()


def test_memory_operation_on_pool_memory_is_refused_before_the_driver(gpu, stream):
    # From the device's memory pool whatever GpuHelper.alloc uses (plain cuMemAlloc under the sanitizer).
    pooled = gpu.device.allocate(16, stream=stream)
    stream.sync()
    g = cg.Graph("pool")
    g.write_value(pooled, 1, name="signal")
    with pytest.raises(errors.OperandError) as ei:
        g.instantiate()
    assert "write_value#0 'signal'" in str(ei.value) and "memory-pool" in str(ei.value)
    with pytest.raises(errors.OperandError):
        g.run(stream)


def test_out_of_memory_for_graph_memory_then_instantiate_after_freeing(device, gpu, kernels, stream):
    """Graph memory that does not fit is a typed error naming the call; once memory is freed it works."""
    from cuda.bindings import driver

    gpu.sync()
    cg.trim_graph_memory(device)  # no graph memory kept from earlier tests
    err, free, _total = driver.cuMemGetInfo()
    assert not err
    err, hog = driver.cuMemAlloc(int(free) - (512 << 20))  # leave 512 MiB
    if err:
        pytest.skip(f"could not take the device's free memory to provoke the error: {err}")
    out = gpu.upload(np.zeros(N, np.float32))
    g = cg.Graph("too_big")
    a = g.alloc(4 << 30, name="big")  # 4 GiB of graph memory
    z = g.memset(a, np.float32(2.0), count=N, after=a)
    k = g.kernel(kernels.axpb, grid(N), BLOCK, (out, a, np.float32(3), np.float32(1), np.int32(N)), after=z)
    g.free(a, after=k)
    exe = None
    try:
        with pytest.raises(errors.DriverError) as ei:
            exe = g.instantiate()
            exe.launch(stream)
            stream.sync()
        assert ei.value.name == "CUDA_ERROR_OUT_OF_MEMORY", str(ei.value)
        assert ei.value.call in str(ei.value)
    finally:
        if exe is not None:
            exe.close()
        assert not driver.cuMemFree(hog)[0]
    cg.trim_graph_memory(device)
    with g.instantiate() as exe2:
        exe2.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(gpu.read(out, N), np.full(N, 7.0, np.float32))
