"""cuda.core's typed node classes of a compat ``GraphDefinition``: what each kind reads back (``grid``, ``dptr``,
``event``, ...) and how it is updated in the definition (``update(...)``, cuda.core's keywords, omitted values
kept). Registered by kind in :data:`~cudagraph.frontends.compat.definition.KINDS`, which the definition's
builders read to wrap the nodes they add.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...driver.devices import cuda_core_device
from ...errors import CudaGraphError
from .common import GraphCondition, core_str_enum
from .definition import KINDS, GraphNode
from .lifetimes import AllocAddress
from .updates import callback_changes, child_changes, kernel_changes, memcpy_changes, memset_changes

if TYPE_CHECKING:
    from .definition import GraphDefinition

__all__ = [
    "AllocNode",
    "ChildGraphNode",
    "ConditionalNode",
    "EmptyNode",
    "EventRecordNode",
    "EventWaitNode",
    "FreeNode",
    "HostCallbackNode",
    "IfElseNode",
    "IfNode",
    "KernelNode",
    "MemcpyNode",
    "MemsetNode",
    "SwitchNode",
    "WhileNode",
]


def _given(value: Any) -> Any:
    """An operand as the program gave it: an allocation as its ``dptr`` (an int)."""
    return AllocAddress(value) if getattr(value, "kind", None) == "alloc" else value


def _address(value: Any) -> str:
    """An operand's address for a repr (``0x...``; ``?`` where it is not one int)."""
    if isinstance(value, int):
        return f"0x{value:x}"
    try:
        return f"0x{int(value.handle):x}"  # (a Buffer: its handle, an int or a CUdeviceptr)
    except (AttributeError, TypeError, ValueError, OverflowError):
        return "?"


class KernelNode(GraphNode):
    """A kernel launch."""

    __slots__ = ()

    def update(self, *, config: Any = None, kernel: Any = None, args: Any = None) -> None:
        """Replace the launch configuration, the kernel or the arguments in the definition; ``None`` keeps a
        value, a new ``kernel`` needs its ``args`` (``()`` for none). Clustered and cooperative launches are
        refused (as in cuda.core)."""
        self._changed(kernel_changes(self._node, config, kernel, args, "KernelNode.update"))

    @property
    def grid(self) -> tuple[int, int, int]:
        """Grid dimensions in blocks."""
        g: Any = self._node
        return (int(g.grid[0]), int(g.grid[1]), int(g.grid[2]))

    @property
    def block(self) -> tuple[int, int, int]:
        """Block dimensions."""
        b: Any = self._node
        return (int(b.block[0]), int(b.block[1]), int(b.block[2]))

    @property
    def shmem_size(self) -> int:
        """Dynamic shared memory in bytes."""
        n: Any = self._node
        return int(n.shared_mem)

    @property
    def kernel(self) -> Any:
        """The kernel."""
        return self._node.kernel  # type: ignore[union-attr]

    @property
    def config(self) -> Any:
        """A cuda.core ``LaunchConfig`` of the node's grid, block and shared memory (as cuda.core, without
        cluster or cooperative)."""
        from cuda.core import LaunchConfig

        return LaunchConfig(grid=self.grid, block=self.block, shmem_size=self.shmem_size)


class EmptyNode(GraphNode):
    """An empty node."""

    __slots__ = ()


