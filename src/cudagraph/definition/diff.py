"""Comparing definitions: topology signatures, node states and differences (GPU-free).

:meth:`Executable.update <cudagraph.Executable.update>` and
:class:`~cudagraph.ExecutableCache` run these on every rebuilt definition, so
the functions that visit every node (:func:`topology_signature`,
:func:`diff_states`) are written as single flat loops; in :func:`diff_states`
a kernel node that did not change costs a handful of identity tests and
allocates nothing.
"""

from __future__ import annotations

import itertools
import operator
import threading
import weakref
from array import array
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DefinitionError
from .kinds.kernel import LaunchAttrs, launch_signature
from .node import Node, parameter_slots
from .node import bodies_of as bodies_of
from .nodes import NODE_CLASSES
from .param import Param

if TYPE_CHECKING:
    from .graph import Graph

__all__ = [
    "CODED_CLASSES",
    "KERNEL_LAYOUT_CLASSES",
    "LAUNCH_ATTR_CLASSES",
    "bodies_of",
    "only_class",
    "changed_nodes",
    "describe_launch_diff",
    "describe_topology_diff",
    "diff_states",
    "flat_signature",
    "forget_flat",
    "has_bodies",
    "has_nested_bodies",
    "is_flat",
    "launch_differences",
    "LaunchSignature",
    "node_state",
    "same_value",
    "state_fields",
    "topology_signature",
    "type_code",
    "with_launches",
]

#: The node classes whose nodes carry launch attributes in ``attrs`` (a
#: :class:`~cudagraph.definition.kinds.kernel.LaunchAttrs`, ``None`` for a plain launch): the kinds whose spec
#: declares ``programmatic_edges``, since that field records a node's programmatic edges
#: (:meth:`Graph.add_edge <cudagraph.Graph.add_edge>`). The generic loops test ``type(node) in`` this set,
#: never a class.
LAUNCH_ATTR_CLASSES: frozenset[type[Node]] = frozenset(c for c in NODE_CLASSES if c.programmatic_edges)
#: Those of them that hold no nested graph (the kernel): :func:`topology_signature`'s fast path.
_FLAT_LAUNCHES: frozenset[type[Node]] = frozenset(c for c in LAUNCH_ATTR_CLASSES if not c.body_fields)


def only_class(classes: frozenset[type[Node]]) -> type[Node] | None:
    """The one class of ``classes``, or ``None`` when it has none or several.

    A hot loop keyed off a set of classes tests a node's class as ``t is one or (one is None and t in
    classes)``: one identity test while a single kind has the capability (the common case, as fast as naming
    the class), the set otherwise (``bench/cache_cpu.py``: ``cache.get(g)``, which diffs every node).
    """
    return next(iter(classes)) if len(classes) == 1 else None


_SLOTS_CACHE: dict[type, tuple[str, ...]] = {}


def _slots(cls: type) -> tuple[str, ...]:
    """A node class's parameter slots, without the kept operand objects."""
    slots = _SLOTS_CACHE.get(cls)
    if slots is None:
        slots = _SLOTS_CACHE[cls] = tuple(s for s in parameter_slots(cls) if s != "_keep")
    return slots


def state_fields(cls: type) -> tuple[str, ...]:
    """The slots of node class ``cls`` whose values make a node's recorded state (:func:`node_state`), in order."""
    return _slots(cls)


_BODY_SLOTS: dict[type, tuple[str, ...]] = {}


def _body_slots(cls: type[Node]) -> tuple[str, ...]:
    """The slots that hold nested graphs (the kind's ``body_fields``), cached."""
    slots = _BODY_SLOTS.get(cls)
    if slots is None:
        slots = _BODY_SLOTS[cls] = tuple(s for s in _slots(cls) if s in cls.body_fields)
    return slots


