"""Kernel parameter layout (``cuKernelGetParamInfo``) and argument packing."""

from __future__ import annotations

import ctypes
import struct
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ..definition.addresses import is_torch_tensor, tensor_address
from ..definition.operands import Deferred, buffer_like, normalize_kernel_args
from ..definition.param import SCALAR_CODES, Param
from ..definition.param_offset import ParamBytes
from ..errors import KernelArgumentError, OperandError
from .calls import check, error_name, require_driver
from .foreign_kernels import FOREIGN_KERNEL_TYPES, foreign_handle

__all__ = ["PACKING_LOCK", "KernelInfo", "compiled_bindings", "kernel_info", "resolve_deferred", "value_types"]

#: Held while kernel arguments are packed into a shared buffer and handed to the driver.
PACKING_LOCK = threading.RLock()


#: ``(dtype kind, itemsize) -> struct code`` of the numpy scalars packed by a ``struct`` format: those a scalar
#: parameter may have (one table, :data:`~cudagraph.definition.param.SCALAR_CODES`, so that every parameter's
#: dtype has a code in the rebinding plans).
_STRUCT_CODES = SCALAR_CODES

#: Where numpy's scalar objects keep their value: right after the object header (its ``PyObject_HEAD``).
_HEADER = object.__basicsize__


def _value_after_header(t: type, dtype: np.dtype[Any]) -> bool:
    """Whether instances of the numpy scalar type ``t`` hold their value's bytes right after the object header
    (numpy's ``PyXxxScalarObject``: ``PyObject_HEAD`` then ``obval``), so the compiled packer copies them from
    there instead of through the buffer protocol (bench/construction.py --cpu, user-style chain: lower).

    Checked on two instances of different values: the bytes there must be their buffer's.
    """
    size = dtype.itemsize
    if t.__basicsize__ < _HEADER + size or dtype.kind not in "biuf":
        return False
    probes = np.array([1, 2], dtype=dtype)
    for i in range(2):
        value = probes[i]
        held = ctypes.string_at(id(value) + _HEADER, size)  # (value is alive and that large)
        if type(value) is not t or held != probes[i : i + 1].tobytes():
            return False
    return True


#: Numpy scalar type of a struct code (bool, the ints, the floats; ``longlong`` too) -> whether its instances
#: hold their value right after the header (checked once, at import).
_VALUE_AFTER_HEADER: dict[type, bool] = {
    d.type: _value_after_header(d.type, d)
    for d in map(np.dtype, np.typecodes["AllInteger"] + np.typecodes["Float"] + "?")
    if (d.kind, d.itemsize) in _STRUCT_CODES
}
#: ``(type, size, is_float)`` of each of those types that does.
_VALUE_TYPES: tuple[tuple[type, int, bool], ...] = tuple(
    (t, np.dtype(t).itemsize, np.dtype(t).kind == "f") for t, ok in _VALUE_AFTER_HEADER.items() if ok
)


def value_types() -> tuple[tuple[type, int, bool], ...]:
    """``(type, size, is_float)`` of every numpy scalar type of a struct code whose instances hold their value's
    ``size`` bytes right after the object header; ``Layout.diff`` compares such arguments by them."""
    return _VALUE_TYPES


def _buffer_address(buf: Any) -> int:
    return int(buf.handle)


def _tensor_address(t: Any) -> int:
    """:func:`~cudagraph.definition.addresses.tensor_address`, or a ``ValueError`` for a tensor it does not read
    (the slow path reads that one in full and names it)."""
    address = tensor_address(t)
    if address is None:
        raise ValueError("not a dense CUDA tensor that does not require grad")
    return address


