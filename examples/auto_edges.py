"""Edges from data: a small pipeline written in sequential style, each kernel argument that is memory
wrapped with its access (``cg.In``, ``cg.Out``, ``cg.InOut``), built with ``Graph(edges="auto")``: the
independent branches run in parallel with no edge written by hand. The same graph with one of its edges
removed is refused by ``validate(races=True)``, naming the two nodes and the memory. The results are checked
against numpy.

Run from the repository root (needs an NVIDIA GPU and driver)::

    PYTHONPATH=src python3 examples/auto_edges.py [-n 65536] [--launches 3]
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


def needs_gpu(exc: BaseException) -> int:
    """Say in one sentence that this example needs a GPU; the exit code (0: nothing failed)."""
    print(f"examples/auto_edges.py needs an NVIDIA GPU and driver; none is usable here ({type(exc).__name__}).")
    return 0


def build(k: dict[str, Any], x_host: np.ndarray, out_host: np.ndarray, edges: str = "auto") -> cg.Graph:
    """``out = 2x + x^2 (x + 1)``: written one operation after another, the edges left to the data."""
    n = x_host.size
    nn, grid = np.int32(n), (n + BLOCK - 1) // BLOCK
    g = cg.Graph("auto pipeline", edges=edges)
    x, y1, y2, y3, t, out = (g.param(name) for name in ("x", "y1", "y2", "y3", "t", "out"))
    g.memcpy(x, x_host, x_host.nbytes, name="x to device")  # copies declare themselves
    g.kernel(k["axpb"], grid, BLOCK, (cg.Out(y1), cg.In(x), np.float32(2), np.float32(0), nn), name="y1 = 2x")
    g.kernel(k["mul"], grid, BLOCK, (cg.Out(y2), cg.In(x), cg.In(x), nn), name="y2 = x*x")
    g.kernel(k["axpb"], grid, BLOCK, (cg.Out(y3), cg.In(x), np.float32(1), np.float32(1), nn), name="y3 = x+1")
    g.kernel(k["mul"], grid, BLOCK, (cg.Out(t), cg.In(y2), cg.In(y3), nn), name="t = y2*y3")
    g.kernel(k["add"], grid, BLOCK, (cg.Out(out), cg.In(y1), cg.In(t), nn), name="out = y1+t")
    g.memcpy(out_host, out, out_host.nbytes, name="out to host")
    return g


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=1 << 16, help="elements (default 65536)")
    ap.add_argument("--launches", type=int, default=3, help="launches, each with new input (default 3)")
    args = ap.parse_args(argv)
    try:
        from cuda.core import Device, Program, ProgramOptions

        dev = Device(0)
        dev.set_current()
        stream = dev.create_stream()
    except Exception as exc:  # no cuda.core, no driver library, no device
        return needs_gpu(exc)
    code = Program(KERNELS, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
    kernels = {name: code.get_kernel(name) for name in ("axpb", "mul", "add")}
    n = args.n
    x_host, out_host = np.zeros(n, np.float32), np.zeros(n, np.float32)
    g = build(kernels, x_host, out_host)
    print(g.summary())
    widths = [len(n.predecessors) for n in g.nodes]
    print(f"edges from data: {g.num_edges} edges; fan-in per node {widths}; races: {len(g.races())}")

    # One edge the data needs, removed by hand: validate(races=True) names the pair.
    hand = build(kernels, x_host, out_host, edges="manual")
    for node in g.nodes:
        for p in node.predecessors:
            hand.add_edge(hand.nodes[p.index], hand.nodes[node.index])
    last = hand.nodes[-2]  # out = y1 + t
    hand.remove_edge(last.predecessors[0], last)
    try:
        hand.validate(races=True)
        refused = False
    except cg.errors.RaceError as exc:
        refused = True
        print(f"one edge removed: {exc.races[0]}")

    bufs = {name: dev.allocate(4 * n, stream=stream) for name in ("x", "y1", "y2", "y3", "t", "out")}
    rng = np.random.default_rng(0)
    worst = 0.0
    try:
        exe = g.instantiate(**bufs)
    except cg.errors.DriverUnavailableError as exc:
        return needs_gpu(exc)
    with exe:
        for _ in range(args.launches):
            x_host[:] = rng.standard_normal(n, dtype=np.float32)
            exe.launch(stream)
            stream.sync()
            expected = np.float32(2) * x_host + (x_host * x_host) * (x_host + np.float32(1))
            worst = max(worst, float(np.max(np.abs(out_host - expected) / (1 + np.abs(expected)))))
    for b in bufs.values():
        b.close(stream)
    stream.sync()
    ok = worst < 1e-6 and refused and g.races() == []
    print(f"{args.launches} launches of {n}: max relative error against numpy {worst:.2e}")
    print("auto_edges: results match numpy" if ok else "auto_edges: RESULTS DIFFER FROM NUMPY")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
