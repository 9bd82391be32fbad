"""Stream launches without a GPU: ``cudagraph.launch`` on a stream, ``Graph.run``'s kernel runs and the
capture backend's, through the compiled ``StreamLauncher`` and through its Python twins, against one
recording fake driver.

The driver's ``cuLaunchKernel``, ``cuStreamGetCaptureInfo_v3`` and
``cuStreamUpdateCaptureDependencies_v2`` are ctypes callbacks with the C signatures (the compiled
path calls them by address); ``cuda.bindings``' wrappers are replaced by Python functions recording
into the same lists. Each test runs both paths and checks the exact calls: function, grid, block,
shared memory, stream and the argument bytes the driver reads through ``kernelParams``; under
capture, the dependencies of every captured node.
"""

from __future__ import annotations

import ctypes
import gc
import struct
import weakref
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.driver import c_entry, foreign_kernels, stream_launch, streams
from cudagraph.driver.kernel_args import KernelInfo
from cudagraph.errors import DefinitionError, DriverError, KernelArgumentError, OperandError
from cudagraph.frontends import launch as L
from cudagraph.materialize import capture as C
from cudagraph.materialize.eager import StreamIssue
from cudagraph.materialize.explicit import Lowering
from cudagraph.ops.lower_state import LowerState
from driver_fakes import INFO_PROTO, INVALID_VALUE, LAUNCH_PROTO, UPDATE_PROTO, fake_info

drv = pytest.importorskip("cuda.bindings.driver")
native = c_entry.NATIVE


class CUkernel:  # the definition layer recognises kernels by type name
    pass


class LaunchConfig:  # a stand-in for cuda.core's (same attribute names)
    def __init__(self, grid: Any, block: Any, shmem_size: int = 0) -> None:
        self.grid, self.block, self.shmem_size = grid, block, shmem_size
        self.cluster = None
        self.is_cooperative = False
        self.programmatic_stream_serialization = False


class Stream:  # a stream of the protocol (as cuda.core's, torch's)
    def __init__(self, h: int) -> None:
        self.h = h

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.h)


class Buffer:  # what the definition layer takes for a cuda.core Buffer: its handle is the address
    def __init__(self, address: int) -> None:
        self.handle = address
        self.size = 4096
        self.memory_resource = None

    def __dlpack__(self, stream: Any = None) -> Any:
        raise NotImplementedError


K1, K2 = CUkernel(), CUkernel()
#: k1(float* x, float a, int n) and k2(int n, double* y)
INFOS = {id(K1): fake_info(0x71, (0, 8, 12), (8, 4, 4)), id(K2): fake_info(0x72, (0, 8), (4, 8))}
SIZES = {0x71: (8, 4, 4), 0x72: (4, 8)}


