"""Rebinding through patch plans on the CPU: the exact driver calls of multi-name and offset binds.

The driver is a recorder: kernel-node updates (``cuGraphExecKernelNodeSetParams``)
are recorded as ``("kernel", driver node, argument bytes)`` and node updates
(``cuGraphExecNodeSetParams``, copies and fills) as ``("node", driver node, the
256 bytes of CUgraphNodeParams)``, through the compiled ``patch`` (C callbacks)
or its Python twin ``run_patches`` (``cuda.bindings`` calls replaced). Both must
make the same calls; every copy or fill must get the very bytes the general
path (fresh parameters under the new bindings) would give it.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.executable.bind_checks as _checks
import cudagraph.executable.executable as _executable
import cudagraph.executable.patch_plan as _patch
import cudagraph.ops.kinds.kernel as _kernel_writer
from cudagraph.definition.memory_info import Memory
from cudagraph.definition.param_offset import ParamAt, ParamBytes
from cudagraph.driver.kernel_args import KernelInfo
from cudagraph.errors import DriverError, OperandError
from cudagraph.executable.bind_plan import BindPlan
from cudagraph.executable.executable import Executable
from cudagraph.executable.patch_plan import PatchPlan
from cudagraph.materialize.explicit import LoweredGraph
from cudagraph.ops.node_params import node_params

drv = pytest.importorskip("cuda.bindings.driver")

from test_cache_cpu import StubLowering  # noqa: E402
from test_parametrize_cpu import FakeTensor  # noqa: E402


class CUkernel:  # the definition layer recognises kernels by type name
    def __init__(self, handle: int, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> None:
        self.handle, self.offsets, self.sizes = handle, offsets, sizes


LIFTED = CUkernel(0x77, (0, 8, 32), (8, 24, 4))  # k(float* p, struct {char* a, *b, *c}, int n)
SAXPY = CUkernel(0x78, (0, 8, 12), (8, 4, 4))  # k(float* x, float a, int n)
KERNELS = {k.handle: k for k in (LIFTED, SAXPY)}

X, X2, X3 = 0x7F00_0000_0000, 0x7F10_0000_0000, 0x7F20_0000_0000
OUT, OUT2 = 0x7F00_1000_0000, 0x7F30_0000_0000
POOL = 0x7E00_0000_0000  # device memory that is never a parameter
HOST = 0x5000_0000  # pageable host memory (unknown to the fake driver)
N = struct.pack("<i", 64)
CTX = drv.CUcontext(0x5151)
SET_PROTO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def q(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *values)


def fake_info(k: CUkernel) -> KernelInfo:
    info = KernelInfo.__new__(KernelInfo)
    info.kernel = None
    info.handle = drv.CUkernel(k.handle)
    info.is_library_kernel = True
    info.name = f"k{k.handle:x}"
    info.offsets, info.sizes = k.offsets, k.sizes
    info.total = max(o + s for o, s in zip(k.offsets, k.sizes))
    info._scratch = (ctypes.c_char * info.total)()
    info._scratch_addr = ctypes.addressof(info._scratch)
    info._ptrs = (ctypes.c_void_p * len(k.offsets))(*[info._scratch_addr + o for o in k.offsets])
    info.params_address = ctypes.addressof(info._ptrs)
    info._packers = {}
    info._kinds = {}
    return info


class Recorder(list):  # type: ignore[type-arg]
    """The recorded updates, in order; ``refuse`` holds driver nodes whose update fails."""

    mode: str
    refuse: set[int]
    keep: list[Any]
    probed: list[int]
    launches: list[tuple[int, int]]


def _kernel_bytes(handle: int, kernel_params: int) -> bytes:
    k = KERNELS[handle]
    argv = ctypes.cast(kernel_params, ctypes.POINTER(ctypes.c_void_p))
    return b"".join(ctypes.string_at(argv[i], s) for i, s in enumerate(k.sizes))


def install(monkeypatch: pytest.MonkeyPatch, mode: str) -> Recorder:
    """Replace the driver calls of binding with recorders: ``native`` (C callbacks) or ``bindings``."""
    infos = {id(k): fake_info(k) for k in KERNELS.values()}
    monkeypatch.setattr(_kernel_writer, "kernel_info", lambda k: infos[id(k)])
    rec = Recorder()
    rec.mode, rec.refuse, rec.keep, rec.probed, rec.launches = mode, set(), [], [], []
    ok, refused = drv.CUresult.CUDA_SUCCESS, drv.CUresult.CUDA_ERROR_INVALID_VALUE

    def set_kernel(exec_handle: Any, dnode: Any, params: Any) -> tuple[Any]:
        assert int(exec_handle) == 0x4242
        rec.append(("kernel", int(dnode), _kernel_bytes(int(params.kern), int(params.kernelParams))))
        return (refused if int(dnode) in rec.refuse else ok,)

    def set_node(exec_handle: Any, dnode: Any, params: Any) -> tuple[Any]:
        assert int(exec_handle) == 0x4242
        rec.append(("node", int(dnode), ctypes.string_at(params.getPtr(), 256)))
        return (refused if int(dnode) in rec.refuse else ok,)

    def set_kernel_c(exec_handle: int, dnode: int, params: int) -> int:
        assert exec_handle == 0x4242
        kernel_params, kern = struct.unpack_from("<Q8xQ", ctypes.string_at(params + 40, 24))
        rec.append(("kernel", dnode, _kernel_bytes(kern, kernel_params)))
        return 1 if dnode in rec.refuse else 0

    def set_node_c(exec_handle: int, dnode: int, params: int) -> int:
        assert exec_handle == 0x4242
        rec.append(("node", dnode, ctypes.string_at(params, 256)))
        return 1 if dnode in rec.refuse else 0

    A = drv.CUpointer_attribute

    def attributes(n: int, attrs: list[Any], ptr: int) -> tuple[Any, list[int]]:
        rec.probed.append(int(ptr))
        known = int(ptr) >= POOL
        if attrs[0] == A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            return ok, [int(drv.CUmemorytype.CU_MEMORYTYPE_DEVICE) if known else 0]
        return ok, [0]

    monkeypatch.setattr(_kernel_writer, "_SET_KERNEL", set_kernel)
    monkeypatch.setattr(_executable, "_LAUNCH", lambda e, s: (rec.launches.append((int(e), int(s))) or ok,))
    monkeypatch.setattr(Executable, "launch", getattr(Executable.launch, "func", Executable.launch))  # the twin
    monkeypatch.setattr(drv, "cuGraphExecNodeSetParams", set_node)
    monkeypatch.setattr(drv, "cuPointerGetAttributes", attributes)
    if mode == "native":
        if _patch.NATIVE is None:
            pytest.skip("cudagraph.driver._native was not built")
        rec.keep += [SET_PROTO(set_kernel_c), SET_PROTO(set_node_c)]
        k_addr, n_addr = (ctypes.cast(cb, ctypes.c_void_p).value for cb in rec.keep)
        monkeypatch.setattr(_kernel_writer, "_SET_KERNEL_ADDR", k_addr)
        monkeypatch.setattr(_patch, "_SET_NODE_ADDR", n_addr)

        def no_twin(*args: Any) -> None:
            raise AssertionError("the Python twin ran where the compiled patch should")

        monkeypatch.setattr(_patch, "run_patches", no_twin)
    else:
        monkeypatch.setattr(_kernel_writer, "_SET_KERNEL_ADDR", None)
        monkeypatch.setattr(_patch, "_SET_NODE_ADDR", None)
    return rec


@pytest.fixture(params=["native", "bindings"])
def rec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return install(monkeypatch, request.param)


def make_exe(graph: cg.Graph, **bindings: Any) -> Executable:
    dn = [drv.CUgraphNode(0x100 + i) for i in range(len(graph))]
    lw = LoweredGraph(None, graph, dn, StubLowering(graph, dn))  # type: ignore[arg-type]
    exe = Executable(graph, lw, drv.CUgraphExec(0x4242), [], dict(bindings))
    exe._finalizer.detach()
    exe._ctx = CTX
    return exe


def lifted() -> tuple[cg.Graph, dict[str, Any]]:
    """Lifted-style nodes using x and out whole, at offsets, both in one node, in copies and a fill."""
    g = cg.Graph("lifted")
    n = {
        "copy_in": g.memcpy(POOL, X + 256, 4096, name="copy_in"),
        "whole": g.kernel(LIFTED, 1, 32, (q(X), q(POOL, POOL + 8, POOL + 16), N), name="whole"),
        "both": g.kernel(LIFTED, 1, 32, (q(X + 64), q(OUT + 16, POOL, X + 4088), N), name="both"),
        "neither": g.kernel(LIFTED, 1, 32, (q(POOL), q(POOL, POOL, POOL), N), name="neither"),
        "out": g.kernel(LIFTED, 1, 32, (q(OUT), q(POOL, POOL, POOL), N), name="out"),
        "fill": g.memset(OUT + 512, 0, count=128, element_size=4, name="fill"),
        "copy_out": g.memcpy(HOST, OUT, 1024, name="copy_out"),  # to pageable host memory
    }
    g.parametrize(x=(X, 4096), out=(OUT, 1024))
    return g, n


def node_bytes(node: Any, **bindings: int) -> bytes:
    """The CUgraphNodeParams the general path gives ``node`` under ``bindings``."""
    p = node_params(node, CTX, bindings, [], [], None)
    return ctypes.string_at(p.getPtr(), 256)


def expected(n: dict[str, Any], x: int, out: int) -> dict[tuple[str, int], bytes]:
    return {
        ("node", 0x100): node_bytes(n["copy_in"], x=x, out=out),
        ("kernel", 0x101): q(x) + q(POOL, POOL + 8, POOL + 16) + N,
        ("kernel", 0x102): q(x + 64) + q(out + 16, POOL, x + 4088) + N,
        ("kernel", 0x104): q(out) + q(POOL, POOL, POOL) + N,
        ("node", 0x105): node_bytes(n["fill"], x=x, out=out),
        ("node", 0x106): node_bytes(n["copy_out"], x=x, out=out),
    }


def by_node(rec: Recorder) -> dict[tuple[str, int], bytes]:
    out = {(kind, d): data for kind, d, data in rec}
    assert len(out) == len(rec), "a node was set twice"
    return out


def test_the_definition_is_what_lifted_graphs_hold(rec):
    _, n = lifted()
    assert n["copy_in"].src == ParamAt(n["copy_in"].graph.params["x"], 256)
    assert type(n["both"].args[0]) is ParamBytes and type(n["both"].args[1]) is ParamBytes
    assert n["whole"].args[0] is n["whole"].graph.params["x"] and n["copy_out"].src is n["out"].graph.params["out"]


def test_a_bind_of_two_names_sets_each_user_once_with_its_words_patched(rec):
    g, n = lifted()
    exe = make_exe(g, x=X, out=OUT)
    assert exe.bind(x=(X2, 4096), out=(OUT2, 1024)) == 6 and exe.update_calls == 6
    assert by_node(rec) == expected(n, X2, OUT2)
    plan = exe._plans[("x", "out")]
    assert type(plan) is PatchPlan and plan.native == (rec.mode == "native")
    assert [len(nodes) for nodes in plan.entry_nodes] == [1] * 6 and plan.general == []  # (copy_out: its source)
    rec.clear()
    assert exe.launch(None, x=(X3, 4096), out=(OUT, 1024)) is None
    assert by_node(rec) == expected(n, X3, OUT) and exe._plans[("x", "out")] is plan  # the plan is kept
    assert rec.launches == [(0x4242, 0)]
    assert exe.bindings == {"x": X3, "out": OUT}
    rec.clear()
    assert exe.bind(x=(X3, 4096), out=(OUT, 1024)) == 0 and rec == []  # the same memory: no driver call


def test_a_bind_of_one_name_at_offsets_and_in_copies_sets_only_its_users(rec):
    g, n = lifted()
    exe = make_exe(g, x=X, out=OUT)
    assert exe.bind(x=(X2, 4096)) == 3
    assert type(exe._plans["x"]) is PatchPlan  # pointers at offsets and a copy: not a BindPlan
    want = expected(n, X2, OUT)
    assert by_node(rec) == {k: want[k] for k in [("node", 0x100), ("kernel", 0x101), ("kernel", 0x102)]}
    rec.clear()
    assert exe.bind(out=(OUT2, 1024)) == 4  # the words of x written before stay
    want = expected(n, X2, OUT2)
    assert by_node(rec) == {k: want[k] for k in want if k[1] in (0x102, 0x104, 0x105, 0x106)}
    rec.clear()
    exe.bind(x=(X3, 4096), out=(OUT, 1024))
    assert by_node(rec) == expected(n, X3, OUT)


def test_the_compiled_patch_and_its_twin_make_the_same_calls(monkeypatch):
    seen = {}
    for mode in ("native", "bindings"):
        with monkeypatch.context() as m:
            if mode == "native" and _patch.NATIVE is None:
                pytest.skip("cudagraph.driver._native was not built")
            r = install(m, mode)
            g, _ = lifted()
            exe = make_exe(g, x=X, out=OUT)
            exe.bind(x=(X2, 4096), out=(OUT2, 1024))
            exe.bind(x=(X3, 4096))
            exe.bind(out=(OUT, 1024), x=(X, 4096))  # another order: a plan of its own
            exe.bind(out=(OUT2, 1024))
            seen[mode] = list(r)
    assert seen["native"] == seen["bindings"] and len(seen["native"]) == 6 + 3 + 6 + 4


def test_scalars_and_pointers_together_and_shared_structures(rec):
    g = cg.Graph("g")
    p, a = g.param("p"), g.param("a", np.float32)
    use = (p, a, np.int32(8))
    for _ in range(3):
        g.kernel(SAXPY, 1, 32, use)  # one structure for the three
    g.kernel(SAXPY, 1, 32, (0x9000, a, np.int32(9)))
    exe = make_exe(g, p=0x1000, a=np.float32(1.0))
    assert exe.bind(p=0x5000, a=np.float32(4.0)) == 4
    saxpy = struct.pack("<Qfi", 0x5000, 4.0, 8)
    assert rec == [("kernel", 0x100 + i, saxpy) for i in range(3)] + [
        ("kernel", 0x103, struct.pack("<Qfi", 0x9000, 4.0, 9))
    ]
    plan = exe._plans[("p", "a")]
    assert [len(nodes) for nodes in plan.entry_nodes] == [3, 1] and plan.codes == (None, "<f")
    rec.clear()
    assert exe.bind(p=0x6000) == 3 and type(exe._plans["p"]) is BindPlan  # one whole pointer: the BindPlan
    assert [data for _, _, data in rec] == [struct.pack("<Qfi", 0x6000, 4.0, 8)] * 3


def test_a_refused_update_names_the_node_and_the_call(rec):
    g, _ = lifted()
    exe = make_exe(g, x=X, out=OUT)
    rec.refuse.add(0x105)
    with pytest.raises(DriverError, match=r"cuGraphExecNodeSetParams failed.*memset#5 'fill'"):
        exe.bind(x=(X2, 4096), out=(OUT2, 1024))
    assert exe.bindings == {"x": X2, "out": OUT2}  # the new values are bound; the nodes before hold them
    rec.refuse = {0x102}
    with pytest.raises(DriverError, match=r"cuGraphExecKernelNodeSetParams failed.*kernel#2 'both'"):
        exe.bind(x=(X3, 4096), out=(OUT, 1024))


def test_bad_memory_is_refused_before_any_node_is_touched(rec):
    g, _ = lifted()
    exe = make_exe(g, x=X, out=OUT)
    cases = [
        ({"x": (X2, 1024), "out": (OUT2, 1024)}, ["bind 'x'", "1024 bytes", "fewer than the 4096 bytes"]),
        ({"x": (X2, 4096), "out": np.zeros(256, np.float32)}, ["bind 'out'", "host memory", "ndarray"]),
        ({"x": (HOST, 4096), "out": (OUT2, 1024)}, ["bind 'x'", "not memory CUDA knows"]),
        ({"x": (X2, 4096), "nope": 1}, ["no parameter 'nope'"]),
    ]
    for values, words in cases:
        rec.clear()
        with pytest.raises(OperandError) as e:
            exe.bind(**values)
        assert all(w in str(e.value) for w in words), str(e.value)
        assert rec == [] and exe.bindings == {"x": X, "out": OUT}


def test_the_bound_address_again_asks_the_driver_nothing(rec):
    g, _ = lifted()
    exe = make_exe(g, x=X, out=OUT)
    exe.bind(x=(X2, 4096), out=(OUT2, 1024))
    rec.clear()
    rec.probed.clear()
    assert exe.bind(x=X2, out=OUT2) == 0 and rec == [] and rec.probed == []


def test_a_copy_of_an_unchecked_pointer_is_set_from_fresh_parameters(rec):
    g = cg.Graph("g")
    p = g.param("p")
    copy = g.memcpy(POOL, p, 64)
    fill = g.memset(p, 7, count=16, element_size=4)
    exe = make_exe(g, p=X)
    assert exe.bind(p=HOST) == 2  # pageable host memory: the copy's source type changes
    assert by_node(rec) == {("node", 0x100): node_bytes(copy, p=HOST), ("node", 0x101): node_bytes(fill, p=HOST)}
    plan = exe._plans["p"]
    assert [x for x, _ in plan.general] == [copy] and plan.entry_nodes == [[fill]]  # the fill is patched
    rec.clear()
    exe.bind(p=X2)
    assert by_node(rec) == {("node", 0x100): node_bytes(copy, p=X2), ("node", 0x101): node_bytes(fill, p=X2)}


def test_a_node_updated_alone_is_prepared_again(rec):
    g, n = lifted()
    exe = make_exe(g, x=X, out=OUT)
    exe.bind(x=(X2, 4096), out=(OUT2, 1024))
    x = g.params["x"]
    exe[n["copy_in"]].update(src=ParamAt(x, 512))
    rec.clear()
    exe.bind(x=(X3, 4096), out=(OUT, 1024))
    new = dict(by_node(rec))
    assert new[("node", 0x100)] == node_bytes(exe._overrides[id(n["copy_in"])], x=X3, out=OUT)
    assert struct.unpack_from("<Q", new[("node", 0x100)], 80)[0] == X3 + 512  # srcDevice


# --------------------------------------------------------------------------- the checks' memory of layouts


class Device:
    __slots__ = ("id",)

    def __init__(self, ordinal: int) -> None:
        self.id = ordinal


class Array:
    """A CuPy-like array: a property makes its __cuda_array_interface__ afresh."""

    __slots__ = ("ptr", "shape", "typestr", "ordinal")

    def __init__(self, ptr: int, shape: tuple[int, ...] = (32, 32), typestr: str = "<f4", ordinal: int = 0) -> None:
        self.ptr, self.shape, self.typestr, self.ordinal = ptr, shape, typestr, ordinal

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"data": (self.ptr, False), "shape": self.shape, "typestr": self.typestr, "version": 3}

    @property
    def device(self) -> Device:
        return Device(self.ordinal)


class Buffer:
    """A cuda.core-Buffer-like object (its type fixes its attributes)."""

    __slots__ = ("handle", "size", "device_id", "is_device_accessible")
    memory_resource = None

    def __init__(self, ptr: int, size: int = 4096, device_id: int = 0, accessible: bool = True) -> None:
        self.handle, self.size, self.device_id, self.is_device_accessible = ptr, size, device_id, accessible


@pytest.fixture
def described(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The values the full check described."""
    seen: list[Any] = []
    real = _checks.describe_memory

    def describe(obj: Any, what: str) -> Any:
        seen.append(obj)
        return real(obj, what)

    monkeypatch.setattr(_checks, "describe_memory", describe)
    return seen


