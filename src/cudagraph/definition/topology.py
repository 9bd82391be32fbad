"""Graph algorithms on definition nodes: order, reachability, cycles."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .nodes import Node

__all__ = ["kahn_order", "find_path", "find_cycle", "format_cycle", "keep_order"]


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


def keep_order(order: list[int], src: Node, dst: Node, nodes: list[Node]) -> bool:
    """Keep ``order`` a topological order once the edge ``src -> dst`` is added; ``False`` if it closes a cycle.

    ``order[i]`` is the position of node ``i`` in a topological order (a
    permutation of ``range(len(order))``; a node past its end, one another
    thread is adding, is at its own index, after every other). The edge
    needs work only when ``src`` comes after ``dst``; then only the nodes
    between the two positions that ``dst`` reaches or that reach ``src`` are
    visited and given each other's positions (Pearce and
    Kelly's dynamic topological order), so a long run of edits stays cheap.
    The caller extends ``order`` to every node of ``nodes`` (the graph's) first.
    """
    lo, hi = order[dst.index], order[src.index]
    if hi < lo:
        return True
    fwd: list[Node] = [dst]
    seen = {dst.index}
    stack = [dst]
    while stack:
        n = stack.pop()
        for s in n._succs:
            if s is src:
                return False
            i = s.index
            # a successor that another thread is still adding (not yet at its index) comes after every other
            if i not in seen and i < len(order) and nodes[i] is s and order[i] < hi:
                seen.add(i)
                fwd.append(s)
                stack.append(s)
    back: list[Node] = [src]
    seen_b = {src.index}
    stack = [src]
    while stack:
        n = stack.pop()
        for p in n._preds:
            i = p.index
            if i not in seen_b and order[i] > lo:  # a predecessor is older than its node: in order
                seen_b.add(i)
                back.append(p)
                stack.append(p)
    back.sort(key=lambda n: order[n.index])
    fwd.sort(key=lambda n: order[n.index])
    moved = back + fwd
    slots = sorted(order[n.index] for n in moved)
    for n, pos in zip(moved, slots):
        order[n.index] = pos
    return True
