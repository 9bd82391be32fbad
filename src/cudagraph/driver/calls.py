"""Checked driver calls: a failing ``CUresult`` becomes a typed exception."""

from __future__ import annotations

import functools
from typing import Any, NoReturn

from ..errors import DriverError, DriverUnavailableError, UnsupportedError

try:
    from cuda.bindings import driver
except ImportError as _exc:  # pragma: no cover - depends on the environment
    driver = None
    _IMPORT_ERROR: Exception | None = _exc
else:
    _IMPORT_ERROR = None

__all__ = [
    "MIN_DRIVER_VERSION",
    "bindings_version",
    "driver",
    "driver_import_error",
    "require_driver",
    "raise_error",
    "check",
    "check_driver_version",
    "ensure_context",
    "error_name",
    "pointer_attribute",
]

_UNSUPPORTED = {"CUDA_ERROR_NOT_SUPPORTED", "CUDA_ERROR_NOT_PERMITTED"}
_UNAVAILABLE = {"CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA_ERROR_STUB_LIBRARY"}
_NO_DRIVER_MESSAGE = "running a graph needs an NVIDIA GPU and driver"

#: The oldest driver cudagraph builds graphs with (``cuDriverGetVersion``: 12030 is CUDA 12.3), the first
#: with every call it makes without a fallback: ``cuGraphAddNode`` and ``cuGraphExecNodeSetParams`` with
#: ``CUgraphNodeParams`` (12.2), ``cuStreamGetCaptureInfo_v3`` and conditional handles (12.3).
MIN_DRIVER_VERSION = 12030
#: Whether :func:`check_driver_version` passed (asked once per process).
_driver_checked = False


def driver_import_error() -> str | None:
    """Why ``cuda.bindings.driver`` could not be imported (``None`` where it was)."""
    return None if _IMPORT_ERROR is None else str(_IMPORT_ERROR)


def bindings_version() -> str | None:
    """The version of the installed ``cuda-bindings`` (``"13.3.1"``), ``None`` where it is not importable."""
    try:
        import cuda.bindings
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return str(getattr(cuda.bindings, "__version__", "unknown"))


def require_driver() -> Any:
    """Return the ``cuda.bindings.driver`` module or raise :class:`DriverUnavailableError`."""
    if driver is None:
        raise DriverUnavailableError(f"{_NO_DRIVER_MESSAGE}: cuda-bindings is not importable ({_IMPORT_ERROR})")
    return driver


def error_name(code: Any) -> str:
    """The symbolic name of a ``CUresult`` (``"CUDA_ERROR_INVALID_VALUE"``)."""
    name = getattr(code, "name", None)
    if isinstance(name, str):
        return name
    try:
        return str(driver.CUresult(int(code)).name)
    except Exception:
        return f"CUresult({int(code)})"


def raise_error(code: Any, call: str, node: Any = None, detail: str = "") -> NoReturn:
    """Raise the typed exception for a failed driver call.

    Parameters
    ----------
    code : CUresult
        The failing result.
    call : str
        The driver function's name.
    node : Node, optional
        The definition node being built or updated.
    detail : str
        Extra context for the message.
    """
    name = error_name(code)
    where = f" for {node.label} of Graph {node.graph.name!r}" if node is not None else ""
    desc = ""
    try:
        err, text = driver.cuGetErrorString(code)
        if not err and text:
            desc = ": " + (text.decode() if isinstance(text, bytes) else str(text))
    except Exception:
        pass
    msg = f"{call} failed{where}: {name}{desc}{(' (' + detail + ')') if detail else ''}"
    cls = DriverError
    if name in _UNSUPPORTED:
        cls = UnsupportedError
    elif name in _UNAVAILABLE:
        cls = DriverUnavailableError
        msg = f"{_NO_DRIVER_MESSAGE}: {msg}"
    raise cls(msg, call=call, code=int(code), name=name, node=node)


def check(result: Any, call: str, node: Any = None) -> Any:
    """Unpack ``(CUresult, value...)``; raise on failure, return the value(s).

    Returns
    -------
    object
        ``None`` for a call with no outputs, the single output, or a tuple.
    """
    err = result[0]
    if err:
        raise_error(err, call, node)
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]


@functools.cache
def _held() -> tuple[Any, int, int] | None:
    """``(NATIVE, address of cuCtxGetCurrent, address of cuGraphCreate)``, resolved once; ``None`` where the
    compiled module or the driver library is not found (the calls then go through cuda.bindings).

    The compiled ``current_context`` and ``create_graph`` keep the GIL: both driver calls return at once,
    and through cuda.bindings each releases it, which beside another busy Python thread costs that
    thread's switch interval (5 ms) a call.
    """
    from .c_entry import NATIVE, c_address

    get, create = c_address("cuCtxGetCurrent"), c_address("cuGraphCreate")
    return (NATIVE, get, create) if NATIVE is not None and get and create else None


