"""The interface every node kind's driver behaviour implements, and what the generic loops hand it.

A kind's ops object (a :class:`KindOps`) says how its nodes become driver
work in each materializer:

- :meth:`KindOps.params`: the ``CUgraphNodeParams`` of one node, shared by
  explicit construction (``cuGraphAddNode``) and by executable updates
  (``cuGraphExecNodeSetParams``);
- :meth:`KindOps.lower`: explicit construction of kinds that need more than
  one add (bodies, condition handles, allocations, launch attributes);
- :meth:`KindOps.issue`: the stream calls that do the node's work now
  (``Graph.run``) or under stream capture;
- :meth:`KindOps.capture`: how the capture materializer expresses the node;
- :meth:`KindOps.lift`: a typed node read back from a driver node;
- :meth:`KindOps.exec_set`: how an executable gives one of its driver nodes
  the node's parameters (``exe[node].update``, ``exe.update(g2)``), where
  :attr:`KindOps.exec_update` says a node of the kind can be set on its own.

The generic loops of :mod:`cudagraph.materialize` pass themselves down as the
protocols below (:class:`Builder`, :class:`StreamRun`, :class:`Replay`,
:class:`Lifter`, :class:`ExecSetter`), so ops never import the layers above.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ...driver.calls import require_driver
from ...driver.node_params_pool import give, take
from ...errors import UnsupportedError

if TYPE_CHECKING:
    from ...definition.graph import Graph
    from ...definition.nodes import Node
    from ..lower_state import LowerState

__all__ = [
    "Builder",
    "ExecSetter",
    "KindOps",
    "Lifter",
    "NodeEnv",
    "ParamsEnv",
    "Replay",
    "StreamRun",
    "exec_refusal",
]


def exec_refusal(node: Any, how: str | None, changed: bool = False) -> str:
    """Why an instantiated graph cannot set ``node`` on its own, its kind's :attr:`KindOps.exec_update` being
    ``how`` (``"graph"`` or ``None``); with ``changed``, the message says the node changed."""
    what = f"{node.label} changed" if changed else node.label
    if how is None:
        return f"{what}: the driver fixes {node.kind} nodes at instantiation (no update of an executable changes them)"
    return (
        f"{what}: an instantiated graph takes {node.kind} nodes only through a whole-graph update "
        "(cuGraphExecUpdate; cuGraphExecNodeSetParams does not take them)"
    )


class ParamsEnv(Protocol):
    """What a node's driver parameters are made from (:meth:`KindOps.params`); read-only."""

    @property
    def ctx(self) -> Any:
        """The context copies and fills run in."""

    @property
    def bindings(self) -> dict[str, Any]:
        """Parameter values by name."""

    @property
    def sink(self) -> list[Any]:
        """Where host callbacks append ``(node, exception)``."""

    @property
    def host_keys(self) -> list[int]:
        """Where the keys of registered host callbacks are appended."""

    @property
    def state(self) -> LowerState | None:
        """The construction in progress or that made the executable (graph allocations' addresses)."""

    def node_params(self, node_type: Any) -> Any:
        """A ``CUgraphNodeParams`` of ``node_type`` (a ``CUgraphNodeType``), every other field zero: reused by
        a construction, which hands it back once the node is added
        (:mod:`cudagraph.driver.node_params_pool`), fresh elsewhere (it may be kept)."""
        ...


class NodeEnv:
    """A :class:`ParamsEnv` outside a construction (an executable's per-node update, a patch plan).

    Parameters
    ----------
    ctx, bindings, sink, host_keys, state
        See :class:`ParamsEnv`.
    reuse : bool
        The parameters serve one driver call, after which the caller hands them back
        (:func:`cudagraph.driver.node_params_pool.give`): reused structures. Else fresh ones,
        which the caller may keep (a patch plan does).
    """

    __slots__ = ("ctx", "bindings", "sink", "host_keys", "state", "reuse")

    def __init__(
        self,
        ctx: Any,
        bindings: dict[str, Any],
        sink: list[Any],
        host_keys: list[int],
        state: LowerState | None,
        reuse: bool = False,
    ) -> None:
        self.ctx = ctx
        self.bindings = bindings
        self.sink = sink
        self.host_keys = host_keys
        self.state = state
        self.reuse = reuse

    def node_params(self, node_type: Any) -> Any:
        """A ``CUgraphNodeParams`` of ``node_type``: reused with ``reuse``, else fresh (the caller may keep it)."""
        if self.reuse:
            return take(node_type)
        p = require_driver().CUgraphNodeParams()
        p.type = node_type
        return p


