"""A node's predecessors or successors as a mutable set, as cuda.core's ``GraphNode.pred`` / ``succ`` are.

Adding a node adds the edge (:meth:`cudagraph.Graph.add_edge`: cycles and duplicates refused as there);
discarding one removes it (:meth:`cudagraph.Graph.remove_edge`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, MutableSet
from typing import TYPE_CHECKING, Any

from ...errors import OperandError

if TYPE_CHECKING:
    from .definition import GraphNode

__all__ = ["Adjacency"]


class Adjacency(MutableSet["GraphNode"]):
    """The predecessors (``succs=False``) or successors of the compat node ``owner``, live."""

    __slots__ = ("_owner", "_succs")

    def __init__(self, owner: GraphNode, succs: bool) -> None:
        self._owner = owner
        self._succs = succs

    def _nodes(self) -> list[Any]:
        n = self._owner._node
        if n is None:
            return []
        return list(n._succs) if self._succs else list(n.predecessors)

    def _other(self, value: Any, what: str) -> Any:
        if getattr(value, "_def", None) is None or getattr(value, "_node", None) is None:  # not a compat node
            got = type(value).__name__
            raise OperandError(f"compat GraphNode.{what}: expected a GraphNode of the definition, got {got}")
        if self._owner._node is None:
            raise OperandError(f"compat GraphNode.{what}: the entry point has no edges")
        return value._node

    def __contains__(self, value: object) -> bool:
        node = getattr(value, "_node", None)
        return node is not None and any(n is node for n in self._nodes())

    def __iter__(self) -> Iterator[GraphNode]:
        d = self._owner._def
        return iter([d._wrap(n) for n in self._nodes()])

    def __len__(self) -> int:
        return len(self._nodes())

    def add(self, value: GraphNode) -> None:
        """Add the edge from ``value`` (to it, for successors); nothing if it exists."""
        other = self._other(value, "succ.add" if self._succs else "pred.add")
        if value not in self:
            self._edit(self._owner._def._g.add_edge, other)

    def discard(self, value: GraphNode) -> None:
        """Remove the edge from ``value`` (to it, for successors), if there is one."""
        if value in self:
            self._edit(self._owner._def._g.remove_edge, value._node)

    def _edit(self, edit: Callable[[Any, Any], None], other: Any) -> None:
        """``edit(src, dst)`` of the edge between the owner and ``other``, in this set's direction."""
        me = self._owner._node
        if self._succs:
            edit(me, other)
        else:
            edit(other, me)

    def replace(self, values: Iterable[GraphNode]) -> None:
        """Make the set ``values`` (the edges of the others removed, the missing ones added)."""
        wanted = list(values)
        for v in list(self):
            if v not in wanted:
                self.discard(v)
        for v in wanted:
            self.add(v)

    def __repr__(self) -> str:
        return f"{{{', '.join(map(repr, self))}}}"
