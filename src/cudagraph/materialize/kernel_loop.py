"""The kernel-node loop of explicit construction: the compiled ``KernelLoop`` and its Python twin.

Explicit construction keeps one prepared kernel ``CUgraphNodeParams`` per
driver graph and adds runs of kernel nodes with it, writing only what differs
from the previous node. Two implementations of one interface do that:

- ``cudagraph.driver._native.KernelLoop`` (C, ``cuGraphAddNode_v2`` called
  without ``cuda.bindings``), made by :func:`cudagraph.driver.c_entry.kernel_loop`
  where the compiled module is built and not turned off
  (``CUDAGRAPH_NO_C_ENTRY=1``);
- :class:`KernelLoopTwin`, its Python twin below, calling ``cuGraphAddNode``
  through ``cuda.bindings``.

Both make the same driver calls (``tests/test_native_cpu.py`` records and
compares them). A loop knows the kernels it was introduced to (``use``), each
with its argument buffer and the arguments that buffer holds, and points the
prepared parameters at each node's kernel itself: a definition interleaving
kernels is added in one pass. The interface, as ``Lowering.lower_graph`` uses it:

``run(order, start, raw) -> int``
    Add ``order[start:]`` while each node is a kernel launch (the twin: of a kind of
    :data:`cudagraph.ops.registry.LAUNCHES`; the compiled loop: a ``KernelNode``) without launch
    attributes of a known kernel whose arguments it can pack; return the
    index of the first node not added (after the call, ``kernel`` is that
    node's kernel if the loop knows it). ``raw[i]`` is the driver handle (int)
    of the node of index ``i``; a refusal stops at that node with its
    ``CUresult`` in ``rc``.
``use(kernel, kinds, offsets, sizes, scratch, scratch_size, function, library, kernel_params, owner)``
    Know ``kernel`` (anew) and point the parameters at it (see
    :func:`cudagraph.driver.c_entry.use_kernel`; ``owner`` is its ``KernelInfo``).
``put(node, raw) -> bool``
    Add one kernel node whose arguments the caller packed (``args`` set);
    ``False``: the caller adds it.
``add_with(node, raw, params) -> bool``
    Add any node with the ``CUgraphNodeParams`` at address ``params``;
    ``False``: the caller adds it.
``write_dims(node) -> bool``
    Write a kernel node's grid, block and shared memory into the prepared
    parameters; ``False`` when they are not plain ints.
``kernel``, ``args`` (settable), ``rc``, ``done``
    The kernel the parameters point at, the argument tuple its buffer holds
    (``None``: unknown; setting ``None`` forgets what every kernel's buffer
    holds), the ``CUresult`` of the last refusal, the nodes added so far.

The compiled loop also adds fills, 1-D copies and empty nodes in ``run``
when :func:`cudagraph.ops.compiled_kinds.add_simple_kinds` made them known to
it and their operands are plain ints or bound parameters (their parameters written in C from the nodes'
slots). The twin
leaves them to the caller, which adds each with its kind's parameters
(``Lowering._add_node``): the driver calls are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..driver.calls import require_driver
from ..driver.compat import add_node_fn
from ..errors import OperandError
from ..ops.registry import LAUNCHES
from .driver_edges import driver_preds

__all__ = ["KernelLoopTwin", "driver_deps"]


def driver_deps(preds: Sequence[Any], dn: list[Any], raw: list[int], make_node: Any) -> Any:
    """The predecessors' ``CUgraphNode`` objects for a ``cuda.bindings`` call (``None`` for none).

    ``dn[i]`` caches the object of the node of index ``i`` (made from ``raw[i]`` on first use).
    """
    if not preds:
        return None
    out = []
    for p in preds:
        d = dn[p.index]
        if d is None:
            d = dn[p.index] = make_node(raw[p.index])
        out.append(d)
    return out


class _Known:
    """A kernel a :class:`KernelLoopTwin` knows: its ``KernelInfo``, function fields and packed arguments."""

    __slots__ = ("kernel", "info", "func", "kern", "kernel_params", "args")

    def __init__(self, kernel: Any, info: Any, func: Any, kern: Any, kernel_params: int) -> None:
        self.kernel = kernel
        self.info = info
        self.func = func
        self.kern = kern
        self.kernel_params = kernel_params
        self.args: Any = None


class KernelLoopTwin:
    """The Python twin of the compiled ``KernelLoop`` (add mode), through ``cuda.bindings``.

    Parameters
    ----------
    handle : CUgraph
        The driver graph nodes are added to.
    kp : CUgraphNodeParams
        The prepared kernel parameters (pointed at each node's kernel by the loop).
    dn : list
        ``CUgraphNode`` objects by node index (``None`` where not made yet);
        the twin fills in those of the nodes it adds.
    bindings : dict
        Parameter values, for packing arguments.
    """

    __slots__ = (
        "rc",
        "done",
        "_handle",
        "_kp",
        "_k",
        "_dn",
        "_bindings",
        "_known",
        "_cur",
        "_fixed",
        "_add",
        "_make",
        "_grid",
        "_block",
        "_smem",
    )

    def __init__(self, handle: Any, kp: Any, dn: list[Any], bindings: dict[str, Any]) -> None:
        drv = require_driver()
        self.rc = 0
        self.done = 0
        self._handle = handle
        self._kp = kp
        self._k = kp.kernel
        self._dn = dn
        self._bindings = bindings
        self._known: dict[int, _Known] = {}  # id(kernel) -> what the twin knows of it (holding the kernel)
        self._cur: _Known | None = None
        self._add = add_node_fn()  # (the 12.x shape on every cuda-bindings: driver.compat decides)
        self._make = drv.CUgraphNode
        self._grid: Any = None
        self._block: Any = None
        self._smem = 0
        # What run() reads on every call, unpacked in one step.
        self._fixed = (bindings, dn, self._make, self._add, handle, kp, self._k)

    @property
    def kernel(self) -> Any:
        """The kernel the parameters point at (``None``: none yet)."""
        return None if self._cur is None else self._cur.kernel

    @property
    def args(self) -> Any:
        """The argument tuple held by the buffer of :attr:`kernel` (``None``: unknown)."""
        return None if self._cur is None else self._cur.args

    @args.setter
    def args(self, value: Any) -> None:
        if value is None:
            for known in self._known.values():  # other code may have packed any kernel's buffer
                known.args = None
        elif self._cur is None:
            raise RuntimeError("KernelLoopTwin.args: no kernel is in use (see use())")
        else:
            self._cur.args = value

    def use(
        self,
        kernel: Any,
        kinds: Any,
        offsets: Any,
        sizes: Any,
        scratch: int,
        scratch_size: int,
        function: int,
        library: bool,
        kernel_params: int,
        owner: Any,
    ) -> None:
        """Know ``kernel`` (anew), whose ``KernelInfo`` is ``owner``, and point the parameters at it."""
        drv = require_driver()
        if library:
            known = _Known(kernel, owner, drv.CUfunction(0), drv.CUkernel(function), kernel_params)
        else:
            known = _Known(kernel, owner, drv.CUfunction(function), drv.CUkernel(0), kernel_params)
        self._known[id(kernel)] = known
        self._select(known)

    def _select(self, known: _Known) -> None:
        k = self._k
        k.func = known.func
        k.kern = known.kern
        k.kernelParams = known.kernel_params
        self._cur = known

    def run(self, order: list[Any], start: int, raw: list[int]) -> int:
        """Add ``order[start:]`` while each is a plain kernel node of a known kernel; return where it stopped."""
        self.rc = 0
        if start >= len(order):
            return start
        first = order[start]
        launches = LAUNCHES  # the kinds this loop adds (a kernel node's fields), by exact class
        if type(first) not in launches or first.attrs is not None or id(first.kernel) not in self._known:
            return start  # nothing to add: return before setting up the loop
        # put() and write_dims() inlined: this is the whole per-node cost of the cuda.bindings path
        # besides the call itself (the construction benchmark reports it without the compiled module).
        bindings, dn, make, add, handle, kp, k = self._fixed
        last_grid, last_block, last_smem = self._grid, self._block, self._smem
        known_kernels = self._known
        cur = self._cur
        total = len(order)
        i = start
        while i < total:
            node = order[i]
            if type(node) not in launches or node.attrs is not None:
                break
            kernel = node.kernel
            if cur is None or kernel is not cur.kernel:
                cur = known_kernels.get(id(kernel))
                if cur is None:
                    break
                self._select(cur)
            args = node.args
            if args is not cur.args:
                try:
                    cur.info.pack(args, node, bindings)
                except OperandError:
                    cur.args = None  # late operands (or a bad argument): the caller packs and names it
                    break
                cur.args = args
            grid = node.grid
            if grid is not last_grid and grid != last_grid:
                k.gridDimX, k.gridDimY, k.gridDimZ = grid
                last_grid = grid
            block = node.block
            if block is not last_block and block != last_block:
                k.blockDimX, k.blockDimY, k.blockDimZ = block
                last_block = block
            if node.shared_mem != last_smem:
                last_smem = node.shared_mem
                k.sharedMemBytes = last_smem
            preds = driver_preds(node)
            n = len(preds)
            deps = driver_deps(preds, dn, raw, make)
            r = add(handle, deps, n, kp)
            if r[0]:
                self.rc = int(r[0])
                break
            dn[node.index] = r[1]
            raw[node.index] = int(r[1])
            self.done += 1
            i += 1
        self._grid, self._block, self._smem = last_grid, last_block, last_smem
        return i

    def put(self, node: Any, raw: list[int]) -> bool:
        """Add the kernel launch ``node`` with the prepared parameters (its arguments already packed)."""
        self.rc = 0
        if type(node) not in LAUNCHES or not self.write_dims(node):
            return False
        preds = driver_preds(node)
        n = len(preds)
        deps = driver_deps(preds, self._dn, raw, self._make)
        r = self._add(self._handle, deps, n, self._kp)
        if r[0]:
            self.rc = int(r[0])
            return True
        self._dn[node.index] = r[1]
        raw[node.index] = int(r[1])
        self.done += 1
        return True

    def add_with(self, node: Any, raw: list[int], params: int) -> bool:
        """Always ``False``: ``cuda.bindings`` takes the parameter object, which the caller holds."""
        self.rc = 0
        return False

    def write_dims(self, node: Any) -> bool:
        """Write the node's grid, block and shared memory where they differ from the last node's."""
        if type(node) not in LAUNCHES:
            return False
        k = self._k
        try:
            grid = node.grid
            if grid is not self._grid and grid != self._grid:
                k.gridDimX, k.gridDimY, k.gridDimZ = grid
                self._grid = grid
            block = node.block
            if block is not self._block and block != self._block:
                k.blockDimX, k.blockDimY, k.blockDimZ = block
                self._block = block
            if node.shared_mem != self._smem:
                k.sharedMemBytes = node.shared_mem
                self._smem = node.shared_mem
        except (TypeError, ValueError, OverflowError):
            self._grid = self._block = None
            return False
        return True
