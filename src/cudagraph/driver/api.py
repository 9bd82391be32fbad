"""The driver calls of the layers above the driver package: one function per ``cuda.bindings`` entry point.

Every module outside :mod:`cudagraph.driver` calls the driver through this one. A function is named after its
entry point in snake case without the ``cu`` prefix (``cuStreamSynchronize`` -> :func:`stream_synchronize`) and
asks :func:`~cudagraph.driver.calls.require_driver` for the bindings at each call. Its forms:

- checked (the name alone): a failing ``CUresult`` raises the typed error of
  :func:`~cudagraph.driver.calls.check`, naming ``node`` (the definition node at fault) where the function takes
  one; it returns what the call answers besides the result;
- ``..._result``: the whole tuple ``cuda.bindings`` returns, for a caller that reads the result itself (an error
  that says more, a result that is not an error there);
- ``..._quietly``: the call made, its result not read (releases on cleanup paths);
- ``..._entry``: the bindings' function itself, resolved once by a caller that calls it for every node or every
  launch with no frame between (it returns the tuple, unchecked).
"""

from __future__ import annotations

from typing import Any

from .calls import check, require_driver

__all__ = [
    "ctx_get_device",
    "device_get_attribute",
    "driver_get_version",
    "event_create",
    "event_destroy_quietly",
    "event_elapsed_time",
    "event_record",
    "event_synchronize",
    "func_get_attribute",
    "func_set_attribute_result",
    "graph_child_graph_node_get_graph",
    "graph_clone",
    "graph_conditional_handle_create",
    "graph_debug_dot_print",
    "graph_destroy_quietly",
    "graph_event_record_node_get_event",
    "graph_event_wait_node_get_event",
    "graph_exec_child_graph_node_set_params",
    "graph_exec_destroy_quietly",
    "graph_exec_kernel_node_set_params_entry",
    "graph_exec_node_set_params_entry",
    "graph_exec_node_set_params_result",
    "graph_exec_update_result",
    "graph_host_node_get_params",
    "graph_instantiate_with_params_result",
    "graph_kernel_node_get_params",
    "graph_kernel_node_set_attribute_result",
    "graph_launch_entry",
    "graph_mem_alloc_node_get_params",
    "graph_memcpy_node_get_params",
    "graph_memset_node_get_params",
    "graph_node_get_dependencies_result",
    "graph_node_get_enabled",
    "graph_node_get_params_if_exported",
    "graph_node_get_type",
    "graph_node_set_enabled",
    "graph_nodes",
    "graph_upload",
    "kernel_get_attribute",
    "kernel_get_function",
    "kernel_set_attribute_result",
    "launch_host_func",
    "launch_kernel_ex_result",
    "mem_alloc",
    "mem_alloc_async",
    "mem_alloc_from_pool_async",
    "mem_free_async",
    "mem_free_async_quietly",
    "mem_free_quietly",
    "memcpy_3d_async",
    "memcpy_async",
    "memcpy_dtod",
    "memset_d16_async",
    "memset_d2d16_async",
    "memset_d2d32_async",
    "memset_d2d8_async",
    "memset_d32_async",
    "memset_d8_async",
    "stream_begin_capture",
    "stream_create",
    "stream_destroy_quietly",
    "stream_end_capture_result",
    "stream_is_capturing",
    "stream_is_capturing_result",
    "stream_synchronize",
    "stream_wait_event",
    "stream_wait_value32",
    "stream_wait_value64",
    "stream_write_value32",
    "stream_write_value64",
]


# ------------------------------------------------------------------------------ driver, context, device


def driver_get_version() -> Any:
    """``cuDriverGetVersion``: the driver's CUDA version (``13000`` for CUDA 13.0)."""
    return check(require_driver().cuDriverGetVersion(), "cuDriverGetVersion")


def ctx_get_device() -> Any:
    """``cuCtxGetDevice``: the ``CUdevice`` of the current context."""
    return check(require_driver().cuCtxGetDevice(), "cuCtxGetDevice")


