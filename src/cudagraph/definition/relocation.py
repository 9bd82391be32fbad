"""Moving a definition's intermediate memory: every operand pointing into a range is pointed at another (GPU-free).

A graph captured by PyTorch keeps its intermediates in the capture's private memory pool, where one
range of bytes serves several tensors in turn. A lifted definition that runs on new inputs and outputs
must not share those bytes with the graph it came from (whose replay writes the static output there)
nor hand a caller's output the uses of the other tensors that lived at the same place. Relocating
gives the definition memory of its own: each range (a pool segment) is replaced by a new base address,
in kernel arguments (aligned 8-byte slots of the argument bytes, as :meth:`Graph.parametrize
<cudagraph.Graph.parametrize>` reads them), copy and fill operands, in child graphs and bodies.

Two steps, so the caller allocates only what is used: :func:`plan_relocation` finds the slots and
says which ranges are used; :meth:`Relocation.apply` writes the new addresses.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from ..errors import OperandError
from .edits import before_edit
from .memory_info import Memory
from .node import Node
from .param import Param
from .param_offset import ParamAt, ParamBytes
from .parametrize import Parametrizing, _Region

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["Relocation", "plan_relocation"]

_U64 = struct.Struct("<Q")


class Relocation:
    """The slots of a definition that point into some ranges, to be moved to new bases.

    Attributes
    ----------
    ranges : list of (int, int)
        ``(address, nbytes)`` of each range, as given.
    used : list of int
        The positions in :attr:`ranges` of the ranges some operand points into.
    slots : int
        The operands found (pointer fields and argument slots).
    """

    __slots__ = ("graph", "ranges", "used", "slots", "_changes", "_dummies")

    def __init__(self, graph: Graph, ranges: list[tuple[int, int]], work: Parametrizing, dummies: list[Param]) -> None:
        self.graph = graph
        self.ranges = ranges
        self._changes = work.changes
        self._dummies = {id(p): i for i, p in enumerate(dummies)}
        self.slots = len(work.rewrites)
        self.used = sorted({int(w.param[1:]) for w in work.rewrites})  # (the regions are named "_<position>")

    def apply(self, bases: dict[int, int]) -> None:
        """Point every slot found at ``bases[range position] + its offset``; ``bases`` covers :attr:`used`."""
        dummies = self._dummies

        def address(p: Any, off: int) -> int | None:
            i = dummies.get(id(p))
            return None if i is None else bases[i] + off

        for graph in {id(node.graph): node.graph for node, _, _ in self._changes}.values():
            before_edit(graph)
        for node, field, value in self._changes:
            setattr(node, field, _concrete(node, field, value, address))


def _concrete(node: Node, field: str, value: Any, address: Any) -> Any:
    """A planned parameter use made concrete: the dummy parameters replaced by their new addresses."""
    if type(value) is Param:
        return address(value, 0)
    if type(value) is ParamAt:
        return address(value.param, value.offset)
    out = []
    for a in value:  # an argument tuple
        if type(a) is Param:
            new = address(a, 0)
            out.append(a if new is None else new)
        elif type(a) is ParamBytes:
            data = bytearray(a)
            keep = []
            for pos, p, off in a.patches:
                new = address(p, off)
                if new is None:
                    keep.append((pos, p, off))
                else:
                    _U64.pack_into(data, pos, new)
            out.append(ParamBytes(bytes(data), tuple(keep)) if keep else bytes(data))
        else:
            out.append(a)
    return tuple(out)


def plan_relocation(graph: Graph, ranges: list[tuple[int, int]]) -> Relocation:
    """Find every operand of ``graph`` (bodies included) pointing into ``ranges`` (disjoint ``(address, nbytes)``).

    Raises
    ------
    OperandError
        An opaque node's driver parameters point into a range (named): it cannot be moved.
    """
    work = Parametrizing.__new__(Parametrizing)
    work.graph, work.only = graph, None
    dummies = []
    regions = []
    for i, (addr, nbytes) in enumerate(ranges):
        p = Param.__new__(Param)
        p.name, p.dtype = f"_{i}", None
        dummies.append(p)
        regions.append(_Region(f"_{i}", Memory(addr, nbytes), p))
    work.regions = regions
    work._ordered = sorted(regions, key=lambda r: r.start)
    work._starts = [r.start for r in work._ordered]
    work.changes, work.rewrites, work.new_params = [], [], []
    try:
        work.plan()
    except OperandError as exc:
        raise OperandError(
            f"relocating the intermediate memory of Graph {graph.name!r}: {exc}".replace(
                "cannot be parametrized", "cannot be moved"
            )
        ) from None
    return Relocation(graph, ranges, work, dummies)
