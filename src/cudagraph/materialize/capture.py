"""The capture materializer: replay a definition onto a stream under stream capture.

Each node is issued as the stream call that does the same work (kernels with
``cuLaunchKernel``, copies, fills, host functions, event records and waits) on
one stream. Before each node, the stream's capture dependencies are set to the
driver nodes its predecessors were captured as
(``cuStreamUpdateCaptureDependencies``, skipped when they already are those),
so the captured graph has the definition's edges (less those another
predecessor implies, as in explicit construction), with no forked
streams or events; after it, they are read back (``cuStreamGetCaptureInfo``):
they are what its successors depend on, and the single one after a node's one
call is the driver node made for it, kept so that the executable can update
nodes like an explicitly built one. Child graphs are replayed inline.

Runs of kernel, fill, 1-D copy and empty nodes go to the compiled
``StreamLauncher.capture`` (:data:`cudagraph.driver.stream_launch.LAUNCHER`),
which makes the same driver calls per node from C; the loop of :func:`_replay`
is its Python twin.
"""

from __future__ import annotations

from typing import Any, overload

from ..definition.bindings import node_params_uses
from ..definition.graph import Graph
from ..definition.nodes import Node
from ..driver.api import graph_destroy_quietly, stream_begin_capture, stream_end_capture_result
from ..driver.calls import ensure_context, raise_error, require_driver
from ..driver.host_callbacks import unregister
from ..driver.kernel_args import PACKING_LOCK, compiled_bindings
from ..driver.streams import capture_dependencies, new_stream, set_capture_dependencies
from ..errors import UnsupportedError
from ..ops.compiled_kinds import compiled_layout
from ..ops.lower_state import LowerState
from ..ops.registry import ops_for
from .capture_region import pause_collector, resume_collector
from .driver_edges import driver_preds
from .eager import StreamIssue, stream_launcher
from .explicit import DriverNodes, LoweredGraph, Lowering

__all__ = ["capture_lower"]


class _Replay:
    """One capture: its stream, the dependencies last set or read on it, and the driver node of each node."""

    def __init__(self, lowering: Lowering) -> None:
        self.drv = require_driver()
        self.lowering = lowering
        self.origin = new_stream()
        self.h = self.origin.handle
        self.handle = int(self.h)
        # Nodes are issued as an eager run would issue them, with this construction's callbacks.
        self.run = StreamIssue(
            lowering.bindings, lowering.sink, lowering.host_keys, LowerState(lowering.ctx, eager=True)
        )
        self.cur: list[int] = []  # the stream's capture dependencies, sorted
        self.fresh = False  # whether `cur` was read after the node being issued
        self.raw: list[int] = []  # the driver node of each node of the graph being replayed, by index
        fast = stream_launcher()
        self.fast = fast if fast is not None and fast.captures else None

    def close(self) -> None:
        self.origin.close()

    def issued(self, node: Node, h: Any) -> None:
        """Map ``node`` to the driver node the last call on the stream handle ``h`` captured."""
        deps = capture_dependencies(h, node)
        self.cur, self.fresh = sorted(deps), True
        if len(deps) == 1:
            self.raw[node.index] = deps[0]

    def inline(self, node: Node, graph: Graph, stream: Any) -> None:
        """Replay ``graph`` (the body of ``node``) after the work on ``stream``; continue after its exits."""
        raw = [0] * len(graph._nodes)
        exits = _replay(self, graph, tuple(self.cur), raw)
        _record(self.lowering, graph, raw)
        self.depend_on(exits, node)
        self.fresh = True

    def depend_on(self, deps: list[int], node: Node | None) -> None:
        """Make the next captured work depend on exactly ``deps`` (sorted; no call when it already does)."""
        if deps != self.cur:
            set_capture_dependencies(self.h, deps, node)
            self.cur = deps


def _union(groups: list[Any]) -> list[int]:
    """The driver nodes of several exit tuples, sorted, each once."""
    if len(groups) == 1:
        return sorted(set(groups[0]))
    out: set[int] = set()
    for g in groups:
        out.update(g)
    return sorted(out)


