"""What a compat node keeps alive, and the addresses of its graph allocations.

cuda.core attaches each node's owners (``dst_owner``, ``src_owner``) to the node itself: they live as long as the
node does in its definition or in any executable made from it, and go when the node is destroyed and no
executable holds it. compat keeps them in :data:`OWNERS`, keyed weakly by the cudagraph node: an executable keeps
its nodes (and so their owners) alive, a destroyed node that nothing holds takes its owners with it.

cuda.core's ``AllocNode.dptr`` is an ``int``: the address the driver gave the allocation node. A compat definition
touches the driver only when it is built, so :class:`AllocAddress` is an ``int`` whose value is the address the
allocation has in the newest driver graph built from its definition (``instantiate()``, ``complete()``, a
``handle``), ``0`` before the first; compat's builders take it back as the allocation itself, so the address a
node uses is always the one of the graph it is built into.

GIL stance: the two tables are guarded by :data:`_LOCK` (free-threaded Python too).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ...definition.addresses import buffer_like
from ...errors import StateError

__all__ = ["OWNERS", "AllocAddress", "address_of", "check_open_buffers", "keep", "operand", "record_addresses"]

_LOCK = threading.Lock()
#: cudagraph node -> the owners a compat call gave it (released with the node).
OWNERS: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()
#: cudagraph AllocNode -> its address in the newest driver graph built with it.
_ADDRESSES: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def keep(node: Any, *owners: Any) -> None:
    """Keep ``owners`` (``None`` skipped) alive as long as ``node``."""
    kept = [o for o in owners if o is not None]
    if kept:
        with _LOCK:
            OWNERS.setdefault(node, []).extend(kept)


def check_open_buffers(graph: Any) -> None:
    """Refuse to build ``graph`` while one of its nodes (or of its bodies') holds a cuda.core ``Buffer`` closed since
    it was added: its memory is freed, and a graph built on it would copy from or write to freed memory (seen on an
    H100: a segmentation fault in the launch). cuda.core's own graph keeps such an allocation alive; compat keeps
    the Buffer object, which a ``close()`` frees all the same.

    Raises
    ------
    StateError
        Naming the node; a ``RuntimeError`` too.
    """
    for g in (graph, *graph._descendants()):
        for node in g._nodes:
            kept = getattr(node, "_keep", None)
            held = list(kept) if isinstance(kept, (tuple, list)) else [] if kept is None else [kept]
            held.extend(OWNERS.get(node, ()))
            if any(buffer_like(obj) and _closed(obj) for obj in held):
                raise StateError(
                    f"{node.label} of Graph {node.graph.name!r}: a cuda.core Buffer it uses was closed after the "
                    "node was added, so its memory is freed (cuda.core's graph keeps the allocation; compat keeps "
                    "the Buffer, which close() frees): keep the Buffer open until the graph's last launch"
                )


def _closed(buffer: Any) -> bool:
    """Whether a Buffer's handle reads 0 (closed); ``False`` where it cannot be read."""
    try:
        return int(buffer.handle) == 0
    except Exception:  # (a handle that raises or is no int: not ours to judge here)
        return False


class AllocAddress(int):
    """An allocation's ``dptr``, or an address ``offset`` bytes into it (``dptr + n``, ``dptr - n``): an ``int``
    (the address once built) that compat's builders take as the allocation itself (``alloc.offset(n)``), so a node
    built into another driver graph uses that graph's address, as cuda.core's one graph would."""

    alloc: Any
    offset: int

    def __new__(cls, alloc: Any, offset: int = 0) -> AllocAddress:
        base = address_of(alloc)
        self = super().__new__(cls, base + offset if base else offset)
        self.alloc = alloc
        self.offset = offset
        return self

    def __add__(self, other: Any) -> Any:
        if isinstance(other, int) and not isinstance(other, (bool, AllocAddress)):
            return AllocAddress(self.alloc, self.offset + other)
        return int(self) + other

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        if isinstance(other, int) and not isinstance(other, (bool, AllocAddress)):
            return AllocAddress(self.alloc, self.offset - other)
        return int(self) - other  # (the distance between two addresses: an int)

    def __repr__(self) -> str:
        more = f" + {self.offset}" if self.offset else ""
        return f"<AllocAddress {self.alloc.label}{more}: {int(self):#x}>"


def address_of(alloc: Any) -> int:
    """The address of ``alloc`` in the newest driver graph built with it (0 before)."""
    with _LOCK:
        return _ADDRESSES.get(alloc, 0)


def record_addresses(state: Any) -> None:
    """Remember the allocation addresses of a lowering (``LowerState.allocs``: ``id -> (node, address)``)."""
    allocs = getattr(state, "allocs", None)
    if not allocs:
        return
    with _LOCK:
        for node, address in allocs.values():
            _ADDRESSES[node] = int(address)


def operand(value: Any) -> Any:
    """``value``, or the allocation an :class:`AllocAddress` names (so a node built later uses its own graph's
    address)."""
    if type(value) is AllocAddress:
        return value.alloc.offset(value.offset) if value.offset else value.alloc
    return value
