"""The kernels of the programs written against cuda.core's graph APIs and run with cudagraph.compat
(tests/test_compat_gpu.py, tests/compat_builder_programs.py): one source, compiled with NVRTC by the GPU tests."""

from __future__ import annotations

import cudagraph as cg

#: CUDA C++ of every kernel the compat programs launch (the conditional ones use ``CONDITIONAL_SNIPPET``).
SOURCE = (
    cg.CONDITIONAL_SNIPPET
    + r"""
extern "C" __global__ void scale_add(float* x, float a, float k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + k;
}
extern "C" __global__ void axpb(float* y, const float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
extern "C" __global__ void combine(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] - 2.0f * b[i];
}
extern "C" __global__ void heat_step(float* dst, const float* src, float r, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float l = i > 0 ? src[i - 1] : 0.0f;
        float rr = i < n - 1 ? src[i + 1] : 0.0f;
        dst[i] = src[i] + r * (l - 2.0f * src[i] + rr);
    }
}
extern "C" __global__ void countdown(cudaGraphConditionalHandle h, int* counter) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        int c = --counter[0];
        cudaGraphSetConditional(h, c > 0 ? 1u : 0u);
    }
}
extern "C" __global__ void set_if_positive(cudaGraphConditionalHandle h, const int* flag) {
    if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(h, flag[0] > 0 ? 1u : 0u);
}
extern "C" __global__ void set_while_below(cudaGraphConditionalHandle h, const float* x, float limit) {
    if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(h, x[0] < limit ? 1u : 0u);
}
extern "C" __global__ void set_case(cudaGraphConditionalHandle h, const int* value) {
    if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(h, (unsigned int)value[0]);
}
"""
)
#: The names of its kernels.
NAMES = (
    "scale_add",
    "axpb",
    "combine",
    "heat_step",
    "countdown",
    "set_if_positive",
    "set_while_below",
    "set_case",
)