def device_get_attribute(attribute: Any, device: Any) -> Any:
    """``cuDeviceGetAttribute``: one ``CUdevice_attribute`` of ``device``."""
    return check(require_driver().cuDeviceGetAttribute(attribute, device), "cuDeviceGetAttribute")


# ------------------------------------------------------------------------------ kernels


def func_get_attribute(attribute: Any, function: Any) -> Any:
    """``cuFuncGetAttribute``: one ``CUfunction_attribute`` of ``function``."""
    return check(require_driver().cuFuncGetAttribute(attribute, function), "cuFuncGetAttribute")


def func_set_attribute_result(function: Any, attribute: Any, value: int) -> Any:
    """``cuFuncSetAttribute``, unchecked.

    Returns
    -------
    tuple
        ``(CUresult,)``.
    """
    return require_driver().cuFuncSetAttribute(function, attribute, value)


def kernel_get_attribute(attribute: Any, kernel: Any, device: Any) -> Any:
    """``cuKernelGetAttribute``: one ``CUfunction_attribute`` of a library ``kernel`` on ``device``."""
    return check(require_driver().cuKernelGetAttribute(attribute, kernel, device), "cuKernelGetAttribute")


def kernel_set_attribute_result(attribute: Any, value: int, kernel: Any, device: Any) -> Any:
    """``cuKernelSetAttribute``, unchecked.

    Returns
    -------
    tuple
        ``(CUresult,)``.
    """
    return require_driver().cuKernelSetAttribute(attribute, value, kernel, device)


def kernel_get_function(kernel: Any) -> Any:
    """``cuKernelGetFunction``: the ``CUfunction`` of a library ``kernel`` in the current context."""
    return check(require_driver().cuKernelGetFunction(kernel), "cuKernelGetFunction")


def launch_kernel_ex_result(config: Any, function: Any, kernel_params: Any, extra: Any) -> Any:
    """``cuLaunchKernelEx``, unchecked.

    Returns
    -------
    tuple
        ``(CUresult,)``.
    """
    return require_driver().cuLaunchKernelEx(config, function, kernel_params, extra)


def launch_host_func(stream: Any, fn: Any, user_data: Any, *, node: Any = None) -> None:
    """``cuLaunchHostFunc``: queue the host function ``fn(user_data)`` on ``stream``."""
    check(require_driver().cuLaunchHostFunc(stream, fn, user_data), "cuLaunchHostFunc", node)


# ------------------------------------------------------------------------------ events


def event_create(flags: Any) -> Any:
    """``cuEventCreate``: a new ``CUevent``."""
    return check(require_driver().cuEventCreate(flags), "cuEventCreate")


def event_destroy_quietly(event: Any) -> None:
    """``cuEventDestroy``, its result not read."""
    require_driver().cuEventDestroy(event)


def event_record(event: Any, stream: Any, *, node: Any = None) -> None:
    """``cuEventRecord``: record ``event`` on ``stream``."""
    check(require_driver().cuEventRecord(event, stream), "cuEventRecord", node)


def event_synchronize(event: Any) -> None:
    """``cuEventSynchronize``: wait until ``event`` has completed."""
    check(require_driver().cuEventSynchronize(event), "cuEventSynchronize")


def event_elapsed_time(start: Any, end: Any) -> Any:
    """``cuEventElapsedTime``: the milliseconds between two recorded events."""
    return check(require_driver().cuEventElapsedTime(start, end), "cuEventElapsedTime")


# ------------------------------------------------------------------------------ streams


def stream_create(flags: Any) -> Any:
    """``cuStreamCreate``: a new ``CUstream``."""
    return check(require_driver().cuStreamCreate(flags), "cuStreamCreate")


def stream_destroy_quietly(stream: Any) -> None:
    """``cuStreamDestroy``, its result not read."""
    require_driver().cuStreamDestroy(stream)


def stream_synchronize(stream: Any) -> None:
    """``cuStreamSynchronize``: wait until the work queued on ``stream`` has completed."""
    check(require_driver().cuStreamSynchronize(stream), "cuStreamSynchronize")


def stream_wait_event(stream: Any, event: Any, flags: int, *, node: Any = None) -> None:
    """``cuStreamWaitEvent``: make the work queued next on ``stream`` wait for ``event``."""
    check(require_driver().cuStreamWaitEvent(stream, event, flags), "cuStreamWaitEvent", node)


