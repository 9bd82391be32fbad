"""Setting a node's parameters in an instantiated graph (``cuGraphExec*SetParams``)."""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..definition.nodes import ChildGraphNode, KernelNode, Node
from ..definition.param import Param
from ..driver.c_entry import NATIVE, c_address, kernel_loop, use_kernel
from ..driver.calls import raise_error, require_driver
from ..driver.kernel_args import _STRUCT_CODES, PACKING_LOCK, kernel_info
from ..errors import OperandError
from .node_params import node_params

__all__ = ["KernelParamsWriter", "KernelUpdater", "set_node_params"]


def set_function(p: Any, info: Any) -> None:
    """Point kernel parameters ``p`` at ``info``'s kernel (``kern`` or ``func``; the other cleared)."""
    drv = require_driver()
    if info.is_library_kernel:
        p.func = drv.CUfunction(0)
        p.kern = info.handle
    else:
        p.kern = drv.CUkernel(0)
        p.func = info.handle


class KernelUpdater:
    """The parameters of one kernel node, kept so that a rebind rewrites only the bytes that change.

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
        """Write a parameter's new value into the argument buffer."""
        for off, code in self.slots.get(name, ()):
            if isinstance(value, np.generic):
                value = value.item()
            struct.pack_into(code, self._buf, off, value)


class KernelParamsWriter:
    """One reusable ``CUDA_KERNEL_NODE_PARAMS`` for a batch of kernel-node updates.

    Each node's arguments are packed into its kernel's shared buffer and the
    fields that differ from the previous node are rewritten, as explicit
    construction does; the driver copies everything during the call. With the
    compiled module, :meth:`run` sets runs of kernel nodes in C
    (``cuGraphExecKernelNodeSetParams_v2``, arguments packed there too) and
    :meth:`set` takes the nodes it hands back; without it, every node goes
    through :meth:`set` and ``cuda.bindings``. Nodes whose arguments get
    values only at lowering (graph allocations, conditions) go through
    :func:`set_node_params` instead. Hold ``PACKING_LOCK`` around a batch.

    Parameters
    ----------
    exec_handle : CUgraphExec
        The executable every update of this writer sets.
    """

    __slots__ = ("_p", "_exec", "_loop", "_set", "_kernel", "_info", "_grid", "_block", "_smem")

    def __init__(self, exec_handle: Any) -> None:
        self._p = require_driver().CUDA_KERNEL_NODE_PARAMS()
        self._exec = exec_handle
        self._loop = kernel_loop(int(exec_handle), int(self._p.getPtr()), set_mode=True)
        # (the entry point's address, the executable, the parameters) for one call from set()
        self._set = (c_address("cuGraphExecKernelNodeSetParams_v2"), int(exec_handle), int(self._p.getPtr()))
        self._kernel: Any = None
        self._info: Any = None
        self._grid: Any = None
        self._block: Any = None
        self._smem = -1

    def run(self, nodes: list[Node], start: int, driver_nodes: Sequence[Any]) -> int:
        """Set ``nodes[start:]`` in C while it can; return the index of the first node not set.

        ``driver_nodes[node.index]`` is the driver node of each node. Without the
        compiled module this sets nothing and returns ``start``.

        Raises
        ------
        DriverError
            The driver refused an update; the message names the node.
        """
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

    def set(self, node: KernelNode, driver_node: Any, bindings: dict[str, Any]) -> bool:
        """Give ``driver_node`` the parameters of ``node``; ``False`` when the node needs the general path.

        Raises
        ------
        DriverError
            The driver refused the update; the message names the node.
        """
        p = self._p
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
                (err,) = require_driver().cuGraphExecKernelNodeSetParams(self._exec, driver_node, p)
        if err:
            raise_error(err, "cuGraphExecKernelNodeSetParams", node)
        return True


def set_node_params(
    exec_handle: Any,
    node: Node,
    driver_node: Any,
    ctx: Any,
    bindings: dict[str, Any],
    sink: list[Any],
    host_keys: list[int],
    updater: KernelUpdater | None = None,
) -> None:
    """Give ``driver_node`` of ``exec_handle`` the parameters of ``node`` (under ``bindings``).

    Raises
    ------
    DriverError
        The driver refused the update; the message names the node.
    """
    drv = require_driver()
    if type(node) is KernelNode:
        assert isinstance(node, KernelNode)
        up = updater if updater is not None else KernelUpdater(node, bindings)
        (err,) = drv.cuGraphExecKernelNodeSetParams(exec_handle, driver_node, up.params)
        if err:
            raise_error(err, "cuGraphExecKernelNodeSetParams", node)
        return
    if type(node) is ChildGraphNode:
        assert isinstance(node, ChildGraphNode)
        from ..driver.calls import check
        from ..materialize.explicit import Lowering

        body = check(drv.cuGraphCreate(0), "cuGraphCreate", node)
        try:
            lowering = Lowering(ctx, bindings, sink)
            with PACKING_LOCK:
                lowering.lower_graph(node.body, body, track=False)
            host_keys.extend(lowering.host_keys)
            (err,) = drv.cuGraphExecChildGraphNodeSetParams(exec_handle, driver_node, body)
            if err:
                raise_error(err, "cuGraphExecChildGraphNodeSetParams", node)
        finally:
            drv.cuGraphDestroy(body)
        return
    p = node_params(node, ctx, bindings, sink, host_keys)
    (err,) = drv.cuGraphExecNodeSetParams(exec_handle, driver_node, p)
    if err:
        raise_error(err, "cuGraphExecNodeSetParams", node)
