"""What a driver node holds beyond its parameters: kernel launch attributes and edge data.

:class:`NodeReads` asks the driver, for one kernel node, every ``CUlaunchAttributeID`` up to
:data:`LAST_ATTRIBUTE_ID` (``cuGraphKernelNodeGetAttribute``), and for one node the data of the edges
into it (``cuGraphNodeGetDependencies_v2``: programmatic ports). Values come back as the raw bytes of
the driver's unions; the definition layer's table
(:mod:`cudagraph.definition.kinds.launch_attributes`) says what they mean.

Through the C entry points with reused ctypes buffers where they can be found, else through
``cuda.bindings`` (the same reads, slower). An attribute id the driver refuses for graph kernel nodes
(``CUDA_ERROR_INVALID_VALUE``: stream-only attributes, ids newer than the driver) is asked of the first
kernel node only, per reader.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from ..definition.kinds.launch_attributes import ATTRIBUTES, FIRST_CLASS_IDS, encode
from .c_entry import c_function
from .calls import check, raise_error, require_driver
from .compat import BINDINGS_MAJOR

__all__ = ["EDGE_DATA", "LAST_ATTRIBUTE_ID", "UNSET", "EdgeData", "NodeReads"]

#: The highest ``CUlaunchAttributeID`` asked (ids above it are unknown to every driver this supports).
LAST_ATTRIBUTE_ID = 23

#: One ``CUgraphEdgeData``: ``from_port``, ``to_port``, ``type``, 5 reserved bytes.
EDGE_DATA = struct.Struct("<BBB5x")

#: ``(from handle, to handle, from_port, to_port, type)`` of an edge with data.
EdgeData = tuple[int, int, int, int, int]

#: ``id -> value bytes`` of a kernel node never given the attribute (ids not here: 64 zero bytes).
UNSET: dict[int, bytes] = {
    **{a.id: encode(a, a.default) for a in ATTRIBUTES.values()},
    **{attr_id: layout.pack(*default).ljust(64, b"\0") for attr_id, (_, layout, default) in FIRST_CLASS_IDS.items()},
}

#: ``CUDA_ERROR_INVALID_VALUE``, ``CUDA_ERROR_NOT_SUPPORTED``.
_NOT_THERE = (1, 801)


class NodeReads:
    """Reads launch attributes and edge data of driver nodes (one reader per lift or check).

    Parameters
    ----------
    get_attr, get_deps : ctypes function or None
        ``cuGraphKernelNodeGetAttribute`` and ``cuGraphNodeGetDependencies_v2`` (default: the driver's
        exported ones, where they can be found); ``None`` reads through ``cuda.bindings``.
    drv : module, optional
        The ``cuda.bindings.driver`` to read through (default: :func:`~cudagraph.driver.calls.require_driver`).
    prune : bool
        Ask no more an id the driver refused for one kernel node (the driver refuses an id for every
        node or for none); ``False`` asks every id of every node (the round-trip check does).

    Attributes
    ----------
    ids : list of int
        The attribute ids asked of each kernel node (those the driver refused for one are dropped).
    """

    __slots__ = (
        "ids",
        "prune",
        "_get_attr",
        "_get_deps",
        "_drv",
        "_node",
        "_value",
        "_args",
        "_plain",
        "_count",
        "_count_ref",
    )

    def __init__(self, get_attr: Any = "driver", get_deps: Any = "driver", drv: Any = None, prune: bool = True) -> None:
        self._drv = drv
        self.prune = prune
        self.ids = list(range(1, LAST_ATTRIBUTE_ID + 1))
        self._get_attr = c_function("cuGraphKernelNodeGetAttribute") if get_attr == "driver" else get_attr
        self._get_deps = c_function("cuGraphNodeGetDependencies_v2") if get_deps == "driver" else get_deps
        self._node = ctypes.c_void_p()
        self._value = (ctypes.c_char * (64 * len(self.ids)))()
        self._args: list[tuple[int, Any, Any]] = []
        self._forget([])
        self._count = ctypes.c_size_t()
        self._count_ref = ctypes.byref(self._count)

    def attributes(self, node: int) -> dict[int, bytes]:
        """``{attribute id: 64 value bytes}`` of kernel node ``node`` (a handle as an int), every id it answers;
        ``{}`` when each reads as on a node never given any (:data:`UNSET`).

        Raises
        ------
        DriverError
            The driver refused a read for another reason than an unknown id (named).
        """
        fn = self._get_attr
        if fn is None:
            return self._attributes_bindings(node)
        # One value buffer per id, cleared in one call and read back in one (per node: the calls are
        # what costs; bench/zoo.py prints the lift's µs per node).
        values, args = self._value, self._args
        ctypes.memset(values, 0, len(values))
        self._node.value = node
        h = self._node
        refused = None
        for attr_id, key, ref in args:
            rc = fn(h, key, ref)
            if rc:
                if rc in _NOT_THERE:
                    refused = [*(refused or ()), attr_id]
                    continue
                _fail(rc, "cuGraphKernelNodeGetAttribute", attr_id)
        raw = values.raw
        if raw == self._plain and not refused:
            return {}  # every id reads as a node's that was never given it: one comparison
        out = {attr_id: raw[64 * k : 64 * k + 64] for k, (attr_id, _, _) in enumerate(args)}
        if refused:
            for attr_id in refused:
                del out[attr_id]
            self._forget(refused)
        return out

    def _attributes_bindings(self, node: int) -> dict[int, bytes]:
        drv = self._drv or require_driver()
        dn = drv.CUgraphNode(node)
        out: dict[int, bytes] = {}
        refused = []
        for attr_id in self.ids:
            try:
                key = drv.CUkernelNodeAttrID(attr_id)
            except ValueError:  # an id this cuda-bindings does not name
                refused.append(attr_id)
                continue
            err, value = drv.cuGraphKernelNodeGetAttribute(dn, key)
            if err:
                if int(err) in _NOT_THERE:
                    refused.append(attr_id)
                    continue
                _fail(int(err), "cuGraphKernelNodeGetAttribute", attr_id)
            out[attr_id] = ctypes.string_at(int(value.getPtr()), 64)
        self._forget(refused)
        if all(v == UNSET.get(k, bytes(64)) for k, v in out.items()):
            return {}
        return out

    def _forget(self, refused: list[int]) -> None:
        """Ask no more the ids ``refused`` (when pruning); lay out the ctypes arguments of the ids asked."""
        if refused and self.prune:
            self.ids = [i for i in self.ids if i not in refused]
        base = ctypes.addressof(self._value)
        self._plain = b"".join(UNSET.get(attr_id, bytes(64)) for attr_id in self.ids).ljust(len(self._value), b"\0")
        self._args = [
            (attr_id, ctypes.c_int(attr_id), ctypes.c_void_p(base + 64 * k)) for k, attr_id in enumerate(self.ids)
        ]

    def edge_data(self, node: int) -> list[EdgeData]:
        """The edges into ``node`` that carry data (a port or a type other than the default), in order."""
        fn = self._get_deps
        if fn is None:
            return self._edge_data_bindings(node)
        h, count, ref = self._node, self._count, self._count_ref
        h.value = node
        count.value = 0
        rc = fn(h, None, None, ref)
        if rc:
            _fail(rc, "cuGraphNodeGetDependencies")
        n = count.value
        if not n:
            return []
        deps = (ctypes.c_void_p * n)()
        data = (ctypes.c_char * (8 * n))()
        rc = fn(h, deps, data, ref)
        if rc:
            _fail(rc, "cuGraphNodeGetDependencies")
        out = []
        for i in range(min(n, count.value)):
            frm_port, to_port, kind = EDGE_DATA.unpack_from(data, 8 * i)
            if frm_port or to_port or kind:
                out.append((int(deps[i] or 0), node, frm_port, to_port, kind))
        return out

    def _edge_data_bindings(self, node: int) -> list[EdgeData]:
        drv = self._drv or require_driver()
        dn = drv.CUgraphNode(node)
        # (12.x bindings: the call with edge data is the _v2 one)
        get = drv.cuGraphNodeGetDependencies if BINDINGS_MAJOR >= 13 else drv.cuGraphNodeGetDependencies_v2
        res = get(dn, 0)
        check(res[:1], "cuGraphNodeGetDependencies")
        n = res[-1]
        if not n:
            return []
        res = get(dn, n)
        check(res[:1], "cuGraphNodeGetDependencies")
        out = []
        for d, e in zip(res[1][: res[-1]], res[2][: res[-1]]):
            kind = int(e.type)
            if e.from_port or e.to_port or kind:
                out.append((int(d), node, int(e.from_port), int(e.to_port), kind))
        return out


def _fail(rc: int, call: str, attr_id: int | None = None) -> Any:
    code: Any = rc
    try:
        code = require_driver().CUresult(rc)
    except Exception:  # a code this cuda-bindings does not name
        pass
    raise_error(code, call, None, "" if attr_id is None else f"attribute id {attr_id}")
