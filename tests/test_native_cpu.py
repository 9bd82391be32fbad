"""The compiled hot loops (``cudagraph.driver._native``) on the CPU, against recording fake drivers.

The driver's ``cuGraphAddNode_v2`` and ``cuGraphExecKernelNodeSetParams_v2``
are replaced by ctypes callbacks with the same C signatures, which read the
parameter structures the way the driver does (dimensions, function handle,
the argument bytes behind ``kernelParams``, the dependency array). Lowering a
definition through the compiled loop must make exactly the calls the
``cuda.bindings`` path makes; these tests run both and compare them with what
the definition says.
"""

from __future__ import annotations

import ctypes
import gc
import struct
import sys
import weakref
from typing import Any, ClassVar

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.materialize.explicit as _explicit
import cudagraph.ops.registry as _registry
from cudagraph.definition.nodes import KernelNode, Node
from cudagraph.driver import c_entry as _c_entry
from cudagraph.driver.graph_reader import KERNEL_PARAMS
from cudagraph.driver.kernel_args import KernelInfo
from cudagraph.errors import DriverError
from driver_fakes import ADD_PROTO, INVALID_VALUE, SET_PROTO, fake_info
from random_graphs import random_graph

drv = pytest.importorskip("cuda.bindings.driver")
native = _c_entry.NATIVE
needs_native = pytest.mark.skipif(native is None, reason="cudagraph.driver._native was not built")


class CUkernel:  # the definition layer recognises kernels by type name
    def __init__(self, name: str) -> None:
        self.name = name


K1, K2 = CUkernel("k1"), CUkernel("k2")


class Buffer:
    """What the definition layer takes for a cuda.core Buffer: its ``handle`` is the address."""

    def __init__(self, address: int) -> None:
        self.handle = address
        self.size = 4096
        self.memory_resource = None

    def __int__(self) -> int:
        return self.handle

    def __dlpack__(self, stream: Any = None) -> Any:  # a memory object: equal only to itself
        raise NotImplementedError


#: k1(float* x, float a, int n) and k2(int n, double* y)
INFOS = {id(K1): fake_info(0x71, (0, 8, 12), (8, 4, 4)), id(K2): fake_info(0x72, (0, 8), (4, 8))}
SIZES = {0x71: (8, 4, 4), 0x72: (4, 8)}


def read_kernel_params(address: int, offset: int) -> dict[str, Any]:
    """A kernel's launch as the driver reads it from ``CUDA_KERNEL_NODE_PARAMS`` at ``address + offset``."""
    raw = ctypes.string_at(address + offset, KERNEL_PARAMS.size)
    func, gx, gy, gz, bx, by, bz, smem, kparams, _extra, kern = KERNEL_PARAMS.unpack(raw)
    argv = ctypes.cast(kparams, ctypes.POINTER(ctypes.c_void_p))
    data = b"".join(ctypes.string_at(argv[i], s) for i, s in enumerate(SIZES[kern]))
    return {"func": func, "kern": kern, "grid": (gx, gy, gz), "block": (bx, by, bz), "smem": smem, "data": data}


class Driver:
    """Records every node added, by either path; hands out handles 0x1000, 0x1001, ..."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.refuse_at: int | None = None
        self.graphs: set[Any] = set()
        self.adders: list[Any] = []  # the compiled KernelLoops made (native path)
        self.through_bindings = 0  # nodes added through cuda.bindings
        self.cb = ADD_PROTO(self._add_c)

    def _record(self, graph: Any, deps: list[int], kind: str, launch: dict[str, Any] | None) -> int:
        if self.refuse_at == len(self.calls):
            return 0
        h = 0x1000 + len(self.calls)
        self.graphs.add(graph)
        self.calls.append({"deps": deps, "kind": kind, "launch": launch, "handle": h})
        return h

    def _add_c(self, out: Any, graph: Any, deps: Any, edata: Any, n: int, params: Any) -> int:
        """``cuGraphAddNode_v2`` as the compiled loop calls it."""
        assert edata is None
        (node_type,) = struct.unpack("<i", ctypes.string_at(params, 4))
        kernel = node_type == int(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL)
        launch = read_kernel_params(params, 16) if kernel else None
        h = self._record(graph, [deps[i] for i in range(n)], "kernel" if kernel else "other", launch)
        if not h:
            return INVALID_VALUE
        out[0] = h
        return 0

    def add_bindings(self, graph: Any, deps: Any, edata: Any, n: int, params: Any) -> tuple[Any, Any]:
        """``cuda.bindings``' ``cuGraphAddNode`` (13.x signature)."""
        self.through_bindings += 1
        dl = [int(d) for d in deps or []][:n]
        if int(params.type) == int(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL):
            h = self._record(int(graph), dl, "kernel", read_kernel_params(params.getPtr(), 16))
        else:
            h = self._record(int(graph), dl, "other", None)
        if not h:
            return drv.CUresult.CUDA_ERROR_INVALID_VALUE, None
        return drv.CUresult.CUDA_SUCCESS, drv.CUgraphNode(h)

    def add_other(self, graph: Any, deps: Any, n: int, params: Any) -> tuple[Any, Any]:
        """``Lowering.add`` for nodes that are not kernels."""
        self.through_bindings += 1
        h = self._record(int(graph), [int(d) for d in deps or []], "other", None)
        return drv.CUresult.CUDA_SUCCESS, drv.CUgraphNode(h)


def empty_params(*args: Any) -> Any:
    """``node_params`` of an empty node."""
    p = drv.CUgraphNodeParams()
    p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EMPTY
    return p


class EmptyParams:
    """A kind's ops whose single-node parameters are those of an empty node (its lowering is its own)."""

    def __init__(self, ops: Any) -> None:
        self.ops = ops
        self.lowers = ops.lowers

    def lower(self, *args: Any) -> Any:
        return self.ops.lower(*args)

    def params(self, node: Any, env: Any) -> Any:
        return empty_params()


def install(path: str, monkeypatch: pytest.MonkeyPatch) -> Driver:
    """A recording driver for lowering through ``path`` (``"native"`` or ``"bindings"``)."""
    d = Driver()
    for info in INFOS.values():  # nothing learned by an earlier test
        info._packers.clear()
        info._kinds.clear()
    monkeypatch.setattr(_explicit, "kernel_info", lambda k: INFOS[id(k)])
    real_ops_for = _explicit.ops_for
    monkeypatch.setattr(_explicit, "ops_for", lambda node: EmptyParams(real_ops_for(node)))
    monkeypatch.setattr(drv, "cuGraphAddNode", d.add_bindings)
    if path == "native":
        address = ctypes.cast(d.cb, ctypes.c_void_p).value

        def loop(graph: int, params: int) -> Any:
            d.adders.append(native.KernelLoop(address, graph, params, KernelNode, Node))
            return d.adders[-1]

        monkeypatch.setattr(_explicit, "kernel_loop", loop)
    else:
        monkeypatch.setattr(_explicit, "kernel_loop", lambda graph, params: None)
    return d


