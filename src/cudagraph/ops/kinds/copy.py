"""Copies: ``MemcpyNode`` (1-D) and ``Memcpy3DNode`` / ``Memcpy2DNode`` (pitched)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...definition.nodes import AllocNode, AllocOffset, Memcpy2DNode, Memcpy3DNode, MemcpyNode, Node
from ...driver.api import graph_memcpy_node_get_params, memcpy_3d_async, memcpy_async
from ...driver.calls import require_driver
from ..lower_state import LowerState
from ..operands import endpoint, memory_type, pointer_value
from .base import KindOps, Lifter, ParamsEnv, StreamRun

if TYPE_CHECKING:
    from ...definition.graph import Graph

__all__ = ["OPS", "Memcpy3DOps", "MemcpyOps", "fill_endpoints"]


def fill_endpoints(c: Any, node: Any, bindings: dict[str, Any], state: LowerState | None) -> None:
    """Fill the source and destination of a ``CUDA_MEMCPY3D`` from ``node.src`` and ``node.dst``."""
    HOST = require_driver().CUmemorytype.CU_MEMORYTYPE_HOST
    src, st = endpoint(node.src, bindings, f"{node.label}: src", state)
    dst, dt = endpoint(node.dst, bindings, f"{node.label}: dst", state)
    c.srcMemoryType = st
    if st == HOST:
        c.srcHost = src
    else:
        c.srcDevice = src
    c.dstMemoryType = dt
    if dt == HOST:
        c.dstHost = dst
    else:
        c.dstDevice = dst


class _CopyOps(KindOps):
    __slots__ = ()

    def fill(self, c: Any, node: Any, bindings: dict[str, Any], state: LowerState | None) -> None:
        """Fill the ``CUDA_MEMCPY3D`` ``c`` for ``node``."""
        raise NotImplementedError

    def params(self, node: Any, env: ParamsEnv) -> Any:
        drv = require_driver()
        p = env.node_params(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMCPY)
        self.fill(p.memcpy.copyParams, node, env.bindings, env.state)
        p.memcpy.copyCtx = env.ctx
        return p

    def address_paths(self, node: Any, params: Any) -> dict[str, tuple[str, bool]]:
        """The device endpoints (``srcDevice``, ``dstDevice``); a host endpoint is left to fresh parameters."""
        c = params.memcpy.copyParams
        host = require_driver().CUmemorytype.CU_MEMORYTYPE_HOST
        out = {}
        if c.srcMemoryType != host:
            out["src"] = ("memcpy.copyParams.srcDevice", True)
        if c.dstMemoryType != host:
            out["dst"] = ("memcpy.copyParams.dstDevice", True)
        return out


_LATE = (AllocNode, AllocOffset)


class MemcpyOps(_CopyOps):
    """A 1-D copy of ``nbytes``; lifted from 1-D driver copies."""

    __slots__ = ()
    capturable = True
    lifts = "CU_GRAPH_NODE_TYPE_MEMCPY"
    compiled = "memcpy"

    def fill(self, c: Any, node: MemcpyNode, bindings: dict[str, Any], state: LowerState | None) -> None:
        fill_endpoints(c, node, bindings, state)
        c.WidthInBytes = node.nbytes
        c.Height = 1
        c.Depth = 1

    def issue(self, node: MemcpyNode, stream: Any, run: StreamRun) -> None:
        bindings, state = run.bindings, run.state
        src = pointer_value(node.src, bindings, f"{node.label}: src", state)
        dst = pointer_value(node.dst, bindings, f"{node.label}: dst", state)
        if type(node.src) not in _LATE:
            memory_type(src, f"{node.label}: src")
        if type(node.dst) not in _LATE:
            memory_type(dst, f"{node.label}: dst")
        memcpy_async(dst, src, node.nbytes, stream, node=node)

    def lift(self, lifter: Lifter, g: Graph, dn: Any, after: Any) -> Node | None:
        """A 1-D copy node, or ``None`` for a copy this library does not model (2-D, 3-D, arrays)."""
        cp = graph_memcpy_node_get_params(dn)
        M = lifter.drv.CUmemorytype
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


class Memcpy3DOps(_CopyOps):
    """A pitched 2-D or 3-D copy (``cuMemcpy3DAsync`` on a stream)."""

    __slots__ = ()

    def fill(self, c: Any, node: Memcpy3DNode, bindings: dict[str, Any], state: LowerState | None) -> None:
        fill_endpoints(c, node, bindings, state)
        c.WidthInBytes = node.width
        c.Height = node.height
        c.Depth = node.depth
        c.srcPitch = node.src_pitch
        c.dstPitch = node.dst_pitch
        c.srcHeight = node.src_height
        c.dstHeight = node.dst_height

    def issue(self, node: Memcpy3DNode, stream: Any, run: StreamRun) -> None:
        drv = require_driver()
        copy = drv.CUDA_MEMCPY3D()
        self.fill(copy, node, run.bindings, run.state)
        memcpy_3d_async(copy, stream, node=node)


_MEMCPY3D = Memcpy3DOps()

#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = (
    (MemcpyNode, MemcpyOps()),
    (Memcpy3DNode, _MEMCPY3D),
    (Memcpy2DNode, _MEMCPY3D),
)
