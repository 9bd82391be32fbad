"""Launch cost on a stream: ``cudagraph.launch`` vs ``cuda.core.launch``, same kernel, same process.

What is measured: one tiny kernel ``inc(float* x, float a, int n)`` compiled once with NVRTC, launched
with grid 1, block 32 on one stream, ``--launches`` calls per repeat (the stream synchronized every 200
launches, outside the timing), peers interleaved within each repeat; µs per launch, the median of the
repeats. Three argument forms: a cuda.core ``Buffer``, an int address, and (for cudagraph) the same
``LaunchConfig`` object vs a ``(grid, block)`` tuple; where torch with CUDA is importable, a torch tensor
passed as it is to cudagraph and as ``t.data_ptr()`` to cuda.core. The target: cudagraph at most 1.1x cuda.core.

Then ``Graph.run`` of a definition of a 100-kernel chain (the same kernel and arguments) against the
same 100 launches in a ``cuda.core.launch`` loop, µs per kernel. The target: at most 1.0x.

Run: ``python bench/launch_targets.py [--launches 20000] [--repeats 7] [--chain 100]``.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--chain", type=int, default=100, help="kernels in the Graph.run chain")
    opts = ap.parse_args()

    import_cudagraph()
    import cuda.core as core
    from cuda.bindings import driver
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions

    import cudagraph as cg

    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    kernel = Program(SOURCE, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin").get_kernel("inc")
    buf = dev.allocate(4 * 32, stream=stream)
    stream.sync()
    addr = int(buf.handle)
    cfg = LaunchConfig(grid=1, block=32)
    a, n = np.float32(1.0), np.int32(32)

    env: Any = type("Env", (), {"driver": driver, "dev": dev})
    for k, v in versions(env).items():
        print(f"{k:>26}: {v}")

    peers = {
        "cuda.core.launch (Buffer)": lambda: core.launch(stream, cfg, kernel, buf, a, n),
        "cudagraph.launch (Buffer)": lambda: cg.launch(stream, cfg, kernel, buf, a, n),
        "cuda.core.launch (int ptr)": lambda: core.launch(stream, cfg, kernel, addr, a, n),
        "cudagraph.launch (int ptr)": lambda: cg.launch(stream, cfg, kernel, addr, a, n),
        "cudagraph.launch ((grid, block))": lambda: cg.launch(stream, (1, 32), kernel, addr, a, n),
    }
    tensor = torch_tensor(dev)
    if tensor is not None:  # as PyTorch users write it: the tensor itself, or its data_ptr() for cuda.core
        peers["cuda.core.launch (t.data_ptr())"] = lambda: core.launch(stream, cfg, kernel, tensor.data_ptr(), a, n)
        peers["cudagraph.launch (torch tensor)"] = lambda: cg.launch(stream, cfg, kernel, tensor, a, n)
    for fn in peers.values():  # warm up: caches, lazy loading
        for _ in range(100):
            fn()
    stream.sync()

    samples: dict[str, list[float]] = {name: [] for name in peers}
    for _ in range(opts.repeats):
        for name, fn in peers.items():
            total = 0.0
            with no_gc():
                done = 0
                while done < opts.launches:
                    chunk = min(200, opts.launches - done)
                    t0 = time.perf_counter()
                    for _ in range(chunk):
                        fn()
                    total += time.perf_counter() - t0
                    stream.sync()
                    done += chunk
            samples[name].append(total / opts.launches * 1e6)

    med = {name: statistics.median(v) for name, v in samples.items()}
    print(f"\n{'launch':<34} {'µs/launch':>10} {'min':>8}")
    for name, v in samples.items():
        print(f"{name:<34} {fmt(med[name]):>10} {fmt(min(v)):>8}")
    print()
    for form in ("Buffer", "int ptr"):
        ratio = med[f"cudagraph.launch ({form})"] / med[f"cuda.core.launch ({form})"]
        print(f"ratio cudagraph/cuda.core ({form}): {ratio:.3f}  target <= 1.10: {verdict(ratio <= 1.10)}")
    tup = med["cudagraph.launch ((grid, block))"] / med["cuda.core.launch (int ptr)"]
    print(f"ratio cudagraph (grid, block) tuple / cuda.core (int ptr): {tup:.3f}")
    if tensor is not None:
        ratio = med["cudagraph.launch (torch tensor)"] / med["cuda.core.launch (t.data_ptr())"]
        print(f"ratio cudagraph (torch tensor) / cuda.core (t.data_ptr()): {ratio:.3f}")
    else:
        print("torch with CUDA is not importable: the torch tensor rows are left out")

    # Graph.run of a chain vs the same launches in a cuda.core.launch loop.
    kargs = (buf, a, n)
    g = cg.Graph("chain")
    prev = None
    for _ in range(opts.chain):
        prev = g.kernel(kernel, 1, 32, kargs, after=prev)

    def loop() -> None:
        for _ in range(opts.chain):
            core.launch(stream, cfg, kernel, *kargs)

    runs = {"cuda.core.launch loop": loop, "Graph.run": lambda: g.run(stream)}
    for fn in runs.values():
        for _ in range(20):
            fn()
    stream.sync()
    per_kernel: dict[str, list[float]] = {name: [] for name in runs}
    rounds = max(1, opts.launches // opts.chain // 10)
    for _ in range(opts.repeats):
        for name, fn in runs.items():
            total = 0.0
            with no_gc():
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    fn()
                    total += time.perf_counter() - t0
                    stream.sync()
            per_kernel[name].append(total / (rounds * opts.chain) * 1e6)
    run_med = {name: statistics.median(v) for name, v in per_kernel.items()}
    print(f"\n{f'{opts.chain}-kernel chain':<34} {'µs/kernel':>10} {'min':>8}")
    for name, v in per_kernel.items():
        print(f"{name:<34} {fmt(run_med[name]):>10} {fmt(min(v)):>8}")
    ratio = run_med["Graph.run"] / run_med["cuda.core.launch loop"]
    print(f"ratio Graph.run / cuda.core.launch loop: {ratio:.3f}  target <= 1.00: {verdict(ratio <= 1.0)}")


def torch_tensor(dev: Any) -> Any:
    """A CUDA torch tensor of 32 floats on ``dev``, or ``None`` where torch (with CUDA) is not importable."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    t = torch.zeros(32, device=f"cuda:{dev.device_id}")
    torch.cuda.synchronize()
    return t


if __name__ == "__main__":
    main()
