"""The memory a captured graph's intermediates live in, and memory of a definition's own to move them to.

A ``torch.cuda.CUDAGraph`` allocates every tensor made during its capture from a private memory pool
(``g.pool()``), and the caching allocator hands the same bytes to one tensor after another as they are
freed during the capture: the bytes of ``static_y = model(static_x)`` earlier held other intermediates.
:func:`private_pool_segments` reads the allocator's own record (``torch.cuda.memory_snapshot()``:
the segments whose ``segment_pool_id`` is the graph's pool) so that :func:`cudagraph.lift` can give the
lifted definition memory of its own (:class:`DeviceMemory`) for those segments and copy a named output
out of it, instead of rewriting every use of those bytes.

Other sources (cuda.core, CuPy, raw handles) report no private pool: their graphs' memory is
whatever the program gave them, and :func:`cudagraph.lift_exact` tells uses apart by capturing twice.
"""

from __future__ import annotations

import sys
from typing import Any

from ..driver.api import mem_alloc, mem_free_quietly, memcpy_dtod

__all__ = ["DeviceMemory", "private_pool_segments"]


def private_pool_segments(obj: Any) -> list[tuple[int, int]]:
    """``[(address, nbytes)]`` of the memory segments of ``obj``'s private capture pool, sorted; ``[]`` if none.

    Only a ``torch.cuda.CUDAGraph`` has one (read from PyTorch's allocator snapshot; the segments of
    every graph sharing the pool are included).
    """
    torch = sys.modules.get("torch")
    pool = getattr(obj, "pool", None)
    if torch is None or not callable(pool) or not isinstance(obj, torch.cuda.CUDAGraph):
        return []
    pool_id = tuple(pool())
    out = []
    for seg in torch.cuda.memory_snapshot():
        if tuple(seg.get("segment_pool_id", ())) == pool_id:
            out.append((int(seg["address"]), int(seg["total_size"])))
    out.sort()
    return out


class DeviceMemory:
    """Device memory owned by a definition (``cuMemAlloc``), freed when the last reference goes.

    Parameters
    ----------
    nbytes : int
        The size.
    copy_from : int, optional
        A device address whose ``nbytes`` bytes are copied in (``cuMemcpyDtoD``), so the memory starts
        as the source's did.
    """

    __slots__ = ("address", "nbytes", "__weakref__")

    def __init__(self, nbytes: int, copy_from: int | None = None) -> None:
        self.address = 0
        self.nbytes = nbytes
        self.address = int(mem_alloc(nbytes))
        if copy_from is not None:
            memcpy_dtod(self.address, copy_from, nbytes)

    def __del__(self) -> None:
        if self.address:
            try:
                mem_free_quietly(self.address)
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"<DeviceMemory {self.address:#x}, {self.nbytes} B>"
