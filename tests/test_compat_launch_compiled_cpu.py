"""cudagraph.compat's ``launch`` into a GraphBuilder: its compiled path (``PathLaunch``) against its Python twin.

The same programs are built twice, once through ``compat.launch`` (the compiled path takes the common call)
and once through ``compat.launch.fallback`` (the Python function); nodes, slots and edges must be the same.
A configuration changed in place, kernels and arguments the twin converts, errors of ``Graph.kernel`` and
hostile configuration attributes (code that ends the builder, launches into it, or raises) must give the
twin's answer, or a consistent graph, never a crash.
"""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

import cudagraph as cg
from cudagraph.errors import OperandError, StateError
from cudagraph.frontends.compat import entry
from cudagraph.frontends.compat.builder import GraphBuilder

compat = cg.compat
COMPILED = entry._COMPILED
pytestmark = pytest.mark.skipif(
    COMPILED is None, reason="cudagraph.definition._define was not built (or CUDAGRAPH_NO_C_ENTRY is set)"
)
F, I32 = np.float32, np.int32
X, Y = 0x7F0000000000, 0x7F0000100000


class CUkernel:  # the definition layer recognises kernels by type name
    def __init__(self, name: str) -> None:
        self.name = name


class RawKernel:  # a foreign kernel type name: never taken by the compiled path
    pass


class LaunchConfig:  # cuda.core's attribute names; mutable, as cuda.core's is
    def __init__(self, grid: Any, block: Any, shmem_size: int = 0) -> None:
        self.grid, self.block, self.shmem_size = grid, block, shmem_size
        self.cluster = None
        self.is_cooperative = False
        self.programmatic_stream_serialization = False


K1, K2 = CUkernel("k1"), CUkernel("k2")


def building() -> GraphBuilder:
    return compat.Device().create_graph_builder().begin_building()


def shape(g: cg.Graph) -> list[tuple[Any, ...]]:
    """Every node's slots that a launch sets, and its predecessors by index."""
    return [
        (
            n.kind,
            n.name,
            getattr(n, "kernel", None) and n.kernel.name,
            getattr(n, "grid", None),
            getattr(n, "block", None),
            getattr(n, "shared_mem", None),
            getattr(n, "args", None),
            getattr(n, "attrs", None) is not None,
            sorted(p.index for p in n.predecessors),
        )
        for n in g.nodes
    ]


def program(launch: Any, cfg_a: Any, cfg_b: Any) -> cg.Graph:
    """Launches with two configurations, a split into three, launches on each branch and a join."""
    gb = building()
    for i in range(5):
        launch(gb, cfg_a if i % 2 else cfg_b, K1 if i % 3 else K2, X, F(i), I32(i))
    branches = gb.split(3)
    for j, b in enumerate(branches):
        launch(b, cfg_a, K2, Y, F(j), I32(j))
        launch(b, cfg_b, K1, X + 256 * j, F(-j), I32(2 * j))
    joined = GraphBuilder.join(*branches)
    launch(joined, cfg_a, K1, X, F(9), I32(9))
    launch(joined, cfg_b, K2, Y, F(10), I32(10))
    return joined.end_building().graph


def test_the_compiled_path_builds_the_twins_graph_and_takes_the_repeated_calls():
    cfg_a, cfg_b = LaunchConfig(4, 128), LaunchConfig((2, 3, 1), (32, 2, 1), shmem_size=512)
    program(compat.launch, cfg_a, cfg_b)  # teaches the two configurations and the kernel type
    before = COMPILED.taken
    ours = program(compat.launch, cfg_a, cfg_b)
    taken = COMPILED.taken - before
    twin = program(COMPILED.fallback, cfg_a, cfg_b)
    assert shape(ours) == shape(twin)
    assert len(ours.nodes) == 13 and taken == 13
    assert ours.nodes[1].shared_mem == 0 and ours.nodes[0].shared_mem == 512
    assert ours.nodes[0].grid == (2, 3, 1) and ours.nodes[1].grid == (4, 1, 1)
    assert sorted(p.index for p in ours.nodes[11].predecessors) == [6, 8, 10]  # after the join: the three branch tails
    ours.validate()


def test_two_configurations_of_the_same_place_do_not_displace_each_other():
    """Configurations are remembered by address, two places each: two that share a first place, alternated,
    both stay on the compiled path (CPython's id is the address)."""
    configs = [LaunchConfig(1, 32) for _ in range(64)]
    by_place: dict[int, list[LaunchConfig]] = {}
    for c in configs:
        by_place.setdefault((id(c) >> 4) % 16, []).append(c)
    a, b = next(pair for pair in by_place.values() if len(pair) >= 2)[:2]
    gb = building()
    compat.launch(gb, a, K1, X)
    compat.launch(gb, b, K1, X)
    before = COMPILED.taken
    for _ in range(10):
        compat.launch(gb, a, K1, X)
        compat.launch(gb, b, K1, Y)
    assert COMPILED.taken - before == 20
    assert len(gb.graph.nodes) == 22


