"""Explicit construction: a definition becomes a ``CUgraph`` via ``cuGraphAddNode``.

The hot loop keeps one prepared kernel ``CUgraphNodeParams`` and only writes
the fields that differ from the previous kernel node; arguments are packed by
the kernel's :class:`~cudagraph._driver._kernel_args.KernelInfo` only when the
argument objects change.
"""

from __future__ import annotations

from typing import Any

from ._driver._calls import check, ensure_context, raise_error, require_driver
from ._driver._compat import BINDINGS_MAJOR, add_node_fn
from ._driver._host_callbacks import retire, unregister
from ._driver._kernel_args import PACKING_LOCK, kernel_info
from ._driver._node_params import node_params
from ._graph import Graph
from ._nodes import ChildGraphNode, KernelNode, Node

__all__ = ["LoweredGraph", "lower"]


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
    """

    __slots__ = ("handle", "definition", "driver_nodes", "nodes", "host_keys", "bodies")

    def __init__(
        self, handle: Any, definition: Graph, driver_nodes: list[Any], host_keys: list[int], bodies: list[Graph]
    ) -> None:
        self.handle = handle
        self.definition = definition
        self.driver_nodes = driver_nodes
        self.nodes = list(definition._nodes)
        self.host_keys = host_keys
        # Child bodies (and their nodes, which hold operands) stay alive too.
        self.bodies = [(b, list(b._nodes)) for b in bodies]

    def node_for(self, driver_node: Any) -> Node | None:
        """The definition node of a ``CUgraphNode`` (top level only), or ``None``."""
        key = int(driver_node) if driver_node is not None else 0
        for n, d in zip(self.nodes, self.driver_nodes):
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
    host_keys: list[int] = []
    bodies: list[Graph] = []
    try:
        # Kernel argument buffers are shared per kernel: one lowering at a time.
        with PACKING_LOCK:
            dnodes = _lower_into(graph, handle, ctx, bindings, sink, host_keys, bodies)
    except BaseException:
        drv.cuGraphDestroy(handle)
        unregister(host_keys)
        raise
    return LoweredGraph(handle, graph, dnodes, host_keys, bodies)


def _lower_into(
    graph: Graph,
    handle: Any,
    ctx: Any,
    bindings: dict[str, Any],
    sink: list[Any],
    host_keys: list[int],
    bodies: list[Graph],
) -> list[Any]:
    drv = require_driver()
    add = add_node_fn()
    raw_add = drv.cuGraphAddNode
    v13 = BINDINGS_MAJOR >= 13
    order = graph.topological_order()
    dn: list[Any] = [None] * len(graph._nodes)

    kp = drv.CUgraphNodeParams()
    kp.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
    k = kp.kernel
    null_fn, null_kern = drv.CUfunction(0), drv.CUkernel(0)
    last_kernel: Any = None
    info: Any = None
    last_grid: Any = None
    last_block: Any = None
    last_smem = 0
    last_args: Any = None

    for node in order:
        preds = node._preds
        npreds = len(preds)
        if npreds == 1:
            deps: Any = [dn[preds[0].index]]
        elif npreds:
            deps = [dn[p.index] for p in preds]
        else:
            deps = None
        if type(node) is KernelNode:
            kern = node.kernel
            if kern is not last_kernel:
                new_info = kernel_info(kern)
                if new_info is not info:
                    info = new_info
                    if info.is_library_kernel:
                        k.func = null_fn
                        k.kern = info.handle
                    else:
                        k.kern = null_kern
                        k.func = info.handle
                    k.kernelParams = info.params_address
                    last_args = None
                last_kernel = kern
            grid = node.grid
            if grid != last_grid:
                k.gridDimX, k.gridDimY, k.gridDimZ = grid
                last_grid = grid
            block = node.block
            if block != last_block:
                k.blockDimX, k.blockDimY, k.blockDimZ = block
                last_block = block
            if node.shared_mem != last_smem:
                last_smem = node.shared_mem
                k.sharedMemBytes = last_smem
            args = node.args
            if args is not last_args:
                info.pack(args, node, bindings)
                last_args = args
            r = raw_add(handle, deps, None, npreds, kp) if v13 else raw_add(handle, deps, npreds, kp)
        elif type(node) is ChildGraphNode:
            assert isinstance(node, ChildGraphNode)
            r = _add_child(node, handle, deps, ctx, bindings, sink, host_keys, bodies, add)
            # The body's kernels reused the shared argument buffers: repack next time.
            last_args = None
        else:
            r = add(handle, deps, len(preds), node_params(node, ctx, bindings, sink, host_keys))
        if r[0]:
            raise_error(r[0], "cuGraphAddNode", node)
        dn[node.index] = r[1]
    return dn


def _add_child(
    node: ChildGraphNode,
    handle: Any,
    deps: Any,
    ctx: Any,
    bindings: dict[str, Any],
    sink: list[Any],
    host_keys: list[int],
    bodies: list[Graph],
    add: Any,
) -> Any:
    drv = require_driver()
    body = check(drv.cuGraphCreate(0), "cuGraphCreate", node)
    try:
        _lower_into(node.body, body, ctx, bindings, sink, host_keys, bodies)
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_GRAPH
        p.graph.graph = body
        r = add(handle, deps, len(node._preds), p)
    finally:
        # The driver embeds a clone; our copy of the body is not needed.
        drv.cuGraphDestroy(body)
    bodies.append(node.body)
    return r