def stream_is_capturing(stream: Any) -> Any:
    """``cuStreamIsCapturing``: the ``CUstreamCaptureStatus`` of ``stream``."""
    return check(require_driver().cuStreamIsCapturing(stream), "cuStreamIsCapturing")


def stream_is_capturing_result(stream: Any) -> Any:
    """``cuStreamIsCapturing``, unchecked.

    Returns
    -------
    tuple
        ``(CUresult, CUstreamCaptureStatus)``.
    """
    return require_driver().cuStreamIsCapturing(stream)


def stream_begin_capture(stream: Any, mode: Any) -> None:
    """``cuStreamBeginCapture``: begin capturing on ``stream`` in ``mode`` (a ``CUstreamCaptureMode``)."""
    check(require_driver().cuStreamBeginCapture(stream, mode), "cuStreamBeginCapture")


def stream_end_capture_result(stream: Any) -> Any:
    """``cuStreamEndCapture``, unchecked.

    Returns
    -------
    tuple
        ``(CUresult, CUgraph)``.
    """
    return require_driver().cuStreamEndCapture(stream)


def stream_write_value32(stream: Any, address: int, value: int, flags: int, *, node: Any = None) -> None:
    """``cuStreamWriteValue32``: write a 32-bit word on ``stream``."""
    check(require_driver().cuStreamWriteValue32(stream, address, value, flags), "cuStreamWriteValue32", node)


def stream_write_value64(stream: Any, address: int, value: int, flags: int, *, node: Any = None) -> None:
    """``cuStreamWriteValue64``: write a 64-bit word on ``stream``."""
    check(require_driver().cuStreamWriteValue64(stream, address, value, flags), "cuStreamWriteValue64", node)


def stream_wait_value32(stream: Any, address: int, value: int, flags: int, *, node: Any = None) -> None:
    """``cuStreamWaitValue32``: wait on ``stream`` for a 32-bit word."""
    check(require_driver().cuStreamWaitValue32(stream, address, value, flags), "cuStreamWaitValue32", node)


def stream_wait_value64(stream: Any, address: int, value: int, flags: int, *, node: Any = None) -> None:
    """``cuStreamWaitValue64``: wait on ``stream`` for a 64-bit word."""
    check(require_driver().cuStreamWaitValue64(stream, address, value, flags), "cuStreamWaitValue64", node)


# ------------------------------------------------------------------------------ memory


def mem_alloc(nbytes: int) -> Any:
    """``cuMemAlloc``: ``nbytes`` of device memory (its ``CUdeviceptr``)."""
    return check(require_driver().cuMemAlloc(nbytes), "cuMemAlloc")


def mem_free_quietly(address: Any) -> None:
    """``cuMemFree``, its result not read."""
    require_driver().cuMemFree(address)


def mem_alloc_async(nbytes: int, stream: Any, *, node: Any = None) -> Any:
    """``cuMemAllocAsync``: ``nbytes`` from the device's current pool, in the order of ``stream``."""
    return check(require_driver().cuMemAllocAsync(nbytes, stream), "cuMemAllocAsync", node)


def mem_alloc_from_pool_async(nbytes: int, pool: Any, stream: Any, *, node: Any = None) -> Any:
    """``cuMemAllocFromPoolAsync``: ``nbytes`` from ``pool``, in the order of ``stream``."""
    return check(require_driver().cuMemAllocFromPoolAsync(nbytes, pool, stream), "cuMemAllocFromPoolAsync", node)


def mem_free_async(address: Any, stream: Any, *, node: Any = None) -> None:
    """``cuMemFreeAsync``: free ``address`` in the order of ``stream``."""
    check(require_driver().cuMemFreeAsync(address, stream), "cuMemFreeAsync", node)


def mem_free_async_quietly(address: Any, stream: Any) -> None:
    """``cuMemFreeAsync``, its result not read."""
    require_driver().cuMemFreeAsync(address, stream)