@pytest.fixture(params=["native", "bindings"])
def fake_driver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Driver:
    if request.param == "native" and native is None:
        pytest.skip("cudagraph.driver._native was not built")
    return install(request.param, monkeypatch)


def lower(graph: cg.Graph, d: Driver) -> Any:
    lowering = _explicit.Lowering("ctx", {}, [])
    lowering.add = d.add_other
    return lowering.lower_graph(graph, drv.CUgraph(0x5000))


def plain_reduced(node: Any) -> list[Any]:
    """The predecessors the driver gets in a graph of plain edges: less each one that another predecessor
    comes directly after (written here apart from cudagraph.materialize.driver_edges)."""
    preds = node.predecessors
    return [p for p in preds if not any(q is not p and p in q.predecessors for q in preds)]


def check_calls(graph: cg.Graph, d: Driver, dn: Any) -> None:
    """Every node added once, in an order where predecessors come first, with the definition's launch."""
    assert len(d.calls) == len(graph)
    handle_of = {}
    for call in d.calls:
        handle_of[call["handle"]] = call
    assert [int(x) for x in dn] == dn.raw
    assert sorted(dn.raw) == [c["handle"] for c in d.calls]
    assert d.graphs == ({0x5000} if len(graph) else set())
    for node in graph.nodes:
        call = handle_of[dn.raw[node.index]]
        assert call["deps"] == [dn.raw[p.index] for p in plain_reduced(node)]
        if isinstance(node, KernelNode):
            launch = call["launch"]
            assert launch["kern"] == int(INFOS[id(node.kernel)].handle) and launch["func"] == 0
            assert launch["grid"] == node.grid and launch["block"] == node.block
            assert launch["smem"] == node.shared_mem
            data = launch["data"]
            if node.kernel is K1:
                assert data == struct.pack("<Qfi", int(node.args[0]), float(node.args[1]), int(node.args[2]))
            else:
                assert data == struct.pack("<i", int(node.args[0])) + struct.pack("<d", float(node.args[1]))
        else:
            assert call["kind"] == "other"


def mixed_graph() -> cg.Graph:
    """Chains, fan-out, fan-in, another kernel, dimensions and shared memory that change, an empty node."""
    g = cg.Graph("mixed")
    a, n = np.float32(2.0), np.int32(64)
    same = (0x9000, a, n)
    first = g.kernel(K1, 1, 32, same, name="first")
    prev = first
    for _ in range(5):
        prev = g.kernel(K1, 1, 32, same, after=prev)
    wide = [g.kernel(K1, (2, 3), (32, 2), same, after=first) for _ in range(3)]
    other = g.kernel(K2, 4, 64, (np.int32(7), np.float64(0.5)), after=wide)
    join = g.join(prev, other)
    g.kernel(K1, 1, 32, (0x9100, np.float32(3.0), n), shared_mem=1024, after=join)
    g.kernel(K1, 1, 32, (0x9200, np.float32(4.0), n), after=[join, first])
    g.kernel(K1, 8, 128, same)  # a root of its own
    return g


@pytest.mark.parametrize("shape", ["empty", "single", "chain", "fan", "mixed"])
def test_lowering_adds_each_node_once_with_its_launch_and_dependencies(fake_driver, shape):
    g = cg.Graph(shape)
    same = (0x9000, np.float32(1.0), np.int32(32))
    if shape == "single":
        g.kernel(K1, 1, 32, same)
    elif shape == "chain":
        prev = None
        for _ in range(50):
            prev = g.kernel(K1, 1, 32, same, after=prev)
    elif shape == "fan":
        root = g.empty()
        leaves = [g.kernel(K1, 1, 32, same, after=root) for _ in range(20)]
        g.join(*leaves)
    elif shape == "mixed":
        g = mixed_graph()
    dn = lower(g, fake_driver)
    check_calls(g, fake_driver, dn)


def test_both_paths_make_the_same_calls(monkeypatch):
    if native is None:
        pytest.skip("cudagraph.driver._native was not built")
    seen = []
    for path in ("native", "bindings"):
        with monkeypatch.context() as m:
            d = install(path, m)
            lower(mixed_graph(), d)
            seen.append([(c["deps"], c["kind"], c["launch"]) for c in d.calls])
    assert len(seen[0]) == len(mixed_graph()) and seen[0] == seen[1]


@needs_native
def test_the_compiled_loop_adds_runs_of_kernel_nodes(monkeypatch):
    d = install("native", monkeypatch)
    g = cg.Graph("runs")
    prev = g.empty()
    same = (0x9000, np.float32(1.0), np.int32(32))
    for _ in range(30):
        prev = g.kernel(K1, 1, 32, same, after=prev)
    g.join(prev, g.empty())
    lower(g, d)
    (adder,) = d.adders
    assert adder.done == len(g) == 33 and adder.rc == 0 and d.through_bindings == 0
    assert adder.kernel is K1 and adder.args is same


