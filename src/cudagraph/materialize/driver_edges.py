"""Which edges of a definition reach the driver: every edge but those a direct predecessor implies.

An edge ``p -> c`` is left out of the driver graph when another predecessor
``q`` of ``c`` has ``p`` among its own predecessors and the edges ``p -> q`` and
``q -> c`` are plain (full) dependencies: ``p -> q -> c`` already orders ``p``
before ``c``. Each such edge costs the driver time in ``cuGraphInstantiate``,
far more than the local check costs (``bench/construction.py``'s user-style
chain, every fourth node after its two predecessors); it looks one level up
only, which catches the common ``after=[prev, prev2]`` and costs nothing for a
node with one predecessor.

Programmatic edges (a kernel node with launch attributes, see
``Graph.kernel(programmatic=...)``; the kinds of
:data:`~cudagraph.definition.diff.LAUNCH_ATTR_CLASSES`) do not order completion, so a node whose
incoming edges may be programmatic is neither reduced nor used as the
intermediate ``q``. Reachability through plain edges is unchanged: every edge
left out is redundant in the graph of plain edges, and removing any set of
redundant edges from a DAG keeps what reaches what.

The capture backend sets a captured node's dependencies by the same rule. The
compiled ``KernelLoop`` and ``StreamLauncher.capture`` apply it through
``driver/_native_edges.c``; :func:`driver_preds` is their twin.
"""

from __future__ import annotations

from ..definition.diff import LAUNCH_ATTR_CLASSES
from ..definition.node import Node

__all__ = ["driver_preds", "plain_in"]


def plain_in(node: Node) -> bool:
    """Whether every edge into ``node`` is a plain dependency: a node of a kind that has no programmatic edges
    (its spec's ``programmatic_edges``), or a node of exactly a kind of
    :data:`~cudagraph.definition.diff.LAUNCH_ATTR_CLASSES` without launch attributes."""
    if type(node) in LAUNCH_ATTR_CLASSES:
        return node.attrs is None  # type: ignore[attr-defined]
    return not node.programmatic_edges


def driver_preds(node: Node) -> list[Node]:
    """The predecessors of ``node`` whose edges are given to the driver (see the module's rule).

    ``node._preds`` itself when nothing is left out (always for fewer than two
    predecessors), else a new list in the same order. Linear in the
    predecessors and their own predecessors (a 1,000-wide fan-in is one pass).
    """
    preds = node._preds
    if len(preds) < 2 or not plain_in(node):
        return preds
    ids = {id(p) for p in preds}
    implied: set[int] = set()
    for q in preds:
        if plain_in(q):
            for r in q._preds:
                if id(r) in ids:
                    implied.add(id(r))
    if not implied:
        return preds
    return [p for p in preds if id(p) not in implied]
