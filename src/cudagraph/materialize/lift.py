"""Lifting: read any driver graph (captured by anyone) back into a typed definition."""

from __future__ import annotations

import ctypes
import operator
import struct
from typing import Any

from ..definition.graph import Graph
from ..definition.nodes import Node, _set_base
from ..definition.opaque import OpaqueNode
from ..driver.calls import check, ensure_context, require_driver
from ..driver.graph_reader import KERNEL_NODE_TYPE, graph_reader
from ..driver.host_callbacks import _REGISTRY, HOST_FN_ADDRESS
from ..driver.kernel_args import kernel_info
from ..errors import OperandError
from .explicit import LOWERERS, Lowering

__all__ = ["cuda_graph_handle", "lift"]


class _BindingsReader:
    """Reads a driver graph through ``cuda.bindings`` (where the C entry points are unavailable).

    Same interface as :class:`~cudagraph.driver.graph_reader.GraphReader`: node
    handles are ints.
    """

    __slots__ = ("drv",)

    def __init__(self) -> None:
        self.drv = require_driver()

    def nodes(self, graph: int) -> list[int]:
        drv = self.drv
        handle = drv.CUgraph(graph)
        _, count = check(drv.cuGraphGetNodes(handle, 0), "cuGraphGetNodes")
        if not count:
            return []
        nodes, count = check(drv.cuGraphGetNodes(handle, count), "cuGraphGetNodes")
        return [int(n) for n in nodes[:count]]

    def edges(self, graph: int) -> tuple[list[int], list[int]]:
        drv = self.drv
        handle = drv.CUgraph(graph)
        res = drv.cuGraphGetEdges(handle, 0)
        check(res[:1], "cuGraphGetEdges")
        nedges = res[-1]
        if not nedges:
            return [], []
        res = drv.cuGraphGetEdges(handle, nedges)
        check(res[:1], "cuGraphGetEdges")
        nedges = min(nedges, res[-1])
        return [int(a) for a in res[1][:nedges]], [int(b) for b in res[2][:nedges]]

    def read_all(self, nodes: list[int]) -> list[tuple[int, tuple[int, ...] | None]]:
        return [self.read(n) for n in nodes]

    def read(self, node: int) -> tuple[int, tuple[int, ...] | None]:
        drv = self.drv
        dn = drv.CUgraphNode(node)
        t = int(check(drv.cuGraphNodeGetType(dn), "cuGraphNodeGetType"))
        if t != KERNEL_NODE_TYPE:
            return t, None
        kp = check(drv.cuGraphKernelNodeGetParams(dn), "cuGraphKernelNodeGetParams")
        return t, (
            int(kp.func),
            int(kp.gridDimX),
            int(kp.gridDimY),
            int(kp.gridDimZ),
            int(kp.blockDimX),
            int(kp.blockDimY),
            int(kp.blockDimZ),
            int(kp.sharedMemBytes),
            int(kp.kernelParams or 0),
            0,
            int(getattr(kp, "kern", 0) or 0),
        )


def _topo(nodes: list[int], frm: list[int], to: list[int]) -> tuple[list[int], list[list[int]]]:
    """A topological order of positions in ``nodes`` (Kahn, first in first out) and each one's predecessors."""
    n = len(nodes)
    index = dict(zip(nodes, range(n)))
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for ia, ib in zip(list(map(index.__getitem__, frm)), list(map(index.__getitem__, to))):
        preds[ib].append(ia)
        succs[ia].append(ib)
    indeg = list(map(len, preds))
    order = [i for i in range(n) if not indeg[i]]
    # ``order`` is also the queue: the loop reaches what is appended to it, in order.
    for i in order:
        for s in succs[i]:
            indeg[s] -= 1
            if not indeg[s]:
                order.append(s)
    return order, preds


class _NeedsClone(Exception):
    """An opaque node was met while lifting straight from the source graph."""


# ``ctypes_array_type.from_address`` unbound, and the ``raw`` bytes of a char array.
_FROM_ADDRESS = type(ctypes.c_char * 1).from_address
_RAW = operator.attrgetter("raw")


def _kernel_args_reader() -> Any:
    from ..driver.c_entry import NATIVE

    return None if NATIVE is None else NATIVE.kernel_args


