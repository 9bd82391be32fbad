# cython: language_level=3
# cython: freethreading_compatible = True
# distutils: language = c++
"""Reads of driver graphs in compiled code (the first module of the compiled core): kernel node launch
attributes, and a graph's nodes in the lift's order with the data of its edges.

:class:`AttributeReads` asks the driver, for one kernel node, each ``CUlaunchAttributeID`` it was given
(``cuGraphKernelNodeGetAttribute`` through ``cuda.bindings.cydriver``, every call of a node inside one
``with nogil`` block) into a C buffer of 64 bytes per id, and compares the whole buffer with the values
of a node never given any attribute.

Its Python twin, the reference, is the ctypes loop of
:meth:`cudagraph.driver.node_reads.NodeReads.attributes`; ``NodeReads`` chooses between them, turns the
values into ``{id: bytes}``, prunes refused ids (by making a new reader) and names errors.

:func:`graph_order` reads a graph's node list (``cuGraphGetNodes``) and the edges into each node with their
data (``cuGraphNodeGetDependencies``, which takes the edge data since CUDA 13: the module is built against
cuda-bindings 13 or later), all in one ``with nogil`` block, and orders the nodes as
:func:`cudagraph.materialize.lift._topo` does (Kahn, first in first out). Its Python twin is
``GraphReader.nodes``, ``GraphReader.edges`` and ``_topo`` (what ``_Lifter.carry`` does without it).

GIL stance (free-threaded Python): a reader's state is set once by ``__cinit__`` and only read after;
each read works in a buffer on its own stack. Readers are shared by threads without a lock.
:func:`graph_order`, :func:`lift_graph` and :func:`kernel_args` work in buffers of their own call.

:func:`lift_graph` lifts a driver graph into a definition in one call: the reads of :func:`graph_order`, each
node's type and kernel parameters (all in one ``with nogil`` block, before any Python code runs), then each
node added in that order through the caller's callbacks (``Graph.kernel`` for a kernel node, its argument bytes
copied). Its Python twin, the reference, is :meth:`cudagraph.materialize.lift._Lifter.into_steps` (with
``_topo``). :func:`kernel_args` copies the argument values behind a ``kernelParams`` array (twin:
:meth:`cudagraph.ops.kinds.kernel.LiftedKernel.args`).
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsSsize_t, PyLong_AsVoidPtr
from libc.stdint cimport uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

from cuda.bindings cimport cydriver

cimport cython

import sys

cdef extern from *:
    """
    #include <chrono>
    static inline long long cudagraph_monotonic_ns(void) {
        return (long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch()).count();
    }
    """
    long long cudagraph_monotonic_ns() noexcept nogil

__all__ = [
    "AttributeReadError",
    "AttributeReads",
    "DEPS_ROOM",
    "GraphReadError",
    "MAX_IDS",
    "VALUE_SIZE",
    "graph_order",
    "kernel_args",
    "lift_graph",
]

if sizeof(cydriver.CUgraphEdgeData) != 8:  # (from_port, to_port, type, 5 reserved bytes)
    raise ImportError(f"cudagraph.driver._reads: sizeof(CUgraphEdgeData) is {sizeof(cydriver.CUgraphEdgeData)}, not 8")

if sizeof(cydriver.CUkernelNodeAttrValue) != VALUE_SIZE:  # the real cuda.h union, as built against
    raise ImportError(
        f"cudagraph.driver._reads: sizeof(CUkernelNodeAttrValue) is {sizeof(cydriver.CUkernelNodeAttrValue)}, "
        f"not {VALUE_SIZE}"
    )


class AttributeReadError(RuntimeError):
    """The driver refused a read for another reason than an id it does not take for graph kernel nodes.

    Attributes
    ----------
    result : int
        The ``CUresult``.
    attribute : int
        The ``CUlaunchAttributeID`` asked.
    """

    def __init__(self, result, attribute):
        super().__init__(result, attribute)
        self.result = result
        self.attribute = attribute


#: What :meth:`AttributeReads.read` returns for a node whose every value is the plain one (no object made).
cdef tuple _PLAIN_NODE = (None, ())


cdef class AttributeReads:
    """Reads the launch attribute ids ``ids`` of kernel nodes.

    Parameters
    ----------
    ids : sequence of int
        The ``CUlaunchAttributeID`` values to ask, in order (at most ``MAX_IDS``).
    plain : bytes
        ``64 * len(ids)`` bytes: the values of a kernel node never given any attribute, in the order of ``ids``.
    """

    def __cinit__(self, ids, bytes plain):
        cdef tuple asked = tuple(int(i) for i in ids)
        cdef Py_ssize_t n = len(asked)
        if n > MAX_IDS:
            raise ValueError(f"AttributeReads: {n} ids, at most {MAX_IDS}")
        if len(plain) != n * VALUE_SIZE:
            raise ValueError(f"AttributeReads: plain is {len(plain)} bytes, not {n * VALUE_SIZE} ({n} ids)")
        cdef Py_ssize_t k
        for k in range(n):
            self._ids[k] = <cydriver.CUkernelNodeAttrID><int>asked[k]
        memset(self._plain, 0, sizeof(self._plain))
        if n:
            memcpy(self._plain, <const char*>plain, n * VALUE_SIZE)
        self._count = n
        self.ids = asked
        self.plain = plain

    def read(self, node):
        """The values of kernel node ``node`` (a handle as an int) and the ids the driver refused.

        Returns
        -------
        tuple of (bytes or None, tuple of int)
            ``(None, ())`` when every id was answered with the plain value; else the ``64 * len(ids)``
            bytes read (a refused id's 64 bytes are zero) and the ids refused with
            ``CUDA_ERROR_INVALID_VALUE`` or ``CUDA_ERROR_NOT_SUPPORTED``, in order.

        Raises
        ------
        AttributeReadError
            Any other ``CUresult`` (the first; the ids after it are not asked).
        """
        cdef cydriver.CUgraphNode handle = <cydriver.CUgraphNode><uintptr_t>node
        cdef unsigned long long values[MAX_IDS * VALUE_WORDS]
        cdef char* base = <char*>values
        cdef int refused[MAX_IDS]
        cdef Py_ssize_t n_refused = 0
        cdef Py_ssize_t count = self._count
        cdef Py_ssize_t k
        cdef cydriver.CUresult rc
        cdef cydriver.CUresult failed = cydriver.CUresult.CUDA_SUCCESS
        cdef int failed_id = 0
        with nogil:
            memset(base, 0, count * VALUE_SIZE)
            for k in range(count):
                rc = cydriver.cuGraphKernelNodeGetAttribute(
                    handle, self._ids[k], <cydriver.CUkernelNodeAttrValue*>(base + k * VALUE_SIZE)
                )
                if rc == cydriver.CUresult.CUDA_SUCCESS:
                    continue
                if rc == cydriver.CUresult.CUDA_ERROR_INVALID_VALUE or rc == cydriver.CUresult.CUDA_ERROR_NOT_SUPPORTED:
                    refused[n_refused] = <int>self._ids[k]
                    n_refused += 1
                    continue
                failed = rc
                failed_id = <int>self._ids[k]
                break
        if failed != cydriver.CUresult.CUDA_SUCCESS:
            raise AttributeReadError(<int>failed, failed_id)
        if n_refused == 0 and memcmp(base, self._plain, count * VALUE_SIZE) == 0:
            return _PLAIN_NODE
        raw = PyBytes_FromStringAndSize(base, count * VALUE_SIZE)
        return raw, tuple([refused[k] for k in range(n_refused)])

    def __repr__(self):
        return f"AttributeReads(ids={self.ids!r})"


# ------------------------------------------------------------------ a graph's nodes in the lift's order


class GraphReadError(RuntimeError):
    """A driver read of :func:`graph_order` failed.

    Attributes
    ----------
    result : int
        The ``CUresult``.
    call : str
        The entry point, as ``GraphReader`` names it (``"cuGraphGetNodes"``, ``"cuGraphNodeGetDependencies"``,
        ``"cuGraphNodeGetType"``, ``"cuGraphKernelNodeGetParams"``).
    position : int
        For :func:`lift_graph`: the position (``cuGraphGetNodes`` order) of the node whose read was refused; -1 for
        the node list itself.
    """

    def __init__(self, result, call, position=-1):
        super().__init__(result, call)
        self.result = result
        self.call = call
        self.position = position


# What the nogil part of graph_order ends with.
cdef enum _Outcome:
    _READ = 0
    _REFUSED = 1  # a driver call failed: its CUresult and name are kept
    _NO_MEMORY = 2
    _UNKNOWN = 3  # an edge from a handle that is not a node of the graph: the handle is kept


cdef struct _Reads:
    # Everything graph_order allocates (NULL until allocated; _release frees each).
    cydriver.CUgraphNode* nodes  # cuGraphGetNodes order
    cydriver.CUgraphNode* deps  # the edges' sources, node by node, each node's in its dependencies' order
    cydriver.CUgraphEdgeData* data  # the edges' data, as deps
    Py_ssize_t* edge_at  # node i's edges: edge_at[i] .. edge_at[i + 1]
    Py_ssize_t* frm  # an edge's source, as a position in nodes
    Py_ssize_t* to  # an edge's target, as a position in nodes
    Py_ssize_t* indeg
    Py_ssize_t* succ_at  # position i's successors: succs[succ_at[i] .. succ_at[i + 1]], in edge order
    Py_ssize_t* succs
    Py_ssize_t* order  # the Kahn order (also its queue)
    uint64_t* keys  # handle -> position: open addressing, linear probing
    Py_ssize_t* slots  # the position at each key (-1: empty)
    # read for lift_graph only
    Py_ssize_t* pred_at  # position i's predecessors: preds[pred_at[i] .. pred_at[i + 1]], in edge order
    Py_ssize_t* preds
    cydriver.CUgraphNodeType* types  # each position's node type
    cydriver.CUDA_KERNEL_NODE_PARAMS* params  # each kernel position's parameters (zero for the others)


cdef void _release(_Reads* r) noexcept nogil:
    free(r.nodes)
    free(r.deps)
    free(r.data)
    free(r.edge_at)
    free(r.frm)
    free(r.to)
    free(r.indeg)
    free(r.succ_at)
    free(r.succs)
    free(r.order)
    free(r.keys)
    free(r.slots)
    free(r.pred_at)
    free(r.preds)
    free(r.types)
    free(r.params)


cdef inline uint64_t _bucket(uint64_t key, int shift) noexcept nogil:
    return (key * <uint64_t>0x9E3779B97F4A7C15ULL) >> shift  # (Fibonacci hashing: handles are spaced by 16s or more)


cdef inline Py_ssize_t _position(const _Reads* r, int shift, uint64_t mask, uint64_t key) noexcept nogil:
    """The position of node handle ``key`` (the last one where it repeats, as a dict built in order), or -1."""
    cdef uint64_t at = _bucket(key, shift)
    while r.slots[at] >= 0:
        if r.keys[at] == key:
            return r.slots[at]
        at = (at + 1) & mask
    return -1


cdef int _read_order(
    cydriver.CUgraph graph,
    _Reads* r,
    Py_ssize_t* n_out,
    Py_ssize_t* nedges_out,
    Py_ssize_t* norder_out,
    Py_ssize_t* ndata_out,
    cydriver.CUresult* rc_out,
    const char** call_out,
    uint64_t* unknown_out,
    Py_ssize_t* at_out,
    bint lift,
) except -1 nogil:
    """Read ``graph``'s nodes and the edges into each, and order them: the work of :func:`graph_order` without the GIL.
    With ``lift``, also each position's predecessors (``pred_at``, ``preds``), node type and kernel parameters (the
    work of :func:`lift_graph`).

    Returns an :class:`_Outcome` (for ``_REFUSED``, ``at_out`` is the position of the node whose read was refused, -1
    for the node list), or -1 with an exception set (``cydriver`` raises where the driver lacks an entry point)."""
    cdef size_t count = 0
    cdef cydriver.CUresult rc
    cdef Py_ssize_t n, i, e, k, first, last, nedges = 0, cap = 0, norder = 0, ndata = 0
    cdef size_t room = DEPS_ROOM, got
    cdef void* grown
    cdef int bits = 1, shift
    cdef uint64_t mask, at, key
    # the nodes (two calls, as GraphReader.nodes)
    at_out[0] = -1
    rc = cydriver.cuGraphGetNodes(graph, NULL, &count)
    if rc != cydriver.CUresult.CUDA_SUCCESS:
        rc_out[0], call_out[0] = rc, "cuGraphGetNodes"
        return _REFUSED
    n = <Py_ssize_t>count
    if n == 0:
        return _READ
    r.nodes = <cydriver.CUgraphNode*>malloc(n * sizeof(cydriver.CUgraphNode))
    r.edge_at = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
    if r.nodes == NULL or r.edge_at == NULL:
        return _NO_MEMORY
    rc = cydriver.cuGraphGetNodes(graph, r.nodes, &count)
    if rc != cydriver.CUresult.CUDA_SUCCESS:
        rc_out[0], call_out[0] = rc, "cuGraphGetNodes"
        return _REFUSED
    if <Py_ssize_t>count < n:
        n = <Py_ssize_t>count
    n_out[0] = n
    # the edges into each node, node by node (one call a node, as GraphReader.edges: room for DEPS_ROOM at first; a
    # node with as many is read again with room for twice as many, and so are the nodes after it)
    r.edge_at[0] = 0
    for i in range(n):
        while True:
            if nedges + <Py_ssize_t>room > cap:
                cap = max(2 * cap, nedges + <Py_ssize_t>room)
                grown = realloc(r.deps, cap * sizeof(cydriver.CUgraphNode))
                if grown == NULL:
                    return _NO_MEMORY
                r.deps = <cydriver.CUgraphNode*>grown
                grown = realloc(r.data, cap * sizeof(cydriver.CUgraphEdgeData))
                if grown == NULL:
                    return _NO_MEMORY
                r.data = <cydriver.CUgraphEdgeData*>grown
            got = room
            rc = cydriver.cuGraphNodeGetDependencies(r.nodes[i], r.deps + nedges, r.data + nedges, &got)
            if rc != cydriver.CUresult.CUDA_SUCCESS:
                rc_out[0], call_out[0], at_out[0] = rc, "cuGraphNodeGetDependencies", i
                return _REFUSED
            if got < room:
                break
            room *= 2  # as many as there was room for: perhaps more
        nedges += <Py_ssize_t>got
        r.edge_at[i + 1] = nedges
    nedges_out[0] = nedges
    # handle -> position (the last where a handle repeats, as lift._topo's dict)
    while (<Py_ssize_t>1 << bits) < 2 * n:
        bits += 1
    shift = 64 - bits
    mask = (<uint64_t>1 << bits) - 1
    r.keys = <uint64_t*>malloc((<size_t>1 << bits) * sizeof(uint64_t))
    r.slots = <Py_ssize_t*>malloc((<size_t>1 << bits) * sizeof(Py_ssize_t))
    r.frm = <Py_ssize_t*>malloc((nedges + 1) * sizeof(Py_ssize_t))
    r.to = <Py_ssize_t*>malloc((nedges + 1) * sizeof(Py_ssize_t))
    r.indeg = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
    r.succ_at = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
    r.succs = <Py_ssize_t*>malloc((nedges + 1) * sizeof(Py_ssize_t))
    r.order = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
    if (r.keys == NULL or r.slots == NULL or r.frm == NULL or r.to == NULL or r.indeg == NULL or r.succ_at == NULL
            or r.succs == NULL or r.order == NULL):
        return _NO_MEMORY
    memset(r.slots, 0xFF, (<size_t>1 << bits) * sizeof(Py_ssize_t))  # every slot -1
    for i in range(n):
        key = <uint64_t><uintptr_t>r.nodes[i]
        at = _bucket(key, shift)
        while r.slots[at] >= 0 and r.keys[at] != key:
            at = (at + 1) & mask
        r.keys[at] = key
        r.slots[at] = i
    # the edges' ends as positions: every source first (the first unknown one is named), then the targets
    for e in range(nedges):
        r.frm[e] = _position(r, shift, mask, <uint64_t><uintptr_t>r.deps[e])
        if r.frm[e] < 0:
            unknown_out[0] = <uint64_t><uintptr_t>r.deps[e]
            return _UNKNOWN
    for i in range(n):
        k = _position(r, shift, mask, <uint64_t><uintptr_t>r.nodes[i])  # (i, unless the handle repeats)
        for e in range(r.edge_at[i], r.edge_at[i + 1]):
            r.to[e] = k
    # in-degrees and successors in edge order (a counting sort by source)
    memset(r.indeg, 0, n * sizeof(Py_ssize_t))
    memset(r.succ_at, 0, (n + 1) * sizeof(Py_ssize_t))
    for e in range(nedges):
        r.indeg[r.to[e]] += 1
        r.succ_at[r.frm[e] + 1] += 1
    for i in range(n):
        r.succ_at[i + 1] += r.succ_at[i]
    for e in range(nedges):  # (succ_at[i] moves on as position i's successors are placed; shifted back after)
        r.succs[r.succ_at[r.frm[e]]] = r.to[e]
        r.succ_at[r.frm[e]] += 1
    for i in range(n - 1, 0, -1):
        r.succ_at[i] = r.succ_at[i - 1]
    r.succ_at[0] = 0
    # Kahn, first in first out: the positions without predecessors in order, then each one's successors in edge
    # order as they become free (the order is also the queue)
    for i in range(n):
        if r.indeg[i] == 0:
            r.order[norder] = i
            norder += 1
    k = 0
    while k < norder:
        i = r.order[k]
        k += 1
        first, last = r.succ_at[i], r.succ_at[i + 1]
        for e in range(first, last):
            r.indeg[r.succs[e]] -= 1
            if r.indeg[r.succs[e]] == 0:
                r.order[norder] = r.succs[e]
                norder += 1
    norder_out[0] = norder
    for e in range(nedges):
        if r.data[e].from_port or r.data[e].to_port or r.data[e].type:
            ndata += 1
    ndata_out[0] = ndata
    if not lift:
        return _READ
    # each position's predecessors in edge order (a counting sort by target; indeg, spent, is the cursor)
    r.pred_at = <Py_ssize_t*>calloc(n + 1, sizeof(Py_ssize_t))
    r.preds = <Py_ssize_t*>malloc((nedges + 1) * sizeof(Py_ssize_t))
    r.types = <cydriver.CUgraphNodeType*>malloc(n * sizeof(cydriver.CUgraphNodeType))
    r.params = <cydriver.CUDA_KERNEL_NODE_PARAMS*>calloc(n, sizeof(cydriver.CUDA_KERNEL_NODE_PARAMS))
    if r.pred_at == NULL or r.preds == NULL or r.types == NULL or r.params == NULL:
        return _NO_MEMORY
    for e in range(nedges):
        r.pred_at[r.to[e] + 1] += 1
    for i in range(n):
        r.pred_at[i + 1] += r.pred_at[i]
        r.indeg[i] = r.pred_at[i]
    for e in range(nedges):
        r.preds[r.indeg[r.to[e]]] = r.frm[e]
        r.indeg[r.to[e]] += 1
    # every node's type and, for a kernel node, its parameters (all read before the first node is added)
    for i in range(n):
        rc = cydriver.cuGraphNodeGetType(r.nodes[i], &r.types[i])
        if rc != cydriver.CUresult.CUDA_SUCCESS:
            rc_out[0], call_out[0], at_out[0] = rc, "cuGraphNodeGetType", i
            return _REFUSED
        if r.types[i] == cydriver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL:
            rc = cydriver.cuGraphKernelNodeGetParams(r.nodes[i], &r.params[i])
            if rc != cydriver.CUresult.CUDA_SUCCESS:
                rc_out[0], call_out[0], at_out[0] = rc, "cuGraphKernelNodeGetParams", i
                return _REFUSED
    return _READ


cdef tuple _order_and_data(const _Reads* r, Py_ssize_t n, Py_ssize_t norder, Py_ssize_t ndata):
    """``(count, handles in order, data edges)`` of what :func:`_read_order` read: the edges whose data is not the
    default, node by node, as ``(from, to, from_port, to_port, type)``."""
    cdef Py_ssize_t i, e
    handles = [<uintptr_t>r.nodes[r.order[i]] for i in range(norder)]
    data_edges = []
    if ndata:
        for i in range(n):
            for e in range(r.edge_at[i], r.edge_at[i + 1]):
                if r.data[e].from_port or r.data[e].to_port or r.data[e].type:
                    data_edges.append(
                        (<uintptr_t>r.deps[e], <uintptr_t>r.nodes[i], r.data[e].from_port, r.data[e].to_port,
                         r.data[e].type)
                    )
    return n, handles, data_edges


def graph_order(graph):
    """The nodes of driver graph ``graph`` (a handle as an int) in the order a lift adds them, and its edges with data.

    ``cuGraphGetNodes``, then one ``cuGraphNodeGetDependencies`` a node (room for :data:`DEPS_ROOM` dependencies at
    first, twice as many from a node with as many on), all in one ``with nogil`` block; then the order of
    :func:`cudagraph.materialize.lift._topo` (Kahn, first in first out: the nodes without predecessors in
    ``cuGraphGetNodes`` order, then each node's successors in the order of the edges, read node by node).

    Returns
    -------
    tuple of (int, list of int, list of tuple)
        ``(count, handles, data_edges)``: the number of nodes read; their handles in that order (fewer than ``count``
        where the edges make a cycle); the edges whose data is not the default (a port or a type), node by node
        and in each node's dependencies' order, as ``(from, to, from_port, to_port, type)``.

    Raises
    ------
    GraphReadError
        A read the driver refused (the first).
    KeyError
        An edge from a handle that is not a node of the graph (the first, in edge order), as ``_topo`` raises.
    """
    cdef cydriver.CUgraph handle = <cydriver.CUgraph><uintptr_t>graph
    cdef _Reads r
    cdef Py_ssize_t n = 0, nedges = 0, norder = 0, ndata = 0, i, e
    cdef cydriver.CUresult rc = cydriver.CUresult.CUDA_SUCCESS
    cdef const char* call = NULL
    cdef uint64_t unknown = 0
    cdef Py_ssize_t at = -1
    cdef int outcome
    memset(&r, 0, sizeof(r))
    try:
        with nogil:
            outcome = _read_order(handle, &r, &n, &nedges, &norder, &ndata, &rc, &call, &unknown, &at, False)
        if outcome == _REFUSED:
            raise GraphReadError(<int>rc, call.decode())
        if outcome == _NO_MEMORY:
            raise MemoryError()
        if outcome == _UNKNOWN:
            raise KeyError(unknown)
        return _order_and_data(&r, n, norder, ndata)
    finally:
        _release(&r)


# ------------------------------------------------------------------ lifting a graph into a definition


cdef class _Kernel:
    """What the kernel nodes of one kernel share, as ``kernel_of`` gave it (held for the whole lift)."""

    cdef uintptr_t func, kern
    cdef object handle, name, read_args
    cdef Py_ssize_t nargs
    cdef Py_ssize_t* sizes

    def __dealloc__(self):
        free(self.sizes)


cdef _Kernel _kernel_of(object ask, uintptr_t func, uintptr_t kern):
    """The kernel of ``(func, kern)`` as ``ask`` (the caller's ``kernel_of``) gives it, checked."""
    got = ask(func, kern)
    if type(got) is not tuple or len(<tuple>got) != 4 or type((<tuple>got)[2]) is not tuple:
        raise TypeError("lift_graph: kernel_of must give (handle, name, sizes: tuple, read_args)")
    cdef tuple sizes = (<tuple>got)[2]
    cdef _Kernel k = _Kernel.__new__(_Kernel)
    cdef Py_ssize_t a, n = len(sizes)
    k.sizes = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
    if k.sizes == NULL:
        raise MemoryError()
    for a in range(n):
        size = sizes[a]
        # (an int is read as it is: no __index__, no Python code)
        k.sizes[a] = PyLong_AsSsize_t(size) if isinstance(size, int) else -1
        if k.sizes[a] < 0:
            raise ValueError("lift_graph: argument sizes must be non-negative ints")
    k.func, k.kern, k.nargs = func, kern, n
    k.handle, k.name, k.read_args = (<tuple>got)[0], (<tuple>got)[1], (<tuple>got)[3]
    return k


@cython.boundscheck(False)
@cython.wraparound(False)
cdef object _node_args(_Kernel k, void** params):
    """The argument values of a kernel node as a tuple of bytes; where they cannot be read (a NULL ``kernelParams`` or
    a NULL argument pointer), what ``read_args(address)`` answers (or raises)."""
    cdef Py_ssize_t a, n = k.nargs
    if n == 0:
        return ()
    cdef bint readable = params != NULL
    a = 0
    while readable and a < n:
        readable = params[a] != NULL
        a += 1
    if not readable:
        return k.read_args(<uintptr_t>params)
    return tuple([PyBytes_FromStringAndSize(<const char*>params[a], k.sizes[a]) for a in range(n)])


cdef inline object _dims(unsigned int x, unsigned int y, unsigned int z):
    """A dimension as the twin gives ``Graph.kernel`` it: ``x`` alone when ``y`` and ``z`` are 1, else ``(x, y, z)``."""
    if y == 1 and z == 1:
        return x
    return (x, y, z)


cdef inline uintptr_t _address(object obj, str what) except? 0:
    """An address given as an int (an int subclass is read as it is: no Python code runs)."""
    if not isinstance(obj, int):
        raise TypeError(f"{what} must be an address (int)")
    return <uintptr_t>PyLong_AsVoidPtr(obj)


#: Nodes added between two readings of the clock (the GIL offers of lift_graph's adding loop).
cdef enum:
    _OFFER_CHECK = 256


cdef long long _offer_period_ns():
    """Twice ``sys.getswitchinterval()``, in ns: how long the adding loop holds the GIL before offering it (a thread
    waiting for it asks only after a whole interval, and a release restarts that wait)."""
    interval = 0.005
    try:
        got = sys.getswitchinterval()
        if type(got) is float and 0 < got <= 1:
            interval = got
    except Exception:
        pass
    return <long long>(2e9 * interval)


cdef tuple _KERNEL_KEYWORDS = ("shared_mem", "after", "name")


@cython.boundscheck(False)
@cython.wraparound(False)
def lift_graph(graph, add_kernel, keywords, kernel_of, other):
    """Lift driver graph ``graph`` (a handle as an int) into a definition through the callbacks; what
    ``_Lifter.carry`` needs after.

    The reads of :func:`graph_order`, then each node's type (``cuGraphNodeGetType``) and each kernel node's parameters
    (``cuGraphKernelNodeGetParams``), all in one ``with nogil`` block before any callback runs. The nodes are then
    added in the order of :func:`graph_order` (``lift._topo``'s): a kernel node by ``add_kernel(handle, grid, block,
    args, **{keywords[0]: shared memory, keywords[1]: after, keywords[2]: name})``, where ``kernel_of(func, kern)``,
    asked once per kernel, when its first node is added, gives ``(handle, name, sizes, read_args)``: the argument
    values are copied as bytes of those sizes, and ``read_args(address)`` makes them (or raises) where they cannot be
    read. Any other node is made by ``other(handle, type, after)``. ``after``: ``None``, the object made for the one
    predecessor, or a list of them, in edge order. Everything handed to a callback is held by the lift until it ends.
    A long adding loop offers the GIL to other threads as Python code would (``tests/test_lift_compiled_cpu.py``).

    Returns
    -------
    tuple of (int, list of int, list of tuple)
        As :func:`graph_order`: the number of nodes, their handles in the order added, the edges with data.

    Raises
    ------
    GraphReadError
        A read the driver refused (the first), with the position of the node read.
    KeyError
        An edge from a handle that is not a node of the graph.
    TypeError, ValueError, OverflowError
        Malformed arguments, or a malformed answer of ``kernel_of``; anything a callback raises, as it raised it.
    """
    if type(keywords) is not tuple or len(<tuple>keywords) != 3 or not callable(add_kernel) or not callable(kernel_of) \
            or not callable(other):
        raise TypeError(
            "lift_graph(graph: int, add_kernel: callable, keywords: tuple of 3 str, kernel_of: callable, "
            "other: callable)"
        )
    for word in <tuple>keywords:
        if type(word) is not str:
            raise TypeError("lift_graph: keywords must be 3 str")
    cdef cydriver.CUgraph handle = <cydriver.CUgraph>_address(graph, "graph")
    cdef _Reads r
    cdef Py_ssize_t n = 0, nedges = 0, norder = 0, ndata = 0, at = -1, i, e, k, first, npred
    cdef cydriver.CUresult rc = cydriver.CUresult.CUDA_SUCCESS
    cdef const char* call = NULL
    cdef uint64_t unknown = 0
    cdef int outcome
    cdef _Kernel kernel = None
    cdef list kernels = []
    cdef list made
    cdef const cydriver.CUDA_KERNEL_NODE_PARAMS* kp
    cdef object after, args, grid, block, smem, khandle, kname
    # Graph.kernel's own keyword names (lift.py's): a call with literal keywords, which Cython makes a vectorcall
    # with the names in one tuple (bench/lift_cpu.py); other names go through a dict
    cdef bint literal = keywords == _KERNEL_KEYWORDS
    cdef long long since = 0, period = 0
    memset(&r, 0, sizeof(r))
    try:
        with nogil:
            outcome = _read_order(handle, &r, &n, &nedges, &norder, &ndata, &rc, &call, &unknown, &at, True)
        if outcome == _REFUSED:
            raise GraphReadError(<int>rc, call.decode(), at)
        if outcome == _NO_MEMORY:
            raise MemoryError()
        if outcome == _UNKNOWN:
            raise KeyError(unknown)
        made = [None] * n  # (holds every object made until the lift ends)
        for k in range(norder):
            # the GIL offered once held twice the switch interval (the clock read every _OFFER_CHECK nodes; the
            # period at the first reading, so a lift of fewer nodes pays nothing)
            if (k & (_OFFER_CHECK - 1)) == _OFFER_CHECK - 1:
                if period == 0:
                    period = _offer_period_ns()
                    since = cudagraph_monotonic_ns()
                elif cudagraph_monotonic_ns() - since >= period:
                    with nogil:
                        pass
                    since = cudagraph_monotonic_ns()
            i = r.order[k]
            first, npred = r.pred_at[i], r.pred_at[i + 1] - r.pred_at[i]
            if npred == 0:
                after = None
            elif npred == 1:
                after = made[r.preds[first]]  # (made before: the order puts predecessors first)
            else:
                after = [made[r.preds[first + e]] for e in range(npred)]
            if r.types[i] != cydriver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL:
                made[i] = other(<uintptr_t>r.nodes[i], <int>r.types[i], after)
                continue
            kp = &r.params[i]
            if kernel is None or kernel.func != <uintptr_t>kp.func or kernel.kern != <uintptr_t>kp.kern:
                kernel = None
                for e in range(len(kernels) - 1, -1, -1):  # (few kernels a graph: the last ones met first)
                    if (<_Kernel>kernels[e]).func == <uintptr_t>kp.func and (<_Kernel>kernels[e]).kern == <uintptr_t>kp.kern:
                        kernel = <_Kernel>kernels[e]
                        break
                if kernel is None:
                    kernel = _kernel_of(kernel_of, <uintptr_t>kp.func, <uintptr_t>kp.kern)
                    kernels.append(kernel)
            # (each held by a local for the call: a callback may drop every other reference)
            khandle, kname = kernel.handle, kernel.name
            args = _node_args(kernel, kp.kernelParams)
            grid = _dims(kp.gridDimX, kp.gridDimY, kp.gridDimZ)
            block = _dims(kp.blockDimX, kp.blockDimY, kp.blockDimZ)
            smem = kp.sharedMemBytes
            if literal:
                made[i] = add_kernel(khandle, grid, block, args, shared_mem=smem, after=after, name=kname)
            else:
                made[i] = add_kernel(khandle, grid, block, args, **{keywords[0]: smem, keywords[1]: after, keywords[2]: kname})
        return _order_and_data(&r, n, norder, ndata)
    finally:
        _release(&r)


def kernel_args(address, sizes):
    """The argument values behind a kernel node's ``kernelParams`` ``address`` (a ``void*[n]`` array), argument ``i``
    being ``sizes[i]`` bytes, copied.

    Returns
    -------
    tuple of bytes, or int
        The values; an int instead: the index of the first NULL argument pointer, or -1 when ``address`` is NULL.

    Raises
    ------
    TypeError
        ``address`` not an int, ``sizes`` not a tuple, a size not an int (no ``__index__`` is called).
    ValueError
        A negative size.
    """
    if type(sizes) is not tuple:
        raise TypeError("kernel_args(address: int, sizes: tuple)")
    cdef void** ptrs = <void**>_address(address, "address")
    cdef Py_ssize_t i, size, n = len(<tuple>sizes)
    if n == 0:
        return ()
    if ptrs == NULL:
        return -1
    for i in range(n):
        if ptrs[i] == NULL:
            return i
    out = []
    for i in range(n):
        size = PyLong_AsSsize_t((<tuple>sizes)[i])  # (TypeError for a non-int: no __index__)
        if size < 0:
            raise ValueError("kernel_args: sizes must be non-negative")
        out.append(PyBytes_FromStringAndSize(<const char*>ptrs[i], size))
    return tuple(out)
