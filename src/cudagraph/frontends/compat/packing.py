"""Kernel arguments as cuda.core packs them, turned into explicitly typed values for cudagraph's strict core.

cuda.core 1.2 packs a Python ``bool`` as a one-byte C ``bool``, a Python ``int`` as a 64-bit ``intptr_t``, a
``float`` as a ``double`` and a ``complex`` as a ``double complex``, and hands the driver the address of each
value; the driver reads as many bytes from there as the kernel's parameter has. So a Python ``int`` given for a
4-byte ``int`` parameter reaches the kernel as its low 4 bytes, and ``True`` given for a ``bool`` parameter as
the byte 1.

:meth:`cudagraph.Graph.kernel` is stricter: every value must have the parameter's size. Compat translates:
a Python ``bool`` becomes the ``int`` 0 or 1 when the node is added (:func:`~.common.kernel_args`), and before
the driver sees a compat graph (instantiate, a handle, ``exe.update(definition)``, a launch on a stream, an
executable view's update) each Python ``int`` given for a parameter of 1, 2, 4 or 8 bytes becomes a numpy
integer of that size holding the bytes the driver would have read (:func:`sized_args`). An ``int`` given for a
wider parameter (a struct) is left as it is, and the core refuses it by name: cuda.core's driver would read
past the end of the 8-byte value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...definition.graph import Graph
from ...driver.kernel_args import kernel_info

__all__ = ["convert_for", "kernel_sizes", "pack_graph", "sized_args"]

#: parameter size -> the signed numpy integer of that size.
_SIGNED = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def _sized(value: int, size: int) -> Any:
    """The Python int ``value`` as the driver reads it from cuda.core's 8-byte ``intptr_t`` for a parameter of
    ``size`` bytes: its low ``size`` bytes, as a numpy integer (``value`` itself where the core packs it so)."""
    if size == 8 and 0 <= value < 1 << 64:
        return value  # (a pointer or a 64-bit value: the core packs the same 8 bytes)
    bits = 8 * size
    low = value & ((1 << bits) - 1)
    return _SIGNED[size](low - (1 << bits) if low >> (bits - 1) else low)


def sized_args(args: tuple[Any, ...], sizes: tuple[int, ...]) -> tuple[Any, ...] | None:
    """``args`` with each Python ``int`` given for a parameter of 1, 2, 4 or 8 bytes (``sizes``: the kernel's
    parameter sizes) made a value of that size (see the module); ``None`` when nothing changes (or the counts
    differ: the core names that)."""
    if len(args) != len(sizes):
        return None
    out: list[Any] | None = None
    for i, (a, size) in enumerate(zip(args, sizes)):
        if type(a) is not int or size not in _SIGNED:
            continue
        v = _sized(a, size)
        if v is not a:
            if out is None:
                out = list(args)
            out[i] = v
    return None if out is None else tuple(out)


def kernel_sizes(kernel: Any) -> tuple[int, ...] | None:
    """The parameter sizes of ``kernel``, or ``None`` where the driver cannot say (no driver, a placeholder
    kernel): the core's own packing then decides, and names what it refuses."""
    try:
        return kernel_info(kernel).sizes
    except Exception:
        return None


def convert_for(kernel: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``args`` for ``kernel`` as cuda.core would pass them (:func:`sized_args`), read from the kernel's layout
    only when a Python ``int`` is among them."""
    if int not in map(type, args):
        return args
    sizes = kernel_sizes(kernel)
    new = None if sizes is None else sized_args(args, sizes)
    return args if new is None else new


def pack_graph(graph: Graph) -> None:
    """Make the Python ``int`` arguments of every kernel node of ``graph`` (at any depth) values of their
    parameters' sizes (:func:`sized_args`), each node updated only where a value changes."""
    sizes_of: dict[int, tuple[int, ...] | None] = {}
    kept: list[Any] = []  # the kernels looked up, alive while their ids are keys
    for g in (graph, *graph._descendants()):
        for n in g._nodes:
            if n.kind != "kernel":
                continue
            args = n.args  # type: ignore[attr-defined]
            if int not in map(type, args):
                continue
            k = n.kernel  # type: ignore[attr-defined]
            if id(k) not in sizes_of:
                sizes_of[id(k)] = kernel_sizes(k)
                kept.append(k)
            sizes = sizes_of[id(k)]
            new = None if sizes is None else sized_args(args, sizes)
            if new is not None:
                n.update(args=new)
