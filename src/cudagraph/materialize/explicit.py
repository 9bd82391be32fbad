"""Explicit construction: a definition becomes a ``CUgraph`` via ``cuGraphAddNode``.

:meth:`Lowering.lower_graph` walks the nodes in topological order. Runs of
kernel launches (the kinds of :data:`cudagraph.ops.registry.LAUNCHES`), of any
mix of kernels, go to the kernel loop (the compiled ``KernelLoop``, or its
Python twin :class:`~cudagraph.materialize.kernel_loop.KernelLoopTwin`), which
keeps one prepared kernel ``CUgraphNodeParams``, points it at each node's
kernel, writes only the fields that differ from the previous kernel node and
packs arguments only when the argument objects change; a launch the loop hands
back is added with its kind's ops (late operands, launch attributes). Every
other node is added through its kind's ops (:mod:`cudagraph.ops.registry`):
its parameters, or its own lowering for kinds that need more than one add.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

from ..definition.bindings import node_params_uses
from ..definition.graph import Graph
from ..definition.nodes import Node
from ..driver.api import graph_destroy_quietly
from ..driver.c_entry import kernel_loop, use_kernel
from ..driver.calls import create_graph, ensure_context, raise_error, require_driver
from ..driver.compat import add_node_fn
from ..driver.device_checks import check_devices_of
from ..driver.driver_holds import hold
from ..driver.host_callbacks import forget_soon, retire, unregister
from ..driver.kernel_args import PACKING_LOCK, for_node, kernel_info
from ..driver.node_params_pool import give, take
from ..errors import OperandError
from ..ops.compiled_kinds import add_simple_kinds
from ..ops.kinds.base import KindOps
from ..ops.lower_state import LowerState
from ..ops.registry import LAUNCHES, ops_for
from .driver_edges import driver_preds
from .kernel_loop import KernelLoopTwin, driver_deps

if TYPE_CHECKING:
    from ..definition.nodes import KernelNode
    from ..ops.kinds.kernel import KernelOps

__all__ = ["DriverNodes", "Lowering", "LoweredGraph", "lower", "node_params_uses"]


class Lowering:
    """The state of one explicit construction (shared by nested bodies).

    Parameters
    ----------
    ctx : CUcontext
        The context copies and fills run in.
    bindings : dict
        Parameter values.
    sink : list
        Where host callbacks append ``(node, exception)``.

    Attributes
    ----------
    ctx, bindings, sink
        As given.
    host_keys : list of int
        Registered host callbacks.
    bodies : list of Graph
        Child and conditional bodies lowered (kept alive with the executable).
    driver_nodes : dict
        ``id(node) -> (node, CUgraphNode)`` for every node at every depth whose
        driver handle stays valid in the instantiated graph.
    param_users : dict
        ``name -> [node, ...]`` for every node that uses a parameter.
    state : LowerState
        Condition handles and allocation addresses of this construction.
    add : callable
        ``add(graph, deps, ndeps, params) -> (CUresult, CUgraphNode)``.
    """

    __slots__ = (
        "ctx",
        "bindings",
        "sink",
        "host_keys",
        "bodies",
        "driver_nodes",
        "param_users",
        "add",
        "tracked",
        "state",
    )

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
        self.state = LowerState(ctx)

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
        order = graph.topological_order()
        # dn: CUgraphNode objects (None until needed); raw: the same handles as ints.
        dn: list[Any] = [None] * len(graph._nodes)
        raw: list[int] = [0] * len(graph._nodes)
        kp = take(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL)
        loop: Any = None
        try:
            loop = kernel_loop(int(handle), kp.getPtr())
            if loop is None:
                loop = KernelLoopTwin(handle, kp, dn, self.bindings)
            else:
                add_simple_kinds(loop, self.ctx, self.bindings)  # fills, copies and empty nodes in the same C loop
            i, total = 0, len(order)
            launches = LAUNCHES
            while i < total:
                i = loop.run(order, i, raw)  # the kernel nodes it can add, in a row, of any kernel it knows
                if loop.rc:
                    raise_error(drv.CUresult(loop.rc), "cuGraphAddNode", order[i])
                if i == total:
                    break
                node: Any = order[i]
                launch = launches.get(type(node))
                if launch is not None:
                    try:
                        info = kernel_info(node.kernel)
                    except OperandError as exc:
                        raise for_node(exc, node) from None
                    if node.kernel is not loop.kernel:  # a kernel seen first: the loop learns it
                        use_kernel(loop, node.kernel, info)
                        continue  # the loop may take it now
                    self._add_kernel(loop, launch, node, info, handle, kp, dn, raw)
                else:
                    self._add_node(loop, node, handle, dn, raw)
                i += 1
        finally:
            loop = None  # (it points at kp's memory: dropped before kp is reused)
            give(kp)
        if self.bindings:
            for node in order:
                self._note_params(node)
        nodes = DriverNodes(raw, dn, drv.CUgraphNode)
        if track:
            self.tracked.append((list(graph._nodes), nodes))
        return nodes

    def _add_kernel(
        self,
        loop: Any,
        ops: KernelOps,
        node: KernelNode,
        info: Any,
        handle: Any,
        kp: Any,
        dn: list[Any],
        raw: list[int],
    ) -> None:
        """A kernel launch the loop handed back (``kp`` points at its kernel), added with its kind's ``ops``:
        late operands, launch attributes, argument types not seen yet or unusual dimensions."""
        args = node.args
        if args is not loop.args:
            self._pack(ops, info, node, handle)
            loop.args = args
        attrs = node.attrs
        if attrs is None and loop.put(node, raw):
            if loop.rc:
                raise_error(require_driver().CUresult(loop.rc), "cuGraphAddNode", node)
            return
        if not loop.write_dims(node):
            raise OperandError(f"{node.label}: grid, block and shared_mem must be ints")
        preds = driver_preds(node)  # (all of them with attrs: its edges may be programmatic)
        deps = driver_deps(preds, dn, raw, require_driver().CUgraphNode)
        if attrs is None:
            r = add_node_fn()(handle, deps, len(preds), kp)
        else:
            r = ops.add_with_attrs(self, node, attrs, handle, deps, len(preds), kp, info)
        self._record(node, r, dn, raw)

    def _add_node(self, loop: Any, node: Node, handle: Any, dn: list[Any], raw: list[int]) -> None:
        """Any node but a kernel launch: its kind's lowering, or its parameters added through the loop or ``add``."""
        ops = ops_for(node)
        make = require_driver().CUgraphNode
        if ops.lowers:
            preds = driver_preds(node)
            r = ops.lower(self, node, handle, driver_deps(preds, dn, raw, make), len(preds))
            loop.args = None  # bodies may have packed other arguments into the kernels' shared buffers
        else:
            p = ops.params(node, self)  # (from node_params: handed back once added)
            try:
                if loop.add_with(node, raw, p.getPtr()):  # (the loop leaves out the implied edges itself)
                    if loop.rc:
                        raise_error(require_driver().CUresult(loop.rc), "cuGraphAddNode", node)
                    return
                preds = driver_preds(node)
                r = self.add(handle, driver_deps(preds, dn, raw, make), len(preds), p)
            finally:
                give(p)
        self._record(node, r, dn, raw)

    def node_params(self, node_type: Any) -> Any:
        """A zeroed ``CUgraphNodeParams`` of ``node_type`` for one add, reused
        (:mod:`cudagraph.driver.node_params_pool`): given back once the node is added."""
        return take(node_type)

    def ops_for(self, node: Node) -> KindOps:
        """The ops of ``node``'s kind (:func:`cudagraph.ops.registry.ops_for`), for a kind's lowering."""
        return ops_for(node)

    @staticmethod
    def _record(node: Node, r: Any, dn: list[Any], raw: list[int]) -> None:
        """Keep the driver node of ``r`` (``(CUresult, CUgraphNode)``); raise if the driver refused."""
        if r[0]:
            raise_error(r[0], "cuGraphAddNode", node)
        dn[node.index] = r[1]
        raw[node.index] = int(r[1])

    def _pack(self, ops: KernelOps, info: Any, node: KernelNode, handle: Any) -> None:
        """Pack ``node``'s arguments into ``info``'s buffer (late operands get their values now, from ``ops``)."""
        try:
            info.pack(node.args, node, self.bindings)
        except OperandError:
            # Graph allocations and conditions get their values only now.
            late = ops.late_args(self, node, handle)
            if late is None:
                raise
            info.pack(late, node, self.bindings)

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
        Registered host callbacks, forgotten by :meth:`destroy` (those of a graph :meth:`hand_out` gave out: once
        the driver has let go of every copy).
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
        "state",
        "handed_out",
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
        # Graph allocations' addresses, read again when a node using one is set on the executable.
        self.state = lowering.state
        self.handed_out = False

    def hand_out(self) -> Any:
        """The driver graph's handle, for a program to keep or copy (``cuGraphClone``, a child graph node made
        from it): what its nodes refer to (the definition, its nodes, bodies and their operands, the host
        callbacks) is kept until the driver has let go of the graph and of every copy
        (:func:`~cudagraph.driver.driver_holds.hold`), not only until :meth:`destroy`."""
        if not self.handed_out and self.handle is not None:
            keys, self.host_keys = self.host_keys, []
            hold(self.handle, (self.definition, self.nodes, self.bodies, self.state), lambda: forget_soon(keys))
            self.handed_out = True
        return self.handle

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

    def destroy(self, in_flight_on: Any = (), keep: Any = None) -> None:
        """Destroy the driver graph and forget its host callbacks.

        Parameters
        ----------
        in_flight_on : iterable of CUstream
            Streams on which work that may still call the host callbacks, or read the memory of the nodes'
            operands, was launched; the callbacks are forgotten, and the nodes (with ``keep``) released, only
            once that work is done.
        keep : object, optional
            More that the work in flight reads (an executable's bound values).
        """
        if self.handle is not None:
            graph_destroy_quietly(self.handle)
            self.handle = None
            retire(self.host_keys, in_flight_on, keep=(self.definition, self.nodes, self.bodies, keep))


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
    require_driver()
    ctx = ensure_context()
    check_devices_of(graph)
    handle = create_graph()
    lowering = Lowering(ctx, bindings, sink)
    try:
        # Kernel argument buffers are shared per kernel: one lowering at a time.
        with PACKING_LOCK, lowering.state.constructing():
            dnodes = lowering.lower_graph(graph, handle)
    except BaseException:
        graph_destroy_quietly(handle)
        unregister(lowering.host_keys)
        raise
    return LoweredGraph(handle, graph, dnodes, lowering)
