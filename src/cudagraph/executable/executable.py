"""Instantiated graphs: launch, bind, per-node and whole-graph updates, lifetime."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..definition.bindings import all_params, body_uses_params, resolve_bindings
from ..definition.diff import describe_topology_diff, has_bodies, node_state, same_value
from ..definition.graph import Graph
from ..definition.node_update import rebuilt_node
from ..definition.nodes import KernelNode, Node
from ..definition.operands import buffer_like
from ..driver.c_entry import NATIVE
from ..driver.calls import check, ensure_context, error_name, raise_error, require_driver
from ..driver.host_callbacks import unregister
from ..driver.kernel_args import _STRUCT_CODES, PACKING_LOCK
from ..driver.streams import stream_handle
from ..errors import DefinitionError, DriverError, ExecutableClosedError, HostCallbackError, OperandError
from ..materialize.explicit import LoweredGraph, lower
from ..ops.node_update import KernelParamsWriter, KernelUpdater, set_node_params
from .bind_plan import BindPlan, native_rebind
from .compare import diff_states, topology_signature
from .node_view import ExecutableNode

__all__ = ["Executable", "UpdateResult", "instantiate"]

_STICKY = {
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_ASSERT",
}

_UNSET = object()
#: The recorded state of a node whose executable parameters are unknown (a
#: per-node update failed part way): it equals no node's state.
_STALE: tuple[Any, ...] = (_UNSET,)
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
    """

    __slots__ = ("nested", "nested_of", "plain", "signature")

    def __init__(self, signature: tuple[Any, ...]) -> None:
        self.signature = signature
        self.plain = not has_bodies(signature)
        self.nested: dict[int, tuple[Node, Any]] | None = None
        self.nested_of: Sequence[Any] | None = None


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
    """``param_users`` with each top-level node of ``old_top`` replaced by the node at its index in ``new_top``."""
    count = len(old_top)
    return {
        name: [new_top[u.index] if u.index < count and old_top[u.index] is u else u for u in nodes]
        for name, nodes in users.items()
    }


def _destroy(state: list[Any], streams: dict[int, Any]) -> None:
    exec_handle, lowered = state
    try:
        drv = require_driver()
        drv.cuGraphExecDestroy(exec_handle)  # freed by the driver once no launch is in flight
        lowered.destroy(in_flight_on=streams.values())
    except Exception:
        unregister(lowered.host_keys)


