"""The race check: pairs of nodes that conflict on a byte range with no path between them (GPU-free).

Nodes are visited in a topological order; which earlier nodes are ancestors of a node is answered by
:class:`~cudagraph.definition.reach.Reach` (a bit vector per node over the 1,024 nodes before it, a
bounded walk back beyond). Each space of memory keeps, as the edge inference does, its byte ranges with
their last writer and the readers since: in a range where no race was met since its last race-free
write, every earlier access that conflicts with a new one is an ancestor of one of those, so testing
them clears the new access. Only an access that fails that test (a race) scans the earlier accesses of
its memory, and names every one it races with.

The check of one graph, given each node's regions and predecessors by position, is :func:`_race_pairs`;
where the compiled module ``cudagraph.definition._ranges`` is built (see
:mod:`~cudagraph.definition.compiled_ranges`), its ``race_pairs`` runs instead: the same loop over C++ arrays
(:func:`_race_pairs`, with :class:`_Space` and :class:`~cudagraph.definition.reach.Reach`, is its twin, the
reference, and runs without it).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable
from operator import itemgetter
from typing import TYPE_CHECKING

from ..errors import RaceError
from . import compiled_ranges, reach
from .access import WRITE, Region, memory_name, regions_of
from .reach import Reach

if TYPE_CHECKING:
    from .graph import Graph
    from .node import Node

__all__ = ["Race", "RaceCheck", "check_races", "find_races"]

_END = 1 << 64
_first = itemgetter(0)


class Race:
    """Two nodes that access overlapping bytes, one of them writing, with no path between them.

    Attributes
    ----------
    first, second : Node
        The two nodes (``first`` comes first in the graph's topological order).
    memory : str
        The memory and byte range, as in the access labels (``$x[0:64]``, ``alloc#2``, ``0x7f00+4096``).
    lo, hi : int
        The byte range ``[lo, hi)`` that both touch (addresses, or offsets into a parameter or allocation).
    accesses : str
        ``"write/write"``, ``"write/read"`` or ``"read/write"``: what ``first`` and ``second`` do there.
    """

    __slots__ = ("first", "second", "memory", "lo", "hi", "accesses")

    def __init__(self, first: Node, second: Node, memory: str, lo: int, hi: int, accesses: str) -> None:
        self.first, self.second, self.memory = first, second, memory
        self.lo, self.hi, self.accesses = lo, hi, accesses

    def __str__(self) -> str:
        return (
            f"{self.first.label} and {self.second.label} both access {self.memory} ({self.accesses}) "
            "with no path between them"
        )

    def __repr__(self) -> str:
        return f"<Race {self}>"


def _mode(mode: int) -> str:
    return "write" if mode & WRITE else "read"


class _Space:
    """One space's ranges as in :class:`~cudagraph.definition.auto_edges._Segments` (last writer, readers since),
    plus per range whether a race was met there since its last race-free write, and every access so far. An empty
    range (``lo >= hi``) touches nothing."""

    __slots__ = ("starts", "segs", "racy", "log")

    def __init__(self) -> None:
        self.starts = [0]
        self.segs: list[list[int]] = [[-1]]  # per range: its last writer (-1: none), then the readers since
        self.racy = [False]
        self.log: list[tuple[int, int, int, int]] = []  # (lo, hi, mode, position) of every access, in order

    def latest(self, lo: int, hi: int, mode: int, out: set[int]) -> bool:
        """Add to ``out`` the latest accesses of ``[lo, hi)`` that conflict with ``mode`` (``-1`` stands for none):
        every earlier conflicting one is an ancestor of one of those, unless a range had a race since its
        last race-free write (then ``False``: scan them all, :meth:`hits`)."""
        if lo >= hi:
            return True
        starts = self.starts
        i = bisect_right(starts, lo) - 1
        j = len(starts) if hi >= _END else bisect_left(starts, hi, i + 1)
        if j == i + 1:  # (one range: most accesses)
            if self.racy[i]:
                return False
            seg = self.segs[i]
            if mode & WRITE:
                out.update(seg)
            else:
                out.add(seg[0])
            return True
        if True in self.racy[i:j]:
            return False
        if mode & WRITE:
            out.update(*self.segs[i:j])
        else:
            out.update(map(_first, self.segs[i:j]))
        return True

    def hits(self, lo: int, hi: int, mode: int, v: int) -> list[tuple[int, int, int, int]]:
        """The accesses so far of another node than ``v`` that overlap ``[lo, hi)`` and conflict with ``mode``."""
        return [(a, b, m, u) for a, b, m, u in self.log if a < hi and lo < b and (m | mode) & WRITE and u != v]

    def record(self, lo: int, hi: int, mode: int, v: int, raced: bool) -> None:
        """Record an access of ``[lo, hi)`` by the node at position ``v`` (``raced``: it had a race there)."""
        if lo >= hi:
            return
        self.log.append((lo, hi, mode, v))
        starts, segs, racy = self.starts, self.segs, self.racy
        i = bisect_right(starts, lo) - 1
        if starts[i] != lo:  # cut the range at lo
            i += 1
            starts.insert(i, lo)
            segs.insert(i, segs[i - 1][:])
            racy.insert(i, racy[i - 1])
        if hi >= _END:
            j = len(starts)
        else:
            j = bisect_right(starts, hi, i) - 1
            if starts[j] != hi:  # cut the range at hi
                j += 1
                starts.insert(j, hi)
                segs.insert(j, segs[j - 1][:])
                racy.insert(j, racy[j - 1])
        if mode & WRITE:
            if j > i + 1:
                del starts[i + 1 : j], segs[i + 1 : j], racy[i + 1 : j]
            segs[i] = [v]
            racy[i] = raced
        elif j == i + 1:
            segs[i].append(v)
            if raced:
                racy[i] = True
        else:
            for seg in segs[i:j]:
                seg.append(v)
            if raced:
                racy[i:j] = [True] * (j - i)


def _record_node(spaces: dict[Hashable, _Space], regions: tuple[Region, ...], v: int, raced: list[bool] | None) -> None:
    """Record the accesses of the node at position ``v`` (``raced``: per region, whether it had a race there;
    ``None``: no race), reads first: a range the node reads and writes ends written by it."""
    writes = None
    for k, r in enumerate(regions):
        if r[3] & WRITE:
            writes = [k] if writes is None else [*writes, k]
            continue
        space = spaces.get(r[0])
        if space is None:
            space = spaces[r[0]] = _Space()
        space.record(r[1], r[2], r[3], v, raced is not None and raced[k])
    if writes is not None:
        for k in writes:
            r = regions[k]
            space = spaces.get(r[0])
            if space is None:
                space = spaces[r[0]] = _Space()
            space.record(r[1], r[2], r[3], v, raced is not None and raced[k])


def _race_pairs(
    regions: list[tuple[Region, ...]], preds: list[list[int]]
) -> list[tuple[int, int, Hashable, int, int, int, int]]:
    """The races of one graph: ``(u, v, space, lo, hi, u's mode, v's mode)`` per pair of positions and space, in
    order of ``v`` then ``u`` (``regions`` and ``preds``: each node's, by position in a topological order)."""
    reach = Reach()
    append = reach.append
    for p in preds:
        append(p)
    missing_of = reach.missing
    spaces: dict[Hashable, _Space] = {}
    # (first position, second position, space) -> [lo, hi, first's mode, second's mode]
    found: dict[tuple[int, int, Hashable], list[int]] = {}
    for v, rs in enumerate(regions):
        if not rs:
            continue
        latest: set[int] = set()
        scan = None  # the regions whose range had a race since its last race-free write
        for r in rs:
            space = spaces.get(r[0])
            if space is not None and not space.latest(r[1], r[2], r[3], latest):
                scan = [r] if scan is None else [*scan, r]
        latest.discard(-1)
        missing_list = missing_of(v, latest) if latest else None  # (in any order: a set of positions below v)
        if scan is None and not missing_list:  # no race
            _record_node(spaces, rs, v, None)
            continue
        missing = set(missing_list) if missing_list else None
        raced = []
        for r in rs:
            space = spaces.get(r.space)
            if space is None or ((scan is None or r not in scan) and not (missing and _meets(space, r, missing))):
                raced.append(False)
                continue
            # a race, or a range where one was met: every earlier access
            hits = space.hits(r.lo, r.hi, r.mode, v)
            apart = set(missing_of(v, sorted({u for *_, u in hits}, reverse=True)))
            hit = False
            for lo, hi, mode, u in hits:
                if u in apart:
                    hit = True
                    lo, hi = max(lo, r.lo), min(hi, r.hi)
                    key = (u, v, r.space)
                    got = found.get(key)
                    if got is None:
                        found[key] = [lo, hi, mode, r.mode]
                    else:
                        got[0], got[1] = min(got[0], lo), max(got[1], hi)
                        got[2], got[3] = got[2] | mode, got[3] | r.mode
            raced.append(hit)
        _record_node(spaces, rs, v, raced)
    return [
        (u, v, where, lo, hi, mu, mv)
        for (u, v, where), (lo, hi, mu, mv) in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    ]


def _meets(space: _Space, r: Region, nodes: set[int]) -> bool:
    """Whether one of ``nodes`` is among the latest accesses of ``r``'s range that conflict with it."""
    got: set[int] = set()
    space.latest(r.lo, r.hi, r.mode, got)
    return not got.isdisjoint(nodes)


def _graph_races(graph: Graph) -> list[Race]:
    order = graph.topological_order()
    regions = regions_of(order)
    if graph._ordered:  # the order is that of the indices
        preds = [[p.index for p in n._preds] for n in order]
    else:
        pos = {id(n): i for i, n in enumerate(order)}
        preds = [[pos[id(p)] for p in n._preds] for n in order]
    ranges = compiled_ranges.RANGES
    pairs = _race_pairs(regions, preds) if ranges is None else ranges.race_pairs(regions, preds, reach.WINDOW)
    return [
        Race(order[u], order[v], memory_name(where, lo, hi), lo, hi, f"{_mode(mu)}/{_mode(mv)}")
        for u, v, where, lo, hi, mu, mv in pairs
    ]


def find_races(graph: Graph) -> list[Race]:
    """Every race of ``graph`` and of the graphs nested in it (each graph's own nodes compared), in order."""
    out = _graph_races(graph)
    for body in sorted(graph._descendants(), key=lambda b: b.name):
        out.extend(_graph_races(body))
    return out


def check_races(graph: Graph) -> None:
    """Raise :class:`~cudagraph.errors.RaceError` listing the races of ``graph``, if any."""
    races = find_races(graph)
    if races:
        shown = "; ".join(str(r) for r in races[:5])
        more = f" (and {len(races) - 5} more)" if len(races) > 5 else ""
        raise RaceError(f"Graph {graph.name!r} has {len(races)} race(s): {shown}{more}", races)


class RaceCheck:
    """:meth:`races`, mixed into :class:`~cudagraph.Graph`."""

    __slots__ = ()

    def races(self) -> list[Race]:
        """Every pair of nodes that conflict on a byte range with no path between them.

        Two nodes conflict when their declared accesses (kernel arguments wrapped as
        :class:`~cudagraph.In` / :class:`~cudagraph.Out` / :class:`~cudagraph.InOut`, ``reads=`` /
        ``writes=``, the operands of copies, fills, memory operations, allocations and frees, and the
        union of a child graph's or conditional node's bodies) touch overlapping bytes of the same memory
        and one of them writes. Nodes inside each nested body are compared with one another too.

        Returns
        -------
        list of Race
            In topological order of the second node, then of the first.

        Raises
        ------
        CycleError
            The graph has a cycle.
        """
        return find_races(self)  # type: ignore[arg-type]  # mixed into Graph
