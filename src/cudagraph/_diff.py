"""Comparing definitions: topology signatures, node states and differences (GPU-free)."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from ._nodes import Node, parameter_slots

if TYPE_CHECKING:
    from ._graph import Graph

__all__ = ["bodies_of", "changed_nodes", "describe_topology_diff", "node_state", "same_value", "topology_signature"]

_SLOTS_CACHE: dict[type, tuple[str, ...]] = {}


def _slots(cls: type) -> tuple[str, ...]:
    """A node class's parameter slots, without the kept operand objects."""
    slots = _SLOTS_CACHE.get(cls)
    if slots is None:
        slots = _SLOTS_CACHE[cls] = tuple(s for s in parameter_slots(cls) if s != "_keep")
    return slots


#: Slots that hold nested graphs: a child graph's ``body``, a conditional's ``bodies``.
_BODY_SLOT_NAMES = ("body", "bodies")
_BODY_SLOTS: dict[type, tuple[str, ...]] = {}


def _body_slots(cls: type) -> tuple[str, ...]:
    slots = _BODY_SLOTS.get(cls)
    if slots is None:
        slots = _BODY_SLOTS[cls] = tuple(s for s in _slots(cls) if s in _BODY_SLOT_NAMES)
    return slots


def bodies_of(node: Node) -> list[Graph]:
    """The graphs nested in a node (a child graph's body, a conditional's branches)."""
    slots = _BODY_SLOTS.get(type(node))
    if slots is None:
        slots = _body_slots(type(node))
    if not slots:
        return []
    out: list[Graph] = []
    for s in slots:
        v = getattr(node, s, None)
        if isinstance(v, (list, tuple)):
            out.extend(v)
        elif v is not None:
            out.append(v)
    return out


def topology_signature(graph: Graph) -> tuple[Any, ...]:
    """A hashable value equal for two definitions with the same nodes kinds, order and edges.

    Nested bodies (child graphs, conditional branches) are included.
    """
    out: list[Any] = []
    append = out.append
    body_slots = _BODY_SLOTS
    for n in graph._nodes:
        t = type(n)
        preds = n._preds
        key = (t, preds[0].index) if len(preds) == 1 else (t, tuple([p.index for p in preds]))
        slots = body_slots.get(t)
        if slots is None:
            slots = _body_slots(t)
        if slots:
            append((key, tuple(topology_signature(b) for b in bodies_of(n))))
        else:
            append(key)
    return tuple(out)


def same_value(a: Any, b: Any) -> bool:
    """Equal as node parameters: same object, or same type and equal value (tuples elementwise)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return False


_GETTERS: dict[type, tuple[Any, bool]] = {}


def _getter(cls: type, node: Node) -> tuple[Any, bool]:
    slots = _slots(cls)
    nested = bool(_body_slots(cls))
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
    from ._graph import Graph

    out: list[Any] = []
    for v in vals:
        if isinstance(v, Graph):
            out.append(tuple(node_state(n) for n in v._nodes))
        elif isinstance(v, (list, tuple)) and v and isinstance(v[0], Graph):
            out.append(tuple(tuple(node_state(n) for n in b._nodes) for b in v))
        else:
            out.append(v)
    return tuple(out)


def _identical(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Every field the same object (tuples such as ``args`` compared element by element)."""
    is_ = operator.is_
    for x, y in zip(a, b):
        if x is y:
            continue
        if type(x) is tuple and type(y) is tuple and len(x) == len(y) and all(map(is_, x, y)):
            continue
        return False
    return True


def changed_nodes(
    old_states: list[tuple[Any, ...]], graph: Graph, new_states: list[tuple[Any, ...]] | None = None
) -> list[Node]:
    """Top-level nodes of ``graph`` whose state differs from ``old_states`` (same topology assumed).

    When ``new_states`` is a list, the states of ``graph``'s nodes are appended to it.
    """
    out: list[Node] = []
    keep = new_states.append if new_states is not None else None
    for n, old in zip(graph._nodes, old_states):
        new = node_state(n)
        if keep is not None:
            keep(new)
        if new is old or _identical(new, old):
            continue
        if not same_value(new, old):
            out.append(n)
    return out


def describe_topology_diff(old: Graph, new: Graph, _path: str = "") -> list[str]:
    """Human-readable differences in nodes, kinds and edges between two definitions."""
    where = f" in {_path}" if _path else ""
    diffs: list[str] = []
    for a, b in zip(old._nodes, new._nodes):
        if type(a) is not type(b):
            diffs.append(f"node #{a.index}{where}: kind changed from {a.kind} ({a.name!r}) to {b.kind} ({b.name!r})")
            continue
        pa = {p.index for p in a._preds}
        pb = {p.index for p in b._preds}
        for i in sorted(pb - pa):
            diffs.append(f"edge added{where}: #{i} -> {b.label}")
        for i in sorted(pa - pb):
            diffs.append(f"edge removed{where}: #{i} -> {a.label}")
        for ba, bb in zip(bodies_of(a), bodies_of(b)):
            diffs.extend(describe_topology_diff(ba, bb, f"{_path}/{a.label}"))
    for extra in new._nodes[len(old._nodes) :]:
        diffs.append(f"node added{where}: {extra.label}")
    for gone in old._nodes[len(new._nodes) :]:
        diffs.append(f"node removed{where}: {gone.label}")
    return diffs
