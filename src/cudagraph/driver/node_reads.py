"""What a driver node holds beyond its parameters: kernel launch attributes and edge data.

:class:`NodeReads` asks the driver, for one kernel node, every ``CUlaunchAttributeID`` up to
:data:`LAST_ATTRIBUTE_ID` (``cuGraphKernelNodeGetAttribute``), and for one node the data of the edges
into it (``cuGraphNodeGetDependencies_v2``: programmatic ports). Values come back as the raw bytes of
the driver's unions; the definition layer's table
(:mod:`cudagraph.definition.kinds.launch_attributes`) says what they mean.

Attributes are read in compiled code where ``cudagraph.driver._reads`` was built (Cython over
``cuda.bindings.cydriver``: every id of a node in one call), else through the C entry points with reused
ctypes buffers (the reference, the same reads), else through ``cuda.bindings`` (slower). An attribute id the
driver refuses for graph kernel nodes (``CUDA_ERROR_INVALID_VALUE``: stream-only attributes, ids newer than
the driver) is asked of the first kernel node only, per reader.

A reader that reads in compiled code also gives a graph's nodes in the lift's order with its edges' data
(:meth:`NodeReads.graph_order`, for ``_Lifter.carry``).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import os
import struct
from collections.abc import Sequence
from typing import Any

from ..definition.kinds.launch_attributes import ATTRIBUTES, FIRST_CLASS_IDS, encode
from .c_entry import c_function
from .calls import check, raise_error, require_driver
from .compat import BINDINGS_MAJOR

__all__ = ["EDGE_DATA", "LAST_ATTRIBUTE_ID", "UNSET", "EdgeData", "NodeReads", "compiled_reads", "extra_arguments"]

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


@functools.cache
def compiled_reads() -> Any:
    """The compiled module ``cudagraph.driver._reads`` (``_reads.pyx``), or ``None`` where it was not built, cannot
    load against this ``cuda.bindings``, or the C entry points are off (``CUDAGRAPH_NO_C_ENTRY=1``)."""
    if os.environ.get("CUDAGRAPH_NO_C_ENTRY"):
        return None
    try:
        return importlib.import_module("cudagraph.driver._reads")
    except (ImportError, TypeError):  # not built; a cydriver.pxd whose signatures differ from the one built against
        return None


#: Distinct attribute values a reader keeps by their bytes (a graph's nodes share few).
_SEEN_MAX = 256


class NodeReads:
    """Reads launch attributes and edge data of driver nodes (one reader per lift or check).

    Parameters
    ----------
    get_attr, get_deps : ctypes function or None
        ``cuGraphKernelNodeGetAttribute`` and ``cuGraphNodeGetDependencies_v2`` (default: the driver's
        exported ones, where they can be found); ``None`` reads through ``cuda.bindings``. When ``get_attr``
        is the driver's own, attributes are read by the compiled module where it is built (:func:`compiled_reads`).
    drv : module, optional
        The ``cuda.bindings.driver`` to read through (default: :func:`~cudagraph.driver.calls.require_driver`).
    prune : bool
        Ask no more an id the driver refused for one kernel node (the driver refuses an id for every
        node or for none); ``False`` asks every id of every node (the round-trip check does).
    compiled : bool
        ``False``: the ctypes loop (the reference) even where the compiled module would read.

    Attributes
    ----------
    ids : list of int
        The attribute ids asked of each kernel node (those the driver refused for one are dropped).
    compiled : bool
        Whether attributes are read by the compiled module (else by ``get_attr``, or through ``cuda.bindings``).
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
        "_module",
        "_compiled",
        "_order",
        "_seen",
        "_last",
        "_learn",
    )

    #: The ids the driver's own ``cuGraphKernelNodeGetAttribute`` refused (it refuses an id for every kernel node
    #: or for none), learned once per process: a new pruning reader of the driver asks them no more.
    _driver_refuses: frozenset[int] = frozenset()

    def __init__(
        self,
        get_attr: Any = "driver",
        get_deps: Any = "driver",
        drv: Any = None,
        prune: bool = True,
        compiled: bool = True,
    ) -> None:
        self._drv = drv
        self.prune = prune
        self.ids = list(range(1, LAST_ATTRIBUTE_ID + 1))
        driver_attr = c_function("cuGraphKernelNodeGetAttribute")
        self._get_attr = driver_attr if get_attr == "driver" else get_attr
        self._get_deps = c_function("cuGraphNodeGetDependencies_v2") if get_deps == "driver" else get_deps
        self._node = ctypes.c_void_p()
        self._value = (ctypes.c_char * (64 * len(self.ids)))()
        self._args: list[tuple[int, Any, Any]] = []
        # The driver's own entry point is read in compiled code where the module is built: the ~13 reads of a
        # node in one call instead of ~13 ctypes calls (bench/zoo.py prints the lift's µs per node).
        driver = compiled and self._get_attr is not None and self._get_attr is driver_attr
        self._module: Any = compiled_reads() if driver else None
        self._compiled: Any = None
        # The graph order is read in compiled code too where the edges are the driver's own to read.
        driver_deps = self._get_deps is not None and self._get_deps is c_function("cuGraphNodeGetDependencies_v2")
        self._order: Any = getattr(self._module, "graph_order", None) if driver_deps else None
        # Values read before, by their bytes: nodes launched alike (most of a captured library's) share one dict,
        # so a caller may key its own work on the dict's identity (lift.py: the LaunchAttrs made from it).
        self._seen: dict[bytes, dict[int, bytes]] = {}
        self._last: tuple[bytes, dict[int, bytes]] = (b"", {})  # (no ids read: no values)
        self._learn = prune and self._get_attr is not None and self._get_attr is driver_attr
        if self._learn and NodeReads._driver_refuses:
            self.ids = [i for i in self.ids if i not in NodeReads._driver_refuses]
        self._forget([])
        self._count = ctypes.c_size_t()
        self._count_ref = ctypes.byref(self._count)

    @property
    def compiled(self) -> bool:
        return self._compiled is not None

    def graph_order(self, graph: int) -> tuple[int, list[int], list[EdgeData]] | None:
        """Driver graph ``graph``'s nodes in the order a lift adds them, and its edges with data, read in compiled code
        (``cudagraph.driver._reads.graph_order``); ``None`` where this reader does not read there (the caller reads
        the node list and the edges itself and orders them with ``lift._topo``: the reference).

        Returns
        -------
        tuple or None
            ``(count, handles, data_edges)``: the number of nodes, their handles in Kahn order (first in first out,
            as ``lift._topo``; fewer than ``count`` where the edges make a cycle), the edges whose data is not the
            default as :data:`EdgeData`, node by node.

        Raises
        ------
        DriverError
            A read the driver refused (named as ``GraphReader`` names it).
        KeyError
            An edge from a handle that is not a node of the graph (as ``lift._topo``).
        """
        order = self._order
        if order is None:
            return None
        try:
            got: tuple[int, list[int], list[EdgeData]] = order(graph)
        except self._module.GraphReadError as e:
            _fail(e.result, e.call)
        return got

    def attributes(self, node: int) -> dict[int, bytes]:
        """``{attribute id: 64 value bytes}`` of kernel node ``node`` (a handle as an int), every id it answers;
        ``{}`` when each reads as on a node never given any (:data:`UNSET`).

        Raises
        ------
        DriverError
            The driver refused a read for another reason than an unknown id (named).
        """
        compiled = self._compiled
        if compiled is not None:
            try:
                raw, refused = compiled.read(node)
            except self._module.AttributeReadError as e:
                _fail(e.result, "cuGraphKernelNodeGetAttribute", e.attribute)
            return {} if raw is None else self._values(raw, refused)
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
        return self._values(raw, refused)

    def _values(self, raw: bytes, refused: Sequence[int] | None) -> dict[int, bytes]:
        """``{id: value}`` from the 64-byte values ``raw`` of the ids asked (in order), less those ``refused``,
        which are asked no more (when pruning)."""
        if not refused:
            # The node before's values first (one comparison of the bytes: a library's nodes come in runs launched
            # alike), then every distinct value (hashing the bytes); bench/zoo_lift_profile.py prints the reads' cost.
            last = self._last
            if raw == last[0]:
                return last[1]
            seen = self._seen.get(raw)
            if seen is not None:
                self._last = (raw, seen)
                return seen
        out = {attr_id: raw[64 * k : 64 * k + 64] for k, attr_id in enumerate(self.ids)}
        if refused:
            for attr_id in refused:
                del out[attr_id]
            self._forget(list(refused))
        elif len(self._seen) < _SEEN_MAX:
            self._seen[raw] = out
            self._last = (raw, out)
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
        return out if refused else self._values(b"".join(out.values()), None)

    def _forget(self, refused: list[int]) -> None:
        """Ask no more the ids ``refused`` (when pruning); lay out the ctypes arguments of the ids asked."""
        if refused and self.prune:
            self.ids = [i for i in self.ids if i not in refused]
            if self._learn:
                NodeReads._driver_refuses = NodeReads._driver_refuses | frozenset(refused)
        elif len(self._args) == len(self.ids):
            return  # the ids asked are those laid out
        self._seen.clear()  # (values laid out for other ids)
        self._last = (b"", {})
        base = ctypes.addressof(self._value)
        self._plain = b"".join(UNSET.get(attr_id, bytes(64)) for attr_id in self.ids).ljust(len(self._value), b"\0")
        self._args = [
            (attr_id, ctypes.c_int(attr_id), ctypes.c_void_p(base + 64 * k)) for k, attr_id in enumerate(self.ids)
        ]
        if self._module is not None:  # (a compiled reader's ids are fixed: a new one)
            self._compiled = self._module.AttributeReads(tuple(self.ids), self._plain[: 64 * len(self.ids)])

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


