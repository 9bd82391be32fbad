"""Comparing a rebuilt definition with the one an executable runs, through the compiled module.

:class:`~cudagraph.ExecutableCache` and :meth:`Executable.update
<cudagraph.Executable.update>` compute a topology signature and the changed
nodes of every definition they are given, a loop over every node. The
functions here choose, per call, between the compiled ``Layout``
(``cudagraph.driver._native``, an accelerator) and its pure-Python twins in
:mod:`cudagraph.definition.diff` (the definition layer, which stay the
reference):

- :func:`topology_signature`: ``Layout.signature``, twin of
  :func:`cudagraph.definition.diff.topology_signature`;
- :func:`diff_states`: ``Layout.diff``, twin of
  :func:`cudagraph.definition.diff.diff_states`.

Where the compiled module is available the loop runs in C: a node costs a few
pointer comparisons instead of a few Python attribute reads (kernel nodes, and
fills and 1-D copies whose fields are the recorded objects or ints). Graphs
with nested bodies (child graphs, conditionals) and the nodes C leaves
undecided are handed to the Python twins. The CPU tests run both on the same graphs and compare the
results (``tests/test_cache_cpu.py``, ``tests/test_native_cpu.py``).

A rebuilt definition holds objects of its own where the states hold references to other objects of
the definition: an allocation (a kernel argument, a fill's destination, the node a free node frees), a
condition (of a conditional node, a ``set_condition`` node, a kernel argument). Such states differ
from the recorded ones by identity only; :class:`Correspondence` pairs the objects of the two
definitions by place, and :meth:`Correspondence.same` compares states through it; a :class:`LateMove`
gives the rebuilt objects the addresses and handles the executable's lowered graph holds for theirs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ..definition import diff as _diff
from ..definition.condition import Condition
from ..definition.diff import bodies_of, same_value
from ..definition.nodes import AllocOffset, Node

if TYPE_CHECKING:
    from ..definition.graph import Graph
    from ..ops.lower_state import LowerState

__all__ = ["Correspondence", "LateMove", "diff_states", "nodes_signature", "topology_signature"]


def _layout() -> Any:
    """The compiled ``Layout`` (:func:`cudagraph.ops.compiled_kinds.compiled_layout`), or ``None``; kept in
    :data:`_LAYOUT` once asked for (with :data:`_value_types`). Imported on first use: the definition layer's
    users import this module without the driver's."""
    global _LAYOUT, _layout_ready, _value_types
    if not _layout_ready:
        from ..driver.kernel_args import value_types
        from ..ops.compiled_kinds import compiled_layout

        _LAYOUT = compiled_layout()
        _value_types = value_types()
        _layout_ready = True
    return _LAYOUT


_LAYOUT: Any = None
_layout_ready = False
#: :func:`cudagraph.driver.kernel_args.value_types`, read by :func:`_layout` (the numpy scalar types the diff
#: compares by value in C).
_value_types: tuple[Any, ...] = ()
#: Node classes with nested bodies (a graph holding one is signed in Python); those without are the
#: definition layer's coded classes (:data:`cudagraph.definition.diff.CODED_CLASSES`).
_NESTED: set[type] = set()


def _learn(graph: Graph) -> bool:
    """Classify the node classes of ``graph``; ``True`` when none has nested bodies."""
    flat = True
    for cls in {type(n) for n in graph._nodes}:
        if cls in _NESTED or _diff.has_nested_bodies(cls):
            _NESTED.add(cls)
            flat = False
        else:
            _diff.type_code(cls)  # coded once: the signatures written in C read the codes
    return flat