def _replay(rp: _Replay, graph: Graph, entry: tuple[int, ...], raw: list[int]) -> list[int]:
    """Capture ``graph``'s nodes, its roots after ``entry``, writing the driver node of each into ``raw``
    (by index); return the driver nodes its leaves end with."""
    order = graph.topological_order()
    total = len(order)
    exits: list[Any] = [None] * len(graph._nodes)  # node index -> the stream's dependencies after it
    outer, rp.raw = rp.raw, raw
    fast = rp.fast
    bindings = compiled_bindings(rp.run.bindings)
    try:
        i = 0
        while i < total:
            if fast is not None:  # the kernel, fill, copy and empty nodes it can take, in a row
                start = i
                i = fast.capture(order, i, rp.handle, exits, raw, entry, bindings)
                if fast.rc:
                    if fast.rc < 0:
                        raise MemoryError("capture: out of memory")
                    raise_error(rp.drv.CUresult(fast.rc), fast.failed, order[i])  # the call its twin names
                if i > start:
                    rp.cur = sorted(exits[order[i - 1].index])
                if i == total:
                    break
            node = order[i]
            ops = ops_for(node)
            why = ops.capture_refusal(node)
            if why is not None:
                raise UnsupportedError(why, node=node)
            preds = driver_preds(node)  # as explicit construction: the edges a predecessor implies are left out
            rp.depend_on(_union([exits[p.index] for p in preds]) if preds else sorted(set(entry)), node)
            rp.fresh = False
            ops.capture(rp, node, rp.origin)
            if not rp.fresh:
                rp.cur = sorted(capture_dependencies(rp.h, node))
            exits[node.index] = tuple(rp.cur)
            i += 1
    finally:
        rp.raw = outer
    if not graph._nodes:
        return sorted(set(entry))
    return _union([exits[n.index] for n in _leaves(graph)])


def _leaves(graph: Graph) -> list[Node]:
    """``graph.leaves()``, from C where the compiled ``Layout`` reads the nodes (``Layout.sinks``; the Python twin
    walks every predecessor list; bench/cpu_overhead.py: capture backend)."""
    layout = compiled_layout()
    if layout is not None:
        out = layout.sinks(graph._nodes)
        if out is not None:
            return out  # type: ignore[no-any-return]
    return graph.leaves()


def _record(lowering: Lowering, graph: Graph, raw: list[int]) -> _CapturedNodes:
    """Keep the driver node of each node of ``graph`` (``raw``, by index) and note those using parameters."""
    if lowering.bindings:
        for node in graph._nodes:
            if raw[node.index]:
                for name in node_params_uses(node):
                    lowering.param_users.setdefault(name, []).append(node)
    nodes = _CapturedNodes(raw, [None] * len(raw), require_driver().CUgraphNode)
    lowering.tracked.append((list(graph._nodes), nodes))  # read into the executable's node map on demand
    return nodes


class _CapturedNodes(DriverNodes):
    """The driver node of each top-level node by index; ``None`` for a node captured as none (an empty node)."""

    __slots__ = ()

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.raw)))]
        return super().__getitem__(index) if self.raw[index] else None


def capture_lower(graph: Graph, bindings: dict[str, Any], sink: list[Any]) -> LoweredGraph:
    """Build ``graph`` by stream capture; the result behaves like :func:`cudagraph.materialize.explicit.lower`'s."""
    drv = require_driver()
    ctx = ensure_context()
    lowering = Lowering(ctx, bindings, sink)
    rp = _Replay(lowering)
    origin = rp.h
    mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    captured = None
    collecting = pause_collector()
    top: list[int] = [0] * len(graph._nodes)
    try:
        stream_begin_capture(origin, mode)
        try:
            with PACKING_LOCK:
                exits = _replay(rp, graph, (), top)
            rp.depend_on(exits, None)  # every leaf joined to the end of the capture
        finally:
            err, captured = stream_end_capture_result(origin)
        if err:
            raise_error(err, "cuStreamEndCapture")
    except BaseException:
        if captured is not None and int(captured):
            graph_destroy_quietly(captured)
        unregister(lowering.host_keys)
        rp.close()
        raise
    finally:
        resume_collector(collecting)
    rp.close()
    return LoweredGraph(captured, graph, _record(lowering, graph, top), lowering)