class Builder(Protocol):
    """One explicit construction, as a kind's :meth:`KindOps.lower` sees it (``materialize.explicit.Lowering``)."""

    ctx: Any
    bindings: dict[str, Any]
    sink: list[Any]
    host_keys: list[int]
    bodies: list[Graph]
    state: LowerState

    def add(self, graph: Any, deps: Any, ndeps: int, params: Any) -> Any:
        """``cuGraphAddNode`` with the 12.x shape: ``(CUresult, CUgraphNode)``."""
        ...

    def node_params(self, node_type: Any) -> Any:
        """A zeroed ``CUgraphNodeParams`` of ``node_type`` for one add, handed back once the node is added."""
        ...

    def lower_graph(self, graph: Graph, handle: Any, track: bool = True) -> Sequence[Any]:
        """Add every node of ``graph`` (a body) to the driver graph ``handle``."""
        ...

    def ops_for(self, node: Node) -> KindOps:
        """The ops of ``node``'s kind (:func:`cudagraph.ops.registry.ops_for`, which a kind's module cannot
        import: the registry imports every family)."""
        ...


class StreamRun(Protocol):
    """One run of nodes on streams (eager or under capture), as :meth:`KindOps.issue` sees it."""

    bindings: dict[str, Any]
    sink: list[Any]
    host_keys: list[int]
    state: LowerState

    def issue_graph(self, graph: Graph, stream: Any) -> None:
        """Issue every node of ``graph`` (a body) on the stream handle ``stream``."""
        ...


class Replay(Protocol):
    """One capture (``materialize.capture``), as :meth:`KindOps.capture` sees it."""

    @property
    def run(self) -> StreamRun:
        """How nodes are issued on the capturing streams."""
        ...

    def issued(self, node: Node, stream: Any) -> None:
        """Record the driver node that the last call on ``stream`` made for ``node``."""
        ...

    def inline(self, node: Node, graph: Graph, stream: Any) -> None:
        """Replay ``graph`` (the body of ``node``) on ``stream`` (a ``cuda.core`` Stream), joined back onto it."""
        ...


class Lifter(Protocol):
    """One lift (``materialize.lift``), as :meth:`KindOps.lift` sees it."""

    drv: Any

    def into(self, g: Graph, graph: int) -> None:
        """Add the nodes and edges of the driver graph ``graph`` (a handle as an int) to ``g``."""
        ...


class ExecSetter(Protocol):
    """An executable setting one node's parameters, as :meth:`KindOps.exec_set` sees it."""

    def set_params(self, node: Node, driver_node: Any) -> None:
        """``cuGraphExecNodeSetParams`` with the node's :meth:`KindOps.params`."""
        ...

    def write_kernel(self, node: Node, driver_node: Any) -> None:
        """Set a kernel node through the executable's one kernel writer."""
        ...

    def set_child_graph(self, node: Node, driver_node: Any) -> None:
        """Lower the body of a child-graph node afresh and give it to ``driver_node``."""
        ...


