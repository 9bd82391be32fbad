"""Explicit construction of conditional nodes, set_condition kernels, graph allocations and
kernels with launch attributes or late operands.

:func:`register` adds the lowerers to ``_explicit.LOWERERS``; the kernel branch
of ``Lowering.lower_graph`` calls :func:`add_kernel_with_attrs` and
:func:`kernel_args_late` only for kernels that need them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..definition.condition import PREDICATE_OPS, Condition
from ..definition.launch_attrs import PORTABLE_CLUSTER_SIZE, LaunchAttrs
from ..definition.nodes import (
    AllocNode,
    AllocOffset,
    ChildGraphNode,
    ConditionalNode,
    IfElseNode,
    IfNode,
    KernelNode,
    SetConditionNode,
    SwitchNode,
    WhileNode,
)
from ..definition.validation import BODY_KIND_NAMES
from ..driver.builtin_kernels import predicate_kernel
from ..driver.calls import check, raise_error, require_driver
from ..driver.compat import BINDINGS_MAJOR
from ..driver.kernel_args import kernel_info
from ..errors import OperandError, UnsupportedError
from .lower_state import LowerState, late_kernel_args, state_for
from .node_params import pointer_value

if TYPE_CHECKING:
    from ..materialize.explicit import Lowering

__all__ = ["register", "add_kernel_with_attrs", "kernel_args_late", "driver_version", "ensure_dynamic_smem"]


# ------------------------------------------------------------------------------ driver features

_DRIVER_VERSION: list[int] = []

#: Minimum driver version (cuDriverGetVersion) of each conditional kind.
_MIN_DRIVER = {"if": 12030, "while": 12030, "if_else": 12080, "switch": 12080}
#: Before CUDA 12.4 conditional bodies hold only kernels and no nested conditionals.
_FULL_BODIES = 12040


def driver_version() -> int:
    """``cuDriverGetVersion()``, cached (``13000`` for CUDA 13.0)."""
    if not _DRIVER_VERSION:
        drv = require_driver()
        _DRIVER_VERSION.append(int(check(drv.cuDriverGetVersion(), "cuDriverGetVersion")))
    return _DRIVER_VERSION[0]


def _fmt(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


def _check_driver_support(node: ConditionalNode) -> None:
    """Raise :class:`UnsupportedError` when the running driver cannot build ``node``."""
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
            if type(n) not in (KernelNode, SetConditionNode):
                raise UnsupportedError(
                    f"{n.label} in the body of {node.label}: this CUDA {_fmt(version)} driver allows only "
                    f"kernel nodes in conditional bodies (CUDA 12.4 and newer allow {BODY_KIND_NAMES})",
                    call="cuDriverGetVersion",
                    node=n,
                )


# ------------------------------------------------------------------------------ conditionals


def _cond_type(node: ConditionalNode) -> Any:
    T = require_driver().CUgraphConditionalNodeType
    if type(node) is WhileNode:
        return T.CU_GRAPH_COND_TYPE_WHILE
    if type(node) is SwitchNode:
        return T.CU_GRAPH_COND_TYPE_SWITCH
    return T.CU_GRAPH_COND_TYPE_IF


def lower_conditional(lowering: Lowering, node: ConditionalNode, handle: Any, deps: Any, ndeps: int) -> Any:
    """Add the conditional node, then build each body into the graph the driver made for it."""
    drv = require_driver()
    state = state_for(lowering)
    state.register_graph(node.graph, handle)
    _check_driver_support(node)
    h = state.condition_handle(node.cond, node)
    p = drv.CUgraphNodeParams()
    p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
    c = p.conditional
    c.handle = h
    c.type = _cond_type(node)
    c.size = len(node.bodies)
    c.ctx = lowering.ctx
    r = lowering.add(handle, deps, ndeps, p)
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
            lowering.lower_graph(body, body_handle, track=True)
        else:
            # An empty branch: one empty node keeps every driver version happy.
            ep = drv.CUgraphNodeParams()
            ep.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EMPTY
            check(lowering.add(body_handle, None, 0, ep), "cuGraphAddNode", node)
        lowering.bodies.append(body)
    return r


def lower_set_condition(lowering: Lowering, node: SetConditionNode, handle: Any, deps: Any, ndeps: int) -> Any:
    """A kernel node launching the built-in predicate kernel for ``node.dtype``."""
    drv = require_driver()
    state = state_for(lowering)
    state.register_graph(node.graph, handle)
    h = state.condition_handle(node.cond, node)
    info = kernel_info(predicate_kernel(node.dtype))
    ptr = pointer_value(node.ptr, lowering.bindings, f"{node.label}: ptr")
    args = (np.uint64(h), ptr, node.value, np.int32(PREDICATE_OPS[node.op]))
    info.pack(args, node, lowering.bindings)
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
    return lowering.add(handle, deps, ndeps, p)


# ------------------------------------------------------------------------------ graph memory


def lower_alloc(lowering: Lowering, node: AllocNode, handle: Any, deps: Any, ndeps: int) -> Any:
    """A MEM_ALLOC node on the context's device; its address is recorded for the users."""
    drv = require_driver()
    state = state_for(lowering)
    p = drv.CUgraphNodeParams()
    p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_ALLOC
    a = p.alloc
    a.poolProps.allocType = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    a.poolProps.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    a.poolProps.location.id = int(state.device())
    a.bytesize = node.nbytes
    r = lowering.add(handle, deps, ndeps, p)
    if not r[0]:
        state.allocs[id(node)] = (node, int(p.alloc.dptr))
    return r


