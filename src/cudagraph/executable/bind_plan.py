"""Rebinding one parameter of an executable: the prepared plan of the kernel nodes that use it.

A plan is made the first time a parameter is rebound and kept until the
executable's nodes change. Kernel nodes that share a prepared parameter
structure (:class:`~cudagraph.ops.kinds.kernel.PreparedKernel`) form one
group: the parameter's bytes are written into the group's argument buffer
once, then each node of the group costs one ``cuGraphExecKernelNodeSetParams``
call. A plan is data: the executable's kernel writer runs it
(:meth:`~cudagraph.ops.kinds.kernel.KernelWriter.write_plan`: with the
compiled module every group in one C call, ``rebind``; without it, through
``cuda.bindings``).

This plan is for a parameter held whole by kernel arguments only. A bind of
several parameters, a pointer at an offset into a parameter's memory, or a copy
or fill using the parameter goes through a
:class:`~cudagraph.executable.patch_plan.PatchPlan` instead.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ..definition.nodes import Node
from ..driver.calls import raise_error, require_driver
from ..ops.kinds import kernel as kernel_ops
from ..ops.kinds.kernel import CompiledGroup, Group, PreparedKernel

__all__ = ["BindPlan"]


class BindPlan:
    """The nodes of one executable that use one parameter, ready to be rebound.

    Parameters
    ----------
    code : str or None
        The parameter's ``struct`` code (``"<f"``) for a scalar, ``None`` for a pointer.
    native : bool
        Build the groups for the compiled loop.

    Attributes
    ----------
    groups : list of tuple
        Per kernel group, for the compiled loop: ``(argument buffer address,
        its size, offsets of the parameter in it, parameter structure address,
        driver node handles)`` (see :meth:`KernelWriter.write_plan
        <cudagraph.ops.kinds.kernel.KernelWriter.write_plan>`); the compiled
        ``Executable._bind_many`` (``_native_bind_many.c``) runs them for a pointer
        whose new value it has decided (a checked one included), as ``write_plan`` would.
    group_nodes : list of list of Node
        The nodes of each group of :attr:`groups` (named in errors).
    bindings_groups : list of tuple
        Per kernel group, without the compiled module: ``(prepared structure,
        driver nodes, nodes, [(offset, struct code), ...])``.
    count : int
        Driver calls one rebind makes.
    pointer_groups : list of tuple or None
        :attr:`groups`, set by :meth:`finish` when the plan is an unchecked pointer's
        (see :attr:`memory`) made for the compiled loop: then the compiled
        ``Executable.bind`` (``_native_bind.c``) runs it itself, with :attr:`set_address`,
        as :meth:`KernelWriter.write_plan <cudagraph.ops.kinds.kernel.KernelWriter.write_plan>`
        does through the compiled ``rebind``.
    set_address : int or None
        The address of ``cuGraphExecKernelNodeSetParams_v2`` the plan was made for.
    memory : Memory or None
        The memory the parameter was made from by ``Graph.parametrize``: every new
        value is checked against it (then the compiled ``Executable.bind`` leaves the
        plan to the Python method).
    """

    __slots__ = (
        "code",
        "native",
        "groups",
        "group_nodes",
        "bindings_groups",
        "count",
        "pointer_groups",
        "set_address",
        "memory",
        "_open",
    )

    def __init__(self, code: str | None, native: bool) -> None:
        self.code = code
        self.native = native
        self.groups: list[CompiledGroup] = []
        self.group_nodes: list[list[Node]] = []
        self.bindings_groups: list[Group] = []
        self.count = 0
        self.pointer_groups: list[CompiledGroup] | None = None
        self.set_address: int | None = None
        self.memory: Any = None
        self._open: dict[int, int] = {}  # id(updater) -> position of its group, while adding

    def add_kernel(self, up: PreparedKernel, name: str, node: Node, dnode: Any) -> None:
        """Add a kernel node whose parameters are in ``up`` (nodes sharing ``up`` form one group)."""
        at = self._open.get(id(up))
        if at is None:
            at = self._open[id(up)] = len(self.group_nodes)
            slots = up.slots.get(name, [])
            if self.native:
                offsets = tuple(off for off, _code in slots)
                self.groups.append((up.buf_address, up.buf_size, offsets, up.params_address, []))
            else:
                self.bindings_groups.append((up, [], [], slots))
            self.group_nodes.append([])
        if self.native:
            self.groups[at][4].append(int(dnode))
        else:
            self.bindings_groups[at][1].append(dnode)
            self.bindings_groups[at][2].append(node)
        self.group_nodes[at].append(node)
        self.count += 1

    def refused(self, g: int, i: int, rc: int) -> NoReturn:
        """Raise the driver's refusal ``rc`` of the update of node ``i`` of group ``g`` (of :attr:`groups`).

        Raises
        ------
        DriverError
            Naming the driver call and the node.
        """
        raise_error(require_driver().CUresult(rc), "cuGraphExecKernelNodeSetParams", self.group_nodes[g][i])

    def finish(self) -> BindPlan:
        """Mark the plan complete (no more users are added); return it."""
        self._open.clear()
        self.set_address = kernel_ops._SET_KERNEL_ADDR
        if self.native and self.code is None and self.groups and self.memory is None:
            self.pointer_groups = self.groups
        return self