#: The compiled reader of kernel arguments (``None``: ctypes below).
_KERNEL_ARGS = _kernel_args_reader()


class _KernelEntry:
    """What every node of one kernel shares within a lift: the handle, the name, argument readers."""

    __slots__ = ("handle", "name", "nargs", "sizes", "ptrs", "ptr_array", "arg_types")

    def __init__(self, handle: Any, name: str, sizes: tuple[int, ...]) -> None:
        self.handle = handle
        self.name = name
        self.nargs = len(sizes)
        self.sizes = tuple(sizes)
        # the kernelParams array (void*[n]) read as ints, and one char[size] type per argument
        self.ptrs = struct.Struct(f"<{len(sizes)}Q")
        self.ptr_array: Any = ctypes.c_void_p * max(len(sizes), 1)
        self.arg_types: tuple[Any, ...] = tuple(ctypes.c_char * s for s in sizes)

    def args(self, address: int) -> tuple[bytes, ...]:
        """The argument values, as exact bytes, behind a node's ``kernelParams`` address."""
        if not self.nargs:
            return ()
        if not address:
            raise OperandError(f"kernel {self.name!r}: arguments given with 'extra' cannot be read back")
        if _KERNEL_ARGS is not None:
            out = _KERNEL_ARGS(address, self.sizes)
            if type(out) is tuple:
                return out  # type: ignore[no-any-return]
            raise OperandError(f"kernel {self.name!r}: argument {out} has no value (a NULL pointer)")
        ptrs = self.ptrs.unpack_from(self.ptr_array.from_address(address))
        if 0 in ptrs:
            raise OperandError(f"kernel {self.name!r}: argument {ptrs.index(0)} has no value (a NULL pointer)")
        # char[size].from_address(p).raw for each argument, looped in C.
        return tuple(map(_RAW, map(_FROM_ADDRESS, self.arg_types, ptrs)))


class _Lifter:
    """One lift: the reader, the keeper of the clone (``None``: reading the source itself), kernels met."""

    __slots__ = ("drv", "reader", "keep", "kernels", "types")

    def __init__(self, reader: Any, keep: Any) -> None:
        self.drv = require_driver()
        self.reader = reader
        self.keep = keep
        self.kernels: dict[tuple[int, int], _KernelEntry] = {}
        T = self.drv.CUgraphNodeType
        self.types = (
            int(T.CU_GRAPH_NODE_TYPE_MEMSET),
            int(T.CU_GRAPH_NODE_TYPE_MEMCPY),
            int(T.CU_GRAPH_NODE_TYPE_HOST),
            int(T.CU_GRAPH_NODE_TYPE_EVENT_RECORD),
            int(T.CU_GRAPH_NODE_TYPE_WAIT_EVENT),
            int(T.CU_GRAPH_NODE_TYPE_GRAPH),
            int(T.CU_GRAPH_NODE_TYPE_EMPTY),
        )

    def kernel(self, func: int, kern: int) -> _KernelEntry:
        """The entry of the kernel a node launches (``func``, or ``kern`` when ``func`` is NULL)."""
        drv = self.drv
        handle: Any = drv.CUkernel(kern) if not func and kern else drv.CUfunction(func)
        info = kernel_info(handle)
        entry = self.kernels[(func, kern)] = _KernelEntry(handle, info.name, info.sizes)
        return entry

    def into(self, g: Graph, graph: int) -> None:
        """Add the nodes and edges of driver graph ``graph`` (a handle as an int) to ``g``."""
        reader = self.reader
        nodes = reader.nodes(graph)
        frm, to = reader.edges(graph)
        order, preds = _topo(nodes, frm, to)
        made: list[Any] = [None] * len(nodes)
        reads = reader.read_all(nodes)
        kernels = self.kernels
        add_kernel = g.kernel
        for i in order:
            ps = preds[i]
            if not ps:
                after: Any = None
            elif len(ps) == 1:
                after = made[ps[0]]
            else:
                after = [made[p] for p in ps]
            t, kp = reads[i]
            if kp is None:
                made[i] = self.other(g, nodes[i], t, after)
                continue
            func, gx, gy, gz, bx, by, bz, smem, address, _extra, kern = kp
            entry = kernels.get((func, kern)) or self.kernel(func, kern)
            made[i] = add_kernel(
                entry.handle,
                gx if gy == 1 and gz == 1 else (gx, gy, gz),
                bx if by == 1 and bz == 1 else (bx, by, bz),
                entry.args(address),
                shared_mem=smem,
                after=after,
                name=entry.name,
            )

    def other(self, g: Graph, handle: int, t: int, after: Any) -> Node:
        """A node of any kind but kernel."""
        drv = self.drv
        dn = drv.CUgraphNode(handle)
        memset, memcpy, host, record, wait, child, empty = self.types
        if t == memset:
            mp = check(drv.cuGraphMemsetNodeGetParams(dn), "cuGraphMemsetNodeGetParams")
            h = int(mp.height)
            return g.memset(
                int(mp.dst),
                int(mp.value),
                width=int(mp.width),
                height=h,
                pitch=int(mp.pitch) if h > 1 else None,
                element_size=int(mp.elementSize),
                after=after,
            )
        if t == memcpy:
            return _lift_copy(g, dn, after) or self.opaque(g, dn, t, after)
        if t == host:
            return _lift_host(g, dn, after) or self.opaque(g, dn, t, after)
        if t == record:
            ev = check(drv.cuGraphEventRecordNodeGetEvent(dn), "cuGraphEventRecordNodeGetEvent")
            return g.record(ev, after=after)
        if t == wait:
            return g.wait(check(drv.cuGraphEventWaitNodeGetEvent(dn), "cuGraphEventWaitNodeGetEvent"), after=after)
        if t == child:
            body_handle = check(drv.cuGraphChildGraphNodeGetGraph(dn), "cuGraphChildGraphNodeGetGraph")
            body = Graph("child")
            self.into(body, int(body_handle))
            return g.child(body, after=after)
        if t == empty:
            return g.empty(after=after)
        return self.opaque(g, dn, t, after)

    def opaque(self, g: Graph, dn: Any, t: int, after: Any) -> OpaqueNode:
        """An :class:`OpaqueNode`; its parameters must be read from a clone (see :func:`lift`)."""
        if self.keep is None:
            raise _NeedsClone
        return _opaque(g, dn, _type_name(t), after, self.keep)


