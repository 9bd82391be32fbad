"""Memory operations: ``WriteValueNode`` and ``WaitValueNode`` (32- or 64-bit words, ``BATCH_MEM_OP`` nodes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ...definition.nodes import BatchMemOpNode, Node, WaitValueNode, WriteValueNode
from ...driver.api import stream_wait_value32, stream_wait_value64, stream_write_value32, stream_write_value64
from ...driver.calls import require_driver
from ...errors import OperandError
from ..lower_state import LowerState
from ..operands import pointer_attribute, pointer_value
from .base import KindOps, ParamsEnv, StreamRun

__all__ = ["OPS", "WaitValueOps", "WriteValueOps", "memop_address"]


def memop_address(node: BatchMemOpNode, bindings: dict[str, Any], state: LowerState | None = None) -> int:
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
    addr = pointer_value(node.ptr, bindings, what, state)
    if pointer_attribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, addr):
        raise OperandError(
            f"{what}: {addr:#x} is memory-pool memory (cuMemAllocAsync / cuda.core device buffers); memory "
            "operations need memory from cuMemAlloc, cuMemHostAlloc or registered host memory"
        )
    return addr


class _MemOpOps(KindOps):
    """A one-word memory operation; the subclasses name its fields and driver calls."""

    __slots__ = ()
    #: The member of ``CUstreamBatchMemOpParams`` that holds the operation.
    field: ClassVar[str]
    #: ``CUstreamBatchMemOpType`` member name without the ``_32``/``_64`` width.
    op: ClassVar[str]
    #: The stream call of each word width (``cuStream{Write,Wait}Value{32,64}``).
    stream_calls: ClassVar[dict[int, Callable[..., None]]]

    def params(self, node: BatchMemOpNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        # A fresh structure, never a reused one: cuda.bindings' paramArray setter writes the array's address
        # only when the length changes, so a zeroed reused one would keep NULL there
        # (tests/test_node_params_pool_cpu.py).
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_BATCH_MEM_OP
        op = drv.CUstreamBatchMemOpParams()
        addr = memop_address(node, env.bindings, env.state)
        v = self.operation(node, op)
        v.address = addr
        if node.bits == 64:
            v.value64 = node.value
        else:
            v.value = node.value
        v.flags = node.flags
        m = p.memOp
        m.ctx = env.ctx
        m.count = 1
        m.paramArray = [op]
        m.flags = 0
        return p

    def operation(self, node: BatchMemOpNode, op: Any) -> Any:
        """Fill in ``op`` (a ``CUstreamBatchMemOpParams``) for ``node``; return its part that holds the operands."""
        v = getattr(op, self.field)
        v.operation = getattr(require_driver().CUstreamBatchMemOpType, f"CU_STREAM_MEM_OP_{self.op}_{node.bits}")
        return v

    def issue(self, node: BatchMemOpNode, stream: Any, run: StreamRun) -> None:
        addr = memop_address(node, run.bindings, run.state)
        self.stream_calls[node.bits](stream, addr, node.value, node.flags, node=node)


class WriteValueOps(_MemOpOps):
    """Writes a word (``CU_STREAM_MEM_OP_WRITE_VALUE_{32,64}``)."""

    __slots__ = ()
    field = "writeValue"
    op = "WRITE_VALUE"
    stream_calls: ClassVar[dict[int, Callable[..., None]]] = {32: stream_write_value32, 64: stream_write_value64}


class WaitValueOps(_MemOpOps):
    """Waits for a word (``CU_STREAM_MEM_OP_WAIT_VALUE_{32,64}``)."""

    __slots__ = ()
    field = "waitValue"
    op = "WAIT_VALUE"
    stream_calls: ClassVar[dict[int, Callable[..., None]]] = {32: stream_wait_value32, 64: stream_wait_value64}


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = (
    (WriteValueNode, WriteValueOps()),
    (WaitValueNode, WaitValueOps()),
)