def graph_of(memory: Any) -> cg.Graph:
    g = cg.Graph("g")
    g.kernel(LIFTED, 1, 32, (q(X + 8), q(POOL, POOL, POOL), N))
    g.parametrize(x=memory)
    return g


@pytest.mark.parametrize(
    "make, bad",
    [
        (
            Array,
            [
                (lambda p: Array(p, (16, 32)), ["2048 bytes, fewer than the 4096"]),
                (lambda p: Array(p, typestr="<i4"), ["dtype int32 differs from the captured dtype float32"]),
                (lambda p: Array(p, ordinal=1), ["on device 1", "on device 0"]),
            ],
        ),
        (
            Buffer,
            [
                (lambda p: Buffer(p, 2048), ["2048 bytes, fewer than the 4096"]),
                (lambda p: Buffer(p, device_id=2), ["on device 2", "on device 0"]),
                (lambda p: Buffer(p, accessible=False), ["host memory", "Buffer"]),
            ],
        ),
        (
            lambda p: FakeTensor(p, (32, 32)),
            [
                (lambda p: FakeTensor(p, (1024,)), ["shape (1024,) differs"]),
                (lambda p: FakeTensor(p, (32, 32), dtype="torch.int32"), ["dtype torch.int32 differs"]),
            ],
        ),
    ],
    ids=["cuda-array-interface", "buffer", "tensor"],
)
def test_fresh_objects_of_a_layout_that_passed_are_not_described_again(rec, described, make, bad):
    g = graph_of(make(X))
    exe = make_exe(g, x=X)
    described.clear()
    for i in range(6):
        exe.bind(x=make(X2 if i % 2 else X3))
    assert len(described) == 1  # the first of the layout only
    assert rec[-1] == ("kernel", 0x100, q(X2 + 8) + q(POOL, POOL, POOL) + N)
    for value_of, words in bad:  # another layout: checked in full, refused, nothing changed
        rec.clear()
        described.clear()
        with pytest.raises(OperandError) as e:
            exe.bind(x=value_of(X))
        assert all(w in str(e.value) for w in words) and "Graph 'g': bind 'x'" in str(e.value), str(e.value)
        assert rec == [] and exe.bindings == {"x": X2} and len(described) == 1