def _flags(auto_free_on_launch: bool, device_launch: bool, use_node_priority: bool) -> int:
    drv = require_driver()
    F = drv.CUgraphInstantiate_flags
    flags = 0
    if auto_free_on_launch:
        flags |= int(F.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
    if device_launch:
        flags |= int(F.CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
    if use_node_priority:
        flags |= int(F.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)
    return flags


def _instantiate_lowered(lowered: LoweredGraph, flags: int, upload_stream: Any) -> Any:
    drv = require_driver()
    ip = drv.CUDA_GRAPH_INSTANTIATE_PARAMS()
    if upload_stream is not None:
        flags |= int(drv.CUgraphInstantiate_flags.CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
        ip.hUploadStream = stream_handle(upload_stream)
    ip.flags = flags
    err, exec_handle = drv.cuGraphInstantiateWithParams(lowered.handle, ip)
    if err:
        node = None
        detail = ""
        try:
            detail = f"result {ip.result_out.name}"
            node = lowered.node_for(ip.hErrNode_out)
        except Exception:
            pass
        raise_error(err, "cuGraphInstantiateWithParams", node, detail)
    return exec_handle


def instantiate(
    graph: Graph,
    *,
    upload_stream: Any,
    auto_free_on_launch: bool,
    device_launch: bool,
    use_node_priority: bool,
    params: dict[str, Any],
    backend: str = "explicit",
) -> Executable:
    """Validate, build (explicitly or by capture) and instantiate ``graph``; see :meth:`Graph.instantiate`."""
    if backend == "explicit":
        build = lower
    elif backend == "capture":
        from ..materialize.capture import capture_lower

        build = capture_lower
    else:
        raise OperandError(f"instantiate: backend must be 'explicit' or 'capture', got {backend!r}")
    graph._validate_structure()
    bindings = resolve_bindings(graph, params)
    require_driver()
    ensure_context()
    flags = _flags(auto_free_on_launch, device_launch, use_node_priority)
    sink: list[Any] = []
    lowered = build(graph, bindings, sink)
    try:
        exec_handle = _instantiate_lowered(lowered, flags, upload_stream)
    except BaseException:
        lowered.destroy()
        raise
    return Executable(graph, lowered, exec_handle, sink, bindings, flags)


class Executable:
    """An instantiated graph, ready to launch.

    Made by :meth:`Graph.instantiate`. It keeps the definition's nodes (and so
    every operand: buffers, kernels, callables, events) alive until it is
    closed. Use it as a context manager, or call :meth:`close`; it is also
    destroyed when garbage-collected.

    Parameters bound at instantiation can be rebound with :meth:`bind` or
    ``launch(stream, name=value)``: only the nodes that use a changed
    parameter are updated, and a value equal to the bound one costs no driver
    call. ``exe[node]`` is a view of one node (:class:`ExecutableNode`);
    :meth:`update` applies a changed definition of the same topology.

    Binding and updating take a lock, so concurrent calls from several
    threads are serialized; ``launch`` without parameters takes none.

    Attributes
    ----------
    graph : Graph
        The definition it was made from (or last updated from).
    update_calls : int
        Number of driver calls made to update nodes so far (rebinds, node
        updates, whole-graph updates).
    """

    __slots__ = (
        "__weakref__",
        "_bindings",
        "_ctx",
        "_exec_addr",
        "_enabled",
        "_exec",
        "_finalizer",
        "_flags",
        "_last_handle",
        "_last_stream",
        "_lock",
        "_lowered",
        "_overrides",
        "_plans",
        "_raw_bound",
        "_sig",
        "_shared",
        "_sink",
        "_states",
        "_state",
        "_streams",
        "_updaters",
        "graph",
        "update_calls",
    )

    def __init__(
        self,
        graph: Graph,
        lowered: LoweredGraph,
        exec_handle: Any,
        sink: list[Any],
        bindings: dict[str, Any],
        flags: int = 0,
    ) -> None:
        self.graph = graph
        self._lowered = lowered
        self._exec = exec_handle
        self._sink = sink
        self._bindings = bindings
        self._flags = flags
        self._ctx: Any = None
        self._last_stream: Any = _UNSET
        self._last_handle: Any = None
        # Not reentrant: no method that holds it calls another that takes it.
        self._lock = threading.Lock()
        self._raw_bound: dict[str, Any] = {}
        self._updaters: dict[int, KernelUpdater] = {}
        # Kernel nodes with the same kernel, dimensions and argument objects share one
        # updater (see _updater): key -> (updater, the node whose objects the key names).
        self._shared: dict[tuple[Any, ...], tuple[KernelUpdater, Node]] = {}
        self._plans: dict[str, BindPlan] = {}
        self._exec_addr = 0  # the exec handle as an int, for the compiled loop (see BindPlan)
        self._overrides: dict[int, Node] = {}
        self._enabled: dict[int, bool] = {}
        # What each top-level node was built with, to diff a later update() against.
        self._states: list[Any] = [node_state(n) for n in lowered.nodes]
        # The topology as instantiated: a definition edited in place afterwards
        # must be seen as changed by update().
        self._sig: Any = _Shape(topology_signature(lowered.definition))
        self.update_calls = 0
        # Streams launched on (by address): host callbacks stay registered
        # until the work queued there has finished, even after close().
        self._streams: dict[int, Any] = {}
        self._state = [exec_handle, lowered]
        self._finalizer = weakref.finalize(self, _destroy, self._state, self._streams)

    # ------------------------------------------------------------- handles
    @property
    def handle(self) -> Any:
        """The ``CUgraphExec``."""
        self._require_open()
        return self._exec

    @property
    def graph_handle(self) -> Any:
        """The driver ``CUgraph`` it was instantiated from."""
        self._require_open()
        return self._lowered.handle

    def driver_node(self, node: Any) -> Any:
        """The ``CUgraphNode`` built for a definition node (top level, child or conditional body).

        Raises
        ------
        KeyError
            The node is not a node of this executable.
        """
        self._require_open()
        entry = self._lowered.all_nodes.get(id(node))
        if entry is None or entry[0] is not node:
            raise KeyError(f"{getattr(node, 'label', node)!r} is not a node of the executable of {self.graph.name!r}")
        return entry[1]

    @property
    def bindings(self) -> dict[str, Any]:
        """The current parameter values."""
        return dict(self._bindings)

    @property
    def closed(self) -> bool:
        """``True`` after :meth:`close`."""
        return self._exec is None

    def _require_open(self) -> None:
        if self._exec is None:
            raise ExecutableClosedError(f"the executable of Graph {self.graph.name!r} is closed")

    def __getitem__(self, node: Node) -> ExecutableNode:
        """A view of ``node`` in this executable (``exe[node].update(...)``, ``.disable()``)."""
        self.driver_node(node)
        return ExecutableNode(self, node)

    # -------------------------------------------------------------- running
    def launch(self, stream: Any = None, **params: Any) -> None:
        """Launch on ``stream``, first rebinding any parameters given.

        Parameters
        ----------
        stream : cuda.core.Stream, object with ``__cuda_stream__``, CUstream, int or None
            Where to launch (``None``: the legacy default stream).
        **params
            New parameter values, as for :meth:`bind`.

        Raises
        ------
        HostCallbackError
            A host callback raised during an earlier launch (the graph is not
            launched; the next call launches normally).
        ExecutableClosedError
            After :meth:`close`.
        DriverError
            The launch failed; a sticky fault says that the context is unusable.
        """
        if self._sink:
            self.check()
        exec_handle = self._exec
        if exec_handle is None:
            self._require_open()
        if params:
            self.bind(**params)
        if stream is not self._last_stream:
            self._last_handle = stream_handle(stream)
            self._last_stream = stream
            if self._lowered.host_keys:
                self._streams[int(self._last_handle)] = self._last_handle
        (err,) = _LAUNCH(exec_handle, self._last_handle)
        if err:
            self._launch_failed(err)

    def _launch_failed(self, err: Any) -> None:
        name = error_name(err)
        detail = ""
        if name in _STICKY:
            detail = (
                f"a kernel of Graph {self.graph.name!r} (or earlier work) faulted; the CUDA context is now "
                "unusable and the process must be restarted"
            )
        raise_error(err, "cuGraphLaunch", None, detail)

    def upload(self, stream: Any = None) -> None:
        """Upload the executable to the device on ``stream`` ahead of the first launch."""
        self._require_open()
        drv = require_driver()
        check(drv.cuGraphUpload(self._exec, stream_handle(stream)), "cuGraphUpload")

    def check(self) -> None:
        """Raise the first exception a host callback raised since the last check.

        Synchronize the stream first to be sure earlier launches have finished.

        Raises
        ------
        HostCallbackError
            With the callback's exception as ``__cause__``.
        """
        if self._sink:
            node, exc = self._sink.pop(0)
            more = len(self._sink)
            self._sink.clear()
            suffix = f" ({more} more callback error(s) dropped)" if more else ""
            raise HostCallbackError(
                f"host callback {node.label} of Graph {self.graph.name!r} raised {type(exc).__name__}: {exc}{suffix}",
                node,
            ) from exc

    # -------------------------------------------------------------- binding
    def bind(self, **params: Any) -> int:
        """Rebind parameters; update only the nodes that use a changed one.

        A value equal to the bound one (the same object, or an equal address
        or scalar) costs no driver call. All values are checked before any
        node is touched. Each kernel node costs one
        ``cuGraphExecKernelNodeSetParams`` call; nodes built with the same
        kernel, dimensions and argument objects share one prepared parameter
        structure, so a parameter's bytes are written once for all of them.
        With the compiled module, rebinding one pointer parameter to a Buffer or
        an int address (after its first rebind, which prepares the plan) runs in
        C from the call on: no Python frame between the call and the driver.

        Parameters
        ----------
        **params
            ``name=value`` for parameters of the definition.

        Returns
        -------
        int
            The number of node updates made.

        Raises
        ------
        OperandError
            Unknown name, or a value of the wrong kind (nothing is changed).
        DriverError
            The driver refused an update (names the node).
        """
        if len(params) == 1:
            ((name, value),) = params.items()
            return self._bind_one(name, value)
        if self._exec is None:
            self._require_open()
        raw = self._raw_bound
        bound = self._bindings
        changed: dict[str, Any] = {}
        for name, value in params.items():
            v = self._new_value(name, value)
            if v is not _UNSET:
                changed[name] = v
        if not changed:
            return 0
        with self._lock:
            for name, v in changed.items():
                bound[name] = v
                raw[name] = params[name]
            if len(changed) == 1:
                ((name, v),) = changed.items()
                return self._apply_plan(name, v)
            dirty: dict[int, Node] = {}
            for name in changed:
                for node in self._lowered.param_users.get(name, ()):
                    dirty[id(node)] = node
            self._plans.clear()
            for node in dirty.values():
                self._refresh(node, changed)
        return len(dirty)

    def _bind_one(self, name: str, value: Any) -> int:
        """:meth:`bind` of one parameter (the compiled method takes the common case before it)."""
        if self._exec is None:
            self._require_open()
        v = self._new_value(name, value)
        if v is _UNSET:
            return 0
        with self._lock:
            self._bindings[name] = v
            self._raw_bound[name] = value
            return self._apply_plan(name, v)

    def _new_value(self, name: str, value: Any) -> Any:
        """``value`` checked and converted for parameter ``name``; ``_UNSET`` when it equals the bound one.

        Raises
        ------
        OperandError
            Unknown name, or a value of the wrong kind.
        """
        raw = self._raw_bound
        if raw.get(name, _UNSET) is value:
            return _UNSET
        p = self.graph._params.get(name)
        if p is None:
            p = self._param(name)
        if p.dtype is None:
            t = type(value)
            if t is int and 0 < value < 1 << 64:
                v = value
            elif t in _BUFFER_TYPES:
                v = int(value.handle) or _pointer(p, value)
            else:
                v = _pointer(p, value)
            same = v == self._bindings.get(name)
        else:
            v = p.coerce(value)
            same = same_value(v, self._bindings.get(name, _UNSET))
        if same:
            raw[name] = value  # the same value under another object: remembered, no driver call
            return _UNSET
        return v

    def _apply_plan(self, name: str, value: Any) -> int:
        """Rebind one parameter through its prepared plan (made on first use; see :class:`BindPlan`)."""
        plan = self._plans.get(name)
        if plan is None:
            plan = self._plans[name] = self._make_plan(name)
        count = plan.apply(self, value)
        self.update_calls += count
        return count

    def _make_plan(self, name: str) -> BindPlan:
        """The users of parameter ``name``, kernel nodes grouped by shared parameter structure."""
        p = self._param(name)
        code = None if p.dtype is None else "<" + _STRUCT_CODES[(p.dtype.kind, p.dtype.itemsize)]
        native = native_rebind()
        if native and not self._exec_addr:
            self._exec_addr = int(self._exec)
        plan = BindPlan(code, native)
        for node in self._lowered.param_users.get(name, ()):
            current, dnode, up, _fresh = self._updater(node)
            if up is None:
                plan.add_other(current, dnode)
            else:
                plan.add_kernel(up, name, current, dnode)
        return plan.finish()

    def _updater(self, node: Node) -> tuple[Node, Any, KernelUpdater | None, bool]:
        """``(node as the executable has it, driver node, kernel updater or None, updater just made)``.

        Kernel nodes with the same kernel, grid, block, shared memory and the very same
        argument objects pack to the same bytes under any bindings: they share one updater,
        so rebinding a parameter rewrites its bytes once for all of them.
        """
        current = self._overrides.get(id(node), node)
        dnode = self._lowered.all_nodes[id(node)][1]
        if type(current) is not KernelNode:
            return current, dnode, None, False
        up = self._updaters.get(id(node))
        if up is not None:
            return current, dnode, up, False
        k: Any = current
        key = (id(k.kernel), k.grid, k.block, k.shared_mem, *map(id, k.args))
        shared = self._shared.get(key)
        if shared is not None:
            up = self._updaters[id(node)] = shared[0]
            return current, dnode, up, False
        up = self._updaters[id(node)] = KernelUpdater(k, self._bindings)
        self._shared[key] = (up, current)  # the node keeps the objects named by the key alive
        return current, dnode, up, True

    def _param(self, name: str) -> Any:
        p = self.graph._params.get(name)
        if p is None:
            params = all_params(self.graph)
            p = params.get(name)
            if p is None:
                raise OperandError(
                    f"the executable of Graph {self.graph.name!r} has no parameter {name!r}; "
                    f"its parameters are {sorted(params) or 'none'}"
                )
        return p

    def _context(self) -> Any:
        if self._ctx is None:
            self._ctx = ensure_context()
        return self._ctx

    def _refresh(self, node: Node, changed: dict[str, Any]) -> None:
        """Re-issue one node's parameters after ``changed`` parameters were rebound."""
        current, dnode, up, fresh = self._updater(node)
        if up is not None and not fresh:
            for name, v in changed.items():
                up.rebind(name, v)
        set_node_params(
            self._exec, current, dnode, self._context(), self._bindings, self._sink, self._lowered.host_keys, up
        )
        self.update_calls += 1

    # ------------------------------------------------------- node updates
    def _update_node(self, node: Node, changes: dict[str, Any]) -> None:
        self._require_open()
        dnode = self.driver_node(node)
        current = self._overrides.get(id(node), node)
        new = rebuilt_node(current, changes)
        with self._lock:
            up = KernelUpdater(new, self._bindings) if type(new) is KernelNode else None  # type: ignore[arg-type]
            set_node_params(
                self._exec, new, dnode, self._context(), self._bindings, self._sink, self._lowered.host_keys, up
            )
            self.update_calls += 1
            self._overrides[id(node)] = new
            self._plans.clear()
            if up is not None:
                self._updaters[id(node)] = up
            else:
                self._updaters.pop(id(node), None)

    def _set_enabled(self, node: Node, enabled: bool) -> None:
        drv = require_driver()
        dnode = self.driver_node(node)
        check(drv.cuGraphNodeSetEnabled(self._exec, dnode, 1 if enabled else 0), "cuGraphNodeSetEnabled", node)
        self._enabled[id(node)] = enabled

    def _get_enabled(self, node: Node) -> bool:
        drv = require_driver()
        dnode = self.driver_node(node)
        return bool(check(drv.cuGraphNodeGetEnabled(self._exec, dnode), "cuGraphNodeGetEnabled", node))

    # ------------------------------------------------------ whole updates
    def _shape(self) -> _Shape:
        """What :meth:`update` knows of the topology run now (made from the definition on first use)."""
        shape: _Shape | None = self._sig
        if shape is None:
            shape = self._sig = _Shape(topology_signature(self._lowered.definition))
        return shape

    def _signature(self) -> Any:
        return self._shape().signature

    def _remember_signature(self, signature: tuple[Any, ...]) -> None:
        """Record the topology signature of the definition instantiated (as computed by the caller)."""
        if self._sig is None or (self._sig.signature is not signature and self._sig.signature == signature):
            self._sig = _Shape(signature)  # the caller's object: later hits compare by identity

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
            :meth:`Node.update`).
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
            The topology differs; the message lists what differs.
        DriverError
            ``cuGraphExecUpdate`` failed; the message gives the driver's reason
            and the definition node at fault.
        """
        self._require_open()
        if not isinstance(graph, Graph):
            raise OperandError(f"update() expects a cudagraph.Graph, got {type(graph).__name__}")
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
            if self._sig is not shape:  # changed by another thread meanwhile
                shape = self._shape()
                same_sig = new_sig == shape.signature
            same_shape = same_sig and len(graph._nodes) == len(self._lowered.nodes)
            if not same_shape:
                diffs = describe_topology_diff(old_def, graph)
                reason = "; ".join(diffs[:8]) + (f"; ... {len(diffs) - 8} more" if len(diffs) > 8 else "")
                if not diffs and graph is old_def:
                    reason = "the definition was edited in place (nodes or edges added or removed) since it was run"
                if not reinstantiate_if_needed:
                    raise DefinitionError(
                        f"cannot update the executable of Graph {old_def.name!r} from Graph {graph.name!r}: "
                        f"the topology differs: {reason or 'node kinds differ'}"
                    )
                self._reinstantiate(graph, bindings)
                self._sig = _Shape(new_sig)
                return UpdateResult("reinstantiated", len(graph), reason)
            changed, new_states = diff_states(self._states, graph)
            bound = self._bindings
            bindings_changed = [k for k, v in bindings.items() if not same_value(v, bound.get(k))] if bindings else []
            nested_params = False
            if bindings_changed:
                changed, nested_params = self._with_param_users(graph, changed, bindings_changed)
            if not changed and not bindings_changed:
                self._adopt(graph, same_lowered=True, states=new_states)
                return UpdateResult("unchanged")
            if len(changed) <= WHOLE_GRAPH_THRESHOLD * max(len(graph), 1) and not nested_params:
                try:
                    self._per_node_update(changed, bindings)
                except DriverError as exc:
                    # Some nodes may hold their new parameters already: the whole-graph
                    # update below sets every node, or, refused, marks them for the next one.
                    reason = f"the driver refused a node's update: {exc}"
                else:
                    self._bindings = bindings
                    self._raw_bound.clear()
                    self._adopt(graph, same_lowered=True, states=new_states)
                    return UpdateResult("per-node", len(changed))
            else:
                reason = ""
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

    def _per_node_update(self, changed: list[Node], bindings: dict[str, Any]) -> None:
        """Set the parameters of the ``changed`` top-level nodes one by one.

        Runs of kernel nodes are set by the compiled loop where it is available. On a
        refusal the nodes already set are marked stale in the recorded states (any
        later update sets them again) and the error propagates.
        """
        ctx = self._context()
        writer = KernelParamsWriter(self._exec)
        driver_nodes = self._lowered.driver_nodes
        done = 0
        try:
            with PACKING_LOCK:
                while done < len(changed):
                    done = writer.run(changed, done, driver_nodes)
                    if done == len(changed):
                        break
                    n = changed[done]
                    dnode = driver_nodes[n.index]
                    if type(n) is not KernelNode or not writer.set(n, dnode, bindings):  # type: ignore[arg-type]
                        set_node_params(self._exec, n, dnode, ctx, bindings, self._sink, self._lowered.host_keys)
                    done += 1
        finally:
            self.update_calls += done
            if done < len(changed):
                for n in changed[: done + 1]:
                    self._states[n.index] = _STALE

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

    def _adopt(self, graph: Graph, same_lowered: bool, states: list[Any] | None = None) -> None:
        """Record ``graph`` as the definition this executable now runs.

        With ``same_lowered``, the driver nodes now stand for ``graph``'s nodes:
        parameter users are moved over at once, the node map on first use.
        """
        self.graph = graph
        self._states = states if states is not None else [node_state(n) for n in graph._nodes]
        self._overrides.clear()
        self._updaters.clear()
        self._shared.clear()
        self._plans.clear()
        if not same_lowered and self._sig is not None:
            self._sig.nested = self._sig.nested_of = None  # they belonged to the lowered graph replaced
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
        drv = require_driver()
        new_lowered = lower(graph, bindings, self._sink)
        try:
            err, info = drv.cuGraphExecUpdate(self._exec, new_lowered.handle)
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
        drv = require_driver()
        drv.cuGraphExecDestroy(self._exec)
        old = self._lowered
        self._exec = new_exec
        self._exec_addr = 0
        self._lowered = new_lowered
        self._state[0] = new_exec
        self._state[1] = new_lowered
        self._bindings = bindings
        self._raw_bound.clear()
        self._adopt(graph, same_lowered=False)
        old.destroy(in_flight_on=list(self._streams.values()))

    # ------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Destroy the executable and its driver graph; idempotent."""
        if self._exec is not None:
            self._exec = None
            self._finalizer()

    def __enter__(self) -> Executable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._exec is None else "open"
        return f"<Executable of Graph {self.graph.name!r}: {len(self._lowered.nodes)} nodes, {state}>"


def _index_of(node: Node) -> int:
    return node.index


#: Types seen to be ``cuda.core`` Buffer-like (their ``handle`` is the address).
_BUFFER_TYPES: set[type] = set()


def _pointer(param: Any, value: Any) -> int:
    """A pointer parameter's value as an address (the common cases first)."""
    if buffer_like(value):
        _BUFFER_TYPES.add(type(value))
        ptr = int(value.handle)
        if ptr:
            return ptr
    return param.coerce(value)  # type: ignore[no-any-return]


def _install_compiled_bind() -> None:
    """Make :meth:`Executable.bind` the compiled method (see ``_native_bind.c``) when it is built.

    It rebinds one pointer parameter through a prepared plan in C and calls the
    Python method for everything else, so behaviour, errors and the docstring
    are the Python method's.
    """
    if NATIVE is None:
        return
    method = NATIVE.BindMethod(Executable.bind, Executable, BindPlan, _BUFFER_TYPES)
    functools.update_wrapper(method, Executable.bind)
    setattr(Executable, "bind", method)  # noqa: B010 - replacing a method mypy knows by its Python signature


_install_compiled_bind()

try:
    _LAUNCH = require_driver().cuGraphLaunch
except DriverError:  # pragma: no cover - no cuda-bindings: instantiate() raises first
    _LAUNCH = None
