"""Scratch memory that lives inside a graph: alloc and free nodes. A three-stage pipeline keeps its
intermediate results in two graph allocations, used as kernel arguments, as a copy's destination
and (at an offset) as a fill's destination, and freed inside the graph. The driver keeps the
memory in its graph memory pool between launches, so relaunching allocates nothing new: the pool's
counters are read before and after many launches, and the results are checked against numpy.

Run from the repository root (needs an NVIDIA GPU and driver)::

    PYTHONPATH=src python3 examples/graph_memory.py [-n 65536] [--launches 50]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

import cudagraph as cg

KERNELS = r"""
extern "C" __global__ void axpb(float* y, const float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
extern "C" __global__ void mul(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * b[i];
}
"""

BLOCK = 256
TAIL = 16  # elements of the first scratch buffer zeroed through an offset into the allocation


def open_device() -> tuple[Any, Any]:
    """cuda.core's Device 0, made current, and a stream on it."""
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    return dev, dev.create_stream()


def needs_gpu(exc: BaseException) -> int:
    """Say in one sentence that this example needs a GPU; the exit code (0: nothing failed)."""
    print(f"examples/graph_memory.py needs an NVIDIA GPU and driver; none is usable here ({type(exc).__name__}).")
    return 0


def build(kernels: dict[str, Any], x_host: np.ndarray, out_host: np.ndarray) -> cg.Graph:
    """``a = 3x + 1`` (its last TAIL elements zeroed), ``b = a / 2``, ``out = a * b``; a and b are graph memory."""
    n = x_host.size
    nn, grid = np.int32(n), (n + BLOCK - 1) // BLOCK
    g = cg.Graph("scratch")
    a = g.alloc(4 * n, name="a")
    b = g.alloc(4 * n, name="b")
    h2d = g.memcpy(a, x_host, x_host.nbytes, after=a, name="x into a")
    k1 = g.kernel(kernels["axpb"], grid, BLOCK, (a, a, np.float32(3), np.float32(1), nn), after=h2d, name="a = 3a+1")
    tail = g.memset(a.offset(4 * (n - TAIL)), np.float32(0), count=TAIL, after=k1, name="a[-16:] = 0")
    k2 = g.kernel(
        kernels["axpb"], grid, BLOCK, (b, a, np.float32(0.5), np.float32(0), nn), after=[tail, b], name="b = a/2"
    )
    k3 = g.kernel(kernels["mul"], grid, BLOCK, (b, a, b, nn), after=k2, name="b = a*b")
    d2h = g.memcpy(out_host, b, out_host.nbytes, after=k3, name="b to host")
    g.free(a, after=k3, name="free a")
    g.free(b, after=d2h, name="free b")
    return g


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=1 << 16, help="elements (default 65536)")
    ap.add_argument("--launches", type=int, default=50, help="launches after the first (default 50)")
    args = ap.parse_args(argv)
    try:
        dev, stream = open_device()
    except Exception as exc:  # no cuda.core, no driver library, no device
        return needs_gpu(exc)
    from cuda.core import Program, ProgramOptions

    code = Program(KERNELS, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
    kernels = {name: code.get_kernel(name) for name in ("axpb", "mul")}
    n = args.n
    x_host = np.zeros(n, np.float32)
    out_host = np.zeros(n, np.float32)
    g = build(kernels, x_host, out_host)
    print(g.summary())
    rng = np.random.default_rng(0)
    worst = 0.0

    def check() -> float:
        a = np.float32(3) * x_host + np.float32(1)
        a[-TAIL:] = 0
        expected = a * (a * np.float32(0.5))
        return float(np.max(np.abs(out_host - expected) / (1 + np.abs(expected))))

    try:
        exe = g.instantiate()
    except cg.errors.DriverUnavailableError as exc:
        return needs_gpu(exc)
    with exe:
        x_host[:] = rng.standard_normal(n, dtype=np.float32)
        exe.launch(stream)
        stream.sync()
        worst = check()
        first = cg.graph_memory_usage(dev)
        for _ in range(args.launches):
            x_host[:] = rng.standard_normal(n, dtype=np.float32)
            exe.launch(stream)
            stream.sync()
            worst = max(worst, check())
        after = cg.graph_memory_usage(dev)
    cg.trim_graph_memory(dev)
    trimmed = cg.graph_memory_usage(dev)
    print(f"graph memory pool after the first launch: {first}")
    print(f"after {args.launches} more launches:       {after}")
    print(f"after trim_graph_memory():             {trimmed}")
    no_growth = after["reserved"] == first["reserved"] and after["used"] == first["used"]
    ok = worst < 1e-6 and no_growth and first["used_high"] >= 2 * 4 * n
    print(
        f"{args.launches + 1} launches: out = a * a/2 with a = 3x + 1 checked against numpy, max relative error "
        f"{worst:.2e}; the pool did not grow: {no_growth}"
    )
    print("graph_memory: results match numpy" if ok else "graph_memory: RESULTS DIFFER FROM NUMPY")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