def counting_packs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The argument tuples the Python packer packs from now on."""
    packed: list[Any] = []
    real = KernelInfo.pack

    def pack(self: KernelInfo, args: Any, node: Any, bindings: Any) -> Any:
        packed.append(args)
        return real(self, args, node, bindings)

    monkeypatch.setattr(KernelInfo, "pack", pack)
    return packed


@needs_native
def test_the_compiled_loop_packs_arguments_of_known_types(monkeypatch):
    d = install("native", monkeypatch)
    packed = counting_packs(monkeypatch)
    g = cg.Graph("distinct")
    prev = None
    for i in range(20):
        prev = g.kernel(K1, 1, 32, (Buffer(0xA000 + 16 * i), np.float32(i), np.int32(i)), after=prev)
    g.kernel(K1, 1, 32, (0x9000, np.float32(1.0), np.int32(1)), after=prev)  # int pointer: new types
    g.kernel(K1, 1, 32, (0x9010, np.float32(2.0), np.int32(2)), after=prev)
    dn = lower(g, d)
    check_calls(g, d, dn)
    assert len(packed) == 2  # once per sequence of argument types; the loop packed the rest
    assert d.adders[0].done == len(g)


SCALAR_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "float16", "int32", "uint32", "float32", "int64",
                 "uint64", "float64"]  # fmt: skip


@pytest.mark.parametrize("dtype", SCALAR_DTYPES)
def test_numpy_scalars_are_packed_as_their_bytes_both_ways(dtype, fake_driver, monkeypatch):
    """Every numpy scalar type the packers know: the compiled loop copies its value from after the object
    header (kind ``N``, checked once per type), the Python packer packs it with struct; both write its bytes."""
    from cudagraph.driver import kernel_args

    t = np.dtype(dtype).type
    size = np.dtype(dtype).itemsize
    k3 = CUkernel("k3")
    monkeypatch.setitem(INFOS, id(k3), fake_info(0x73, (0, 8), (8, size)))
    monkeypatch.setitem(SIZES, 0x73, (8, size))
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    values = [t(0), t(1), t(True)]
    if info is not None:
        values += [t(info.min), t(info.max)]
    elif dtype != "bool":
        values += [t(-2.5), t(np.inf), t(-0.0), t(np.finfo(dtype).max)]
    g = cg.Graph("scalars")
    prev = None
    for v in values:
        prev = g.kernel(k3, 1, 32, (0x9000, v), after=prev)
    dn = lower(g, fake_driver)
    assert [c["launch"]["data"] for c in fake_driver.calls] == [struct.pack("<Q", 0x9000) + v.tobytes() for v in values]
    assert dn.raw == [c["handle"] for c in fake_driver.calls]
    assert kernel_args._value_after_header(t, np.dtype(dtype))
    assert INFOS[id(k3)]._kinds == {(int, t): b"PN"}


def lower_bound(g: cg.Graph, d: Driver, bindings: dict[str, Any]) -> Any:
    """Lower ``g`` with ``bindings``, in a context the compiled loop's simple kinds take (parameters included)."""
    lowering = _explicit.Lowering(drv.CUcontext(0x77), bindings, [])
    lowering.add = d.add_other
    return lowering.lower_graph(g, drv.CUgraph(0x5000))


def test_pointer_parameters_are_packed_from_the_bindings_both_ways(fake_driver, monkeypatch):
    """A kernel node whose argument is a Param: the compiled loop writes the address bound to its name, or a
    scalar parameter's bytes (kind ``M``, from compiled_bindings), as the Python packer does."""
    packed = counting_packs(monkeypatch)
    g = cg.Graph("params")
    x, y, n = g.param("x"), g.param("y"), g.param("n", np.int32)
    shared = (x, np.float32(1.0), np.int32(7))  # one tuple for several nodes, then fresh ones
    prev = None
    for i in range(12):
        args = shared if i < 4 else ((x if i % 2 else y), np.float32(i), np.int32(i))
        prev = g.kernel(K1, 1, 32, args, after=prev)
    for _ in range(3):
        prev = g.kernel(K2, 1, 32, (n, 0x9000), after=prev)  # a scalar parameter: its bytes
    dn = lower_bound(g, fake_driver, {"x": 0xA000, "y": 0xB000, "n": np.int32(5)})
    bound = {"x": 0xA000, "y": 0xB000}
    for node in g.nodes:
        call = fake_driver.calls[[c["handle"] for c in fake_driver.calls].index(dn.raw[node.index])]
        a = node.args
        if node.kernel is K1:
            want = struct.pack("<Qfi", bound[a[0].name], float(a[1]), int(a[2]))
        else:
            want = struct.pack("<i", 5) + struct.pack("<Q", 0x9000)
        assert call["launch"]["data"] == want, node.label
    if fake_driver.adders:  # compiled: the first node of each kernel taught the loop, which packed the others
        assert packed == [shared, (n, 0x9000)]
        assert INFOS[id(K1)]._kinds[(cg.Param, np.float32, np.int32)] == b"MNN"
        assert (cg.Param, np.float32, np.int32) not in INFOS[id(K1)]._packers  # no struct format for a Param
    else:  # the twin packs every node, but a tuple again right after itself (the three repeats of shared)
        assert len(packed) == 15 - 3


@needs_native
def test_a_parameter_the_bindings_do_not_hold_as_an_int_is_left_to_python(monkeypatch):
    d = install("native", monkeypatch)
    packed = counting_packs(monkeypatch)
    g = cg.Graph("unbound")
    x = g.param("x")
    for i in range(3):
        g.kernel(K1, 1, 32, (x, np.float32(1.0), np.int32(i)))
    lower_bound(g, d, {"x": 0xA000})
    assert len(packed) == 1  # the first taught the loop
    packed.clear()
    lower_bound(g, d, {"x": True})  # not an exact int: declined, and the Python packer writes it (as 1)
    assert len(packed) == 3
    assert [c["launch"]["data"] for c in d.calls[-3:]] == [struct.pack("<Qfi", 1, 1.0, i) for i in range(3)]


def interleaved_graph() -> cg.Graph:
    """Two kernels alternating node by node (a fresh argument tuple each), some nodes with two dependencies."""
    g = cg.Graph("interleaved")
    prev = before = None
    for i in range(24):
        after = [prev, before] if before is not None and i % 4 == 3 else prev
        if i % 2:
            node = g.kernel(K2, 2, 64, (np.int32(i), np.float64(i / 4)), after=after)
        else:
            node = g.kernel(K1, 1, 32, (Buffer(0xA000 + 16 * i), np.float32(i), np.int32(i)), after=after)
        before, prev = prev, node
    return g


def test_edges_a_direct_predecessor_implies_are_left_out(fake_driver, monkeypatch):
    """An edge p -> c whose p comes directly before another plain predecessor of c is not given to the driver;
    a node with launch attributes (its edges may be programmatic) is neither reduced nor an intermediate."""

    def add_with_attrs(ops: Any, lowering: Any, node: Any, attrs: Any, handle: Any, deps: Any, n: int, *_: Any) -> Any:
        assert n == len(deps)
        return fake_driver.add_other(handle, deps, n, None)  # recorded as the driver would be called

    monkeypatch.setattr(type(_registry.LAUNCHES[cg.KernelNode]), "add_with_attrs", add_with_attrs)

    def k(name: str, after: Any = None, **kw: Any) -> Any:
        return g.kernel(K1, 1, 32, (Buffer(0xA000), np.float32(1), np.int32(2)), after=after, name=name, **kw)

    g = cg.Graph("implied")
    a = k("a")
    b = k("b", after=a)
    c = k("c", after=[b, a])  # a -> b -> c
    g.empty(after=[a, c], name="d")  # a -> c -> d (c's edge from a is left out, c still comes after a)
    k("e", after=[b, c], programmatic=b)  # its own edges are not reduced
    p = k("p", after=a, cooperative=True)
    k("x", after=[a, p])  # p has launch attributes: not an intermediate
    k("y", after=[a, b, c])  # a -> b, b -> c: only c
    k("z", after=[c, b, a])  # the same, predecessors in another order
    dn = lower(g, fake_driver)
    name_of = {dn.raw[n.index]: n.name for n in g.nodes}
    got = {name_of[call["handle"]]: [name_of[h] for h in call["deps"]] for call in fake_driver.calls}
    assert got == {
        "a": [],
        "b": ["a"],
        "c": ["b"],
        "d": ["c"],
        "e": ["b", "c"],
        "p": ["a"],
        "x": ["a", "p"],
        "y": ["c"],
        "z": ["c"],
    }
    assert len(g.edges) == 16  # the definition keeps every edge