def memcpy_async(dst: Any, src: Any, nbytes: int, stream: Any, *, node: Any = None) -> None:
    """``cuMemcpyAsync``: copy ``nbytes`` on ``stream``."""
    check(require_driver().cuMemcpyAsync(dst, src, nbytes, stream), "cuMemcpyAsync", node)


def memcpy_3d_async(copy: Any, stream: Any, *, node: Any = None) -> None:
    """``cuMemcpy3DAsync``: the copy ``copy`` (a ``CUDA_MEMCPY3D``) on ``stream``."""
    check(require_driver().cuMemcpy3DAsync(copy, stream), "cuMemcpy3DAsync", node)


def memcpy_dtod(dst: Any, src: Any, nbytes: int) -> None:
    """``cuMemcpyDtoD``: copy ``nbytes`` from device to device."""
    check(require_driver().cuMemcpyDtoD(dst, src, nbytes), "cuMemcpyDtoD")


def memset_d8_async(dst: Any, value: int, count: int, stream: Any, *, node: Any = None) -> None:
    """``cuMemsetD8Async``: set ``count`` bytes on ``stream``."""
    check(require_driver().cuMemsetD8Async(dst, value, count, stream), "cuMemsetD8Async", node)


def memset_d16_async(dst: Any, value: int, count: int, stream: Any, *, node: Any = None) -> None:
    """``cuMemsetD16Async``: set ``count`` 16-bit words on ``stream``."""
    check(require_driver().cuMemsetD16Async(dst, value, count, stream), "cuMemsetD16Async", node)


def memset_d32_async(dst: Any, value: int, count: int, stream: Any, *, node: Any = None) -> None:
    """``cuMemsetD32Async``: set ``count`` 32-bit words on ``stream``."""
    check(require_driver().cuMemsetD32Async(dst, value, count, stream), "cuMemsetD32Async", node)


def memset_d2d8_async(
    dst: Any, pitch: int, value: int, width: int, height: int, stream: Any, *, node: Any = None
) -> None:
    """``cuMemsetD2D8Async``: set ``height`` rows of ``width`` bytes, ``pitch`` bytes apart, on ``stream``."""
    check(require_driver().cuMemsetD2D8Async(dst, pitch, value, width, height, stream), "cuMemsetD2D8Async", node)


def memset_d2d16_async(
    dst: Any, pitch: int, value: int, width: int, height: int, stream: Any, *, node: Any = None
) -> None:
    """``cuMemsetD2D16Async``: set ``height`` rows of ``width`` 16-bit words on ``stream``."""
    check(require_driver().cuMemsetD2D16Async(dst, pitch, value, width, height, stream), "cuMemsetD2D16Async", node)


def memset_d2d32_async(
    dst: Any, pitch: int, value: int, width: int, height: int, stream: Any, *, node: Any = None
) -> None:
    """``cuMemsetD2D32Async``: set ``height`` rows of ``width`` 32-bit words on ``stream``."""
    check(require_driver().cuMemsetD2D32Async(dst, pitch, value, width, height, stream), "cuMemsetD2D32Async", node)


# ------------------------------------------------------------------------------ graphs


def graph_destroy_quietly(graph: Any) -> None:
    """``cuGraphDestroy``, its result not read."""
    require_driver().cuGraphDestroy(graph)


def graph_clone(graph: Any) -> Any:
    """``cuGraphClone``: a copy of ``graph``."""
    return check(require_driver().cuGraphClone(graph), "cuGraphClone")


def graph_nodes(graph: Any) -> list[Any]:
    """``cuGraphGetNodes``, asked for the number of nodes and then for them: every node of ``graph``.

    Returns
    -------
    list of CUgraphNode
    """
    _, count = check(require_driver().cuGraphGetNodes(graph, 0), "cuGraphGetNodes")
    if not count:
        return []
    nodes, count = check(require_driver().cuGraphGetNodes(graph, count), "cuGraphGetNodes")
    return list(nodes[:count])


def graph_node_get_type(driver_node: Any) -> Any:
    """``cuGraphNodeGetType``: the ``CUgraphNodeType`` of ``driver_node``."""
    return check(require_driver().cuGraphNodeGetType(driver_node), "cuGraphNodeGetType")


