"""Driver entry points called without ``cuda.bindings``, for the hot loops.

The ``cuda.bindings`` wrapper costs about 1.4 µs per call above the driver
itself (it converts the dependency list and the parameter object on every
call). Explicit construction adds thousands of kernel nodes that differ only in
a few fields of one prepared ``CUgraphNodeParams``, and rebinding sets
thousands of kernel nodes of an executable with prepared parameters. Two ways
around the wrapper live here:

- :data:`NATIVE`, the compiled module ``cudagraph.driver._native`` (built by
  ``pip install``; see ``_native.c``), which takes the driver's entry points as
  addresses (:func:`c_address`) and loops over the nodes in C:
  :func:`kernel_loop` for construction and for executable updates of many
  kernel nodes, ``rebind`` for rebinding a parameter;
- :func:`c_function`, an exported symbol as a ctypes function (lifting reads
  graphs through these; see ``_c_read.py``).

Where the module was not built, a symbol cannot be found (an older driver, no
``libcuda.so.1``), or ``CUDAGRAPH_NO_C_ENTRY=1`` is set, these return ``None``
and the callers keep using ``cuda.bindings``.
"""

from __future__ import annotations

import ctypes
import importlib
import os
from types import ModuleType
from typing import Any

__all__ = ["NATIVE", "c_address", "c_function", "kernel_loop", "use_kernel"]


def _load_native() -> ModuleType | None:
    if os.environ.get("CUDAGRAPH_NO_C_ENTRY"):
        return None
    try:
        return importlib.import_module("cudagraph.driver._native")
    except ImportError:
        return None


#: The compiled hot loops, or ``None`` where the extension was not built or is turned off.
NATIVE: Any = _load_native()

_FUNCTIONS: dict[str, Any] = {}


def c_function(symbol: str) -> Any:
    """The driver's exported ``symbol`` as a ctypes function returning an int, or ``None``.

    Every argument must be passed as a ctypes object (or ``None``): no
    ``argtypes`` are set, so the call converts nothing by lookup.
    """
    if symbol in _FUNCTIONS:
        return _FUNCTIONS[symbol]
    fn = None
    if not os.environ.get("CUDAGRAPH_NO_C_ENTRY"):
        try:
            lib = ctypes.CDLL("libcuda.so.1")  # the library cuda.bindings already loaded
            fn = getattr(lib, symbol)
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
    _FUNCTIONS[symbol] = fn
    return fn


def c_address(symbol: str) -> int | None:
    """The address of the driver's exported ``symbol`` for :data:`NATIVE`, or ``None``.

    ``None`` also when the compiled module is unavailable: the address is of use only to it.
    """
    if NATIVE is None:
        return None
    fn = c_function(symbol)
    return None if fn is None else ctypes.cast(fn, ctypes.c_void_p).value


def kernel_loop(target: int, params_address: int, set_mode: bool = False) -> Any:
    """A compiled ``KernelLoop``, or ``None`` without the C path.

    It adds nodes to the driver graph ``target`` with the ``CUgraphNodeParams`` at
    ``params_address`` (of kernel type, for kernel nodes) or, with ``set_mode``, sets
    kernel nodes of the executable ``target`` with the ``CUDA_KERNEL_NODE_PARAMS`` at
    ``params_address``.
    """
    fn = c_address("cuGraphExecKernelNodeSetParams_v2" if set_mode else "cuGraphAddNode_v2")
    if fn is None:
        return None
    from ..definition.nodes import KernelNode, Node

    return NATIVE.KernelLoop(fn, target, params_address, KernelNode, Node, set_mode)


def use_kernel(loop: Any, kernel: Any, info: Any) -> None:
    """Tell ``loop`` that its parameters now hold ``info``'s function (``kernel``'s) and argument buffer."""
    loop.use(kernel, info._kinds, info.offsets, info.sizes, info._scratch_addr, len(info._scratch))
