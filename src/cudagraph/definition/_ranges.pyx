# cython: language_level=3
# cython: freethreading_compatible = True
# distutils: language = c++
"""Edges from data and the race check in compiled code (GPU-free: plain C++ arrays).

Twins, the reference implementations, in Python:

- :class:`Segments` and :func:`record`: :class:`cudagraph.definition.auto_edges._Segments` and
  :func:`cudagraph.definition.auto_edges._record` (the byte ranges of one space, cut where accesses start and
  end, each with its last writer and the readers since; one node's accesses recorded, reads first, and the
  latest nodes they conflict with collected);
- :func:`race_pairs`: :func:`cudagraph.definition.races._race_pairs` (the whole race check of one graph, its
  nodes' regions and predecessors given by position: the same ranges, plus per range whether a race was met
  since its last race-free write (:class:`~cudagraph.definition.races._Space`), a log of every access, and the
  ancestor queries of ``_reach.Reach``, the twin of :class:`cudagraph.definition.reach.Reach`).

The ranges of a space (``Ranges``) are their starts in a ``std::vector<uint64_t>`` (range ``i`` is
``[starts[i], starts[i + 1])``, the last one runs to 2**64) and per range the index of a ``std::vector`` of its
last writer (``-1``: none) then the readers since (moving ranges moves indices; a list freed is reused). A range
``[lo, hi)`` with ``hi >= 2**64`` runs to the end; an empty one (``lo >= hi``) touches nothing and is skipped, as
its twins skip it. A range the address space cannot hold (a negative ``lo``) raises ``OverflowError``
(``cudagraph.definition.access.region`` refuses those before); a region that is not a tuple of at least four
items raises ``TypeError``. Every C++ call that allocates is one Cython turns a ``std::bad_alloc`` of into
``MemoryError``.

GIL stance (free-threaded Python): a :class:`Segments` belongs to one graph's edge inference, whose builders
take no lock, so each guards its arrays with a ``cython.pymutex`` of its own, held only around the C++ work (no
Python code runs under it). :func:`race_pairs` works on arrays of its own call. Nothing is shared at module
level.
"""

cimport cython
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_SIZE
from libc.stdint cimport uint64_t
from libcpp.algorithm cimport sort, stable_sort
from libcpp.functional cimport greater
from libcpp.map cimport map as cmap
from libcpp.pair cimport pair
from libcpp.vector cimport vector

from ._reach cimport Nodes, Reach

__all__ = ["END", "WRITE", "Segments", "race_pairs", "record"]

#: What ``mode & WRITE`` means (``cudagraph.definition.access.WRITE``: checked by the loader) and the end of
#: the address space.
WRITE = 2
END = 1 << 64

cdef object _END = END
cdef long _WRITE = WRITE


# ---------------------------------------------------------------------------------------------------------------
# Sorted range starts

cdef inline Py_ssize_t _upper(vector[uint64_t]& a, uint64_t x, Py_ssize_t lo) noexcept:
    """The first index at or past ``lo`` whose start is above ``x`` (``bisect_right``)."""
    cdef Py_ssize_t hi = <Py_ssize_t>a.size()
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline Py_ssize_t _lower(vector[uint64_t]& a, uint64_t x, Py_ssize_t lo) noexcept:
    """The first index at or past ``lo`` whose start is at or above ``x`` (``bisect_left``)."""
    cdef Py_ssize_t hi = <Py_ssize_t>a.size()
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline bint _bounds(object lo, object hi, uint64_t* l, uint64_t* h) except -1:
    """``[lo, hi)`` as C integers; returns whether it runs to the end (``hi >= 2**64``). Empty ranges are
    skipped by the callers before."""
    l[0] = lo
    if hi >= _END:
        h[0] = 0
        return True
    h[0] = hi
    return False


cdef inline tuple _region(object r):
    """``r`` (a ``Region``: a tuple whose items are its space, ``lo``, ``hi`` and mode, then more), read as a tuple
    (a subclass's items are read where a tuple's are)."""
    if not PyTuple_Check(r) or PyTuple_GET_SIZE(r) < 4:
        raise TypeError(f"expected a Region (space, lo, hi, mode, what), got {type(r).__name__}")
    return <tuple>r


