"""Differences between cuda-bindings 12.x and 13.x, hidden behind one name each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .calls import require_driver

__all__ = ["BINDINGS_MAJOR", "BINDINGS_VERSION", "add_node_fn"]


def _bindings_version() -> str | None:
    try:
        import cuda.bindings
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return str(getattr(cuda.bindings, "__version__", "unknown"))


#: The version of the installed ``cuda-bindings`` (``"13.3.1"``), ``None`` where it is not importable.
BINDINGS_VERSION = _bindings_version()
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
