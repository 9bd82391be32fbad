"""Device-side control flow: conditional nodes (if, if/else, while, switch) and ``SetConditionNode``.

A conditional node is added first; the driver then hands back one body graph
per branch, into which the bodies are built. Condition handles are created
per driver graph by the construction's :class:`~cudagraph.ops.lower_state.LowerState`.
None of these kinds runs on a stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...definition.condition import PREDICATE_OPS
from ...definition.nodes import (
    ConditionalNode,
    IfElseNode,
    IfNode,
    Node,
    SetConditionNode,
    SwitchNode,
    WhileNode,
)
from ...definition.validation import BODY_KIND_NAMES
from ...driver.api import driver_get_version
from ...driver.builtin_kernels import predicate_kernel
from ...driver.calls import check, raise_error, require_driver
from ...driver.kernel_args import kernel_info
from ...errors import UnsupportedError
from ..operands import pointer_value
from .base import Builder, KindOps, StreamRun

__all__ = ["OPS", "ConditionalOps", "SetConditionOps", "driver_version"]

_DRIVER_VERSION: list[int] = []

#: Minimum driver version (cuDriverGetVersion) of each conditional kind.
_MIN_DRIVER = {"if": 12030, "while": 12030, "if_else": 12080, "switch": 12080}
#: Before CUDA 12.4 conditional bodies hold only kernels and no nested conditionals.
_FULL_BODIES = 12040


def driver_version() -> int:
    """``cuDriverGetVersion()``, cached (``13000`` for CUDA 13.0)."""
    if not _DRIVER_VERSION:
        _DRIVER_VERSION.append(int(driver_get_version()))
    return _DRIVER_VERSION[0]


def _fmt(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


def _check_driver_support(node: ConditionalNode, builder: Builder) -> None:
    """Raise :class:`UnsupportedError` when the running driver cannot build ``node`` (before CUDA 12.4, a body
    may hold only kinds the driver holds as kernel nodes: their ops' ``driver_kernel``, read through ``builder``)."""
    version = driver_version()
    need = _MIN_DRIVER[node.kind]
    if version < need:
        raise UnsupportedError(
            f"{node.label} of Graph {node.graph.name!r}: {node.kind} nodes need a CUDA {_fmt(need)} driver; "
            f"this one is CUDA {_fmt(version)}",
            call="cuDriverGetVersion",
            node=node,
        )
    if version >= _FULL_BODIES:
        return
    # CUDA 12.3: kernels only, no nesting.
    stack = list(node.bodies)
    while stack:
        g = stack.pop()
        for n in g._nodes:
            if not builder.ops_for(n).driver_kernel:
                raise UnsupportedError(
                    f"{n.label} in the body of {node.label}: this CUDA {_fmt(version)} driver allows only "
                    f"kernel nodes in conditional bodies (CUDA 12.4 and newer allow {BODY_KIND_NAMES})",
                    call="cuDriverGetVersion",
                    node=n,
                )


class _GraphOnlyOps(KindOps):
    __slots__ = ()
    lowers = True
    #: An instantiated graph takes a changed conditional node (its bodies, its condition's default) or
    #: set_condition node only through ``cuGraphExecUpdate``: the graph is built anew (condition handles
    #: included) and applied as a whole.
    exec_update = "graph"

    def issue(self, node: Any, stream: Any, run: StreamRun) -> None:
        raise UnsupportedError(
            f"{node.label} of Graph {node.graph.name!r}: {node.kind} nodes run only inside an instantiated "
            "graph (the condition is a graph object); Graph.run() cannot run them",
            node=node,
        )


class ConditionalOps(_GraphOnlyOps):
    """A conditional node of one ``CUgraphConditionalNodeType``; each body is built into the graph the driver made.

    Parameters
    ----------
    cond_type : str
        The ``CUgraphConditionalNodeType`` member name, e.g. ``"CU_GRAPH_COND_TYPE_WHILE"``.
    """

    __slots__ = ("cond_type",)

    def __init__(self, cond_type: str) -> None:
        self.cond_type = cond_type

    def lower(self, builder: Builder, node: ConditionalNode, handle: Any, deps: Any, ndeps: int) -> Any:
        drv = require_driver()
        state = builder.state
        state.register_graph(node.graph, handle)
        _check_driver_support(node, builder)
        h = state.condition_handle(node.cond, node)
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        c = p.conditional
        c.handle = h
        c.type = getattr(drv.CUgraphConditionalNodeType, self.cond_type)
        c.size = len(node.bodies)
        c.ctx = builder.ctx
        r = builder.add(handle, deps, ndeps, p)
        if r[0]:
            return r
        outs = list(p.conditional.phGraph_out)
        if len(outs) != len(node.bodies):  # pragma: no cover - a driver/bindings mismatch
            raise_error(
                drv.CUresult.CUDA_ERROR_UNKNOWN,
                "cuGraphAddNode",
                node,
                f"the driver returned {len(outs)} body graphs for {len(node.bodies)} bodies",
            )
        for body, body_handle in zip(node.bodies, outs):
            state.register_graph(body, body_handle)
            if body._nodes:
                # Body graphs belong to the conditional node: their node handles stay valid (updatable).
                builder.lower_graph(body, body_handle, track=True)
            else:
                # An empty branch: one empty node keeps every driver version happy.
                ep = drv.CUgraphNodeParams()
                ep.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EMPTY
                check(builder.add(body_handle, None, 0, ep), "cuGraphAddNode", node)
            builder.bodies.append(body)
        return r

    def __repr__(self) -> str:
        return f"<ConditionalOps {self.cond_type}>"


class SetConditionOps(_GraphOnlyOps):
    """A kernel node launching the built-in predicate kernel for ``node.dtype``."""

    __slots__ = ()
    driver_kernel = True

    def lower(self, builder: Builder, node: SetConditionNode, handle: Any, deps: Any, ndeps: int) -> Any:
        drv = require_driver()
        state = builder.state
        state.register_graph(node.graph, handle)
        h = state.condition_handle(node.cond, node)
        info = kernel_info(predicate_kernel(node.dtype))
        ptr = pointer_value(node.ptr, builder.bindings, f"{node.label}: ptr", state)
        args = (np.uint64(h), ptr, node.value, np.int32(PREDICATE_OPS[node.op]))
        info.pack(args, node, builder.bindings)
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
        k = p.kernel
        if info.is_library_kernel:
            k.kern = info.handle
        else:
            k.func = info.handle
        k.gridDimX = k.gridDimY = k.gridDimZ = 1
        k.blockDimX = k.blockDimY = k.blockDimZ = 1
        k.sharedMemBytes = 0
        k.kernelParams = info.params_address
        return builder.add(handle, deps, ndeps, p)


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = (
    (IfNode, ConditionalOps("CU_GRAPH_COND_TYPE_IF")),
    (IfElseNode, ConditionalOps("CU_GRAPH_COND_TYPE_IF")),
    (WhileNode, ConditionalOps("CU_GRAPH_COND_TYPE_WHILE")),
    (SwitchNode, ConditionalOps("CU_GRAPH_COND_TYPE_SWITCH")),
    (SetConditionNode, SetConditionOps()),
)
