"""Opaque nodes: a driver node read back from a foreign graph that has no typed kind here."""

from __future__ import annotations

from typing import Any

from ..node import Node, _set_base

__all__ = ["CapturedGraphNode", "OpaqueNode", "add_captured"]


class OpaqueNode(Node):
    """A node lifted from a driver graph whose kind cudagraph does not model.

    It keeps the driver's description of the node (``CUgraphNodeParams``
    from ``cuGraphNodeGetParams``) and the graph it came from, and is lowered
    by adding a node with the same parameters, so the graph round-trips.

    Attributes
    ----------
    driver_type : str
        The driver's node type name, e.g. ``"CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL"``.
    params : object
        The ``CUgraphNodeParams`` read from the driver.
    source : object
        What keeps the memory behind ``params`` valid (the source graph).
    """

    __slots__ = ("driver_type", "params", "source")
    kind = "opaque"

    driver_type: str
    params: Any
    source: Any

    def describe(self) -> str:
        return self.driver_type


class CapturedGraphNode(Node):
    """A driver graph recorded by stream capture, kept as it was recorded: one child graph node.

    Graph memory (``cuMemAllocAsync`` / ``cuMemFreeAsync`` under capture, as cuda.core's
    ``GraphMemoryResource`` does) gives each allocation its address when it is recorded; the
    program holds that address (a ``Buffer``), so the recorded graph cannot be read back and built
    anew (a new allocation node would get another address), nor cloned (the driver clones no graph
    with memory nodes). The recorded graph is moved into the first driver graph built from the
    definition (``CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE``); a second build is refused by name.

    Attributes
    ----------
    source : object
        The recorded driver graph's owner (``handle``, ``node_count``, ``taken``): it destroys the
        graph if no build took it.
    """

    __slots__ = ("source",)
    kind = "captured"

    source: Any

    def describe(self) -> str:
        n = getattr(self.source, "node_count", "?")
        return f"captured graph ({n} nodes, graph memory)"


def add_captured(path: Any, source: Any, name: str) -> CapturedGraphNode:
    """Add a :class:`CapturedGraphNode` of ``source`` (a recorded graph's owner) after the last op of ``path``."""
    g = path.graph
    node = CapturedGraphNode.__new__(CapturedGraphNode)
    _set_base(node, g, len(g._nodes), name)
    node.source = source
    g._add(node, g._deps(path._after(None), node.label))
    path._push(node)
    return node
