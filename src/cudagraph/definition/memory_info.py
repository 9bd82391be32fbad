"""What a memory object says of itself: address, extent, device, dtype, shape, strides (GPU-free).

Read from PyTorch tensors (``data_ptr``, ``device``, ``stride``), objects
with ``__cuda_array_interface__`` (CuPy, Numba), ``cuda.core`` Buffers,
DLPack producers (the capsule is read with ``ctypes``, no CUDA module) and
``(address, nbytes)`` ranges. Used by :meth:`Graph.parametrize
<cudagraph.Graph.parametrize>` and by the checks of ``Executable.bind``.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..errors import OperandError
from .addresses import buffer_like

__all__ = ["Memory", "describe_memory"]

# DLPack device types
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


class Memory:
    """A memory object as a parameter sees it.

    Attributes
    ----------
    address : int
        The first byte.
    nbytes : int or None
        The extent in bytes from :attr:`address` (``None``: unknown, a bare address).
    device : int or None
        The CUDA device ordinal, where the object says it.
    dtype : str or None
        The element type, where the object exposes one.
    shape, strides : tuple of int or None
        The shape and the strides in bytes, where exposed.
    """

    __slots__ = ("address", "nbytes", "device", "dtype", "shape", "strides")

    def __init__(
        self,
        address: int,
        nbytes: int | None,
        device: int | None = None,
        dtype: str | None = None,
        shape: tuple[int, ...] | None = None,
        strides: tuple[int, ...] | None = None,
    ) -> None:
        self.address = address
        self.nbytes = nbytes
        self.device = device
        self.dtype = dtype
        self.shape = shape
        self.strides = strides

    def layout(self) -> str:
        """``"float32 (4, 8) strides (32, 4)"``, or ``""`` when nothing is exposed."""
        parts = [p for p in (self.dtype, self.shape and str(self.shape)) if p]
        if self.strides is not None:
            parts.append(f"strides {self.strides}")
        return " ".join(parts)

    def __repr__(self) -> str:
        size = "?" if self.nbytes is None else str(self.nbytes)
        dev = "" if self.device is None else f" device {self.device}"
        lay = self.layout()
        return f"<Memory {self.address:#x} {size} B{dev}{' ' + lay if lay else ''}>"


def _extent(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """Bytes from the first element to the end of the last one (strides in bytes; 0 for an empty array)."""
    if any(d == 0 for d in shape):
        return 0
    return sum((d - 1) * abs(s) for d, s in zip(shape, strides)) + itemsize


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out: list[int] = []
    step = itemsize
    for d in reversed(shape):
        out.append(step)
        step *= max(d, 1)
    return tuple(reversed(out))


def _host_only(what: str, kind: str) -> OperandError:
    return OperandError(f"{what}: {kind} is host memory, which kernels and device copies of the graph cannot use")


def describe_memory(obj: Any, what: str) -> Memory:
    """The :class:`Memory` of ``obj``.

    Parameters
    ----------
    obj : object
        A PyTorch CUDA tensor, an object with ``__cuda_array_interface__``, a
        ``cuda.core`` Buffer, a DLPack producer, or an ``(address, nbytes)`` pair.
    what : str
        Named in error messages (``"parametrize: x"``).

    Raises
    ------
    OperandError
        Host-only memory, a null address, or an object that is not memory.
    """
    if isinstance(obj, tuple) and len(obj) == 2 and all(isinstance(v, (int, np.integer)) for v in obj):
        address, nbytes = int(obj[0]), int(obj[1])
        if address <= 0 or address >= 1 << 64 or nbytes <= 0:
            raise OperandError(f"{what}: (address, nbytes) needs a non-null address and a positive size, got {obj}")
        if address + nbytes > 1 << 64:
            raise OperandError(f"{what}: ({address:#x}, {nbytes}) ends past the 64-bit address space")
        return Memory(address, nbytes)
    if type(obj) is int:
        if obj <= 0 or obj >= 1 << 64:
            raise OperandError(f"{what}: {obj} is not a 64-bit address")
        return Memory(obj, None)
    if callable(getattr(obj, "data_ptr", None)) and callable(getattr(obj, "stride", None)) and hasattr(obj, "device"):
        return _torch(obj, what)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _cai(obj, cai, what)
    if buffer_like(obj):
        if getattr(obj, "is_device_accessible", True) is False:
            raise _host_only(what, type(obj).__name__)
        dev = getattr(obj, "device_id", None)
        return Memory(int(obj.handle), int(obj.size), dev if isinstance(dev, int) and dev >= 0 else None)
    if hasattr(obj, "__array_interface__"):
        raise _host_only(what, f"{type(obj).__name__} (it has __array_interface__, not __cuda_array_interface__)")
    if hasattr(obj, "__dlpack__"):
        return _dlpack(obj, what)
    raise OperandError(
        f"{what}: expected device memory (a tensor, an array with __cuda_array_interface__, a cuda.core Buffer, "
        f"a DLPack producer) or an (address, nbytes) pair; got {type(obj).__name__}"
    )


def _torch(t: Any, what: str) -> Memory:
    dev = t.device
    if getattr(dev, "type", "cuda") != "cuda":
        raise _host_only(what, f"a tensor on {dev}")
    itemsize = int(t.element_size())
    shape = tuple(int(d) for d in t.shape)
    strides = tuple(int(s) * itemsize for s in t.stride())
    index = getattr(dev, "index", None)
    return Memory(int(t.data_ptr()), _extent(shape, strides, itemsize), index, str(t.dtype), shape, strides)


def _cai(obj: Any, cai: dict[str, Any], what: str) -> Memory:
    address = int(cai["data"][0])
    dtype = np.dtype(cai.get("typestr", "|u1"))
    shape = tuple(int(d) for d in cai.get("shape", ()))
    strides = cai.get("strides")
    st = _c_strides(shape, dtype.itemsize) if strides is None else tuple(int(s) for s in strides)
    dev = getattr(getattr(obj, "device", None), "id", None)
    device = dev if isinstance(dev, int) else None
    return Memory(address, _extent(shape, st, dtype.itemsize), device, dtype.name, shape, st)


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_GET_POINTER = ctypes.pythonapi.PyCapsule_GetPointer
_GET_POINTER.restype = ctypes.c_void_p
_GET_POINTER.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack(obj: Any, what: str) -> Memory:
    """Read the ``DLTensor`` of an unversioned DLPack capsule (released when the capsule is dropped)."""
    device = getattr(obj, "__dlpack_device__", None)
    if callable(device):
        dtype_, _ = device()
        if int(dtype_) == _DL_CPU:
            raise _host_only(what, f"{type(obj).__name__} (DLPack device kDLCPU)")
    try:
        capsule = obj.__dlpack__()
        t = _DLTensor.from_address(_GET_POINTER(capsule, b"dltensor"))
    except Exception as exc:
        raise OperandError(f"{what}: cannot read the DLPack tensor of {type(obj).__name__} ({exc})") from exc
    if t.device_type not in (_DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED):
        raise _host_only(what, f"{type(obj).__name__} (DLPack device type {t.device_type})")
    itemsize = max(t.bits // 8, 1) * max(t.lanes, 1)
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    if t.strides:
        strides = tuple(int(t.strides[i]) * itemsize for i in range(t.ndim))
    else:
        strides = _c_strides(shape, itemsize)
    address = int(t.data or 0) + int(t.byte_offset)
    dev = int(t.device_id) if t.device_type == _DL_CUDA else None
    kind = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}.get(t.code, f"code{t.code}")
    return Memory(address, _extent(shape, strides, itemsize), dev, f"{kind}{t.bits}", shape, strides)
