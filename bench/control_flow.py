"""Device-side loops vs host-synchronized loops: the Jacobi solver of ``examples/jacobi_while.py``.

One iteration = two Jacobi sweeps (u -> v -> u) and the largest change of the second one; the
solver iterates until that change is at most ``--tol``. Each iteration runs as the same GPU work
in every variant; what differs is who decides to go on:

- ``gpu loop``: one graph launch; a while node repeats the iteration and the GPU decides;
- ``host loop (graph)``: the iteration as a graph (plus a copy of the residual to pinned host
  memory), launched once per iteration; the host synchronizes after each launch to read the
  residual and decide — how the loop is written without conditional nodes;
- ``host loop (eager)``: the same iteration issued with ``Graph.run`` (no graph), synchronized
  each iteration.

Two layouts of the iteration are measured:

- ``3 nodes``: the example's body — two sweep kernels (the second one a programmatic dependent
  launch on compute capability 9.0+) and a built-in ``set_condition`` node (``res > tol``);
- ``1 node``: one cooperative kernel doing both sweeps with grid-wide barriers, the residual and
  the decision (``cudaGraphSetConditional`` through ``cg.CONDITIONAL_SNIPPET``);
- ``1 block``: for small grids (n <= 128), one thread block does both sweeps (``__syncthreads``
  between them), the residual and the decision: the cheapest body a while node can have;
- ``1 block x8``: the while body holds 8 copies of that kernel, each behind a device flag that the
  copy finding convergence sets, so one trip round the while node runs up to 8 iterations (the
  iteration count and the grid stay those of the other layouts; the host loop runs the plain
  one-block kernel, one iteration per launch).

Every variant must run the same number of iterations and leave the same grid (checked). Reported:
microseconds per iteration (median of ``--repeats`` solves) and the ratios host / GPU loop.
Target: the GPU loop at least 3x faster per iteration than the host-synchronized graph loop on
small (launch-bound) grids.

Run from the repository root::

    PYTHONPATH=src python3 bench/control_flow.py [--sizes 32,64,128,256] [--tol 1e-5] [--repeats 5]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import cudagraph as cg
from jacobi_while import BLOCK, _grid2, add_iteration, build_gpu_loop, compile_kernels, initial_grid

FUSED = (
    cg.CONDITIONAL_SNIPPET
    + r"""
// A grid-wide barrier; correct because the kernel is launched cooperatively (all blocks resident).
__device__ void grid_barrier(unsigned int* bar, unsigned int nblocks) {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        volatile unsigned int* gen = bar + 1;
        unsigned int g = *gen;
        __threadfence();
        if (atomicAdd(bar, 1u) == nblocks - 1) {
            bar[0] = 0;
            __threadfence();
            atomicAdd(bar + 1, 1u);
        } else {
            while (*gen == g) { }
        }
        __threadfence();
    }
    __syncthreads();
}

__device__ float sweep(const float* src, float* dst, int n) {
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
    return change;
}

// One whole iteration: u -> v, barrier, v -> u with the largest change, barrier, decision.
extern "C" __global__ void jacobi_iteration(float* u, float* v, int n, unsigned int* res, int* iters,
                                            int max_iters, float tol, unsigned int* bar,
                                            cudaGraphConditionalHandle handle) {
    unsigned int nblocks = gridDim.x * gridDim.y;
    bool leader = blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0;
    if (leader) {
        *res = 0u;
        *iters += 1;
    }
    sweep(u, v, n);
    grid_barrier(bar, nblocks);
    unsigned int bits = __float_as_uint(sweep(v, u, n));
    for (int o = 16; o > 0; o >>= 1) bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, o));
    if ((threadIdx.x & 31) == 0 && bits) atomicMax(res, bits);
    grid_barrier(bar, nblocks);
    if (leader && handle) {
        float r = __uint_as_float(*(volatile unsigned int*)res);
        cudaGraphSetConditional(handle, (r > tol && *iters < max_iters) ? 1u : 0u);
    }
}

