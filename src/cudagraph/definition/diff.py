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
from .node import Node, parameter_slots
from .node import bodies_of as bodies_of
from .nodes import NODE_CLASSES
from .param import Param

if TYPE_CHECKING:
    from .graph import Graph

__all__ = [
    "CODED_CLASSES",
    "bodies_of",
    "changed_nodes",
    "describe_topology_diff",
    "diff_states",
    "flat_signature",
    "forget_flat",
    "has_bodies",
    "has_nested_bodies",
    "is_flat",
    "node_state",
    "same_value",
    "state_fields",
    "topology_signature",
    "type_code",
]

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


def topology_signature(graph: Graph, _bodies: dict[int, Any] | None = None) -> Any:
    """A hashable value equal for two definitions with the same nodes kinds, order and edges.

    Nested bodies (child graphs, conditional branches) are included.

    For each node in creation order: its class, then (for a node with nested
    bodies) a tuple of the bodies' signatures, then the indices of its
    predecessors in edge order. A graph with no nested bodies gets these
    items as :func:`flat_signature` bytes (classes by :func:`type_code`, four bytes an item): the
    compiled signatures write the same bytes, from the nodes or from the
    topology the builders recorded. A graph with nested bodies gets them as one
    flat tuple. Classes, tuples and ints never compare equal to one another,
    so two definitions share a signature only when they agree node by node.
    """
    out: list[Any] = []
    append = out.append
    kernel = _FAST_KERNEL  # the most common kind, which holds no body: no lookup
    body_slots = _BODY_SLOTS
    nested = False
    for n in graph._nodes:
        t = type(n)
        append(t)
        if t is not kernel:
            slots = body_slots.get(t)
            if slots is None:
                slots = _body_slots(t)
            if slots:
                nested = True
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
    return tuple(out) if nested else flat_signature(out)


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
    holding a tuple (a flat graph's signature is bytes)."""
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
#: The kind whose state has that layout (KernelNode), found by its slots; else the fast test is never taken.
_FAST_KERNEL: type | None = next((c for c in NODE_CLASSES if _slots(c) == _KERNEL_LAYOUT), None)


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
    nodes: list[Any] = graph._nodes  # Any: the kernel test below reads KernelNode fields
    states = old_states[: len(nodes)]
    changed: list[Node] = []
    kernel: Any = _FAST_KERNEL
    is_ = operator.is_
    pairs = zip(nodes, old_states) if positions is None else ((nodes[i], old_states[i]) for i in positions)
    try:
        for n, s in pairs:
            if type(n) is kernel:
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


def describe_topology_diff(old: Graph, new: Graph, _path: str = "") -> list[str]:
    """Human-readable differences in nodes, kinds and edges between two definitions."""
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


def _graph_diffs(old: Graph, new: Graph, _path: str) -> Iterator[str | tuple[Graph, Graph, str]]:
    """The differences of :func:`describe_topology_diff` in one graph, in order, and each pair of bodies to compare."""
    where = f" in {_path}" if _path else ""
    for a, b in zip(old._nodes, new._nodes):
        if type(a) is not type(b):
            yield f"node #{a.index}{where}: kind changed from {a.kind} ({a.name!r}) to {b.kind} ({b.name!r})"
            continue
        pa = {p.index for p in a._preds}
        pb = {p.index for p in b._preds}
        for i in sorted(pb - pa):
            yield f"edge added{where}: #{i} -> {b.label}"
        for i in sorted(pa - pb):
            yield f"edge removed{where}: #{i} -> {a.label}"
        for ba, bb in zip(bodies_of(a), bodies_of(b)):
            yield ba, bb, f"{_path}/{a.label}"
    for extra in new._nodes[len(old._nodes) :]:
        yield f"node added{where}: {extra.label}"
    for gone in old._nodes[len(new._nodes) :]:
        yield f"node removed{where}: {gone.label}"
