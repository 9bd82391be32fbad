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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ..definition import diff as _diff
from ..definition.nodes import KernelNode, Node

if TYPE_CHECKING:
    from ..definition.graph import Graph

__all__ = ["diff_states", "nodes_signature", "topology_signature"]


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
            attributed = [n for n in graph._nodes if type(n) is KernelNode and n.attrs is not None]
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
