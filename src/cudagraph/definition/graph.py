"""The graph definition: nodes, edges and builders (GPU-free)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from ..errors import CycleError, DefinitionError, DuplicateEdgeError, ForeignNodeError, OperandError
from . import render as _render
from .capture_accessor import CaptureAccessor
from .condition import PREDICATE_DTYPES, PREDICATE_OPS, Condition
from .nodes import (
    WAIT_COMPARISONS,
    WAIT_VALUE_FLUSH,
    AllocNode,
    AllocOffset,
    BatchMemOpNode,
    ChildGraphNode,
    ConditionalNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    FreeNode,
    HostNode,
    IfElseNode,
    IfNode,
    KernelNode,
    Memcpy2DNode,
    Memcpy3DNode,
    MemcpyNode,
    MemsetNode,
    Node,
    SetConditionNode,
    SwitchNode,
    WaitValueNode,
    WhileNode,
    WriteValueNode,
    _set_base,
)
from .operands import normalize_kernel_args, resolve_pointer
from .param import Param
from .topology import find_cycle, find_path, format_cycle, kahn_order

if TYPE_CHECKING:
    from ..executable.executable import Executable
    from .path import Path

__all__ = ["Graph"]

After = Union[Node, Sequence[Node], None]
DimLike = Union[int, Sequence[int]]

_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_BLOCK = (1024, 1024, 64)
_KERNEL_TYPES = ("CUkernel", "CUfunction")
# Types already accepted as kernels: the hot path of Graph.kernel tests
# membership only.
_KERNEL_TYPES_SEEN: set[type] = set()
_new = object.__new__
_EVENT_TYPES = ("CUevent",)


# One shared (n, 1, 1) tuple per 1-D size: nodes of the same shape hold the
# same object, so lowering compares dimensions by identity. _BLOCKS holds every
# valid 1-D block; _GRIDS the 1-D grids seen (and the block sizes), all valid.
_BLOCKS: dict[int, tuple[int, int, int]] = {n: (n, 1, 1) for n in range(1, 1025)}
_GRIDS: dict[int, tuple[int, int, int]] = dict(_BLOCKS)
_ZERO = 0
# Node classes already accepted as after= of Graph.kernel (then one set lookup).
_NODE_TYPES: set[type] = set()


def _dim_tuple(n: int) -> tuple[int, int, int]:
    t = _GRIDS.get(n)
    if t is None:
        t = (n, 1, 1)
        if len(_GRIDS) < 8192:
            _GRIDS[n] = t
    return t


def _dim3(value: Any, what: str, limits: tuple[int, int, int]) -> tuple[int, int, int]:
    if type(value) is int:
        if 0 < value <= limits[0]:
            return (value, 1, 1)
        dims: list[int] = [value]
    elif isinstance(value, (tuple, list)):
        if not 1 <= len(value) <= 3:
            raise DefinitionError(f"{what} must have 1 to 3 dimensions, got {len(value)}")
        try:
            dims = [operator.index(v) for v in value]
        except TypeError:
            raise OperandError(f"{what} must be integers, got {value!r}") from None
    else:
        try:
            dims = [operator.index(value)]
        except TypeError:
            raise OperandError(f"{what} must be an int or a tuple of ints, got {type(value).__name__}") from None
    while len(dims) < 3:
        dims.append(1)
    for axis, (d, lim) in enumerate(zip(dims, limits)):
        if d <= 0:
            raise DefinitionError(f"{what}[{axis}] must be positive, got {d}")
        if d > lim:
            raise DefinitionError(f"{what}[{axis}] = {d} exceeds the CUDA limit {lim}")
    return (dims[0], dims[1], dims[2])


def _check_size(value: Any, what: str) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise OperandError(f"{what} must be an integer, got {type(value).__name__}") from None
    if v <= 0:
        raise DefinitionError(f"{what} must be positive, got {v}")
    if v >= 1 << 63:
        raise DefinitionError(f"{what} = {v} overflows 64 bits")
    return v


def _check_event(event: Any, what: str) -> None:
    tname = type(event).__name__
    if tname in _EVENT_TYPES:
        return
    if tname == "Event" and hasattr(event, "handle"):
        return
    raise OperandError(f"{what}: expected a cuda.core Event or a CUevent, got {tname}")


def _check_kernel(kernel: Any, what: str) -> None:
    tname = type(kernel).__name__
    if tname in _KERNEL_TYPES:
        return
    handle = getattr(kernel, "handle", None)
    if handle is not None and type(handle).__name__ in _KERNEL_TYPES:
        return
    raise OperandError(f"{what}: expected a cuda.core Kernel or a CUkernel/CUfunction handle, got {tname}")


class Graph:
    """A CUDA graph definition: nodes, their parameters and dependency edges.

    Building a definition needs no GPU. Nodes are added with the builders
    (:meth:`kernel`, :meth:`memcpy`, :meth:`memset`, :meth:`host`,
    :meth:`record`, :meth:`wait`, :meth:`child`, :meth:`empty`, :meth:`join`),
    each taking ``after=`` (a node or a sequence of nodes it depends on).
    :meth:`instantiate` turns the definition into a launchable
    :class:`~cudagraph.Executable` by explicit construction on the driver.

    Parameters
    ----------
    name : str
        A label used in summaries, pictures and error messages.

    Examples
    --------
    >>> import cudagraph as cg
    >>> g = cg.Graph("demo")
    >>> a = g.empty(name="a")
    >>> b = g.empty(after=a, name="b")
    >>> [n.name for n in g.topological_order()]
    ['a', 'b']
    """

    __slots__ = (
        "name",
        "_nodes",
        "_ordered",
        "_nedges",
        "_params",
        "_special",
        "_owner",
        "_conditions",
        "__weakref__",
    )

    def __init__(self, name: str = "graph") -> None:
        if not isinstance(name, str):
            raise OperandError(f"Graph name must be a str, got {type(name).__name__}")
        self.name = name
        self._nodes: list[Node] = []
        # True while every edge goes from a lower to a higher index, which
        # makes creation order a topological order and the graph acyclic.
        self._ordered = True
        self._nedges = 0
        self._params: dict[str, Param] = {}
        # Nodes that need the checks of _checks.check_tree (conditionals, graph memory, late operands).
        self._special = 0
        # The conditional node whose body this graph is (None for a graph of its own).
        self._owner: ConditionalNode | None = None
        self._conditions: list[Condition] = []

    # ------------------------------------------------------------------ deps
    def _deps(self, after: Any, what: str) -> list[Node]:
        if after is None:
            return []
        if isinstance(after, Node):
            if after.graph is not self:
                raise ForeignNodeError(
                    f"{what}: after= names {after.label} of Graph {after.graph.name!r}, not of {self.name!r}"
                )
            return [after]
        if isinstance(after, (list, tuple)):
            deps = list(after)
            for d in deps:
                if not isinstance(d, Node):
                    raise OperandError(f"{what}: after= must hold nodes, got {type(d).__name__}")
                if d.graph is not self:
                    raise ForeignNodeError(
                        f"{what}: after= names {d.label} of Graph {d.graph.name!r}, not of {self.name!r}"
                    )
            if len(deps) > 1 and len({id(d) for d in deps}) != len(deps):
                seen: set[int] = set()
                for d in deps:
                    if id(d) in seen:
                        raise DuplicateEdgeError(f"{what}: after= names {d.label} twice")
                    seen.add(id(d))
            return deps
        raise OperandError(f"{what}: after= must be a node or a sequence of nodes, got {type(after).__name__}")

    def _add(self, node: Node, deps: list[Node]) -> Node:
        node._preds = deps
        for d in deps:
            d._succs.append(node)
        self._nedges += len(deps)
        self._nodes.append(node)
        return node

    def _what(self, kind: str, name: str | None) -> str:
        return f"{kind}#{len(self._nodes)} {name or kind!r}"

    # -------------------------------------------------------------- builders
    def kernel(
        self,
        kernel: Any,
        grid: DimLike,
        block: DimLike,
        args: Sequence[Any] = (),
        *,
        shared_mem: int = 0,
        cluster: DimLike | None = None,
        cooperative: bool = False,
        priority: int | None = None,
        programmatic: bool | Node | Sequence[Node] | None = None,
        after: After = None,
        name: str | None = None,
    ) -> KernelNode:
        """Add a kernel launch.

        Parameters
        ----------
        kernel : cuda.core.Kernel or CUkernel or CUfunction
            The kernel to launch.
        grid, block : int or tuple of up to 3 ints
            Grid and block dimensions.
        args : tuple
            Kernel arguments: numpy scalars, ctypes scalars or structures,
            ``bytes`` for by-value structs, ints (pointers), ``cuda.core``
            ``Buffer`` objects, objects with ``__cuda_array_interface__`` or
            ``__dlpack__``, and :class:`~cudagraph.Param`. To keep building
            cheap they are stored as given and checked by :meth:`validate`
            and at instantiation, against the kernel's real parameter layout.
        shared_mem : int
            Dynamic shared memory in bytes. Above 48 KiB the kernel's
            ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` is raised for
            it when the graph is built.
        cluster : int or tuple of up to 3 ints, optional
            Thread-block cluster shape (``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION``);
            the grid must be a whole number of clusters (compute capability 9.0+).
        cooperative : bool
            Cooperative launch: every block is resident at once, so grid-wide
            synchronization is safe. The driver refuses grids too large to be
            co-resident.
        priority : int, optional
            Node priority, honoured with ``instantiate(use_node_priority=True)``.
        programmatic : True, KernelNode or sequence of KernelNode, optional
            Programmatic dependent launch: the edges from these predecessor
            kernels (``True``: from every node in ``after``) become
            programmatic, so this kernel may start before they finish; it
            must call ``cudaGridDependencySynchronize()`` (PTX
            ``griddepcontrol.wait``) before reading their results. Nodes not
            in ``after`` are added as dependencies.
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label (defaults to ``"kernel"``).

        Returns
        -------
        KernelNode

        Raises
        ------
        OperandError
            The kernel or an argument has the wrong kind.
        DefinitionError
            Bad dimensions or shared memory size.
        ForeignNodeError, DuplicateEdgeError
            Bad ``after=``.
        """
        # Hot path: a type test, a dict lookup or an identity test per argument;
        # anything unusual (and every error message) goes through _kernel_field.
        if type(kernel) not in _KERNEL_TYPES_SEEN:
            _check_kernel(kernel, self._what("kernel", name))
            if type(kernel).__name__ in _KERNEL_TYPES or type(kernel).__module__.startswith("cuda.core"):
                _KERNEL_TYPES_SEEN.add(type(kernel))
        # Both tables hold only valid sizes, so a hit needs no range check.
        g = _GRIDS.get(grid) if type(grid) is int else None
        if g is None:
            g = self._kernel_field("grid", grid, name)
        b = _BLOCKS.get(block) if type(block) is int else None
        if b is None:
            b = self._kernel_field("block", block, name)
        if shared_mem is not _ZERO:  # the default 0 is one cached int object
            shared_mem = self._kernel_field("shared_mem", shared_mem, name)
        if type(args) is not tuple:
            args = self._kernel_field("args", args, name)
        nodes = self._nodes
        node = _new(KernelNode)
        if after is None:
            node._preds = []
        elif type(after) in _NODE_TYPES and after.graph is self:  # type: ignore[union-attr]
            node._preds = [after]  # type: ignore[list-item]
            after._succs.append(node)  # type: ignore[union-attr]
            self._nedges += 1
        else:
            deps = self._deps(after, self._what("kernel", name))
            if isinstance(after, Node):
                _NODE_TYPES.add(type(after))
            node._preds = deps
            for d in deps:
                d._succs.append(node)
            self._nedges += len(deps)
        node.graph = self
        node.index = len(nodes)
        node.name = name or "kernel"
        node._succs = []
        node.kernel = kernel
        node.grid = g
        node.block = b
        node.shared_mem = shared_mem
        node.args = args  # type: ignore[assignment]
        if cluster is None and priority is None and programmatic is None and not cooperative and shared_mem <= 49152:
            node.attrs = None
        else:
            node.attrs = self._launch_attrs(node, cluster, cooperative, priority, programmatic, name)
        nodes.append(node)
        return node

    def _kernel_field(self, field: str, value: Any, name: str | None) -> Any:
        """The checked value of a :meth:`kernel` argument the hot path did not take (or the error)."""
        what = self._what("kernel", name)
        if field == "grid":
            if type(value) is int and 0 < value <= _MAX_GRID[0]:
                return _dim_tuple(value)
            return _dim3(value, f"{what}: grid", _MAX_GRID)
        if field == "block":
            b = _dim3(value, f"{what}: block", _MAX_BLOCK)
            if b[0] * b[1] * b[2] > 1024:
                raise DefinitionError(f"{what}: block {b} has {b[0] * b[1] * b[2]} threads; the CUDA limit is 1024")
            return _BLOCKS.get(b[0], b) if b[1] == b[2] == 1 else b
        if field == "shared_mem":
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise DefinitionError(f"{what}: shared_mem must be a non-negative int, got {value!r}")
            return int(value)
        if not isinstance(value, (list, tuple)):
            raise OperandError(f"{what}: args must be a tuple of kernel arguments, got {type(value).__name__}")
        return tuple(value)

    def _launch_attrs(
        self, node: KernelNode, cluster: Any, cooperative: Any, priority: Any, programmatic: Any, name: str | None
    ) -> Any:
        from .launch_attrs import make_launch_attrs

        what = self._what("kernel", name)
        try:
            return make_launch_attrs(self, node, cluster, cooperative, priority, programmatic, what)
        except BaseException:
            # Nothing half-built: drop the edges recorded for the node.
            for p in node._preds:
                p._succs.remove(node)
            self._nedges -= len(node._preds)
            raise

    def memcpy(
        self,
        dst: Any,
        src: Any,
        nbytes: int | None = None,
        *,
        after: After = None,
        name: str | None = None,
    ) -> MemcpyNode:
        """Add a 1-D copy of ``nbytes`` bytes from ``src`` to ``dst``.

        The direction (host to device, device to host, device to device) is
        read from the pointers when the graph is built on the driver.

        Parameters
        ----------
        dst, src : Buffer, array, int or Param
            Device memory (``cuda.core`` ``Buffer``, ``__cuda_array_interface__``,
            DLPack), host memory (numpy arrays), an int address, or a pointer
            :class:`~cudagraph.Param`.
        nbytes : int, optional
            Bytes to copy; defaults to the size of ``src`` (or ``dst``) when known.
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label.

        Returns
        -------
        MemcpyNode

        Raises
        ------
        OperandError
            An operand is not memory, or is a null pointer.
        DefinitionError
            ``nbytes`` is not positive, is unknown, or exceeds an operand's size.
        """
        what = self._what("memcpy", name)
        d, dkeep, dsize = self._pointer(dst, f"{what}: dst")
        s, skeep, ssize = self._pointer(src, f"{what}: src")
        if nbytes is None:
            nbytes = ssize if ssize is not None else dsize
            if nbytes is None:
                raise DefinitionError(f"{what}: nbytes is required when neither operand has a known size")
        n = _check_size(nbytes, f"{what}: nbytes")
        if ssize is not None and n > ssize:
            raise DefinitionError(f"{what}: nbytes = {n} exceeds the {ssize} bytes of src")
        if dsize is not None and n > dsize:
            raise DefinitionError(f"{what}: nbytes = {n} exceeds the {dsize} bytes of dst")
        deps = self._deps(after, what)
        self._note_late(d, s)
        node = MemcpyNode.__new__(MemcpyNode)
        _set_base(node, self, len(self._nodes), name or "memcpy")
        node.dst, node.src, node.nbytes = d, s, n
        node._keep = (dkeep, skeep)
        self._add(node, deps)
        return node

    def memset(
        self,
        dst: Any,
        value: Any,
        count: int | None = None,
        *,
        element_size: int | None = None,
        width: int | None = None,
        height: int = 1,
        pitch: int | None = None,
        after: After = None,
        name: str | None = None,
    ) -> MemsetNode:
        """Add a fill of 1-, 2- or 4-byte elements, optionally 2-D with a pitch.

        Parameters
        ----------
        dst : Buffer, array, int or Param
            Device memory to fill.
        value : int or numpy scalar
            The element value. A numpy scalar sets ``element_size`` from its
            itemsize and is stored by bit pattern (``np.float32(1.0)`` fills
            ``0x3f800000``).
        count : int, optional
            Number of elements for a 1-D fill (alias of ``width``); defaults to
            the size of ``dst`` when known.
        element_size : {1, 2, 4}, optional
            Bytes per element (default 1, or the itemsize of a numpy ``value``).
        width : int, optional
            Elements per row for a 2-D fill.
        height : int
            Rows (default 1).
        pitch : int, optional
            Bytes between rows (default ``width * element_size``).
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label.

        Returns
        -------
        MemsetNode

        Raises
        ------
        OperandError
            ``dst`` is not memory, or ``value`` does not fit the element size.
        DefinitionError
            Bad sizes, or a fill larger than ``dst``.
        """
        what = self._what("memset", name)
        d, dkeep, dsize = self._pointer(dst, f"{what}: dst")
        if isinstance(value, np.generic):
            if element_size is None:
                element_size = value.dtype.itemsize
            if value.dtype.itemsize != element_size:
                raise OperandError(
                    f"{what}: value is a {value.dtype.itemsize}-byte {value.dtype}, but element_size is {element_size}"
                )
            if element_size not in (1, 2, 4):
                raise DefinitionError(f"{what}: element_size must be 1, 2 or 4, got {element_size}")
            bits = int.from_bytes(value.tobytes(), "little")
        elif isinstance(value, int) and not isinstance(value, bool):
            element_size = 1 if element_size is None else element_size
            if element_size not in (1, 2, 4):
                raise DefinitionError(f"{what}: element_size must be 1, 2 or 4, got {element_size}")
            lo, hi = -(1 << (8 * element_size - 1)), (1 << (8 * element_size)) - 1
            if not lo <= value <= hi:
                raise OperandError(f"{what}: value {value} does not fit in {element_size} byte(s)")
            bits = value & ((1 << (8 * element_size)) - 1)
        else:
            raise OperandError(f"{what}: value must be an int or a numpy scalar, got {type(value).__name__}")
        if count is not None and width is not None:
            raise DefinitionError(f"{what}: give count or width, not both")
        w = count if count is not None else width
        if w is None:
            if dsize is None:
                raise DefinitionError(f"{what}: count is required when dst has no known size")
            if height != 1:
                raise DefinitionError(f"{what}: width is required for a 2-D fill")
            w = dsize // element_size
        w = _check_size(w, f"{what}: {'width' if width is not None else 'count'}")
        h = _check_size(height, f"{what}: height")
        row = w * element_size
        p = row if pitch is None else _check_size(pitch, f"{what}: pitch")
        if p < row:
            raise DefinitionError(f"{what}: pitch {p} is smaller than a row ({w} x {element_size} = {row} bytes)")
        if h > 1 and pitch is not None and p % element_size:
            raise DefinitionError(f"{what}: pitch {p} is not a multiple of element_size {element_size}")
        extent = p * (h - 1) + row
        if dsize is not None and extent > dsize:
            raise DefinitionError(f"{what}: the fill covers {extent} bytes but dst has {dsize}")
        deps = self._deps(after, what)
        self._note_late(d)
        node = MemsetNode.__new__(MemsetNode)
        _set_base(node, self, len(self._nodes), name or "memset")
        node.dst, node.value, node.element_size = d, bits, element_size
        node.width, node.height, node.pitch = w, h, p
        node._keep = (dkeep,)
        self._add(node, deps)
        return node

    def host(self, fn: Callable[..., Any], *args: Any, after: After = None, name: str | None = None) -> HostNode:
        """Add a host node that calls ``fn(*args)`` on a driver thread.

        The callable must not call CUDA. If it raises, the exception is kept
        and raised as :class:`~cudagraph.errors.HostCallbackError` by the next
        ``launch`` or by ``Executable.check()``. Use ``functools.partial`` for
        keyword arguments.

        Parameters
        ----------
        fn : callable
            The function to run.
        *args
            Positional arguments, kept alive with the definition.
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label (defaults to the function's name).

        Returns
        -------
        HostNode
        """
        what = self._what("host", name)
        if not callable(fn):
            raise OperandError(f"{what}: fn must be callable, got {type(fn).__name__}")
        deps = self._deps(after, what)
        node = HostNode.__new__(HostNode)
        _set_base(node, self, len(self._nodes), name or str(getattr(fn, "__name__", "host")))
        node.fn, node.args = fn, args
        self._add(node, deps)
        return node

    def record(self, event: Any, *, after: After = None, name: str | None = None) -> EventRecordNode:
        """Add a node that records ``event`` (a ``cuda.core`` ``Event`` or ``CUevent``).

        Returns
        -------
        EventRecordNode
        """
        what = self._what("record", name)
        _check_event(event, f"{what}: event")
        deps = self._deps(after, what)
        node = EventRecordNode.__new__(EventRecordNode)
        _set_base(node, self, len(self._nodes), name or "record")
        node.event = event
        self._add(node, deps)
        return node

    def wait(self, event: Any, *, after: After = None, name: str | None = None) -> EventWaitNode:
        """Add a node that waits for ``event`` (a ``cuda.core`` ``Event`` or ``CUevent``).

        Returns
        -------
        EventWaitNode
        """
        what = self._what("wait", name)
        _check_event(event, f"{what}: event")
        deps = self._deps(after, what)
        node = EventWaitNode.__new__(EventWaitNode)
        _set_base(node, self, len(self._nodes), name or "wait")
        node.event = event
        self._add(node, deps)
        return node

    def child(self, graph: Graph, *, after: After = None, name: str | None = None) -> ChildGraphNode:
        """Add another definition as one node (it is lowered when this graph is).

        Parameters
        ----------
        graph : Graph
            The body; it is referenced, not copied, so later changes to it are
            seen by later instantiations.

        Returns
        -------
        ChildGraphNode

        Raises
        ------
        DefinitionError
            If ``graph`` is this graph or contains it.
        """
        what = self._what("child", name)
        if not isinstance(graph, Graph):
            raise OperandError(f"{what}: expected a cudagraph.Graph, got {type(graph).__name__}")
        if graph is self or self in graph._descendants():
            raise DefinitionError(
                f"{what}: Graph {graph.name!r} contains Graph {self.name!r}; a graph cannot contain itself"
            )
        deps = self._deps(after, what)
        node = ChildGraphNode.__new__(ChildGraphNode)
        _set_base(node, self, len(self._nodes), name or graph.name)
        node.body = graph
        self._add(node, deps)
        return node

    def empty(self, *, after: After = None, name: str | None = None) -> EmptyNode:
        """Add an empty node (a synchronization point).

        Returns
        -------
        EmptyNode
        """
        what = self._what("empty", name)
        deps = self._deps(after, what)
        node = EmptyNode.__new__(EmptyNode)
        _set_base(node, self, len(self._nodes), name or "empty")
        self._add(node, deps)
        return node

    def join(self, *nodes: Node, name: str | None = None) -> EmptyNode:
        """Add an empty node that depends on every node in ``nodes``.

        Returns
        -------
        EmptyNode
        """
        if len(nodes) == 1 and isinstance(nodes[0], (list, tuple)):
            nodes = tuple(nodes[0])
        return self.empty(after=list(nodes), name=name or "join")

    # ------------------------------------------------------ late operands
    def _pointer(self, obj: Any, what: str, allow_null: bool = False) -> tuple[Any, Any, int | None]:
        """:func:`resolve_pointer`, plus graph allocations (whose address exists only once built)."""
        t = type(obj)
        if t is AllocNode or t is AllocOffset:
            return obj, None, obj.nbytes
        return resolve_pointer(obj, what, allow_null)

    def _note_late(self, *ptrs: Any) -> None:
        """Count operands that are graph allocations (they need the checks of :meth:`validate`)."""
        for p in ptrs:
            if type(p) is AllocNode or type(p) is AllocOffset:
                self._special += 1

    # ------------------------------------------------------- control flow
    def condition(self, default: int | bool | None = None, *, name: str | None = None) -> Condition:
        """Declare a condition for conditional nodes.

        Parameters
        ----------
        default : int or bool, optional
            Assigned at the start of every launch (``CU_GRAPH_COND_ASSIGN_DEFAULT``);
            ``None`` (default) leaves the value to the kernels that set it.
            ``default=1`` makes a while loop run its first pass.
        name : str, optional
            A label (defaults to ``"cond<i>"``).

        Returns
        -------
        Condition
            Pass it to :meth:`if_`, :meth:`if_else`, :meth:`while_`,
            :meth:`switch` and :meth:`set_condition`, or to a kernel as a
            ``cudaGraphConditionalHandle`` argument.

        Raises
        ------
        OperandError
            ``default`` is not an int.
        DefinitionError
            ``default`` does not fit in 32 unsigned bits.
        """
        index = len(self._conditions)
        label = name or f"cond{index}"
        what = f"condition#{index} {label!r}"
        if default is not None:
            if isinstance(default, (bool, np.bool_)):
                default = int(default)
            try:
                default = operator.index(default)
            except TypeError:
                raise OperandError(f"{what}: default must be an int or None, got {type(default).__name__}") from None
            if not 0 <= default < 1 << 32:
                raise DefinitionError(f"{what}: default {default} does not fit in 32 unsigned bits")
        if not isinstance(label, str):
            raise OperandError(f"{what}: name must be a str")
        cond = Condition(self, index, label, default)
        self._conditions.append(cond)
        return cond

    @property
    def conditions(self) -> tuple[Condition, ...]:
        """The conditions declared by this graph."""
        return tuple(self._conditions)

    @property
    def owner(self) -> ConditionalNode | None:
        """The conditional node whose body this graph is, or ``None``."""
        return self._owner

    def _check_condition(self, cond: Any, what: str) -> Condition:
        if not isinstance(cond, Condition):
            raise OperandError(f"{what}: expected a Condition from Graph.condition(), got {type(cond).__name__}")
        g: Graph | None = self
        while g is not None:
            if g is cond.graph:
                return cond
            g = g._owner.graph if g._owner is not None else None
        raise ForeignNodeError(
            f"{what}: {cond.label} belongs to Graph {cond.graph.name!r}; a condition is used in the graph "
            f"that declared it or in the conditional bodies inside that graph, not in Graph {self.name!r}"
        )

    def _conditional(self, cls: Any, kind: str, cond: Any, suffixes: list[str], after: After, name: str | None) -> Any:
        what = self._what(kind, name)
        self._check_condition(cond, what)
        if cond._nodes:
            other = cond._nodes[0]
            raise DefinitionError(
                f"{what}: {cond.label} already drives {other.label} of Graph {other.graph.name!r}; the driver "
                "ties a condition to one conditional node: declare another condition"
            )
        deps = self._deps(after, what)
        node = cls.__new__(cls)
        _set_base(node, self, len(self._nodes), name or kind)
        node.cond = cond
        bodies = []
        for suffix in suffixes:
            body = Graph(f"{self.name}/{node.name}.{suffix}")
            body._params = self._params  # parameters declared in a body are the parent's
            body._owner = node
            bodies.append(body)
        node.bodies = tuple(bodies)
        cond._nodes.append(node)
        self._special += 1
        self._add(node, deps)
        return node

    def if_(self, cond: Condition, *, after: After = None, name: str | None = None) -> IfNode:
        """Add an if node: ``node.body`` runs once when ``cond`` is non-zero.

        Parameters
        ----------
        cond : Condition
            From :meth:`condition` (of this graph or of a graph whose
            conditional body this graph is).
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label.

        Returns
        -------
        IfNode
            Fill ``node.body`` (a :class:`Graph`) with the usual builders.

        Raises
        ------
        OperandError
            ``cond`` is not a Condition.
        ForeignNodeError
            ``cond`` belongs to a graph that does not enclose this one.
        """
        node: IfNode = self._conditional(IfNode, "if", cond, ["body"], after, name)
        return node

    def if_else(self, cond: Condition, *, after: After = None, name: str | None = None) -> IfElseNode:
        """Add an if/else node: ``node.then`` runs when ``cond`` is non-zero, else ``node.else_``.

        Needs a CUDA 12.8 or newer driver. See :meth:`if_` for the parameters.

        Returns
        -------
        IfElseNode
        """
        node: IfElseNode = self._conditional(IfElseNode, "if_else", cond, ["then", "else"], after, name)
        return node

    def while_(self, cond: Condition, *, after: After = None, name: str | None = None) -> WhileNode:
        """Add a while node: ``node.body`` runs again and again while ``cond`` is non-zero.

        The condition is tested before every pass (so ``default=1`` or a
        kernel before the loop must set it for a first pass), and a node of
        the body must set it to 0 to end the loop: a kernel calling
        ``cudaGraphSetConditional`` or a :meth:`set_condition` node. See
        :meth:`if_` for the parameters.

        Returns
        -------
        WhileNode
        """
        node: WhileNode = self._conditional(WhileNode, "while", cond, ["body"], after, name)
        return node

    def switch(self, cond: Condition, n: int, *, after: After = None, name: str | None = None) -> SwitchNode:
        """Add a switch node: ``node.cases[v]`` runs where ``v`` is the value of ``cond``.

        Nothing runs when ``v >= n``. Needs a CUDA 12.8 or newer driver.

        Parameters
        ----------
        cond : Condition
            The selector.
        n : int
            The number of cases (at least 1).

        Returns
        -------
        SwitchNode

        Raises
        ------
        DefinitionError
            ``n`` is smaller than 1.
        """
        what = self._what("switch", name)
        if isinstance(n, bool):
            raise OperandError(f"{what}: the number of cases must be an int, got bool")
        try:
            count = operator.index(n)
        except TypeError:
            raise OperandError(f"{what}: the number of cases must be an int, got {type(n).__name__}") from None
        if count < 1:
            raise DefinitionError(f"{what}: a switch needs at least one case, got {count}")
        cases = [f"case{i}" for i in range(count)]
        node: SwitchNode = self._conditional(SwitchNode, "switch", cond, cases, after, name)
        return node

    def set_condition(
        self,
        cond: Condition,
        ptr: Any,
        op: str,
        value: Any,
        dtype: Any = None,
        *,
        after: After = None,
        name: str | None = None,
    ) -> SetConditionNode:
        """Add a built-in kernel that sets ``cond = (*ptr <op> value)``; no device code needed.

        For example ``g.set_condition(cond, residual, ">", 1e-6, np.float32)``
        at the end of a while body keeps looping while the device scalar
        ``residual`` is above 1e-6. The kernels are compiled once per process
        (NVRTC, or the PTX shipped with cudagraph) and cached.

        Parameters
        ----------
        cond : Condition
            The condition to set.
        ptr : Buffer, array, int, Param or AllocNode
            Device memory holding the scalar.
        op : {"<", "<=", ">", ">=", "==", "!="}
            The comparison.
        value : number
            The right-hand side, converted to ``dtype``.
        dtype : numpy dtype, optional
            float32, float64, int32, int64, uint32 or uint64; defaults to the
            dtype of a numpy ``value``, else of an array ``ptr``.
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label.

        Returns
        -------
        SetConditionNode

        Raises
        ------
        OperandError
            Bad condition, pointer, operator or value.
        DefinitionError
            No dtype could be chosen, or ``ptr`` is smaller than one scalar.
        """
        what = self._what("set_condition", name)
        self._check_condition(cond, what)
        if op not in PREDICATE_OPS:
            raise OperandError(f"{what}: op must be one of {', '.join(PREDICATE_OPS)}; got {op!r}")
        p, keep, size = self._pointer(ptr, f"{what}: ptr")
        if dtype is None:
            if isinstance(value, np.generic):
                dtype = value.dtype
            else:
                iface = getattr(ptr, "__cuda_array_interface__", None) or getattr(ptr, "__array_interface__", None)
                if iface is None:
                    raise DefinitionError(f"{what}: dtype is required (the scalar type at ptr)")
                dtype = iface.get("typestr")
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise OperandError(f"{what}: dtype {dtype!r} is not a numpy dtype") from None
        if dt not in PREDICATE_DTYPES:
            raise OperandError(
                f"{what}: dtype {dt} is not supported; use one of {', '.join(str(d) for d in PREDICATE_DTYPES)}"
            )
        if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
            raise OperandError(f"{what}: value must be a number, got {type(value).__name__}")
        if dt.kind in "iu":
            try:
                ivalue = operator.index(value)
            except TypeError:
                raise OperandError(f"{what}: value must be an integer for dtype {dt}, got {value!r}") from None
            info = np.iinfo(dt)
            if not info.min <= ivalue <= info.max:
                raise OperandError(f"{what}: value {ivalue} does not fit in {dt}")
            v = dt.type(ivalue)
        else:
            try:
                v = dt.type(value)
            except (TypeError, ValueError):
                raise OperandError(f"{what}: value must be a number, got {type(value).__name__}") from None
        if size is not None and size < dt.itemsize:
            raise DefinitionError(f"{what}: ptr holds {size} bytes, less than one {dt} ({dt.itemsize} bytes)")
        deps = self._deps(after, what)
        self._note_late(p)
        node = SetConditionNode.__new__(SetConditionNode)
        _set_base(node, self, len(self._nodes), name or "set_condition")
        node.cond, node.ptr, node.op, node.value, node.dtype = cond, p, op, v, dt
        node._keep = (keep,)
        self._special += 1
        self._add(node, deps)
        return node

    # -------------------------------------------------------- graph memory
    def alloc(self, nbytes: int, *, after: After = None, name: str | None = None) -> AllocNode:
        """Add a device memory allocation that lives inside the graph.

        The returned node is the operand: pass it as a kernel argument, a
        copy's ``src``/``dst`` or a fill's ``dst`` (``node.offset(n)`` for an
        address inside it); its address is filled in when the graph is
        built. Every user must be ordered after this node and before the
        :meth:`free` node, and the allocation must be freed in this graph
        unless the executable is made with ``instantiate(auto_free_on_launch=True)``.

        Parameters
        ----------
        nbytes : int
            Bytes to allocate.
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label.

        Returns
        -------
        AllocNode
        """
        what = self._what("alloc", name)
        n = _check_size(nbytes, f"{what}: nbytes")
        deps = self._deps(after, what)
        node = AllocNode.__new__(AllocNode)
        _set_base(node, self, len(self._nodes), name or "alloc")
        node.nbytes = n
        node.freed_by = None
        self._special += 1
        self._add(node, deps)
        return node

    def free(self, alloc: AllocNode, *, after: After = None, name: str | None = None) -> FreeNode:
        """Add the node that frees ``alloc`` (an :class:`AllocNode` of this graph).

        ``after`` must order it after the allocation and after every node
        that uses the allocation (checked by :meth:`validate`).

        Returns
        -------
        FreeNode

        Raises
        ------
        OperandError
            ``alloc`` is not an AllocNode.
        ForeignNodeError
            ``alloc`` was allocated in another graph.
        DefinitionError
            ``alloc`` is freed already.
        """
        what = self._what("free", name)
        if type(alloc) is not AllocNode:
            raise OperandError(f"{what}: expected the AllocNode returned by Graph.alloc(), got {type(alloc).__name__}")
        if alloc.graph is not self:
            raise ForeignNodeError(
                f"{what}: {alloc.label} was allocated in Graph {alloc.graph.name!r}, not in {self.name!r}; "
                "an allocation is freed in the graph that allocated it"
            )
        if alloc.freed_by is not None:
            raise DefinitionError(f"{what}: {alloc.label} is freed already by {alloc.freed_by.label} (double free)")
        deps = self._deps(after, what)
        node = FreeNode.__new__(FreeNode)
        _set_base(node, self, len(self._nodes), name or "free")
        node.alloc = alloc
        alloc.freed_by = node
        self._special += 1
        self._add(node, deps)
        return node

    # ------------------------------------------------------- pitched copies
    def memcpy2d(
        self,
        dst: Any,
        dst_pitch: int,
        src: Any,
        src_pitch: int,
        width: int,
        height: int,
        *,
        after: After = None,
        name: str | None = None,
    ) -> Memcpy2DNode:
        """Add a pitched 2-D copy of ``height`` rows of ``width`` bytes (as ``cudaMemcpy2D``).

        Parameters
        ----------
        dst, src : Buffer, array, int, Param or AllocNode
            Base addresses (device or host memory; the direction is read
            from the pointers when the graph is built).
        dst_pitch, src_pitch : int
            Bytes between the starts of consecutive rows (at least ``width``).
        width : int
            Bytes copied per row.
        height : int
            Rows.

        Returns
        -------
        Memcpy2DNode

        Raises
        ------
        DefinitionError
            A size is not positive, a pitch is smaller than ``width``, or the
            copy runs past an operand of known size.
        """
        node: Memcpy2DNode = self._memcpy3d(
            Memcpy2DNode, "memcpy2d", dst, src, width, height, 1, dst_pitch, src_pitch, None, None, after, name
        )
        return node

    def memcpy3d(
        self,
        dst: Any,
        src: Any,
        width: int,
        height: int,
        depth: int,
        *,
        dst_pitch: int | None = None,
        src_pitch: int | None = None,
        dst_height: int | None = None,
        src_height: int | None = None,
        after: After = None,
        name: str | None = None,
    ) -> Memcpy3DNode:
        """Add a pitched 3-D copy of ``depth`` slices of ``height`` rows of ``width`` bytes.

        Parameters
        ----------
        dst, src : Buffer, array, int, Param or AllocNode
            Base addresses.
        width : int
            Bytes per row copied.
        height, depth : int
            Rows per slice and slices copied.
        dst_pitch, src_pitch : int, optional
            Bytes between rows (default ``width``).
        dst_height, src_height : int, optional
            Rows between slices of each operand (default ``height``).

        Returns
        -------
        Memcpy3DNode
        """
        node: Memcpy3DNode = self._memcpy3d(
            Memcpy3DNode,
            "memcpy3d",
            dst,
            src,
            width,
            height,
            depth,
            dst_pitch,
            src_pitch,
            dst_height,
            src_height,
            after,
            name,
        )
        return node

    def _memcpy3d(
        self,
        cls: Any,
        kind: str,
        dst: Any,
        src: Any,
        width: Any,
        height: Any,
        depth: Any,
        dst_pitch: Any,
        src_pitch: Any,
        dst_height: Any,
        src_height: Any,
        after: After,
        name: str | None,
    ) -> Any:
        what = self._what(kind, name)
        d, dkeep, dsize = self._pointer(dst, f"{what}: dst")
        s, skeep, ssize = self._pointer(src, f"{what}: src")
        w = _check_size(width, f"{what}: width")
        h = _check_size(height, f"{what}: height")
        dep = _check_size(depth, f"{what}: depth")
        dp = w if dst_pitch is None else _check_size(dst_pitch, f"{what}: dst_pitch")
        sp = w if src_pitch is None else _check_size(src_pitch, f"{what}: src_pitch")
        dh = h if dst_height is None else _check_size(dst_height, f"{what}: dst_height")
        sh = h if src_height is None else _check_size(src_height, f"{what}: src_height")
        for label, pitch in (("dst_pitch", dp), ("src_pitch", sp)):
            if pitch < w:
                raise DefinitionError(f"{what}: {label} {pitch} is smaller than a row (width {w} bytes)")
        for label, rows in (("dst_height", dh), ("src_height", sh)):
            if rows < h:
                raise DefinitionError(f"{what}: {label} {rows} is smaller than the {h} rows copied per slice")
        for label, size, pitch, rows in (("dst", dsize, dp, dh), ("src", ssize, sp, sh)):
            extent = pitch * rows * (dep - 1) + pitch * (h - 1) + w
            if size is not None and extent > size:
                raise DefinitionError(f"{what}: the copy spans {extent} bytes of {label}, which has {size}")
        deps = self._deps(after, what)
        self._note_late(d, s)
        node = cls.__new__(cls)
        _set_base(node, self, len(self._nodes), name or kind)
        node.dst, node.src = d, s
        node.width, node.height, node.depth = w, h, dep
        node.dst_pitch, node.src_pitch, node.dst_height, node.src_height = dp, sp, dh, sh
        node._keep = (dkeep, skeep)
        self._add(node, deps)
        return node

    # --------------------------------------------------- memory operations
    def _memop(
        self, cls: Any, kind: str, ptr: Any, value: Any, bits: Any, flags: int, after: After, name: str | None
    ) -> Any:
        what = self._what(kind, name)
        if type(ptr) is AllocNode or type(ptr) is AllocOffset:
            raise OperandError(
                f"{what}: ptr is a graph allocation; graph memory comes from a memory pool, which the driver's "
                "memory operations refuse: use memory from cuMemAlloc"
            )
        p, keep, size = self._pointer(ptr, f"{what}: ptr")
        if bits is None:
            if isinstance(value, np.generic):
                bits = 8 * value.dtype.itemsize
            else:
                bits = 32 if isinstance(value, int) and -(1 << 31) <= value < 1 << 32 else 64
        if bits not in (32, 64):
            raise DefinitionError(f"{what}: bits must be 32 or 64, got {bits!r}")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise OperandError(f"{what}: value must be an integer, got {type(value).__name__}")
        v = int(value)
        if not -(1 << (bits - 1)) <= v < 1 << bits:
            raise OperandError(f"{what}: value {v} does not fit in {bits} bits")
        if size is not None and size < bits // 8:
            raise DefinitionError(f"{what}: ptr holds {size} bytes, less than a {bits}-bit word")
        if isinstance(p, int) and p % (bits // 8):
            raise DefinitionError(f"{what}: address {p:#x} is not aligned to {bits // 8} bytes")
        deps = self._deps(after, what)
        self._note_late(p)
        node: BatchMemOpNode = cls.__new__(cls)
        _set_base(node, self, len(self._nodes), name or kind)
        node.ptr, node.value, node.bits, node.flags = p, v & ((1 << bits) - 1), bits, flags
        node._keep = (keep,)
        self._add(node, deps)
        return node

    def write_value(
        self,
        ptr: Any,
        value: int,
        *,
        bits: int | None = None,
        after: After = None,
        name: str | None = None,
    ) -> WriteValueNode:
        """Add a memory-operation node that writes a 32- or 64-bit ``value`` to ``ptr``.

        Parameters
        ----------
        ptr : Buffer, array, int or Param
            The device word (aligned to its size), in memory from ``cuMemAlloc``
            (or pinned / registered host memory): the driver refuses memory
            operations on memory-pool memory (``cuMemAllocAsync``, ``cuda.core``
            device buffers, graph allocations).
        value : int or numpy integer
            The value; negative values are written in two's complement.
        bits : {32, 64}, optional
            Word size (default: a numpy value's size, else 32 when the value
            fits, else 64).

        Notes
        -----
        The write is preceded by a memory fence scoped to the graph (earlier
        writes are visible first); the driver's graph API (v2 memory
        operations) offers no flag to drop it.

        Returns
        -------
        WriteValueNode
        """
        node: WriteValueNode = self._memop(WriteValueNode, "write_value", ptr, value, bits, 0, after, name)
        return node

    def wait_value(
        self,
        ptr: Any,
        value: int,
        *,
        cmp: str = "geq",
        bits: int | None = None,
        flush: bool = False,
        after: After = None,
        name: str | None = None,
    ) -> WaitValueNode:
        """Add a memory-operation node that waits until the word at ``ptr`` compares true with ``value``.

        Parameters
        ----------
        ptr : Buffer, array, int or Param
            The device word, in memory from ``cuMemAlloc`` (see :meth:`write_value`).
        value : int
            The operand of the comparison.
        cmp : {"geq", "eq", "and", "nor"}
            ``*ptr >= value`` (unsigned, wrapping), ``*ptr == value``,
            ``(*ptr & value) != 0``, ``~(*ptr | value) != 0``.
        bits : {32, 64}, optional
            Word size.
        flush : bool
            ``CU_STREAM_WAIT_VALUE_FLUSH``: flush remote writes after the wait
            (needs device support).

        Returns
        -------
        WaitValueNode
        """
        what = self._what("wait_value", name)
        if cmp not in WAIT_COMPARISONS:
            raise OperandError(f"{what}: cmp must be one of {', '.join(WAIT_COMPARISONS)}; got {cmp!r}")
        flags = WAIT_COMPARISONS[cmp] | (WAIT_VALUE_FLUSH if flush else 0)
        node: WaitValueNode = self._memop(WaitValueNode, "wait_value", ptr, value, bits, flags, after, name)
        return node

    def param(self, name: str, dtype: Any = None, *, default: Any = None) -> Param:
        """Declare a named parameter, bound at ``instantiate(name=value)``.

        Parameters
        ----------
        name : str
            The keyword used to bind it.
        dtype : numpy dtype, optional
            ``None`` (default) for a device pointer, else a scalar type.
        default : object, optional
            Value used when none is bound.

        Returns
        -------
        Param

        Raises
        ------
        DefinitionError
            If the name is taken by a parameter of a different kind.
        """
        p = self._params.get(name)
        if p is not None:
            new_dtype = None if dtype is None else np.dtype(dtype)
            if (p.dtype is None) != (new_dtype is None) or p.dtype != new_dtype:
                raise DefinitionError(f"param {name!r} already exists with dtype {p.dtype}")
            return p
        p = Param(self, name, dtype, default)
        self._params[name] = p
        return p

    def path(self, after: After = None) -> Path:
        """Start an ordered path: each op added through it depends on the previous one.

        Use as ``with g.path() as p: p.kernel(...); p.memcpy(...)``; the first
        op depends on ``after``.

        Returns
        -------
        Path
        """
        from .path import Path

        return Path(self, self._deps(after, "path"))

    # ----------------------------------------------------------------- edges
    def _own(self, node: Any, what: str) -> Node:
        if not isinstance(node, Node):
            raise OperandError(f"{what}: expected a node, got {type(node).__name__}")
        if node.graph is not self:
            raise ForeignNodeError(f"{what}: {node.label} belongs to Graph {node.graph.name!r}, not {self.name!r}")
        return node

    def add_edge(self, src: Node, dst: Node, *, programmatic: bool | str = False) -> None:
        """Make ``dst`` depend on ``src``.

        Parameters
        ----------
        src, dst : Node
            Nodes of this graph.
        programmatic : bool or {"programmatic", "launch_order"}
            Make the edge between two kernels programmatic (programmatic
            dependent launch): ``dst`` may start once every block of ``src``
            has called ``cudaTriggerProgrammaticLaunchCompletion()`` or exited
            (``True``/``"programmatic"``), or once every block of ``src`` has
            started (``"launch_order"``). ``dst`` must wait with
            ``cudaGridDependencySynchronize()`` before reading what ``src`` wrote.

        Raises
        ------
        ForeignNodeError
            Either node belongs to another graph.
        DuplicateEdgeError
            The edge exists.
        CycleError
            The edge would close a cycle; the message spells the cycle out.
        DefinitionError
            A programmatic edge whose ends are not both kernel nodes.
        """
        self._own(src, "add_edge: src")
        self._own(dst, "add_edge: dst")
        port = None
        if programmatic is not False:
            from .launch_attrs import PROGRAMMATIC_PORTS

            port = "programmatic" if programmatic is True else programmatic
            if port not in PROGRAMMATIC_PORTS:
                raise OperandError(
                    f"add_edge: programmatic must be a bool or one of {', '.join(PROGRAMMATIC_PORTS)}; "
                    f"got {programmatic!r}"
                )
            if type(src) is not KernelNode or type(dst) is not KernelNode:
                raise DefinitionError(
                    f"add_edge: a programmatic edge joins two kernel nodes; {src.label} -> {dst.label} does not"
                )
        if src is dst:
            raise CycleError(f"add_edge: {src.label} cannot depend on itself", [src, src])
        if any(p is src for p in dst._preds):
            raise DuplicateEdgeError(f"add_edge: {src.label} -> {dst.label} exists already")
        if src.index > dst.index or not self._ordered:
            back = find_path(dst, src)
            if back is not None:
                cycle = [*back, dst]
                raise CycleError(
                    f"add_edge: {src.label} -> {dst.label} would close the cycle {format_cycle(cycle)}", cycle
                )
            if src.index > dst.index:
                self._ordered = False
        dst._preds.append(src)
        src._succs.append(dst)
        self._nedges += 1
        if port is not None:
            from .launch_attrs import LaunchAttrs

            assert isinstance(dst, KernelNode)
            attrs = dst.attrs if dst.attrs is not None else LaunchAttrs()
            attrs.programmatic.append((src, str(port)))
            dst.attrs = attrs

    def remove_edge(self, src: Node, dst: Node) -> None:
        """Remove the dependency of ``dst`` on ``src``.

        Raises
        ------
        DefinitionError
            There is no such edge.
        """
        self._own(src, "remove_edge: src")
        self._own(dst, "remove_edge: dst")
        for i, p in enumerate(dst._preds):
            if p is src:
                del dst._preds[i]
                break
        else:
            raise DefinitionError(f"remove_edge: there is no edge {src.label} -> {dst.label}")
        src._succs.remove(dst)
        self._nedges -= 1
        attrs = getattr(dst, "attrs", None)
        if attrs is not None and attrs.programmatic:
            attrs.programmatic = [(p, port) for p, port in attrs.programmatic if p is not src]
            if attrs.empty:
                dst.attrs = None  # type: ignore[attr-defined]

    # ------------------------------------------------------------ inspection
    @property
    def nodes(self) -> tuple[Node, ...]:
        """Every node, in creation order."""
        return tuple(self._nodes)

    @property
    def edges(self) -> list[tuple[Node, Node]]:
        """Every edge as ``(src, dst)``, grouped by ``dst`` in creation order."""
        return [(p, n) for n in self._nodes for p in n._preds]

    @property
    def params(self) -> dict[str, Param]:
        """The declared parameters by name (including those of child graphs is not implied)."""
        return dict(self._params)

    @property
    def num_edges(self) -> int:
        """The number of edges."""
        return self._nedges

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(tuple(self._nodes))

    def __contains__(self, node: object) -> bool:
        return isinstance(node, Node) and node.graph is self

    def roots(self) -> list[Node]:
        """Nodes with no predecessors."""
        return [n for n in self._nodes if not n._preds]

    def leaves(self) -> list[Node]:
        """Nodes with no successors."""
        return [n for n in self._nodes if not n._succs]

    def topological_order(self) -> list[Node]:
        """Every node, each after all of its predecessors (ties broken by creation order).

        Raises
        ------
        CycleError
            If the graph has a cycle.
        """
        if self._ordered:
            return list(self._nodes)
        order = kahn_order(self._nodes)
        if order is None:
            self._raise_cycle()
        assert order is not None
        return order

    def _raise_cycle(self) -> None:
        cycle = find_cycle(self._nodes)
        assert cycle is not None
        raise CycleError(f"Graph {self.name!r} has a cycle: {format_cycle(cycle)}", cycle)

    def _descendants(self) -> set[Graph]:
        out: set[Graph] = set()
        stack = [self]
        while stack:
            g = stack.pop()
            for n in g._nodes:
                if type(n) is ChildGraphNode and n.body not in out:
                    out.add(n.body)
                    stack.append(n.body)
                elif isinstance(n, ConditionalNode):
                    for b in n.bodies:
                        if b not in out:
                            out.add(b)
                            stack.append(b)
        return out

    def validate(self) -> None:
        """Check the whole definition, child graphs included.

        Checks that every edge joins nodes of this graph, that no edge is
        given twice, that the graph has no cycle, that child graphs are valid
        and do not contain this graph, and that node operands have the right
        kinds.

        With conditional nodes and graph memory it also checks that:
        conditions are used only inside the graph that declared them and by
        at least one conditional node; conditional bodies hold only the node
        kinds the driver allows there (kernel, empty, memcpy, memset, child
        graph, conditional); while bodies are not empty; every allocation is
        used only by nodes ordered after its alloc node and before its free
        node, in the graph that allocated it.

        Raises
        ------
        ForeignNodeError, DuplicateEdgeError, CycleError, DefinitionError, OperandError
        """
        if self._validate(set()):
            from .validation import check_tree

            check_tree(self)

    def _validate_structure(self) -> None:
        """The checks instantiation needs before lowering: cheap when edges were only added forward.

        Operands are checked by the lowering itself, node by node; conditional
        and graph-memory rules are checked here when the graph has such nodes.
        """
        if self._walk_structure():
            from .validation import check_tree

            check_tree(self)

    def _walk_structure(self) -> bool:
        """Cycle checks of this graph and its bodies; ``True`` if any has special nodes."""
        if not self._ordered and kahn_order(self._nodes) is None:
            self._raise_cycle()
        special = self._special > 0
        for n in self._nodes:
            if type(n) is ChildGraphNode:
                special = n.body._walk_structure() or special  # type: ignore[attr-defined]
        if special:
            for n in self._nodes:
                if isinstance(n, ConditionalNode):
                    for b in n.bodies:
                        b._walk_structure()
        return special

    def _unfreed_allocs(self) -> list[AllocNode]:
        """Allocations of this graph and its child graphs that no free node releases."""
        out: list[AllocNode] = []
        for n in self._nodes:
            if type(n) is AllocNode:
                assert isinstance(n, AllocNode)
                if n.freed_by is None:
                    out.append(n)
            elif type(n) is ChildGraphNode:
                out.extend(n.body._unfreed_allocs())  # type: ignore[attr-defined]
        return out

    def _validate(self, stack: set[int]) -> bool:
        if id(self) in stack:
            raise DefinitionError(f"Graph {self.name!r} contains itself through child nodes")
        stack.add(id(self))
        special = self._special > 0
        nedges = 0
        succ_ids = {id(n): {id(s) for s in n._succs} for n in self._nodes}
        for i, n in enumerate(self._nodes):
            if n.graph is not self or n.index != i:
                raise ForeignNodeError(f"Graph {self.name!r}: {n.label} is not a node of this graph")
            nedges += len(n._preds)
            if len(n._preds) > 1 and len({id(p) for p in n._preds}) != len(n._preds):
                raise DuplicateEdgeError(f"Graph {self.name!r}: {n.label} has a duplicate dependency")
            for p in n._preds:
                if p.graph is not self:
                    raise ForeignNodeError(
                        f"Graph {self.name!r}: {n.label} depends on {p.label} of Graph {p.graph.name!r}"
                    )
                if id(n) not in succ_ids.get(id(p), ()):
                    raise DefinitionError(f"Graph {self.name!r}: edge {p.label} -> {n.label} is one-sided")
            t = type(n)
            if t is KernelNode:
                assert isinstance(n, KernelNode)
                _check_kernel(n.kernel, n.label) if type(n.kernel).__name__ != "Kernel" else None
                try:
                    normalize_kernel_args(n.args, n.label)
                except OperandError:
                    from .validation import placeholder_args

                    plain = placeholder_args(n.args)
                    if plain is None:
                        raise
                    normalize_kernel_args(plain, n.label)
                    special = True
                if n.attrs is not None:
                    from .validation import check_launch_attrs

                    check_launch_attrs(n)
            elif t is ChildGraphNode:
                assert isinstance(n, ChildGraphNode)
                special = n.body._validate(stack) or special
            elif t is MemcpyNode or t is MemsetNode:
                assert isinstance(n, (MemcpyNode, MemsetNode))
                for field in ("dst", "src") if t is MemcpyNode else ("dst",):
                    self._pointer(getattr(n, field), f"{n.label}: {field}")
            elif isinstance(n, ConditionalNode):
                for b in n.bodies:
                    b._validate(stack)
            elif isinstance(n, (Memcpy3DNode, SetConditionNode, BatchMemOpNode)):
                for field in ("dst", "src") if isinstance(n, Memcpy3DNode) else ("ptr",):
                    self._pointer(getattr(n, field), f"{n.label}: {field}")
            elif t is HostNode:
                assert isinstance(n, HostNode)
                if not callable(n.fn):
                    raise OperandError(f"{n.label}: fn is not callable")
            elif t is EventRecordNode or t is EventWaitNode:
                _check_event(n.event, f"{n.label}: event")  # type: ignore[attr-defined]
        if nedges != self._nedges:
            raise DefinitionError(f"Graph {self.name!r}: edge count {self._nedges} does not match the nodes ({nedges})")
        if not self._ordered and kahn_order(self._nodes) is None:
            self._raise_cycle()
        stack.discard(id(self))
        return special

    def summary(self, limit: int = 50) -> str:
        """A text summary: counts by kind and one line per node (up to ``limit``)."""
        return _render.summary(self, limit)

    def to_dot(self) -> str:
        """The definition as Graphviz DOT text (child graphs as clusters)."""
        return _render.to_dot(self)

    def to_mermaid(self) -> str:
        """The definition as a Mermaid ``flowchart``."""
        return _render.to_mermaid(self)

    def __repr__(self) -> str:
        return f"<Graph {self.name!r}: {len(self._nodes)} nodes, {self._nedges} edges>"

    #: ``with g.capture(after=...) as s:`` records library calls on ``s`` into one
    #: node (a :class:`~cudagraph.materialize.capture_region.CaptureRegion`);
    #: ``Graph.capture(fn, stream=None)`` runs ``fn(stream)`` under capture and
    #: returns what it recorded as a new definition.
    capture = CaptureAccessor()

    @classmethod
    def from_cuda_graph(cls, handle: Any, name: str = "lifted") -> Graph:
        """Read a driver graph made by anyone back into a typed definition.

        Parameters
        ----------
        handle : CUgraph, int, cuda.core GraphDefinition/GraphBuilder, torch.cuda.CUDAGraph, CuPy graph
            The graph (see :func:`cudagraph.lift`).
        name : str
            The definition's name.

        Returns
        -------
        Graph
        """
        from ..materialize.lift import lift

        return lift(handle, name)

    # ---------------------------------------------------------- run / build
    def run(self, stream: Any = None, **params: Any) -> None:
        """Run the definition eagerly, with no graph, in topological order on ``stream``.

        Kernels are launched with ``cuLaunchKernel``, copies and fills are
        issued as async calls, host nodes as host functions. Useful for
        debugging and as the reference the graph builds are checked against.
        Host-callback exceptions are raised after the stream is synchronized.

        Parameters
        ----------
        stream : cuda.core.Stream or object with ``__cuda_stream__``, optional
            Where to run (``None``: the legacy default stream).
        **params
            Values for the graph's parameters.
        """
        from ..materialize.eager import run

        run(self, stream, params)

    # ---------------------------------------------------------- instantiate
    def instantiate(
        self,
        *,
        upload_stream: Any = None,
        auto_free_on_launch: bool = False,
        device_launch: bool = False,
        use_node_priority: bool = False,
        backend: str = "explicit",
        **params: Any,
    ) -> Executable:
        """Validate, build on the driver (``cuGraphCreate`` + ``cuGraphAddNode``) and instantiate.

        Parameters
        ----------
        backend : {"explicit", "capture"}
            ``"explicit"`` (default) adds every node with ``cuGraphAddNode``;
            ``"capture"`` replays the definition onto streams under stream
            capture (events for fan-out and fan-in). Both give an
            :class:`Executable` that behaves the same; a node kind one
            backend cannot express raises an error naming the node.
        upload_stream : cuda.core.Stream or object with ``__cuda_stream__``, optional
            Upload the executable on this stream as part of instantiation.
        auto_free_on_launch : bool
            Free unfreed graph allocations when the executable is relaunched.
            Without it, every :meth:`alloc` must have a :meth:`free` node
            (a :class:`~cudagraph.errors.DefinitionError` names the others).
        device_launch : bool
            Make the executable launchable from the device.
        use_node_priority : bool
            Honour per-node priority launch attributes.
        **params
            Values for the graph's :class:`~cudagraph.Param` objects.

        Returns
        -------
        Executable

        Raises
        ------
        DefinitionError, OperandError, KernelArgumentError
            The definition is not valid.
        DriverError
            A driver call failed; the message names the call and the node.
        DriverUnavailableError
            No NVIDIA driver or GPU was found.
        """
        if not auto_free_on_launch:
            unfreed = self._unfreed_allocs()
            if unfreed:
                names = ", ".join(f"{a.label} of Graph {a.graph.name!r}" for a in unfreed)
                raise DefinitionError(
                    f"Graph {self.name!r}: {names} {'is' if len(unfreed) == 1 else 'are'} never freed; add "
                    "g.free(alloc, after=...) or instantiate with auto_free_on_launch=True"
                )
        from ..executable.executable import instantiate

        return instantiate(
            self,
            upload_stream=upload_stream,
            auto_free_on_launch=auto_free_on_launch,
            device_launch=device_launch,
            use_node_priority=use_node_priority,
            params=params,
            backend=backend,
        )
