"""Events: :class:`EventRecordNode`, :class:`EventWaitNode` and their builders (GPU-free)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ...errors import OperandError, StateError
from ..core import After, GraphCore, builder
from ..node import Node

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = ["EventBuilders", "EventRecordNode", "EventWaitNode"]


_EVENT_TYPES = ("CUevent",)


def _check_event(event: Any, what: str) -> None:
    """Refuse what is no event (:class:`OperandError`) and a closed cuda.core ``Event`` (:class:`StateError`, a
    ``RuntimeError`` as cuda.core's: its handle reads 0 once closed, and a graph of it would use no event)."""
    tname = type(event).__name__
    if tname in _EVENT_TYPES:
        return
    if tname == "Event" and hasattr(event, "handle"):
        try:
            handle = event.handle
        except Exception:  # (a handle property that raises: not an event cudagraph can read)
            raise OperandError(f"{what}: the {tname}'s handle cannot be read") from None
        try:
            closed = handle is None or int(handle) == 0
        except (TypeError, ValueError):  # (a handle that is no int: read when the graph is built)
            closed = False
        if closed:
            raise StateError(f"{what}: the Event is closed (its handle is null)")
        return
    raise OperandError(f"{what}: expected a cuda.core Event or a CUevent, got {tname}")


class _EventNode(Node):
    """An event node: the event it records or waits for, re-made by :attr:`builder` on update."""

    __slots__ = ("event",)
    update_fields = ("event",)
    mermaid_shape = ('>"', '"]')
    #: The :class:`~cudagraph.Graph` builder that makes the kind (``node.update`` re-runs it).
    builder: ClassVar[str]
    event: Any

    def _check(self) -> bool:
        _check_event(self.event, f"{self.label}: event")
        return False

    def _rebuild(self, scratch: Graph, values: dict[str, Any], changes: dict[str, Any]) -> Node:
        return getattr(scratch, self.builder)(values["event"], name=self.name)  # type: ignore[no-any-return]


class EventRecordNode(_EventNode):
    """Records an event."""

    __slots__ = ()
    kind = "record"
    builder = "record"
    dot_style = 'shape=invtriangle style=filled fillcolor="#e2e3e5"'


class EventWaitNode(_EventNode):
    """Waits for an event."""

    __slots__ = ()
    kind = "wait"
    builder = "wait"
    dot_style = 'shape=triangle style=filled fillcolor="#e2e3e5"'


class EventBuilders(GraphCore):
    """The event builders of :class:`~cudagraph.Graph`: :meth:`record`, :meth:`wait`."""

    __slots__ = ()

    @builder
    def record(self, event: Any, *, after: After = None, name: str | None = None) -> EventRecordNode:
        """Add a node that records ``event`` (a ``cuda.core`` ``Event`` or ``CUevent``).

        Returns
        -------
        EventRecordNode
        """
        what = self._what("record", name)
        _check_event(event, f"{what}: event")
        node = EventRecordNode.__new__(EventRecordNode)
        node.event = event
        self._place(node, after, what, name or "record")
        return node

    @builder
    def wait(self, event: Any, *, after: After = None, name: str | None = None) -> EventWaitNode:
        """Add a node that waits for ``event`` (a ``cuda.core`` ``Event`` or ``CUevent``).

        Returns
        -------
        EventWaitNode
        """
        what = self._what("wait", name)
        _check_event(event, f"{what}: event")
        node = EventWaitNode.__new__(EventWaitNode)
        node.event = event
        self._place(node, after, what, name or "wait")
        return node