def test_a_wide_fan_in_leaves_out_the_implied_edges(fake_driver):
    """More than eight predecessors take the sorted look-up (C) instead of the scan: the same edges are left out."""
    g = cg.Graph("fan-in")
    args = (Buffer(0xA000), np.float32(1), np.int32(2))
    root = g.kernel(K1, 1, 32, args, name="root")
    mids = []
    for i in range(12):
        after = [root, mids[-1]] if i % 2 else root  # each odd one also after the one before it
        mids.append(g.kernel(K1, 1, 32, args, after=after, name=f"m{i}"))
    g.empty(after=[*reversed(mids), root], name="sink")
    g.kernel(K2, 2, 64, (np.int32(1), np.float64(2)), after=[root, *mids], name="sink2")
    dn = lower(g, fake_driver)
    check_calls(g, fake_driver, dn)
    name_of = {dn.raw[n.index]: n.name for n in g.nodes}
    got = {name_of[call["handle"]]: [name_of[h] for h in call["deps"]] for call in fake_driver.calls}
    odd = [f"m{i}" for i in range(1, 12, 2)]
    assert got["sink"] == odd[::-1] and got["sink2"] == odd
    assert all(got[f"m{i}"] == [f"m{i - 1}"] for i in range(1, 12, 2))  # root -> m(i-1) -> m(i)


def test_interleaved_kernels_are_added_in_one_pass(fake_driver, monkeypatch):
    """The loop keeps every kernel it was shown: each kernel is introduced once, each sequence of argument types
    is packed once in Python, and the loop switches between the kernels itself."""
    introduced: list[Any] = []
    real_use = _explicit.use_kernel

    def use_kernel(loop: Any, kernel: Any, info: Any) -> None:
        introduced.append(kernel)
        real_use(loop, kernel, info)

    monkeypatch.setattr(_explicit, "use_kernel", use_kernel)
    packed: list[Any] = []
    real_pack = KernelInfo.pack

    def pack(self: KernelInfo, args: Any, node: Any, bindings: Any) -> Any:
        packed.append(node)
        return real_pack(self, args, node, bindings)

    monkeypatch.setattr(KernelInfo, "pack", pack)
    g = interleaved_graph()
    dn = lower(g, fake_driver)
    check_calls(g, fake_driver, dn)
    assert introduced == [K1, K2]
    if fake_driver.adders:  # the compiled loop: Python packed the first node of each kernel only
        (adder,) = fake_driver.adders
        assert [n.index for n in packed] == [0, 1] and adder.done == len(g) == 24
        assert adder.kernel is K2 and adder.args is g.nodes[-1].args  # type: ignore[attr-defined]
    else:  # the twin packs every node itself
        assert [n.index for n in packed] == list(range(24)) and fake_driver.through_bindings == 24


@needs_native
def test_a_kernel_shown_again_is_known_anew(monkeypatch):
    """use() of a known kernel replaces what the loop knew of it (its buffer holds no known arguments)."""
    d = install("native", monkeypatch)
    g = interleaved_graph()
    lower(g, d)
    (loop,) = d.adders
    info = INFOS[id(K1)]
    _c_entry.use_kernel(loop, K1, info)
    assert loop.kernel is K1 and loop.args is None
    loop.args = g.nodes[0].args  # type: ignore[attr-defined]
    assert loop.args is g.nodes[0].args  # type: ignore[attr-defined]
    loop.args = None  # forgets every kernel's
    _c_entry.use_kernel(loop, K2, INFOS[id(K2)])
    assert loop.kernel is K2 and loop.args is None


