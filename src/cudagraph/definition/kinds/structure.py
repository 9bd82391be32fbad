"""Structure: child graphs (:class:`ChildGraphNode`), empty and join nodes (:class:`EmptyNode`) (GPU-free)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import DefinitionError, OperandError
from ..core import After, GraphCore, builder
from ..node import Node

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = ["ChildGraphNode", "EmptyNode", "StructureBuilders"]


class ChildGraphNode(Node):
    """Runs another graph definition as one node."""

    __slots__ = ("body",)
    kind = "child"
    body_fields = ("body",)
    in_conditional_body = True
    update_fields = ("body",)
    dot_style = 'shape=box3d style=filled fillcolor="#ffffff"'
    mermaid_shape = ('[["', '"]]')
    body: Graph

    def describe(self) -> str:
        return f"graph={self.body.name!r} ({len(self.body.nodes)} nodes)"

    def _rebuild(self, scratch: Graph, values: dict[str, Any], changes: dict[str, Any]) -> Node:
        body = values["body"]
        if not isinstance(body, GraphCore):
            raise OperandError(f"{self.label}: body must be a cudagraph.Graph, got {type(body).__name__}")
        if body is not self.body and self.graph in body._descendants() | {body}:
            raise DefinitionError(f"{self.label}: Graph {values['body'].name!r} contains Graph {self.graph.name!r}")
        return scratch.child(values["body"], name=self.name)


class EmptyNode(Node):
    """Does nothing; used to join branches."""

    __slots__ = ()
    kind = "empty"
    in_conditional_body = True
    update_fields = ()
    dot_style = 'shape=circle label="" width=0.2 style=filled fillcolor="#adb5bd"'
    mermaid_shape = ('(("', '"))')

    def _rebuild(self, scratch: Graph, values: dict[str, Any], changes: dict[str, Any]) -> Node:
        return scratch.empty(name=self.name)


class StructureBuilders(GraphCore):
    """The structural builders of :class:`~cudagraph.Graph`: :meth:`child`, :meth:`empty`, :meth:`join`."""

    __slots__ = ()

    @builder
    def child(self, graph: Graph, *, after: After = None, name: str | None = None) -> ChildGraphNode:
        """Add another definition as one node (it is lowered when this graph is).

        Parameters
        ----------
        graph : Graph
            The body; it is referenced, not copied, so later changes to it are
            seen by later instantiations.

        Returns
        -------
        ChildGraphNode

        Raises
        ------
        DefinitionError
            If ``graph`` is this graph or contains it.
        """
        what = self._what("child", name)
        if not isinstance(graph, GraphCore):
            raise OperandError(f"{what}: expected a cudagraph.Graph, got {type(graph).__name__}")
        if graph is self or self in graph._descendants():
            raise DefinitionError(
                f"{what}: Graph {graph.name!r} contains Graph {self.name!r}; a graph cannot contain itself"
            )
        node = ChildGraphNode.__new__(ChildGraphNode)
        node.body = graph
        self._place(node, after, what, name or graph.name)
        return node

    @builder
    def empty(self, *, after: After = None, name: str | None = None) -> EmptyNode:
        """Add an empty node (a synchronization point).

        Returns
        -------
        EmptyNode
        """
        # (the label of errors is made only on the Python path: it names the node "empty" or `name`)
        return self._place(EmptyNode.__new__(EmptyNode), after, None, name or "empty")  # type: ignore[return-value]

    @builder
    def join(self, *nodes: Node, after: After = None, name: str | None = None) -> EmptyNode:
        """Add an empty node that depends on every node in ``nodes`` (and on ``after``).

        Returns
        -------
        EmptyNode
        """
        if len(nodes) == 1 and isinstance(nodes[0], (list, tuple)):
            nodes = tuple(nodes[0])
        deps = list(nodes)
        if after is not None:
            extra = self._deps(after, self._what("join", name))
            deps += [a for a in extra if not any(a is d for d in deps)]
        return self.empty(after=deps, name=name or "join")
