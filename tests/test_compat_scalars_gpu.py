"""Python scalars as cuda.core passes them, through cuda.core and cudagraph.compat: a Python float is a double and
an int a 64-bit word, read back and compared with numpy; a Python float for a 4-byte parameter is refused by
compat with the parameter named (cuda.core would pass the first half of a double)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg

pytestmark = pytest.mark.gpu

N = 64
SOURCE = r"""
extern "C" __global__ void axpy_d(double* y, double a, const double* x, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void scale_f(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


@pytest.fixture(scope="module")
def k(nvrtc):
    return nvrtc(SOURCE, ("axpy_d", "scale_f"))


def cfg() -> Any:
    from cuda.core import LaunchConfig

    return LaunchConfig(grid=1, block=N)


def test_a_python_float_is_a_double_and_an_int_a_64_bit_word(GD, k, gpu, stream):
    x = gpu.upload(np.arange(N, dtype=np.float64))
    y = gpu.upload(np.ones(N, np.float64))
    gd = GD()
    gd.launch(cfg(), k.axpy_d, y, 2.5, int(x.handle), N).launch(cfg(), k.axpy_d, y, -0.5, x, N)
    exe = gd.instantiate()
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(y, N, np.float64), 1 + 2.0 * np.arange(N))


def test_a_python_float_for_a_float_parameter_is_refused_by_compat(k, gpu):
    x = gpu.alloc(4 * N)
    gd = cg.compat.GraphDefinition()
    gd.launch(cfg(), k.scale_f, x, 2.0, np.int32(N))
    with pytest.raises(
        cg.errors.KernelArgumentError, match=r"parameter 1: expected 4 bytes, got 8 bytes \(numpy float64\)"
    ):
        gd.instantiate()
