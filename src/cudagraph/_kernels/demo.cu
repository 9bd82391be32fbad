// Kernels of `python -m cudagraph demo`. demo.ptx beside this file is
// generated from it with:  nvcc -ptx -arch=compute_75 -o demo.ptx demo.cu, then `.version 8.0` set in place
// of nvcc 13's 9.0 (CUDA 12.0+ drivers JIT it; ptxas assembles both into identical code).
extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}

extern "C" __global__ void square(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}

extern "C" __global__ void offset(const float* x, float* y, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + b;
}

extern "C" __global__ void combine(const float* a, const float* b, const float* c, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += a[i] + b[i] * c[i];
}