def test_objects_read_otherwise_than_their_type_says_are_checked_in_full(rec, described):
    class Broken(Array):
        __slots__ = ()

        @property
        def __cuda_array_interface__(self) -> dict[str, Any]:
            raise AttributeError("no interface today")

    class Loose:  # instances may carry any attribute: never read by type
        def __init__(self, ptr: int) -> None:
            self.handle, self.size, self.memory_resource = ptr, 4096, None

    g = graph_of(Array(X))
    exe = make_exe(g, x=X)
    with pytest.raises(OperandError, match=r"expected device memory.*got Broken"):
        exe.bind(x=Broken(X2))
    g2 = graph_of(Loose(X))
    exe2 = make_exe(g2, x=X)
    described.clear()
    for i in range(3):
        exe2.bind(x=Loose(X2 + 4096 * i))
    assert len(described) == 3 and exe2.bindings == {"x": X2 + 8192}
    assert _checks.reader(Loose) is None and _checks.reader(int) is None and _checks.reader(tuple) is None
    assert _checks.reader(Array) is _checks._cai_device and _checks.reader(Buffer) is _checks._buffer
    assert _checks.reader(FakeTensor) is _checks._torch


def test_exact_torch_tensors_are_read_by_a_key_that_fixes_what_the_full_check_reads():
    torch = pytest.importorskip("torch")
    assert _checks.reader(torch.Tensor) is _checks._torch_tensor
    assert _checks.reader(torch.nn.Parameter) is _checks._torch  # a subclass: read the general way
    base = torch.zeros(4, 8)
    variants = [
        base,
        torch.ones(4, 8),
        base.t(),
        base.t().contiguous(),
        torch.zeros(8, 4),
        base[:, ::2],
        torch.zeros(4, 4),
        base.view(32),
        base[1:],
        torch.zeros(3, 8),
        torch.zeros(4, 8, dtype=torch.float64),
        torch.zeros(4, 8, dtype=torch.int32),
    ]
    for a in variants:  # equal keys exactly where the general reader's keys (all the full check reads) are equal
        for b in variants:
            new_same = _checks._torch_tensor(a)[1] == _checks._torch_tensor(b)[1]
            assert new_same == (_checks._torch(a)[1] == _checks._torch(b)[1]), (a.shape, a.stride(), b.shape)
    meta = torch.zeros(4, 8, device="meta")  # keyed as a CPU tensor (not CUDA, no index): both refused in full
    assert _checks._torch_tensor(meta)[1] == _checks._torch_tensor(base)[1]
    for host in (meta, base):
        with pytest.raises(OperandError, match="host memory"):
            _checks.checked_address("x", Memory(X, 128), host, "g")
    assert _checks._torch_tensor(base[1:])[0] == base.data_ptr() + 32
    key = _checks._torch_tensor(base)[1]
    assert key[0] is torch.float32 and not isinstance(key[0], type)  # apart from the other readers' keys


