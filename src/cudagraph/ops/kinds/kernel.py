"""Kernels: ``KernelNode`` (launch attributes and late operands included) and lifting kernel nodes.

Explicit construction adds runs of plain kernel nodes in its own fast path
(``materialize.explicit`` with the compiled loop or its Python twin); what
needs more goes through :class:`KernelOps`: arguments that get their values
only during construction (graph allocations, condition handles) and launch
attributes (cluster, cooperative, priority, programmatic edges, large
dynamic shared memory).
"""

from __future__ import annotations

import ctypes
import operator
import struct
from typing import Any

from ...definition.launch_attrs import PORTABLE_CLUSTER_SIZE, LaunchAttrs
from ...definition.nodes import KernelNode, Node
from ...driver.c_entry import NATIVE
from ...driver.calls import check, raise_error, require_driver
from ...driver.compat import BINDINGS_MAJOR
from ...driver.kernel_args import kernel_info
from ...errors import OperandError
from ..lower_state import LowerState, is_late, late_kernel_args
from .base import Builder, KindOps, StreamRun

__all__ = [
    "OPS",
    "KernelOps",
    "LiftedKernel",
    "ensure_dynamic_smem",
    "launch_attribute_values",
    "set_function",
]


def set_function(p: Any, info: Any) -> None:
    """Point kernel parameters ``p`` at ``info``'s kernel (``kern`` or ``func``; the other cleared)."""
    drv = require_driver()
    if info.is_library_kernel:
        p.func = drv.CUfunction(0)
        p.kern = info.handle
    else:
        p.kern = drv.CUkernel(0)
        p.func = info.handle


# ------------------------------------------------------------------------------ kernel attributes

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


# ------------------------------------------------------------------------------ lifting

# ``ctypes_array_type.from_address`` unbound, and the ``raw`` bytes of a char array.
_FROM_ADDRESS = type(ctypes.c_char * 1).from_address
_RAW = operator.attrgetter("raw")
#: The compiled reader of kernel arguments (``None``: ctypes below).
_KERNEL_ARGS = None if NATIVE is None else NATIVE.kernel_args


class LiftedKernel:
    """What every lifted node of one kernel shares: the handle, the name, argument readers.

    Parameters
    ----------
    handle : CUfunction or CUkernel
        The kernel.
    name : str
        Its name.
    sizes : tuple of int
        The size of each parameter.
    """

    __slots__ = ("handle", "name", "nargs", "sizes", "ptrs", "ptr_array", "arg_types")

    def __init__(self, handle: Any, name: str, sizes: tuple[int, ...]) -> None:
        self.handle = handle
        self.name = name
        self.nargs = len(sizes)
        self.sizes = tuple(sizes)
        # the kernelParams array (void*[n]) read as ints, and one char[size] type per argument
        self.ptrs = struct.Struct(f"<{len(sizes)}Q")
        self.ptr_array: Any = ctypes.c_void_p * max(len(sizes), 1)
        self.arg_types: tuple[Any, ...] = tuple(ctypes.c_char * s for s in sizes)

    def args(self, address: int) -> tuple[bytes, ...]:
        """The argument values, as exact bytes, behind a node's ``kernelParams`` address."""
        if not self.nargs:
            return ()
        if not address:
            raise OperandError(f"kernel {self.name!r}: arguments given with 'extra' cannot be read back")
        if _KERNEL_ARGS is not None:
            out = _KERNEL_ARGS(address, self.sizes)
            if type(out) is tuple:
                return out  # type: ignore[no-any-return]
            raise OperandError(f"kernel {self.name!r}: argument {out} has no value (a NULL pointer)")
        ptrs = self.ptrs.unpack_from(self.ptr_array.from_address(address))
        if 0 in ptrs:
            raise OperandError(f"kernel {self.name!r}: argument {ptrs.index(0)} has no value (a NULL pointer)")
        # char[size].from_address(p).raw for each argument, looped in C.
        return tuple(map(_RAW, map(_FROM_ADDRESS, self.arg_types, ptrs)))


# ------------------------------------------------------------------------------ the kind


