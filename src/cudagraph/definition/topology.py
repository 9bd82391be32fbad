"""Graph algorithms on definition nodes: order, reachability, cycles."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .nodes import Node

__all__ = ["kahn_order", "find_path", "find_cycle", "format_cycle"]


def kahn_order(nodes: list[Node]) -> list[Node] | None:
    """Return a topological order (ties broken by index), or ``None`` on a cycle."""
    indeg = [len(n._preds) for n in nodes]
    ready = [n for n in nodes if not n._preds]
    ready.reverse()
    order: list[Node] = []
    import heapq

    heap = [(n.index, n) for n in ready]
    heapq.heapify(heap)
    while heap:
        _, n = heapq.heappop(heap)
        order.append(n)
        for s in n._succs:
            indeg[s.index] -= 1
            if indeg[s.index] == 0:
                heapq.heappush(heap, (s.index, s))
    return order if len(order) == len(nodes) else None


def find_path(src: Node, dst: Node) -> list[Node] | None:
    """Return a path ``src -> ... -> dst`` along successor edges, or ``None``."""
    parent: dict[int, Node | None] = {src.index: None}
    stack = [src]
    while stack:
        n = stack.pop()
        if n is dst:
            path = [n]
            p = parent[n.index]
            while p is not None:
                path.append(p)
                p = parent[p.index]
            path.reverse()
            return path
        for s in n._succs:
            if s.index not in parent:
                parent[s.index] = n
                stack.append(s)
    return None


def find_cycle(nodes: list[Node]) -> list[Node] | None:
    """Return one cycle as a node list (first node repeated at the end), or ``None``."""
    white, grey, black = 0, 1, 2
    color = [white] * len(nodes)
    for root in nodes:
        if color[root.index] != white:
            continue
        stack: list[tuple[Node, int]] = [(root, 0)]
        path: list[Node] = [root]
        color[root.index] = grey
        while stack:
            n, i = stack[-1]
            if i < len(n._succs):
                stack[-1] = (n, i + 1)
                s = n._succs[i]
                if color[s.index] == grey:
                    start = path.index(s)
                    return path[start:] + [s]
                if color[s.index] == white:
                    color[s.index] = grey
                    stack.append((s, 0))
                    path.append(s)
            else:
                color[n.index] = black
                stack.pop()
                path.pop()
    return None


def format_cycle(cycle: list[Node]) -> str:
    """``kernel#1 'a' -> kernel#2 'b' -> kernel#1 'a'``."""
    return " -> ".join(n.label for n in cycle)
