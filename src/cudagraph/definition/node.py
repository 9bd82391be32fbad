"""The node base of a graph definition: :class:`Node`, its spec and the generic helpers (GPU-free).

Every node kind is a subclass of :class:`Node` defined in a module of
:mod:`cudagraph.definition.kinds`. A kind declares, as class-level attributes
(its *spec*), the facts the generic definition code needs: which fields hold
operands, which hold nested graphs, which builder updates it and which
keywords it takes, and how it is drawn. Generic code (validation, diffing,
bindings, rendering, in-place updates) reads the spec; it does not test node
classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, SupportsIndex

from ..errors import DefinitionError
from .edits import before_edit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .core import GraphCore
    from .graph import Graph

__all__ = [
    "Node",
    "bodies_of",
    "child_graphs",
    "graph_address",
    "kept_operands",
    "parameter_slots",
    "rebuilt_node",
    "update_definition_node",
]

Dim3 = tuple[int, int, int]


def graph_address(value: Any) -> bool:
    """Whether ``value`` is an address that exists only once the graph is built (a graph allocation).

    Read from the ``graph_address`` attribute of the value's class
    (:class:`~cudagraph.AllocNode` and :class:`~cudagraph.AllocOffset` set it).
    """
    return getattr(type(value), "graph_address", False) is True


def _short(value: Any) -> str:
    if isinstance(value, int):
        return hex(value)
    if type(value).__name__ in ("AllocNode", "AllocOffset"):
        alloc = getattr(value, "alloc", value)
        off = getattr(value, "offset", 0)
        return f"alloc#{alloc.index}" + (f"+{off}" if isinstance(off, int) and off else "")
    name = getattr(value, "name", None)
    if isinstance(name, str) and type(value).__name__ == "Param":
        return f"${name}"
    return type(value).__name__


class Node:
    """A node of a :class:`~cudagraph.Graph`.

    Nodes are made by the graph's builders (``g.kernel(...)``, ``g.memcpy(...)``,
    ...), never directly. A node records its predecessors; its successors
    are derived from the predecessor lists when first asked for. Edges are
    changed with :meth:`precede`, :meth:`succeed`, :meth:`Graph.add_edge` and
    :meth:`Graph.remove_edge`.

    Attributes
    ----------
    graph : Graph
        The graph the node belongs to.
    index : int
        The node's position in ``graph.nodes`` (creation order).
    name : str
        A label for summaries, pictures and error messages.
    """

    # _succ_list: the successors, set by the graph's GraphCore._fold (unset on a node added since).
    __slots__ = ("graph", "index", "name", "_preds", "_succ_list", "__weakref__")

    # ---------------------------------------------------------------- spec
    #: The kind's name, as shown in labels and summaries.
    kind: ClassVar[str] = "node"
    #: Fields holding one pointer operand each (checked by ``validate()``, scanned for
    #: parameters and graph allocations).
    pointer_fields: ClassVar[tuple[str, ...]] = ()
    #: Fields holding a tuple of kernel arguments, any of which may be an operand.
    arg_fields: ClassVar[tuple[str, ...]] = ()
    #: Fields holding a :class:`~cudagraph.Condition` the node sets (not one that selects its bodies).
    condition_fields: ClassVar[tuple[str, ...]] = ()
    #: Fields holding nested graphs (a ``Graph`` or a tuple of ``Graph``).
    body_fields: ClassVar[tuple[str, ...]] = ()
    #: The nested graphs are conditional bodies (run according to a condition), not a child graph.
    conditional_bodies: ClassVar[bool] = False
    #: The driver accepts this kind inside a conditional body.
    in_conditional_body: ClassVar[bool] = False
    #: The kind may be the source or target of a programmatic (dependent launch) edge.
    programmatic_edges: ClassVar[bool] = False
    #: ``exe[node].enable()`` / ``.disable()`` apply (``cuGraphNodeSetEnabled``: kernel, memcpy, memset).
    toggleable: ClassVar[bool] = False
    #: The builder's keywords :meth:`update` accepts; ``None``: the kind cannot be updated.
    update_fields: ClassVar[tuple[str, ...] | None] = None
    #: Graphviz attributes of the node in :func:`~cudagraph.definition.render.to_dot`.
    dot_style: ClassVar[str] = "shape=box"
    #: Opening and closing brackets of the node in :func:`~cudagraph.definition.render.to_mermaid`.
    mermaid_shape: ClassVar[tuple[str, str]] = ('["', '"]')

    graph: Graph
    index: int
    name: str
    _preds: list[Node]
    _succ_list: list[Node]

    @property
    def _succs(self) -> list[Node]:
        """The successor list, brought up to date first (builders record a new node's edges in its own
        predecessor list only: the graph folds them into the successor lists when they are read)."""
        g = self.graph
        if g._succs_upto != len(g._nodes):
            g._fold()
        return self._succ_list

    @property
    def predecessors(self) -> tuple[Node, ...]:
        """The nodes this node depends on, in the order the edges were added."""
        return tuple(self._preds)

    @property
    def successors(self) -> tuple[Node, ...]:
        """The nodes that depend on this node, in the order the edges were added."""
        return tuple(self._succs)

    @property
    def label(self) -> str:
        """``kind#index 'name'``, the form used in error messages."""
        return f"{self.kind}#{self.index} {self.name!r}"

    def precede(self, *nodes: Node) -> Node:
        """Make every node in ``nodes`` depend on this one; returns ``self``.

        All or nothing: if one edge is refused, none of the call's edges is kept.
        """
        _add_edges(self.graph, [(self, n) for n in nodes])
        return self

    def succeed(self, *nodes: Node) -> Node:
        """Make this node depend on every node in ``nodes``; returns ``self``.

        All or nothing: if one edge is refused, none of the call's edges is kept.
        """
        _add_edges(self.graph, [(n, self) for n in nodes])
        return self

    def __copy__(self) -> Node:
        raise DefinitionError(
            f"{self.label} cannot be copied (its edges belong to Graph {self.graph.name!r}); "
            f"add a new node with the graph's builder instead"
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> Node:
        return self.__copy__()

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        raise DefinitionError(
            f"{self.label} cannot be pickled (it and its edges belong to Graph {self.graph.name!r}); "
            "build the Graph again where it is needed"
        )

    def describe(self) -> str:
        """A one-line description of the node's parameters."""
        return ""

    def update(self, **changes: Any) -> Node:
        """Change this node's parameters in the definition; returns ``self``.

        Takes the keywords of the node's builder (``args=``, ``grid=`` for a
        kernel, ``src=``/``dst=``/``nbytes=`` for a copy, ...). The new values
        are checked as the builder checks them; on error the node is left
        unchanged. Edges are not touched. The next ``instantiate`` or
        ``Executable.update`` sees the change.

        Raises
        ------
        DefinitionError, OperandError
            A keyword the builder does not take, or a bad value.
        """
        update_definition_node(self, changes)
        return self

    def _check(self) -> bool:
        """The kind's checks of ``validate()``; ``True`` if the node needs the whole-tree checks.

        The base checks every pointer field; kinds with other operands override it.
        """
        graph = self.graph
        for field in self.pointer_fields:
            graph._pointer(getattr(self, field), self.label, field)
        return False

    def _rebuild(self, scratch: Graph, values: dict[str, Any], changes: dict[str, Any]) -> Node:
        """A new node made by the kind's builder on ``scratch`` from ``values`` (see :func:`rebuilt_node`)."""
        raise DefinitionError(f"{self.label}: {type(self).__name__} cannot be updated")

    def _memory_accesses(self) -> tuple[tuple[int, Any, int | None, str], ...]:
        """The memory the kind itself reads and writes, each ``(mode, operand, nbytes, field)`` with mode 1 (read)
        or 2 (write) (see :mod:`~cudagraph.definition.access`); none by default."""
        return ()

    def __repr__(self) -> str:
        d = self.describe()
        return f"<{type(self).__name__} #{self.index} {self.name!r}{' ' + d if d else ''} of Graph {self.graph.name!r}>"


def _add_edges(graph: Graph, edges: list[tuple[Node, Node]]) -> None:
    """Add ``edges`` with :meth:`Graph.add_edge`; on the first error, remove those added and re-raise."""
    ordered = graph._ordered
    done: list[tuple[Node, Node]] = []
    try:
        for src, dst in edges:
            graph.add_edge(src, dst)
            done.append((src, dst))
    except BaseException:
        for src, dst in reversed(done):
            graph.remove_edge(src, dst)
        graph._ordered = ordered
        raise


_PARAMETER_SLOTS: dict[type, tuple[str, ...]] = {}


def parameter_slots(cls: type) -> tuple[str, ...]:
    """The slots a node class adds to :class:`Node`: its parameters (and kept operands), cached."""
    slots = _PARAMETER_SLOTS.get(cls)
    if slots is None:
        out: list[str] = []
        for c in cls.__mro__:
            if c is Node or c is object:
                break
            out.extend(s for s in getattr(c, "__slots__", ()) if s != "__weakref__")
        slots = _PARAMETER_SLOTS[cls] = tuple(out)
    return slots


def _set_base(node: Node, graph: GraphCore, index: int, name: str) -> None:
    node.graph = graph  # type: ignore[assignment]  # every GraphCore is a Graph
    node.index = index
    node.name = name
    node._preds = []


def kept_operands(nodes: Sequence[Node]) -> list[Any]:
    """The objects ``nodes`` keep for their driver nodes (their ``_keep``: a callback's copied data, a copy's or a
    fill's operand owners), and those of the nodes of their bodies: what a driver graph built from them reads.

    An executable holds them for as long as it runs the nodes as they were built, so that an edit of the
    definition in place (which replaces a node's ``_keep``) frees nothing the executable still reads.
    """
    out: list[Any] = []
    stack = list(nodes)
    while stack:
        n = stack.pop()
        kept = getattr(n, "_keep", None)
        if kept is not None:
            out.append(kept)
        if n.body_fields:
            for body in bodies_of(n):
                stack.extend(body._nodes)
    return out


def bodies_of(node: Node) -> list[Graph]:
    """The graphs nested in a node (a child graph's body, a conditional's branches), from its ``body_fields``."""
    fields = node.body_fields
    if not fields:
        return []
    out: list[Graph] = []
    for s in fields:
        v = getattr(node, s, None)
        if isinstance(v, (list, tuple)):
            out.extend(v)
        elif v is not None:
            out.append(v)
    return out


def child_graphs(node: Node) -> list[Graph]:
    """The child graphs of a node: its nested graphs unless they are conditional bodies."""
    if not node.body_fields or node.conditional_bodies:
        return []
    return bodies_of(node)


def _current(node: Node, field: str) -> Any:
    value = getattr(node, field)
    keep = getattr(node, "_keep", None)
    # Copies and fills keep the caller's objects next to the resolved addresses.
    if keep is not None and field in ("dst", "src"):
        idx = 0 if field == "dst" else 1
        if idx < len(keep) and keep[idx] is not None:
            return keep[idx]
    return value


def rebuilt_node(node: Node, changes: dict[str, Any]) -> Node:
    """A detached copy of ``node`` with ``changes`` applied, checked by its builder.

    The kind's ``update_fields`` name the keywords taken; its ``_rebuild``
    calls the builder on a scratch graph.

    Raises
    ------
    DefinitionError
        A keyword the node's builder does not take.
    """
    fields = node.update_fields
    if fields is None:
        raise DefinitionError(f"{node.label}: {type(node).__name__} cannot be updated")
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        raise DefinitionError(
            f"{node.label}: update() got unknown keyword(s) {', '.join(unknown)}; "
            f"a {node.kind} node takes {', '.join(fields) or 'none'}"
        )
    values = {f: changes[f] if f in changes else _current(node, f) for f in fields}
    scratch = node.graph._blank(node.graph.name)
    scratch._params = node.graph._params
    scratch._nodes = [None] * node.index  # type: ignore[list-item]  # labels keep the node's index
    return node._rebuild(scratch, values, changes)


def update_definition_node(node: Node, changes: dict[str, Any]) -> None:
    """Apply ``changes`` to ``node`` in its definition (all or nothing)."""
    if not changes:
        return
    new = rebuilt_node(node, changes)
    before_edit(node.graph)
    for slot in parameter_slots(type(node)):
        setattr(node, slot, getattr(new, slot))
    declared = new.graph._declared
    if declared is not None and new in declared:  # wrapped arguments given to update(): their accesses now
        node.graph._declared = {**(node.graph._declared or {}), node: declared[new]}
    # The builder counted the new graph allocations on the scratch graph: count them on the
    # node's own graph too, so that validate() and instantiate() apply the graph-memory checks
    # (allocation of an enclosing graph, ordered between alloc and free) as for a built node.
    node.graph._special += new.graph._special
