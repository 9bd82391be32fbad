"""Edges from data on the CPU: access declarations, Graph(edges="auto"), races() (cudagraph.definition.access,
auto_edges, races).

The property tests write random programs (random node kinds, random overlapping byte ranges of a few
buffers) and compare with a brute force written here: the inferred edges are the transitive reduction of
the conflict order, and races() names exactly the conflicting pairs with no path between them.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cudagraph as cg
from cudagraph.errors import OperandError, RaceError


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K = CUkernel()
BASE, SIZE = 0x100000, 256
R, W, RW = 1, 2, 3
WRAP = {R: cg.In, W: cg.Out, RW: cg.InOut}
N32 = np.int32(1)

# A program: a list of nodes, each (kind, [(buffer, lo, hi, mode), ...]).
access = st.tuples(st.integers(0, 2), st.integers(0, SIZE - 1), st.integers(1, SIZE), st.sampled_from([R, W, RW])).map(
    lambda t: (t[0], min(t[1], t[2] - 1), max(t[2], t[1] + 1), t[3])
)
kernel_node = st.tuples(st.just("kernel"), st.lists(access, min_size=0, max_size=3))
host_node = st.tuples(st.just("host"), st.lists(access, min_size=1, max_size=2))
copy_node = st.tuples(
    st.just("memcpy"),
    st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, SIZE // 2 - 1), st.integers(1, SIZE // 2)),
)
fill_node = st.tuples(st.just("memset"), st.tuples(st.integers(0, 2), st.integers(0, SIZE - 8), st.integers(1, 8)))
programs = st.lists(st.one_of(kernel_node, kernel_node, host_node, copy_node, fill_node), min_size=1, max_size=24)


def accesses_of(item: Any) -> list[tuple[int, int, int, int]]:
    """``(buffer, lo, hi, mode)`` of each access a program node makes."""
    kind, spec = item
    if kind in ("kernel", "host"):
        return list(spec)
    if kind == "memcpy":
        dst, src, off, n = spec
        return [(src, off, off + n, R), (dst, off + SIZE // 2, off + SIZE // 2 + n, W)]
    buf, off, count = spec
    return [(buf, off, off + 4 * count, W)]


def add(g: cg.Graph, item: Any, after: Any = None) -> cg.Node:
    """Add a program node to ``g`` (its accesses declared the way its kind declares them)."""
    kind, spec = item
    if kind == "kernel":
        args = tuple(WRAP[m](BASE * (b + 1), offset=lo, nbytes=hi - lo) for b, lo, hi, m in spec)
        return g.kernel(K, 1, 32, (*args, N32), after=after)
    if kind == "host":
        reads = [cg.In(BASE * (b + 1), offset=lo, nbytes=hi - lo) for b, lo, hi, m in spec if m & R]
        writes = [cg.In(BASE * (b + 1), offset=lo, nbytes=hi - lo) for b, lo, hi, m in spec if m & W]
        return g.host(print, reads=reads, writes=writes, after=after)
    if kind == "memcpy":
        dst, src, off, n = spec
        return g.memcpy(BASE * (dst + 1) + off + SIZE // 2, BASE * (src + 1) + off, n, after=after)
    buf, off, count = spec
    return g.memset(BASE * (buf + 1) + off, 0, count=count, element_size=4, after=after)


def conflict(a: list[Any], b: list[Any]) -> bool:
    return any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2] and (x[3] | y[3]) & W for x in a for y in b)


def closure(n: int, preds: dict[int, set[int]]) -> list[set[int]]:
    """Ancestors of each node (nodes in index order, edges forward)."""
    anc: list[set[int]] = []
    for v in range(n):
        s: set[int] = set()
        for p in preds[v]:
            s |= anc[p] | {p}
        anc.append(s)
    return anc


def reduction(program: list[Any]) -> dict[int, set[int]]:
    """The transitive reduction of the conflict order of ``program`` (brute force)."""
    acc = [accesses_of(item) for item in program]
    n = len(program)
    direct = {v: {u for u in range(v) if conflict(acc[u], acc[v])} for v in range(n)}
    anc = closure(n, direct)
    return {v: {u for u in direct[v] if not any(u in anc[w] for w in direct[v] if w != u)} for v in range(n)}


def brute_races(program: list[Any], preds: dict[int, set[int]]) -> set[tuple[int, int]]:
    acc = [accesses_of(item) for item in program]
    anc = closure(len(program), preds)
    return {(u, v) for v in range(len(program)) for u in range(v) if conflict(acc[u], acc[v]) and u not in anc[v]}


def preds_of(g: cg.Graph) -> dict[int, set[int]]:
    return {n.index: {p.index for p in n.predecessors} for n in g.nodes}


def manual(program: list[Any], preds: dict[int, set[int]]) -> cg.Graph:
    g = cg.Graph("manual")
    nodes: list[cg.Node] = []
    for v, item in enumerate(program):
        nodes.append(add(g, item, after=[nodes[u] for u in sorted(preds[v])] or None))
    return g


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_inferred_edges_are_the_transitive_reduction_of_the_conflict_order(program):
    g = cg.Graph("auto", edges="auto")
    for item in program:
        add(g, item)
    assert preds_of(g) == reduction(program)
    assert g.races() == []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs, st.randoms(use_true_random=False))
def test_races_names_every_removed_needed_edge_and_nothing_else(program, rng):
    need = reduction(program)
    edges = [(u, v) for v in need for u in need[v]]
    if edges:
        u, v = rng.choice(edges)
        cut = {w: set(ps) - ({u} if w == v else set()) for w, ps in need.items()}
        found = {(r.first.index, r.second.index) for r in manual(program, cut).races()}
        assert (u, v) in found
        assert found == brute_races(program, cut)
    # A redundant edge removed: no race.
    anc = closure(len(program), need)
    extra = [(u, v) for v in range(len(program)) for u in anc[v] - need[v]]
    if extra:
        u, v = rng.choice(extra)
        more = {w: set(ps) | ({u} if w == v else set()) for w, ps in need.items()}
        g = manual(program, more)
        assert g.races() == []
        g.remove_edge(g.nodes[u], g.nodes[v])
        assert g.races() == []


def test_two_reads_run_in_parallel_and_a_write_waits_for_both():
    g = cg.Graph("g", edges="auto")
    x = 0x10000
    w = g.kernel(K, 1, 32, (cg.Out(x, nbytes=64), N32), name="w")
    r1 = g.kernel(K, 1, 32, (cg.In(x, nbytes=64), N32), name="r1")
    r2 = g.kernel(K, 1, 32, (cg.In(x, offset=32, nbytes=32), N32), name="r2")
    w2 = g.kernel(K, 1, 32, (cg.InOut(x, nbytes=64), N32), name="w2")
    other = g.kernel(K, 1, 32, (cg.Out(x, offset=64, nbytes=64), N32), name="disjoint")
    assert r1.predecessors == (w,) and r2.predecessors == (w,)
    assert w2.predecessors == (r1, r2)  # w is implied through the reads: no edge
    assert other.predecessors == ()
    assert r1.args == (x, N32)  # what the kernel gets is the wrapped value itself


def test_params_conflict_by_name_and_offset_range():
    g = cg.Graph("g", edges="auto")
    p, q = g.param("p"), g.param("q")
    a = g.kernel(K, 1, 32, (cg.Out(p, nbytes=64), N32))
    b = g.kernel(K, 1, 32, (cg.Out(p, offset=64, nbytes=64), N32))
    c = g.kernel(K, 1, 32, (cg.Out(q), N32))
    d = g.kernel(K, 1, 32, (cg.In(p), N32))  # the whole of p: after both halves
    e = g.memcpy(q, p, 16)
    assert b.predecessors == () and c.predecessors == ()
    assert set(d.predecessors) == {a, b}
    assert set(e.predecessors) == {c, a}  # reads p[0:16] (written by a), writes q (written by c)
    assert a.args == (p, N32)


def test_explicit_after_is_kept_and_implied_edges_are_left_out():
    g = cg.Graph("g", edges="auto")
    a = g.kernel(K, 1, 32, (cg.Out(0x1000, nbytes=8), N32))
    b = g.empty(after=a)
    c = g.kernel(K, 1, 32, (cg.In(0x1000, nbytes=8), N32), after=b)
    assert c.predecessors == (b,)  # a -> b -> c implies a -> c
    with g.path() as path:
        k1 = path.kernel(K, 1, 32, (cg.Out(0x2000, nbytes=8), N32))
        k2 = path.kernel(K, 1, 32, (cg.In(0x2000, nbytes=8), N32))
    assert k2.predecessors == (k1,)


def test_copies_fills_allocations_and_frees_declare_themselves():
    g = cg.Graph("g", edges="auto")
    host = np.zeros(16, np.float32)
    h2d = g.memcpy(0x5000, host, host.nbytes)
    k = g.kernel(K, 1, 32, (cg.InOut(0x5000, nbytes=64), N32))
    d2h = g.memcpy(host, 0x5000, host.nbytes)
    hn = g.host(print, reads=host)
    fill = g.memset(0x5000, 0, count=16, element_size=4)
    assert k.predecessors == (h2d,) and d2h.predecessors == (k,) and hn.predecessors == (d2h,)
    assert fill.predecessors == (d2h,)
    a = g.alloc(256)
    use = g.kernel(K, 1, 32, (cg.Out(a), N32))
    read = g.kernel(K, 1, 32, (cg.In(a.offset(128), nbytes=64), N32))
    f = g.free(a)
    assert use.predecessors == (a,) and read.predecessors == (use,) and f.predecessors == (read,)
    g.validate(races=True)


def test_host_nodes_order_on_python_objects():
    g = cg.Graph("g", edges="auto")
    log: list[int] = []
    a = g.host(log.append, 1, writes=[log])  # (a list is a sequence of memory: wrap it)
    b = g.host(log.append, 2, writes=[log])
    c = g.host(print, reads=[log])
    assert b.predecessors == (a,) and c.predecessors == (b,)


def test_child_graphs_and_conditional_bodies_count_as_the_union_of_their_accesses():
    body = cg.Graph("body", edges="auto")
    body.kernel(K, 1, 32, (cg.In(0x1000, nbytes=8), N32))
    body.kernel(K, 1, 32, (cg.Out(0x2000, nbytes=8), N32))
    g = cg.Graph("g", edges="auto")
    w = g.kernel(K, 1, 32, (cg.Out(0x1000, nbytes=8), N32))
    child = g.child(body)
    r = g.kernel(K, 1, 32, (cg.In(0x2000, nbytes=8), N32))
    assert child.predecessors == (w,) and r.predecessors == (child,)
    cond = g.condition(default=1)
    loop = g.if_(cond)
    loop.then.kernel(K, 1, 32, (cg.InOut(0x2000, nbytes=8), N32))
    assert loop.predecessors == ()  # inferred once its body is written: at the next node
    after = g.kernel(K, 1, 32, (cg.In(0x2000, nbytes=8), N32))
    assert loop.predecessors == (r,) and after.predecessors == (loop,)
    last = g.if_(g.condition(default=1))
    last.then.kernel(K, 1, 32, (cg.Out(0x1000, nbytes=8), N32))
    g.validate()  # ... or when the graph is validated (instantiated, run)
    assert last.predecessors == (child,)


def test_an_edit_in_place_is_seen_by_the_next_node():
    g = cg.Graph("g", edges="auto")
    a = g.kernel(K, 1, 32, (cg.Out(0x1000, nbytes=8), N32))
    b = g.kernel(K, 1, 32, (cg.Out(0x2000, nbytes=8), N32))
    c = g.kernel(K, 1, 32, (cg.In(0x1000, nbytes=8), N32))
    g.add_edge(a, b)
    d = g.kernel(K, 1, 32, (cg.In(0x1000, nbytes=8), cg.In(0x2000, nbytes=8), N32))
    assert d.predecessors == (b,)  # a -> b now: a is implied
    g.remove_edge(a, b)
    e = g.kernel(K, 1, 32, (cg.In(0x1000, nbytes=8), cg.In(0x2000, nbytes=8), N32))
    assert set(e.predecessors) == {a, b}
    g.remove(c)
    f = g.kernel(K, 1, 32, (cg.Out(0x1000, nbytes=8), N32))
    assert set(f.predecessors) == {d, e}


def test_races_name_both_nodes_the_memory_and_the_range():
    g = cg.Graph("g")
    p = g.param("x")
    a = g.kernel(K, 1, 32, (cg.Out(p, offset=16, nbytes=32), N32), name="producer")
    b = g.kernel(K, 1, 32, (cg.In(p, nbytes=64), N32), name="consumer")
    (race,) = g.races()
    assert (race.first, race.second, race.lo, race.hi, race.accesses) == (a, b, 16, 48, "write/read")
    assert str(race) == (
        "kernel#0 'producer' and kernel#1 'consumer' both access $x[16:48] (write/read) with no path between them"
    )
    with pytest.raises(RaceError, match=r"producer.*consumer") as info:
        g.validate(races=True)
    assert info.value.races[0].second is b
    g.add_edge(a, b)
    assert g.races() == []
    g.validate(races=True)


def test_access_labels_in_summary_dot_and_mermaid():
    g = cg.Graph("g", edges="auto")
    p = g.param("x")
    g.kernel(K, 1, 32, (cg.In(p, nbytes=64), cg.Out(0x1000, nbytes=16), N32), name="k")
    assert "[R: $x[0:64]  W: 0x1000+16]" in g.summary()
    assert "R: $x[0:64]  W: 0x1000+16" in g.to_dot()
    assert "R: $x[0:64]  W: 0x1000+16" in g.to_mermaid()
    plain = cg.Graph("plain")
    plain.memset(0x1000, 0, count=4)
    assert "[" not in plain.summary().splitlines()[-1]  # a graph that declares nothing shows no labels


def test_bad_declarations_are_typed_errors_naming_the_node_and_argument():
    g = cg.Graph("g")
    with pytest.raises(OperandError, match=r"kernel#0 'k': argument 0: an int address has no size"):
        g.kernel(K, 1, 32, (cg.In(0x1000), N32), name="k")
    s = g.param("s", np.float32)
    with pytest.raises(OperandError, match=r"kernel#0 'k': argument 1: param 's' is a float32 scalar"):
        g.kernel(K, 1, 32, (N32, cg.In(s)), name="k")
    with pytest.raises(OperandError, match=r"kernel#0 'k': reads\[1\]: expected memory"):
        g.kernel(K, 1, 32, (N32,), reads=[g.param("p"), 1.5], name="k")
    with pytest.raises(OperandError, match=r"host#0 'h': writes: expected memory"):
        g.host(print, writes=2.0, name="h")
    with pytest.raises(OperandError, match="offset must be at least 0"):
        cg.In(0x1000, offset=-1)
    with pytest.raises(OperandError, match="nbytes must be an int"):
        cg.Out(0x1000, nbytes="8")
    with pytest.raises(OperandError, match="wrapped already"):
        cg.In(cg.Out(0x1000))
    with pytest.raises(OperandError, match="edges must be one of manual, auto"):
        cg.Graph("g", edges="sometimes")
    a = g.alloc(64)
    with pytest.raises(OperandError, match="ends 64 bytes past the end"):
        g.kernel(K, 1, 32, (cg.In(a, offset=32, nbytes=96), N32))
    assert len(g) == 1  # nothing half-built


def test_update_with_wrapped_arguments_declares_them():
    g = cg.Graph("g")
    a = g.kernel(K, 1, 32, (cg.Out(0x1000, nbytes=8), N32))
    b = g.kernel(K, 1, 32, (cg.In(0x2000, nbytes=8), N32))
    assert g.races() == []
    b.update(args=(cg.In(0x1000, nbytes=8), N32))
    assert b.args == (0x1000, N32)
    assert [(r.first, r.second) for r in g.races()] == [(a, b)]


def lowered(g: cg.Graph, monkeypatch: pytest.MonkeyPatch, path: str) -> list[Any]:
    import cudagraph.materialize.explicit as explicit
    from test_native_cpu import INFOS, install, lower

    with monkeypatch.context() as m:
        d = install(path, m)
        m.setattr(explicit, "kernel_info", lambda k, *more: INFOS[id(k)])
        dn = lower(g, d)
        index = {h: i for i, h in enumerate(dn.raw)}
        return [(sorted(index[x] for x in c["deps"]), c["kind"], c["launch"]) for c in d.calls]


@pytest.mark.parametrize("path", ["native", "bindings"])
def test_auto_edges_lower_as_the_same_graph_with_hand_written_edges(monkeypatch, path):
    pytest.importorskip("cuda.bindings.driver")
    from test_native_cpu import K1, native

    if path == "native" and native is None:
        pytest.skip("cudagraph.driver._native was not built")
    rng = np.random.default_rng(3)
    a, n = np.float32(2.0), np.int32(64)
    auto = cg.Graph("auto", edges="auto")
    for _ in range(60):
        b = int(rng.integers(0, 4))
        mode = [cg.In, cg.Out, cg.InOut][int(rng.integers(0, 3))]
        off = int(rng.integers(0, 4)) * 64
        if rng.random() < 0.8:
            auto.kernel(K1, 1, 32, (mode(0x10000 * (b + 1), offset=off, nbytes=64), a, n))
        else:
            auto.memset(0x10000 * (b + 1) + off, 0, count=16, element_size=4)
    hand = cg.Graph("hand")
    for node in auto.nodes:
        after = list(node.predecessors) and [hand.nodes[p.index] for p in node.predecessors]
        if isinstance(node, cg.KernelNode):
            hand.kernel(K1, 1, 32, node.args, after=after or None)
        else:
            hand.memset(node.dst, 0, count=16, element_size=4, after=after or None)
    assert auto.num_edges > 30
    assert lowered(auto, monkeypatch, path) == lowered(hand, monkeypatch, path)


_PROGRAM = r"""
import numpy as np, cudagraph as cg
from cudagraph.definition import compiled_kernel
class CUkernel: pass
K = CUkernel()
g = cg.Graph("g", edges="auto")
out = []
for i in range(40):
    b = 0x1000 * (i % 5 + 1)
    k = g.kernel(K, 1, 32, (cg.InOut(b, nbytes=64) if i % 3 else cg.In(b, nbytes=64), np.int32(i)))
    plain = g.kernel(K, 1, 32, (b, np.int32(i)))  # the compiled path takes this one where built
    out.append((k.args, [p.index for p in k.predecessors], plain.args, [p.index for p in plain.predecessors]))
