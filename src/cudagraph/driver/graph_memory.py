"""The device's graph memory pool: usage and trimming (imports the driver only when called)."""

from __future__ import annotations

from typing import Any

__all__ = ["graph_memory_usage", "trim_graph_memory"]


def _device(device: Any) -> Any:
    from .calls import check, ensure_context, require_driver

    drv = require_driver()
    if device is None:
        ensure_context()
        return check(drv.cuCtxGetDevice(), "cuCtxGetDevice")
    ordinal = getattr(device, "device_id", device)
    ensure_context()
    return check(drv.cuDeviceGet(int(ordinal)), "cuDeviceGet")


def trim_graph_memory(device: Any = None) -> None:
    """Return the graph memory pool's unused memory to the system (``cuDeviceGraphMemTrim``).

    Memory of allocations made by alloc nodes is kept by the driver for the
    next launch; blocks not used by a graph that is running or queued are
    released by this call.

    Parameters
    ----------
    device : cuda.core.Device or int, optional
        The device (default: the current context's).

    Raises
    ------
    DriverError
        The driver call failed.
    """
    from .calls import check, require_driver

    drv = require_driver()
    check(drv.cuDeviceGraphMemTrim(_device(device)), "cuDeviceGraphMemTrim")


def graph_memory_usage(device: Any = None) -> dict[str, int]:
    """The graph memory pool's counters (``cuDeviceGetGraphMemAttribute``), in bytes.

    Returns
    -------
    dict
        ``used`` (held by graph allocations now), ``used_high`` (high-water
        mark), ``reserved`` (memory the pool holds from the system) and
        ``reserved_high``.
    """
    from .calls import check, require_driver

    drv = require_driver()
    dev = _device(device)
    A = drv.CUgraphMem_attribute
    out = {}
    for key, attr in (
        ("used", A.CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT),
        ("used_high", A.CU_GRAPH_MEM_ATTR_USED_MEM_HIGH),
        ("reserved", A.CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT),
        ("reserved_high", A.CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH),
    ):
        out[key] = int(check(drv.cuDeviceGetGraphMemAttribute(dev, attr), "cuDeviceGetGraphMemAttribute"))
    return out
