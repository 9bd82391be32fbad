"""Rebinding through precomputed writes: the :class:`PatchPlan` of several parameters, pointers at offsets, copies.

A :class:`~cudagraph.executable.bind_plan.BindPlan` rebinds one parameter held
whole by kernel arguments. Everything else a bind can change is a
``PatchPlan``, made once per set of names rebound together and kept until the
executable's nodes change:

- several parameters at once (``exe.launch(stream, x=..., out=...)``);
- a pointer at a byte offset into a parameter's memory (``ParamBytes`` of
  :meth:`Graph.parametrize <cudagraph.Graph.parametrize>`: the word is the
  address plus an addend);
- copy and fill nodes (their ``CUgraphNodeParams`` prepared once, the address
  words patched in place: :class:`PreparedNode`).

Each structure (a kernel's argument buffer shared by the nodes of one
:class:`~cudagraph.ops.kinds.kernel.PreparedKernel`, or a node's parameters) is
one entry: its writes ``(offset, value index, addend)`` are applied, then each of
its driver nodes gets one ``cuGraphExecKernelNodeSetParams`` (kernels) or
``cuGraphExecNodeSetParams`` (copies, fills). The compiled ``patch`` runs every
entry in one C call; :func:`run_patches` is its Python twin, making the same
driver calls through ``cuda.bindings``. Users that cannot be patched (a copy
from pageable host memory, a node of another kind) are set from fresh parameters
by the executable.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Container
from typing import Any, NoReturn

from ..definition.nodes import Node
from ..definition.param import Param
from ..definition.param_offset import ParamAt
from ..driver.api import graph_exec_node_set_params_entry
from ..driver.c_entry import NATIVE, c_address
from ..driver.calls import raise_error, require_driver
from ..errors import DriverError
from ..ops.kinds import kernel as kernel_ops
from ..ops.kinds.kernel import PreparedKernel
from ..ops.lower_state import LowerState
from ..ops.node_params import node_params
from ..ops.registry import ops_for

__all__ = ["PatchPlan", "PreparedNode", "patch_native", "prepare_node", "run_patches"]

#: ``sizeof(CUgraphNodeParams)`` (``_native.h`` asserts the same).
NODE_PARAMS_SIZE = 256
_MASK = (1 << 64) - 1
_U64 = struct.Struct("<Q")
_WRITE = struct.Struct("<qqq")
_SENTINEL = 0x5EA7_C0DE_D00D_F00D  # written once to find where a field lives in the parameters

try:
    _SET_NODE_ADDR = c_address("cuGraphExecNodeSetParams")
except DriverError:  # pragma: no cover - no cuda-bindings: instantiate() raises first
    _SET_NODE_ADDR = None


def patch_native(nodes: bool) -> bool:
    """Whether plans are made for the compiled ``patch`` (``nodes``: with copy or fill entries)."""
    return NATIVE is not None and kernel_ops._SET_KERNEL_ADDR is not None and (not nodes or _SET_NODE_ADDR is not None)


class PreparedNode:
    """The driver parameters of one copy or fill node of an executable, whose address words a rebind patches.

    Made once per node (see :func:`prepare_node`) and shared by every plan
    that rebinds one of its parameters, so that its words always hold the
    values bound.

    Attributes
    ----------
    params : CUgraphNodeParams
        Made by the kind's :meth:`~cudagraph.ops.kinds.base.KindOps.params`.
    address : int
        The address of :attr:`params`.
    fields : dict
        ``param name -> [(byte offset in params, addend), ...]``.
    """

    __slots__ = ("params", "address", "fields")

    def __init__(self, params: Any, fields: dict[str, list[tuple[int, int]]]) -> None:
        self.params = params
        self.address = int(params.getPtr())
        self.fields = fields


def _offset_of(params: Any, path: str) -> int | None:
    """The byte offset in ``params`` of the 64-bit word at attribute ``path`` (``None``: not found once)."""
    *parents, last = path.split(".")
    obj = params
    for part in parents:
        obj = getattr(obj, part)
    base = int(params.getPtr())
    saved = ctypes.string_at(base, NODE_PARAMS_SIZE)
    try:
        setattr(obj, last, _SENTINEL)
        raw = ctypes.string_at(base, NODE_PARAMS_SIZE)
    finally:
        ctypes.memmove(base, saved, NODE_PARAMS_SIZE)
    word = _U64.pack(_SENTINEL)
    at = raw.find(word)
    if at < 0 or at % 8 or raw.find(word, at + 1) >= 0:
        return None
    return at


def prepare_node(
    node: Node,
    ctx: Any,
    bindings: dict[str, Any],
    sink: list[Any],
    host_keys: list[int],
    state: LowerState | None,
    checked: Container[str],
) -> PreparedNode | None:
    """The :class:`PreparedNode` of ``node`` (a kind with single-node parameters), or ``None``.

    ``None`` when a pointer field using a parameter has no fixed address word
    (see :meth:`KindOps.address_paths <cudagraph.ops.kinds.base.KindOps.address_paths>`),
    or when the word's memory type is fixed and the parameter is not in ``checked``
    (the names whose every new value is checked to be memory CUDA knows).
    """
    uses: list[tuple[str, str, int]] = []
    for field in node.pointer_fields:
        v = getattr(node, field)
        if type(v) is Param:
            uses.append((field, v.name, 0))
        elif type(v) is ParamAt:
            uses.append((field, v.param.name, v.offset))
    if not uses:
        return None
    ops = ops_for(node)
    p = node_params(node, ctx, bindings, sink, host_keys, state)
    paths = ops.address_paths(node, p)
    fields: dict[str, list[tuple[int, int]]] = {}
    for field, name, add in uses:
        at = paths.get(field)
        if at is None or (at[1] and name not in checked):
            return None
        off = _offset_of(p, at[0])
        if off is None:
            return None
        fields.setdefault(name, []).append((off, add))
    return PreparedNode(p, fields)


#: An entry run in Python: ``(kernel?, PreparedKernel or PreparedNode, [(offset, value index, addend,
#: struct code)], driver nodes)``.
TwinEntry = tuple[bool, Any, list[tuple[int, int, int, str]], list[Any]]


class PatchPlan:
    """The users of a set of parameters, ready to be rebound by precomputed writes (see the module).

    Parameters
    ----------
    names : tuple of str
        The parameters, in the order of the values given to :func:`run_patches` and ``patch``.
    codes : tuple
        Per name, ``None`` for a pointer, else its scalar ``struct`` code (``"<f"``).
    native : bool
        Build the entries for the compiled ``patch``.

    Attributes
    ----------
    entries : list of tuple
        For the compiled ``patch``: ``(set entry point address, structure address, its size,
        writes (int64 triples), parameters address, driver node handles)``.
    twin : list of tuple
        The same entries for :func:`run_patches` (see ``TwinEntry``).
    entry_nodes : list of list of Node
        The nodes of each entry (named in errors).
    calls : list of str
        The driver call of each entry (named in errors).
    general : list of tuple
        ``(node, driver node)`` of the users set from fresh parameters by the executable.
    count : int
        Node updates one rebind makes.

    The compiled ``Executable._bind_many`` (``_native_bind_many.c``) runs a plan made for
    ``patch`` with no :attr:`general` users and pointer names only itself (its
    :attr:`entries`, :attr:`codes`, :attr:`general`, :attr:`count` and :attr:`native`).
    """

    __slots__ = ("names", "codes", "native", "entries", "twin", "entry_nodes", "calls", "general", "count", "_open")

    def __init__(self, names: tuple[str, ...], codes: tuple[str | None, ...], native: bool) -> None:
        self.names = names
        self.codes = codes
        self.native = native
        self.entries: list[tuple[int, int, int, bytes, int, list[int]]] = []
        self.twin: list[TwinEntry] = []
        self.entry_nodes: list[list[Node]] = []
        self.calls: list[str] = []
        self.general: list[tuple[Node, Any]] = []
        self.count = 0
        self._open: dict[int, int] = {}  # id(structure) -> its entry, while adding

    def _writes(self, holder: Any, kernel: bool) -> list[tuple[int, int, int, str]]:
        """``(offset, value index, addend, struct code)`` of every word of the names in ``holder``."""
        out: list[tuple[int, int, int, str]] = []
        for i, name in enumerate(self.names):
            if kernel:
                out += [(off, i, 0, code) for off, code in holder.slots.get(name, ())]
                out += [(off, i, add, "<Q") for off, add in holder.shifted.get(name, ())]
            else:
                out += [(off, i, add, "<Q") for off, add in holder.fields.get(name, ())]
        return out

    def _add(self, kernel: bool, holder: Any, node: Node, dnode: Any) -> None:
        at = self._open.get(id(holder))
        if at is None:
            at = self._open[id(holder)] = len(self.entry_nodes)
            writes = self._writes(holder, kernel)
            if kernel:
                fn, size, params, call = kernel_ops._SET_KERNEL_ADDR, holder.buf_size, holder.params_address, "Kernel"
                buf = holder.buf_address
            else:
                fn, size, params, call = _SET_NODE_ADDR, NODE_PARAMS_SIZE, holder.address, ""
                buf = holder.address
            for off, _i, _add, code in writes:  # (made from the layout: the words lie in the structure)
                assert 0 <= off and off + struct.calcsize(code) <= size, (off, code, size)
            if self.native:
                packed = b"".join(_WRITE.pack(off, i, add) for off, i, add, _code in writes)
                self.entries.append((fn or 0, buf, size, packed, params, []))
            self.twin.append((kernel, holder, writes, []))
            self.entry_nodes.append([])
            self.calls.append(f"cuGraphExec{call}NodeSetParams")
        if self.native:
            self.entries[at][5].append(int(dnode))
        self.twin[at][3].append(dnode)
        self.entry_nodes[at].append(node)
        self.count += 1

    def add_kernel(self, prepared: PreparedKernel, node: Node, dnode: Any) -> None:
        """Add a kernel node whose parameters are in ``prepared`` (nodes sharing it form one entry)."""
        self._add(True, prepared, node, dnode)

    def add_node(self, prepared: PreparedNode, node: Node, dnode: Any) -> None:
        """Add a copy or fill node whose parameters are in ``prepared``."""
        self._add(False, prepared, node, dnode)

    def add_general(self, node: Node, dnode: Any) -> None:
        """Add a user that the executable sets from fresh parameters."""
        self.general.append((node, dnode))
        self.count += 1

    def finish(self) -> PatchPlan:
        """Mark the plan complete; return it."""
        self._open.clear()
        return self

    def values(self, values: list[Any]) -> tuple[Any, ...]:
        """The bound ``values`` (one per name) as ``patch`` takes them: ints, or packed scalars."""
        codes = self.codes
        if not any(codes):
            return tuple(values)
        return tuple(v if c is None else struct.pack(c, v) for c, v in zip(codes, values))

    def run(self, exec_handle: Any, exec_addr: int, values: list[Any]) -> None:
        """Write ``values`` (one per name, as bound) into every entry and set its nodes.

        Raises
        ------
        DriverError
            The driver refused a node's update (the message names the node); the
            entries before it hold the new values.
        """
        if not self.native:
            run_patches(exec_handle, self, values)
            return
        failed = NATIVE.patch(exec_addr, self.entries, self.values(values))
        if failed is not None:
            self.refused(*failed)

    def refused(self, e: int, i: int, rc: int) -> NoReturn:
        """Raise the driver's refusal ``rc`` of the update of node ``i`` of entry ``e`` (run by the compiled ``patch``).

        Raises
        ------
        DriverError
            Naming the driver call and the node.
        """
        raise_error(require_driver().CUresult(rc), self.calls[e], self.entry_nodes[e][i])


def run_patches(exec_handle: Any, plan: PatchPlan, values: list[Any]) -> None:
    """Python twin of the compiled ``patch``: the same writes and driver calls, through ``cuda.bindings``.

    Raises
    ------
    DriverError
        The driver refused a node's update; the message names the node.
    """
    packed = plan.values(values)
    for e, (kernel, holder, writes, dnodes) in enumerate(plan.twin):
        base = holder.buf_address if kernel else holder.address
        for off, i, add, _code in writes:
            v = packed[i]
            data = v if type(v) is bytes else _U64.pack((v + add) & _MASK)
            ctypes.memmove(base + off, data, len(data))
        params = holder.params
        setter = kernel_ops._SET_KERNEL if kernel else graph_exec_node_set_params_entry()
        for j, dnode in enumerate(dnodes):
            (err,) = setter(exec_handle, dnode, params)
            if err:
                raise_error(err, plan.calls[e], plan.entry_nodes[e][j])
