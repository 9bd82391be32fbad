"""The storage every builder works on: :class:`GraphCore`, the base of :class:`~cudagraph.Graph` (GPU-free).

The builder mixins of :mod:`cudagraph.definition.kinds` derive from
:class:`GraphCore` and use only what it holds: the node list, the edge count,
the parameters and conditions, and the helpers that record a node's
dependencies and resolve its pointer operands. :class:`~cudagraph.Graph`
composes the mixins and adds edges, inspection, validation, rendering and the
materializer entry points.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, Union

from ..errors import DefinitionError, DuplicateEdgeError, ForeignNodeError, OperandError
from .addresses import BUFFER_TYPES, resolve_buffer
from .node import Node, _set_base, bodies_of, graph_address
from .operands import resolve_pointer
from .param import Param
from .param_offset import ParamAt

if TYPE_CHECKING:
    from .condition import Condition
    from .graph import Graph
    from .kinds.conditionals import ConditionalNode

__all__ = ["MAX_NESTING", "NODE_CLASSES", "After", "DimLike", "GraphCore", "builder", "check_size"]

#: How deep child graphs and conditional bodies may nest (a body of the graph
#: being built is level 1). :meth:`Graph.validate` and instantiation refuse a
#: deeper definition with a :class:`~cudagraph.errors.DefinitionError` naming the
#: node whose body is too deep: building, capturing and running a definition
#: visit bodies by recursion, a few Python frames per level.
MAX_NESTING = 128

After = Union[Node, Sequence[Node], None]
DimLike = Union[int, Sequence[int]]


_F = TypeVar("_F", bound=Callable[..., Any])

#: Node classes met in ``after=`` (every one a :class:`Node` subclass): the builders' hot paths test a
#: dependency with one set lookup (bench/define_tricks.py).
NODE_CLASSES: set[type] = set()


def builder(fn: _F) -> _F:
    """Mark a method of a builder mixin as a builder: it adds one node and takes ``after=``.

    :class:`~cudagraph.Path` offers every marked method, chained after the
    path's previous op. Returns ``fn`` itself.
    """
    fn.__cudagraph_builder__ = True  # type: ignore[attr-defined]
    return fn


def check_size(value: Any, what: str, field: str) -> int:
    """A positive integer below 2**63, or the error naming ``field`` of ``what``."""
    if type(value) is int and 0 < value < 1 << 63:  # (the message is made only for an error)
        return value
    try:
        v = operator.index(value)
    except Exception:  # TypeError, or whatever a user __index__ raises
        raise OperandError(f"{what}: {field} must be an integer, got {type(value).__name__}") from None
    if v <= 0:
        raise DefinitionError(f"{what}: {field} must be positive, got {v}")
    if v >= 1 << 63:
        raise DefinitionError(f"{what}: {field} = {v} overflows 64 bits")
    return v


class GraphCore:
    """Nodes, edge count, parameters and conditions of a definition, and the helpers builders share.

    Not used on its own: :class:`~cudagraph.Graph` is the class to build with.
    """

    __slots__ = (
        "name",
        "_nodes",
        "_ordered",
        "_nedges",
        "_succs_upto",
        "_params",
        "_special",
        "_owner",
        "_conditions",
        "_order",
        "_edge_set",
        "_edge_seen",
        "_lock",
        "_topo",
        "_attributed",
        "_declared",
        "_inference",
        "__weakref__",
    )

    def __init__(self, name: str = "graph", *, edges: str = "manual") -> None:
        if not isinstance(name, str):
            raise OperandError(f"Graph name must be a str, got {type(name).__name__}")
        self.name = name
        # Declared accesses by node (cudagraph.definition.access), None until the first; the edge inference
        # state of a Graph(edges="auto") (cudagraph.definition.auto_edges, set by its class), else None.
        self._declared: dict[Node, Any] | None = None
        self._inference: Any = None
        self._nodes: list[Node] = []
        # True while every edge goes from a lower to a higher index, which
        # makes creation order a topological order and the graph acyclic.
        self._ordered = True
        # The edges of the first _succs_upto nodes are in their predecessors' successor lists and in
        # _nedges (with every edge add_edge and remove_edge changed): builders record a new node's
        # edges in its own predecessor list only, and _fold derives the rest when it is read.
        self._nedges = 0
        self._succs_upto = 0
        self._params: dict[str, Param] = {}
        # Nodes that need the checks of _checks.check_tree (conditionals, graph memory, late operands).
        self._special = 0
        # True once a kernel node may have been given launch attributes or a programmatic edge: the topology
        # signature then looks for them (cudagraph.executable.compare); False spares that look.
        self._attributed = False
        # The conditional node whose body this graph is (None for a graph of its own).
        self._owner: ConditionalNode | None = None
        self._conditions: list[Condition] = []
        # Positions of a topological order kept by add_edge once an edge goes backward by index
        # (empty while the index order is one; see topology.keep_order).
        self._order: list[int] = []
        # Every (src, dst) edge of the first _edge_seen nodes (and the edges added by add_edge since),
        # for add_edge's duplicate test; builders add the edges of a new node only to its lists.
        self._edge_set: set[tuple[Node, Node]] = set()
        self._edge_seen = 0
        # Held by add_edge, remove_edge and _fold (builders need no lock: see Graph); reentrant, as the
        # edits read successor lists, which may fold the nodes other threads added meanwhile.
        self._lock = threading.RLock()
        # The topology as nodes are placed in C (_define_topology.c), read by the topology signature; None
        # without the compiled module, and once an edit changed an existing node's predecessors or index.
        record = self._record_type
        self._topo: Any = None if record is None else record()

    def __copy__(self) -> GraphCore:
        raise DefinitionError(
            f"Graph {self.name!r} cannot be copied (its nodes and edges belong to it); build a new Graph instead"
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> GraphCore:
        return self.__copy__()

    def _blank(self, name: str) -> Graph:
        """A new empty :class:`~cudagraph.Graph` (a conditional body, or the scratch graph of an update)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ deps
    def _dep_list(self, after: Any) -> list[Node] | None:
        """``after`` as a new list when it is a list or tuple of distinct nodes of this graph (classes met
        before), else ``None``: :meth:`_deps` decides (it names what is wrong). Builds no message."""
        t = type(after)
        if t is not list and t is not tuple:
            return None
        deps = list(after)
        known = NODE_CLASSES
        for d in deps:
            if type(d) not in known or d.graph is not self:
                return None
        k = len(deps)
        if k == 2:
            if deps[0] is deps[1]:
                return None
        elif k > 2 and len(set(map(id, deps))) != k:
            return None
        return deps

    def _deps(self, after: Any, what: str) -> list[Node]:
        if after is None:
            return []
        if isinstance(after, Node):
            if after.graph is not self:
                raise ForeignNodeError(
                    f"{what}: after= names {after.label} of Graph {after.graph.name!r}, not of {self.name!r}"
                )
            NODE_CLASSES.add(type(after))
            return [after]
        if isinstance(after, (list, tuple)):
            deps = self._dep_list(after)
            if deps is not None:
                return deps
            try:
                deps = list(after)  # (a list or tuple subclass: its __iter__ is user code)
            except Exception as exc:
                raise OperandError(
                    f"{what}: after= could not be read ({type(exc).__name__} raised by its __iter__)"
                ) from exc
            for d in deps:
                if not isinstance(d, Node):
                    raise OperandError(f"{what}: after= must hold nodes, got {type(d).__name__}")
                NODE_CLASSES.add(type(d))
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

    #: ``KernelMethod.place`` of the compiled ``Graph.kernel`` (``compiled_kernel.py``), or ``None``: places a
    #: new node in C (bench/cpu_overhead.py: joins defined, compiled vs Python).
    _placer: ClassVar[Any] = None
    #: ``KernelMethod.validate`` of the compiled ``Graph.kernel``, or ``None``: passes runs of plain kernel nodes
    #: in :meth:`Graph.validate <cudagraph.Graph.validate>` in C.
    _validator: ClassVar[Any] = None
    #: ``TopologyRecord`` of the compiled module (``_define_topology.c``), made for each graph, or ``None``.
    _record_type: ClassVar[Any] = None

    def _place(self, node: Node, after: Any, what: str | None, name: Any) -> Node:
        """Place the new ``node`` (its own fields set) in this graph after ``after``, named ``name``.

        The compiled placer does it where built, ``name`` is a str and the predecessors are plain; else
        :meth:`_deps` checks ``after`` (its errors name ``what``, by default the node's kind and ``name``,
        which must be a str) and :meth:`_add` links the node. Nothing is changed on an error.
        """
        placer = self._placer
        if placer is not None and placer(self, node, after, name):
            return node
        if what is None:
            what = self._what(node.kind, name)
        deps = self._deps(after, what)
        _set_base(node, self, len(self._nodes), name)
        return self._add(node, deps)

    def _add(self, node: Node, deps: list[Node]) -> Node:
        node._preds = deps
        nodes = self._nodes
        i = len(nodes)
        nodes.append(node)
        # The position it took, even if another thread added a node meanwhile.
        node.index = i if nodes[i] is node else nodes.index(node, i)
        self._record(node)
        return node

    def _record(self, node: Node) -> None:
        """Write ``node``, just appended by Python code, in the topology record (dropped if it cannot take it)."""
        record = self._topo
        if record is not None and not record.add(node):
            self._topo = None

    def _fold(self) -> None:
        """Add the edges of the nodes added since the last fold to their predecessors' successor lists
        and to the edge count (see :meth:`Node._succs`), under the graph's lock; all or nothing."""
        if self._succs_upto == len(self._nodes):
            return
        with self._lock:
            end = len(self._nodes)  # nodes appended meanwhile by other threads are taken next time
            new = self._nodes[self._succs_upto : end]
            for n in new:
                n._succ_list = []
            linked = 0
            try:
                for n in new:
                    for p in n._preds:
                        p._succ_list.append(n)
                    linked += 1
            except BaseException:  # (no memory, an interrupt) undone: each entry is the last of its list
                for n in reversed(new[: linked + 1]):
                    for p in reversed(n._preds):
                        succs = p._succ_list
                        if succs and succs[-1] is n:
                            succs.pop()
                raise
            self._nedges += sum(len(n._preds) for n in new)
            self._succs_upto = end

    def _edges_now(self) -> set[tuple[Node, Node]]:
        """:attr:`_edge_set`, with the edges of the nodes added since it was last brought up to date."""
        es = self._edge_set
        nodes = self._nodes
        end = len(nodes)  # nodes appended meanwhile by other threads are taken next time
        for i in range(self._edge_seen, end):
            n = nodes[i]
            for p in n._preds:
                es.add((p, n))
        self._edge_seen = end
        return es

    def _what(self, kind: str, name: str | None) -> str:
        if name is not None and not isinstance(name, str):
            raise OperandError(f"{kind}#{len(self._nodes)}: name must be a str, got {type(name).__name__}")
        return f"{kind}#{len(self._nodes)} {name or kind!r}"

    # ------------------------------------------------------ late operands
    def _pointer(self, obj: Any, what: str, field: str, allow_null: bool = False) -> tuple[Any, Any, int | None]:
        """:func:`resolve_pointer` of operand ``field`` of ``what``, plus graph allocations (whose address
        exists only once built)."""
        t = type(obj)
        if t is int and 0 < obj < 1 << 64:  # (the label is made only for the other operands)
            return obj, None, None
        label = f"{what}: {field}"
        if t in BUFFER_TYPES:
            return resolve_buffer(obj, label, allow_null)
        if graph_address(obj):
            return obj, None, obj.nbytes
        if t is ParamAt:
            return obj, None, None
        if t is Param:
            self._own_param(obj, label)
        return resolve_pointer(obj, label, allow_null)

    def _own_param(self, param: Param, what: str) -> None:
        """Take in a parameter of another graph, or refuse it when this graph has another of its name.

        A parameter of this graph, or of an enclosing graph of a conditional
        body, is used as is. A parameter declared on another graph (a graph
        this one will be a child of, for example) is added to this graph's
        parameters, so that it is listed, validated and bound like its own.

        Raises
        ------
        ForeignNodeError
            This graph (or an enclosing one) has another parameter of that name.
        """
        mine = self._params.get(param.name)
        if mine is param:
            return
        g = self._owner.graph if self._owner is not None else None
        while g is not None:
            theirs = g._params.get(param.name)
            if theirs is param:
                return
            if mine is None:
                mine = theirs
            g = g._owner.graph if g._owner is not None else None
        if mine is None:
            self._params[param.name] = param
            return
        raise ForeignNodeError(
            f"{what}: param {param.name!r} of Graph {param.graph.name!r} is not the param {param.name!r} "
            f"of Graph {mine.graph.name!r}; use {mine.graph.name}.param({param.name!r})"
        )

    def _kernel_params(self, args: tuple[Any, ...], name: str | None) -> None:
        """:meth:`_own_param` for every parameter among the arguments ``args`` of kernel ``name``."""
        for i, a in enumerate(args):
            if type(a) is Param and self._params.get(a.name) is not a:
                self._own_param(a, f"{self._what('kernel', name)}: argument {i}")

    def _note_late(self, *ptrs: Any) -> None:
        """Count operands that are graph allocations (they need the checks of :meth:`validate`)."""
        for p in ptrs:
            if type(p) is not int and graph_address(p):  # (an int is the common case: no class lookup)
                self._special += 1

    def _descendants(self) -> set[Graph]:
        """Every graph nested in this one (child graphs and conditional bodies, at any depth)."""
        out: set[Graph] = set()
        stack: list[GraphCore] = [self]
        while stack:
            g = stack.pop()
            for n in g._nodes:
                if n.body_fields:
                    for b in bodies_of(n):
                        if b not in out:
                            out.add(b)
                            stack.append(b)
        return out