def _exact_bytes(size: int) -> Callable[[bytes], bytes]:
    def conv(b: bytes) -> bytes:
        if len(b) != size:
            raise ValueError("size mismatch")
        return b

    return conv


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
        "_packers",
        "_kinds",
    )

    def __init__(self, kernel: Any) -> None:
        drv = require_driver()
        handle = kernel
        if not isinstance(kernel, (drv.CUkernel, drv.CUfunction)):
            handle = kernel.handle
        # A cuda.core Kernel is watched: once freed, its handle may name another
        # kernel. Raw handles are transient wrappers and are not watched.
        self.kernel: Any = None
        if handle is not kernel:
            try:
                self.kernel = weakref.ref(kernel)
            except TypeError:
                pass
        self.handle = handle
        self.is_library_kernel = isinstance(handle, drv.CUkernel)
        get_info = drv.cuKernelGetParamInfo if self.is_library_kernel else drv.cuFuncGetParamInfo
        get_name = drv.cuKernelGetName if self.is_library_kernel else drv.cuFuncGetName
        try:
            raw = check(get_name(handle), get_name.__name__)
            self.name = raw.decode() if isinstance(raw, bytes) else str(raw)
        except Exception:
            self.name = f"<kernel {int(handle):#x}>"
        count = _param_count(drv, handle, self.is_library_kernel)
        offsets: list[int] = []
        sizes: list[int] = []
        while count is None or len(offsets) < count:
            err, off, size = get_info(handle, len(offsets))
            if err:
                if count is None and error_name(err) == "CUDA_ERROR_INVALID_VALUE":
                    break  # probed one past the last parameter
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
        # argument types -> (struct.Struct, ((position, converter), ...) or None)
        self._packers: dict[tuple[type, ...], tuple[struct.Struct, tuple[tuple[int, Any], ...] | None]] = {}
        # argument types -> one kind letter per argument, for the compiled loop (see _native_loop.c)
        self._kinds: dict[tuple[type, ...], bytes] = {}

    def pack(self, args: tuple[Any, ...], node: Any, bindings: dict[str, Any]) -> int:
        """Write ``args`` into the packing buffer; return the ``void**`` address for ``kernelParams``.

        The driver copies the values when a node is added or a launch is
        made, so one buffer per kernel is reused and the returned address is
        always :attr:`params_address`. Arguments whose types were seen before
        in the same order are packed by one ``struct.pack_into`` call.

        Parameters
        ----------
        args : tuple
            The node's arguments.
        node : Node or str
            The node (or a label) named in error messages.
        bindings : dict
            Parameter values.

        Raises
        ------
        KernelArgumentError
            Wrong argument count, or an argument whose size differs from the
            parameter's.
        OperandError
            An argument of a kind that cannot be passed.
        """
        fast = self._packers.get(tuple(map(type, args)))
        if fast is not None:
            st, convs = fast
            try:
                if convs is None:
                    st.pack_into(self._scratch, 0, *args)
                else:
                    vals = list(args)
                    for i, c in convs:
                        vals[i] = c(vals[i])
                    st.pack_into(self._scratch, 0, *vals)
                return self.params_address
            except (struct.error, OverflowError, TypeError, ValueError):
                pass  # the slow path below names the argument at fault
        data = self._pack_slow(args, str(getattr(node, "label", node)), bindings)
        # Learning reads the arguments (Python code that may pack this kernel again): done before the
        # buffer is written, so that it holds these arguments when the caller launches.
        self._learn(args)
        if data:
            ctypes.memmove(self._scratch_addr, data, len(data))
        return self.params_address

    def _learn(self, args: tuple[Any, ...]) -> None:
        """Remember a struct format for this sequence of argument types, if it has one, and the kinds the compiled
        packer reads them by (a :class:`~cudagraph.Param` has a kind, read from the bindings of the compiled
        lowering, and no struct format: the Python path packs it in :meth:`_pack_slow`)."""
        fmt = ["<"]
        convs: list[Any] = []
        kinds = bytearray()
        pos = 0
        python = True  # a struct format for the Python fast path
        for a, off, size in zip(args, self.offsets, self.sizes):
            t = type(a)
            conv: Callable[[Any], Any] | None = None
            if t is Param:  # read from the bindings (bench/cache_cpu.py: instantiate + close, a parameter per node)
                code, kind, python = f"{size}s", b"M", False
            elif t is int:
                code, kind = "Q", b"P"
            elif t is bytes:
                code, kind = f"{size}s", b"B"
                conv = _exact_bytes(size)
            elif isinstance(a, np.generic) and t is a.dtype.type:
                # (not a subclass: struct would pack what its __float__ or __index__ says, not its bytes)
                code = _STRUCT_CODES.get((a.dtype.kind, a.dtype.itemsize), "")
                kind = b"N" if _VALUE_AFTER_HEADER.get(t) else b"S"
            elif is_torch_tensor(t):  # cg.launch given a tensor (bench/launch_targets.py)
                code, kind, conv = "Q", b"T", _tensor_address
            elif buffer_like(a):
                code, kind, conv = "Q", b"H", _buffer_address
            else:
                return  # params, ctypes values, DLPack...: always the slow path
            if not code or struct.calcsize("<" + code) != size:
                return
            if off < pos:
                return
            fmt.append("x" * (off - pos) + code)
            convs.append(conv)
            kinds += kind
            pos = off + size
        types = tuple(map(type, args))
        if python:
            st = struct.Struct("".join(fmt))
            at = tuple((i, c) for i, c in enumerate(convs) if c is not None)
            self._packers[types] = (st, at or None)
        self._kinds[types] = bytes(kinds)

    def _pack_slow(self, args: tuple[Any, ...], label: str, bindings: dict[str, Any]) -> bytes:
        sizes = self.sizes
        if len(args) != len(sizes):
            raise KernelArgumentError(
                f"{label}: kernel {self.name!r} takes {len(sizes)} parameters "
                f"(sizes {list(sizes)} bytes), got {len(args)} arguments",
                kernel=self.name,
                expected=len(sizes),
                given=len(args),
            )
        if ParamBytes in map(type, args):  # pointers into parameters' memory: written from the bindings
            args = tuple(a.resolve(bindings) if type(a) is ParamBytes else a for a in args)
        nargs = normalize_kernel_args(args, label)
        data = bytearray(self.total)
        for i, a in enumerate(nargs):
            t = type(a)
            if t is int:
                if a < 0 or a >= 1 << 64:
                    raise OperandError(f"{label}: argument {i}: {a} is not a 64-bit pointer value")
                b = a.to_bytes(8, "little")
            elif t is bytes:
                b = a
            elif t is Param:
                value = bindings[a.name]
                b = value.to_bytes(8, "little") if a.dtype is None else value.tobytes()
            elif t is Deferred:
                b = resolve_deferred(a.obj, f"{label}: argument {i}").to_bytes(8, "little")
            else:
                assert isinstance(a, np.generic)
                b = a.tobytes()
            size = sizes[i]
            if len(b) != size:
                raise KernelArgumentError(
                    f"{label}: kernel {self.name!r} parameter {i}: expected {size} bytes, got {len(b)} bytes "
                    f"({_argument_kind(a)})",
                    kernel=self.name,
                    index=i,
                    expected=size,
                    given=len(b),
                )
            off = self.offsets[i]
            data[off : off + size] = b
        return bytes(data)

    def __repr__(self) -> str:
        return f"<KernelInfo {self.name!r} params={list(zip(self.offsets, self.sizes))}>"


