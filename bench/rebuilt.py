"""A definition rebuilt every step as users write it, on a GPU: the paths that take it, per node.

Each step rebuilds a chain of 1000 kernels (three kernels, fresh argument tuples: a cuda.core ``Buffer``
and fresh numpy scalars; every hundredth node on another of 20 Buffers in turn) and gets it run: through
an ``ExecutableCache`` (the rebuilt definition compared with the executable's and the changed nodes
updated), through ``g.instantiate()`` + ``exe.close()``, and eagerly with ``g.run(stream)``. Three argument
styles: Buffers only; the graph's own pointer parameter ``x`` in the nodes that do not change; and a scalar
parameter ``a`` in every node too.

Printed, µs per node, fastest (median) of the steps. ``bench/cache_cpu.py`` times the cache the same way
on a CPU against a fake driver; ``bench/updates.py`` times it with argument tuples made before the steps.

Run from the repository root: ``PYTHONPATH=src python3 bench/rebuilt.py [--nodes 1000] [--steps 15]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from typing import Any

from _common import fmt
from _user_style import KERNEL_NAMES, KERNELS_SOURCE

#: Buffers the changing nodes take in turn (one node in a hundred changes each step).
BUFFERS = 20
STYLES = (("Buffers", False, False), ("a pointer Param", True, False), ("+ a scalar Param", True, True))


def define(cg: Any, kernels: list[Any], bufs: list[Any], n: int, step: int, param: bool, scalar: bool) -> Any:
    """A chain of ``n`` kernels written as users write it: fresh argument tuples and numpy scalars, every
    hundredth node on the Buffer of step ``step``; with ``param`` the other nodes take the graph's own pointer
    parameter ``x``, and with ``scalar`` every node the scalar parameter ``a`` (else a fresh numpy scalar)."""
    import numpy as np

    g = cg.Graph("step")
    x = g.param("x") if param else bufs[0]
    a = g.param("a", np.float32) if scalar else None
    prev = None
    for i in range(n):
        buf = bufs[(i + step) % BUFFERS] if i % 100 == 0 else x
        value = a if scalar else np.float32(1.0)
        prev = g.kernel(kernels[i % 3], 64, 256, (buf, value, np.int32(1024)), after=prev)
    return g


def rebuild_steps(
    cg: Any,
    kernels: list[Any],
    bufs: list[Any],
    n: int,
    steps: int,
    param: bool,
    scalar: bool,
    bind: dict[str, Any],
    stream: Any = None,
) -> tuple[dict[str, list[float]], int]:
    """µs per node of each rebuild step (``define``, ``cache``: ``cache.get(g)``, ``instantiate``: instantiate +
    close, and with a ``stream`` ``run``: ``g.run(stream)``), one sample a step after a first definition cached,
    and the driver updates the cache made in those steps."""
    cache = cg.ExecutableCache()
    first = calls = cache.get(define(cg, kernels, bufs, n, 0, param, scalar), **bind).update_calls
    times: dict[str, list[float]] = {"define": [], "cache": [], "instantiate": []}
    if stream is not None:
        times["run"] = []
    for step in range(1, steps + 1):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            g = define(cg, kernels, bufs, n, step, param, scalar)
            t1 = time.perf_counter()
            calls = cache.get(g, **bind).update_calls
            t2 = time.perf_counter()
            g.instantiate(**bind).close()
            t3 = time.perf_counter()
            dts = [t1 - t0, t2 - t1, t3 - t2]
            if stream is not None:
                stream.sync()
                t4 = time.perf_counter()
                g.run(stream, **bind)
                dts.append(time.perf_counter() - t4)
                stream.sync()
        finally:
            gc.enable()
        for column, dt in zip(times.values(), dts):
            column.append(dt / n * 1e6)
    return times, calls - first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=15)
    opts = ap.parse_args()
    import numpy as np
    from cuda.core import Device, Program, ProgramOptions

    import cudagraph as cg

    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    obj = Program(KERNELS_SOURCE, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
    kernels = [obj.get_kernel(name) for name in KERNEL_NAMES]
    bufs = [dev.allocate(1 << 20, stream=stream) for _ in range(BUFFERS)]
    n = opts.nodes
    print(f"{dev.name}; a {n}-kernel chain rebuilt {opts.steps} times; µs per node, fastest (median)\n")
    print("| arguments | define | cache.get(g) | g.instantiate() + exe.close() | g.run(stream) |")
    print("|---|---:|---:|---:|---:|")
    for label, param, scalar in STYLES:
        bind: dict[str, Any] = {}
        if param:
            bind["x"] = bufs[0]
        if scalar:
            bind["a"] = np.float32(2.0)
        times, _ = rebuild_steps(cg, kernels, bufs, n, opts.steps, param, scalar, bind, stream)
        cells = [f"{fmt(min(v))} ({fmt(statistics.median(v))})" for v in times.values()]
        print(f"| {label} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