#: Node classes without nested bodies, by their code in a flat graph's signature (assigned on first sight,
#: under :data:`_CODES_LOCK`; the compiled signatures read this tuple, comparing classes by identity).
CODED_CLASSES: tuple[type, ...] = ()
#: ``id(cls) -> code`` (a class is kept in :data:`CODED_CLASSES`, so its id stays its own; no class is hashed).
_CODE_OF: dict[int, int] = {}
_CODES_LOCK = threading.Lock()


def type_code(cls: type) -> int:
    """The code of the node class ``cls`` (one without nested bodies): its position in :data:`CODED_CLASSES`."""
    global CODED_CLASSES
    code = _CODE_OF.get(id(cls))
    if code is None:
        with _CODES_LOCK:
            code = _CODE_OF.get(id(cls))
            if code is None:
                code = len(CODED_CLASSES)
                CODED_CLASSES = (*CODED_CLASSES, cls)
                _CODE_OF[id(cls)] = code
    return code


def flat_signature(items: Sequence[Any]) -> bytes:
    """The signature of a flat graph from its items (a node's class, then its predecessors' indices, per node):
    one native int32 per item, ``2 * code + 1`` for a class and ``2 * index`` for an index."""
    words = array("i", [2 * i if type(i) is int else 2 * type_code(i) + 1 for i in items])
    return words.tobytes()


class LaunchSignature:
    """The launches of a graph's kernel nodes that are not plain, in a :func:`topology_signature`.

    ``items`` is a tuple of ``(index, LaunchAttrs.signature())``, in node order, for the top-level kernel
    nodes with launch attributes (cluster, cooperative, priority, device, ``attributes=``) or programmatic
    edges (by predecessor index and port). Equal only to another ``LaunchSignature`` with equal items.
    """

    __slots__ = ("items",)

    def __init__(self, items: tuple[tuple[int, tuple[Any, ...]], ...]) -> None:
        self.items = items

    def __eq__(self, other: object) -> bool:
        return type(other) is LaunchSignature and self.items == other.items

    def __hash__(self) -> int:
        return hash(self.items)

    def __repr__(self) -> str:
        return f"LaunchSignature({self.items!r})"


def with_launches(signature: Any, attributed: Sequence[Any]) -> Any:
    """``signature`` (of a graph's nodes, kinds and edges) with the launches of the kernel nodes ``attributed``
    (those whose ``attrs`` is not ``None``, in node order): ``(signature, LaunchSignature)``, or ``signature``
    itself when each of them launches as a plain node does (only the large shared memory opt-in)."""
    items = []
    for n in attributed:
        sig = launch_signature(n.attrs)
        if sig is not None:
            items.append((n.index, sig))
    return (signature, LaunchSignature(tuple(items))) if items else signature


def topology_signature(graph: Graph, _bodies: dict[int, Any] | None = None) -> Any:
    """A hashable value equal for two definitions with the same nodes kinds, order, edges and launches.

    Nested bodies (child graphs, conditional branches) are included.

    For each node in creation order: its class, then (for a node with nested
    bodies) a tuple of the bodies' signatures, then the indices of its
    predecessors in edge order. A graph with no nested bodies gets these
    items as :func:`flat_signature` bytes (classes by :func:`type_code`, four bytes an item): the
    compiled signatures write the same bytes, from the nodes or from the
    topology the builders recorded. A graph with nested bodies gets them as one
    flat tuple. Classes, tuples and ints never compare equal to one another,
    so two definitions share a signature only when they agree node by node.

    What the driver holds beyond parameters comes last: when a kernel node
    has launch attributes or programmatic edges (``attrs`` not ``None``), the
    signature is ``(items, LaunchSignature)`` (:func:`with_launches`), so that
    two definitions differing only in a cluster shape, a priority, an
    ``attributes=`` entry or an edge's port never share an executable. A
    plain kernel node costs one slot read.
    """
    out: list[Any] = []
    append = out.append
    launches = _FLAT_LAUNCHES  # kernels, the most common kind, which holds no body: no body lookup
    one = only_class(launches)
    body_slots = _BODY_SLOTS
    nested = False
    attributed: list[Any] | None = None
    for n in graph._nodes:
        t = type(n)
        append(t)
        if t is one or (one is None and t in launches):
            if n.attrs is not None:  # type: ignore[attr-defined]
                if attributed is None:
                    attributed = []
                attributed.append(n)
        else:
            slots = body_slots.get(t)
            if slots is None:
                slots = _body_slots(t)
            if slots:
                nested = True
                if t in LAUNCH_ATTR_CLASSES and n.attrs is not None:  # type: ignore[attr-defined]  # (with bodies)
                    if attributed is None:
                        attributed = []
                    attributed.append(n)
                bodies = bodies_of(n)
                if _bodies is None:
                    _bodies = {}
                for b in bodies:
                    if id(b) not in _bodies:
                        _nested_signature(b, _bodies)
                append(tuple([_bodies[id(b)] for b in bodies]))
        preds = n._preds
        if preds:
            if len(preds) == 1:
                append(preds[0].index)
            else:
                out.extend([p.index for p in preds])
    sig = tuple(out) if nested else flat_signature(out)
    return sig if attributed is None else with_launches(sig, attributed)


