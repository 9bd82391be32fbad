"""Accepting streams from every library: cuda.core, ``__cuda_stream__``, raw handles."""

from __future__ import annotations

from typing import Any

from ..errors import OperandError
from .calls import require_driver

__all__ = ["stream_handle"]


def stream_handle(stream: Any) -> Any:
    """Return a ``CUstream`` for ``stream``.

    Parameters
    ----------
    stream : cuda.core.Stream, object with ``__cuda_stream__``, CUstream, torch or cupy stream, int or None
        ``None`` and ``0`` mean the legacy default stream.

    Raises
    ------
    OperandError
        If ``stream`` is not a stream.
    """
    drv = require_driver()
    if stream is None:
        return drv.CUstream(0)
    if isinstance(stream, drv.CUstream):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        return drv.CUstream(int(value[1]))
    handle = getattr(stream, "handle", None)
    if handle is not None and isinstance(handle, drv.CUstream):
        return handle
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        raw = getattr(stream, attr, None)
        if isinstance(raw, int) and not isinstance(raw, bool):
            return drv.CUstream(raw)
    if isinstance(stream, int) and not isinstance(stream, bool) and stream >= 0:
        return drv.CUstream(stream)
    raise OperandError(
        f"stream: expected a cuda.core Stream, an object with __cuda_stream__, a CUstream, "
        f"a torch/cupy stream, an int or None; "
        f"got {type(stream).__name__}"
    )
