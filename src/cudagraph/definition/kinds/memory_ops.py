"""Memory operations: fills (:class:`MemsetNode`) and 32/64-bit word writes and waits (:class:`BatchMemOpNode`).

GPU-free: the builders check sizes, alignment and values; the driver layer
turns the nodes into ``CUDA_MEMSET_NODE_PARAMS`` and batch memory operations.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import DefinitionError, OperandError
from ..core import After, GraphCore, builder, check_size
from ..node import Node, _short, graph_address

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = [
    "FILL_SCALARS",
    "WAIT_COMPARISONS",
    "WAIT_VALUE_FLUSH",
    "BatchMemOpNode",
    "MemoryOpBuilders",
    "MemsetNode",
    "WaitValueNode",
    "WriteValueNode",
]


class MemsetNode(Node):
    """A fill of ``width`` x ``height`` elements of ``element_size`` bytes."""

    __slots__ = ("dst", "value", "element_size", "width", "height", "pitch", "_keep")
    kind = "memset"
    toggleable = True
    pointer_fields = ("dst",)
    in_conditional_body = True
    update_fields = ("dst", "value", "element_size", "width", "height", "pitch")
    dot_style = 'shape=box style=filled fillcolor="#fff3cd"'
    mermaid_shape = ('[\\"', '"\\]')

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

    def _memory_accesses(self) -> tuple[tuple[int, Any, int | None, str], ...]:
        return ((2, self.dst, (self.height - 1) * self.pitch + self.width * self.element_size, "dst"),)

    def _rebuild(self, scratch: Graph, values: dict[str, Any], changes: dict[str, Any]) -> Node:
        height = values["height"]
        # The pitch is kept for a 2-D fill; a bad height is refused by memset itself.
        pitch = values["pitch"] if type(height) is int and height > 1 else None
        return scratch.memset(
            values["dst"],
            # The stored value is masked to the element size, so always in range.
            values["value"],
            width=values["width"],
            height=values["height"],
            pitch=pitch,
            element_size=values["element_size"],
            name=self.name,
        )


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
    pointer_fields = ("ptr",)
    ptr: Any
    value: int
    bits: int
    flags: int
    _keep: tuple[Any, ...]

    def update(self, **changes: Any) -> Node:
        """Not supported: build a new node instead."""
        raise DefinitionError(f"{self.label}: a {self.kind} node cannot be updated; add a new one")

    def _memory_accesses(self) -> tuple[tuple[int, Any, int | None, str], ...]:
        return ((1 if self.kind == "wait_value" else 2, self.ptr, self.bits // 8, "ptr"),)


class WriteValueNode(BatchMemOpNode):
    """Writes :attr:`value` to the word at :attr:`ptr` (``CU_STREAM_MEM_OP_WRITE_VALUE_32/64``)."""

    __slots__ = ()
    kind = "write_value"
    dot_style = 'shape=note style=filled fillcolor="#ffe8cc"'

    def describe(self) -> str:
        return f"*{_short(self.ptr)} = {self.value:#x} ({self.bits}-bit)"


#: ``wait_value`` comparisons by name, with the ``CU_STREAM_WAIT_VALUE_*`` flag of each.
WAIT_COMPARISONS = {"geq": 0, "eq": 1, "and": 2, "nor": 3}
WAIT_VALUE_FLUSH = 1 << 30


class WaitValueNode(BatchMemOpNode):
    """Waits until the word at :attr:`ptr` compares true with :attr:`value` (``WAIT_VALUE_32/64``)."""

    __slots__ = ()
    kind = "wait_value"
    dot_style = 'shape=note style="filled,dashed" fillcolor="#ffe8cc"'

    @property
    def cmp(self) -> str:
        """The comparison: ``geq``, ``eq``, ``and`` or ``nor``."""
        code = self.flags & 0xF
        return next(k for k, v in WAIT_COMPARISONS.items() if v == code)

    def describe(self) -> str:
        flush = " flush" if self.flags & WAIT_VALUE_FLUSH else ""
        return f"until *{_short(self.ptr)} {self.cmp} {self.value:#x} ({self.bits}-bit{flush})"


#: The numpy scalar types a fill takes as its value (1, 2 or 4 bytes, kind ``b``, ``i``, ``u`` or ``f``): the compiled
#: ``Graph.memset`` reads their bytes as the bits, as :meth:`MemoryOpBuilders.memset` does.
FILL_SCALARS: tuple[type, ...] = tuple(dict.fromkeys(np.dtype(c).type for c in "?bBhHeiIf"))


def _plain_int(value: Any, what: str) -> int:
    """An int (or numpy integer, or subclass) as a plain ``int``; what its own methods raise becomes the error
    naming ``what`` (a subclass's ``__index__`` or comparisons are never run after this)."""
    try:
        return int.__index__(operator.index(value))
    except Exception as e:
        raise OperandError(f"{what} could not be read as an int ({type(e).__name__} raised by its value)") from e


def _word_size(value: Any, what: str, allowed: tuple[int, ...]) -> int:
    """``value`` as one of ``allowed`` (an int or numpy integer), or the error naming ``what``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise OperandError(f"{what} must be an int ({', '.join(map(str, allowed))}), got {type(value).__name__}")
    v = _plain_int(value, what)
    if v not in allowed:
        raise DefinitionError(f"{what} must be {', '.join(map(str, allowed[:-1]))} or {allowed[-1]}, got {v}")
    return v


class MemoryOpBuilders(GraphCore):
    """The memory-operation builders of :class:`~cudagraph.Graph`: :meth:`memset`, :meth:`write_value`,
    :meth:`wait_value`.
    """

    __slots__ = ()

    @builder
    def memset(
        self,
        dst: Any,
        value: Any,
        count: int | None = None,
        *,
        element_size: int | None = None,
        width: int | None = None,
        height: int = 1,
        pitch: int | None = None,
        after: After = None,
        name: str | None = None,
    ) -> MemsetNode:
        """Add a fill of 1-, 2- or 4-byte elements, optionally 2-D with a pitch.

        Parameters
        ----------
        dst : Buffer, array, int or Param
            Device memory to fill.
        value : int or numpy scalar
            The element value. A numpy scalar sets ``element_size`` from its
            itemsize and is stored by bit pattern (``np.float32(1.0)`` fills
            ``0x3f800000``).
        count : int, optional
            Number of elements for a 1-D fill (alias of ``width``); defaults to
            the size of ``dst`` when known.
        element_size : {1, 2, 4}, optional
            Bytes per element (default 1, or the itemsize of a numpy ``value``).
        width : int, optional
            Elements per row for a 2-D fill.
        height : int
            Rows (default 1).
        pitch : int, optional
            Bytes between rows (default ``width * element_size``).
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label.

        Returns
        -------
        MemsetNode

        Raises
        ------
        OperandError
            ``dst`` is not memory, or ``value`` does not fit the element size.
        DefinitionError
            Bad sizes, or a fill larger than ``dst``.
        """
        what = self._what("memset", name)
        d, dkeep, dsize = self._pointer(dst, what, "dst")
        if element_size is not None and type(element_size) is not int:
            if isinstance(element_size, (bool, np.bool_)) or not isinstance(element_size, (int, np.integer)):
                raise OperandError(f"{what}: element_size must be an int (1, 2, 4), got {type(element_size).__name__}")
            element_size = _plain_int(element_size, f"{what}: element_size")
        if isinstance(value, np.generic):
            if value.dtype.kind not in "biuf":
                raise OperandError(
                    f"{what}: value must be an int or a numeric numpy scalar, got numpy {type(value).__name__}"
                )
            if element_size is None:
                element_size = value.dtype.itemsize
            if value.dtype.itemsize != element_size:
                raise OperandError(
                    f"{what}: value is a {value.dtype.itemsize}-byte {value.dtype}, but element_size is {element_size}"
                )
            if element_size not in (1, 2, 4):
                raise DefinitionError(f"{what}: element_size must be 1, 2 or 4, got {element_size}")
            bits = int.from_bytes(value.tobytes(), "little")
        elif isinstance(value, int) and not isinstance(value, bool):
            value = _plain_int(value, f"{what}: value")
            element_size = 1 if element_size is None else element_size
            if element_size not in (1, 2, 4):
                raise DefinitionError(f"{what}: element_size must be 1, 2 or 4, got {element_size}")
            lo, hi = -(1 << (8 * element_size - 1)), (1 << (8 * element_size)) - 1
            if not lo <= value <= hi:
                raise OperandError(f"{what}: value {value} does not fit in {element_size} byte(s)")
            bits = value & ((1 << (8 * element_size)) - 1)
        else:
            raise OperandError(f"{what}: value must be an int or a numpy scalar, got {type(value).__name__}")
        if count is not None and width is not None:
            raise DefinitionError(f"{what}: give count or width, not both")
        w = count if count is not None else width
        if w is None:
            if dsize is None:
                raise DefinitionError(f"{what}: count is required when dst has no known size")
            if height != 1:
                raise DefinitionError(f"{what}: width is required for a 2-D fill")
            w = dsize // element_size
        w = check_size(w, what, "width" if width is not None else "count")
        h = check_size(height, what, "height")
        row = w * element_size
        p = row if pitch is None else check_size(pitch, what, "pitch")
        if p < row:
            raise DefinitionError(f"{what}: pitch {p} is smaller than a row ({w} x {element_size} = {row} bytes)")
        if h > 1 and pitch is not None and p % element_size:
            raise DefinitionError(f"{what}: pitch {p} is not a multiple of element_size {element_size}")
        extent = p * (h - 1) + row
        if dsize is not None and extent > dsize:
            raise DefinitionError(f"{what}: the fill covers {extent} bytes but dst has {dsize}")
        node = MemsetNode.__new__(MemsetNode)
        node.dst, node.value, node.element_size = d, bits, element_size
        node.width, node.height, node.pitch = w, h, p
        node._keep = (dkeep,)
        self._place(node, after, what, name or "memset")
        self._note_late(d)
        return node

    def _memop(
        self, cls: Any, kind: str, ptr: Any, value: Any, bits: Any, flags: int, after: After, name: str | None
    ) -> Any:
        what = self._what(kind, name)
        if graph_address(ptr):
            raise OperandError(
                f"{what}: ptr is a graph allocation; graph memory comes from a memory pool, which the driver's "
                "memory operations refuse: use memory from cuMemAlloc"
            )
        p, keep, size = self._pointer(ptr, what, "ptr")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise OperandError(f"{what}: value must be an integer, got {type(value).__name__}")
        v = _plain_int(value, f"{what}: value")
        if bits is None:
            bits = (
                8 * value.dtype.itemsize if isinstance(value, np.generic) else 32 if -(1 << 31) <= v < 1 << 32 else 64
            )
        bits = _word_size(bits, f"{what}: bits", (32, 64))
        if not -(1 << (bits - 1)) <= v < 1 << bits:
            raise OperandError(f"{what}: value {v} does not fit in {bits} bits")
        if size is not None and size < bits // 8:
            raise DefinitionError(f"{what}: ptr holds {size} bytes, less than a {bits}-bit word")
        if isinstance(p, int) and p % (bits // 8):
            raise DefinitionError(f"{what}: address {p:#x} is not aligned to {bits // 8} bytes")
        node: BatchMemOpNode = cls.__new__(cls)
        node.ptr, node.value, node.bits, node.flags = p, v & ((1 << bits) - 1), bits, flags
        node._keep = (keep,)
        self._place(node, after, what, name or kind)
        self._note_late(p)
        return node

    @builder
    def write_value(
        self,
        ptr: Any,
        value: int,
        *,
        bits: int | None = None,
        after: After = None,
        name: str | None = None,
    ) -> WriteValueNode:
        """Add a memory-operation node that writes a 32- or 64-bit ``value`` to ``ptr``.

        Parameters
        ----------
        ptr : Buffer, array, int or Param
            The device word (aligned to its size), in memory from ``cuMemAlloc``
            (or pinned / registered host memory): the driver refuses memory
            operations on memory-pool memory (``cuMemAllocAsync``, ``cuda.core``
            device buffers, graph allocations).
        value : int or numpy integer
            The value; negative values are written in two's complement.
        bits : {32, 64}, optional
            Word size (default: a numpy value's size, else 32 when the value
            fits, else 64).

        Notes
        -----
        The write is preceded by a memory fence scoped to the graph (earlier
        writes are visible first); the driver's graph API (v2 memory
        operations) offers no flag to drop it.

        Returns
        -------
        WriteValueNode
        """
        node: WriteValueNode = self._memop(WriteValueNode, "write_value", ptr, value, bits, 0, after, name)
        return node

    @builder
    def wait_value(
        self,
        ptr: Any,
        value: int,
        *,
        cmp: str = "geq",
        bits: int | None = None,
        flush: bool = False,
        after: After = None,
        name: str | None = None,
    ) -> WaitValueNode:
        """Add a memory-operation node that waits until the word at ``ptr`` compares true with ``value``.

        Parameters
        ----------
        ptr : Buffer, array, int or Param
            The device word, in memory from ``cuMemAlloc`` (see :meth:`write_value`).
        value : int
            The operand of the comparison.
        cmp : {"geq", "eq", "and", "nor"}
            ``*ptr >= value`` (unsigned, wrapping), ``*ptr == value``,
            ``(*ptr & value) != 0``, ``~(*ptr | value) != 0``.
        bits : {32, 64}, optional
            Word size.
        flush : bool
            ``CU_STREAM_WAIT_VALUE_FLUSH``: flush remote writes after the wait
            (needs device support).

        Returns
        -------
        WaitValueNode
        """
        what = self._what("wait_value", name)
        if type(cmp) is not str or cmp not in WAIT_COMPARISONS:
            raise OperandError(f"{what}: cmp must be one of {', '.join(WAIT_COMPARISONS)}; got {cmp!r}")
        if type(flush) is not bool:
            if not (isinstance(flush, (int, np.integer, np.bool_)) and flush in (0, 1)):  # (an array: no truth)
                raise OperandError(f"{what}: flush must be a bool, got {type(flush).__name__}")
            flush = bool(flush)
        flags = WAIT_COMPARISONS[cmp] | (WAIT_VALUE_FLUSH if flush else 0)
        node: WaitValueNode = self._memop(WaitValueNode, "wait_value", ptr, value, bits, flags, after, name)
        return node