class MemsetNode(GraphNode):
    """A memset node."""

    __slots__ = ()

    def update(
        self,
        *,
        dst: Any = None,
        value: Any = None,
        width: int | None = None,
        height: int | None = None,
        pitch: int | None = None,
        dst_owner: Any = None,
    ) -> None:
        """Replace the fill's destination, value or shape in the definition; ``None`` keeps a value
        (``dst_owner`` only beside a raw-address ``dst``)."""
        changes, owners = memset_changes(self._node, dst, value, width, height, pitch, dst_owner, "MemsetNode.update")
        self._changed(changes, owners)

    @property
    def dptr(self) -> Any:
        """The destination (an int address, a Buffer, an allocation's ``dptr``: what was given)."""
        return _given(self._node.dst)  # type: ignore[union-attr]

    @property
    def value(self) -> int:
        """The fill value, as the bits of one element."""
        return int(self._node.value)  # type: ignore[union-attr]

    @property
    def element_size(self) -> int:
        """Element size in bytes (1, 2 or 4)."""
        return int(self._node.element_size)  # type: ignore[union-attr]

    def _repr_fields(self) -> str:
        return f" dptr={_address(self.dptr)} value={self.value}"

    @property
    def width(self) -> int:
        """Elements per row."""
        return int(self._node.width)  # type: ignore[union-attr]

    @property
    def height(self) -> int:
        """Rows."""
        return int(self._node.height)  # type: ignore[union-attr]

    @property
    def pitch(self) -> int:
        """Bytes from one row to the next; 0 with one row (unused then), as cuda.core reads it back."""
        return int(self._node.pitch) if self.height > 1 else 0  # type: ignore[union-attr]


class MemcpyNode(GraphNode):
    """A memcpy node."""

    __slots__ = ()

    def update(
        self,
        *,
        dst: Any = None,
        src: Any = None,
        size: int | None = None,
        dst_owner: Any = None,
        src_owner: Any = None,
    ) -> None:
        """Replace the copy's destination, source or size in the definition; ``None`` keeps a value (an owner
        only beside its raw address)."""
        changes, owners = memcpy_changes(dst, src, size, dst_owner, src_owner, "MemcpyNode.update")
        self._changed(changes, owners)

    @property
    def dst(self) -> Any:
        """The destination, as given."""
        return _given(self._node.dst)  # type: ignore[union-attr]

    @property
    def src(self) -> Any:
        """The source, as given."""
        return _given(self._node.src)  # type: ignore[union-attr]

    @property
    def size(self) -> int:
        """Bytes copied."""
        return int(self._node.nbytes)  # type: ignore[union-attr]

    def _repr_fields(self) -> str:
        return f" dst={_address(self.dst)} src={_address(self.src)} size={self.size}"


class AllocNode(GraphNode):
    """A graph allocation."""

    __slots__ = ()

    @property
    def dptr(self) -> AllocAddress:
        """The allocation's address, an ``int`` as cuda.core's: its address in the newest driver graph built from
        the definition (``instantiate()``, a ``handle``), 0 before the first. compat's builders take it as the
        allocation itself, so a node added later uses the address of the graph it is built into."""
        return AllocAddress(self._node)

    @property
    def bytesize(self) -> int:
        """Size in bytes."""
        return self._node.nbytes  # type: ignore[union-attr, no-any-return]

    @property
    def device_id(self) -> int | None:
        """The ordinal of the device the memory resides on: the one given, else the current device's as cuda.core
        reads it (``None`` for host memory, or where no device can be asked)."""
        node: Any = self._node
        if node.device is not None or node.memory_type == "host":
            return node.device  # type: ignore[no-any-return]
        try:
            return int(cuda_core_device(None).device_id)
        except CudaGraphError:  # (no cuda.core or no driver here)
            return None

    @property
    def memory_type(self) -> str:
        """``"device"``, ``"host"`` or ``"managed"``."""
        return self._node.memory_type  # type: ignore[union-attr, no-any-return]

    @property
    def peer_access(self) -> tuple[int, ...]:
        """Ordinals of the other devices given access."""
        return self._node.peer_access  # type: ignore[union-attr, no-any-return]

    def _repr_fields(self) -> str:
        return f" dptr={_address(self.dptr)} size={self.bytesize}"


class FreeNode(GraphNode):
    """A graph free."""

    __slots__ = ()

    @property
    def dptr(self) -> Any:
        """The allocation freed (its :attr:`AllocNode.dptr`, an ``int``)."""
        return AllocAddress(self._node.alloc)  # type: ignore[union-attr]

    def _repr_fields(self) -> str:
        return f" dptr={_address(self.dptr)}"


