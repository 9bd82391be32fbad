"""Lifting a driver graph back into a definition, on the CPU, against a fake driver (no GPU needed).

``bench/fake_driver/fake_libcuda.c`` is built into a ``libcuda.so.1`` that ``cuda.bindings`` loads instead
of the driver, with its graphs recorded (``fake_record_graphs``): the nodes that a graph's lowering adds
are kept with their types, dependencies, kernel parameters and argument bytes, and read back by
``cudagraph.lift`` through the same entry points as on a GPU (``cuGraphGetNodes``, ``cuGraphNodeGetDependencies_v2``,
``cuGraphNodeGetType``, ``cuGraphKernelNodeGetParams_v2``). Each of those returns at once here, so the
figures are cudagraph's own work: what ``bench/materializers.py`` measures on a GPU less the driver's reads.

Printed, µs per node (fastest and median of the repeats), for user-style chains (three kernels, a
Buffer and numpy scalars per node, every fourth node after two): define + lower, ``cg.lift`` of the
lowered graph, and define + lower of a chain of one kernel with one shared argument tuple (what
``bench/materializers.py`` compares a lift with), with the ratio of the lift to that against the target
of ``bench/materializers.py`` (lifting at most 2x explicit construction).

Run from the repository root: ``python bench/lift_cpu.py [--nodes 2000 10000] [--repeats 7]`` (with
``CUDAGRAPH_NO_C_ENTRY=1`` for the Python paths). Needs a C compiler.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import sys
import time
from typing import Any

from _common import fmt, relaunch_under_fake_driver, verdict

#: bench/materializers.py's target: lifting costs at most this many times explicit construction per node.
TARGET = 2.0
KERNELS = ("inc", "dec", "mul")


def define(cg: Any, kernels: list[Any], buf: Any, n: int) -> Any:
    """A user-style chain of ``n`` kernels: fresh argument tuples, every fourth node after the two before it."""
    import numpy as np

    g = cg.Graph("user")
    prev = prev2 = None
    for i in range(n):
        after = [prev, prev2] if i % 4 == 3 else prev
        node = g.kernel(kernels[i % 3], 64, 256, (buf, np.float32(1.0), np.int32(1024)), after=after)
        prev2, prev = prev, node
    return g


def define_shared(cg: Any, kernel: Any, args: tuple[Any, ...], n: int) -> Any:
    """A chain of ``n`` launches of one kernel with one shared argument tuple (``bench/materializers.py``'s)."""
    g = cg.Graph("chain")
    prev = None
    for _ in range(n):
        prev = g.kernel(kernel, 1, 32, args, after=prev)
    return g


def measure(cg: Any, kernels: list[Any], buf: Any, n: int, repeats: int) -> dict[str, list[float]]:
    """µs per node of define + lower, of lifting the lowered graph, and of define + lower with one shared
    argument tuple; one sample of each per repeat (a warm-up first)."""
    import numpy as np

    from cudagraph.materialize.explicit import lower

    shared = (buf, np.float32(1.0), np.int32(32))
    out: dict[str, list[float]] = {"define + lower": [], "lift": [], "shared": []}
    for rep in range(repeats + 1):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            g = define(cg, kernels, buf, n)
            lowered = lower(g, {}, [])
            t1 = time.perf_counter()
            lifted = cg.lift(lowered.handle)
            t2 = time.perf_counter()
            lower(define_shared(cg, kernels[0], shared, n), {}, []).destroy()
            t3 = time.perf_counter()
        finally:
            gc.enable()
        # every node and the edges the driver graph holds (lowering leaves out the implied ones)
        if len(lifted) != n or lifted.num_edges != n - 1:
            raise RuntimeError(f"lifted {len(lifted)} nodes and {lifted.num_edges} edges, expected {n} and {n - 1}")
        lowered.destroy()
        if rep:
            out["define + lower"].append((t1 - t0) / n * 1e6)
            out["lift"].append((t2 - t1) / n * 1e6)
            out["shared"].append((t3 - t2) / n * 1e6)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[2000, 10000])
    ap.add_argument("--repeats", type=int, default=7)
    opts = ap.parse_args()
    if not os.environ.get("CUDAGRAPH_FAKE_DRIVER"):
        relaunch_under_fake_driver()

    from cuda.core import Device, ObjectCode

    import cudagraph as cg
    from cudagraph.driver.c_entry import NATIVE

    ctypes.CDLL("libcuda.so.1").fake_record_graphs(1)
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    kernels = [ObjectCode.from_cubin(b"\0" * 64).get_kernel(name) for name in KERNELS]  # the fake takes any image
    buf = dev.allocate(4096, stream=stream)
    print(f"python {sys.version.split()[0]}, compiled module: {NATIVE is not None}; fake driver (recorded graphs)")
    print(f"{opts.repeats} repeats + 1 warm-up; µs per node, fastest (median)\n")
    print("| N | define + lower | lift | define + lower, one shared tuple | lift / (define + lower, shared) |")
    print("|---:|---:|---:|---:|---:|")
    worst = 0.0
    for n in opts.nodes:
        got = measure(cg, kernels, buf, n, opts.repeats)
        best = {k: min(v) for k, v in got.items()}
        ratio = best["lift"] / best["shared"]
        worst = max(worst, ratio)
        cells = [f"{fmt(best[k])} ({fmt(statistics.median(v))})" for k, v in got.items()]
        print(f"| {n} | {cells[0]} | {cells[1]} | {cells[2]} | {ratio:.2f}x |")
    met = verdict(worst <= TARGET)
    print(f"\nlift / explicit construction per node, largest: {worst:.2f}x (target <= {TARGET:g}x: {met})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
