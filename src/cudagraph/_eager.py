"""The eager materializer: run a definition on a stream with no graph."""

from __future__ import annotations

from typing import Any

from ._bindings import resolve_bindings
from ._driver._calls import check, ensure_context, require_driver
from ._driver._host_callbacks import HOST_FN_ADDRESS, register, unregister
from ._driver._kernel_args import PACKING_LOCK, kernel_info
from ._driver._node_params import event_handle, memory_type, pointer_value
from ._driver._streams import stream_handle
from ._graph import Graph
from ._nodes import (
    ChildGraphNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    HostNode,
    KernelNode,
    MemcpyNode,
    MemsetNode,
)
from .errors import HostCallbackError

__all__ = ["run"]


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
            _run(graph, h, bindings, sink, keys)
    finally:
        if keys:
            check(drv.cuStreamSynchronize(h), "cuStreamSynchronize")
            unregister(keys)
    if sink:
        node, exc = sink[0]
        raise HostCallbackError(
            f"host callback {node.label} of Graph {graph.name!r} raised {type(exc).__name__}: {exc}", node
        ) from exc


def _function(info: Any) -> Any:
    drv = require_driver()
    if info.is_library_kernel:
        return check(drv.cuKernelGetFunction(info.handle), "cuKernelGetFunction")
    return info.handle


def _run(graph: Graph, h: Any, bindings: dict[str, Any], sink: list[Any], keys: list[int]) -> None:
    drv = require_driver()
    for node in graph.topological_order():
        t = type(node)
        if t is KernelNode:
            assert isinstance(node, KernelNode)
            info = kernel_info(node.kernel)
            params = info.pack(node.args, node, bindings)
            g, b = node.grid, node.block
            check(
                drv.cuLaunchKernel(_function(info), *g, *b, node.shared_mem, h, params, 0),
                "cuLaunchKernel",
                node,
            )
        elif t is MemcpyNode:
            assert isinstance(node, MemcpyNode)
            src = pointer_value(node.src, bindings, f"{node.label}: src")
            dst = pointer_value(node.dst, bindings, f"{node.label}: dst")
            memory_type(src, f"{node.label}: src")
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
            _run(node.body, h, bindings, sink, keys)
        elif t is EmptyNode:
            continue


def _memset(node: MemsetNode, dst: int, h: Any) -> None:
    drv = require_driver()
    es = node.element_size
    if node.height == 1:
        fn = {1: drv.cuMemsetD8Async, 2: drv.cuMemsetD16Async, 4: drv.cuMemsetD32Async}[es]
        check(fn(dst, node.value, node.width, h), fn.__name__, node)
    else:
        fn = {1: drv.cuMemsetD2D8Async, 2: drv.cuMemsetD2D16Async, 4: drv.cuMemsetD2D32Async}[es]
        check(fn(dst, node.pitch, node.value, node.width, node.height, h), fn.__name__, node)