def _type_name(t: int) -> str:
    """``"CU_GRAPH_NODE_TYPE_..."`` for a node type, also one this cuda-bindings does not name."""
    try:
        return str(require_driver().CUgraphNodeType(t).name)
    except ValueError:
        return f"CU_GRAPH_NODE_TYPE_{t}"


def _lift_copy(g: Graph, dn: Any, after: Any) -> Node | None:
    """A 1-D copy node, or ``None`` for a copy this library does not model (2-D, 3-D, arrays)."""
    drv = require_driver()
    cp = check(drv.cuGraphMemcpyNodeGetParams(dn), "cuGraphMemcpyNodeGetParams")
    M = drv.CUmemorytype
    ok_types = (M.CU_MEMORYTYPE_HOST, M.CU_MEMORYTYPE_DEVICE, M.CU_MEMORYTYPE_UNIFIED)
    one_d = (
        int(cp.Height) <= 1
        and int(cp.Depth) <= 1
        and cp.srcMemoryType in ok_types
        and cp.dstMemoryType in ok_types
        and int(cp.srcY) == 0
        and int(cp.dstY) == 0
        and int(cp.srcZ) == 0
        and int(cp.dstZ) == 0
    )
    if not one_d:
        return None
    src = int(cp.srcHost) if cp.srcMemoryType == M.CU_MEMORYTYPE_HOST else int(cp.srcDevice)
    dst = int(cp.dstHost) if cp.dstMemoryType == M.CU_MEMORYTYPE_HOST else int(cp.dstDevice)
    return g.memcpy(dst + int(cp.dstXInBytes), src + int(cp.srcXInBytes), int(cp.WidthInBytes), after=after)


def _lift_host(g: Graph, dn: Any, after: Any) -> Node | None:
    """A host node of this library's callbacks, or ``None`` for a foreign host function."""
    drv = require_driver()
    hp = check(drv.cuGraphHostNodeGetParams(dn), "cuGraphHostNodeGetParams")
    entry = _REGISTRY.get(int(hp.userData)) if int(hp.fn) == HOST_FN_ADDRESS else None
    if entry is None:
        return None
    fn, fargs, _sink, _node = entry
    return g.host(fn, *fargs, after=after)


