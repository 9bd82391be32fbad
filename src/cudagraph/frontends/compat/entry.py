"""What a ported cuda.core program imports besides the graph classes: ``Device`` and ``launch``."""

from __future__ import annotations

import functools
from typing import Any

from ...definition.compiled_kernel import define_module
from ...definition.graph import Graph
from ...definition.kinds.kernel import KernelBuilders
from ...definition.path import Path
from ...driver.devices import cuda_core_device
from ...errors import OperandError
from ..launch import remembered_config
from .builder import BUILDING, GraphBuilder, launch_on_stream
from .common import DRIVER_KERNEL_TYPES, GraphCondition

__all__ = ["Device", "launch"]


class Device:
    """cuda.core's ``Device`` whose ``create_graph_builder()`` gives a :class:`GraphBuilder` built explicitly.

    Every other attribute (``set_current``, ``create_stream``, ``allocate``, ``arch``, ...) is
    that of ``cuda.core.Device(device_id)``, looked up when first asked for, so a program that
    imports ``Device`` from here instead of cuda.core runs unchanged.

    Parameters
    ----------
    device_id : int, optional
        The device ordinal (``None``: the current device, as in cuda.core).
    """

    __slots__ = ("_device_id",)

    def __init__(self, device_id: int | None = None) -> None:
        if device_id is not None and (isinstance(device_id, bool) or not isinstance(device_id, int)):
            raise OperandError(f"compat Device: device_id: expected an int or None, got {type(device_id).__name__}")
        self._device_id = device_id

    def create_graph_builder(self) -> GraphBuilder:
        """A new primary :class:`GraphBuilder` (its graph is built explicitly; its nodes run in the context
        current when it is completed)."""
        return GraphBuilder()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_device_id":
            raise AttributeError(name)
        return getattr(cuda_core_device(self._device_id), name)

    def _ordinal(self) -> int:
        """The device's ordinal (``Device()``: the current device's, asked of cuda.core)."""
        if self._device_id is not None:
            return self._device_id
        return int(cuda_core_device(None).device_id)

    def __eq__(self, other: object) -> bool:
        """Equal to a compat ``Device`` or a cuda.core ``Device`` of the same ordinal, as cuda.core's compare."""
        o = None if isinstance(other, int) else _ordinal_of(other)  # (a Device equals no int)
        return NotImplemented if o is None else self._ordinal() == o

    def __hash__(self) -> int:
        """cuda.core's ``Device`` hash of the same ordinal (equal devices hash alike across both classes)."""
        return hash(cuda_core_device(self._ordinal()))

    def __int__(self) -> int:
        return self._ordinal()

    def __index__(self) -> int:
        """The ordinal: cuda.core's calls that take ``Device | int`` (memory resources, ``cuda.core.Device(...)``)
        take a compat ``Device`` as its ordinal."""
        return self._ordinal()

    # cuda.core reads an argument that is not its own Device as an ordinal, checking ``device_id < 0`` first: a
    # compat Device orders as its ordinal among ints and Devices (cuda.core's own Device does not order).
    def __lt__(self, other: object) -> bool:
        o = _ordinal_of(other)
        return NotImplemented if o is None else self._ordinal() < o

    def __le__(self, other: object) -> bool:
        o = _ordinal_of(other)
        return NotImplemented if o is None else self._ordinal() <= o

    def __gt__(self, other: object) -> bool:
        o = _ordinal_of(other)
        return NotImplemented if o is None else self._ordinal() > o

    def __ge__(self, other: object) -> bool:
        o = _ordinal_of(other)
        return NotImplemented if o is None else self._ordinal() >= o

    def __repr__(self) -> str:
        return f"<compat Device {'current' if self._device_id is None else self._device_id}>"


def _ordinal_of(value: object) -> int | None:
    """The ordinal of an int, a compat ``Device`` or a cuda.core ``Device``; ``None`` for anything else."""
    if isinstance(value, Device):
        return value._ordinal()
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    ordinal = getattr(value, "device_id", None) if type(value).__name__ == "Device" else None
    return ordinal if isinstance(ordinal, int) else None


def launch(target: Any, config: Any, kernel: Any, *args: Any) -> None:
    """cuda.core's ``launch(target, config, kernel, *args)``.

    Into a :class:`GraphBuilder` it adds a kernel node after the builder's last op; on any other
    target (a stream, a stream under capture, a :class:`~cudagraph.Path`) it is
    :func:`cudagraph.launch`. A :class:`GraphCondition` argument is passed as its condition.

    Raises
    ------
    OperandError
        A builder that is not building, or a target, config, kernel or argument of the wrong kind.
    DefinitionError
        Dimensions the kernel cannot take.
    """
    if type(target) is GraphBuilder:
        target._launch(config, kernel, args)
        if _COMPILED is not None:
            _teach(_COMPILED, config, kernel)
        return
    launch_on_stream(target, config, kernel, args)


def _teach(compiled: Any, config: Any, kernel: Any) -> None:
    """After ``launch`` added a node into a builder: let the compiled path take the next such calls with
    ``config`` and kernels of ``kernel``'s type when both need nothing but ``Graph.kernel``."""
    if type(kernel).__name__ not in DRIVER_KERNEL_TYPES:
        return
    c = remembered_config(config)  # as the launch just checked it (remembered: plain, fixed dimensions)
    if c is not None and c.cluster is None and not c.cooperative and not c.pdl and type(c.smem) is int:
        compiled.remember(config, c.grid_obj, c.block_obj, c.smem, c.grid, c.block, type(kernel))


def path_launch_parts(method: Any, twin: Any) -> dict[str, Any]:
    """The arguments of ``PathLaunch`` for :func:`launch` into a :class:`GraphBuilder`: ``method`` (the compiled
    ``Graph.kernel``), ``twin`` (the Python function), and the classes and slots it reads."""
    return {
        "method": method,
        "fallback": twin,
        "owner": GraphBuilder,
        "owner_slots": ("_state", "_path"),
        "building": BUILDING,
        "path": Path,
        "path_slots": ("graph", "_tail", "_last"),
        "graph": Graph,
        "skip": GraphCondition,
    }


def _compiled_launch(twin: Any) -> Any:
    """``twin`` with a compiled path for its common call (``PathLaunch``), or ``None`` without the extension
    (or with ``CUDAGRAPH_NO_C_ENTRY`` set, or when ``Graph.kernel`` is not the compiled method)."""
    module = define_module()
    if module is None:
        return None
    method = KernelBuilders.__dict__["kernel"]
    if not isinstance(method, module.KernelMethod):
        return None
    compiled = module.PathLaunch(**path_launch_parts(method, twin))
    functools.update_wrapper(compiled, twin)
    return compiled


# The compiled path of launch into a builder (bench/compat.py: GraphBuilder build),
# where the Python twin's frames cost more than the node itself.
_COMPILED = _compiled_launch(launch)
if _COMPILED is not None:
    launch = _COMPILED  # the same function, its common call compiled (a call with a Python bool goes to the twin)