# ------------------------------------------------------------------------------ child graphs


def _wrap_child(lower_child: Callable[..., Any]) -> Callable[..., Any]:
    def lower_child_tracked(lowering: Lowering, node: ChildGraphNode, handle: Any, deps: Any, ndeps: int) -> Any:
        # Kernels inside may use conditions of the graphs around them: record where this graph is built.
        state_for(lowering).register_graph(node.graph, handle)
        return lower_child(lowering, node, handle, deps, ndeps)

    lower_child_tracked.__wrapped__ = lower_child  # type: ignore[attr-defined]
    return lower_child_tracked


# ------------------------------------------------------------------------------ kernels


def kernel_args_late(lowering: Lowering, node: KernelNode, handle: Any) -> tuple[Any, ...] | None:
    """The node's arguments with conditions and allocations replaced by their values (``None``: none)."""
    for a in node.args:
        t = type(a)
        if t is AllocNode or t is AllocOffset or t is Condition:
            break
    else:
        return None
    state = state_for(lowering)
    state.register_graph(node.graph, handle)
    return late_kernel_args(state, node)


# (kind, handle address) -> dynamic shared memory already allowed
_SMEM_SET: dict[tuple[bool, int], int] = {}
_NON_PORTABLE_SET: set[tuple[bool, int]] = set()


_SMEM_OPTIN_LIMIT: dict[int, int] = {}


def _smem_limit(info: Any, dev: Any) -> tuple[int, int]:
    """``(opt-in shared memory per block of the device, static shared memory of the kernel)``."""
    drv = require_driver()
    limit = _SMEM_OPTIN_LIMIT.get(int(dev))
    if limit is None:
        attr = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        limit = int(check(drv.cuDeviceGetAttribute(attr, dev), "cuDeviceGetAttribute"))
        _SMEM_OPTIN_LIMIT[int(dev)] = limit
    fattr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
    if info.is_library_kernel:
        static = check(drv.cuKernelGetAttribute(fattr, info.handle, dev), "cuKernelGetAttribute")
    else:
        static = check(drv.cuFuncGetAttribute(fattr, info.handle), "cuFuncGetAttribute")
    return limit, int(static)


def ensure_dynamic_smem(info: Any, node: Any, state: LowerState | None = None) -> str:
    """Raise the kernel's ``MAX_DYNAMIC_SHARED_SIZE_BYTES`` to ``node.shared_mem``; ``""`` or why it failed.

    Raises
    ------
    OperandError
        The dynamic shared memory plus the kernel's static shared memory
        exceed what the device allows one block (checked before the driver).
    """
    nbytes = node.shared_mem
    key = (info.is_library_kernel, int(info.handle))
    if _SMEM_SET.get(key, 0) >= nbytes:
        return ""
    drv = require_driver()
    dev = state.device() if state is not None else check(drv.cuCtxGetDevice(), "cuCtxGetDevice")
    limit, static = _smem_limit(info, dev)
    if nbytes + static > limit:
        raise OperandError(
            f"{node.label} of Graph {node.graph.name!r}: shared_mem: {nbytes} bytes of dynamic shared memory"
            f"{f' plus {static} static' if static else ''} exceed the device's limit of {limit} bytes per block"
        )
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if info.is_library_kernel:
        (err,) = drv.cuKernelSetAttribute(attr, nbytes, info.handle, dev)
        call = "cuKernelSetAttribute"
    else:
        (err,) = drv.cuFuncSetAttribute(info.handle, attr, nbytes)
        call = "cuFuncSetAttribute"
    if err:
        return f"{call}(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes}) failed with {getattr(err, 'name', err)}"
    _SMEM_SET[key] = nbytes
    return ""


