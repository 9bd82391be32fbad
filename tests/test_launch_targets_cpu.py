"""cudagraph.launch & co. without a GPU: Path targets, fork/join shapes, refusals, and the stream fast path
over a fake driver."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.errors import DefinitionError, ForeignNodeError, OperandError


class CUkernel:  # the definition layer recognises kernels by type name
    pass


class LaunchConfig:  # a stand-in for cuda.core's (same attribute names)
    def __init__(
        self,
        grid: Any = None,
        cluster: Any = None,
        block: Any = None,
        shmem_size: int = 0,
        is_cooperative: bool = False,
        programmatic_stream_serialization: bool = False,
    ) -> None:
        self.grid = grid
        self.cluster = cluster
        self.block = block
        self.shmem_size = shmem_size
        self.is_cooperative = is_cooperative
        self.programmatic_stream_serialization = programmatic_stream_serialization


K = CUkernel()


def edges(g: cg.Graph) -> set[tuple[str, str]]:
    return {(a.name, b.name) for a, b in g.edges}


# ------------------------------------------------------------------------------------------- Path targets
def test_launch_on_a_path_adds_a_node_after_the_last_op():
    g = cg.Graph("g")
    p = g.path()
    a = cg.launch(p, (4, 128), K, np.int32(1))
    b = cg.launch(p, LaunchConfig(grid=(2, 3), block=64, shmem_size=256), K, np.int32(2))
    c = cg.memset(p, 0x1000, np.float32(0), 16)
    d = cg.memcpy(p, 0x2000, 0x1000, 64)
    assert [n.kind for n in g.nodes] == ["kernel", "kernel", "memset", "memcpy"]
    assert a.grid == (4, 1, 1) and a.block == (128, 1, 1) and a.args == (np.int32(1),)
    assert b.grid == (2, 3, 1) and b.block == (64, 1, 1) and b.shared_mem == 256
    assert c.width == 16 and c.element_size == 4
    assert d.nbytes == 64
    assert {(x.index, y.index) for x, y in g.edges} == {(0, 1), (1, 2), (2, 3)}
    assert p.last is d


def test_launch_config_with_a_cluster_counts_clusters_as_cuda_core_does():
    g = cg.Graph("g")
    p = g.path()
    n = cg.launch(p, LaunchConfig(grid=(3, 2), cluster=(2, 1), block=32, is_cooperative=False), K)
    assert n.grid == (6, 2, 1)
    assert n.attrs is not None and n.attrs.cluster == (2, 1, 1)
    coop = cg.launch(p, LaunchConfig(grid=8, block=32, is_cooperative=True), K)
    assert coop.attrs.cooperative is True and coop.grid == (8, 1, 1)


def test_programmatic_stream_serialization_makes_the_edge_from_the_previous_kernel_programmatic():
    g = cg.Graph("g")
    p = g.path()
    a = cg.launch(p, (1, 32), K)
    b = cg.launch(p, LaunchConfig(grid=1, block=32, programmatic_stream_serialization=True), K)
    assert b.attrs is not None and b.attrs.port_of(a) is not None


def test_fork_and_join_on_paths_make_the_dag():
    g = cg.Graph("g")
    p = g.path()
    cg.launch(p, (1, 32), K).name = "a"
    side = cg.fork(p)
    assert isinstance(side, cg.Path) and side.graph is g
    cg.launch(side, (1, 32), K).name = "b"
    cg.launch(p, (1, 32), K).name = "c"
    j = cg.join(p, side)
    j.name = "j"
    cg.launch(p, (1, 32), K).name = "d"
    assert edges(g) == {("a", "b"), ("a", "c"), ("b", "j"), ("c", "j"), ("j", "d")}
    # Joining a path that added nothing since the fork adds no node.
    idle = cg.fork(p)
    assert cg.join(p, idle) is None
    assert len(g) == 5


def test_host_record_wait_on_a_path():
    class CUevent:
        pass

    ev = CUevent()
    g = cg.Graph("g")
    p = g.path()
    h = cg.host(p, print, "x")
    r = cg.record(p, ev)
    w = cg.wait(p, ev)
    assert [n.kind for n in (h, r, w)] == [h.kind, r.kind, w.kind]
    assert h.fn is print and h.args == ("x",) and r.event is ev and w.event is ev
    assert {(x.index, y.index) for x, y in g.edges} == {(0, 1), (1, 2)}


# ------------------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("target", [None, object(), "stream", 1.5, True])
@pytest.mark.parametrize("call", ["launch", "memcpy", "memset", "host", "record", "wait", "fork"])
def test_a_target_that_is_no_stream_and_no_path_is_refused(call, target):
    fn = getattr(cg, call)
    args = {
        "launch": ((1, 32), K),
        "memcpy": (0x1000, 0x2000, 4),
        "memset": (0x1000, np.int32(0), 1),
        "host": (print,),
        "record": (object(),),
        "wait": (object(),),
        "fork": (),
    }[call]
    with pytest.raises(OperandError) as info:
        fn(target, *args)
    assert f"cudagraph.{call}: target: expected a stream" in str(info.value)
    assert type(target).__name__ in str(info.value)


@pytest.mark.parametrize("target", ["graph", "node"])
def test_a_graph_or_a_node_is_not_a_target(target):
    g = cg.Graph("g")
    obj = g if target == "graph" else g.empty()
    before = len(g)
    with pytest.raises(OperandError, match=r"cudagraph\.launch: target: .* got (Graph|EmptyNode)"):
        cg.launch(obj, (1, 32), K)
    assert len(g) == before


def test_join_of_paths_of_two_graphs_is_refused_and_adds_nothing():
    a, b = cg.Graph("a"), cg.Graph("b")
    pa, pb = a.path(), b.path()
    cg.launch(pa, (1, 32), K)
    cg.launch(pb, (1, 32), K)
    with pytest.raises(ForeignNodeError) as info:
        cg.join(pa, pb)
    msg = str(info.value)
    assert "cudagraph.join: other: a Path of Graph 'b'" in msg and "Graph 'a'" in msg
    assert len(a) == 1 and len(b) == 1


def test_join_of_a_path_and_a_stream_is_refused():
    g = cg.Graph("g")
    with pytest.raises(OperandError, match=r"cudagraph\.join: target and other must both be Paths or both streams"):
        cg.join(g.path(), 0)


@pytest.mark.parametrize(
    "config, error, text",
    [
        ((1, 2048), DefinitionError, "cudagraph.launch: config.block[0] = 2048 is outside 1..1024"),
        (LaunchConfig(grid=0, block=32), DefinitionError, "cudagraph.launch: config.grid[0] = 0"),
        (LaunchConfig(grid=1, block=None), OperandError, "cudagraph.launch: config: grid and block must both"),
        (LaunchConfig(grid=1, block=32, shmem_size=-1), DefinitionError, "config.shmem_size must be >= 0"),
        (LaunchConfig(grid=2**31 - 1, cluster=2, block=32), DefinitionError, "over the CUDA limit"),
        (LaunchConfig(grid=(1, 2, 3, 4), block=32), DefinitionError, "config.grid must have 1 to 3 dimensions"),
        ({"grid": 1}, OperandError, "cudagraph.launch: config: expected a cuda.core LaunchConfig or (grid, block)"),
        ((1, 2, 3), OperandError, "got a sequence of 3"),
        (("a", 32), OperandError, "config.grid must be an int or a tuple of ints"),
    ],
)
def test_a_config_the_kernel_cannot_take_is_refused_before_anything_is_added(config, error, text):
    g = cg.Graph("g")
    p = g.path()
    with pytest.raises(error) as info:
        cg.launch(p, config, K)
    assert text in str(info.value)
    assert len(g) == 0 and p.last is None


def test_a_kernel_of_the_wrong_kind_is_refused_on_a_path():
    g = cg.Graph("g")
    with pytest.raises(OperandError, match=r"cudagraph\.launch: kernel: expected a cuda.core Kernel.* got str"):
        cg.launch(g.path(), (1, 32), "saxpy")
    assert len(g) == 0


def test_a_cluster_that_does_not_divide_the_definition_limits_is_named():
    g = cg.Graph("g")
    with pytest.raises(DefinitionError, match=r"cudagraph\.launch: config\.cluster\[0\] = 2048"):
        cg.launch(g.path(), LaunchConfig(grid=1, cluster=2048, block=32), K)
    assert len(g) == 0


# ------------------------------------------------------------------------------------------- the stream fast path
class FakeInfo:
    def __init__(self) -> None:
        self.handle = 0xAB
        self.name = "fake"
        self.packed: list[tuple[Any, ...]] = []

    def pack(self, args: tuple[Any, ...], node: Any, bindings: dict[str, Any]) -> int:
        self.packed.append(args)
        return 0x5000


@pytest.fixture
def fake(monkeypatch):
    """The Python path of stream launches (the compiled one: tests/test_stream_launch_cpu.py)."""
    drv = pytest.importorskip("cuda.bindings.driver")
    from cudagraph.driver import stream_launch
    from cudagraph.frontends import launch as L

    calls: list[tuple[Any, ...]] = []
    infos: list[FakeInfo] = []

    def kernel_info(k: Any) -> FakeInfo:
        infos.append(FakeInfo())
        return infos[-1]

    def cu_launch(*a: Any) -> tuple[int]:
        calls.append(a)
        return (0,)

    driver = SimpleNamespace(
        CUfunction=drv.CUfunction, CUstream=drv.CUstream, CUresult=drv.CUresult, cuLaunchKernel=cu_launch
    )
    monkeypatch.setattr(stream_launch, "kernel_info", kernel_info)
    monkeypatch.setattr(stream_launch, "require_driver", lambda: driver)
    monkeypatch.setattr(stream_launch, "LAUNCHER", None)
    monkeypatch.setattr(L, "_FAST", None)
    monkeypatch.setattr(L, "_CONFIGS", {})
    monkeypatch.setattr(L, "_HANDLE_OF", {})
    stream_launch.forget()
    yield SimpleNamespace(calls=calls, infos=infos)
    stream_launch.forget()


class Stream:
    def __init__(self, h: int) -> None:
        self.h = h

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.h)


def test_launch_on_a_stream_is_one_cuLaunchKernel_with_the_kernel_read_once(fake):
    s = Stream(0x77)
    cfg = LaunchConfig(grid=(4, 2), block=128, shmem_size=64)
    cg.launch(s, cfg, K, np.int32(1))
    cg.launch(s, cfg, K, np.int32(2))
    assert len(fake.infos) == 1  # kernel_info once per kernel
    assert fake.infos[0].packed == [(np.int32(1),), (np.int32(2),)]
    assert len(fake.calls) == 2
    f, gx, gy, gz, bx, by, bz, smem, h, params, extra = fake.calls[0]
    assert int(f) == 0xAB and (gx, gy, gz, bx, by, bz) == (4, 2, 1, 128, 1, 1)
    assert (smem, h, params, extra) == (64, 0x77, 0x5000, 0)


def test_a_mutated_launch_config_is_read_again(fake):
    s = Stream(1)
    cfg = LaunchConfig(grid=4, block=128)
    cg.launch(s, cfg, K)
    cfg.grid = (9, 1, 1)
    cfg.shmem_size = 16
    cg.launch(s, cfg, K)
    assert [c[1] for c in fake.calls] == [4, 9]
    assert [c[7] for c in fake.calls] == [0, 16]


def test_tuple_configs_and_int_stream_handles(fake):
    cg.launch(0x99, (2, 64), K)
    assert fake.calls[0][1:9] == (2, 1, 1, 64, 1, 1, 0, 0x99)


def test_a_driver_failure_is_a_typed_error_naming_the_call(fake, monkeypatch):
    from cudagraph.driver import stream_launch
    from cudagraph.errors import DriverError
    from cudagraph.frontends import launch as L

    drv = pytest.importorskip("cuda.bindings.driver")
    bad = SimpleNamespace(
        CUfunction=drv.CUfunction,
        CUresult=drv.CUresult,
        cuLaunchKernel=lambda *a: (drv.CUresult.CUDA_ERROR_INVALID_VALUE,),
        cuGetErrorString=lambda e: (1, None),
    )
    monkeypatch.setattr(stream_launch, "require_driver", lambda: bad)
    monkeypatch.setattr(L, "require_driver", lambda: bad)
    with pytest.raises(DriverError) as info:
        cg.launch(Stream(1), (1, 32), K)
    assert "cuLaunchKernel failed" in str(info.value) and "cudagraph.launch of kernel 'fake'" in str(info.value)
