"""Whole-tree checks of conditional nodes and graph memory, run before the driver (GPU-free).

A definition is a tree of graphs: the root, the bodies of its child-graph
nodes and the bodies of its conditional nodes, at any depth. The rules here
span that tree: a condition belongs to the graph that declared it, conditional
bodies hold only the node kinds the driver accepts there, and an allocation is
used only between its alloc and free nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError, ForeignNodeError
from .condition import Condition
from .kinds.kernel import check_launch_attrs as check_launch_attrs
from .kinds.kernel import placeholder_args as placeholder_args
from .node import Node, bodies_of, graph_address
from .nodes import NODE_CLASSES, AllocNode

if TYPE_CHECKING:
    from .graph import Graph
    from .kinds.conditionals import ConditionalNode

__all__ = [
    "BODY_KINDS",
    "BODY_KIND_NAMES",
    "check_launch_attrs",
    "check_tree",
    "late_operands",
    "placeholder_args",
]

#: Node classes a conditional body (and every graph inside one) may hold, as the driver documents
#: for ``CUDA_CONDITIONAL_NODE_PARAMS``: kernels (set_condition is one), empty nodes, copies, fills,
#: child graphs and conditionals. Read from each kind's ``in_conditional_body``.
BODY_KINDS: tuple[type, ...] = tuple(cls for cls in NODE_CLASSES if cls.in_conditional_body)
BODY_KIND_NAMES = "kernel, set_condition, empty, memcpy, memcpy2d/3d, memset, child graph and conditional"


def late_operands(node: Node) -> list[tuple[Any, str]]:
    """The operands of ``node`` that exist only once the graph is built, with where they are used.

    Read from the kind's spec: the elements of its ``arg_fields`` and its ``pointer_fields``.

    Returns
    -------
    list of (operand, field)
        Conditions and allocations (``AllocNode`` / ``AllocOffset``).
    """
    out: list[tuple[Any, str]] = []
    for f in node.arg_fields:
        for i, a in enumerate(getattr(node, f)):
            if type(a) is Condition or graph_address(a):
                out.append((a, f"argument {i}"))
    for f in node.pointer_fields:
        v = getattr(node, f)
        if graph_address(v):
            out.append((v, f))
    return out


class _Walk:
    """State of one walk over a definition tree."""

    def __init__(self) -> None:
        # id(cond) -> (cond, [nodes that set it or pass it to a kernel])
        self.cond_users: dict[int, tuple[Condition, list[Node]]] = {}
        # id(cond) of conditions some conditional node of the tree uses
        self.cond_nodes: set[int] = set()
        # id(alloc) -> (alloc, [(anchor in alloc.graph, user)])
        self.alloc_users: dict[int, tuple[AllocNode, list[tuple[Node, Node]]]] = {}
        self.allocs: dict[int, AllocNode] = {}
        self.active: set[int] = set()


def _where(chain: list[tuple[Graph, Node | None]]) -> str:
    return f"Graph {chain[-1][0].name!r}"


def _check_cond_scope(cond: Condition, node: Node, chain: list[tuple[Graph, Node | None]], bodies_only: bool) -> None:
    """``cond`` must be declared by a graph enclosing ``node`` (through conditional bodies only, if asked)."""
    for graph, via in reversed(chain):
        if graph is cond.graph:
            return
        if bodies_only and (via is None or not via.conditional_bodies):
            break
    if bodies_only:
        raise ForeignNodeError(
            f"{node.label} of {_where(chain)} uses {cond.label} of Graph {cond.graph.name!r}; a conditional "
            "node must be in the graph that declared its condition or in a conditional body inside it"
        )
    raise ForeignNodeError(
        f"{node.label} of {_where(chain)} uses {cond.label} of Graph {cond.graph.name!r}, which does not "
        "enclose it; a condition is used inside the graph that declared it"
    )


def _walk(w: _Walk, chain: list[tuple[Graph, Node | None]], in_body: ConditionalNode | None) -> None:
    graph = chain[-1][0]
    if id(graph) in w.active:
        raise DefinitionError(f"Graph {graph.name!r} contains itself")
    w.active.add(id(graph))
    for n in graph._nodes:
        if in_body is not None and not n.in_conditional_body:
            raise DefinitionError(
                f"{n.label} of {_where(chain)} is inside the body of {in_body.label} of Graph "
                f"{in_body.graph.name!r}: a conditional body may hold only {BODY_KIND_NAMES} nodes, "
                f"not {n.kind} nodes"
            )
        if n.conditional_bodies:
            cn: ConditionalNode = n  # type: ignore[assignment]
            _check_cond_scope(cn.cond, cn, chain, bodies_only=True)
            w.cond_nodes.add(id(cn.cond))
            cn._check_bodies(_where(chain))
            for b in cn.bodies:
                _walk(w, [*chain, (b, cn)], cn)
            continue
        if n.body_fields:
            for b in bodies_of(n):
                _walk(w, [*chain, (b, n)], in_body)
            continue
        if graph_address(n):  # an alloc node
            w.allocs[id(n)] = n  # type: ignore[assignment]
            continue
        for field in n.condition_fields:
            cond = getattr(n, field)
            _check_cond_scope(cond, n, chain, bodies_only=False)
            w.cond_users.setdefault(id(cond), (cond, []))[1].append(n)
        for operand, field in late_operands(n):
            if type(operand) is Condition:
                _check_cond_scope(operand, n, chain, bodies_only=False)
                w.cond_users.setdefault(id(operand), (operand, []))[1].append(n)
                continue
            alloc = getattr(operand, "alloc", operand)  # an AllocNode, or the AllocNode of an AllocOffset
            for j, (g, _via) in enumerate(chain):
                if g is alloc.graph:
                    anchor = chain[j + 1][1] if j + 1 < len(chain) else n
                    assert anchor is not None
                    w.alloc_users.setdefault(id(alloc), (alloc, []))[1].append((anchor, n))
                    break
            else:
                raise ForeignNodeError(
                    f"{n.label} of {_where(chain)}: {field} is {alloc.label} of Graph {alloc.graph.name!r}, "
                    "which does not enclose it; use an allocation inside the graph that made it"
                )
    w.active.discard(id(graph))


def _reach(start: Node, forward: bool) -> set[int]:
    seen: set[int] = set()
    stack = [start]
    while stack:
        n = stack.pop()
        for m in n._succs if forward else n._preds:
            if id(m) not in seen:
                seen.add(id(m))
                stack.append(m)
    return seen


def _user(anchor: Node, user: Node) -> str:
    return user.label if anchor is user else f"{user.label} (inside {anchor.label})"


def _check_alloc(alloc: AllocNode, users: list[tuple[Node, Node]]) -> None:
    after_alloc = _reach(alloc, forward=True)
    free = alloc.freed_by
    before_free: set[int] = set()
    after_free: set[int] = set()
    if free is not None:
        if id(free) not in after_alloc:
            raise DefinitionError(
                f"{free.label} frees {alloc.label} but is not ordered after it; give it after={alloc.name!r}'s "
                "node (or after the nodes that use the allocation)"
            )
        before_free = _reach(free, forward=False)
        after_free = _reach(free, forward=True)
    for anchor, user in users:
        if id(anchor) not in after_alloc:
            raise DefinitionError(
                f"{_user(anchor, user)} uses {alloc.label} of Graph {alloc.graph.name!r} but is not ordered "
                "after it; the address has no memory behind it yet (add the alloc node to after=)"
            )
        if free is None or anchor is free:
            continue
        if id(anchor) in after_free:
            raise DefinitionError(
                f"{_user(anchor, user)} uses {alloc.label} after it is freed by {free.label} (use after free)"
            )
        if id(anchor) not in before_free:
            raise DefinitionError(
                f"{_user(anchor, user)} uses {alloc.label} but is not ordered before {free.label}; the memory "
                "could be freed while it runs (add it to the free node's after=)"
            )


def check_tree(root: Graph) -> None:
    """Check conditions, conditional bodies and allocations across the tree rooted at ``root``.

    Raises
    ------
    ForeignNodeError
        A condition or allocation used outside the graph that made it.
    DefinitionError
        A node kind not allowed in a conditional body, an empty while body,
        a condition set by kernels but used by no conditional node, or an
        allocation used before its alloc node, after its free node, or not
        ordered before its free node.
    """
    w = _Walk()
    # A conditional body is checked in place: the graphs around it are part of its chain.
    chain: list[tuple[Graph, Node | None]] = [(root, root._owner)]
    while chain[0][1] is not None:
        owner = chain[0][1]
        chain.insert(0, (owner.graph, owner.graph._owner))
    chain[0] = (chain[0][0], None)
    _walk(w, chain, root._owner)
    for key, (cond, users) in w.cond_users.items():
        if key not in w.cond_nodes:
            raise DefinitionError(
                f"{cond.label} of Graph {cond.graph.name!r} is set by {users[0].label} but no conditional node "
                "uses it; pass it to if_/if_else/while_/switch"
            )
    for key, alloc in w.allocs.items():
        entry = w.alloc_users.get(key)
        _check_alloc(alloc, entry[1] if entry is not None else [])
