// Built-in kernels of cudagraph: Graph.set_condition(cond, ptr, op, value, dtype) sets
// cond = (*ptr <op> value) on the GPU. predicates.ptx beside this file is generated from it with:
//     nvcc -ptx -arch=compute_75 -o predicates.ptx predicates.cu
// then `.version 8.0` set in place of nvcc 13's 9.0 (CUDA 12.0+ drivers JIT it; ptxas assembles both into
// identical code).
// cudagraph compiles this source with NVRTC for the running GPU when it can, else loads the PTX.
typedef __device_builtin__ unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                                      unsigned int value);

// op: 0 <, 1 <=, 2 >, 3 >=, 4 ==, 5 != (cudagraph._condition.PREDICATE_OPS)
template <typename T>
__device__ __forceinline__ bool cudagraph_compare(T a, T b, int op) {
    switch (op) {
    case 0: return a < b;
    case 1: return a <= b;
    case 2: return a > b;
    case 3: return a >= b;
    case 4: return a == b;
    default: return a != b;
    }
}

#define CUDAGRAPH_SET_CONDITION(SUFFIX, T)                                                              \
    extern "C" __global__ void cudagraph_set_condition_##SUFFIX(cudaGraphConditionalHandle handle,     \
                                                                const T* ptr, T value, int op) {       \
        if (blockIdx.x == 0 && threadIdx.x == 0) {                                                     \
            T current = *(const volatile T*)ptr;                                                       \
            cudaGraphSetConditional(handle, cudagraph_compare<T>(current, value, op) ? 1u : 0u);        \
        }                                                                                              \
    }

CUDAGRAPH_SET_CONDITION(f32, float)
CUDAGRAPH_SET_CONDITION(f64, double)
CUDAGRAPH_SET_CONDITION(i32, int)
CUDAGRAPH_SET_CONDITION(i64, long long)
CUDAGRAPH_SET_CONDITION(u32, unsigned int)
CUDAGRAPH_SET_CONDITION(u64, unsigned long long)
