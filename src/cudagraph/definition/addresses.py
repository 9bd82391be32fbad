"""Reading addresses out of memory operands: integers, buffers, array interfaces, DLPack.

GPU-free: this module reads ``__cuda_array_interface__``, ``__array_interface__``
and the ``handle`` of a ``cuda.core`` ``Buffer`` without importing any CUDA
module. DLPack-only objects are kept as :class:`Deferred` and resolved by the
driver layer. Parameters are handled one level up, in
:func:`~cudagraph.definition.operands.resolve_pointer`.
"""

from __future__ import annotations

import operator
import sys
from typing import Any

import numpy as np

from ..errors import OperandError

__all__ = [
    "BUFFER_TYPES",
    "HANDLE_TYPES",
    "HOST_ARRAYS",
    "Deferred",
    "buffer_like",
    "is_torch_tensor",
    "tensor_address",
    "plain_type",
    "read_buffer",
    "resolve_address",
    "resolve_buffer",
]

#: Classes read as a ``cuda.core`` ``Buffer`` before, whose objects cannot have an array interface (no
#: instance dict, no ``__getattr__``, none on the class): their objects are read as buffers directly.
BUFFER_TYPES: set[type] = set()

#: Classes of addresses other than ``int`` (a Buffer's ``handle``: cuda.bindings' ``CUdeviceptr``) that ``int()``
#: turned into an address before; the compiled fill and copy builders convert only these (and ints).
HANDLE_TYPES: set[type] = set()

#: Host array classes whose contiguous objects the compiled fill and copy builders read through the buffer
#: protocol (their data pointer and length, which their ``__array_interface__`` also gives).
HOST_ARRAYS: tuple[type, ...] = (np.ndarray,)


