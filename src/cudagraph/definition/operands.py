"""Turning user operands into addresses and packable kernel arguments.

GPU-free: this module reads ``__cuda_array_interface__``, ``__array_interface__``
and the ``handle`` of a ``cuda.core`` ``Buffer`` without importing any CUDA
module (through :mod:`~cudagraph.definition.addresses`). DLPack-only objects
are kept as :class:`Deferred` and resolved by the driver layer.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..errors import OperandError
from .addresses import Deferred, buffer_like, resolve_address
from .param import Param

__all__ = ["Deferred", "buffer_like", "normalize_kernel_args", "resolve_pointer"]


def resolve_pointer(obj: Any, what: str, allow_null: bool = False) -> tuple[Any, Any, int | None]:
    """Read an address out of an operand.

    Parameters
    ----------
    obj : object
        An ``int`` address, a :class:`~cudagraph.Param`, a ``cuda.core``
        ``Buffer``, an object with ``__cuda_array_interface__`` or
        ``__array_interface__`` (host memory), or an object with ``__dlpack__``.
    what : str
        Where the operand is used, for error messages (``"memcpy#2 'h2d': src"``).
    allow_null : bool
        Accept the address 0.

    Returns
    -------
    tuple
        ``(pointer, owner, size)``: the address (an ``int``, a ``Param`` or a
        ``Deferred``), the object to keep alive (or ``None``) and the size in
        bytes if known.

    Raises
    ------
    OperandError
        If the operand is not memory, or is a null pointer.
    """
    if type(obj) is Param:
        if obj.dtype is not None:
            raise OperandError(f"{what}: param {obj.name!r} is a {obj.dtype} scalar, expected a pointer param")
        return obj, None, None
    return resolve_address(obj, what, allow_null)


_SCALAR, _INT, _BYTES, _CTYPES, _OBJ = 0, 1, 2, 3, 4
_KIND_BY_TYPE: dict[type, int] = {int: _INT, bytes: _BYTES}


def _kind_of(t: type) -> int:
    k = _KIND_BY_TYPE.get(t)
    if k is None:
        if issubclass(t, np.generic):
            k = _SCALAR
        elif issubclass(t, (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array)):
            k = _CTYPES
        elif issubclass(t, (bytearray, memoryview)):
            k = _BYTES
        else:
            k = _OBJ
        _KIND_BY_TYPE[t] = k
    return k


def normalize_kernel_args(args: Any, what: str) -> tuple[Any, ...]:
    """Check kernel arguments and convert memory objects to addresses.

    Each returned item is one of: an ``int`` (a pointer, 8 bytes), a numpy
    scalar, ``bytes`` (a by-value struct or raw bytes, including the bytes of a
    ctypes value), a :class:`~cudagraph.Param`, or a :class:`Deferred`.

    Parameters
    ----------
    args : tuple
        The arguments as given to :meth:`Graph.kernel`.
    what : str
        The node, for error messages.

    Returns
    -------
    tuple
        The normalized arguments.

    Raises
    ------
    OperandError
        If an argument has a kind that cannot be passed to a kernel.
    """
    if type(args) is not tuple:
        if isinstance(args, list):
            args = tuple(args)
        else:
            raise OperandError(f"{what}: args must be a tuple of kernel arguments, got {type(args).__name__}")
    out = None
    for i, a in enumerate(args):
        t = type(a)
        k = _KIND_BY_TYPE.get(t)
        if k is None:
            k = _kind_of(t)
        if k == _SCALAR:
            if isinstance(a, (np.str_, np.bytes_, np.datetime64, np.timedelta64)):
                raise OperandError(f"{what}: argument {i}: numpy {t.__name__} cannot be a kernel argument")
            continue
        if k == _INT:
            if a < 0 or a >= 1 << 64:
                raise OperandError(
                    f"{what}: argument {i}: Python int {a} is taken as a 64-bit pointer and is out of "
                    f"range; pass a numpy scalar (np.int64({a})) for a signed integer"
                )
            continue
        if k == _BYTES:
            if t is not bytes:
                if out is None:
                    out = list(args)
                out[i] = bytes(a)
            continue
        if out is None:
            out = list(args)
        if k == _CTYPES:
            out[i] = bytes(a)
            continue
        if t is Param:
            continue
        if isinstance(a, bool):
            raise OperandError(f"{what}: argument {i}: Python bool is ambiguous; pass np.bool_ or np.int32")
        if isinstance(a, float):
            raise OperandError(
                f"{what}: argument {i}: Python float is ambiguous; pass np.float32({a!r}) or np.float64({a!r})"
            )
        if a is None:
            raise OperandError(f"{what}: argument {i}: None is not a kernel argument (use 0 for a null pointer)")
        try:
            ptr, _owner, _size = resolve_pointer(a, f"{what}: argument {i}", allow_null=True)
        except OperandError:
            raise OperandError(
                f"{what}: argument {i}: {t.__name__} cannot be a kernel argument; expected a numpy or "
                f"ctypes scalar, bytes, an int pointer, device memory, or a Param"
            ) from None
        out[i] = ptr
    return args if out is None else tuple(out)