def _nested_signature(graph: Graph, done: dict[int, Any]) -> None:
    """Put the :func:`topology_signature` of ``graph`` and of the graphs nested in it in ``done``, by ``id()``.

    The deepest first, on an explicit stack: bodies may nest deeper than recursion goes.
    """
    active: set[int] = set()
    stack: list[tuple[Graph, bool]] = [(graph, False)]
    while stack:
        g, expanded = stack.pop()
        if expanded:
            active.discard(id(g))
            done[id(g)] = topology_signature(g, done)
            continue
        if id(g) in done:
            continue
        if id(g) in active:
            raise DefinitionError(f"Graph {g.name!r} contains itself through child nodes")
        active.add(id(g))
        stack.append((g, True))
        for n in g._nodes:
            if n.body_fields:
                stack.extend((b, False) for b in bodies_of(n) if id(b) not in done)


def has_nested_bodies(cls: type) -> bool:
    """Whether nodes of class ``cls`` hold nested graphs (child graph, conditional branches)."""
    slots = _BODY_SLOTS.get(cls)
    if slots is None:
        slots = _body_slots(cls)
    return bool(slots)


#: graph -> how many of its first nodes are known to hold no nested graph. A node keeps its class
#: and a graph never loses a node, so the answer for those nodes stands.
_FLAT_PREFIX: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def is_flat(graph: Graph) -> bool:
    """Whether no node of ``graph`` holds nested graphs (child graph, conditional branches).

    Read per node class (the set of classes is built in C), and only for the
    nodes added since the last call that found the graph flat.
    """
    nodes = graph._nodes
    count = len(nodes)
    known = _FLAT_PREFIX.get(graph, 0)
    if known == count:
        return True
    kinds = set(map(type, nodes if not known else itertools.islice(nodes, known, None)))
    if any(map(has_nested_bodies, kinds)):
        return False
    _FLAT_PREFIX[graph] = count
    return True


def forget_flat(graph: Graph) -> None:
    """Forget what :func:`is_flat` knows of ``graph`` (its nodes moved: ``Graph.remove``)."""
    _FLAT_PREFIX.pop(graph, None)


def has_bodies(signature: Any) -> bool:
    """Whether a :func:`topology_signature` has a node with nested bodies (child graph, conditional): a tuple
    holding a tuple (a flat graph's signature is bytes, or bytes and a :class:`LaunchSignature`)."""
    return type(signature) is tuple and tuple in set(map(type, signature))


#: type -> whether its values are equal only when they are the same object (kept for
#: types that have an interface on the class, or whose instances hold no attributes).
_BY_IDENTITY: dict[type, bool] = {}
#: The types of :data:`_BY_IDENTITY` whose answer is yes (handed to the compiled diff as they are).
IDENTITY_TYPES: set[type] = set()


