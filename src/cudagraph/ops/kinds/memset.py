"""Fills: ``MemsetNode`` (1-D or pitched 2-D, elements of 1, 2 or 4 bytes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...definition.nodes import MemsetNode, Node
from ...driver.api import (
    graph_memset_node_get_params,
    memset_d2d8_async,
    memset_d2d16_async,
    memset_d2d32_async,
    memset_d8_async,
    memset_d16_async,
    memset_d32_async,
)
from ...driver.calls import require_driver
from ..operands import pointer_value
from .base import KindOps, Lifter, ParamsEnv, StreamRun

if TYPE_CHECKING:
    from ...definition.graph import Graph

__all__ = ["OPS", "MemsetOps"]

#: The stream call of a memset of each element size: one row, several rows.
_MEMSET: dict[int, Callable[..., None]] = {1: memset_d8_async, 2: memset_d16_async, 4: memset_d32_async}
_MEMSET_2D: dict[int, Callable[..., None]] = {1: memset_d2d8_async, 2: memset_d2d16_async, 4: memset_d2d32_async}


class MemsetOps(KindOps):
    """A fill node; on a stream ``cuMemsetD{8,16,32}Async`` or its 2-D form."""

    __slots__ = ()
    capturable = True
    lifts = "CU_GRAPH_NODE_TYPE_MEMSET"
    compiled = "memset"

    def params(self, node: MemsetNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        p = env.node_params(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMSET)
        m = p.memset
        m.dst = pointer_value(node.dst, env.bindings, f"{node.label}: dst", env.state)
        m.pitch = node.pitch if node.height > 1 else 0
        m.value = node.value
        m.elementSize = node.element_size
        m.width = node.width
        m.height = node.height
        m.ctx = env.ctx
        return p

    def address_paths(self, node: MemsetNode, params: Any) -> dict[str, tuple[str, bool]]:
        return {"dst": ("memset.dst", False)}

    def issue(self, node: MemsetNode, stream: Any, run: StreamRun) -> None:
        dst = pointer_value(node.dst, run.bindings, f"{node.label}: dst", run.state)
        es = node.element_size
        if node.height == 1:
            _MEMSET[es](dst, node.value, node.width, stream, node=node)
        else:
            _MEMSET_2D[es](dst, node.pitch, node.value, node.width, node.height, stream, node=node)

    def lift(self, lifter: Lifter, g: Graph, dn: Any, after: Any) -> Node | None:
        mp = graph_memset_node_get_params(dn)
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


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = ((MemsetNode, MemsetOps()),)
