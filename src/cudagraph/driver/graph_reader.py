"""Reading driver graphs through the C entry points (ctypes), for lifting many nodes.

Reading a node through ``cuda.bindings`` builds a wrapper object for the
node, one for its parameter structure and one for each field read from it.
Lifting a captured graph of thousands of kernels spends most of its time
there. :class:`GraphReader` calls the exported functions with reused ctypes
arguments instead: the node list and the edge lists come back as plain ints
(one ``struct`` unpack per list), and a kernel node's parameters are read
into one reused buffer and unpacked with one precompiled :class:`struct.Struct`.

Layout of ``CUDA_KERNEL_NODE_PARAMS_v2`` (x86-64 and aarch64, 72 bytes), as
``cuda.bindings`` lays it out (see ``tests/test_lift_cpu.py``)::

    func            CUfunction      @0
    gridDimX/Y/Z    unsigned int    @8, @12, @16
    blockDimX/Y/Z   unsigned int    @20, @24, @28
    sharedMemBytes  unsigned int    @32  (4 bytes of padding follow)
    kernelParams    void**          @40
    extra           void**          @48
    kern            CUkernel        @56
    ctx             CUcontext       @64

:func:`graph_reader` returns ``None`` where the entry points cannot be found
(no ``libcuda.so.1``, an older driver, ``CUDAGRAPH_NO_C_ENTRY=1``); the caller
then reads through ``cuda.bindings``.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, NoReturn

from .c_entry import c_function
from .calls import raise_error, require_driver
from .node_reads import EDGE_DATA, EdgeData, NodeReads, compiled_reads

__all__ = [
    "EDGE_DATA_SIZE",
    "EDGE_DATA",
    "EdgeData",
    "KERNEL_NODE_TYPE",
    "KERNEL_PARAMS",
    "KERNEL_PARAMS_SIZE",
    "SYMBOLS",
    "GraphReader",
    "graph_reader",
]

#: ``CU_GRAPH_NODE_TYPE_KERNEL``.
KERNEL_NODE_TYPE = 0

#: ``CUDA_KERNEL_NODE_PARAMS_v2`` up to ``kern``: ``(func, gridDimX, gridDimY, gridDimZ,
#: blockDimX, blockDimY, blockDimZ, sharedMemBytes, kernelParams, extra, kern)``.
KERNEL_PARAMS = struct.Struct("<Q7I4xQQQ")

#: ``sizeof(CUDA_KERNEL_NODE_PARAMS_v2)`` (``ctx`` at offset 64 is not read).
KERNEL_PARAMS_SIZE = 72

#: ``sizeof(CUgraphEdgeData)``.
EDGE_DATA_SIZE = 8

#: The entry points a :class:`GraphReader` calls, in the order its constructor takes them.
SYMBOLS = ("cuGraphGetNodes", "cuGraphNodeGetDependencies_v2", "cuGraphNodeGetType", "cuGraphKernelNodeGetParams_v2")

#: Dependencies read per node in one call at first (a node with more is read again with room for twice as many).
DEPS_ROOM = 32


def _fail(rc: int, call: str) -> NoReturn:
    """Raise the typed error of a failed C call (``rc`` is the ``CUresult`` as an int)."""
    code: Any = rc
    try:
        code = require_driver().CUresult(rc)
    except Exception:  # a code this cuda-bindings does not name
        pass
    raise_error(code, call)


class GraphReader:
    """Reads nodes, edges, node types and kernel parameters of driver graphs as ints.

    One reader serves one lift (its buffers are reused from call to call and
    are not shared between threads).

    Parameters
    ----------
    get_nodes, get_deps, get_type, get_kernel : ctypes function
        ``cuGraphGetNodes``, ``cuGraphNodeGetDependencies_v2``, ``cuGraphNodeGetType`` and
        ``cuGraphKernelNodeGetParams_v2`` (returning the ``CUresult`` as an int,
        no ``argtypes``: every argument is passed as a ctypes object).
    get_attr : ctypes function, optional
        ``cuGraphKernelNodeGetAttribute`` (``None``: launch attributes are read through ``cuda.bindings``).
    """

    __slots__ = (
        "_get_nodes",
        "_get_deps",
        "_get_type",
        "_get_kernel",
        "_node",
        "_type",
        "_type_ref",
        "_params",
        "_params_ref",
        "_count",
        "_count_ref",
        "attributes",
        "graph_order",
        "_module",
        "_lift",
    )

    def __init__(self, get_nodes: Any, get_deps: Any, get_type: Any, get_kernel: Any, get_attr: Any = None) -> None:
        self._get_nodes = get_nodes
        self._get_deps = get_deps
        self._get_type = get_type
        self._get_kernel = get_kernel
        self._node = ctypes.c_void_p()
        self._type = ctypes.c_int()
        self._type_ref = ctypes.byref(self._type)
        self._params = (ctypes.c_char * KERNEL_PARAMS_SIZE)()
        self._params_ref = ctypes.byref(self._params)
        self._count = ctypes.c_size_t()
        self._count_ref = ctypes.byref(self._count)
        #: ``attributes(node)``: ``{CUlaunchAttributeID: value bytes}`` of a kernel node
        #: (:meth:`cudagraph.driver.node_reads.NodeReads.attributes`; through ``cuda.bindings``
        #: when ``get_attr`` is ``None``).
        reads = NodeReads(get_attr, get_deps)
        self.attributes = reads.attributes
        #: ``graph_order(graph)``: the node handles in the lift's order and the edges with data, read in compiled
        #: code (:meth:`cudagraph.driver.node_reads.NodeReads.graph_order`), or ``None`` where it cannot be.
        self.graph_order = reads.graph_order
        # The compiled lift calls the driver's own entry points (through cuda.bindings.cydriver): used only where
        # those are the ones this reader was given (not a test's fakes).
        own = all(
            fn is not None and fn is c_function(s)
            for fn, s in zip((get_nodes, get_deps, get_type, get_kernel), SYMBOLS)
        )
        self._module: Any = compiled_reads() if own else None
        self._lift: Any = getattr(self._module, "lift_graph", None)

    def nodes(self, graph: int) -> list[int]:
        """The handles of ``graph``'s nodes (``cuGraphGetNodes`` order)."""
        g = ctypes.c_void_p(graph)
        self._count.value = 0
        rc = self._get_nodes(g, None, self._count_ref)
        if rc:
            _fail(rc, "cuGraphGetNodes")
        n = self._count.value
        if not n:
            return []
        out = (ctypes.c_void_p * n)()
        rc = self._get_nodes(g, out, self._count_ref)
        if rc:
            _fail(rc, "cuGraphGetNodes")
        n = min(n, self._count.value)
        return list(struct.unpack_from(f"<{n}Q", out))

    def edges(self, nodes: list[int], data_edges: list[EdgeData] | None = None) -> tuple[list[int], list[int]]:
        """``(from, to)``: the edges into each node of ``nodes``, node by node, each node's in its dependencies' order.

        One ``cuGraphNodeGetDependencies_v2`` call a node: ``cuGraphGetEdges_v2``
        takes time quadratic in the graph's size, this linear (the lift of
        ``bench/materializers.py``). The edge data
        (programmatic ports) is read too, as the driver refuses a query that
        would drop it; the edges whose data is not the default are appended to
        ``data_edges`` when it is given, as ``(from, to, from_port, to_port, type)``.
        """
        frm: list[int] = []
        to: list[int] = []
        room = DEPS_ROOM
        deps = (ctypes.c_void_p * room)()
        data = (ctypes.c_char * (EDGE_DATA_SIZE * room))()
        h, count, count_ref = self._node, self._count, self._count_ref
        for node in nodes:
            h.value = node
            while True:
                count.value = room
                rc = self._get_deps(h, deps, data, count_ref)
                if rc:
                    _fail(rc, "cuGraphNodeGetDependencies")
                if count.value < room:
                    break
                room *= 2  # as many as there was room for: perhaps more
                deps = (ctypes.c_void_p * room)()
                data = (ctypes.c_char * (EDGE_DATA_SIZE * room))()
            n = count.value
            if n:
                sources = struct.unpack_from(f"<{n}Q", deps)
                frm.extend(sources)
                to.extend([node] * n)
                if data_edges is not None and data.raw[: EDGE_DATA_SIZE * n].count(0) != EDGE_DATA_SIZE * n:
                    for i in range(n):
                        frm_port, to_port, kind = EDGE_DATA.unpack_from(data, EDGE_DATA_SIZE * i)
                        if frm_port or to_port or kind:
                            data_edges.append((sources[i], node, frm_port, to_port, kind))
        return frm, to

    def read(self, node: int) -> tuple[int, tuple[int, ...] | None]:
        """The node's type and, for a kernel node, its parameters.

        Parameters
        ----------
        node : int
            The ``CUgraphNode`` handle.

        Returns
        -------
        tuple
            ``(type, kernel)``: the ``CUgraphNodeType`` as an int, and for a
            kernel node the tuple :data:`KERNEL_PARAMS` unpacks (else
            ``None``). Its ``kernelParams`` address points into memory owned
            by the node: read the argument values before the graph changes.
        """
        h = self._node
        h.value = node
        rc = self._get_type(h, self._type_ref)
        if rc:
            _fail(rc, "cuGraphNodeGetType")
        t = self._type.value
        if t != KERNEL_NODE_TYPE:
            return t, None
        rc = self._get_kernel(h, self._params_ref)
        if rc:
            _fail(rc, "cuGraphKernelNodeGetParams")
        return t, KERNEL_PARAMS.unpack_from(self._params)

    def lift(
        self, graph: int, add_kernel: Any, kernel_of: Any, other: Any
    ) -> tuple[int, list[int], list[EdgeData]] | None:
        """Lift ``graph`` in one compiled call (``cudagraph.driver._reads.lift_graph``); ``None`` where this reader does
        not read in compiled code (the module not built, or entry points other than the driver's own).

        ``add_kernel`` is the definition's ``Graph.kernel``;
        ``kernel_of(func, kern)`` gives ``(handle, name, sizes, read_args)`` of the
        kernel a node launches; ``other(handle, type, after)`` makes any node but
        a kernel node. The twin is :meth:`cudagraph.materialize.lift._Lifter.into_steps`.

        Returns
        -------
        tuple or None
            ``(count, handles, data_edges)`` as :meth:`~cudagraph.driver.node_reads.NodeReads.graph_order` gives them
            (the graph is read once for the lift and its carry).

        Raises
        ------
        DriverError
            A read the driver refused, naming the call.
        """
        lift = self._lift
        if lift is None:
            return None
        try:
            got: tuple[int, list[int], list[EdgeData]] = lift(graph, add_kernel, _KERNEL_KEYWORDS, kernel_of, other)
        except self._module.GraphReadError as e:
            _fail(e.result, e.call)
        return got


#: The keywords ``lift_graph`` passes ``Graph.kernel`` the shared memory, the dependencies and the name by.
_KERNEL_KEYWORDS = ("shared_mem", "after", "name")


def graph_reader() -> GraphReader | None:
    """A new :class:`GraphReader`, or ``None`` when an entry point is unavailable."""
    fns = [c_function(s) for s in SYMBOLS]
    if any(f is None for f in fns):
        return None
    return GraphReader(fns[0], fns[1], fns[2], fns[3], c_function("cuGraphKernelNodeGetAttribute"))