def topology_signature(graph: Graph) -> Any:
    """:func:`cudagraph.definition.diff.topology_signature`, computed in C where possible: from the topology the
    builders recorded (``Graph._topo``, when it saw every node and no edit since; a graph whose kernel nodes
    have launch attributes or programmatic edges has none), else from the nodes, the launch signatures of
    the kernel nodes with attributes being added in Python (looked for only in a graph that may have some:
    ``Graph._attributed``)."""
    layout = _LAYOUT if _layout_ready else _layout()
    if layout is not None:
        codes = _diff.CODED_CLASSES
        record = getattr(graph, "_topo", None)  # (a graph placed in C; _Nodes has none)
        if record is not None:
            sig = record.signature(graph._nodes, codes)
            if sig is not None:
                return sig
        sig = layout.signature(graph._nodes, codes)
        if sig is None and _learn(graph):  # (which may code new classes: the tuple is read again)
            sig = layout.signature(graph._nodes, _diff.CODED_CLASSES)
        if sig is not None:
            if not getattr(graph, "_attributed", True):
                return sig
            launches = _diff.LAUNCH_ATTR_CLASSES
            attributed = [n for n in graph._nodes if type(n) in launches and n.attrs is not None]  # type: ignore[attr-defined]
            return _diff.with_launches(sig, attributed) if attributed else sig
    return _diff.topology_signature(graph)


class _Nodes:
    """What :func:`topology_signature` reads of a graph: its node list."""

    __slots__ = ("_nodes",)

    def __init__(self, nodes: list[Node]) -> None:
        self._nodes = nodes


def nodes_signature(nodes: list[Node]) -> Any:
    """:func:`topology_signature` of a definition whose top-level nodes are ``nodes`` (a list recorded earlier:
    nodes appended to the definition since are left out; the predecessors are read now)."""
    return topology_signature(cast("Graph", _Nodes(nodes)))


def diff_states(old_states: list[tuple[Any, ...]], graph: Graph) -> tuple[list[Node], list[tuple[Any, ...]]]:
    """:func:`cudagraph.definition.diff.diff_states`, with the kernel nodes decided in C where their fields
    are the very objects recorded and their arguments are the same objects, or differ plainly
    (another type, a buffer, another int or float), or are numpy scalars of a type the packer learned
    (compared by their value's bytes, as ``==`` compares them); the other nodes are compared in Python."""
    layout = _LAYOUT if _layout_ready else _layout()
    if layout is None:
        return _diff.diff_states(old_states, graph)
    nodes = graph._nodes
    states = old_states[: len(nodes)]
    found, suspects = layout.diff(nodes, states, _diff.IDENTITY_TYPES, _value_types)
    if not suspects:
        return found, states
    more, states = _diff.diff_states(states, graph, suspects)
    if not found:
        return more, states
    changed = found + more
    changed.sort(key=_index)
    return changed, states


def _index(node: Node) -> int:
    return node.index


class Correspondence:
    """The objects of a rebuilt definition that stand where those of the definition an executable runs stood.

    Node ``i`` of a graph corresponds to node ``i`` of its counterpart, body ``j`` of a node to body ``j`` of
    its counterpart, from the top-level nodes down (the definitions have the same topology signature).

    Parameters
    ----------
    old : Graph
        The definition the executable runs.
    old_nodes : sequence of Node
        Its top-level nodes as lowered (``LoweredGraph.nodes``: those the recorded states are of).
    new : Graph
        The rebuilt definition.

    Attributes
    ----------
    graphs : list of (Graph, Graph)
        Each graph of ``old`` (the definition, then the bodies) with its counterpart in ``new``.
    """

    __slots__ = ("_graph_of", "_nodes", "graphs")

    def __init__(self, old: Graph, old_nodes: list[Node], new: Graph) -> None:
        nodes: dict[int, tuple[Node, Node]] = {}
        graphs: list[tuple[Graph, Graph]] = [(old, new)]
        stack: list[tuple[list[Node], list[Node]]] = [(old_nodes, new._nodes)]
        while stack:
            olds, news = stack.pop()
            for o, n in zip(olds, news):
                nodes[id(o)] = (o, n)
                if o.body_fields and type(o) is type(n):
                    for ob, nb in zip(bodies_of(o), bodies_of(n)):
                        graphs.append((ob, nb))
                        stack.append((ob._nodes, nb._nodes))
        self._nodes = nodes
        self.graphs = graphs
        self._graph_of = {id(og): ng for og, ng in graphs}

    def node_of(self, old: Any) -> Node | None:
        """The node of the rebuilt definition at the place of ``old`` (``None``: ``old`` has no place here)."""
        entry = self._nodes.get(id(old))
        return entry[1] if entry is not None and entry[0] is old else None

    def same(self, old: Any, new: Any) -> bool:
        """Whether ``old`` (a recorded state, or a value in one) and ``new`` (of the rebuilt definition) set the
        same parameters: equal (:func:`~cudagraph.definition.diff.same_value`), or objects of the definitions
        at the same place (nodes, allocation offsets, conditions of the same default)."""
        if old is new:
            return True
        t = type(old)
        if t is not type(new):
            return False
        if t is tuple:
            return len(old) == len(new) and all(map(self.same, old, new))
        if isinstance(old, Node):
            return self.node_of(old) is new
        if t is Condition:
            return bool(
                self._graph_of.get(id(old.graph)) is new.graph and old.index == new.index and old.default == new.default
            )
        if t is AllocOffset:
            return bool(old.offset == new.offset) and self.node_of(old.alloc) is new.alloc
        return same_value(old, new)


