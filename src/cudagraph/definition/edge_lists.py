"""Removing one entry from a node's predecessor or successor list in O(1) expected time.

A node's ``_preds`` and ``_succs`` are plain lists (the builders append to them and the compiled
module reads them). Removing an edge takes the entry out by moving the list's last entry into its
place (the order of the others is kept except for that one move). Finding the entry is a scan of
the list while it is short; a long list (a sink with 100,000 inputs) gets a map from entry to
position, built on its first removal and kept up to date by later ones, so ``remove_edge`` costs
the same whatever the fan-in (``bench/edge_edits.py``: 100,000 removals from one node's inputs in
random order).

The map of a list covers a prefix of it: entries appended since (the builders append without
telling anyone) are at the end, past the covered prefix, and are taken in when a lookup misses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from .node import Node

__all__ = ["drop_entry"]

# Lists up to this length are scanned (a scan of 32 pointers is cheaper than keeping a map).
SCAN_LIMIT = 32

# node -> (map of its _preds, map of its _succs); kept only for lists that were long at a removal.
_POSITIONS: WeakKeyDictionary[Node, tuple[dict[Node, int], dict[Node, int]]] = WeakKeyDictionary()


def _position(items: list[Node], entry: Node, where: dict[Node, int]) -> int:
    """The index of ``entry`` in ``items``, through the map ``where`` (brought up to date on a miss)."""
    i = where.get(entry)
    if i is not None and i < len(items) and items[i] is entry:
        return i
    covered = len(where)
    if i is not None or covered > len(items) or (covered and items[covered - 1] not in where):
        # The list was changed behind the map's back: map it anew.
        where.clear()
        covered = 0
    for j in range(covered, len(items)):
        where[items[j]] = j
    i = where.get(entry)
    if i is None:
        raise ValueError("drop_entry: the entry is not in the list")
    return i


def drop_entry(owner: Node, items: list[Node], entry: Node, succs: bool) -> None:
    """Remove ``entry`` from ``items`` (``owner._succs`` when ``succs``, else ``owner._preds``).

    The last entry of the list takes the place of the removed one.

    Raises
    ------
    ValueError
        ``entry`` is not in the list (the caller checks the edge exists first).
    """
    last = items[-1]
    maps = _POSITIONS.get(owner)
    if maps is None and len(items) <= SCAN_LIMIT:
        if last is entry:
            items.pop()
            return
        i = items.index(entry)  # compares by identity first (nodes define no __eq__)
        items[i] = last
        items.pop()
        return
    if maps is None:
        maps = ({}, {})
        _POSITIONS[owner] = maps
    where = maps[1 if succs else 0]
    i = _position(items, entry, where)
    del where[entry]
    if last is not entry:
        items[i] = last
        where[last] = i
    items.pop()