class DevicePointer:
    """A handle that is not an int but converts to one (as ``CUdeviceptr`` does)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __int__(self) -> int:
        return self.value


@needs_native
def test_buffer_handles_that_convert_to_int_are_packed(monkeypatch):
    d = install("native", monkeypatch)
    g = cg.Graph("handles")
    prev = None
    for i in range(6):
        prev = g.kernel(K1, 1, 32, (Buffer(DevicePointer(0xB000 + i)), np.float32(i), np.int32(i)), after=prev)  # type: ignore[arg-type]
    dn = lower(g, d)
    assert [c["launch"]["data"][:8] for c in d.calls] == [struct.pack("<Q", 0xB000 + i) for i in range(6)]
    assert d.adders[0].done == len(g) and len(dn) == 6


class CountingBuffer(Buffer):
    """A Buffer that logs who reads its ``handle`` (a cuda.core Buffer makes a new object at each read)."""

    log: ClassVar[list[tuple[str, str]]] = []

    def __init__(self, address: int, name: str) -> None:
        super().__init__(address)
        self.name = name

    @property  # type: ignore[override]
    def handle(self) -> Any:
        self.log.append((self.name, sys._getframe(1).f_code.co_name))
        return DevicePointer(self._address)

    @handle.setter
    def handle(self, value: int) -> None:
        self._address = value

    def __int__(self) -> int:
        return self._address


@needs_native
def test_a_run_reads_each_buffer_address_once_and_lets_it_go(monkeypatch):
    d = install("native", monkeypatch)
    a, b = CountingBuffer(0xA000, "a"), CountingBuffer(0xB000, "b")
    g = cg.Graph("memo")
    prev = None
    order = [a, a, a, b, b, a, a, a, b]  # runs of one buffer, and a buffer coming back after another
    for i, buf in enumerate(order):
        prev = g.kernel(K1, 1, 32, (buf, np.float32(i), np.int32(i)), after=prev)
    g.kernel(K1, 1, 32, (0xC000, np.float32(0), np.int32(0)), after=prev)  # (the loop keeps the last tuple)
    CountingBuffer.log.clear()
    lower(g, d)
    assert [c["launch"]["data"][:8] for c in d.calls] == [struct.pack("<Q", int(x)) for x in [*order, 0xC000]]
    assert d.adders[-1].done == len(g)
    # The first node goes through Python (which learns the argument types); then one run of the loop
    # reads an address where the buffer differs from the one read before it: a, b, a, b.
    assert [who for who, caller in CountingBuffer.log if caller == "lower_graph"] == ["a", "b", "a", "b"]
    probe = weakref.ref(b)
    del g, prev, b, buf, order
    gc.collect()
    assert probe() is None  # the run's memo let the buffer go when the run ended


def test_a_refused_node_is_named_and_nothing_after_it_is_added(fake_driver):
    g = mixed_graph()
    fake_driver.refuse_at = 3
    with pytest.raises(DriverError, match=r"cuGraphAddNode failed.*kernel#3 'kernel' of Graph 'mixed'"):
        lower(g, fake_driver)
    assert len(fake_driver.calls) == 3


def test_each_node_with_arguments_of_its_own_is_packed(fake_driver):
    """Each node with its own scalars and pointer: the compiled loop packs them itself once it knows the types."""
    g = cg.Graph("vary")
    prev = None
    for i in range(12):
        prev = g.kernel(K1, 1, 32, (0x9000 + i, np.float32(i), np.int32(i)), after=prev)
    for i in range(3):  # other argument types: packed in Python first
        prev = g.kernel(K1, 1, 32, (0x9100 + i, np.float32(i), np.int32(i)), after=prev)
        prev = g.kernel(K1, 1, 32, (Buffer(0xA000 + i), np.float32(i), np.int32(-i)), after=prev)
        prev = g.kernel(K2, 1, 32, (np.int32(i), np.float64(i / 2)), after=prev)
    dn = lower(g, fake_driver)
    check_calls(g, fake_driver, dn)
    for adder in fake_driver.adders:
        assert adder.done == len(g)


def test_driver_nodes_are_made_on_first_use(fake_driver):
    g = cg.Graph("lazy")
    g.kernel(K1, 1, 32, (0x9000, np.float32(1.0), np.int32(32)))
    g.empty()
    dn = lower(g, fake_driver)
    assert len(dn) == 2 and dn[-2:] == [dn[0], dn[1]]
    assert dn[0] is dn[0] and isinstance(dn[0], drv.CUgraphNode)
    assert repr(dn) == "<DriverNodes of 2 nodes>"


# --------------------------------------------------------------------------- executable kernel-node updates


@needs_native
def test_rebind_writes_the_value_once_per_group_and_sets_every_node():
    bufs = [ctypes.create_string_buffer(16) for _ in range(2)]
    seen: list[tuple[int, int, int, bytes]] = []

    def setter(exec_handle: Any, node: Any, params: Any) -> int:
        buf = bufs[0] if params == 0x700 else bufs[1]
        seen.append((exec_handle, node, params, buf.raw))
        return INVALID_VALUE if node == 0x33 else 0

    cb = SET_PROTO(setter)
    address = ctypes.cast(cb, ctypes.c_void_p).value
    groups = [
        (ctypes.addressof(bufs[0]), 16, (0, 8), 0x700, [0x31, 0x32]),
        (ctypes.addressof(bufs[1]), 16, (4,), 0x701, [0x34]),
    ]
    assert native.rebind(address, 0x42, groups, 0x1122334455667788) is None
    word = struct.pack("<Q", 0x1122334455667788)
    assert seen == [
        (0x42, 0x31, 0x700, word * 2),
        (0x42, 0x32, 0x700, word * 2),
        (0x42, 0x34, 0x701, b"\0" * 4 + word + b"\0" * 4),
    ]
    seen.clear()
    assert native.rebind(address, 0x42, groups[1:], struct.pack("<f", 2.5)) is None
    assert bufs[1].raw[4:8] == struct.pack("<f", 2.5) and len(seen) == 1
    seen.clear()
    groups[1][4].insert(0, 0x33)
    assert native.rebind(address, 0x42, groups, 7) == (1, 0, INVALID_VALUE)
    assert [s[1] for s in seen] == [0x31, 0x32, 0x33]
    assert native.set_kernel_node(address, 0x42, 0x33, 0x700) == INVALID_VALUE
    assert native.rebind(address, 0x42, [], 7) is None


@needs_native
def test_native_calls_reject_bad_arguments():
    cb = SET_PROTO(lambda e, n, p: 0)
    address = ctypes.cast(cb, ctypes.c_void_p).value
    buf = ctypes.create_string_buffer(16)
    group = (ctypes.addressof(buf), 16, (12,), 0x777, [0x31])
    with pytest.raises(TypeError):
        native.rebind(address, 0x42, (group,), 1)  # a tuple, not a list
    with pytest.raises(ValueError, match="must not be NULL"):
        native.rebind(0, 0x42, [group], 1)
    with pytest.raises(ValueError, match="8 bytes at offset 12 do not fit a buffer of 16 bytes"):
        native.rebind(address, 0x42, [group], 1)
    with pytest.raises(TypeError, match="int or bytes"):
        native.rebind(address, 0x42, [group], 1.5)
    with pytest.raises(TypeError, match="a group is"):
        native.rebind(address, 0x42, [group[:4]], 1)
    assert buf.raw == b"\0" * 16  # nothing written on a refusal
    with pytest.raises(TypeError, match="address"):
        native.set_kernel_node(address, "exec", 0x31, 0x777)
    with pytest.raises(TypeError, match="must derive from node_type"):
        native.KernelLoop(address, 1, 1, Node, KernelNode)
    with pytest.raises(ValueError, match="must not be NULL"):
        native.KernelLoop(address, 1, 0, KernelNode, Node)
    loop = native.KernelLoop(address, 1, 1, KernelNode, Node)
    with pytest.raises(ValueError, match=r"parameter 1 \(8 bytes at 12\) is outside the 16-byte buffer"):
        loop.use(K1, {}, (0, 12), (8, 8), 0x1000, 16, 0x71, True, 0x2000, None)
    with pytest.raises(ValueError, match="kernel_params must not be NULL"):
        loop.use(K1, {}, (0,), (8,), 0x1000, 16, 0x71, True, 0, None)
    with pytest.raises(TypeError, match="use"):
        loop.use(K1, [], (0,), (8,), 0x1000, 16, 0x71, True, 0x2000, None)
    with pytest.raises(TypeError, match="use"):
        loop.use(K1, {}, (0,), (8,), 0x1000, 16)  # the layout without the function and its kernelParams
    assert loop.kernel is None and loop.args is None  # nothing known after refusals

    class Plain(Node):  # no kernel slots
        __slots__ = ()

    with pytest.raises(AttributeError):
        native.KernelLoop(address, 1, 1, Plain, Node)


# --------------------------------------------------------------------------- signatures and diffs


@needs_native
def test_compiled_signature_equals_the_definition_layers():
    import random

    from cudagraph.definition import diff as _diff
    from cudagraph.executable import compare as _compare

    rng = random.Random(3)
    for size in list(range(12)) + [200, 1000]:
        for _ in range(8):
            g = random_graph(rng, size, K1, (0x9000, np.float32(1.0), np.int32(32)))
            assert _compare.topology_signature(g) == _diff.topology_signature(g)
    assert _compare._LAYOUT.signature([object()], ()) is None  # not a node: signed in Python


@needs_native
def test_compiled_signature_of_kernel_only_graphs_equals_the_definition_layers():
    """Graphs of kernel nodes only (no Python code runs in the compiled signature), then with another kind."""
    import random

    from cudagraph.definition import diff as _diff
    from cudagraph.executable import compare as _compare

    rng = random.Random(5)
    for size in [0, 1, 2, 3, 17, 300]:
        g = cg.Graph("k")
        nodes: list[Any] = []
        for i in range(size):
            after = rng.sample(nodes, rng.randint(0, min(4, i))) or None
            nodes.append(g.kernel(K1 if i % 3 else K2, 1, 32, SAME, after=after))
        sig = _compare.topology_signature(g)
        assert sig == _diff.topology_signature(g) and len(sig) == 4 * (size + g.num_edges)  # an int32 an item
        if size:
            nodes[-1]._preds.append("not a node")  # a predecessor that is not a node: signed in Python
            assert _compare._LAYOUT.signature(g._nodes, _diff.CODED_CLASSES) is None
            nodes[-1]._preds.pop()
            g.empty(after=nodes[-1])
            assert _compare.topology_signature(g) == _diff.topology_signature(g)


@needs_native
def test_compiled_diff_equals_the_definition_layers():
    import random

    from cudagraph.definition import diff as _diff
    from cudagraph.definition.diff import node_state

    rng = random.Random(4)
    buffers = [Buffer(0x1000), Buffer(0x1000), Buffer(0x2000)]  # equal only to themselves
    _diff.same_value(buffers[0], buffers[1])  # learnt as compared by identity
    ptrs = [0x1000, 0x2000, 0x1000 + 0, *buffers]
    scalars = [np.float32(1.0), np.float32(2.0), np.float64(1.0), np.float16(1.0), np.int64(2), 1]
    n = np.int32(32)
    for _ in range(80):
        size = rng.randint(1, 30)
        base = [(rng.choice(ptrs), rng.choice(scalars), n) for _ in range(size)]
        g1 = cg.Graph()
        prev = None
        for a in base:
            prev = g1.kernel(K1, 1, 32, a, after=prev)
        states = [node_state(x) for x in g1.nodes]
        g2 = cg.Graph()
        prev = None
        for a in base:
            r = rng.random()
            a2 = a if r < 0.4 else tuple(a) if r < 0.6 else (rng.choice(ptrs), rng.choice(scalars), n)
            prev = g2.kernel(K1, rng.choice([1, 1, 1, 2]), 32, a2, after=prev)
        if rng.random() < 0.3:
            g2.memset(0x10000, 0, count=4)
        assert_diffs_agree(states, g2)


@needs_native
@pytest.mark.parametrize("dtype", SCALAR_DTYPES)
def test_numpy_scalar_arguments_are_compared_by_value_in_c_as_python_compares_them(dtype):
    """Fresh numpy scalars in a rebuilt definition (as users write it): decided in C by their value's bytes, with
    ``==``'s answer for floats (-0.0 equals 0.0, a NaN equals nothing, not even the same bits)."""
    import random

    from cudagraph.definition.diff import IDENTITY_TYPES, node_state
    from cudagraph.driver import kernel_args
    from cudagraph.executable import compare as _compare

    t = np.dtype(dtype).type
    assert kernel_args._value_after_header(t, np.dtype(dtype))
    assert (t, np.dtype(dtype).itemsize, np.dtype(dtype).kind == "f") in kernel_args.value_types()
    raw = [0, 1, 2, True]
    if np.dtype(dtype).kind == "f":
        raw += [-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1.5]
    elif np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        raw += [int(info.min), int(info.max)]
    values = [t(v) for v in raw]
    rng = random.Random(7)
    old = [rng.choice(values) for _ in range(40)]
    new = [t(v) for v in old[:10]] + [rng.choice(values) for _ in range(30)]  # fresh objects, equal or not
    g1, g2 = cg.Graph(), cg.Graph()
    for v in old:
        g1.kernel(K1, 1, 32, (0x9000, v, np.int32(1)))
    for v in new:
        g2.kernel(K1, 1, 32, (0x9000, v, np.int32(1)))
    states = [node_state(x) for x in g1.nodes]
    found, suspects = _compare._layout().diff(g2._nodes, list(states), IDENTITY_TYPES, kernel_args.value_types())
    assert suspects == []  # every node decided in C
    want = [i for i, (a, b) in enumerate(zip(old, new)) if not (a is b or a == b)]
    assert [x.index for x in found] == want
    assert_diffs_agree(states, g2)


