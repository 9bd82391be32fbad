"""The one table from node class to its kind's driver behaviour (a :class:`~cudagraph.ops.kinds.base.KindOps`).

The table is built here, once, from the explicit list :data:`FAMILIES`: each
family module declares its ``(node class, ops)`` pairs in ``OPS`` and
registers nothing itself, so the table does not depend on what was imported
before. Adding a node kind means adding its pairs to a family module (or a
new module to :data:`FAMILIES`).

The generic loops read what a kind can do from its ops, never from its
class: :func:`ops_for` for one node, and for the batched kernel paths the
per-class table :data:`LAUNCHES` (the kinds whose ops declare
:attr:`~cudagraph.ops.kinds.base.KindOps.launches`), so that a kind
declaring the same capability takes the same path with no edit of a loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType

from ..definition.kinds.opaque import OpaqueNode
from ..definition.nodes import KernelNode, Node
from .kinds import control, copy, events, host, kernel, memop, memory, memset, opaque, structure
from .kinds.base import KindOps
from .kinds.kernel import KernelOps
from .kinds.opaque import OpaqueOps

__all__ = ["FAMILIES", "KERNEL", "LAUNCHES", "LIFTS", "OPAQUE", "OPS", "build", "launch_kinds", "ops_for"]

#: The family modules whose ``OPS`` make up the table, in the order they are read.
FAMILIES: tuple[ModuleType, ...] = (kernel, copy, memset, host, events, structure, control, memory, memop, opaque)


def build(families: Iterable[ModuleType]) -> dict[type[Node], KindOps]:
    """The table of the ``OPS`` pairs of ``families``.

    Raises
    ------
    ValueError
        Two families name the same node class.
    """
    table: dict[type[Node], KindOps] = {}
    for family in families:
        for cls, ops in family.OPS:
            if cls in table:
                raise ValueError(f"{cls.__name__} has ops in two families ({family.__name__} and another)")
            table[cls] = ops
    return table


def _lifts(table: dict[type[Node], KindOps]) -> dict[str, KindOps]:
    """``CUgraphNodeType`` name -> the ops that lifts driver nodes of that type (one per type)."""
    out: dict[str, KindOps] = {}
    for ops in table.values():
        name = ops.lifts
        if name is not None and out.setdefault(name, ops) is not ops:
            raise ValueError(f"two node kinds lift {name}")
    return out


def launch_kinds(table: dict[type[Node], KindOps]) -> dict[type[Node], KernelOps]:
    """The entries of ``table`` whose ops declare :attr:`~cudagraph.ops.kinds.base.KindOps.launches`.

    Raises
    ------
    ValueError
        Ops declaring ``launches`` are not a :class:`~cudagraph.ops.kinds.kernel.KernelOps` (the interface
        the batched kernel paths call).
    """
    out: dict[type[Node], KernelOps] = {}
    for cls, ops in table.items():
        if ops.launches:
            if not isinstance(ops, KernelOps):
                raise ValueError(f"{cls.__name__}: ops declaring launches must be a KernelOps, not {ops!r}")
            out[cls] = ops
    return out


#: node class -> its ops (exact classes; see :func:`ops_for` for subclasses).
OPS: dict[type[Node], KindOps] = build(FAMILIES)
#: driver node type name -> the ops whose ``lift`` reads it.
LIFTS: dict[str, KindOps] = _lifts(OPS)
#: node class (exact) -> its ops, for the kinds the batched kernel paths take (:func:`launch_kinds`): the
#: loops' fast paths test ``type(node) in LAUNCHES`` (one lookup) and call the ops found there.
LAUNCHES: dict[type[Node], KernelOps] = launch_kinds(OPS)
#: The kernel kind's ops, which lifting calls for the kernel nodes it reads in bulk (``materialize.lift``).
KERNEL: KernelOps = OPS[KernelNode]  # type: ignore[assignment]
#: The ops of opaque nodes, which lifting makes for driver nodes no kind reads.
OPAQUE: OpaqueOps = OPS[OpaqueNode]  # type: ignore[assignment]


def ops_for(node: Node) -> KindOps:
    """The ops of ``node``'s kind (of its nearest registered base class for a subclass).

    Raises
    ------
    TypeError
        No kind is registered for the node's class or its bases.
    """
    ops = OPS.get(type(node))
    if ops is not None:
        return ops
    for cls in type(node).__mro__[1:]:
        ops = OPS.get(cls)
        if ops is not None:
            return ops
    raise TypeError(f"{node.label}: no driver behaviour is registered for {type(node).__name__}")