// The whole iteration in ONE thread block (small grids): no grid-wide barrier, no cooperative launch.
__device__ void jacobi_block_body(float* u, float* v, int n, unsigned int* res, int* iters,
                                  int max_iters, float tol, cudaGraphConditionalHandle handle) {
    __shared__ unsigned int best;
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    int nt = blockDim.x * blockDim.y;
    if (t == 0) {
        best = 0u;
        *iters += 1;
    }
    for (int k = t; k < n * n; k += nt) {
        int i = k / n, j = k % n;
        if (i == 0 || j == 0 || i == n - 1 || j == n - 1) {
            v[k] = u[k];
        } else {
            v[k] = 0.25f * (u[k - 1] + u[k + 1] + u[k - n] + u[k + n]);
        }
    }
    __syncthreads();
    unsigned int bits = 0u;
    for (int k = t; k < n * n; k += nt) {
        int i = k / n, j = k % n;
        if (i == 0 || j == 0 || i == n - 1 || j == n - 1) {
            u[k] = v[k];
        } else {
            float x = 0.25f * (v[k - 1] + v[k + 1] + v[k - n] + v[k + n]);
            u[k] = x;
            bits = max(bits, __float_as_uint(fabsf(x - v[k])));
        }
    }
    for (int o = 16; o > 0; o >>= 1) bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, o));
    if ((t & 31) == 0 && bits) atomicMax(&best, bits);
    __syncthreads();
    if (t == 0) {
        *res = best;
        if (handle) cudaGraphSetConditional(handle, (__uint_as_float(best) > tol && *iters < max_iters) ? 1u : 0u);
    }
}

extern "C" __global__ void jacobi_block(float* u, float* v, int n, unsigned int* res, int* iters,
                                        int max_iters, float tol, cudaGraphConditionalHandle handle) {
    jacobi_block_body(u, v, n, res, iters, max_iters, tol, handle);
}

