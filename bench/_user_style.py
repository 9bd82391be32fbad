"""The user-style construction measurements of ``bench/construction.py`` (its default table).

A graph is defined as a user writes it: a fresh argument tuple per node
holding a cuda.core ``Buffer`` and numpy scalars, three different kernels
interleaved, every fourth node of a chain with a second dependency. Two shapes:

- ``chain``: N kernel nodes in a row;
- ``dag``: a root kernel, 16 parallel chains of 64 kernels, a sink kernel
  depending on the 16 tails (1026 nodes); cuda.core capture records it with
  ``GraphBuilder.split(16)`` and ``GraphBuilder.join``.

Columns, per node: cudagraph *define*, *lower* (``materialize.explicit.lower``:
``cuGraphCreate`` + ``cuGraphAddNode``), *define+lower*, *end-to-end* (define +
``g.instantiate()``), *own work* (``g.instantiate()`` minus lowering minus a
bare ``cuGraphInstantiateWithParams`` of the same graph: what cudagraph adds
inside ``g.instantiate()``), cuda.core capture end to end (``launch`` into a
``GraphBuilder`` + ``complete()``), and the C driver floor (``bench/_c_floor.py``:
a chain of as many nodes added by a C loop of ``cuGraphAddNode_v2`` over one
prepared parameter struct, and its ``cuGraphInstantiate``, timed in C).

Also: per-node cost of define, validate, lower and the topology signature at
N = 1,000 vs 10,000 (100,000 with ``--big``), and the memory of a kernel node
of a definition (``tracemalloc``) beside a cuda.core ``GraphDefinition`` node;
then the resident memory per node of both (``bench/_memory_rss.py``, a fresh
process each), which counts the driver's memory that ``tracemalloc`` does not see.

Everything that needs no GPU (the definitions' shapes, the tables, the ratios
and their verdicts) is a plain function of numbers, tested on the CPU
(``tests/test_bench_construction_cpu.py``).
"""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import fmt, no_gc, verdict

KERNELS_SOURCE = r"""
extern "C" __global__ void inc(float* x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += a;
}
extern "C" __global__ void scale(float* x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
extern "C" __global__ void axpb(float* x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + 1.0f;
}
"""
KERNEL_NAMES = ("inc", "scale", "axpb")
DAG_WIDTH = 16
DAG_DEPTH = 64
SHAPES = ("chain", "dag")

TARGET_DEFINE_LOWER_US = 1.5  # define + lower <= 1.5 µs per node, user-style
TARGET_VS_CAPTURE = {"chain": 0.9, "dag": 0.6}  # end to end <= this x cuda.core capture
TARGET_OWN_US = 0.1  # cudagraph's own work inside g.instantiate() <= 0.1 µs per node
TARGET_SCALING = 1.3  # per-node cost at the largest N <= 1.3x N = 1000
PHASES = ("define", "validate", "lower", "signature", "define, collector on")

perf_counter = time.perf_counter
#: How the samples of a cell are summarised (see :func:`use_clock`).
summary: Callable[[Sequence[float]], float] = statistics.median


def use_clock(clock: Callable[[], float], statistic: Callable[[Sequence[float]], float]) -> None:
    """Time with ``clock`` and summarise the samples with ``statistic`` from now on (``bench/construction.py
    --cpu``: the process's CPU time and the fastest sample, the least disturbed by other load)."""
    global perf_counter, summary
    perf_counter = clock
    summary = statistic


# --------------------------------------------------------------------------- shapes (no GPU needed)


def node_count(shape: str, n: int) -> int:
    """Nodes in a graph of ``shape`` (``n`` is the chain length; the DAG's size is fixed)."""
    return n if shape == "chain" else DAG_WIDTH * DAG_DEPTH + 2


