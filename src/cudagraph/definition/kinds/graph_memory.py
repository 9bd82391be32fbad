"""Graph memory: :class:`AllocNode`, :class:`FreeNode`, :class:`AllocOffset` and their builders (GPU-free).

An allocation is an operand whose address exists only once the graph is built.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any, ClassVar

from ...errors import DefinitionError, ForeignNodeError, OperandError
from ..core import After, GraphCore, builder, check_size
from ..devices import device_ordinal
from ..node import Node, child_graphs

__all__ = ["MEMORY_TYPES", "AllocNode", "AllocOffset", "FreeNode", "GraphMemoryBuilders"]

#: The kinds of memory an allocation may hold (``Graph.alloc(memory_type=)``, as cuda.core's ``GraphMemoryType``).
MEMORY_TYPES = ("device", "host", "managed")


class AllocOffset:
    """An address ``offset`` bytes into a graph allocation (``alloc.offset(n)``).

    Usable as an operand wherever the allocation is.
    """

    __slots__ = ("alloc", "offset")
    #: An address that exists only once the graph is built (see :func:`~cudagraph.definition.node.graph_address`).
    graph_address: ClassVar[bool] = True

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
    """Allocates ``nbytes`` of memory inside the graph (``cuGraphAddNode`` MEM_ALLOC).

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
    device : int or None
        The ordinal of the device the memory resides on (``"device"`` and
        ``"managed"`` memory); ``None``: the current device when it is built.
    memory_type : str
        ``"device"`` (pinned device memory, the default), ``"host"`` (pinned
        host memory) or ``"managed"`` (CUDA managed memory).
    peer_access : tuple of int
        Ordinals of the other devices given read-write access (the resident
        device always has it).
    """

    __slots__ = ("nbytes", "freed_by", "device", "memory_type", "peer_access")
    kind = "alloc"
    graph_address = True
    dot_style = 'shape=cylinder style=filled fillcolor="#c3fae8"'
    mermaid_shape = ('[("', '")]')
    nbytes: int
    freed_by: Any
    device: int | None
    memory_type: str
    peer_access: tuple[int, ...]

    def offset(self, nbytes: int) -> AllocOffset:
        """An operand ``nbytes`` into the allocation.

        Raises
        ------
        DefinitionError
            The offset lies outside the allocation.
        """
        try:
            off = operator.index(nbytes)
        except Exception:  # TypeError, or whatever a user __index__ raises
            raise OperandError(f"{self.label}: offset must be an int, got {type(nbytes).__name__}") from None
        if not 0 <= off < self.nbytes:
            raise DefinitionError(f"{self.label}: offset {off} is outside the {self.nbytes}-byte allocation")
        return AllocOffset(self, off)

    @property
    def default_memory(self) -> bool:
        """Device memory of the current device, no peer access: what ``cuMemAllocAsync`` gives."""
        return self.memory_type == "device" and self.device is None and not self.peer_access

    def describe(self) -> str:
        freed = f" freed by #{self.freed_by.index}" if self.freed_by is not None else " never freed"
        where = "" if self.memory_type == "device" else f" {self.memory_type}"
        if self.device is not None and self.memory_type != "host":
            where += f" on device {self.device}"
        if self.peer_access:
            where += f" peers {','.join(map(str, self.peer_access))}"
        return f"{self.nbytes} B{where}{freed}"

    def _memory_accesses(self) -> tuple[tuple[int, Any, int | None, str], ...]:
        return ((2, self, None, "alloc"),)  # it makes the memory: its users come after it

    def update(self, **changes: Any) -> Node:
        """Not supported: an allocation's size is fixed once built."""
        raise DefinitionError(f"{self.label}: an alloc node cannot be updated; add a new one")


class FreeNode(Node):
    """Frees a graph allocation made by an :class:`AllocNode` of the same graph."""

    __slots__ = ("alloc",)
    kind = "free"
    dot_style = 'shape=cylinder style="filled,dashed" fillcolor="#c3fae8"'
    mermaid_shape = ('[("', '")]')
    alloc: AllocNode

    def describe(self) -> str:
        return f"frees {self.alloc.label}"

    def _memory_accesses(self) -> tuple[tuple[int, Any, int | None, str], ...]:
        return ((2, self.alloc, None, "alloc"),)  # it ends the memory: after every user

    def update(self, **changes: Any) -> Node:
        """Not supported."""
        raise DefinitionError(f"{self.label}: a free node cannot be updated")


