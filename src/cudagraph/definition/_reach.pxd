# cython: language_level=3
# Declarations of cudagraph.definition._reach, for the compiled modules that cimport it (see _reach.pyx).

cimport cython
from libc.stdint cimport uint64_t
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

ctypedef vector[Py_ssize_t] Nodes


@cython.final
cdef class Reach:
    cdef Py_ssize_t window
    cdef Py_ssize_t words
    cdef uint64_t top  # the bits of the last word that the window covers
    cdef vector[uint64_t] bits  # node v's words: bits[v * words : (v + 1) * words]
    cdef vector[Py_ssize_t] low
    cdef vector[Py_ssize_t] first  # node v's predecessors: preds[first[v] : first[v + 1]]
    cdef vector[Py_ssize_t] preds
    cdef unordered_map[Py_ssize_t, Py_ssize_t] known  # a far candidate -> the latest node found to descend from it
    cdef vector[Py_ssize_t] seen  # per node: the walk that last met it (see _far)
    cdef Py_ssize_t walk
    cdef vector[uint64_t] cover  # (scratch of add)
    cdef Nodes stack, seeds, given  # (scratch of _far, add and _extend)
    cdef cython.pymutex lock

    cdef void _or_shifted(self, uint64_t* dst, const uint64_t* src, Py_ssize_t k) noexcept
    cdef int _check(self, Nodes& nodes, Py_ssize_t below, str what) except -1
    cdef int _append(self, Nodes& given) except -1
    cdef int _extend(self, object preds) except -1
    cdef bint _far(self, Py_ssize_t c, Nodes& seeds) except -1
    cdef int _add(self, Nodes& given, Nodes& cands, Nodes& out) except -1
    cdef int _missing(self, Py_ssize_t v, Nodes& cands, Nodes& out) except -1
