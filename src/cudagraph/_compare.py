"""Comparing a rebuilt definition with the one an executable runs, through the compiled module.

:class:`~cudagraph.ExecutableCache` and :meth:`Executable.update
<cudagraph.Executable.update>` compute a topology signature and the changed
nodes of every definition they are given, a loop over every node.
:func:`topology_signature` and :func:`diff_states` here give the results of
their namesakes in :mod:`cudagraph._diff` (the definition layer, pure Python,
which stays the reference) and run the loop in C where the compiled module is
available: a node costs a few pointer comparisons instead of a few Python
attribute reads. Graphs with nested bodies (child graphs, conditionals) and
nodes that may have changed are handed to the Python functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _diff
from ._nodes import KernelNode, Node

if TYPE_CHECKING:
    from ._graph import Graph

__all__ = ["diff_states", "topology_signature"]


def _layout() -> Any:
    """The compiled ``Layout`` (made on first use: ``import cudagraph`` loads no driver module), or ``None``."""
    global _LAYOUT, _layout_ready
    if not _layout_ready:
        from ._driver._c_entry import NATIVE

        _LAYOUT = None if NATIVE is None else NATIVE.Layout(KernelNode, Node)
        _layout_ready = True
    return _LAYOUT


_LAYOUT: Any = None
_layout_ready = False
#: Node classes without nested bodies, and those with (a graph holding one is signed in Python).
_FLAT: set[type] = set()
_NESTED: set[type] = set()


def _learn(graph: Graph) -> bool:
    """Classify the node classes of ``graph``; ``True`` when none has nested bodies."""
    flat = True
    for cls in {type(n) for n in graph._nodes}:
        if cls in _FLAT:
            continue
        if cls in _NESTED or _diff.has_nested_bodies(cls):
            _NESTED.add(cls)
            flat = False
        else:
            _FLAT.add(cls)
    return flat


def topology_signature(graph: Graph) -> tuple[Any, ...]:
    """:func:`cudagraph._diff.topology_signature`, computed in C where possible."""
    layout = _LAYOUT if _layout_ready else _layout()
    if layout is not None:
        sig = layout.signature(graph._nodes, _FLAT)
        if sig is None and _learn(graph):
            sig = layout.signature(graph._nodes, _FLAT)
        if sig is not None:
            return sig  # type: ignore[no-any-return]
    return _diff.topology_signature(graph)


def diff_states(old_states: list[tuple[Any, ...]], graph: Graph) -> tuple[list[Node], list[tuple[Any, ...]]]:
    """:func:`cudagraph._diff.diff_states`; the kernel nodes whose fields are the very objects
    recorded are recognised in C, and only the others are compared in Python."""
    layout = _LAYOUT if _layout_ready else _layout()
    if layout is None:
        return _diff.diff_states(old_states, graph)
    return _diff.diff_states(old_states, graph, layout.diff(graph._nodes, old_states))
