"""``Graph.capture``: a capture region on a graph, or a whole function captured into a new graph.

GPU-free until called: the CUDA side lives in :mod:`cudagraph.materialize.capture_region`, reached
through :mod:`cudagraph.definition.seams`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from . import seams

if TYPE_CHECKING:
    from ..materialize.capture_region import CaptureRegion
    from .graph import Graph

__all__ = ["CaptureAccessor"]


class _BoundCapture:
    __slots__ = ("graph",)

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def __call__(self, after: Any = None, *, name: str | None = None, stream: Any = None) -> CaptureRegion:
        """A capture region: ``with g.capture(after=...) as s:`` records library calls on ``s`` into one node.

        Parameters
        ----------
        after : Node or sequence of Node, optional
            What the region's node depends on.
        name : str, optional
            A label for the node.
        stream : cuda.core Stream, object with ``__cuda_stream__``, CUstream or int, optional
            Capture on this stream rather than on one the region creates.
            Libraries that set up per-stream state on first use (PyTorch's
            cuBLAS workspace, for one) cannot do so under capture: run the
            call once on this stream before the region.

        Returns
        -------
        CaptureRegion
        """
        region: CaptureRegion = seams.capture_region(self.graph, after, name, stream)
        return region


def _capture_function(fn: Callable[[Any], Any], stream: Any = None, *, name: str = "captured") -> Graph:
    """Run ``fn(stream)`` under stream capture and return what it recorded as a definition.

    Parameters
    ----------
    fn : callable
        Receives a stream-like object (``__cuda_stream__``, ``.cupy()``, ``.torch()``).
    stream : cuda.core Stream or object with ``__cuda_stream__``, optional
        The stream to capture on (default: a new one).
    name : str
        The definition's name.

    Returns
    -------
    Graph
    """
    graph: Graph = seams.capture_function(fn, stream, name)
    return graph


class CaptureAccessor:
    """``g.capture(after=...)`` makes a capture region; ``Graph.capture(fn, stream)`` captures a function."""

    @overload
    def __get__(self, obj: None, cls: type) -> Callable[..., Graph]: ...

    @overload
    def __get__(self, obj: Graph, cls: type) -> _BoundCapture: ...

    def __get__(self, obj: Graph | None, cls: type) -> Any:
        if obj is None:
            return _capture_function
        return _BoundCapture(obj)
