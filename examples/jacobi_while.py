"""An iterative solver that loops on the GPU: Jacobi iterations for Laplace's equation on an
n x n grid, inside a while node that runs until the largest change of an iteration drops below a
tolerance. No host round trip per iteration: the residual is compared on the GPU by a built-in
``set_condition`` node. The result is checked against the same iteration in numpy.

Run from the repository root (needs an NVIDIA GPU and driver)::

    PYTHONPATH=src python3 examples/jacobi_while.py [-n 64] [--tol 1e-5]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

import cudagraph as cg

#: ``jacobi`` does one sweep ``dst = mean of the 4 neighbours of src`` (the boundary is copied).
#: The first sweep of an iteration (``last = 0``) also resets the residual and counts the
#: iteration; the second (``last = 1``) raises ``*res`` (the bits of a non-negative float) to the
#: largest change, or leaves it at 0 once ``max_iters`` iterations have run, which ends the loop.
#: On compute capability 9.0 and newer a sweep may be launched before the previous one finishes
#: (a programmatic edge): ``griddepcontrol.wait`` holds it until that one's writes are visible.
KERNELS = r"""
extern "C" __global__ void jacobi(const float* src, float* dst, int n, unsigned int* res, int* iters,
                                  int max_iters, int last) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    float change = 0.0f;
    if (i < n && j < n) {
        int k = i * n + j;
        if (i == 0 || j == 0 || i == n - 1 || j == n - 1) {
            dst[k] = src[k];
        } else {
            float v = 0.25f * (src[k - 1] + src[k + 1] + src[k - n] + src[k + n]);
            dst[k] = v;
            change = fabsf(v - src[k]);
        }
    }
    if (!last) {
        if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
            *res = 0u;
            *iters += 1;
        }
    } else {
        if (*iters >= max_iters) change = 0.0f;
        unsigned int bits = __float_as_uint(change);
        for (int o = 16; o > 0; o >>= 1) bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, o));
        if ((threadIdx.x & 31) == 0 && bits) atomicMax(res, bits);
    }
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}
"""

BLOCK = (32, 8)


def compile_kernels(device: Any) -> dict[str, Any]:
    """The solver's kernel as a cuda.core Kernel, compiled with NVRTC for ``device``."""
    from cuda.core import Program, ProgramOptions

    code = Program(KERNELS, "c++", ProgramOptions(arch=f"sm_{device.arch}")).compile("cubin")
    return {"jacobi": code.get_kernel("jacobi"), "pdl": int(device.arch) >= 90}


def initial_grid(n: int) -> np.ndarray:
    """Zero inside, the top edge held at 1."""
    u = np.zeros((n, n), np.float32)
    u[0, :] = 1.0
    return u


def _grid2(n: int) -> tuple[int, int]:
    return ((n + BLOCK[0] - 1) // BLOCK[0], (n + BLOCK[1] - 1) // BLOCK[1])


def add_iteration(
    g: cg.Graph, kernels: dict[str, Any], u: Any, v: Any, res: Any, iters: Any, n: int, max_iters: int, after: Any
) -> Any:
    """One iteration (two sweeps, u -> v -> u) on ``g``; the second sweep measures the change."""
    nn, mi = np.int32(n), np.int32(max_iters)
    grid = _grid2(n)
    s1 = g.kernel(kernels["jacobi"], grid, BLOCK, (u, v, nn, res, iters, mi, np.int32(0)), after=after, name="u->v")
    return g.kernel(
        kernels["jacobi"],
        grid,
        BLOCK,
        (v, u, nn, res, iters, mi, np.int32(1)),
        after=s1,
        programmatic=s1 if kernels.get("pdl") else None,
        name="v->u, residual",
    )


def build_gpu_loop(
    kernels: dict[str, Any], u0: np.ndarray, u: Any, v: Any, res: Any, iters: Any, tol: float, max_iters: int
) -> tuple[cg.Graph, cg.WhileNode]:
    """The whole solve as one graph: initialize, then a while node until ``max change <= tol``."""
    n = u0.shape[0]
    g = cg.Graph("jacobi")
    more = g.condition(default=1, name="not converged")
    init_u = g.memcpy(u, u0, name="u = u0")
    init_v = g.memcpy(v, u0, name="v = u0")
    zero = g.memset(iters, 0, count=1, element_size=4, name="iters = 0")
    loop = g.while_(more, after=[init_u, init_v, zero], name="until converged")
    last = add_iteration(loop.body, kernels, u, v, res, iters, n, max_iters, None)
    loop.body.set_condition(more, res, ">", tol, np.float32, after=last, name="res > tol")
    return g, loop


def numpy_jacobi(u0: np.ndarray, iterations: int) -> tuple[np.ndarray, float]:
    """``iterations`` double sweeps in float32, as the GPU does them; returns (u, last change)."""
    u = u0.copy()
    v = u0.copy()
    change = 0.0
    for _ in range(iterations):
        for src, dst, last in ((u, v, False), (v, u, True)):
            inner = np.float32(0.25) * (src[1:-1, :-2] + src[1:-1, 2:] + src[:-2, 1:-1] + src[2:, 1:-1])
            if last:
                change = float(np.max(np.abs(inner - src[1:-1, 1:-1])))
            dst[1:-1, 1:-1] = inner
    return u, change


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=64, help="grid points per side (default 64)")
    ap.add_argument("--tol", type=float, default=1e-5, help="stop when the largest change is <= tol")
    ap.add_argument("--max-iters", type=int, default=100000)
    args = ap.parse_args(argv)
    try:
        from cuda.core import Device

        dev = Device(0)
        dev.set_current()
        stream = dev.create_stream()
    except Exception as exc:  # no cuda.core, no driver library, no device
        print(f"examples/jacobi_while.py needs an NVIDIA GPU and driver; none is usable here ({type(exc).__name__}).")
        return 0
    kernels = compile_kernels(dev)
    n = args.n
    u0 = initial_grid(n)
    u, v = dev.allocate(u0.nbytes, stream=stream), dev.allocate(u0.nbytes, stream=stream)
    res, iters = dev.allocate(4, stream=stream), dev.allocate(4, stream=stream)
    out = np.zeros_like(u0)
    counted = np.zeros(1, np.int32)
    g, loop = build_gpu_loop(kernels, u0, u, v, res, iters, args.tol, args.max_iters)
    g.memcpy(out, u, after=loop, name="u to host")
    g.memcpy(counted, iters, after=loop, name="iters to host")
    print(g.summary())
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    k = int(counted[0])
    ref, change = numpy_jacobi(u0, k)
    _, change_before = numpy_jacobi(u0, k - 1) if k > 1 else (None, float("inf"))
    err = float(np.max(np.abs(out - ref)))
    ok = err <= 1e-6 and change <= args.tol < change_before and k < args.max_iters
    print(
        f"n={n}: {k} iterations on the GPU; numpy after {k} iterations: largest change {change:.3g} "
        f"(tol {args.tol:g}, {change_before:.3g} one iteration earlier); max |gpu - numpy| = {err:.2e}"
    )
    print("solution matches numpy" if ok else "SOLUTION DIFFERS FROM NUMPY")
    for b in (u, v, res, iters):
        b.close(stream)
    stream.sync()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
