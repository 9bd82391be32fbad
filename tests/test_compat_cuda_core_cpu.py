"""cudagraph.compat behaves as cuda.core 1.2 does, without a GPU: kernel arguments packed as cuda.core packs them
(a Python bool, a Python int for a narrower integer parameter), a graph allocation with no free accepted at
instantiation, pred/succ as full mutable sets. The same programs run through cuda.core and compat on a GPU in
tests/test_compat_cuda_core_gpu.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

import cudagraph as cg
from cudagraph.errors import CudaGraphError, CycleError, DefinitionError, KernelArgumentError
from cudagraph.frontends.compat import common, entry, packing

compat = cg.compat


class CUkernel:  # the definition layer recognises kernels by type name
    pass


class LaunchConfig:  # a stand-in for cuda.core's (same attribute names)
    def __init__(self, grid: Any = 1, block: Any = 1) -> None:
        self.grid, self.block, self.shmem_size, self.cluster = grid, block, 0, None
        self.is_cooperative = False
        self.programmatic_stream_serialization = False


K = CUkernel()
CFG = LaunchConfig()


@pytest.fixture
def sizes(monkeypatch: pytest.MonkeyPatch) -> dict[int, tuple[int, ...]]:
    """The parameter sizes the driver reports, per kernel (by id); a kernel not listed has no layout."""
    table: dict[int, tuple[int, ...]] = {}
    monkeypatch.setattr(packing, "kernel_sizes", lambda k: table.get(id(k)))
    return table


# ------------------------------------------------------------------------------------------ kernel arguments
@pytest.mark.parametrize(
    ("value", "size", "expected"),
    [
        (7, 4, np.int32(7)),
        (-1, 4, np.int32(-1)),
        (0x1_0000_0005, 4, np.int32(5)),  # the low 4 bytes, what the driver reads of cuda.core's 8
        (0xFFFF_FFFF, 4, np.int32(-1)),
        (300, 1, np.int8(44)),
        (1, 1, np.int8(1)),
        (-2, 2, np.int16(-2)),
        (-5, 8, np.int64(-5)),
    ],
)
def test_a_python_int_becomes_the_bytes_the_driver_reads(value, size, expected):
    (got,) = packing.sized_args((value,), (size,))  # type: ignore[misc]
    assert type(got) is type(expected) and got.tobytes() == expected.tobytes()


def test_an_int_for_a_pointer_or_a_struct_is_left_to_the_core():
    assert packing.sized_args((0x7F00_0000_1000,), (8,)) is None  # a pointer: the core packs the same 8 bytes
    assert packing.sized_args((3,), (16,)) is None  # a struct parameter: refused by the core by name
    assert packing.sized_args((3, 4), (4,)) is None  # a count mismatch: the core names it
    assert packing.sized_args((np.int32(3), 2.0), (4, 8)) is None  # nothing but Python ints is touched


def test_a_python_bool_is_taken_and_packed_by_the_parameter(sizes):
    gd = compat.GraphDefinition()
    node = gd.launch(CFG, K, True, False, 7)
    assert node.node.args == (1, 0, 7) and all(type(a) is int for a in node.node.args)
    sizes[id(K)] = (1, 4, 4)
    packing.pack_graph(gd.graph)
    args = node.node.args
    assert [type(a) for a in args] == [np.int8, np.int32, np.int32] and [int(a) for a in args] == [1, 0, 7]


def test_pack_graph_reaches_bodies_and_leaves_unknown_kernels(sizes):
    other = CUkernel()
    gd = compat.GraphDefinition()
    cond = gd.create_condition(default_value=1)
    loop = gd.while_loop(cond)
    inner = loop.body.launch(CFG, K, 5)
    outer = gd.launch(CFG, other, 5)
    sizes[id(K)] = (4,)
    packing.pack_graph(gd.graph)
    assert type(inner.node.args[0]) is np.int32 and outer.node.args == (5,)


def test_the_builder_takes_bools_on_its_compiled_path_too():
    gb = compat.Device().create_graph_builder().begin_building()
    for _ in range(3):  # the first call teaches the compiled path the config; the next ones may take it
        compat.launch(gb, CFG, K, True, np.int32(2))
    assert [n.args for n in gb.graph.nodes] == [(1, np.int32(2))] * 3


def test_native_graph_kernel_stays_strict():
    g = cg.Graph("strict")
    with pytest.raises(TypeError, match="bool"):
        g.kernel(K, 1, 1, (True,))
    assert len(g) == 0


def test_instantiate_packs_before_the_driver_sees_the_graph(monkeypatch, sizes):
    seen: list[Any] = []
    monkeypatch.setattr(common, "instantiate_executable", lambda g, **kw: seen.append(g.nodes[0].args) or "exe")
    gd = compat.GraphDefinition()
    gd.launch(CFG, K, 3)
    sizes[id(K)] = (4,)
    assert gd.instantiate() == "exe"
    assert type(seen[0][0]) is np.int32


def test_a_stream_launch_packs_by_the_kernel(monkeypatch, sizes):
    got: list[tuple[Any, ...]] = []
    monkeypatch.setattr(entry, "_cg_launch", lambda target, config, kernel, *args: got.append(args))
    sizes[id(K)] = (1, 4, 8)
    compat.launch("stream", CFG, K, True, 9, 0x1000)
    ((a, b, c),) = got
    assert (type(a), type(b), c) == (np.int8, np.int32, 0x1000) and (int(a), int(b)) == (1, 9)


# ------------------------------------------------------------------------------------------ graph memory
def test_an_allocation_with_no_free_is_instantiated(monkeypatch):
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(common, "instantiate_executable", lambda g, **kw: seen.append(kw) or "exe")
    gd = compat.GraphDefinition()
    a = gd.allocate(1024)
    a.memset(a.dptr, 0, 1024)
    assert gd.instantiate() == "exe" and seen[0]["auto_free_on_launch"] is False
    # The native API keeps its check (nothing reaches the driver).
    with pytest.raises(DefinitionError, match="never freed"):
        gd.graph.instantiate()


def test_instantiate_options_must_be_bools():
    gd = compat.GraphDefinition()
    with pytest.raises(TypeError) as info:
        gd.instantiate(compat.GraphCompleteOptions(auto_free_on_launch="yes"))  # type: ignore[arg-type]
    assert isinstance(info.value, CudaGraphError)


# ------------------------------------------------------------------------------------------ pred / succ
def chain(n: int) -> tuple[Any, list[Any]]:
    gd = compat.GraphDefinition()
    nodes = [gd.empty() for _ in range(n)]
    return gd, nodes


def test_pred_and_succ_take_the_set_operators():
    _, (a, b, c, d) = chain(4)
    d.pred = {a, b}
    assert d.pred | {c} == {a, b, c} and d.pred & {b, c} == {b} and d.pred - {a} == {b} and d.pred ^ {b, c} == {a, c}
    assert type(d.pred | {c}) is set
    d.pred |= {c}
    assert d.pred == {a, b, c} and a.succ == {d}
    d.pred -= {a}
    d.pred &= {b}
    assert d.pred == {b}
    d.pred ^= {b, c}
    assert d.pred == {c}


def test_a_refused_assignment_leaves_the_old_edges():
    _, (a, b, c) = chain(3)
    b.pred = {a}
    c.pred = {b}
    with pytest.raises(CycleError) as info:
        a.pred = {c}  # c -> a closes a -> b -> c -> a
    assert isinstance(info.value, ValueError) and isinstance(info.value, CudaGraphError)
    assert a.pred == set() and b.pred == {a} and c.pred == {b}
    with pytest.raises(CycleError):
        b.pred = [c]  # the old edge a -> b is kept too
    assert b.pred == {a}


def test_a_kernel_argument_error_is_a_type_error():
    assert issubclass(KernelArgumentError, TypeError) and issubclass(KernelArgumentError, CudaGraphError)
