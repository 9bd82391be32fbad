"""Building ``CUgraphNodeParams`` for every node kind except kernels."""

from __future__ import annotations

from typing import Any

from ..definition.nodes import (
    AllocNode,
    AllocOffset,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    FreeNode,
    HostNode,
    Memcpy3DNode,
    MemcpyNode,
    MemsetNode,
    Node,
    WaitValueNode,
    WriteValueNode,
)
from ..definition.operands import Deferred
from ..definition.param import Param
from ..driver.calls import require_driver
from ..driver.host_callbacks import HOST_FN_ADDRESS, register
from ..driver.kernel_args import resolve_deferred
from ..errors import DefinitionError, OperandError

__all__ = [
    "pointer_value",
    "memory_type",
    "event_handle",
    "node_params",
    "fill_memcpy3d",
    "fill_memop",
    "memop_address",
]


def pointer_value(value: Any, bindings: dict[str, Any], what: str) -> int:
    """The address behind a stored operand (an int, a bound Param, a DLPack object or a graph allocation)."""
    t = type(value)
    if t is int:
        return value  # type: ignore[no-any-return]
    if t is Param:
        return bindings[value.name]  # type: ignore[no-any-return]
    if t is Deferred:
        return resolve_deferred(value.obj, what)
    if t is AllocNode or t is AllocOffset:
        from .lower_state import current

        state = current()
        if state is None:
            raise DefinitionError(f"{what}: a graph allocation has an address only while its graph is built")
        return state.alloc_address(value, what)
    raise TypeError(f"{what}: unexpected operand {value!r}")


def _endpoint(value: Any, bindings: dict[str, Any], what: str) -> tuple[int, Any]:
    """``(address, CUmemorytype)`` of a copy operand; graph allocations are device memory."""
    ptr = pointer_value(value, bindings, what)
    t = type(value)
    if t is AllocNode or t is AllocOffset:
        return ptr, require_driver().CUmemorytype.CU_MEMORYTYPE_DEVICE
    return ptr, memory_type(ptr, what)


def fill_memcpy3d(c: Any, node: Any, bindings: dict[str, Any]) -> None:
    """Fill a ``CUDA_MEMCPY3D`` for a :class:`MemcpyNode` or :class:`Memcpy3DNode`."""
    drv = require_driver()
    HOST = drv.CUmemorytype.CU_MEMORYTYPE_HOST
    src, st = _endpoint(node.src, bindings, f"{node.label}: src")
    dst, dt = _endpoint(node.dst, bindings, f"{node.label}: dst")
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
    if type(node) is MemcpyNode:
        c.WidthInBytes = node.nbytes
        c.Height = 1
        c.Depth = 1
        return
    c.WidthInBytes = node.width
    c.Height = node.height
    c.Depth = node.depth
    c.srcPitch = node.src_pitch
    c.dstPitch = node.dst_pitch
    c.srcHeight = node.src_height
    c.dstHeight = node.dst_height


def pointer_attribute(attribute: Any, ptr: int) -> int:
    """One pointer attribute as an int, 0 where CUDA does not know the address.

    ``cuPointerGetAttributes`` answers an unknown address (pageable host
    memory) with zeros where ``cuPointerGetAttribute`` would fail, so probing
    user pointers raises no driver error.
    """
    drv = require_driver()
    err, values = drv.cuPointerGetAttributes(1, [attribute], ptr)
    if err or not values or values[0] is None:
        return 0
    value = values[0]
    try:
        return int(value)
    except TypeError:
        return int(getattr(value, "value", 0) or 0)


def memop_address(node: Any, bindings: dict[str, Any]) -> int:
    """The word a write-value / wait-value node works on, checked for memory operations.

    Raises
    ------
    OperandError
        The word lies in memory-pool memory (``cuMemAllocAsync``, ``cuda.core``
        device buffers, graph allocations), which the driver's memory
        operations refuse at launch.
    """
    drv = require_driver()
    what = f"{node.label}: ptr"
    addr = pointer_value(node.ptr, bindings, what)
    if pointer_attribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, addr):
        raise OperandError(
            f"{what}: {addr:#x} is memory-pool memory (cuMemAllocAsync / cuda.core device buffers); memory "
            "operations need memory from cuMemAlloc, cuMemHostAlloc or registered host memory"
        )
    return addr


def fill_memop(op: Any, node: Any, bindings: dict[str, Any]) -> None:
    """Fill a ``CUstreamBatchMemOpParams`` for a write-value or wait-value node."""
    drv = require_driver()
    T = drv.CUstreamBatchMemOpType
    addr = memop_address(node, bindings)
    if type(node) is WriteValueNode:
        v = op.writeValue
        v.operation = T.CU_STREAM_MEM_OP_WRITE_VALUE_64 if node.bits == 64 else T.CU_STREAM_MEM_OP_WRITE_VALUE_32
    else:
        v = op.waitValue
        v.operation = T.CU_STREAM_MEM_OP_WAIT_VALUE_64 if node.bits == 64 else T.CU_STREAM_MEM_OP_WAIT_VALUE_32
    v.address = addr
    if node.bits == 64:
        v.value64 = node.value
    else:
        v.value = node.value
    v.flags = node.flags


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
    if not pointer_attribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr):
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
    if t is MemcpyNode or isinstance(node, Memcpy3DNode):
        p.type = T.CU_GRAPH_NODE_TYPE_MEMCPY
        fill_memcpy3d(p.memcpy.copyParams, node, bindings)
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
    elif t is FreeNode:
        assert isinstance(node, FreeNode)
        p.type = T.CU_GRAPH_NODE_TYPE_MEM_FREE
        p.free.dptr = pointer_value(node.alloc, bindings, f"{node.label}: alloc")
    elif t is WriteValueNode or t is WaitValueNode:
        p.type = T.CU_GRAPH_NODE_TYPE_BATCH_MEM_OP
        op = drv.CUstreamBatchMemOpParams()
        fill_memop(op, node, bindings)
        m = p.memOp
        m.ctx = ctx
        m.count = 1
        m.paramArray = [op]
        m.flags = 0
    else:  # pragma: no cover - every kind is handled above or by the caller
        raise TypeError(f"{node.label}: no lowering for {t.__name__}")
    return p
