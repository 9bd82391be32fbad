# cython: language_level=3
# cython: freethreading_compatible = True
# distutils: language = c++
"""Ancestor queries over a DAG numbered in a topological order, in compiled code (GPU-free: plain C++ arrays).

:class:`Reach` is the twin of :class:`cudagraph.definition.reach.Reach`, the reference (same questions, same
answers): per node ``v``, its ancestors and itself among positions ``v - window .. v`` as ``window // 64 + 1``
64-bit words (bit ``k``: the node at ``v - k``), the lowest position among its ancestors and itself, and its
predecessors; a candidate further back than the window is looked for by a walk back from the given nodes that
stops where a bit test answers, skips every node whose ancestors all lie above the candidate, and remembers per
candidate the latest node found to descend from it. The edge inference (``auto_edges.EdgeInference``) and the
race check (``_ranges.race_pairs``, which cimports this module: see ``_reach.pxd``) use it where it is built.

Positions given are checked (a predecessor or candidate that is not a position below the node raises
``ValueError``): a wrong one never reads outside the arrays. Every C++ call that allocates is one Cython turns a
``std::bad_alloc`` of into ``MemoryError``.

GIL stance (free-threaded Python): a :class:`Reach` belongs to one graph's edge inference, whose builders take
no lock, so it guards its arrays with a ``cython.pymutex`` of its own, held only around the C++ work (no Python
code runs under it but the message of a refused position); ``_ranges.race_pairs`` makes one of its own per call.
Nothing is shared at module level.
"""

cimport cython
from libc.stdint cimport uint64_t
from libcpp.algorithm cimport reverse
from libcpp.pair cimport pair
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

__all__ = ["Reach"]


cdef int _nodes(object values, Nodes& out) except -1:
    """``out``: the ints of ``values`` (a list or another iterable)."""
    cdef Py_ssize_t x
    out.clear()
    for x in values:
        out.push_back(x)
    return 0


cdef inline bint _test(const uint64_t* b, Py_ssize_t k) noexcept:
    return (b[k >> 6] >> (k & 63)) & 1


