"""Graph construction, instantiation and launch cost: cudagraph side by side with its peers.

What is measured (one process, one GPU, one tiny kernel
``inc(float* x, float a, int n)`` launched with grid 1, block 32):

Construction, for two shapes and N = 1000 and 10000 kernel nodes:

- ``chain``: N kernel nodes, each depending on the previous one;
- ``fan``: one empty root node, N kernel nodes that all depend on it, and one
  empty node that joins them (N + 2 nodes; costs are divided by N + 2).

Peers:

- ``cudagraph``: *define* is ``g = cg.Graph(); g.kernel(...)`` (pure Python),
  *lower* is ``cudagraph.materialize.explicit.lower(g, {}, [])`` (``cuGraphCreate`` +
  ``cuGraphAddNode``), *instantiate* is ``cuGraphInstantiateWithParams`` on the
  lowered ``CUgraph``. The end-to-end column is define + ``g.instantiate()``
  (the public call: validate + lower + instantiate), timed separately.
- ``cuda.core.graph``: ``GraphDefinition`` + ``node.launch(...)``; each builder
  call adds a driver node, so its *define* compares with our define + lower.
  *instantiate* is ``GraphDefinition.instantiate()``.
- ``cuda.core capture``: ``GraphBuilder`` stream capture; *define* is
  ``begin_building()`` .. ``end_building()`` around N ``launch(gb, ...)`` calls,
  *instantiate* is ``gb.complete()``. Chain only (``n/a`` for ``fan``: capturing
  an N-wide fan-out needs N forked streams).
- ``cuda.bindings (bare)``: one prepared ``CUgraphNodeParams`` and a plain loop
  of ``driver.cuGraphAddNode`` calls; the floor for a Python caller (the user-style
  table's C floor is the same loop in C, ``bench/_c_floor.py``).

Launch:

- CPU cost of the launch call for a 10-node chain: ``Executable.launch(stream)``
  vs cuda.core ``Graph.launch(stream)`` vs ``driver.cuGraphLaunch(exec, hstream)``;
  2000 launches, the stream is synchronized every 100 launches and only the
  launch calls are timed.
- GPU time per node of the largest chain (cuda.core timing events around a few
  launches), to check that every peer builds an equally fast graph.

Every measurement is warmed up once and repeated (5 times, 3 with ``--quick``);
the tables show the **median** (the JSON output also holds the minimum and
every sample). The garbage collector is disabled inside timed regions.

The default table (``--mode user``) measures graphs written as users write
them, against cuda.core capture, on a chain and a 16x64 DAG, with
cudagraph's own work inside ``g.instantiate()``, the per-node cost by N and
the memory per node (see ``bench/_user_style.py``); the peer table above, on
one shared argument tuple, is ``--mode shared`` (``--mode all``: both).

Run from the repository root::

    PYTHONPATH=src python3 bench/construction.py            # N = 1000 and 10000
    PYTHONPATH=src python3 bench/construction.py --quick    # N = 1000 only, 3 repeats
    PYTHONPATH=src python3 bench/construction.py --big      # also N = 100000 in the scaling table
    PYTHONPATH=src python3 bench/construction.py --mode all --json out.json
    PYTHONPATH=src python3 bench/construction.py --cpu --big   # no GPU: cudagraph's own work, fake driver

Targets of the user-style table: define + lower at most 1.5 µs per node, end
to end at most 0.9x cuda.core capture on the chain and 0.6x on the DAG,
cudagraph's own work inside ``g.instantiate()`` at most 0.1 µs per node, and
the per-node cost of define, validate, lower and the signature at the largest
N within 1.3x of N = 1000. Targets of the shared table: define + lower per node at most 0.6x
``GraphDefinition``'s, at most 1 µs per node above the bare ``cuGraphAddNode``
loop, per-node cost at N = 10000 within 1.5x of N = 1000, and a launch call at
most 1 µs above a bare ``cuGraphLaunch``.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _user_style as _user
from _common import fmt as _fmt
from _common import import_cudagraph as _import_cudagraph
from _common import no_gc, versions
from _common import verdict as _verdict

KERNEL_SOURCE = r"""
extern "C" __global__ void inc(float* x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += a;
}
"""
NELEM = 32  # elements of the buffer; grid 1 x block 32 touches each once
GRID = 1
BLOCK = 32
SHAPES = ("chain", "fan")
SMALL_CHAIN = 10  # nodes of the graph whose launch call is timed
LAUNCH_BLOCK = 100  # launches between stream synchronizations

TARGET_VS_CORE = 0.6  # cudagraph define+lower <= 0.6x GraphDefinition per node
TARGET_VS_BARE_US = 1.0  # cudagraph define+lower <= bare cuGraphAddNode + 1 µs per node
TARGET_SCALING = 1.5  # per-node cost at N=10000 <= 1.5x N=1000
TARGET_LAUNCH_US = 1.0  # Executable.launch <= cuGraphLaunch + 1 µs

perf_counter = time.perf_counter


class NotApplicable(Exception):
    """A peer cannot build this shape in a fair way; reported as ``n/a``."""


# --------------------------------------------------------------------------- shared GPU state


@dataclass
class Env:
    """Objects every peer shares: device, stream, kernel, buffer, launch config."""

    dev: Any
    stream: Any
    kernel: Any
    buf: Any
    cfg: Any
    driver: Any
    vary_args: bool
    args: tuple[Any, ...]
    _arg_lists: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)

    def arg_list(self, n: int) -> list[tuple[Any, ...]]:
        """Kernel arguments of each of ``n`` nodes (built once, outside timed regions).

        Every node gets the same argument objects, unless ``--vary-args`` gives
        each its own ``a`` scalar (which defeats argument-packing caches).
        """
        cached = self._arg_lists.get(n)
        if cached is None:
            import numpy as np

            if self.vary_args:
                buf, _, count = self.args
                cached = [(buf, np.float32(i % 1000) * np.float32(1e-3), count) for i in range(n)]
            else:
                cached = [self.args] * n
            self._arg_lists[n] = cached
        return cached


def setup(vary_args: bool) -> Env:
    """Make device 0 current, compile the kernel and allocate its buffer."""
    import numpy as np
    from cuda.bindings import driver
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions

    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    obj = Program(KERNEL_SOURCE, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
    kernel = obj.get_kernel("inc")
    buf = dev.allocate(NELEM * 4, stream=stream)
    stream.sync()
    cfg = LaunchConfig(grid=GRID, block=BLOCK)
    args = (buf, np.float32(1.0), np.int32(NELEM))
    return Env(dev, stream, kernel, buf, cfg, driver, vary_args, args)


def _check(result: Any, call: str) -> Any:
    """Raise on a failing ``(CUresult, ...)`` tuple; return the value."""
    if result[0]:
        raise RuntimeError(f"{call} failed: {result[0]!r}")
    return result[1] if len(result) == 2 else None


# --------------------------------------------------------------------------- peers


@dataclass
class Launchable:
    """A chain graph ready to launch: ``call(*args)`` launches it once."""

    call: Callable[..., Any]
    args: tuple[Any, ...]
    close: Callable[[], None]
    keep: Any = None  # objects that must outlive the executable


class Peer:
    """One way of building a graph. Subclasses time nothing themselves.

    ``define`` -> ``lower`` -> ``instantiate`` are timed by :func:`sample`;
    ``release`` frees whatever was made (it is called with ``None`` for the
    steps that did not run).
    """

    name = "?"
    has_lower = False  # a separate lowering step, reported in its own column
    launches = True  # takes part in the launch measurements

    def __init__(self, env: Env) -> None:
        self.env = env

    def define(self, shape: str, args: Sequence[tuple[Any, ...]]) -> Any:
        raise NotImplementedError

    def lower(self, defn: Any) -> Any:
        return defn

    def instantiate(self, lowered: Any) -> Any:
        raise NotImplementedError

    def release(self, defn: Any, lowered: Any, exe: Any) -> None:
        raise NotImplementedError

    def end_to_end(self, defn: Any) -> float | None:
        """Seconds of a separate public-API instantiate of ``defn`` (``None``: define + instantiate)."""
        return None

    def launchable(self, args: Sequence[tuple[Any, ...]]) -> Launchable:
        """A chain of ``len(args)`` kernel nodes, instantiated."""
        raise NotImplementedError


class CudaGraphPeer(Peer):
    """cudagraph: pure-Python definition, explicit lowering, driver instantiation."""

    name = "cudagraph"
    has_lower = True

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        import cudagraph
        from cudagraph.materialize.explicit import lower

        self._cg = cudagraph
        self._lower = lower

    def define(self, shape: str, args: Sequence[tuple[Any, ...]]) -> Any:
        kern = self.env.kernel
        g = self._cg.Graph("bench")
        if shape == "chain":
            prev = None
            for a in args:
                prev = g.kernel(kern, GRID, BLOCK, a, after=prev)
        else:
            root = g.empty()
            nodes = [g.kernel(kern, GRID, BLOCK, a, after=root) for a in args]
            g.join(nodes)
        return g

    def lower(self, defn: Any) -> Any:
        return self._lower(defn, {}, [])

    def instantiate(self, lowered: Any) -> Any:
        drv = self.env.driver
        return _check(
            drv.cuGraphInstantiateWithParams(lowered.handle, drv.CUDA_GRAPH_INSTANTIATE_PARAMS()),
            "cuGraphInstantiateWithParams",
        )

    def release(self, defn: Any, lowered: Any, exe: Any) -> None:
        if exe is not None:
            self.env.driver.cuGraphExecDestroy(exe)
        if lowered is not None:
            lowered.destroy()

    def end_to_end(self, defn: Any) -> float | None:
        with no_gc():
            t0 = perf_counter()
            exe = defn.instantiate()
            t1 = perf_counter()
        exe.close()
        return t1 - t0

    def launchable(self, args: Sequence[tuple[Any, ...]]) -> Launchable:
        g = self.define("chain", args)
        exe = g.instantiate()
        return Launchable(exe.launch, (self.env.stream,), exe.close, keep=g)


class GraphDefinitionPeer(Peer):
    """cuda.core.graph.GraphDefinition: each builder call adds a driver node."""

    name = "cuda.core.graph"

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        from cuda.core.graph import GraphDefinition

        self._cls = GraphDefinition

    def define(self, shape: str, args: Sequence[tuple[Any, ...]]) -> Any:
        cfg, kern = self.env.cfg, self.env.kernel
        gd = self._cls()
        if shape == "chain":
            it = iter(args)
            node = gd.launch(cfg, kern, *next(it))
            for a in it:
                node = node.launch(cfg, kern, *a)
        else:
            root = gd.empty()
            nodes = [root.launch(cfg, kern, *a) for a in args]
            gd.join(*nodes)
        return gd

    def instantiate(self, lowered: Any) -> Any:
        return lowered.instantiate()

    def release(self, defn: Any, lowered: Any, exe: Any) -> None:
        if exe is not None:
            exe.close()

    def launchable(self, args: Sequence[tuple[Any, ...]]) -> Launchable:
        gd = self.define("chain", args)
        graph = gd.instantiate()
        return Launchable(graph.launch, (self.env.stream,), graph.close, keep=gd)


class CapturePeer(Peer):
    """cuda.core GraphBuilder: stream capture of ``launch(gb, ...)`` calls."""

    name = "cuda.core capture"
    launches = False  # its executable is the same cuda.core Graph as GraphDefinition's

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        from cuda.core import launch

        self._launch = launch

    def define(self, shape: str, args: Sequence[tuple[Any, ...]]) -> Any:
        if shape != "chain":
            raise NotApplicable("a fan-out of N kernels under capture needs N forked streams")
        cfg, kern, launch = self.env.cfg, self.env.kernel, self._launch
        gb = self.env.dev.create_graph_builder()
        try:
            gb.begin_building()
            for a in args:
                launch(gb, cfg, kern, *a)
            gb.end_building()
        except BaseException:
            try:
                if gb.is_building:
                    gb.end_building()
            finally:
                gb.close()
            raise
        return gb

    def instantiate(self, lowered: Any) -> Any:
        return lowered.complete()

    def release(self, defn: Any, lowered: Any, exe: Any) -> None:
        if exe is not None:
            exe.close()
        if defn is not None:
            defn.close()


class BarePeer(Peer):
    """cuda.bindings: a loop of ``cuGraphAddNode`` with one prepared parameter struct."""

    name = "cuda.bindings (bare)"

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        drv = env.driver
        # Argument storage and the void* array that kernelParams points to.
        self._ptr = ctypes.c_void_p(int(env.buf.handle))
        self._a = ctypes.c_float(float(env.args[1]))
        self._n = ctypes.c_int(int(env.args[2]))
        self._argv = (ctypes.c_void_p * 3)(
            ctypes.addressof(self._ptr), ctypes.addressof(self._a), ctypes.addressof(self._n)
        )
        kp = drv.CUgraphNodeParams()
        kp.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
        k = kp.kernel
        handle = env.kernel.handle
        if isinstance(handle, drv.CUkernel):
            k.kern = handle
            k.func = drv.CUfunction(0)
        else:
            k.func = handle
            k.kern = drv.CUkernel(0)
        k.gridDimX, k.gridDimY, k.gridDimZ = GRID, 1, 1
        k.blockDimX, k.blockDimY, k.blockDimZ = BLOCK, 1, 1
        k.sharedMemBytes = 0
        k.kernelParams = ctypes.addressof(self._argv)
        self._kp = kp
        ep = drv.CUgraphNodeParams()
        ep.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EMPTY
        self._ep = ep

    def define(self, shape: str, args: Sequence[tuple[Any, ...]]) -> Any:
        drv = self.env.driver
        add, kp, ep = drv.cuGraphAddNode, self._kp, self._ep
        graph = _check(drv.cuGraphCreate(0), "cuGraphCreate")
        try:
            if shape == "chain":
                r = add(graph, None, None, 0, kp)
                if r[0]:
                    raise RuntimeError(f"cuGraphAddNode failed: {r[0]!r}")
                prev = r[1]
                if self.env.vary_args:
                    cval = self._a
                    it = iter(args)
                    next(it)
                    for a in it:
                        cval.value = a[1]
                        r = add(graph, [prev], None, 1, kp)
                        if r[0]:
                            raise RuntimeError(f"cuGraphAddNode failed: {r[0]!r}")
                        prev = r[1]
                else:
                    for _ in range(len(args) - 1):
                        r = add(graph, [prev], None, 1, kp)
                        if r[0]:
                            raise RuntimeError(f"cuGraphAddNode failed: {r[0]!r}")
                        prev = r[1]
            else:
                root = _check(add(graph, None, None, 0, ep), "cuGraphAddNode")
                deps = [root]
                nodes = []
                cval = self._a
                vary = self.env.vary_args
                for a in args:
                    if vary:
                        cval.value = a[1]
                    r = add(graph, deps, None, 1, kp)
                    if r[0]:
                        raise RuntimeError(f"cuGraphAddNode failed: {r[0]!r}")
                    nodes.append(r[1])
                _check(add(graph, nodes, None, len(nodes), ep), "cuGraphAddNode")
        except BaseException:
            drv.cuGraphDestroy(graph)
            raise
        return graph

    def instantiate(self, lowered: Any) -> Any:
        drv = self.env.driver
        return _check(
            drv.cuGraphInstantiateWithParams(lowered, drv.CUDA_GRAPH_INSTANTIATE_PARAMS()),
            "cuGraphInstantiateWithParams",
        )

    def release(self, defn: Any, lowered: Any, exe: Any) -> None:
        drv = self.env.driver
        if exe is not None:
            drv.cuGraphExecDestroy(exe)
        if defn is not None:
            drv.cuGraphDestroy(defn)

    def launchable(self, args: Sequence[tuple[Any, ...]]) -> Launchable:
        graph = self.define("chain", args)
        exe = self.instantiate(graph)

        def close() -> None:
            self.release(graph, graph, exe)

        return Launchable(self.env.driver.cuGraphLaunch, (exe, self.env.stream.handle), close)


PEER_CLASSES: tuple[type[Peer], ...] = (CudaGraphPeer, GraphDefinitionPeer, CapturePeer, BarePeer)


# --------------------------------------------------------------------------- construction


@dataclass
class Sample:
    """One timed build, in seconds (``lower`` is ``None`` for peers without that step)."""

    define: float
    lower: float | None
    instantiate: float
    end_to_end: float
    public_instantiate: float | None = None  # cudagraph only: g.instantiate() alone


def sample(peer: Peer, shape: str, args: Sequence[tuple[Any, ...]]) -> Sample:
    """Build, lower and instantiate once; free everything; return the times."""
    defn = lowered = exe = None
    try:
        with no_gc():
            t0 = perf_counter()
            defn = peer.define(shape, args)
            t1 = perf_counter()
            lowered = peer.lower(defn)
            t2 = perf_counter()
            exe = peer.instantiate(lowered)
            t3 = perf_counter()
    finally:
        peer.release(defn, lowered, exe)
    extra = peer.end_to_end(defn)
    if peer.has_lower:
        define, low = t1 - t0, t2 - t1
    else:
        define, low = t2 - t0, None
    total = (t3 - t0) if extra is None else define + extra
    return Sample(define, low, t3 - t2, total, extra)


@dataclass
class Row:
    """The construction results of one (shape, N, peer)."""

    shape: str
    n: int
    nodes: int
    peer: str
    status: str = "ok"  # "ok", "n/a" or "failed: ..."
    samples: list[Sample] = field(default_factory=list)

    def _med(self, values: list[float]) -> float:
        return statistics.median(values)

    def define_us(self) -> float | None:
        return self._per_node_us([s.define for s in self.samples])

    def lower_us(self) -> float | None:
        if not self.samples or self.samples[0].lower is None:
            return None
        return self._per_node_us([s.lower or 0.0 for s in self.samples])

    def define_lower_us(self) -> float | None:
        return self._per_node_us([s.define + (s.lower or 0.0) for s in self.samples])

    def instantiate_ms(self) -> float | None:
        return self._med([s.instantiate for s in self.samples]) * 1e3 if self.ok else None

    def end_to_end_ms(self) -> float | None:
        return self._med([s.end_to_end for s in self.samples]) * 1e3 if self.ok else None

    def _per_node_us(self, values: list[float]) -> float | None:
        return self._med(values) / self.nodes * 1e6 if self.ok else None

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.samples)

    def to_json(self) -> dict[str, Any]:
        def stats(values: list[float], scale: float) -> dict[str, Any]:
            if not values:
                return {}
            return {
                "median": statistics.median(values) * scale,
                "min": min(values) * scale,
                "samples": [v * scale for v in values],
            }

        per_node = 1e6 / self.nodes
        return {
            "shape": self.shape,
            "n": self.n,
            "nodes": self.nodes,
            "peer": self.peer,
            "status": self.status,
            "define_us_per_node": stats([s.define for s in self.samples], per_node),
            "lower_us_per_node": stats([s.lower for s in self.samples if s.lower is not None], per_node),
            "define_lower_us_per_node": stats([s.define + (s.lower or 0.0) for s in self.samples], per_node),
            "instantiate_ms": stats([s.instantiate for s in self.samples], 1e3),
            "end_to_end_ms": stats([s.end_to_end for s in self.samples], 1e3),
            "public_instantiate_ms": stats(
                [s.public_instantiate for s in self.samples if s.public_instantiate is not None], 1e3
            ),
        }


def measure_construction(peers: list[Peer], env: Env, sizes: Sequence[int], repeats: int) -> list[Row]:
    """Every (shape, N, peer): one warm-up, then ``repeats`` samples, peers interleaved."""
    rows: list[Row] = []
    for shape in SHAPES:
        for n in sizes:
            args = env.arg_list(n)
            nodes = n if shape == "chain" else n + 2
            group = [Row(shape, n, nodes, p.name) for p in peers]
            for rep in range(repeats + 1):
                for peer, row in zip(peers, group):
                    if row.status != "ok":
                        continue
                    try:
                        s = sample(peer, shape, args)
                    except NotApplicable as exc:
                        row.status = "n/a"
                        print(f"peer {peer.name}: n/a for {shape} ({exc})", flush=True)
                        continue
                    except Exception as exc:  # one peer's failure must not stop the run
                        row.status = f"failed: {type(exc).__name__}: {exc}"
                        print(f"peer {peer.name} failed ({shape}, N={n}): {type(exc).__name__}: {exc}", flush=True)
                        traceback.print_exc(limit=4)
                        continue
                    if rep > 0:  # rep 0 is the warm-up
                        row.samples.append(s)
            rows.extend(group)
            gc.collect()
            print(f"  measured {shape} N={n}", file=sys.stderr, flush=True)
    return rows


# --------------------------------------------------------------------------- launch


def _time_calls(call: Callable[..., Any], args: tuple[Any, ...], count: int) -> float:
    """Seconds spent in ``count`` calls of ``call(*args)`` (loops unrolled per arity)."""
    if len(args) == 1:
        (x,) = args
        t0 = perf_counter()
        for _ in range(count):
            call(x)
        return perf_counter() - t0
    x, y = args
    t0 = perf_counter()
    for _ in range(count):
        call(x, y)
    return perf_counter() - t0


def launch_call_us(lch: Launchable, env: Env, launches: int, repeats: int) -> list[float]:
    """µs per launch call; the stream is synchronized every LAUNCH_BLOCK launches, outside the timing."""
    stream = env.stream
    lch.call(*lch.args)  # warm-up
    stream.sync()
    blocks = max(1, launches // LAUNCH_BLOCK)
    out: list[float] = []
    for rep in range(repeats + 1):
        total = 0.0
        with no_gc():
            for _ in range(blocks):
                total += _time_calls(lch.call, lch.args, LAUNCH_BLOCK)
                stream.sync()
        if rep > 0:
            out.append(total / (blocks * LAUNCH_BLOCK) * 1e6)
    return out


def _timing_event(env: Env) -> Any:
    from cuda.core import EventOptions

    try:
        opts = EventOptions(timing_enabled=True)
    except TypeError:  # other spelling in some cuda.core versions
        opts = EventOptions(enable_timing=True)
    return env.dev.create_event(opts)


def gpu_us_per_node(lch: Launchable, env: Env, nodes: int, repeats: int, per_timing: int = 3) -> list[float]:
    """GPU µs per node: events around ``per_timing`` back-to-back launches."""
    stream = env.stream
    e1, e2 = _timing_event(env), _timing_event(env)
    try:
        lch.call(*lch.args)  # warm-up (also uploads the executable)
        stream.sync()
        out: list[float] = []
        for _ in range(repeats):
            stream.record(e1)
            for _ in range(per_timing):
                lch.call(*lch.args)
            stream.record(e2)
            e2.sync()
            out.append(float(e2 - e1) / per_timing / nodes * 1e3)
        return out
    finally:
        e1.close()
        e2.close()


def measure_launch(peers: list[Peer], env: Env, gpu_n: int, launches: int, repeats: int) -> dict[str, Any]:
    """Launch-call CPU cost (10-node chain) and GPU time per node (``gpu_n``-node chain) per peer."""
    cpu: dict[str, Any] = {}
    gpu: dict[str, Any] = {}
    for peer in peers:
        if not peer.launches:
            continue
        for what, n, out in (("launch", SMALL_CHAIN, cpu), ("gpu", gpu_n, gpu)):
            lch = None
            try:
                lch = peer.launchable(env.arg_list(n))
                if what == "launch":
                    vals = launch_call_us(lch, env, launches, repeats)
                else:
                    vals = gpu_us_per_node(lch, env, n, repeats)
                out[peer.name] = {"median": statistics.median(vals), "min": min(vals), "samples": vals}
            except Exception as exc:  # one peer's failure must not stop the run
                out[peer.name] = {"status": f"failed: {type(exc).__name__}: {exc}"}
                print(f"peer {peer.name} failed ({what}): {type(exc).__name__}: {exc}", flush=True)
                traceback.print_exc(limit=4)
            finally:
                if lch is not None:
                    try:
                        env.stream.sync()
                    finally:
                        lch.close()
                gc.collect()
    return {"launch_call_us": cpu, "gpu_us_per_node": gpu, "small_chain_nodes": SMALL_CHAIN, "gpu_chain_nodes": gpu_n}


# --------------------------------------------------------------------------- report


def construction_table(rows: list[Row]) -> str:
    head = (
        "| shape | N | peer | define µs/node | lower µs/node | define+lower µs/node | instantiate ms | end-to-end ms |"
    )
    lines = [head, "|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.ok:
            cells = [
                _fmt(r.define_us()),
                _fmt(r.lower_us()) if r.lower_us() is not None else "—",
                _fmt(r.define_lower_us()),
                _fmt(r.instantiate_ms(), 2),
                _fmt(r.end_to_end_ms(), 2),
            ]
        else:
            label = "n/a" if r.status == "n/a" else "failed"
            cells = [label] * 5
        lines.append(f"| {r.shape} | {r.n} | {r.peer} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _find(rows: list[Row], shape: str, n: int, peer: str) -> Row | None:
    for r in rows:
        if r.shape == shape and r.n == n and r.peer == peer and r.ok:
            return r
    return None


def _ratio(name: str, shape: str, n: int, value: float, unit: str, limit: float) -> dict[str, Any]:
    """One headline comparison with its target (``value <= limit``) and verdict."""
    target = f"<= {limit}x" if unit == "x" else f"<= {limit} {unit}"
    return {
        "name": name,
        "shape": shape,
        "n": n,
        "value": value,
        "unit": unit,
        "target": target,
        "pass": value <= limit,
    }


def ratios(rows: list[Row], sizes: Sequence[int], launch: dict[str, Any]) -> list[dict[str, Any]]:
    """The headline comparisons, each with its target and verdict."""
    out: list[dict[str, Any]] = []
    ours = CudaGraphPeer.name
    for shape in SHAPES:
        for n in sizes:
            a, core, bare = (_find(rows, shape, n, p) for p in (ours, GraphDefinitionPeer.name, BarePeer.name))
            a_us = a.define_lower_us() if a else None
            core_us = core.define_lower_us() if core else None
            bare_us = bare.define_lower_us() if bare else None
            if a_us is not None and core_us:
                name = "cudagraph / cuda.core.graph (define+lower per node)"
                out.append(_ratio(name, shape, n, a_us / core_us, "x", TARGET_VS_CORE))
            if a_us is not None and bare_us is not None:
                name = "cudagraph - bare cuda.bindings (µs per node)"
                out.append(_ratio(name, shape, n, a_us - bare_us, "µs", TARGET_VS_BARE_US))
        if 1000 in sizes and 10000 in sizes:
            small, big = _find(rows, shape, 1000, ours), _find(rows, shape, 10000, ours)
            small_us = small.define_lower_us() if small else None
            big_us = big.define_lower_us() if big else None
            if small_us and big_us is not None:
                name = "per-node cost N=10000 / N=1000 (cudagraph, define+lower)"
                out.append(_ratio(name, shape, 10000, big_us / small_us, "x", TARGET_SCALING))
    cpu = launch.get("launch_call_us", {})
    a_l, raw_l = cpu.get(ours, {}), cpu.get(BarePeer.name, {})
    if "median" in a_l and "median" in raw_l:
        name = "launch: cudagraph - raw cuGraphLaunch (µs)"
        out.append(_ratio(name, "chain", SMALL_CHAIN, a_l["median"] - raw_l["median"], "µs", TARGET_LAUNCH_US))
    return out


def launch_table(launch: dict[str, Any]) -> str:
    cpu, gpu = launch["launch_call_us"], launch["gpu_us_per_node"]
    lines = [
        f"| peer | launch call µs ({launch['small_chain_nodes']}-node chain) "
        f"| GPU µs/node ({launch['gpu_chain_nodes']}-node chain) |",
        "|---|---:|---:|",
    ]
    for name in dict.fromkeys([*cpu, *gpu]):
        c, g = cpu.get(name, {}), gpu.get(name, {})
        lines.append(f"| {name} | {_fmt(c.get('median'))} | {_fmt(g.get('median'))} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=(
            "Benchmark graph construction (define, lower, instantiate) and launch: cudagraph vs "
            "cuda.core GraphDefinition, cuda.core stream capture and bare cuda.bindings calls."
        ),
        epilog="Run from the repository root: PYTHONPATH=src python3 bench/construction.py [--quick]",
    )
    p.add_argument(
        "--mode",
        choices=("user", "shared", "all"),
        default="user",
        help="user (default): graphs written as users write them (fresh argument tuples, three kernels, a chain "
        "and a 16x64 DAG) against cuda.core capture, cudagraph's own work inside g.instantiate(), scaling and "
        "memory; shared: every peer on one shared argument tuple (or --vary-args); all: both",
    )
    p.add_argument(
        "--cpu",
        action="store_true",
        help="no GPU: the user-style table, scaling and memory of cudagraph alone, over a driver that does "
        "nothing (bench/_fake_driver.py), timed in CPU time of the process",
    )
    p.add_argument("--quick", action="store_true", help="only N=1000, 3 repeats (scaling: N=1000 and 10000)")
    p.add_argument("--big", action="store_true", help="also N=100000 in the scaling table (slow)")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement (default 5, quick 3)")
    p.add_argument("--launches", type=int, default=2000, help="launch calls timed per repeat (default 2000)")
    p.add_argument(
        "--vary-args",
        action="store_true",
        help="give every kernel node its own scalar argument (defeats argument-packing caches)",
    )
    p.add_argument("--json", metavar="PATH", type=Path, default=None, help="also write every number to PATH")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    repeats = opts.repeats if opts.repeats is not None else (3 if opts.quick else 5)
    sizes: tuple[int, ...] = (1000,) if opts.quick else (1000, 10000)
    _import_cudagraph()
    if opts.cpu:
        return run_cpu(opts, sizes, repeats)
    try:
        env = setup(opts.vary_args)
    except Exception as exc:
        print(f"cannot set up the GPU (device 0, kernel compile, buffer): {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2

    vers = versions(env)
    print("# cudagraph construction benchmark\n")
    for k, v in vers.items():
        print(f"- {k}: {v}")
    print(
        f"- kernel: inc(float*, float, int), grid {GRID}, block {BLOCK}; sizes {list(sizes)}; "
        f"{repeats} repeats + 1 warm-up; median shown; mode {opts.mode}"
        + (f" (shared table: args {'vary per node' if opts.vary_args else 'shared'})" if opts.mode != "user" else "")
    )
    print(flush=True)

    peers: list[Peer] = []
    failures: dict[str, str] = {}
    for cls in PEER_CLASSES:
        try:
            peers.append(cls(env))
        except Exception as exc:  # report and go on without this peer
            failures[cls.name] = f"{type(exc).__name__}: {exc}"
            print(f"peer {cls.name} failed (setup): {type(exc).__name__}: {exc}", flush=True)

    user = run_user_style(opts, env, peers, sizes, repeats) if opts.mode in ("user", "all") else None
    rows = measure_construction(peers, env, sizes, repeats) if opts.mode in ("shared", "all") else []
    launch = measure_launch(peers, env, max(sizes), opts.launches, repeats)
    rats = ratios(rows, sizes, launch)

    if user is not None:
        print_user_style(user)
    if rows:
        print_shared(rows)
    print("\n## Launch\n")
    print(launch_table(launch))
    print("\n## Ratios (target in brackets)\n")
    for r in rats:
        where = f"{r['shape']}, N={r['n']}"
        print(f"- {r['name']} [{where}]: {r['value']:.3f} {r['unit']} (target {r['target']}) {_verdict(r['pass'])}")
    cpu = launch["launch_call_us"]
    a_l, core_l = cpu.get(CudaGraphPeer.name, {}), cpu.get(GraphDefinitionPeer.name, {})
    if "median" in a_l and "median" in core_l:
        print(f"- launch: cudagraph - cuda.core Graph.launch (µs): {a_l['median'] - core_l['median']:.3f} µs")
    if not rats and user is None:
        print("- (no ratio could be computed: see the failures above)")

    if opts.json is not None:
        doc = {
            "versions": vers,
            "config": {
                "mode": opts.mode,
                "sizes": list(sizes),
                "repeats": repeats,
                "launches": opts.launches,
                "vary_args": opts.vary_args,
                "grid": GRID,
                "block": BLOCK,
                "statistic": "median (min and samples also given)",
            },
            "peer_setup_failures": failures,
            "construction": [r.to_json() for r in rows],
            "user_style": user,
            "launch": launch,
            "ratios": rats,
        }
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
        print(f"\nwrote {opts.json}")
    return 0


def scaling_sizes(big: bool) -> tuple[int, ...]:
    """N of the scaling table: 1000 and 10000, and 100000 with ``--big``."""
    return (1000, 10000, 100000) if big else (1000, 10000)


def _floor(peers: list[Peer]) -> Callable[[int], dict[str, float]]:
    """Seconds of the C driver floor (``_c_floor``) for a chain of ``nodes`` kernel nodes with the bare peer's
    prepared parameters: ``{"floor": the cuGraphAddNode_v2 loop, "floor_inst": cuGraphInstantiate}``
    (empty without that peer or a C compiler)."""
    import _c_floor

    bare = next((p for p in peers if isinstance(p, BarePeer)), None)
    compiled = _c_floor.c_floor() if bare is not None else None

    def floor(nodes: int) -> dict[str, float]:
        if bare is None or compiled is None:
            return {}
        add, inst = compiled.chain(int(bare._kp.getPtr()), nodes)
        return {"floor": add, "floor_inst": inst}

    return floor


def run_user_style(
    opts: argparse.Namespace, env: Env, peers: list[Peer], sizes: Sequence[int], repeats: int
) -> dict[str, Any]:
    """The user-style table, the scaling table and the memory per node (see ``_user_style``)."""
    import cudagraph

    ue = _user.setup_user(env, cudagraph, NELEM, GRID, BLOCK)
    rows = _user.measure_user(ue, sizes, repeats, _floor(peers))
    print("  measured user-style", file=sys.stderr, flush=True)
    scaling = _user.measure_scaling(ue, scaling_sizes(opts.big), repeats)
    print("  measured scaling", file=sys.stderr, flush=True)
    ours, core = _user.measure_memory(ue)
    rss = _user.measure_rss()
    return {
        "rows": [
            {"shape": r.shape, "n": r.n, "nodes": r.nodes, "status": r.status, "us_per_node": r.samples} for r in rows
        ],
        "table": _user.user_table(rows),
        "ratios": _user.user_ratios(rows) + _user.scaling_ratios(scaling),
        "reachable": _user.reachable_lines(rows),
        "scaling_us_per_node": {str(n): v for n, v in scaling.items()},
        "scaling_table": _user.scaling_table(scaling),
        "memory_bytes_per_node": {"cudagraph": ours, "cuda.core GraphDefinition": core},
        "resident_bytes_per_node": rss,
    }


def run_cpu(opts: argparse.Namespace, sizes: Sequence[int], repeats: int) -> int:
    """``--cpu``: the user-style measurements of cudagraph alone over the fake driver of ``_fake_driver``."""
    import _fake_driver
    import cudagraph
    from cudagraph.driver.c_entry import NATIVE

    _user.use_clock(time.process_time, min)  # other load on the machine disturbs this the least
    with _fake_driver.fake_driver() as fake:
        ue = _user.UserEnv(cudagraph, fake.kernels, fake.buf, NELEM, GRID, BLOCK, None, None, fake.driver)
        print("# cudagraph construction on the CPU (fake driver)\n")
        print(f"- compiled loops: {'yes (_native)' if NATIVE is not None else 'no (cuda.bindings calls)'}")
        print(f"- fake cuGraphAddNode_v2 (compiled loop): {fake.add_node}")
        print(f"- fake cuGraphAddNode (cuda.bindings path): {_fake_driver.bindings_add_us():.3f} µs per call")
        print(f"- {repeats} repeats + 1 warm-up; the fastest sample; CPU time of the process\n")
        rows = _user.measure_user(ue, sizes, repeats, lambda nodes: {}, capture=False)
        scaling = _user.measure_scaling(ue, scaling_sizes(opts.big), repeats)
        ours, _ = _user.measure_memory(ue, core=False)
        rss = _user.measure_rss(fake=True)
    user = {
        "rows": [
            {"shape": r.shape, "n": r.n, "nodes": r.nodes, "status": r.status, "us_per_node": r.samples} for r in rows
        ],
        "table": _user.user_table(rows),
        "ratios": _user.user_ratios(rows) + _user.scaling_ratios(scaling),
        "scaling_us_per_node": {str(n): v for n, v in scaling.items()},
        "scaling_table": _user.scaling_table(scaling),
        "memory_bytes_per_node": {"cudagraph": ours, "cuda.core GraphDefinition": None},
        "resident_bytes_per_node": rss,
        "statistic": "fastest sample",
    }
    print_user_style(user)
    if opts.json is not None:
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps({"mode": "cpu", "user_style": user}, indent=2, ensure_ascii=False))
        print(f"\nwrote {opts.json}")
    return 0


def print_user_style(user: dict[str, Any]) -> None:
    print("## Construction as users write it\n")
    print("A fresh argument tuple per node (a cuda.core Buffer and numpy scalars), three kernels interleaved,")
    print(
        f"every fourth chain node with two dependencies; dag: a root, {_user.DAG_WIDTH} chains of "
        f"{_user.DAG_DEPTH} kernels, a sink. {user.get('statistic', 'median').capitalize()}, µs per node. "
        "end-to-end: define + g.instantiate(); own"
    )
    print("work: g.instantiate() - lowering - bare cuGraphInstantiateWithParams; cuda.core capture: launch() into")
    print("a GraphBuilder (split/join for the dag) + complete(); C floor: a chain of as many nodes built by a C")
    print("loop of cuGraphAddNode_v2 with one prepared parameter struct, and its cuGraphInstantiate, timed in C.\n")
    print(user["table"])
    print("\n### Per-node cost by N (user-style chain, fastest sample)\n")
    print(user["scaling_table"])
    print("\n### Memory per kernel node of a definition\n")
    mem = user["memory_bytes_per_node"]
    for line in _user.memory_lines(mem["cudagraph"], mem["cuda.core GraphDefinition"]):
        print(line)
    if user.get("resident_bytes_per_node"):
        for line in _user.rss_lines(user["resident_bytes_per_node"]):
            print(line)
    print("\n### User-style ratios (target in brackets)\n")
    for r in user["ratios"]:
        print(_user.ratio_line(r))
    for line in user.get("reachable", ()):
        print(line)


def print_shared(rows: list[Row]) -> None:
    print("\n## Construction, one shared argument tuple\n")
    print("µs/node = median time / nodes in the graph (chain: N; fan: N + 2). 'define' of the cuda.core peers and")
    print("of bare cuda.bindings already creates the driver graph, so it compares with cudagraph's define+lower.")
    print("end-to-end: define + the public instantiate call (cudagraph: g.instantiate(), which lowers again).\n")
    print(construction_table(rows))


if __name__ == "__main__":
    sys.exit(main())