class Driver:
    """Records every launch, by either path; one stream's capture dependencies, emulated."""

    def __init__(self) -> None:
        self.launches: list[tuple[Any, ...]] = []
        self.by_bindings = 0
        self.refuse_at: int | None = None
        self.capturing = False
        self.deps: list[int] = []
        self.edges: list[tuple[int, int]] = []
        self.made: list[int] = []  # captured nodes, in order
        self.sets = 0
        self._arr: Any = None
        self.cb_launch = LAUNCH_PROTO(self._launch_c)
        self.cb_info = INFO_PROTO(self._info_c)
        self.cb_update = UPDATE_PROTO(self._update_c)

    def _record(self, func: int, dims: tuple[int, ...], smem: int, stream: int, params: int) -> int:
        if self.refuse_at == len(self.launches):
            return INVALID_VALUE
        argv = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        data = b"".join(ctypes.string_at(argv[i], s) for i, s in enumerate(SIZES[func]))
        self.launches.append((func, dims[:3], dims[3:], smem, stream, data))
        if self.capturing:
            node = 0x1000 + len(self.made)
            self.made.append(node)
            self.edges += [(d, node) for d in self.deps]
            self.deps = [node]
        return 0

    # -------------------------------------------------- as the compiled launcher calls them
    def _launch_c(
        self, f: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, smem: int, s: Any, p: Any, e: Any
    ):
        assert e is None
        return self._record(f, (gx, gy, gz, bx, by, bz), smem, s or 0, p)

    def _info_c(self, s: Any, status: Any, cid: Any, graph: Any, deps: Any, edata: Any, n: Any) -> int:
        status[0] = 1 if self.capturing else 0
        self._arr = (ctypes.c_void_p * max(len(self.deps), 1))(*self.deps)
        deps[0] = ctypes.cast(self._arr, ctypes.POINTER(ctypes.c_void_p))
        n[0] = len(self.deps)
        return 0

    def _update_c(self, s: Any, deps: Any, edata: Any, n: int, flags: int) -> int:
        assert flags == 1 and edata is None
        self.sets += 1
        self.deps = [deps[i] for i in range(n)]
        return 0

    # -------------------------------------------------- as cuda.bindings' wrappers
    def launch_bindings(self, f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, smem: int, *rest: Any):
        s, p, e = rest
        assert e == 0
        self.by_bindings += 1
        rc = self._record(int(f), (gx, gy, gz, bx, by, bz), smem, int(s), int(p))
        return (drv.CUresult(rc),)

    def info_bindings(self, h: Any) -> tuple[Any, ...]:
        return (0, 1, 7, None, [drv.CUgraphNode(d) for d in self.deps], [], len(self.deps))

    def update_bindings(self, h: Any, nodes: Any, edata: Any, n: int, flags: int) -> tuple[Any]:
        assert edata is None and n == len(nodes) and flags == 1
        self.sets += 1
        self.deps = [int(x) for x in nodes]
        return (0,)

    def address(self, cb: Any) -> int:
        return ctypes.cast(cb, ctypes.c_void_p).value or 0


def install(path: str, monkeypatch: pytest.MonkeyPatch, launch_address: int | None = None) -> Driver:
    """A recording driver for stream launches through ``path`` (``"compiled"`` or ``"python"``); the compiled
    launcher calls the entry point at ``launch_address`` instead of the driver's ``cuLaunchKernel`` when given."""
    d = Driver()
    for info in INFOS.values():  # nothing learned by an earlier test
        info._packers.clear()
        info._kinds.clear()
    bindings = SimpleNamespace(
        CUfunction=drv.CUfunction,
        CUgraphNode=drv.CUgraphNode,
        CUresult=drv.CUresult,
        CUstream=drv.CUstream,
        CUstreamUpdateCaptureDependencies_flags=drv.CUstreamUpdateCaptureDependencies_flags,
        cuLaunchKernel=d.launch_bindings,
        cuStreamGetCaptureInfo=d.info_bindings,
        cuStreamUpdateCaptureDependencies=d.update_bindings,
    )
    monkeypatch.setattr(stream_launch, "require_driver", lambda: bindings)
    monkeypatch.setattr(streams, "require_driver", lambda: bindings)
    monkeypatch.setattr(stream_launch, "kernel_info", lambda k: INFOS[id(k)])
    stream_launch.forget()
    launcher = None
    if path == "compiled":
        launch = d.address(d.cb_launch) if launch_address is None else launch_address
        launcher = stream_launch.compiled_launcher(launch, d.address(d.cb_info), d.address(d.cb_update))
    monkeypatch.setattr(stream_launch, "LAUNCHER", launcher)
    monkeypatch.setattr(L, "_FAST", launcher)
    monkeypatch.setattr(L, "_HANDLE_OF", {})
    monkeypatch.setattr(L, "_CONFIGS", {})
    return d


@pytest.fixture(params=["compiled", "python"])
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    if request.param == "compiled" and native is None:
        pytest.skip("cudagraph.driver._native was not built")
    d = install(request.param, monkeypatch)
    yield d
    stream_launch.forget()


def k1_bytes(ptr: int, a: float, n: int) -> bytes:
    return struct.pack("<Qfi", ptr, a, n)


def k2_bytes(n: int, y: float) -> bytes:
    return struct.pack("<id", n, y)  # each parameter as the driver reads it


