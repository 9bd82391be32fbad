"""Explicit construction: a definition becomes a ``CUgraph`` via ``cuGraphAddNode``.

The hot loop keeps one prepared kernel ``CUgraphNodeParams`` and only writes
the fields that differ from the previous kernel node; arguments are packed by
the kernel's :class:`~cudagraph.driver.kernel_args.KernelInfo` only when the
argument objects change. Other node kinds are lowered by the functions in
:data:`LOWERERS` (keyed by node class), so a new kind plugs in by registering
one function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from ..definition.bindings import node_params_uses
from ..definition.graph import Graph
from ..definition.nodes import ChildGraphNode, KernelNode, Node
from ..driver.c_entry import kernel_loop, use_kernel
from ..driver.calls import check, ensure_context, raise_error, require_driver
from ..driver.compat import BINDINGS_MAJOR, add_node_fn
from ..driver.host_callbacks import retire, unregister
from ..driver.kernel_args import PACKING_LOCK, kernel_info
from ..errors import OperandError
from ..ops.node_params import node_params
from ..ops.node_update import set_function

__all__ = ["LOWERERS", "DriverNodes", "Lowering", "LoweredGraph", "lower", "node_params_uses"]

#: node class -> fn(lowering, node, graph_handle, deps, ndeps) -> (CUresult, CUgraphNode)
LOWERERS: dict[type, Callable[..., Any]] = {}


class Lowering:
    """The state of one explicit construction (shared by nested bodies).

    Attributes
    ----------
    ctx : CUcontext
        The context copies and fills run in.
    bindings : dict
        Parameter values.
    sink : list
        Where host callbacks append ``(node, exception)``.
    host_keys : list of int
        Registered host callbacks.
    bodies : list of Graph
        Child and conditional bodies lowered (kept alive with the executable).
    driver_nodes : dict
        ``id(node) -> (node, CUgraphNode)`` for every node at every depth whose
        driver handle stays valid in the instantiated graph.
    param_users : dict
        ``name -> [node, ...]`` for every node that uses a parameter.
    """

    __slots__ = ("ctx", "bindings", "sink", "host_keys", "bodies", "driver_nodes", "param_users", "add", "tracked")

    def __init__(self, ctx: Any, bindings: dict[str, Any], sink: list[Any]) -> None:
        self.ctx = ctx
        self.bindings = bindings
        self.sink = sink
        self.host_keys: list[int] = []
        self.bodies: list[Graph] = []
        self.driver_nodes: dict[int, tuple[Node, Any]] = {}
        self.param_users: dict[str, list[Node]] = {}
        self.add = add_node_fn()
        # (nodes, driver nodes) of each tracked graph; merged into the map on demand.
        self.tracked: list[tuple[list[Node], Sequence[Any]]] = []

    def lower_graph(self, graph: Graph, handle: Any, track: bool = True) -> DriverNodes:
        """Add every node of ``graph`` to the driver graph ``handle``; return driver nodes by index.

        Parameters
        ----------
        graph : Graph
            The definition (or body) to add.
        handle : CUgraph
            The driver graph to add to.
        track : bool
            Record the driver nodes in :attr:`driver_nodes` (only when their
            handles stay valid in the instantiated graph).
        """
        drv = require_driver()
        add = self.add
        raw_add = drv.cuGraphAddNode
        v13 = BINDINGS_MAJOR >= 13
        make_node = drv.CUgraphNode
        bindings = self.bindings
        order = graph.topological_order()
        count = len(graph._nodes)
        # dn: CUgraphNode objects (None until needed); raw: the same handles as ints.
        dn: list[Any] = [None] * count
        raw: list[int] = [0] * count

        kp = drv.CUgraphNodeParams()
        kp.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
        k = kp.kernel
        last_kernel: Any = None
        info: Any = None
        last_grid: Any = None
        last_block: Any = None
        last_smem = 0
        last_args: Any = None
        kernel_node = KernelNode
        # The compiled loop adds runs of kernel nodes of the kernel whose function kp holds,
        # packing their arguments itself where it can, and writes every kernel node's
        # dimensions into kp. None: every node goes through cuda.bindings below.
        loop = kernel_loop(int(handle), kp.getPtr())
        total = len(order)
        i = 0
        while i < total:
            node = order[i]
            if loop is not None:
                i = loop.run(order, i, raw)
                if loop.rc:
                    raise_error(drv.CUresult(loop.rc), "cuGraphAddNode", order[i])
                if i == total:
                    break
                node = order[i]
                if type(node) is kernel_node and node.kernel is not loop.kernel:
                    info = self._use_kernel(k, node.kernel, info)
                    use_kernel(loop, node.kernel, info)
                    last_kernel = node.kernel
                    continue  # the loop may take it now
                last_args = loop.args  # what the kernel's buffer holds
            i += 1
            preds = node._preds
            npreds = len(preds)
            if type(node) is kernel_node:
                kern = node.kernel
                if kern is not last_kernel:
                    info = self._use_kernel(k, kern, info)
                    last_kernel = kern
                    last_args = None
                args = node.args
                if args is not last_args:
                    self._pack(info, node, handle)
                    last_args = args
                attrs = node.attrs
                if loop is not None:
                    loop.args = args
                    if attrs is None and loop.put(node, raw):
                        if loop.rc:
                            raise_error(drv.CUresult(loop.rc), "cuGraphAddNode", node)
                        continue
                    if not loop.write_dims(node):
                        raise OperandError(f"{node.label}: grid, block and shared_mem must be ints")
                else:
                    grid = node.grid
                    if grid is not last_grid and grid != last_grid:
                        k.gridDimX, k.gridDimY, k.gridDimZ = grid
                        last_grid = grid
                    block = node.block
                    if block is not last_block and block != last_block:
                        k.blockDimX, k.blockDimY, k.blockDimZ = block
                        last_block = block
                    if node.shared_mem != last_smem:
                        last_smem = node.shared_mem
                        k.sharedMemBytes = last_smem
                deps = self._deps(preds, dn, raw, make_node)
                if attrs is None:
                    r = raw_add(handle, deps, None, npreds, kp) if v13 else raw_add(handle, deps, npreds, kp)
                else:
                    r = add_kernel_with_attrs(self, node, attrs, handle, deps, npreds, kp, info)
            else:
                lower_fn = LOWERERS.get(type(node))
                if lower_fn is not None:
                    r = lower_fn(self, node, handle, self._deps(preds, dn, raw, make_node), npreds)
                    # Bodies may have packed other arguments into the kernels' shared buffers.
                    last_args = None
                    if loop is not None:
                        loop.args = None
                else:
                    p = node_params(node, self.ctx, bindings, self.sink, self.host_keys)
                    if loop is not None and loop.add_with(node, raw, p.getPtr()):
                        if loop.rc:
                            raise_error(drv.CUresult(loop.rc), "cuGraphAddNode", node)
                        continue
                    r = add(handle, self._deps(preds, dn, raw, make_node), npreds, p)
            if r[0]:
                raise_error(r[0], "cuGraphAddNode", node)
            dn[node.index] = r[1]
            raw[node.index] = int(r[1])
        if bindings:
            for node in order:
                self._note_params(node)
        nodes = DriverNodes(raw, dn, make_node)
        if track:
            self.tracked.append((list(graph._nodes), nodes))
        return nodes

    @staticmethod
    def _use_kernel(k: Any, kernel: Any, info: Any) -> Any:
        """Point the kernel parameters ``k`` at ``kernel``'s function and argument buffer; return its info."""
        new_info = kernel_info(kernel)
        if new_info is not info:
            set_function(k, new_info)
            k.kernelParams = new_info.params_address
        return new_info

    def _pack(self, info: Any, node: KernelNode, handle: Any) -> None:
        """Pack ``node``'s arguments into ``info``'s buffer (late operands get their values now)."""
        try:
            info.pack(node.args, node, self.bindings)
        except OperandError:
            # Graph allocations and conditions get their values only now.
            late = kernel_args_late(self, node, handle)
            if late is None:
                raise
            info.pack(late, node, self.bindings)

    @staticmethod
    def _deps(preds: Any, dn: list[Any], raw: list[int], make_node: Any) -> Any:
        """The predecessors' ``CUgraphNode`` objects for a ``cuda.bindings`` call (``None`` for none)."""
        if not preds:
            return None
        out = []
        for p in preds:
            d = dn[p.index]
            if d is None:
                d = dn[p.index] = make_node(raw[p.index])
            out.append(d)
        return out

    def _note_params(self, node: Node) -> None:
        for name in node_params_uses(node):
            self.param_users.setdefault(name, []).append(node)

    def node_map(self) -> dict[int, tuple[Node, Any]]:
        """``id(node) -> (node, CUgraphNode)`` for every tracked node."""
        out = dict(self.driver_nodes)
        for nodes, dn in self.tracked:
            out.update({id(n): (n, d) for n, d in zip(nodes, dn)})
        return out


