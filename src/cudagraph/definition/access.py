"""Access declarations: what a node reads and writes, as byte ranges of named memory (GPU-free).

A kernel argument wrapped as :class:`In`, :class:`Out` or :class:`InOut`, and the ``reads=`` /
``writes=`` keywords of :meth:`Graph.kernel <cudagraph.Graph.kernel>` and :meth:`Graph.host
<cudagraph.Graph.host>`, declare accesses; copies, fills, memory operations, allocations and frees
declare their own from their operands (their kinds' ``_memory_accesses``). Each access is resolved
into a :class:`Region`: a *space* (device or host addresses, a pointer :class:`~cudagraph.Param` by
name, a graph allocation, or an object with no address, by identity), a half-open byte range and a
mode. Two regions conflict when they share a space, their ranges overlap and one of them writes.

Wrapping changes nothing about what is passed: the kernel gets the wrapped value itself, and
``offset=`` / ``nbytes=`` only narrow the declared range.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from ..errors import OperandError
from .addresses import Deferred, resolve_address
from .condition import Condition
from .node import bodies_of, graph_address
from .param import Param
from .param_offset import ParamAt

if TYPE_CHECKING:
    from .core import GraphCore
    from .node import Node

__all__ = [
    "ACCESS_TYPES",
    "READ",
    "WRITE",
    "Access",
    "In",
    "InOut",
    "Out",
    "Region",
    "access_label",
    "declare",
    "keyword_regions",
    "memory_name",
    "node_regions",
    "split_args",
]

#: The mode bits of a :class:`Region`.
READ, WRITE = 1, 2
#: The end of a range whose size is not known (a parameter used whole).
_END = 1 << 64
_MEM = ("mem",)


class Access:
    """A value wrapped with the access a node makes to its memory (base of :class:`In`, :class:`Out`, :class:`InOut`).

    Parameters
    ----------
    value : object
        A ``cuda.core`` ``Buffer``, an object with ``__cuda_array_interface__``, ``__array_interface__``
        or DLPack (a tensor, an array or a slice of one), an ``int`` address (give ``nbytes``), a
        pointer :class:`~cudagraph.Param`, a graph allocation, or (in ``reads=`` / ``writes=`` only)
        any other object, which stands for memory of its own compared by identity.
    offset : int, optional
        Where the range starts, in bytes from the value's address (default 0).
    nbytes : int, optional
        The range's size in bytes (default: to the end of the value's memory; a parameter with no
        ``nbytes`` is used whole).

    Raises
    ------
    OperandError
        ``offset`` is not a non-negative int, ``nbytes`` not a positive int, or ``value`` is itself wrapped.
    """

    __slots__ = ("value", "offset", "nbytes")
    #: :data:`READ`, :data:`WRITE` or both.
    mode: ClassVar[int] = 0

    def __init__(self, value: Any, *, offset: int = 0, nbytes: int | None = None) -> None:
        name = type(self).__name__
        if isinstance(value, Access):
            raise OperandError(f"{name}({value!r}): the value is wrapped already; wrap it once")
        self.value = value
        self.offset = _size(offset, f"{name}: offset", 0)
        self.nbytes = None if nbytes is None else _size(nbytes, f"{name}: nbytes", 1)

    def __repr__(self) -> str:
        extra = (f", offset={self.offset}" if self.offset else "") + (
            f", nbytes={self.nbytes}" if self.nbytes is not None else ""
        )
        return f"{type(self).__name__}({self.value!r}{extra})"


class In(Access):
    """A value the node reads (see :class:`Access` for the parameters).

    Examples
    --------
    >>> import cudagraph as cg
    >>> cg.In(0x1000, nbytes=64)
    In(4096, nbytes=64)
    """

    __slots__ = ()
    mode = READ


class Out(Access):
    """A value the node writes (see :class:`Access` for the parameters)."""

    __slots__ = ()
    mode = WRITE


class InOut(Access):
    """A value the node reads and writes (see :class:`Access` for the parameters)."""

    __slots__ = ()
    mode = READ | WRITE


#: The wrapper classes (the kernel builder unwraps an argument of one of these).
ACCESS_TYPES: frozenset[type] = frozenset((In, Out, InOut))


def _size(value: Any, what: str, least: int) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise OperandError(f"{what} must be an int, got {type(value).__name__}")
    try:
        v = operator.index(value)
    except Exception:
        raise OperandError(f"{what} must be an int, got {type(value).__name__}") from None
    if v < least or v >= _END:
        raise OperandError(f"{what} must be at least {least} and below 2**64, got {v}")
    return v


class Region(NamedTuple):
    """One resolved access: ``mode`` on bytes ``[lo, hi)`` of ``space``, declared by ``what``."""

    space: Hashable
    lo: int
    hi: int
    mode: int
    what: str


def region(obj: Any, mode: int, what: str, offset: int = 0, nbytes: int | None = None, opaque: bool = False) -> Region:
    """The :class:`Region` of operand ``obj`` accessed with ``mode`` (``what`` names it in errors).

    ``opaque``: an object that is not memory stands for memory of its own, compared by identity
    (``reads=`` / ``writes=``); without it such an object is refused.

    Raises
    ------
    OperandError
        The object is not memory (or a scalar parameter), an ``int`` address comes without ``nbytes``
        or outside 0..2**64-1, or the range does not fit the memory (or runs past 2**64).
    """
    r = _region(obj, mode, what, offset, nbytes, opaque)
    if r.lo < 0 or r.hi > _END:
        raise OperandError(
            f"{what}: the declared range [{r.lo}, {r.hi}) is outside the address space 0..2**64"
            + (" (an int address must be in 0..2**64-1)" if r.lo < 0 else "")
        )
    return r


def _region(obj: Any, mode: int, what: str, offset: int, nbytes: int | None, opaque: bool) -> Region:
    """:func:`region` before its range is checked against the address space."""
    if isinstance(obj, Access):
        if obj.offset or obj.nbytes is not None:
            offset, nbytes = offset + obj.offset, nbytes if nbytes is not None else obj.nbytes
        mode, obj = obj.mode, obj.value
    t = type(obj)
    if t is Param:
        if obj.dtype is not None:
            raise OperandError(f"{what}: param {obj.name!r} is a {obj.dtype} scalar, not memory")
        return Region(("param", obj.name), offset, _END if nbytes is None else offset + nbytes, mode, what)
    if t is ParamAt:
        lo = obj.offset + offset
        return Region(("param", obj.param.name), lo, _END if nbytes is None else lo + nbytes, mode, what)
    if graph_address(obj):
        alloc = getattr(obj, "alloc", obj)
        lo = getattr(obj, "offset", 0) if alloc is not obj else 0
        lo += offset
        hi = alloc.nbytes if nbytes is None else lo + nbytes
        return _checked(Region(("alloc", alloc), lo, hi, mode, what), alloc.nbytes, what)
    if t is Condition or obj is None or isinstance(obj, (bool, float, complex, str, np.bool_, np.floating)):
        raise OperandError(f"{what}: expected memory to declare, got {t.__name__}")
    if t is Deferred:
        return Region(("object", id(obj.obj)), offset, _END if nbytes is None else offset + nbytes, mode, what)
    if t is int or isinstance(obj, np.integer):
        if nbytes is None:
            raise OperandError(f"{what}: an int address has no size; declare one with nbytes= (cg.In(ptr, nbytes=...))")
        lo = int(obj) + offset
        return Region(_MEM, lo, lo + nbytes, mode, what)
    try:
        ptr, _owner, size = resolve_address(obj, what, sized=True)
    except OperandError:
        if not opaque:
            raise
        return Region(("object", id(obj)), offset, _END if nbytes is None else offset + nbytes, mode, what)
    if type(ptr) is Deferred:  # DLPack only: its address is read by the driver layer; the object is its memory
        return Region(("object", id(obj)), offset, _END if nbytes is None else offset + nbytes, mode, what)
    if size is None and nbytes is None:
        raise OperandError(f"{what}: the size of {t.__name__} is not known; declare one with nbytes=")
    lo = int(ptr) + offset
    hi = lo + nbytes if nbytes is not None else int(ptr) + int(size)  # type: ignore[arg-type]
    return _checked(Region(_MEM, lo, hi, mode, what), None if size is None else int(ptr) + int(size), what)


def _checked(r: Region, end: int | None, what: str) -> Region:
    """``r``, or the error when its range is empty or ends past ``end`` (the memory's end, where known)."""
    if r.hi <= r.lo:
        raise OperandError(f"{what}: the declared range is empty (its offset is at or past the end of the memory)")
    if end is not None and r.hi > end:
        raise OperandError(f"{what}: the declared range ends {r.hi - end} bytes past the end of the memory")
    return r


def split_args(args: tuple[Any, ...], what: str) -> tuple[tuple[Any, ...], tuple[Region, ...]]:
    """``args`` with every :class:`Access` replaced by its value, and the regions they declare.

    Raises
    ------
    OperandError
        A wrapped value is not memory (named by argument index).
    """
    plain = list(args)
    regions: list[Region] = []
    for i, a in enumerate(args):
        if type(a) in ACCESS_TYPES:
            regions.append(region(a, a.mode, f"{what}: argument {i}"))
            plain[i] = a.value
    return tuple(plain), tuple(regions)


def keyword_regions(reads: Any, writes: Any, what: str) -> tuple[Region, ...]:
    """The regions of ``reads=`` and ``writes=`` (each a value, an :class:`Access` or a sequence of them).

    A wrapper inside ``reads=`` / ``writes=`` keeps its own range; its mode is the keyword's.

    Raises
    ------
    OperandError
        An entry is not memory (named by keyword and position).
    """
    out: list[Region] = []
    for key, mode, values in (("reads", READ, reads), ("writes", WRITE, writes)):
        if values is None:
            continue
        items = list(values) if isinstance(values, (list, tuple)) else [values]
        for i, v in enumerate(items):
            label = f"{what}: {key}[{i}]" if isinstance(values, (list, tuple)) else f"{what}: {key}"
            if isinstance(v, Access):
                out.append(region(v.value, mode, label, v.offset, v.nbytes, opaque=True))
            else:
                out.append(region(v, mode, label, opaque=True))
    return tuple(out)


def declare(graph: GraphCore, node: Node, regions: tuple[Region, ...]) -> None:
    """Record ``regions`` as the declared accesses of ``node`` (just added to ``graph``)."""
    table = graph._declared
    if table is None:
        table = graph._declared = {}
    table[node] = regions


def _intrinsic(node: Node) -> tuple[Region, ...]:
    """The regions of the kind's own memory operands (an operand that cannot be resolved orders nothing)."""
    accesses = node._memory_accesses()
    if not accesses:
        return ()
    out = []
    for mode, operand, nbytes, field in accesses:
        if operand is None or (type(operand) is int and operand == 0):
            continue
        try:
            out.append(region(operand, mode, f"{node.label}: {field}", 0, nbytes, opaque=True))
        except OperandError:
            continue  # an operand validate() refuses: nothing to order by
    return tuple(out)


def node_regions(node: Node, _bodies: dict[int, tuple[Region, ...]] | None = None) -> tuple[Region, ...]:
    """Every access of ``node``: its kind's own, its declarations, and the union of its bodies' nodes' accesses."""
    out = _intrinsic(node)
    table = node.graph._declared
    if table is not None:
        mine = table.get(node)
        if mine:
            out = out + mine
    if node.body_fields:
        cache = {} if _bodies is None else _bodies
        for body in bodies_of(node):
            got = cache.get(id(body))
            if got is None:
                got = cache[id(body)] = tuple(r for n in body._nodes for r in node_regions(n, cache))
            out = out + got
    return out


def memory_name(space: Hashable, lo: int, hi: int) -> str:
    """``space`` and the byte range ``[lo, hi)`` in words, for messages and labels."""
    kind = space[0]  # type: ignore[index]
    if kind == "param":
        whole = lo == 0 and hi >= _END
        return f"${space[1]}" + ("" if whole else f"[{lo}:{'' if hi >= _END else hi}]")  # type: ignore[index]
    if kind == "alloc":
        alloc = space[1]  # type: ignore[index]
        whole = lo == 0 and hi == alloc.nbytes
        return f"alloc#{alloc.index}" + ("" if whole else f"[{lo}:{hi}]")
    if kind == "object":
        return f"object@{space[1]:#x}" + ("" if lo == 0 and hi >= _END else f"[{lo}:{'' if hi >= _END else hi}]")  # type: ignore[index]
    return f"{lo:#x}+{hi - lo}"


def access_label(node: Node) -> str:
    """``"R: a, b  W: c"``: what ``node`` reads and writes, or ``""`` when its graph declares nothing."""
    g = node.graph
    if g._declared is None and g._inference is None:
        return ""
    regions = node_regions(node)
    reads = [memory_name(r.space, r.lo, r.hi) for r in regions if r.mode & READ]
    writes = [memory_name(r.space, r.lo, r.hi) for r in regions if r.mode & WRITE]
    parts = ([f"R: {', '.join(dict.fromkeys(reads))}"] if reads else []) + (
        [f"W: {', '.join(dict.fromkeys(writes))}"] if writes else []
    )
    return "  ".join(parts)


def regions_of(nodes: Iterable[Node]) -> list[tuple[Region, ...]]:
    """:func:`node_regions` of each node, bodies' unions shared."""
    cache: dict[int, tuple[Region, ...]] = {}
    return [node_regions(n, cache) for n in nodes]
