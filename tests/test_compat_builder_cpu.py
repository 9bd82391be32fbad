"""cudagraph.compat's GraphBuilder without a GPU: the programs of tests/compat_builder_programs.py build the
expected definitions (exact nodes, edges, kinds and conditional bodies), and every misuse is refused by name
with nothing added."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

import compat_builder_programs as programs
import cudagraph as cg
from cudagraph.errors import (
    CudaGraphError,
    DefinitionError,
    DriverUnavailableError,
    ForeignNodeError,
    OperandError,
    StateError,
)
from cudagraph.frontends.compat import common

compat = cg.compat
F = np.float32


class CUkernel:  # the definition layer recognises kernels by type name
    def __init__(self, name: str = "k") -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<CUkernel {self.name}>"


class LaunchConfig:  # a stand-in for cuda.core's (same attribute names)
    def __init__(self, grid: Any = None, block: Any = None, shmem_size: int = 0, **kw: Any) -> None:
        self.grid, self.block, self.shmem_size = grid, block, shmem_size
        self.cluster = None
        self.is_cooperative = False
        self.programmatic_stream_serialization = kw.get("programmatic_stream_serialization", False)


class CUevent:  # recognised by type name
    pass


API = SimpleNamespace(
    Device=compat.Device, GraphBuilder=compat.GraphBuilder, launch=compat.launch, LaunchConfig=LaunchConfig
)
K = SimpleNamespace(**{name: CUkernel(name) for name in programs.NAMES})
CFG = LaunchConfig(grid=2, block=128)
X, Y, Z, OUT = 0x1000, 0x2000, 0x3000, 0x4000


def kernels(g: cg.Graph) -> list[str]:
    """The kernel of each node by index (``kind`` for the other nodes)."""
    return [n.kernel.name if n.kind == "kernel" else n.kind for n in g.nodes]


def edges(g: cg.Graph) -> set[tuple[int, int]]:
    return {(a.index, b.index) for a, b in g.edges}


def chain_edges(n: int) -> set[tuple[int, int]]:
    return {(i, i + 1) for i in range(n - 1)}


def building() -> Any:
    return compat.Device().create_graph_builder().begin_building()


# ------------------------------------------------------------------------------------------- the programs
def test_chain_is_a_path_with_the_callback_in_place():
    calls: list[str] = []
    gb = programs.chain(API, K, X, Y, calls)
    g = gb.graph
    assert kernels(g) == ["scale_add", "scale_add", "host", "axpb"]
    assert edges(g) == chain_edges(4)
    k0, k1, cb, k2 = g.nodes
    assert k0.args == (X, F(2), F(1), np.int32(programs.N)) and k1.args == (X, F(3), F(0), np.int32(programs.N))
    assert k2.args == (Y, X, F(0.5), F(-1), np.int32(programs.N))
    assert k0.grid == (2, 1, 1) and k0.block == (128, 1, 1)
    cb.fn()
    assert calls == ["done"]
    assert not gb.is_building and not gb.is_closed and not gb.is_join_required


def test_fork_join_forks_after_the_same_op_and_joins_with_no_node():
    gb = programs.fork_join(API, K, X, Y, Z, OUT)
    g = gb.graph
    assert kernels(g) == ["scale_add", "axpb", "axpb", "scale_add", "combine"]
    assert edges(g) == {(0, 1), (0, 2), (2, 3), (1, 4), (3, 4)}
    assert len(gb.graph_definition.nodes()) == 5 and len(gb.graph_definition.edges()) == 5


def test_heat_loop_is_a_chain_of_every_launch():
    gb = programs.heat(API, K, X, Y)
    g = gb.graph
    n = 2 * programs.HEAT_STEPS
    assert kernels(g) == ["heat_step"] * n
    assert edges(g) == chain_edges(n)
    assert [nd.args[:2] for nd in g.nodes[:4]] == [(Y, X), (X, Y), (Y, X), (X, Y)]


def test_if_else_bodies_hold_what_their_builders_launched():
    gb = programs.if_else(API, K, X, 0x5000)
    g = gb.graph
    assert kernels(g) == ["set_if_positive", "if_else", "scale_add"]
    assert edges(g) == chain_edges(3)
    setter, node, _ = g.nodes
    assert setter.args[0] is node.cond and node.cond.default is None
    assert kernels(node.then) == ["scale_add"] and edges(node.then) == set()
    assert kernels(node.else_) == ["scale_add", "scale_add"] and edges(node.else_) == {(0, 1)}
    assert node.then.nodes[0].args[1:3] == (F(1), F(10))
    g.validate()


def test_while_loop_body_sets_the_condition_of_the_enclosing_graph():
    gb = programs.while_device_condition(API, K, X)
    g = gb.graph
    assert kernels(g) == ["set_while_below", "while"]
    assert edges(g) == {(0, 1)}
    setter, loop = g.nodes
    assert loop.cond.default == 0 and setter.args[0] is loop.cond
    assert kernels(loop.body) == ["scale_add", "set_while_below"] and edges(loop.body) == {(0, 1)}
    assert loop.body.nodes[1].args[0] is loop.cond
    g.validate()


def test_child_graph_is_the_graph_of_the_embedded_builder():
    gb = programs.child_graph(API, K, X)
    g = gb.graph
    assert kernels(g) == ["scale_add", "child", "scale_add"]
    assert edges(g) == chain_edges(3)
    body = g.nodes[1].body
    assert kernels(body) == ["scale_add", "scale_add"] and edges(body) == {(0, 1)}
    assert body.name == "GraphBuilder"


def test_switch_has_one_body_per_case():
    gb = programs.switch(API, K, X, 0x5000)
    g = gb.graph
    assert kernels(g) == ["set_case", "switch", "scale_add"]
    assert edges(g) == chain_edges(3)
    cases = g.nodes[1].bodies
    assert [kernels(c) for c in cases] == [["scale_add"]] * 3
    assert [c.nodes[0].args[1:3] for c in cases] == [(F(1), F(1)), (F(1), F(10)), (F(2), F(0))]


# ------------------------------------------------------------------------------------------- semantics
def test_split_of_three_and_partial_joins_follow_cuda_core():
    gb = building()
    compat.launch(gb, CFG, K.scale_add)
    builders = gb.split(3)
    assert builders[0] is gb and [b.is_join_required for b in builders] == [False, True, True]
    for b in builders:
        compat.launch(b, CFG, K.axpb)
    inner = builders[2].split(2)
    assert inner[0] is builders[2] and all(b.is_join_required for b in inner)
    compat.launch(inner[1], CFG, K.combine)
    forks = compat.GraphBuilder.join(*inner)
    assert forks is inner[0] and forks.is_join_required and inner[1].is_closed
    root = compat.GraphBuilder.join(forks, builders[1], gb)
    assert root is gb and builders[1].is_closed and forks.is_closed
    compat.launch(gb, CFG, K.heat_step)
    gb.end_building()
    g = gb.graph
    assert kernels(g) == ["scale_add", "axpb", "axpb", "axpb", "combine", "heat_step"]
    # The root's own tail first, then the others' in the order given.
    assert [p.index for p in g.nodes[5].predecessors] == [1, 3, 4, 2]
    assert edges(g) == {(0, 1), (0, 2), (0, 3), (3, 4), (1, 5), (2, 5), (3, 5), (4, 5)}


def test_a_split_before_any_op_makes_roots_that_the_join_chains_to():
    gb = building()
    a, b = gb.split(2)
    compat.launch(b, CFG, K.axpb)
    compat.GraphBuilder.join(a, b)
    compat.launch(gb, CFG, K.combine)
    assert edges(gb.end_building().graph) == {(0, 1)}


def test_conditionals_nest_and_bodies_split_and_join():
    gb = building()
    outer = gb.create_condition(default_value=1)
    body = gb.while_loop(outer)
    assert not body.is_building and body.graph is not None and body.graph.owner is not None
    body.begin_building()
    compat.launch(body, CFG, K.scale_add)
    left, right = body.split(2)
    compat.launch(right, CFG, K.axpb)
    compat.GraphBuilder.join(left, right)
    inner = body.create_condition()
    compat.launch(body, CFG, K.set_if_positive, inner)
    then = body.if_then(inner)
    then.begin_building().end_building()
    compat.launch(body, CFG, K.set_while_below, outer)
    body.end_building()
    gb.end_building()
    loop = gb.graph.nodes[0]
    assert kernels(loop.body) == ["scale_add", "axpb", "set_if_positive", "if", "set_while_below"]
    assert edges(loop.body) == {(0, 1), (0, 2), (1, 2), (2, 3), (3, 4)}
    assert loop.body.conditions == (inner.condition,) and loop.body.nodes[2].args == (inner.condition,)
    gb.graph.validate()


def test_cudagraph_free_functions_take_a_builder_as_a_target():
    gb = building()
    ev = CUevent()
    a = cg.launch(gb, CFG, K.scale_add, X, F(1), F(0), np.int32(4))
    b = cg.memset(gb, X, F(0), 16)
    c = cg.memcpy(gb, Y, X, 64)
    d = cg.host(gb, print, "x")
    e = cg.record(gb, ev)
    f = cg.wait(gb, ev)
    compat.launch(gb, CFG, K.axpb)
    g = gb.end_building().graph
    assert [n.kind for n in g.nodes] == ["kernel", "memset", "memcpy", "host", "record", "wait", "kernel"]
    assert list(g.nodes[:6]) == [a, b, c, d, e, f]
    assert edges(g) == chain_edges(7)


def test_compat_launch_passes_conditions_and_delegates_other_targets():
    gb = building()
    cond = gb.create_condition()
    compat.launch(gb, CFG, K.set_case, cond, X)
    assert gb.graph.nodes[0].args == (cond.condition, X)
    g = cg.Graph("g")
    p = g.path()
    c2 = compat.GraphCondition(g.condition())
    compat.launch(p, CFG, K.set_case, c2, X)
    assert g.nodes[0].args == (c2.condition, X) and p.last is g.nodes[0]


def test_programmatic_stream_serialization_after_a_kernel_makes_a_programmatic_edge():
    gb = building()
    compat.launch(gb, CFG, K.scale_add)
    compat.launch(gb, LaunchConfig(grid=1, block=32, programmatic_stream_serialization=True), K.axpb)
    first, second = gb.graph.nodes
    assert second.attrs is not None and second.attrs.port_of(first) == "programmatic"


def test_graph_definition_is_a_view_of_the_same_graph():
    gb = building()
    compat.launch(gb, CFG, K.scale_add)
    with pytest.raises(StateError, match="capture is in progress"):  # not while building, as cuda.core
        _ = gb.graph_definition
    gb.end_building()
    view = gb.graph_definition
    assert view.graph is gb.graph and gb.graph_definition is view
    (node,) = view.nodes()
    node.launch(CFG, K.axpb)
    assert kernels(gb.graph) == ["scale_add", "axpb"] and edges(gb.graph) == {(0, 1)}
    gb.close()
    assert len(view.nodes()) == 2  # a view taken before close() keeps working
    other = building()
    body = other.if_then(other.create_condition())
    assert body.graph_definition.graph is body.graph  # a body's view exists before begin_building()


def test_old_names_are_aliases():
    gb = building()
    cond = gb.create_conditional_handle(default_value=0)
    body = gb.if_cond(cond)
    child = building()
    compat.launch(child, CFG, K.axpb)
    gb.add_child(child.end_building())
    assert [n.kind for n in gb.graph.nodes] == ["if", "child"] and body.graph is gb.graph.nodes[0].body


def test_complete_passes_the_options_and_may_be_called_again(monkeypatch):
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(common, "instantiate_executable", lambda g, params, **kw: seen.append(kw) or "exe")
    gb = building()
    compat.launch(gb, CFG, K.axpb)
    gb.end_building()
    opts = compat.GraphCompleteOptions(auto_free_on_launch=True, upload_stream="s", use_node_priority=True)
    assert gb.complete(opts) == "exe" and gb.complete() == "exe"
    assert seen == [
        {"upload_stream": "s", "auto_free_on_launch": True, "device_launch": False, "use_node_priority": True},
        {"upload_stream": None, "auto_free_on_launch": False, "device_launch": False, "use_node_priority": False},
    ]


def test_debug_dot_print_writes_the_dot(tmp_path):
    gb = building()
    compat.launch(gb, CFG, K.axpb)
    gb.end_building()
    out = tmp_path / "g.dot"
    gb.debug_dot_print(str(out), compat.GraphDebugPrintOptions())
    assert out.read_text() == gb.graph.to_dot()


def test_device_makes_builders_and_forwards_the_rest_to_cuda_core(monkeypatch):
    from cudagraph.frontends.compat import entry

    asked: list[Any] = []

    def fake(device_id: Any) -> Any:
        asked.append(device_id)
        return SimpleNamespace(arch="90", set_current=lambda: "current")

    monkeypatch.setattr(entry, "cuda_core_device", fake)
    dev = compat.Device(1)
    assert isinstance(dev.create_graph_builder(), compat.GraphBuilder) and asked == []
    assert dev.arch == "90" and dev.set_current() == "current" and asked == [1, 1]
    assert repr(compat.Device()) == "<compat Device current>"
    with pytest.raises(AttributeError):
        dev.__wrapped__  # noqa: B018


def test_device_without_cuda_core_device_is_a_typed_error(monkeypatch):
    from cudagraph.driver import devices

    class Broken:
        def __init__(self, device_id: Any) -> None:
            raise ValueError("no device 7")

    monkeypatch.setitem(__import__("sys").modules, "cuda.core", SimpleNamespace(Device=Broken))
    with pytest.raises(DriverUnavailableError, match=r"cuda.core Device\(7\): ValueError: no device 7"):
        devices.cuda_core_device(7)


def test_repr_says_kind_state_and_size():
    gb = building()
    compat.launch(gb, CFG, K.axpb)
    fork = gb.split(2)[1]
    assert repr(gb) == "<compat GraphBuilder primary, building, 1 nodes>"
    assert repr(fork) == "<compat GraphBuilder forked, building, 1 nodes>"
    assert repr(compat.GraphBuilder()) == "<compat GraphBuilder primary, not started, 0 nodes>"


# ------------------------------------------------------------------------------------------- refusals
def _cond_of_other() -> Any:
    return building().create_condition()


CASES: list[tuple[str, Any, str]] = [
    (
        "mode bogus",
        lambda gb, s: compat.GraphBuilder().begin_building("fast"),
        "Unsupported build mode: 'fast' (compat GraphBuilder.begin_building: mode",
    ),
    ("begin twice", lambda gb, s: gb.begin_building(), "compat GraphBuilder.begin_building: the GraphBuilder is build"),
    ("complete early", lambda gb, s: gb.complete(), "compat GraphBuilder.complete: the GraphBuilder is building"),
    ("dot early", lambda gb, s: gb.debug_dot_print("x"), "GraphBuilder.debug_dot_print: the GraphBuilder is building"),
    (
        "split 1",
        lambda gb, s: gb.split(1),
        "Invalid split count: expecting >= 2, got 1 (compat GraphBuilder.split: count)",
    ),
    ("split str", lambda gb, s: gb.split("2"), "compat GraphBuilder.split: count: expected an int >= 2, got str"),
    ("split huge", lambda gb, s: gb.split(2**70), "compat GraphBuilder.split: count: at most 65536 builders at once"),
    (
        "mode array",
        lambda gb, s: compat.GraphBuilder().begin_building(np.array(["relaxed"])),
        "mode: expected 'relaxed', 'global' or 'thread_local', got ndarray",
    ),
    ("dot fd", lambda gb, s: s["ended"].debug_dot_print(1), "debug_dot_print: path must be a str or a path-like"),
    (
        "join one",
        lambda gb, s: compat.GraphBuilder.join(gb),
        "Must join with at least two graph builders (compat GraphBuilder.join: graph_builders: got 1)",
    ),
    ("join int", lambda gb, s: compat.GraphBuilder.join(gb, 3), "join: graph_builders[1]: expected a compat Graph"),
    ("join twice", lambda gb, s: compat.GraphBuilder.join(gb, gb), "graph_builders[1]: the same builder as graph_bui"),
    ("join other", lambda gb, s: compat.GraphBuilder.join(gb, building()), "graph_builders[1]: a builder of another"),
    ("join ended", lambda gb, s: compat.GraphBuilder.join(gb, s["ended"]), "graph_builders[1]: the GraphBuilder has"),
    (
        "join closed",
        lambda gb, s: compat.GraphBuilder.join(gb, s["closed"]),
        "graph_builders[1]: the GraphBuilder is c",
    ),
    (
        "embed int",
        lambda gb, s: gb.embed(3),
        "compat GraphBuilder.embed: child: expected a compat GraphBuilder, got int",
    ),
    ("embed open", lambda gb, s: gb.embed(building()), "GraphBuilder.embed: child: the GraphBuilder is building"),
    ("embed fork", lambda gb, s: gb.embed(s["fork"]), "embed: child: a builder made by split() has not finished"),
    ("embed new", lambda gb, s: gb.embed(compat.GraphBuilder()), "embed: child: the GraphBuilder has not begun"),
    ("not callable", lambda gb, s: gb.callback(5), "compat GraphBuilder.callback: fn: expected a Python callable or"),
    ("if int", lambda gb, s: gb.if_then(1), "compat GraphBuilder.if_then: condition: expected a GraphCondition"),
    ("switch raw", lambda gb, s: gb.switch(s["raw"], 2), "compat GraphBuilder.switch: condition: expected a GraphCond"),
    ("stream fork", lambda gb, s: s["fork"].stream, "compat GraphBuilder.stream: a builder made by split() has no str"),
    ("stream ended", lambda gb, s: s["ended"].stream, "compat GraphBuilder.stream: the GraphBuilder has ended build"),
    ("stream new", lambda gb, s: compat.GraphBuilder().stream, "GraphBuilder.stream: the GraphBuilder has not begun"),
    ("launch ended", lambda gb, s: compat.launch(s["ended"], CFG, K.axpb), "cudagraph.compat.launch: target: the Gr"),
    ("cg ended", lambda gb, s: cg.memcpy(s["ended"], X, Y, 4), "cudagraph.memcpy: target: the GraphBuilder has ended"),
    ("cg new", lambda gb, s: cg.launch(compat.GraphBuilder(), CFG, K.axpb), "cudagraph.launch: target: the GraphBu"),
    ("bad config", lambda gb, s: compat.launch(gb, {"grid": 1}, K.axpb), "cudagraph.compat.launch: config: expected"),
    ("bad kernel", lambda gb, s: compat.launch(gb, CFG, "k"), "cudagraph.compat.launch: kernel: expected a cuda.core"),
    ("fork ends", lambda gb, s: s["fork"].end_building(), "end_building: a builder made by split() is not ended"),
    ("fork view", lambda gb, s: s["fork"].graph_definition, "graph_definition: a builder made by split() (a forked"),
    ("fork done", lambda gb, s: s["fork"].complete(), "complete: a builder made by split() has not finished buil"),
    ("unjoined", lambda gb, s: gb.end_building(), "end_building: 1 builder(s) split from this one are not joined"),
    ("new view", lambda gb, s: compat.GraphBuilder().graph_definition, "graph_definition: the GraphBuilder has not"),
    ("cond new", lambda gb, s: compat.GraphBuilder().create_condition(), "create_condition: the GraphBuilder has not"),
    ("device id", lambda gb, s: compat.Device("0"), "compat Device: device_id: expected an int or None, got str"),
]


@pytest.mark.parametrize("call, text", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_misuse_is_refused_by_name_and_adds_nothing(call, text):
    gb = building()
    compat.launch(gb, CFG, K.scale_add)
    ended = building()
    compat.launch(ended, CFG, K.axpb)
    ended.end_building()
    closed = building()
    closed.close()
    fork = gb.split(2)[1]
    state = {
        "ended": ended,
        "closed": closed,
        "fork": fork,
        "raw": gb.graph.condition(),
        "verbose": compat.GraphDebugPrintOptions(verbose=True),
    }
    with pytest.raises(CudaGraphError) as info:
        call(gb, state)
    assert text in str(info.value)
    # Nothing added, nothing changed: the builders keep their state, and the next ops chain as before.
    assert gb.is_building and fork.is_building and len(gb.graph) == 1 and len(ended.graph) == 1
    compat.launch(fork, CFG, K.combine)
    assert compat.GraphBuilder.join(gb, fork) is gb
    compat.launch(gb, CFG, K.heat_step)
    assert kernels(gb.end_building().graph) == ["scale_add", "combine", "heat_step"]
    assert edges(gb.graph) == {(0, 1), (0, 2), (1, 2)}


def test_building_after_end_and_using_a_closed_builder_are_refused():
    gb = building()
    compat.launch(gb, CFG, K.axpb)
    gb.end_building()
    with pytest.raises(StateError, match="begin_building: the GraphBuilder has ended building"):
        gb.begin_building()
    with pytest.raises(StateError, match="split: the GraphBuilder has ended building"):
        gb.split(2)
    with pytest.raises(StateError, match="callback: the GraphBuilder has ended building"):
        gb.callback(print)
    with pytest.raises(StateError, match="while_loop: the GraphBuilder has ended building"):
        gb.while_loop(compat.GraphDefinition().create_condition())
    assert len(gb.graph) == 1
    gb.close()
    assert gb.is_closed and gb.graph is None
    for call, text in [
        (gb.complete, "complete: the GraphBuilder is closed"),
        (lambda: gb.graph_definition, "graph_definition: the GraphBuilder is closed"),
        (gb.end_building, "end_building: the GraphBuilder is closed"),
    ]:
        with pytest.raises(StateError, match=text):
            call()
    gb.close()  # again: nothing happens


def test_a_body_builder_is_completed_with_its_graph_and_must_end_first():
    gb = building()
    cond = gb.create_condition(default_value=0)
    then = gb.if_then(cond)
    with pytest.raises(StateError, match="if_then: the GraphBuilder has not begun building"):
        then.if_then(cond)
    then.begin_building()
    compat.launch(then, CFG, K.axpb)
    gb.end_building()
    with pytest.raises(StateError, match=r"complete: 1 conditional body builder\(s\) are still building"):
        gb.complete()
    with pytest.raises(OperandError, match="complete: a builder made by a conditional is completed with the graph"):
        then.complete()
    with pytest.raises(
        OperandError, match="embed: child: a builder made by a conditional builds part of another graph"
    ):
        building().embed(then)
    then.split(2)
    with pytest.raises(DefinitionError, match="end_building: 1 builder"):
        then.end_building()
    assert then.is_building and kinds_of(then.graph) == ["kernel"]


def kinds_of(g: Any) -> list[str]:
    return [n.kind for n in g.nodes]


def test_a_condition_of_another_graph_is_refused_by_the_definition():
    gb = building()
    with pytest.raises(ForeignNodeError, match="belongs to Graph 'GraphBuilder'"):
        gb.if_then(_cond_of_other())
    assert len(gb.graph) == 0


def test_embedding_a_graph_into_itself_through_a_view_is_refused():
    child = building()
    compat.launch(child, CFG, K.axpb)
    child.end_building()
    parent = building()
    parent.embed(child)
    parent.end_building()
    with pytest.raises(cg.errors.DefinitionError, match="a graph cannot contain itself"):
        child.graph_definition.embed(parent.graph_definition)


def test_the_bench_builds_the_builder_chain_it_times(capsys):
    """bench/compat.py's GraphBuilder program, run here with cudagraph.compat (no GPU needed to build)."""
    import importlib.util
    import sys
    from pathlib import Path

    bench_dir = Path(__file__).resolve().parents[1] / "bench"
    sys.path.insert(0, str(bench_dir))
    try:
        spec = importlib.util.spec_from_file_location("bench_compat", bench_dir / "compat.py")
        assert spec is not None and spec.loader is not None
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(bench_dir))
    gb = bench.build_builder(compat.Device(), compat.launch, CFG, K.axpb, X, 50)
    assert not gb.is_building and kernels(gb.graph) == ["axpb"] * 50 and edges(gb.graph) == chain_edges(50)
    assert gb.graph.nodes[0].args == (X, F(1), np.int32(32))
    med = bench.medians({"a": [(1e-3, 2e-3, 3e-3)] * 3}, 1000)
    assert med == {"a": pytest.approx((1.0, 2.0, 3.0))}
    bench.table("t", ("build", "+complete", "+launch"), med)
    assert capsys.readouterr().out.splitlines()[-1].split() == ["a", "1.000", "2.000", "3.000"]