@needs_native
def test_bytes_arguments_are_compared_by_value_in_c():
    """A struct passed as bytes, made afresh each rebuild: equal bytes are the same argument, decided in C."""
    from cudagraph.definition.diff import IDENTITY_TYPES, node_state
    from cudagraph.executable import compare as _compare

    words = [b"\x00\x00\x80\x3f", b"\x00\x00\x00\x40", b"\x00\x00\x00\x00"]
    old = [words[i % 3] for i in range(12)]
    new = [bytes(bytearray(w)) for w in old[:6]] + [bytes(bytearray(words[(i + 1) % 3])) for i in range(6, 12)]
    one = np.int32(1)  # (the same object: only the bytes differ from node to node)
    g1, g2 = cg.Graph(), cg.Graph()
    for w in old:
        g1.kernel(K1, 1, 32, (0x9000, w, one))
    for w in new:
        g2.kernel(K1, 1, 32, (0x9000, w, one))
    states = [node_state(x) for x in g1.nodes]
    found, suspects = _compare._layout().diff(g2._nodes, list(states), IDENTITY_TYPES, ())
    assert suspects == [] and [x.index for x in found] == list(range(6, 12))
    assert_diffs_agree(states, g2)


@needs_native
def test_a_rebuilt_definitions_params_are_compared_in_c():
    """Each rebuild makes its own Params: the same name and dtype is the same argument, another name a change,
    decided in C as the Python twin decides (dtypes that are other objects are left to it)."""
    from cudagraph.definition.diff import IDENTITY_TYPES, node_state
    from cudagraph.driver import kernel_args
    from cudagraph.executable import compare as _compare

    def build(names: list[str]) -> cg.Graph:
        g = cg.Graph()
        params = {name: g.param(name) for name in set(names)}
        n = g.param("n", np.int32)
        for name in names:
            g.kernel(K1, 1, 32, (params[name], np.float32(1), n))
        return g

    old = ["x", "y", "x", "x", "y", "x"]
    new = ["x", "y", "y", "x", "x", "x"]
    g1, g2 = build(old), build(new)
    states = [node_state(x) for x in g1.nodes]
    found, suspects = _compare._layout().diff(g2._nodes, list(states), IDENTITY_TYPES, kernel_args.value_types())
    assert suspects == [] and [x.index for x in found] == [2, 4]
    assert_diffs_agree(states, g2)
    # a dtype equal but not the same object: left to Python, which finds it the same
    g3 = build(old)
    n3 = g3._nodes[0].args[2]
    object.__setattr__(n3, "dtype", np.dtype(np.int32).newbyteorder("="))
    if n3.dtype is not g1._nodes[0].args[2].dtype:
        found, suspects = _compare._layout().diff(g3._nodes, list(states), IDENTITY_TYPES, kernel_args.value_types())
        assert found == [] and suspects == list(range(6))
    assert_diffs_agree(states, g3)


