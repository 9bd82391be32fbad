"""The eager materializer: run a definition on a stream with no graph."""

from __future__ import annotations

from typing import Any

from ..definition.bindings import resolve_bindings
from ..definition.graph import Graph
from ..definition.nodes import (
    AllocNode,
    AllocOffset,
    ChildGraphNode,
    ConditionalNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    FreeNode,
    HostNode,
    KernelNode,
    Memcpy3DNode,
    MemcpyNode,
    MemsetNode,
    Node,
    SetConditionNode,
    WaitValueNode,
    WriteValueNode,
)
from ..driver.calls import check, ensure_context, require_driver
from ..driver.host_callbacks import HOST_FN_ADDRESS, register, unregister
from ..driver.kernel_args import PACKING_LOCK, kernel_info
from ..driver.streams import stream_handle
from ..errors import HostCallbackError, OperandError, UnsupportedError
from ..ops.lower_state import LowerState, begin, late_kernel_args
from ..ops.node_params import event_handle, fill_memcpy3d, memop_address, memory_type, pointer_value

__all__ = ["issue_node", "run"]


def run(graph: Graph, stream: Any, params: dict[str, Any]) -> None:
    """Issue every node of ``graph`` on ``stream`` in topological order.

    Host-callback exceptions are raised as :class:`HostCallbackError` after
    the stream has been synchronized.
    """
    graph._validate_structure()
    bindings = resolve_bindings(graph, params)
    drv = require_driver()
    ensure_context()
    h = stream_handle(stream)
    sink: list[Any] = []
    keys: list[int] = []
    try:
        with PACKING_LOCK:
            state = begin(object(), ensure_context(), eager=True)
            try:
                _run(graph, h, bindings, sink, keys, state)
            finally:
                # Allocations the graph does not free are released in stream order at the end.
                for key, (_alloc, addr) in state.allocs.items():
                    if key not in state.freed:
                        drv.cuMemFreeAsync(addr, h)
    finally:
        if keys:
            check(drv.cuStreamSynchronize(h), "cuStreamSynchronize")
            unregister(keys)
    if sink:
        node, exc = sink[0]
        raise HostCallbackError(
            f"host callback {node.label} of Graph {graph.name!r} raised {type(exc).__name__}: {exc}", node
        ) from exc


def _function(info: Any, state: LowerState) -> Any:
    """The ``CUfunction`` to launch ``info``'s kernel in this run's context (looked up once per run)."""
    if not info.is_library_kernel:
        return info.handle
    fn = state.functions.get(id(info))
    if fn is None:
        fn = check(require_driver().cuKernelGetFunction(info.handle), "cuKernelGetFunction")
        state.functions[id(info)] = fn
    return fn


def _run(graph: Graph, h: Any, bindings: dict[str, Any], sink: list[Any], keys: list[int], state: LowerState) -> None:
    for node in graph.topological_order():
        issue_node(node, h, bindings, sink, keys, state)


