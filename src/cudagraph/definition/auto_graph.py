"""The class of a ``Graph(edges="auto")``: every builder, then the new node's edges from data (GPU-free).

:class:`AutoBuilders` is mixed in before :class:`~cudagraph.Graph`: each of its builders (one per builder of
:class:`~cudagraph.definition.builders.Builders`) calls the graph's own, then hands the new node to the graph's
:class:`~cudagraph.definition.auto_edges.EdgeInference`. The compiled ``Graph.kernel`` and placer build the node
as for any graph; the edges from data are appended to its predecessors afterwards.
"""

from __future__ import annotations

import functools
from typing import Any

from .auto_edges import EdgeInference
from .builders import Builders, builder_names

__all__ = ["AutoBuilders", "settle_all"]


def _auto_op(name: str) -> Any:
    """The builder ``name`` of an auto-edge graph: the graph's builder, then the new node's edges from data."""
    bases: dict[type, Any] = {}  # the class of the graph -> its own builder (looked up once)

    def op(self: Any, *args: Any, **kwargs: Any) -> Any:
        inference: EdgeInference = self._inference
        if inference.pending is not None:
            _settle(self)
        cls = type(self)
        base = bases.get(cls)
        if base is None:
            base = bases[cls] = getattr(super(AutoBuilders, cls), name)
        node = base(self, *args, **kwargs)
        inference.add(self, node)
        return node

    op.__name__ = op.__qualname__ = name
    op.__cudagraph_builder__ = True  # type: ignore[attr-defined]
    return op


def _settled(name: str) -> Any:
    """The method ``name`` of an auto-edge graph, run once every pending conditional node has its edges."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        settle_all(self)
        return getattr(super(AutoBuilders, self), name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    return method


def _settle(graph: Any) -> None:
    """Infer the edges of ``graph``'s pending conditional node, if any (see :func:`_link_late`)."""
    inference: EdgeInference = graph._inference
    node = inference.pending
    if node is None:
        return
    before = len(node._preds)
    inference.settle(graph)
    _link_late(graph, node, before)


def _link_late(graph: Any, node: Any, before: int) -> None:
    """Link the edges from data given to ``node`` (its predecessors past the first ``before``) where its
    edges were folded already (a read of successors or of the edge count since a pending conditional node
    was made), as ``add_edge`` links one: in the successor lists, the edge count and the edge set."""
    new = node._preds[before:]
    if not new or node.graph is not graph or node.index >= graph._succs_upto:
        return
    with graph._lock:
        for p in new:
            p._succ_list.append(node)
        graph._nedges += len(new)
        if node.index < graph._edge_seen:
            graph._edge_set.update((p, node) for p in new)


def settle_all(graph: Any) -> None:
    """Infer the edges of every pending conditional node in ``graph`` and in the graphs nested in it."""
    for g in (graph, *graph._descendants()):
        if g._inference is not None:
            _settle(g)


class AutoBuilders:
    """The builders of a ``Graph(edges="auto")``: each is the graph's builder, then the edges from data.

    Mixed in before :class:`~cudagraph.Graph`; also settles pending conditional nodes before
    ``validate``, ``instantiate``, ``run`` and ``races``, and before an edit in place (``add_edge``,
    ``remove_edge``, ``remove``: an edge checked against the graph before the pending node's edges could
    close a cycle with them).
    """

    __slots__ = ()


for _name in builder_names():
    setattr(AutoBuilders, _name, functools.wraps(getattr(Builders, _name), updated=())(_auto_op(_name)))
for _name in ("validate", "instantiate", "run", "races", "add_edge", "remove_edge", "remove"):
    setattr(AutoBuilders, _name, _settled(_name))
del _name