def test_value_types_are_refused_when_malformed():
    from cudagraph.driver.c_entry import NATIVE

    if NATIVE is None:
        pytest.skip("cudagraph.driver._native was not built")
    layout = NATIVE.Layout(KernelNode, Node)
    with pytest.raises(TypeError, match="value_types: tuple"):
        layout.diff([], [], set(), [])
    g1, g2 = cg.Graph(), cg.Graph()
    g1.kernel(K1, 1, 32, (0x9000, np.float32(1), np.int32(1)))
    g2.kernel(K1, 1, 32, (0x9000, np.float32(1), np.int32(1)))
    from cudagraph.definition.diff import node_state

    states = [node_state(x) for x in g1.nodes]
    for bad in [(np.float32,), ((np.float32, 4),), ((np.float32, "4", True),), ((np.float32, 99, True),)]:
        found, suspects = layout.diff(g2._nodes, list(states), set(), bad)  # not usable: left to Python
        assert found == [] and suspects == [0]


def assert_diffs_agree(states: list[Any], g2: cg.Graph) -> None:
    """The compiled diff of ``g2`` against ``states`` finds the nodes the Python twin finds and records the very
    same state objects, leaving ``states`` as it was."""
    from cudagraph.definition import diff as _diff
    from cudagraph.executable import compare as _compare

    snapshot = list(states)
    py = _diff.diff_states(states, g2)
    nat = _compare.diff_states(states, g2)
    assert [x.index for x in nat[0]] == [x.index for x in py[0]]
    assert len(nat[1]) == len(py[1])
    for a, b in zip(nat[1], py[1]):  # the same recorded state: the same objects
        assert a is b or (len(a) == len(b) and all(x is y for x, y in zip(a, b)))
    assert all(x is y for x, y in zip(states, snapshot))  # not modified


# --------------------------------------------------------------------------- per-node executable updates


@pytest.mark.parametrize("path", ["native", "bindings"])
def test_per_node_updates_set_each_changed_node_once(path, monkeypatch):
    """Executable.update of a rebuilt definition: the changed kernel nodes get their new launch."""
    import cudagraph.ops.kinds.kernel as _kernel_writer
    from cudagraph.executable.executable import Executable
    from test_bind_plan_cpu import make_exe

    seen: list[tuple[int, dict[str, Any]]] = []

    def set_c(exec_handle: int, dnode: int, params: int) -> int:
        assert exec_handle == 0x4242
        seen.append((dnode, read_kernel_params(params, 0)))
        return 0

    def set_bindings(exec_handle: Any, dnode: Any, params: Any) -> tuple[Any]:
        seen.append((int(dnode), read_kernel_params(params.getPtr(), 0)))
        return (drv.CUresult.CUDA_SUCCESS,)

    cb = SET_PROTO(set_c)
    address = ctypes.cast(cb, ctypes.c_void_p).value
    for info in INFOS.values():
        info._packers.clear()
        info._kinds.clear()
    monkeypatch.setattr(_kernel_writer, "kernel_info", lambda k: INFOS[id(k)])
    monkeypatch.setattr(_kernel_writer, "_SET_KERNEL", set_bindings)
    others: list[Any] = []
    monkeypatch.setattr(Executable, "_set_node", lambda e, n, d, *a: others.append(n))
    if path == "native":
        if native is None:
            pytest.skip("cudagraph.driver._native was not built")
        monkeypatch.setattr(
            _kernel_writer,
            "kernel_loop",
            lambda target, params, set_mode: native.KernelLoop(address, target, params, KernelNode, Node, True),
        )
        monkeypatch.setattr(_kernel_writer, "c_address", lambda symbol: address)
    else:
        monkeypatch.setattr(_kernel_writer, "kernel_loop", lambda *a, **k: None)

    def build(step: int) -> cg.Graph:
        g = cg.Graph("steps")
        prev = None
        for i in range(40):
            if i == 20:
                prev = g.memset(0x10000, step, count=4, after=prev)
            a = (Buffer(0xA000 + 16 * i + step), np.float32(i), np.int32(i)) if i % 4 else SAME
            prev = g.kernel(K1 if i < 30 else K2, 1, 32, a if i < 30 else (np.int32(step), np.float64(i)), after=prev)
        g.kernel(K1, 2, 64, (0x9000 + step, np.float32(0.5), np.int32(7)), shared_mem=256, after=prev)
        return g

    g1 = build(0)
    exe = make_exe(g1)
    for step in (1, 2):
        seen.clear()
        others.clear()
        g2 = build(step)
        result = exe.update(g2)
        changed = [n for n in g2.nodes if isinstance(n, KernelNode) and n.args is not SAME]
        assert result.mode == "per-node" and result.nodes_updated == len(changed) + 1
        assert [d for d, _ in seen] == [0x100 + n.index for n in changed]
        for (_, launch), n in zip(seen, changed):
            assert launch["kern"] == int(INFOS[id(n.kernel)].handle)
            assert launch["grid"] == n.grid and launch["block"] == n.block and launch["smem"] == n.shared_mem
            if n.kernel is K1:
                assert launch["data"] == struct.pack("<Qfi", int(n.args[0]), float(n.args[1]), int(n.args[2]))
            else:
                assert launch["data"] == struct.pack("<i", int(n.args[0])) + struct.pack("<d", float(n.args[1]))
        assert others == [g2.nodes[20]]  # the memset, in full


