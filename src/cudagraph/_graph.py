"""The graph definition: nodes, edges and builders (GPU-free)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from . import _render
from ._nodes import (
    ChildGraphNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    HostNode,
    KernelNode,
    MemcpyNode,
    MemsetNode,
    Node,
    _set_base,
)
from ._operands import normalize_kernel_args, resolve_pointer
from ._param import Param
from ._topology import find_cycle, find_path, format_cycle, kahn_order
from .errors import CycleError, DefinitionError, DuplicateEdgeError, ForeignNodeError, OperandError

if TYPE_CHECKING:
    from ._executable import Executable
    from ._path import Path

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

    __slots__ = ("name", "_nodes", "_ordered", "_nedges", "_params", "__weakref__")

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
            Dynamic shared memory in bytes.
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
        # Hot path: every check below is a type test; messages are built only
        # on failure (see _kernel_slow).
        if type(kernel) not in _KERNEL_TYPES_SEEN:
            _check_kernel(kernel, self._what("kernel", name))
            if type(kernel).__name__ in _KERNEL_TYPES or type(kernel).__module__.startswith("cuda.core"):
                _KERNEL_TYPES_SEEN.add(type(kernel))
        if type(grid) is int and 0 < grid <= 2147483647:
            g: tuple[int, int, int] = (grid, 1, 1)
        else:
            g = _dim3(grid, f"{self._what('kernel', name)}: grid", _MAX_GRID)
        if type(block) is int and 0 < block <= 1024:
            b: tuple[int, int, int] = (block, 1, 1)
        else:
            b = _dim3(block, f"{self._what('kernel', name)}: block", _MAX_BLOCK)
            if b[0] * b[1] * b[2] > 1024:
                raise DefinitionError(
                    f"{self._what('kernel', name)}: block {b} has {b[0] * b[1] * b[2]} threads; the CUDA limit is 1024"
                )
        if shared_mem.__class__ is not int or shared_mem < 0:
            if isinstance(shared_mem, bool) or not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
                raise DefinitionError(
                    f"{self._what('kernel', name)}: shared_mem must be a non-negative int, got {shared_mem!r}"
                )
            shared_mem = int(shared_mem)
        if type(args) is not tuple:
            if not isinstance(args, (list, tuple)):
                raise OperandError(
                    f"{self._what('kernel', name)}: args must be a tuple of kernel arguments, got {type(args).__name__}"
                )
            args = tuple(args)
        nodes = self._nodes
        node = _new(KernelNode)
        if after is None:
            node._preds = []
        elif type(after) is not list and isinstance(after, Node) and after.graph is self:
            node._preds = [after]
            after._succs.append(node)
            self._nedges += 1
        else:
            deps = self._deps(after, self._what("kernel", name))
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
        node.args = args
        nodes.append(node)
        return node

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
        d, dkeep, dsize = resolve_pointer(dst, f"{what}: dst")
        s, skeep, ssize = resolve_pointer(src, f"{what}: src")
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
        d, dkeep, dsize = resolve_pointer(dst, f"{what}: dst")
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
        from ._path import Path

        return Path(self, self._deps(after, "path"))

    # ----------------------------------------------------------------- edges
    def _own(self, node: Any, what: str) -> Node:
        if not isinstance(node, Node):
            raise OperandError(f"{what}: expected a node, got {type(node).__name__}")
        if node.graph is not self:
            raise ForeignNodeError(f"{what}: {node.label} belongs to Graph {node.graph.name!r}, not {self.name!r}")
        return node

    def add_edge(self, src: Node, dst: Node) -> None:
        """Make ``dst`` depend on ``src``.

        Raises
        ------
        ForeignNodeError
            Either node belongs to another graph.
        DuplicateEdgeError
            The edge exists.
        CycleError
            The edge would close a cycle; the message spells the cycle out.
        """
        self._own(src, "add_edge: src")
        self._own(dst, "add_edge: dst")
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
        return out

    def validate(self) -> None:
        """Check the whole definition, child graphs included.

        Checks that every edge joins nodes of this graph, that no edge is
        given twice, that the graph has no cycle, that child graphs are valid
        and do not contain this graph, and that node operands have the right
        kinds.

        Raises
        ------
        ForeignNodeError, DuplicateEdgeError, CycleError, DefinitionError, OperandError
        """
        self._validate(set())

    def _validate_structure(self) -> None:
        """The checks instantiation needs before lowering: cheap when edges were only added forward.

        Operands are checked by the lowering itself, node by node.
        """
        if not self._ordered and kahn_order(self._nodes) is None:
            self._raise_cycle()
        for n in self._nodes:
            if type(n) is ChildGraphNode:
                n.body._validate_structure()  # type: ignore[attr-defined]

    def _validate(self, stack: set[int]) -> None:
        if id(self) in stack:
            raise DefinitionError(f"Graph {self.name!r} contains itself through child nodes")
        stack.add(id(self))
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
                normalize_kernel_args(n.args, n.label)
            elif t is ChildGraphNode:
                assert isinstance(n, ChildGraphNode)
                n.body._validate(stack)
            elif t is MemcpyNode or t is MemsetNode:
                assert isinstance(n, (MemcpyNode, MemsetNode))
                for field in ("dst", "src") if t is MemcpyNode else ("dst",):
                    resolve_pointer(getattr(n, field), f"{n.label}: {field}")
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
        from ._eager import run

        run(self, stream, params)

    # ---------------------------------------------------------- instantiate
    def instantiate(
        self,
        *,
        upload_stream: Any = None,
        auto_free_on_launch: bool = False,
        device_launch: bool = False,
        use_node_priority: bool = False,
        **params: Any,
    ) -> Executable:
        """Validate, build on the driver (``cuGraphCreate`` + ``cuGraphAddNode``) and instantiate.

        Parameters
        ----------
        upload_stream : cuda.core.Stream or object with ``__cuda_stream__``, optional
            Upload the executable on this stream as part of instantiation.
        auto_free_on_launch : bool
            Free unfreed graph allocations when the executable is relaunched.
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
        from ._executable import instantiate

        return instantiate(
            self,
            upload_stream=upload_stream,
            auto_free_on_launch=auto_free_on_launch,
            device_launch=device_launch,
            use_node_priority=use_node_priority,
            params=params,
        )
