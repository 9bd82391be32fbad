"""What a definition asks of the machine's devices, checked before anything of it is added to a driver graph.

- a kernel node's ``device=`` names a device the driver has (a node of a kind carrying launch attributes:
  :data:`~cudagraph.definition.diff.LAUNCH_ATTR_CLASSES`);
- a kernel node inside a conditional body (at any depth) runs on the current device: a conditional
  node, its handle and every kernel of its bodies share one context (``CUDA_CONDITIONAL_NODE_PARAMS``);
- an allocation's device and peers exist, and each peer can access the resident device's memory;
- a kernel node that takes an allocation's device memory runs on the device it resides on or on one
  of its ``peer_access`` devices.

Each refusal is an :class:`~cudagraph.errors.UnsupportedError` naming the node (and the allocation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ..definition.diff import LAUNCH_ATTR_CLASSES, is_flat
from ..definition.node import bodies_of
from ..definition.nodes import AllocNode, AllocOffset
from ..errors import UnsupportedError
from .alloc_placement import check_peers, resident_device
from .calls import check, require_driver
from .devices import primary_context

if TYPE_CHECKING:
    from ..definition.graph import Graph

__all__ = ["check_devices", "check_devices_of"]


class _Current:
    """The current device's ordinal, asked of the driver once and only when a rule needs it."""

    __slots__ = ("_ordinal",)

    def __init__(self, ordinal: int | None) -> None:
        self._ordinal = ordinal

    def __call__(self) -> int:
        if self._ordinal is None:
            self._ordinal = int(check(require_driver().cuCtxGetDevice(), "cuCtxGetDevice"))
        return self._ordinal


def check_devices_of(graph: Graph) -> None:
    """:func:`check_devices` where ``graph`` can need it: a flat graph of no allocation, conditional and no
    kernel with ``device=`` asks nothing of the devices (those count in ``graph._special``), and is skipped.

    Every path that issues or adds a definition's nodes (explicit lowering, an eager run, a profile) calls
    this once before its first node.

    Raises
    ------
    UnsupportedError
        As :func:`check_devices`.
    """
    if graph._special or not is_flat(graph):
        check_devices(graph)


def check_devices(graph: Graph, current: int | None = None) -> None:
    """Refuse what the driver would refuse of ``graph``'s devices (see the module), before any node is added.

    Parameters
    ----------
    graph : Graph
        The definition (its nested bodies are checked too).
    current : int, optional
        The current device's ordinal (default: asked of the driver when needed).

    Raises
    ------
    UnsupportedError
        The message names the node, the device and the rule.
    """
    now = _Current(current)
    launches = LAUNCH_ATTR_CLASSES
    stack: list[tuple[Graph, bool]] = [(graph, False)]
    while stack:  # an explicit stack: bodies may nest deeper than recursion goes
        g, in_conditional = stack.pop()
        for n in g._nodes:
            t = type(n)
            if t in launches:
                _check_kernel(n, in_conditional, now)
            elif t is AllocNode and not cast(AllocNode, n).default_memory:
                check_peers(n, now())
            if n.body_fields:
                stack.extend((b, in_conditional or n.conditional_bodies) for b in reversed(bodies_of(n)))


def _check_kernel(node: Any, in_conditional: bool, now: _Current) -> None:
    attrs = node.attrs
    device = None if attrs is None else attrs.device
    if device is not None:
        primary_context(device, node)
        if in_conditional and device != now():
            raise UnsupportedError(
                f"{node.label} of Graph {node.graph.name!r}: device={device} inside a conditional body; the "
                f"bodies of a conditional node run in its context, the current device's ({now()})"
            )
    for i, a in enumerate(node.args):
        alloc = a.alloc if type(a) is AllocOffset else a if type(a) is AllocNode else None
        if alloc is None or alloc.memory_type != "device" or (device is None and alloc.device is None):
            continue  # (both on the current device)
        runs_on = now() if device is None else device
        home = resident_device(alloc, now())
        if runs_on != home and runs_on not in alloc.peer_access:
            raise UnsupportedError(
                f"{node.label} of Graph {node.graph.name!r}: argument {i} is {alloc.label}, device memory of "
                f"device {home}, but the kernel runs on device {runs_on}; give the allocation "
                f"peer_access=[{runs_on}] or run the kernel on device {home}"
            )
