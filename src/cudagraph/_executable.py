"""Instantiated graphs: launch, upload, host-callback errors, lifetime."""

from __future__ import annotations

import weakref
from typing import Any

from ._bindings import resolve_bindings
from ._driver._calls import check, ensure_context, error_name, raise_error, require_driver
from ._driver._host_callbacks import unregister
from ._driver._streams import stream_handle
from ._explicit import LoweredGraph, lower
from ._graph import Graph
from .errors import DriverError, ExecutableClosedError, HostCallbackError

__all__ = ["Executable", "instantiate"]

_STICKY = {
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_ASSERT",
}


_UNSET = object()


def _destroy(exec_handle: Any, lowered: LoweredGraph, streams: dict[int, Any]) -> None:
    try:
        drv = require_driver()
        drv.cuGraphExecDestroy(exec_handle)  # freed by the driver once no launch is in flight
        lowered.destroy(in_flight_on=streams.values())
    except Exception:
        unregister(lowered.host_keys)


def instantiate(
    graph: Graph,
    *,
    upload_stream: Any,
    auto_free_on_launch: bool,
    device_launch: bool,
    use_node_priority: bool,
    params: dict[str, Any],
) -> Executable:
    """Validate, lower explicitly and instantiate ``graph``; see :meth:`Graph.instantiate`."""
    graph._validate_structure()
    bindings = resolve_bindings(graph, params)
    drv = require_driver()
    ensure_context()
    flags = 0
    F = drv.CUgraphInstantiate_flags
    if auto_free_on_launch:
        flags |= int(F.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
    if device_launch:
        flags |= int(F.CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
    if use_node_priority:
        flags |= int(F.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)
    ip = drv.CUDA_GRAPH_INSTANTIATE_PARAMS()
    if upload_stream is not None:
        flags |= int(F.CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
        ip.hUploadStream = stream_handle(upload_stream)
    ip.flags = flags
    sink: list[Any] = []
    lowered = lower(graph, bindings, sink)
    try:
        err, exec_handle = drv.cuGraphInstantiateWithParams(lowered.handle, ip)
        if err:
            node = None
            detail = ""
            try:
                detail = f"result {ip.result_out.name}"
                node = lowered.node_for(ip.hErrNode_out)
            except Exception:
                pass
            raise_error(err, "cuGraphInstantiateWithParams", node, detail)
    except BaseException:
        lowered.destroy()
        raise
    return Executable(graph, lowered, exec_handle, sink, bindings)


class Executable:
    """An instantiated graph, ready to launch.

    Made by :meth:`Graph.instantiate`. It keeps the definition's nodes (and so
    every operand: buffers, kernels, callables, events) alive until it is
    closed. Use it as a context manager, or call :meth:`close`; it is also
    destroyed when garbage-collected.

    Attributes
    ----------
    graph : Graph
        The definition it was made from.
    """

    __slots__ = (
        "graph",
        "_lowered",
        "_exec",
        "_sink",
        "_bindings",
        "_last_stream",
        "_last_handle",
        "_finalizer",
        "_streams",
        "__weakref__",
    )

    def __init__(
        self, graph: Graph, lowered: LoweredGraph, exec_handle: Any, sink: list[Any], bindings: dict[str, Any]
    ) -> None:
        self.graph = graph
        self._lowered = lowered
        self._exec = exec_handle
        self._sink = sink
        self._bindings = bindings
        self._last_stream: Any = _UNSET
        self._last_handle: Any = None
        # Streams launched on (by address): host callbacks stay registered
        # until the work queued there has finished, even after close().
        self._streams: dict[int, Any] = {}
        self._finalizer = weakref.finalize(self, _destroy, exec_handle, lowered, self._streams)

    # ------------------------------------------------------------- handles
    @property
    def handle(self) -> Any:
        """The ``CUgraphExec``."""
        self._require_open()
        return self._exec

    @property
    def graph_handle(self) -> Any:
        """The driver ``CUgraph`` it was instantiated from."""
        self._require_open()
        return self._lowered.handle

    def driver_node(self, node: Any) -> Any:
        """The ``CUgraphNode`` built for a top-level definition node.

        Raises
        ------
        KeyError
            The node is not a top-level node of this executable's definition.
        """
        self._require_open()
        if getattr(node, "graph", None) is not self.graph or node.index >= len(self._lowered.driver_nodes):
            raise KeyError(f"{getattr(node, 'label', node)!r} is not a node of Graph {self.graph.name!r}")
        return self._lowered.driver_nodes[node.index]

    @property
    def bindings(self) -> dict[str, Any]:
        """The parameter values it was instantiated with."""
        return dict(self._bindings)

    @property
    def closed(self) -> bool:
        """``True`` after :meth:`close`."""
        return self._exec is None

    def _require_open(self) -> None:
        if self._exec is None:
            raise ExecutableClosedError(f"the executable of Graph {self.graph.name!r} is closed")

    # -------------------------------------------------------------- running
    def launch(self, stream: Any = None) -> None:
        """Launch on ``stream`` (a ``cuda.core`` Stream, ``__cuda_stream__`` object, CUstream, or None).

        Raises
        ------
        HostCallbackError
            A host callback raised during an earlier launch (the graph is not
            launched; the next call launches normally).
        ExecutableClosedError
            After :meth:`close`.
        DriverError
            The launch failed; a sticky fault says that the context is unusable.
        """
        if self._sink:
            self.check()
        exec_handle = self._exec
        if exec_handle is None:
            self._require_open()
        if stream is not self._last_stream:
            self._last_handle = stream_handle(stream)
            self._last_stream = stream
            if self._lowered.host_keys:
                self._streams[int(self._last_handle)] = self._last_handle
        (err,) = _LAUNCH(exec_handle, self._last_handle)
        if err:
            self._launch_failed(err)

    def _launch_failed(self, err: Any) -> None:
        name = error_name(err)
        detail = ""
        if name in _STICKY:
            detail = (
                f"a kernel of Graph {self.graph.name!r} (or earlier work) faulted; the CUDA context is now "
                "unusable and the process must be restarted"
            )
        raise_error(err, "cuGraphLaunch", None, detail)

    def upload(self, stream: Any = None) -> None:
        """Upload the executable to the device on ``stream`` ahead of the first launch."""
        self._require_open()
        drv = require_driver()
        check(drv.cuGraphUpload(self._exec, stream_handle(stream)), "cuGraphUpload")

    def check(self) -> None:
        """Raise the first exception a host callback raised since the last check.

        Synchronize the stream first to be sure earlier launches have finished.

        Raises
        ------
        HostCallbackError
            With the callback's exception as ``__cause__``.
        """
        if self._sink:
            node, exc = self._sink.pop(0)
            more = len(self._sink)
            self._sink.clear()
            suffix = f" ({more} more callback error(s) dropped)" if more else ""
            raise HostCallbackError(
                f"host callback {node.label} of Graph {self.graph.name!r} raised {type(exc).__name__}: {exc}{suffix}",
                node,
            ) from exc

    def close(self) -> None:
        """Destroy the executable and its driver graph; idempotent."""
        if self._exec is not None:
            self._exec = None
            self._finalizer()

    def __enter__(self) -> Executable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._exec is None else "open"
        return f"<Executable of Graph {self.graph.name!r}: {len(self._lowered.nodes)} nodes, {state}>"


try:
    _LAUNCH = require_driver().cuGraphLaunch
except DriverError:  # pragma: no cover - no cuda-bindings: instantiate() raises first
    _LAUNCH = None
