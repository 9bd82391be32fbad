"""A node's predecessors or successors as a mutable set, as cuda.core's ``GraphNode.pred`` / ``succ`` are.

Adding a node adds the edge (:meth:`cudagraph.Graph.add_edge`: cycles refused as there); discarding one
removes it (:meth:`cudagraph.Graph.remove_edge`). The set operators (``|``, ``&``, ``-``, ``^``) give plain
``set`` objects, as cuda.core's do; the in-place ones (``|=``, ``&=``, ``-=``, ``^=``), :meth:`Adjacency.update`
and assigning ``node.pred = ...`` change the edges all or nothing: a refused edge (a cycle, a node of another
definition, something that is no node) leaves every edge as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, MutableSet
from typing import TYPE_CHECKING, Any

from ...errors import OperandError
from .common import DestroyedRefusal, DriverRefusal, ForeignDriverRefusal, refuse_edge_removal

if TYPE_CHECKING:
    from .definition import GraphNode

__all__ = ["Adjacency"]


class Adjacency(MutableSet["GraphNode"]):
    """The predecessors (``succs=False``) or successors of the compat node ``owner``, live."""

    __slots__ = ("_owner", "_succs")

    def __init__(self, owner: GraphNode, succs: bool) -> None:
        self._owner = owner
        self._succs = succs

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:
        """What the set operators (``|``, ``&``, ``-``, ``^``) return: a plain ``set``, not a live view."""
        return set(it)

    def _what(self, op: str) -> str:
        return f"compat GraphNode.{'succ' if self._succs else 'pred'}{op}"

    def _nodes(self) -> list[Any]:
        n = self._owner._node
        if n is None or not self._owner.is_valid:  # (a destroyed node has no edges, as under cuda.core)
            return []
        return list(n._succs) if self._succs else list(n.predecessors)

    def _other(self, value: Any, what: str) -> Any:
        """The cudagraph node of the compat node ``value``, or the refusal naming ``what``."""
        if getattr(value, "_def", None) is None or not hasattr(value, "_node"):  # not a compat node
            got = type(value).__name__
            raise OperandError(f"{what}: expected a GraphNode of the definition, got {got}")
        if self._owner._node is None or value._node is None:
            raise OperandError(f"{what}: the entry point has no edges")
        if value._def is not self._owner._def:  # (cuda.core: ValueError; this refusal is one)
            raise ForeignDriverRefusal(f"{what}: {value._node.label} is a node of another GraphDefinition")
        return value._node

    def _collect(self, values: Any, what: str) -> list[Any]:
        """The distinct cudagraph nodes of ``values`` (a compat node or an iterable of them), each checked
        before any edge changes."""
        if getattr(values, "_def", None) is not None and hasattr(values, "_node"):  # one node, as cuda.core takes
            items: list[Any] = [values]
        else:
            try:
                items = list(values)
            except TypeError:
                if hasattr(values, "__iter__"):  # an iterable that refuses (a 0-d array): the refusal names it
                    raise OperandError(
                        f"{what}: expected a GraphNode or an iterable of GraphNodes, got {type(values).__name__} "
                        "(it cannot be iterated)"
                    ) from None
                raise OperandError(
                    f"{what}: expected a GraphNode or an iterable of GraphNodes, got {type(values).__name__}"
                ) from None
        out: list[Any] = []
        for v in items:
            node = self._other(v, what)
            if not any(node is o for o in out):
                out.append(node)
        return out

    def _add_all(self, nodes: list[Any]) -> None:
        """Add the edges to (from) ``nodes`` that are not there yet, all or nothing."""
        if not nodes:
            return
        me: Any = self._owner._node  # (not None: _other refused the entry point)
        g = self._owner._def._g
        # What cuda.core refuses (a destroyed node: RuntimeError; itself: the driver's CUDAError), checked before any
        # edge changes.
        for n in (me, *nodes):
            if n.graph is not g:
                raise DestroyedRefusal(
                    f"{self._what('')}: {n.label}: GraphNode has been destroyed (it is no longer in the definition)"
                )
        if any(n is me for n in nodes):
            raise DriverRefusal(f"{self._what('')}: {me.label} cannot depend on itself")
        present = self._nodes()
        new = [n for n in nodes if not any(n is p for p in present)]
        if not new:
            return
        if self._succs:
            me.precede(*new)  # (Node.precede and Node.succeed keep none of a call's edges if one is refused)
        else:
            me.succeed(*new)

    def _remove(self, nodes: list[Any]) -> None:
        """Remove the edges to (from) ``nodes``, each of them present: all, or none where the driver refuses to
        remove edges (a graph with allocation or free nodes)."""
        if nodes:
            refuse_edge_removal(self._owner._def._g, self._what(""))
        for n in nodes:
            self._edit(self._owner._def._g.remove_edge, n)

    def _edit(self, edit: Callable[[Any, Any], None], other: Any) -> None:
        """``edit(src, dst)`` of the edge between the owner and ``other``, in this set's direction."""
        me = self._owner._node
        if self._succs:
            edit(me, other)
        else:
            edit(other, me)

    # -------------------------------------------------------------------------------- the set
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
        self._add_all([self._other(value, self._what(".add"))])

    def discard(self, value: GraphNode) -> None:
        """Remove the edge from ``value`` (to it, for successors), if there is one; anything else: nothing."""
        if value in self:
            self._remove([value._node])

    def clear(self) -> None:
        """Remove every edge of the set."""
        self._remove(self._nodes())

    def update(self, *others: Any) -> None:
        """Add the edges from every node of ``others`` (each a GraphNode or an iterable of them), all or nothing."""
        what = self._what(".update")
        nodes: list[Any] = []
        for other in others:
            nodes.extend(n for n in self._collect(other, what) if not any(n is o for o in nodes))
        self._add_all(nodes)

    def replace(self, values: Any) -> None:
        """Make the set ``values`` (a GraphNode or an iterable of them), all or nothing (``node.pred = values``).

        The new edges are added first (all or none: a refused one leaves every edge as it was), then the
        others removed. Removing edges into (out of) the owner cannot make an edge into (out of) it
        acceptable, so the order refuses exactly what the result would hold.
        """
        wanted = self._collect(values, self._what(" assignment"))
        drop = [n for n in self._nodes() if not any(n is w for w in wanted)]
        self._add_all(wanted)
        self._remove(drop)

    # ------------------------------------------------------------- in-place operators, all or nothing
    def __ior__(self, it: Any) -> Any:  # type: ignore[misc]  # (any iterable, not only a set, as cuda.core)
        if not isinstance(it, Iterable):
            return NotImplemented
        self._add_all(self._collect(it, self._what(" |=")))
        return self

    def __iand__(self, it: Any) -> Any:  # type: ignore[misc]  # (any iterable, not only a set, as cuda.core)
        if not isinstance(it, Iterable):
            return NotImplemented
        keep = [getattr(v, "_node", None) for v in list(it)]
        self._remove([n for n in self._nodes() if not any(n is k for k in keep)])
        return self

    def __isub__(self, it: Any) -> Any:  # type: ignore[misc]  # (any iterable, not only a set, as cuda.core)
        if it is self:
            self.clear()
            return self
        if not isinstance(it, Iterable):
            return NotImplemented
        gone = [getattr(v, "_node", None) for v in list(it)]
        self._remove([n for n in self._nodes() if any(n is g for g in gone)])
        return self

    def __ixor__(self, it: Any) -> Any:  # type: ignore[misc]  # (any iterable, not only a set, as cuda.core)
        if it is self:
            self.clear()
            return self
        if not isinstance(it, Iterable):
            return NotImplemented
        given = self._collect(it, self._what(" ^="))
        present = self._nodes()
        self._add_all([n for n in given if not any(n is p for p in present)])
        self._remove([p for p in present if any(p is n for n in given)])
        return self

    def __repr__(self) -> str:
        return f"{{{', '.join(map(repr, self))}}}"
