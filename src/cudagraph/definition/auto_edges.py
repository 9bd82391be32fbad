"""Edges from data: each new node of a ``Graph(edges="auto")`` depends on the latest earlier nodes it conflicts with.

Two accesses conflict when they touch overlapping bytes of the same memory and one of them writes
(read after write, write after read, write after write); two reads never do. Program order is the
order in which nodes are added. For each space of memory (see :mod:`~cudagraph.definition.access`)
:class:`_Segments` keeps the byte ranges touched so far, cut where accesses start and end, and for
each range its last writer and the readers since that write: a read conflicts with the last
writers of what it reads, a write with those and the readers since. Every earlier conflicting node
is an ancestor of one of these (a writer or reader hidden behind a later write conflicts with that
write), so the new node's predecessors are the candidates that are not ancestors of another
candidate (nor of a node given with ``after=``): the transitive reduction of the conflict order.

The question "is this candidate an ancestor of another, or of a node given with ``after=``?" is answered
by :class:`~cudagraph.definition.reach.Reach`: a bit vector per node of its ancestors among the 1,024
nodes before it (a bit test for a recent candidate; a bounded walk back for an older one), in memory
linear in the nodes. Finding the candidates costs two binary searches per access (``O(log N)``) plus one
step per range it covers and per candidate. An edit of the graph in place (``add_edge``,
``remove_edge``, ``remove``, ``node.update``) marks the state stale, and the next node rebuilds it from
the nodes in a topological order.

Where the compiled modules ``cudagraph.definition._ranges`` and ``_reach`` are built (see
:mod:`~cudagraph.definition.compiled_ranges`), ``_ranges.Segments``, ``_ranges.record`` and ``_reach.Reach`` keep
the ranges and the ancestor bits in C++ arrays; :class:`_Segments`, :func:`_record` and
:class:`~cudagraph.definition.reach.Reach` are their twins, the reference, and run without them.

A conditional node's bodies are filled after it is made: its edges are inferred when the next node
is added to its graph, or when the graph is validated, instantiated or run, or asked for races.
"""

from __future__ import annotations

import heapq
import weakref
from bisect import bisect_left, bisect_right
from collections.abc import Hashable
from operator import itemgetter
from typing import TYPE_CHECKING

from . import compiled_ranges
from .access import WRITE, Region, node_regions
from .edits import watch
from .reach import Reach

if TYPE_CHECKING:
    from .core import GraphCore
    from .node import Node

__all__ = ["EDGE_MODES", "EdgeInference"]

#: The values ``Graph(edges=...)`` takes.
EDGE_MODES = ("manual", "auto")
_END = 1 << 64
_first = itemgetter(0)


class _Segments:
    """The byte ranges of one space: ``starts`` (sorted), and per range its last writer and the readers since.

    Range ``i`` is ``[starts[i], starts[i + 1])`` (the last one runs to 2**64); ``segs[i]`` is the list of its
    last writer (``-1``: none) then the nodes that read it since. Each of :meth:`read` and :meth:`write`
    collects the nodes an access conflicts with (the latest ones; ``-1`` among them stands for none) and
    records the access: two binary searches, and one step per range it covers. An empty range (``lo >= hi``)
    touches nothing.
    """

    __slots__ = ("starts", "segs")

    def __init__(self) -> None:
        self.starts = [0]
        self.segs: list[list[int]] = [[-1]]

    def read(self, lo: int, hi: int, index: int, out: set[int]) -> None:
        """Add to ``out`` the last writers of ``[lo, hi)``; node ``index`` joins the readers of each of its ranges."""
        if lo >= hi:
            return
        starts, segs = self.starts, self.segs
        i = bisect_right(starts, lo) - 1
        n = len(starts)
        j = n if hi >= _END else bisect_left(starts, hi, i + 1)  # ranges i..j-1 meet [lo, hi)
        if j == i + 1:
            seg = segs[i]
            out.add(seg[0])
            if starts[i] == lo and (starts[j] == hi if j < n else hi >= _END):  # (the last range runs to 2**64)
                seg.append(index)
                return
        else:
            out.update(map(_first, segs[i:j]))
        if starts[i] < lo:  # cut range i at lo
            i += 1
            j += 1
            n += 1
            starts.insert(i, lo)
            segs.insert(i, segs[i - 1][:])
        if hi < _END and (j == n or starts[j] > hi):  # cut range j - 1 at hi
            starts.insert(j, hi)
            segs.insert(j, segs[j - 1][:])
        for seg in segs[i:j]:
            seg.append(index)

    def write(self, lo: int, hi: int, index: int, out: set[int]) -> None:
        """Add to ``out`` the last writers and the readers since of ``[lo, hi)``; node ``index`` writes it."""
        if lo >= hi:
            return
        starts, segs = self.starts, self.segs
        i = bisect_right(starts, lo) - 1
        n = len(starts)
        j = n if hi >= _END else bisect_left(starts, hi, i + 1)  # ranges i..j-1 meet [lo, hi)
        if j == i + 1:
            out.update(segs[i])
        else:
            out.update(*segs[i:j])
        tail = hi < _END and (j == n or starts[j] > hi)  # range j - 1 runs past hi
        if starts[i] == lo and not tail:
            if j > i + 1:
                del starts[i + 1 : j], segs[i + 1 : j]
            segs[i] = [index]
            return
        new_starts, new_segs = [lo], [[index]]
        head = starts[i] < lo
        if head:
            new_starts.insert(0, starts[i])
            new_segs.insert(0, segs[i])
        if tail:
            last = segs[j - 1]
            new_starts.append(hi)
            new_segs.append(last[:] if head and j == i + 1 else last)
        starts[i:j] = new_starts
        segs[i:j] = new_segs


