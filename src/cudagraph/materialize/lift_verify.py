"""The round-trip check of a lift: rebuild the definition, read both driver graphs back, compare node by node.

:func:`verify_lift` is the oracle for lifting (``cg.lift(obj, verify=True)``): what the definition
builds must be what the source driver graph holds. Both graphs are read with ``cuda.bindings``' getters
(not with the readers the lift used) and compared node by node in the lift's order (the Kahn order of
the source, which is the definition's and so the rebuilt graph's creation order): the node type, every
parameter of the kind (a kernel's function, dimensions, shared memory and argument bytes; a copy's and a
fill's whole parameter structure; ...), every kernel launch attribute the driver reports, and the edges
into the node with their data. Child graphs are compared the same way, recursively. The first difference
is raised, naming the node.

What cannot be equal by construction is not compared: the user data of host callbacks (the lifted
callback is registered anew), the addresses graph allocations get, and the device node handle of a
device-updatable kernel (its flag is compared). Nodes of the types without a comparer below
(conditional nodes, batched memory operations, external semaphores, memory frees) are compared by type
and edges only.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from ..definition.graph import Graph
from ..definition.parametrize import public_fields
from ..driver.api import (
    graph_child_graph_node_get_graph,
    graph_event_record_node_get_event,
    graph_event_wait_node_get_event,
    graph_host_node_get_params,
    graph_kernel_node_get_params,
    graph_mem_alloc_node_get_params,
    graph_memcpy_node_get_params,
    graph_memset_node_get_params,
    graph_node_get_type,
    graph_nodes,
)
from ..driver.calls import require_driver
from ..driver.compat import dependencies_with_data
from ..driver.kernel_args import kernel_info
from ..driver.node_reads import NodeReads, extra_arguments
from ..errors import LiftMismatchError
from .explicit import lower
from .graph_handles import cuda_graph_handle

__all__ = ["verify_lift", "compare_driver_graphs"]

#: ``CUlaunchAttributeID`` of the device-updatable flag (its value also holds a handle made per node).
_DEVICE_UPDATABLE = 13


def verify_lift(g: Graph, source: Any) -> int:
    """Rebuild ``g`` (lifted from ``source``) on the driver and compare it with ``source``, node by node.

    Parameters
    ----------
    g : Graph
        The definition :func:`cudagraph.lift` made from ``source``, before any parametrization.
    source : CUgraph, int, or any graph object :func:`cudagraph.lift` takes
        The driver graph it was read from.

    Returns
    -------
    int
        The number of nodes compared (bodies included).

    Raises
    ------
    LiftMismatchError
        The first difference: the node (its position, kind and name), what differs, both values.
    """
    handle = cuda_graph_handle(source)
    g.validate()
    lowered = lower(g, {}, [])
    try:
        return compare_driver_graphs(handle, lowered.handle, g.name, list(g._nodes))
    finally:
        lowered.destroy()


def _deps(node: Any) -> list[tuple[int, int, int, int]]:
    """``(dependency handle, from_port, to_port, type)`` of the edges into ``node``."""
    return dependencies_with_data(node)


def _kahn(nodes: list[Any]) -> list[int]:
    """The lift's order of ``nodes`` (Kahn, first in first out, edges read node by node)."""
    index = {int(n): i for i, n in enumerate(nodes)}
    succs: list[list[int]] = [[] for _ in nodes]
    indeg = [0] * len(nodes)
    for i, n in enumerate(nodes):
        for d, *_ in _deps(n):
            succs[index[d]].append(i)
            indeg[i] += 1
    order = [i for i in range(len(nodes)) if not indeg[i]]
    for i in order:
        for s in succs[i]:
            indeg[s] -= 1
            if not indeg[s]:
                order.append(s)
    return order


def compare_driver_graphs(source: Any, rebuilt: Any, name: str, labels: list[Any] | None = None) -> int:
    """Compare driver graph ``rebuilt`` (made from a lift of ``source``) with ``source``; the nodes compared.

    ``rebuilt``'s nodes are taken in creation order, ``source``'s in the lift's order. ``labels``: the
    definition's nodes in the same order, to name a node in a message.

    Raises
    ------
    LiftMismatchError
        The first difference.
    """
    src_all = graph_nodes(source)
    order = _kahn(src_all)
    src = [src_all[i] for i in order]
    new = graph_nodes(rebuilt)
    if len(src) != len(new):
        raise LiftMismatchError(f"verify Graph {name!r}: the source has {len(src)} nodes, the rebuilt graph {len(new)}")
    src_pos = {int(n): k for k, n in enumerate(src)}
    new_pos = {int(n): k for k, n in enumerate(new)}
    reads = NodeReads(prune=False)
    compared = 0
    for k, (a, b) in enumerate(zip(src, new)):

        def where(k: int = k) -> str:
            node = labels[k] if labels is not None and k < len(labels) else None
            return f"verify Graph {name!r}: node {k}" + (f" ({node.label} {node.name!r})" if node is not None else "")

        ta = graph_node_get_type(a)
        tb = graph_node_get_type(b)
        if int(ta) != int(tb):
            raise LiftMismatchError(f"{where()}: node type: source {ta.name}, rebuilt {tb.name}")
        ea = sorted((src_pos[d], fp, tp, t) for d, fp, tp, t in _deps(a))
        eb = sorted((new_pos[d], fp, tp, t) for d, fp, tp, t in _deps(b))
        if ea != eb:
            raise LiftMismatchError(
                f"{where()}: edges in (predecessor position, from_port, to_port, type): source {ea}, rebuilt {eb}"
            )
        compare = _COMPARERS.get(ta.name.replace("CU_GRAPH_NODE_TYPE_", ""))
        if compare is not None:
            compared += compare(a, b, where, reads, name)
        compared += 1
    return compared