def chain_deps(n: int) -> list[tuple[int, ...]]:
    """The predecessors of each node of a user-style chain: the previous one, and every fourth node
    the one before it too."""
    out: list[tuple[int, ...]] = []
    for i in range(n):
        if i == 0:
            out.append(())
        elif i % 4 == 3:
            out.append((i - 1, i - 2))
        else:
            out.append((i - 1,))
    return out


def define_user(
    cg: Any,
    kernels: Sequence[Any],
    buf: Any,
    nelem: int,
    shape: str,
    n: int,
    grid: int,
    block: int,
    builder: Callable[..., Any] | None = None,
) -> Any:
    """A cudagraph definition of ``shape``, written as a user writes it (fresh argument tuples and scalars).

    ``builder`` replaces ``Graph.kernel`` (:func:`no_builder`: the user's own code alone is timed).
    """
    import numpy as np

    g = cg.Graph("user")
    kern = g.kernel if builder is None else builder
    a, count = np.float32, np.int32
    if shape == "chain":
        prev = prev2 = None
        for i in range(n):
            after = [prev, prev2] if i % 4 == 3 else prev
            node = kern(kernels[i % 3], grid, block, (buf, a(1.0), count(nelem)), after=after)
            prev2, prev = prev, node
        return g
    root = kern(kernels[0], grid, block, (buf, a(1.0), count(nelem)))
    tails = []
    for c in range(DAG_WIDTH):
        prev = root
        for j in range(DAG_DEPTH):
            prev = kern(kernels[(c + j) % 3], grid, block, (buf, a(1.0), count(nelem)), after=prev)
        tails.append(prev)
    kern(kernels[1], grid, block, (buf, a(1.0), count(nelem)), after=tails)
    return g


def capture_user(
    gb: Any, launch: Any, cfg: Any, kernels: Sequence[Any], buf: Any, nelem: int, shape: str, n: int
) -> Any:
    """Record ``shape`` into the cuda.core ``GraphBuilder`` ``gb`` (building begun); return the builder to end."""
    import numpy as np

    a, count = np.float32, np.int32
    if shape == "chain":
        for i in range(n):
            launch(gb, cfg, kernels[i % 3], buf, a(1.0), count(nelem))
        return gb
    launch(gb, cfg, kernels[0], buf, a(1.0), count(nelem))
    builders = gb.split(DAG_WIDTH)
    for c, b in enumerate(builders):
        for j in range(DAG_DEPTH):
            launch(b, cfg, kernels[(c + j) % 3], buf, a(1.0), count(nelem))
    joined = type(gb).join(*builders)
    launch(joined, cfg, kernels[1], buf, a(1.0), count(nelem))
    return joined


# --------------------------------------------------------------------------- results (no GPU needed)


_NODE = object()


def no_builder(*args: Any, **kwargs: Any) -> Any:
    """A builder that builds nothing: :func:`define_user` with it is the user's own code (tuples, scalars, calls)."""
    return _NODE


@dataclass
class UserRow:
    """Per-node times (µs) of one shape, each a list of samples; medians are reported."""

    shape: str
    n: int
    nodes: int
    samples: dict[str, list[float]] = field(default_factory=dict)
    status: str = "ok"

    def add(self, key: str, seconds: float | None) -> None:
        if seconds is not None:
            self.samples.setdefault(key, []).append(seconds / self.nodes * 1e6)

    def us(self, key: str) -> float | None:
        vals = self.samples.get(key)
        return summary(vals) if vals else None


#: (column title, sample key) of the user-style table.
USER_COLUMNS = (
    ("define", "define"),
    ("of which the user's code", "user_code"),
    ("lower", "lower"),
    ("define+lower", "define_lower"),
    ("cuGraphInstantiate", "instantiate"),
    ("end-to-end", "end_to_end"),
    ("own work in g.instantiate()", "own"),
    ("cuda.core capture e2e", "capture"),
    ("C floor: cuGraphAddNode loop", "floor"),
    ("C floor: cuGraphInstantiate", "floor_inst"),
)


