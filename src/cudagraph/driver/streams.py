"""Accepting streams from every library (cuda.core, ``__cuda_stream__``, raw handles), and capture dependencies."""

from __future__ import annotations

from typing import Any

from ..errors import OperandError
from .calls import check, raise_error, require_driver
from .compat import BINDINGS_MAJOR

__all__ = [
    "READ_INT",
    "READ_INT_OF",
    "READ_PROTOCOL",
    "capture_dependencies",
    "core_stream",
    "new_stream",
    "protocol_handle",
    "set_capture_dependencies",
    "stream_handle",
    "stream_reading",
]

#: How the int handle of a stream target is read, learned once per type (see :func:`stream_reading`):
#: the int itself, item 1 of ``__cuda_stream__()``, or ``int(target)`` (a ``CUstream``).
READ_INT, READ_PROTOCOL, READ_INT_OF = 1, 2, 3


def new_stream() -> Any:
    """A new stream of the current device, owned by the caller: cuda.core's ``Device().create_stream()``."""
    from cuda.core import Device

    return Device().create_stream()


def core_stream(handle: int) -> Any:
    """The stream ``handle`` as a cuda.core ``Stream`` (``Stream.from_handle``; the handle stays the caller's)."""
    from cuda.core import Stream

    return Stream.from_handle(int(handle))


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
        h = protocol_handle(proto() if callable(proto) else proto)
        if h is None:
            raise OperandError(
                f"stream: {type(stream).__name__}.__cuda_stream__ must give (version, handle) with an int "
                f"handle in 0..2**64-1"
            )
        return drv.CUstream(h)
    handle = getattr(stream, "handle", None)
    if handle is not None and isinstance(handle, drv.CUstream):
        return handle
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        raw = getattr(stream, attr, None)
        if isinstance(raw, int) and not isinstance(raw, bool):
            return drv.CUstream(raw)
    if isinstance(stream, int) and not isinstance(stream, bool) and 0 <= stream < 1 << 64:
        return drv.CUstream(stream)
    raise OperandError(
        f"stream: expected a cuda.core Stream, an object with __cuda_stream__, a CUstream, "
        f"a torch/cupy stream, an int or None; "
        f"got {type(stream).__name__}"
    )


def protocol_handle(value: Any) -> int | None:
    """The stream handle in a ``__cuda_stream__`` answer ``(version, handle)``; ``None`` for another answer."""
    try:
        h = int(value[1])
    except (TypeError, ValueError, IndexError, KeyError):
        return None
    return h if 0 <= h < 1 << 64 else None


def stream_reading(stream: Any) -> int:
    """How the handle of every stream of ``type(stream)`` can be read without :func:`stream_handle`.

    ``READ_INT`` for an ``int``, ``READ_PROTOCOL`` for a type with a ``__cuda_stream__`` method,
    ``READ_INT_OF`` for a ``CUstream``; ``0`` for the others (read by :func:`stream_handle` each time).
    Call it on a value :func:`stream_handle` accepted.
    """
    t = type(stream)
    if t is int:
        return READ_INT
    if callable(getattr(t, "__cuda_stream__", None)):
        return READ_PROTOCOL
    if t is require_driver().CUstream:
        return READ_INT_OF
    return 0


def capture_dependencies(h: Any, node: Any = None) -> list[int]:
    """The driver nodes the next work captured on stream ``h`` will depend on (``cuStreamGetCaptureInfo``).

    Raises
    ------
    DriverError
        The driver refused (the message names ``node``, if given).
    """
    res = require_driver().cuStreamGetCaptureInfo(h)
    if res[0]:
        raise_error(res[0], "cuStreamGetCaptureInfo", node)
    n = int(res[-1])
    return [int(d) for d in res[4][:n]] if n else []


def set_capture_dependencies(h: Any, deps: list[int], node: Any = None) -> None:
    """Make the next work captured on stream ``h`` depend on exactly the driver nodes ``deps``.

    Raises
    ------
    DriverError
        The driver refused (the message names ``node``, if given).
    """
    drv = require_driver()
    nodes = [drv.CUgraphNode(d) for d in deps]
    flags = int(drv.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES)
    if BINDINGS_MAJOR >= 13:
        r = drv.cuStreamUpdateCaptureDependencies(h, nodes, None, len(nodes), flags)
    else:  # pragma: no cover - cuda-bindings 12.x: the edge-data form is _v2
        r = drv.cuStreamUpdateCaptureDependencies_v2(h, nodes, None, len(nodes), flags)
    check(r, "cuStreamUpdateCaptureDependencies", node)
