"""Kernels from the ecosystem in explicit graphs: Numba @cuda.jit (explicit signature and specialised from
the arguments), CuPy RawKernel and RawModule functions, raw int handles; numbers checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg

pytestmark = pytest.mark.gpu

N = 1000
F = np.float32

CUPY_SOURCE = r"""
extern "C" __global__ void triple_plus(float* y, const float* x, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 3.0f * x[i] + b;
}
extern "C" __global__ void negate(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = -y[i];
}
"""


def _numba():
    numba_cuda = pytest.importorskip("numba.cuda")
    if not numba_cuda.is_available():
        pytest.skip("numba.cuda finds no GPU")

    # numba-cuda's typing tables still name numpy functions that numpy 2.5 removed (row_stack, trapz, in1d):
    # give them back their new names so this numba-cuda compiles at all with this numpy.
    for old, new in (("row_stack", "vstack"), ("trapz", "trapezoid"), ("in1d", "isin")):
        if not hasattr(np, old) and hasattr(np, new):
            setattr(np, old, getattr(np, new))

    def probe(x):  # type: ignore[no-untyped-def]
        pass

    try:  # numba-cuda releases lag numpy's: one that cannot compile at all here is skipped, with its reason
        numba_cuda.jit("void(int32[:])")(probe)
    except Exception as exc:
        pytest.skip(f"numba-cuda cannot compile a kernel with this numpy: {type(exc).__name__}: {exc}")
    return numba_cuda


def _cupy():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        pytest.skip(f"CuPy finds no GPU: {exc}")
    return cupy


def test_numba_explicit_signature_in_an_explicit_graph(device, gpu):
    cuda = _numba()

    @cuda.jit("void(float32[:], float32[:], float32, int32)")
    def axpy(y, x, a, n):
        i = cuda.grid(1)
        if i < n:
            y[i] = a * x[i] + y[i]

    x_h = np.arange(N, dtype=F)
    y_h = np.ones(N, F)
    x = cuda.to_device(x_h)
    y = cuda.to_device(y_h)
    cuda.synchronize()
    g = cg.Graph("numba")
    with g.path() as p:
        cg.launch(p, ((N + 127) // 128, 128), axpy, y, x, F(2), np.int32(N))
        cg.launch(p, ((N + 127) // 128, 128), axpy, y, x, F(-0.5), np.int32(N))
    s = device.create_stream()
    g.instantiate().launch(s)
    s.sync()
    np.testing.assert_allclose(y.copy_to_host(), y_h + 2 * x_h - 0.5 * x_h, rtol=1e-6)


def test_numba_lazy_kernel_is_specialised_from_the_arguments(device, gpu):
    cuda = _numba()

    @cuda.jit
    def scale2d(a, k):
        i, j = cuda.grid(2)
        if i < a.shape[0] and j < a.shape[1]:
            a[i, j] = a[i, j] * k + i

    a_h = np.arange(12 * 20, dtype=np.float64).reshape(12, 20)
    a = cuda.to_device(a_h)
    cuda.synchronize()
    g = cg.Graph("numba2d")
    cg.launch(g.path(), ((1, 1), (16, 32)), scale2d, a, np.float64(3.0))
    s = device.create_stream()
    g.instantiate().launch(s)
    s.sync()
    np.testing.assert_allclose(a.copy_to_host(), a_h * 3 + np.arange(12)[:, None])


def test_numba_kernel_on_a_stream_eagerly(device, gpu):
    cuda = _numba()

    @cuda.jit
    def fill(a, v):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = v

    a = cuda.device_array(N, dtype=np.int32)
    s = device.create_stream()
    cg.launch(s, ((N + 255) // 256, 256), fill, a, np.int32(9))
    s.sync()
    np.testing.assert_array_equal(a.copy_to_host(), np.full(N, 9, np.int32))


def test_cupy_raw_kernel_and_module_function_in_an_explicit_graph(device, gpu):
    cupy = _cupy()
    triple = cupy.RawKernel(CUPY_SOURCE, "triple_plus")
    mod = cupy.RawModule(code=CUPY_SOURCE)
    negate = mod.get_function("negate")
    x = cupy.arange(N, dtype=cupy.float32)
    y = cupy.zeros(N, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    g = cg.Graph("cupy")
    k1 = g.kernel(triple, (N + 127) // 128, 128, (y, x, F(1.5), np.int32(N)))  # Graph.kernel takes it as it is
    cg.launch(g.path(after=k1), ((N + 127) // 128, 128), negate, y, np.int32(N))
    s = device.create_stream()
    g.instantiate().launch(s)
    s.sync()
    np.testing.assert_allclose(cupy.asnumpy(y), -(3 * np.arange(N, dtype=F) + F(1.5)), rtol=1e-6)


def test_raw_int_cukernel_and_cufunction_handles_in_an_explicit_graph(device, gpu, kernels):
    from cuda.bindings import driver

    x = gpu.upload(np.zeros(N, np.int32))
    handle = int(kernels.add_i32.handle)  # a CUkernel address
    err, func = driver.cuKernelGetFunction(kernels.add_i32.handle)
    assert not err
    g = cg.Graph("raw")
    with g.path() as p:
        cg.launch(p, ((N + 127) // 128, 128), handle, x, np.int32(5), np.int32(N))
        cg.launch(p, ((N + 127) // 128, 128), driver.CUfunction(int(func)), x, np.int32(2), np.int32(N))
    s = device.create_stream()
    g.instantiate().launch(s)
    s.sync()
    np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, 7, np.int32))