def user_table(rows: Sequence[UserRow]) -> str:
    """The user-style table: one row per shape, every column in µs per node."""
    head = "| shape | N | nodes | " + " | ".join(f"{t} µs/node" for t, _ in USER_COLUMNS) + " |"
    lines = [head, "|---|---:|---:|" + "---:|" * len(USER_COLUMNS)]
    for r in rows:
        cells = [fmt(r.us(k)) for _, k in USER_COLUMNS] if r.status == "ok" else [r.status] * len(USER_COLUMNS)
        lines.append(f"| {r.shape} | {r.n} | {r.nodes} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _check(name: str, where: str, value: float, unit: str, limit: float) -> dict[str, Any]:
    target = f"<= {limit}x" if unit == "x" else f"<= {limit} {unit}"
    return {"name": name, "where": where, "value": value, "unit": unit, "target": target, "pass": value <= limit}


def user_ratios(rows: Sequence[UserRow]) -> list[dict[str, Any]]:
    """The headline comparisons of the user-style table, each with its target and verdict."""
    out: list[dict[str, Any]] = []
    for r in rows:
        where = f"{r.shape}, {r.nodes} nodes"
        dl = r.us("define_lower")
        if dl is not None:
            out.append(_check("define+lower, user-style (µs/node)", where, dl, "µs", TARGET_DEFINE_LOWER_US))
        e2e, cap = r.us("end_to_end"), r.us("capture")
        if e2e is not None and cap:
            limit = TARGET_VS_CAPTURE[r.shape]
            out.append(_check("end to end / cuda.core capture", where, e2e / cap, "x", limit))
        own = r.us("own")
        if own is not None:
            out.append(_check("own work inside g.instantiate() (µs/node)", where, own, "µs", TARGET_OWN_US))
    return out


def reachable_lines(rows: Sequence[UserRow]) -> list[str]:
    """Per shape, the lowest end to end any explicit builder can reach, over cuda.core capture: the user's own
    code, the C loop of ``cuGraphAddNode`` and ``cuGraphInstantiate`` of the same graph, and nothing else.
    A target below that ratio cannot be met on this machine by any implementation."""
    out = []
    for r in rows:
        user, add, inst, cap = (r.us(k) for k in ("user_code", "floor", "instantiate", "capture"))
        if None in (user, add, inst) or not cap:
            continue
        assert user is not None and add is not None and inst is not None
        low = user + add + inst
        out.append(
            f"- lowest reachable end to end / cuda.core capture [{r.shape}, {r.nodes} nodes]: {low / cap:.3f} x "
            f"(the user's code {user:.3f} + C cuGraphAddNode loop {add:.3f} + cuGraphInstantiate {inst:.3f} = "
            f"{low:.3f} µs/node, against {cap:.3f}; target {TARGET_VS_CAPTURE[r.shape]}x)"
        )
    return out


def scaling_ratios(per_node: dict[int, dict[str, float]]) -> list[dict[str, Any]]:
    """Per-node cost of each phase at the largest N over N = 1000 (``per_node[N][phase]`` in µs)."""
    if 1000 not in per_node or len(per_node) < 2:
        return []
    big = max(per_node)
    out = []
    for phase in PHASES:
        small_us, big_us = per_node[1000].get(phase), per_node[big].get(phase)
        if small_us and big_us is not None:
            name = f"{phase}: per-node cost N={big} / N=1000"
            out.append(_check(name, "chain", big_us / small_us, "x", TARGET_SCALING))
    return out


def scaling_table(per_node: dict[int, dict[str, float]]) -> str:
    lines = ["| N | " + " | ".join(f"{p} µs/node" for p in PHASES) + " |", "|---:|" + "---:|" * len(PHASES)]
    for n in sorted(per_node):
        lines.append(f"| {n} | " + " | ".join(fmt(per_node[n].get(p)) for p in PHASES) + " |")
    return "\n".join(lines)


def memory_lines(ours: float | None, core: float | None) -> list[str]:
    """The memory comparison, bytes per kernel node."""

    def b(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.0f} B"

    lines = [
        f"- cudagraph definition, user-style kernel node: {b(ours)} (tracemalloc: the node, its argument "
        "tuple and scalars, its edges)",
        f"- cuda.core GraphDefinition kernel node: {b(core)} (tracemalloc: Python-side objects only; the "
        "driver's node memory is not counted)",
    ]
    if ours is not None and core:
        lines.append(f"- ratio cudagraph / cuda.core: {ours / core:.2f}x")
    return lines


def ratio_line(r: dict[str, Any]) -> str:
    return f"- {r['name']} [{r['where']}]: {r['value']:.3f} {r['unit']} (target {r['target']}) {verdict(r['pass'])}"


# --------------------------------------------------------------------------- measurement (GPU)


@dataclass
class UserEnv:
    """What the user-style measurements share: the three kernels and the shared objects of the main run."""

    cg: Any
    kernels: tuple[Any, ...]
    buf: Any
    nelem: int
    grid: int
    block: int
    cfg: Any
    dev: Any
    driver: Any


def setup_user(env: Any, cg: Any, nelem: int, grid: int, block: int) -> UserEnv:
    """Compile the three kernels for the device of ``env`` (the main run's environment)."""
    from cuda.core import Program, ProgramOptions

    obj = Program(KERNELS_SOURCE, "c++", ProgramOptions(arch=f"sm_{env.dev.arch}")).compile("cubin")
    kernels = tuple(obj.get_kernel(name) for name in KERNEL_NAMES)
    return UserEnv(cg, kernels, env.buf, nelem, grid, block, env.cfg, env.dev, env.driver)


def _instantiate_bare(ue: UserEnv, handle: Any) -> Any:
    drv = ue.driver
    err, exe = drv.cuGraphInstantiateWithParams(handle, drv.CUDA_GRAPH_INSTANTIATE_PARAMS())
    if err:
        raise RuntimeError(f"cuGraphInstantiateWithParams failed: {err!r}")
    return exe


def sample_user(ue: UserEnv, shape: str, n: int, row: UserRow, keep: bool) -> None:
    """One sample of every cudagraph column of ``row`` (nothing is recorded when ``keep`` is false)."""
    from cudagraph.materialize.explicit import lower

    define = lambda: define_user(ue.cg, ue.kernels, ue.buf, ue.nelem, shape, n, ue.grid, ue.block)  # noqa: E731
    with no_gc():
        t0 = perf_counter()
        g = define()
        t1 = perf_counter()
        lowered = lower(g, {}, [])
        t2 = perf_counter()
        exe = _instantiate_bare(ue, lowered.handle)
        t3 = perf_counter()
    ue.driver.cuGraphExecDestroy(exe)
    lowered.destroy()
    with no_gc():  # g.instantiate() alone, on the definition timed above (lowered again)
        t4 = perf_counter()
        public = g.instantiate()
        t5 = perf_counter()
    public.close()
    del g
    with no_gc():  # end to end on a fresh definition
        t6 = perf_counter()
        e2e = define().instantiate()
        t7 = perf_counter()
    e2e.close()
    with no_gc():  # the same loop with a builder that builds nothing: the user's own code
        t8 = perf_counter()
        define_user(ue.cg, ue.kernels, ue.buf, ue.nelem, shape, n, ue.grid, ue.block, no_builder)
        t9 = perf_counter()
    if keep:
        row.add("define", t1 - t0)
        row.add("user_code", t9 - t8)
        row.add("lower", t2 - t1)
        row.add("define_lower", t2 - t0)
        row.add("instantiate", t3 - t2)
        row.add("end_to_end", t7 - t6)
        row.add("own", (t5 - t4) - (t2 - t1) - (t3 - t2))


def sample_capture(ue: UserEnv, shape: str, n: int, row: UserRow, keep: bool) -> None:
    """cuda.core capture end to end: ``launch`` calls into a GraphBuilder, ``end_building``, ``complete()``."""
    from cuda.core import launch

    gb = ue.dev.create_graph_builder()
    try:
        with no_gc():
            t0 = perf_counter()
            gb.begin_building()
            capture_user(gb, launch, ue.cfg, ue.kernels, ue.buf, ue.nelem, shape, n).end_building()
            graph = gb.complete()
            t1 = perf_counter()
        graph.close()
    finally:
        gb.close()
    if keep:
        row.add("capture", t1 - t0)


def measure_user(
    ue: UserEnv, sizes: Sequence[int], repeats: int, floor: Callable[[int], dict[str, float]], capture: bool = True
) -> list[UserRow]:
    """Every shape (the chain at each N, the DAG once): one warm-up, then ``repeats`` samples, peers interleaved.

    ``floor(nodes)`` gives seconds of the C driver floor for a chain of that many nodes, by column key;
    ``capture``: also time cuda.core capture (needs a GPU).
    """
    rows: list[UserRow] = []
    cases = [("chain", n) for n in sizes] + [("dag", DAG_WIDTH * DAG_DEPTH)]
    samplers = (sample_user, sample_capture) if capture else (sample_user,)
    for shape, n in cases:
        row = UserRow(shape, n, node_count(shape, n))
        for rep in range(repeats + 1):
            for fn in samplers:
                try:
                    fn(ue, shape, n, row, rep > 0)
                except Exception as exc:  # one failure must not stop the run
                    print(f"user-style {fn.__name__} failed ({shape}, N={n}): {type(exc).__name__}: {exc}", flush=True)
                    if fn is sample_user:
                        row.status = "failed"
            if rep > 0:
                for key, seconds in floor(row.nodes).items():
                    row.add(key, seconds)
            gc.collect()
            if row.status != "ok":
                break
        rows.append(row)
    return rows


def measure_scaling(ue: UserEnv, sizes: Sequence[int], repeats: int) -> dict[int, dict[str, float]]:
    """µs per node of define, validate, lower and the topology signature of user-style chains (fastest sample;
    the collector off), and of define with the collector on."""
    from cudagraph.executable.compare import topology_signature
    from cudagraph.materialize.explicit import lower

    out: dict[int, dict[str, float]] = {}
    for n in sizes:
        best: dict[str, float] = {}
        for _ in range(repeats + 1):
            with no_gc():
                t0 = perf_counter()
                g = define_user(ue.cg, ue.kernels, ue.buf, ue.nelem, "chain", n, ue.grid, ue.block)
                t1 = perf_counter()
                g.validate()
                t2 = perf_counter()
                lowered = lower(g, {}, [])
                t3 = perf_counter()
                topology_signature(g)
                t4 = perf_counter()
            lowered.destroy()
            del g, lowered
            gc.collect()
            # The same definition as users build it, Python's cyclic collector on: its full collections
            # traverse every node built so far, so their cost per node grows with the graph.
            t5 = perf_counter()
            g = define_user(ue.cg, ue.kernels, ue.buf, ue.nelem, "chain", n, ue.grid, ue.block)
            t6 = perf_counter()
            del g
            gc.collect()
            for phase, dt in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t6 - t5)):
                best[phase] = min(best.get(phase, float("inf")), dt / n * 1e6)
        out[n] = best
    return out


