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
from cudagraph.errors import (
    CudaGraphError,
    CycleError,
    DefinitionError,
    ForeignNodeError,
    KernelArgumentError,
    StateError,
)
from cudagraph.frontends.compat import builder, common, entry, packing

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
    monkeypatch.setattr(builder, "_cg_launch", lambda target, config, kernel, *args: got.append(args))
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


# ------------------------------------------------------------------------------------------ errors and options
def driver_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is what cuda.core raises where the driver refuses a graph edit (its ``CUDAError``), and a
    cudagraph error too."""
    from cuda.core._utils.cuda_utils import CUDAError

    return isinstance(exc, CUDAError) and isinstance(exc, CudaGraphError) and isinstance(exc, ValueError)


@pytest.mark.parametrize(
    "method, args", [("if_then", (3,)), ("if_else", ("c",)), ("while_loop", (None,)), ("switch", ([1], 2))]
)
def test_a_conditional_of_no_condition_is_a_type_error(method, args):
    gd = compat.GraphDefinition()
    with pytest.raises(TypeError, match="GraphCondition") as info:
        getattr(gd, method)(*args)
    assert isinstance(info.value, CudaGraphError) and len(gd.graph) == 0


def test_what_the_driver_refuses_under_cuda_core_is_its_error_class_here():
    first, second = compat.GraphDefinition(), compat.GraphDefinition()
    cond = first.create_condition(default_value=0)
    refusals = [
        lambda: second.if_then(cond),  # a condition of another definition
        lambda: first.switch(cond, 0),  # a switch of no case
        lambda: first.deallocate(0),  # a free of no address
    ]
    for call in refusals:
        with pytest.raises(CudaGraphError) as info:
            call()
        assert driver_refusal(info.value)
    assert len(first.graph) == 0 and len(second.graph) == 0
    with pytest.raises(ForeignNodeError):  # the native class of a foreign condition stays a base
        second.if_then(cond)


def test_self_cross_graph_and_destroyed_edges_are_refused_as_the_driver_refuses_them():
    gd, (a, b) = chain(2)
    other = compat.GraphDefinition().empty()
    for call in (lambda: a.succ.add(a), lambda: a.pred.add(other), lambda: a.succ.add(other)):
        with pytest.raises(CudaGraphError) as info:
            call()
        assert driver_refusal(info.value)
    b.pred.add(a)
    b.destroy()
    assert not b.is_valid and b.type is None and b.pred == set() and b.succ == set() and (a, b) not in gd.edges()
    with pytest.raises(CudaGraphError) as info:
        a.succ.add(b)
    assert driver_refusal(info.value) and a.succ == set()
    b.destroy()  # again: nothing
    b.pred = set()  # nothing to add: nothing refused
    a.pred -= {a}  # removing a self edge that is not there: nothing, as for a set


def test_debug_dot_print_takes_every_flag_and_a_bytes_path(tmp_path):
    gd, _ = chain(2)
    every = compat.GraphDebugPrintOptions(**{f: True for f in compat.GraphDebugPrintOptions.__dataclass_fields__})
    path = tmp_path / "g.dot"
    gd.debug_dot_print(str(path).encode(), every)
    assert path.read_text().startswith("digraph")
    gb = compat.Device().create_graph_builder().begin_building()
    gb.callback(print)
    with pytest.raises(RuntimeError, match="call end_building"):  # not before building has ended, as cuda.core
        gb.debug_dot_print(str(path))
    gb.end_building().debug_dot_print(str(path), every)


def test_complete_options_are_a_dataclass_as_cuda_cores():
    assert compat.GraphCompleteOptions(device_launch=True) == compat.GraphCompleteOptions(device_launch=True)
    assert compat.GraphCompleteOptions() != compat.GraphCompleteOptions(use_node_priority=True)


@pytest.mark.parametrize("mode", ["relaxed", "global", "thread_local"])
def test_every_build_mode_builds_the_same_graph(mode):
    gb = compat.Device().create_graph_builder().begin_building(mode=mode)
    compat.launch(gb, CFG, K, np.int32(1))
    compat.launch(gb, CFG, K, np.int32(2))
    assert len(gb.end_building().graph) == 2


@pytest.mark.parametrize("mode, cls", [(None, ValueError), ("fast", ValueError), (3, TypeError)])
def test_another_build_mode_is_refused_with_cuda_cores_class(mode, cls):
    gb = compat.Device().create_graph_builder()
    with pytest.raises(cls) as info:
        gb.begin_building(mode=mode)
    assert isinstance(info.value, CudaGraphError) and not gb.is_building
    gb.begin_building()  # the refusal left it as it was


def test_devices_compare_by_ordinal_with_compat_and_cuda_core_devices(monkeypatch):
    class Device:  # a stand-in for cuda.core's (the same name and attribute)
        def __init__(self, device_id: int) -> None:
            self.device_id = device_id

        def __hash__(self) -> int:
            return hash(("device", self.device_id))

    monkeypatch.setattr(entry, "cuda_core_device", lambda i: Device(1 if i is None else i))
    assert compat.Device() == compat.Device(1) and compat.Device(0) != compat.Device(1)
    assert compat.Device(1) == Device(1) and compat.Device(0) != Device(1) and compat.Device(0) != "0"
    assert hash(compat.Device()) == hash(Device(1)) and int(compat.Device()) == 1
    assert len({compat.Device(), compat.Device(1)}) == 1
    # cuda.core takes a Device it does not know as an ordinal (`device_id < 0`, then an index): a compat Device is one.
    import operator

    assert operator.index(compat.Device()) == 1 and ["a", "b", "c"][compat.Device(2)] == "c"
    assert not compat.Device(0) < 0 and compat.Device(0) >= 0 and compat.Device(1) > 0 and compat.Device(1) <= 1
    assert compat.Device(0) < compat.Device(1) and compat.Device(0) < Device(1) and not compat.Device(1) < Device(1)
    with pytest.raises(TypeError):
        compat.Device(0) < "1"  # noqa: B015


# ------------------------------------------------------------------------------------------ builder states
def test_builder_states_answer_as_cuda_cores():
    gb = compat.Device().create_graph_builder()
    refused: list[tuple[Any, type[BaseException]]] = [
        (gb.complete, RuntimeError),  # not finished building
        (lambda: gb.split(2), RuntimeError),  # must be building to split
        (lambda: gb.graph_definition, RuntimeError),  # before begin_building
        (gb.end_building, RuntimeError),  # not building
        (gb.create_condition, RuntimeError),
    ]
    for call, cls in refused:
        with pytest.raises(cls) as info:
            call()
        assert isinstance(info.value, StateError)
    gb.begin_building()
    for call, cls in [
        (gb.begin_building, RuntimeError),  # already building
        (gb.complete, RuntimeError),
        (lambda: gb.graph_definition, RuntimeError),  # a capture is in progress
        (lambda: gb.split(1), ValueError),  # an invalid split count
        (lambda: gb.split(0), ValueError),
        (lambda: compat.GraphBuilder.join(gb), ValueError),  # at least two builders
        (lambda: compat.GraphBuilder.join(gb, "x"), TypeError),
        (lambda: gb.embed(object()), TypeError),
        (lambda: gb.callback(print, user_data=b"x"), ValueError),
    ]:
        with pytest.raises(cls) as info:
            call()
        assert isinstance(info.value, CudaGraphError)
    compat.launch(gb, CFG, K, np.int32(1))
    gb.end_building()
    with pytest.raises(RuntimeError, match="has ended building") as info:  # no resuming after the end
        gb.begin_building()
    assert isinstance(info.value, StateError)
    view = gb.graph_definition  # after the end
    assert len(view.nodes()) == 1
    gb.close()
    for call in (gb.complete, lambda: gb.graph_definition, gb.end_building):
        with pytest.raises(StateError, match="is closed"):
            call()
    assert len(view.nodes()) == 1  # a view taken before close() keeps working


def test_forks_and_embedding_answer_as_cuda_cores():
    gb = compat.Device().create_graph_builder().begin_building()
    compat.launch(gb, CFG, K, np.int32(1))
    left, right = gb.split(2)
    assert left is gb and right.is_join_required and not left.is_join_required
    with pytest.raises(RuntimeError, match="forked"):
        _ = right.graph_definition
    with pytest.raises(RuntimeError, match="has not finished"):
        right.complete()
    child = compat.Device().create_graph_builder().begin_building()
    with pytest.raises(ValueError, match="child: the GraphBuilder is building"):  # the child has not finished
        gb.embed(child)
    with pytest.raises(ValueError, match="split"):
        gb.embed(right)
    child.end_building()
    ended = compat.Device().create_graph_builder().begin_building().end_building()
    with pytest.raises(ValueError, match="the parent GraphBuilder has ended"):  # the parent is not being built
        ended.embed(child)
    assert compat.GraphBuilder.join(left, right) is gb
    with pytest.raises(RuntimeError, match="closed"):  # joined into gb, hence closed
        right.complete()
    gb.embed(child)
    assert [n.kind for n in gb.end_building().graph.nodes] == ["kernel", "child"]


def test_a_conditional_body_during_and_after_its_capture():
    gb = compat.Device().create_graph_builder().begin_building()
    cond = gb.create_condition(default_value=1)
    body = gb.if_then(cond)
    assert len(body.graph_definition.nodes()) == 0  # before begin_building: the body exists already
    body.begin_building()
    with pytest.raises(RuntimeError, match="capture is in progress"):
        _ = body.graph_definition
    compat.launch(body, CFG, K, np.int32(1))
    body.end_building()
    (node,) = body.graph_definition.nodes()  # after the end: add to it explicitly
    node.launch(CFG, K, np.int32(2))
    assert len(body.graph) == 2
    with pytest.raises(RuntimeError, match="has ended building"):
        body.begin_building()
    gb.end_building()


def test_an_executable_update_from_a_builder_that_is_not_finished_is_a_value_error():
    gb = compat.Device().create_graph_builder().begin_building()
    with pytest.raises(ValueError, match="has not finished building"):
        gb._update_source()
    gb.end_building()
    gb.close()
    with pytest.raises(ValueError, match="has not finished building"):
        gb._update_source()