def calls_both_ways(monkeypatch: pytest.MonkeyPatch, work: Any) -> list[Any]:
    """Run ``work(driver)`` through each path; return the launches each recorded."""
    if native is None:
        pytest.skip("cudagraph.driver._native was not built")
    seen = []
    for path in ("compiled", "python"):
        with monkeypatch.context() as m:
            d = install(path, m)
            work(d)
            seen.append(d)
        stream_launch.forget()
    return seen


# ------------------------------------------------------------------------------------------- cudagraph.launch
def launches(d: Driver) -> None:
    cfg = LaunchConfig(grid=(3, 2), block=(32, 2), shmem_size=128)
    s = Stream(0x77)
    for i in range(4):
        cg.launch(s, cfg, K1, Buffer(0xA000 + 16 * i), np.float32(i), np.int32(i))
        cg.launch(0x99, (5, 64), K1, 0xB000 + i, np.float32(0.5), np.int32(-i))
        cg.launch(drv.CUstream(0x55), cfg, K2, np.int32(i), np.float64(i / 2))
        cg.launch(s, ((2, 3, 4), (8, 8, 8)), K1, 0xC000, np.float32(1), np.int32(1))


def test_launch_makes_the_same_calls_both_ways(monkeypatch):
    c, p = calls_both_ways(monkeypatch, launches)
    assert c.launches == p.launches and len(c.launches) == 16
    assert c.launches[0] == (0x71, (3, 2, 1), (32, 2, 1), 128, 0x77, k1_bytes(0xA000, 0.0, 0))
    assert c.launches[1] == (0x71, (5, 1, 1), (64, 1, 1), 0, 0x99, k1_bytes(0xB000, 0.5, 0))
    assert c.launches[2] == (0x72, (3, 2, 1), (32, 2, 1), 128, 0x55, k2_bytes(0, 0.0))
    assert c.launches[3] == (0x71, (2, 3, 4), (8, 8, 8), 0, 0x77, k1_bytes(0xC000, 1.0, 1))
    assert c.launches[13] == (0x71, (5, 1, 1), (64, 1, 1), 0, 0x99, k1_bytes(0xB003, 0.5, -3))
    # The Python path takes every launch of the twin; the compiled one only the first three, from which
    # it learns the target types, the configuration, the kernels and the argument kinds (the fourth
    # combines what the first two taught it).
    assert p.by_bindings == 16 and c.by_bindings == 3


def test_a_changed_config_or_new_argument_types_go_through_the_python_path_again(fake):
    cfg = LaunchConfig(grid=4, block=128)
    s = Stream(1)
    cg.launch(s, cfg, K1, 0x10, np.float32(1), np.int32(1))
    cg.launch(s, cfg, K1, 0x10, np.float32(1), np.int32(1))
    cfg.grid = (9, 1, 1)
    cfg.shmem_size = 16
    cg.launch(s, cfg, K1, 0x10, np.float32(1), np.int32(1))
    cg.launch(s, cfg, K1, Buffer(0x20), np.float32(2), np.int32(2))
    cg.launch(s, cfg, K1, Buffer(0x30), np.float32(3), np.int32(3))
    assert [(x[1][0], x[3]) for x in fake.launches] == [(4, 0), (4, 0), (9, 16), (9, 16), (9, 16)]
    assert fake.launches[-1][5] == k1_bytes(0x30, 3.0, 3)
    compiled = L._FAST is not None
    assert fake.by_bindings == (3 if compiled else 5)  # learned, changed config, new argument types


BAD = [
    ((Stream(1), (1, 32), K1, 0x10, np.float32(1)), KernelArgumentError, "kernel 'k0x71' takes 3 parameters"),
    (
        (Stream(1), (1, 32), K1, 0x10, np.float64(1), np.int32(1)),
        KernelArgumentError,
        "kernel 'k0x71' parameter 1: expected 4 bytes, got 8 bytes",
    ),
    (
        (Stream(1), (1, 32), K1, -5, np.float32(1), np.int32(1)),
        OperandError,
        "argument 0: Python int -5 is taken as a 64-bit pointer",
    ),
    ((Stream(1), (0, 32), K1, 0x10, np.float32(1), np.int32(1)), DefinitionError, "config.grid[0] = 0 is outside"),
    ((Stream(1), (1, 2048), K1, 0x10, np.float32(1), np.int32(1)), DefinitionError, "config.block[0] = 2048"),
    ((Stream(1), (1, 32, 3), K1, 0x10), OperandError, "got a sequence of 3"),
    ((1.5, (1, 32), K1, 0x10, np.float32(1), np.int32(1)), OperandError, "cudagraph.launch: target: expected"),
    ((Stream(1), (1, 32), "k", 0x10), OperandError, "cudagraph.launch: kernel: expected a cuda.core Kernel"),
]


