"""Kernels from the ecosystem: Numba ``@cuda.jit`` dispatchers, CuPy ``RawKernel`` / ``RawModule`` functions
and raw integer handles, converted to what the kernel machinery takes (a ``cuda.core`` ``Kernel`` or a
``CUkernel`` / ``CUfunction``).

Each kind is recognized by its type name, so no library is imported to test an object:

- a CuPy ``RawKernel`` (``kernel.kernel.ptr``) or the ``Function`` of ``RawModule.get_function``
  (``function.ptr``): a ``CUfunction``;
- a Numba ``CUDADispatcher``: its compiled overload for the argument types (the one overload of an
  explicit signature, else compiled from the types of the arguments, as calling it would), whose
  ``CUfunction`` (or ``cuda.core`` ``Kernel``) is launched; array arguments are passed the way Numba
  passes them (meminfo, parent, size, itemsize, data, shape, strides);
- a Python ``int``: a ``CUkernel`` address, through ``cuda.core``'s ``Kernel.from_handle`` (a
  ``CUfunction`` address is given as ``cuda.bindings.driver.CUfunction(address)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import OperandError
from .calls import require_driver

__all__ = ["FOREIGN_KERNEL_TYPES", "ForeignKernel", "foreign_handle", "is_foreign", "resolve"]

#: Type names of the foreign kernels (tested by name: no library is imported to recognize one).
FOREIGN_KERNEL_TYPES = frozenset({"CUDADispatcher", "RawKernel", "Function", "int"})

_NUMBA_SCALARS = {
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
}


def is_foreign(kernel: Any) -> bool:
    """``True`` for a kernel this module converts (by type name; ``bool`` is not a kernel)."""
    return type(kernel).__name__ in FOREIGN_KERNEL_TYPES and type(kernel) is not bool


class ForeignKernel:
    """A foreign kernel converted: what to launch and how its arguments are passed.

    Attributes
    ----------
    source : object
        The object given (kept alive: it owns the module).
    kernel : cuda.core Kernel or CUfunction or CUkernel
        What the kernel machinery launches.
    convert : callable or None
        ``convert(args, what) -> args`` for kernels whose arguments are expanded (Numba), else ``None``.
    """

    __slots__ = ("source", "kernel", "convert")

    def __init__(self, source: Any, kernel: Any, convert: Callable[[tuple[Any, ...], str], tuple[Any, ...]] | None):
        self.source = source
        self.kernel = kernel
        self.convert = convert

    def __repr__(self) -> str:
        return f"<ForeignKernel {type(self.source).__name__} -> {type(self.kernel).__name__}>"


# id(source) -> ForeignKernel (the source is held, so its id stays its own); Numba: (id, types) keys.
_CACHE: dict[Any, ForeignKernel] = {}


def _cupy(kernel: Any, what: str) -> ForeignKernel:
    fn = kernel if type(kernel).__name__ == "Function" else getattr(kernel, "kernel", None)
    ptr = getattr(fn, "ptr", None)
    if not isinstance(ptr, int) or isinstance(ptr, bool) or ptr <= 0:
        raise OperandError(f"{what}: a {type(kernel).__name__} without a loaded CUfunction (no .ptr)")
    return ForeignKernel(kernel, require_driver().CUfunction(ptr), None)


def _from_int(handle: int, what: str) -> ForeignKernel:
    if handle <= 0 or handle >= 1 << 64:
        raise OperandError(f"{what}: {handle} is not a CUkernel handle")
    try:
        from cuda.core import Kernel
    except ImportError as exc:  # pragma: no cover - cuda.core is a dependency
        raise OperandError(f"{what}: an int kernel handle needs cuda.core's Kernel.from_handle ({exc})") from exc
    return ForeignKernel(handle, Kernel.from_handle(handle), None)


# ------------------------------------------------------------------------------------------------ Numba


def _numba_handle(overload: Any, what: str) -> Any:
    """The ``cuda.core`` Kernel or ``CUfunction`` of a compiled Numba kernel (bound to the current context)."""
    bind = getattr(overload, "bind", None)
    if bind is not None:
        bind()
    cufunc = overload._codelibrary.get_cufunc()
    core = getattr(cufunc, "kernel", None)
    if core is not None and type(core).__name__ == "Kernel":
        return core
    handle = getattr(cufunc, "handle", None)
    drv = require_driver()
    if isinstance(handle, (drv.CUfunction, drv.CUkernel)):
        return handle
    value = getattr(handle, "value", handle)  # a ctypes c_void_p under the ctypes binding
    if isinstance(value, int) and value > 0:
        return drv.CUfunction(value)
    raise OperandError(f"{what}: cannot read the CUfunction of Numba kernel {getattr(overload, 'entry_name', '?')}")


def _numba_arg(ty: Any, value: Any, out: list[Any], what: str) -> None:
    """Append the kernel parameters Numba passes for ``value`` of Numba type ``ty``."""
    tname = type(ty).__name__
    if tname == "Array":
        cai = getattr(value, "__cuda_array_interface__", None)
        if cai is None:
            raise OperandError(
                f"{what}: Numba parameter of type {ty} takes a device array (__cuda_array_interface__), "
                f"got {type(value).__name__}"
            )
        shape = tuple(int(s) for s in cai["shape"])
        itemsize = int(np.dtype(cai["typestr"]).itemsize)
        strides = cai.get("strides")
        if strides is None:
            acc, strides_l = itemsize, []
            for s in reversed(shape):
                strides_l.append(acc)
                acc *= s
            strides = tuple(reversed(strides_l))
        if len(shape) != ty.ndim:
            raise OperandError(f"{what}: Numba parameter of type {ty} takes {ty.ndim} dimensions, got {len(shape)}")
        size = 1
        for s in shape:
            size *= s
        out += [0, 0, np.int64(size), np.int64(itemsize), int(cai["data"][0])]
        out += [np.int64(s) for s in shape]
        out += [np.int64(s) for s in strides]
    elif tname == "CPointer":
        out.append(int(value))
    elif str(ty) in _NUMBA_SCALARS:
        out.append(np.dtype(str(ty)).type(value))
    elif str(ty) == "bool":
        out.append(np.bool_(value))
    elif str(ty) in ("complex64", "complex128"):
        part = np.float32 if str(ty) == "complex64" else np.float64
        out += [part(complex(value).real), part(complex(value).imag)]
    else:
        raise OperandError(f"{what}: Numba parameter type {ty} is not supported (arrays, pointers, scalars are)")


def _numba(dispatcher: Any, args: tuple[Any, ...] | None, what: str) -> ForeignKernel:
    overloads = dict(getattr(dispatcher, "overloads", {}))
    if args is None:
        if len(overloads) != 1:
            raise OperandError(
                f"{what}: a Numba dispatcher with {len(overloads)} compiled overloads: give the arguments "
                "(cudagraph.launch) or an explicit signature"
            )
        overload = next(iter(overloads.values()))
    else:
        try:
            types = tuple(dispatcher.typeof_pyval(a) for a in args)
        except Exception as exc:
            types = None
            why = f"{type(exc).__name__}: {exc}"
        overload = overloads.get(types) if types is not None else None
        if overload is None:
            if len(overloads) == 1 and not getattr(dispatcher, "_can_compile", True):
                overload = next(iter(overloads.values()))  # the explicit signature; values are converted
            elif types is None:
                raise OperandError(f"{what}: cannot type the arguments of Numba kernel for compilation ({why})")
            else:
                try:
                    overload = dispatcher.compile(types)
                except Exception as exc:
                    raise OperandError(
                        f"{what}: Numba could not compile the kernel for {types}: {type(exc).__name__}: {exc}"
                    ) from exc
    argtypes = tuple(getattr(overload, "argument_types", ()) or overload.signature.args)

    def convert(values: tuple[Any, ...], where: str) -> tuple[Any, ...]:
        if len(values) != len(argtypes):
            raise OperandError(f"{where}: the Numba kernel takes {len(argtypes)} arguments, got {len(values)}")
        out: list[Any] = []
        for i, (ty, v) in enumerate(zip(argtypes, values)):
            _numba_arg(ty, v, out, f"{where}: argument {i}")
        return tuple(out)

    return ForeignKernel(dispatcher, _numba_handle(overload, what), convert)


# ------------------------------------------------------------------------------------------------ entry points


def resolve(kernel: Any, args: tuple[Any, ...] | None, what: str) -> ForeignKernel:
    """Convert a foreign kernel (see the module docstring); cached per object (and per argument types for Numba).

    Parameters
    ----------
    kernel : object
        A Numba dispatcher, a CuPy RawKernel or Function, or an int ``CUkernel`` handle.
    args : tuple or None
        The launch arguments (a Numba dispatcher is specialised from their types), or ``None``.
    what : str
        The call named in error messages.

    Raises
    ------
    OperandError
        Not a foreign kernel, or one that cannot be converted.
    """
    tname = type(kernel).__name__
    if tname == "CUDADispatcher":
        if args is None:
            key: Any = (id(kernel), None)
        else:
            key = (id(kernel), tuple(map(type, args)), tuple(getattr(a, "dtype", None) for a in args))
        hit = _CACHE.get(key)
        if hit is not None and hit.source is kernel:
            return hit
        fk = _numba(kernel, args, what)
    else:
        key = kernel if tname == "int" else id(kernel)
        hit = _CACHE.get(key)
        if hit is not None and (tname == "int" or hit.source is kernel):
            return hit
        if tname in ("RawKernel", "Function"):
            fk = _cupy(kernel, what)
        elif tname == "int" and type(kernel) is int:
            fk = _from_int(kernel, what)
        else:
            raise OperandError(
                f"{what}: expected a cuda.core Kernel, a CUkernel/CUfunction, a Numba @cuda.jit kernel, "
                f"a CuPy RawKernel/RawModule function or an int CUkernel handle, got {tname}"
            )
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[key] = fk
    return fk


def foreign_handle(kernel: Any) -> Any:
    """What :func:`~cudagraph.driver.kernel_args.kernel_info` reads for a foreign kernel of a node."""
    # A node's arguments are passed as they are (no Numba array expansion: use cudagraph.launch for that).
    return resolve(kernel, None, f"kernel {type(kernel).__name__}").kernel
