"""Construction of nodes other than kernels: fills, copies, empty nodes and host callbacks, against cuda.core.

Kinds: ``memset`` (int values), ``memset-np`` (numpy float values), ``memcpy``
(device to device), ``memcpy-h2d`` (from a pageable numpy array, nbytes from it), ``empty`` (``join``),
``host``.

What is measured, per kind, on a chain of ``--nodes`` nodes of that kind (each node after the one
before it, fresh arguments per node as a user writes them), µs per node, the median of ``--repeats``
interleaved repeats:

- cudagraph *define* (``g.memset``, ``g.memcpy``, ``g.join``, ``g.host``), *lower*
  (``materialize.explicit.lower``: ``cuGraphCreate`` + ``cuGraphAddNode`` for each node) and both;
- cuda.core ``GraphDefinition`` (``node.memset``, ``node.memcpy``, ``node.join``, ``node.callback``): each
  builder call adds its driver node, so its column is the whole of define + lower;
- both instantiated (``g.instantiate()`` with validation; ``GraphDefinition.instantiate()``), end to end;
- cudagraph *update*: ``exe.update(g2)`` with ``g2`` the same chain with other values (fills of another
  value, device copies the other way, host copies into the other Buffer; empty nodes and callbacks
  unchanged): one ``cuGraphExecNodeSetParams`` per changed node;
- the chain run eagerly, no graph (host time of the call, the stream synchronized after the timing):
  cudagraph's ``g.run(stream)`` against the same stream calls made by a Python loop through
  ``cuda.bindings`` (``cuMemsetD32Async``, ``cuMemcpyAsync``, the address read from the Buffer at each
  call, as a user writes it; none for empty nodes and callbacks).

The ratio is cudagraph define + lower over cuda.core's builder calls (lower is better).

``--keep 0`` makes every construction build its ``CUgraphNodeParams`` afresh (no reused structures,
``cudagraph.driver.node_params_pool``): what the reuse buys.

Then, unless ``--no-busy``: the eager runs of a chain of 200 fills and of 200 device copies (and their
builds by the capture backend), alone and beside another thread that runs Python the whole time (ms, one
run each, the stream synchronized inside): each release of the GIL hands it to that thread for its switch
interval (5 ms); ``cuda.bindings`` releases it in every call.

Run: ``python bench/node_kinds.py [--nodes 500] [--repeats 5] [--keep 0] [--no-busy]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from _common import busy_python_thread, fmt, import_cudagraph, no_gc, versions

KINDS = ("memset", "memset-np", "memcpy", "memcpy-h2d", "empty", "host")
#: The host memory of the ``memcpy-h2d`` chains: a numpy array of 4096 bytes (pageable).
_HOST = np.zeros(1024, np.float32)
#: The kinds cuda.core could not build in this run (said once each).
_REFUSED: set[str] = set()
COLUMNS = (
    "define",
    "lower",
    "define+lower",
    "cuda.core builder",
    "cudagraph e2e",
    "cuda.core e2e",
    "update",
    "g.run",
    "cuda.bindings run",
)


def _noop(*_: Any) -> None:  # (cuda.core passes its user data)
    pass


def define_ours(cg: Any, kind: str, n: int, a: Any, b: Any, shift: int = 0) -> Any:
    """A cudagraph chain of ``n`` nodes of ``kind`` (``a``, ``b``: two device Buffers of 4096 bytes; fills of
    value ``i + shift``)."""
    g = cg.Graph(kind)
    prev = None
    for i in range(n):
        if kind == "memset":
            prev = g.memset(a, (i + shift) & 0xFF, count=1024, element_size=4, after=prev)
        elif kind == "memset-np":  # a float value: its bits, 4-byte elements
            prev = g.memset(a, np.float32(i + shift), count=1024, after=prev)
        elif kind == "memcpy":
            prev = g.memcpy(b, a, nbytes=4096, after=prev)
        elif kind == "memcpy-h2d":  # from a numpy array, nbytes from it (``shift``: into the other Buffer)
            prev = g.memcpy(b if shift else a, _HOST, after=prev)
        elif kind == "empty":
            prev = g.join(prev) if prev is not None else g.join()
        else:
            prev = g.host(_noop, after=prev)
    return g


def define_core(kind: str, n: int, a: Any, b: Any) -> Any:
    """The same chain as a cuda.core ``GraphDefinition`` (each call adds a driver node)."""
    from cuda.core.graph import GraphDefinition

    gd = GraphDefinition()
    node: Any = gd
    for i in range(n):
        if kind == "memset":
            node = node.memset(a, np.uint32(i & 0xFF), 1024)  # (4-byte elements, as ours)
        elif kind == "memset-np":  # (its value as the bits of the float, which is what ours writes)
            node = node.memset(a, np.float32(i).view(np.uint32), 1024)
        elif kind == "memcpy":
            node = node.memcpy(b, a, 4096)
        elif kind == "memcpy-h2d":
            node = node.memcpy(a, _HOST.ctypes.data, 4096)
        elif kind == "empty":
            node = node.join() if node is not gd else gd.empty()
        else:
            node = node.callback(_noop)
    return gd


def run_bindings(kind: str, n: int, a: Any, b: Any, h: Any) -> None:
    """The stream calls of the chain of ``kind`` through ``cuda.bindings``, on the stream handle ``h``."""
    from cuda.bindings import driver

    for i in range(n):
        if kind == "memset":
            driver.cuMemsetD32Async(int(a.handle), i & 0xFF, 1024, h)
        elif kind == "memset-np":
            driver.cuMemsetD32Async(int(a.handle), int(np.float32(i).view(np.uint32)), 1024, h)
        elif kind == "memcpy":
            driver.cuMemcpyAsync(int(b.handle), int(a.handle), 4096, h)
        elif kind == "memcpy-h2d":
            driver.cuMemcpyAsync(int(a.handle), _HOST.ctypes.data, 4096, h)


def sample_runs(cg: Any, kind: str, n: int, a: Any, b: Any, stream: Any) -> dict[str, float]:
    """The eager columns for ``kind`` (seconds per node): ``g.run`` and, for fills and copies, the bindings loop."""
    from cuda.bindings import driver

    g = define_ours(cg, kind, n, a, b)
    out: dict[str, float] = {}
    with no_gc():
        stream.sync()
        t0 = time.perf_counter()
        g.run(stream)
        t1 = time.perf_counter()
        stream.sync()
        out["g.run"] = (t1 - t0) / n
        if kind in ("memset", "memset-np", "memcpy", "memcpy-h2d"):
            h = driver.CUstream(int(stream.handle))
            t0 = time.perf_counter()
            run_bindings(kind, n, a, b, h)
            t1 = time.perf_counter()
            stream.sync()
            out["cuda.bindings run"] = (t1 - t0) / n
    return out


def busy_runs(cg: Any, a: Any, b: Any, stream: Any, n: int = 200) -> str:
    """The table of eager runs of ``n`` fills and ``n`` copies alone and beside a busy Python thread (ms)."""
    from cuda.bindings import driver

    h = driver.CUstream(int(stream.handle))
    runs: dict[str, Callable[[], Any]] = {}
    for kind in ("memset", "memcpy"):
        g = define_ours(cg, kind, n, a, b)
        runs[f"cudagraph g.run(s), {n} x {kind}"] = lambda g=g: g.run(stream)
        runs[f"cuda.bindings loop, {n} x {kind}"] = lambda kind=kind: run_bindings(kind, n, a, b, h)
        runs[f"cudagraph instantiate(backend='capture') + close, {n} x {kind}"] = lambda g=g: g.instantiate(
            backend="capture"
        ).close()
    alone: dict[str, float] = {}
    for name, run in runs.items():
        run()  # (warm)
        stream.sync()
        samples = []
        for _ in range(3):
            t0 = time.perf_counter()
            run()
            stream.sync()
            samples.append(time.perf_counter() - t0)
        alone[name] = statistics.median(samples) * 1e3
    lines = ["| eager run | alone ms | beside a busy Python thread ms | ratio |", "|---|---:|---:|---:|"]
    with busy_python_thread():
        for name, run in runs.items():
            t0 = time.perf_counter()
            run()
            stream.sync()
            busy = (time.perf_counter() - t0) * 1e3
            lines.append(f"| {name} | {alone[name]:.2f} | {busy:.2f} | {busy / alone[name]:.1f}x |")
    return "\n".join(lines)


def sample(cg: Any, kind: str, n: int, a: Any, b: Any, stream: Any = None) -> dict[str, float]:
    """One repeat of every column for ``kind``: seconds per node (the eager ones where ``stream`` is given)."""
    from cudagraph.materialize.explicit import lower

    out: dict[str, float] = {}
    with no_gc():
        t0 = time.perf_counter()
        g = define_ours(cg, kind, n, a, b)
        t1 = time.perf_counter()
        g.validate()
        t2 = time.perf_counter()
        lowered = lower(g, {}, [])
        t3 = time.perf_counter()
    lowered.destroy()
    out["define"], out["lower"], out["define+lower"] = (t1 - t0) / n, (t3 - t2) / n, (t1 - t0 + t3 - t2) / n
    with no_gc():
        t0 = time.perf_counter()
        exe = define_ours(cg, kind, n, a, b).instantiate()
        t1 = time.perf_counter()
    out["cudagraph e2e"] = (t1 - t0) / n
    g2 = define_ours(cg, kind, n, b, a, shift=1) if kind == "memcpy" else define_ours(cg, kind, n, a, b, shift=1)
    with no_gc():
        t0 = time.perf_counter()
        exe.update(g2)
        t1 = time.perf_counter()
    out["update"] = (t1 - t0) / n
    exe.close()
    try:
        with no_gc():
            t0 = time.perf_counter()
            gd = define_core(kind, n, a, b)
            t1 = time.perf_counter()
            graph = define_core(kind, n, a, b).instantiate()
            t2 = time.perf_counter()
        out["cuda.core builder"], out["cuda.core e2e"] = (t1 - t0) / n, (t2 - t1) / n
        graph.close()
        del gd
    except Exception as exc:  # a peer that cannot build this kind: its cells stay empty
        if kind not in _REFUSED:
            _REFUSED.add(kind)
            print(f"cuda.core {kind} chain failed: {type(exc).__name__}: {exc}", flush=True)
    if stream is not None:
        out.update(sample_runs(cg, kind, n, a, b, stream))
    del g
    gc.collect()
    return out


def table(rows: dict[str, dict[str, Sequence[float]]]) -> str:
    """The markdown table: µs per node, median of the samples; the ratio of define + lower to cuda.core."""
    lines = [
        "| kind | " + " | ".join(f"{c} µs/node" for c in COLUMNS) + " | cudagraph / cuda.core (define+lower) |",
        "|---|" + "---:|" * (len(COLUMNS) + 1),
    ]
    for kind, cols in rows.items():
        med = {c: statistics.median(cols[c]) * 1e6 if cols.get(c) else None for c in COLUMNS}
        ours, core = med["define+lower"], med["cuda.core builder"]
        ratio = fmt(ours / core) + "x" if ours is not None and core else "n/a"
        lines.append(f"| {kind} | " + " | ".join(fmt(med[c]) for c in COLUMNS) + f" | {ratio} |")
    return "\n".join(lines)


def measure(
    cg: Any, kinds: Sequence[str], n: int, repeats: int, a: Any, b: Any, stream: Any = None
) -> dict[str, dict[str, list[float]]]:
    """Every kind, ``repeats`` times after one warm-up, kinds interleaved within a repeat."""
    rows: dict[str, dict[str, list[float]]] = {k: {c: [] for c in COLUMNS} for k in kinds}
    for rep in range(repeats + 1):
        for kind in kinds:
            s = sample(cg, kind, n, a, b, stream)
            if rep:
                for c, v in s.items():
                    rows[kind][c].append(v)
    return rows


def main(argv: Sequence[str] | None = None, run: Callable[..., Any] = measure) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keep", type=int, default=None, help="reused CUgraphNodeParams kept (0: none)")
    ap.add_argument("--no-busy", action="store_true", help="leave out the runs beside a busy Python thread")
    opts = ap.parse_args(argv)
    import_cudagraph()
    if opts.keep is not None:
        from cudagraph.driver import node_params_pool

        node_params_pool.KEEP = opts.keep
    from cuda.bindings import driver
    from cuda.core import Device

    import cudagraph as cg

    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    a, b = dev.allocate(4096, stream=stream), dev.allocate(4096, stream=stream)
    stream.sync()
    env: Any = type("Env", (), {"driver": driver, "dev": dev})
    for k, v in versions(env).items():
        print(f"{k:>26}: {v}")
    keep = "" if opts.keep is None else f", reused CUgraphNodeParams kept: {opts.keep}"
    print(f"\nchains of {opts.nodes} nodes, median of {opts.repeats} repeats (+1 warm-up), µs per node{keep}\n")
    print(table(run(cg, KINDS, opts.nodes, opts.repeats, a, b, stream)))
    if not opts.no_busy:
        print()
        print(busy_runs(cg, a, b, stream))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
