"""Opaque nodes: driver nodes of kinds this library does not model, re-created from their driver parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...definition.kinds.opaque import OpaqueNode
from ...definition.nodes import Node, _set_base
from ...driver.calls import check
from ...errors import UnsupportedError
from .base import Builder, KindOps, Lifter

if TYPE_CHECKING:
    from ...definition.graph import Graph

__all__ = ["OPS", "OpaqueOps"]


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
            The lift in progress (its ``drv`` reads the parameters).
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
        get_params = getattr(lifter.drv, "cuGraphNodeGetParams", None)
        try:
            params = check(get_params(dn), "cuGraphNodeGetParams") if get_params is not None else None
        except RuntimeError as exc:  # cuda.bindings: the driver library does not export the call
            if "not found" not in str(exc):
                raise
            params = None
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


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = ((OpaqueNode, OpaqueOps()),)