def issue_node(
    node: Node, h: Any, bindings: dict[str, Any], sink: list[Any], keys: list[int], state: LowerState
) -> None:
    """Issue the stream calls that do ``node``'s work on ``h`` (a child graph's nodes, in order).

    Host callbacks are registered with ``sink`` and their keys appended to
    ``keys``. Used by :meth:`Graph.run` and by the capture materializer.
    """
    drv = require_driver()
    graph = node.graph
    t = type(node)
    if t is KernelNode:
        assert isinstance(node, KernelNode)
        info = kernel_info(node.kernel)
        try:
            params = info.pack(node.args, node, bindings)
        except OperandError:
            late = late_kernel_args(state, node)
            if late is None:
                raise
            params = info.pack(late, node, bindings)
        if node.attrs is not None:
            _launch_ex(node, info, params, h, state)
            return
        g, b = node.grid, node.block
        check(
            drv.cuLaunchKernel(_function(info, state), *g, *b, node.shared_mem, h, params, 0),
            "cuLaunchKernel",
            node,
        )
    elif t is MemcpyNode:
        assert isinstance(node, MemcpyNode)
        src = pointer_value(node.src, bindings, f"{node.label}: src")
        dst = pointer_value(node.dst, bindings, f"{node.label}: dst")
        if type(node.src) not in _LATE:
            memory_type(src, f"{node.label}: src")
        if type(node.dst) not in _LATE:
            memory_type(dst, f"{node.label}: dst")
        check(drv.cuMemcpyAsync(dst, src, node.nbytes, h), "cuMemcpyAsync", node)
    elif t is MemsetNode:
        assert isinstance(node, MemsetNode)
        dst = pointer_value(node.dst, bindings, f"{node.label}: dst")
        _memset(node, dst, h)
    elif t is HostNode:
        assert isinstance(node, HostNode)
        key = register(node.fn, node.args, sink, node)
        keys.append(key)
        check(drv.cuLaunchHostFunc(h, drv.CUhostFn(HOST_FN_ADDRESS), key), "cuLaunchHostFunc", node)
    elif t is EventRecordNode:
        assert isinstance(node, EventRecordNode)
        check(drv.cuEventRecord(event_handle(node.event), h), "cuEventRecord", node)
    elif t is EventWaitNode:
        assert isinstance(node, EventWaitNode)
        check(drv.cuStreamWaitEvent(h, event_handle(node.event), 0), "cuStreamWaitEvent", node)
    elif t is ChildGraphNode:
        assert isinstance(node, ChildGraphNode)
        _run(node.body, h, bindings, sink, keys, state)
    elif t is EmptyNode:
        return
    elif t is AllocNode:
        assert isinstance(node, AllocNode)
        addr = check(drv.cuMemAllocAsync(node.nbytes, h), "cuMemAllocAsync", node)
        state.allocs[id(node)] = (node, int(addr))
    elif t is FreeNode:
        assert isinstance(node, FreeNode)
        addr = pointer_value(node.alloc, bindings, f"{node.label}: alloc")
        check(drv.cuMemFreeAsync(addr, h), "cuMemFreeAsync", node)
        state.freed.add(id(node.alloc))
    elif isinstance(node, Memcpy3DNode):
        copy = drv.CUDA_MEMCPY3D()
        fill_memcpy3d(copy, node, bindings)
        check(drv.cuMemcpy3DAsync(copy, h), "cuMemcpy3DAsync", node)
    elif t is WriteValueNode or t is WaitValueNode:
        assert isinstance(node, (WriteValueNode, WaitValueNode))
        addr = memop_address(node, bindings)
        if t is WriteValueNode:
            fn = drv.cuStreamWriteValue64 if node.bits == 64 else drv.cuStreamWriteValue32
        else:
            fn = drv.cuStreamWaitValue64 if node.bits == 64 else drv.cuStreamWaitValue32
        check(fn(h, addr, node.value, node.flags), fn.__name__, node)
    elif isinstance(node, (ConditionalNode, SetConditionNode)):
        raise UnsupportedError(
            f"{node.label} of Graph {graph.name!r}: {node.kind} nodes run only inside an instantiated "
            "graph (the condition is a graph object); Graph.run() cannot run them",
            node=node,
        )
    else:  # pragma: no cover - every kind is handled above
        raise UnsupportedError(f"{node.label}: Graph.run() cannot run {type(node).__name__}", node=node)


_LATE = (AllocNode, AllocOffset)


def _launch_ex(node: KernelNode, info: Any, params: int, h: Any, state: LowerState) -> None:
    """``cuLaunchKernelEx`` with the node's launch attributes (programmatic edges launch normally)."""
    from ..ops.lower_special import ensure_dynamic_smem, launch_attribute_values

    drv = require_driver()
    attrs = node.attrs
    why = ensure_dynamic_smem(info, node, state) if attrs.smem_optin else ""
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = node.grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = node.block
    cfg.sharedMemBytes = node.shared_mem
    cfg.hStream = h
    launch_attrs = []
    for attr_id, setter, _desc in launch_attribute_values(attrs):
        a = drv.CUlaunchAttribute()
        a.id = attr_id
        setter(a.value)
        launch_attrs.append(a)
    cfg.attrs = launch_attrs
    cfg.numAttrs = len(launch_attrs)
    (err,) = drv.cuLaunchKernelEx(cfg, _function(info, state), params, 0)
    if err:
        from ..driver.calls import raise_error

        raise_error(err, "cuLaunchKernelEx", node, why)


def _memset(node: MemsetNode, dst: int, h: Any) -> None:
    drv = require_driver()
    es = node.element_size
    if node.height == 1:
        fn = {1: drv.cuMemsetD8Async, 2: drv.cuMemsetD16Async, 4: drv.cuMemsetD32Async}[es]
        check(fn(dst, node.value, node.width, h), fn.__name__, node)
    else:
        fn = {1: drv.cuMemsetD2D8Async, 2: drv.cuMemsetD2D16Async, 4: drv.cuMemsetD2D32Async}[es]
        check(fn(dst, node.pitch, node.value, node.width, node.height, h), fn.__name__, node)
