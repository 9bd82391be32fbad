"""A driver graph in Python memory, read through ctypes callbacks shaped like the C entry points, for lifting
tests without a GPU (tests/test_lift_cpu.py, tests/test_lift_compiled_cpu.py)."""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace
from typing import Any

import pytest

drv = pytest.importorskip("cuda.bindings.driver")

from cudagraph.definition.kinds.launch_attributes import ATTRIBUTES, encode  # noqa: E402
from cudagraph.driver import api as _api  # noqa: E402
from cudagraph.driver.graph_reader import KERNEL_PARAMS, KERNEL_PARAMS_SIZE, GraphReader  # noqa: E402
from cudagraph.materialize import lift as _lift  # noqa: E402

INT = ctypes.c_int
VP = ctypes.c_void_p
GET_NODES = ctypes.CFUNCTYPE(INT, VP, VP, VP)
GET_DEPS = ctypes.CFUNCTYPE(INT, VP, VP, VP, VP)
GET_ONE = ctypes.CFUNCTYPE(INT, VP, VP)
GET_ATTR = ctypes.CFUNCTYPE(INT, VP, INT, VP)

#: Launch attribute ids the fake driver refuses for every kernel node, as a driver does those it does not
#: take for graph kernel nodes (stream-only ones, ids it does not know).
REFUSED_IDS = frozenset({3, 6, 7, 12, 15, *range(20, 24)})

#: What the fake reads for an attribute never set: the table's default (zeros for the others).
UNSET = {a.id: encode(a, a.default) for a in ATTRIBUTES.values()}

KERNEL, GRAPH, EMPTY, MEM_ALLOC = (
    int(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL),
    int(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_GRAPH),
    int(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EMPTY),
    int(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_ALLOC),
)