def graph_node_get_dependencies_result(driver_node: Any, count: int) -> Any:
    """``cuGraphNodeGetDependencies`` (room for ``count``), unchecked.

    Returns
    -------
    tuple
        ``(CUresult, dependencies, edge data, number of dependencies)``.
    """
    return require_driver().cuGraphNodeGetDependencies(driver_node, count)


def graph_node_get_params_if_exported(driver_node: Any) -> Any:
    """``cuGraphNodeGetParams``: the ``CUgraphNodeParams`` of ``driver_node``, or ``None`` where
    ``cuda.bindings`` or the driver library lacks the call (a failing result still raises)."""
    get_params = getattr(require_driver(), "cuGraphNodeGetParams", None)
    try:
        return check(get_params(driver_node), "cuGraphNodeGetParams") if get_params is not None else None
    except RuntimeError as exc:  # cuda.bindings: the driver library does not export the call
        if "not found" not in str(exc):
            raise
        return None


def graph_kernel_node_get_params(driver_node: Any) -> Any:
    """``cuGraphKernelNodeGetParams``: the ``CUDA_KERNEL_NODE_PARAMS`` of ``driver_node``."""
    return check(require_driver().cuGraphKernelNodeGetParams(driver_node), "cuGraphKernelNodeGetParams")


def graph_kernel_node_set_attribute_result(driver_node: Any, attribute: Any, value: Any) -> Any:
    """``cuGraphKernelNodeSetAttribute``, unchecked.

    Returns
    -------
    tuple
        ``(CUresult,)``.
    """
    return require_driver().cuGraphKernelNodeSetAttribute(driver_node, attribute, value)


def graph_memcpy_node_get_params(driver_node: Any) -> Any:
    """``cuGraphMemcpyNodeGetParams``: the ``CUDA_MEMCPY3D`` of ``driver_node``."""
    return check(require_driver().cuGraphMemcpyNodeGetParams(driver_node), "cuGraphMemcpyNodeGetParams")


def graph_memset_node_get_params(driver_node: Any) -> Any:
    """``cuGraphMemsetNodeGetParams``: the ``CUDA_MEMSET_NODE_PARAMS`` of ``driver_node``."""
    return check(require_driver().cuGraphMemsetNodeGetParams(driver_node), "cuGraphMemsetNodeGetParams")


def graph_host_node_get_params(driver_node: Any) -> Any:
    """``cuGraphHostNodeGetParams``: the ``CUDA_HOST_NODE_PARAMS`` of ``driver_node``."""
    return check(require_driver().cuGraphHostNodeGetParams(driver_node), "cuGraphHostNodeGetParams")


def graph_mem_alloc_node_get_params(driver_node: Any) -> Any:
    """``cuGraphMemAllocNodeGetParams``: the ``CUDA_MEM_ALLOC_NODE_PARAMS`` of ``driver_node``."""
    return check(require_driver().cuGraphMemAllocNodeGetParams(driver_node), "cuGraphMemAllocNodeGetParams")


def graph_child_graph_node_get_graph(driver_node: Any) -> Any:
    """``cuGraphChildGraphNodeGetGraph``: the body (a ``CUgraph``) of the child graph node ``driver_node``."""
    return check(require_driver().cuGraphChildGraphNodeGetGraph(driver_node), "cuGraphChildGraphNodeGetGraph")


def graph_event_record_node_get_event(driver_node: Any) -> Any:
    """``cuGraphEventRecordNodeGetEvent``: the ``CUevent`` the node ``driver_node`` records."""
    return check(require_driver().cuGraphEventRecordNodeGetEvent(driver_node), "cuGraphEventRecordNodeGetEvent")


def graph_event_wait_node_get_event(driver_node: Any) -> Any:
    """``cuGraphEventWaitNodeGetEvent``: the ``CUevent`` the node ``driver_node`` waits for."""
    return check(require_driver().cuGraphEventWaitNodeGetEvent(driver_node), "cuGraphEventWaitNodeGetEvent")


