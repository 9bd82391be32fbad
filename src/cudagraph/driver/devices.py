"""Devices by ordinal: how many the driver has, each one's primary context, and cuda.core's ``Device``.

A primary context is retained once per ordinal (``cuDevicePrimaryCtxRetain``)
and never released while the process lives, so every kernel node given
``device=`` can hold it.
"""

from __future__ import annotations

from typing import Any

from ..errors import DriverUnavailableError, UnsupportedError
from .calls import check, require_driver

__all__ = ["cuda_core_device", "device_count", "primary_context"]

#: ordinal -> retained primary ``CUcontext``
_PRIMARY: dict[int, Any] = {}
#: ``[cuDeviceGetCount()]`` once asked
_COUNT: list[int] = []


def cuda_core_device(device_id: Any = None) -> Any:
    """cuda.core's ``Device(device_id)`` (``None``: the current device, else device 0).

    Raises
    ------
    DriverUnavailableError
        cuda.core is not importable, or it has no such device.
    """
    try:
        from cuda.core import Device

        return Device(device_id)
    except Exception as exc:  # no cuda.core, no driver, or no device of that ordinal
        raise DriverUnavailableError(
            f"cuda.core Device({device_id!r}): {type(exc).__name__}: {exc}", call="Device"
        ) from exc


def device_count() -> int:
    """The number of devices the driver has (asked once)."""
    if not _COUNT:
        _COUNT.append(int(check(require_driver().cuDeviceGetCount(), "cuDeviceGetCount")))
    return _COUNT[0]


def primary_context(ordinal: int, node: Any) -> Any:
    """The primary ``CUcontext`` of device ``ordinal`` (retained on first use), for ``node``.

    Raises
    ------
    UnsupportedError
        The driver has no device of that ordinal; the message names ``node``.
    """
    ctx = _PRIMARY.get(ordinal)
    if ctx is None:
        count = device_count()
        if ordinal >= count:
            raise UnsupportedError(
                f"{node.label} of Graph {node.graph.name!r}: device={ordinal}, but the driver has "
                f"{count} device(s) (ordinals 0..{count - 1})"
            )
        drv = require_driver()
        dev = check(drv.cuDeviceGet(ordinal), "cuDeviceGet", node)
        ctx = _PRIMARY.setdefault(ordinal, check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain", node))
    return ctx
