"""The capture materializer: replay a definition onto streams under stream capture.

Each node is issued as the stream call that does the same work (kernels with
``cuLaunchKernel``, copies, fills, host functions, event records and waits)
on a set of streams forked from one origin stream; fan-out takes new
streams, fan-in waits on events. The captured graph is equivalent to the
explicit one (child graphs are replayed inline). The driver node made for
each definition node is read with ``cuStreamGetCaptureInfo`` so that the
executable can update nodes like an explicitly built one.
"""

from __future__ import annotations

from typing import Any

from ..definition.graph import Graph
from ..definition.nodes import Node
from ..driver.calls import check, ensure_context, raise_error, require_driver
from ..driver.host_callbacks import unregister
from ..driver.kernel_args import PACKING_LOCK
from ..errors import UnsupportedError
from ..ops.lower_state import LowerState
from ..ops.registry import ops_for
from .capture_region import pause_collector, resume_collector
from .eager import StreamIssue
from .explicit import LoweredGraph, Lowering, node_params_uses

__all__ = ["capture_lower"]


class _Replay:
    """Streams, events and the node map of one capture; each node is expressed by its kind's ``capture``."""

    def __init__(self, lowering: Lowering) -> None:
        from cuda.core import Device

        self.drv = require_driver()
        self.lowering = lowering
        self.device = Device()
        self.origin = self.device.create_stream()
        self.owned: list[Any] = [self.origin]
        self.free: list[Any] = []
        self.events: list[Any] = []
        self.tail: dict[int, Any] = {}  # id(stream handle) -> (stream, last event)
        # Nodes are issued as an eager run would issue them, with this construction's callbacks.
        self.run = StreamIssue(
            lowering.bindings, lowering.sink, lowering.host_keys, LowerState(lowering.ctx, eager=True)
        )

    def event_on(self, h: Any) -> Any:
        drv = self.drv
        ev = check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        self.events.append(ev)
        check(drv.cuEventRecord(ev, h), "cuEventRecord")
        return ev

    def new_stream(self) -> Any:
        s = self.free.pop() if self.free else None
        if s is None:
            s = self.device.create_stream()
            self.owned.append(s)
        return s

    def close(self) -> None:
        for ev in self.events:
            self.drv.cuEventDestroy(ev)
        for s in self.owned:
            s.close()

    def issued(self, node: Node, h: Any) -> None:
        """Map ``node`` to the driver node the last call on the stream handle ``h`` captured."""
        dn = _last_node(self, h, node)
        if dn is not None:
            lowering = self.lowering
            lowering.driver_nodes[id(node)] = (node, dn)
            if lowering.bindings:
                for name in node_params_uses(node):
                    lowering.param_users.setdefault(name, []).append(node)

    def inline(self, node: Node, graph: Graph, stream: Any) -> None:
        """Replay ``graph`` (the body of ``node``) after the work on ``stream``; join its exits back onto it."""
        h = stream.handle
        exits = _replay(self, graph, [(stream, self.event_on(h))])
        for s2, ev in exits:
            if s2 is not stream:
                check(self.drv.cuStreamWaitEvent(h, ev, 0), "cuStreamWaitEvent", node)


def _last_node(rp: _Replay, h: Any, node: Node) -> Any:
    res = rp.drv.cuStreamGetCaptureInfo(h)
    if res[0]:
        raise_error(res[0], "cuStreamGetCaptureInfo", node)
    deps = res[4]
    n = res[-1]
    return deps[0] if n == 1 else None


def _replay(rp: _Replay, graph: Graph, entry: list[tuple[Any, Any]]) -> list[Any]:
    """Issue ``graph``'s nodes; ``entry`` are (stream, event) the roots must follow. Returns the exits."""
    drv = rp.drv
    order = graph.topological_order()
    where: dict[int, tuple[Any, Any]] = {}  # node index -> (stream, event after it)
    claimed: set[int] = set()
    for node in order:
        ops = ops_for(node)
        why = ops.capture_refusal(node)
        if why is not None:
            raise UnsupportedError(why, node=node)
        waits = [where[p.index] for p in node._preds] or entry
        stream = None
        for p in node._preds:
            if p.index not in claimed:
                stream = where[p.index][0]
                claimed.add(p.index)
                break
        if stream is None:
            stream = rp.new_stream()
        h = stream.handle
        for s2, ev in waits:
            if s2 is not stream and ev is not None:
                check(drv.cuStreamWaitEvent(h, ev, 0), "cuStreamWaitEvent", node)
        ops.capture(rp, node, stream)
        where[node.index] = (stream, rp.event_on(h))
    leaves = [n for n in graph._nodes if not n._succs]
    if not graph._nodes:
        return entry
    return [where[n.index] for n in leaves]


def capture_lower(graph: Graph, bindings: dict[str, Any], sink: list[Any]) -> LoweredGraph:
    """Build ``graph`` by stream capture; the result behaves like :func:`cudagraph.materialize.explicit.lower`'s."""
    drv = require_driver()
    ctx = ensure_context()
    lowering = Lowering(ctx, bindings, sink)
    rp = _Replay(lowering)
    origin = rp.origin.handle
    mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    captured = None
    collecting = pause_collector()
    try:
        check(drv.cuStreamBeginCapture(origin, mode), "cuStreamBeginCapture")
        try:
            start = rp.event_on(origin)
            with PACKING_LOCK:
                exits = _replay(rp, graph, [(rp.origin, start)])
            for s2, ev in exits:
                if s2 is not rp.origin:
                    check(drv.cuStreamWaitEvent(origin, ev, 0), "cuStreamWaitEvent")
        finally:
            err, captured = drv.cuStreamEndCapture(origin)
        if err:
            raise_error(err, "cuStreamEndCapture")
    except BaseException:
        if captured is not None:
            drv.cuGraphDestroy(captured)
        unregister(lowering.host_keys)
        rp.close()
        raise
    finally:
        resume_collector(collecting)
    rp.close()
    top = [lowering.driver_nodes.get(id(n), (n, None))[1] for n in graph._nodes]
    return LoweredGraph(captured, graph, top, lowering)
