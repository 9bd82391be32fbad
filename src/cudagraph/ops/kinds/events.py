"""Events: ``EventRecordNode`` and ``EventWaitNode``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ...definition.nodes import EventRecordNode, EventWaitNode, Node
from ...driver.calls import check, require_driver
from ..operands import event_handle
from .base import KindOps, Lifter, ParamsEnv, StreamRun

if TYPE_CHECKING:
    from ...definition.graph import Graph

__all__ = ["OPS", "EventRecordOps", "EventWaitOps"]


class _EventOps(KindOps):
    """An event node; the subclasses name its fields, its stream call and its builder."""

    __slots__ = ()
    capturable = True
    #: The member of ``CUgraphNodeParams`` that holds the event.
    field: ClassVar[str]
    #: The driver call that reads a driver node's event back (lifting).
    get_event: ClassVar[str]
    #: The ``Graph`` builder that makes the node.
    builder: ClassVar[str]

    def params(self, node: EventRecordNode | EventWaitNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        p = env.node_params(getattr(drv.CUgraphNodeType, self.lifts or ""))
        getattr(p, self.field).event = event_handle(node.event, node)
        return p

    def lift(self, lifter: Lifter, g: Graph, dn: Any, after: Any) -> Node | None:
        ev = check(getattr(lifter.drv, self.get_event)(dn), self.get_event)
        return getattr(g, self.builder)(ev, after=after)  # type: ignore[no-any-return]


class EventRecordOps(_EventOps):
    """Records an event (``cuEventRecord`` on a stream)."""

    __slots__ = ()
    lifts = "CU_GRAPH_NODE_TYPE_EVENT_RECORD"
    field = "eventRecord"
    get_event = "cuGraphEventRecordNodeGetEvent"
    builder = "record"

    def issue(self, node: EventRecordNode, stream: Any, run: StreamRun) -> None:
        check(require_driver().cuEventRecord(event_handle(node.event, node), stream), "cuEventRecord", node)


class EventWaitOps(_EventOps):
    """Waits for an event (``cuStreamWaitEvent`` on a stream)."""

    __slots__ = ()
    lifts = "CU_GRAPH_NODE_TYPE_WAIT_EVENT"
    field = "eventWait"
    get_event = "cuGraphEventWaitNodeGetEvent"
    builder = "wait"

    def issue(self, node: EventWaitNode, stream: Any, run: StreamRun) -> None:
        check(require_driver().cuStreamWaitEvent(stream, event_handle(node.event, node), 0), "cuStreamWaitEvent", node)


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = (
    (EventRecordNode, EventRecordOps()),
    (EventWaitNode, EventWaitOps()),
)