# ------------------------------------------------------------------------------------------- a builder's stream
class _Capture:
    """Stand-ins for the capture calls a builder makes once its stream is asked for (the driver side runs on GPUs:
    tests/test_compat_graph_memory_gpu.py)."""

    def __init__(self, monkeypatch: Any) -> None:
        from cudagraph.frontends.compat import builder

        self.log: list[tuple[Any, ...]] = []
        self.stream = SimpleNamespace(handle=0xABC, __cuda_stream__=lambda: (0, 0xABC))
        device = SimpleNamespace(create_stream=lambda: self.log.append(("stream",)) or self.stream)
        monkeypatch.setattr(builder, "cuda_core_device", lambda i: device)
        monkeypatch.setattr(builder, "begin_capture", lambda h, mode: self.log.append(("begin", h, mode)))
        monkeypatch.setattr(builder, "abandon_capture", lambda h: self.log.append(("abandon", h)))

        def end(h: Any, path: Any, name: str) -> Any:
            self.log.append(("end", h))
            return path.empty(name=name)  # the recording's node, after the path's last op

        monkeypatch.setattr(builder, "end_capture_into", end)
        monkeypatch.setattr(builder, "_cg_launch", lambda s, config, kernel, *a: self.log.append(("launch", s, kernel)))


def test_the_stream_starts_one_capture_in_the_builders_mode_and_launches_go_into_it(monkeypatch):
    cap = _Capture(monkeypatch)
    gb = compat.Device().create_graph_builder().begin_building("global")
    compat.launch(gb, CFG, K.axpb)  # before: a node
    assert gb.stream is cap.stream and gb.stream is cap.stream and gb.is_building
    assert gb.__cuda_stream__() == (0, 0xABC)
    compat.launch(gb, CFG, K.scale_add)  # into the capture, no node
    assert len(gb.graph) == 1
    assert "capturing" in repr(gb)
    gb.end_building()
    assert cap.log == [("stream",), ("begin", 0xABC, "global"), ("launch", cap.stream, K.scale_add), ("end", 0xABC)]
    assert kernels(gb.graph) == ["axpb", "empty"] and edges(gb.graph) == {(0, 1)}
    with pytest.raises(StateError, match="the GraphBuilder has ended building"):
        _ = gb.stream