def graph_conditional_handle_create(graph: Any, ctx: Any, default: int, flags: int, *, node: Any = None) -> Any:
    """``cuGraphConditionalHandleCreate``: a new ``CUgraphConditionalHandle`` of ``graph``."""
    return check(
        require_driver().cuGraphConditionalHandleCreate(graph, ctx, default, flags),
        "cuGraphConditionalHandleCreate",
        node,
    )


def graph_debug_dot_print(graph: Any, path: bytes, flags: int) -> None:
    """``cuGraphDebugDotPrint``: write the driver's DOT picture of ``graph`` to ``path``."""
    check(require_driver().cuGraphDebugDotPrint(graph, path, flags), "cuGraphDebugDotPrint")


# ------------------------------------------------------------------------------ executable graphs


def graph_instantiate_with_params_result(graph: Any, params: Any) -> Any:
    """``cuGraphInstantiateWithParams``, unchecked (``params`` then holds the node at fault).

    Returns
    -------
    tuple
        ``(CUresult, CUgraphExec)``.
    """
    return require_driver().cuGraphInstantiateWithParams(graph, params)


def graph_exec_destroy_quietly(graph_exec: Any) -> None:
    """``cuGraphExecDestroy``, its result not read."""
    require_driver().cuGraphExecDestroy(graph_exec)


def graph_upload(graph_exec: Any, stream: Any) -> None:
    """``cuGraphUpload``: upload ``graph_exec`` to the device on ``stream``."""
    check(require_driver().cuGraphUpload(graph_exec, stream), "cuGraphUpload")


def graph_launch_entry() -> Any:
    """``cuGraphLaunch`` of ``cuda.bindings`` itself, ``(graph_exec, stream) -> (CUresult,)``."""
    return require_driver().cuGraphLaunch


def graph_exec_update_result(graph_exec: Any, graph: Any) -> Any:
    """``cuGraphExecUpdate``, unchecked.

    Returns
    -------
    tuple
        ``(CUresult, CUgraphExecUpdateResultInfo)``.
    """
    return require_driver().cuGraphExecUpdate(graph_exec, graph)


def graph_exec_node_set_params_result(graph_exec: Any, driver_node: Any, params: Any) -> Any:
    """``cuGraphExecNodeSetParams``, unchecked.

    Returns
    -------
    tuple
        ``(CUresult,)``.
    """
    return require_driver().cuGraphExecNodeSetParams(graph_exec, driver_node, params)


def graph_exec_node_set_params_entry() -> Any:
    """``cuGraphExecNodeSetParams`` of ``cuda.bindings`` itself, ``(graph_exec, driver_node, params) ->
    (CUresult,)``."""
    return require_driver().cuGraphExecNodeSetParams


def graph_exec_kernel_node_set_params_entry() -> Any:
    """``cuGraphExecKernelNodeSetParams`` of ``cuda.bindings`` itself, ``(graph_exec, driver_node, params) ->
    (CUresult,)``."""
    return require_driver().cuGraphExecKernelNodeSetParams


def graph_exec_child_graph_node_set_params(graph_exec: Any, driver_node: Any, body: Any, *, node: Any = None) -> None:
    """``cuGraphExecChildGraphNodeSetParams``: give the child graph node ``driver_node`` the body ``body``."""
    check(
        require_driver().cuGraphExecChildGraphNodeSetParams(graph_exec, driver_node, body),
        "cuGraphExecChildGraphNodeSetParams",
        node,
    )


def graph_node_set_enabled(graph_exec: Any, driver_node: Any, enabled: int, *, node: Any = None) -> None:
    """``cuGraphNodeSetEnabled``: enable (1) or disable (0) ``driver_node`` in ``graph_exec``."""
    check(require_driver().cuGraphNodeSetEnabled(graph_exec, driver_node, enabled), "cuGraphNodeSetEnabled", node)


def graph_node_get_enabled(graph_exec: Any, driver_node: Any, *, node: Any = None) -> Any:
    """``cuGraphNodeGetEnabled``: whether ``driver_node`` is enabled in ``graph_exec`` (1 or 0)."""
    return check(require_driver().cuGraphNodeGetEnabled(graph_exec, driver_node), "cuGraphNodeGetEnabled", node)