def test_torch_tensors_changed_in_place_are_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    checked: list[tuple[Any, tuple[int, ...]]] = []

    def full(name: str, captured: Any, value: Any, graph: str) -> int:  # CPU tensors stand for CUDA ones here
        checked.append((value, tuple(value.shape)))
        if tuple(value.shape) != (4, 8) or value.stride() != (8, 1) or value.dtype != torch.float32:
            raise OperandError(f"bind {name!r}: another layout")
        return int(value.data_ptr())

    monkeypatch.setattr(_checks, "checked_address", full)
    check = _checks.MemoryCheck("x", Memory(X, 128), "g")
    a, b = torch.zeros(4, 8), torch.zeros(4, 8)
    assert check.address(a) == a.data_ptr() and check.address(b) == b.data_ptr()
    assert [v for v, _s in checked] == [a]  # b: a fresh tensor of the layout that passed
    for change, shape in [
        (lambda t: t.resize_(8, 4), (8, 4)),
        (lambda t: t.as_strided_((4, 8), (1, 4)), (4, 8)),
        (lambda t: t.set_(torch.zeros(2, 8)), (2, 8)),
    ]:
        t = torch.zeros(4, 8)
        assert check.address(t) == t.data_ptr()
        checked.clear()
        change(t)
        with pytest.raises(OperandError, match="another layout"):
            check.address(t)
        assert checked == [(t, shape)]
    moved = torch.zeros(4, 8)
    check.address(moved)
    storage = torch.zeros(64)
    moved.set_(storage.untyped_storage(), 32, (4, 8), (8, 1))  # the same layout elsewhere: the new address
    assert check.address(moved) == storage.data_ptr() + 128


