"""Node kinds of a graph definition (GPU-free)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ._graph import Graph

__all__ = [
    "Node",
    "KernelNode",
    "MemcpyNode",
    "MemsetNode",
    "HostNode",
    "EventRecordNode",
    "EventWaitNode",
    "ChildGraphNode",
    "EmptyNode",
]

Dim3 = tuple[int, int, int]


def _short(value: Any) -> str:
    if isinstance(value, int):
        return hex(value)
    name = getattr(value, "name", None)
    if isinstance(name, str) and type(value).__name__ == "Param":
        return f"${name}"
    return type(value).__name__


class Node:
    """A node of a :class:`~cudagraph.Graph`.

    Nodes are made by the graph's builders (``g.kernel(...)``, ``g.memcpy(...)``,
    ...), never directly. A node records its predecessors and successors;
    edges are changed with :meth:`precede`, :meth:`succeed`,
    :meth:`Graph.add_edge` and :meth:`Graph.remove_edge`.

    Attributes
    ----------
    graph : Graph
        The graph the node belongs to.
    index : int
        The node's position in ``graph.nodes`` (creation order).
    name : str
        A label for summaries, pictures and error messages.
    """

    __slots__ = ("graph", "index", "name", "_preds", "_succs", "__weakref__")
    kind: ClassVar[str] = "node"

    graph: Graph
    index: int
    name: str
    _preds: list[Node]
    _succs: list[Node]

    @property
    def predecessors(self) -> tuple[Node, ...]:
        """The nodes this node depends on, in the order the edges were added."""
        return tuple(self._preds)

    @property
    def successors(self) -> tuple[Node, ...]:
        """The nodes that depend on this node, in the order the edges were added."""
        return tuple(self._succs)

    @property
    def label(self) -> str:
        """``kind#index 'name'``, the form used in error messages."""
        return f"{self.kind}#{self.index} {self.name!r}"

    def precede(self, *nodes: Node) -> Node:
        """Make every node in ``nodes`` depend on this one; returns ``self``."""
        for n in nodes:
            self.graph.add_edge(self, n)
        return self

    def succeed(self, *nodes: Node) -> Node:
        """Make this node depend on every node in ``nodes``; returns ``self``."""
        for n in nodes:
            self.graph.add_edge(n, self)
        return self

    def describe(self) -> str:
        """A one-line description of the node's parameters."""
        return ""

    def update(self, **changes: Any) -> Node:
        """Change this node's parameters in the definition; returns ``self``.

        Takes the keywords of the node's builder (``args=``, ``grid=`` for a
        kernel, ``src=``/``dst=``/``nbytes=`` for a copy, ...). The new values
        are checked as the builder checks them; on error the node is left
        unchanged. Edges are not touched. The next ``instantiate`` or
        ``Executable.update`` sees the change.

        Raises
        ------
        DefinitionError, OperandError
            A keyword the builder does not take, or a bad value.
        """
        from ._node_update import update_definition_node

        update_definition_node(self, changes)
        return self

    def __repr__(self) -> str:
        d = self.describe()
        return f"<{type(self).__name__} #{self.index} {self.name!r}{' ' + d if d else ''} of Graph {self.graph.name!r}>"


def _set_base(node: Node, graph: Graph, index: int, name: str) -> None:
    node.graph = graph
    node.index = index
    node.name = name
    node._preds = []
    node._succs = []


class KernelNode(Node):
    """A kernel launch.

    Attributes
    ----------
    kernel : object
        A ``cuda.core`` ``Kernel`` or a raw ``CUkernel``/``CUfunction``.
    grid, block : tuple of 3 ints
        Launch dimensions.
    shared_mem : int
        Dynamic shared memory in bytes.
    args : tuple
        The arguments as given (checked by ``validate()`` and at
        instantiation).
    """

    __slots__ = ("kernel", "grid", "block", "shared_mem", "args")
    kind = "kernel"

    kernel: Any
    grid: Dim3
    block: Dim3
    shared_mem: int
    args: tuple[Any, ...]

    def describe(self) -> str:
        g, b = self.grid, self.block
        return f"grid={g} block={b} smem={self.shared_mem} args={len(self.args)}"


class MemcpyNode(Node):
    """A 1-D copy of ``nbytes`` bytes; the direction is read from the pointers."""

    __slots__ = ("dst", "src", "nbytes", "_keep")
    kind = "memcpy"

    dst: Any
    src: Any
    nbytes: int
    _keep: tuple[Any, ...]

    def describe(self) -> str:
        return f"{_short(self.src)} -> {_short(self.dst)} {self.nbytes} B"


class MemsetNode(Node):
    """A fill of ``width`` x ``height`` elements of ``element_size`` bytes."""

    __slots__ = ("dst", "value", "element_size", "width", "height", "pitch", "_keep")
    kind = "memset"

    dst: Any
    value: int
    element_size: int
    width: int
    height: int
    pitch: int
    _keep: tuple[Any, ...]

    def describe(self) -> str:
        shape = f"{self.width}" if self.height == 1 else f"{self.width}x{self.height} pitch={self.pitch}"
        return f"{_short(self.dst)} = {self.value:#x} ({self.element_size} B x {shape})"


class HostNode(Node):
    """A Python callable run on a host thread by the driver."""

    __slots__ = ("fn", "args")
    kind = "host"

    fn: Callable[..., Any]
    args: tuple[Any, ...]

    def describe(self) -> str:
        return f"{getattr(self.fn, '__qualname__', type(self.fn).__name__)}(+{len(self.args)} args)"


class EventRecordNode(Node):
    """Records an event."""

    __slots__ = ("event",)
    kind = "record"
    event: Any


class EventWaitNode(Node):
    """Waits for an event."""

    __slots__ = ("event",)
    kind = "wait"
    event: Any


class ChildGraphNode(Node):
    """Runs another graph definition as one node."""

    __slots__ = ("body",)
    kind = "child"
    body: Graph

    def describe(self) -> str:
        return f"graph={self.body.name!r} ({len(self.body.nodes)} nodes)"


class EmptyNode(Node):
    """Does nothing; used to join branches."""

    __slots__ = ()
    kind = "empty"
