"""Reused ``CUgraphNodeParams`` structures for adding nodes to a driver graph.

Making a ``CUgraphNodeParams`` through ``cuda.bindings`` is slow (it makes a
wrapper for every member of the struct's union): most of the time of adding a
fill, copy, host, event or empty node without reused structures
(``bench/node_kinds.py``: lower), and a fixed cost of every lowering for its
kernel nodes.

A construction :func:`take` s one, zeroed with its type set, fills it, makes
the one driver call that reads it (``cuGraphAddNode`` copies what it reads),
and :func:`give` s it back. Parameters that outlive one call (the prepared
nodes of a patch plan, an executable's per-node update) are made fresh.
Taking and giving are single list operations, safe between threads; a
structure is never handed to two takers at once, so nested constructions
(child graphs, conditional bodies) each use their own.

Only for kinds whose fields ``cuda.bindings`` writes into the structure at
every assignment: its array setters (the batch memory operations'
``paramArray``) remember the array's length and write its address only when
the length changes, which a zeroed structure would leave NULL; such kinds
make fresh structures.
"""

from __future__ import annotations

import ctypes
from typing import Any

from .calls import require_driver

__all__ = ["NODE_PARAMS_SIZE", "give", "take"]

#: ``sizeof(CUgraphNodeParams)`` since CUDA 12.2 (its union is padded to a fixed size; the compiled module
#: checks its own copy of the layout against the same number).
NODE_PARAMS_SIZE = 256
#: How many free structures are kept (one per construction in flight; more are made and dropped).
KEEP = 8

_free: list[Any] = []


def take(node_type: Any) -> Any:
    """A ``CUgraphNodeParams`` of ``node_type`` (a ``CUgraphNodeType``), every other byte zero.

    Parameters
    ----------
    node_type : CUgraphNodeType
        The type written in the structure.

    Returns
    -------
    CUgraphNodeParams
        The caller's until it passes it to :func:`give`.
    """
    make = require_driver().CUgraphNodeParams
    try:
        p = _free.pop()
    except IndexError:
        p = make()  # (made zeroed)
    else:
        if type(p) is make:
            ctypes.memset(p.getPtr(), 0, NODE_PARAMS_SIZE)
        else:  # kept under another driver module (tests swap it): left alone
            p = make()
    p.type = node_type
    return p


def give(params: Any) -> None:
    """Hand back a structure from :func:`take` once the driver call that reads it returned.

    Parameters
    ----------
    params : CUgraphNodeParams
        No longer read by the caller (nor by the driver).
    """
    if len(_free) >= KEEP or type(params) is not require_driver().CUgraphNodeParams:  # (a real structure only)
        return
    for p in _free:
        if p is params:  # given twice: kept once, or two takers would share it
            return
    _free.append(params)
