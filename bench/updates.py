"""Update cost: changing a pointer in an instantiated graph, cudagraph side by side with its peers.

What is measured (one process, one GPU, one tiny kernel ``inc(float* x, float a, int n)``
compiled once with NVRTC and launched with grid 1, block 32; every graph is a chain of
such kernel nodes, each depending on the previous one):

1. **Pointer updates.** A chain of N = 1000 kernel nodes in which K = 1, 10, 100, 1000
   nodes take the pointer parameter ``p`` (the others a fixed ``Buffer``); the K users
   are spread evenly over the chain (``--placement first``: the first K nodes). Each
   step changes the pointer, alternating between two Buffers A and B:

   - ``cudagraph bind``: ``exe.bind(p=buf)`` (``cuGraphExecKernelNodeSetParams`` on
     the K users only); µs per step and per updated node;
   - ``cudagraph bind, users differ``: the same with a float scalar of its own in each
     user node (nodes with the same kernel, dimensions and argument objects share one
     prepared parameter structure, so the K users above are rewritten once; here each
     user has its own);
   - ``cudagraph bind+launch``: ``exe.launch(stream, p=buf)``, for reference;
   - ``bare cuGraphExecKernelNodeSetParams``: the ``cuda.bindings`` call on the K users
     with the two parameter structures (A, B) prepared in advance: the floor of a
     per-node update made from Python, printed beside ours;
   - ``cuda.core per-node``: ``graph[node].update(config=cfg, kernel=k, args=(buf, a, n))``
     on each of the K nodes. The views ``graph[node]`` are taken once, outside the
     timing (cuda.core's best case, so the ratio is conservative);
   - ``cuda.core per-node+launch``: the same followed by ``graph.launch(stream)``;
   - ``cuda.core whole-graph``: rebuild a ``GraphDefinition`` with the new pointer and
     ``graph.update(gd)``;
   - ``cuda.core re-instantiate``: rebuild a ``GraphDefinition``, ``gd.instantiate()``,
     close the previous executable;
   - ``cuda.core re-capture``: ``GraphBuilder`` stream capture of the chain,
     ``complete()``, close the previous executable and builder.

   Plus K = 1 on a chain of N = 10000 (``cudagraph bind`` and ``cuda.core per-node``):
   our cost must follow K, not the size of the graph. The update-only peers launch
   nothing; the ``+launch`` peers synchronize the stream every 4 steps, outside the
   timing.

2. **Launch overhead** (a 10-node chain, ``--launch-nodes``; K = 1): ``exe.launch(s)``
   vs ``exe.launch(s, p=buf)`` alternating A and B vs ``exe.launch(s, p=A)`` with A
   already bound, next to a bare ``cuGraphLaunch``, cuda.core ``Graph.launch`` and
   cuda.core ``graph[node].update(...)`` + ``Graph.launch``. ``--launches`` calls per
   repeat, the stream synchronized every 100 launches, only the launch calls timed.
   ``exe.update_calls`` is read before and after the same-value launches (and after
   binding the equal address as an ``int``): zero driver calls when nothing changed.

3. **ExecutableCache.** A 1000-node chain definition rebuilt every step (``cg.Graph``
   + ``g.kernel`` x 1000), in two variants: ``10 pointers`` (10 nodes alternate between
   A and B, every other node gets the same argument tuple object each step) and ``all
   pointers`` (every node alternates between two pools of 1000 Buffers, so every node
   changes: every node is set one by one). Per step: define only; define +
   ``cache.get(g)`` + ``exe.launch(s)``; define + ``g.instantiate()`` + ``exe.launch(s)``
   + ``exe.close()``. The stream is synchronized every 5 steps, outside the timing.
   ``cache.stats()`` and the driver update calls per step are printed. The target
   compares what the cache replaces: getting the executable (``cache.get(g)`` vs
   ``g.instantiate()`` + ``exe.close()``); the define and launch phases, the same work
   on both paths, are shown in the table and in a whole-step ratio printed beside it.

Every measurement is warmed up once and repeated (5 times, 3 with ``--quick``, which
also halves the steps per repeat); peers are interleaved within each repeat, with a 50 ms
pause before each sample of section 1 (without it, samples of the µs-scale peers taken right
after a peer that destroys executables measured up to 1.7x slower); the tables
show the **median** (the JSON output also holds the minimum and every sample). The
garbage collector is disabled inside timed regions.

Run from the repository root::

    PYTHONPATH=src python3 bench/updates.py            # full run
    PYTHONPATH=src python3 bench/updates.py --quick    # 3 repeats, half the steps
    PYTHONPATH=src python3 bench/updates.py --json out.json

Targets printed next to the ratios (issue 5): cuda.core per-node / cudagraph bind at
least 1.5x for every K; at most 2 µs per updated node; K = 1 on N = 10000 within 1.5x of
K = 1 on N = 1000; a launch that rebinds one pointer at most 5 µs above a plain launch;
zero driver calls when nothing changed; on a cache hit, ``cache.get(g)`` at least 5x
faster than ``g.instantiate()`` + ``close``. Reference numbers from issue 5 (H200): cuda.core per-node update
3-7 µs/node, whole-graph update from a rebuilt GraphDefinition ~6 ms, re-instantiation
~7 ms, re-capture + instantiate ~4.3 ms (1000 nodes).
"""

from __future__ import annotations

import argparse
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

from _common import busy_python_thread, no_gc, versions
from _common import fmt as _fmt
from _common import import_cudagraph as _import_cudagraph
from _common import verdict as _verdict

KERNEL_SOURCE = r"""
extern "C" __global__ void inc(float* x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += a;
}
"""
NELEM = 32  # elements of each buffer; grid 1 x block 32 touches each once
GRID = 1
BLOCK = 32
CHAIN = 1000  # nodes of the graphs of sections 1 and 3
BIG_CHAIN = 10000  # nodes of the graph used to check that bind cost does not grow with N
KS = (1, 10, 100, 1000)
SMALL_CHAIN = 10  # default nodes of the graph whose launch call is timed
LAUNCH_BLOCK = 100  # launches between stream synchronizations (section 2)
UPDATE_LAUNCH_CHUNK = 4  # update+launch steps between synchronizations (section 1, 1000-node chain)
CACHE_CHANGED = 10  # nodes whose pointer changes in the "10 pointers" cache variant
CACHE_SYNC_EVERY = 5  # cache steps between stream synchronizations
CACHE_MAXSIZE = 4
SETTLE_S = 0.05  # untimed pause before each sample of section 1 (executables destroyed by the previous peer)

TARGET_VS_CORE = 1.5  # cuda.core per-node / cudagraph bind >= 1.5x
TARGET_US_PER_NODE = 2.0  # cudagraph bind <= 2 µs per updated node
TARGET_SIZE_SCALING = 1.5  # bind K=1: N=10000 / N=1000 <= 1.5x
TARGET_LAUNCH_REBIND_US = 5.0  # launch(s, p=new) - launch(s) <= 5 µs
TARGET_CACHE = 5.0  # (instantiate + close) / cache.get on a hit >= 5x

perf_counter = time.perf_counter


def _even(x: float) -> int:
    """``x`` rounded down to an even count of at least 2 (steps alternate A, B)."""
    v = max(2, int(x))
    return v - (v % 2)


# --------------------------------------------------------------------------- shared GPU state