// jacobi_block behind a guard, for a while body that holds several iterations: once an earlier copy
// has found convergence (*done), the remaining copies only keep the condition at 0.
extern "C" __global__ void jacobi_block_guarded(float* u, float* v, int n, unsigned int* res, int* iters,
                                                int max_iters, float tol, int* done,
                                                cudaGraphConditionalHandle handle) {
    __shared__ int skip;
    if (threadIdx.x == 0 && threadIdx.y == 0) skip = *done;
    __syncthreads();
    if (skip) {
        if (threadIdx.x == 0 && threadIdx.y == 0) cudaGraphSetConditional(handle, 0u);
        return;
    }
    jacobi_block_body(u, v, n, res, iters, max_iters, tol, 0);
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        bool more = __uint_as_float(*(volatile unsigned int*)res) > tol && *iters < max_iters;
        *done = more ? 0 : 1;
        cudaGraphSetConditional(handle, more ? 1u : 0u);
    }
}
"""
)

#: Iterations per trip round the while node in the unrolled one-block layout.
UNROLL = 8

#: Thread block of the one-block layout, and the largest grid side it is measured for.
ONE_BLOCK = (32, 32)
ONE_BLOCK_MAX_N = 128


def _pinned(nbytes: int) -> tuple[Any, np.ndarray]:
    from cuda.core import LegacyPinnedMemoryResource

    buf = LegacyPinnedMemoryResource().allocate(nbytes)
    return buf, np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(int(buf.handle)))


def _sync(stream: Any) -> None:
    from cuda.bindings import driver

    (err,) = driver.cuStreamSynchronize(stream.handle)
    if err:
        raise RuntimeError(f"cuStreamSynchronize failed: {err}")


class Bufs:
    """Device buffers of one grid size and a pinned word pair (residual, iteration count)."""

    def __init__(self, dev: Any, stream: Any, n: int) -> None:
        self.n = n
        self.u0 = initial_grid(n)
        nbytes = self.u0.nbytes
        self.u, self.v = dev.allocate(nbytes, stream=stream), dev.allocate(nbytes, stream=stream)
        self.res, self.iters, self.bar = (dev.allocate(8, stream=stream) for _ in range(3))
        self.pin_buf, pin = _pinned(8)
        self.res_host = pin[:4].view(np.float32)
        self.it_host = pin[4:].view(np.int32)
        self.pin = int(self.pin_buf.handle)

    def add_reset(self, g: cg.Graph) -> list[cg.Node]:
        """Add to ``g`` the nodes that start a solve: both grids from ``u0``, the count and the flag words at 0."""
        return [
            g.memcpy(self.u, self.u0),
            g.memcpy(self.v, self.u0),
            g.memset(self.iters, 0, count=1, element_size=4),
            g.memset(self.bar, 0, count=2, element_size=4),
        ]

    def grid(self) -> np.ndarray:
        from cuda.bindings import driver

        out = np.zeros_like(self.u0)
        driver.cuMemcpyDtoH(out.ctypes.data, int(self.u.handle), out.nbytes)
        return out

    def close(self, stream: Any) -> None:
        for b in (self.u, self.v, self.res, self.iters, self.bar):
            b.close(stream)
        _sync(stream)
        self.pin_buf.close()


def layout_three_nodes(kernels: dict[str, Any], b: Bufs, tol: float, max_iters: int) -> tuple[cg.Graph, cg.Graph]:
    """(the whole solve with a while node, one iteration for the host loops)."""
    g, loop = build_gpu_loop(kernels, b.u0, b.u, b.v, b.res, b.iters, tol, max_iters)
    g.memcpy(b.pin + 4, b.iters, 4, after=loop, name="iters to host")
    step = cg.Graph("jacobi step")
    last = add_iteration(step, kernels, b.u, b.v, b.res, b.iters, b.n, max_iters, None)
    step.memcpy(b.pin, b.res, 4, after=last, name="res to host")
    step.memcpy(b.pin + 4, b.iters, 4, after=last, name="iters to host")
    return g, step


def layout_one_node(fused: Any, b: Bufs, tol: float, max_iters: int) -> tuple[cg.Graph, cg.Graph]:
    n = b.n
    nn, mi, t = np.int32(n), np.int32(max_iters), np.float32(tol)
    g = cg.Graph("jacobi fused")
    more = g.condition(default=1, name="not converged")
    init = b.add_reset(g)
    loop = g.while_(more, after=init)
    args = (b.u, b.v, nn, b.res, b.iters, mi, t, b.bar, more)
    loop.body.kernel(fused, _grid2(n), BLOCK, args, cooperative=True, name="iteration")
    g.memcpy(b.pin + 4, b.iters, 4, after=loop)
    step = cg.Graph("jacobi fused step")
    k = step.kernel(fused, _grid2(n), BLOCK, (*args[:-1], np.uint64(0)), cooperative=True, name="iteration")
    step.memcpy(b.pin, b.res, 4, after=k)
    step.memcpy(b.pin + 4, b.iters, 4, after=k)
    return g, step


def layout_one_block(kernel: Any, b: Bufs, tol: float, max_iters: int) -> tuple[cg.Graph, cg.Graph]:
    """The iteration as one single-block kernel that also decides (small grids only)."""
    nn, mi, t = np.int32(b.n), np.int32(max_iters), np.float32(tol)
    g = cg.Graph("jacobi one block")
    more = g.condition(default=1, name="not converged")
    init = b.add_reset(g)
    loop = g.while_(more, after=init)
    args = (b.u, b.v, nn, b.res, b.iters, mi, t, more)
    loop.body.kernel(kernel, 1, ONE_BLOCK, args, name="iteration")
    g.memcpy(b.pin + 4, b.iters, 4, after=loop)
    step = cg.Graph("jacobi one block step")
    k = step.kernel(kernel, 1, ONE_BLOCK, (*args[:-1], np.uint64(0)), name="iteration")
    step.memcpy(b.pin, b.res, 4, after=k)
    step.memcpy(b.pin + 4, b.iters, 4, after=k)
    return g, step


def layout_unrolled(guarded: Any, kernel: Any, b: Bufs, tol: float, max_iters: int) -> tuple[cg.Graph, cg.Graph]:
    """:data:`UNROLL` guarded one-block iterations per trip round the while node (small grids only).

    The host loops run the plain one-block step, one iteration per launch.
    """
    nn, mi, t = np.int32(b.n), np.int32(max_iters), np.float32(tol)
    g = cg.Graph("jacobi one block unrolled")
    more = g.condition(default=1, name="not converged")
    init = b.add_reset(g)  # b.bar is the "done" flag here
    loop = g.while_(more, after=init)
    prev = None
    for i in range(UNROLL):
        args = (b.u, b.v, nn, b.res, b.iters, mi, t, b.bar, more)
        prev = loop.body.kernel(guarded, 1, ONE_BLOCK, args, after=prev, name=f"iteration {i}")
    g.memcpy(b.pin + 4, b.iters, 4, after=loop)
    _g, step = layout_one_block(kernel, b, tol, max_iters)
    return g, step


def measure(
    stream: Any, b: Bufs, g: cg.Graph, step: cg.Graph, tol: float, repeats: int, max_iters: int, eager: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with g.instantiate() as exe:
        exe.launch(stream)
        _sync(stream)
        iters = int(b.it_host[0])
        samples = []
        for _ in range(repeats):
            gc.disable()
            t0 = time.perf_counter()
            exe.launch(stream)
            _sync(stream)
            samples.append(time.perf_counter() - t0)
            gc.enable()
    out["iterations"] = iters
    out["gpu_loop_us"] = statistics.median(samples) / iters * 1e6
    reference = b.grid()

    init = cg.Graph("init")
    b.add_reset(init)

    def host_loop(issue: Callable[[], None]) -> tuple[float, int]:
        init.run(stream)
        _sync(stream)
        gc.disable()
        t0 = time.perf_counter()
        k = 0
        while True:
            issue()
            _sync(stream)
            k += 1
            if not b.res_host[0] > tol or k >= max_iters:
                break
        dt = time.perf_counter() - t0
        gc.enable()
        return dt, k

    with step.instantiate() as step_exe:
        ways: list[tuple[str, Callable[[], None], int]] = [("host_graph", lambda: step_exe.launch(stream), repeats)]
        if eager:
            ways.append(("host_eager", lambda: step.run(stream), max(1, repeats // 2)))
        for label, issue, count in ways:
            host_loop(issue)  # warm-up
            samples = []
            for _ in range(count):
                dt, k = host_loop(issue)
                if k != iters:
                    raise RuntimeError(f"{label}: {k} iterations, the GPU loop ran {iters}")
                samples.append(dt)
            diff = float(np.max(np.abs(b.grid() - reference)))
            if diff != 0.0:
                raise RuntimeError(f"{label}: the grid differs from the GPU loop's by {diff}")
            out[f"{label}_us"] = statistics.median(samples) / iters * 1e6
            out[f"ratio_{label}"] = out[f"{label}_us"] / out["gpu_loop_us"]
    out["grid"] = reference
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="32,64,128,256", help="grid sizes (points per side), comma-separated")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-iters", type=int, default=200000)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    from cuda.core import Device, Program, ProgramOptions

    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    kernels = compile_kernels(dev)
    fused_code = Program(FUSED, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
    fused = fused_code.get_kernel("jacobi_iteration")
    one_block = fused_code.get_kernel("jacobi_block")
    guarded = fused_code.get_kernel("jacobi_block_guarded")
    print(
        f"Jacobi until max change <= {args.tol:g}; {dev.name}; median of {args.repeats} solves; "
        "times in microseconds per iteration"
    )
    print(
        f"{'n':>5} {'iters':>6} | {'3 nodes: gpu loop':>17} {'host(graph)':>11} {'host(eager)':>11} "
        f"{'ratios':>13} | {'1 node: gpu loop':>16} {'host(graph)':>11} {'ratio':>6} "
        f"| {'1 block: gpu loop':>17} {'host(graph)':>11} {'ratio':>6} "
        f"| {f'1 block x{UNROLL}: gpu loop':>20} {'ratio':>6}"
    )
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        b = Bufs(dev, stream, n)
        try:
            g3, s3 = layout_three_nodes(kernels, b, args.tol, args.max_iters)
            try:
                a = measure(stream, b, g3, s3, args.tol, args.repeats, args.max_iters, eager=True)
            except cg.CudaGraphError as exc:
                if not kernels.get("pdl"):
                    raise
                print(f"  (programmatic edges refused: {exc}; measuring without them)")
                kernels["pdl"] = False
                g3, s3 = layout_three_nodes(kernels, b, args.tol, args.max_iters)
                a = measure(stream, b, g3, s3, args.tol, args.repeats, args.max_iters, eager=True)
            try:
                g1, s1 = layout_one_node(fused, b, args.tol, args.max_iters)
                c: dict[str, Any] | None = measure(stream, b, g1, s1, args.tol, args.repeats, args.max_iters, False)
            except cg.CudaGraphError as exc:
                print(f"  (n={n}: the 1-node layout failed: {exc})")
                c = None
            d: dict[str, Any] | None = None
            e: dict[str, Any] | None = None
            if n <= ONE_BLOCK_MAX_N:
                gb, sb = layout_one_block(one_block, b, args.tol, args.max_iters)
                d = measure(stream, b, gb, sb, args.tol, args.repeats, args.max_iters, False)
                gu, su = layout_unrolled(guarded, one_block, b, args.tol, args.max_iters)
                e = measure(stream, b, gu, su, args.tol, args.repeats, args.max_iters, False)
        finally:
            b.close(stream)
        grid = a.pop("grid")
        for other, label in ((c, "1 node"), (d, "1 block"), (e, f"1 block x{UNROLL}")):
            if other is not None and (
                other["iterations"] != a["iterations"] or not np.array_equal(other.pop("grid"), grid)
            ):
                raise RuntimeError(f"n={n}: the {label} layout disagrees with the 3-node layout")
        row = {
            "n": n,
            "three_nodes": a,
            "one_node": c,
            "one_block": d,
            "one_block_unrolled": e,
            "unroll": UNROLL,
            "pdl": bool(kernels.get("pdl")),
        }
        rows.append(row)
        one = (
            f"{c['gpu_loop_us']:>16.2f} {c['host_graph_us']:>11.2f} {c['ratio_host_graph']:>5.1f}x"
            if c is not None
            else f"{'n/a':>16}"
        )
        blk = (
            f"{d['gpu_loop_us']:>17.2f} {d['host_graph_us']:>11.2f} {d['ratio_host_graph']:>5.1f}x"
            if d is not None
            else f"{'n/a':>17}"
        )
        unr = f"{e['gpu_loop_us']:>20.2f} {e['ratio_host_graph']:>5.1f}x" if e is not None else f"{'n/a':>20}"
        print(
            f"{n:>5} {a['iterations']:>6} | {a['gpu_loop_us']:>17.2f} {a['host_graph_us']:>11.2f} "
            f"{a['host_eager_us']:>11.2f} {a['ratio_host_graph']:>5.1f}x {a['ratio_host_eager']:>5.1f}x | {one} | {blk}"
            f" | {unr}"
        )
    small = [r for r in rows if r["n"] <= 64]
    if small:
        for key, label in (
            ("three_nodes", "3 nodes"),
            ("one_node", "1 node"),
            ("one_block", "1 block"),
            ("one_block_unrolled", f"1 block x{UNROLL}"),
        ):
            if any(r[key] is None for r in small):
                continue
            worst = min(r[key]["ratio_host_graph"] for r in small)
            verdict = "met" if worst >= 3 else "NOT met"
            print(
                f"target, {label}: gpu loop >= 3x faster per iteration than the host-synchronized graph loop "
                f"(n <= 64): {verdict} (worst {worst:.1f}x)"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tol": args.tol, "repeats": args.repeats, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
