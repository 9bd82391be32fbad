"""Kernels: ``KernelNode`` (launch attributes and late operands included), lifting kernel nodes and
the one writer of kernel nodes in an executable.

Explicit construction adds runs of plain kernel nodes in its own fast path
(``materialize.explicit`` with the compiled loop or its Python twin); what
needs more goes through :class:`KernelOps`: arguments that get their values
only during construction (graph allocations, condition handles) and launch
attributes (cluster, cooperative, priority, programmatic edges, large
dynamic shared memory).

Every kernel-node update of an :class:`~cudagraph.Executable` (``cuGraphExecKernelNodeSetParams``) goes through
:class:`KernelWriter`, the reference Python implementation:

- :meth:`KernelWriter.write` packs a node's arguments into its kernel's shared
  buffer and sets it (``Executable.update(g2)`` and so
  :class:`~cudagraph.ExecutableCache`);
- :meth:`KernelWriter.write_prepared` sets one node from its
  :class:`PreparedKernel` (``exe[node].update(...)``, a bind of several
  parameters at once, and a kernel user handed to the general path);
- :meth:`KernelWriter.write_plan` writes a rebound parameter's bytes once per
  group of nodes sharing a :class:`PreparedKernel`, then sets each node of the
  group (``Executable.bind`` through its :class:`~cudagraph.executable.bind_plan.BindPlan`).

The compiled module (``cudagraph.driver._native``) accelerates three of these
paths; each makes the same driver calls as its Python twin below, which the CPU
tests check call by call (``tests/test_bind_plan_cpu.py``, ``tests/test_native_cpu.py``):

- ``KernelLoop`` in set mode (:meth:`KernelWriter.run`), twin of
  :meth:`KernelWriter.write` called on each node of a run;
- ``rebind``, run by :meth:`KernelWriter.write_plan` on a plan made for it,
  twin of the Python loop of the same method;
- ``BindMethod`` (the compiled ``Executable.bind``, ``_native_bind.c``), twin of
  the Python ``Executable.bind`` (:meth:`Binding.bind
  <cudagraph.executable.binding.Binding.bind>`) rebinding one pointer: it runs
  a plan's compiled groups as ``rebind`` does.
"""

from __future__ import annotations

import ctypes
import operator
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...definition.kinds.kernel import PORTABLE_CLUSTER_SIZE, LaunchAttrs
from ...definition.nodes import KernelNode, Node
from ...definition.param import Param
from ...definition.param_offset import ParamBytes
from ...driver.api import (
    graph_exec_kernel_node_set_params_entry,
    graph_kernel_node_set_attribute_result,
    kernel_get_function,
    launch_kernel_ex_result,
)
from ...driver.c_entry import NATIVE, c_address, kernel_loop, use_kernel
from ...driver.calls import raise_error, require_driver
from ...driver.compat import add_node_with_edge_data
from ...driver.devices import primary_context
from ...driver.kernel_args import _STRUCT_CODES, PACKING_LOCK, compiled_bindings, for_node, kernel_info
from ...driver.node_reads import compiled_reads
from ...driver.stream_launch import launch_packed
from ...driver.stream_launch import prepared as prepared_launch
from ...errors import DriverError, OperandError, UnsupportedError
from ..lower_state import LowerState, is_late, late_kernel_args
from .base import Builder, ExecSetter, KindOps, StreamRun
from .kernel_launch import (
    allow_non_portable_cluster,
    carry_attributes,
    edge_data,
    ensure_dynamic_smem,
    launch_attribute_values,
    lift_attributes,
)

if TYPE_CHECKING:
    from ...executable.bind_plan import BindPlan

