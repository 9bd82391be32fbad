"""Lifting: read any driver graph (captured by anyone) back into a typed definition."""

from __future__ import annotations

import ctypes
from collections import deque
from typing import Any

from ._driver._calls import check, ensure_context, require_driver
from ._driver._host_callbacks import _REGISTRY, HOST_FN_ADDRESS
from ._driver._kernel_args import kernel_info
from ._explicit import LOWERERS, Lowering
from ._graph import Graph
from ._nodes import Node, _set_base
from ._opaque import OpaqueNode
from .errors import OperandError

__all__ = ["cuda_graph_handle", "lift"]


def _nodes_and_edges(handle: Any) -> tuple[list[Any], list[tuple[Any, Any]]]:
    drv = require_driver()
    _, count = check(drv.cuGraphGetNodes(handle, 0), "cuGraphGetNodes")
    nodes, _n = check(drv.cuGraphGetNodes(handle, count), "cuGraphGetNodes") if count else ([], 0)
    res = drv.cuGraphGetEdges(handle, 0)
    check(res[:1], "cuGraphGetEdges")
    nedges = res[-1]
    edges: list[tuple[Any, Any]] = []
    if nedges:
        res = drv.cuGraphGetEdges(handle, nedges)
        check(res[:1], "cuGraphGetEdges")
        frm, to = res[1], res[2]
        edges = list(zip(frm[:nedges], to[:nedges]))
    return list(nodes[:count]), edges


def _topo(nodes: list[Any], edges: list[tuple[Any, Any]]) -> tuple[list[int], dict[int, list[int]]]:
    index = {int(n): i for i, n in enumerate(nodes)}
    preds: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
    succs: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
    for a, b in edges:
        ia, ib = index[int(a)], index[int(b)]
        preds[ib].append(ia)
        succs[ia].append(ib)
    indeg = {i: len(p) for i, p in preds.items()}
    ready = deque(i for i in range(len(nodes)) if indeg[i] == 0)
    order: list[int] = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for s in succs[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return order, preds


def _kernel_args(kp: Any) -> tuple[Any, tuple[bytes, ...], str]:
    """The kernel handle and its arguments as exact bytes, read through the parameter layout."""
    drv = require_driver()
    # Copy the handles out of the parameter struct: objects read from its
    # fields point into it and would dangle once it is freed.
    func: Any = drv.CUfunction(int(kp.func))
    kern = int(getattr(kp, "kern", 0) or 0)
    if not int(func) and kern:
        func = drv.CUkernel(kern)
    info = kernel_info(func)
    address = int(kp.kernelParams or 0)
    if not info.sizes:
        return func, (), info.name
    if not address:
        raise OperandError(f"kernel {info.name!r}: arguments given with 'extra' cannot be read back")
    ptrs = (ctypes.c_void_p * len(info.sizes)).from_address(address)
    args = tuple(ctypes.string_at(ptrs[i] or 0, size) for i, size in enumerate(info.sizes))
    return func, args, info.name


def _lift_into(g: Graph, handle: Any, keep: Any) -> None:
    drv = require_driver()
    T = drv.CUgraphNodeType
    nodes, edges = _nodes_and_edges(handle)
    order, preds = _topo(nodes, edges)
    made: dict[int, Node] = {}
    for i in order:
        dn = nodes[i]
        after = [made[p] for p in preds[i]] or None
        t = check(drv.cuGraphNodeGetType(dn), "cuGraphNodeGetType")
        if t == T.CU_GRAPH_NODE_TYPE_KERNEL:
            kp = check(drv.cuGraphKernelNodeGetParams(dn), "cuGraphKernelNodeGetParams")
            func, args, name = _kernel_args(kp)
            node: Node = g.kernel(
                func,
                (kp.gridDimX, kp.gridDimY, kp.gridDimZ),
                (kp.blockDimX, kp.blockDimY, kp.blockDimZ),
                args,
                shared_mem=int(kp.sharedMemBytes),
                after=after,
                name=name,
            )
        elif t == T.CU_GRAPH_NODE_TYPE_MEMSET:
            mp = check(drv.cuGraphMemsetNodeGetParams(dn), "cuGraphMemsetNodeGetParams")
            h = int(mp.height)
            node = g.memset(
                int(mp.dst),
                int(mp.value),
                width=int(mp.width),
                height=h,
                pitch=int(mp.pitch) if h > 1 else None,
                element_size=int(mp.elementSize),
                after=after,
            )
        elif t == T.CU_GRAPH_NODE_TYPE_MEMCPY:
            node = _lift_copy(g, dn, after) or _opaque(g, dn, t, after, keep)
        elif t == T.CU_GRAPH_NODE_TYPE_HOST:
            node = _lift_host(g, dn, after) or _opaque(g, dn, t, after, keep)
        elif t == T.CU_GRAPH_NODE_TYPE_EVENT_RECORD:
            ev = check(drv.cuGraphEventRecordNodeGetEvent(dn), "cuGraphEventRecordNodeGetEvent")
            node = g.record(ev, after=after)
        elif t == T.CU_GRAPH_NODE_TYPE_WAIT_EVENT:
            node = g.wait(check(drv.cuGraphEventWaitNodeGetEvent(dn), "cuGraphEventWaitNodeGetEvent"), after=after)
        elif t == T.CU_GRAPH_NODE_TYPE_GRAPH:
            body_handle = check(drv.cuGraphChildGraphNodeGetGraph(dn), "cuGraphChildGraphNodeGetGraph")
            body = Graph("child")
            _lift_into(body, body_handle, keep)
            node = g.child(body, after=after)
        elif t == T.CU_GRAPH_NODE_TYPE_EMPTY:
            node = g.empty(after=after)
        else:
            node = _opaque(g, dn, t, after, keep)
        made[i] = node


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


def _opaque(g: Graph, dn: Any, t: Any, after: Any, keep: Any) -> OpaqueNode:
    drv = require_driver()
    params = check(drv.cuGraphNodeGetParams(dn), "cuGraphNodeGetParams")
    node = OpaqueNode.__new__(OpaqueNode)
    _set_base(node, g, len(g._nodes), str(t.name).replace("CU_GRAPH_NODE_TYPE_", "").lower())
    node.driver_type = str(t.name)
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
    re-created from its driver parameters. The source graph is cloned, so the
    definition stays valid after the source is destroyed.

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
    clone = check(drv.cuGraphClone(handle), "cuGraphClone")
    keep = _GraphKeeper(clone)
    g = Graph(name)
    _lift_into(g, clone, keep)
    return g
