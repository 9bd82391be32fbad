"""Build cost per node: ``cudagraph.compat`` vs ``cuda.core``, both halves of the graph API, same programs.

What is measured (one process, one GPU, one tiny kernel ``inc(float* x, float a, int n)`` compiled once
with NVRTC), each program written once and run against both APIs:

- **GraphDefinition**: a chain of ``--nodes`` kernel nodes built with the fluent API
  ``node = node.launch(cfg, kernel, buf, a, n)``;

  - *build*: the chain of calls (cuda.core adds each node to a driver graph as it goes; compat records
    a cudagraph definition);
  - *+instantiate*: the same, then ``instantiate()`` (for compat this is where the driver graph is
    made, explicitly, with the compiled kernel loop);
  - *+launch*: plus one launch and a stream synchronization.

- **GraphBuilder**: a chain of ``--builder-nodes`` kernels put into
  ``Device().create_graph_builder()`` with ``launch(gb, cfg, kernel, buf, a, n)`` (cuda.core records
  them by stream capture; compat adds each as a node after the builder's last op, no capture);

  - *build*: ``begin_building()`` .. ``end_building()``;
  - *+complete*: the same, then ``complete()`` (cuda.core instantiates the captured graph; compat builds
    the driver graph explicitly, then instantiates it);
  - *+launch*: plus one launch and a stream synchronization.

µs per node, the median of ``--repeats`` repeats, peers interleaved. Targets: compat build at least 1.5x
faster per node than cuda.core's, for each half (the driver's instantiation is the same work for both,
so the columns that include it are printed for information).

Run: ``python bench/compat.py [--nodes 2000] [--builder-nodes 1000] [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from _common import fmt, import_cudagraph, no_gc, verdict, versions

SOURCE = r"""
extern "C" __global__ void inc(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += a;
}
"""


def build(GD: Any, cfg: Any, kernel: Any, buf: Any, nodes: int) -> Any:
    gd = GD()
    a, n = np.float32(1.0), np.int32(32)
    node = gd.launch(cfg, kernel, buf, a, n)
    for _ in range(nodes - 1):
        node = node.launch(cfg, kernel, buf, a, n)
    return gd


def build_builder(device: Any, launch: Any, cfg: Any, kernel: Any, buf: Any, nodes: int) -> Any:
    gb = device.create_graph_builder().begin_building()
    a, n = np.float32(1.0), np.int32(32)
    for _ in range(nodes):
        launch(gb, cfg, kernel, buf, a, n)
    return gb.end_building()


def table(title: str, columns: tuple[str, str, str], med: dict[str, tuple[float, ...]]) -> None:
    print(f"\n{title}")
    print(f"{'':<34} {columns[0]:>9} {columns[1]:>13} {columns[2]:>9}")
    for name, (b, bi, bil) in med.items():
        print(f"{name:<34} {fmt(b):>9} {fmt(bi):>13} {fmt(bil):>9}")


def medians(samples: dict[str, list[tuple[float, float, float]]], nodes: int) -> dict[str, tuple[float, ...]]:
    per = 1e6 / nodes
    return {name: tuple(statistics.median(s[i] for s in v) * per for i in range(3)) for name, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--builder-nodes", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=7)
    opts = ap.parse_args()

    import_cudagraph()
    from cuda.bindings import driver
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions
    from cuda.core import launch as core_launch
    from cuda.core.graph import GraphDefinition as CoreGD

    import cudagraph as cg

    OurGD = cg.compat.GraphDefinition
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    kernel = Program(SOURCE, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin").get_kernel("inc")
    buf = dev.allocate(4 * 32, stream=stream)
    stream.sync()
    cfg = LaunchConfig(grid=1, block=32)

    env: Any = type("Env", (), {"driver": driver, "dev": dev})
    for key, v in versions(env).items():
        print(f"{key:>26}: {v}")

    def phases(GD: Any) -> tuple[float, float, float]:
        t0 = time.perf_counter()
        gd = build(GD, cfg, kernel, buf, opts.nodes)
        t1 = time.perf_counter()
        exe = gd.instantiate()
        t2 = time.perf_counter()
        exe.launch(stream)
        stream.sync()
        t3 = time.perf_counter()
        close = getattr(exe, "close", None)
        if close is not None:
            close()
        return t1 - t0, t2 - t0, t3 - t0

    peers = {"cuda.core GraphDefinition": CoreGD, "cudagraph.compat GraphDefinition": OurGD}
    for GD in peers.values():  # warm up
        phases(GD)
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in peers}
    for _ in range(opts.repeats):
        for name, GD in peers.items():
            with no_gc():
                samples[name].append(phases(GD))

    def builder_phases(api: tuple[Any, Any]) -> tuple[float, float, float]:
        device, launch = api
        t0 = time.perf_counter()
        gb = build_builder(device, launch, cfg, kernel, buf, opts.builder_nodes)
        t1 = time.perf_counter()
        graph = gb.complete()
        t2 = time.perf_counter()
        graph.launch(stream)
        stream.sync()
        t3 = time.perf_counter()
        graph.close()
        gb.close()
        return t1 - t0, t2 - t0, t3 - t0

    builders = {
        "cuda.core GraphBuilder": (dev, core_launch),
        "cudagraph.compat GraphBuilder": (cg.compat.Device(), cg.compat.launch),
    }
    for api in builders.values():  # warm up
        builder_phases(api)
    bsamples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in builders}
    for _ in range(opts.repeats):
        for name, api in builders.items():
            with no_gc():
                bsamples[name].append(builder_phases(api))

    med = medians(samples, opts.nodes)
    table(
        f"GraphDefinition: chain of {opts.nodes} kernel nodes, µs per node (median of {opts.repeats})",
        ("build", "+instantiate", "+launch"),
        med,
    )
    core, ours = med["cuda.core GraphDefinition"], med["cudagraph.compat GraphDefinition"]
    speed = core[0] / ours[0]
    print(f"\nbuild speed-up compat vs cuda.core: {speed:.2f}x  target >= 1.5x: {verdict(speed >= 1.5)}")
    print(f"build+instantiate speed-up: {core[1] / ours[1]:.2f}x; build+instantiate+launch: {core[2] / ours[2]:.2f}x")

    bmed = medians(bsamples, opts.builder_nodes)
    table(
        f"GraphBuilder: chain of {opts.builder_nodes} kernels, µs per node (median of {opts.repeats})",
        ("build", "+complete", "+launch"),
        bmed,
    )
    core, ours = bmed["cuda.core GraphBuilder"], bmed["cudagraph.compat GraphBuilder"]
    speed = core[0] / ours[0]
    print(
        f"\nbuild (begin_building .. end_building) speed-up compat vs cuda.core: {speed:.2f}x  "
        f"target >= 1.5x: {verdict(speed >= 1.5)}"
    )
    print(f"build+complete speed-up: {core[1] / ours[1]:.2f}x; build+complete+launch: {core[2] / ours[2]:.2f}x")


if __name__ == "__main__":
    main()
