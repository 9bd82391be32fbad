"""Kernels prepared for stream launches: ``cudagraph.launch`` on a stream, ``Graph.run`` and the capture backend.

Every stream launch of a kernel without launch attributes goes through one of
two equivalent paths that make the same ``cuLaunchKernel`` call (function,
grid, block, shared memory, stream, argument bytes):

- the Python path (the reference): the arguments are packed into the kernel's
  shared buffer by :meth:`KernelInfo.pack <cudagraph.driver.kernel_args.KernelInfo.pack>`
  (``PACKING_LOCK`` held) and launched by :func:`launch_packed` through
  ``cuda.bindings``;
- :data:`LAUNCHER`, the compiled ``StreamLauncher`` (``_native_launch.c``), where the
  module is built and the driver's entry points were found: it packs into the
  kernel's own buffer (its ``LaunchKernel``) by the argument kinds the Python
  packer learned, and calls ``cuLaunchKernel`` through its address, with no
  Python frame per launch. It declines whatever it has not learned (the caller
  then takes the Python path, which checks and names every error).

:func:`prepared` reads a kernel's parameter layout once (one
:class:`PreparedLaunch` per kernel object, holding it, or per value of an int
handle) and registers its ``LaunchKernel`` where the compiled launcher finds it.
"""

from __future__ import annotations

from typing import Any

from ..definition.dims import MAX_BLOCK, MAX_GRID
from ..definition.nodes import KernelNode, Node
from .c_entry import NATIVE, c_address
from .calls import require_driver
from .kernel_args import KernelInfo, kernel_info

__all__ = [
    "CONFIG_ATTRS",
    "LAUNCHER",
    "PreparedLaunch",
    "compiled_launcher",
    "forget",
    "launch_packed",
    "prepared",
    "prepared_already",
]

#: The attribute names the compiled launcher reads on a ``cuda.core`` ``LaunchConfig`` (grid, block,
#: shared memory, cluster, cooperative) and on a stream target (the stream protocol).
CONFIG_ATTRS = ("grid", "block", "shmem_size", "cluster", "is_cooperative", "__cuda_stream__")

#: Kernels prepared at most (then the tables start afresh; each entry holds its kernel alive).
MAX_KERNELS = 1024


class PreparedLaunch:
    """A kernel ready for stream launches.

    Attributes
    ----------
    source : object
        The kernel object it was prepared for (held: its id keys the tables).
    info : KernelInfo
        Its parameter layout and packing buffer.
    func : CUfunction
        The handle launched (a ``CUkernel`` is launched as a function of the current context, as
        ``cuda.core`` does).
    native : LaunchKernel or None
        Its compiled twin, registered for :data:`LAUNCHER` (``None`` without it).
    """

    __slots__ = ("source", "info", "func", "native")

    def __init__(self, source: Any, info: KernelInfo) -> None:
        self.source = source
        self.info = info
        handle = int(info.handle)
        self.func = require_driver().CUfunction(handle)
        self.native: Any = None
        if LAUNCHER is not None:
            self.native = NATIVE.LaunchKernel(source, handle, info._kinds, info.offsets, info.sizes)

    def __repr__(self) -> str:
        return f"<PreparedLaunch {self.info.name!r}{' (compiled)' if self.native is not None else ''}>"


# id(kernel) -> PreparedLaunch (each holds its kernel: the id stays its own)
_PREPARED: dict[int, PreparedLaunch] = {}
# int handle -> PreparedLaunch: an int names its kernel by value, and each call may pass a new int object
_PREPARED_INTS: dict[int, PreparedLaunch] = {}
# id(kernel) -> LaunchKernel, and -(handle + 1) -> LaunchKernel for an int handle (found by value):
# the table the compiled launcher reads
_NATIVE_KERNELS: dict[int, Any] = {}


def prepared_already(kernel: Any) -> PreparedLaunch | None:
    """The :class:`PreparedLaunch` of ``kernel`` if it was prepared (an int handle: by value), else ``None``."""
    if type(kernel) is int:
        return _PREPARED_INTS.get(kernel)
    entry = _PREPARED.get(id(kernel))
    return entry if entry is not None and entry.source is kernel else None


def prepared(kernel: Any) -> PreparedLaunch:
    """The :class:`PreparedLaunch` of ``kernel`` (a ``cuda.core`` Kernel, a handle or a foreign kernel).

    Prepared once per kernel object, and once per value for an int handle; at most
    :data:`MAX_KERNELS` are kept (then every table starts afresh).

    Raises
    ------
    DriverError
        The driver cannot read the kernel's parameters.
    OperandError
        ``kernel`` is no kernel.
    """
    entry = prepared_already(kernel)
    if entry is not None:
        return entry
    entry = PreparedLaunch(kernel, kernel_info(kernel))
    if len(_PREPARED) + len(_PREPARED_INTS) >= MAX_KERNELS:
        forget()
    if type(kernel) is int:
        _PREPARED_INTS[kernel] = entry
    else:
        _PREPARED[id(kernel)] = entry
    if entry.native is not None:
        if type(kernel) is not int:
            _NATIVE_KERNELS[id(kernel)] = entry.native
        elif 0 <= kernel < 2**63 - 1:  # by value, under a key no id() is (cg_launcher_kernel)
            _NATIVE_KERNELS[-kernel - 1] = entry.native
    return entry


def forget() -> None:
    """Forget every prepared kernel (the next launch of each prepares it again)."""
    _PREPARED.clear()
    _PREPARED_INTS.clear()
    _NATIVE_KERNELS.clear()


def launch_packed(p: PreparedLaunch, params: int, grid: Any, block: Any, smem: int, stream: Any) -> Any:
    """``cuLaunchKernel`` of ``p`` with the arguments packed at ``params`` through ``cuda.bindings``; the ``CUresult``.

    The Python twin of the compiled launches: hold ``PACKING_LOCK`` from the packing to this call.
    """
    return require_driver().cuLaunchKernel(
        p.func, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, stream, params, 0
    )[0]


def compiled_launcher(launch: int | None, capture_info: int | None, update_deps: int | None) -> Any:
    """A compiled ``StreamLauncher`` calling the given entry points (addresses), or ``None`` without the module.

    ``launch`` is ``cuLaunchKernel``; the capture loop also needs ``cuStreamGetCaptureInfo_v3`` and
    ``cuStreamUpdateCaptureDependencies_v2`` (CUDA 12.3+), and declines every node without them.
    """
    if NATIVE is None or getattr(NATIVE, "StreamLauncher", None) is None or not launch:
        return None
    return NATIVE.StreamLauncher(
        launch,
        capture_info or 0,
        update_deps or 0,
        KernelNode,
        Node,
        _NATIVE_KERNELS,
        CONFIG_ATTRS,
        MAX_GRID + MAX_BLOCK,
    )


#: The compiled launcher (``None``: the Python path everywhere).
LAUNCHER: Any = compiled_launcher(
    c_address("cuLaunchKernel"),
    c_address("cuStreamGetCaptureInfo_v3"),
    c_address("cuStreamUpdateCaptureDependencies_v2"),
)