def _compared_by_identity(a: Any) -> bool:
    """Arrays and buffers (memory interfaces, DLPack): equal contents do not make the same operand."""
    return not isinstance(a, np.generic) and (
        hasattr(a, "__cuda_array_interface__") or hasattr(a, "__array_interface__") or hasattr(a, "__dlpack__")
    )


def same_value(a: Any, b: Any) -> bool:
    """Equal as node parameters: same object, or same type and equal value (tuples elementwise)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if x is not y and not same_value(x, y):
                return False
        return True
    if type(a) is Param:
        # The same slot in a rebuilt definition: its value is compared through the bindings.
        return bool(a.name == b.name and a.dtype == b.dtype)
    by_identity = _BY_IDENTITY.get(type(a))
    if by_identity is None:
        by_identity = _compared_by_identity(a)
        if by_identity or not hasattr(a, "__dict__"):
            _BY_IDENTITY[type(a)] = by_identity  # instances cannot add the interfaces: one answer per type
            if by_identity:
                IDENTITY_TYPES.add(type(a))
    if by_identity:
        return False  # arrays and buffers: only the same object (their == compares elements)
    try:
        return bool(a == b)
    except Exception:
        return False


_GETTERS: dict[type, tuple[Any, tuple[int, ...]]] = {}


def _getter(cls: type[Node], node: Node) -> tuple[Any, tuple[int, ...]]:
    slots = _slots(cls)
    body = _body_slots(cls)
    nested = tuple(i for i, s in enumerate(slots) if s in body)
    get = operator.attrgetter(*slots) if len(slots) > 1 else (lambda n: (getattr(n, slots[0]),)) if slots else None
    entry = _GETTERS[cls] = (get, nested)
    return entry


def node_state(node: Node) -> tuple[Any, ...]:
    """The node's parameters as a tuple (nested bodies are compared by their own states)."""
    entry = _GETTERS.get(type(node))
    if entry is None:
        entry = _getter(type(node), node)
    get, nested = entry
    if get is None:
        return ()
    vals = get(node)
    if not nested:
        return vals  # type: ignore[no-any-return]
    out: list[Any] = list(vals)
    for i in nested:
        v = out[i]
        if isinstance(v, (list, tuple)):
            out[i] = tuple(tuple(node_state(n) for n in b._nodes) for b in v)
        elif v is not None:
            out[i] = tuple(node_state(n) for n in v._nodes)
    return tuple(out)


#: The layout of a kernel node's state that :func:`diff_states` tests field by field.
_KERNEL_LAYOUT = ("kernel", "grid", "block", "shared_mem", "args", "attrs")
#: The kinds whose state has that layout, found by their slots: kernel launches (the kernel kind), whose nodes
#: the fast paths of :func:`diff_states` and of :meth:`Graph.validate <cudagraph.Graph.validate>` read field by
#: field. The generic loops test ``type(node) in`` this set, never a class.
KERNEL_LAYOUT_CLASSES: frozenset[type[Node]] = frozenset(c for c in NODE_CLASSES if _slots(c) == _KERNEL_LAYOUT)