@functools.cache
def _held_attributes() -> tuple[Any, int, frozenset[int]] | None:
    """``(NATIVE, address of cuPointerGetAttributes, the attributes read there)``, resolved once; ``None``
    where the compiled module or the driver library is not found.

    Only attributes whose value is unsigned (a memory type, a pool handle) are read in C, which answers
    the value's bytes; the others (a device ordinal may be negative) go through cuda.bindings.
    """
    from .c_entry import NATIVE, c_address

    fn = c_address("cuPointerGetAttributes")
    if NATIVE is None or not fn:
        return None
    a = require_driver().CUpointer_attribute
    unsigned = frozenset(int(x) for x in (a.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE))
    return NATIVE, fn, unsigned


def pointer_attribute(attribute: Any, ptr: int) -> int:
    """One pointer attribute as an int, 0 where CUDA does not know the address.

    ``cuPointerGetAttributes`` answers an unknown address (pageable host
    memory) with zeros where ``cuPointerGetAttribute`` would fail, so probing
    user pointers raises no driver error. A memory type or a pool handle is read
    from C where compiled (``_native.pointer_attribute``, with the GIL held: the
    call returns at once), which spares the lists and objects ``cuda.bindings``
    makes: a copy node asks it for both its endpoints.

    Parameters
    ----------
    attribute : CUpointer_attribute
        The attribute.
    ptr : int
        The address.

    Returns
    -------
    int
        The value, or 0.
    """
    held = _held_attributes()
    if held is not None:
        number = int(attribute)
        if number in held[2]:
            rc, value = held[0].pointer_attribute(held[1], number, ptr)
            return 0 if rc else int(value)
    drv = require_driver()
    err, values = drv.cuPointerGetAttributes(1, [attribute], ptr)
    if err or not values or values[0] is None:
        return 0
    value = values[0]
    try:
        return int(value)
    except TypeError:
        return int(getattr(value, "value", 0) or 0)


def create_graph(node: Any = None) -> Any:
    """A new empty driver graph (``cuGraphCreate``), called from C with the GIL held where compiled.

    Raises
    ------
    DriverError
        The driver refused (naming ``node``, the definition node the graph is for, when given).
    """
    drv = require_driver()
    held = _held()
    if held is None:
        return check(drv.cuGraphCreate(0), "cuGraphCreate", node)
    rc, raw = held[0].create_graph(held[2], 0)
    if rc:
        raise_error(drv.CUresult(rc), "cuGraphCreate", node)
    return drv.CUgraph(raw)


def check_driver_version() -> int:
    """The driver's version (``cuDriverGetVersion``), checked against :data:`MIN_DRIVER_VERSION`.

    Raises
    ------
    DriverUnavailableError
        No driver library could be loaded.
    UnsupportedError
        The driver is older than CUDA 12.3 (both versions are named).
    """
    global _driver_checked
    drv = require_driver()
    try:
        err, version = drv.cuDriverGetVersion()
    except Exception as exc:  # the driver library could not be loaded
        raise DriverUnavailableError(f"{_NO_DRIVER_MESSAGE}: {exc}", call="cuDriverGetVersion") from exc
    if err:
        raise_error(err, "cuDriverGetVersion")
    version = int(version)
    if version < MIN_DRIVER_VERSION:
        need, have = MIN_DRIVER_VERSION, version
        raise UnsupportedError(
            f"cudagraph needs an NVIDIA driver for CUDA {need // 1000}.{need % 1000 // 10} or newer; this one is "
            f"for CUDA {have // 1000}.{have % 1000 // 10} (cuDriverGetVersion answered {have}): update the driver",
            call="cuDriverGetVersion",
        )
    _driver_checked = True
    return version


def ensure_context() -> Any:
    """Make sure a CUDA context is current; return it.

    When none is current, device 0's primary context is made current through
    ``cuda.core`` (as ``Device(0).set_current()`` does). The first call checks
    the driver's version (:func:`check_driver_version`).

    Raises
    ------
    DriverUnavailableError
        No driver or no GPU.
    UnsupportedError
        The driver is older than CUDA 12.3.
    """
    drv = require_driver()
    if not _driver_checked:
        check_driver_version()
    held = _held()
    if held is not None:  # (the current context, read with the GIL held; none current: the path below)
        rc, raw = held[0].current_context(held[1])
        if not rc and raw:
            return drv.CUcontext(raw)
    try:
        err, ctx = drv.cuCtxGetCurrent()
    except Exception as exc:  # the driver library could not be loaded
        raise DriverUnavailableError(f"{_NO_DRIVER_MESSAGE}: {exc}", call="cuCtxGetCurrent") from exc
    if err or not int(ctx):
        if err and error_name(err) != "CUDA_ERROR_NOT_INITIALIZED":
            raise_error(err, "cuCtxGetCurrent")
        try:
            from cuda.core import Device

            Device(0).set_current()
        except Exception as exc:
            raise DriverUnavailableError(f"{_NO_DRIVER_MESSAGE}: {exc}", call="cuInit") from exc
        ctx = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    return ctx
