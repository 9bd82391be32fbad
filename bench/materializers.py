"""One definition, several ways to build: explicit vs capture, and lifting a captured graph.

Measured in one process on one GPU with a tiny kernel ``inc(float* x, float a, int n)``:

- build + instantiate the same definitions (a chain and a fan-out/fan-in of
  N kernels) with ``g.instantiate(backend="explicit")`` and
  ``g.instantiate(backend="capture")``; for the chain, also cuda.core's capture
  of the same launches into a ``GraphBuilder`` and ``complete()`` (its
  instantiation). Target: the capture backend at most 1.1x cuda.core capture +
  complete per node;
- lifting: a 10,000-kernel chain captured with cuda.core's GraphBuilder is
  read back with ``cudagraph.lift``; µs per node, compared with explicit
  construction (define + lower) of the same chain. Target: lifting costs at
  most 2x explicit construction per node. Also the lift's cost per node of
  chains of 1,000 and 30,000 kernels (it reads each node's dependencies: the
  driver's whole-graph edge query takes time quadratic in the graph's size);
- beside a busy Python thread (another thread running Python the whole time,
  as a data-loading or logging thread may): the same three builds of a
  200-kernel chain, and its eager run (``g.run(s)``, and the same launches
  in a ``cuda.core.launch`` loop), alone and beside it. A build or run that
  releases the GIL at every driver call hands it to that thread for its whole
  switch interval (``sys.getswitchinterval()``, 5 ms) each time; ``g.run``
  releases it once per batch of up to 64 launches.

Run from the repository root::

    PYTHONPATH=src python3 bench/materializers.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import busy_python_thread

KERNEL_SOURCE = r"""
extern "C" __global__ void inc(float* x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += a;
}
"""


def _timed(fn: Callable[[], Any], repeats: int) -> float:
    """Median seconds of ``fn`` over ``repeats`` runs after one warm-up (gc off while timing)."""
    fn()
    samples = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        finally:
            gc.enable()
    return statistics.median(samples)


BUSY_NODES = 200
#: Chains lifted to show the lift's cost per node by size.
LIFT_SIZES = (1000, 30000)


def beside_busy_thread(builds: dict[str, Callable[[Any], None]], g: Any, repeats: int) -> dict[str, float]:
    """Each build of ``g`` alone (median of ``repeats``) and beside a thread running Python (one run); prints
    the table and returns the milliseconds by ``"<name> alone"`` / ``"<name> busy"``."""
    out: dict[str, float] = {}
    for name, build in builds.items():
        out[f"{name} alone"] = _timed(lambda build=build: build(g), repeats) * 1e3
    with busy_python_thread():
        for name, build in builds.items():
            t0 = time.perf_counter()
            build(g)
            out[f"{name} busy"] = (time.perf_counter() - t0) * 1e3
    print(f"| build (or eager run) of a {len(g)}-kernel chain | alone ms | beside a busy Python thread ms | ratio |")
    print("|---|---|---|---|")
    for name in builds:
        alone, busy = out[f"{name} alone"], out[f"{name} busy"]
        print(f"| {name} | {alone:.2f} | {busy:.2f} | {busy / alone:.1f}x |")
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N = 1000 only, 3 repeats (lifting stays at 10000)")
    ap.add_argument("--json", metavar="PATH", help="also write every number to PATH")
    args = ap.parse_args(argv)
    results: dict[str, float] = {}
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

    import numpy as np
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

    import cudagraph as cg
    from cudagraph.materialize.explicit import lower

    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    k = Program(KERNEL_SOURCE, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin").get_kernel("inc")
    buf = dev.allocate(128, stream=s)
    s.sync()
    kargs = (buf, np.float32(1.0), np.int32(32))
    repeats = 3 if args.quick else 5
    sizes = [1000] if args.quick else [1000, 10000]

    def chain(n: int) -> cg.Graph:
        g = cg.Graph("chain")
        prev = None
        for _ in range(n):
            prev = g.kernel(k, 1, 32, kargs, after=prev)
        return g

    def fan(n: int) -> cg.Graph:
        g = cg.Graph("fan")
        root = g.empty()
        g.join([g.kernel(k, 1, 32, kargs, after=root) for _ in range(n)])
        return g

    print(f"cudagraph {cg.__version__}, GPU {dev.name}")
    print()
    cfg = LaunchConfig(grid=1, block=32)

    def core_loop(n: int) -> None:
        for _ in range(n):
            launch(s, cfg, k, *kargs)

    def captured(n: int) -> Any:
        """A GraphBuilder holding ``n`` launches, captured by cuda.core (building ended)."""
        builder = dev.create_graph_builder()
        builder.begin_building()
        for _ in range(n):
            launch(builder, cfg, k, *kargs)
        builder.end_building()
        return builder

    def core_capture(n: int) -> None:
        builder = captured(n)
        builder.complete().close()
        builder.close()

    print(
        "| shape | N | explicit build+instantiate µs/node | capture build+instantiate µs/node | capture/explicit "
        "| cuda.core capture+complete µs/node | capture/cuda.core |"
    )
    print("|---|---|---|---|---|---|---|")
    verdicts = []
    for shape, make in (("chain", chain), ("fan", fan)):
        for n in sizes:
            g = make(n)
            times = {}
            for backend in ("explicit", "capture"):

                def run(backend: str = backend, g: cg.Graph = g) -> None:
                    g.instantiate(backend=backend).close()

                times[backend] = _timed(run, repeats) / len(g) * 1e6
            ratio = times["capture"] / times["explicit"]
            results[f"{shape}_{n}_explicit_us_per_node"] = times["explicit"]
            results[f"{shape}_{n}_capture_us_per_node"] = times["capture"]
            core = vs_core = "n/a"
            if shape == "chain":  # (a fan-out under cuda.core capture needs a forked stream per kernel)
                t_core = _timed(lambda n=n: core_capture(n), repeats) / n * 1e6
                results[f"chain_{n}_cuda_core_capture_us_per_node"] = t_core
                results[f"chain_{n}_capture_over_cuda_core"] = times["capture"] / t_core
                core, vs_core = f"{t_core:.2f}", f"{times['capture'] / t_core:.2f}"
                verdicts.append((n, times["capture"] / t_core))
            built = f"{times['explicit']:.2f} | {times['capture']:.2f} | {ratio:.2f}"
            print(f"| {shape} | {n} | {built} | {core} | {vs_core} |")
    for n, r in verdicts:
        print(
            f"capture backend / cuda.core capture+complete, {n}-kernel chain: {r:.2f}x "
            f"(target <= 1.1x: {'PASS' if r <= 1.1 else 'MISS'})"
        )

    print()

    n = 10000
    gb = captured(n)

    def explicit_build() -> None:
        lower(chain(n), {}, []).destroy()

    t_lift = _timed(lambda: cg.lift(gb), repeats) / n * 1e6
    t_explicit = _timed(explicit_build, repeats) / n * 1e6
    lifted = cg.lift(gb)
    assert len(lifted) == n and all(x.kind == "kernel" for x in lifted.nodes)
    ratio = t_lift / t_explicit
    print(f"| lift a captured {n}-kernel chain | {t_lift:.2f} µs/node |")
    print(f"| explicit define + lower of the same chain | {t_explicit:.2f} µs/node |")
    verdict = "PASS" if ratio <= 2.0 else "MISS"
    results.update(lift_us_per_node=t_lift, explicit_us_per_node=t_explicit, lift_over_explicit=ratio)
    print(f"lift / explicit construction per node: {ratio:.2f}x (target <= 2x: {verdict})")
    # Lifting stays linear in the graph's size (the driver's cuGraphGetEdges_v2 does not: 0.05 µs a node at
    # 1,000 nodes, 2.5 at 30,000; the edges are read node by node).
    per_n = {}
    for size in LIFT_SIZES:
        big = captured(size)
        per_n[size] = _timed(lambda big=big: cg.lift(big), repeats) / size * 1e6
        big.close()
    cells = ", ".join(f"N = {size}: {us:.2f}" for size, us in per_n.items())
    scale = per_n[LIFT_SIZES[-1]] / per_n[LIFT_SIZES[0]]
    results.update({f"lift_{size}_us_per_node": us for size, us in per_n.items()})
    print(f"lift µs/node by size: {cells}; N = {LIFT_SIZES[-1]} / N = {LIFT_SIZES[0]}: {scale:.2f}x")

    print()
    busy = beside_busy_thread(
        {
            "cudagraph explicit (g.instantiate())": lambda g: g.instantiate(backend="explicit").close(),
            "cudagraph capture backend": lambda g: g.instantiate(backend="capture").close(),
            "cuda.core capture + complete()": lambda g: core_capture(len(g)),
            "cudagraph eager g.run(s) + sync": lambda g: (g.run(s), s.sync()),
            "cuda.core.launch loop + sync": lambda g: (core_loop(len(g)), s.sync()),
        },
        chain(BUSY_NODES),
        repeats,
    )
    results.update({f"busy_{k}": v for k, v in busy.items()})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    gb.close()
    buf.close(s)
    s.sync()
    return 0


if __name__ == "__main__":
    sys.exit(main())
