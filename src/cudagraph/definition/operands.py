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
from .addresses import Deferred, buffer_like, is_torch_tensor, resolve_address
from .param import Param

__all__ = [
    "ARG_BUFFER_TYPES",
    "ARG_TENSOR_TYPES",
    "ARG_TYPES_OK",
    "ARG_TYPES_VALID",
    "DLPACK_DEVICE_TYPES",
    "Deferred",
    "buffer_like",
    "check_kernel_arg",
    "kernel_args_pass",
    "normalize_kernel_args",
    "resolve_pointer",
]


def resolve_pointer(obj: Any, what: str, allow_null: bool = False, sized: bool = True) -> tuple[Any, Any, int | None]:
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
    sized : bool
        The operand's size is used (see :func:`~cudagraph.definition.addresses.resolve_address`).

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
    return resolve_address(obj, what, allow_null, sized)


_SCALAR, _INT, _BYTES, _CTYPES, _OBJ = 0, 1, 2, 3, 4
#: numpy scalars that are not kernel arguments.
_NOT_ARGUMENTS = (np.str_, np.bytes_, np.datetime64, np.timedelta64)
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
            if isinstance(a, _NOT_ARGUMENTS):
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
        out[i] = _memory_arg(a, i, what)
    return args if out is None else tuple(out)


def _memory_arg(a: Any, i: int, what: str) -> Any:
    """The address of kernel argument ``i``, an object that is neither a scalar nor bytes (or the error)."""
    bad = _scalar_refusal(a, i, what)
    if bad is not None:
        raise OperandError(bad)
    check_kernel_arg(a, i, what)  # not memory, or host memory
    ptr, _owner, _size = resolve_pointer(a, f"{what}: argument {i}", allow_null=True, sized=False)
    return ptr


#: Types every value of which :func:`normalize_kernel_args` accepts (numpy scalars but strings and dates,
#: ``bytes`` and ``bytearray``, ctypes values, :class:`~cudagraph.Param`): filled by :func:`kernel_args_pass`.
ARG_TYPES_VALID: set[type] = {bytes, bytearray, Param}
_U64_END = 1 << 64


def kernel_args_pass(args: Any, seen: set[int]) -> bool:
    """Whether :func:`normalize_kernel_args` accepts ``args``, answered without building its result or a message.

    The common case of :meth:`Graph.validate <cudagraph.Graph.validate>`: a type set lookup per argument, a
    range test per int, and the checks of :func:`normalize_kernel_args` itself for memory objects (Buffers,
    arrays), each read once per pass: ``seen`` holds the ids of those accepted earlier in the pass (the
    caller's nodes keep them alive).

    Returns
    -------
    bool
        ``True`` only when :func:`normalize_kernel_args` accepts ``args``; ``False`` when it may not (it then
        decides, and names the argument at fault).
    """
    if type(args) is not tuple:
        return False
    for a in args:
        t = type(a)
        if t in ARG_TYPES_VALID:
            continue
        if t is int:
            if 0 <= a < _U64_END:
                continue
            return False
        if id(a) in seen:
            continue
        k = _KIND_BY_TYPE.get(t)
        if k is None:
            k = _kind_of(t)
        if k == _OBJ:
            try:
                _memory_arg(a, 0, "")
            except Exception:  # normalize_kernel_args raises it again, with the node and the argument
                return False
            seen.add(id(a))
        elif k == _CTYPES or (k == _SCALAR and not issubclass(t, _NOT_ARGUMENTS)):
            ARG_TYPES_VALID.add(t)
        else:  # numpy strings and dates, bytes-like objects other than bytearray
            return False
    return True


def _not_an_argument(t: type, i: int, what: str) -> str:
    return (
        f"{what}: argument {i}: {t.__name__} cannot be a kernel argument; expected a numpy or "
        f"ctypes scalar, bytes, an int pointer, device memory, or a Param"
    )


def _scalar_refusal(a: Any, i: int, what: str) -> str | None:
    """The message refusing a Python ``bool``, ``float`` or ``None`` as a kernel argument (else ``None``)."""
    if isinstance(a, bool):
        return f"{what}: argument {i}: Python bool is ambiguous; pass np.bool_ or np.int32"
    if isinstance(a, float):
        return f"{what}: argument {i}: Python float is ambiguous; pass np.float32({a!r}) or np.float64({a!r})"
    if a is None:
        return f"{what}: argument {i}: None is not a kernel argument (use 0 for a null pointer)"
    return None


#: DLPack device types (``DLDeviceType``) a kernel can dereference: CUDA, pinned host, managed.
DLPACK_DEVICE_TYPES = {2: "kDLCUDA", 3: "kDLCUDAHost", 13: "kDLCUDAManaged"}
_DLPACK_CPU = 1

#: Argument types whose every value is accepted by :func:`check_kernel_arg`: the hot path of
#: ``Graph.kernel`` tests membership only. Filled as types are seen.
ARG_TYPES_OK: set[type] = {int, bytes}


