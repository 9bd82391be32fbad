"""Kernel parameter layout (``cuKernelGetParamInfo``) and argument packing."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .._operands import Deferred, normalize_kernel_args
from .._param import Param
from ..errors import KernelArgumentError, OperandError
from ._calls import check, error_name, require_driver

__all__ = ["KernelInfo", "kernel_info", "resolve_deferred"]


def resolve_deferred(obj: Any, what: str) -> int:
    """Read the device address of a DLPack-only object through ``cuda.core``."""
    try:
        from cuda.core.utils import StridedMemoryView

        return int(StridedMemoryView(obj, stream_ptr=-1).ptr)
    except Exception as exc:
        raise OperandError(f"{what}: cannot read a device address from {type(obj).__name__} ({exc})") from exc


class KernelInfo:
    """A kernel's handle, name and parameter layout, plus a reusable packing buffer.

    Attributes
    ----------
    handle : CUkernel or CUfunction
        The handle used in node parameters.
    is_library_kernel : bool
        ``True`` for a ``CUkernel`` (context-independent), ``False`` for a ``CUfunction``.
    name : str
        The kernel's (mangled) name.
    offsets, sizes : tuple of int
        The device-side parameter layout.
    """

    __slots__ = (
        "kernel",
        "handle",
        "is_library_kernel",
        "name",
        "offsets",
        "sizes",
        "total",
        "_scratch",
        "_scratch_addr",
        "_ptrs",
        "params_address",
    )

    def __init__(self, kernel: Any) -> None:
        drv = require_driver()
        handle = kernel
        if not isinstance(kernel, (drv.CUkernel, drv.CUfunction)):
            handle = kernel.handle
        self.kernel = kernel
        self.handle = handle
        self.is_library_kernel = isinstance(handle, drv.CUkernel)
        get_info = drv.cuKernelGetParamInfo if self.is_library_kernel else drv.cuFuncGetParamInfo
        get_name = drv.cuKernelGetName if self.is_library_kernel else drv.cuFuncGetName
        try:
            raw = check(get_name(handle), get_name.__name__)
            self.name = raw.decode() if isinstance(raw, bytes) else str(raw)
        except Exception:
            self.name = f"<kernel {int(handle):#x}>"
        offsets: list[int] = []
        sizes: list[int] = []
        while True:
            err, off, size = get_info(handle, len(offsets))
            if err:
                if error_name(err) == "CUDA_ERROR_INVALID_VALUE":
                    break
                check((err,), get_info.__name__)
            offsets.append(int(off))
            sizes.append(int(size))
        self.offsets = tuple(offsets)
        self.sizes = tuple(sizes)
        self.total = max((o + s for o, s in zip(offsets, sizes)), default=0)
        self._scratch = (ctypes.c_char * max(self.total, 1))()
        self._scratch_addr = ctypes.addressof(self._scratch)
        self._ptrs = (ctypes.c_void_p * max(len(offsets), 1))(*[self._scratch_addr + o for o in offsets])
        self.params_address = ctypes.addressof(self._ptrs) if offsets else 0

    def pack(self, args: tuple[Any, ...], label: str, bindings: dict[str, Any]) -> int:
        """Write ``args`` into the packing buffer; return the ``void**`` address for ``kernelParams``.

        The driver copies the values when a node is added or a launch is
        made, so one buffer per kernel is reused.

        Raises
        ------
        KernelArgumentError
            Wrong argument count, or an argument whose size differs from the
            parameter's.
        OperandError
            An argument of a kind that cannot be passed.
        """
        sizes = self.sizes
        if len(args) != len(sizes):
            raise KernelArgumentError(
                f"{label}: kernel {self.name!r} takes {len(sizes)} parameters "
                f"(sizes {list(sizes)} bytes), got {len(args)} arguments",
                kernel=self.name,
                expected=len(sizes),
                given=len(args),
            )
        nargs = normalize_kernel_args(args, label)
        data = bytearray(self.total)
        for i, a in enumerate(nargs):
            t = type(a)
            if t is int:
                if a < 0 or a >= 1 << 64:
                    raise OperandError(f"{label}: argument {i}: {a} is not a 64-bit pointer value")
                b = a.to_bytes(8, "little")
                kind = "Python int (a 64-bit pointer)"
            elif t is bytes:
                b = a
                kind = "bytes"
            elif t is Param:
                value = bindings[a.name]
                b = value.to_bytes(8, "little") if a.dtype is None else value.tobytes()
                kind = f"param {a.name!r} ({'pointer' if a.dtype is None else a.dtype})"
            elif t is Deferred:
                b = resolve_deferred(a.obj, f"{label}: argument {i}").to_bytes(8, "little")
                kind = "DLPack pointer"
            else:
                assert isinstance(a, np.generic)
                b = a.tobytes()
                kind = f"numpy {a.dtype}"
            size = sizes[i]
            if len(b) != size:
                raise KernelArgumentError(
                    f"{label}: kernel {self.name!r} parameter {i}: expected {size} bytes, got {len(b)} bytes ({kind})",
                    kernel=self.name,
                    index=i,
                    expected=size,
                    given=len(b),
                )
            off = self.offsets[i]
            data[off : off + size] = b
        if data:
            ctypes.memmove(self._scratch_addr, bytes(data), len(data))
        return self.params_address

    def __repr__(self) -> str:
        return f"<KernelInfo {self.name!r} params={list(zip(self.offsets, self.sizes))}>"


_INFO: dict[tuple[bool, int], KernelInfo] = {}


def kernel_info(kernel: Any) -> KernelInfo:
    """Return the (cached) :class:`KernelInfo` of a ``cuda.core`` Kernel or raw handle."""
    drv = require_driver()
    handle = kernel if isinstance(kernel, (drv.CUkernel, drv.CUfunction)) else kernel.handle
    key = (isinstance(handle, drv.CUkernel), int(handle))
    info = _INFO.get(key)
    if info is None:
        info = KernelInfo(kernel)
        _INFO[key] = info
    return info
