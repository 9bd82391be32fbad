"""Differences between cuda-bindings 12.x and 13.x, hidden behind one name each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .calls import bindings_version, check, require_driver

__all__ = [
    "BINDINGS_MAJOR",
    "BINDINGS_VERSION",
    "add_node_fn",
    "add_node_with_edge_data",
    "dependencies_with_data",
    "edge_data_of",
]


#: The version of the installed ``cuda-bindings`` (``"13.3.1"``), ``None`` where it is not importable.
BINDINGS_VERSION = bindings_version()
#: Its major version (the CUDA major it was made for), 0 where unknown.
BINDINGS_MAJOR = int(BINDINGS_VERSION.split(".")[0]) if BINDINGS_VERSION and BINDINGS_VERSION[:1].isdigit() else 0


def add_node_fn() -> Callable[[Any, Any, int, Any], Any]:
    """Return ``add(graph, deps, ndeps, params) -> (CUresult, CUgraphNode)``.

    cuda-bindings 13 has ``cuGraphAddNode(graph, deps, edgeData, n, params)``;
    12.x has ``cuGraphAddNode(graph, deps, n, params)`` (and ``_v2`` with edge
    data). The returned callable has the 12.x shape on both.
    """
    drv = require_driver()
    if BINDINGS_MAJOR >= 13:
        raw = drv.cuGraphAddNode

        def add(graph: Any, deps: Any, n: int, params: Any) -> Any:
            return raw(graph, deps, None, n, params)

        return add
    return drv.cuGraphAddNode  # type: ignore[no-any-return]


def add_node_with_edge_data(graph: Any, deps: Any, edge_data: Any, n: int, params: Any) -> tuple[Any, str]:
    """``((CUresult, CUgraphNode), call name)``: add a node whose ``n`` incoming edges carry ``edge_data``.

    cuda-bindings 13's ``cuGraphAddNode`` takes the edge data; 12.x's is ``cuGraphAddNode_v2``.
    """
    drv = require_driver()
    if BINDINGS_MAJOR >= 13:
        return drv.cuGraphAddNode(graph, deps, edge_data, n, params), "cuGraphAddNode"
    return drv.cuGraphAddNode_v2(graph, deps, edge_data, n, params), "cuGraphAddNode_v2"  # pragma: no cover


def edge_data_of(result: Any, count: int) -> list[Any] | None:
    """The ``CUgraphEdgeData`` of the first ``count`` edges of a ``cuGraphNodeGetDependencies`` result, ``None``
    where the bindings return none (12.x: no edge data, so no programmatic edges either)."""
    return list(result[2][:count]) if len(result) == 4 else None


def dependencies_with_data(node: Any) -> list[tuple[int, int, int, int]]:
    """``(dependency handle, from_port, to_port, type)`` of the edges into driver node ``node``."""
    drv = require_driver()
    res = drv.cuGraphNodeGetDependencies(node, 0)
    check(res[:1], "cuGraphNodeGetDependencies")
    n = res[-1]
    if not n:
        return []
    res = drv.cuGraphNodeGetDependencies(node, n)
    check(res[:1], "cuGraphNodeGetDependencies")
    data = edge_data_of(res, n)
    if data is None:
        return [(int(d), 0, 0, 0) for d in res[1][:n]]
    return [(int(d), int(e.from_port), int(e.to_port), int(e.type)) for d, e in zip(res[1][:n], data)]
