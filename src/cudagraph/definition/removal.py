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
from .condition import Condition
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


def _named(users: list[Node]) -> str:
    more = f" and {len(users) - 3} more" if len(users) > 3 else ""
    return ", ".join(u.label for u in users[:3]) + more


def _subtree(node: Node) -> tuple[set[int], set[int], list[Node]]:
    """The ids of ``node`` and of every node inside its bodies, the ids of those bodies (at any depth), and
    the conditional nodes among the nodes."""
    ids = {id(node)}
    graphs: set[int] = set()
    conditionals = [node] if node.conditional_bodies else []
    stack = list(bodies_of(node))
    while stack:
        g = stack.pop()
        if id(g) in graphs:
            continue
        graphs.add(id(g))
        for n in g._nodes:
            ids.add(id(n))
            if n.conditional_bodies:
                conditionals.append(n)
            if n.body_fields:
                stack.extend(bodies_of(n))
    return ids, graphs, conditionals


def _condition_users(cond: Condition, skip: set[int]) -> list[Node]:
    """The nodes of the tree of ``cond.graph`` (bodies included; the nodes in ``skip`` and inside them left
    out) that set ``cond`` or pass it to a kernel."""
    out: list[Node] = []
    stack = [cond.graph]
    seen: set[int] = set()
    while stack:
        g = stack.pop()
        if id(g) in seen:
            continue
        seen.add(id(g))
        for n in g._nodes:
            if id(n) in skip:
                continue
            if n.body_fields:
                stack.extend(bodies_of(n))
            if any(getattr(n, f) is cond for f in n.condition_fields) or any(
                operand is cond for operand, _field in late_operands(n)
            ):
                out.append(n)
    return out


def _released_conditions(node: Node) -> list[tuple[Condition, Node]]:
    """``(condition, conditional node)`` for ``node`` and each conditional node inside its bodies whose condition
    is declared outside them: what removing ``node`` releases.

    Raises
    ------
    DefinitionError
        Such a condition is still set by a node left in the graph (named).
    """
    skip, bodies, conditionals = _subtree(node)
    out: list[tuple[Condition, Node]] = []
    for c in conditionals:
        cond: Condition = c.cond  # type: ignore[attr-defined]
        if id(cond.graph) in bodies:
            continue  # declared inside the removed bodies: it leaves with them
        users = _condition_users(cond, skip)
        if users:
            what = node.label if c is node else f"{node.label} (through {c.label} inside it)"
            raise DefinitionError(
                f"remove: {what} drives {cond.label} of Graph {cond.graph.name!r}, which "
                f"{_named(users)} still set{'s' if len(users) == 1 else ''}; remove those first (a condition "
                "that no conditional node uses cannot be set)"
            )
        out.append((cond, c))
    return out


def remove_node(graph: Graph, node: Node) -> None:
    """Remove ``node`` (a node of ``graph``) and its edges; see the module.

    Raises
    ------
    DefinitionError
        ``node`` is an allocation freed by a free node or used by another node, or a conditional node whose
        condition other nodes still set (named).
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
                raise DefinitionError(f"remove: {node.label} is used by {_named(users)}; remove its users first")
        released = _released_conditions(node) if node.body_fields else []
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
        for cond, conditional in released:  # each may drive a new conditional node
            cond._nodes[:] = [c for c in cond._nodes if c is not conditional]
        tomb = type(graph).__new__(type(graph))  # (a subclass's own __init__ is not called)
        GraphCore.__init__(tomb, f"<removed from {graph.name}>")
        node.graph = tomb
        node._succ_list = []