def test_the_layouts_remembered_are_bounded(rec, described):
    g = graph_of((X, 4096))  # no layout captured: any of 4096 bytes or more passes
    exe = make_exe(g, x=X)
    limit = _checks.MemoryCheck.LIMIT
    for i in range(limit + 5):
        exe.bind(x=Array(X2 + 8192 * (i % 2), (32, 32 + i)))  # a layout of its own each time
    check = exe._checks["x"].memory
    assert check is not None and len(described) == limit + 5 and len(check.passed) == 5
    described.clear()
    exe.bind(x=Array(X3, (32, 32 + limit + 4)))
    assert described == [] and exe.bindings == {"x": X3}


# --------------------------------------------------------------------------- the compiled patch itself

needs_native = pytest.mark.skipif(_patch.NATIVE is None, reason="cudagraph.driver._native was not built")


def writes(*triples: tuple[int, int, int]) -> bytes:
    return b"".join(struct.pack("<qqq", *t) for t in triples)


@needs_native
def test_patch_writes_every_value_plus_its_addend_then_sets_each_node():
    native = _patch.NATIVE
    bufs = [ctypes.create_string_buffer(32) for _ in range(2)]
    seen: list[tuple[int, int, int, bytes]] = []

    def setter(exec_handle: int, node: int, params: int) -> int:
        seen.append((exec_handle, node, params, bufs[params - 0x700].raw))
        return 5 if node == 0x99 else 0

    cb = SET_PROTO(setter)
    fn = ctypes.cast(cb, ctypes.c_void_p).value
    entries = [
        (fn, ctypes.addressof(bufs[0]), 32, writes((0, 0, 0), (8, 1, 16), (24, 0, -1)), 0x700, [0x31, 0x32]),
        (fn, ctypes.addressof(bufs[1]), 32, writes((4, 2, 0)), 0x701, [0x33]),
    ]
    values = (0x1000, 0x2000, struct.pack("<f", 2.5))
    assert native.patch(0x42, entries, values) is None
    first = q(0x1000, 0x2010, 0) + q(0xFFF)
    second = b"\0" * 4 + struct.pack("<f", 2.5) + b"\0" * 24
    assert seen == [(0x42, 0x31, 0x700, first), (0x42, 0x32, 0x700, first), (0x42, 0x33, 0x701, second)]
    seen.clear()
    entries[1][5].insert(0, 0x99)
    assert native.patch(0x42, entries, ((1 << 64) - 1, 0, b"\1\2\3\4")) == (1, 0, 5)  # where the driver refused
    assert [s[1] for s in seen] == [0x31, 0x32, 0x99]
    assert bufs[0].raw[:8] == q((1 << 64) - 1) and bufs[0].raw[24:] == q((1 << 64) - 2)  # the addend wraps
    many = tuple(range(0x100, 0x100 + 12))  # more values than the compiled call keeps on its stack
    big = [(fn, ctypes.addressof(bufs[0]), 32, writes((0, 11, 0), (8, 10, 1)), 0x700, [0x31])]
    seen.clear()
    assert native.patch(0x42, big, many) is None and bufs[0].raw[:16] == q(0x10B, 0x10B)
    assert native.patch(0x42, [], ()) is None


