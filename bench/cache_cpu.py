"""``ExecutableCache`` on a definition rebuilt every step as users write it, on the CPU against a fake driver.

``bench/fake_driver/fake_libcuda.c`` is built into a ``libcuda.so.1`` that ``cuda.bindings`` loads instead
of the driver (no GPU needed; every driver call returns at once), so the figures are cudagraph's own work.
Each step rebuilds a chain of kernels with fresh argument tuples (a cuda.core ``Buffer``, or the graph's own
parameter, and fresh numpy scalars), every hundredth node on another of 20 Buffers in turn, and asks the
cache for its executable:
the cache compares the rebuilt definition with the executable's (topology signature, then node by
node) and updates the nodes that changed. Beside it, getting the executable without the cache
(``g.instantiate()`` and ``exe.close()``), and the definition itself.

Printed, µs per node (fastest and median of the steps): define, ``cache.get(g)``, instantiate + close
(whose ``cuGraphInstantiate`` costs nothing here: on a GPU it is most of it), and their ratio.
``bench/updates.py`` measures the cache on a GPU with argument tuples made before the steps.

Run from the repository root: ``python bench/cache_cpu.py [--nodes 1000] [--steps 40]`` (with
``CUDAGRAPH_NO_C_ENTRY=1`` for the Python paths). Needs a C compiler.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from _common import fmt, relaunch_under_fake_driver
from rebuilt import BUFFERS, rebuild_steps  # the GPU script's chain, rebuilt and timed the same way

KERNELS = ("inc", "dec", "mul")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=40)
    opts = ap.parse_args()
    if not os.environ.get("CUDAGRAPH_FAKE_DRIVER"):
        relaunch_under_fake_driver()

    from cuda.core import Device, ObjectCode

    import cudagraph as cg
    from cudagraph.driver.c_entry import NATIVE

    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    kernels = [ObjectCode.from_cubin(b"\0" * 64).get_kernel(name) for name in KERNELS]  # the fake takes any image
    bufs = [dev.allocate(4096, stream=stream) for _ in range(BUFFERS)]
    n = opts.nodes
    print(f"python {sys.version.split()[0]}, compiled module: {NATIVE is not None}; fake driver")
    print(f"a {n}-node chain rebuilt {opts.steps} times; µs per node, fastest (median)\n")
    print("| pointers | define | cache.get(g) | g.instantiate() + exe.close() | cache.get / (instantiate + close) |")
    print("|---|---:|---:|---:|---:|")
    updated: dict[str, int] = {}
    for label, param in (("Buffers", False), ("a Param", True)):
        bind = {"x": bufs[0]} if param else {}
        times, updated[label] = rebuild_steps(cg, kernels, bufs, n, opts.steps, param, False, bind)
        cells = [f"{fmt(min(v))} ({fmt(statistics.median(v))})" for v in times.values()]
        ratio = min(times["cache"]) / min(times["instantiate"])
        print(f"| {label} | {' | '.join(cells)} | {ratio:.2f}x |")
    print("\n(the fake driver's cuGraphInstantiate costs nothing; on a GPU it is most of instantiate + close)")
    for label, count in updated.items():
        print(f"driver updates made by the cache ({label}): {count} in {opts.steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
