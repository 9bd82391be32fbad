"""Copies: :class:`MemcpyNode` (1-D), :class:`Memcpy2DNode` and :class:`Memcpy3DNode` (pitched), and their builders.

GPU-free: the direction of a copy is read from its pointers when the graph is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import DefinitionError
from ..core import After, GraphCore, builder, check_size
from ..node import Node, _short

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = ["CopyBuilders", "Memcpy2DNode", "Memcpy3DNode", "MemcpyNode"]


class MemcpyNode(Node):
    """A 1-D copy of ``nbytes`` bytes; the direction is read from the pointers."""

    __slots__ = ("dst", "src", "nbytes", "_keep")
    kind = "memcpy"
    toggleable = True
    pointer_fields = ("dst", "src")
    in_conditional_body = True
    update_fields = ("dst", "src", "nbytes")
    dot_style = 'shape=box style=filled fillcolor="#d1e7dd"'
    mermaid_shape = ('[/"', '"/]')

    dst: Any
    src: Any
    nbytes: int
    _keep: tuple[Any, ...]

    def describe(self) -> str:
        return f"{_short(self.src)} -> {_short(self.dst)} {self.nbytes} B"

    def _memory_accesses(self) -> tuple[tuple[int, Any, int | None, str], ...]:
        return ((1, self.src, self.nbytes, "src"), (2, self.dst, self.nbytes, "dst"))

    def _rebuild(self, scratch: Graph, values: dict[str, Any], changes: dict[str, Any]) -> Node:
        return scratch.memcpy(values["dst"], values["src"], values["nbytes"], name=self.name)


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
    pointer_fields = ("dst", "src")
    in_conditional_body = True
    dot_style = 'shape=box style=filled fillcolor="#d1e7dd"'
    mermaid_shape = ('[/"', '"/]')
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

    def _memory_accesses(self) -> tuple[tuple[int, Any, int | None, str], ...]:
        rows = (self.depth - 1) * self.src_height + self.height - 1
        src = rows * self.src_pitch + self.width
        dst = ((self.depth - 1) * self.dst_height + self.height - 1) * self.dst_pitch + self.width
        return ((1, self.src, src, "src"), (2, self.dst, dst, "dst"))

    def update(self, **changes: Any) -> Node:
        """Not supported: build a new node instead."""
        raise DefinitionError(f"{self.label}: a {self.kind} node cannot be updated; add a new one")


class Memcpy2DNode(Memcpy3DNode):
    """A pitched 2-D copy of ``height`` rows of ``width`` bytes (``depth`` is 1)."""

    __slots__ = ()
    kind = "memcpy2d"


class CopyBuilders(GraphCore):
    """The copy builders of :class:`~cudagraph.Graph`: :meth:`memcpy`, :meth:`memcpy2d`, :meth:`memcpy3d`."""

    __slots__ = ()

    @builder
    def memcpy(
        self,
        dst: Any,
        src: Any,
        nbytes: int | None = None,
        *,
        after: After = None,
        name: str | None = None,
    ) -> MemcpyNode:
        """Add a 1-D copy of ``nbytes`` bytes from ``src`` to ``dst``.

        The direction (host to device, device to host, device to device) is
        read from the pointers when the graph is built on the driver.

        Parameters
        ----------
        dst, src : Buffer, array, int or Param
            Device memory (``cuda.core`` ``Buffer``, ``__cuda_array_interface__``,
            DLPack), host memory (numpy arrays), an int address, or a pointer
            :class:`~cudagraph.Param`.
        nbytes : int, optional
            Bytes to copy; defaults to the size of ``src`` (or ``dst``) when known.
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label.

        Returns
        -------
        MemcpyNode

        Raises
        ------
        OperandError
            An operand is not memory, or is a null pointer.
        DefinitionError
            ``nbytes`` is not positive, is unknown, or exceeds an operand's size.
        """
        what = self._what("memcpy", name)
        d, dkeep, dsize = self._pointer(dst, what, "dst")
        s, skeep, ssize = self._pointer(src, what, "src")
        if nbytes is None:
            nbytes = ssize if ssize is not None else dsize
            if nbytes is None:
                raise DefinitionError(f"{what}: nbytes is required when neither operand has a known size")
        n = check_size(nbytes, what, "nbytes")
        if ssize is not None and n > ssize:
            raise DefinitionError(f"{what}: nbytes = {n} exceeds the {ssize} bytes of src")
        if dsize is not None and n > dsize:
            raise DefinitionError(f"{what}: nbytes = {n} exceeds the {dsize} bytes of dst")
        node = MemcpyNode.__new__(MemcpyNode)
        node.dst, node.src, node.nbytes = d, s, n
        node._keep = (dkeep, skeep)
        self._place(node, after, what, name or "memcpy")
        self._note_late(d, s)
        return node

    @builder
    def memcpy2d(
        self,
        dst: Any,
        dst_pitch: int,
        src: Any,
        src_pitch: int,
        width: int,
        height: int,
        *,
        after: After = None,
        name: str | None = None,
    ) -> Memcpy2DNode:
        """Add a pitched 2-D copy of ``height`` rows of ``width`` bytes (as ``cudaMemcpy2D``).

        Parameters
        ----------
        dst, src : Buffer, array, int, Param or AllocNode
            Base addresses (device or host memory; the direction is read
            from the pointers when the graph is built).
        dst_pitch, src_pitch : int
            Bytes between the starts of consecutive rows (at least ``width``).
        width : int
            Bytes copied per row.
        height : int
            Rows.

        Returns
        -------
        Memcpy2DNode

        Raises
        ------
        DefinitionError
            A size is not positive, a pitch is smaller than ``width``, or the
            copy runs past an operand of known size.
        """
        node: Memcpy2DNode = self._memcpy3d(
            Memcpy2DNode, "memcpy2d", dst, src, width, height, 1, dst_pitch, src_pitch, None, None, after, name
        )
        return node

    @builder
    def memcpy3d(
        self,
        dst: Any,
        src: Any,
        width: int,
        height: int,
        depth: int,
        *,
        dst_pitch: int | None = None,
        src_pitch: int | None = None,
        dst_height: int | None = None,
        src_height: int | None = None,
        after: After = None,
        name: str | None = None,
    ) -> Memcpy3DNode:
        """Add a pitched 3-D copy of ``depth`` slices of ``height`` rows of ``width`` bytes.

        Parameters
        ----------
        dst, src : Buffer, array, int, Param or AllocNode
            Base addresses.
        width : int
            Bytes per row copied.
        height, depth : int
            Rows per slice and slices copied.
        dst_pitch, src_pitch : int, optional
            Bytes between rows (default ``width``).
        dst_height, src_height : int, optional
            Rows between slices of each operand (default ``height``).

        Returns
        -------
        Memcpy3DNode
        """
        node: Memcpy3DNode = self._memcpy3d(
            Memcpy3DNode,
            "memcpy3d",
            dst,
            src,
            width,
            height,
            depth,
            dst_pitch,
            src_pitch,
            dst_height,
            src_height,
            after,
            name,
        )
        return node

    def _memcpy3d(
        self,
        cls: Any,
        kind: str,
        dst: Any,
        src: Any,
        width: Any,
        height: Any,
        depth: Any,
        dst_pitch: Any,
        src_pitch: Any,
        dst_height: Any,
        src_height: Any,
        after: After,
        name: str | None,
    ) -> Any:
        what = self._what(kind, name)
        d, dkeep, dsize = self._pointer(dst, what, "dst")
        s, skeep, ssize = self._pointer(src, what, "src")
        w = check_size(width, what, "width")
        h = check_size(height, what, "height")
        dep = check_size(depth, what, "depth")
        dp = w if dst_pitch is None else check_size(dst_pitch, what, "dst_pitch")
        sp = w if src_pitch is None else check_size(src_pitch, what, "src_pitch")
        dh = h if dst_height is None else check_size(dst_height, what, "dst_height")
        sh = h if src_height is None else check_size(src_height, what, "src_height")
        for label, pitch in (("dst_pitch", dp), ("src_pitch", sp)):
            if pitch < w:
                raise DefinitionError(f"{what}: {label} {pitch} is smaller than a row (width {w} bytes)")
        for label, rows in (("dst_height", dh), ("src_height", sh)):
            if rows < h:
                raise DefinitionError(f"{what}: {label} {rows} is smaller than the {h} rows copied per slice")
        for label, size, pitch, rows in (("dst", dsize, dp, dh), ("src", ssize, sp, sh)):
            extent = pitch * rows * (dep - 1) + pitch * (h - 1) + w
            if size is not None and extent > size:
                raise DefinitionError(f"{what}: the copy spans {extent} bytes of {label}, which has {size}")
        node = cls.__new__(cls)
        node.dst, node.src = d, s
        node.width, node.height, node.depth = w, h, dep
        node.dst_pitch, node.src_pitch, node.dst_height, node.src_height = dp, sp, dh, sh
        node._keep = (dkeep, skeep)
        self._place(node, after, what, name or kind)
        self._note_late(d, s)
        return node
