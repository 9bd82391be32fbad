"""What a ported cuda.core program imports besides the graph classes: ``Device`` and ``launch``."""

from __future__ import annotations

from typing import Any

from ...driver.devices import cuda_core_device
from ...errors import OperandError
from ..launch import launch as _cg_launch
from .builder import GraphBuilder
from .common import kernel_args

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

    def __repr__(self) -> str:
        return f"<compat Device {'current' if self._device_id is None else self._device_id}>"


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
        return
    _cg_launch(target, config, kernel, *kernel_args(args))