@needs_native
def test_patch_refuses_malformed_entries_and_writes_nothing():
    native = _patch.NATIVE
    cb = SET_PROTO(lambda e, n, p: 0)
    fn = ctypes.cast(cb, ctypes.c_void_p).value
    buf = ctypes.create_string_buffer(16)
    at = ctypes.addressof(buf)

    def entry(w: bytes, size: int = 16, f: int = fn) -> tuple[Any, ...]:
        return (f, at, size, w, 0x700, [0x31])

    cases = [
        ((entry(writes((0, 0, 0))),), (1,), TypeError, "entries: list"),
        ([entry(writes((0, 0, 0)))], [1], TypeError, "values: tuple"),
        ([entry(writes((0, 0, 0)))[:5]], (1,), TypeError, "an entry is"),
        ([entry(writes((0, 0, 0)) + b"\0")], (1,), ValueError, "whole"),
        ([entry(writes((0, 0, 0)), f=0)], (1,), ValueError, "must not be NULL"),
        ([entry(writes((0, 0, 0), (0, 1, 0)))], (1,), ValueError, "write 1 names value 1 of 1"),
        ([entry(writes((0, 0, 0), (12, 0, 0)))], (1,), ValueError, "8 bytes at offset 12 do not fit"),
        ([entry(writes((0, 0, 0), (-8, 0, 0)))], (1,), ValueError, "offset -8"),
        ([entry(writes((0, 0, 0), (8, 1, 4)))], (1, b"ab"), ValueError, "adds 4 to a bytes value"),
        ([entry(writes((0, 0, 0)))], (1.5,), TypeError, "int or bytes"),
        ([entry(writes((0, 0, 0)))], (-1,), OverflowError, "negative"),
        ([entry(writes((0, 0, 0)))], ("x",), TypeError, "int or bytes"),
    ]
    for entries, values, error, words in cases:
        with pytest.raises(error, match=words):
            native.patch(0x42, entries, values)
        assert buf.raw == b"\0" * 16  # nothing written
    with pytest.raises(TypeError, match="address"):
        native.patch("exec", [], ())