@pytest.mark.parametrize("call, error, text", BAD)
def test_bad_launches_raise_the_same_typed_error_after_the_launcher_learned(fake, call, error, text):
    cg.launch(Stream(1), (1, 32), K1, 0x10, np.float32(1), np.int32(1))  # everything learned
    cg.launch(Stream(1), (1, 32), K1, 0x10, np.float32(1), np.int32(1))
    before = len(fake.launches)
    with pytest.raises(error) as info:
        cg.launch(*call)
    assert text in str(info.value)
    assert len(fake.launches) == before  # nothing launched


def test_a_driver_refusal_is_a_driver_error_naming_the_call_and_kernel(fake):
    s = Stream(1)
    cg.launch(s, (1, 32), K1, 0x10, np.float32(1), np.int32(1))
    fake.refuse_at = 1
    with pytest.raises(DriverError) as info:
        cg.launch(s, (1, 32), K1, 0x10, np.float32(1), np.int32(1))
    msg = str(info.value)
    assert "cuLaunchKernel failed" in msg and "CUDA_ERROR_INVALID_VALUE" in msg
    assert "cudagraph.launch of kernel 'k0x71'" in msg
    assert info.value.call == "cuLaunchKernel"


def test_an_int_handle_is_prepared_once_by_value_though_each_call_passes_a_new_int(fake, monkeypatch):
    handle = 0x7F00_0000_1234  # a CUkernel handle, larger than the ints Python shares
    made: list[Any] = []

    def info_of(kernel: Any) -> KernelInfo:
        made.append(kernel)
        return INFOS[id(K1)]

    monkeypatch.setattr(stream_launch, "kernel_info", info_of)
    monkeypatch.setitem(foreign_kernels._CACHE, handle, foreign_kernels.ForeignKernel(handle, K1, None))
    given = []
    for i in range(5):
        kernel = int(str(handle))  # a new int object of the same value, as int(kernel.handle) gives
        given.append(kernel)
        cg.launch(Stream(1), (1, 32), kernel, 0x10 + i, np.float32(i), np.int32(i))
    assert len({id(k) for k in given}) == 5  # (all alive: five distinct objects)
    assert made == [handle]  # prepared once
    assert fake.launches == [(0x71, (1, 1, 1), (32, 1, 1), 0, 1, k1_bytes(0x10 + i, i, i)) for i in range(5)]
    assert fake.by_bindings == (1 if L._FAST is not None else 5)  # the compiled launcher finds it by value
    assert stream_launch.prepared(int(str(handle))) is stream_launch.prepared(handle)
    assert made == [handle]
    stream_launch.forget()  # forgotten with every other prepared kernel
    cg.launch(Stream(1), (1, 32), int(str(handle)), 0x10, np.float32(0), np.int32(0))
    assert made == [handle, handle]


def test_prepared_int_handles_count_toward_the_bound_of_prepared_kernels(fake, monkeypatch):
    made: list[Any] = []
    monkeypatch.setattr(stream_launch, "kernel_info", lambda k: made.append(k) or INFOS[id(K1)])
    monkeypatch.setattr(stream_launch, "MAX_KERNELS", 2)
    handles = [0x7F00_0000_1000 + 8 * i for i in range(3)]
    for h in handles:
        monkeypatch.setitem(foreign_kernels._CACHE, h, foreign_kernels.ForeignKernel(h, K1, None))
        cg.launch(Stream(1), (1, 32), int(str(h)), 0x10, np.float32(1), np.int32(1))
    assert made == handles
    assert set(stream_launch._PREPARED_INTS) == {handles[2]}  # the third started the tables afresh
    cg.launch(Stream(1), (1, 32), int(str(handles[2])), 0x10, np.float32(1), np.int32(1))
    cg.launch(Stream(1), (1, 32), int(str(handles[0])), 0x10, np.float32(1), np.int32(1))
    assert made == handles + [handles[0]] and len(fake.launches) == 5


