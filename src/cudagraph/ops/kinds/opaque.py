"""Opaque nodes: driver nodes of kinds this library does not model, re-created from their driver parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...definition.kinds.opaque import CapturedGraphNode, OpaqueNode
from ...definition.nodes import Node, _set_base
from ...driver.api import graph_node_get_params_if_exported
from ...driver.calls import require_driver
from ...errors import UnsupportedError
from .base import Builder, KindOps, Lifter

if TYPE_CHECKING:
    from ...definition.graph import Graph

__all__ = ["OPS", "CapturedGraphOps", "OpaqueOps"]


class OpaqueOps(KindOps):
    """An :class:`OpaqueNode` is added with the ``CUgraphNodeParams`` read from its source graph."""

    __slots__ = ()
    lowers = True

    def lower(self, builder: Builder, node: OpaqueNode, handle: Any, deps: Any, ndeps: int) -> Any:
        return builder.add(handle, deps, ndeps, node.params)

    def make(self, lifter: Lifter, g: Graph, dn: Any, type_name: str, after: Any, keep: Any) -> OpaqueNode:
        """Add to ``g`` the opaque node of the driver node ``dn``, whose parameters ``keep`` keeps valid.

        Parameters
        ----------
        lifter : Lifter
            The lift in progress.
        g : Graph
            The definition being filled.
        dn : CUgraphNode
            The driver node, in a graph that ``keep`` owns.
        type_name : str
            Its ``CU_GRAPH_NODE_TYPE_...`` name.
        after : Node, list of Node or None
            Its predecessors in ``g``.
        keep : object
            What keeps the graph of ``dn`` alive (the definition holds it).
        """
        params = graph_node_get_params_if_exported(dn)
        if params is None:
            kind = type_name.replace("CU_GRAPH_NODE_TYPE_", "").lower()
            raise UnsupportedError(
                f"node #{len(g._nodes)} of {g.name!r}: a {kind} node ({type_name}) can be kept only as an opaque node, "
                "read with cuGraphNodeGetParams, which this driver does not provide",
                call="cuGraphNodeGetParams",
            )
        node = OpaqueNode.__new__(OpaqueNode)
        _set_base(node, g, len(g._nodes), type_name.replace("CU_GRAPH_NODE_TYPE_", "").lower())
        node.driver_type = type_name
        node.params = params
        node.source = keep
        deps = g._deps(after, node.label)
        g._add(node, deps)
        return node


class CapturedGraphOps(KindOps):
    """A :class:`CapturedGraphNode` moves its recorded graph into the first driver graph built (a child node).

    The recorded graph is built into one driver graph only (its memory nodes' addresses are the ones the
    program holds); it is neither run on a stream nor captured, and an executable takes no change of it.
    """

    __slots__ = ()
    lowers = True
    exec_update = None

    def lower(self, builder: Builder, node: CapturedGraphNode, handle: Any, deps: Any, ndeps: int) -> Any:
        drv = require_driver()
        move = getattr(drv, "CUgraphChildGraphNodeOwnership", None)
        if move is None:
            raise UnsupportedError(
                f"{node.label}: a recorded graph with graph memory is moved into the graph built "
                "(CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE), which this cuda-bindings does not have (CUDA 12.9 or newer)",
                node=node,
            )
        source = node.source
        if source.taken:
            raise UnsupportedError(
                f"{node.label}: its recorded graph (graph memory, {source.node_count} nodes) was moved into the first "
                "graph built from this definition; it cannot be built again (the driver neither clones a graph with "
                "memory nodes nor gives a rebuilt allocation the address the program holds): record it anew",
                node=node,
            )
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_GRAPH
        p.graph.graph = source.handle
        p.graph.ownership = move.CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE
        r = builder.add(handle, deps, ndeps, p)
        if not r[0]:
            source.taken = True  # the parent owns it now, and destroys it with itself
        return r


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = ((OpaqueNode, OpaqueOps()), (CapturedGraphNode, CapturedGraphOps()))
