"""Removing a node from a definition (``Graph.remove``, cuda.core's ``GraphNode.destroy``), GPU-free.

The node leaves with its edges; the nodes after it move down one place, so
creation order stays a topological order wherever it was one. A removed node
belongs to a graph of its own, named ``<removed from NAME>``, so every later
use of it (``after=``, an edge, a removal) is refused as a node of another
graph. An allocation still freed or used by other nodes is refused: remove
its users and its free node first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DefinitionError
from .core import GraphCore
from .diff import forget_flat
from .edits import before_edit
from .kinds.graph_memory import AllocNode, FreeNode
from .node import Node, bodies_of
from .validation import late_operands

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["remove_node"]


def _users(graph: Graph, alloc: Node) -> list[Node]:
    """The nodes of ``graph`` (bodies included) that use the allocation ``alloc`` as an operand."""
    out: list[Node] = []
    stack = [graph]
    while stack:
        g = stack.pop()
        for n in g._nodes:
            if n.body_fields:
                stack.extend(bodies_of(n))
            for operand, _field in late_operands(n):
                if getattr(operand, "alloc", operand) is alloc:
                    out.append(n)
                    break
    return out


def remove_node(graph: Graph, node: Node) -> None:
    """Remove ``node`` (a node of ``graph``) and its edges; see the module.

    Raises
    ------
    DefinitionError
        ``node`` is an allocation freed by a free node or used by another node (named).
    """
    with graph._lock:
        graph._fold()
        graph._edges_now()
        if type(node) is AllocNode:
            assert isinstance(node, AllocNode)
            if node.freed_by is not None:
                raise DefinitionError(
                    f"remove: {node.label} is freed by {node.freed_by.label}; remove the free node first"
                )
            users = _users(graph, node)
            if users:
                more = f" and {len(users) - 3} more" if len(users) > 3 else ""
                named = ", ".join(u.label for u in users[:3]) + more
                raise DefinitionError(f"remove: {node.label} is used by {named}; remove its users first")
        before_edit(graph)
        graph._topo = None  # the nodes after it take new indices: the record no longer speaks for the graph
        for p in list(node._preds):
            graph._unlink(p, node)
        for s in list(node._succs):
            graph._unlink(node, s)
        i = node.index
        nodes = graph._nodes
        del nodes[i]
        forget_flat(graph)  # its prefix of flat nodes counted the removed one
        for later in nodes[i:]:
            later.index -= 1
        order = graph._order
        if i < len(order):
            gone = order.pop(i)  # positions after the removed one move down: a permutation again
            order[:] = [p - 1 if p > gone else p for p in order]
        graph._succs_upto -= 1
        graph._edge_seen -= 1
        if type(node) is FreeNode:
            assert isinstance(node, FreeNode)
            node.alloc.freed_by = None
        tomb = type(graph).__new__(type(graph))  # (a subclass's own __init__ is not called)
        GraphCore.__init__(tomb, f"<removed from {graph.name}>")
        node.graph = tomb
        node._succ_list = []
