"""Node kinds of a graph definition (GPU-free)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .graph import Graph

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
    "ConditionalNode",
    "IfNode",
    "IfElseNode",
    "WhileNode",
    "SwitchNode",
    "SetConditionNode",
    "AllocNode",
    "AllocOffset",
    "FreeNode",
    "Memcpy2DNode",
    "Memcpy3DNode",
    "BatchMemOpNode",
    "WriteValueNode",
    "WaitValueNode",
]

Dim3 = tuple[int, int, int]


def _short(value: Any) -> str:
    if isinstance(value, int):
        return hex(value)
    if type(value).__name__ in ("AllocNode", "AllocOffset"):
        alloc = getattr(value, "alloc", value)
        off = getattr(value, "offset", 0)
        return f"alloc#{alloc.index}" + (f"+{off}" if isinstance(off, int) and off else "")
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
        from .node_update import update_definition_node

        update_definition_node(self, changes)
        return self

    def __repr__(self) -> str:
        d = self.describe()
        return f"<{type(self).__name__} #{self.index} {self.name!r}{' ' + d if d else ''} of Graph {self.graph.name!r}>"


_PARAMETER_SLOTS: dict[type, tuple[str, ...]] = {}


def parameter_slots(cls: type) -> tuple[str, ...]:
    """The slots a node class adds to :class:`Node`: its parameters (and kept operands), cached."""
    slots = _PARAMETER_SLOTS.get(cls)
    if slots is None:
        out: list[str] = []
        for c in cls.__mro__:
            if c is Node or c is object:
                break
            out.extend(s for s in getattr(c, "__slots__", ()) if s != "__weakref__")
        slots = _PARAMETER_SLOTS[cls] = tuple(out)
    return slots


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

    __slots__ = ("kernel", "grid", "block", "shared_mem", "args", "attrs")
    kind = "kernel"

    kernel: Any
    grid: Dim3
    block: Dim3
    shared_mem: int
    args: tuple[Any, ...]
    #: Launch attributes (:class:`~cudagraph.definition.launch_attrs.LaunchAttrs`), ``None`` for a plain launch.
    attrs: Any

    def describe(self) -> str:
        g, b = self.grid, self.block
        text = f"grid={g} block={b} smem={self.shared_mem} args={len(self.args)}"
        if self.attrs is not None:
            text += " " + self.attrs.describe()
        return text

    def update(self, **changes: Any) -> Node:
        """Change the launch in the definition; returns ``self``.

        Takes the keywords of :meth:`Graph.kernel <cudagraph.Graph.kernel>`
        (``args=``, ``grid=``, ``block=``, ``shared_mem=``, ``kernel=``) and
        its launch attributes (``cluster=``, ``cooperative=``, ``priority=``).
        Attributes not named are kept.
        """
        from .launch_attrs import update_kernel_node

        update_kernel_node(self, changes)
        return self


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


# ----------------------------------------------------------------------------------------------
# Device-side control flow, graph memory, pitched copies and memory operations.


class ConditionalNode(Node):
    """A conditional node: its bodies run on the GPU according to a :class:`~cudagraph.Condition`.

    Made by :meth:`Graph.if_ <cudagraph.Graph.if_>`, :meth:`~cudagraph.Graph.if_else`,
    :meth:`~cudagraph.Graph.while_` and :meth:`~cudagraph.Graph.switch`. The
    bodies are :class:`~cudagraph.Graph` objects of their own, filled with the
    same builders (``node.body.kernel(...)``) and nestable.

    Attributes
    ----------
    cond : Condition
        The condition whose value selects what runs.
    bodies : tuple of Graph
        Every body, in driver order.
    """

    __slots__ = ("cond", "bodies")
    kind = "conditional"
    cond: Any
    bodies: tuple[Graph, ...]

    def describe(self) -> str:
        sizes = "/".join(str(len(b._nodes)) for b in self.bodies)
        return f"cond={self.cond.name!r} bodies={len(self.bodies)} ({sizes} nodes)"

    def update(self, **changes: Any) -> Node:
        """Conditional nodes are changed through their bodies; no keyword is accepted."""
        from ..errors import DefinitionError

        if changes:
            raise DefinitionError(
                f"{self.label}: a {self.kind} node has no parameters to update "
                f"(got {', '.join(sorted(changes))}); change its bodies' nodes instead"
            )
        return self


class IfNode(ConditionalNode):
    """Runs :attr:`body` once when the condition is non-zero."""

    __slots__ = ()
    kind = "if"

    @property
    def body(self) -> Graph:
        """The graph run when the condition is non-zero."""
        return self.bodies[0]

    @property
    def then(self) -> Graph:
        """Alias of :attr:`body`."""
        return self.bodies[0]


class IfElseNode(ConditionalNode):
    """Runs :attr:`then` when the condition is non-zero, else :attr:`else_`."""

    __slots__ = ()
    kind = "if_else"

    @property
    def then(self) -> Graph:
        """The graph run when the condition is non-zero."""
        return self.bodies[0]

    @property
    def else_(self) -> Graph:
        """The graph run when the condition is zero."""
        return self.bodies[1]


class WhileNode(ConditionalNode):
    """Runs :attr:`body` again and again while the condition is non-zero (tested before each pass)."""

    __slots__ = ()
    kind = "while"

    @property
    def body(self) -> Graph:
        """The loop body; one of its kernels must eventually set the condition to 0."""
        return self.bodies[0]


class SwitchNode(ConditionalNode):
    """Runs ``cases[v]`` where ``v`` is the condition's value (nothing when ``v >= len(cases)``)."""

    __slots__ = ()
    kind = "switch"

    @property
    def cases(self) -> tuple[Graph, ...]:
        """The case bodies, by condition value."""
        return self.bodies


