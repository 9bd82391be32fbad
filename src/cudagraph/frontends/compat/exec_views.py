"""cuda.core's executable node views: ``exe[node]`` for a node of a compat ``GraphDefinition``.

Each view changes the node in the executable only (kinds with no view, empty, allocation, free and
conditional nodes, are refused as cuda.core refuses them) (the definition is not touched), through
cudagraph's :class:`~cudagraph.ExecutableNode`; its ``update`` takes cuda.core's keywords, every value
given (nothing is kept from before, as in cuda.core). Kernel, memcpy and memset views can also be
disabled and enabled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import CudaGraphError, NodeNotFoundError, OperandError, StateError
from .common import DestroyedRefusal, DriverRefusal
from .packing import convert_for
from .updates import callback_changes, child_changes, kernel_changes, memcpy_changes, memset_changes

if TYPE_CHECKING:
    from ...executable.executable import Executable
    from ...executable.node_view import ExecutableNode
    from .definition import GraphNode

__all__ = [
    "ExecutableChildGraphNode",
    "ExecutableEventRecordNode",
    "ExecutableEventWaitNode",
    "ExecutableGraphNode",
    "ExecutableHostCallbackNode",
    "ExecutableKernelNode",
    "ExecutableMemcpyNode",
    "ExecutableMemsetNode",
    "executable_view",
]


class ExecutableGraphNode:
    """A node of a compat ``GraphDefinition`` as it is in an executable made from it (``exe[node]``)."""

    __slots__ = ("_exe", "_node")

    _exe: Executable
    _node: GraphNode

    def __init__(self) -> None:
        """Refused, as cuda.core refuses it: a view is made by ``exe[node]``.

        Raises
        ------
        StateError
            Always (a ``RuntimeError``), with cuda.core's sentence.
        """
        raise StateError("directly constructing an executable graph node is not supported")

    @classmethod
    def _of(cls, exe: Executable, node: GraphNode) -> ExecutableGraphNode:
        """The view of ``node`` in ``exe`` (what ``exe[node]`` returns)."""
        view = cls.__new__(cls)
        view._exe = exe
        view._node = node
        return view

    @property
    def _view(self) -> ExecutableNode:
        """cudagraph's view of the node (refuses a node the executable does not have)."""
        return self._exe[self._node._node]  # type: ignore[index]

    def __repr__(self) -> str:
        """cuda.core's form: ``<ExecutableKernelNode graph=0x... node=0x...>``, the executable's handle and the
        definition node's."""
        try:
            return f"<{type(self).__name__} graph=0x{int(self._exe.handle):x} node=0x{int(self._node.handle):x}>"
        except (CudaGraphError, TypeError, ValueError):  # (a closed executable, a definition the driver refuses now)
            return f"<{type(self).__name__} {self._node!r}>"


class _Toggled(ExecutableGraphNode):
    """A view of a kind the driver can disable (kernel, memcpy, memset)."""

    __slots__ = ()

    def enable(self) -> None:
        """Run the node again at launch (``cuGraphNodeSetEnabled``)."""
        self._view.enable()

    def disable(self) -> None:
        """Skip the node at launch (its edges still order the others)."""
        self._view.disable()

    @property
    def is_enabled(self) -> bool:
        """Whether the node runs at launch."""
        return self._view.is_enabled


class ExecutableKernelNode(_Toggled):
    """A kernel node in an executable."""

    __slots__ = ()

    def update(self, *, config: Any, kernel: Any, args: Any) -> None:
        """Replace the launch configuration, the kernel and its complete arguments (``args=()`` for none)
        for later launches."""
        view = self._view
        changes = kernel_changes(view.node, config, kernel, args, "ExecutableKernelNode.update")
        if "args" in changes:  # (sized by the kernel's parameters, as cuda.core packs them: .packing)
            changes["args"] = convert_for(changes.get("kernel", view.node.kernel), changes["args"])  # type: ignore[attr-defined]
        view.update(**changes)


class ExecutableMemcpyNode(_Toggled):
    """A memcpy node in an executable."""

    __slots__ = ()

    def update(self, *, dst: Any, src: Any, size: int) -> None:
        """Replace the copy's destination, source and size for later launches."""
        view = self._view
        changes, _ = memcpy_changes(dst, src, size, None, None, "ExecutableMemcpyNode.update")
        view.update(**changes)


