"""``Graph.validate`` with its compiled pass over plain kernel nodes (``KernelMethod.validate``) and without.

The compiled pass answers the index of the first node it does not pass; the Python loop
(``Graph._validate_steps``, its twin) checks that node itself. These tests hold the two to each other:
on random graphs with every kind of defect injected, ``validate()`` raises the same error (type and
message) or passes with the compiled pass and without it; the compiled pass stops exactly where a
reference predicate written here says a node is not plainly passing; it runs no Python code (types are
compared by identity); and on a plain graph it leaves only the first node of each new argument object to
the Python path.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition import graph as graph_module
from cudagraph.definition.core import GraphCore
from cudagraph.definition.kinds.kernel import KERNEL_TYPES_VALID, KernelNode
from cudagraph.definition.operands import ARG_TYPES_VALID

FAST = GraphCore._validator
needs_compiled = pytest.mark.skipif(FAST is None, reason="cudagraph.definition._define was not built")


class CUkernel:  # recognised as a kernel handle by type name
    pass


class Buf:
    """A plain class with a cuda.core ``Buffer``'s attributes."""

    __slots__ = ("handle", "size", "memory_resource", "is_device_accessible", "device_id")

    def __init__(self, handle: int, size: int) -> None:
        self.handle, self.size, self.memory_resource, self.is_device_accessible, self.device_id = (
            handle,
            size,
            None,
            True,
            0,
        )


K = CUkernel()
BUFS = [Buf(0x10000 * (i + 1), 4096) for i in range(3)]


def random_graph(rng: random.Random, size: int) -> cg.Graph:
    """Kernels (shared and fresh buffers, ints, numpy scalars, bytes, Params) mixed with fills and joins."""
    g = cg.Graph("v")
    x = g.param("x")
    nodes: list[Any] = []
    for i in range(size):
        after = rng.sample(nodes, rng.randint(0, min(3, len(nodes)))) or None
        how = rng.randrange(10)
        if how == 0:
            nodes.append(g.memset(0x9000, np.uint8(1), count=16, element_size=1, after=after))
        elif how == 1 and after:
            nodes.append(g.join(*after))
        else:
            pick = [rng.choice(BUFS), Buf(0x900000 + i * 64, 64), 0x9000 + i, np.float32(i), np.int64(-i),
                    b"\x01\x02\x03\x04", x]  # fmt: skip
            args = tuple(rng.choice(pick) for _ in range(rng.randrange(5)))
            nodes.append(g.kernel(K, 1, 32, args, after=after))
    return g


class Other:  # not a kernel argument
    pass


DAMAGE = ("none", "graph", "index", "dup", "foreign", "notnode", "attrs", "neg", "wide", "float", "none_arg", "other")
DAMAGE += ("list_args", "bool")


def inject(g: cg.Graph, rng: random.Random) -> str:
    """Damage one node of ``g`` in one of the ways validate() refuses (or a harmless way); say which."""
    kernels = [n for n in g.nodes if type(n) is KernelNode]
    if not kernels:
        return "none"
    n: Any = rng.choice(kernels)
    how = rng.choice(DAMAGE)
    other = cg.Graph("other")
    stranger = other.kernel(K, 1, 32, ())
    if how == "graph":
        n.graph = other
    elif how == "index":
        n.index = n.index + 1
    elif how == "dup" and n._preds:
        n._preds.append(n._preds[0])
    elif how == "foreign":
        n._preds.append(stranger)
    elif how == "notnode":
        n._preds.append("not a node")
    elif how == "attrs":
        n.attrs = other.kernel(K, 1, 32, (), priority=1).attrs  # (checked by the Python path)
    elif how in ("neg", "wide", "float", "none_arg", "other", "bool"):
        bad = {"neg": -1, "wide": 1 << 64, "float": 1.5, "none_arg": None, "other": Other(), "bool": True}[how]
        n.args = (*n.args, bad)
    elif how == "list_args":
        n.args = list(n.args)
    return how


def outcome(g: cg.Graph) -> tuple[str, str]:
    try:
        g.validate()
    except Exception as exc:  # the exact error is compared
        return type(exc).__name__, str(exc)
    return "ok", ""


@needs_compiled
@pytest.mark.parametrize("seed", range(60))
def test_validate_answers_the_same_with_and_without_the_compiled_pass(seed, monkeypatch):
    rng = random.Random(seed)
    g = random_graph(rng, rng.randrange(1, 40))
    how = inject(g, rng)
    with_fast = outcome(g)
    monkeypatch.setattr(GraphCore, "_validator", None)
    assert outcome(g) == with_fast, how
    if how == "none":
        assert with_fast == ("ok", "")
    elif how == "notnode":
        assert with_fast[0] == "ForeignNodeError" and "depends on a str, which is not a node" in with_fast[1]