def diff_states(
    old_states: list[tuple[Any, ...]], graph: Graph, positions: Sequence[int] | None = None
) -> tuple[list[Node], list[tuple[Any, ...]]]:
    """Compare ``graph``'s top-level nodes with the states they had: ``(changed nodes, new states)``.

    ``old_states[i]`` is the :func:`node_state` of node ``i`` of a definition
    of the same topology. A node is changed when its state differs under
    :func:`same_value`. The new states are :func:`node_state` of each node of
    ``graph`` (for as many nodes as ``old_states`` has; a node's position is
    its ``index``).

    A kernel node whose fields are the very objects recorded (its ``args``
    may be a new tuple of the same objects) is recognised without building its
    state, and keeps its old state tuple; every other node is compared
    through :func:`node_state`.

    Parameters
    ----------
    old_states : list of tuple
        The recorded states (not modified).
    graph : Graph
        The definition to compare.
    positions : sequence of int, optional
        Compare only the nodes at these positions (in increasing order); the
        others are known to be unchanged and keep their recorded states.

    Returns
    -------
    changed : list of Node
        The nodes whose parameters differ, in order.
    states : list of tuple
        The states of ``graph``'s nodes.
    """
    nodes: list[Any] = graph._nodes  # Any: the fast test below reads a kernel node's fields
    states = old_states[: len(nodes)]
    changed: list[Node] = []
    fast = KERNEL_LAYOUT_CLASSES
    one = only_class(fast)
    is_ = operator.is_
    pairs = zip(nodes, old_states) if positions is None else ((nodes[i], old_states[i]) for i in positions)
    try:
        for n, s in pairs:
            if type(n) is one or (one is None and type(n) in fast):
                a = n.args
                sa = s[4]
                if n.kernel is s[0] and n.grid is s[1] and n.block is s[2] and n.shared_mem is s[3] and n.attrs is s[5]:
                    if a is not sa:
                        # Only the arguments may differ: compare them alone.
                        if len(a) != len(sa):
                            states[n.index] = (s[0], s[1], s[2], s[3], a, s[5])
                            changed.append(n)
                        elif not all(map(is_, a, sa)):
                            states[n.index] = (s[0], s[1], s[2], s[3], a, s[5])
                            for x, y in zip(a, sa):
                                if x is not y and (type(x) is not type(y) or not same_value(x, y)):
                                    changed.append(n)
                                    break
                    continue
            new = states[n.index] = node_state(n)
            if new is not s and not same_value(new, s):
                changed.append(n)
    except (IndexError, TypeError):
        # A recorded state that is not a kernel's (the topologies differ): compare plainly.
        states = old_states[: len(nodes)]
        changed = []
        for i, (n, s) in enumerate(zip(nodes, old_states)):
            new = states[i] = node_state(n)
            if not same_value(new, s):
                changed.append(n)
    return changed, states


def changed_nodes(
    old_states: list[tuple[Any, ...]], graph: Graph, new_states: list[tuple[Any, ...]] | None = None
) -> list[Node]:
    """Top-level nodes of ``graph`` whose state differs from ``old_states`` (same topology assumed).

    When ``new_states`` is a list, the states of ``graph``'s nodes are appended
    to it (see :func:`diff_states`).
    """
    changed, states = diff_states(old_states, graph)
    if new_states is not None:
        new_states.extend(states)
    return changed


def _value_text(field: str, value: Any) -> str:
    if field == "cooperative":
        return "cooperative" if value else "not cooperative"
    return "none" if value is None else f"{field}={value}"


def launch_differences(
    old: LaunchAttrs | None, new: LaunchAttrs | None
) -> tuple[list[str], dict[int, tuple[str | None, str | None]]]:
    """How the launches of two kernel nodes differ, as the driver nodes would hold them (old vs new).

    Returns
    -------
    attributes : list of str
        One text per launch attribute that differs: ``"cluster=(2, 1, 1) vs none"``, ``"priority=1 vs
        priority=2"``, ``"cooperative vs not cooperative"``, ``"mem_sync_domain=1 vs none"``.
    ports : dict
        ``predecessor index -> (old port, new port)`` for each incoming edge whose type differs
        (``None``: a plain edge; else ``"programmatic"`` or ``"launch_order"``).
    """
    a = launch_signature(old)
    b = launch_signature(new)
    if a == b:
        return [], {}
    plain = LaunchAttrs().signature()
    a = plain if a is None else a
    b = plain if b is None else b
    texts: list[str] = []
    ports: dict[int, tuple[str | None, str | None]] = {}
    for field, x, y in zip(LaunchAttrs.SIGNATURE_FIELDS, a, b):
        if x == y:
            continue
        if field == "programmatic":
            px, py = dict(x), dict(y)
            for i in sorted(set(px) | set(py)):
                if px.get(i) != py.get(i):
                    ports[i] = (px.get(i), py.get(i))
        elif field == "extra":
            ex, ey = dict(x), dict(y)
            for name in sorted(set(ex) | set(ey)):
                vx, vy = ex.get(name), ey.get(name)
                if vx != vy:
                    sx = "none" if vx is None else f"{name}={vx[0] if len(vx) == 1 else vx}"
                    sy = "none" if vy is None else f"{name}={vy[0] if len(vy) == 1 else vy}"
                    texts.append(f"{sx} vs {sy}")
        else:
            texts.append(f"{_value_text(field, x)} vs {_value_text(field, y)}")
    return texts, ports