def measure_memory(ue: UserEnv, n: int = 10000, core: bool = True) -> tuple[float | None, float | None]:
    """Bytes per kernel node (tracemalloc) of a user-style cudagraph chain and (``core``: needs a GPU) of a
    cuda.core GraphDefinition chain with the same arguments."""
    ours = theirs = None
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        g = define_user(ue.cg, ue.kernels, ue.buf, ue.nelem, "chain", n, ue.grid, ue.block)
        ours = (tracemalloc.get_traced_memory()[0] - before) / n
        del g
        gc.collect()
        if core:
            theirs = _core_memory(ue, n)
    finally:
        tracemalloc.stop()
    return ours, theirs


def _core_memory(ue: UserEnv, n: int) -> float | None:
    """Bytes per kernel node of a cuda.core GraphDefinition chain (tracemalloc running), or ``None``."""

    try:
        before = tracemalloc.get_traced_memory()[0]
        gd = define_core(ue, n)
        gc.collect()
        out = (tracemalloc.get_traced_memory()[0] - before) / n
        del gd
        return out
    except Exception as exc:  # report and go on
        print(f"cuda.core GraphDefinition memory failed: {type(exc).__name__}: {exc}", flush=True)
        return None


def define_core(ue: UserEnv, n: int) -> Any:
    """A cuda.core ``GraphDefinition`` chain of ``n`` kernel nodes with the user-style arguments."""
    import numpy as np
    from cuda.core.graph import GraphDefinition

    gd = GraphDefinition()
    node = gd.launch(ue.cfg, ue.kernels[0], ue.buf, np.float32(1.0), np.int32(ue.nelem))
    for i in range(1, n):
        node = node.launch(ue.cfg, ue.kernels[i % 3], ue.buf, np.float32(1.0), np.int32(ue.nelem))
    return gd