class DriverNodes(Sequence[Any]):
    """The ``CUgraphNode`` of each node of one lowered graph, by node index, made on first use.

    Lowering keeps the driver handles as ints; the ``cuda.bindings`` objects
    are made only for the nodes that an update, a node view or a test reads.

    Parameters
    ----------
    raw : list of int
        The driver handles.
    made : list
        ``CUgraphNode`` objects already at hand (``None`` where not).
    make : callable
        ``CUgraphNode`` (the type), to make the others.
    """

    __slots__ = ("raw", "_made", "_make")

    def __init__(self, raw: list[int], made: list[Any], make: Any) -> None:
        self.raw = raw
        self._made = made
        self._make = make

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.raw)))]
        d = self._made[index]
        if d is None:
            d = self._made[index] = self._make(self.raw[index])
        return d

    def __len__(self) -> int:
        return len(self.raw)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self.raw)):
            yield self[i]

    def __repr__(self) -> str:
        return f"<DriverNodes of {len(self.raw)} nodes>"


def _lower_child(lowering: Lowering, node: ChildGraphNode, handle: Any, deps: Any, ndeps: int) -> Any:
    """A child graph: its body is built in a graph of its own and moved into the parent."""
    drv = require_driver()
    body = check(drv.cuGraphCreate(0), "cuGraphCreate", node)
    move = getattr(drv, "CUgraphChildGraphNodeOwnership", None)
    try:
        lowering.lower_graph(node.body, body, track=move is not None)
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_GRAPH
        p.graph.graph = body
        if move is not None:
            # The parent takes the body: its node handles stay valid for updates.
            p.graph.ownership = move.CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE
        r = lowering.add(handle, deps, ndeps, p)
    except BaseException:
        drv.cuGraphDestroy(body)
        raise
    if r[0] or move is None:
        drv.cuGraphDestroy(body)  # cloned by the driver (or not added at all)
    lowering.bodies.append(node.body)
    return r