@needs_native
def test_patch_checks_every_entry_first_and_puts_back_the_entries_after_a_refusal():
    """Every entry is checked before anything is written; the driver calls come after every write (the GIL
    released once around them), and a refusal puts back the writes of the entries after the refused one."""
    native = _patch.NATIVE
    bufs = [ctypes.create_string_buffer(16) for _ in range(3)]
    for i, b in enumerate(bufs):
        b.raw = bytes([0xA0 + i]) * 16
    before = [b.raw for b in bufs]
    seen: list[tuple[int, bytes, bytes, bytes]] = []

    def setter(exec_handle: int, node: int, params: int) -> int:
        seen.append((node, *(b.raw for b in bufs)))  # type: ignore[arg-type]
        return 7 if node == 0x99 else 0

    cb = SET_PROTO(setter)
    fn = ctypes.cast(cb, ctypes.c_void_p).value

    def entry(i: int, nodes: list[int], w: bytes | None = None) -> tuple[Any, ...]:
        return (fn, ctypes.addressof(bufs[i]), 16, writes((0, i, 0)) if w is None else w, 0x700 + i, nodes)

    values = (0x1111, 0x2222, 0x3333)
    # A malformed third entry: nothing written, no call made (the first two are not set either).
    bad = [entry(0, [0x30]), entry(1, [0x31]), entry(2, [0x32], writes((12, 2, 0)))]
    with pytest.raises(ValueError, match="8 bytes at offset 12 do not fit"):
        native.patch(0x42, bad, values)
    assert [b.raw for b in bufs] == before and seen == []
    # The second entry's node is refused: the first entry is written and set, the second written, the
    # third put back as it was; every call saw every write made.
    good = [entry(0, [0x30]), entry(1, [0x31, 0x99, 0x32]), entry(2, [0x33])]
    assert native.patch(0x42, good, values) == (1, 1, 7)
    after = [q(0x1111) + before[0][8:], q(0x2222) + before[1][8:], q(0x3333) + before[2][8:]]
    assert seen == [(0x30, *after), (0x31, *after), (0x99, *after)]
    assert [b.raw for b in bufs] == [after[0], after[1], before[2]]