@pytest.mark.parametrize(
    "change, check",
    [
        (lambda c: setattr(c, "grid", 7), lambda n: n.grid == (7, 1, 1)),
        (lambda c: setattr(c, "block", (64, 2, 1)), lambda n: n.block == (64, 2, 1)),
        (lambda c: setattr(c, "shmem_size", 64), lambda n: n.shared_mem == 64),
        (lambda c: setattr(c, "cluster", (2, 1, 1)), lambda n: n.attrs is not None and n.attrs.cluster == (2, 1, 1)),
        (lambda c: setattr(c, "is_cooperative", True), lambda n: n.attrs is not None and n.attrs.cooperative),
        (
            lambda c: setattr(c, "programmatic_stream_serialization", True),
            lambda n: n.attrs is not None and n.attrs.port_of(n.predecessors[0]) == "programmatic",
        ),
    ],
    ids=["grid", "block", "shmem", "cluster", "cooperative", "programmatic"],
)
def test_a_configuration_changed_in_place_is_read_again(change, check):
    cfg = LaunchConfig(2, 128)
    gb = building()
    compat.launch(gb, cfg, K1, X)
    compat.launch(gb, cfg, K1, X)
    before = COMPILED.taken
    change(cfg)
    compat.launch(gb, cfg, K1, X)
    g = gb.graph
    assert COMPILED.taken == before  # declined: the twin answered
    assert check(g.nodes[2]) and sorted(p.index for p in g.nodes[2].predecessors) == [1]


def test_foreign_kernels_int_handles_tuples_and_conditions_go_to_the_twin():
    cfg = LaunchConfig(1, 32)
    gb = building()
    compat.launch(gb, cfg, K1, X)
    cond = gb.create_condition()
    before = COMPILED.taken
    compat.launch(gb, cfg, K1, cond, X)  # a GraphCondition: converted by the twin
    compat.launch(gb, (1, 32), K1, X)  # a (grid, block) tuple is never remembered
    g = gb.graph
    assert COMPILED.taken == before
    assert g.nodes[1].args == (cond.condition, X)
    assert [sorted(p.index for p in n.predecessors) for n in g.nodes] == [[], [0], [1]]
    with pytest.raises(OperandError, match="RawKernel"):
        compat.launch(gb, cfg, RawKernel(), X)  # refused by the twin, named
    assert len(g.nodes) == 3


def test_an_error_of_graph_kernel_adds_nothing_and_keeps_the_tail():
    cfg = LaunchConfig(1, 32)
    gb = building()
    compat.launch(gb, cfg, K1, X)
    compat.launch(gb, cfg, K1, X)
    before = COMPILED.taken
    with pytest.raises(OperandError, match="kernel#2 'kernel': argument 0: object cannot be a kernel argument"):
        compat.launch(gb, cfg, K1, object())
    g = gb.graph
    assert len(g.nodes) == 2
    compat.launch(gb, cfg, K1, Y)
    assert COMPILED.taken == before + 1
    assert sorted(p.index for p in g.nodes[2].predecessors) == [1]


def test_a_builder_that_is_not_building_is_refused_by_name():
    cfg = LaunchConfig(1, 32)
    gb = building()
    compat.launch(gb, cfg, K1, X)
    gb.end_building()
    with pytest.raises(StateError, match=r"cudagraph\.compat\.launch: target"):
        compat.launch(gb, cfg, K1, X)
    assert len(gb.graph.nodes) == 1


class HostileConfig(LaunchConfig):
    """A configuration whose ``grid`` runs ``action`` once when armed (then reads as before)."""

    def __init__(self, grid: Any, block: Any) -> None:
        super().__init__(grid, block)
        self._grid = grid
        self.action: Any = None

    @property
    def grid(self) -> Any:
        act, self.action = self.action, None
        if act is not None:
            act()
        return self._grid

    @grid.setter
    def grid(self, value: Any) -> None:
        self._grid = value


HostileConfig.__name__ = "LaunchConfig"  # taken as a cuda.core LaunchConfig, by type name


