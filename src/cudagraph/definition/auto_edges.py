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

Ancestor sets are bit vectors (Python ints, bit ``i`` for node ``i``): testing and joining them is a
machine-word loop, N/64 words. Finding the candidates costs a binary search per access
(``O(log N)``) plus one step per range it covers and per candidate. An edit of the graph in place
(``add_edge``, ``remove_edge``, ``remove``, ``node.update``) marks the state stale, and the next node
rebuilds it from the nodes in order.

A conditional node's bodies are filled after it is made: its edges are inferred when the next node
is added to its graph, or when the graph is validated, instantiated or run, or asked for races.
"""

from __future__ import annotations

import weakref
from bisect import bisect_right
from collections.abc import Hashable
from typing import TYPE_CHECKING

from .access import WRITE, Region, node_regions
from .edits import watch
from .topology import kahn_order

if TYPE_CHECKING:
    from .core import GraphCore
    from .node import Node

__all__ = ["EDGE_MODES", "EdgeInference"]

#: The values ``Graph(edges=...)`` takes.
EDGE_MODES = ("manual", "auto")
_END = 1 << 64


class _Segments:
    """The byte ranges of one space: ``starts`` (sorted), and per range its last writer and readers since.

    Range ``i`` is ``[starts[i], starts[i + 1])`` (the last one runs to 2**64); a writer of ``-1`` is none.
    """

    __slots__ = ("starts", "writer", "readers")

    def __init__(self) -> None:
        self.starts = [0]
        self.writer = [-1]
        self.readers: list[list[int]] = [[]]

    def _cut(self, at: int) -> int:
        """The index of the range starting at ``at`` (cutting the one that holds it)."""
        starts = self.starts
        if at >= _END:
            return len(starts)
        i = bisect_right(starts, at) - 1
        if starts[i] == at:
            return i
        starts.insert(i + 1, at)
        self.writer.insert(i + 1, self.writer[i])
        self.readers.insert(i + 1, list(self.readers[i]))
        return i + 1

    def collect(self, lo: int, hi: int, mode: int, out: set[int]) -> None:
        """Add to ``out`` the nodes an access ``mode`` of ``[lo, hi)`` conflicts with (latest ones)."""
        starts = self.starts
        i = bisect_right(starts, lo) - 1
        j = bisect_right(starts, hi - 1)
        writer, readers = self.writer, self.readers
        for s in range(i, j):
            w = writer[s]
            if w >= 0:
                out.add(w)
            if mode & WRITE and readers[s]:
                out.update(readers[s])

    def record(self, lo: int, hi: int, mode: int, index: int) -> None:
        """Node ``index`` reads (``mode`` without WRITE) or writes ``[lo, hi)``."""
        i = self._cut(lo)
        j = self._cut(hi)
        if mode & WRITE:
            del self.starts[i + 1 : j], self.writer[i + 1 : j], self.readers[i + 1 : j]
            self.writer[i] = index
            self.readers[i] = []
        else:
            for s in range(i, j):
                self.readers[s].append(index)


class EdgeInference:
    """The state of one graph's edge inference: the ranges touched per space and each node's ancestor bits."""

    __slots__ = ("spaces", "ancestors", "pending", "stale", "__weakref__")

    def __init__(self) -> None:
        self.spaces: dict[Hashable, _Segments] = {}
        #: Bit ``i`` of ``ancestors[n]`` is set when node ``i`` is an ancestor of node ``n``.
        self.ancestors: list[int] = []
        #: A conditional node whose edges wait for its bodies (see the module docstring).
        self.pending: Node | None = None
        self.stale = True

    def _mark_stale(self) -> None:
        self.stale = True

    def _record(self, regions: tuple[Region, ...], index: int) -> None:
        spaces = self.spaces
        writes = []
        for r in regions:  # a node's reads first: a range it reads and writes ends written by it
            if r.mode & WRITE:
                writes.append(r)
                continue
            seg = spaces.get(r.space)
            if seg is None:
                seg = spaces[r.space] = _Segments()
            seg.record(r.lo, r.hi, r.mode, index)
        for r in writes:
            seg = spaces.get(r.space)
            if seg is None:
                seg = spaces[r.space] = _Segments()
            seg.record(r.lo, r.hi, r.mode, index)

    def _rebuild(self, graph: GraphCore, upto: int) -> None:
        """The state after the first ``upto`` nodes of ``graph`` (in order), from their edges and accesses."""
        self.spaces = {}
        nodes = [n for n in graph._nodes[:upto] if n is not None]
        ancestors = [0] * upto
        order = nodes if graph._ordered else (kahn_order(nodes) or nodes)
        for n in order:
            bits = 0
            for p in n._preds:
                if p.index < upto:
                    bits |= ancestors[p.index] | (1 << p.index)
            ancestors[n.index] = bits
        self.ancestors = ancestors
        for n in nodes:
            self._record(node_regions(n), n.index)
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
        if self.stale or len(self.ancestors) != index:
            self._rebuild(graph, index)
        ancestors = self.ancestors
        regions = node_regions(node)
        cover = 0
        for p in node._preds:
            cover |= ancestors[p.index] | (1 << p.index)
        found: set[int] = set()
        spaces = self.spaces
        for r in regions:
            seg = spaces.get(r.space)
            if seg is not None:
                seg.collect(r.lo, r.hi, r.mode, found)
        added: list[int] = []
        if len(found) == 1 and not cover:
            (c,) = found
            added.append(c)
            cover = ancestors[c] | (1 << c)
        else:
            for c in sorted(found, reverse=True):  # an ancestor has a lower index: the latest first
                if not cover >> c & 1:
                    added.append(c)
                    cover |= ancestors[c] | (1 << c)
        ancestors.append(cover)
        self._record(regions, index)
        if added:
            nodes = graph._nodes
            node._preds = [*node._preds, *(nodes[c] for c in reversed(added))]
            graph._topo = None  # the record holds the edges the builder gave: the signature reads the nodes