class Reentrant:
    """A buffer whose address is read by launching (the compiled launcher is running: it declines)."""

    def __init__(self, address: int) -> None:
        self.address = address
        self.size = 4096
        self.memory_resource = None

    @property
    def handle(self) -> int:
        cg.launch(Stream(2), (1, 1), K2, np.int32(self.address), np.float64(0))
        return self.address

    def __dlpack__(self, stream: Any = None) -> Any:
        raise NotImplementedError


def test_a_launch_from_code_the_launcher_runs_takes_the_python_path(fake):
    for i in range(3):
        cg.launch(Stream(1), (1, 32), K1, Reentrant(0x40 + i), np.float32(i), np.int32(i))
    outer = [x for x in fake.launches if x[0] == 0x71]
    inner = [x for x in fake.launches if x[0] == 0x72]
    assert [x[5] for x in outer] == [k1_bytes(0x40 + i, float(i), i) for i in range(3)]
    assert len(inner) >= 3 and all(x[4] == 2 for x in inner)


# ------------------------------------------------------------------------------------------- Graph.run
def mixed_graph(n: int = 12) -> cg.Graph:
    """Runs of two kernels, fan-out and fan-in, empty nodes, changing dimensions and a parameter."""
    g = cg.Graph("mixed")
    same = (0x9000, np.float32(2.0), np.int32(64))
    first = g.kernel(K1, 1, 32, same, name="first")
    prev = first
    for i in range(n):
        prev = g.kernel(
            K1, (1 + i % 3, 2), 32, same if i % 4 else (Buffer(0xA0 + i), np.float32(i), np.int32(i)), after=prev
        )
    wide = [g.kernel(K2, 4, 64, (np.int32(i), np.float64(i)), after=first) for i in range(3)]
    join = g.join(prev, *wide)
    g.kernel(K1, 2, 64, (g.param("x"), np.float32(3.0), np.int32(5)), shared_mem=256, after=join)
    g.kernel(K1, 1, 32, (0x9200, np.float32(4.0), np.int32(6)), after=[join, first])
    return g


def run_graph(d: Driver, g: cg.Graph | None = None) -> None:
    g = mixed_graph() if g is None else g
    with stream_launch_lock():
        StreamIssue({"x": 0xF000}, [], [], LowerState("ctx", eager=True)).issue_graph(g, drv.CUstream(0x42))


def stream_launch_lock() -> Any:
    from cudagraph.driver.kernel_args import PACKING_LOCK

    return PACKING_LOCK


def test_graph_run_makes_the_same_calls_both_ways(monkeypatch):
    g = mixed_graph()
    c, p = calls_both_ways(monkeypatch, lambda d: run_graph(d, g))
    assert c.launches == p.launches
    kernels = [n for n in g.topological_order() if n.kind == "kernel"]
    assert len(c.launches) == len(kernels) == 18
    for node, call in zip(kernels, c.launches):
        func, grid, block, smem, stream, data = call
        assert (grid, block, smem, stream) == (node.grid, node.block, node.shared_mem, 0x42)
        if node.kernel is K1:
            a = node.args[0]
            ptr = 0xF000 if type(a).__name__ == "Param" else getattr(a, "handle", a)
            assert func == 0x71 and data == k1_bytes(ptr, float(node.args[1]), int(node.args[2]))
        else:
            assert func == 0x72 and data == k2_bytes(int(node.args[0]), float(node.args[1]))
    # the compiled loop takes every kernel node but the first of each kernel and of each sequence of
    # argument types (K1 with ints, K1 with a Buffer, K2), and the one with a parameter
    assert p.by_bindings == 18 and c.by_bindings == 4