def _record(spaces: dict[Hashable, _Segments], regions: tuple[Region, ...], index: int) -> list[int]:
    """Record ``regions`` as node ``index``'s accesses (reads first: a range it reads and writes ends written by
    it); return the latest other nodes they conflict with, each once, in decreasing order."""
    found: set[int] = set()
    writes = None
    for r in regions:
        space, lo, hi, mode, _ = r
        if mode & WRITE:
            if writes is None:
                writes = [r]
            else:
                writes.append(r)
            continue
        seg = spaces.get(space)
        if seg is None:
            seg = spaces[space] = _Segments()
        seg.read(lo, hi, index, found)
    if writes is not None:
        for space, lo, hi, _mode, _ in writes:
            seg = spaces.get(space)
            if seg is None:
                seg = spaces[space] = _Segments()
            seg.write(lo, hi, index, found)
    found.discard(index)
    found.discard(-1)
    return sorted(found, reverse=True)


class EdgeInference:
    """One graph's edge inference: the ranges touched per space, and the graph so far as a :class:`Reach`."""

    __slots__ = ("spaces", "record", "reach", "position", "at", "count", "pending", "stale", "__weakref__")

    def __init__(self) -> None:
        self.spaces: dict[Hashable, _Segments] = {}
        #: :func:`_record` or its compiled twin (chosen when the state is rebuilt: one kind of space in it).
        self.record = _record
        #: The nodes inferred so far, by position in a topological order (a :class:`Reach` or its compiled twin).
        self.reach: Reach = compiled_ranges.new_reach()
        #: The position of each node index (``None``: the index itself), and the node at each position.
        self.position: list[int] | None = None
        self.at: list[int] = []
        #: How many node indices the state covers.
        self.count = 0
        #: A conditional node whose edges wait for its bodies (see the module docstring).
        self.pending: Node | None = None
        self.stale = True

    def _mark_stale(self) -> None:
        self.stale = True

    def _rebuild(self, graph: GraphCore, upto: int) -> None:
        """The state after the first ``upto`` nodes of ``graph`` (in order), from their edges and accesses."""
        self.spaces = {}
        ranges = compiled_ranges.RANGES
        record = self.record = _record if ranges is None else ranges.record
        nodes = [n for n in graph._nodes[:upto] if n is not None]
        order = nodes if graph._ordered else _order(nodes, upto)
        reach = self.reach = compiled_ranges.new_reach()
        identity = all(n.index == i for i, n in enumerate(order)) and len(order) == upto
        position = None if identity else [-1] * upto
        if position is not None:
            for i, n in enumerate(order):
                position[n.index] = i
        self.position = position
        self.at = [n.index for n in order]
        for n in order:
            if position is None:
                reach.append([p.index for p in n._preds if p.index < upto])
            else:
                reach.append(sorted(position[p.index] for p in n._preds if p.index < upto))
        spaces = self.spaces
        for n in nodes:
            record(spaces, node_regions(n), n.index)
        self.count = upto
        self.stale = False
        watch(graph, weakref.WeakMethod(self._mark_stale))

    def add(self, graph: GraphCore, node: Node) -> None:
        """Give ``node``, just added to ``graph``, its edges from data (or keep it pending: see the module)."""
        if node.conditional_bodies:
            self.settle(graph)
            self.pending = node
            return
        self._infer(graph, node)

    def settle(self, graph: GraphCore) -> None:
        """Infer the edges of the pending conditional node, if any."""
        node = self.pending
        if node is not None:
            self.pending = None
            if node.graph is graph and node.index < len(graph._nodes) and graph._nodes[node.index] is node:
                self._infer(graph, node)

    def _infer(self, graph: GraphCore, node: Node) -> None:
        index = node.index
        if self.stale or self.count != index:
            self._rebuild(graph, index)
        self.count = index + 1
        found = self.record(self.spaces, node_regions(node), index)
        given = node._preds
        position = self.position
        if position is None:
            added = self.reach.add([p.index for p in given] if given else [], found)
            if added:
                nodes = graph._nodes
                node._preds = [*given, *(nodes[c] for c in added)]
                graph._topo = None  # the record holds the edges the builder gave: the signature reads the nodes
            return
        position.append(len(self.reach))
        at = self.at
        at.append(index)
        preds = [position[p.index] for p in given]
        added = self.reach.add(preds, sorted((position[c] for c in found), reverse=True))
        if added:
            nodes = graph._nodes
            node._preds = [*given, *(nodes[at[c]] for c in added)]
            graph._topo = None


def _order(nodes: list[Node], upto: int) -> list[Node]:
    """``nodes`` (the first ``upto`` indices of a graph) in a topological order, ties broken by index."""
    indeg = {n.index: 0 for n in nodes}
    succs: dict[int, list[Node]] = {n.index: [] for n in nodes}
    for n in nodes:
        for p in n._preds:
            if p.index < upto and p.index in indeg:
                indeg[n.index] += 1
                succs[p.index].append(n)
    heap = [(n.index, n) for n in nodes if not indeg[n.index]]
    heapq.heapify(heap)
    out: list[Node] = []
    while heap:
        _, n = heapq.heappop(heap)
        out.append(n)
        for s in succs[n.index]:
            indeg[s.index] -= 1
            if not indeg[s.index]:
                heapq.heappush(heap, (s.index, s))
    return out if len(out) == len(nodes) else nodes