def _argument_kind(a: Any) -> str:
    """What a normalized argument is, for a message (made only when one is raised: ``str`` of a numpy dtype
    costs microseconds, and the slow path packs every node with a parameter argument)."""
    t = type(a)
    if t is int:
        return "Python int (a 64-bit pointer)"
    if t is bytes:
        return "bytes"
    if t is Param:
        return f"param {a.name!r} ({'pointer' if a.dtype is None else a.dtype})"
    if t is Deferred:
        return "DLPack pointer"
    return f"numpy {a.dtype}"


def compiled_bindings(bindings: dict[str, Any] | None) -> dict[str, Any] | None:
    """The bindings as the compiled loops read them: a pointer parameter's address (an int) as it is, a scalar
    parameter's value (a numpy scalar) as its bytes, which the compiled packer copies for a kernel argument
    (the Python packer writes ``value.tobytes()``: the same bytes). ``bindings`` itself when no value changes."""
    if not bindings or not any(isinstance(v, np.generic) for v in bindings.values()):
        return bindings
    return {k: v.tobytes() if isinstance(v, np.generic) else v for k, v in bindings.items()}


_INFO: dict[tuple[bool, int], KernelInfo] = {}


def _param_count(drv: Any, handle: Any, is_library_kernel: bool) -> int | None:
    """The kernel's parameter count from ``cu{Kernel,Func}GetParamCount`` (CUDA 13), else ``None``.

    Without it the count is found by probing ``cu*GetParamInfo`` one index past
    the end, which the driver answers with an error (seen by the sanitizer).
    """
    name = "cuKernelGetParamCount" if is_library_kernel else "cuFuncGetParamCount"
    get_count = None if name in _NO_PARAM_COUNT else getattr(drv, name, None)
    if get_count is None:
        return None
    try:
        err, count = get_count(handle)
    except Exception as exc:  # the running driver lacks it
        _NO_PARAM_COUNT.add(name)
        # The exception may be a shared instance: drop the frames it would keep alive.
        exc.__traceback__ = None
        return None
    return None if err else int(count)


_NO_PARAM_COUNT: set[str] = set()


def for_node(exc: OperandError, node: Any) -> OperandError:
    """``exc`` (a refusal of :func:`kernel_info`) with the label of ``node``, the node it was asked for, in front."""
    return OperandError(f"{node.label}: {exc}")


def kernel_info(kernel: Any) -> KernelInfo:
    """Return the (cached) :class:`KernelInfo` of a ``cuda.core`` Kernel or raw handle.

    Raises
    ------
    OperandError
        ``kernel`` is neither a handle nor an object with one (a caller that knows the node names it with
        :func:`for_node`).
    """
    drv = require_driver()
    if type(kernel).__name__ in FOREIGN_KERNEL_TYPES:  # Numba, CuPy, int handle: converted once, cached
        kernel = foreign_handle(kernel)
    if isinstance(kernel, (drv.CUkernel, drv.CUfunction)):
        handle = kernel
    else:
        handle = getattr(kernel, "handle", None)
        if handle is None:  # a type of a kernel's name that is not one (the definition layer knows types by name)
            raise OperandError(
                "kernel: expected a cuda.core Kernel or a cuda.bindings CUkernel/CUfunction, got "
                f"{type(kernel).__module__}.{type(kernel).__qualname__} (it has no handle)"
            )
    key = (isinstance(handle, drv.CUkernel), int(handle))
    info = _INFO.get(key)
    if info is not None and info.kernel is not None and info.kernel() is None:
        info = None  # the kernel was freed; its handle may now name another kernel
    if info is None:
        info = KernelInfo(kernel)
        _INFO[key] = info
    return info
