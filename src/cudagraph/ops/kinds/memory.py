"""Graph memory: ``AllocNode`` (``MEM_ALLOC``) and ``FreeNode`` (``MEM_FREE``)."""

from __future__ import annotations

from typing import Any

from ...definition.nodes import AllocNode, FreeNode, Node
from ...driver.alloc_placement import fill_alloc_params, stream_pool
from ...driver.api import mem_alloc_async, mem_alloc_from_pool_async, mem_free_async
from ...driver.calls import require_driver
from ..operands import pointer_value
from .base import Builder, KindOps, ParamsEnv, StreamRun

__all__ = ["OPS", "AllocOps", "FreeOps"]


class AllocOps(KindOps):
    """A ``MEM_ALLOC`` node placed as the node says (:mod:`cudagraph.driver.alloc_placement`); its address is
    recorded for the nodes that use it.

    On a stream: ``cuMemAllocAsync`` for device memory of the current device with no peers, else
    ``cuMemAllocFromPoolAsync`` from a pool of the node's placement; an eager run frees what the graph does not.
    """

    __slots__ = ()
    lowers = True
    #: The driver fixes an allocation's address and size at the add; no executable update changes them.
    exec_update = None

    def lower(self, builder: Builder, node: AllocNode, handle: Any, deps: Any, ndeps: int) -> Any:
        drv = require_driver()
        state = builder.state
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_ALLOC
        fill_alloc_params(p.alloc, node, int(state.device()))
        r = builder.add(handle, deps, ndeps, p)
        if not r[0]:
            state.allocs[id(node)] = (node, int(p.alloc.dptr))
        return r

    def issue(self, node: AllocNode, stream: Any, run: StreamRun) -> None:
        pool = None
        if not node.default_memory:  # (its devices were checked before the first node: check_devices_of)
            pool = stream_pool(node, int(run.state.device()))
        if pool is None:
            addr = mem_alloc_async(node.nbytes, stream, node=node)
        else:
            addr = mem_alloc_from_pool_async(node.nbytes, pool, stream, node=node)
        run.state.allocs[id(node)] = (node, int(addr))


class FreeOps(KindOps):
    """A ``MEM_FREE`` node of an allocation made earlier in the same construction."""

    __slots__ = ()
    #: ``cuGraphExecNodeSetParams`` does not take memory free nodes: which allocation is freed is fixed.
    exec_update = None

    def params(self, node: FreeNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        p = env.node_params(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_FREE)
        p.free.dptr = pointer_value(node.alloc, env.bindings, f"{node.label}: alloc", env.state)
        return p

    def issue(self, node: FreeNode, stream: Any, run: StreamRun) -> None:
        addr = pointer_value(node.alloc, run.bindings, f"{node.label}: alloc", run.state)
        mem_free_async(addr, stream, node=node)
        run.state.freed.add(id(node.alloc))


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = (
    (AllocNode, AllocOps()),
    (FreeNode, FreeOps()),
)
