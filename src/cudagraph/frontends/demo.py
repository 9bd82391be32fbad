"""``python -m cudagraph demo``: build, check and time a small real graph."""

from __future__ import annotations

import argparse
import ctypes
import time
from importlib import resources
from typing import Any

import numpy as np

from ..definition.graph import Graph
from ..errors import DriverUnavailableError

__all__ = ["build_demo_graph", "main"]

KERNEL_NAMES = ("scale", "square", "offset", "combine")
_NEEDS_GPU = "Running the graph needs an NVIDIA GPU and driver"


def build_demo_graph(kernels: dict[str, Any], n: int, x_host: Any, out_host: Any) -> Graph:
    """The demo definition: copy in, a fan-out/fan-in DAG of kernels, a host callback, copy out.

    Device buffers are parameters (``x``, ``y1``, ``y2``, ``y3``, ``out``)
    bound at instantiation; ``out = 2 x + x**2 (x + 1)``.
    """
    g = Graph("demo")
    x, y1, y2, y3, out = (g.param(name) for name in ("x", "y1", "y2", "y3", "out"))
    nn = np.int32(n)
    grid, block = (n + 255) // 256, 256
    h2d = g.memcpy(x, x_host, 4 * n, name="x to device")
    zero = g.memset(out, 0, count=n, element_size=4, name="clear out")
    s = g.kernel(kernels["scale"], grid, block, (x, y1, np.float32(2.0), nn), after=h2d, name="scale")
    q = g.kernel(kernels["square"], grid, block, (x, y2, nn), after=h2d, name="square")
    o = g.kernel(kernels["offset"], grid, block, (x, y3, np.float32(1.0), nn), after=h2d, name="offset")
    c = g.kernel(kernels["combine"], grid, block, (y1, y2, y3, out, nn), after=[s, q, o, zero], name="combine")
    seen: list[str] = []
    h = g.host(seen.append, "combine finished", after=c, name="note")
    d2h = g.memcpy(out_host, out, 4 * n, after=c, name="out to host")
    g.join(h, d2h, name="done")
    return g


def _load_kernels() -> dict[str, Any]:
    from cuda.core import Device, ObjectCode, Program, ProgramOptions

    ptx = resources.files("cudagraph").joinpath("_kernels/demo.ptx").read_bytes()
    try:
        code = ObjectCode.from_ptx(ptx)
        return {name: code.get_kernel(name) for name in KERNEL_NAMES}
    except Exception:
        src = resources.files("cudagraph").joinpath("_kernels/demo.cu").read_text()
        arch = Device().arch
        code = Program(src, "c++", ProgramOptions(arch=f"sm_{arch}")).compile("cubin")
        return {name: code.get_kernel(name) for name in KERNEL_NAMES}


def _pinned_array(n: int) -> tuple[Any, np.ndarray]:
    from cuda.core import LegacyPinnedMemoryResource

    buf = LegacyPinnedMemoryResource().allocate(4 * n)
    arr = np.ctypeslib.as_array((ctypes.c_float * n).from_address(int(buf.handle)))
    return buf, arr


def _placeholder_kernels() -> dict[str, Any]:
    from cuda.bindings import driver

    return {name: driver.CUkernel(0) for name in KERNEL_NAMES}


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    ap = argparse.ArgumentParser(prog="python -m cudagraph demo", description=__doc__)
    ap.add_argument("-n", type=int, default=1 << 16, help="elements per buffer (default 65536)")
    ap.add_argument("--iterations", type=int, default=200, help="launches timed (default 200)")
    ap.add_argument("--dot", default="cudagraph-demo.dot", help="where to write the DOT picture")
    args = ap.parse_args(argv)
    n = args.n

    try:
        from cuda.core import Device

        dev = Device(0)
        dev.set_current()
        kernels = _load_kernels()
        stream = dev.create_stream()
    except Exception as exc:
        x_host = np.arange(n, dtype=np.float32)
        g = build_demo_graph(_placeholder_kernels(), n, x_host, np.empty_like(x_host))
        g.validate()
        print(g.summary())
        with open(args.dot, "w") as f:
            f.write(g.to_dot())
        print(f"wrote {args.dot}")
        print(f"{_NEEDS_GPU}; none is usable here ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}).")
        return 0

    keep_in, x_host = _pinned_array(n)
    keep_out, out_host = _pinned_array(n)
    rng = np.random.default_rng(0)
    x_host[:] = rng.standard_normal(n, dtype=np.float32)
    bufs = {name: dev.allocate(4 * n, stream=stream) for name in ("x", "y1", "y2", "y3", "out")}
    g = build_demo_graph(kernels, n, x_host, out_host)
    g.validate()
    print(g.summary())
    with open(args.dot, "w") as f:
        f.write(g.to_dot())
    print(f"wrote {args.dot}")

    try:
        exe = g.instantiate(**bufs)
    except DriverUnavailableError as exc:
        print(f"{_NEEDS_GPU}; none is usable here ({exc}).")
        return 0
    with exe:
        exe.launch(stream)
        stream.sync()
        x = x_host.astype(np.float64)
        expect = 2 * x + x * x * (x + 1)
        err = float(np.max(np.abs(out_host - expect) / (1 + np.abs(expect))))
        ok = err < 1e-5
        print(f"{'results match numpy' if ok else 'RESULTS DIFFER FROM NUMPY'} (max relative error {err:.2e})")

        iters = args.iterations
        for _ in range(10):
            exe.launch(stream)
            g.run(stream, **bufs)
        stream.sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            exe.launch(stream)
        stream.sync()
        t_graph = (time.perf_counter() - t0) / iters
        t0 = time.perf_counter()
        for _ in range(iters):
            g.run(stream, **bufs)
        stream.sync()
        t_eager = (time.perf_counter() - t0) / iters
        print(
            f"per iteration ({len(g)} nodes, n={n}): graph launch {t_graph * 1e6:.1f} us, "
            f"eager {t_eager * 1e6:.1f} us ({t_eager / t_graph:.1f}x)"
        )
    for b in bufs.values():
        b.close(stream)
    stream.sync()
    keep_in.close()
    keep_out.close()
    return 0 if ok else 1