cdef list _latest(Nodes& found, Py_ssize_t index):
    """``found`` without ``-1`` (none) and ``index``, each once, in decreasing order."""
    cdef list out = []
    cdef Py_ssize_t x
    cdef Py_ssize_t last = -1
    if found.size() > 1:
        sort(found.begin(), found.end(), greater[Py_ssize_t]())
    for x in found:
        if x < 0:  # (-1 comes last)
            break
        if x != last and x != index:
            out.append(x)
            last = x
    return out


cdef int _decreasing(Nodes& found, Py_ssize_t index, Nodes& out) except -1:
    """``out``: ``found`` without ``-1`` (none) and ``index``, each once, in decreasing order."""
    cdef Py_ssize_t x
    cdef Py_ssize_t last = -1
    out.clear()
    if found.size() > 1:
        sort(found.begin(), found.end(), greater[Py_ssize_t]())
    for x in found:
        if x < 0:  # (-1 comes last)
            break
        if x != last and x != index:
            out.push_back(x)
            last = x
    return 0


cdef inline int _give(Nodes& found, set out) except -1:
    cdef Py_ssize_t x
    for x in found:
        out.add(x)
    return 0


# ---------------------------------------------------------------------------------------------------------------
# The byte ranges of one space (of edges from data and of the race check)

cdef struct Ranges:
    vector[uint64_t] starts  # range k is [starts[k], starts[k + 1]) (the last one runs to 2**64)
    vector[Py_ssize_t] lists  # range k's nodes: nodes[lists[k]], its last writer (-1: none) then the readers since
    vector[Nodes] nodes  # the lists (those of no range wait in spare to be reused)
    vector[Py_ssize_t] spare
    bint flags  # whether racy is kept (the race check)
    vector[char] racy  # per range: whether a race was met there since its last race-free write


cdef int _init(Ranges& t, bint flags) except -1:
    """One range, ``[0, 2**64)``, never written."""
    t.flags = flags
    t.starts.push_back(0)
    t.lists.push_back(_list(t, -1))
    if flags:
        t.racy.push_back(0)
    return 0


cdef Py_ssize_t _list(Ranges& t, Py_ssize_t first) except -1:
    """A list holding ``first`` alone (a spare one where there is one)."""
    cdef Py_ssize_t k
    if t.spare.empty():
        k = <Py_ssize_t>t.nodes.size()
        t.nodes.push_back(Nodes())
    else:
        k = t.spare.back()
        t.spare.pop_back()
        t.nodes[k].clear()
    t.nodes[k].push_back(first)
    return k


cdef inline void _span(Ranges& t, uint64_t lo, uint64_t hi, bint to_end, Py_ssize_t* i, Py_ssize_t* j) noexcept:
    """Ranges ``i .. j - 1`` meet ``[lo, hi)`` (two binary searches)."""
    i[0] = _upper(t.starts, lo, 0) - 1
    j[0] = <Py_ssize_t>t.starts.size() if to_end else _lower(t.starts, hi, i[0] + 1)


cdef int _collect(Ranges& t, Py_ssize_t i, Py_ssize_t j, bint write, Nodes& out) except -1:
    """Add to ``out`` the latest accesses of ranges ``i .. j - 1`` that a read (their last writers) or a write
    (those and the readers since) conflicts with."""
    cdef Py_ssize_t k
    cdef Nodes* nodes
    for k in range(i, j):
        nodes = &t.nodes[t.lists[k]]
        if write:
            out.insert(out.end(), nodes.begin(), nodes.end())
        else:
            out.push_back(nodes[0][0])
    return 0


cdef bint _racy(Ranges& t, Py_ssize_t i, Py_ssize_t j) noexcept:
    """Whether one of ranges ``i .. j - 1`` had a race since its last race-free write."""
    cdef Py_ssize_t k
    for k in range(i, j):
        if t.racy[k]:
            return True
    return False


cdef int _cut(Ranges& t, uint64_t at, Py_ssize_t i) except -1:
    """Cut range ``i`` at ``at`` (inside it, past its start): range ``i + 1``, from ``at``, gets a copy of its list."""
    cdef Py_ssize_t k = _list(t, -1)
    cdef Nodes* src = &t.nodes[t.lists[i]]  # (after _list: the lists do not move until the next one is made)
    t.nodes[k].assign(src.begin(), src.end())
    t.starts.insert(t.starts.begin() + i + 1, at)
    t.lists.insert(t.lists.begin() + i + 1, k)
    cdef char flag
    if t.flags:
        flag = t.racy[i]
        t.racy.insert(t.racy.begin() + i + 1, flag)
    return 0


