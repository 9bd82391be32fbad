"""Telling the executables of a definition before it is edited in place (GPU-free).

An executable records what its definition looked like (the topology signature
and every node's parameters, which :meth:`Executable.update
<cudagraph.Executable.update>` compares a later definition with) only when an
update or the cache first needs it: most executables are never updated, and
recording costs a tuple per node. Until then it *watches* its definition:
every path that changes a node or an edge of a definition in place calls
:func:`before_edit` first (:meth:`Node.update <cudagraph.Node.update>`,
:meth:`Graph.add_edge <cudagraph.Graph.add_edge>`, :meth:`Graph.remove_edge
<cudagraph.Graph.remove_edge>`, ``Graph.parametrize``), and the watchers record
the definition as it still is. A node added afterwards needs no call: it
changes no existing node's parameters or predecessors, and the executable
knows how many nodes it was built from.

Writing to a node's attributes directly (``node.args = ...``) bypasses the
builders' checks and this call; :meth:`Node.update` is the way to edit a node.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["before_edit", "watch", "watched"]

#: A watcher: a weak reference (``weakref.WeakMethod``) to a method that records the definition.
Watcher = Callable[[], Callable[[], object] | None]

#: id(graph) -> (weak reference to the graph, its watchers). Empty in a program that never
#: instantiates without recording, so :func:`before_edit` costs a dict truth test.
_WATCHERS: dict[int, tuple[weakref.ref[Any], list[Watcher]]] = {}


def watch(graph: Any, watcher: Watcher) -> None:
    """Call ``watcher()()`` (unless the weak reference died) before ``graph`` is next edited in place.

    The watchers of a graph are called once, at its next edit, then forgotten.
    """
    key = id(graph)
    entry = _WATCHERS.get(key)
    if entry is None or entry[0]() is not graph:
        ref = weakref.ref(graph, functools.partial(_forget, key))
        entry = _WATCHERS[key] = (ref, [])
    watchers = entry[1]
    watchers.append(watcher)
    count = len(watchers)
    if count >= 16 and count & (count - 1) == 0:
        # A graph instantiated again and again, never edited: drop the watchers whose executable died.
        watchers[:] = [w for w in watchers if w() is not None]


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    entry = _WATCHERS.get(key)
    if entry is not None and entry[0] is ref:
        del _WATCHERS[key]


def watched(graph: Any) -> int:
    """How many live watchers wait for ``graph``'s next edit."""
    entry = _WATCHERS.get(id(graph))
    if entry is None or entry[0]() is not graph:
        return 0
    return sum(1 for w in entry[1] if w() is not None)


def before_edit(graph: Any) -> None:
    """Let the executables watching ``graph`` record it before it changes (see the module docstring)."""
    if not _WATCHERS:
        return
    entry = _WATCHERS.pop(id(graph), None)
    if entry is None or entry[0]() is not graph:
        return
    for w in entry[1]:
        record = w()
        if record is not None:
            record()