def _opaque(g: Graph, dn: Any, type_name: str, after: Any, keep: Any) -> OpaqueNode:
    drv = require_driver()
    params = check(drv.cuGraphNodeGetParams(dn), "cuGraphNodeGetParams")
    node = OpaqueNode.__new__(OpaqueNode)
    _set_base(node, g, len(g._nodes), type_name.replace("CU_GRAPH_NODE_TYPE_", "").lower())
    node.driver_type = type_name
    node.params = params
    node.source = keep
    deps = g._deps(after, node.label)
    g._add(node, deps)
    return node


def _lower_opaque(lowering: Lowering, node: OpaqueNode, handle: Any, deps: Any, ndeps: int) -> Any:
    return lowering.add(handle, deps, ndeps, node.params)


LOWERERS[OpaqueNode] = _lower_opaque


class _GraphKeeper:
    """Owns a clone of the lifted driver graph so opaque parameters stay valid."""

    __slots__ = ("handle",)

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __del__(self) -> None:
        try:
            require_driver().cuGraphDestroy(self.handle)
        except Exception:
            pass


def cuda_graph_handle(obj: Any) -> Any:
    """A ``CUgraph`` for a graph object of cuda.core, PyTorch, CuPy, or a raw handle.

    Accepted: a ``CUgraph``; an int address of one; a ``cuda.core``
    ``GraphDefinition`` or a completed ``GraphBuilder`` (its definition); a
    ``torch.cuda.CUDAGraph`` captured with ``keep_graph=True``
    (``raw_cuda_graph()``); a CuPy graph exposing its handle.

    Raises
    ------
    OperandError
        For anything else.
    """
    drv = require_driver()
    if isinstance(obj, drv.CUgraph):
        return obj
    if isinstance(obj, int) and not isinstance(obj, bool):
        return drv.CUgraph(obj)
    raw = getattr(obj, "raw_cuda_graph", None)  # torch.cuda.CUDAGraph(keep_graph=True)
    if callable(raw):
        return drv.CUgraph(int(raw()))
    gd = getattr(obj, "graph_definition", None)  # cuda.core GraphBuilder
    if gd is not None and not callable(gd):
        obj = gd
    handle = getattr(obj, "handle", None)  # cuda.core GraphDefinition
    if handle is not None and type(handle).__name__ == "CUgraph":
        return handle
    for attr in ("graph", "_graph"):  # CuPy
        h = getattr(obj, attr, None)
        if isinstance(h, int) and h:
            return drv.CUgraph(h)
    raise OperandError(f"cannot find a CUgraph in {type(obj).__name__}")


def lift(obj: Any, name: str = "lifted") -> Graph:
    """Read a driver graph back into a typed definition.

    Kernels (handle, grid, block, shared memory, argument bytes), 1-D copies,
    fills, cudagraph host callbacks, events, child graphs and empty nodes
    become typed nodes; anything else becomes an :class:`OpaqueNode` that is
    re-created from its driver parameters. The definition stays valid after
    the source is destroyed: typed nodes copy what they need (argument bytes
    included), and a graph with opaque nodes is read from a clone of the
    source that the definition keeps.

    Parameters
    ----------
    obj : CUgraph, int, cuda.core GraphDefinition/GraphBuilder, torch.cuda.CUDAGraph, CuPy graph
        The graph to read.
    name : str
        The definition's name.

    Returns
    -------
    Graph
    """
    drv = require_driver()
    ensure_context()
    handle = cuda_graph_handle(obj)
    reader = graph_reader() or _BindingsReader()
    g = Graph(name)
    try:
        # Typed nodes copy everything they need: read the source itself.
        _Lifter(reader, None).into(g, int(handle))
        return g
    except _NeedsClone:
        pass
    # Opaque nodes keep driver parameters that point into their graph: read a clone and keep it.
    clone = check(drv.cuGraphClone(handle), "cuGraphClone")
    keep = _GraphKeeper(clone)
    g = Graph(name)
    _Lifter(reader, keep).into(g, int(clone))
    return g
