"""Updating an executable: :meth:`Executable.update <cudagraph.Executable.update>` and ``exe[node].update(...)``.

``update(g2)`` diffs the new definition against the states recorded at the last
instantiation or update (:mod:`cudagraph.executable.compare`), then sets the
changed nodes one by one (kernel nodes through the executable's
:class:`~cudagraph.ops.kinds.kernel.KernelWriter`), or rebuilds the graph
and applies it with ``cuGraphExecUpdate`` when a rebound parameter is used
inside a body, a node of a kind that only a whole-graph update changes
(conditional and ``set_condition`` nodes: ``KindOps.exec_update``) changed, or
the driver refuses a node's update, or re-instantiates when asked to and the
topology differs.

A rebuilt definition holds allocations and conditions of its own: compared by
place (:class:`~cudagraph.executable.compare.Correspondence`), an identical
rebuild is unchanged, and the lowered graph's record of their addresses and
handles (``LoweredGraph.state``) is moved over to the new objects. What no
update can change (an allocation or free node: fixed once instantiated) and a
whole-graph update of an executable holding graph allocations (a graph built
anew places them at other addresses) are refused by name before any driver
call, or re-instantiated when asked to.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..definition.bindings import all_params, body_uses_params, resolve_bindings
from ..definition.diff import (
    LAUNCH_ATTR_CLASSES,
    describe_launch_diff,
    describe_topology_diff,
    has_bodies,
    is_flat,
    node_state,
    same_value,
)
from ..definition.edits import watch
from ..definition.graph import Graph
from ..definition.kinds.kernel import LAUNCH_KEYWORDS, check_launch_attrs, launch_signature
from ..definition.node import kept_operands, rebuilt_node
from ..definition.nodes import Node
from ..driver.api import graph_exec_destroy_quietly, graph_exec_update_result
from ..driver.calls import raise_error
from ..driver.host_callbacks import retire
from ..driver.kernel_args import PACKING_LOCK
from ..errors import DefinitionError, DriverError, OperandError
from ..materialize.explicit import LoweredGraph, lower
from ..ops.compiled_kinds import add_simple_kinds
from ..ops.kinds.base import exec_refusal
from ..ops.kinds.kernel import KernelWriter, PreparedKernel
from ..ops.lower_state import late_kernel_args
from ..ops.registry import LAUNCHES, ops_for
from .base import _STALE, ExecutableBase, _instantiate_lowered
from .compare import Correspondence, LateMove, diff_states, nodes_signature, topology_signature

__all__ = ["UpdateResult", "Updating", "WHOLE_GRAPH_THRESHOLD"]

#: Above this share of changed top-level nodes, ``Executable.update`` rebuilds
#: the graph and calls ``cuGraphExecUpdate`` instead of updating node by node.
#: Node by node is the cheaper way at any share for kernel nodes (the whole-graph
#: way also lowers every unchanged node), so the default never takes it.
WHOLE_GRAPH_THRESHOLD = 1.0


@dataclass(frozen=True)
class UpdateResult:
    """What :meth:`Executable.update` did.

    Attributes
    ----------
    mode : str
        ``"unchanged"``, ``"per-node"`` (``cuGraphExec*SetParams`` on the
        changed nodes), ``"whole-graph"`` (``cuGraphExecUpdate``) or
        ``"reinstantiated"``.
    nodes_updated : int
        Top-level nodes whose parameters changed.
    reason : str
        Why the executable was re-instantiated, or updated as a whole after
        the driver refused a node's update; empty otherwise.
    """

    mode: str
    nodes_updated: int = 0
    reason: str = ""


class _Shape:
    """What :meth:`Executable.update` remembers of the topology an executable runs.

    Attributes
    ----------
    signature : tuple
        The :func:`~cudagraph.definition.diff.topology_signature` of the definition.
    plain : bool
        No node has nested bodies: a definition of this signature has no
        child-graph parameters, and its structure needs no check beyond the
        (impossible) cycle.
    nested : dict or None
        The entries of the lowered graph's ``all_nodes`` below the top level,
        kept while the top-level nodes are swapped by same-topology updates.
    nested_of : list or None
        The ``driver_nodes`` list of the lowered graph ``nested`` belongs to.
    late : LateMove or None
        The last move of the lowered graph's allocations, conditions and graphs over to a
        rebuilt definition's objects (its entries are dropped at the next move).
    """

    __slots__ = ("late", "nested", "nested_of", "plain", "signature")

    def __init__(self, signature: tuple[Any, ...]) -> None:
        self.signature = signature
        self.plain = not has_bodies(signature)
        self.nested: dict[int, tuple[Node, Any]] | None = None
        self.nested_of: Sequence[Any] | None = None
        self.late: LateMove | None = None


class _NodeMap:
    """Builds ``LoweredGraph.all_nodes`` on first use after a same-topology update.

    It stands in for the lowering that :attr:`LoweredGraph.all_nodes` merges
    lazily: the nested entries, plus each top-level node of the definition now
    run with its driver node. An update thus costs nothing here unless the map
    is read (``exe[node]``, :meth:`Executable.driver_node`, a rebind).
    """

    __slots__ = ("driver_nodes", "nested", "nodes")

    def __init__(self, nested: dict[int, tuple[Node, Any]], nodes: list[Node], driver_nodes: Sequence[Any]) -> None:
        self.nested = nested
        self.nodes = nodes
        self.driver_nodes = driver_nodes

    def node_map(self) -> dict[int, tuple[Node, Any]]:
        """``id(node) -> (node, CUgraphNode)``."""
        out = dict(self.nested)
        out.update(zip(map(id, self.nodes), zip(self.nodes, self.driver_nodes)))
        return out


def _moved_users(users: dict[str, list[Node]], old_top: list[Node], new_top: list[Node]) -> dict[str, list[Node]]:
    """``param_users`` with each top-level node of ``old_top`` replaced by the node at its place in ``new_top``.

    A node's place is its position in ``old_top`` (the nodes lowered), which is its ``index`` unless the
    definition was edited in place since (a removal renumbers the nodes after it).
    """
    count = len(old_top)
    places: dict[int, int] | None = None

    def moved(u: Node) -> Node:
        nonlocal places
        i = u.index
        if i < count and old_top[i] is u:
            return new_top[i]
        if places is None:
            places = {id(n): k for k, n in enumerate(old_top)}
        k = places.get(id(u))
        return u if k is None else new_top[k]

    return {name: [moved(u) for u in nodes] for name, nodes in users.items()}


class Updating(ExecutableBase):
    """The updating part of :class:`~cudagraph.Executable`: :meth:`update`, node by node or as a whole."""

    __slots__ = ()

    def _shape(self) -> _Shape:
        """What :meth:`update` knows of the topology run now (recorded on first use).

        It is the signature of the nodes lowered (``LoweredGraph.nodes``), not of
        the definition's node list, which may have grown since.
        """
        shape: _Shape | None = self._sig
        if shape is None:
            shape = self._sig = _Shape(nodes_signature(self._lowered.nodes))
        return shape

    def _recorded_states(self) -> list[Any]:
        """The state of each top-level node run now (:func:`~cudagraph.definition.diff.node_state`, recorded on
        first use)."""
        states = self._states
        if states is None:
            nodes = self._lowered.nodes
            states = self._states = [node_state(n) for n in nodes]
            self._kept = kept_operands(nodes)  # (recorded before an edit in place replaces them)
        return states

    def _keep_operands(self) -> None:
        """Hold what the nodes run now keep for the driver (their ``_keep``), before an edit in place replaces it."""
        if self._kept is None:
            self._kept = kept_operands(self.graph._nodes)

    def _record(self) -> None:
        """Record the topology and the node states run now, if not yet done.

        Called at instantiation for a definition with nested graphs, else before
        the definition is first edited in place (:mod:`cudagraph.definition.edits`).
        """
        if self._sig is None:
            self._shape()
        if self._states is None:
            self._recorded_states()

    def _signature(self) -> Any:
        return self._shape().signature

    def _remember_signature(self, signature: tuple[Any, ...]) -> None:
        """Record the topology signature of the definition instantiated (as computed by the caller)."""
        old = self._sig
        if old is None or (old.signature is not signature and old.signature == signature):
            self._sig = _Shape(signature)  # the caller's object: later hits compare by identity
            if old is not None:
                self._sig.late = old.late

    def update(
        self, graph: Graph, *, reinstantiate_if_needed: bool = False, _signature: Any = None, **params: Any
    ) -> UpdateResult:
        """Make the executable run ``graph``, a changed definition of the same topology.

        Only the differences are applied: the changed nodes one by one
        (``cuGraphExec*SetParams``). The whole graph is rebuilt and applied
        with ``cuGraphExecUpdate`` when a rebound parameter is used inside a
        body (child graph, conditional branch), or when the driver refuses a
        node's update (``UpdateResult.reason`` then says so).

        Parameters
        ----------
        graph : Graph
            The new definition (it may be the same object, changed with
            :meth:`Node.update`), or a :mod:`cudagraph.compat` ``GraphDefinition`` or
            ``GraphBuilder`` (its graph, once building has ended: their ``_update_source()``).
        reinstantiate_if_needed : bool
            When the topology differs (or the driver refuses the update),
            instantiate ``graph`` afresh instead of raising.
        **params
            Parameter values for ``graph`` (default: the current bindings).

        Returns
        -------
        UpdateResult

        Raises
        ------
        DefinitionError
            The topology differs; the message lists what differs. Or a node
            that no update changes differs (an allocation or a free node), or a
            change that only a whole-graph update applies (a conditional or
            ``set_condition`` node, a parameter used inside a body) is asked of
            an executable holding graph allocations, which a graph built anew
            would place at other addresses: the message names the node. Nothing
            was changed (pass ``reinstantiate_if_needed=True`` to instantiate
            ``graph`` instead).
        DriverError
            ``cuGraphExecUpdate`` failed; the message gives the driver's reason
            and the definition node at fault.
        """
        self._require_open()
        refusal: type[DefinitionError] = DefinitionError
        if not isinstance(graph, Graph):
            # A compat source names the class its topology refusal takes (cuda.core's: the driver's CUDAError).
            refusal = getattr(type(graph), "_topology_refusal", DefinitionError)
            source = getattr(type(graph), "_update_source", None)  # a compat GraphDefinition or GraphBuilder
            if source is None:
                raise OperandError(  # (with cuda.core's words, for a ported program matching them)
                    "update() expects a cudagraph.Graph, or a compat GraphDefinition or GraphBuilder (as cuda.core: "
                    f"expected GraphBuilder or GraphDefinition); got {type(graph).__name__}"
                )
            graph = source(graph)
        new_sig = _signature if _signature is not None else topology_signature(graph)
        shape = self._shape()
        same_sig = new_sig is shape.signature or new_sig == shape.signature
        # The same nodes and edges as a definition already checked cannot hold a
        # cycle: the structure is checked again only where bodies or special
        # nodes (conditionals, graph memory) bring rules of their own.
        plain = same_sig and shape.plain and not graph._special
        if not plain:
            graph._validate_structure()
        old_def = self._lowered.definition
        if plain and not params and not graph._params:
            bindings: dict[str, Any] = {}  # no parameter anywhere (no child graph either)
        else:
            names = all_params(graph)
            merged = {k: v for k, v in self._bindings.items() if k in names}
            merged.update(params)
            bindings = resolve_bindings(graph, merged)
        with self._lock:
            if self._exec is None:  # closed by another thread meanwhile
                self._require_open()
            if self._sig is not shape:  # changed by another thread meanwhile
                shape = self._shape()
                same_sig = new_sig == shape.signature
            same_shape = same_sig and len(graph._nodes) == len(self._lowered.nodes)
            corr: Correspondence | None = None
            if same_shape:
                old_states = self._recorded_states()
                changed, new_states = diff_states(old_states, graph)
                if graph is not old_def and (graph._special or not shape.plain):
                    # Allocations and conditions of a rebuilt definition are its own objects: compared by place.
                    corr = Correspondence(old_def, self._lowered.nodes, graph)
                    if changed:
                        changed = [n for n in changed if not corr.same(old_states[n.index], new_states[n.index])]
                # The signatures compare launch attributes and edge types; a definition whose signature came
                # from a record that did not see them (a node given attributes afterwards) is caught here.
                if changed and _launch_changed(old_states, changed):
                    same_shape = False
            if not same_shape:
                if graph is not old_def:
                    diffs = describe_topology_diff(old_def, graph)
                else:  # edited in place: its launches are compared with the states recorded before the edit
                    diffs = [] if self._states is None else _launch_diffs_in_place(self._states, self._lowered.nodes)
                reason = "; ".join(diffs[:8]) + (f"; ... {len(diffs) - 8} more" if len(diffs) > 8 else "")
                if not diffs and graph is old_def:
                    reason = "the definition was edited in place (nodes or edges added or removed) since it was run"
                if not reinstantiate_if_needed:
                    raise refusal(
                        f"cannot update the executable of Graph {old_def.name!r} from Graph {graph.name!r}: "
                        f"the topology differs: {reason or 'node kinds differ'} (nodes, edges, edge types and "
                        "launch attributes are fixed at instantiation; pass reinstantiate_if_needed=True to "
                        "instantiate the new definition instead)"
                    )
                self._reinstantiate(graph, bindings)
                self._sig = _Shape(new_sig)
                return UpdateResult("reinstantiated", len(graph), reason)
            bound = self._bindings
            bindings_changed = [k for k, v in bindings.items() if not same_value(v, bound.get(k))] if bindings else []
            nested_params = False
            if bindings_changed:
                changed, nested_params = self._with_param_users(graph, changed, bindings_changed)
            if not changed and not bindings_changed:
                move = self._move_late(corr)
                self._adopt(graph, same_lowered=True, states=new_states, late=move)
                return UpdateResult("unchanged")
            # What a node of each kind takes: its own set call, a whole-graph update, or no update at all.
            fixed: list[Node] = []
            whole: list[Node] = []
            for n in changed:
                how = ops_for(n).exec_update
                if how is None:
                    fixed.append(n)
                elif how != "node":
                    whole.append(n)
            if fixed:
                reason = "; ".join(exec_refusal(n, None, changed=True) for n in fixed[:4])
                if len(fixed) > 4:
                    reason += f"; ... {len(fixed) - 4} more"
                return self._refuse_or_reinstantiate(graph, bindings, new_sig, reason, reinstantiate_if_needed)
            per_node = len(changed) <= WHOLE_GRAPH_THRESHOLD * max(len(graph), 1) and not nested_params and not whole
            reason = ""
            refused: DriverError | None = None
            if per_node:
                move = self._move_late(corr)
                try:
                    self._per_node_update(changed, bindings)
                except DriverError as exc:
                    if move is not None:
                        move.undo()
                    # Some nodes may hold their new parameters already: the whole-graph
                    # update below sets every node, or, refused, marks them for the next one.
                    reason = f"the driver refused a node's update: {exc}"
                    refused = exc
                except BaseException:
                    if move is not None:
                        move.undo()
                    raise
                else:
                    self._bindings = bindings
                    self._raw_bound.clear()
                    self._adopt(graph, same_lowered=True, states=new_states, late=move)
                    return UpdateResult("per-node", len(changed))
            allocs = self._graph_allocations()
            if allocs:
                # A graph built anew places its allocations elsewhere than the executable has them.
                if refused is not None and not reinstantiate_if_needed:
                    raise refused
                if refused is not None:
                    why = reason
                elif whole:
                    why = exec_refusal(whole[0], "graph", changed=True)
                elif nested_params:
                    why = "a parameter used inside a body was rebound, which only a whole-graph update applies"
                else:
                    why = f"{len(changed)} of {len(graph)} nodes changed, which a whole-graph update applies"
                return self._refuse_or_reinstantiate(
                    graph,
                    bindings,
                    new_sig,
                    f"{why}; the executable holds graph allocations ({allocs}), which a graph built anew for "
                    "cuGraphExecUpdate would place at other addresses",
                    reinstantiate_if_needed,
                )
            try:
                self._whole_graph_update(graph, bindings, new_states)
            except DriverError as exc:
                # cuGraphExecUpdate leaves the executable as it was when it refuses.
                if not reinstantiate_if_needed or exc.call != "cuGraphExecUpdate":
                    raise
                self._reinstantiate(graph, bindings)
                self._sig = _Shape(new_sig)
                return UpdateResult("reinstantiated", len(graph), f"the driver refused the update: {exc}")
            return UpdateResult("whole-graph", len(changed), reason)

    def _refuse_or_reinstantiate(
        self, graph: Graph, bindings: dict[str, Any], new_sig: Any, reason: str, reinstantiate: bool
    ) -> UpdateResult:
        """Instantiate ``graph`` afresh (``reinstantiate``), or raise :class:`DefinitionError` saying why the
        executable cannot take it (``reason``, naming the nodes); nothing was changed before either."""
        if not reinstantiate:
            raise DefinitionError(
                f"cannot update the executable of Graph {self._lowered.definition.name!r} from Graph "
                f"{graph.name!r}: {reason} (the executable is left as it was; pass reinstantiate_if_needed=True "
                "to instantiate the new definition instead)"
            )
        self._reinstantiate(graph, bindings)
        self._sig = _Shape(new_sig)
        return UpdateResult("reinstantiated", len(graph), reason)

    def _graph_allocations(self) -> str:
        """The graph allocations of the executable, named (``""``: none)."""
        state = self._lowered.state
        allocs = [] if state is None else [node for node, _addr in state.allocs.values()]
        if not allocs:
            return ""
        named = sorted({a.label for a in allocs})
        return ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")

    def _move_late(self, corr: Correspondence | None) -> LateMove | None:
        """Give the objects of the rebuilt definition ``corr`` pairs the lowered graph's allocation addresses,
        condition handles and driver graphs (``None``: nothing to move; see :class:`LateMove`)."""
        state = self._lowered.state
        if corr is None or state is None or not (state.allocs or state.conds):
            return None  # (nothing of the definition has an address or a handle)
        return LateMove(state, corr)

    def _per_node_update(self, changed: list[Node], bindings: dict[str, Any]) -> None:
        """Set the parameters of the ``changed`` top-level nodes one by one.

        Kernel launches (the kinds of :data:`~cudagraph.ops.registry.LAUNCHES`) go through the kernel
        writer (runs of kernel nodes through its compiled loop where it is available). On a refusal the
        nodes already set are marked stale in the recorded states (any later update sets them again) and
        the error propagates.
        """
        self._context()
        writer = self._writer
        driver_nodes = self._lowered.driver_nodes
        launches = LAUNCHES
        done = 0
        try:
            with PACKING_LOCK:
                while done < len(changed):
                    try:  # (kernel nodes, fills, copies and empty nodes in C)
                        done = writer.run(changed, done, driver_nodes, self._teach_simple, bindings)
                    except DriverError as exc:  # the nodes before the one refused hold their new parameters
                        done = next((i for i in range(done, len(changed)) if changed[i] is exc.node), done)
                        raise
                    if done == len(changed):
                        break
                    n = changed[done]
                    dnode = driver_nodes[n.index]
                    if type(n) not in launches or not writer.write(n, dnode, bindings):  # type: ignore[arg-type]
                        self._set_node(n, dnode, bindings, self._late_kernel(n, bindings))
                    done += 1
        finally:
            self.update_calls += done
            if done < len(changed):
                states = self._recorded_states()
                for n in changed[: done + 1]:
                    states[n.index] = _STALE

    def _late_kernel(self, node: Node, bindings: dict[str, Any]) -> PreparedKernel | None:
        """The parameters of a kernel launch given allocations or conditions as arguments, with their values in
        this executable (the lowered graph's addresses and handles); ``None`` for any other node."""
        if type(node) not in LAUNCHES:
            return None
        state = self._lowered.state
        late = None if state is None else late_kernel_args(state, node)
        if late is None:
            return None
        return PreparedKernel(rebuilt_node(node, {"args": late}), bindings)  # type: ignore[arg-type]

    def _teach_simple(self, loop: Any) -> None:
        """Tell the writer's compiled ``loop`` of the fills, copies and empty nodes it may set itself."""
        add_simple_kinds(loop, self._context())

    def _with_param_users(self, graph: Graph, changed: list[Node], names: list[str]) -> tuple[list[Node], bool]:
        """``changed`` plus the top-level nodes of ``graph`` that use a parameter in ``names`` (in index
        order), and whether such a parameter is also used inside a body (that needs the whole-graph path)."""
        lw = self._lowered
        top = lw.nodes
        users = {id(u): u for k in names for u in lw.param_users.get(k, ())}
        at = sorted(u.index for u in users.values() if u.index < len(top) and top[u.index] is u)
        seen = {id(n) for n in changed}
        nodes = graph._nodes
        nested = len(at) != len(users)
        extra = [nodes[i] for i in at if id(nodes[i]) not in seen]
        if nested:
            # The nodes whose bodies use such a parameter change too.
            wanted = set(names)
            extra += [n for n in nodes if id(n) not in seen and body_uses_params(n, wanted)]
        if not extra:
            return changed, nested
        merged = {id(n): n for n in changed + extra}
        return sorted(merged.values(), key=_index_of), nested

    def _adopt(
        self, graph: Graph, same_lowered: bool, states: list[Any] | None = None, late: LateMove | None = None
    ) -> None:
        """Record ``graph`` as the definition this executable now runs.

        With ``same_lowered``, the driver nodes now stand for ``graph``'s nodes:
        parameter users are moved over at once, the node map on first use, and
        ``late`` (the move of the lowered graph's allocations and conditions over
        to ``graph``'s objects, if any) replaces the previous move.
        """
        if self._overrides and self._last_handle is not None:
            # Nodes changed through exe[node].update() hold what a launch in flight may still read: kept until the
            # work queued on the streams launched on has finished (host_callbacks.retire), not dropped now.
            streams = {int(h): h for h in (self._last_handle, *self._streams.values())}
            retire([], list(streams.values()), keep=(list(self._overrides.values()), self._kept, self.graph))
        ran = self.graph
        self.graph = graph
        self._states = states if states is not None else [node_state(n) for n in graph._nodes]
        # What its nodes keep for the driver, as it runs them from now on: a later edit in place replaces them. Read
        # at that edit for a flat definition (definition/edits.py: no walk per update, bench/updates.py), now for
        # one with bodies (an edit of a body is not seen from its parent). None: a watcher of this graph is pending
        # (registered once: an update that finds nothing changed registers no other).
        if not is_flat(graph):
            self._kept = kept_operands(graph._nodes)
        elif self._kept is not None or graph is not ran:
            self._kept = None
            watch(graph, weakref.WeakMethod(self._keep_operands))
        self._overrides.clear()
        self._updaters.clear()
        self._shared.clear()
        self._plans.clear()
        self._checks.clear()
        self._prepared_nodes.clear()
        if not same_lowered and self._sig is not None:
            self._sig.nested = self._sig.nested_of = None  # they belonged to the lowered graph replaced
            self._sig.late = None
        if late is not None:
            shape = self._shape()
            previous = shape.late
            if previous is not None and previous.state is late.state:
                late.replace(previous)  # the entries of the definition run until now go
            shape.late = late
        if same_lowered and graph is not self._lowered.definition:
            lw = self._lowered
            old_top = lw.nodes
            new_top = list(graph._nodes)
            if lw.param_users:
                lw.param_users = _moved_users(lw.param_users, old_top, new_top)
            self._defer_node_map(lw, old_top, new_top)
            lw.definition = graph
            lw.nodes = new_top

    def _defer_node_map(self, lw: LoweredGraph, old_top: list[Node], new_top: list[Node]) -> None:
        """Make ``lw.all_nodes`` map ``new_top`` (instead of ``old_top``) to the driver nodes, once read."""
        shape = self._shape()
        nested = shape.nested if shape.nested_of is lw.driver_nodes else None
        if nested is None:
            old_ids = set(map(id, old_top))
            nested = {k: v for k, v in lw.all_nodes.items() if k not in old_ids}
            shape.nested, shape.nested_of = nested, lw.driver_nodes
        # LoweredGraph.all_nodes merges its lowering's node_map() on first use (a reader
        # meanwhile sees the previous map: the source is in place before the map goes).
        lw._lowering = cast(Any, _NodeMap(nested, new_top, lw.driver_nodes))
        lw._all = None

    def _whole_graph_update(self, graph: Graph, bindings: dict[str, Any], states: list[Any] | None = None) -> None:
        new_lowered = lower(graph, bindings, self._sink)
        try:
            err, info = graph_exec_update_result(self._exec, new_lowered.handle)
            self.update_calls += 1
            if err:
                reason = ""
                node = None
                try:
                    reason = info.result.name
                    node = new_lowered.node_for(info.errorNode)
                except Exception:
                    pass
                raise_error(err, "cuGraphExecUpdate", node, f"reason {reason}")
        except BaseException:
            new_lowered.destroy()
            raise
        old = self._lowered
        self._lowered = new_lowered
        self._state[1] = new_lowered
        self._bindings = bindings
        self._raw_bound.clear()
        self._adopt(graph, same_lowered=False, states=states)
        old.destroy(in_flight_on=list(self._streams.values()))

    def _reinstantiate(self, graph: Graph, bindings: dict[str, Any]) -> None:
        new_lowered = lower(graph, bindings, self._sink)
        try:
            new_exec = _instantiate_lowered(new_lowered, self._flags, None)
        except BaseException:
            new_lowered.destroy()
            raise
        graph_exec_destroy_quietly(self._exec)
        old = self._lowered
        self._exec = new_exec
        self._exec_addr = 0
        self._writer = KernelWriter(new_exec)
        self._lowered = new_lowered
        self._state[0] = new_exec
        self._state[1] = new_lowered
        self._bindings = bindings
        self._raw_bound.clear()
        self._adopt(graph, same_lowered=False)
        old.destroy(in_flight_on=list(self._streams.values()))

    # ------------------------------------------------- one node, exe[node]
    def _update_node(self, node: Node, changes: dict[str, Any]) -> None:
        """``exe[node].update(**changes)``: set ``node`` rebuilt with ``changes`` in this executable only.

        A kernel node keeps the structure prepared here: later rebinds write into it.
        """
        self._require_open()
        dnode = self.driver_node(node)
        current = self._overrides.get(id(node), node)
        how = ops_for(current).exec_update
        if how != "node":
            raise DefinitionError(
                f"exe[node].update(): {exec_refusal(node, how)}; change the definition and call "
                "exe.update(graph) (reinstantiate_if_needed=True where an update cannot take it)"
            )
        if type(current) in LAUNCH_ATTR_CLASSES:
            launch = [k for k in LAUNCH_KEYWORDS if k in changes]
            if launch:
                raise DefinitionError(
                    f"{node.label}: exe[node].update() cannot change {', '.join(f'{k}=' for k in launch)}: an "
                    "instantiated graph keeps its nodes' launch attributes and edge types "
                    "(cuGraphExecKernelNodeSetParams sets parameters only); change the definition "
                    f"(node.update({launch[0]}=...)) and call exe.update(graph, reinstantiate_if_needed=True)"
                )
        new = rebuilt_node(current, changes)
        if type(new) in LAUNCH_ATTR_CLASSES and new.attrs is not None:  # type: ignore[attr-defined]
            check_launch_attrs(new)  # type: ignore[arg-type]  # the kept cluster against a new grid
        with self._lock:
            if self._exec is None:  # closed by another thread meanwhile
                self._require_open()
            up = None
            if type(new) in LAUNCHES:
                up = self._late_kernel(new, self._bindings) or PreparedKernel(new, self._bindings)  # type: ignore[arg-type]
            self._set_node(new, dnode, self._bindings, up)
            self.update_calls += 1
            self._overrides[id(node)] = new
            self._plans.clear()
            self._prepared_nodes.pop(id(node), None)
            if up is not None:
                self._updaters[id(node)] = up
            else:
                self._updaters.pop(id(node), None)


def _index_of(node: Node) -> int:
    return node.index


def _launch_changed(old_states: list[Any], changed: list[Node]) -> bool:
    """Whether a kernel node among ``changed`` launches otherwise than its recorded state says (other launch
    attributes, or another type of incoming edge): what ``cuGraphExecKernelNodeSetParams`` cannot set."""
    launches = LAUNCH_ATTR_CLASSES
    for n in changed:
        if type(n) in launches:
            s = old_states[n.index]
            a = n.attrs  # type: ignore[attr-defined]
            if len(s) == 6 and a is not s[5] and launch_signature(a) != launch_signature(s[5]):
                return True
    return False


def _launch_diffs_in_place(old_states: list[Any], old_nodes: list[Node]) -> list[str]:
    """The launch differences (:func:`~cudagraph.definition.diff.describe_launch_diff`) between the kernel
    nodes lowered (``old_nodes``) and their recorded states (``old_states``, in the same order; their
    definition edited in place since: a node's place there may have moved, or it may have been removed)."""
    out: list[str] = []
    launches = LAUNCH_ATTR_CLASSES
    for n, s in zip(old_nodes, old_states):
        if type(n) in launches and len(s) == 6 and n.attrs is not s[5]:  # type: ignore[attr-defined]
            out.extend(describe_launch_diff(n, s[5], n.attrs))  # type: ignore[attr-defined]
    return out