@needs_native
def test_rebind_checks_every_group_first_and_puts_back_the_groups_after_a_refusal():
    native = _patch.NATIVE
    bufs = [ctypes.create_string_buffer(16) for _ in range(2)]
    seen: list[int] = []

    def setter(exec_handle: int, node: int, params: int) -> int:
        seen.append(node)
        return 7 if node == 0x99 else 0

    cb = SET_PROTO(setter)
    fn = ctypes.cast(cb, ctypes.c_void_p).value
    groups = [
        (ctypes.addressof(bufs[0]), 16, (0,), 0x700, [0x30, 0x99]),
        (ctypes.addressof(bufs[1]), 16, (8,), 0x701, [0x31]),
    ]
    with pytest.raises(ValueError, match="8 bytes at offset 12 do not fit"):
        native.rebind(fn, 0x42, groups + [(ctypes.addressof(bufs[1]), 16, (12,), 0x701, [0x32])], 5)
    assert seen == [] and bufs[0].raw == bufs[1].raw == b"\0" * 16
    assert native.rebind(fn, 0x42, groups, 0x5555) == (0, 1, 7)
    assert seen == [0x30, 0x99]
    assert bufs[0].raw == q(0x5555) + b"\0" * 8 and bufs[1].raw == b"\0" * 16  # the second group put back