cdef int _read(
    Ranges& t, Py_ssize_t i, Py_ssize_t j, uint64_t lo, uint64_t hi, bint to_end, Py_ssize_t v, bint raced
) except -1:
    """Node ``v`` reads ``[lo, hi)`` (which ranges ``i .. j - 1`` meet): it joins the readers of each, cut at
    ``lo`` and ``hi``."""
    cdef Py_ssize_t k
    if t.starts[i] != lo:
        _cut(t, lo, i)
        i += 1
        j += 1
    if not to_end and (j == <Py_ssize_t>t.starts.size() or t.starts[j] != hi):
        _cut(t, hi, j - 1)
    for k in range(i, j):
        t.nodes[t.lists[k]].push_back(v)
        if raced:
            t.racy[k] = 1
    return 0


cdef int _write(
    Ranges& t, Py_ssize_t i, Py_ssize_t j, uint64_t lo, uint64_t hi, bint to_end, Py_ssize_t v, bint raced
) except -1:
    """Node ``v`` writes ``[lo, hi)`` (which ranges ``i .. j - 1`` meet): one range, its last writer ``v``."""
    cdef Py_ssize_t k
    if not to_end and (j == <Py_ssize_t>t.starts.size() or t.starts[j] != hi):
        _cut(t, hi, j - 1)  # the part past hi keeps its list
    if t.starts[i] != lo:  # range i keeps the part before lo
        if j == i + 1:
            k = _list(t, v)
            t.starts.insert(t.starts.begin() + i + 1, lo)
            t.lists.insert(t.lists.begin() + i + 1, k)
            if t.flags:
                t.racy.insert(t.racy.begin() + i + 1, <char>raced)
            return 0
        i += 1
        t.starts[i] = lo
    t.nodes[t.lists[i]].clear()
    t.nodes[t.lists[i]].push_back(v)
    if t.flags:
        t.racy[i] = raced
    if j > i + 1:
        for k in range(i + 1, j):
            t.spare.push_back(t.lists[k])
        t.starts.erase(t.starts.begin() + i + 1, t.starts.begin() + j)
        t.lists.erase(t.lists.begin() + i + 1, t.lists.begin() + j)
        if t.flags:
            t.racy.erase(t.racy.begin() + i + 1, t.racy.begin() + j)
    return 0


# ---------------------------------------------------------------------------------------------------------------
# Edges from data (twins: auto_edges._Segments and auto_edges._record)

@cython.final
cdef class Segments:
    """The byte ranges of one space for edges from data (twin: ``auto_edges._Segments``)."""

    cdef Ranges t
    cdef cython.pymutex lock

    def __cinit__(self):
        _init(self.t, False)

    def __len__(self):
        return self.t.starts.size()

    cdef int _access(self, uint64_t lo, uint64_t hi, bint to_end, bint write, Py_ssize_t index, Nodes& out) except -1:
        cdef Py_ssize_t i = 0, j = 0  # (set by _span)
        _span(self.t, lo, hi, to_end, &i, &j)
        _collect(self.t, i, j, write, out)
        if write:
            _write(self.t, i, j, lo, hi, to_end, index, False)
        else:
            _read(self.t, i, j, lo, hi, to_end, index, False)
        return 0

    cdef _touch(self, lo, hi, bint write, Py_ssize_t index, set out):
        """:meth:`read` (``write`` false) or :meth:`write` of ``[lo, hi)`` by node ``index``, under the lock."""
        cdef uint64_t l = 0, h = 0  # (set by _bounds)
        cdef Nodes found
        if lo >= hi:
            return
        cdef bint to_end = _bounds(lo, hi, &l, &h)
        with self.lock:
            self._access(l, h, to_end, write, index, found)
        _give(found, out)

    def read(self, lo, hi, Py_ssize_t index, set out):
        """Add to ``out`` the last writers of ``[lo, hi)``; node ``index`` joins the readers of each of its ranges."""
        self._touch(lo, hi, False, index, out)

    def write(self, lo, hi, Py_ssize_t index, set out):
        """Add to ``out`` the last writers and the readers since of ``[lo, hi)``; node ``index`` writes it."""
        self._touch(lo, hi, True, index, out)


