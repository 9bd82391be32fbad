"""Finding the driver graph (``CUgraph``) inside the graph objects of cuda.core, PyTorch and CuPy."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..driver.calls import require_driver
from ..errors import OperandError

__all__ = ["cuda_graph_handle"]

_ACCEPTED = (
    "a CUgraph, a positive int handle, a cuda.core GraphDefinition or completed GraphBuilder, "
    "a torch.cuda.CUDAGraph captured with keep_graph=True or a CuPy graph"
)


def _refused(obj: Any, why: str = "") -> OperandError:
    return OperandError(f"cannot find a CUgraph in {type(obj).__name__}{why}: expected {_ACCEPTED}")


def _address(value: Any, obj: Any, where: str) -> int:
    """``value`` (an int some object gave as its graph handle) as a CUgraph address, or the refusal naming
    ``obj``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refused(obj, f" ({where} is a {type(value).__name__}, not an int)")
    if not 0 < value < 1 << 64:
        raise _refused(obj, f" ({where} is {value:#x}, not a handle)")
    return value


def _graph_source(obj: Any) -> tuple[str, Any]:
    """Where the graph of ``obj`` is, found with no driver call: ``("cugraph", obj)`` (a ``CUgraph`` by its
    type's name, confirmed against the driver's), ``("handle", h)`` (a cuda.core definition's ``CUgraph``) or
    ``("address", a)``; else the refusal naming the type of ``obj``."""
    if obj is None or isinstance(obj, (bool, np.bool_)):
        raise _refused(obj)
    if type(obj).__name__ == "CUgraph":
        return "cugraph", obj
    if isinstance(obj, (int, np.integer)):
        return "address", _address(int(obj), obj, "the int")
    raw = getattr(obj, "raw_cuda_graph", None)  # torch.cuda.CUDAGraph(keep_graph=True)
    if callable(raw):
        return "address", _address(raw(), obj, "raw_cuda_graph()")
    gd = getattr(obj, "graph_definition", None)  # cuda.core GraphBuilder
    if gd is not None and not callable(gd):
        obj = gd
    handle = getattr(obj, "handle", None)  # cuda.core GraphDefinition
    if handle is not None and type(handle).__name__ == "CUgraph":
        return "handle", handle
    for attr in ("graph", "_graph"):  # CuPy
        h = getattr(obj, attr, None)
        if isinstance(h, int) and not isinstance(h, bool) and h:
            return "address", _address(h, obj, attr)
    raise _refused(obj)


def cuda_graph_handle(obj: Any) -> Any:
    """A ``CUgraph`` for a graph object of cuda.core, PyTorch, CuPy, or a raw handle.

    Accepted: a ``CUgraph``; a positive int address of one; a ``cuda.core``
    ``GraphDefinition`` or a completed ``GraphBuilder`` (its definition); a
    ``torch.cuda.CUDAGraph`` captured with ``keep_graph=True``
    (``raw_cuda_graph()``); a CuPy graph exposing its handle. The object is
    looked at before the driver is needed: anything else is refused by its
    type, with or without a driver.

    Raises
    ------
    OperandError
        For anything else (``None``, a bool, an int that is no address, an object holding no graph).
    """
    how, source = _graph_source(obj)
    drv = require_driver()
    if how == "cugraph" and not isinstance(source, drv.CUgraph):
        raise _refused(source, f" (a CUgraph of {type(source).__module__}, not of cuda.bindings)")
    if how == "address":
        return drv.CUgraph(source)
    return source