@pytest.mark.parametrize("path", ["native", "bindings"])
def test_the_writer_packs_again_what_other_code_packed_meanwhile(path, monkeypatch):
    """KernelWriter.run forgets what the kernels' buffers held at each call: code run between two calls (a
    PreparedKernel, a launch) may have packed other arguments into them."""
    import cudagraph.ops.kinds.kernel as _kernel_writer

    seen: list[tuple[int, bytes]] = []

    def set_c(exec_handle: int, dnode: int, params: int) -> int:
        seen.append((dnode, read_kernel_params(params, 0)["data"]))
        return 0

    def set_bindings(exec_handle: Any, dnode: Any, params: Any) -> tuple[Any]:
        seen.append((int(dnode), read_kernel_params(params.getPtr(), 0)["data"]))
        return (drv.CUresult.CUDA_SUCCESS,)

    cb = SET_PROTO(set_c)
    address = ctypes.cast(cb, ctypes.c_void_p).value
    for info in INFOS.values():
        info._packers.clear()
        info._kinds.clear()
    monkeypatch.setattr(_kernel_writer, "kernel_info", lambda k: INFOS[id(k)])
    monkeypatch.setattr(_kernel_writer, "_SET_KERNEL", set_bindings)
    if path == "native":
        if native is None:
            pytest.skip("cudagraph.driver._native was not built")
        monkeypatch.setattr(
            _kernel_writer,
            "kernel_loop",
            lambda target, params, set_mode: native.KernelLoop(address, target, params, KernelNode, Node, True),
        )
        monkeypatch.setattr(_kernel_writer, "c_address", lambda symbol: address)
    else:
        monkeypatch.setattr(_kernel_writer, "kernel_loop", lambda *a, **k: None)
    g = cg.Graph("twice")
    a = g.kernel(K1, 1, 32, SAME)
    b = g.kernel(K2, 1, 32, (np.int32(3), np.float64(0.25)), after=a)
    writer = _kernel_writer.KernelWriter(drv.CUgraphExec(0x4242))
    nodes = [a, b, a]
    dnodes = [drv.CUgraphNode(0x100), drv.CUgraphNode(0x101)]
    want_a = struct.pack("<Qfi", 0x9000, 1.0, 32)
    for _ in range(2):
        done = writer.run(nodes, 0, dnodes)
        while done < len(nodes):  # (the Python path: the writer's write, node by node)
            assert writer.write(nodes[done], dnodes[nodes[done].index], {})  # type: ignore[arg-type]
            done += 1
        INFOS[id(K1)].pack((0x7777, np.float32(9.0), np.int32(9)), "other code", {})  # the buffer now holds these
    assert seen == [(0x100, want_a), (0x101, struct.pack("<id", 3, 0.25)), (0x100, want_a)] * 2


SAME = (0x9000, np.float32(1.0), np.int32(32))


@needs_native
def test_both_paths_make_the_same_calls_on_random_graphs(monkeypatch):
    """Random DAGs of two kernels (arguments of several types), fills and empty nodes."""
    import random

    rng = random.Random(9)
    for trial in range(40):
        size = rng.randint(1, 60)
        plan = []
        for i in range(size):
            k = rng.randint(0, min(3, i))
            after = sorted(rng.sample(range(i), k))
            kind = rng.choice("kkkkkme")
            if kind == "k" and rng.random() < 0.5:
                ptr = rng.choice([0x9000, 0x9010, Buffer(0xA000), Buffer(0xA010)])
                args = (ptr, np.float32(rng.choice([1.0, 2.0])), np.int32(rng.randint(0, 3)))
                plan.append(("k1", after, args, rng.choice([1, 2, (2, 2)]), rng.choice([0, 128])))
            elif kind == "k":
                plan.append(("k2", after, (np.int32(rng.randint(0, 3)), np.float64(0.5)), 1, 0))
            else:
                plan.append((kind, after, None, None, None))
        seen = []
        for path in ("native", "bindings"):
            g = cg.Graph(f"random{trial}")
            nodes: list[Any] = []
            for kind, after, args, grid, smem in plan:
                deps = [nodes[j] for j in after] or None
                if kind == "k1":
                    nodes.append(g.kernel(K1, grid, 32, args, shared_mem=smem, after=deps))
                elif kind == "k2":
                    nodes.append(g.kernel(K2, grid, 64, args, after=deps))
                elif kind == "m":
                    nodes.append(g.memset(0x10000, 0, count=4, after=deps))
                else:
                    nodes.append(g.empty(after=deps))
            with monkeypatch.context() as m:
                d = install(path, m)
                dn = lower(g, d)
                check_calls(g, d, dn)
            seen.append([(c["deps"], c["kind"], c["launch"]) for c in d.calls])
        assert seen[0] == seen[1]


# --------------------------------------------------------------------------- reading graphs (lifting)


def test_kernel_args_reads_the_values_behind_kernel_params():
    reads = pytest.importorskip("cudagraph.driver._reads", reason="cudagraph.driver._reads was not built")
    values = [ctypes.c_uint64(0x9000), ctypes.c_float(2.5), ctypes.c_int32(-3)]
    argv = (ctypes.c_void_p * 3)(*[ctypes.addressof(v) for v in values])
    args = reads.kernel_args(ctypes.addressof(argv), (8, 4, 4))
    assert args == (struct.pack("<Q", 0x9000), struct.pack("<f", 2.5), struct.pack("<i", -3))
    assert reads.kernel_args(0, (8,)) == -1 and reads.kernel_args(0, ()) == ()
    holes = (ctypes.c_void_p * 2)(ctypes.addressof(values[0]), None)
    assert reads.kernel_args(ctypes.addressof(holes), (8, 4)) == 1
    with pytest.raises(TypeError, match="sizes: tuple"):
        reads.kernel_args(ctypes.addressof(argv), [8, 4, 4])
    with pytest.raises(TypeError, match="address must be an address"):
        reads.kernel_args("x", (8,))
    with pytest.raises(ValueError, match="non-negative"):
        reads.kernel_args(ctypes.addressof(argv), (8, -1, 4))
