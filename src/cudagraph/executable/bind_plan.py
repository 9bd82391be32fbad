"""Rebinding one parameter of an executable: the prepared plan of the nodes that use it.

A plan is made the first time a parameter is rebound and kept until the
executable's nodes change. Kernel nodes that share a prepared parameter
structure (:class:`~cudagraph.ops.node_update.KernelUpdater`) form one
group: the parameter's bytes are written into the group's argument buffer
once, then each node of the group costs one ``cuGraphExecKernelNodeSetParams``
call. With the compiled module every group is handled by one C call
(``rebind``); without it, through ``cuda.bindings``. Users that are not
kernel nodes (copies, fills) get their parameters in full.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from ..definition.nodes import Node
from ..driver.c_entry import NATIVE, c_address
from ..driver.calls import raise_error, require_driver
from ..errors import DriverError
from ..ops.node_update import KernelUpdater, set_node_params

if TYPE_CHECKING:
    from .executable import Executable

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
        driver node handles)``.
    group_nodes : list of list of Node
        The nodes of each group of :attr:`groups` (named in errors).
    bindings_groups : list of tuple
        Per kernel group, without the compiled module: ``(updater, driver
        nodes, nodes, [(offset, struct code), ...])``.
    others : list of tuple
        ``(node, driver node)`` for the users that are not kernel nodes.
    count : int
        Driver calls one rebind makes.
    pointer_groups : list of tuple or None
        :attr:`groups`, set by :meth:`finish` when the plan is a pointer's and
        only sets kernel nodes through the compiled loop: then the compiled
        ``Executable.bind`` (``_native_bind.c``) runs it itself, with :attr:`set_address`.
    set_address : int or None
        The address of ``cuGraphExecKernelNodeSetParams_v2`` the plan was made for.
    """

    __slots__ = (
        "code",
        "native",
        "groups",
        "group_nodes",
        "bindings_groups",
        "others",
        "count",
        "pointer_groups",
        "set_address",
        "_open",
    )

    def __init__(self, code: str | None, native: bool) -> None:
        self.code = code
        self.native = native
        self.groups: list[tuple[int, int, tuple[int, ...], int, list[int]]] = []
        self.group_nodes: list[list[Node]] = []
        self.bindings_groups: list[tuple[KernelUpdater, list[Any], list[Node], Any]] = []
        self.others: list[tuple[Node, Any]] = []
        self.count = 0
        self.pointer_groups: list[tuple[int, int, tuple[int, ...], int, list[int]]] | None = None
        self.set_address: int | None = None
        self._open: dict[int, int] = {}  # id(updater) -> position of its group, while adding

    def add_kernel(self, up: KernelUpdater, name: str, node: Node, dnode: Any) -> None:
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

    def add_other(self, node: Node, dnode: Any) -> None:
        """Add a user that is not a kernel node."""
        self.others.append((node, dnode))
        self.count += 1

    def finish(self) -> BindPlan:
        """Mark the plan complete (no more users are added); return it."""
        self._open.clear()
        self.set_address = _SET_KERNEL_ADDR
        if self.native and self.code is None and self.groups and not self.others:
            self.pointer_groups = self.groups
        return self

    def apply(self, exe: Executable, value: Any) -> int:
        """Give every user the parameter's new ``value`` (an address, or a scalar of the parameter's
        type); return the number of driver calls made.

        Raises
        ------
        DriverError
            The driver refused a node's update (the message names the node); the
            nodes before it hold the new value.
        """
        if self.groups:
            data = value if self.code is None else struct.pack(self.code, value)
            failed = _REBIND(_SET_KERNEL_ADDR, exe._exec_addr, self.groups, data)
            if failed is not None:
                g, i, rc = failed
                raise_error(require_driver().CUresult(rc), "cuGraphExecKernelNodeSetParams", self.group_nodes[g][i])
            if not self.others:
                return self.count
        exec_handle = exe._exec
        for up, dnodes, nodes, slots in self.bindings_groups:
            buf = up._buf
            for off, code in slots:
                struct.pack_into(code, buf, off, value)
            params = up.params
            for i, dnode in enumerate(dnodes):
                (err,) = _SET_KERNEL(exec_handle, dnode, params)
                if err:
                    raise_error(err, "cuGraphExecKernelNodeSetParams", nodes[i])
        if self.others:
            ctx = exe._context()
            for node, dnode in self.others:
                set_node_params(exec_handle, node, dnode, ctx, exe._bindings, exe._sink, exe._lowered.host_keys)
        return self.count


def native_rebind() -> bool:
    """Whether rebinding goes through the compiled loop."""
    return _SET_KERNEL_ADDR is not None


try:
    _SET_KERNEL = require_driver().cuGraphExecKernelNodeSetParams
    _SET_KERNEL_ADDR = c_address("cuGraphExecKernelNodeSetParams_v2")
except DriverError:  # pragma: no cover - no cuda-bindings: instantiate() raises first
    _SET_KERNEL = None
    _SET_KERNEL_ADDR = None
_REBIND: Any = None if NATIVE is None else NATIVE.rebind