print(compiled_kernel.define_module() is not None)
print(repr(out))
"""


def test_wrapped_arguments_are_unwrapped_with_and_without_the_compiled_module():
    runs = []
    for off in ("", "1"):
        env = dict(os.environ, CUDAGRAPH_NO_C_ENTRY=off)
        if not off:
            env.pop("CUDAGRAPH_NO_C_ENTRY")
        done = subprocess.run([sys.executable, "-c", _PROGRAM], env=env, capture_output=True, text=True, check=True)
        compiled, text = done.stdout.splitlines()
        runs.append(text)
        assert compiled == ("False" if off else compiled)
    assert runs[0] == runs[1]
    assert "In(" not in runs[0] and "InOut(" not in runs[0]


def test_every_builder_of_an_auto_graph_is_wrapped():
    from cudagraph.definition.builders import builder_names
    from cudagraph.definition.graph import AutoGraph

    for name in builder_names():
        assert getattr(AutoGraph, name) is not getattr(cg.Graph, name)
        assert getattr(AutoGraph, name).__cudagraph_builder__
    assert type(cg.Graph("g", edges="auto")) is AutoGraph and type(cg.Graph("g")) is cg.Graph
    ga = cg.Graph("g", edges="auto")
    assert type(ga.while_(ga.condition()).body) is AutoGraph


def test_many_accesses_stay_fast_enough_to_build():
    # (speed is measured by bench/auto_edges.py; this checks the shape of a wide program only)
    g = cg.Graph("wide", edges="auto")
    root = g.kernel(K, 1, 32, (cg.Out(0x1000, nbytes=4096), N32))
    readers = [g.kernel(K, 1, 32, (cg.In(0x1000, offset=8 * i, nbytes=8), N32)) for i in range(512)]
    last = g.kernel(K, 1, 32, (cg.Out(0x1000, nbytes=4096), N32))
    assert all(r.predecessors == (root,) for r in readers)
    assert set(last.predecessors) == set(readers)
    assert list(itertools.islice(g.races(), 1)) == []


def small_window(m: pytest.MonkeyPatch, width: int) -> None:
    """Make the ancestor bit vectors cover ``width`` nodes, so that older candidates take the walk back."""
    from cudagraph.definition import reach

    m.setattr(reach, "WINDOW", width)
    m.setattr(reach, "_MASK", (1 << (width + 1)) - 1)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs, st.integers(1, 4), st.randoms(use_true_random=False))
def test_candidates_beyond_the_bit_window_give_the_same_edges_and_races(program, width, rng):
    with pytest.MonkeyPatch.context() as m:
        small_window(m, width)
        g = cg.Graph("auto", edges="auto")
        for item in program:
            add(g, item)
        need = reduction(program)
        assert preds_of(g) == need
        assert g.races() == []
        edges = [(u, v) for v in need for u in need[v]]
        if edges:
            u, v = rng.choice(edges)
            cut = {w: set(ps) - ({u} if w == v else set()) for w, ps in need.items()}
            assert {(r.first.index, r.second.index) for r in manual(program, cut).races()} == brute_races(program, cut)


@pytest.mark.parametrize("width", [8, 1024])
def test_a_long_program_matches_the_brute_force(width):
    # 600 nodes over 6 buffers, some read rarely (candidates far back), with a narrow and the default window
    rng = np.random.default_rng(7)
    program = []
    for i in range(600):
        b = int(rng.integers(0, 6)) if rng.random() < 0.7 else 0
        lo = int(rng.integers(0, 4)) * 64
        spec = [(b, lo, lo + 64 * int(rng.integers(1, 3)), [R, W, RW][int(rng.integers(0, 3))])]
        if i % 97 == 0:
            spec.append((5, 0, SIZE, R))
        program.append(("kernel", spec))
    with pytest.MonkeyPatch.context() as m:
        small_window(m, width)
        g = cg.Graph("auto", edges="auto")
        for item in program:
            add(g, item)
        need = reduction(program)
        assert preds_of(g) == need
        assert g.races() == []
        v = max(need, key=lambda w: len(need[w]))
        u = min(need[v])
        cut = {w: set(ps) - ({u} if w == v else set()) for w, ps in need.items()}
        assert {(r.first.index, r.second.index) for r in manual(program, cut).races()} == brute_races(program, cut)
