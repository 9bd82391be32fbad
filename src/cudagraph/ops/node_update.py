"""Setting a node's parameters in an instantiated graph (``cuGraphExecNodeSetParams``).

Kernel nodes are set by the one kernel writer (:mod:`cudagraph.ops.kinds.kernel`)
and child graphs by the executable (their body is lowered afresh); every
other kind is set here from its :func:`~cudagraph.ops.node_params.node_params`
(each kind's :meth:`~cudagraph.ops.kinds.base.KindOps.exec_set` says which).
"""

from __future__ import annotations

from typing import Any

from ..definition.nodes import Node
from ..driver.api import graph_exec_node_set_params_result
from ..driver.calls import raise_error
from ..driver.node_params_pool import give
from .lower_state import LowerState
from .node_params import node_params

__all__ = ["set_node_params"]


def set_node_params(
    exec_handle: Any,
    node: Node,
    driver_node: Any,
    ctx: Any,
    bindings: dict[str, Any],
    sink: list[Any],
    host_keys: list[int],
    state: LowerState | None = None,
) -> None:
    """Give ``driver_node`` of ``exec_handle`` the parameters of ``node`` (under ``bindings``).

    ``node`` is of any kind but kernel and child graph. ``state`` is the
    :class:`~cudagraph.ops.lower_state.LowerState` of the construction that made
    ``exec_handle`` (the addresses of its graph allocations).

    Raises
    ------
    DriverError
        The driver refused the update; the message names the node.
    """
    p = node_params(node, ctx, bindings, sink, host_keys, state, reuse=True)
    try:
        (err,) = graph_exec_node_set_params_result(exec_handle, driver_node, p)
    finally:
        give(p)  # (the driver copied what it reads)
    if err:
        raise_error(err, "cuGraphExecNodeSetParams", node)