class SetConditionNode(Node):
    """A built-in kernel: ``cond = (*ptr <op> value)``, no user device code needed.

    Attributes
    ----------
    cond : Condition
        The condition it sets.
    ptr : int, Param or AllocNode
        The device scalar it reads.
    op : str
        One of ``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``.
    value : numpy scalar
        The value compared against, of :attr:`dtype`.
    dtype : numpy.dtype
        The scalar type at ``ptr``.
    """

    __slots__ = ("cond", "ptr", "op", "value", "dtype", "_keep")
    kind = "set_condition"
    cond: Any
    ptr: Any
    op: str
    value: Any
    dtype: Any
    _keep: tuple[Any, ...]

    def describe(self) -> str:
        return f"{self.cond.name} = *{_short(self.ptr)} {self.op} {self.value!r} ({self.dtype})"

    def update(self, **changes: Any) -> Node:
        """Not supported: build a new node instead."""
        from ..errors import DefinitionError

        raise DefinitionError(f"{self.label}: a set_condition node cannot be updated; add a new one")


class AllocOffset:
    """An address ``offset`` bytes into a graph allocation (``alloc.offset(n)``).

    Usable as an operand wherever the allocation is.
    """

    __slots__ = ("alloc", "offset")

    def __init__(self, alloc: AllocNode, offset: int) -> None:
        self.alloc = alloc
        self.offset = offset

    @property
    def nbytes(self) -> int:
        """Bytes from the offset to the end of the allocation."""
        return int(self.alloc.nbytes - self.offset)

    def __repr__(self) -> str:
        return f"<AllocOffset {self.alloc.label} + {self.offset}>"


class AllocNode(Node):
    """Allocates ``nbytes`` of device memory inside the graph (``cuGraphAddNode`` MEM_ALLOC).

    The node itself is the operand: pass it as a kernel argument, a copy
    source or destination, or a fill destination; its address is filled in
    when the graph is built. Users must be ordered after this node and before
    its free node.

    Attributes
    ----------
    nbytes : int
        The size of the allocation.
    freed_by : FreeNode or None
        The node that frees it, if any.
    """

    __slots__ = ("nbytes", "freed_by")
    kind = "alloc"
    nbytes: int
    freed_by: Any

    def offset(self, nbytes: int) -> AllocOffset:
        """An operand ``nbytes`` into the allocation.

        Raises
        ------
        DefinitionError
            The offset lies outside the allocation.
        """
        import operator

        from ..errors import DefinitionError, OperandError

        try:
            off = operator.index(nbytes)
        except TypeError:
            raise OperandError(f"{self.label}: offset must be an int, got {type(nbytes).__name__}") from None
        if not 0 <= off < self.nbytes:
            raise DefinitionError(f"{self.label}: offset {off} is outside the {self.nbytes}-byte allocation")
        return AllocOffset(self, off)

    def describe(self) -> str:
        freed = f" freed by #{self.freed_by.index}" if self.freed_by is not None else " never freed"
        return f"{self.nbytes} B{freed}"

    def update(self, **changes: Any) -> Node:
        """Not supported: an allocation's size is fixed once built."""
        from ..errors import DefinitionError

        raise DefinitionError(f"{self.label}: an alloc node cannot be updated; add a new one")


