"""Opaque nodes: a driver node read back from a foreign graph that has no typed kind here.

The class lives in :mod:`cudagraph.definition.kinds.opaque`; this module keeps its import path.
"""

from __future__ import annotations

from .kinds.opaque import OpaqueNode

__all__ = ["OpaqueNode"]