class KindOps:
    """The driver behaviour of one node kind; each method's default says the kind does not do it."""

    __slots__ = ()

    #: Explicit construction calls :meth:`lower` (more than one add) instead of adding :meth:`params`.
    lowers: ClassVar[bool] = False
    #: The capture materializer expresses the kind by issuing it on a stream under capture.
    capturable: ClassVar[bool] = False
    #: The driver node type (``CUgraphNodeType`` member name) that :meth:`lift` reads, if any.
    lifts: ClassVar[str | None] = None
    #: The parameters the compiled construction loop writes itself for nodes of exactly this kind, from
    #: their slots, while their operands are plain ints or bound parameters (``"memset"``, ``"memcpy"``,
    #: ``"empty"``: see :mod:`cudagraph.ops.compiled_kinds`); :meth:`params` stays the reference.
    compiled: ClassVar[str | None] = None
    #: How an instantiated graph takes a changed node of this kind: ``"node"``, on its own (:meth:`exec_set`);
    #: ``"graph"``, only through a whole-graph update (``cuGraphExecUpdate`` with the graph built anew, as for
    #: conditional nodes, whose parameters ``cuGraphExecNodeSetParams`` does not take); ``None``, never: the
    #: node is fixed once instantiated (graph allocations and frees), and a changed one needs a new
    #: instantiation.
    exec_update: ClassVar[str | None] = "node"
    #: Nodes of this kind are kernel launches, with a kernel node's fields (``kernel``, ``grid``, ``block``,
    #: ``shared_mem``, ``args``, ``attrs``), which the batched kernel paths take: explicit construction's kernel
    #: loop (the ops' ``late_args`` and ``add_with_attrs`` for the nodes it hands back), an executable's kernel
    #: writer and its prepared kernel parameters (bind, ``exe[node].update``). Such ops are a
    #: :class:`~cudagraph.ops.kinds.kernel.KernelOps`; the registry lists them in
    #: :data:`~cudagraph.ops.registry.LAUNCHES`.
    launches: ClassVar[bool] = False
    #: The driver holds a node of this kind as a kernel node (``CU_GRAPH_NODE_TYPE_KERNEL``): before CUDA 12.4,
    #: the only kind a conditional body may hold.
    driver_kernel: ClassVar[bool] = False

    def params(self, node: Any, env: ParamsEnv) -> Any:
        """Fresh ``CUgraphNodeParams`` for ``node``.

        Parameters
        ----------
        node : Node
            The node.
        env : ParamsEnv
            What the parameters are made from: the construction in progress (a
            :class:`Builder`) or an executable's update (:class:`NodeEnv`).

        Raises
        ------
        UnsupportedError
            The kind has no single-node parameters (its :meth:`lower` adds it).
        """
        raise UnsupportedError(
            f"{node.label}: a {node.kind} node has no single-node driver parameters (it is built with its "
            "graph, and an instantiated graph takes it only through a whole-graph update or a new instantiation)",
            node=node,
        )

    def lower(self, builder: Builder, node: Any, handle: Any, deps: Any, ndeps: int) -> Any:
        """Add ``node`` to the driver graph ``handle`` after ``deps``; return ``(CUresult, CUgraphNode)``."""
        p = self.params(node, builder)
        try:
            return builder.add(handle, deps, ndeps, p)
        finally:
            give(p)  # (made by builder.node_params)

    def issue(self, node: Any, stream: Any, run: StreamRun) -> None:
        """Issue the stream calls that do ``node``'s work on the stream handle ``stream``."""
        raise UnsupportedError(f"{node.label}: Graph.run() cannot run {type(node).__name__}", node=node)

    def capture_refusal(self, node: Any) -> str | None:
        """Why the capture materializer cannot express ``node`` (``None``: it can)."""
        if self.capturable:
            return None
        return f"{node.label}: the capture backend cannot express a {node.kind} node; use backend='explicit'"

    def capture(self, replay: Replay, node: Any, stream: Any) -> None:
        """Express ``node`` on ``stream`` (a ``cuda.core`` Stream) under capture."""
        h = stream.handle
        self.issue(node, h, replay.run)
        replay.issued(node, h)

    def lift(self, lifter: Lifter, g: Graph, dn: Any, after: Any) -> Node | None:
        """Add to ``g`` the typed node of the driver node ``dn`` (``None``: not expressible, kept opaque)."""
        return None

    def exec_set(self, setter: ExecSetter, node: Any, driver_node: Any) -> None:
        """Give ``driver_node`` of an executable the parameters of ``node`` (by default its :meth:`params`).

        Raises
        ------
        UnsupportedError
            The kind cannot be set on its own (:attr:`exec_update` is not ``"node"``); the message names the node.
        """
        if self.exec_update != "node":
            raise UnsupportedError(exec_refusal(node, self.exec_update), node=node)
        setter.set_params(node, driver_node)

    def address_paths(self, node: Any, params: Any) -> dict[str, tuple[str, bool]]:
        """Where ``params`` (made by :meth:`params` for ``node``) hold pointer fields' addresses as plain words.

        ``{pointer field: (attribute path in params, typed)}``: the attribute
        holds the address as a 64-bit word that a rebind may overwrite in place
        (an executable's bind plans patch these words, then set the node). With
        ``typed``, the parameters also hold that memory's type, fixed at memory
        CUDA knows: only such memory may be written there. A field not listed
        (the default: none) is set from fresh parameters instead.
        """
        return {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"