def _differ(where: Callable[[], str], what: str, x: Any, y: Any) -> None:
    if x != y:
        raise LiftMismatchError(f"{where()}: {what}: source {x!r}, rebuilt {y!r}")


def _kernel(a: Any, b: Any, where: Callable[[], str], reads: NodeReads, name: str) -> int:
    pa = graph_kernel_node_get_params(a)
    pb = graph_kernel_node_get_params(b)
    fa, ka = int(pa.func or 0), int(getattr(pa, "kern", 0) or 0)
    fb, kb = int(pb.func or 0), int(getattr(pb, "kern", 0) or 0)
    if not ((ka and ka == kb) or (fa and fa == fb)):
        _differ(where, "kernel (func, kern)", (hex(fa), hex(ka)), (hex(fb), hex(kb)))
    for field in ("gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ", "sharedMemBytes"):
        _differ(where, field, int(getattr(pa, field)), int(getattr(pb, field)))
    drv = require_driver()
    handle = drv.CUkernel(ka) if not fa and ka else drv.CUfunction(fa)
    info = kernel_info(handle)
    _differ(where, "argument bytes", _arguments(pa, info), _arguments(pb, info))
    xa, xb = reads.attributes(int(a)), reads.attributes(int(b))
    for attr_id in sorted(set(xa) | set(xb)):
        va, vb = xa.get(attr_id), xb.get(attr_id)
        if attr_id == _DEVICE_UPDATABLE and va is not None and vb is not None:
            va, vb = va[:4], vb[:4]
        _differ(where, f"launch attribute id {attr_id}", va, vb)
    return 0


def _arguments(p: Any, info: Any) -> list[bytes]:
    """The argument bytes of a kernel node: behind ``kernelParams``, else cut from the ``extra`` buffer."""
    sizes = tuple(info.sizes)
    address = int(p.kernelParams or 0)
    if not address:
        packed = extra_arguments(int(p.extra or 0), tuple(info.offsets), sizes)
        return [] if packed is None else list(packed)
    table = (ctypes.c_void_p * len(sizes)).from_address(address)
    return [ctypes.string_at(table[i] or 0, size) if table[i] else b"" for i, size in enumerate(sizes)]


def _fields(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The public, non-callable fields of a driver parameter structure, as ints or reprs (nested one level)."""
    out: dict[str, Any] = {}
    for attr, v in public_fields(obj, skip):
        try:
            out[attr] = int(v)
        except Exception:
            try:
                out[attr] = repr(sorted(_fields(v).items())) if not isinstance(v, (str, bytes)) else v
            except Exception:
                out[attr] = repr(v)
    return out


def _params(get_params: Callable[[Any], Any], skip: tuple[str, ...] = ()) -> Callable[..., int]:
    def compare(a: Any, b: Any, where: Callable[[], str], reads: NodeReads, name: str) -> int:
        fa = _fields(get_params(a), skip)
        fb = _fields(get_params(b), skip)
        for key in sorted(set(fa) | set(fb)):
            _differ(where, key, fa.get(key), fb.get(key))
        return 0

    return compare


#: ``CUmemorytype``: host, device, array, unified.
_HOST, _DEVICE, _ARRAY, _UNIFIED = 1, 2, 3, 4


def _memcpy(a: Any, b: Any, where: Callable[[], str], reads: NodeReads, name: str) -> int:
    """A copy's whole ``CUDA_MEMCPY3D``, each endpoint as the pointer it names: a unified endpoint (the
    driver tells host from device by the address) matches a host or device one at the same address."""
    fa = _fields(graph_memcpy_node_get_params(a))
    fb = _fields(graph_memcpy_node_get_params(b))
    for side in ("src", "dst"):
        ends = []
        for f in (fa, fb):
            kind = f.pop(f"{side}MemoryType", None)
            host, device, array = f.pop(f"{side}Host", 0), f.pop(f"{side}Device", 0), f.pop(f"{side}Array", 0)
            pointer = host if kind == _HOST else array if kind == _ARRAY else device
            ends.append((kind, pointer))
        (ka, pa), (kb, pb) = ends
        if pa != pb or (ka != kb and (_ARRAY in (ka, kb) or _UNIFIED not in (ka, kb))):
            _differ(where, f"{side} (memory type, pointer)", (ka, hex(pa or 0)), (kb, hex(pb or 0)))
    for key in sorted(set(fa) | set(fb)):
        _differ(where, key, fa.get(key), fb.get(key))
    return 0


def _child(a: Any, b: Any, where: Callable[[], str], reads: NodeReads, name: str) -> int:
    ga = graph_child_graph_node_get_graph(a)
    gb = graph_child_graph_node_get_graph(b)
    return compare_driver_graphs(ga, gb, f"{name} (a child graph: {where()})")


def _event(get_event: Callable[[Any], Any]) -> Callable[..., int]:
    def compare(a: Any, b: Any, where: Callable[[], str], reads: NodeReads, name: str) -> int:
        _differ(where, "event", int(get_event(a)), int(get_event(b)))
        return 0

    return compare


#: Node type (without ``CU_GRAPH_NODE_TYPE_``) -> the comparison of its parameters.
_COMPARERS: dict[str, Callable[..., int]] = {
    "KERNEL": _kernel,
    "MEMCPY": _memcpy,
    "MEMSET": _params(graph_memset_node_get_params),
    "HOST": _params(graph_host_node_get_params, skip=("userData",)),
    "GRAPH": _child,
    "EVENT_RECORD": _event(graph_event_record_node_get_event),
    "WAIT_EVENT": _event(graph_event_wait_node_get_event),
    "MEM_ALLOC": _params(graph_mem_alloc_node_get_params, skip=("dptr",)),
}