LOWERERS[ChildGraphNode] = _lower_child


class LoweredGraph:
    """A driver ``CUgraph`` built from a definition, with the node map.

    Attributes
    ----------
    handle : CUgraph
        The driver graph (owned: destroyed by :meth:`destroy`).
    definition : Graph
        The definition it was built from.
    driver_nodes : list
        ``driver_nodes[node.index]`` is the ``CUgraphNode`` of each top-level node.
    nodes : list of Node
        The definition's nodes at lowering time (they keep the operands alive).
    host_keys : list of int
        Registered host callbacks, forgotten by :meth:`destroy`.
    all_nodes : dict
        ``id(node) -> (node, CUgraphNode)`` at every depth (see :class:`Lowering`).
    param_users : dict
        ``name -> [node, ...]`` for every node that uses a parameter.
    """

    __slots__ = (
        "handle",
        "definition",
        "driver_nodes",
        "nodes",
        "host_keys",
        "bodies",
        "_all",
        "_lowering",
        "param_users",
    )

    def __init__(self, handle: Any, definition: Graph, driver_nodes: Sequence[Any], lowering: Lowering) -> None:
        self.handle = handle
        self.definition = definition
        self.driver_nodes = driver_nodes
        self.nodes = list(definition._nodes)
        self.host_keys = lowering.host_keys
        # Bodies (and their nodes, which hold operands) stay alive too.
        self.bodies = [(b, list(b._nodes)) for b in lowering.bodies]
        self._all: dict[int, tuple[Node, Any]] | None = None
        self._lowering: Lowering | None = lowering
        self.param_users = lowering.param_users

    @property
    def all_nodes(self) -> dict[int, tuple[Node, Any]]:
        """``id(node) -> (node, CUgraphNode)`` at every depth (built on first use)."""
        if self._all is None:
            assert self._lowering is not None
            self._all = self._lowering.node_map()
            self._lowering = None
        return self._all

    @all_nodes.setter
    def all_nodes(self, value: dict[int, tuple[Node, Any]]) -> None:
        self._all = value
        self._lowering = None

    def node_for(self, driver_node: Any) -> Node | None:
        """The definition node of a ``CUgraphNode`` (at any depth), or ``None``."""
        key = int(driver_node) if driver_node is not None else 0
        if not key:
            return None
        for n, d in self.all_nodes.values():
            if d is not None and int(d) == key:
                return n
        return None

    def destroy(self, in_flight_on: Any = ()) -> None:
        """Destroy the driver graph and forget its host callbacks.

        Parameters
        ----------
        in_flight_on : iterable of CUstream
            Streams on which work that may still call the host callbacks was
            launched; the callbacks are forgotten only once that work is done.
        """
        if self.handle is not None:
            drv = require_driver()
            drv.cuGraphDestroy(self.handle)
            self.handle = None
            retire(self.host_keys, in_flight_on)


def lower(graph: Graph, bindings: dict[str, Any], sink: list[Any]) -> LoweredGraph:
    """Build ``graph`` on the driver. On any error nothing is left behind.

    Parameters
    ----------
    graph : Graph
        A validated definition.
    bindings : dict
        Values of every parameter the graph uses, already coerced.
    sink : list
        Where host callbacks append ``(node, exception)``.

    Returns
    -------
    LoweredGraph
    """
    drv = require_driver()
    ctx = ensure_context()
    handle = check(drv.cuGraphCreate(0), "cuGraphCreate")
    lowering = Lowering(ctx, bindings, sink)
    try:
        # Kernel argument buffers are shared per kernel: one lowering at a time.
        with PACKING_LOCK:
            dnodes = lowering.lower_graph(graph, handle)
    except BaseException:
        drv.cuGraphDestroy(handle)
        unregister(lowering.host_keys)
        raise
    return LoweredGraph(handle, graph, dnodes, lowering)


# Conditional nodes, set_condition kernels, graph allocations, and the kernels with launch
# attributes or late operands that the kernel branch above hands over.
from ..ops.lower_special import add_kernel_with_attrs, kernel_args_late, register  # noqa: E402

register(LOWERERS)