__all__ = [
    "OPS",
    "KernelOps",
    "KernelWriter",
    "LiftedKernel",
    "PreparedKernel",
    "ensure_dynamic_smem",
    "launch_attribute_values",
    "native_rebind",
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


_FROM_ADDRESS = type(ctypes.c_char * 1).from_address
_RAW = operator.attrgetter("raw")
#: The compiled reader of kernel arguments (``cudagraph.driver._reads.kernel_args``; ``None``: ctypes below).
_KERNEL_ARGS = getattr(compiled_reads(), "kernel_args", None)


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

    __slots__ = ("handle", "name", "nargs", "sizes", "ptrs", "ptr_array", "arg_types", "unread", "unread_nodes")

    def __init__(self, handle: Any, name: str, sizes: tuple[int, ...]) -> None:
        self.handle = handle
        self.name = name
        self.nargs = len(sizes)
        self.sizes = tuple(sizes)
        # the kernelParams array (void*[n]) read as ints, and one char[size] type per argument
        self.ptrs = struct.Struct(f"<{len(sizes)}Q")
        self.ptr_array: Any = ctypes.c_void_p * max(len(sizes), 1)
        self.arg_types: tuple[Any, ...] = tuple(ctypes.c_char * s for s in sizes)
        #: The arguments given to a node launched with ``extra`` (no ``kernelParams``): zeros of the right sizes,
        #: replaced from the packed buffer once the node is made (the lift's ``carry``); counted in ``unread_nodes``.
        self.unread = tuple(bytes(s) for s in sizes)
        self.unread_nodes = 0

    def args(self, address: int) -> tuple[bytes, ...]:
        """The argument values, as exact bytes, behind a node's ``kernelParams`` address."""
        if not self.nargs:
            return ()
        if not address:
            self.unread_nodes += 1  # launched with a packed buffer ('extra'): read where the node is known
            return self.unread
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
    launches = True
    driver_kernel = True

    # ---------------------------------------------------------------- explicit construction
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
        with ``cuGraphKernelNodeSetAttribute`` on the new node. A node with a device
        is added with that device's primary context in ``ctx`` (cleared after the add).
        """
        drv = require_driver()
        if attrs.device is not None:
            kp.kernel.ctx = primary_context(attrs.device, node)
            try:
                return self._add_attributed(builder, node, attrs, handle, deps, ndeps, kp, info)
            finally:
                kp.kernel.ctx = drv.CUcontext(0)
        return self._add_attributed(builder, node, attrs, handle, deps, ndeps, kp, info)

    @staticmethod
    def _add_attributed(
        builder: Builder, node: KernelNode, attrs: LaunchAttrs, handle: Any, deps: Any, ndeps: int, kp: Any, info: Any
    ) -> Any:
        drv = require_driver()
        state = builder.state
        why = ""
        if attrs.smem_optin:
            why = ensure_dynamic_smem(info, node, state)
        if attrs.cluster is not None and attrs.cluster[0] * attrs.cluster[1] * attrs.cluster[2] > PORTABLE_CLUSTER_SIZE:
            allow_non_portable_cluster(info, state)
        if attrs.programmatic:
            r, call = add_node_with_edge_data(handle, deps, edge_data(node, attrs), ndeps, kp)
        else:
            r = builder.add(handle, deps, ndeps, kp)
            call = "cuGraphAddNode"
        if r[0]:
            raise_error(r[0], call, node, why)
        dnode = r[1]
        for attr_id, setter, desc in launch_attribute_values(attrs):
            value = drv.CUkernelNodeAttrValue()
            setter(value)
            (err,) = graph_kernel_node_set_attribute_result(dnode, drv.CUkernelNodeAttrID(int(attr_id)), value)
            if err:
                raise_error(err, "cuGraphKernelNodeSetAttribute", node, desc)
        return r

    # ---------------------------------------------------------------- streams
    def issue(self, node: KernelNode, stream: Any, run: StreamRun) -> None:
        """One launch (the Python twin of the compiled ``StreamLauncher.issue``, which learns from it)."""
        try:
            p = prepared_launch(node.kernel)
        except OperandError as exc:
            raise for_node(exc, node) from None
        try:
            params = p.info.pack(node.args, node, run.bindings)
        except OperandError:
            late = late_kernel_args(run.state, node)
            if late is None:
                raise
            params = p.info.pack(late, node, run.bindings)
        if node.attrs is not None:
            self._launch_ex(node, p.info, params, stream, run.state)
            return
        err = launch_packed(p, params, node.grid, node.block, node.shared_mem, stream)
        if err:
            raise_error(err, "cuLaunchKernel", node)

    @staticmethod
    def _launch_ex(node: KernelNode, info: Any, params: int, stream: Any, state: LowerState) -> None:
        """``cuLaunchKernelEx`` with the node's launch attributes (programmatic edges launch normally)."""
        drv = require_driver()
        attrs = node.attrs
        if attrs.device is not None and attrs.device != int(state.device()):  # a CUdevice is its ordinal
            raise UnsupportedError(
                f"{node.label} of Graph {node.graph.name!r}: device={attrs.device} is not the current device "
                f"({int(state.device())}); an eager run launches on the current device's stream only"
            )
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
        (err,) = launch_kernel_ex_result(cfg, _function(info, state), params, 0)
        if err:
            raise_error(err, "cuLaunchKernelEx", node, why)

    def capture_refusal(self, node: KernelNode) -> str | None:
        if node.attrs is not None or node.shared_mem > 48 * 1024:
            return (
                f"{node.label}: the capture backend launches kernels with cuLaunchKernel, which cannot carry "
                "launch attributes (cluster, cooperative, priority, programmatic, device) or more than 48 KiB of "
                "dynamic shared memory; use backend='explicit'"
            )
        return None

    # ---------------------------------------------------------------- lifting
    def exec_set(self, setter: ExecSetter, node: KernelNode, driver_node: Any) -> None:
        setter.write_kernel(node, driver_node)

    def lift_attributes(self, node: KernelNode, raw: dict[int, bytes], programmatic: list[tuple[Node, str]]) -> None:
        """Give a lifted kernel node the launch attributes its driver node reports, and its programmatic edges.

        ``raw`` is ``{CUlaunchAttributeID: value bytes}`` as read
        (:meth:`cudagraph.driver.node_reads.NodeReads.attributes`); ``programmatic`` the
        ``(predecessor, port)`` of its programmatic edges. Values equal to a plain node's are left out.

        Raises
        ------
        UnsupportedError
            An attribute the definition cannot carry (a stream-only one, an id it does not know) is set:
            named with the node and its kernel, never dropped.
        """
        lift_attributes(node, raw, programmatic)

    def carry_attributes(self, node: KernelNode, attrs: LaunchAttrs | None) -> None:
        """Give a lifted kernel node (no programmatic edge, no attributes of its own yet) the launch attributes that
        :meth:`lift_attributes` made for another node of the same lift whose driver node read the same values and
        whose shared memory is the same (the same object: a node's attributes are never changed in place, an edit
        copies them first)."""
        carry_attributes(node, attrs)

    def lifted_kernel(self, handle: Any, name: str, sizes: tuple[int, ...]) -> LiftedKernel:
        """The :class:`LiftedKernel` of ``handle`` (one per kernel per lift)."""
        return LiftedKernel(handle, name, sizes)


def _function(info: Any, state: LowerState) -> Any:
    """The ``CUfunction`` to launch ``info``'s kernel in this run's context (looked up once per run)."""
    if not info.is_library_kernel:
        return info.handle
    fn = state.functions.get(id(info))
    if fn is None:
        fn = kernel_get_function(info.handle)
        state.functions[id(info)] = fn
    return fn


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = ((KernelNode, KernelOps()),)


def _info_of(node: Any, kernel: Any) -> Any:
    """``kernel_info(kernel)``, its refusal naming ``node``."""
    try:
        return kernel_info(kernel)
    except OperandError as exc:
        raise for_node(exc, node) from None


class PreparedKernel:
    """The parameters of one kernel node, kept so that a rebind rewrites only the bytes that change.

    Kernel nodes with the same kernel, dimensions and argument objects share
    one (see ``Executable._prepared``).

    Attributes
    ----------
    params : CUDA_KERNEL_NODE_PARAMS
        Prepared once; ``kernelParams`` points into this object's own buffer.
    params_address : int
        The address of ``params``, for the compiled loop.
    buf_address, buf_size : int
        The argument buffer that ``params.kernelParams`` points into.
    slots : dict
        ``param name -> [(offset, struct code), ...]`` for arguments that are parameters.
    """

    __slots__ = ("params", "params_address", "_buf", "buf_address", "buf_size", "_ptrs", "slots", "shifted")

    def __init__(self, node: KernelNode, bindings: dict[str, Any]) -> None:
        drv = require_driver()
        info = _info_of(node, node.kernel)
        with PACKING_LOCK:
            info.pack(node.args, node, bindings)
            data = ctypes.string_at(info._scratch_addr, max(info.total, 1))
        self._buf = ctypes.create_string_buffer(data, max(info.total, 1))
        base = self.buf_address = ctypes.addressof(self._buf)
        self.buf_size = len(self._buf)
        self._ptrs = (ctypes.c_void_p * max(len(info.offsets), 1))(*[base + o for o in info.offsets])
        p = drv.CUDA_KERNEL_NODE_PARAMS()
        set_function(p, info)
        if node.attrs is not None and node.attrs.device is not None:
            p.ctx = primary_context(node.attrs.device, node)
        p.gridDimX, p.gridDimY, p.gridDimZ = node.grid
        p.blockDimX, p.blockDimY, p.blockDimZ = node.block
        p.sharedMemBytes = node.shared_mem
        p.kernelParams = ctypes.addressof(self._ptrs) if info.offsets else 0
        self.params = p
        self.params_address = int(p.getPtr())
        self.slots: dict[str, list[tuple[int, str]]] = {}
        #: ``param name -> [(offset, addend), ...]``: pointers into a parameter's memory (``ParamBytes``)
        self.shifted: dict[str, list[tuple[int, int]]] = {}
        for a, off in zip(node.args, info.offsets):
            if type(a) is Param:
                code = "<Q" if a.dtype is None else "<" + _STRUCT_CODES[(a.dtype.kind, a.dtype.itemsize)]
                self.slots.setdefault(a.name, []).append((off, code))
            elif type(a) is ParamBytes:
                for pos, p, add in a.patches:
                    if add:
                        self.shifted.setdefault(p.name, []).append((off + pos, add))
                    else:
                        self.slots.setdefault(p.name, []).append((off + pos, "<Q"))


#: A group of a plan run in Python: ``(prepared structure, driver nodes, nodes,
#: [(offset, struct code), ...] of the parameter in its buffer)``.
Group = tuple[PreparedKernel, list[Any], list[Node], list[tuple[int, str]]]
#: A group of a plan run by ``NATIVE.rebind``: ``(argument buffer address, its size,
#: offsets of the parameter in it, parameter structure address, driver node handles)``.
CompiledGroup = tuple[int, int, tuple[int, ...], int, list[int]]


class KernelWriter:
    """The writer of the kernel nodes of one executable.

    Made with its executable (and again when it is re-instantiated); every
    method is called with the executable's lock held. The reusable
    ``CUDA_KERNEL_NODE_PARAMS`` of :meth:`write` (and the compiled loop
    sharing it) is made on first use, so a bind never pays for it. Hold
    ``PACKING_LOCK`` around a batch of :meth:`run` and :meth:`write`.

    Parameters
    ----------
    exec_handle : CUgraphExec
        The executable every update of this writer sets.
    """

    __slots__ = ("_exec", "_addr", "_p", "_loop", "_set", "_kernel", "_info", "_grid", "_block", "_smem")

    def __init__(self, exec_handle: Any) -> None:
        self._exec = exec_handle
        self._addr = 0  # the exec handle as an int, for the compiled calls (made on first use)
        self._p: Any = None
        self._loop: Any = None
        self._set: Any = None
        self._kernel: Any = None
        self._info: Any = None
        self._grid: Any = None
        self._block: Any = None
        self._smem = -1

    # ------------------------------------------------ prepared structures
    def write_prepared(self, prepared: PreparedKernel, node: Node, driver_node: Any) -> None:
        """Give ``driver_node`` the parameters held in ``prepared`` (``node`` is named in errors).

        Raises
        ------
        DriverError
            The driver refused the update; the message names the node.
        """
        (err,) = _SET_KERNEL(self._exec, driver_node, prepared.params)
        if err:
            raise_error(err, "cuGraphExecKernelNodeSetParams", node)

    def write_plan(self, plan: BindPlan, value: Any) -> None:
        """Give the kernel users of ``plan`` a parameter's new ``value`` (an address, or a scalar of the
        parameter's type): its bytes are written once per group of nodes sharing a
        :class:`PreparedKernel`, then every node of the group is set.

        A plan made for the compiled module (:attr:`BindPlan.groups
        <cudagraph.executable.bind_plan.BindPlan.groups>`) is run by ``NATIVE.rebind``
        in one C call; otherwise (:attr:`BindPlan.bindings_groups
        <cudagraph.executable.bind_plan.BindPlan.bindings_groups>`) by the Python
        loop here, its twin. The users that are not kernel nodes are the caller's.

        Raises
        ------
        DriverError
            The driver refused a node's update (the message names the node); the
            nodes before it hold the new value.
        """
        if plan.groups:
            data = value if plan.code is None else struct.pack(plan.code, value)
            addr = self._addr
            if not addr:
                addr = self._addr = int(self._exec)
            failed = _REBIND(_SET_KERNEL_ADDR, addr, plan.groups, data)
            if failed is not None:
                plan.refused(*failed)
            return
        exec_handle = self._exec
        for prepared, dnodes, nodes, slots in plan.bindings_groups:
            buf = prepared._buf
            for off, code in slots:
                struct.pack_into(code, buf, off, value)
            params = prepared.params
            for i, dnode in enumerate(dnodes):
                (err,) = _SET_KERNEL(exec_handle, dnode, params)
                if err:
                    raise_error(err, "cuGraphExecKernelNodeSetParams", nodes[i])

    # ------------------------------------------ packed from the definition
    def _params(self) -> Any:
        """The reusable parameters of :meth:`write` and the compiled loop sharing them (made on first use)."""
        p = self._p
        if p is None:
            p = self._p = require_driver().CUDA_KERNEL_NODE_PARAMS()
            exec_handle = self._exec
            self._loop = kernel_loop(int(exec_handle), int(p.getPtr()), set_mode=True)
            # (the entry point's address, the executable, the parameters) for one call from write()
            self._set = (c_address("cuGraphExecKernelNodeSetParams_v2"), int(exec_handle), int(p.getPtr()))
        return p

    def run(
        self,
        nodes: list[Node],
        start: int,
        driver_nodes: Sequence[Any],
        teach: Callable[[Any], None] | None = None,
        bindings: dict[str, Any] | None = None,
    ) -> int:
        """Set ``nodes[start:]`` in C while it can; return the index of the first node not set.

        The compiled ``KernelLoop`` (set mode), twin of :meth:`write` on each
        kernel node and of ``cudagraph.ops.node_update.set_node_params`` on
        each fill, 1-D copy and empty node whose operands are plain ints (or
        parameters that ``bindings`` binds to ints), once ``teach(loop)`` told
        the loop of them (called while it does not know them:
        :func:`~cudagraph.ops.compiled_kinds.add_simple_kinds`).
        ``driver_nodes[node.index]`` is the driver node of each node.
        Without the compiled module this sets nothing and returns ``start``.

        Raises
        ------
        DriverError
            The driver refused an update; the message names the node.
        """
        self._params()
        loop = self._loop
        if loop is None:
            return start
        if teach is not None and not loop.knows_simple:
            teach(loop)
        raw = getattr(driver_nodes, "raw", None)  # DriverNodes keeps the handles as ints
        if raw is None:
            raw = [int(d) for d in driver_nodes]
        loop.args = None  # other code (a PreparedKernel, a launch) may have packed the kernels' buffers since
        loop.bindings = compiled_bindings(bindings)  # (this update's: every run sets its own)
        while True:
            i: int = loop.run(nodes, start, raw)
            if loop.rc:
                call = "cuGraphExecKernelNodeSetParams" if type(nodes[i]) is KernelNode else "cuGraphExecNodeSetParams"
                raise_error(require_driver().CUresult(loop.rc), call, nodes[i])
            if i == len(nodes):
                return i
            node = nodes[i]
            if type(node) is not KernelNode or node.kernel is loop.kernel:  # type: ignore[attr-defined]
                return i
            self._use(node.kernel, _info_of(node, node.kernel))  # type: ignore[attr-defined]
            start = i  # the loop may take it now that it knows its kernel

    def _use(self, kernel: Any, info: Any) -> None:
        """Point the parameters at ``kernel`` (the compiled loop does it, and keeps every kernel it was shown)."""
        if self._loop is not None:
            use_kernel(self._loop, kernel, info)
            return
        if info is not self._info:
            set_function(self._p, info)
            self._p.kernelParams = info.params_address
            self._info = info
        self._kernel = kernel

    def write(self, node: KernelNode, driver_node: Any, bindings: dict[str, Any]) -> bool:
        """Give ``driver_node`` the parameters of ``node``; ``False`` when the node needs the general path.

        The arguments are packed into the kernel's shared buffer and the fields
        that differ from the previous node are rewritten, as explicit
        construction does; the driver copies everything during the call. Nodes with
        a device, or arguments that get values only at lowering (graph allocations,
        conditions), are refused (``False``).

        Raises
        ------
        DriverError
            The driver refused the update; the message names the node.
        """
        if node.attrs is not None and node.attrs.device is not None:
            return False  # its context: the general path (PreparedKernel) sets it
        p = self._params()
        loop = self._loop
        kernel = node.kernel
        current = self._kernel if loop is None else loop.kernel
        info = self._info if loop is None and kernel is current else _info_of(node, kernel)
        with PACKING_LOCK:
            try:
                info.pack(node.args, node, bindings)
            except OperandError:
                return False  # late operands: the general path knows them
            if kernel is not current:
                self._use(kernel, info)
            if loop is not None:
                loop.args = node.args
                if not loop.write_dims(node):
                    raise OperandError(f"{node.label}: grid, block and shared_mem must be ints")
                fn, exec_addr, params = self._set
                rc = NATIVE.set_kernel_node(fn, exec_addr, int(driver_node), params)
                err: Any = require_driver().CUresult(rc) if rc else 0
            else:
                if node.grid != self._grid:
                    p.gridDimX, p.gridDimY, p.gridDimZ = self._grid = node.grid
                if node.block != self._block:
                    p.blockDimX, p.blockDimY, p.blockDimZ = self._block = node.block
                if node.shared_mem != self._smem:
                    p.sharedMemBytes = self._smem = node.shared_mem
                (err,) = _SET_KERNEL(self._exec, driver_node, p)
        if err:
            raise_error(err, "cuGraphExecKernelNodeSetParams", node)
        return True


def native_rebind() -> bool:
    """Whether bind plans are made for the compiled ``rebind`` (see :meth:`KernelWriter.write_plan`)."""
    return _SET_KERNEL_ADDR is not None


# Resolved once: every kernel-node update of the Python paths costs one call through it
# (part of each node's rebind of prepared structures; bench/updates.py).
try:
    _SET_KERNEL = graph_exec_kernel_node_set_params_entry()
    _SET_KERNEL_ADDR = c_address("cuGraphExecKernelNodeSetParams_v2")
except DriverError:  # pragma: no cover - no cuda-bindings: instantiate() raises first
    _SET_KERNEL = None
    _SET_KERNEL_ADDR = None
_REBIND: Any = None if NATIVE is None else NATIVE.rebind