class KernelOps(KindOps):
    """A kernel launch: ``cuLaunchKernel`` (``cuLaunchKernelEx`` with attributes) on a stream.

    Explicit construction adds plain kernel nodes in its own loop (one
    prepared ``CUgraphNodeParams``); it calls :meth:`late_args` and
    :meth:`add_with_attrs` for the nodes that need them. Lifting reads
    kernel nodes in bulk and builds them from :class:`LiftedKernel`.
    """

    __slots__ = ()
    capturable = True

    # ---------------------------------------------------------------- explicit construction
    def point_at(self, k: Any, info: Any) -> None:
        """Point the prepared kernel parameters ``k`` at ``info``'s function and argument buffer."""
        set_function(k, info)
        k.kernelParams = info.params_address

    def late_args(self, builder: Builder, node: KernelNode, handle: Any) -> tuple[Any, ...] | None:
        """The node's arguments with conditions and allocations replaced by their values (``None``: none)."""
        for a in node.args:
            if is_late(a):
                break
        else:
            return None
        state = builder.state
        state.register_graph(node.graph, handle)
        return late_kernel_args(state, node)

    def add_with_attrs(
        self,
        builder: Builder,
        node: KernelNode,
        attrs: LaunchAttrs,
        handle: Any,
        deps: Any,
        ndeps: int,
        kp: Any,
        info: Any,
    ) -> Any:
        """Add a kernel node whose launch has attributes; ``kp`` holds its packed parameters.

        Large dynamic shared memory is allowed on the kernel first, programmatic
        edges are given as edge data, and cluster / cooperative / priority are set
        with ``cuGraphKernelNodeSetAttribute`` on the new node.
        """
        drv = require_driver()
        state = builder.state
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
            r = builder.add(handle, deps, ndeps, kp)
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

    # ---------------------------------------------------------------- streams
    def issue(self, node: KernelNode, stream: Any, run: StreamRun) -> None:
        drv = require_driver()
        state = run.state
        info = kernel_info(node.kernel)
        try:
            params = info.pack(node.args, node, run.bindings)
        except OperandError:
            late = late_kernel_args(state, node)
            if late is None:
                raise
            params = info.pack(late, node, run.bindings)
        if node.attrs is not None:
            self._launch_ex(node, info, params, stream, state)
            return
        g, b = node.grid, node.block
        check(
            drv.cuLaunchKernel(_function(info, state), *g, *b, node.shared_mem, stream, params, 0),
            "cuLaunchKernel",
            node,
        )

    @staticmethod
    def _launch_ex(node: KernelNode, info: Any, params: int, stream: Any, state: LowerState) -> None:
        """``cuLaunchKernelEx`` with the node's launch attributes (programmatic edges launch normally)."""
        drv = require_driver()
        attrs = node.attrs
        why = ensure_dynamic_smem(info, node, state) if attrs.smem_optin else ""
        cfg = drv.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = node.grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = node.block
        cfg.sharedMemBytes = node.shared_mem
        cfg.hStream = stream
        launch_attrs = []
        for attr_id, setter, _desc in launch_attribute_values(attrs):
            a = drv.CUlaunchAttribute()
            a.id = attr_id
            setter(a.value)
            launch_attrs.append(a)
        cfg.attrs = launch_attrs
        cfg.numAttrs = len(launch_attrs)
        (err,) = drv.cuLaunchKernelEx(cfg, _function(info, state), params, 0)
        if err:
            raise_error(err, "cuLaunchKernelEx", node, why)

    def capture_refusal(self, node: KernelNode) -> str | None:
        if node.attrs is not None or node.shared_mem > 48 * 1024:
            return (
                f"{node.label}: the capture backend launches kernels with cuLaunchKernel, which cannot carry "
                "launch attributes (cluster, cooperative, priority, programmatic) or more than 48 KiB of "
                "dynamic shared memory; use backend='explicit'"
            )
        return None

    # ---------------------------------------------------------------- lifting
    def lifted_kernel(self, handle: Any, name: str, sizes: tuple[int, ...]) -> LiftedKernel:
        """The :class:`LiftedKernel` of ``handle`` (one per kernel per lift)."""
        return LiftedKernel(handle, name, sizes)


def _function(info: Any, state: LowerState) -> Any:
    """The ``CUfunction`` to launch ``info``'s kernel in this run's context (looked up once per run)."""
    if not info.is_library_kernel:
        return info.handle
    fn = state.functions.get(id(info))
    if fn is None:
        fn = check(require_driver().cuKernelGetFunction(info.handle), "cuKernelGetFunction")
        state.functions[id(info)] = fn
    return fn


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = ((KernelNode, KernelOps()),)
