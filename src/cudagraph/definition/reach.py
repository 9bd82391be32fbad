"""Ancestor queries over a DAG numbered in a topological order, in memory linear in its nodes (GPU-free).

The edge inference and the race check ask, per node, which of a few candidate nodes (the latest accesses
its own conflict with) are ancestors of some given nodes. :class:`Reach` keeps, per node ``v``, its
ancestors among the :data:`WINDOW` nodes just before it and itself, as a bit vector (a Python int: bit
``k`` for the node at position ``v - k``): ``WINDOW / 8`` bytes a node, whatever the size of the graph, and one
shift and one OR per predecessor to make. A candidate within the window of a node is answered by a bit
test. A candidate further back (rare: the latest conflicting access of a range is usually recent) is
looked for by a walk back from the given nodes that stops at the first node near enough to answer by a
bit test, skips every node whose ancestors all lie above the candidate, and remembers per candidate the
latest node found to descend from it (the next question about it is then answered near there).

:class:`Reach` is the reference; ``cudagraph.definition._ranges.Reach`` is its compiled twin (the same answers,
over C++ arrays: see :mod:`~cudagraph.definition.compiled_ranges`), which the edge inference and the race check
use where it is built.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["WINDOW", "Reach"]

#: How many nodes before each node its bit vector covers.
WINDOW = 1024
_MASK = (1 << (WINDOW + 1)) - 1


class Reach:
    """A DAG grown one node at a time in a topological order (each predecessor at a lower position).

    Attributes
    ----------
    preds : list of list of int
        The predecessors of each node, by position.
    bits : list of int
        The ancestors of each node ``v`` and itself among positions ``v - WINDOW .. v`` (bit ``k``: ``v - k``).
    low : list of int
        The lowest position among each node's ancestors and itself.
    """

    __slots__ = ("preds", "bits", "low", "known")

    def __init__(self) -> None:
        self.preds: list[list[int]] = []
        self.bits: list[int] = []
        self.low: list[int] = []
        #: A far candidate -> the latest node found to descend from it.
        self.known: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.preds)

    def append(self, preds: list[int]) -> None:
        """Add the next node, with predecessors ``preds``."""
        bits, low = self.bits, self.low
        v = len(self.preds)
        self.preds.append(preds)
        cover = 1
        m = v
        for p in preds:
            k = v - p
            if k <= WINDOW:
                cover |= bits[p] << k
            if low[p] < m:
                m = low[p]
        bits.append(cover & _MASK)
        low.append(m)

    def add(self, given: list[int], cands: list[int]) -> list[int]:
        """Add the next node, with predecessors ``given`` and the candidates that are needed; return those.

        ``cands`` are positions, each once, in decreasing order. A candidate is needed when it is neither
        among ``given`` nor an ancestor of a node of ``given`` or of another candidate (the transitive
        reduction). Returns the needed ones in increasing order; the node's predecessors are ``given``
        and those.
        """
        preds, bits, low = self.preds, self.bits, self.low
        if given or not cands:
            self.append(given)  # the window of the given predecessors, then taken back
            preds.pop()
            cover = bits.pop()
            m = low.pop()
        else:
            cover = 1
            m = len(preds)
        v = len(preds)
        out: list[int] = []
        for c in cands:
            k = v - c
            if k <= WINDOW:
                if cover >> k & 1:
                    continue
                cover |= bits[c] << k
            elif c in given or self._far(c, given + out if out else given):  # (c is none of out: each once)
                continue
            out.append(c)
            if low[c] < m:
                m = low[c]
        out.reverse()
        preds.append(given + out if given else out)
        bits.append(cover & _MASK)
        low.append(m)
        return out

    def missing(self, v: int, cands: Iterable[int]) -> list[int]:
        """The candidates (positions below ``v``) that are not ancestors of node ``v``."""
        window = self.bits[v]
        out = []
        for c in cands:
            k = v - c
            if k <= WINDOW:
                if not window >> k & 1:
                    out.append(c)
            elif not self._far(c, [v]):
                out.append(c)
        return out

    def _far(self, c: int, seeds: list[int]) -> bool:
        """Whether ``c`` is an ancestor of one of ``seeds`` (all at positions above it)."""
        bits, preds, low, known = self.bits, self.preds, self.low, self.known
        d = known.get(c, -1)
        seen: set[int] = set()
        for s in seeds:
            if s in seen or s <= c:
                continue
            seen.add(s)
            stack = [s]
            while stack:
                y = stack.pop()
                k = y - c
                if k <= WINDOW:
                    if bits[y] >> k & 1:
                        break
                    continue
                if c < d <= y and y - d <= WINDOW and bits[y] >> (y - d) & 1:
                    break
                if low[y] > c:
                    continue
                for p in preds[y]:
                    if p == c:
                        break
                    if p > c and p not in seen:
                        seen.add(p)
                        stack.append(p)
                else:
                    continue
                break
            else:
                continue
            if s > d:
                known[c] = s
            return True
        return False
