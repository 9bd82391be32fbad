"""Structure: ``EmptyNode`` (a join point) and ``ChildGraphNode`` (a body built as a graph of its own)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...definition.nodes import ChildGraphNode, EmptyNode, Node
from ...driver.api import graph_child_graph_node_get_graph, graph_destroy_quietly
from ...driver.calls import create_graph, require_driver
from .base import Builder, ExecSetter, KindOps, Lifter, ParamsEnv, Replay, StreamRun

if TYPE_CHECKING:
    from ...definition.graph import Graph

__all__ = ["OPS", "ChildGraphOps", "EmptyOps"]


class EmptyOps(KindOps):
    """An empty node: nothing to do on a stream, nothing recorded under capture."""

    __slots__ = ()
    capturable = True
    lifts = "CU_GRAPH_NODE_TYPE_EMPTY"
    compiled = "empty"

    def params(self, node: EmptyNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        return env.node_params(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EMPTY)

    def issue(self, node: EmptyNode, stream: Any, run: StreamRun) -> None:
        return

    def capture(self, replay: Replay, node: EmptyNode, stream: Any) -> None:
        return  # the stream order already joins its predecessors

    def lift(self, lifter: Lifter, g: Graph, dn: Any, after: Any) -> Node | None:
        return g.empty(after=after)


class ChildGraphOps(KindOps):
    """A child graph: its body is built in a graph of its own and moved into the parent.

    On a stream (and under capture) the body's nodes are issued in order, in
    place of the node.
    """

    __slots__ = ()
    lowers = True
    capturable = True
    lifts = "CU_GRAPH_NODE_TYPE_GRAPH"

    def exec_set(self, setter: ExecSetter, node: ChildGraphNode, driver_node: Any) -> None:
        setter.set_child_graph(node, driver_node)

    def lower(self, builder: Builder, node: ChildGraphNode, handle: Any, deps: Any, ndeps: int) -> Any:
        drv = require_driver()
        # Kernels inside may use conditions of the graphs around them: record where this graph is built.
        builder.state.register_graph(node.graph, handle)
        body = create_graph(node)
        move = getattr(drv, "CUgraphChildGraphNodeOwnership", None)
        try:
            builder.lower_graph(node.body, body, track=move is not None)
            p = drv.CUgraphNodeParams()
            p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_GRAPH
            p.graph.graph = body
            if move is not None:
                # The parent takes the body: its node handles stay valid for updates.
                p.graph.ownership = move.CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE
            r = builder.add(handle, deps, ndeps, p)
        except BaseException:
            graph_destroy_quietly(body)
            raise
        if r[0] or move is None:
            graph_destroy_quietly(body)  # cloned by the driver (or not added at all)
        builder.bodies.append(node.body)
        return r

    def issue(self, node: ChildGraphNode, stream: Any, run: StreamRun) -> None:
        run.issue_graph(node.body, stream)

    def capture(self, replay: Replay, node: ChildGraphNode, stream: Any) -> None:
        replay.inline(node, node.body, stream)

    def lift(self, lifter: Lifter, g: Graph, dn: Any, after: Any) -> Node | None:
        body_handle = graph_child_graph_node_get_graph(dn)
        body = type(g)("child")
        lifter.into(body, int(body_handle))
        return g.child(body, after=after)


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = (
    (EmptyNode, EmptyOps()),
    (ChildGraphNode, ChildGraphOps()),
)
