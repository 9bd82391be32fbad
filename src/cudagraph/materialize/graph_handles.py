"""Finding the driver graph (``CUgraph``) inside the graph objects of cuda.core, PyTorch and CuPy."""

from __future__ import annotations

from typing import Any

from ..driver.calls import require_driver
from ..errors import OperandError

__all__ = ["cuda_graph_handle"]


def cuda_graph_handle(obj: Any) -> Any:
    """A ``CUgraph`` for a graph object of cuda.core, PyTorch, CuPy, or a raw handle.

    Accepted: a ``CUgraph``; an int address of one; a ``cuda.core``
    ``GraphDefinition`` or a completed ``GraphBuilder`` (its definition); a
    ``torch.cuda.CUDAGraph`` captured with ``keep_graph=True``
    (``raw_cuda_graph()``); a CuPy graph exposing its handle.

    Raises
    ------
    OperandError
        For anything else.
    """
    drv = require_driver()
    if isinstance(obj, drv.CUgraph):
        return obj
    if isinstance(obj, int) and not isinstance(obj, bool):
        return drv.CUgraph(obj)
    raw = getattr(obj, "raw_cuda_graph", None)  # torch.cuda.CUDAGraph(keep_graph=True)
    if callable(raw):
        return drv.CUgraph(int(raw()))
    gd = getattr(obj, "graph_definition", None)  # cuda.core GraphBuilder
    if gd is not None and not callable(gd):
        obj = gd
    handle = getattr(obj, "handle", None)  # cuda.core GraphDefinition
    if handle is not None and type(handle).__name__ == "CUgraph":
        return handle
    for attr in ("graph", "_graph"):  # CuPy
        h = getattr(obj, attr, None)
        if isinstance(h, int) and h:
            return drv.CUgraph(h)
    raise OperandError(f"cannot find a CUgraph in {type(obj).__name__}")
