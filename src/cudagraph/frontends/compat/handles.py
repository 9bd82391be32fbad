"""The driver handles of a compat ``GraphDefinition`` and its nodes (cuda.core's ``gd.handle``, ``node.handle``).

cuda.core adds each node to a driver graph as it is made; a compat definition is a cudagraph
:class:`~cudagraph.Graph` that touches the driver only when asked. Asking for a handle builds the
definition as it is now (explicit lowering, as ``instantiate()`` does) and keeps that driver graph: the
same handles are given until the definition is edited (a node added, updated or removed, an edge added or
removed, at any depth), then the next request builds it again. Every driver graph built stays valid until
the definition is collected, so a handle given out earlier never dangles; what its nodes refer to (events,
kernels, callbacks, memory owners) stays alive while the driver holds a copy of it (``cuGraphClone``, a child
graph node made from it), as cuda.core keeps it with CUDA user objects
(:meth:`~cudagraph.materialize.explicit.LoweredGraph.hand_out`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ...definition.bindings import resolve_bindings
from ...definition.edits import watch
from ...errors import UnsupportedError
from ...materialize.explicit import LoweredGraph, lower
from .common import unsupported
from .lifetimes import check_open_buffers, record_addresses
from .packing import pack_graph

if TYPE_CHECKING:
    from ...definition.graph import Graph

__all__ = ["DriverGraphs", "definition_handle", "node_handle"]


def _destroy(built: list[LoweredGraph]) -> None:
    for lowered in built:
        lowered.destroy()
    built.clear()


class DriverGraphs:
    """The driver graphs built for one definition's handles (the newest one answers).

    Parameters
    ----------
    graph : Graph
        The definition.
    """

    __slots__ = ("graph", "built", "_graphs", "_stamp", "_edits", "__weakref__")

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.built: list[LoweredGraph] = []
        self._graphs: tuple[Graph, ...] = ()  # the graph and its nested graphs when last built
        self._stamp: tuple[int, ...] | None = None
        self._edits = 0
        weakref.finalize(self, _destroy, self.built)

    def _edited(self) -> None:
        self._edits += 1

    def _now(self) -> tuple[int, ...]:
        """What changes when the definition does: the edits seen and the node count of each graph built. A graph
        nested since is reached through one of these: a node added to it, or one edited in place."""
        return (self._edits, *(len(b._nodes) for b in self._graphs))

    def current(self) -> LoweredGraph:
        """The driver graph of the definition as it is now (built now if it changed since the last one)."""
        if self.built and self._now() == self._stamp:
            return self.built[-1]
        g = self.graph
        pack_graph(g)  # (an edit when an argument changes: the stamp below is taken after it)
        check_open_buffers(g)
        g.validate()
        lowered = lower(g, resolve_bindings(g, {}), [])
        record_addresses(getattr(lowered, "state", None))  # (AllocNode.dptr: the addresses of this build)
        self.built.append(lowered)
        self._graphs = (g, *g._descendants())
        for body in self._graphs:  # told once, at each graph's next in-place edit
            watch(body, weakref.WeakMethod(self._edited))
        self._stamp = self._now()
        return lowered

    def node_handle(self, node: Any) -> Any:
        """The ``CUgraphNode`` of ``node`` (at any depth) in :meth:`current`.

        Raises
        ------
        UnsupportedError
            The node is inside a child graph that this driver copies when it is embedded (one without
            ``CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE``): no handle of the built graph names it.
        """
        lowered = self.current()
        lowered.hand_out()  # (a node's handle reaches its graph: cuGraphNodeGetContainingGraph)
        entry = lowered.all_nodes.get(id(node))
        if entry is None or entry[0] is not node:
            raise UnsupportedError(
                f"compat GraphNode.handle: {node.label} is inside a child graph that this driver copies when it is "
                "embedded; the built graph has no handle of it",
                call="cuGraphAddNode",
                node=node,
            )
        return entry[1]


def _root(definition: Any) -> Any:
    while definition._parent is not None:
        definition = definition._parent
    return definition


def _graphs_of(definition: Any) -> DriverGraphs:
    if definition._handles is None:
        definition._handles = DriverGraphs(definition._g)
    return definition._handles  # type: ignore[no-any-return]


def definition_handle(definition: Any) -> Any:
    """``gd.handle``: the ``CUgraph`` of a definition made by ``GraphDefinition()`` (see the module). The body
    of a conditional or child node read through its node is refused: its graph lives inside the driver graph
    of the definition it belongs to, whose nodes' handles reach it."""
    if definition._parent is not None:
        raise unsupported(
            "GraphDefinition.handle",
            "handle",
            "the driver graph of a body read through its node; take the handle of the definition it belongs to",
        )
    return _graphs_of(definition).current().hand_out()


def node_handle(node: Any) -> Any:
    """``node.handle``: the node's ``CUgraphNode`` in the driver graph of its outermost definition, ``None``
    for the entry point and a destroyed node (as in cuda.core)."""
    if node._node is None or not node.is_valid:
        return None
    return _graphs_of(_root(node._def)).node_handle(node._node)