@pytest.mark.parametrize(
    "call",
    [
        lambda gb: gb.split(2),
        lambda gb: gb.create_condition(),
        lambda gb: gb.callback(print),
        lambda gb: gb.embed(compat.Device().create_graph_builder().begin_building().end_building()),
        lambda gb: cg.memcpy(gb, X, Y, 4),
        lambda gb: compat.GraphBuilder.join(gb, gb),
    ],
    ids=["split", "condition", "callback", "embed", "cg.memcpy", "join"],
)
def test_while_captured_a_call_that_adds_a_node_itself_is_refused(monkeypatch, call):
    cap = _Capture(monkeypatch)
    gb = building()
    _ = gb.stream
    with pytest.raises(CudaGraphError, match="stream is under capture") as info:
        call(gb)
    assert isinstance(info.value, (StateError, DefinitionError))
    assert len(gb.graph) == 0 and gb.is_building and cap.log[-1][0] == "begin"
    gb.close()
    assert cap.log[-1] == ("abandon", 0xABC) and gb.is_closed


def test_a_stream_that_cannot_be_made_or_captured_leaves_the_builder_building(monkeypatch):
    from cudagraph.errors import DriverError
    from cudagraph.frontends.compat import builder

    cap = _Capture(monkeypatch)
    gb = building()

    def no_device(i: Any) -> Any:
        raise DriverUnavailableError("no device")

    monkeypatch.setattr(builder, "cuda_core_device", no_device)
    with pytest.raises(DriverUnavailableError):
        _ = gb.stream
    assert gb.is_building and "capturing" not in repr(gb) and gb._capture is None

    def refused(h: Any, mode: str) -> None:
        raise DriverError("cuStreamBeginCapture: refused")

    monkeypatch.setattr(builder, "cuda_core_device", lambda i: SimpleNamespace(create_stream=lambda: cap.stream))
    monkeypatch.setattr(builder, "begin_capture", refused)
    with pytest.raises(DriverError):
        _ = gb.stream
    assert gb.is_building and gb._capture is None
    compat.launch(gb, CFG, K.axpb)  # an explicit node, as before
    assert kernels(gb.end_building().graph) == ["axpb"]