def test_graph_run_packs_pointer_parameters_from_the_runs_bindings(monkeypatch):
    """Kernel nodes whose arguments are parameters: the compiled issue packs the address or the scalar's bytes
    the run binds (it went through Python for every such node), as the Python path writes them."""
    g = cg.Graph("params")
    x, y, n = g.param("x"), g.param("y"), g.param("n", np.int32)
    prev = None
    for i in range(10):
        prev = g.kernel(K1, 1, 32, ((x, y)[i % 2], np.float32(i), np.int32(i)), after=prev)
    for _ in range(3):
        prev = g.kernel(K2, 1, 32, (n, np.float64(0.5)), after=prev)
    bindings = {"x": 0xF000, "y": 0xE000, "n": np.int32(9)}

    def work(d: Driver) -> None:
        with stream_launch_lock():
            StreamIssue(bindings, [], [], LowerState("ctx", eager=True)).issue_graph(g, drv.CUstream(0x42))

    c, p = calls_both_ways(monkeypatch, work)
    assert c.launches == p.launches
    want = [k1_bytes((0xF000, 0xE000)[i % 2], float(i), i) for i in range(10)] + [k2_bytes(9, 0.5)] * 3
    assert [call[-1] for call in c.launches] == want
    assert p.by_bindings == 13 and c.by_bindings == 2  # the first node of each kernel teaches the kinds


class LoggedBuffer(Buffer):
    """A Buffer that logs each read of its ``handle`` (a cuda.core Buffer makes a new object per read)."""

    def __init__(self, address: int, name: str, log: list[str]) -> None:
        super().__init__(address)
        self.name, self.log = name, log

    @property  # type: ignore[override]
    def handle(self) -> int:
        self.log.append(self.name)
        return self._address

    @handle.setter
    def handle(self, value: int) -> None:
        self._address = value


def test_graph_run_reads_each_buffer_address_once_a_run_and_lets_it_go(fake):
    log: list[str] = []
    a, b = LoggedBuffer(0xA000, "a", log), LoggedBuffer(0xB000, "b", log)
    order = [a, a, b, b, b, a, b]
    g = cg.Graph("memo")
    prev = g.kernel(K1, 1, 32, (a, np.float32(0), np.int32(0)))  # taught first (the types are learned)
    run_graph(fake, g)
    for i, buf in enumerate(order):
        prev = g.kernel(K1, 1, 32, (buf, np.float32(i), np.int32(i)), after=prev)
    g.kernel(K1, 1, 32, (0x9000, np.float32(0), np.int32(0)), after=prev)  # (the last tuple stays packed)
    fake.launches.clear()
    log.clear()
    run_graph(fake, g)
    assert [x[5][:8] for x in fake.launches] == [struct.pack("<Q", x._address) for x in [a, *order]] + [
        struct.pack("<Q", 0x9000)
    ]
    if fake.by_bindings > 2:  # the Python twin launches every node and reads each one's buffer
        assert log == ["a", *[x.name for x in order]]
    else:  # the compiled run reads an address where the buffer differs from the one read before it
        assert log == ["a", "b", "a", "b"]
    probe = weakref.ref(b)
    del g, prev, b, buf, order
    gc.collect()
    assert probe() is None


def test_graph_run_names_the_node_the_driver_refused(fake):
    g = mixed_graph()
    run_graph(fake, g)  # learned
    fake.launches.clear()
    fake.refuse_at = 4
    with pytest.raises(DriverError) as info:
        run_graph(fake, g)
    kernels = [n for n in g.topological_order() if n.kind == "kernel"]
    assert info.value.node is kernels[4] and "cuLaunchKernel failed for" in str(info.value)
    assert len(fake.launches) == 4


def test_graph_run_checks_arguments_by_node(fake):
    g = cg.Graph("bad")
    a = g.kernel(K1, 1, 32, (0x10, np.float32(1), np.int32(1)), name="a")
    b = g.kernel(K1, 1, 32, (0x10, np.float64(1), np.int32(1)), after=a, name="b")
    run_graph(fake, cg.Graph("empty"))
    with pytest.raises(KernelArgumentError, match=r"kernel#1 'b'.*parameter 1: expected 4 bytes, got 8") as info:
        run_graph(fake, g)
    assert b.label in str(info.value)
    assert len(fake.launches) == 1