def record(dict spaces, regions, Py_ssize_t index):
    """Record ``regions`` as node ``index``'s accesses (reads first: a range it reads and writes ends written by
    it); return the latest other nodes they conflict with, each once, in decreasing order. Twin:
    ``auto_edges._record``."""
    cdef Nodes out
    cdef Segments seg
    cdef uint64_t l = 0, h = 0  # (set by _bounds)
    cdef bint to_end
    cdef bint write
    cdef int want
    cdef bint any_write = False
    cdef tuple r
    for want in range(2):  # reads, then writes
        if want and not any_write:
            break
        for item in regions:
            r = _region(item)
            write = r[3] & _WRITE
            if write:
                any_write = True
            if write != want:
                continue
            lo, hi = r[1], r[2]
            if lo >= hi:
                continue
            space = r[0]
            seg = spaces.get(space)
            if seg is None:
                seg = spaces[space] = Segments()
            to_end = _bounds(lo, hi, &l, &h)
            with seg.lock:
                seg._access(l, h, to_end, write, index, out)
    return _latest(out, index)


# ---------------------------------------------------------------------------------------------------------------
# The race check (twin: races._race_pairs)

cdef struct Logged:
    uint64_t lo
    uint64_t last  # the last byte: hi - 1
    long mode
    Py_ssize_t v


cdef struct Table:
    Ranges ranges
    vector[Logged] log  # every access (not empty) so far, in order


cdef struct Access:
    Py_ssize_t space
    uint64_t lo
    uint64_t hi
    bint to_end
    bint empty
    long mode
    Py_ssize_t at  # its latest conflicting accesses: pool[at:end]
    Py_ssize_t end
    bint scan  # a range had a race since its last race-free write
    bint raced


cdef struct Found:
    Py_ssize_t u
    Py_ssize_t v
    Py_ssize_t space
    uint64_t lo
    uint64_t last
    long mu
    long mv


cdef bint _by_second_then_first(const Found& a, const Found& b) noexcept:
    return a.v < b.v or (a.v == b.v and a.u < b.u)


cdef bint _table_latest(Table& t, Access& a, Nodes& out) except -1:
    """Add to ``out`` the latest accesses of ``a``'s range that conflict with it; ``False`` (nothing added) where a
    range had a race since its last race-free write."""
    cdef Py_ssize_t i = 0, j = 0  # (set by _span)
    _span(t.ranges, a.lo, a.hi, a.to_end, &i, &j)
    if _racy(t.ranges, i, j):
        return False
    _collect(t.ranges, i, j, a.mode & _WRITE, out)
    return True


cdef int _table_record(Table& t, Access& a, Py_ssize_t v) except -1:
    """Record ``a`` by the node at position ``v`` (``a.raced``: it had a race there)."""
    cdef Logged entry
    entry.lo = a.lo
    entry.last = <uint64_t>-1 if a.to_end else a.hi - 1
    entry.mode = a.mode
    entry.v = v
    t.log.push_back(entry)
    cdef Py_ssize_t i = 0, j = 0  # (set by _span)
    _span(t.ranges, a.lo, a.hi, a.to_end, &i, &j)
    if a.mode & _WRITE:
        _write(t.ranges, i, j, a.lo, a.hi, a.to_end, v, a.raced)
    else:
        _read(t.ranges, i, j, a.lo, a.hi, a.to_end, v, a.raced)
    return 0


cdef int _record_node(vector[Table]& tables, vector[Access]& accesses, Py_ssize_t v) except -1:
    """Record the node's accesses, reads first (a range it reads and writes ends written by it)."""
    cdef int want
    cdef Access* a
    cdef Py_ssize_t i
    for want in range(2):
        for i in range(<Py_ssize_t>accesses.size()):
            a = &accesses[i]
            if not a.empty and (a.mode & _WRITE != 0) == want:
                _table_record(tables[a.space], a[0], v)
    return 0


cdef bint _among(Nodes& sorted_down, Py_ssize_t x) noexcept:
    """Whether ``x`` is in ``sorted_down`` (decreasing)."""
    cdef Py_ssize_t lo = 0
    cdef Py_ssize_t hi = <Py_ssize_t>sorted_down.size()
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if sorted_down[mid] > x:
            lo = mid + 1
        else:
            hi = mid
    return lo < <Py_ssize_t>sorted_down.size() and sorted_down[lo] == x