class GraphMemoryBuilders(GraphCore):
    """The graph-memory builders of :class:`~cudagraph.Graph`: :meth:`alloc`, :meth:`free`."""

    __slots__ = ()

    @builder
    def alloc(
        self,
        nbytes: int,
        *,
        device: Any = None,
        memory_type: Any = "device",
        peer_access: Iterable[Any] | None = None,
        after: After = None,
        name: str | None = None,
    ) -> AllocNode:
        """Add a memory allocation that lives inside the graph.

        The returned node is the operand: pass it as a kernel argument, a
        copy's ``src``/``dst`` or a fill's ``dst`` (``node.offset(n)`` for an
        address inside it); its address is filled in when the graph is
        built. Every user must be ordered after this node and before the
        :meth:`free` node, and the allocation must be freed in this graph
        unless the executable is made with ``instantiate(auto_free_on_launch=True)``.

        Parameters
        ----------
        nbytes : int
            Bytes to allocate.
        device : cuda.core Device or int, optional
            The device the memory resides on (default: the current device when
            the graph is built). Not for ``"host"`` memory.
        memory_type : {"device", "host", "managed"}, optional
            Pinned device memory (default), pinned host memory, or CUDA managed
            memory; a cuda.core ``GraphMemoryType`` is taken too.
        peer_access : iterable of cuda.core Device or int, optional
            Other devices given read-write access to the memory. A device that
            cannot access the resident one is refused when the graph is built.
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label.

        Returns
        -------
        AllocNode

        Raises
        ------
        OperandError
            ``nbytes``, ``device``, ``memory_type`` or ``peer_access`` is of the
            wrong type or value (nothing is added).
        """
        what = self._what("alloc", name)
        n = check_size(nbytes, what, "nbytes")
        kind = _memory_type(memory_type, what)
        dev = None if device is None else device_ordinal(device, what)
        if dev is not None and kind == "host":
            raise OperandError(f"{what}: device={dev} does not apply to host memory (it resides on the host)")
        peers = _peer_ordinals(peer_access, what)
        node = AllocNode.__new__(AllocNode)
        node.nbytes = n
        node.freed_by = None
        node.device = dev
        node.memory_type = kind
        node.peer_access = peers
        self._place(node, after, what, name or "alloc")
        self._special += 1
        return node

    @builder
    def free(self, alloc: AllocNode, *, after: After = None, name: str | None = None) -> FreeNode:
        """Add the node that frees ``alloc`` (an :class:`AllocNode` of this graph).

        ``after`` must order it after the allocation and after every node
        that uses the allocation (checked by :meth:`validate`).

        Returns
        -------
        FreeNode

        Raises
        ------
        OperandError
            ``alloc`` is not an AllocNode.
        ForeignNodeError
            ``alloc`` was allocated in another graph.
        DefinitionError
            ``alloc`` is freed already.
        """
        what = self._what("free", name)
        if type(alloc) is not AllocNode:
            raise OperandError(f"{what}: expected the AllocNode returned by Graph.alloc(), got {type(alloc).__name__}")
        if alloc.graph is not self:
            raise ForeignNodeError(
                f"{what}: {alloc.label} was allocated in Graph {alloc.graph.name!r}, not in {self.name!r}; "
                "an allocation is freed in the graph that allocated it"
            )
        if alloc.freed_by is not None:
            raise DefinitionError(f"{what}: {alloc.label} is freed already by {alloc.freed_by.label} (double free)")
        node = FreeNode.__new__(FreeNode)
        node.alloc = alloc
        self._place(node, after, what, name or "free")
        alloc.freed_by = node
        self._special += 1
        return node

    def _unfreed_allocs(self) -> list[AllocNode]:
        """Allocations of this graph and its child graphs that no free node releases."""
        out: list[AllocNode] = []
        stack = [iter(self._nodes)]  # an explicit stack: child graphs may nest deeper than recursion goes
        while stack:
            for n in stack[-1]:
                if type(n) is AllocNode:
                    assert isinstance(n, AllocNode)
                    if n.freed_by is None:
                        out.append(n)
                else:
                    # Child graphs (conditional bodies cannot allocate).
                    bodies = child_graphs(n)
                    if bodies:
                        stack.extend(iter(b._nodes) for b in reversed(bodies))
                        break
            else:
                stack.pop()
        return out


def _memory_type(value: Any, what: str) -> str:
    """``memory_type=`` as one of :data:`MEMORY_TYPES` (a str, or an enum whose value is one)."""
    text = getattr(value, "value", value)
    if isinstance(text, str) and text.lower() in MEMORY_TYPES:
        return text.lower()
    shown = repr(text) if isinstance(text, str) else type(value).__name__
    raise OperandError(f"{what}: memory_type must be one of {', '.join(MEMORY_TYPES)}, got {shown}")


def _peer_ordinals(value: Any, what: str) -> tuple[int, ...]:
    """``peer_access=`` as a tuple of distinct ordinals, in the order given."""
    if value is None:
        return ()
    expected = f"{what}: peer_access must be an iterable of cuda.core Devices or int ordinals"
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise OperandError(f"{expected}, got {type(value).__name__}")
    try:
        items = list(value)
    except TypeError:  # iterable by its type, not by its value (a 0-d array)
        raise OperandError(f"{expected}, got {type(value).__name__} (it cannot be iterated)") from None
    return tuple(dict.fromkeys(device_ordinal(d, f"{what}: peer_access") for d in items))
