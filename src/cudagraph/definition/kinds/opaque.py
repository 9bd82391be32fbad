"""Opaque nodes: a driver node read back from a foreign graph that has no typed kind here."""

from __future__ import annotations

from typing import Any

from ..node import Node

__all__ = ["OpaqueNode"]


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