class ChildGraphNode(GraphNode):
    """A child graph."""

    __slots__ = ()

    def update(self, child: GraphDefinition) -> None:
        """Embed ``child`` instead (a definition that does not contain this node's)."""
        self._changed(child_changes(self._node, child, "ChildGraphNode.update"))

    @property
    def child_graph(self) -> GraphDefinition:
        """The embedded definition."""
        return self._def._child(self._node.body, self._node)  # type: ignore[union-attr, arg-type]


class _EventNode(GraphNode):
    """An event node (record or wait)."""

    __slots__ = ()

    def update(self, event: Any) -> None:
        """Use ``event`` instead."""
        self._changed({"event": event})

    @property
    def event(self) -> Any:
        """The event recorded or waited on."""
        return self._node.event  # type: ignore[union-attr]


class EventRecordNode(_EventNode):
    """An event record."""

    __slots__ = ()


class EventWaitNode(_EventNode):
    """An event wait."""

    __slots__ = ()


class HostCallbackNode(GraphNode):
    """A host callback."""

    __slots__ = ()

    def update(self, fn: Any, *, user_data: Any = None) -> None:
        """Call ``fn`` instead (a ctypes function pointer and ``user_data`` for a callback made with one)."""
        self._changed(callback_changes(self._node, fn, user_data, "HostCallbackNode.update"))

    @property
    def callback(self) -> Any:
        """The Python callable; ``None`` for a ctypes function pointer (as in cuda.core)."""
        return None if self._node.kind == "host_fn" else self._node.fn  # type: ignore[union-attr]

    def _repr_fields(self) -> str:
        node: Any = self._node
        if node.kind == "host_fn":
            return f" cfunc=0x{node.fn_address:x}"
        return f" callback={getattr(node.fn, '__name__', '?')}"


class ConditionalNode(GraphNode):
    """A conditional node; its bodies are :class:`GraphDefinition` objects."""

    __slots__ = ()

    @property
    def branches(self) -> tuple[GraphDefinition, ...]:
        """The bodies, in order."""
        return tuple(self._def._child(b, self._node) for b in self._node.bodies)  # type: ignore[union-attr, arg-type]

    @property
    def condition(self) -> GraphCondition:
        """The condition variable that drives the node."""
        return GraphCondition(self._node.cond)  # type: ignore[union-attr]

    @property
    def cond_type(self) -> str:
        """``"if"`` (if and if/else nodes), ``"while"`` or ``"switch"``: cuda.core's ``GraphConditionalType`` member
        (a ``str``) where cuda.core has it."""
        kind = self._node.kind  # type: ignore[union-attr]
        return core_str_enum("GraphConditionalType", "if" if kind.startswith("if") else kind.rstrip("_"))


class IfNode(ConditionalNode):
    """An if node."""

    __slots__ = ()

    @property
    def then(self) -> GraphDefinition:
        """The body run when the condition is non-zero."""
        return self.branches[0]


class IfElseNode(ConditionalNode):
    """An if/else node."""

    __slots__ = ()

    @property
    def then(self) -> GraphDefinition:
        """The body run when the condition is non-zero."""
        return self.branches[0]

    @property
    def else_(self) -> GraphDefinition:
        """The body run when the condition is zero."""
        return self.branches[1]


class WhileNode(ConditionalNode):
    """A while node."""

    __slots__ = ()

    @property
    def body(self) -> GraphDefinition:
        """The body run while the condition is non-zero."""
        return self.branches[0]


class SwitchNode(ConditionalNode):
    """A switch node."""

    __slots__ = ()


KINDS.update(
    {
        "kernel": KernelNode,
        "empty": EmptyNode,
        "memset": MemsetNode,
        "memcpy": MemcpyNode,
        "alloc": AllocNode,
        "free": FreeNode,
        "child": ChildGraphNode,
        "captured": GraphNode,  # a recording with graph memory: a child graph node whose graph is the recording
        "record": EventRecordNode,
        "wait": EventWaitNode,
        "host": HostCallbackNode,
        "host_fn": HostCallbackNode,
        "if": IfNode,
        "if_else": IfElseNode,
        "while": WhileNode,
        "switch": SwitchNode,
    }
)
