"""A driver that does nothing, for ``bench/construction.py --cpu``: cudagraph's own work, measured without a GPU.

Every driver entry point that defining, lowering and instantiating a kernel graph reaches is replaced
(``cuda.bindings`` must be importable; no driver library is loaded):

- ``cuGraphAddNode_v2``, the entry point the compiled loop calls, is a C function compiled here with
  the system C compiler (``cc``): it hands out a new handle and does nothing else, so the time above it
  is cudagraph's. Without a compiler it is a ctypes callback, whose own cost is measured and reported;
- ``cuGraphAddNode`` (``cuda.bindings``, the path without the compiled module), ``cuGraphCreate``,
  ``cuGraphDestroy``, ``cuGraphInstantiateWithParams`` and ``cuGraphExecDestroy`` are Python functions
  returning success (the cost of ``cuGraphAddNode`` alone is reported, see :func:`bindings_add_us`);
- the current context is a name, and the kernels are stand-ins with the layout of
  ``inc(float* x, float a, int n)`` (the definition layer recognises ``CUkernel`` by type name);
- the buffer is a stand-in with the attributes of a cuda.core ``Buffer`` (``handle``, ``size``,
  ``memory_resource``, ``is_device_accessible``).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from _common import compile_c

__all__ = ["FakeDriver", "bindings_add_us", "fake_driver", "fake_info"]

_FAKE_ADD_C = r"""
#include <stddef.h>
#include <stdint.h>
static uintptr_t next_handle = 0x100000;
int cuGraphAddNode_v2(void **out, void *graph, void *const *deps, const void *edges, size_t n, void *params)
{
    (void)graph; (void)deps; (void)edges; (void)n; (void)params;
    *out = (void *)(next_handle++);
    return 0;
}
"""

#: inc(float* x, float a, int n): parameter offsets and sizes.
LAYOUT = ((0, 8, 12), (8, 4, 4))


class CUkernel:
    """A kernel stand-in (recognised by its type name)."""


class Buffer:
    """A device buffer stand-in with the attributes cudagraph reads of a cuda.core ``Buffer``."""

    __slots__ = ("handle", "size", "memory_resource", "is_device_accessible", "__weakref__")

    def __init__(self, address: int, size: int) -> None:
        self.handle = address
        self.size = size
        self.memory_resource = None
        self.is_device_accessible = True


@dataclass
class FakeDriver:
    """What :func:`fake_driver` installed: the kernels, a buffer, the patched driver module."""

    kernels: tuple[Any, ...]
    buf: Any
    driver: Any
    add_node: str  # how cuGraphAddNode_v2 is faked: "C function" or "ctypes callback (... µs per call)"


def _compiled_add() -> tuple[Any, int] | None:
    """(library, address of cuGraphAddNode_v2) compiled with the system compiler, or ``None``."""
    dll = compile_c(_FAKE_ADD_C, "fake-driver")
    if dll is None:
        return None
    return dll, int(ctypes.cast(dll.cuGraphAddNode_v2, ctypes.c_void_p).value or 0)


def _callback_add() -> tuple[Any, int]:
    """A ctypes callback standing for cuGraphAddNode_v2 (slower than the C function: its cost is reported)."""
    proto = ctypes.CFUNCTYPE(
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
    )
    state = [0x100000]

    def add(out: Any, graph: Any, deps: Any, edges: Any, n: int, params: Any) -> int:
        state[0] += 1
        out[0] = state[0]
        return 0

    cb = proto(add)
    return cb, int(ctypes.cast(cb, ctypes.c_void_p).value or 0)


def _callback_us(cb: Any) -> float:
    out = ctypes.c_void_p()
    n = 20000
    t0 = time.process_time()
    for _ in range(n):
        cb(ctypes.byref(out), None, None, None, 0, None)
    return (time.process_time() - t0) / n * 1e6


def fake_info(
    handle: int, offsets: tuple[int, ...] = LAYOUT[0], sizes: tuple[int, ...] = LAYOUT[1], prefix: str = "inc"
) -> Any:
    """A ``KernelInfo`` read from no driver: the ``CUkernel`` ``handle``, named ``prefix`` + hex handle,
    with parameters of ``sizes`` bytes at ``offsets`` (default: ``inc``'s) and its own packing buffer.

    The one copy of this stand-in: the CPU tests of the compiled loops and stream launches use it too
    (``tests/driver_fakes.py``).
    """
    from cuda.bindings import driver as drv

    from cudagraph.driver.kernel_args import KernelInfo

    info = KernelInfo.__new__(KernelInfo)
    info.kernel = None
    info.handle = drv.CUkernel(handle)
    info.is_library_kernel = True
    info.name = f"{prefix}{handle:#x}"
    info.offsets, info.sizes = offsets, sizes
    info.total = max((o + s for o, s in zip(offsets, sizes)), default=0)  # (0: a kernel without parameters)
    info._scratch = (ctypes.c_char * max(info.total, 1))()
    info._scratch_addr = ctypes.addressof(info._scratch)
    info._ptrs = (ctypes.c_void_p * len(offsets))(*[info._scratch_addr + o for o in offsets])
    info.params_address = ctypes.addressof(info._ptrs)
    info._packers = {}
    info._kinds = {}
    return info


_ADD_HANDLE = [0x200000]
_ADD_TYPES: list[Any] = []  # (CUDA_SUCCESS, CUgraphNode), read once


def _bindings_add(graph: Any, deps: Any, edges: Any, n: int, params: Any) -> Any:
    if not _ADD_TYPES:
        from cuda.bindings import driver as drv

        _ADD_TYPES[:] = [drv.CUresult.CUDA_SUCCESS, drv.CUgraphNode]
    _ADD_HANDLE[0] += 1
    return _ADD_TYPES[0], _ADD_TYPES[1](_ADD_HANDLE[0])


def bindings_add_us() -> float:
    """CPU µs of one call of the fake ``cuGraphAddNode`` of the ``cuda.bindings`` path (part of its lowering)."""
    n = 50000
    t0 = time.process_time()
    for _ in range(n):
        _bindings_add(None, None, None, 1, None)
    return (time.process_time() - t0) / n * 1e6


@contextmanager
def fake_driver(kernel_count: int = 3) -> Iterator[FakeDriver]:
    """Install the fake driver (see the module docstring) for the duration of the block."""
    from cuda.bindings import driver as drv

    import cudagraph.executable.executable as executable
    import cudagraph.materialize.explicit as explicit
    from cudagraph.definition.nodes import KernelNode, Node
    from cudagraph.driver.c_entry import NATIVE

    kernels = tuple(CUkernel() for _ in range(kernel_count))
    infos = {id(k): fake_info(0x7100 + i) for i, k in enumerate(kernels)}
    made = _compiled_add()
    if made is not None:
        keep, address = made
        how = "C function (costs nothing)"
    else:
        keep, address = _callback_add()
        how = f"ctypes callback ({_callback_us(keep):.3f} µs per call, included in lower)"

    def kernel_loop(graph: int, params: int) -> Any:
        return None if NATIVE is None else NATIVE.KernelLoop(address, graph, params, KernelNode, Node)

    ok = drv.CUresult.CUDA_SUCCESS
    patches: list[tuple[Any, str, Any]] = [
        (drv, "cuGraphCreate", lambda flags: (ok, drv.CUgraph(0x5000))),
        (drv, "cuGraphDestroy", lambda graph: (ok,)),
        (drv, "cuGraphAddNode", _bindings_add),
        (drv, "cuGraphInstantiateWithParams", lambda graph, params: (ok, drv.CUgraphExec(0x6000))),
        (drv, "cuGraphExecDestroy", lambda exe: (ok,)),
        (explicit, "ensure_context", lambda: "context"),
        (executable, "ensure_context", lambda: "context"),
        (explicit, "kernel_info", lambda kernel: infos[id(kernel)]),
        (explicit, "kernel_loop", kernel_loop),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    for obj, name, value in patches:
        setattr(obj, name, value)
    try:
        yield FakeDriver(kernels, Buffer(0x7F0000000000, 1 << 22), drv, how)
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)
        del keep
