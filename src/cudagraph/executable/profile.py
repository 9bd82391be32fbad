"""Per-node timing of a definition or an executable: :class:`ProfileResult`, :func:`profile_graph`.

Every top-level node is run eagerly (as ``Graph.run()`` runs it), in
topological order on one stream, between two CUDA events; the whole graph is
launched the same number of times between two events, for comparison. The
critical path is the longest path through the DAG with each node weighted by
its median time: a lower bound of the graph's time when every branch runs
concurrently.

Node times are GPU time between the events around the node: for a node shorter
than launching it from Python (a few microseconds), the time includes the wait
for the launch, so short nodes read long. A child graph is timed as one node;
conditional nodes cannot run eagerly, and a definition with them is refused.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..definition.bindings import resolve_bindings
from ..definition.graph import Graph
from ..definition.nodes import Node
from ..driver.api import (
    event_create,
    event_destroy_quietly,
    event_elapsed_time,
    event_record,
    event_synchronize,
    mem_free_async_quietly,
    stream_synchronize,
)
from ..driver.calls import ensure_context, require_driver
from ..driver.device_checks import check_devices_of
from ..driver.host_callbacks import unregister
from ..driver.kernel_args import PACKING_LOCK
from ..driver.streams import stream_handle
from ..errors import DefinitionError, HostCallbackError, MissingDependencyError, OperandError
from ..materialize.eager import StreamIssue, issue_node
from ..ops.lower_state import LowerState

if TYPE_CHECKING:
    from .executable import Executable

__all__ = ["NodeTiming", "ProfileResult", "critical_path", "profile_executable", "profile_graph"]


class NodeTiming:
    """The time of one node: ``node``, ``kind``, ``name``, ``median_us``, ``min_us`` and every sample (µs)."""

    __slots__ = ("node", "kind", "name", "median_us", "min_us", "samples_us")

    def __init__(self, node: Node, samples_us: Sequence[float]) -> None:
        if not samples_us:
            raise OperandError(f"NodeTiming: {node.label} has no time samples")
        self.node = node
        self.kind = node.kind
        self.name = node.name
        self.samples_us = tuple(float(s) for s in samples_us)
        self.median_us = statistics.median(self.samples_us)
        self.min_us = min(self.samples_us)

    def __repr__(self) -> str:
        return f"<NodeTiming {self.node.label}: {self.median_us:.2f} us>"


def critical_path(order: Sequence[Node], times_us: dict[int, float]) -> tuple[list[Node], float]:
    """The longest path through the DAG whose nodes are ``order``, weighted by ``times_us[id(node)]``.

    Parameters
    ----------
    order : sequence of Node
        The nodes of one graph in topological order.
    times_us : dict
        Time of each node by ``id(node)``.

    Returns
    -------
    (list of Node, float)
        The path from a root to a leaf, and its length (the sum of its times).
        Ties are broken by the earlier node in ``order``.
    """
    finish: dict[int, float] = {}
    via: dict[int, Node | None] = {}
    for n in order:
        best: Node | None = None
        start = 0.0
        for p in n._preds:
            f = finish[id(p)]
            if best is None or f > start:
                best, start = p, f
        finish[id(n)] = start + times_us[id(n)]
        via[id(n)] = best
    if not order:
        return [], 0.0
    last = order[0]
    for n in order:
        if finish[id(n)] > finish[id(last)]:
            last = n
    path: list[Node] = []
    cur: Node | None = last
    while cur is not None:
        path.append(cur)
        cur = via[id(cur)]
    path.reverse()
    return path, finish[id(last)]


class ProfileResult:
    """Per-node times, the whole launch and the critical path of one graph.

    Made by :meth:`Graph.profile <cudagraph.Graph.profile>` and
    :meth:`Executable.profile <cudagraph.Executable.profile>`; ``str()`` is a table.

    Parameters
    ----------
    graph : Graph
        The definition profiled.
    order : sequence of Node
        Its nodes in topological order.
    samples_us : dict
        Node time samples by ``id(node)``, in microseconds.
    launch_us : sequence of float
        Whole-graph launch times, in microseconds (may be empty).

    Attributes
    ----------
    nodes : list of NodeTiming
        One row per node, in topological order.
    launch_us : float or None
        Median time of a whole-graph launch.
    critical_path : list of Node
        The longest path through the DAG by median node time.
    critical_path_us : float
        Its length.
    """

    __slots__ = ("graph", "nodes", "launch_us", "launch_samples_us", "critical_path", "critical_path_us")

    def __init__(
        self, graph: Graph, order: Sequence[Node], samples_us: Mapping[int, Sequence[float]], launch_us: Sequence[float]
    ) -> None:
        self.graph = graph
        self.nodes = [NodeTiming(n, samples_us[id(n)]) for n in order]
        self.launch_samples_us = tuple(float(s) for s in launch_us)
        self.launch_us = statistics.median(self.launch_samples_us) if self.launch_samples_us else None
        times = {id(t.node): t.median_us for t in self.nodes}
        self.critical_path, self.critical_path_us = critical_path(order, times)

    @property
    def eager_us(self) -> float:
        """The sum of the median node times (the time of running the nodes one after another)."""
        return sum(t.median_us for t in self.nodes)

    def schedule(self) -> list[tuple[NodeTiming, float]]:
        """Each node with its earliest start (µs) when every node starts once its predecessors have finished."""
        finish: dict[int, float] = {}
        out = []
        for t in self.nodes:
            start = max((finish[id(p)] for p in t.node._preds), default=0.0)
            finish[id(t.node)] = start + t.median_us
            out.append((t, start))
        return out

    def __str__(self) -> str:
        on_path = {id(n) for n in self.critical_path}
        width = max([len(t.name) for t in self.nodes] + [4])
        lines = [
            f"Profile of Graph {self.graph.name!r}: {len(self.nodes)} nodes",
            f"  {'#':>5} {'kind':<13} {'name':<{width}} {'median us':>10} {'min us':>10}  critical",
        ]
        for t in self.nodes:
            mark = "*" if id(t.node) in on_path else ""
            lines.append(
                f"  {t.node.index:>5} {t.kind:<13} {t.name:<{width}} {t.median_us:>10.2f} {t.min_us:>10.2f}  {mark}"
            )
        path = " -> ".join(f"#{n.index}" for n in self.critical_path) or "-"
        lines.append(f"  critical path: {path}: {self.critical_path_us:.2f} us")
        lines.append(f"  nodes one after another: {self.eager_us:.2f} us")
        if self.launch_us is not None:
            lines.append(f"  whole graph launch: {self.launch_us:.2f} us")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<ProfileResult of Graph {self.graph.name!r}: {len(self.nodes)} nodes, "
            f"critical path {self.critical_path_us:.2f} us>"
        )

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """Draw a timeline (one bar per node at its earliest start, the critical path in red) to ``path``.

        Raises
        ------
        MissingDependencyError
            matplotlib is not installed.
        """
        try:
            import matplotlib  # type: ignore[import-not-found,unused-ignore]

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise MissingDependencyError(
                "ProfileResult.plot needs matplotlib (pip install matplotlib); str(result) is the table"
            ) from None
        on_path = {id(n) for n in self.critical_path}
        rows = self.schedule()
        fig, ax = plt.subplots(figsize=(10, max(2.0, 0.3 * len(rows) + 1)))
        for y, (t, start) in enumerate(rows):
            color = "#d62728" if id(t.node) in on_path else "#1f77b4"
            ax.barh(y, t.median_us, left=start, color=color)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([f"#{t.node.index} {t.name[:30]}" for t, _ in rows])
        ax.invert_yaxis()
        ax.set_xlabel("time (us)")
        title = f"{self.graph.name[:60]}: critical path {self.critical_path_us:.1f} us"
        if self.launch_us is not None:
            title += f", graph launch {self.launch_us:.1f} us"
        ax.set_title(title)
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out)
        plt.close(fig)
        return out


def _check_repeats(repeats: Any) -> int:
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise OperandError(f"profile: repeats must be a positive int, got {repeats!r}")
    return repeats


def _elapsed_us(start: Any, end: Any) -> float:
    return float(event_elapsed_time(start, end)) * 1000.0


def _time_nodes(
    graph: Graph, h: Any, bindings: dict[str, Any], repeats: int
) -> tuple[list[Node], dict[int, list[float]]]:
    """Run the nodes eagerly ``repeats`` times (after one warm-up run) with events around each; samples in µs."""
    order = graph.topological_order()
    for n in order:
        if n.conditional_bodies or n.kind == "set_condition":
            raise DefinitionError(
                f"profile: {n.label} of Graph {graph.name!r} runs only inside a graph and cannot be timed alone; "
                "time the whole launch with exe.launch between events instead"
            )
    check_devices_of(graph)  # devices and peers, as lowering and an eager run check them
    events = [event_create(0) for _ in range(2 * len(order))]
    samples: dict[int, list[float]] = {id(n): [] for n in order}
    sink: list[Any] = []
    keys: list[int] = []
    try:
        for r in range(repeats + 1):
            with PACKING_LOCK:
                state = LowerState(ensure_context(), eager=True)
                run = StreamIssue(bindings, sink, keys, state)
                try:
                    for i, node in enumerate(order):
                        event_record(events[2 * i], h)
                        issue_node(node, h, run)
                        event_record(events[2 * i + 1], h)
                finally:
                    for key, (_alloc, addr) in state.allocs.items():
                        if key not in state.freed:
                            mem_free_async_quietly(addr, h)
            stream_synchronize(h)
            if r:  # the first run warms up (module loading, first launches)
                for i, node in enumerate(order):
                    samples[id(node)].append(_elapsed_us(events[2 * i], events[2 * i + 1]))
    finally:
        stream_synchronize(h)
        if keys:
            unregister(keys)
        for e in events:
            event_destroy_quietly(e)
    if sink:
        node, exc = sink[0]
        raise HostCallbackError(
            f"host callback {node.label} of Graph {graph.name!r} raised {type(exc).__name__}: {exc}", node
        ) from exc
    return order, samples


def _time_launches(exe: Executable, stream: Any, h: Any, repeats: int) -> list[float]:
    start = event_create(0)
    end = event_create(0)
    out: list[float] = []
    try:
        exe.launch(stream)  # warm-up (upload)
        stream_synchronize(h)
        for _ in range(repeats):
            event_record(start, h)
            exe.launch(stream)
            event_record(end, h)
            event_synchronize(end)
            out.append(_elapsed_us(start, end))
        exe.check()
    finally:
        event_destroy_quietly(start)
        event_destroy_quietly(end)
    return out


def profile_graph(graph: Graph, stream: Any, repeats: int, params: dict[str, Any]) -> ProfileResult:
    """Time every node of ``graph`` and its whole launch; see :meth:`Graph.profile <cudagraph.Graph.profile>`."""
    repeats = _check_repeats(repeats)
    graph._validate_structure()
    bindings = resolve_bindings(graph, params)
    require_driver()
    ensure_context()
    h = stream_handle(stream)
    order, samples = _time_nodes(graph, h, bindings, repeats)
    with graph.instantiate(**params) as exe:
        launches = _time_launches(exe, stream, h, repeats)
    return ProfileResult(graph, order, samples, launches)


def profile_executable(exe: Executable, stream: Any, repeats: int) -> ProfileResult:
    """Time every node of ``exe``'s definition (with its bound parameters) and its launch (``Executable.profile``)."""
    repeats = _check_repeats(repeats)
    exe._require_open()
    ensure_context()
    h = stream_handle(stream)
    order, samples = _time_nodes(exe.graph, h, dict(exe._bindings), repeats)
    launches = _time_launches(exe, stream, h, repeats)
    return ProfileResult(exe.graph, order, samples, launches)