class ExecutableMemsetNode(_Toggled):
    """A memset node in an executable."""

    __slots__ = ()

    def update(self, *, dst: Any, value: Any, width: int, height: int = 1, pitch: int = 0) -> None:
        """Replace the fill's destination, value and shape for later launches (a ``pitch`` of 0: rows of
        ``width`` elements)."""
        view = self._view
        changes, _ = memset_changes(view.node, dst, value, width, height, pitch, None, "ExecutableMemsetNode.update")
        view.update(**changes)


class ExecutableHostCallbackNode(ExecutableGraphNode):
    """A host callback node in an executable."""

    __slots__ = ()

    def update(self, fn: Any, *, user_data: Any = None) -> None:
        """Call ``fn`` at later launches (a Python callable, or a ctypes function pointer and its ``user_data`` for
        a callback made with one)."""
        view = self._view
        view.update(**callback_changes(view.node, fn, user_data, "ExecutableHostCallbackNode.update"))


class _EventView(ExecutableGraphNode):
    __slots__ = ()

    def update(self, event: Any) -> None:
        """Use ``event`` at later launches."""
        self._view.update(event=event)


class ExecutableEventRecordNode(_EventView):
    """An event record node in an executable."""

    __slots__ = ()


class ExecutableEventWaitNode(_EventView):
    """An event wait node in an executable."""

    __slots__ = ()


class ExecutableChildGraphNode(ExecutableGraphNode):
    """A child graph node in an executable."""

    __slots__ = ()

    def update(self, child: Any) -> None:
        """Run the nodes of ``child`` (a compat ``GraphDefinition`` of the same topology) at later launches."""
        view = self._view
        view.update(**child_changes(view.node, child, "ExecutableChildGraphNode.update"))


_VIEWS: dict[str, type[ExecutableGraphNode]] = {
    "kernel": ExecutableKernelNode,
    "memcpy": ExecutableMemcpyNode,
    "memset": ExecutableMemsetNode,
    "host": ExecutableHostCallbackNode,
    "host_fn": ExecutableHostCallbackNode,
    "record": ExecutableEventRecordNode,
    "wait": ExecutableEventWaitNode,
    "child": ExecutableChildGraphNode,
}


def executable_view(node: GraphNode, exe: Executable) -> ExecutableGraphNode:
    """``exe[node]`` for a compat node: the view of its kind.

    Raises
    ------
    OperandError
        The entry point, or a node of a kind with no view (empty, allocation, free, conditional), as cuda.core
        refuses them (a ``TypeError`` too).
    DestroyedRefusal
        The node was destroyed (a ``RuntimeError`` and a ``ValueError``).
    NodeNotFoundError
        A node of another definition, or added since the executable was made.
    """
    inner = node._node
    if inner is None:
        raise OperandError("compat: the entry point of a GraphDefinition is not a node of an executable")
    if not node.is_valid:  # (cuda.core's RuntimeError and sentence; a ValueError too, as cuda.core 1.2.0 raised)
        raise DestroyedRefusal(
            f"GraphNode has been destroyed (compat: exe[node]: {inner.label} was destroyed; it is no longer valid)"
        )
    view = _VIEWS.get(inner.kind)
    if view is None:
        raise OperandError(
            f"compat: exe[node]: {inner.label} is a {inner.kind} node, which does not support executable updates "
            "(kernel, memcpy, memset, host callback, event and child graph nodes do)"
        )
    try:
        exe.driver_node(inner)
    except NodeNotFoundError as e:  # (cuda.core hands out the view; the driver refuses its update: CUDAError)
        raise ForeignViewRefusal(str(e)) from None
    return view._of(exe, node)


#: ``exe[node]`` of a node the executable was not made from: cuda.core gives a view whose update the driver refuses
#: (``CUDAError``); compat refuses at once with a :class:`~cudagraph.errors.NodeNotFoundError` that is a
#: :data:`~.common.DriverRefusal` too.
ForeignViewRefusal: type[NodeNotFoundError] = type(
    "ForeignViewRefusal",
    (NodeNotFoundError, DriverRefusal),
    {"__module__": __name__, "__doc__": "exe[node] of a node of another definition (a NodeNotFoundError, CUDAError)."},
)
