"""Events: ``EventRecordNode`` and ``EventWaitNode``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...definition.nodes import EventRecordNode, EventWaitNode, Node
from ...driver.calls import check, require_driver
from ..operands import event_handle
from .base import KindOps, Lifter, ParamsEnv, StreamRun

if TYPE_CHECKING:
    from ...definition.graph import Graph

__all__ = ["OPS", "EventRecordOps", "EventWaitOps"]


class EventRecordOps(KindOps):
    """Records an event (``cuEventRecord`` on a stream)."""

    __slots__ = ()
    capturable = True
    lifts = "CU_GRAPH_NODE_TYPE_EVENT_RECORD"

    def params(self, node: EventRecordNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EVENT_RECORD
        p.eventRecord.event = event_handle(node.event)
        return p

    def issue(self, node: EventRecordNode, stream: Any, run: StreamRun) -> None:
        check(require_driver().cuEventRecord(event_handle(node.event), stream), "cuEventRecord", node)

    def lift(self, lifter: Lifter, g: Graph, dn: Any, after: Any) -> Node | None:
        ev = check(lifter.drv.cuGraphEventRecordNodeGetEvent(dn), "cuGraphEventRecordNodeGetEvent")
        return g.record(ev, after=after)


class EventWaitOps(KindOps):
    """Waits for an event (``cuStreamWaitEvent`` on a stream)."""

    __slots__ = ()
    capturable = True
    lifts = "CU_GRAPH_NODE_TYPE_WAIT_EVENT"

    def params(self, node: EventWaitNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_WAIT_EVENT
        p.eventWait.event = event_handle(node.event)
        return p

    def issue(self, node: EventWaitNode, stream: Any, run: StreamRun) -> None:
        check(require_driver().cuStreamWaitEvent(stream, event_handle(node.event), 0), "cuStreamWaitEvent", node)

    def lift(self, lifter: Lifter, g: Graph, dn: Any, after: Any) -> Node | None:
        ev = check(lifter.drv.cuGraphEventWaitNodeGetEvent(dn), "cuGraphEventWaitNodeGetEvent")
        return g.wait(ev, after=after)


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = (
    (EventRecordNode, EventRecordOps()),
    (EventWaitNode, EventWaitOps()),
)