@dataclass
class Env:
    """Objects every peer shares: device, stream, kernel, buffers, launch config."""

    dev: Any
    stream: Any
    kernel: Any
    cfg: Any
    driver: Any
    fixed: Any  # the Buffer of every node that does not take the pointer parameter
    buf_a: Any  # the two Buffers the pointer alternates between
    buf_b: Any
    a: Any  # np.float32 scalar argument
    n: Any  # np.int32 element count
    placement: str
    _pools: list[list[Any]] = field(default_factory=list)

    @property
    def fixed_args(self) -> tuple[Any, ...]:
        return (self.fixed, self.a, self.n)

    def users(self, nodes: int, k: int) -> list[int]:
        """Indices of the ``k`` nodes (of ``nodes``) that take the pointer."""
        if self.placement == "first":
            return list(range(k))
        return [i * nodes // k for i in range(k)]

    def core_args(self, nodes: int, users: Sequence[int], buf: Any) -> list[tuple[Any, ...]]:
        """Per-node arguments of a cuda.core chain whose ``users`` take ``buf`` (shared tuple objects)."""
        fixed = self.fixed_args
        use = (buf, self.a, self.n)
        mask = set(users)
        return [use if i in mask else fixed for i in range(nodes)]

    def pools(self, size: int) -> list[list[Any]]:
        """Two pools of ``size`` Buffers each (allocated once) for the "all pointers" cache variant."""
        if not self._pools or len(self._pools[0]) < size:
            self._pools = [[self.dev.allocate(NELEM * 4, stream=self.stream) for _ in range(size)] for _ in range(2)]
            self.stream.sync()
        return [p[:size] for p in self._pools]


def setup(placement: str) -> Env:
    """Make device 0 current, compile the kernel and allocate its buffers."""
    import numpy as np
    from cuda.bindings import driver
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions

    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    obj = Program(KERNEL_SOURCE, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
    kernel = obj.get_kernel("inc")
    fixed, buf_a, buf_b = (dev.allocate(NELEM * 4, stream=stream) for _ in range(3))
    stream.sync()
    cfg = LaunchConfig(grid=GRID, block=BLOCK)
    return Env(dev, stream, kernel, cfg, driver, fixed, buf_a, buf_b, np.float32(1e-3), np.int32(NELEM), placement)


# --------------------------------------------------------------------------- graph builders


def define_ours(env: Env, nodes: int, users: Sequence[int], distinct: bool = False) -> Any:
    """A cudagraph chain of ``nodes`` kernels; ``users`` take the pointer parameter ``p`` (with
    ``distinct``, each user with a float scalar of its own instead of one shared argument tuple)."""
    import numpy as np

    import cudagraph as cg

    g = cg.Graph(f"chain{nodes}")
    p = g.param("p")
    use = (p, env.a, env.n)
    fixed = env.fixed_args
    mask = set(users)
    kern, add = env.kernel, g.kernel
    prev = None
    for i in range(nodes):
        if i in mask:
            args = (p, np.float32(1e-3 + i * 1e-6), env.n) if distinct else use
        else:
            args = fixed
        prev = add(kern, GRID, BLOCK, args, after=prev)
    return g


def define_ours_plain(env: Env, args: Sequence[tuple[Any, ...]]) -> Any:
    """A cudagraph chain with the given per-node arguments (no parameter); the definition step of section 3."""
    import cudagraph as cg

    g = cg.Graph("rebuilt")
    kern, add = env.kernel, g.kernel
    prev = None
    for a in args:
        prev = add(kern, GRID, BLOCK, a, after=prev)
    return g


def define_core(env: Env, args: Sequence[tuple[Any, ...]], nodes: list[Any] | None = None) -> Any:
    """A cuda.core ``GraphDefinition`` chain; its kernel nodes are appended to ``nodes`` if given."""
    from cuda.core.graph import GraphDefinition

    cfg, kern = env.cfg, env.kernel
    gd = GraphDefinition()
    it = iter(args)
    node = gd.launch(cfg, kern, *next(it))
    if nodes is None:
        for a in it:
            node = node.launch(cfg, kern, *a)
    else:
        nodes.append(node)
        for a in it:
            node = node.launch(cfg, kern, *a)
            nodes.append(node)
    return gd


def capture_core(env: Env, args: Sequence[tuple[Any, ...]]) -> Any:
    """A finished cuda.core ``GraphBuilder`` holding the captured chain."""
    from cuda.core import launch

    cfg, kern = env.cfg, env.kernel
    gb = env.dev.create_graph_builder()
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


def _close_quietly(*objs: Any) -> None:
    for o in objs:
        if o is not None:
            try:
                o.close()
            except Exception:
                pass


# --------------------------------------------------------------------------- section 1: update peers


class UpdatePeer:
    """One way of changing the pointer of K nodes of an instantiated chain.

    ``run(count)`` performs ``count`` steps (``count`` is even): the pointer goes
    A -> B -> A ... and is A again at the end. Set-up happens in ``__init__``
    (not timed); ``close`` frees everything.
    """

    name = "?"
    unit = "us"  # how the table shows it: "us" per step, or "ms" per step
    launches = False  # synchronize the stream between chunks

    def __init__(self, env: Env, nodes: int, users: Sequence[int]) -> None:
        self.env = env
        self.nodes = nodes
        self.users = list(users)
        self.k = len(users)

    def run(self, count: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class OursBind(UpdatePeer):
    """cudagraph: ``exe.bind(p=buf)``."""

    name = "cudagraph bind"

    def __init__(self, env: Env, nodes: int, users: Sequence[int]) -> None:
        super().__init__(env, nodes, users)
        self.graph = define_ours(env, nodes, users)
        self.exe = self.graph.instantiate(p=env.buf_a)
        try:
            got = self.exe.bind(p=env.buf_b)
            back = self.exe.bind(p=env.buf_a)
            if got != self.k or back != self.k:
                raise RuntimeError(f"exe.bind updated {got} then {back} nodes, expected {self.k}")
        except BaseException:
            self.exe.close()
            raise

    def run(self, count: int) -> None:
        bind, a, b = self.exe.bind, self.env.buf_a, self.env.buf_b
        for _ in range(count >> 1):
            bind(p=b)
            bind(p=a)

    def close(self) -> None:
        self.env.stream.sync()
        self.exe.close()


class OursBindDistinct(OursBind):
    """cudagraph: ``exe.bind(p=buf)`` where every user node has a scalar of its own (so no two
    users share a prepared parameter structure)."""

    name = "cudagraph bind, users differ"

    def __init__(self, env: Env, nodes: int, users: Sequence[int]) -> None:
        UpdatePeer.__init__(self, env, nodes, users)
        self.graph = define_ours(env, nodes, users, distinct=True)
        self.exe = self.graph.instantiate(p=env.buf_a)
        if self.exe.bind(p=env.buf_b) != self.k or self.exe.bind(p=env.buf_a) != self.k:
            self.exe.close()
            raise RuntimeError("exe.bind did not update the K users")


class OursBindLaunch(OursBind):
    """cudagraph: ``exe.launch(stream, p=buf)``."""

    name = "cudagraph bind+launch"
    launches = True

    def run(self, count: int) -> None:
        launch, s, a, b = self.exe.launch, self.env.stream, self.env.buf_a, self.env.buf_b
        for _ in range(count >> 1):
            launch(s, p=b)
            launch(s, p=a)


class BareSetParams(UpdatePeer):
    """Bare ``cuda.bindings``: ``cuGraphExecKernelNodeSetParams`` on the K users with two structures
    (buffer A, buffer B) prepared in advance: the floor of a per-node update from Python."""

    name = "bare cuGraphExecKernelNodeSetParams"

    def __init__(self, env: Env, nodes: int, users: Sequence[int]) -> None:
        import ctypes

        super().__init__(env, nodes, users)
        drv = env.driver
        self.graph = define_ours(env, nodes, users)
        self.exe = self.graph.instantiate(p=env.buf_a)
        self.dnodes = [self.exe.driver_node(self.graph.nodes[i]) for i in self.users]
        self._keep: list[Any] = []
        self.params = []
        handle = env.kernel.handle
        for buf in (env.buf_a, env.buf_b):
            vals = (ctypes.c_uint64(int(buf.handle)), ctypes.c_float(float(env.a)), ctypes.c_int32(int(env.n)))
            argv = (ctypes.c_void_p * 3)(*[ctypes.addressof(v) for v in vals])
            kp = drv.CUDA_KERNEL_NODE_PARAMS()
            if isinstance(handle, drv.CUkernel):
                kp.kern, kp.func = handle, drv.CUfunction(0)
            else:
                kp.func, kp.kern = handle, drv.CUkernel(0)
            kp.gridDimX, kp.gridDimY, kp.gridDimZ = GRID, 1, 1
            kp.blockDimX, kp.blockDimY, kp.blockDimZ = BLOCK, 1, 1
            kp.sharedMemBytes = 0
            kp.kernelParams = ctypes.addressof(argv)
            self._keep += [vals, argv]
            self.params.append(kp)

    def run(self, count: int) -> None:
        set_params, ex, dnodes = self.env.driver.cuGraphExecKernelNodeSetParams, self.exe.handle, self.dnodes
        pa, pb = self.params
        for _ in range(count >> 1):
            for d in dnodes:
                set_params(ex, d, pb)
            for d in dnodes:
                set_params(ex, d, pa)

    def close(self) -> None:
        self.env.stream.sync()
        self.exe.close()


class CorePerNode(UpdatePeer):
    """cuda.core: ``graph[node].update(config=, kernel=, args=)`` on each of the K nodes."""

    name = "cuda.core per-node"

    def __init__(self, env: Env, nodes: int, users: Sequence[int]) -> None:
        super().__init__(env, nodes, users)
        knodes: list[Any] = []
        self.gd = define_core(env, env.core_args(nodes, users, env.buf_a), knodes)
        self.graph = self.gd.instantiate()
        try:
            self.views = [self.graph[knodes[i]] for i in self.users]
        except BaseException:
            self.graph.close()
            raise
        self.args_a = (env.buf_a, env.a, env.n)
        self.args_b = (env.buf_b, env.a, env.n)

    def run(self, count: int) -> None:
        views, cfg, kern, aa, ab = self.views, self.env.cfg, self.env.kernel, self.args_a, self.args_b
        for _ in range(count >> 1):
            for v in views:
                v.update(config=cfg, kernel=kern, args=ab)
            for v in views:
                v.update(config=cfg, kernel=kern, args=aa)

    def close(self) -> None:
        self.env.stream.sync()
        self.graph.close()


class CorePerNodeLaunch(CorePerNode):
    """cuda.core: per-node updates, then ``graph.launch(stream)``."""

    name = "cuda.core per-node+launch"
    launches = True

    def run(self, count: int) -> None:
        views, cfg, kern, aa, ab = self.views, self.env.cfg, self.env.kernel, self.args_a, self.args_b
        glaunch, s = self.graph.launch, self.env.stream
        for _ in range(count >> 1):
            for v in views:
                v.update(config=cfg, kernel=kern, args=ab)
            glaunch(s)
            for v in views:
                v.update(config=cfg, kernel=kern, args=aa)
            glaunch(s)


class CoreWholeGraph(UpdatePeer):
    """cuda.core: rebuild a ``GraphDefinition`` with the new pointer, ``graph.update(gd)``."""

    name = "cuda.core whole-graph"
    unit = "ms"

    def __init__(self, env: Env, nodes: int, users: Sequence[int]) -> None:
        super().__init__(env, nodes, users)
        self.list_a = env.core_args(nodes, users, env.buf_a)
        self.list_b = env.core_args(nodes, users, env.buf_b)
        self.keep = define_core(env, self.list_a)
        self.graph = self.keep.instantiate()

    def run(self, count: int) -> None:
        env, update, la, lb = self.env, self.graph.update, self.list_a, self.list_b
        for _ in range(count >> 1):
            update(define_core(env, lb))
            gd = define_core(env, la)
            update(gd)
        self.keep = gd

    def close(self) -> None:
        self.env.stream.sync()
        self.graph.close()


class CoreReinstantiate(UpdatePeer):
    """cuda.core: rebuild a ``GraphDefinition``, instantiate it, close the previous executable."""

    name = "cuda.core re-instantiate"
    unit = "ms"

    def __init__(self, env: Env, nodes: int, users: Sequence[int]) -> None:
        super().__init__(env, nodes, users)
        self.lists = (env.core_args(nodes, users, env.buf_b), env.core_args(nodes, users, env.buf_a))
        self.keep = define_core(env, self.lists[1])
        self.graph = self.keep.instantiate()

    def run(self, count: int) -> None:
        env, lists = self.env, self.lists
        for i in range(count):
            gd = define_core(env, lists[i & 1])
            new = gd.instantiate()
            self.graph.close()
            self.graph, self.keep = new, gd

    def close(self) -> None:
        self.env.stream.sync()
        self.graph.close()


class CoreRecapture(UpdatePeer):
    """cuda.core: capture the chain with ``GraphBuilder``, ``complete()``, close the previous one."""

    name = "cuda.core re-capture"
    unit = "ms"

    def __init__(self, env: Env, nodes: int, users: Sequence[int]) -> None:
        super().__init__(env, nodes, users)
        self.lists = (env.core_args(nodes, users, env.buf_b), env.core_args(nodes, users, env.buf_a))
        self.gb = capture_core(env, self.lists[1])
        try:
            self.graph = self.gb.complete()
        except BaseException:
            self.gb.close()
            raise

    def run(self, count: int) -> None:
        env, lists = self.env, self.lists
        for i in range(count):
            gb = capture_core(env, lists[i & 1])
            try:
                new = gb.complete()
            except BaseException:
                gb.close()
                raise
            self.graph.close()
            self.gb.close()
            self.graph, self.gb = new, gb

    def close(self) -> None:
        self.env.stream.sync()
        _close_quietly(self.graph, self.gb)


UPDATE_PEERS: tuple[type[UpdatePeer], ...] = (
    OursBind,
    OursBindDistinct,
    OursBindLaunch,
    BareSetParams,
    CorePerNode,
    CorePerNodeLaunch,
    CoreWholeGraph,
    CoreReinstantiate,
    CoreRecapture,
)
BIG_PEERS: tuple[type[UpdatePeer], ...] = (OursBind, CorePerNode)


@dataclass
class Result:
    """Repeated timings of one peer in one configuration (seconds per step or per call)."""

    section: str
    peer: str
    n: int
    k: int
    steps: int
    status: str = "ok"  # "ok" or "failed: ..."
    samples: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.samples)

    def median(self, scale: float = 1e6) -> float | None:
        return statistics.median(self.samples) * scale if self.ok else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "section": self.section,
            "peer": self.peer,
            "n": self.n,
            "k": self.k,
            "steps_per_repeat": self.steps,
            "status": self.status,
        }
        if self.samples:
            us = [s * 1e6 for s in self.samples]
            out["us_per_step"] = {"median": statistics.median(us), "min": min(us), "samples": us}
        out.update(self.extra)
        return out


def _sample(run: Callable[[int], None], count: int, chunk: int, sync: bool, stream: Any) -> float:
    """Seconds per step of ``count`` steps run ``chunk`` at a time; the stream is synced between chunks."""
    total = 0.0
    done = 0
    stream.sync()
    with no_gc():
        while done < count:
            c = min(chunk, count - done)
            t0 = perf_counter()
            run(c)
            total += perf_counter() - t0
            done += c
            if sync:
                stream.sync()
    return total / count


def _steps_for(cls: type[UpdatePeer], k: int, scale: float) -> tuple[int, int]:
    """(steps per repeat, steps per chunk) for a peer updating ``k`` nodes."""
    if cls.unit == "ms":
        steps = _even(4 * scale)
        return steps, 2
    if cls.launches:
        steps = _even(min(40, max(8, 4000 // k)) * scale)
        return steps, UPDATE_LAUNCH_CHUNK
    steps = _even(max(20, 4000 // k) * scale)
    return steps, steps


def measure_group(
    env: Env, classes: Sequence[type[UpdatePeer]], nodes: int, k: int, repeats: int, scale: float
) -> list[Result]:
    """Every peer of ``classes`` on one (N, K): one warm-up, then ``repeats`` samples, peers interleaved."""
    users = env.users(nodes, k)
    peers: list[UpdatePeer | None] = []
    results: list[Result] = []
    for cls in classes:
        steps, _ = _steps_for(cls, k, scale)
        r = Result("updates", cls.name, nodes, k, steps)
        try:
            peers.append(cls(env, nodes, users))
        except Exception as exc:  # one peer's failure must not stop the run
            peers.append(None)
            r.status = f"failed: {type(exc).__name__}: {exc}"
            print(f"peer {cls.name} failed (setup, N={nodes}, K={k}): {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(limit=4)
        results.append(r)
    try:
        for rep in range(repeats + 1):
            for cls, peer, r in zip(classes, peers, results):
                if peer is None or r.status != "ok":
                    continue
                steps, chunk = _steps_for(cls, k, scale)
                time.sleep(SETTLE_S)  # after the previous peer's teardown
                try:
                    s = _sample(peer.run, steps, chunk, peer.launches, env.stream)
                except Exception as exc:  # one peer's failure must not stop the run
                    r.status = f"failed: {type(exc).__name__}: {exc}"
                    print(f"peer {cls.name} failed (N={nodes}, K={k}): {type(exc).__name__}: {exc}", flush=True)
                    traceback.print_exc(limit=4)
                    continue
                if rep > 0:  # rep 0 is the warm-up
                    r.samples.append(s)
    finally:
        for peer in peers:
            if peer is not None:
                try:
                    peer.close()
                except Exception as exc:
                    print(f"peer {peer.name}: close failed: {type(exc).__name__}: {exc}", flush=True)
        gc.collect()
    for r in results:
        if r.ok:
            r.extra["nodes_updated_per_step"] = k
    return results


def measure_updates(env: Env, repeats: int, scale: float) -> list[Result]:
    """Section 1: every K on the 1000-node chain, then K = 1 on the 10000-node chain."""
    out: list[Result] = []
    for k in KS:
        out.extend(measure_group(env, UPDATE_PEERS, CHAIN, k, repeats, scale))
        print(f"  measured updates N={CHAIN} K={k}", file=sys.stderr, flush=True)
    out.extend(measure_group(env, BIG_PEERS, BIG_CHAIN, 1, repeats, scale))
    print(f"  measured updates N={BIG_CHAIN} K=1", file=sys.stderr, flush=True)
    return out


# --------------------------------------------------------------------------- section 2: launch


class LaunchPeer:
    """One way of launching a small chain whose first pointer user may be rebound; ``run(count)`` launches."""

    name = "?"

    def __init__(self, env: Env, nodes: int) -> None:
        self.env = env
        self.nodes = nodes

    def run(self, count: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def report(self) -> dict[str, Any]:
        return {}


class OursLaunch(LaunchPeer):
    """cudagraph ``exe.launch`` on a chain where one node takes ``p`` (bound to A)."""

    name = "cudagraph launch(s)"

    def __init__(self, env: Env, nodes: int) -> None:
        super().__init__(env, nodes)
        self.graph = define_ours(env, nodes, env.users(nodes, 1))
        self.exe = self.graph.instantiate(p=env.buf_a)
        try:
            # Warm the node's update path, leave A bound.
            self.exe.launch(env.stream, p=env.buf_b)
            self.exe.launch(env.stream, p=env.buf_a)
            env.stream.sync()
        except BaseException:
            self.exe.close()
            raise
        self.calls0 = self.exe.update_calls

    def run(self, count: int) -> None:
        launch, s = self.exe.launch, self.env.stream
        for _ in range(count >> 1):
            launch(s)
            launch(s)

    def close(self) -> None:
        self.env.stream.sync()
        self.exe.close()


class OursLaunchRebind(OursLaunch):
    name = "cudagraph launch(s, p=A/B alternating)"

    def run(self, count: int) -> None:
        launch, s, a, b = self.exe.launch, self.env.stream, self.env.buf_a, self.env.buf_b
        for _ in range(count >> 1):
            launch(s, p=b)
            launch(s, p=a)


class OursLaunchSame(OursLaunch):
    name = "cudagraph launch(s, p=A already bound)"

    def run(self, count: int) -> None:
        launch, s, a = self.exe.launch, self.env.stream, self.env.buf_a
        for _ in range(count >> 1):
            launch(s, p=a)
            launch(s, p=a)

    def report(self) -> dict[str, Any]:
        """Driver update calls made by the same-value launches, and by binding A's address as an int."""
        exe = self.exe
        same_calls = exe.update_calls - self.calls0
        before = exe.update_calls
        returned = exe.bind(p=int(self.env.buf_a.handle))
        int_calls = exe.update_calls - before
        return {
            "update_calls_same_object": same_calls,
            "update_calls_equal_int_address": int_calls,
            "bind_equal_int_address_returned": returned,
            "zero_driver_calls": same_calls == 0 and int_calls == 0 and returned == 0,
        }


class BareLaunch(OursLaunch):
    """``driver.cuGraphLaunch(exe.handle, stream.handle)`` on cudagraph's executable: the floor."""

    name = "cuGraphLaunch (bare cuda.bindings)"

    def run(self, count: int) -> None:
        raw, h, sh = self.env.driver.cuGraphLaunch, self.exe.handle, self.env.stream.handle
        for _ in range(count >> 1):
            raw(h, sh)
            raw(h, sh)


class CoreLaunch(LaunchPeer):
    """cuda.core ``Graph.launch(stream)`` on the same chain built with ``GraphDefinition``."""

    name = "cuda.core Graph.launch(s)"

    def __init__(self, env: Env, nodes: int) -> None:
        super().__init__(env, nodes)
        users = env.users(nodes, 1)
        knodes: list[Any] = []
        self.gd = define_core(env, env.core_args(nodes, users, env.buf_a), knodes)
        self.graph = self.gd.instantiate()
        try:
            self.view = self.graph[knodes[users[0]]]
        except BaseException:
            self.graph.close()
            raise
        self.args_a = (env.buf_a, env.a, env.n)
        self.args_b = (env.buf_b, env.a, env.n)

    def run(self, count: int) -> None:
        glaunch, s = self.graph.launch, self.env.stream
        for _ in range(count >> 1):
            glaunch(s)
            glaunch(s)

    def close(self) -> None:
        self.env.stream.sync()
        self.graph.close()


class CoreUpdateLaunch(CoreLaunch):
    name = "cuda.core graph[node].update + Graph.launch(s)"

    def run(self, count: int) -> None:
        glaunch, s, v = self.graph.launch, self.env.stream, self.view
        cfg, kern, aa, ab = self.env.cfg, self.env.kernel, self.args_a, self.args_b
        for _ in range(count >> 1):
            v.update(config=cfg, kernel=kern, args=ab)
            glaunch(s)
            v.update(config=cfg, kernel=kern, args=aa)
            glaunch(s)


LAUNCH_PEERS: tuple[type[LaunchPeer], ...] = (
    OursLaunch,
    OursLaunchRebind,
    OursLaunchSame,
    BareLaunch,
    CoreLaunch,
    CoreUpdateLaunch,
)


def measure_launch(env: Env, nodes: int, launches: int, repeats: int) -> list[Result]:
    """Section 2: µs per launch call of each launch peer, peers interleaved per repeat."""
    count = max(LAUNCH_BLOCK, launches - launches % LAUNCH_BLOCK)
    peers: list[LaunchPeer | None] = []
    results: list[Result] = []
    for cls in LAUNCH_PEERS:
        r = Result("launch", cls.name, nodes, 1, count)
        try:
            peers.append(cls(env, nodes))
        except Exception as exc:  # one peer's failure must not stop the run
            peers.append(None)
            r.status = f"failed: {type(exc).__name__}: {exc}"
            print(f"peer {cls.name} failed (setup): {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(limit=4)
        results.append(r)
    try:
        for rep in range(repeats + 1):
            for peer, r in zip(peers, results):
                if peer is None or r.status != "ok":
                    continue
                try:
                    s = _sample(peer.run, count, LAUNCH_BLOCK, True, env.stream)
                except Exception as exc:  # one peer's failure must not stop the run
                    r.status = f"failed: {type(exc).__name__}: {exc}"
                    print(f"peer {r.peer} failed (launch): {type(exc).__name__}: {exc}", flush=True)
                    traceback.print_exc(limit=4)
                    continue
                if rep > 0:
                    r.samples.append(s)
        for peer, r in zip(peers, results):
            if peer is not None and r.status == "ok":
                try:
                    r.extra.update(peer.report())
                except Exception as exc:
                    r.extra["report_failed"] = f"{type(exc).__name__}: {exc}"
                    print(f"peer {r.peer}: report failed: {type(exc).__name__}: {exc}", flush=True)
    finally:
        for peer in peers:
            if peer is not None:
                try:
                    peer.close()
                except Exception as exc:
                    print(f"peer {peer.name}: close failed: {type(exc).__name__}: {exc}", flush=True)
        gc.collect()
    print(f"  measured launch ({nodes}-node chain)", file=sys.stderr, flush=True)
    return results


# --------------------------------------------------------------------------- section 3: cache

CACHE_VARIANTS = ("10 pointers", "all pointers")
CACHE_PATHS = ("define only", "define + cache.get + launch", "define + instantiate + launch + close")
PHASES = ("define", "obtain", "launch", "close")


@dataclass
class CacheResult:
    """One (variant, path): per repeat, seconds per step of each phase, and driver update calls per step."""

    variant: str
    path: str
    steps: int
    status: str = "ok"
    samples: list[dict[str, float]] = field(default_factory=list)
    calls: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.samples)

    def phase_ms(self, phase: str) -> float | None:
        if not self.ok:
            return None
        return statistics.median(s[phase] for s in self.samples) * 1e3

    def obtain_ms(self) -> float | None:
        """Median ms per step of getting an executable: ``cache.get``, or ``instantiate`` + ``close``."""
        if not self.ok:
            return None
        return statistics.median(s["obtain"] + s["close"] for s in self.samples) * 1e3

    def total_ms(self) -> float | None:
        if not self.ok:
            return None
        return statistics.median(sum(s.values()) for s in self.samples) * 1e3

    def to_json(self) -> dict[str, Any]:
        totals = [sum(s.values()) * 1e3 for s in self.samples]
        return {
            "variant": self.variant,
            "path": self.path,
            "steps_per_repeat": self.steps,
            "status": self.status,
            "ms_per_step": {"median": statistics.median(totals), "min": min(totals), "samples": totals}
            if totals
            else {},
            "phase_ms_median": {p: self.phase_ms(p) for p in PHASES} if self.ok else {},
            "driver_update_calls_per_step": self.calls,
        }


def _cache_lists(env: Env, variant: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The two alternating per-node argument lists of a cache variant (built once, outside the timing)."""
    if variant == "10 pointers":
        users = env.users(CHAIN, CACHE_CHANGED)
        return env.core_args(CHAIN, users, env.buf_a), env.core_args(CHAIN, users, env.buf_b)
    p0, p1 = env.pools(CHAIN)
    return [(b, env.a, env.n) for b in p0], [(b, env.a, env.n) for b in p1]


@dataclass
class _CallTracker:
    """The cached executable last seen and its ``update_calls``: counts the update calls each hit makes."""

    exe: Any = None
    seen: int = 0
    calls: int = 0

    def observe(self, exe: Any) -> None:
        if exe is self.exe:
            self.calls += exe.update_calls - self.seen
        self.exe, self.seen = exe, exe.update_calls


def _cache_sample(
    env: Env, path: str, lists: Sequence[Sequence[Any]], steps: int, cache: Any, tracker: _CallTracker
) -> dict[str, float]:
    """One repeat of ``steps`` steps of ``path``: seconds per step of each phase."""
    stream = env.stream
    acc = dict.fromkeys(PHASES, 0.0)
    stream.sync()
    with no_gc():
        for i in range(steps):
            args = lists[i & 1]
            t0 = perf_counter()
            g = define_ours_plain(env, args)
            t1 = perf_counter()
            acc["define"] += t1 - t0
            if path == CACHE_PATHS[0]:
                continue
            if path == CACHE_PATHS[1]:
                exe = cache.get(g)
                t2 = perf_counter()
                exe.launch(stream)
                t3 = perf_counter()
                t4 = t3
                tracker.observe(exe)  # untimed: reads two ints
            else:
                exe = g.instantiate()
                t2 = perf_counter()
                exe.launch(stream)
                t3 = perf_counter()
                exe.close()
                t4 = perf_counter()
            acc["obtain"] += t2 - t1
            acc["launch"] += t3 - t2
            acc["close"] += t4 - t3
            if (i + 1) % CACHE_SYNC_EVERY == 0:
                stream.sync()
        stream.sync()
    return {k: v / steps for k, v in acc.items()}


def measure_cache(env: Env, repeats: int, scale: float) -> dict[str, Any]:
    """Section 3: per variant, the three paths interleaved per repeat; cache.stats() at the end."""
    import cudagraph as cg

    steps = _even(10 * scale)
    results: list[CacheResult] = []
    stats: dict[str, Any] = {}
    for variant in CACHE_VARIANTS:
        group = [CacheResult(variant, p, steps) for p in CACHE_PATHS]
        try:
            lists = _cache_lists(env, variant)
            cache = cg.ExecutableCache(maxsize=CACHE_MAXSIZE)
        except Exception as exc:
            for r in group:
                r.status = f"failed: {type(exc).__name__}: {exc}"
            print(f"cache variant {variant!r} failed (setup): {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(limit=4)
            results.extend(group)
            continue
        tracker = _CallTracker()
        for rep in range(repeats + 1):
            for r in group:
                if r.status != "ok":
                    continue
                tracker.calls = 0
                try:
                    phases = _cache_sample(env, r.path, lists, steps, cache, tracker)
                except Exception as exc:  # one path's failure must not stop the run
                    r.status = f"failed: {type(exc).__name__}: {exc}"
                    print(f"cache {variant!r} / {r.path} failed: {type(exc).__name__}: {exc}", flush=True)
                    traceback.print_exc(limit=4)
                    continue
                if rep > 0:
                    r.samples.append(phases)
                    if r.path == CACHE_PATHS[1]:
                        r.calls.append(tracker.calls / steps)
        try:
            stats[variant] = dict(cache.stats())
        except Exception as exc:
            stats[variant] = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            env.stream.sync()
            cache.clear()
        except Exception as exc:
            print(f"cache.clear() failed: {type(exc).__name__}: {exc}", flush=True)
        results.extend(group)
        gc.collect()
        print(f"  measured cache ({variant})", file=sys.stderr, flush=True)
    return {"results": results, "stats": stats, "steps": steps}


# --------------------------------------------------------------------------- report


def _find(results: Sequence[Result], peer: str, n: int, k: int) -> Result | None:
    for r in results:
        if r.peer == peer and r.n == n and r.k == k:
            return r
    return None


def _cell(r: Result | None, scale: float, digits: int, per: int = 1) -> str:
    if r is None:
        return "—"
    if not r.ok:
        return "failed"
    v = r.median(scale)
    return _fmt(None if v is None else v / per, digits)


def update_table(results: Sequence[Result]) -> str:
    head = (
        "| N | K | cudagraph bind µs/step | cudagraph µs/node | cudagraph bind+launch µs/step "
        "| cuda.core per-node µs/step | cuda.core µs/node | cuda.core per-node+launch µs/step "
        "| cuda.core per-node / cudagraph | cuda.core whole-graph ms | cuda.core re-instantiate ms "
        "| cuda.core re-capture ms |"
    )
    lines = [head, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    seen: list[tuple[int, int]] = []
    for r in results:
        if (r.n, r.k) not in seen:
            seen.append((r.n, r.k))
    for n, k in seen:
        ours, core = _find(results, OursBind.name, n, k), _find(results, CorePerNode.name, n, k)
        ratio = "n/a"
        if ours is not None and core is not None and ours.ok and core.ok:
            ratio = f"{(core.median() or 0.0) / (ours.median() or 1.0):.2f}x"
        cells = [
            _cell(ours, 1e6, 2),
            _cell(ours, 1e6, 3, per=k),
            _cell(_find(results, OursBindLaunch.name, n, k), 1e6, 2),
            _cell(core, 1e6, 2),
            _cell(core, 1e6, 3, per=k),
            _cell(_find(results, CorePerNodeLaunch.name, n, k), 1e6, 2),
            ratio,
            _cell(_find(results, CoreWholeGraph.name, n, k), 1e3, 3),
            _cell(_find(results, CoreReinstantiate.name, n, k), 1e3, 3),
            _cell(_find(results, CoreRecapture.name, n, k), 1e3, 3),
        ]
        lines.append(f"| {n} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def launch_table(results: Sequence[Result], nodes: int) -> str:
    plain = _find(results, OursLaunch.name, nodes, 1)
    base = plain.median() if plain is not None and plain.ok else None
    lines = ["| launch | µs per call | minus cudagraph launch(s), µs |", "|---|---:|---:|"]
    for r in results:
        v = r.median() if r.ok else None
        diff = _fmt(v - base, 3) if v is not None and base is not None else "n/a"
        label = _fmt(v, 3) if r.ok else "failed"
        lines.append(f"| {r.peer} | {label} | {diff} |")
    return "\n".join(lines)


def cache_table(results: Sequence[CacheResult]) -> str:
    head = (
        "| variant | path | define ms | cache.get / instantiate ms | launch ms | close ms | total ms/step "
        "| driver update calls/step |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if not r.ok:
            lines.append(f"| {r.variant} | {r.path} | failed | failed | failed | failed | failed | |")
            continue
        has = r.path != CACHE_PATHS[0]
        cells = [
            _fmt(r.phase_ms("define")),
            _fmt(r.phase_ms("obtain")) if has else "—",
            _fmt(r.phase_ms("launch")) if has else "—",
            _fmt(r.phase_ms("close")) if r.path == CACHE_PATHS[2] else "—",
            _fmt(r.total_ms()),
            _fmt(statistics.median(r.calls), 1) if r.calls else "—",
        ]
        lines.append(f"| {r.variant} | {r.path} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ratio(name: str, where: str, value: float, unit: str, op: str, limit: float) -> dict[str, Any]:
    """One headline comparison with its target (``value <= limit`` or ``value >= limit``) and verdict."""
    target = f"{op} {limit}x" if unit == "x" else f"{op} {limit} {unit}"
    ok = value <= limit if op == "<=" else value >= limit
    return {"name": name, "where": where, "value": value, "unit": unit, "target": target, "pass": ok}


def ratios(updates: Sequence[Result], launch: Sequence[Result], nodes: int, cache: dict[str, Any]) -> list[dict]:
    """The headline comparisons, each with its target and verdict."""
    out: list[dict[str, Any]] = []
    for k in KS:
        ours, core = _find(updates, OursBind.name, CHAIN, k), _find(updates, CorePerNode.name, CHAIN, k)
        o = ours.median() if ours is not None else None
        c = core.median() if core is not None else None
        where = f"N={CHAIN}, K={k}"
        if o and c is not None:
            out.append(_ratio("cuda.core per-node / cudagraph bind", where, c / o, "x", ">=", TARGET_VS_CORE))
        if o is not None:
            out.append(_ratio("cudagraph bind per updated node", where, o / k, "µs", "<=", TARGET_US_PER_NODE))
        differ = _find(updates, OursBindDistinct.name, CHAIN, k)
        d = differ.median() if differ is not None else None
        if d is not None:
            name = "cudagraph bind per updated node, users differ"
            out.append(_ratio(name, where, d / k, "µs", "<=", TARGET_US_PER_NODE))
    small, big = _find(updates, OursBind.name, CHAIN, 1), _find(updates, OursBind.name, BIG_CHAIN, 1)
    s = small.median() if small is not None else None
    b = big.median() if big is not None else None
    if s and b is not None:
        name = f"cudagraph bind K=1: N={BIG_CHAIN} / N={CHAIN}"
        out.append(_ratio(name, "K=1", b / s, "x", "<=", TARGET_SIZE_SCALING))
    plain, rebind = _find(launch, OursLaunch.name, nodes, 1), _find(launch, OursLaunchRebind.name, nodes, 1)
    p = plain.median() if plain is not None else None
    rb = rebind.median() if rebind is not None else None
    if p is not None and rb is not None:
        name = "launch(s, p=new) - launch(s)"
        out.append(_ratio(name, f"{nodes}-node chain, K=1", rb - p, "µs", "<=", TARGET_LAUNCH_REBIND_US))
    same = _find(launch, OursLaunchSame.name, nodes, 1)
    if same is not None and "zero_driver_calls" in same.extra:
        zero = bool(same.extra["zero_driver_calls"])
        out.append(
            {
                "name": "zero driver calls when nothing changed",
                "where": f"{nodes}-node chain",
                "value": 0.0 if zero else 1.0,
                "unit": "yes/no",
                "target": "yes",
                "pass": zero,
            }
        )
    by = {(r.variant, r.path): r for r in cache.get("results", [])}
    for variant in CACHE_VARIANTS:
        hit, fresh = by.get((variant, CACHE_PATHS[1])), by.get((variant, CACHE_PATHS[2]))
        h = hit.obtain_ms() if hit is not None else None
        f = fresh.obtain_ms() if fresh is not None else None
        if h and f is not None:
            name = "g.instantiate() + close / cache.get(g)"
            out.append(_ratio(name, f"{variant}, N={CHAIN}", f / h, "x", ">=", TARGET_CACHE))
    return out


def _print_ratio(r: dict[str, Any]) -> None:
    if r["unit"] == "yes/no":
        value = "yes" if r["pass"] else "no"
        print(f"- {r['name']} [{r['where']}]: {value} (target {r['target']}) {_verdict(r['pass'])}")
        return
    value = f"{r['value']:.2f}x" if r["unit"] == "x" else f"{r['value']:.3f} {r['unit']}"
    print(f"- {r['name']} [{r['where']}]: {value} (target {r['target']}) {_verdict(r['pass'])}")


def info_lines(updates: Sequence[Result], launch: Sequence[Result], nodes: int, cache: dict[str, Any]) -> list[str]:
    """Comparisons without a target, to help read the tables."""
    out: list[str] = []
    per_k = [(k, _find(updates, OursBind.name, CHAIN, k)) for k in KS]
    vals = [(k, r.median()) for k, r in per_k if r is not None and r.ok]
    if len(vals) >= 2:
        (k0, t0), (k1, t1) = vals[0], vals[-1]
        steps = ", ".join(f"K={k}: {t:.2f}" for k, t in vals)
        slope = (t1 - t0) / (k1 - k0) if k1 != k0 else 0.0
        out.append(f"cudagraph bind µs/step by K ({steps}); slope {slope:.3f} µs per extra node")
    for k in KS:
        ours, bare = _find(updates, OursBind.name, CHAIN, k), _find(updates, BareSetParams.name, CHAIN, k)
        differ = _find(updates, OursBindDistinct.name, CHAIN, k)
        if ours is not None and bare is not None and ours.ok and bare.ok:
            o, b = ours.median() or 0.0, bare.median() or 0.0
            line = (
                f"K={k}: cudagraph bind {o / k:.3f} µs per node vs a bare cuda.bindings "
                f"cuGraphExecKernelNodeSetParams loop (structures prepared) {b / k:.3f}: {(o - b) / k:+.3f} µs"
            )
            if differ is not None and differ.ok:
                line += f"; users differ: {(differ.median() or 0.0) / k:.3f} µs per node"
            out.append(line)
    big_core, small_core = _find(updates, CorePerNode.name, BIG_CHAIN, 1), _find(updates, CorePerNode.name, CHAIN, 1)
    if big_core is not None and small_core is not None and big_core.ok and small_core.ok:
        ratio = (big_core.median() or 0.0) / (small_core.median() or 1.0)
        out.append(f"cuda.core per-node K=1: N={BIG_CHAIN} / N={CHAIN}: {ratio:.3f}x")
    for k in KS:
        ours = _find(updates, OursBind.name, CHAIN, k)
        o = ours.median() if ours is not None else None
        if not o:
            continue
        parts = []
        for cls in (CoreWholeGraph, CoreReinstantiate, CoreRecapture):
            r = _find(updates, cls.name, CHAIN, k)
            v = r.median() if r is not None else None
            if v is not None:
                parts.append(f"{cls.name} {v / o:.0f}x")
        if parts:
            out.append(f"K={k}: slower than cudagraph bind by: " + ", ".join(parts))
    plain, same = _find(launch, OursLaunch.name, nodes, 1), _find(launch, OursLaunchSame.name, nodes, 1)
    if plain is not None and same is not None and plain.ok and same.ok:
        out.append(
            f"launch(s, p=A already bound) - launch(s): {(same.median() or 0.0) - (plain.median() or 0.0):.3f} µs"
        )
    if same is not None and same.extra:
        e = same.extra
        out.append(
            f"driver update calls: {e.get('update_calls_same_object')} over every same-object launch, "
            f"{e.get('update_calls_equal_int_address')} for bind(p=<equal int address>) "
            f"(returned {e.get('bind_equal_int_address_returned')})"
        )
    core_plain, core_upd = _find(launch, CoreLaunch.name, nodes, 1), _find(launch, CoreUpdateLaunch.name, nodes, 1)
    rebind = _find(launch, OursLaunchRebind.name, nodes, 1)
    if core_plain is not None and core_upd is not None and core_plain.ok and core_upd.ok:
        d = (core_upd.median() or 0.0) - (core_plain.median() or 0.0)
        out.append(f"cuda.core update + launch - cuda.core launch: {d:.3f} µs")
        if rebind is not None and rebind.ok:
            out.append(
                f"cudagraph launch(s, p=new) vs cuda.core update + launch: "
                f"{(core_upd.median() or 0.0) / (rebind.median() or 1.0):.2f}x"
            )
    by = {(r.variant, r.path): r for r in cache.get("results", [])}
    for variant in CACHE_VARIANTS:
        hit, fresh = by.get((variant, CACHE_PATHS[1])), by.get((variant, CACHE_PATHS[2]))
        if hit is not None and fresh is not None and hit.ok and fresh.ok:
            h, f = hit.total_ms(), fresh.total_ms()
            d = hit.phase_ms("define")
            if h and f is not None and d is not None:
                out.append(
                    f"{variant}: whole step, define {d:.3f} ms included in both: {f / h:.2f}x "
                    f"({f:.3f} ms vs {h:.3f} ms)"
                )
        st = cache.get("stats", {}).get(variant)
        if st is not None:
            out.append(f"{variant}: cache.stats() = {st}")
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=(
            "Benchmark changing a pointer in an instantiated graph: cudagraph bind / launch(p=...) / "
            "ExecutableCache vs cuda.core per-node updates, whole-graph Graph.update, re-instantiation "
            "and re-capture with GraphBuilder."
        ),
        epilog="Run from the repository root: PYTHONPATH=src python3 bench/updates.py [--quick]",
    )
    p.add_argument("--quick", action="store_true", help="3 repeats and half the steps per repeat")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement (default 5, quick 3)")
    p.add_argument("--launches", type=int, default=2000, help="launch calls timed per repeat (default 2000)")
    p.add_argument(
        "--launch-nodes",
        type=int,
        default=SMALL_CHAIN,
        help=f"kernel nodes of the chain whose launch call is timed (default {SMALL_CHAIN})",
    )
    p.add_argument(
        "--placement",
        choices=("spread", "first"),
        default="spread",
        help="which K nodes take the pointer: spread evenly over the chain (default) or the first K",
    )
    p.add_argument("--json", metavar="PATH", type=Path, default=None, help="also write every number to PATH")
    return p.parse_args(argv)


# --------------------------------------------------------------------------- section 4: beside a busy thread

BUSY_K = 100
BUSY_PEERS: tuple[type[UpdatePeer], ...] = (OursBindDistinct, BareSetParams, CorePerNode)


def measure_busy(env: Env, repeats: int) -> list[dict[str, Any]]:
    """Section 4: K = ``BUSY_K`` users, each with its own parameters, rebound alone (median of ``repeats`` runs of
    2 steps) and beside a thread that runs Python the whole time (one run of 2 steps), per peer."""
    rows: list[dict[str, Any]] = []
    users = env.users(CHAIN, BUSY_K)
    for cls in BUSY_PEERS:
        peer = cls(env, CHAIN, users)
        try:
            peer.run(2)  # warm
            alone = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                peer.run(2)
                alone.append((time.perf_counter() - t0) / 2 * 1e3)
            with busy_python_thread():
                t0 = time.perf_counter()
                peer.run(2)
                busy = (time.perf_counter() - t0) / 2 * 1e3
            rows.append({"peer": cls.name, "alone_ms": statistics.median(alone), "busy_ms": busy})
        finally:
            peer.close()
    print("  measured beside a busy thread", file=sys.stderr, flush=True)
    return rows


def busy_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| peer | ms per step alone | ms per step beside a busy Python thread | ratio |", "|---|---:|---:|---:|"]
    for r in rows:
        alone, busy = r["alone_ms"], r["busy_ms"]
        lines.append(f"| {r['peer']} | {alone:.3f} | {busy:.2f} | {busy / alone:.0f}x |")
    return "\n".join(lines)


def _section(name: str, fn: Callable[[], Any], empty: Any) -> Any:
    """Run one section; an unexpected failure is printed and the run goes on."""
    try:
        return fn()
    except Exception as exc:
        print(f"section {name} failed: {type(exc).__name__}: {exc}", flush=True)
        traceback.print_exc(limit=6)
        return empty


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    repeats = opts.repeats if opts.repeats is not None else (3 if opts.quick else 5)
    scale = 0.5 if opts.quick else 1.0
    launch_nodes = max(1, opts.launch_nodes)
    _import_cudagraph()
    try:
        env = setup(opts.placement)
    except Exception as exc:
        print(
            f"cannot set up the GPU (device 0, kernel compile, buffers): {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return 2

    vers = versions(env)
    print("# cudagraph update benchmark\n")
    for k, v in vers.items():
        print(f"- {k}: {v}")
    print(
        f"- kernel: inc(float*, float, int), grid {GRID}, block {BLOCK}; chains of {CHAIN} (and {BIG_CHAIN}) nodes; "
        f"K = {list(KS)} ({opts.placement}); {repeats} repeats + 1 warm-up; median shown"
    )
    print(flush=True)

    updates: list[Result] = _section("updates", lambda: measure_updates(env, repeats, scale), [])
    launch: list[Result] = _section("launch", lambda: measure_launch(env, launch_nodes, opts.launches, repeats), [])
    cache: dict[str, Any] = _section("cache", lambda: measure_cache(env, repeats, scale), {})
    busy: list[dict[str, Any]] = _section("busy", lambda: measure_busy(env, repeats), [])
    rats = ratios(updates, launch, launch_nodes, cache)

    print("## 1. Changing one pointer parameter used by K nodes\n")
    print("One step = the pointer changes (A -> B or B -> A) in the K nodes that use it. µs/node = µs/step / K.")
    print("cudagraph bind: exe.bind(p=buf); cuda.core per-node: graph[node].update(config=, kernel=, args=) on")
    print("each of the K nodes (views taken once, untimed). +launch: each step also launches (stream synced every")
    print(f"{UPDATE_LAUNCH_CHUNK} steps, untimed). whole-graph: rebuild GraphDefinition + Graph.update(gd);")
    print("re-instantiate: rebuild + instantiate + close the old one; re-capture: GraphBuilder capture + complete.\n")
    print(update_table(updates) if updates else "(no results: see the failures above)")
    print(
        "\nIssue 5 reference (H200, 1000 nodes): cuda.core per-node 3-7 µs/node, whole-graph ~6 ms, "
        "re-instantiate ~7 ms, re-capture + instantiate ~4.3 ms."
    )

    print(f"\n## 2. Launch overhead ({launch_nodes}-node chain, one node takes p)\n")
    print(
        f"{max(LAUNCH_BLOCK, opts.launches - opts.launches % LAUNCH_BLOCK)} launch calls per repeat, "
        f"stream synced every {LAUNCH_BLOCK} (untimed).\n"
    )
    print(launch_table(launch, launch_nodes) if launch else "(no results: see the failures above)")

    print(f"\n## 3. ExecutableCache: a {CHAIN}-node definition rebuilt every step\n")
    print(
        f"'{CACHE_VARIANTS[0]}': {CACHE_CHANGED} nodes alternate between two Buffers, the others keep the same "
        f"argument objects; '{CACHE_VARIANTS[1]}': every node alternates between two pools of {CHAIN} Buffers."
    )
    print(
        f"{cache.get('steps', '?')} steps per repeat, stream synced every {CACHE_SYNC_EVERY} steps (untimed); "
        "'define' is cg.Graph() + 1000 g.kernel() calls.\n"
    )
    print(cache_table(cache["results"]) if cache.get("results") else "(no results: see the failures above)")

    print(f"\n## 4. Beside a busy Python thread: one pointer used by K = {BUSY_K} nodes, each with its own values\n")
    print("Another thread runs Python the whole time (as a data-loading or logging thread may); each release of the")
    print("GIL hands it over for that thread's switch interval (5 ms). cudagraph's compiled rebind releases it once")
    print("per bind around all its driver calls; cuda.bindings (and cuda.core through it) once per driver call.\n")
    print(busy_table(busy) if busy else "(no results: see the failures above)")

    print("\n## Ratios (target in brackets)\n")
    for r in rats:
        _print_ratio(r)
    if not rats:
        print("- (no ratio could be computed: see the failures above)")
    infos = info_lines(updates, launch, launch_nodes, cache)
    if infos:
        print("\n## Also\n")
        for line in infos:
            print(f"- {line}")

    if opts.json is not None:
        doc = {
            "versions": vers,
            "config": {
                "chain": CHAIN,
                "big_chain": BIG_CHAIN,
                "ks": list(KS),
                "placement": opts.placement,
                "repeats": repeats,
                "quick": opts.quick,
                "launches": opts.launches,
                "launch_nodes": launch_nodes,
                "grid": GRID,
                "block": BLOCK,
                "statistic": "median (min and samples also given)",
            },
            "updates": [r.to_json() for r in updates],
            "launch": [r.to_json() for r in launch],
            "cache": {
                "results": [r.to_json() for r in cache.get("results", [])],
                "stats": cache.get("stats", {}),
            },
            "ratios": rats,
        }
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
        print(f"\nwrote {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
