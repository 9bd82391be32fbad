"""Events: ``EventRecordNode`` and ``EventWaitNode``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ...definition.nodes import EventRecordNode, EventWaitNode, Node
from ...driver.api import (
    event_record,
    graph_event_record_node_get_event,
    graph_event_wait_node_get_event,
    stream_wait_event,
)
from ...driver.calls import require_driver
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
    #: The ``Graph`` builder that makes the node.
    builder: ClassVar[str]

    @staticmethod
    def get_event(driver_node: Any) -> Any:
        """The event of ``driver_node``, read back by the subclass's driver call (lifting)."""
        raise NotImplementedError

    def params(self, node: EventRecordNode | EventWaitNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        p = env.node_params(getattr(drv.CUgraphNodeType, self.lifts or ""))
        getattr(p, self.field).event = event_handle(node.event, node)
        return p

    def lift(self, lifter: Lifter, g: Graph, dn: Any, after: Any) -> Node | None:
        ev = self.get_event(dn)
        return getattr(g, self.builder)(ev, after=after)  # type: ignore[no-any-return]


class EventRecordOps(_EventOps):
    """Records an event (``cuEventRecord`` on a stream)."""

    __slots__ = ()
    lifts = "CU_GRAPH_NODE_TYPE_EVENT_RECORD"
    field = "eventRecord"
    get_event = staticmethod(graph_event_record_node_get_event)
    builder = "record"

    def issue(self, node: EventRecordNode, stream: Any, run: StreamRun) -> None:
        event_record(event_handle(node.event, node), stream, node=node)


class EventWaitOps(_EventOps):
    """Waits for an event (``cuStreamWaitEvent`` on a stream)."""

    __slots__ = ()
    lifts = "CU_GRAPH_NODE_TYPE_WAIT_EVENT"
    field = "eventWait"
    get_event = staticmethod(graph_event_wait_node_get_event)
    builder = "wait"

    def issue(self, node: EventWaitNode, stream: Any, run: StreamRun) -> None:
        stream_wait_event(stream, event_handle(node.event, node), 0, node=node)


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = (
    (EventRecordNode, EventRecordOps()),
    (EventWaitNode, EventWaitOps()),
)
