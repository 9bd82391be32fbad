"""Graph memory: ``AllocNode`` (``MEM_ALLOC``) and ``FreeNode`` (``MEM_FREE``)."""

from __future__ import annotations

from typing import Any

from ...definition.nodes import AllocNode, FreeNode, Node
from ...driver.calls import check, require_driver
from ..operands import pointer_value
from .base import Builder, KindOps, ParamsEnv, StreamRun

__all__ = ["OPS", "AllocOps", "FreeOps"]


class AllocOps(KindOps):
    """A ``MEM_ALLOC`` node on the context's device; its address is recorded for the nodes that use it.

    On a stream: ``cuMemAllocAsync``; an eager run frees what the graph does not.
    """

    __slots__ = ()
    lowers = True

    def lower(self, builder: Builder, node: AllocNode, handle: Any, deps: Any, ndeps: int) -> Any:
        drv = require_driver()
        state = builder.state
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_ALLOC
        a = p.alloc
        a.poolProps.allocType = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        a.poolProps.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        a.poolProps.location.id = int(state.device())
        a.bytesize = node.nbytes
        r = builder.add(handle, deps, ndeps, p)
        if not r[0]:
            state.allocs[id(node)] = (node, int(p.alloc.dptr))
        return r

    def issue(self, node: AllocNode, stream: Any, run: StreamRun) -> None:
        addr = check(require_driver().cuMemAllocAsync(node.nbytes, stream), "cuMemAllocAsync", node)
        run.state.allocs[id(node)] = (node, int(addr))


class FreeOps(KindOps):
    """A ``MEM_FREE`` node of an allocation made earlier in the same construction."""

    __slots__ = ()

    def params(self, node: FreeNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        p = env.node_params(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_FREE)
        p.free.dptr = pointer_value(node.alloc, env.bindings, f"{node.label}: alloc", env.state)
        return p

    def issue(self, node: FreeNode, stream: Any, run: StreamRun) -> None:
        addr = pointer_value(node.alloc, run.bindings, f"{node.label}: alloc", run.state)
        check(require_driver().cuMemFreeAsync(addr, stream), "cuMemFreeAsync", node)
        run.state.freed.add(id(node.alloc))


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = (
    (AllocNode, AllocOps()),
    (FreeNode, FreeOps()),
)
