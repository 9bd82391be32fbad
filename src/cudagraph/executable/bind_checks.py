"""Checks of a new value for a parameter made by :meth:`Graph.parametrize <cudagraph.Graph.parametrize>`.

The parameter stands for memory the graph was captured on; a new value must
be device memory at least as large, on the same device, and (where both the
captured and the new object expose them) of the same dtype, shape and
strides. Objects say most of this themselves; a bare address or an
``(address, nbytes)`` pair is asked of the driver (memory type, device).
"""

from __future__ import annotations

from typing import Any

from ..definition.memory_info import Memory, describe_memory
from ..driver.calls import require_driver
from ..errors import OperandError
from ..ops.operands import pointer_attribute

__all__ = ["checked_address", "probe"]


def probe(address: int) -> tuple[bool, int | None]:
    """``(CUDA knows the address, its device ordinal or None)``, from ``cuPointerGetAttributes``."""
    drv = require_driver()
    A = drv.CUpointer_attribute
    if not pointer_attribute(A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address):
        return False, None
    return True, pointer_attribute(A.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address)


def checked_address(name: str, captured: Memory, value: Any, graph: str) -> int:
    """The address of ``value`` for parameter ``name``, after checking it against the ``captured`` memory.

    Raises
    ------
    OperandError
        Not memory, host memory, smaller than the captured memory, another
        device, or another dtype, shape or strides (both sizes, devices or
        layouts are named).
    """
    what = f"Graph {graph!r}: bind {name!r}"
    mem = describe_memory(value, what)
    device = mem.device
    if device is None and (type(value) is int or type(value) is tuple):
        known, device = probe(mem.address)
        if not known:
            raise OperandError(f"{what}: {mem.address:#x} is not memory CUDA knows (pageable host memory?)")
    if mem.nbytes is not None and captured.nbytes and mem.nbytes < captured.nbytes:
        raise OperandError(
            f"{what}: the new memory has {mem.nbytes} bytes, fewer than the {captured.nbytes} bytes of the memory "
            f"{name!r} was parametrized with (the extent the graph uses)"
        )
    if device is not None and captured.device is not None and device != captured.device:
        raise OperandError(
            f"{what}: the new memory is on device {device}, the graph was captured with {name!r} on device "
            f"{captured.device}"
        )
    for attr in ("dtype", "shape", "strides"):
        new, old = getattr(mem, attr), getattr(captured, attr)
        if new is not None and old is not None and new != old:
            raise OperandError(
                f"{what}: {attr} {new} differs from the captured {attr} {old} "
                f"(new memory {mem.nbytes} bytes, captured {captured.nbytes} bytes)"
            )
    return mem.address
