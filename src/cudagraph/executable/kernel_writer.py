"""The one writer of kernel nodes in an executable (``cuGraphExecKernelNodeSetParams``).

Every kernel-node update of an :class:`~cudagraph.Executable` goes through
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
paths; each makes the same driver calls as its Python twin here, which the CPU
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
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..definition.nodes import KernelNode, Node
from ..definition.param import Param
from ..driver.c_entry import NATIVE, c_address, kernel_loop, use_kernel
from ..driver.calls import raise_error, require_driver
from ..driver.kernel_args import _STRUCT_CODES, PACKING_LOCK, kernel_info
from ..errors import DriverError, OperandError
from ..ops.node_update import set_function

if TYPE_CHECKING:
    from .bind_plan import BindPlan

__all__ = ["KernelWriter", "PreparedKernel", "native_rebind"]


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

    __slots__ = ("params", "params_address", "_buf", "buf_address", "buf_size", "_ptrs", "slots")

    def __init__(self, node: KernelNode, bindings: dict[str, Any]) -> None:
        drv = require_driver()
        info = kernel_info(node.kernel)
        with PACKING_LOCK:
            info.pack(node.args, node, bindings)
            data = ctypes.string_at(info._scratch_addr, max(info.total, 1))
        self._buf = ctypes.create_string_buffer(data, max(info.total, 1))
        base = self.buf_address = ctypes.addressof(self._buf)
        self.buf_size = len(self._buf)
        self._ptrs = (ctypes.c_void_p * max(len(info.offsets), 1))(*[base + o for o in info.offsets])
        p = drv.CUDA_KERNEL_NODE_PARAMS()
        set_function(p, info)
        p.gridDimX, p.gridDimY, p.gridDimZ = node.grid
        p.blockDimX, p.blockDimY, p.blockDimZ = node.block
        p.sharedMemBytes = node.shared_mem
        p.kernelParams = ctypes.addressof(self._ptrs) if info.offsets else 0
        self.params = p
        self.params_address = int(p.getPtr())
        self.slots: dict[str, list[tuple[int, str]]] = {}
        for a, off in zip(node.args, info.offsets):
            if type(a) is Param:
                code = "<Q" if a.dtype is None else "<" + _STRUCT_CODES[(a.dtype.kind, a.dtype.itemsize)]
                self.slots.setdefault(a.name, []).append((off, code))

    def rebind(self, name: str, value: Any) -> None:
        """Write a parameter's new value into the argument buffer (no driver call)."""
        for off, code in self.slots.get(name, ()):
            if isinstance(value, np.generic):
                value = value.item()
            struct.pack_into(code, self._buf, off, value)


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
                g, i, rc = failed
                raise_error(require_driver().CUresult(rc), "cuGraphExecKernelNodeSetParams", plan.group_nodes[g][i])
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

    def run(self, nodes: list[Node], start: int, driver_nodes: Sequence[Any]) -> int:
        """Set ``nodes[start:]`` in C while it can; return the index of the first node not set.

        The compiled ``KernelLoop`` (set mode), twin of :meth:`write` on each
        node. ``driver_nodes[node.index]`` is the driver node of each node.
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
        raw = getattr(driver_nodes, "raw", None)  # DriverNodes keeps the handles as ints
        if raw is None:
            raw = [int(d) for d in driver_nodes]
        while True:
            i: int = loop.run(nodes, start, raw)
            if loop.rc:
                raise_error(require_driver().CUresult(loop.rc), "cuGraphExecKernelNodeSetParams", nodes[i])
            if i == len(nodes):
                return i
            node = nodes[i]
            if type(node) is not KernelNode or node.kernel is self._kernel:  # type: ignore[attr-defined]
                return i
            self._use(node.kernel, kernel_info(node.kernel))  # type: ignore[attr-defined]
            start = i  # the loop may take it with its kernel in place

    def _use(self, kernel: Any, info: Any) -> None:
        if info is not self._info:
            set_function(self._p, info)
            self._p.kernelParams = info.params_address
            self._info = info
        self._kernel = kernel
        if self._loop is not None:
            use_kernel(self._loop, kernel, info)

    def write(self, node: KernelNode, driver_node: Any, bindings: dict[str, Any]) -> bool:
        """Give ``driver_node`` the parameters of ``node``; ``False`` when the node needs the general path.

        The arguments are packed into the kernel's shared buffer and the fields
        that differ from the previous node are rewritten, as explicit
        construction does; the driver copies everything during the call. Nodes
        whose arguments get values only at lowering (graph allocations,
        conditions) are refused (``False``).

        Raises
        ------
        DriverError
            The driver refused the update; the message names the node.
        """
        p = self._params()
        info = self._info if node.kernel is self._kernel else kernel_info(node.kernel)
        loop = self._loop
        with PACKING_LOCK:
            try:
                info.pack(node.args, node, bindings)
            except OperandError:
                return False  # late operands: the general path knows them
            if node.kernel is not self._kernel:
                self._use(node.kernel, info)
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
# (a rebind of prepared structures is about 1 µs per node, that call included).
try:
    _SET_KERNEL = require_driver().cuGraphExecKernelNodeSetParams
    _SET_KERNEL_ADDR = c_address("cuGraphExecKernelNodeSetParams_v2")
except DriverError:  # pragma: no cover - no cuda-bindings: instantiate() raises first
    _SET_KERNEL = None
    _SET_KERNEL_ADDR = None
_REBIND: Any = None if NATIVE is None else NATIVE.rebind
