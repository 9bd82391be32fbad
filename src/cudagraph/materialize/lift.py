"""Lifting: read any driver graph (captured by anyone) back into a typed definition."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

from ..definition.graph import Graph
from ..definition.kinds.launch import SMEM_DEFAULT_LIMIT
from ..definition.kinds.opaque import OpaqueNode
from ..definition.memory_info import describe_memory
from ..definition.nodes import Node
from ..definition.parametrize import ParametrizeReport, keep_alive, moving_slots, parametrize
from ..definition.relocation import plan_relocation
from ..driver.api import (
    graph_clone,
    graph_destroy_quietly,
    graph_kernel_node_get_params,
    graph_node_get_dependencies_result,
    graph_node_get_type,
    graph_nodes,
)
from ..driver.calls import check, ensure_context, require_driver
from ..driver.compat import edge_data_of
from ..driver.graph_reader import KERNEL_NODE_TYPE, graph_reader
from ..driver.kernel_args import kernel_info
from ..driver.node_reads import EdgeData, NodeReads, extra_arguments
from ..errors import OperandError, UnsupportedError
from ..ops.kinds.base import KindOps
from ..ops.kinds.kernel import LiftedKernel
from ..ops.registry import KERNEL, LIFTS, OPAQUE
from .capture_pools import DeviceMemory, private_pool_segments
from .graph_handles import cuda_graph_handle
from .lift_verify import verify_lift

__all__ = ["cuda_graph_handle", "lift", "lift_exact", "parametrize_lifted"]


class _BindingsReader:
    """Reads a driver graph through ``cuda.bindings`` (where the C entry points are unavailable).

    Same interface as :class:`~cudagraph.driver.graph_reader.GraphReader`: node
    handles are ints.
    """

    __slots__ = ("drv", "attributes")

    def __init__(self) -> None:
        self.drv = require_driver()
        self.attributes = NodeReads(None, None, self.drv).attributes

    def graph_order(self, graph: int) -> None:
        """No compiled reads through ``cuda.bindings``: :meth:`_Lifter.carry` reads and orders in Python."""
        return None

    def nodes(self, graph: int) -> list[int]:
        return [int(n) for n in graph_nodes(self.drv.CUgraph(graph))]

    def edges(self, nodes: list[int], data_edges: list[EdgeData] | None = None) -> tuple[list[int], list[int]]:
        drv = self.drv
        frm: list[int] = []
        to: list[int] = []
        room = 4  # one call a node for most (a node with as many is read again with room for twice as many)
        for node in nodes:
            dn = drv.CUgraphNode(node)
            while True:
                res = graph_node_get_dependencies_result(dn, room)
                check(res[:1], "cuGraphNodeGetDependencies")
                if res[-1] < room:
                    break
                room *= 2
            deps = [int(d) for d in res[1][: res[-1]]]
            frm.extend(deps)
            to.extend([node] * len(deps))
            data = edge_data_of(res, res[-1]) if data_edges is not None else None
            if data is not None and data_edges is not None:
                for d, e in zip(deps, data):
                    kind = int(e.type)
                    if e.from_port or e.to_port or kind:
                        data_edges.append((d, node, int(e.from_port), int(e.to_port), kind))
        return frm, to

    def read(self, node: int) -> tuple[int, tuple[int, ...] | None]:
        dn = self.drv.CUgraphNode(node)
        t = int(graph_node_get_type(dn))
        if t != KERNEL_NODE_TYPE:
            return t, None
        kp = graph_kernel_node_get_params(dn)
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
            int(kp.extra or 0),
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


#: ``CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC``.
_PROGRAMMATIC = 1
#: ``from_port`` of a programmatic edge -> the port's name in :class:`~cudagraph.definition.kinds.kernel.LaunchAttrs`
#: (``CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC``, ``CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER``).
_PORTS = {1: "programmatic", 2: "launch_order"}


class _NeedsClone(Exception):
    """An opaque node was met while lifting straight from the source graph."""


class _Lifter:
    """One lift: the reader, the keeper of the clone (``None``: reading the source itself), kernels met.

    Kernel nodes are read in bulk and added in :meth:`into`; every other node
    by the ops that lifts its driver node type (:data:`cudagraph.ops.registry.LIFTS`),
    or as an opaque node.
    """

    __slots__ = ("drv", "reader", "keep", "kernels", "lifts")

    def __init__(self, reader: Any, keep: Any) -> None:
        self.drv = require_driver()
        self.reader = reader
        self.keep = keep
        self.kernels: dict[tuple[int, int], LiftedKernel] = {}
        T = self.drv.CUgraphNodeType
        self.lifts: dict[int, KindOps] = {int(getattr(T, name)): ops for name, ops in LIFTS.items()}

    def kernel(self, func: int, kern: int) -> LiftedKernel:
        """The entry of the kernel a node launches (``func``, or ``kern`` when ``func`` is NULL)."""
        drv = self.drv
        handle: Any = drv.CUkernel(kern) if not func and kern else drv.CUfunction(func)
        info = kernel_info(handle)
        entry = self.kernels[(func, kern)] = KERNEL.lifted_kernel(handle, info.name, info.sizes)
        return entry

    def into(self, g: Graph, graph: int) -> None:
        """Add the nodes and edges of driver graph ``graph`` (a handle as an int) to ``g``.

        In one compiled call where the reader has it
        (:meth:`~cudagraph.driver.graph_reader.GraphReader.lift`, Cython over ``cydriver``, which also hands back
        the order and the edges with data that :meth:`carry` needs: the graph is read once), else
        :meth:`into_steps` (``bench/lift_cpu.py`` prints the lift's µs per node).
        """
        base = len(g._nodes)
        lift = getattr(self.reader, "lift", None)
        got = None if lift is None else lift(graph, g.kernel, self.kernel_of, partial(self.other, g))
        if got is None:
            self.into_steps(g, graph)
        self.carry(g, graph, base, got)

    def carry(self, g: Graph, graph: int, base: int, read: tuple[int, list[int], list[EdgeData]] | None = None) -> None:
        """Give the nodes lifted from ``graph`` (``g``'s from position ``base``) what the driver holds beyond
        their parameters: kernel launch attributes and programmatic edges.

        The nodes were added in the order :func:`_topo` gives (both lifting paths), so the ``k``-th node
        added is the ``k``-th of that order. ``read``: ``(count, handles in that order, edges with data)`` as the
        compiled lift read them; without it the node list and the edges are read again, with their data, and
        ordered: in one compiled call where the reader reads in compiled code
        (:meth:`~cudagraph.driver.node_reads.NodeReads.graph_order`), else through the reader and
        :func:`_topo` (the reference). An edge with data into a node that is not a kernel, from one that is not
        a kernel, or of a type or port cudagraph does not model is refused by name.
        """
        reader = self.reader
        # The reads and the order in compiled code where the reader reads there (the driver's own entry points and
        # cudagraph.driver._reads built), else the reference: the reader's reads, ordered by _topo.
        got = read if read is not None else reader.graph_order(graph)
        if got is not None:
            count, handles, data_edges = got
        else:
            nodes = reader.nodes(graph)
            data_edges = []
            frm, to = reader.edges(nodes, data_edges)
            order, _ = _topo(nodes, frm, to)
            count, handles = len(nodes), [nodes[i] for i in order]
        made = g._nodes[base:]
        if len(made) != count:  # pragma: no cover - a node kind's lift added more or fewer nodes than one
            raise UnsupportedError(f"Graph {g.name!r}: lifting made {len(made)} nodes of the driver graph's {count}")
        programmatic: dict[int, list[tuple[Node, str]]] = {}
        if data_edges:
            by_handle = dict(zip(handles, made))
            for frm_h, to_h, from_port, to_port, kind in data_edges:
                src, dst = by_handle[frm_h], by_handle[to_h]
                port = _PORTS.get(from_port) if kind == _PROGRAMMATIC and not to_port else None
                if port is None or dst.kind != "kernel" or not src.programmatic_edges:
                    raise UnsupportedError(
                        f"{dst.label} of Graph {g.name!r} ({dst.kind} {dst.name!r}): its edge from {src.label} "
                        f"({src.kind} {src.name!r}) has data cudagraph does not model (type {kind}, from_port "
                        f"{from_port}, to_port {to_port}); refused rather than dropped"
                    )
                programmatic.setdefault(id(dst), []).append((src, port))
        unread = {id(e.unread): e for e in self.kernels.values() if e.unread_nodes}
        attributes = reader.attributes
        # The reader hands back one dict for equal values (NodeReads._seen): the launch attributes made from one,
        # for a node with no programmatic edge and no attributes of its own yet, serve every such node alike.
        made_from: dict[tuple[int, bool], Any] = {}
        for node, handle in zip(made, handles):
            if node.kind == "kernel":
                if unread and id(node.args) in unread:  # type: ignore[attr-defined]
                    self.packed_arguments(node, handle, unread[id(node.args)])  # type: ignore[attr-defined]
                raw = attributes(handle)
                edges = programmatic.get(id(node))
                if edges or (raw and node.attrs is not None):  # type: ignore[attr-defined]
                    KERNEL.lift_attributes(node, raw, edges or [])  # type: ignore[arg-type]
                elif raw:  # (most nodes launch plainly: nothing to carry)
                    # What lift_attributes makes depends on the values and on whether the shared memory needs the
                    # opt-in: nodes alike in both share one (bench/zoo_lift_profile.py prints what it costs).
                    key = (id(raw), node.shared_mem > SMEM_DEFAULT_LIMIT)  # type: ignore[attr-defined]
                    attrs = made_from.get(key)
                    if attrs is None:
                        KERNEL.lift_attributes(node, raw, [])  # type: ignore[arg-type]
                        made_from[key] = (raw, node.attrs)  # type: ignore[attr-defined]
                    else:
                        _, attrs = attrs
                        KERNEL.carry_attributes(node, attrs)  # type: ignore[arg-type]

    def kernel_of(self, func: int, kern: int) -> tuple[Any, str, tuple[int, ...], Callable[[int], Any]]:
        """``(handle, name, sizes, args)`` of the entry of the kernel a node launches, for the compiled lift."""
        entry = self.kernels.get((func, kern)) or self.kernel(func, kern)
        return entry.handle, entry.name, entry.sizes, entry.args

    def packed_arguments(self, node: Any, handle: int, entry: LiftedKernel) -> None:
        """Give ``node`` the arguments its driver node holds in a packed buffer (launched with ``extra``).

        Raises
        ------
        UnsupportedError
            The node has neither ``kernelParams`` nor a readable ``extra`` buffer.
        """
        _, kp = self.reader.read(handle)
        info = kernel_info(entry.handle)
        args = extra_arguments(kp[9] if kp is not None else 0, tuple(info.offsets), tuple(info.sizes))
        if args is None:
            raise UnsupportedError(
                f"{node.label} (kernel {entry.name!r}): its driver node has no kernelParams and no 'extra' argument "
                "buffer cudagraph can read"
            )
        node.args = args

    def into_steps(self, g: Graph, graph: int) -> None:
        """:meth:`into` in Python: the reference, and the path without the compiled module."""
        reader = self.reader
        nodes = reader.nodes(graph)
        frm, to = reader.edges(nodes)
        order, preds = _topo(nodes, frm, to)
        made: list[Any] = [None] * len(nodes)
        reads = [reader.read(n) for n in nodes]
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
            # The kernel kind's fast path: parameters already read in bulk.
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
        """A node of any kind but kernel: typed by the ops that lifts type ``t``, else opaque."""
        dn = self.drv.CUgraphNode(handle)
        ops = self.lifts.get(t)
        node = None if ops is None else ops.lift(self, g, dn, after)
        return node if node is not None else self.opaque(g, dn, t, after)

    def opaque(self, g: Graph, dn: Any, t: int, after: Any) -> OpaqueNode:
        """An :class:`OpaqueNode`; its parameters must be read from a clone (see :func:`lift`)."""
        if self.keep is None:
            raise _NeedsClone
        return OPAQUE.make(self, g, dn, _type_name(t), after, self.keep)


def _type_name(t: int) -> str:
    """``"CU_GRAPH_NODE_TYPE_..."`` for a node type, also one this cuda-bindings does not name."""
    try:
        return str(require_driver().CUgraphNodeType(t).name)
    except ValueError:
        return f"CU_GRAPH_NODE_TYPE_{t}"


class _GraphKeeper:
    """Owns a clone of the lifted driver graph so opaque parameters stay valid."""

    __slots__ = ("handle",)

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __del__(self) -> None:
        try:
            graph_destroy_quietly(self.handle)
        except Exception:
            pass


def lift(obj: Any, name: str = "lifted", *, params: dict[str, Any] | None = None, verify: bool = False) -> Graph:
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
    params : dict, optional
        ``{name: memory}``: then :meth:`Graph.parametrize` runs on the result
        (range mode): every operand pointing into that memory (a tensor, an
        array, a Buffer, an ``(address, nbytes)`` pair) becomes a use of the
        named parameter, so ``exe.launch(stream, x=new_x)`` runs on new memory.
        The source object (a PyTorch graph owning the intermediate memory
        its kernels use) is kept alive with the definition; the report is
        ``g.parametrizations[-1]``.

        A source with a private memory pool (a ``torch.cuda.CUDAGraph``, whose
        capture reused the same bytes for one intermediate after another) is
        not rewritten in place: the definition gets device memory of its own
        for the pool's segments that its nodes use (a copy of their contents
        at lift time), so running it never writes PyTorch's static tensors; a
        named memory inside the pool (``static_y = model(static_x)`` taken
        inside the capture) is an output, copied from the definition's memory
        into the bound one by a copy node after the graph's last nodes (the
        report's ``outputs``), and its other uses are left alone.
    verify : bool
        Check the lift before parametrizing (:func:`verify_lift`): the
        definition is built into a new driver graph, both are read back with
        the driver's getters and compared node by node (type, parameters,
        launch attributes, edges with their data); the first difference is
        raised as :class:`~cudagraph.errors.LiftMismatchError`.

    Returns
    -------
    Graph

    Raises
    ------
    OperandError
        As :meth:`Graph.parametrize` (nothing is lifted then).
    UnsupportedError
        A launch attribute, edge data or node the definition cannot carry (named).
    LiftMismatchError
        ``verify=True`` and the rebuilt graph differs from the source.
    """
    g = _lift(obj, name)
    if verify:
        verify_lift(g, obj)
    if params:
        parametrize_lifted(g, params, private_pool_segments(obj))
        keep_alive(g, obj)
    return g


def parametrize_lifted(g: Graph, params: dict[str, Any], segments: list[tuple[int, int]]) -> ParametrizeReport:
    """Parametrize a lifted definition whose source kept its intermediates in the private pool ``segments``.

    Without segments this is :func:`~cudagraph.definition.parametrize.parametrize`. With them: the pool
    segments the nodes use are moved to device memory the definition owns (:class:`DeviceMemory`, a copy
    of the segment), the names outside the pool are rewritten as usual, and each name inside it gets a
    copy node from its place in the definition's memory to the bound memory, after every last node.

    Raises
    ------
    OperandError
        As :func:`~cudagraph.definition.parametrize.parametrize`; an opaque node pointing into the pool.
    """
    if not segments:
        return parametrize(g, params)
    mems = {key: describe_memory(obj, f"lift params {key!r} of Graph {g.name!r}") for key, obj in params.items()}
    pooled: dict[str, tuple[int, int]] = {}  # name -> (segment position, offset)
    for key, mem in mems.items():
        for i, (start, nbytes) in enumerate(segments):
            if start <= mem.address < start + nbytes:
                if mem.address + (mem.nbytes or 0) > start + nbytes:
                    raise OperandError(
                        f"lift params {key!r} of Graph {g.name!r}: the memory ({mem.address:#x}, {mem.nbytes} B) "
                        f"runs past the end of the capture's pool segment ({start:#x}, {nbytes} B)"
                    )
                pooled[key] = (i, mem.address - start)
    sinks = [n for n in g._nodes if not n.successors]
    plan = plan_relocation(g, segments)
    used = set(plan.used) | {i for i, _ in pooled.values()}
    owned = {i: DeviceMemory(segments[i][1], copy_from=segments[i][0]) for i in sorted(used)}
    plan.apply({i: m.address for i, m in owned.items()})
    # Every name is declared and checked at bind; the pooled ones have no use left to rewrite.
    report = parametrize(g, params)
    for key, (i, off) in pooled.items():
        nbytes = mems[key].nbytes or 0
        report.outputs[key] = g.memcpy(
            g._params[key], owned[i].address + off, nbytes, after=sinks or None, name=f"copy out {key}"
        )
    report.relocated = [(segments[i][0], segments[i][1], m.address) for i, m in owned.items()]
    for m in owned.values():
        keep_alive(g, m)
    return report


def _lift(obj: Any, name: str) -> Graph:
    handle = cuda_graph_handle(obj)  # (what the object is, before anything asks the driver)
    require_driver()
    ensure_context()
    reader = graph_reader() or _BindingsReader()
    g = Graph(name)
    try:
        # Typed nodes copy everything they need: read the source itself.
        _Lifter(reader, None).into(g, int(handle))
        return g
    except _NeedsClone:
        pass
    # Opaque nodes keep driver parameters that point into their graph: read a clone and keep it.
    clone = graph_clone(handle)
    keep = _GraphKeeper(clone)
    g = Graph(name)
    _Lifter(reader, keep).into(g, int(clone))
    return g


def lift_exact(
    fn: Callable[..., Any],
    params: dict[str, tuple[Any, Any]],
    *,
    stream: Any = None,
    name: str = "lifted",
) -> Graph:
    """Capture ``fn`` twice on two sets of memory; parametrize only the slots that move with the memory.

    ``fn(stream, **first)`` and ``fn(stream, **second)`` are each recorded with
    :meth:`Graph.capture` and lifted. The two definitions must have the same
    nodes. A slot (a copy endpoint, a fill destination, an aligned 8-byte slot
    of kernel-argument bytes) of the first whose value lies in the memory of a
    name becomes a use of that name only if the second capture holds, at the
    same slot, the second memory's address plus the same offset. A scalar that
    happens to equal an address keeps its value (range mode,
    :meth:`Graph.parametrize`, would rewrite it). The result is the first
    capture, parametrized; its report (``g.parametrizations[-1]``) says the
    slots were verified, and lists in ``unexplained`` (with a warning) every
    slot whose bytes differ between the captures in a way no named memory
    explains: memory the function allocates anew on each call, a changed
    scalar. A pointer kept in device memory (written there by a kernel) is in
    no slot at all: neither mode can see it.

    Parameters
    ----------
    fn : callable
        ``fn(stream, **buffers)``: enqueues the work on ``stream`` (a
        :class:`~cudagraph.CaptureStream`), using the buffers given by keyword.
    params : dict
        ``{name: (first, second)}``: two memory objects per name, at different
        addresses, of the same size.
    stream : optional
        The stream to capture on (default: a new one).
    name : str
        The definition's name.

    Returns
    -------
    Graph

    Raises
    ------
    OperandError
        A name without two memory objects, two objects at the same address, or
        the two captures differ in their nodes (named).
    """
    if not params:
        raise OperandError("lift_exact: params= needs at least one name=(first, second)")
    first: dict[str, Any] = {}
    second: dict[str, Any] = {}
    for key, pair in params.items():
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise OperandError(f"lift_exact: params[{key!r}] must be a (first, second) pair of memory objects")
        first[key], second[key] = pair
    g1 = Graph.capture(lambda s: fn(s, **first), stream, name=name)
    g2 = Graph.capture(lambda s: fn(s, **second), stream, name=name)
    unexplained: list[Any] = []
    only = moving_slots(g1, g2, first, second, unexplained)
    report = parametrize(g1, first, only)
    report.unexplained = unexplained
    if unexplained:
        node, where, v1, v2 = unexplained[0]
        warnings.warn(
            f"lift_exact Graph {name!r}: {len(unexplained)} slot(s) differ between the two captures in a way no "
            f"named memory explains (first: {node.label} {where}: {v1:#x} vs {v2:#x}); rebinding cannot follow "
            "them (see g.parametrizations[-1].unexplained)",
            stacklevel=2,
        )
    return g1
