"""Ordered paths: a stream-like builder where each op depends on the previous one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .nodes import (
    ChildGraphNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    HostNode,
    KernelNode,
    MemcpyNode,
    MemsetNode,
    Node,
)

if TYPE_CHECKING:
    from .graph import After, Graph

__all__ = ["Path"]

_N = TypeVar("_N", bound=Node)


class Path:
    """A builder that chains every op it adds after the previous one.

    Obtained from :meth:`Graph.path`; usable as a context manager. The builder
    methods take the same arguments as the graph's; an ``after=`` given to one
    of them adds dependencies on top of the previous op.

    Attributes
    ----------
    graph : Graph
        The graph the ops are added to.
    last : Node or None
        The most recent op (``None`` before the first).
    """

    __slots__ = ("graph", "_tail", "_last")

    def __init__(self, graph: Graph, start: list[Node]) -> None:
        self.graph = graph
        self._tail: list[Node] = start
        self._last: Node | None = None

    @property
    def last(self) -> Node | None:
        """The most recent op, or ``None``."""
        return self._last

    def __enter__(self) -> Path:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _after(self, after: After) -> list[Node]:
        extra = self.graph._deps(after, "path")
        return self._tail + [n for n in extra if not any(n is t for t in self._tail)]

    def _push(self, node: _N) -> _N:
        self._tail = [node]
        self._last = node
        return node

    def kernel(
        self, kernel: Any, grid: Any, block: Any, args: Any = (), *, after: After = None, **kw: Any
    ) -> KernelNode:
        """Add a kernel after the previous op; see :meth:`Graph.kernel`."""
        return self._push(self.graph.kernel(kernel, grid, block, args, after=self._after(after), **kw))

    def memcpy(self, dst: Any, src: Any, nbytes: int | None = None, *, after: After = None, **kw: Any) -> MemcpyNode:
        """Add a copy after the previous op; see :meth:`Graph.memcpy`."""
        return self._push(self.graph.memcpy(dst, src, nbytes, after=self._after(after), **kw))

    def memset(self, dst: Any, value: Any, count: int | None = None, *, after: After = None, **kw: Any) -> MemsetNode:
        """Add a fill after the previous op; see :meth:`Graph.memset`."""
        return self._push(self.graph.memset(dst, value, count, after=self._after(after), **kw))

    def host(self, fn: Callable[..., Any], *args: Any, after: After = None, name: str | None = None) -> HostNode:
        """Add a host callback after the previous op; see :meth:`Graph.host`."""
        return self._push(self.graph.host(fn, *args, after=self._after(after), name=name))

    def record(self, event: Any, *, after: After = None, name: str | None = None) -> EventRecordNode:
        """Record an event after the previous op; see :meth:`Graph.record`."""
        return self._push(self.graph.record(event, after=self._after(after), name=name))

    def wait(self, event: Any, *, after: After = None, name: str | None = None) -> EventWaitNode:
        """Wait for an event after the previous op; see :meth:`Graph.wait`."""
        return self._push(self.graph.wait(event, after=self._after(after), name=name))

    def child(self, graph: Graph, *, after: After = None, name: str | None = None) -> ChildGraphNode:
        """Add a child graph after the previous op; see :meth:`Graph.child`."""
        return self._push(self.graph.child(graph, after=self._after(after), name=name))

    def empty(self, *, after: After = None, name: str | None = None) -> EmptyNode:
        """Add an empty node after the previous op."""
        return self._push(self.graph.empty(after=self._after(after), name=name))

    def __repr__(self) -> str:
        last = self.last
        return f"<Path in Graph {self.graph.name!r}, last={last.label if last else None}>"
