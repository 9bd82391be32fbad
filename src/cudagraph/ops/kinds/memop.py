"""Memory operations: ``WriteValueNode`` and ``WaitValueNode`` (32- or 64-bit words, ``BATCH_MEM_OP`` nodes)."""

from __future__ import annotations

from typing import Any

from ...definition.nodes import BatchMemOpNode, Node, WaitValueNode, WriteValueNode
from ...driver.calls import check, require_driver
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
    __slots__ = ()

    def operation(self, node: BatchMemOpNode, op: Any) -> Any:
        """Set ``op``'s operation for ``node``; return the member of ``op`` that holds it."""
        raise NotImplementedError

    def params(self, node: BatchMemOpNode, env: ParamsEnv) -> Any:
        drv = require_driver()
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

    def stream_call(self, node: BatchMemOpNode) -> Any:
        """The ``cuStream{Write,Wait}Value{32,64}`` function for ``node``."""
        raise NotImplementedError

    def issue(self, node: BatchMemOpNode, stream: Any, run: StreamRun) -> None:
        addr = memop_address(node, run.bindings, run.state)
        fn = self.stream_call(node)
        check(fn(stream, addr, node.value, node.flags), fn.__name__, node)


class WriteValueOps(_MemOpOps):
    """Writes a word (``CU_STREAM_MEM_OP_WRITE_VALUE_{32,64}``)."""

    __slots__ = ()

    def operation(self, node: BatchMemOpNode, op: Any) -> Any:
        T = require_driver().CUstreamBatchMemOpType
        v = op.writeValue
        v.operation = T.CU_STREAM_MEM_OP_WRITE_VALUE_64 if node.bits == 64 else T.CU_STREAM_MEM_OP_WRITE_VALUE_32
        return v

    def stream_call(self, node: BatchMemOpNode) -> Any:
        drv = require_driver()
        return drv.cuStreamWriteValue64 if node.bits == 64 else drv.cuStreamWriteValue32


class WaitValueOps(_MemOpOps):
    """Waits for a word (``CU_STREAM_MEM_OP_WAIT_VALUE_{32,64}``)."""

    __slots__ = ()

    def operation(self, node: BatchMemOpNode, op: Any) -> Any:
        T = require_driver().CUstreamBatchMemOpType
        v = op.waitValue
        v.operation = T.CU_STREAM_MEM_OP_WAIT_VALUE_64 if node.bits == 64 else T.CU_STREAM_MEM_OP_WAIT_VALUE_32
        return v

    def stream_call(self, node: BatchMemOpNode) -> Any:
        drv = require_driver()
        return drv.cuStreamWaitValue64 if node.bits == 64 else drv.cuStreamWaitValue32


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = (
    (WriteValueNode, WriteValueOps()),
    (WaitValueNode, WaitValueOps()),
)
