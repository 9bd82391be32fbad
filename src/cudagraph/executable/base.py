"""What every part of :class:`~cudagraph.Executable` shares: its state, its node map and setting one node.

``Executable`` is assembled in :mod:`cudagraph.executable.executable` from
:class:`ExecutableBase` (this module), the binding part
(:mod:`~cudagraph.executable.binding`) and the updating part
(:mod:`~cudagraph.executable.updating`). Every attribute of an executable is
declared here, once, as a slot; the compiled ``Executable.bind``
(``_native_bind.c``), ``_bind_many`` (``_native_bind_many.c``) and ``launch``
(``_native_exec_launch.c``) read some of them by slot name.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

from ..definition.graph import Graph
from ..definition.nodes import Node
from ..driver.api import (
    graph_destroy_quietly,
    graph_exec_child_graph_node_set_params,
    graph_instantiate_with_params_result,
)
from ..driver.calls import create_graph, ensure_context, raise_error, require_driver
from ..driver.kernel_args import PACKING_LOCK
from ..driver.streams import stream_handle
from ..errors import ExecutableClosedError, NodeNotFoundError
from ..materialize.explicit import LoweredGraph, Lowering
from ..ops.kinds.kernel import KernelWriter, PreparedKernel
from ..ops.node_update import set_node_params
from ..ops.registry import ops_for

if TYPE_CHECKING:
    from ..definition.nodes import ChildGraphNode, KernelNode
    from .bind_checks import ValueCheck
    from .bind_plan import BindPlan
    from .patch_plan import PatchPlan, PreparedNode
    from .updating import _Shape

__all__ = ["ExecutableBase"]

_UNSET = object()
#: The recorded state of a node whose executable parameters are unknown (a
#: per-node update failed part way): it equals no node's state.
_STALE: tuple[Any, ...] = (_UNSET,)


class ExecutableBase:
    """The state of an executable (all its slots) and the helpers its parts share.

    Attributes
    ----------
    graph : Graph
        The definition it was made from (or last updated from).
    update_calls : int
        Number of driver calls made to update nodes so far.
    """

    # Every attribute of an executable. The compiled ``Executable.bind``, ``_bind_many`` and ``launch``
    # (``_native_bind.c``, ``_native_bind_many.c``, ``_native_exec_launch.c``) read those of
    # NATIVE_SLOTS["executable"] and ["launch"].
    __slots__ = (
        "__weakref__",
        "_bindings",
        "_checks",
        "_ctx",
        "_exec_addr",
        "_enabled",
        "_exec",
        "_finalizer",
        "_flags",
        "_last_handle",
        "_last_stream",
        "_last_stream_addr",
        "_lock",
        "_lowered",
        "_overrides",
        "_plans",
        "_prepared_nodes",
        "_raw_bound",
        "_sig",
        "_shared",
        "_sink",
        "_states",
        "_kept",
        "_state",
        "_streams",
        "_updaters",
        "_writer",
        "graph",
        "update_calls",
    )

    graph: Graph
    update_calls: int
    _exec: Any  # the CUgraphExec; None once closed
    _exec_addr: int  # the exec handle as an int, for the compiled bind (see BindPlan)
    _lowered: LoweredGraph
    _sink: list[Any]  # (node, exception) of host callbacks that raised
    _bindings: dict[str, Any]  # the current parameter values
    _raw_bound: dict[str, Any]  # the objects last bound (a value bound again as the same object costs nothing)
    _flags: int
    _ctx: Any
    _lock: threading.Lock  # (or the compiled ExecLock, which behaves as one: see executable._new_lock)
    _writer: KernelWriter  # the one writer of kernel nodes (see ops.kinds.kernel)
    _updaters: dict[int, PreparedKernel]  # id(node) -> its prepared parameters
    _shared: dict[tuple[Any, ...], tuple[PreparedKernel, Node]]
    _plans: dict[str | tuple[str, ...], BindPlan | PatchPlan]  # by name, or by the names rebound together
    _checks: dict[str, ValueCheck]  # how each parameter's new values are checked (see bind_checks)
    _prepared_nodes: dict[int, PreparedNode | None]  # id(node) -> a copy's or fill's patchable parameters
    _overrides: dict[int, Node]  # id(node) -> the node as changed by exe[node].update()
    _enabled: dict[int, bool]
    _states: list[Any] | None  # None until recorded (see Updating._recorded_states)
    _kept: list[Any] | None  # the nodes' kept operands as run, recorded with the states (definition.node.kept_operands)
    _sig: _Shape | None
    _streams: dict[int, Any]
    _state: list[Any]  # [exec handle, lowered graph], shared with the finalizer
    _finalizer: Any
    _last_stream: Any
    _last_handle: Any
    _last_stream_addr: int | None  # int(_last_handle), for the compiled launch (None before the first launch)

    def _require_open(self) -> None:
        if self._exec is None:
            raise ExecutableClosedError(f"the executable of Graph {self.graph.name!r} is closed")

    def driver_node(self, node: Any) -> Any:
        """The ``CUgraphNode`` built for a definition node (top level, child or conditional body).

        Raises
        ------
        NodeNotFoundError
            The node is not a node of this executable (a ``KeyError`` too).
        """
        self._require_open()
        entry = self._lowered.all_nodes.get(id(node))
        if entry is None or entry[0] is not node:
            label = getattr(node, "label", None)
            what = label if isinstance(label, str) else repr(node)
            raise NodeNotFoundError(f"{what} is not a node of the executable of {self.graph.name!r}")
        return entry[1]

    def _context(self) -> Any:
        if self._ctx is None:
            self._ctx = ensure_context()
        return self._ctx

    def _set_node(
        self, node: Node, driver_node: Any, bindings: dict[str, Any], prepared: PreparedKernel | None = None
    ) -> None:
        """Give ``driver_node`` the parameters of ``node`` (under ``bindings``), whatever its kind.

        The node's kind says how (:meth:`KindOps.exec_set <cudagraph.ops.kinds.base.KindOps.exec_set>`):
        kernel nodes go through the kernel writer (from ``prepared``, or from
        a structure prepared now); child graphs get their body lowered afresh;
        the other kinds are set by :func:`~cudagraph.ops.node_update.set_node_params`.

        Raises
        ------
        DriverError
            The driver refused the update; the message names the node.
        """
        ops_for(node).exec_set(_NodeSetter(self, bindings, prepared), node, driver_node)


class _NodeSetter:
    """One node update of an executable (:class:`~cudagraph.ops.kinds.base.ExecSetter`)."""

    __slots__ = ("bindings", "exe", "prepared")

    def __init__(self, exe: ExecutableBase, bindings: dict[str, Any], prepared: PreparedKernel | None) -> None:
        self.exe = exe
        self.bindings = bindings
        self.prepared = prepared

    def set_params(self, node: Node, driver_node: Any) -> None:
        exe = self.exe
        lowered = exe._lowered
        set_node_params(
            exe._exec, node, driver_node, exe._context(), self.bindings, exe._sink, lowered.host_keys, lowered.state
        )

    def write_kernel(self, node: Node, driver_node: Any) -> None:
        # (called by the ops of a kernel launch for its own nodes)
        up = self.prepared if self.prepared is not None else PreparedKernel(cast("KernelNode", node), self.bindings)
        self.exe._writer.write_prepared(up, node, driver_node)

    def set_child_graph(self, node: Node, driver_node: Any) -> None:
        """Lower the body of ``node`` afresh and give it to ``driver_node``."""
        child = cast("ChildGraphNode", node)  # (called by the child-graph kind's ops for its own nodes)
        exe = self.exe
        body = create_graph(node)
        try:
            lowering = Lowering(exe._context(), self.bindings, exe._sink)
            with PACKING_LOCK, lowering.state.constructing():
                lowering.lower_graph(child.body, body, track=False)
            exe._lowered.host_keys.extend(lowering.host_keys)
            graph_exec_child_graph_node_set_params(exe._exec, driver_node, body, node=node)
        finally:
            graph_destroy_quietly(body)


def _instantiate_lowered(lowered: LoweredGraph, flags: int, upload_stream: Any) -> Any:
    """``cuGraphInstantiateWithParams`` of a lowered graph; an error names the node at fault."""
    drv = require_driver()
    ip = drv.CUDA_GRAPH_INSTANTIATE_PARAMS()
    if upload_stream is not None:
        flags |= int(drv.CUgraphInstantiate_flags.CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
        ip.hUploadStream = stream_handle(upload_stream)
    ip.flags = flags
    err, exec_handle = graph_instantiate_with_params_result(lowered.handle, ip)
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
