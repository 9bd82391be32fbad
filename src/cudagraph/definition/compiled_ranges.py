"""The compiled edges from data and race check (``cudagraph.definition._ranges`` and ``_reach``), when built.

The extensions are Cython compiled as C++ (GPU-free, nothing but Python; ``_ranges`` cimports ``_reach``). Their
twins, the reference implementations, are :class:`~cudagraph.definition.auto_edges._Segments` with
:func:`~cudagraph.definition.auto_edges._record` (``_ranges.Segments`` and ``_ranges.record``),
:func:`~cudagraph.definition.races._race_pairs` (``_ranges.race_pairs``) and
:class:`~cudagraph.definition.reach.Reach` (``_reach.Reach``): they run where the modules are not built, or
with ``CUDAGRAPH_NO_C_ENTRY=1`` set. The modules declare themselves free-threading compatible (each object the
edge inference keeps holds a lock of its own; the race check works on arrays of its own call), so they load on
a free-threaded Python too.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from . import reach
from .access import WRITE

__all__ = ["RANGES", "REACH", "new_reach", "ranges_modules"]


def ranges_modules() -> tuple[Any, Any]:
    """The extensions ``cudagraph.definition._ranges`` and ``_reach``, or ``(None, None)`` when either is not built
    (or ``_ranges`` was built from other sources: its ``WRITE`` differs) or ``CUDAGRAPH_NO_C_ENTRY`` is set."""
    if os.environ.get("CUDAGRAPH_NO_C_ENTRY"):
        return None, None
    try:
        ranges = importlib.import_module("cudagraph.definition._ranges")
        reach_module = importlib.import_module("cudagraph.definition._reach")
    except ImportError:
        return None, None
    if getattr(ranges, "WRITE", None) != WRITE:
        return None, None
    return ranges, reach_module


#: The compiled modules, or ``None`` (the Python twins run): :data:`RANGES` is ``None`` exactly when :data:`REACH`
#: is.
RANGES, REACH = ranges_modules()


def new_reach() -> Any:
    """An empty :class:`~cudagraph.definition.reach.Reach`, or its compiled twin over the same window
    (:data:`~cudagraph.definition.reach.WINDOW`, read now) where the modules are built."""
    return reach.Reach() if RANGES is None else REACH.Reach(reach.WINDOW)
