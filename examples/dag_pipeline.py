"""A DAG with fork and join, built explicitly: one upload fans out into three kernels, two of them
join in a product, everything joins in a sum, a host callback notes the end and one copy brings
the result back. ``out = 2 x + x**2 (x + 1)``, checked against numpy on several batches: the graph
copies the host array in at every launch, so a new batch is written into it and launched again.

Run from the repository root (needs an NVIDIA GPU and driver)::

    PYTHONPATH=src python3 examples/dag_pipeline.py [-n 65536] [--batches 4]
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
extern "C" __global__ void add(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""

BLOCK = 256


def open_device() -> tuple[Any, Any]:
    """cuda.core's Device 0, made current, and a stream on it."""
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    return dev, dev.create_stream()


def needs_gpu(exc: BaseException) -> int:
    """Say in one sentence that this example needs a GPU; the exit code (0: nothing failed)."""
    print(f"examples/dag_pipeline.py needs an NVIDIA GPU and driver; none is usable here ({type(exc).__name__}).")
    return 0


def build(kernels: dict[str, Any], x_host: np.ndarray, out_host: np.ndarray, seen: list[str]) -> cg.Graph:
    """The pipeline; its device buffers are parameters (``x``, ``y1``, ``y2``, ``y3``, ``t``, ``out``)."""
    n = x_host.size
    nn, grid = np.int32(n), (n + BLOCK - 1) // BLOCK
    g = cg.Graph("pipeline")
    x, y1, y2, y3, t, out = (g.param(name) for name in ("x", "y1", "y2", "y3", "t", "out"))
    h2d = g.memcpy(x, x_host, x_host.nbytes, name="x to device")
    # fork: three kernels read x
    k1 = g.kernel(kernels["axpb"], grid, BLOCK, (y1, x, np.float32(2), np.float32(0), nn), after=h2d, name="y1 = 2x")
    k2 = g.kernel(kernels["mul"], grid, BLOCK, (y2, x, x, nn), after=h2d, name="y2 = x*x")
    k3 = g.kernel(kernels["axpb"], grid, BLOCK, (y3, x, np.float32(1), np.float32(1), nn), after=h2d, name="y3 = x+1")
    # join: the product waits for two branches, the sum for the product and the third
    prod = g.kernel(kernels["mul"], grid, BLOCK, (t, y2, y3, nn), after=[k2, k3], name="t = y2*y3")
    total = g.kernel(kernels["add"], grid, BLOCK, (out, y1, t, nn), after=[k1, prod], name="out = y1+t")
    d2h = g.memcpy(out_host, out, out_host.nbytes, after=total, name="out to host")
    note = g.host(seen.append, "batch done", after=total, name="note")
    g.join(d2h, note, name="done")
    return g


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=1 << 16, help="elements per batch (default 65536)")
    ap.add_argument("--batches", type=int, default=4, help="batches launched (default 4)")
    args = ap.parse_args(argv)
    try:
        dev, stream = open_device()
    except Exception as exc:  # no cuda.core, no driver library, no device
        return needs_gpu(exc)
    from cuda.core import Program, ProgramOptions

    code = Program(KERNELS, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
    kernels = {name: code.get_kernel(name) for name in ("axpb", "mul", "add")}
    n = args.n
    x_host = np.zeros(n, np.float32)
    out_host = np.zeros(n, np.float32)
    seen: list[str] = []
    g = build(kernels, x_host, out_host, seen)
    print(g.summary())
    bufs = {name: dev.allocate(4 * n, stream=stream) for name in ("x", "y1", "y2", "y3", "t", "out")}
    rng = np.random.default_rng(0)
    worst = 0.0
    try:
        exe = g.instantiate(**bufs)
    except cg.errors.DriverUnavailableError as exc:
        return needs_gpu(exc)
    with exe:
        for _ in range(args.batches):
            x_host[:] = rng.standard_normal(n, dtype=np.float32)
            exe.launch(stream)
            stream.sync()
            exe.check()  # raises if the host callback raised
            expected = np.float32(2) * x_host + (x_host * x_host) * (x_host + np.float32(1))
            worst = max(worst, float(np.max(np.abs(out_host - expected) / (1 + np.abs(expected)))))
    for b in bufs.values():
        b.close(stream)
    stream.sync()
    ok = worst < 1e-6 and seen == ["batch done"] * args.batches
    print(
        f"{args.batches} batches of {n}: out = 2x + x^2 (x + 1) checked against numpy, max relative error "
        f"{worst:.2e}; the host callback ran {len(seen)} times"
    )
    print("dag_pipeline: results match numpy" if ok else "dag_pipeline: RESULTS DIFFER FROM NUMPY")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
