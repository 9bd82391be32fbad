"""Reading addresses out of memory operands: integers, buffers, array interfaces, DLPack.

GPU-free: this module reads ``__cuda_array_interface__``, ``__array_interface__``
and the ``handle`` of a ``cuda.core`` ``Buffer`` without importing any CUDA
module. DLPack-only objects are kept as :class:`Deferred` and resolved by the
driver layer. Parameters are handled one level up, in
:func:`~cudagraph.definition.operands.resolve_pointer`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import OperandError

__all__ = ["Deferred", "buffer_like", "resolve_address"]


class Deferred:
    """An operand whose address can only be read with CUDA (DLPack)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __repr__(self) -> str:
        return f"<Deferred {type(self.obj).__name__}>"


def buffer_like(obj: Any) -> bool:
    """Whether ``obj`` looks like a ``cuda.core`` ``Buffer`` (``handle``, ``size``, ``memory_resource``)."""
    return hasattr(obj, "handle") and hasattr(obj, "size") and hasattr(obj, "memory_resource")


def resolve_address(obj: Any, what: str, allow_null: bool = False) -> tuple[Any, Any, int | None]:
    """Read an address out of an operand that is not a :class:`~cudagraph.Param`.

    :func:`~cudagraph.definition.operands.resolve_pointer` adds parameters.

    Parameters
    ----------
    obj : object
        An ``int`` address, a ``cuda.core`` ``Buffer``, an object with
        ``__cuda_array_interface__`` or ``__array_interface__`` (host memory),
        or an object with ``__dlpack__``.
    what : str
        Where the operand is used, for error messages (``"memcpy#2 'h2d': src"``).
    allow_null : bool
        Accept the address 0.

    Returns
    -------
    tuple
        ``(pointer, owner, size)``: the address (an ``int`` or a
        ``Deferred``), the object to keep alive (or ``None``) and the size in
        bytes if known.

    Raises
    ------
    OperandError
        If the operand is not memory, or is a null pointer.
    """
    t = type(obj)
    if t is int:
        if obj < 0 or obj >= 1 << 64:
            raise OperandError(f"{what}: address {obj} is outside 0..2**64-1")
        if obj == 0 and not allow_null:
            raise OperandError(f"{what}: null pointer (address 0)")
        return obj, None, None
    if t is Deferred:
        return obj, obj.obj, None
    if isinstance(obj, (bool, np.bool_, float, np.floating, complex, str)):
        raise OperandError(f"{what}: expected device memory or an address, got {t.__name__} {obj!r}")
    if isinstance(obj, np.integer):
        return resolve_address(int(obj), what, allow_null)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        ptr = int(cai["data"][0])
        if ptr == 0 and not allow_null:
            raise OperandError(f"{what}: null pointer in __cuda_array_interface__")
        return ptr, obj, _interface_nbytes(cai)
    if buffer_like(obj):
        ptr = int(obj.handle)
        if ptr == 0 and not allow_null:
            raise OperandError(f"{what}: the Buffer is closed or empty (address 0)")
        return ptr, obj, int(obj.size)
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        return int(ai["data"][0]), obj, _interface_nbytes(ai)
    if hasattr(obj, "__dlpack__"):
        return Deferred(obj), obj, None
    raise OperandError(
        f"{what}: expected an int address, a cuda.core Buffer, an object with "
        f"__cuda_array_interface__ or __dlpack__, or a pointer Param; got {t.__name__}"
    )


def _interface_nbytes(iface: dict[str, Any]) -> int | None:
    shape = iface.get("shape", ())
    strides = iface.get("strides")
    itemsize = int(np.dtype(iface.get("typestr", "|u1")).itemsize)
    n = 1
    for s in shape:
        n *= int(s)
    if strides is None or n == 0:
        return n * itemsize
    extent = 1 + sum((int(d) - 1) * abs(int(st)) for d, st in zip(shape, strides))
    return max(extent - 1 + itemsize, 0)
