"""Driver values of stored operands: addresses, memory types and event handles."""

from __future__ import annotations

from typing import Any

from ..definition.nodes import AllocNode, AllocOffset
from ..definition.operands import Deferred
from ..definition.param import Param
from ..definition.param_offset import ParamAt
from ..driver.calls import pointer_attribute, require_driver
from ..driver.kernel_args import resolve_deferred
from ..errors import DefinitionError, OperandError
from .lower_state import LowerState

__all__ = [
    "LOWEST_VALID_ADDRESS",
    "endpoint",
    "event_handle",
    "memory_type",
    "pointer_attribute",
    "pointer_value",
]

#: No valid user pointer lies below this address (Linux's default mmap_min_addr).
LOWEST_VALID_ADDRESS = 1 << 16


def pointer_value(value: Any, bindings: dict[str, Any], what: str, state: LowerState | None = None) -> int:
    """The address behind a stored operand (an int, a bound Param, a DLPack object or a graph allocation).

    Parameters
    ----------
    value : object
        The stored operand.
    bindings : dict
        Parameter values.
    what : str
        The node and argument, for error messages.
    state : LowerState, optional
        The construction in progress, where graph allocations have their
        addresses (``None``: outside a construction).

    Raises
    ------
    DefinitionError
        A graph allocation outside the construction of its graph.
    """
    t = type(value)
    if t is int:
        return value  # type: ignore[no-any-return]
    if t is Param:
        return bindings[value.name]  # type: ignore[no-any-return]
    if t is ParamAt:
        return value.value(bindings)  # type: ignore[no-any-return]
    if t is Deferred:
        return resolve_deferred(value.obj, what)
    if t is AllocNode or t is AllocOffset:
        if state is None:
            raise DefinitionError(f"{what}: a graph allocation has an address only while its graph is built")
        return state.alloc_address(value, what)
    raise TypeError(f"{what}: unexpected operand {value!r}")


def memory_type(ptr: int, what: str = "operand") -> Any:
    """``CU_MEMORYTYPE_UNIFIED`` for memory CUDA knows, ``CU_MEMORYTYPE_HOST`` for pageable host memory.

    Raises
    ------
    OperandError
        For an address no allocation can have (below 64 KiB).
    """
    drv = require_driver()
    if not pointer_attribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr):
        if ptr < LOWEST_VALID_ADDRESS:
            raise OperandError(f"{what}: {ptr:#x} is not an address of device or host memory")
        return drv.CUmemorytype.CU_MEMORYTYPE_HOST
    return drv.CUmemorytype.CU_MEMORYTYPE_UNIFIED


def endpoint(value: Any, bindings: dict[str, Any], what: str, state: LowerState | None) -> tuple[int, Any]:
    """``(address, CUmemorytype)`` of a copy operand; graph allocations are device memory. An address is asked
    of the driver once per construction (``state.memory_types``), at every update."""
    ptr = pointer_value(value, bindings, what, state)
    t = type(value)
    if t is AllocNode or t is AllocOffset:
        return ptr, require_driver().CUmemorytype.CU_MEMORYTYPE_DEVICE
    known = None if state is None else state.memory_types
    if known is None:
        return ptr, memory_type(ptr, what)
    kind = known.get(ptr)
    if kind is None:
        kind = known[ptr] = memory_type(ptr, what)
    return ptr, kind


def event_handle(event: Any, node: Any = None) -> Any:
    """The ``CUevent`` of a ``cuda.core`` Event or a raw handle.

    Raises
    ------
    OperandError
        ``event`` is neither a handle nor an object with one (``node``: the node named in the message).
    """
    drv = require_driver()
    if isinstance(event, drv.CUevent):
        return event
    handle = getattr(event, "handle", None)
    if handle is None:  # a type of an event's name that is not one (the definition layer knows types by name)
        where = f"{node.label}: event" if node is not None else "event"
        raise OperandError(
            f"{where}: expected a cuda.core Event or a cuda.bindings CUevent, got "
            f"{type(event).__module__}.{type(event).__qualname__} (it has no handle)"
        )
    return handle
