"""Values that exist only while a definition is being built: condition handles and allocation addresses.

A :class:`LowerState` belongs to one construction (one ``Lowering`` with the
bodies it builds, one capture, or one eager run). It is passed down
explicitly: the lowering carries it as ``Lowering.state``, the stream runs as
``run.state``, and the parameter builders of :mod:`cudagraph.ops` take it as
an argument where allocation addresses or condition handles are read.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..definition.condition import Condition
from ..definition.nodes import AllocNode, AllocOffset, Node
from ..driver.api import ctx_get_device, graph_conditional_handle_create
from ..driver.calls import require_driver
from ..errors import DefinitionError, ForeignNodeError, UnsupportedError

__all__ = [
    "LowerState",
    "late_value",
    "late_kernel_args",
    "is_late",
]


class LowerState:
    """Condition handles, allocation addresses and the driver graph of each definition graph.

    Parameters
    ----------
    ctx : CUcontext
        The context of the construction.
    eager : bool
        ``True`` for a run on streams (no graph: conditions have no handle).

    Attributes
    ----------
    ctx : CUcontext
        The context of the construction.
    graphs : dict
        ``id(Graph) -> CUgraph``: the driver graph each definition graph is
        being built into (the latest one, when a graph is built twice).
    conds : dict
        ``(id(Condition), CUgraph address) -> handle value``.
    allocs : dict
        ``id(AllocNode) -> (AllocNode, address)``.
    freed : set
        ``id(AllocNode)`` of the allocations an eager run has freed.
    eager : bool
        ``True`` for an eager run (no graph: conditions have no handle).
    functions : dict
        ``id(KernelInfo) -> CUfunction``: library kernels resolved for ``ctx``
        once per run, for stream launches.
    memory_types : dict or None
        ``address -> CUmemorytype`` of the copy endpoints read so far inside
        :meth:`constructing` (each address is asked of the driver once per
        construction); ``None`` otherwise: the executable's later updates ask
        again, as memory may be freed and allocated anew meanwhile.
    """

    __slots__ = ("ctx", "graphs", "conds", "allocs", "freed", "eager", "functions", "memory_types", "_keep", "_device")

    def __init__(self, ctx: Any, eager: bool = False) -> None:
        self.ctx = ctx
        self.graphs: dict[int, Any] = {}
        self.conds: dict[tuple[int, int], int] = {}
        self.allocs: dict[int, tuple[AllocNode, int]] = {}
        self.freed: set[int] = set()  # id(AllocNode) freed by an eager run
        self.eager = eager
        self.functions: dict[int, Any] = {}  # id(KernelInfo) -> CUfunction in ctx (stream launches)
        self.memory_types: dict[int, Any] | None = None
        self._keep: list[Any] = []  # graphs and conditions named by id above
        self._device: Any = None

    @contextmanager
    def constructing(self) -> Iterator[None]:
        """Remember the memory types of copy endpoints (:attr:`memory_types`) while a driver graph is built."""
        self.memory_types = {}
        try:
            yield
        finally:
            self.memory_types = None

    def register_graph(self, graph: Any, handle: Any) -> None:
        """Record that ``graph`` is being built into the driver graph ``handle``."""
        if self.graphs.get(id(graph)) is not handle:
            self.graphs[id(graph)] = handle
            self._keep.append(graph)

    def device(self) -> Any:
        """The ``CUdevice`` of the current context (cached)."""
        if self._device is None:
            self._device = ctx_get_device()
        return self._device

    def condition_handle(self, cond: Condition, node: Node) -> int:
        """The ``CUgraphConditionalHandle`` of ``cond`` in this construction (created on first use)."""
        if self.eager:
            raise UnsupportedError(
                f"{node.label} of Graph {node.graph.name!r} uses {cond.label}: conditions exist only in "
                "graphs, so Graph.run() cannot run it; instantiate the graph instead",
                node=node,
            )
        gh = self.graphs.get(id(cond.graph))
        if gh is None:
            raise ForeignNodeError(
                f"{node.label} of Graph {node.graph.name!r} uses {cond.label} of Graph {cond.graph.name!r}, "
                "which is not part of the graph being built around it"
            )
        key = (id(cond), int(gh))
        h = self.conds.get(key)
        if h is None:
            if not cond._nodes:
                raise DefinitionError(
                    f"{node.label} of Graph {node.graph.name!r} uses {cond.label} of Graph "
                    f"{cond.graph.name!r}, but no conditional node uses that condition"
                )
            drv = require_driver()
            flags = 0
            default = 0
            if cond.default is not None:
                flags = int(drv.CU_GRAPH_COND_ASSIGN_DEFAULT)
                default = cond.default
            handle = graph_conditional_handle_create(gh, self.ctx, default, flags, node=node)
            h = int(handle)
            self.conds[key] = h
            self._keep.append(cond)
        return h

    def alloc_address(self, operand: Any, what: str) -> int:
        """The address of an ``AllocNode`` (or ``AllocOffset``) built earlier in this construction."""
        if type(operand) is AllocOffset:
            alloc, offset = operand.alloc, operand.offset
        else:
            alloc, offset = operand, 0
        entry = self.allocs.get(id(alloc))
        if entry is None or entry[0] is not alloc:
            raise DefinitionError(
                f"{what}: {alloc.label} of Graph {alloc.graph.name!r} has no address here: it is not built "
                "before this node (is the alloc node part of this graph and ordered before its users?)"
            )
        return entry[1] + offset


def is_late(value: Any) -> bool:
    """``True`` for an operand whose value exists only once built (allocation or condition)."""
    t = type(value)
    return t is AllocNode or t is AllocOffset or t is Condition


def late_value(state: LowerState, value: Any, node: Node, what: str) -> Any:
    """The value of a late operand: an address (``int``) or a condition handle (``numpy.uint64``)."""
    if type(value) is Condition:
        return np.uint64(state.condition_handle(value, node))
    return state.alloc_address(value, what)


def late_kernel_args(state: LowerState, node: Any) -> tuple[Any, ...] | None:
    """The node's arguments with allocations and conditions replaced by their values, or ``None`` if none."""
    args = node.args
    out = None
    for i, a in enumerate(args):
        if is_late(a):
            if out is None:
                out = list(args)
            out[i] = late_value(state, a, node, f"{node.label}: argument {i}")
    return None if out is None else tuple(out)
