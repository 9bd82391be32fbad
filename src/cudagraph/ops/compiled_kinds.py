"""The node kinds whose parameters the compiled construction loop writes itself (``KernelLoop.simple``).

Adding a fill, a 1-D copy or an empty node through ``cuda.bindings`` costs
several Python setter calls per node (a copy's on top of its two memory-type
queries); the compiled loop writes the same bytes from the node's slots
(``bench/node_kinds.py``: lower; ``tests/test_native_simple_cpu.py`` compares
them byte for byte with the kinds' own
:meth:`~cudagraph.ops.kinds.base.KindOps.params`). Which node class is written
as what comes from the kinds' ``compiled`` attribute, not from a list here.
"""

from __future__ import annotations

import functools
from typing import Any

from ..definition import diff as _diff
from ..definition.nodes import KernelNode, Node
from ..definition.param import Param
from ..definition.param_offset import ParamAt
from ..driver.c_entry import NATIVE, NATIVE_SLOTS, c_address
from ..driver.kernel_args import compiled_bindings
from .operands import LOWEST_VALID_ADDRESS
from .registry import OPS

__all__ = [
    "ROLES",
    "STREAM_CALLS",
    "add_simple_kinds",
    "add_stream_kinds",
    "compiled_classes",
    "compiled_layout",
]

#: What the compiled loop can write, in the order ``KernelLoop.simple`` takes the node classes.
ROLES = ("memset", "memcpy", "empty")

#: The stream calls of fills and 1-D copies, in the order ``StreamLauncher.simple`` takes their addresses
#: (the calls the kinds' :meth:`~cudagraph.ops.kinds.base.KindOps.issue` make through ``cuda.bindings``).
STREAM_CALLS = (
    "cuMemsetD8Async",
    "cuMemsetD16Async",
    "cuMemsetD32Async",
    "cuMemsetD2D8Async",
    "cuMemsetD2D16Async",
    "cuMemsetD2D32Async",
    "cuMemcpyAsync",
)


@functools.cache  # (the table is built once, at import)
def compiled_classes() -> tuple[type, ...]:
    """The node class of each of :data:`ROLES` (the one kind whose ops declare it as ``compiled``)."""
    by_role = {ops.compiled: cls for cls, ops in OPS.items() if ops.compiled is not None}
    return tuple(by_role[role] for role in ROLES)


@functools.cache  # (made on first use: ``import cudagraph`` loads no driver module)
def compiled_layout() -> Any:
    """The compiled ``Layout`` that reads the definition's nodes (signatures, diffs, sinks), or ``None``.

    It also diffs fills and 1-D copies where :func:`cudagraph.definition.diff.node_state` records their
    states as the tuples of the slots the compiled module reads, in its order (bench/node_kinds.py: update).
    """
    if NATIVE is None:
        return None
    layout = NATIVE.Layout(KernelNode, Node)
    memset_cls, memcpy_cls = compiled_classes()[:2]
    pairs = ((memset_cls, "memset_node"), (memcpy_cls, "memcpy_node"))
    if all(_diff.state_fields(cls) == NATIVE_SLOTS[role] for cls, role in pairs):
        layout.simple(memset_cls, memcpy_cls)
    layout.params(Param)  # a rebuilt definition's Params (bench/cache_cpu.py: cache.get)
    return layout


def add_simple_kinds(loop: Any, ctx: Any, bindings: dict[str, Any] | None = None) -> None:
    """Let the compiled ``loop`` add (or set) fills, 1-D copies and empty nodes itself.

    Parameters
    ----------
    loop : KernelLoop
        A compiled loop that adds nodes, or sets them (``set_mode``: through
        ``cuGraphExecNodeSetParams``, where the driver has it).
    ctx : CUcontext
        The context fills and copies run on; anything that is not a handle
        leaves these kinds to the caller. A copy's memory types are read from
        C through ``cuPointerGetAttributes``; without that entry point copies
        stay with the caller too.
    bindings : dict, optional
        The parameters' values of this construction (name to address): operands
        that are parameters bound to plain ints are resolved in C too; without
        it they stay with the caller (a setting loop is given each update's
        bindings as its ``bindings`` attribute instead).
    """
    try:
        context = int(ctx)
    except (TypeError, ValueError):
        return
    attributes = c_address("cuPointerGetAttributes") or 0
    set_fn = c_address("cuGraphExecNodeSetParams") or 0
    loop.simple(
        context,
        attributes,
        LOWEST_VALID_ADDRESS,
        *compiled_classes(),
        set_fn,
        Param,
        ParamAt,
        compiled_bindings(bindings),
    )


def add_stream_kinds(launcher: Any) -> None:
    """Let the compiled ``StreamLauncher.issue`` (``Graph.run``) issue fills, 1-D copies and empty nodes itself.

    It reads them as the compiled construction loop does (plain int operands, and
    parameters by the bindings each call is given; a copy's ends asked their memory
    type through ``cuPointerGetAttributes``, from C) and makes the kinds' stream
    calls (:data:`STREAM_CALLS`) in its batches, the GIL released once per batch
    instead of once per call; the capture backend's ``StreamLauncher.capture``
    captures them the same way. A call whose entry point is missing, and every
    operand it does not read, stay with the kinds' ``issue``.

    Parameters
    ----------
    launcher : StreamLauncher
        The compiled launcher (``cudagraph.driver.stream_launch.LAUNCHER``).
    """
    ops = tuple(c_address(name) or 0 for name in STREAM_CALLS)
    attributes = c_address("cuPointerGetAttributes") or 0
    launcher.simple(ops, 0, attributes, LOWEST_VALID_ADDRESS, *compiled_classes(), Param, ParamAt)