def test_close_closes_even_when_ending_the_capture_fails(monkeypatch):
    from cudagraph.errors import DriverError
    from cudagraph.frontends.compat import builder

    _Capture(monkeypatch)
    gb = building()
    _ = gb.stream

    def failing(h: Any) -> None:
        raise DriverError("cuStreamEndCapture: failed")

    monkeypatch.setattr(builder, "abandon_capture", failing)
    with pytest.raises(DriverError):
        gb.close()
    assert gb.is_closed and gb._capture is None
    with pytest.raises(StateError, match="closed"):
        _ = gb.stream  # (never a stale stream: cuda.core would read it as its own Stream)


def test_a_recording_that_fails_to_end_leaves_the_builder_building_without_it(monkeypatch):
    from cudagraph.errors import DriverError
    from cudagraph.frontends.compat import builder

    _Capture(monkeypatch)
    gb = building()
    compat.launch(gb, CFG, K.axpb)
    _ = gb.stream

    def invalidated(h: Any, path: Any, name: str) -> None:
        raise DriverError("cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")

    monkeypatch.setattr(builder, "end_capture_into", invalidated)
    with pytest.raises(DriverError, match="INVALIDATED"):
        gb.end_building()
    assert gb.is_building and gb._capture is None and kernels(gb.graph) == ["axpb"]
    assert kernels(gb.end_building().graph) == ["axpb"]