# ------------------------------------------------------------------------------------------- capture
def replay(d: Driver, g: cg.Graph) -> tuple[list[int], dict[int, Any]]:
    """The capture backend's replay of ``g`` on the fake stream; ``(exits, {id(node): driver node})``."""
    rp = C._Replay.__new__(C._Replay)
    rp.drv = drv
    rp.lowering = Lowering("ctx", {"x": 0xF000}, [])
    rp.origin = SimpleNamespace(handle=0x42)
    rp.h = rp.handle = 0x42
    rp.run = StreamIssue(rp.lowering.bindings, [], [], LowerState("ctx", eager=True))
    rp.cur, rp.fresh, rp.raw = [], False, []
    launcher = stream_launch.LAUNCHER
    rp.fast = launcher if launcher is not None and launcher.captures else None
    d.capturing = True
    top = [0] * len(g._nodes)
    with stream_launch_lock():
        exits = C._replay(rp, g, (), top)
    C._record(rp.lowering, g, top)
    mapped = {id(n): int(d) for n, d in rp.lowering.node_map().values() if d is not None}
    return exits, mapped


def expected_edges(g: cg.Graph, dn: dict[int, int]) -> set[tuple[int, int]]:
    """The driver edges the definition says: kernel to kernel, through empty and child nodes."""

    def exits(n: Any) -> set[int]:
        if n.kind == "kernel":
            return {dn[id(n)]}
        if n.kind == "child":
            out: set[int] = set()
            for b in n.body._nodes:
                if not b._succs:
                    out |= exits_in(b, n)
            return out
        return entry(n)

    def exits_in(b: Any, child: Any) -> set[int]:
        return {dn[id(b)]} if b.kind == "kernel" else entry(child)

    def entry(n: Any) -> set[int]:
        out: set[int] = set()
        for p in n._preds:
            out |= exits(p)
        return out

    edges = set()
    for n in g._nodes:
        if n.kind == "kernel":
            edges |= {(x, dn[id(n)]) for x in entry(n)}
        elif n.kind == "child":
            for b in n.body._nodes:
                src = {dn[id(p)] for p in b._preds} if b._preds else entry(n)
                edges |= {(x, dn[id(b)]) for x in src}
    return edges


def capture_graph() -> cg.Graph:
    g = mixed_graph(6)
    body = cg.Graph("body")
    x = body.kernel(K2, 1, 32, (np.int32(1), np.float64(1)))
    body.kernel(K2, 1, 32, (np.int32(2), np.float64(2)), after=x)
    body.kernel(K1, 1, 32, (0x77, np.float32(1), np.int32(3)))
    leaves = [n for n in g.nodes if not n.successors]
    child = g.child(body, after=leaves)
    g.kernel(K1, 3, 32, (0x88, np.float32(1), np.int32(4)), after=child)
    g.kernel(K1, 3, 32, (0x89, np.float32(1), np.int32(5)), after=g.empty(after=child))
    return g


def test_capture_gives_every_kernel_exactly_its_definition_dependencies_both_ways(monkeypatch):
    g = capture_graph()
    results = []

    def work(d: Driver) -> None:
        exits, mapped = replay(d, g)
        results.append((exits, mapped))

    c, p = calls_both_ways(monkeypatch, work)
    assert c.launches == p.launches and c.edges == p.edges and c.made == p.made
    (c_exits, c_map), (p_exits, p_map) = results
    assert c_map == p_map and c_exits == p_exits
    child = next(n for n in g.nodes if n.kind == "child")
    kernels = [n for n in g.nodes if n.kind == "kernel"] + list(child.body.nodes)
    assert sorted(c_map.values()) == c.made and len(c.made) == len(kernels)  # every kernel, once
    assert set(c.edges) == expected_edges(g, c_map) and len(c.edges) == len(set(c.edges))
    assert c.by_bindings < p.by_bindings
    assert c.sets == p.sets  # the dependencies are set only where they differ