def armed(cfg: HostileConfig, gb: GraphBuilder) -> int:
    """Teach the compiled path ``cfg`` (two launches); returns its count of taken calls."""
    compat.launch(gb, cfg, K1, X)
    compat.launch(gb, cfg, K1, X)
    return COMPILED.taken


def test_a_config_attribute_that_ends_the_builder_gets_the_twins_refusal():
    cfg = HostileConfig(1, 32)
    gb = building()
    armed(cfg, gb)
    cfg.action = gb.end_building
    with pytest.raises(StateError, match=r"cudagraph\.compat\.launch: target: .* has ended building"):
        compat.launch(gb, cfg, K1, X)
    assert len(gb.graph.nodes) == 2


def test_a_config_attribute_that_launches_into_the_builder_leaves_a_chain():
    cfg = HostileConfig(1, 32)
    gb = building()
    armed(cfg, gb)
    other = LaunchConfig(1, 64)
    cfg.action = lambda: compat.launch(gb, other, K2, Y)
    compat.launch(gb, cfg, K1, X)
    g = gb.graph
    g.validate()
    assert len(g.nodes) == 4
    assert all(len(n.predecessors) <= 1 for n in g.nodes) and len(g.edges) >= 2


def test_an_interrupt_in_a_config_attribute_propagates_and_adds_nothing():
    cfg = HostileConfig(1, 32)
    gb = building()
    armed(cfg, gb)

    def interrupt() -> None:
        raise KeyboardInterrupt

    cfg.action = interrupt
    with pytest.raises(KeyboardInterrupt):
        compat.launch(gb, cfg, K1, X)
    assert len(gb.graph.nodes) == 2


def test_an_exception_in_a_config_attribute_is_the_twins():
    cfg = HostileConfig(1, 32)
    gb = building()
    armed(cfg, gb)
    raised: list[int] = []

    def fail() -> None:
        raised.append(1)
        raise ValueError("grid is unreadable")

    cfg.action = fail
    # The compiled path declines on the error; the twin reads the grid again (armed once: it reads fine).
    compat.launch(gb, cfg, K1, X)
    assert raised == [1] and len(gb.graph.nodes) == 3


def test_references_are_released_and_forget_sends_calls_to_the_twin():
    cfg, k = LaunchConfig(1, 32), CUkernel("only here")
    gb = building()
    compat.launch(gb, cfg, k, X)
    gc.collect()
    args = (X, F(1), I32(2))
    counts = (sys.getrefcount(cfg), sys.getrefcount(k), sys.getrefcount(args[1]))
    for _ in range(200):
        compat.launch(gb, cfg, k, *args)
    nodes = len(gb.graph.nodes)
    assert nodes == 201
    # Each node holds its own args tuple, the kernel; the configuration is held by nothing new.
    after = (sys.getrefcount(cfg), sys.getrefcount(k), sys.getrefcount(args[1]))
    assert after == (counts[0], counts[1] + 200, counts[2] + 200)
    COMPILED.forget()
    before = COMPILED.taken
    compat.launch(gb, cfg, k, X)  # the twin, which teaches again
    compat.launch(gb, cfg, k, X)
    assert COMPILED.taken == before + 1


def test_a_private_path_launch_is_collected_with_its_cycle():
    from cudagraph.definition._define import PathLaunch

    from cudagraph.definition.kinds.kernel import KernelBuilders

    class Twin:
        def __call__(self, *a: Any) -> None:
            return None

    twin = Twin()
    pl = PathLaunch(**entry.path_launch_parts(KernelBuilders.__dict__["kernel"], twin))
    twin.owner = pl  # a cycle through the instance dict
    pl.remember(LaunchConfig(1, 32), 1, 32, 0, (1, 1, 1), (32, 1, 1), CUkernel)
    dead = weakref.ref(twin)
    del twin, pl
    gc.collect()
    assert dead() is None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"owner_slots": ("_state",)}, "owner_slots must be a tuple of 2"),
        ({"owner_slots": ("_state", "nope")}, "nope"),
        ({"path_slots": ("graph", "_tail", 3)}, "path_slots must hold str"),
        ({"method": len}, "KernelMethod"),
        ({"fallback": 3}, "fallback must be callable"),
    ],
)
def test_a_path_launch_is_refused_with_wrong_parts(kwargs, message):
    from cudagraph.definition._define import PathLaunch

    from cudagraph.definition.kinds.kernel import KernelBuilders

    parts = entry.path_launch_parts(KernelBuilders.__dict__["kernel"], print)
    parts.update(kwargs)
    with pytest.raises(TypeError, match=message):
        PathLaunch(**parts)
    with pytest.raises(TypeError, match="remember"):
        COMPILED.remember(1, 2, 3)