#: ``Buffer`` types (``handle``, ``size``, ``memory_resource``) whose class has ``is_device_accessible``:
#: the hot path of ``Graph.kernel`` accepts an object of one of them when that attribute is ``True``.
#: Filled as types are seen. Other memory (tensors, DLPack objects) is checked per object.
ARG_BUFFER_TYPES: set[type] = set()

#: ``torch.Tensor`` once a CUDA tensor was accepted: a tensor whose ``is_cuda`` is true is device memory, so the
#: builders (and the compiled ``Graph.kernel``) accept it by that one read instead of :func:`check_kernel_arg`
#: (one read per tensor argument instead of a full check; bench/construction.py --cpu times define).
ARG_TENSOR_TYPES: set[type] = set()


def check_kernel_arg(a: Any, i: int, what: str, always_ok: tuple[type, ...] = ()) -> None:
    """Refuse, without any driver call, a kernel argument that can never be right.

    Python ``bool``/``float``/``None``, numpy strings and dates, objects that are
    not memory, and memory the GPU cannot read: an object exposing only
    ``__array_interface__`` (a numpy array), a DLPack object on the CPU
    (``kDLCPU``) or on a device that is not CUDA, a ``Buffer`` whose
    ``is_device_accessible`` is false. Pinned (``kDLCUDAHost``), managed
    (``kDLCUDAManaged``) and device (``kDLCUDA``) memory are accepted.
    A type whose every value is acceptable is added to :data:`ARG_TYPES_OK`.

    Parameters
    ----------
    a : object
        The argument.
    i : int
        Its index, for messages.
    what : str
        The node, for messages.
    always_ok : tuple of type
        Further types accepted as they are (conditions, graph allocations).

    Raises
    ------
    OperandError
        The argument names the node and the argument's index.
    """
    t = type(a)
    if t in ARG_TYPES_OK:
        return
    k = _kind_of(t)
    if k == _SCALAR:
        if issubclass(t, _NOT_ARGUMENTS):
            raise OperandError(f"{what}: argument {i}: numpy {t.__name__} cannot be a kernel argument")
        ARG_TYPES_OK.add(t)
        return
    if k != _OBJ or t is Param or issubclass(t, always_ok):
        ARG_TYPES_OK.add(t)
        return
    bad = _scalar_refusal(a, i, what)
    if bad is not None:
        raise OperandError(bad)
    if issubclass(t, (int, bytes)):  # an int (a pointer or handle) or bytes of another class: as int and bytes
        ARG_TYPES_OK.add(t)
        return
    where = f"{what}: argument {i}"
    try:
        reason = _host_memory(a)
    except Exception as e:
        raise OperandError(f"{where}: reading the {t.__name__} as memory failed: {type(e).__name__}: {e}") from e
    if reason is None:
        if hasattr(t, "is_device_accessible") and buffer_like(a):
            ARG_BUFFER_TYPES.add(t)
        elif is_torch_tensor(t):
            ARG_TENSOR_TYPES.add(t)
        return
    if reason == "":
        raise OperandError(_not_an_argument(t, i, what))
    raise OperandError(f"{where}: {reason}")


def _host_memory(a: Any) -> str | None:
    """Why ``a`` is memory a kernel cannot read (``""``: not memory at all; ``None``: device-readable)."""
    t = type(a)
    if buffer_like(a):
        if getattr(a, "is_device_accessible", True) is False:
            return (
                f"the {t.__name__} is host memory the GPU cannot access (is_device_accessible is False); "
                "allocate it from a device, pinned or managed memory resource"
            )
        return None
    if is_torch_tensor(t) and a.is_cuda:  # (one getter: torch's __dlpack_device__ is Python code)
        return None
    # __dlpack_device__ first: it is cheaper than building a __cuda_array_interface__.
    dev = getattr(a, "__dlpack_device__", None)
    if dev is not None and hasattr(a, "__dlpack__"):
        kind = int(dev()[0])
        if kind in DLPACK_DEVICE_TYPES:
            return None
        if kind != _DLPACK_CPU:
            return (
                f"the {t.__name__} is on DLPack device type {kind}, not CUDA memory "
                f"({', '.join(f'{v}={k}' for k, v in DLPACK_DEVICE_TYPES.items())})"
            )
        if getattr(a, "__array_interface__", None) is None:
            return (
                f"the {t.__name__} is in host memory (DLPack device kDLCPU), which the GPU cannot read; "
                "move it to the device (or to pinned memory) first"
            )
    elif getattr(a, "__cuda_array_interface__", None) is not None:
        return None
    elif getattr(a, "__array_interface__", None) is None:
        return None if hasattr(a, "__dlpack__") else ""
    hint = " (a 0-d array: pass its value as a numpy scalar, x[()], instead)" if getattr(a, "ndim", None) == 0 else ""
    return (
        f"the {t.__name__} is host memory (it has only __array_interface__), which the GPU cannot read; "
        f"copy it to device memory first{hint}"
    )
