"""Host callbacks: :class:`HostNode` and :meth:`Graph.host <cudagraph.Graph.host>` (GPU-free)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import OperandError
from ..core import After, GraphCore, builder
from ..node import Node

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = ["HostBuilders", "HostNode"]


class HostNode(Node):
    """A Python callable run on a host thread by the driver."""

    __slots__ = ("fn", "args")
    kind = "host"
    update_fields = ("fn", "args")
    dot_style = 'shape=hexagon style=filled fillcolor="#f8d7da"'
    mermaid_shape = ('{{"', '"}}')

    fn: Callable[..., Any]
    args: tuple[Any, ...]

    def describe(self) -> str:
        return f"{getattr(self.fn, '__qualname__', type(self.fn).__name__)}(+{len(self.args)} args)"

    def _check(self) -> bool:
        if not callable(self.fn):
            raise OperandError(f"{self.label}: fn is not callable")
        return False

    def _rebuild(self, scratch: Graph, values: dict[str, Any], changes: dict[str, Any]) -> Node:
        args = values["args"]
        if not isinstance(args, (tuple, list)):
            raise OperandError(f"{self.label}: args must be a tuple of arguments for fn, got {type(args).__name__}")
        return scratch.host(values["fn"], *args, name=self.name)


class HostBuilders(GraphCore):
    """The host-callback builder of :class:`~cudagraph.Graph`."""

    __slots__ = ()

    @builder
    def host(self, fn: Callable[..., Any], *args: Any, after: After = None, name: str | None = None) -> HostNode:
        """Add a host node that calls ``fn(*args)`` on a driver thread.

        The callable must not call CUDA. If it raises, the exception is kept
        and raised as :class:`~cudagraph.errors.HostCallbackError` by the next
        ``launch`` or by ``Executable.check()``. Use ``functools.partial`` for
        keyword arguments.

        Parameters
        ----------
        fn : callable
            The function to run.
        *args
            Positional arguments, kept alive with the definition.
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label (defaults to the function's name).

        Returns
        -------
        HostNode
        """
        what = self._what("host", name)
        if not callable(fn):
            raise OperandError(f"{what}: fn must be callable, got {type(fn).__name__}")
        node = HostNode.__new__(HostNode)
        node.fn, node.args = fn, args
        self._place(node, after, what, name or str(getattr(fn, "__name__", "host")))
        return node