def _allow_non_portable_cluster(info: Any, state: LowerState) -> None:
    key = (info.is_library_kernel, int(info.handle))
    if key in _NON_PORTABLE_SET:
        return
    drv = require_driver()
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    if info.is_library_kernel:
        (err,) = drv.cuKernelSetAttribute(attr, 1, info.handle, state.device())
    else:
        (err,) = drv.cuFuncSetAttribute(info.handle, attr, 1)
    if not err:
        _NON_PORTABLE_SET.add(key)


def launch_attribute_values(attrs: LaunchAttrs) -> list[tuple[Any, Any, str]]:
    """``[(CUlaunchAttributeID, value setter, description)]`` for the node attributes of ``attrs``."""
    drv = require_driver()
    ID = drv.CUlaunchAttributeID
    out: list[tuple[Any, Any, str]] = []
    if attrs.cluster is not None:
        cx, cy, cz = attrs.cluster

        def cluster(v: Any) -> None:
            v.clusterDim.x, v.clusterDim.y, v.clusterDim.z = cx, cy, cz

        out.append((ID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster, f"cluster={attrs.cluster}"))
    if attrs.cooperative:

        def coop(v: Any) -> None:
            v.cooperative = 1

        out.append((ID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE, coop, "cooperative"))
    if attrs.priority is not None:
        prio = attrs.priority

        def priority(v: Any) -> None:
            v.priority = prio

        out.append((ID.CU_LAUNCH_ATTRIBUTE_PRIORITY, priority, f"priority={prio}"))
    return out


def _edge_data(node: KernelNode, attrs: LaunchAttrs) -> list[Any]:
    drv = require_driver()
    out = []
    for p in node._preds:
        e = drv.CUgraphEdgeData()
        port = attrs.port_of(p)
        if port is not None:
            e.type = drv.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
            e.from_port = (
                drv.CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER
                if port == "launch_order"
                else drv.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
            )
        out.append(e)
    return out


def add_kernel_with_attrs(
    lowering: Lowering, node: KernelNode, attrs: LaunchAttrs, handle: Any, deps: Any, ndeps: int, kp: Any, info: Any
) -> Any:
    """Add a kernel node whose launch has attributes; ``kp`` holds its packed parameters.

    Large dynamic shared memory is allowed on the kernel first, programmatic
    edges are given as edge data, and cluster / cooperative / priority are set
    with ``cuGraphKernelNodeSetAttribute`` on the new node.
    """
    drv = require_driver()
    state = state_for(lowering)
    why = ""
    if attrs.smem_optin:
        why = ensure_dynamic_smem(info, node, state)
    if attrs.cluster is not None and attrs.cluster[0] * attrs.cluster[1] * attrs.cluster[2] > PORTABLE_CLUSTER_SIZE:
        _allow_non_portable_cluster(info, state)
    if attrs.programmatic:
        edata = _edge_data(node, attrs)
        if BINDINGS_MAJOR >= 13:
            r = drv.cuGraphAddNode(handle, deps, edata, ndeps, kp)
            call = "cuGraphAddNode"
        else:  # pragma: no cover - cuda-bindings 12.x
            r = drv.cuGraphAddNode_v2(handle, deps, edata, ndeps, kp)
            call = "cuGraphAddNode_v2"
    else:
        r = lowering.add(handle, deps, ndeps, kp)
        call = "cuGraphAddNode"
    if r[0]:
        raise_error(r[0], call, node, why)
    dnode = r[1]
    for attr_id, setter, desc in launch_attribute_values(attrs):
        value = drv.CUkernelNodeAttrValue()
        setter(value)
        (err,) = drv.cuGraphKernelNodeSetAttribute(dnode, drv.CUkernelNodeAttrID(int(attr_id)), value)
        if err:
            raise_error(err, "cuGraphKernelNodeSetAttribute", node, desc)
    return r


# ------------------------------------------------------------------------------ registration


def register(lowerers: dict[type, Callable[..., Any]]) -> None:
    """Add the lowerers of this module to ``lowerers`` (``_explicit.LOWERERS``)."""
    for cls in (IfNode, IfElseNode, WhileNode, SwitchNode):
        lowerers[cls] = lower_conditional
    lowerers[SetConditionNode] = lower_set_condition
    lowerers[AllocNode] = lower_alloc
    child = lowerers.get(ChildGraphNode)
    if child is not None and not hasattr(child, "__wrapped__"):
        lowerers[ChildGraphNode] = _wrap_child(child)
