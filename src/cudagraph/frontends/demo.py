"""``python -m cudagraph demo``: build, check and time a small real graph."""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from importlib import resources
from typing import Any

import numpy as np

from ..definition.graph import Graph
from ..driver import calls
from ..errors import DriverUnavailableError
from .environment import KernelsUnavailable, probe

__all__ = ["add_arguments", "build_demo_graph", "load_kernels", "main", "run"]

KERNEL_NAMES = ("scale", "square", "offset", "combine")
_NEEDS_GPU = "The definition was built and drawn; running it needs an NVIDIA GPU and driver"


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


def _load_ptx() -> dict[str, Any]:
    from cuda.core import ObjectCode

    ptx = resources.files("cudagraph").joinpath("_kernels/demo.ptx").read_bytes()
    code = ObjectCode.from_ptx(ptx)
    return {name: code.get_kernel(name) for name in KERNEL_NAMES}


def _compile_source() -> dict[str, Any]:
    from cuda.core import Device, Program, ProgramOptions

    src = resources.files("cudagraph").joinpath("_kernels/demo.cu").read_text()
    code = Program(src, "c++", ProgramOptions(arch=f"sm_{Device().arch}")).compile("cubin")
    return {name: code.get_kernel(name) for name in KERNEL_NAMES}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:160]}" if text else type(exc).__name__


def load_kernels(load_ptx: Any = _load_ptx, compile_source: Any = _compile_source) -> dict[str, Any]:
    """The demo's kernels: the shipped PTX, else its source compiled with NVRTC.

    Raises
    ------
    KernelsUnavailable
        Neither works; the message says why each failed, in one sentence.
    """
    try:
        return load_ptx()  # type: ignore[no-any-return]
    except Exception as ptx_exc:
        try:
            return compile_source()  # type: ignore[no-any-return]
        except Exception as nvrtc_exc:
            raise KernelsUnavailable(
                f"No NVRTC and no usable PTX: the shipped PTX did not load ({_first_line(ptx_exc)}) and the "
                f"source could not be compiled with NVRTC ({_first_line(nvrtc_exc)})."
            ) from nvrtc_exc


def _pinned_array(n: int) -> tuple[Any, np.ndarray]:
    from cuda.core import LegacyPinnedMemoryResource

    buf = LegacyPinnedMemoryResource().allocate(4 * n)
    arr = np.ctypeslib.as_array((ctypes.c_float * n).from_address(int(buf.handle)))
    return buf, arr


def _placeholder_kernels() -> dict[str, Any]:
    driver = calls.driver
    if driver is None:
        return {name: _Placeholder() for name in KERNEL_NAMES}
    return {name: driver.CUkernel(0) for name in KERNEL_NAMES}


class _Placeholder:
    """Stands for a kernel where cuda-bindings is missing (the definition is only drawn)."""


_Placeholder.__name__ = "CUkernel"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0 or value >= 1 << 31:
        raise argparse.ArgumentTypeError(f"expected a positive integer below 2**31, got {value}")
    return value


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The demo's options."""
    ap.add_argument("-n", type=_positive, default=1 << 16, help="elements per buffer (default 65536)")
    ap.add_argument("--iterations", type=_positive, default=200, help="launches timed (default 200)")
    ap.add_argument("--dot", default="cudagraph-demo.dot", help="where to write the DOT picture ('-': standard output)")


def _show(g: Graph, dot: str) -> None:
    print(g.summary())
    if dot == "-":
        sys.stdout.write(g.to_dot())
    else:
        with open(dot, "w", encoding="utf-8") as f:
            f.write(g.to_dot())
        print(f"wrote {dot}")


def _definition_only(n: int, dot: str, why: str) -> int:
    x_host = np.arange(n, dtype=np.float32)
    g = build_demo_graph(_placeholder_kernels(), n, x_host, np.empty_like(x_host))
    g.validate()
    _show(g, dot)
    print(f"{why} {_NEEDS_GPU}.")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    ap = argparse.ArgumentParser(prog="python -m cudagraph demo", description=__doc__)
    add_arguments(ap)
    return run(ap.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the demo with parsed options; returns the process exit code."""
    n = args.n
    found = probe()
    if found.problem is not None:
        return _definition_only(n, args.dot, found.message)
    try:
        from cuda.core import Device

        dev = Device(0)
        dev.set_current()
        kernels = load_kernels()
        stream = dev.create_stream()
    except KernelsUnavailable as exc:
        return _definition_only(n, args.dot, str(exc))
    except Exception as exc:
        return _definition_only(n, args.dot, f"The GPU could not be used ({_first_line(exc)}).")

    keep_in, x_host = _pinned_array(n)
    keep_out, out_host = _pinned_array(n)
    rng = np.random.default_rng(0)
    x_host[:] = rng.standard_normal(n, dtype=np.float32)
    bufs = {name: dev.allocate(4 * n, stream=stream) for name in ("x", "y1", "y2", "y3", "out")}
    g = build_demo_graph(kernels, n, x_host, out_host)
    g.validate()
    _show(g, args.dot)

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