#: ``CU_LAUNCH_PARAM_END``, ``CU_LAUNCH_PARAM_BUFFER_POINTER``, ``CU_LAUNCH_PARAM_BUFFER_SIZE``.
_PARAM_END, _PARAM_BUFFER_POINTER, _PARAM_BUFFER_SIZE = 0, 1, 2


def extra_arguments(extra: int, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[bytes, ...] | None:
    """The argument values of a kernel node launched with ``extra`` (a packed argument buffer, as cuBLASLt
    launches its kernels), cut at the kernel's parameter ``offsets`` and ``sizes``.

    ``extra`` is the node's ``extra`` address: ``{CU_LAUNCH_PARAM_BUFFER_POINTER, buffer,
    CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END}`` in any order. ``None`` when it names no
    buffer, or one smaller than the parameters.
    """
    if not extra:
        return None
    table = (ctypes.c_void_p * 16).from_address(extra)
    buffer = size = None
    for i in range(0, 16, 2):
        key = table[i] or 0
        if key == _PARAM_END:
            break
        if key == _PARAM_BUFFER_POINTER:
            buffer = table[i + 1] or 0
        elif key == _PARAM_BUFFER_SIZE:
            at = table[i + 1]
            if at:
                size = ctypes.c_size_t.from_address(at).value
    if not buffer:
        return None
    need = max((o + s for o, s in zip(offsets, sizes)), default=0)
    if size is not None and size < need:
        return None
    return tuple(ctypes.string_at(buffer + o, s) for o, s in zip(offsets, sizes))


def _fail(rc: int, call: str, attr_id: int | None = None) -> Any:
    code: Any = rc
    try:
        code = require_driver().CUresult(rc)
    except Exception:  # a code this cuda-bindings does not name
        pass
    raise_error(code, call, None, "" if attr_id is None else f"attribute id {attr_id}")
