"""Changing a node's parameters in place, checked by the node's own builder."""

from __future__ import annotations

from typing import Any

from ..errors import DefinitionError
from .nodes import (
    ChildGraphNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    HostNode,
    KernelNode,
    MemcpyNode,
    MemsetNode,
    Node,
    parameter_slots,
)

__all__ = ["BUILDER_FIELDS", "rebuilt_node", "update_definition_node"]

#: node class -> (builder name, keyword fields accepted by update, fields copied back to the node)
BUILDER_FIELDS: dict[type, tuple[str, tuple[str, ...]]] = {
    KernelNode: ("kernel", ("kernel", "grid", "block", "args", "shared_mem")),
    MemcpyNode: ("memcpy", ("dst", "src", "nbytes")),
    MemsetNode: ("memset", ("dst", "value", "element_size", "width", "height", "pitch")),
    HostNode: ("host", ("fn", "args")),
    EventRecordNode: ("record", ("event",)),
    EventWaitNode: ("wait", ("event",)),
    ChildGraphNode: ("child", ("body",)),
    EmptyNode: ("empty", ()),
}


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

    Raises
    ------
    DefinitionError
        A keyword the node's builder does not take.
    """
    from .graph import Graph

    spec = BUILDER_FIELDS.get(type(node))
    if spec is None:
        raise DefinitionError(f"{node.label}: {type(node).__name__} cannot be updated")
    _builder, fields = spec
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        raise DefinitionError(
            f"{node.label}: update() got unknown keyword(s) {', '.join(unknown)}; "
            f"a {node.kind} node takes {', '.join(fields) or 'none'}"
        )
    values = {f: changes[f] if f in changes else _current(node, f) for f in fields}
    scratch = Graph(node.graph.name)
    scratch._params = node.graph._params
    scratch._nodes = [None] * node.index  # type: ignore[list-item]  # labels keep the node's index
    t = type(node)
    new: Node
    if t is KernelNode:
        new = scratch.kernel(
            values["kernel"],
            values["grid"],
            values["block"],
            values["args"],
            shared_mem=values["shared_mem"],
            name=node.name,
        )
        # Launch attributes (cluster, cooperative, priority, programmatic edges) are kept.
        new.attrs = getattr(node, "attrs", None)  # type: ignore[attr-defined]
    elif t is MemcpyNode:
        new = scratch.memcpy(values["dst"], values["src"], values["nbytes"], name=node.name)
    elif t is MemsetNode:
        assert isinstance(node, MemsetNode)
        pitch = values["pitch"] if values["height"] > 1 else None
        new = scratch.memset(
            values["dst"],
            values["value"] if "value" in changes else _unsigned_value(node),
            width=values["width"],
            height=values["height"],
            pitch=pitch,
            element_size=values["element_size"],
            name=node.name,
        )
    elif t is HostNode:
        new = scratch.host(values["fn"], *values["args"], name=node.name)
    elif t is EventRecordNode:
        new = scratch.record(values["event"], name=node.name)
    elif t is EventWaitNode:
        new = scratch.wait(values["event"], name=node.name)
    elif t is ChildGraphNode:
        assert isinstance(node, ChildGraphNode)
        if values["body"] is not node.body and node.graph in values["body"]._descendants() | {values["body"]}:
            raise DefinitionError(f"{node.label}: Graph {values['body'].name!r} contains Graph {node.graph.name!r}")
        new = scratch.child(values["body"], name=node.name)
    else:
        new = scratch.empty(name=node.name)
    return new


def _unsigned_value(node: MemsetNode) -> int:
    return node.value  # stored masked to the element size, so always in range


def update_definition_node(node: Node, changes: dict[str, Any]) -> None:
    """Apply ``changes`` to ``node`` in its definition (all or nothing)."""
    if not changes:
        return
    new = rebuilt_node(node, changes)
    for slot in parameter_slots(type(node)):
        setattr(node, slot, getattr(new, slot))