def test_a_chain_is_captured_without_setting_dependencies(fake):
    g = cg.Graph("chain")
    prev = None
    for i in range(20):
        prev = g.kernel(K1, 1, 32, (0x10, np.float32(1), np.int32(i)), after=prev)
    replay(fake, g)
    assert fake.sets == 0 and len(fake.made) == 20
    assert fake.edges == [(fake.made[i], fake.made[i + 1]) for i in range(19)]


def test_capture_leaves_out_the_edges_a_predecessor_implies_both_ways(monkeypatch):
    """after=[prev, prev2] (prev2 -> prev) and a 12-wide fan-in are captured as the plain chain: no dependency
    is set, and the captured edges are the chain's, as explicit construction gives the driver."""
    g = cg.Graph("implied")
    prev = prev2 = None
    for i in range(12):
        after = [prev, prev2] if prev2 is not None and i % 4 == 3 else prev
        node = g.kernel(K1, 1, 32, (0x10, np.float32(1), np.int32(i)), after=after)
        prev2, prev = prev, node
    g.kernel(K1, 1, 32, (0x11, np.float32(1), np.int32(99)), after=list(reversed(g.nodes)))  # only the last
    c, p = calls_both_ways(monkeypatch, lambda d: replay(d, g))
    for d in (c, p):
        assert d.sets == 0 and len(d.made) == 13
        assert d.edges == [(d.made[i], d.made[i + 1]) for i in range(12)]


def test_capture_refuses_a_kernel_with_large_shared_memory_by_name(fake):
    from cudagraph.errors import UnsupportedError

    g = cg.Graph("smem")
    a = g.kernel(K1, 1, 32, (0x10, np.float32(1), np.int32(1)))
    g.kernel(K1, 1, 32, (0x10, np.float32(1), np.int32(1)), shared_mem=64 * 1024, after=a, name="big")
    with pytest.raises(UnsupportedError, match=r"kernel#1 'big'.*48 KiB"):
        replay(fake, g)
    assert len(fake.launches) == 1


# ------------------------------------------------------------------------------------------- the compiled types
needs_native = pytest.mark.skipif(native is None, reason="cudagraph.driver._native was not built")


@needs_native
def test_launch_kernel_packs_as_the_python_packer():
    info = fake_info(0x71, (0, 8, 12), (8, 4, 4))
    lk = native.LaunchKernel(K1, 0x71, info._kinds, info.offsets, info.sizes)
    assert lk.source is K1
    args = (Buffer(0x1234), np.float32(1.5), np.int32(-2))
    assert lk.pack(args) is None  # nothing learned yet
    info.pack(args, "n", {})
    assert lk.pack(args) == ctypes.string_at(info._scratch_addr, 16) == k1_bytes(0x1234, 1.5, -2)
    assert lk.pack((0x1234, np.float32(1.5), np.int32(-2))) is None  # other types: not learned
    assert lk.pack((Buffer(0x1), np.float32(1))) is None  # another count


@needs_native
@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"launch": 0}, ValueError),
        ({"names": ("grid",)}, ValueError),
        ({"limits": (1, 2)}, ValueError),
        ({"kernel_type": int}, TypeError),
    ],
)
def test_the_launcher_refuses_bad_construction(kwargs, error):
    from cudagraph.definition.nodes import KernelNode, Node

    base = dict(
        launch=0x1000,
        capture_info=0,
        update_deps=0,
        kernel_type=KernelNode,
        node_type=Node,
        kernels={},
        names=stream_launch.CONFIG_ATTRS,
        limits=(1, 1, 1, 1, 1, 1),
    )
    with pytest.raises(error):
        native.StreamLauncher(**{**base, **kwargs})
    launcher = native.StreamLauncher(**base)
    assert launcher.rc == 0 and launcher.captures is False
    assert launcher.issue([], 0, 0) == 0 and launcher.capture([], 0, 0, [], [], ()) == 0
    assert launcher.launch(1, (1, 1), K1, ()) == -1  # nothing learned
