"""Capture regions: library calls recorded by stream capture become one node of a definition."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..definition.nodes import ChildGraphNode, Node
from ..driver.api import (
    graph_destroy_quietly,
    graph_node_get_type,
    graph_nodes,
    stream_begin_capture,
    stream_end_capture_result,
    stream_synchronize,
)
from ..driver.calls import check, ensure_context, raise_error, require_driver
from ..driver.streams import core_stream, new_stream, stream_handle
from ..errors import OperandError

if TYPE_CHECKING:
    from ..definition.graph import Graph

__all__ = [
    "CaptureRegion",
    "CaptureStream",
    "RecordedGraph",
    "abandon_capture",
    "begin_capture",
    "capture_function",
    "end_capture_into",
]


class CaptureStream:
    """The stream a capture region records on.

    It has ``__cuda_stream__`` and ``handle``, and :func:`cudagraph.launch` and
    the other free functions take it as it is; :meth:`core`, :meth:`cupy` and
    :meth:`torch` return the same stream wrapped for those libraries
    (``launch(s.core(), ...)`` with cuda.core, ``with s.cupy(): ...``), valid
    while the capture lasts.

    Attributes
    ----------
    handle : CUstream
        The driver stream under capture.
    """

    __slots__ = ("_owner", "handle")

    def __init__(self, handle: Any, owner: Any) -> None:
        self.handle = handle
        self._owner = owner

    def __cuda_stream__(self) -> tuple[int, int]:
        """The stream protocol: ``(0, address)``."""
        return (0, int(self.handle))

    def __int__(self) -> int:
        return int(self.handle)

    def core(self) -> Any:
        """The stream as a ``cuda.core`` ``Stream`` (``Stream.from_handle``), for ``cuda.core.launch`` and
        cuda.core's other calls, which deprecate being handed other ``__cuda_stream__`` objects (cuda.core
        1.2)."""
        return core_stream(int(self.handle))

    def cupy(self) -> Any:
        """The stream as a CuPy stream (use it as a context manager).

        ``cupy.cuda.Stream.from_external`` (CuPy 14, through ``__cuda_stream__``), else a
        ``cupy.cuda.ExternalStream``, which CuPy 14 deprecates.
        """
        import cupy

        from_external = getattr(cupy.cuda.Stream, "from_external", None)
        if from_external is not None:
            return from_external(self)
        return cupy.cuda.ExternalStream(int(self.handle))

    def torch(self) -> Any:
        """The stream as a ``torch.cuda.ExternalStream`` (use with ``torch.cuda.stream(...)``)."""
        import torch

        return torch.cuda.ExternalStream(int(self.handle))

    def __repr__(self) -> str:
        return f"<CaptureStream {int(self.handle):#x}>"


def pause_collector() -> bool:
    """Stop the garbage collector for a capture; return whether it was running (for :func:`resume_collector`).

    A collection during capture may free device memory (a ``cuda.core`` Buffer
    in a reference cycle frees itself with ``cuMemFreeAsync`` on its own
    stream), which invalidates the capture. Memory freed by reference count
    is freed at a place the user chose, as it would be outside capture.
    """
    was = gc.isenabled()
    gc.disable()
    return was


def resume_collector(was_running: bool) -> None:
    """Restart the garbage collector if :func:`pause_collector` found it running."""
    if was_running:
        gc.enable()


def begin_capture(stream_handle: Any, mode: str = "thread_local") -> None:
    """Begin capturing on ``stream_handle`` in ``mode`` (``"thread_local"``, ``"global"`` or ``"relaxed"``)."""
    drv = require_driver()
    modes = drv.CUstreamCaptureMode
    m = {
        "thread_local": modes.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        "global": modes.CU_STREAM_CAPTURE_MODE_GLOBAL,
        "relaxed": modes.CU_STREAM_CAPTURE_MODE_RELAXED,
    }[mode]
    stream_begin_capture(stream_handle, m)


_INVALIDATED_HINT = (
    "{what}: a call recorded in it is not capturable (it allocated memory, synchronized, "
    "or created a library handle such as cuBLAS's); run that call once before capturing "
    "so its set-up happens outside capture"
)


def _end(stream_handle: Any, what: str) -> Any:
    drv = require_driver()
    err, graph = stream_end_capture_result(stream_handle)
    if err == drv.CUresult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
        raise_error(err, "cuStreamEndCapture", detail=_INVALIDATED_HINT.format(what=what))
    return check((err, graph), "cuStreamEndCapture")


def abandon_capture(stream_handle: Any) -> None:
    """End a capture that is being left by an exception, dropping what it recorded."""
    err, graph = stream_end_capture_result(stream_handle)
    if not err and graph is not None and int(graph):
        graph_destroy_quietly(graph)


def capture_function(fn: Callable[[Any], Any], stream: Any = None, name: str = "captured") -> Graph:
    """Run ``fn(stream)`` under stream capture and lift what it recorded into a definition.

    Parameters
    ----------
    fn : callable
        Called with a :class:`CaptureStream`; everything it enqueues on that
        stream (kernels, copies, library calls) is recorded, not run.
    stream : cuda.core Stream or object with ``__cuda_stream__``, optional
        The stream to capture on (default: a new one).
    name : str
        The definition's name.

    Returns
    -------
    Graph
    """
    from .lift import lift

    require_driver()
    ensure_context()
    owner = None
    if stream is None:
        owner = new_stream()
        h = owner.handle
    else:
        h = stream_handle(stream)
    collecting = pause_collector()
    try:
        begin_capture(h)
        try:
            fn(CaptureStream(h, owner))
        except BaseException:
            abandon_capture(h)
            raise
        graph = _end(h, f"capture of {name!r}")
    finally:
        resume_collector(collecting)
    try:
        return lift(graph, name=name)
    finally:
        graph_destroy_quietly(graph)


class CaptureRegion:
    """``with g.capture(after=...) as s:`` — calls on ``s`` become one node of ``g``.

    On exit the recorded graph is lifted into a :class:`Graph` (its nodes are
    typed, see :func:`cudagraph.lift`) and added to ``g`` as a child node,
    available as :attr:`node`; other nodes can depend on it. :meth:`again`
    records the region anew into the same node.

    Attributes
    ----------
    node : ChildGraphNode or None
        The node, once the region has been recorded.
    """

    __slots__ = ("_after", "_collecting", "_graph", "_name", "_owner", "_stream", "node")

    def __init__(self, graph: Graph, after: Any, name: str | None, stream: Any = None) -> None:
        self._graph = graph
        self._after = graph._deps(after, f"capture region {name or 'capture'!r}")
        self._name = name or "capture"
        self.node: ChildGraphNode | None = None
        self._owner: Any = stream
        self._stream: CaptureStream | None = None
        self._collecting = False

    @property
    def body(self) -> Graph | None:
        """The lifted contents of the region (``None`` before it is recorded)."""
        return self.node.body if self.node is not None else None

    def __enter__(self) -> CaptureStream:
        ensure_context()
        if self._owner is None:
            self._owner = new_stream()
        h = stream_handle(self._owner)
        if not int(h):
            raise OperandError(
                f"capture region {self._name!r}: stream: the legacy default stream cannot be captured; "
                "pass a stream you created"
            )
        stream_synchronize(h)
        collecting = pause_collector()
        try:
            begin_capture(h)
        except BaseException:
            resume_collector(collecting)
            raise
        self._collecting = collecting
        self._stream = CaptureStream(h, self._owner)
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        from .lift import lift

        assert self._stream is not None
        try:
            if exc_type is not None:
                abandon_capture(self._stream.handle)
                return
            graph = _end(self._stream.handle, f"capture region {self._name!r}")
        finally:
            resume_collector(self._collecting)
        try:
            body = lift(graph, name=self._name)
        finally:
            graph_destroy_quietly(graph)
        if self.node is None:
            self.node = self._graph.child(body, after=self._after or None, name=self._name)
        else:
            self.node.update(body=body)

    def again(self) -> CaptureRegion:
        """Record the region anew (``with region.again() as s: ...``); the node keeps its edges."""
        if self.node is None:
            raise OperandError(f"capture region {self._name!r} has not been recorded yet")
        return self

    def depends(self) -> list[Node]:
        """The nodes the region depends on."""
        return list(self._after)

    def __repr__(self) -> str:
        return f"<CaptureRegion {self._name!r} of Graph {self._graph.name!r}, node={self.node!r}>"


# ------------------------------------------------------------------------------------ recordings kept as they are
class RecordedGraph:
    """The owner of a driver graph recorded by stream capture, until a build takes it (see ``CapturedGraphNode``).

    Attributes
    ----------
    handle : CUgraph
        The recorded graph.
    node_count : int
        Its number of nodes.
    taken : bool
        Whether a build moved it into its driver graph (which then destroys it); if not, it is destroyed with
        this object.
    """

    __slots__ = ("handle", "node_count", "taken")

    def __init__(self, handle: Any, node_count: int) -> None:
        self.handle = handle
        self.node_count = node_count
        self.taken = False

    def __del__(self) -> None:
        handle, self.handle = self.handle, None
        if not self.taken and handle is not None:
            try:
                graph_destroy_quietly(handle)
            except Exception:  # pragma: no cover - the interpreter is shutting down
                pass


def end_capture_into(stream_handle: Any, path: Any, name: str) -> Node | None:
    """End the capture on ``stream_handle`` and add what it recorded to ``path`` (a :class:`~cudagraph.Path`) as one
    node after its last op; returns the node (``None`` when nothing was recorded).

    A recording with graph memory (allocations or frees) becomes a ``CapturedGraphNode`` that keeps the
    recorded graph as it is (the program holds its allocations' addresses); any other is lifted into a
    definition and added as a child graph node, as a capture region's is.
    """
    from ..definition.kinds.opaque import add_captured
    from .lift import lift

    drv = require_driver()
    graph = _end(stream_handle, name)
    try:
        types = [int(graph_node_get_type(n)) for n in graph_nodes(graph)]
    except BaseException:
        graph_destroy_quietly(graph)
        raise
    if not types:
        graph_destroy_quietly(graph)
        return None
    t = drv.CUgraphNodeType
    memory = {int(t.CU_GRAPH_NODE_TYPE_MEM_ALLOC), int(t.CU_GRAPH_NODE_TYPE_MEM_FREE)}
    if not memory.intersection(types):
        try:
            body = lift(graph, name=name)
        finally:
            graph_destroy_quietly(graph)
        node: Node = path.child(body, name=name)
        return node
    return add_captured(path, RecordedGraph(graph, len(types)), name)