#: What ``_memory_rss.py`` builds, and how the memory lines name it.
RSS_MODES = {
    "cudagraph": "cudagraph definition",
    "lowered": "cudagraph definition + its driver graph (lowered)",
    "cuda.core": "cuda.core GraphDefinition (Python objects + the driver's nodes)",
}
RSS_NODES = 100_000


def measure_rss(n: int = RSS_NODES, fake: bool = False, timeout: float = 300.0) -> dict[str, float | None]:
    """Resident bytes per kernel node of a user-style chain of ``n`` nodes, each build in a fresh process
    (``bench/_memory_rss.py``), by mode of :data:`RSS_MODES` (``fake``: no GPU, cudagraph's definition only).
    A build that fails is reported and gives ``None``."""
    script = Path(__file__).with_name("_memory_rss.py")
    out: dict[str, float | None] = {}
    for mode in ("cudagraph",) if fake else tuple(RSS_MODES):
        cmd = [sys.executable, str(script), mode, str(n)] + (["--fake"] if fake else [])
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
            out[mode] = json.loads(done.stdout.strip().splitlines()[-1])["bytes_per_node"]
        except (subprocess.SubprocessError, ValueError, IndexError, KeyError) as exc:
            err = getattr(exc, "stderr", "") or ""
            print(f"resident memory ({mode}) failed: {type(exc).__name__}: {exc} {err[-500:]}", flush=True)
            out[mode] = None
    return out


def rss_lines(rss: dict[str, float | None], n: int = RSS_NODES) -> list[str]:
    """The resident-memory comparison, bytes per kernel node (modes of :data:`RSS_MODES` measured)."""
    lines = [
        f"- resident memory per kernel node (growth of the process's resident set while a user-style chain of "
        f"{n} nodes is built, a fresh process each; counts the driver's memory too):"
    ]
    for mode, label in RSS_MODES.items():
        if mode in rss:
            v = rss[mode]
            lines.append(f"  - {label}: {'n/a' if v is None else f'{v:.0f} B'}")
    ours, core = rss.get("lowered"), rss.get("cuda.core")
    if ours and core:
        lines.append(f"  - ratio cudagraph (definition + driver graph) / cuda.core GraphDefinition: {ours / core:.2f}x")
    ours = rss.get("cudagraph")
    if ours and core:
        lines.append(f"  - ratio cudagraph definition / cuda.core GraphDefinition: {ours / core:.2f}x")
    return lines
