"""The eager materializer: run a definition on a stream with no graph.

Each node is issued by its kind's ops (:meth:`~cudagraph.ops.kinds.base.KindOps.issue`)
as the stream calls that do its work, in topological order; runs of kernel, fill,
1-D copy and empty nodes are issued from C where the compiled module is built (see
:meth:`StreamIssue.issue_graph`).
"""

from __future__ import annotations

from typing import Any

from ..definition.bindings import resolve_bindings
from ..definition.graph import Graph
from ..definition.nodes import Node
from ..driver import stream_launch
from ..driver.api import mem_free_async_quietly, stream_synchronize
from ..driver.calls import ensure_context, raise_error, require_driver
from ..driver.device_checks import check_devices_of
from ..driver.host_callbacks import unregister
from ..driver.kernel_args import PACKING_LOCK, compiled_bindings
from ..driver.streams import stream_handle
from ..errors import HostCallbackError
from ..ops.compiled_kinds import add_stream_kinds
from ..ops.lower_state import LowerState
from ..ops.registry import ops_for

__all__ = ["StreamIssue", "issue_node", "run", "stream_launcher"]

#: The compiled launcher last taught the fills and copies (tests swap the module's launcher).
_TAUGHT: list[Any] = [None]


class StreamIssue:
    """One run of nodes on streams: what every node's ``issue`` reads and records.

    Parameters
    ----------
    bindings : dict
        Parameter values.
    sink : list
        Where host callbacks append ``(node, exception)``.
    host_keys : list of int
        Where the keys of registered host callbacks are appended.
    state : LowerState
        Allocation addresses (and kernel functions) of this run.
    """

    __slots__ = ("bindings", "sink", "host_keys", "state")

    def __init__(self, bindings: dict[str, Any], sink: list[Any], host_keys: list[int], state: LowerState) -> None:
        self.bindings = bindings
        self.sink = sink
        self.host_keys = host_keys
        self.state = state

    def issue_graph(self, graph: Graph, stream: Any) -> None:
        """Issue every node of ``graph`` on the stream handle ``stream``, in topological order.

        Runs of kernel, fill, 1-D copy and empty nodes go to the compiled ``StreamLauncher.issue``
        where it is available (:data:`cudagraph.driver.stream_launch.LAUNCHER`; taught the fills and
        copies by :func:`~cudagraph.ops.compiled_kinds.add_stream_kinds`); every node it hands back is
        issued by its kind's ops (a kernel node's, its twin, prepares the kernel and learns its argument
        kinds, so that the compiled loop takes the next nodes of that kernel).
        """
        order = graph.topological_order()
        fast = stream_launcher()
        if fast is None:
            for node in order:
                ops_for(node).issue(node, stream, self)
            return
        h = int(stream)
        i, total = 0, len(order)
        bindings = compiled_bindings(self.bindings)
        while i < total:
            i = fast.issue(order, i, h, bindings)
            if fast.rc:
                raise_error(require_driver().CUresult(fast.rc), fast.failed, order[i])
            if i < total:
                ops_for(order[i]).issue(order[i], stream, self)
                i += 1


def stream_launcher() -> Any:
    """The compiled ``StreamLauncher`` (:data:`cudagraph.driver.stream_launch.LAUNCHER`), taught the fills, 1-D
    copies and empty nodes (:func:`~cudagraph.ops.compiled_kinds.add_stream_kinds`) once; ``None`` without it."""
    fast = stream_launch.LAUNCHER
    if fast is not None and fast is not _TAUGHT[0]:
        try:
            add_stream_kinds(fast)
        except RuntimeError:  # busy in another thread's cg.launch: fills and copies go through Python this time
            return fast
        _TAUGHT[0] = fast
    return fast


def issue_node(node: Node, stream: Any, run: StreamIssue) -> None:
    """Issue the stream calls that do ``node``'s work on ``stream`` (a child graph's nodes, in order)."""
    ops_for(node).issue(node, stream, run)


def run(graph: Graph, stream: Any, params: dict[str, Any]) -> None:
    """Issue every node of ``graph`` on ``stream`` in topological order.

    Host-callback exceptions are raised as :class:`HostCallbackError` after
    the stream has been synchronized.
    """
    graph._validate_structure()
    bindings = resolve_bindings(graph, params)
    require_driver()
    ensure_context()
    check_devices_of(graph)
    h = stream_handle(stream)
    sink: list[Any] = []
    keys: list[int] = []
    try:
        with PACKING_LOCK:
            state = LowerState(ensure_context(), eager=True)
            try:
                StreamIssue(bindings, sink, keys, state).issue_graph(graph, h)
            finally:
                # Allocations the graph does not free are released in stream order at the end.
                for key, (_alloc, addr) in state.allocs.items():
                    if key not in state.freed:
                        mem_free_async_quietly(addr, h)
    finally:
        if keys:
            stream_synchronize(h)
            unregister(keys)
    if sink:
        node, exc = sink[0]
        raise HostCallbackError(
            f"host callback {node.label} of Graph {graph.name!r} raised {type(exc).__name__}: {exc}", node
        ) from exc