class FakeDriver:
    """Driver graphs in Python memory, read through ctypes callbacks shaped like the C entry points."""

    def __init__(self) -> None:
        self._next = 0x10_0000
        self.graphs: dict[int, tuple[list[int], list[tuple[int, int]]]] = {}
        self.types: dict[int, int] = {}
        self.params: dict[int, bytes] = {}
        self.children: dict[int, int] = {}
        self.attrs: dict[int, dict[int, bytes]] = {}
        self.edge_data: dict[tuple[int, int], bytes] = {}  # (from, to) -> CUgraphEdgeData bytes
        self.keep: list[Any] = []
        self.fail: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.fns = (
            GET_NODES(self._get_nodes),
            GET_DEPS(self._get_deps),
            GET_ONE(self._get_type),
            GET_ONE(self._get_kernel),
        )
        self.get_attr = GET_ATTR(self._get_attr)

    def _id(self) -> int:
        self._next += 0x40
        return self._next

    def graph(self) -> int:
        g = self._id()
        self.graphs[g] = ([], [])
        return g

    def node(self, graph: int, t: int, after: tuple[int, ...] = ()) -> int:
        n = self._id()
        self.types[n] = t
        nodes, edges = self.graphs[graph]
        nodes.append(n)
        edges.extend((a, n) for a in after)
        return n

    def kernel(
        self,
        graph: int,
        args: list[bytes],
        after: tuple[int, ...] = (),
        func: int = 0xF00,
        kern: int = 0,
        grid: tuple[int, int, int] = (1, 1, 1),
        block: tuple[int, int, int] = (32, 1, 1),
        smem: int = 0,
        packed: bool = False,
    ) -> int:
        """A kernel node; ``packed``: its arguments in one buffer given with ``extra`` (no ``kernelParams``)."""
        n = self.node(graph, KERNEL, after)
        if packed:
            buf = ctypes.create_string_buffer(b"".join(args), len(b"".join(args)))
            size = ctypes.c_size_t(len(buf))
            extra = (VP * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
            self.keep += [buf, size, extra]
            self.params[n] = struct.pack(
                "<Q7I4xQQQQ", func, *grid, *block, smem, 0, ctypes.addressof(extra), kern, 0xC7C7
            )
            return n
        bufs = [ctypes.create_string_buffer(a, len(a)) for a in args]
        ptrs = (VP * max(len(args), 1))(*[ctypes.addressof(b) for b in bufs])
        self.keep += [bufs, ptrs]
        address = ctypes.addressof(ptrs) if args else 0
        self.params[n] = struct.pack("<Q7I4xQQQQ", func, *grid, *block, smem, address, 0, kern, 0xC7C7)
        return n

    def clone(self, graph: int) -> int:
        new = self.graph()
        m: dict[int, int] = {}
        nodes, edges = self.graphs[graph]
        for n in nodes:
            c = m[n] = self._id()
            self.types[c] = self.types[n]
            if n in self.params:
                self.params[c] = self.params[n]
            if n in self.children:
                self.children[c] = self.clone(self.children[n])
            self.graphs[new][0].append(c)
        self.graphs[new][1].extend((m[a], m[b]) for a, b in edges)
        return new

    def _count(self, name: str) -> int:
        self.calls[name] = self.calls.get(name, 0) + 1
        return self.fail.get(name, 0)

    def _get_nodes(self, graph: int, out: int | None, count: int) -> int:
        rc = self._count("cuGraphGetNodes")
        if rc:
            return rc
        nodes = self.graphs[graph][0]
        size = ctypes.c_size_t.from_address(count)
        if out:
            k = min(size.value, len(nodes))
            (VP * k).from_address(out)[:] = nodes[:k]
            size.value = k
        else:
            size.value = len(nodes)
        return 0

    def deps_of(self, node: int) -> list[int]:
        """The nodes ``node`` depends on, in the order its graph's edges list them."""
        for nodes, edges in self.graphs.values():
            if node in nodes:
                return [a for a, b in edges if b == node]
        return []

    def _get_deps(self, node: int, out: int | None, data: int | None, count: int) -> int:
        rc = self._count("cuGraphNodeGetDependencies_v2")
        if rc:
            return rc
        deps = self.deps_of(node)
        size = ctypes.c_size_t.from_address(count)
        if out:
            assert data, "edge data must be asked for (a NULL query is lossy with programmatic edges)"
            k = min(size.value, len(deps))
            (VP * k).from_address(out)[:] = deps[:k]
            ctypes.memset(data, 0, 8 * k)
            for i in range(k):
                ctypes.memmove(data + 8 * i, self.edge_data.get((deps[i], node), bytes(8)), 8)
            size.value = k
        else:
            size.value = len(deps)
        return 0

    def _get_type(self, node: int, out: int) -> int:
        rc = self._count("cuGraphNodeGetType")
        if rc:
            return rc
        ctypes.c_int.from_address(out).value = self.types[node]
        return 0

    def _get_kernel(self, node: int, out: int) -> int:
        rc = self._count("cuGraphKernelNodeGetParams_v2")
        if rc:
            return rc
        if self.types[node] != KERNEL:
            return 1  # CUDA_ERROR_INVALID_VALUE
        ctypes.memmove(out, self.params[node], KERNEL_PARAMS_SIZE)
        return 0

    def _get_attr(self, node: int, attr: int, out: int) -> int:
        rc = self._count("cuGraphKernelNodeGetAttribute")
        if rc:
            return rc
        if attr in REFUSED_IDS:
            return 1  # CUDA_ERROR_INVALID_VALUE: an id this driver does not take for graph kernel nodes
        ctypes.memmove(out, self.attrs.get(node, {}).get(attr, UNSET.get(attr, bytes(64))), 64)
        return 0

    def reader(self) -> GraphReader:
        return GraphReader(*self.fns, self.get_attr)


class FakeBindings:
    """``cuda.bindings.driver`` with the calls ``lift`` makes outside the C reader answered by a :class:`FakeDriver`."""

    def __init__(self, fake: FakeDriver) -> None:
        self._fake = fake
        self.cloned: list[int] = []
        self.destroyed: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(drv, name)

    def cuGraphChildGraphNodeGetGraph(self, node: Any) -> Any:
        return 0, drv.CUgraph(self._fake.children[int(node)])

    def cuGraphClone(self, graph: Any) -> Any:
        self.cloned.append(int(graph))
        return 0, drv.CUgraph(self._fake.clone(int(graph)))

    def cuGraphNodeGetParams(self, node: Any) -> Any:
        return 0, ("params of", int(node))

    def cuGraphDestroy(self, graph: Any) -> Any:
        self.destroyed.append(int(graph))
        return (0,)

    # The calls of the cuda.bindings reader (used where the C entry points are unavailable).
    def cuGraphGetNodes(self, graph: Any, count: int = 0) -> Any:
        nodes = self._fake.graphs[int(graph)][0]
        return 0, [drv.CUgraphNode(n) for n in nodes[:count]], len(nodes)

    def cuGraphNodeGetDependencies(self, node: Any, count: int = 0) -> Any:
        deps = self._fake.deps_of(int(node))
        got = deps[:count] if count else []
        return 0, [drv.CUgraphNode(d) for d in got], [drv.CUgraphEdgeData() for _ in got], len(deps)

    def cuGraphNodeGetType(self, node: Any) -> Any:
        return 0, drv.CUgraphNodeType(self._fake.types[int(node)])

    def cuGraphKernelNodeGetAttribute(self, node: Any, attr: Any) -> Any:
        """The launch attributes a test gave the node (``FakeDriver.attrs``, else :data:`UNSET`)."""
        if int(attr) in REFUSED_IDS:
            return drv.CUresult.CUDA_ERROR_INVALID_VALUE, None
        value = drv.CUkernelNodeAttrValue()
        ctypes.memmove(
            int(value.getPtr()), self._fake.attrs.get(int(node), {}).get(int(attr), UNSET.get(int(attr), bytes(64))), 64
        )
        return drv.CUresult.CUDA_SUCCESS, value

    def cuGraphKernelNodeGetParams(self, node: Any) -> Any:
        f = KERNEL_PARAMS.unpack_from(self._fake.params[int(node)])
        p = drv.CUDA_KERNEL_NODE_PARAMS()
        p.func = drv.CUfunction(f[0])
        p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ, p.sharedMemBytes = f[1:8]
        p.kernelParams = f[8]
        p.kern = drv.CUkernel(f[10])
        return 0, p


def make_fake(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeDriver, FakeBindings, list[Any]]:
    f = FakeDriver()
    b = FakeBindings(f)
    infos: list[Any] = []

    def kernel_info(handle: Any) -> Any:
        infos.append(handle)
        if isinstance(handle, drv.CUkernel):
            return SimpleNamespace(name=f"lib{int(handle):x}", sizes=(4,), offsets=(0,))
        return SimpleNamespace(name=f"fn{int(handle):x}", sizes=(8, 4, 4), offsets=(0, 8, 12))

    monkeypatch.setattr(_lift, "graph_reader", f.reader)
    monkeypatch.setattr(_lift, "ensure_context", lambda: None)
    monkeypatch.setattr(_lift, "require_driver", lambda: b)
    monkeypatch.setattr(_api, "require_driver", lambda: b)
    monkeypatch.setattr(_lift, "kernel_info", kernel_info)
    return f, b, infos
