"""A view of one node inside an instantiated graph: update, enable, disable."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..definition.nodes import Node
from ..errors import UnsupportedError

if TYPE_CHECKING:
    from .executable import Executable

__all__ = ["ExecutableNode"]


class ExecutableNode:
    """``exe[node]``: one definition node as it is in an :class:`~cudagraph.Executable`.

    Changes made through the view affect the executable only; the
    definition is not modified (use :meth:`Node.update` for that).

    Attributes
    ----------
    node : Node
        The definition node.
    executable : Executable
        The executable it lives in.
    """

    __slots__ = ("executable", "node")

    def __init__(self, executable: Executable, node: Node) -> None:
        self.executable = executable
        self.node = node

    def update(self, **changes: Any) -> ExecutableNode:
        """Change the node's parameters in the executable, with its builder's keywords.

        ``exe[k].update(args=(y, np.float32(3.0), n))`` re-packs the kernel's
        arguments and calls ``cuGraphExecKernelNodeSetParams``; copies, fills,
        host callbacks, events and child graphs are updated likewise. The
        values are checked as the builder checks them. A kernel keeps its launch
        attributes (a new grid is checked against its cluster shape); they and
        its edge types cannot change in an instantiated graph: ``cluster=``,
        ``cooperative=``, ``priority=``, ``device=``, ``attributes=`` and
        ``programmatic=`` are refused (change the definition and call
        ``exe.update(graph, reinstantiate_if_needed=True)``).

        Raises
        ------
        DefinitionError, OperandError, KernelArgumentError
            Bad keywords or values, or a launch attribute keyword (the executable is unchanged).
        DriverError
            The driver refused the update.
        """
        self.executable._update_node(self.node, changes)
        return self

    def _toggle(self, enabled: bool) -> None:
        if not self.node.toggleable:
            raise UnsupportedError(
                f"{self.node.label}: only kernel, memcpy and memset nodes can be enabled or disabled in an executable",
                call="cuGraphNodeSetEnabled",
                node=self.node,
            )
        self.executable._set_enabled(self.node, enabled)

    def enable(self) -> None:
        """Enable the node (``cuGraphNodeSetEnabled``)."""
        self._toggle(True)

    def disable(self) -> None:
        """Disable the node: launches skip it (its edges still order the others)."""
        self._toggle(False)

    @property
    def is_enabled(self) -> bool:
        """Whether the node runs at launch."""
        return self.executable._get_enabled(self.node)

    def __repr__(self) -> str:
        return f"<ExecutableNode {self.node.label} of {self.executable!r}>"