class LateMove:
    """The entries a rebuilt definition's objects got in a :class:`~cudagraph.ops.lower_state.LowerState`.

    The lowered graph keeps the addresses of its allocations (``state.allocs``), its condition
    handles (``state.conds``) and its driver graphs (``state.graphs``) by the ids of the
    definition's objects: for a rebuilt definition of the same topology to be set node by node
    (or rebound later), its objects get the entries of the objects at their places. Those of the
    definition lowered stay (the nested nodes of the node map are of that one); those of an
    earlier rebuilt definition go once the next one is adopted.

    Attributes
    ----------
    state : LowerState
        The state moved.
    saved : tuple of dict
        Copies of ``allocs``, ``conds`` and ``graphs`` as they were before the move (to undo it).
    allocs, conds, graphs : list
        The keys added to each.
    """

    __slots__ = ("allocs", "conds", "graphs", "saved", "state", "_uses")

    def __init__(self, state: LowerState, corr: Correspondence) -> None:
        self.state = state
        self.saved = (dict(state.allocs), dict(state.conds), dict(state.graphs))
        self.allocs: list[int] = []
        self.conds: list[tuple[int, int]] = []
        self.graphs: list[int] = []
        # The keys of the rebuilt definition's objects found present already (of the definition lowered, run
        # again, or of a body an earlier rebuilt definition shared): see replace().
        uses: tuple[set[Any], set[Any], set[Any]] = (set(), set(), set())
        self._uses = uses
        for old, addr in list(state.allocs.values()):
            new = corr.node_of(old)
            if new is None:
                continue
            if id(new) in state.allocs:
                uses[0].add(id(new))
            else:
                state.allocs[id(new)] = (new, addr)  # type: ignore[assignment]
                self.allocs.append(id(new))
        conds: dict[int, Any] = {}  # id(condition of the definition run) -> the condition at its place
        for old_graph, new_graph in corr.graphs:
            handle = state.graphs.get(id(old_graph))
            if handle is not None:
                if id(new_graph) in state.graphs:
                    uses[2].add(id(new_graph))
                else:
                    state.graphs[id(new_graph)] = handle
                    self.graphs.append(id(new_graph))
            for oc, nc in zip(old_graph._conditions, new_graph._conditions):
                conds[id(oc)] = nc
        for (cid, gh), h in list(state.conds.items()):
            moved = conds.get(cid)
            if moved is None:
                continue
            key = (id(moved), gh)
            if key in state.conds:
                uses[1].add(key)
            else:
                state.conds[key] = h
                self.conds.append(key)

    def undo(self) -> None:
        """Put the state back as it was before the move."""
        state = self.state
        allocs, conds, graphs = self.saved
        state.allocs.clear()
        state.allocs.update(allocs)
        state.conds.clear()
        state.conds.update(conds)
        state.graphs.clear()
        state.graphs.update(graphs)

    def replace(self, previous: LateMove) -> None:
        """Drop the entries ``previous`` (the move of the definition run until now) added, but those of objects
        the rebuilt definition shares with it, which become this move's."""
        state = self.state
        tables: tuple[tuple[list[Any], list[Any], set[Any], dict[Any, Any]], ...] = (
            (self.allocs, previous.allocs, self._uses[0], state.allocs),
            (self.conds, previous.conds, self._uses[1], state.conds),
            (self.graphs, previous.graphs, self._uses[2], state.graphs),
        )
        for mine, theirs, used, table in tables:
            for key in theirs:
                if key in used:
                    mine.append(key)
                else:
                    table.pop(key, None)