def plainly_passes(g: cg.Graph, i: int, seen: set[int]) -> bool:
    """The reference: node ``i`` of ``g`` is a plain kernel node whose checks pass without learning anything."""
    n: Any = g._nodes[i]
    if type(n) is not KernelNode or n.graph is not g or type(n.index) is not int or n.index != i:
        return False
    preds = n._preds
    if type(preds) is not list or len({id(p) for p in preds}) != len(preds):
        return False
    if any(not isinstance(p, cg.Node) or p.graph is not g for p in preds):
        return False
    if n.attrs is not None or type(n.kernel) not in KERNEL_TYPES_VALID or type(n.args) is not tuple:
        return False
    for a in n.args:
        t = type(a)
        if t in ARG_TYPES_VALID or id(a) in seen or (t is int and 0 <= a < 1 << 64):
            continue
        return False
    return True


@needs_compiled
@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_pass_stops_at_the_first_node_not_plainly_passing(seed):
    rng = random.Random(1000 + seed)
    g = random_graph(rng, rng.randrange(1, 40))
    inject(g, rng)
    outcome(g)  # (learns the types a first validate learns)
    seen = {id(b) for b in BUFS if rng.random() < 0.5}
    kt, at = tuple(KERNEL_TYPES_VALID), tuple(ARG_TYPES_VALID)
    start = rng.randrange(len(g._nodes) + 1)
    stop = FAST(g, g._nodes, start, seen, kt, at)
    want = start
    while want < len(g._nodes) and plainly_passes(g, want, seen):
        want += 1
    assert stop == want


CALLS: list[str] = []


class Meta(type):
    def __hash__(cls) -> int:
        CALLS.append("hash")
        return 7

    def __eq__(cls, other: object) -> bool:
        CALLS.append("eq")
        return cls is other


class Hostile(metaclass=Meta):
    pass


@needs_compiled
def test_the_compiled_pass_runs_no_python_code():
    g = cg.Graph("h")
    a = g.kernel(K, 1, 32, (0x9000,))
    b = g.kernel(K, 1, 32, (0x9000,), after=a)
    b.args = (0x9000, Hostile())
    kt = tuple(KERNEL_TYPES_VALID)
    CALLS.clear()
    # Hostile listed among the argument types: compared by identity, its hash never runs
    assert FAST(g, g._nodes, 0, set(), kt, (Hostile,)) == 2
    # not listed: node 1 is left to Python, still without its hash
    assert FAST(g, g._nodes, 0, set(), kt, ()) == 1
    assert CALLS == []


@needs_compiled
def test_the_compiled_pass_refuses_wrong_arguments():
    g = cg.Graph("w")
    g.kernel(K, 1, 32, ())
    kt = tuple(KERNEL_TYPES_VALID)
    with pytest.raises(TypeError, match="validate\\(graph, nodes: list"):
        FAST(g, tuple(g._nodes), 0, set(), kt, ())
    with pytest.raises(TypeError):
        FAST(g, g._nodes, 0, frozenset(), kt, ())
    with pytest.raises(TypeError):
        FAST(g, g._nodes, 0, set(), list(kt), ())
    with pytest.raises(TypeError):
        FAST(g, g._nodes, 0)
    with pytest.raises(ValueError, match="start must not be negative"):
        FAST(g, g._nodes, -1, set(), kt, ())
    assert FAST(g, g._nodes, 5, set(), kt, ()) == 5  # past the end: nothing to read


@needs_compiled
def test_a_plain_graph_leaves_only_each_new_memory_object_to_python(monkeypatch):
    g = cg.Graph("plain")
    prev = None
    for i in range(500):
        prev = g.kernel(K, 1, 32, (BUFS[i % 2], np.float32(1.0), np.int32(i)), after=prev)
    asked: list[int] = []
    real = graph_module.plain_kernel_passes

    def counting(n: Any, seen: set[int]) -> bool:
        asked.append(n.index)
        return real(n, seen)

    monkeypatch.setattr(graph_module, "plain_kernel_passes", counting)
    g.validate()
    assert asked == [0, 1]  # the first use of each of the two buffers; the other 498 nodes passed in C
    asked.clear()
    monkeypatch.setattr(GraphCore, "_validator", None)
    g.validate()
    assert asked == list(range(500))


@needs_compiled
@pytest.mark.parametrize("width", [2, 3, 32, 33, 80])
def test_many_predecessors_are_tested_for_duplicates_both_ways(width, monkeypatch):
    g = cg.Graph("wide")
    roots = [g.kernel(K, 1, 32, ()) for _ in range(width)]
    sink = g.join(*roots)
    tail = g.kernel(K, 1, 32, (), after=roots)
    assert FAST(g, g._nodes, 0, set(), tuple(KERNEL_TYPES_VALID), ()) == width  # the join is Python's
    assert FAST(g, g._nodes, width + 1, set(), tuple(KERNEL_TYPES_VALID), ()) == width + 2
    g.validate()
    tail._preds.append(roots[width // 2])
    assert FAST(g, g._nodes, width + 1, set(), tuple(KERNEL_TYPES_VALID), ()) == width + 1
    with_fast = outcome(g)
    assert with_fast[0] == "DuplicateEdgeError"
    monkeypatch.setattr(GraphCore, "_validator", None)
    assert outcome(g) == with_fast
    assert sink.index == width
