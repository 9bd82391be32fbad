"""Building a large graph beside a busy Python thread: the build's time, and the longest the thread waits.

A user-style chain (``bench/_user_style.py``: a fresh argument tuple per node holding a Buffer and numpy
scalars, three kernels, every fourth node after its two predecessors) of ``--nodes`` kernels (default
100,000) is defined, then built with ``g.instantiate()`` (validation, lowering through the compiled adding
loop, ``cuGraphInstantiate``) and closed: alone, and beside another thread that runs Python the whole time
and records the time at each of its turns. Printed per size: the build's ms alone and beside the thread
(median of ``--repeats``, the two taking turns), their ratio, and the longest the thread went without a turn
during the build (the longest of the repeats). The compiled loops offer the GIL once they have held it twice
the switch interval (10 ms by default), as the interpreter does between bytecodes: a build shorter than that
never offers it (the thread waits for the whole build, as it would for any C call), a longer one keeps the
thread's wait near twice the interval and costs up to about twice its time beside it. No target: the
figures show the trade.

``--cpu`` runs over the driver of ``bench/_fake_driver.py``, which does nothing (no GPU needed).

Run: ``PYTHONPATH=src python3 bench/build_beside_thread.py [--nodes 1000,100000] [--repeats 3] [--cpu]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from itertools import pairwise
from typing import Any

from _common import busy_python_thread, fmt, import_cudagraph

GRID, BLOCK, NELEM = 4, 256, 1024


def longest_wait(stamps: Sequence[float], t0: float, t1: float) -> float:
    """The longest time in ``[t0, t1]`` between two turns of the thread that made ``stamps`` (its ends count)."""
    inside = [t0, *(s for s in stamps if t0 <= s <= t1), t1]
    return max(b - a for a, b in pairwise(inside))


def timed_build(build: Callable[[], Any], beside: bool) -> tuple[float, float | None]:
    """Seconds of ``build()`` (the collector off), and with ``beside`` the thread's longest wait in it."""
    gc.collect()
    gc.disable()
    try:
        if not beside:
            t0 = time.perf_counter()
            build()
            return time.perf_counter() - t0, None
        stamps: list[float] = []
        with busy_python_thread(stamps):
            t0 = time.perf_counter()
            build()
            t1 = time.perf_counter()
        return t1 - t0, longest_wait(stamps, t0, t1)
    finally:
        gc.enable()


def rows(define: Callable[[int], Any], sizes: Sequence[int], repeats: int) -> list[tuple[int, float, float, float]]:
    """Per size: (nodes, ms alone, ms beside the thread, the thread's longest wait in ms)."""
    out = []
    for n in sizes:
        alone: list[float] = []
        beside: list[float] = []
        waits: list[float] = []
        for _ in range(repeats):
            for busy in (False, True):
                g = define(n)
                took, wait = timed_build(lambda g=g: g.instantiate().close(), busy)
                (beside if busy else alone).append(took)
                if wait is not None:
                    waits.append(wait)
                del g
        out.append((n, statistics.median(alone) * 1e3, statistics.median(beside) * 1e3, max(waits) * 1e3))
    return out


def table(measured: Sequence[tuple[int, float, float, float]]) -> str:
    """The printed table of :func:`rows`."""
    head = "| nodes | g.instantiate() + close() alone ms | beside a busy Python thread ms | ratio |"
    lines = [head + " the thread's longest wait ms |", "|---:|---:|---:|---:|---:|"]
    for n, alone, beside, wait in measured:
        lines.append(f"| {n} | {fmt(alone, 2)} | {fmt(beside, 2)} | {fmt(beside / alone, 2)}x | {fmt(wait, 2)} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="1000,100000", help="comma-separated chain lengths")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpu", action="store_true", help="over bench/_fake_driver.py's driver (no GPU)")
    opts = ap.parse_args()
    sizes = [int(s) for s in opts.nodes.split(",")]
    import_cudagraph()
    import _user_style as user
    import cudagraph as cg

    where = "fake driver (bench/_fake_driver.py)" if opts.cpu else "the GPU"
    interval = sys.getswitchinterval() * 1e3
    print(f"Python {sys.version.split()[0]}; switch interval {interval:.1f} ms; {where}; median of {opts.repeats}\n")
    if opts.cpu:
        import _fake_driver

        with _fake_driver.fake_driver() as fake:
            chain = partial(user.define_user, cg, fake.kernels, fake.buf, NELEM, "chain")
            print(table(rows(lambda n: chain(n, GRID, BLOCK), sizes, opts.repeats)))
        return 0
    from cuda.core import Device, Program, ProgramOptions

    dev = Device(0)
    dev.set_current()
    code = Program(user.KERNELS_SOURCE, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
    kernels = tuple(code.get_kernel(name) for name in user.KERNEL_NAMES)
    stream = dev.create_stream()
    buf = dev.allocate(4 * NELEM, stream=stream)
    stream.sync()
    chain = partial(user.define_user, cg, kernels, buf, NELEM, "chain")
    print(table(rows(lambda n: chain(n, GRID, BLOCK), sizes, opts.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
