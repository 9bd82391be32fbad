"""Kernel launch attributes on the driver: large dynamic shared memory and non-portable cluster sizes
allowed on the kernel, node attributes as the driver's values (``cuGraphKernelNodeSetAttribute``,
``cuLaunchKernelEx``), programmatic edges as edge data, and what a lifted driver node reports."""

from __future__ import annotations

import ctypes
from typing import Any

from ...definition.kinds.kernel import SMEM_DEFAULT_LIMIT, LaunchAttrs
from ...definition.kinds.launch_attributes import (
    ATTRIBUTE_IDS,
    ATTRIBUTES,
    FIRST_CLASS_IDS,
    STREAM_ONLY_IDS,
    decode,
    encode,
)
from ...definition.nodes import KernelNode, Node
from ...driver.api import (
    ctx_get_device,
    device_get_attribute,
    func_get_attribute,
    func_set_attribute_result,
    kernel_get_attribute,
    kernel_set_attribute_result,
)
from ...driver.calls import require_driver
from ...driver.compat import BINDINGS_MAJOR
from ...errors import OperandError, UnsupportedError
from ..lower_state import LowerState

__all__ = [
    "allow_non_portable_cluster",
    "carry_attributes",
    "edge_data",
    "ensure_dynamic_smem",
    "launch_attribute_values",
    "lift_attributes",
]


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
        limit = int(device_get_attribute(attr, dev))
        _SMEM_OPTIN_LIMIT[int(dev)] = limit
    fattr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
    if info.is_library_kernel:
        static = kernel_get_attribute(fattr, info.handle, dev)
    else:
        static = func_get_attribute(fattr, info.handle)
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
    dev = state.device() if state is not None else ctx_get_device()
    limit, static = _smem_limit(info, dev)
    if nbytes + static > limit:
        raise OperandError(
            f"{node.label} of Graph {node.graph.name!r}: shared_mem: {nbytes} bytes of dynamic shared memory"
            f"{f' plus {static} static' if static else ''} exceed the device's limit of {limit} bytes per block"
        )
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if info.is_library_kernel:
        (err,) = kernel_set_attribute_result(attr, nbytes, info.handle, dev)
        call = "cuKernelSetAttribute"
    else:
        (err,) = func_set_attribute_result(info.handle, attr, nbytes)
        call = "cuFuncSetAttribute"
    if err:
        return f"{call}(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes}) failed with {getattr(err, 'name', err)}"
    _SMEM_SET[key] = nbytes
    return ""


def allow_non_portable_cluster(info: Any, state: LowerState) -> None:
    key = (info.is_library_kernel, int(info.handle))
    if key in _NON_PORTABLE_SET:
        return
    drv = require_driver()
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    if info.is_library_kernel:
        (err,) = kernel_set_attribute_result(attr, 1, info.handle, state.device())
    else:
        (err,) = func_set_attribute_result(info.handle, attr, 1)
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
    for name, value in attrs.extra:
        attr = ATTRIBUTES[name]
        try:
            attr_id = ID(attr.id)
        except ValueError:
            raise UnsupportedError(
                f"launch attribute {name!r} (CUlaunchAttributeID {attr.id}) is unknown to this cuda-bindings "
                f"{BINDINGS_MAJOR}.x; install a newer one"
            ) from None
        out.append((attr_id, _raw_setter(encode(attr, value)), f"{name}={value}"))
    return out


def _raw_setter(raw: bytes) -> Any:
    """A setter writing ``raw`` (a whole ``CUlaunchAttributeValue``) over a bindings value structure."""

    def setter(v: Any) -> None:
        ctypes.memmove(int(v.getPtr()), raw, len(raw))

    return setter


def edge_data(node: KernelNode, attrs: LaunchAttrs) -> list[Any]:
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


def lift_attributes(node: KernelNode, raw: dict[int, bytes], programmatic: list[tuple[Node, str]]) -> None:
    """:meth:`KernelOps.lift_attributes <cudagraph.ops.kinds.kernel.KernelOps.lift_attributes>`."""
    attrs = node.attrs.copy() if node.attrs is not None else LaunchAttrs()
    extra = []
    for attr_id, value in raw.items():
        first = FIRST_CLASS_IDS.get(attr_id)
        if first is not None:
            field, layout, default = first
            v = layout.unpack_from(value)
            if v == default:
                continue
            if field == "cluster":
                attrs.cluster = (v[0], v[1], v[2])
            elif field == "cooperative":
                attrs.cooperative = True
            else:
                attrs.priority = v[0]
            continue
        attr = ATTRIBUTE_IDS.get(attr_id)
        if attr is not None:
            v = decode(attr, value)
            if v != attr.default:
                extra.append((attr.name, v))
            continue
        if value.strip(b"\0"):
            what = STREAM_ONLY_IDS.get(attr_id)
            kind = f"the stream-only attribute {what!r}" if what else "an attribute cudagraph does not know"
            raise UnsupportedError(
                f"{node.label} of Graph {node.graph.name!r} (kernel {node.name!r}): its driver node has launch "
                f"attribute id {attr_id} set ({kind}; value bytes {value.rstrip(bytes(1)).hex()}); "
                "refused rather than dropped"
            )
    extra.sort()
    attrs.extra = tuple(extra)
    if programmatic:
        attrs.programmatic = programmatic
    attrs.smem_optin = node.shared_mem > SMEM_DEFAULT_LIMIT
    node.attrs = None if attrs.empty else attrs
    if node.attrs is not None:
        node.graph._topo = None  # the record holds no launch attributes (see Graph.kernel)
        node.graph._attributed = True


def carry_attributes(node: KernelNode, attrs: LaunchAttrs | None) -> None:
    """:meth:`KernelOps.carry_attributes <cudagraph.ops.kinds.kernel.KernelOps.carry_attributes>`."""
    # Shared, not copied: a node's LaunchAttrs is never changed in place (every edit copies it first), so nodes
    # launched alike may hold one (bench/zoo_lift_profile.py prints what the attributes cost a lift).
    node.attrs = attrs
    if attrs is not None:
        node.graph._topo = None  # the record holds no launch attributes (see Graph.kernel)
        node.graph._attributed = True