def race_pairs(list regions, list preds, Py_ssize_t window):
    """The races of one graph: ``(u, v, space, lo, hi, u's mode, v's mode)`` per pair of positions and space, in
    order of ``v`` then ``u``. Twin: ``races._race_pairs``.

    Parameters
    ----------
    regions : list of tuple of Region
        Each node's accesses, by position in a topological order.
    preds : list of list of int
        Each node's predecessors, by position (each below the node's).
    window : int
        How many nodes before each node its ancestor bit vector covers (``reach.WINDOW``).
    """
    cdef Py_ssize_t n = len(regions)
    if len(preds) != n:
        raise ValueError(f"{n} nodes' regions but {len(preds)} nodes' predecessors")
    cdef Reach reach = Reach(window)
    cdef Py_ssize_t v
    for v in range(n):
        reach._extend(preds[v])

    cdef dict ids = {}  # space -> its table's index
    cdef list keys = []  # (and back)
    cdef vector[Table] tables
    cdef vector[Access] accesses
    cdef vector[Logged] hits
    cdef vector[Found] found
    cdef cmap[pair[Py_ssize_t, Py_ssize_t], Py_ssize_t] mine  # (u, space) -> its index in found, for this v
    cdef cmap[pair[Py_ssize_t, Py_ssize_t], Py_ssize_t].iterator at
    cdef Nodes pool, latest, missing, us, apart
    cdef Access a
    cdef Access* b
    cdef Logged e
    cdef vector[Logged]* log
    cdef uint64_t last
    cdef Found f
    cdef Found* g
    cdef bint scan, meets
    cdef Py_ssize_t i, k, sid
    cdef tuple r
    for v in range(n):
        rs = regions[v]
        if not rs:
            continue
        accesses.clear()
        pool.clear()
        scan = False
        for item in rs:
            r = _region(item)
            key = r[0]
            got = ids.get(key)
            if got is None:
                sid = len(keys)
                ids[key] = sid
                keys.append(key)
                tables.resize(tables.size() + 1)
                _init(tables.back().ranges, True)
            else:
                sid = got
            a.space = sid
            a.mode = r[3]
            lo, hi = r[1], r[2]
            a.empty = lo >= hi
            a.scan = a.raced = False
            a.at = a.end = <Py_ssize_t>pool.size()
            if not a.empty:
                a.to_end = _bounds(lo, hi, &a.lo, &a.hi)
                a.scan = not _table_latest(tables[sid], a, pool)
                a.end = <Py_ssize_t>pool.size()
                scan = scan or a.scan
            accesses.push_back(a)
        latest.assign(pool.begin(), pool.end())
        _decreasing(latest, v, us)
        reach._missing(v, us, missing)
        if not scan and missing.empty():  # no race
            _record_node(tables, accesses, v)
            continue
        mine.clear()
        for i in range(<Py_ssize_t>accesses.size()):
            b = &accesses[i]
            if b.empty:
                continue
            if not b.scan:
                meets = False
                for k in range(b.at, b.end):
                    if _among(missing, pool[k]):
                        meets = True
                        break
                if not meets:
                    continue
            # a race, or a range where one was met: every earlier access
            hits.clear()
            latest.clear()  # (here: the nodes of the hits)
            log = &tables[b.space].log
            last = <uint64_t>-1 if b.to_end else b.hi - 1
            for k in range(<Py_ssize_t>log.size()):
                e = log[0][k]
                if e.lo <= last and b.lo <= e.last and (e.mode | b.mode) & _WRITE and e.v != v:
                    hits.push_back(e)
                    latest.push_back(e.v)
            _decreasing(latest, v, us)
            reach._missing(v, us, apart)
            for e in hits:
                if not _among(apart, e.v):
                    continue
                b.raced = True
                f.lo = e.lo if e.lo > b.lo else b.lo
                f.last = e.last if e.last < last else last
                at = mine.find(pair[Py_ssize_t, Py_ssize_t](e.v, b.space))
                if at == mine.end():
                    f.u, f.v, f.space, f.mu, f.mv = e.v, v, b.space, e.mode, b.mode
                    mine.insert(pair[pair[Py_ssize_t, Py_ssize_t], Py_ssize_t](
                        pair[Py_ssize_t, Py_ssize_t](e.v, b.space), <Py_ssize_t>found.size()))
                    found.push_back(f)
                else:
                    g = &found[cython.operator.dereference(at).second]
                    if f.lo < g.lo:
                        g.lo = f.lo
                    if f.last > g.last:
                        g.last = f.last
                    g.mu |= e.mode
                    g.mv |= b.mode
        _record_node(tables, accesses, v)
    stable_sort(found.begin(), found.end(), _by_second_then_first)
    return [(f.u, f.v, keys[f.space], f.lo, <object>f.last + 1, f.mu, f.mv) for f in found]