def describe_launch_diff(
    node: Node, old: LaunchAttrs | None, new: LaunchAttrs | None, where: str = "", edges: set[int] | None = None
) -> list[str]:
    """The differences of :func:`launch_differences` between a kernel node's launch ``old`` and ``new``
    (``node`` of the new definition), as messages naming the node and each edge (only the edges from the
    predecessor indices ``edges``, when given: those both definitions have)."""
    texts, ports = launch_differences(old, new)
    out = [f"{node.label}{where}: launch attributes differ: {', '.join(texts)}"] if texts else []
    nodes = node.graph._nodes
    for i, (x, y) in ports.items():
        if edges is not None and i not in edges:
            continue
        src = nodes[i].label if 0 <= i < len(nodes) and nodes[i] is not None else f"#{i}"
        out.append(f"edge {src} -> {node.label}{where}: {x or 'plain'} vs {y or 'plain'}")
    return out


def describe_topology_diff(old: Graph, new: Graph, _path: str = "") -> list[str]:
    """Human-readable differences in nodes, kinds, edges, edge types and launch attributes between two
    definitions; each reads ``old vs new`` (``"kernel#3 'k': launch attributes differ: cluster=(2, 1, 1) vs
    none"``, ``"edge kernel#1 'a' -> kernel#2 'b': programmatic vs plain"``)."""
    diffs: list[str] = []
    stack = [_graph_diffs(old, new, _path)]  # an explicit stack: bodies may nest deeper than recursion goes
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
        elif type(item) is str:
            diffs.append(item)
        else:
            stack.append(_graph_diffs(*item))  # type: ignore[misc]
    return diffs


def _port_text(node: Any, index: int) -> str:
    """`` (programmatic)`` or `` (launch_order)`` for a programmatic edge into kernel ``node`` from the node at
    ``index``; empty for a plain edge."""
    attrs = node.attrs
    port = None if attrs is None else next((q for p, q in attrs.programmatic if p.index == index), None)
    return f" ({port})" if port else ""


def _graph_diffs(old: Graph, new: Graph, _path: str) -> Iterator[str | tuple[Graph, Graph, str]]:
    """The differences of :func:`describe_topology_diff` in one graph, in order, and each pair of bodies to compare."""
    where = f" in {_path}" if _path else ""
    for a, b in zip(old._nodes, new._nodes):
        if type(a) is not type(b):
            yield f"node #{a.index}{where}: kind changed from {a.kind} ({a.name!r}) to {b.kind} ({b.name!r})"
            continue
        pa = {p.index for p in a._preds}
        pb = {p.index for p in b._preds}
        launched = type(a) in LAUNCH_ATTR_CLASSES and (a.attrs is not None or b.attrs is not None)  # type: ignore[attr-defined]
        for i in sorted(pb - pa):
            yield f"edge added{where}: #{i} -> {b.label}" + (_port_text(b, i) if launched else "")
        for i in sorted(pa - pb):
            yield f"edge removed{where}: #{i} -> {a.label}" + (_port_text(a, i) if launched else "")
        if launched:
            yield from describe_launch_diff(b, a.attrs, b.attrs, where, pa & pb)  # type: ignore[attr-defined]
        for ba, bb in zip(bodies_of(a), bodies_of(b)):
            yield ba, bb, f"{_path}/{a.label}"
    for extra in new._nodes[len(old._nodes) :]:
        yield f"node added{where}: {extra.label}"
    for gone in old._nodes[len(new._nodes) :]:
        yield f"node removed{where}: {gone.label}"
