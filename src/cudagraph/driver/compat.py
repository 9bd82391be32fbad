"""Differences between cuda-bindings 12.x and 13.x, hidden behind one name each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .calls import require_driver

__all__ = ["BINDINGS_MAJOR", "add_node_fn"]


def _bindings_major() -> int:
    try:
        from cuda.bindings import __version__
    except ImportError:  # pragma: no cover
        return 0
    return int(__version__.split(".")[0])


BINDINGS_MAJOR = _bindings_major()


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
