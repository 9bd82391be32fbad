"""``CUgraphNodeParams`` of one node, for explicit construction and for executable updates."""

from __future__ import annotations

from typing import Any

from ..definition.nodes import Node
from .kinds.base import NodeEnv
from .lower_state import LowerState
from .registry import ops_for

__all__ = ["node_params"]


def node_params(
    node: Node,
    ctx: Any,
    bindings: dict[str, Any],
    sink: list[Any],
    host_keys: list[int],
    state: LowerState | None = None,
    reuse: bool = False,
) -> Any:
    """``CUgraphNodeParams`` for ``node`` (a kind with single-node parameters: not kernels or bodies).

    Parameters
    ----------
    node : Node
        The node.
    ctx : CUcontext
        The context copies and fills run in.
    bindings : dict
        Parameter values.
    sink : list
        Where host callbacks append ``(node, exception)``.
    host_keys : list of int
        Where the keys of registered host callbacks are appended.
    state : LowerState, optional
        The construction in progress, where graph allocations have their
        addresses (``None``: outside a construction, where they have none).
    reuse : bool
        For one driver call: a reused structure, which the caller hands back
        (:func:`cudagraph.driver.node_params_pool.give`) after that call. Else a fresh one.
    """
    return ops_for(node).params(node, NodeEnv(ctx, bindings, sink, host_keys, state, reuse))
