"""Changing a node's parameters in place, checked by the node's own builder.

The generic code lives in :mod:`cudagraph.definition.node` (each kind's spec
names its keywords, ``update_fields``, and its ``_rebuild`` calls its
builder); this module keeps the names other layers import.
"""

from __future__ import annotations

from .node import rebuilt_node as rebuilt_node
from .node import update_definition_node as update_definition_node
from .nodes import NODE_CLASSES

__all__ = ["BUILDER_FIELDS", "rebuilt_node", "update_definition_node"]

#: node class -> (builder name, keyword fields accepted by update), for the kinds that can be updated
#: (each kind's builder bears the kind's name).
BUILDER_FIELDS: dict[type, tuple[str, tuple[str, ...]]] = {
    cls: (cls.kind, cls.update_fields) for cls in NODE_CLASSES if cls.update_fields is not None
}