class FreeNode(Node):
    """Frees a graph allocation made by an :class:`AllocNode` of the same graph."""

    __slots__ = ("alloc",)
    kind = "free"
    alloc: AllocNode

    def describe(self) -> str:
        return f"frees {self.alloc.label}"

    def update(self, **changes: Any) -> Node:
        """Not supported."""
        from ..errors import DefinitionError

        raise DefinitionError(f"{self.label}: a free node cannot be updated")


class Memcpy3DNode(Node):
    """A pitched 3-D copy of ``depth`` slices of ``height`` rows of ``width`` bytes.

    Attributes
    ----------
    dst, src : int, Param or AllocNode
        The base addresses.
    width : int
        Bytes per row copied.
    height, depth : int
        Rows per slice, slices.
    dst_pitch, src_pitch : int
        Bytes between rows.
    dst_height, src_height : int
        Rows between slices (the allocation's row count per slice).
    """

    __slots__ = (
        "dst",
        "src",
        "width",
        "height",
        "depth",
        "dst_pitch",
        "src_pitch",
        "dst_height",
        "src_height",
        "_keep",
    )
    kind = "memcpy3d"
    dst: Any
    src: Any
    width: int
    height: int
    depth: int
    dst_pitch: int
    src_pitch: int
    dst_height: int
    src_height: int
    _keep: tuple[Any, ...]

    def describe(self) -> str:
        shape = f"{self.width}x{self.height}" + (f"x{self.depth}" if self.depth > 1 else "")
        return f"{_short(self.src)} (pitch {self.src_pitch}) -> {_short(self.dst)} (pitch {self.dst_pitch}) {shape} B"

    def update(self, **changes: Any) -> Node:
        """Not supported: build a new node instead."""
        from ..errors import DefinitionError

        raise DefinitionError(f"{self.label}: a {self.kind} node cannot be updated; add a new one")


class Memcpy2DNode(Memcpy3DNode):
    """A pitched 2-D copy of ``height`` rows of ``width`` bytes (``depth`` is 1)."""

    __slots__ = ()
    kind = "memcpy2d"


class BatchMemOpNode(Node):
    """A memory-operation node (``cuGraphAddBatchMemOpNode``): one write or wait on a 32/64-bit word.

    Attributes
    ----------
    ptr : int, Param or AllocNode
        The device word.
    value : int
        The value written or compared (unsigned, masked to :attr:`bits`).
    bits : int
        32 or 64.
    flags : int
        The driver flags (0 for a write; ``CU_STREAM_WAIT_VALUE_*`` for a wait).
    """

    __slots__ = ("ptr", "value", "bits", "flags", "_keep")
    kind = "memop"
    ptr: Any
    value: int
    bits: int
    flags: int
    _keep: tuple[Any, ...]

    def update(self, **changes: Any) -> Node:
        """Not supported: build a new node instead."""
        from ..errors import DefinitionError

        raise DefinitionError(f"{self.label}: a {self.kind} node cannot be updated; add a new one")


class WriteValueNode(BatchMemOpNode):
    """Writes :attr:`value` to the word at :attr:`ptr` (``CU_STREAM_MEM_OP_WRITE_VALUE_32/64``)."""

    __slots__ = ()
    kind = "write_value"

    def describe(self) -> str:
        return f"*{_short(self.ptr)} = {self.value:#x} ({self.bits}-bit)"


#: ``wait_value`` comparisons by name, with the ``CU_STREAM_WAIT_VALUE_*`` flag of each.
WAIT_COMPARISONS = {"geq": 0, "eq": 1, "and": 2, "nor": 3}
WAIT_VALUE_FLUSH = 1 << 30


class WaitValueNode(BatchMemOpNode):
    """Waits until the word at :attr:`ptr` compares true with :attr:`value` (``WAIT_VALUE_32/64``)."""

    __slots__ = ()
    kind = "wait_value"

    @property
    def cmp(self) -> str:
        """The comparison: ``geq``, ``eq``, ``and`` or ``nor``."""
        code = self.flags & 0xF
        return next(k for k, v in WAIT_COMPARISONS.items() if v == code)

    def describe(self) -> str:
        flush = " flush" if self.flags & WAIT_VALUE_FLUSH else ""
        return f"until *{_short(self.ptr)} {self.cmp} {self.value:#x} ({self.bits}-bit{flush})"