class Deferred:
    """An operand whose address can only be read with CUDA (DLPack)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __repr__(self) -> str:
        return f"<Deferred {type(self.obj).__name__}>"


def plain_type(t: type) -> bool:
    """Whether every instance of ``t`` has exactly the attributes its type defines (no ``__dict__``, no hooks)."""
    return (
        getattr(t, "__dictoffset__", 1) == 0
        and getattr(t, "__getattr__", None) is None
        and t.__getattribute__ is object.__getattribute__  # type: ignore[comparison-overlap]
    )


def buffer_like(obj: Any) -> bool:
    """Whether ``obj`` looks like a ``cuda.core`` ``Buffer`` (``handle``, ``size``, ``memory_resource``)."""
    return hasattr(obj, "handle") and hasattr(obj, "size") and hasattr(obj, "memory_resource")


def resolve_address(obj: Any, what: str, allow_null: bool = False, sized: bool = True) -> tuple[Any, Any, int | None]:
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
    sized : bool
        The size is used (a copy or a fill): an array with negative strides,
        whose memory lies below its data pointer, is refused. With ``False``
        (a kernel argument) its size is ``None``.

    Returns
    -------
    tuple
        ``(pointer, owner, size)``: the address (an ``int`` or a
        ``Deferred``), the object to keep alive (or ``None``) and the size in
        bytes if known.

    Raises
    ------
    OperandError
        If the operand is not memory, is a null pointer, holds an address
        outside 0..2**64-1, or is a malformed array interface or Buffer
        (anything raised while reading it is turned into this error).
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
    if t in BUFFER_TYPES:
        return resolve_buffer(obj, what, allow_null)
    if isinstance(obj, (bool, np.bool_, float, np.floating, complex, str)):
        raise OperandError(f"{what}: expected device memory or an address, got {t.__name__} {obj!r}")
    if isinstance(obj, np.integer):
        return resolve_address(int(obj), what, allow_null)
    try:
        return _read_memory(obj, what, allow_null, sized)
    except OperandError:
        raise
    except Exception as e:
        raise _read_failed(obj, what, e) from e


def resolve_buffer(obj: Any, what: str, allow_null: bool = False) -> tuple[int, Any, int]:
    """:func:`resolve_address` of an object of a class in :data:`BUFFER_TYPES` (the caller tested it)."""
    try:
        return read_buffer(obj, what, allow_null)
    except OperandError:
        raise
    except Exception as e:
        raise _read_failed(obj, what, e) from e


def _read_failed(obj: Any, what: str, e: Exception) -> OperandError:
    """The error for a malformed interface, or a property that raises (a tensor that requires grad)."""
    return OperandError(f"{what}: reading the address of a {type(obj).__name__} failed: {type(e).__name__}: {e}")


def _read_memory(obj: Any, what: str, allow_null: bool, sized: bool) -> tuple[Any, Any, int | None]:
    if is_torch_tensor(type(obj)):
        read = _read_tensor(obj, what, allow_null)
        if read is not None:
            return read
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        ptr = _address(_data_pointer(cai, what, "__cuda_array_interface__"), what, "__cuda_array_interface__")
        if ptr == 0 and not allow_null:
            raise OperandError(f"{what}: null pointer in __cuda_array_interface__")
        return ptr, obj, _interface_nbytes(cai, what, "__cuda_array_interface__", sized)
    if buffer_like(obj):
        out = read_buffer(obj, what, allow_null)
        t = type(obj)
        if plain_type(t) and not hasattr(t, "__cuda_array_interface__"):  # (no object of it can grow one)
            BUFFER_TYPES.add(t)
        return out
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        ptr = _address(_data_pointer(ai, what, "__array_interface__"), what, "__array_interface__")
        return ptr, obj, _interface_nbytes(ai, what, "__array_interface__", sized)
    if hasattr(obj, "__dlpack__"):
        return Deferred(obj), obj, None
    raise OperandError(
        f"{what}: expected an int address, a cuda.core Buffer, an object with "
        f"__cuda_array_interface__ or __dlpack__, or a pointer Param; got {type(obj).__name__}"
    )


def is_torch_tensor(t: type) -> bool:
    """Whether ``t`` is ``torch.Tensor`` itself (not a subclass, which may answer attribute reads its own way)."""
    torch = sys.modules.get("torch")  # (imported by whoever made the tensor; never imported here)
    return torch is not None and t is getattr(torch, "Tensor", None)


def tensor_address(t: Any) -> int | None:
    """The address of a dense CUDA ``torch.Tensor`` that does not require grad (0 for one of no elements), as
    its ``__cuda_array_interface__`` gives it; ``None`` for any other tensor, which that interface describes or
    refuses. Read through torch's getters, without the Python property that builds the interface (a dict, a
    typestr, the shape as a tuple) and that knows no float8 dtype (a ``KeyError`` for ``float8_e4m3fn``)."""
    if not t.is_cuda or t.is_sparse or t.requires_grad:
        return None
    return t.data_ptr() if t.numel() else 0  # type: ignore[no-any-return]


def _read_tensor(t: Any, what: str, allow_null: bool) -> tuple[int, Any, int] | None:
    """``(address, t, size)`` of a tensor :func:`tensor_address` reads, with the interface's extent; ``None``
    for any other tensor."""
    ptr = tensor_address(t)
    if ptr is None:
        return None
    if ptr == 0 and not allow_null:
        raise OperandError(f"{what}: null pointer (a tensor of no elements, or whose storage was freed)")
    n, itemsize = t.numel(), t.element_size()
    if n == 0 or t.is_contiguous():
        return ptr, t, n * itemsize
    return ptr, t, sum((d - 1) * st for d, st in zip(t.shape, t.stride())) * itemsize + itemsize


def read_buffer(obj: Any, what: str, allow_null: bool = False) -> tuple[int, Any, int]:
    """``(address, obj, size)`` of a ``cuda.core`` ``Buffer`` (see :func:`resolve_address`).

    Raises
    ------
    OperandError
        A handle that is not an address, a closed buffer (address 0), a size that is not an int
        (any other exception is the caller's to turn into this error).
    """
    ptr = _address(obj.handle, what, "Buffer handle")
    if ptr == 0 and not allow_null:
        raise OperandError(f"{what}: the Buffer is closed or empty (address 0)")
    size = obj.size
    if (type(size) is not int and (isinstance(size, bool) or not isinstance(size, (int, np.integer)))) or size < 0:
        raise OperandError(f"{what}: the Buffer's size must be a non-negative int, got {size!r}")
    return ptr, obj, int(size)


def _data_pointer(iface: Any, what: str, name: str) -> Any:
    """The address in an array interface's ``data`` entry (a ``(ptr, read_only)`` pair)."""
    if not isinstance(iface, dict):
        raise OperandError(f"{what}: {name} must be a dict, got {type(iface).__name__}")
    data = iface.get("data")
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise OperandError(f"{what}: {name}['data'] must be a (pointer, read_only) pair, got {data!r}")
    return data[0]


def _address(value: Any, what: str, name: str) -> int:
    """An address read from an operand: an integer in 0..2**64-1."""
    # An int, a numpy integer, or a handle that converts to one (cuda.bindings' CUdeviceptr).
    if type(value) is int:
        if not 0 <= value < 1 << 64:
            raise OperandError(f"{what}: the address {value} in the {name} is outside 0..2**64-1")
        return value
    if isinstance(value, (bool, np.bool_, float, np.floating, complex, str, bytes)) or value is None:
        raise OperandError(f"{what}: the address in the {name} must be an int, got {type(value).__name__}")
    try:
        ptr = int(value)
    except Exception:
        raise OperandError(f"{what}: the address in the {name} must be an int, got {type(value).__name__}") from None
    if not 0 <= ptr < 1 << 64:
        raise OperandError(f"{what}: the address {ptr} in the {name} is outside 0..2**64-1")
    HANDLE_TYPES.add(type(value))
    return ptr


def _interface_nbytes(iface: dict[str, Any], what: str, name: str, sized: bool) -> int | None:
    """Bytes from the data pointer to the end of the array (``None`` if not ``sized`` and not computable)."""
    shape = iface.get("shape", ())
    strides = iface.get("strides")
    try:
        itemsize = int(np.dtype(iface.get("typestr", "|u1")).itemsize)
        dims = [operator.index(d) for d in shape]
        steps = None if strides is None else [operator.index(st) for st in strides]
    except Exception:
        raise OperandError(
            f"{what}: {name} has a malformed shape, strides or typestr "
            f"({iface.get('shape')!r}, {iface.get('strides')!r}, {iface.get('typestr')!r})"
        ) from None
    if any(d < 0 for d in dims) or (steps is not None and len(steps) != len(dims)):
        raise OperandError(f"{what}: {name} has a malformed shape or strides ({dims!r}, {steps!r})")
    n = 1
    for d in dims:
        n *= d
    if steps is None or n == 0:
        return n * itemsize
    if any(st < 0 for d, st in zip(dims, steps) if d > 1):
        if not sized:
            return None
        # The elements of a reversed view lie below the data pointer: a copy from it would run past the array.
        raise OperandError(
            f"{what}: the array has negative strides {tuple(steps)}, so its memory starts below its data pointer; "
            "pass a contiguous array (np.ascontiguousarray)"
        )
    return sum((d - 1) * st for d, st in zip(dims, steps)) + itemsize
