"""Building ``CUgraphNodeParams`` for every node kind except kernels."""

from __future__ import annotations

from typing import Any

from .._nodes import EmptyNode, EventRecordNode, EventWaitNode, HostNode, MemcpyNode, MemsetNode, Node
from .._operands import Deferred
from .._param import Param
from ..errors import OperandError
from ._calls import require_driver
from ._host_callbacks import HOST_FN_ADDRESS, register
from ._kernel_args import resolve_deferred

__all__ = ["pointer_value", "memory_type", "event_handle", "node_params"]


def pointer_value(value: Any, bindings: dict[str, Any], what: str) -> int:
    """The address behind a stored operand (an int, a bound Param or a DLPack object)."""
    t = type(value)
    if t is int:
        return value  # type: ignore[no-any-return]
    if t is Param:
        return bindings[value.name]  # type: ignore[no-any-return]
    if t is Deferred:
        return resolve_deferred(value.obj, what)
    raise TypeError(f"{what}: unexpected operand {value!r}")


#: No valid user pointer lies below this address (Linux's default mmap_min_addr).
LOWEST_VALID_ADDRESS = 1 << 16


def memory_type(ptr: int, what: str = "operand") -> Any:
    """``CU_MEMORYTYPE_UNIFIED`` for memory CUDA knows, ``CU_MEMORYTYPE_HOST`` for pageable host memory.

    Raises
    ------
    OperandError
        For an address no allocation can have (below 64 KiB).
    """
    drv = require_driver()
    err, _ = drv.cuPointerGetAttribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr)
    if err:
        if ptr < LOWEST_VALID_ADDRESS:
            raise OperandError(f"{what}: {ptr:#x} is not an address of device or host memory")
        return drv.CUmemorytype.CU_MEMORYTYPE_HOST
    return drv.CUmemorytype.CU_MEMORYTYPE_UNIFIED


def event_handle(event: Any) -> Any:
    """The ``CUevent`` of a ``cuda.core`` Event or a raw handle."""
    drv = require_driver()
    return event if isinstance(event, drv.CUevent) else event.handle


def node_params(node: Node, ctx: Any, bindings: dict[str, Any], sink: list[Any], host_keys: list[int]) -> Any:
    """Fresh ``CUgraphNodeParams`` for a non-kernel, non-child node."""
    drv = require_driver()
    T = drv.CUgraphNodeType
    p = drv.CUgraphNodeParams()
    t = type(node)
    if t is MemcpyNode:
        assert isinstance(node, MemcpyNode)
        p.type = T.CU_GRAPH_NODE_TYPE_MEMCPY
        c = p.memcpy.copyParams
        src = pointer_value(node.src, bindings, f"{node.label}: src")
        dst = pointer_value(node.dst, bindings, f"{node.label}: dst")
        st, dt = memory_type(src, f"{node.label}: src"), memory_type(dst, f"{node.label}: dst")
        c.srcMemoryType = st
        if st == drv.CUmemorytype.CU_MEMORYTYPE_HOST:
            c.srcHost = src
        else:
            c.srcDevice = src
        c.dstMemoryType = dt
        if dt == drv.CUmemorytype.CU_MEMORYTYPE_HOST:
            c.dstHost = dst
        else:
            c.dstDevice = dst
        c.WidthInBytes = node.nbytes
        c.Height = 1
        c.Depth = 1
        p.memcpy.copyCtx = ctx
    elif t is MemsetNode:
        assert isinstance(node, MemsetNode)
        p.type = T.CU_GRAPH_NODE_TYPE_MEMSET
        m = p.memset
        m.dst = pointer_value(node.dst, bindings, f"{node.label}: dst")
        m.pitch = node.pitch if node.height > 1 else 0
        m.value = node.value
        m.elementSize = node.element_size
        m.width = node.width
        m.height = node.height
        m.ctx = ctx
    elif t is HostNode:
        assert isinstance(node, HostNode)
        p.type = T.CU_GRAPH_NODE_TYPE_HOST
        p.host.fn = drv.CUhostFn(HOST_FN_ADDRESS)
        key = register(node.fn, node.args, sink, node)
        host_keys.append(key)
        p.host.userData = key
    elif t is EventRecordNode:
        assert isinstance(node, EventRecordNode)
        p.type = T.CU_GRAPH_NODE_TYPE_EVENT_RECORD
        p.eventRecord.event = event_handle(node.event)
    elif t is EventWaitNode:
        assert isinstance(node, EventWaitNode)
        p.type = T.CU_GRAPH_NODE_TYPE_WAIT_EVENT
        p.eventWait.event = event_handle(node.event)
    elif t is EmptyNode:
        p.type = T.CU_GRAPH_NODE_TYPE_EMPTY
    else:  # pragma: no cover - every kind is handled above or by the caller
        raise TypeError(f"{node.label}: no lowering for {t.__name__}")
    return p