cdef class Reach:
    """A DAG grown one node at a time in a topological order, for ancestor queries (twin: ``reach.Reach``).

    Per node ``v``: its ancestors and itself among positions ``v - window .. v`` as ``window // 64 + 1`` words
    (bit ``k``: ``v - k``), the lowest position among its ancestors and itself, and its predecessors. A
    candidate further back than the window is looked for by a walk back (see ``reach.Reach._far``).
    """

    def __cinit__(self, Py_ssize_t window=1024):
        if window < 0:
            raise ValueError(f"window must be at least 0, not {window}")
        self.window = window
        self.words = window // 64 + 1
        cdef Py_ssize_t used = window + 1 - 64 * (self.words - 1)  # 1..64
        self.top = <uint64_t>-1 if used == 64 else ((<uint64_t>1 << used) - 1)
        self.first.push_back(0)
        self.cover.resize(self.words)

    def __len__(self):
        return self.low.size()

    cdef void _or_shifted(self, uint64_t* dst, const uint64_t* src, Py_ssize_t k) noexcept:
        """``dst |= src << k``, within the window (``0 <= k <= window``)."""
        cdef Py_ssize_t q = k >> 6
        cdef int r = k & 63
        cdef Py_ssize_t i
        cdef uint64_t w
        for i in range(self.words - 1, q - 1, -1):
            w = src[i - q] << r
            if r and i - q > 0:
                w |= src[i - q - 1] >> (64 - r)
            dst[i] |= w
        dst[self.words - 1] &= self.top

    cdef int _check(self, Nodes& nodes, Py_ssize_t below, str what) except -1:
        cdef Py_ssize_t x
        for x in nodes:
            if x < 0 or x >= below:
                raise ValueError(f"{what} {x} is not a position below {below}")
        return 0

    cdef int _append(self, Nodes& given) except -1:
        """Add the next node, with predecessors ``given`` (checked)."""
        cdef Py_ssize_t v = <Py_ssize_t>self.low.size()
        cdef Py_ssize_t words = self.words
        cdef Py_ssize_t p, k
        cdef Py_ssize_t m = v
        self.bits.resize((v + 1) * words, 0)
        cdef uint64_t* bits = self.bits.data()
        bits[v * words] = 1
        for p in given:
            k = v - p
            if k <= self.window:
                self._or_shifted(bits + v * words, bits + p * words, k)
            if self.low[p] < m:
                m = self.low[p]
        self.low.push_back(m)
        self.preds.insert(self.preds.end(), given.begin(), given.end())
        self.first.push_back(self.preds.size())
        self.seen.push_back(0)
        return 0

    cdef bint _far(self, Py_ssize_t c, Nodes& seeds) except -1:
        """Whether ``c`` is an ancestor of one of ``seeds`` (all at positions above it)."""
        cdef Py_ssize_t words = self.words
        cdef const uint64_t* bits = self.bits.data()
        cdef Py_ssize_t d = -1
        cdef unordered_map[Py_ssize_t, Py_ssize_t].iterator it = self.known.find(c)
        if it != self.known.end():
            d = cython.operator.dereference(it).second
        self.walk += 1
        cdef Py_ssize_t walk = self.walk
        cdef Nodes* stack = &self.stack
        cdef Py_ssize_t s, y, k, p, e
        cdef bint found
        for s in seeds:
            if s <= c or self.seen[s] == walk:
                continue
            self.seen[s] = walk
            stack.clear()
            stack.push_back(s)
            found = False
            while not stack.empty() and not found:
                y = stack.back()
                stack.pop_back()
                k = y - c
                if k <= self.window:
                    found = _test(bits + y * words, k)
                    continue
                if c < d <= y and y - d <= self.window and _test(bits + y * words, y - d):
                    found = True
                    continue
                if self.low[y] > c:
                    continue
                for e in range(self.first[y], self.first[y + 1]):
                    p = self.preds[e]
                    if p == c:
                        found = True
                        break
                    if p > c and self.seen[p] != walk:
                        self.seen[p] = walk
                        stack.push_back(p)
            if found:
                if s > d:
                    it = self.known.find(c)
                    if it == self.known.end():
                        self.known.insert(pair[Py_ssize_t, Py_ssize_t](c, s))
                    else:
                        cython.operator.dereference(it).second = s
                return True
        return False

    cdef int _add(self, Nodes& given, Nodes& cands, Nodes& out) except -1:
        """The next node, with predecessors ``given`` and the needed ``cands`` (into ``out``, increasing)."""
        cdef Py_ssize_t v = <Py_ssize_t>self.low.size()
        cdef Py_ssize_t words = self.words
        cdef uint64_t* cover = self.cover.data()
        cdef Py_ssize_t p, k, c, i
        cdef Py_ssize_t m = v
        for i in range(words):
            cover[i] = 0
        cover[0] = 1
        for p in given:
            k = v - p
            if k <= self.window:
                self._or_shifted(cover, self.bits.data() + p * words, k)
            if self.low[p] < m:
                m = self.low[p]
        cdef Nodes* seeds = &self.seeds
        seeds.assign(given.begin(), given.end())
        out.clear()
        cdef bint known
        for c in cands:
            k = v - c
            if k <= self.window:
                if _test(cover, k):
                    continue
                self._or_shifted(cover, self.bits.data() + c * words, k)
            else:
                known = False
                for i in range(<Py_ssize_t>seeds.size()):
                    if seeds[0][i] == c:
                        known = True
                        break
                if known or self._far(c, seeds[0]):
                    continue
            out.push_back(c)
            if self.low[c] < m:
                m = self.low[c]
            seeds.push_back(c)
        reverse(out.begin(), out.end())
        self.bits.insert(self.bits.end(), self.cover.begin(), self.cover.end())
        self.low.push_back(m)
        self.preds.insert(self.preds.end(), given.begin(), given.end())
        self.preds.insert(self.preds.end(), out.begin(), out.end())
        self.first.push_back(self.preds.size())
        self.seen.push_back(0)
        return 0

    cdef int _missing(self, Py_ssize_t v, Nodes& cands, Nodes& out) except -1:
        """``out``: the ``cands`` (positions at or below ``v``, checked) that are not ancestors of node ``v``."""
        cdef const uint64_t* window = self.bits.data() + v * self.words
        cdef Py_ssize_t c, k
        out.clear()
        for c in cands:
            k = v - c
            if k <= self.window:
                if not _test(window, k):
                    out.push_back(c)
            else:
                self.seeds.clear()
                self.seeds.push_back(v)
                if not self._far(c, self.seeds):
                    out.push_back(c)
        return 0

    cdef int _extend(self, object preds) except -1:
        """Add the next node, with predecessors ``preds`` (a list of positions below it, checked); the caller holds
        the lock or owns the object."""
        _nodes(preds, self.given)
        self._check(self.given, <Py_ssize_t>self.low.size(), "predecessor")
        return self._append(self.given)

    def append(self, preds):
        """Add the next node, with predecessors ``preds`` (positions below it)."""
        cdef Nodes given
        _nodes(preds, given)
        with self.lock:
            self._check(given, <Py_ssize_t>self.low.size(), "predecessor")
            self._append(given)

    def add(self, given, cands):
        """Add the next node, with predecessors ``given`` and the ``cands`` (each once, in decreasing order) that
        are needed; return those, in increasing order (see ``reach.Reach.add``)."""
        cdef Nodes g, c, out
        _nodes(given, g)
        _nodes(cands, c)
        with self.lock:
            self._check(g, <Py_ssize_t>self.low.size(), "predecessor")
            self._check(c, <Py_ssize_t>self.low.size(), "candidate")
            self._add(g, c, out)
        return [x for x in out]

    def missing(self, Py_ssize_t v, cands):
        """The candidates (positions below ``v``) that are not ancestors of node ``v``."""
        cdef Nodes c, out
        _nodes(cands, c)
        with self.lock:
            if v < 0 or v >= <Py_ssize_t>self.low.size():
                raise IndexError(f"no node at position {v}")
            self._check(c, v + 1, "candidate")
            self._missing(v, c, out)
        return [x for x in out]
