"""The compiled edges from data and race check (``cudagraph.definition._ranges`` and ``_reach``) against their
Python twins, the reference: ``auto_edges._record``, ``reach.Reach`` and ``races._race_pairs``, on random
programs (byte ranges near 0 and near 2**64, empty ones, ranges running to the end, random DAGs with races,
narrow and wide ancestor windows), then whole graphs built and checked with and without the modules. Skipped,
with the reason shown, where the modules are not built (or ``CUDAGRAPH_NO_C_ENTRY`` is set)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cudagraph as cg
from cudagraph.definition import auto_edges, compiled_ranges, races, reach
from cudagraph.definition.access import READ, WRITE, Region

RANGES, REACH = compiled_ranges.RANGES, compiled_ranges.REACH
needs_built = pytest.mark.skipif(
    RANGES is None,
    reason="cudagraph.definition._ranges and _reach are not built (see setup.py's note) or CUDAGRAPH_NO_C_ENTRY is set",
)

TOP = 1 << 64
SPACES = [("mem",), ("param", "x"), ("object", 7)]
#: Bounds that meet often: small offsets, and the top of the address space.
bound = st.one_of(st.integers(0, 96), st.integers(TOP - 96, TOP))
region = st.builds(
    lambda s, lo, hi, m: Region(SPACES[s], lo, hi, m, "what"),
    st.integers(0, len(SPACES) - 1),
    bound,
    bound,
    st.sampled_from([READ, WRITE, READ | WRITE]),
)
node_regions = st.lists(region, max_size=4).map(tuple)
windows = st.sampled_from([0, 1, 2, 5, 63, 64, 65, 130, 1024])


def narrow(m: pytest.MonkeyPatch, width: int) -> None:
    """The Python ``Reach`` over ``width`` nodes (the compiled one is given its window)."""
    m.setattr(reach, "WINDOW", width)
    m.setattr(reach, "_MASK", (1 << (width + 1)) - 1)


def random_dag(rng: random.Random, n: int, density: float) -> list[list[int]]:
    """Each node's predecessors (positions below it), some far back."""
    out = []
    for v in range(n):
        ps = {u for u in range(v) if rng.random() < density / (1 + v - u) ** 0.5}
        if v and rng.random() < 0.1:
            ps.add(rng.randrange(v))
        out.append(rng.sample(sorted(ps), len(ps)))
    return out


@needs_built
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(node_regions, max_size=30))
def test_record_gives_the_same_candidates(program: list[tuple[Region, ...]]) -> None:
    ours: dict[Any, Any] = {}
    theirs: dict[Any, Any] = {}
    for i, rs in enumerate(program):
        assert RANGES.record(ours, rs, i) == auto_edges._record(theirs, rs, i)
    for key, seg in ours.items():  # (the twin also keeps a space met only by empty ranges: one range, untouched)
        assert len(seg) == len(theirs[key].starts)


@needs_built
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.integers(1, 200), windows, st.sampled_from([0.05, 0.3, 1.0]))
def test_reach_answers_the_same(seed: int, n: int, width: int, density: float) -> None:
    rng = random.Random(seed)
    preds = random_dag(rng, n, density)
    with pytest.MonkeyPatch.context() as m:
        narrow(m, width)
        ours, theirs = REACH.Reach(width), reach.Reach()
        for v, ps in enumerate(preds):
            if rng.random() < 0.5:
                ours.append(ps)
                theirs.append(ps)
            else:  # candidates, each once, in decreasing order; given ones too
                given_ = ps[: rng.randrange(len(ps) + 1)]
                cands = sorted(set(rng.sample(range(v), min(v, rng.randrange(6)))) - set(given_), reverse=True)
                assert ours.add(given_, cands) == theirs.add(given_, cands)
            assert len(ours) == len(theirs) == v + 1
            cands = sorted(set(rng.sample(range(v + 1), min(v + 1, 8))), reverse=True)
            assert ours.missing(v, cands) == theirs.missing(v, cands)


@needs_built
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(node_regions, max_size=40), st.integers(0, 2**32), windows, st.sampled_from([0.0, 0.2, 0.7]))
def test_race_pairs_are_the_same(program: list[tuple[Region, ...]], seed: int, width: int, density: float) -> None:
    preds = random_dag(random.Random(seed), len(program), density)
    with pytest.MonkeyPatch.context() as m:
        narrow(m, width)
        assert RANGES.race_pairs(program, preds, width) == races._race_pairs(program, preds)


@needs_built
@pytest.mark.parametrize("width", [3, 1024])
def test_a_long_racy_program_gives_the_same_race_pairs(width: int) -> None:
    # 1,500 nodes over a few buffers, sparse random edges: races everywhere, candidates far back
    rng = random.Random(5)
    program = []
    for _ in range(1500):
        rs = []
        for _ in range(rng.randint(0, 3)):
            lo = rng.randrange(8) * 64
            hi = TOP if rng.random() < 0.05 else lo + 64 * rng.randint(1, 4)
            rs.append(Region(SPACES[rng.randrange(3)], lo, hi, rng.choice([READ, WRITE, READ | WRITE]), "what"))
        program.append(tuple(rs))
    preds = random_dag(rng, len(program), 0.4)
    with pytest.MonkeyPatch.context() as m:
        narrow(m, width)
        got = RANGES.race_pairs(program, preds, width)
        assert got == races._race_pairs(program, preds)
        assert len(got) > 1000


class CUkernel:  # the definition layer recognises kernels by type name
    pass


def _build(program: list[list[tuple[int, int, int, int]]], python: bool) -> tuple[list[list[int]], list[str]]:
    """Build ``program`` as an auto graph (with the module, or its Python twins), drop every third inferred edge
    into a manual copy; the edges, and the races of both."""
    with pytest.MonkeyPatch.context() as m:
        if python:
            m.setattr(compiled_ranges, "RANGES", None)
        g = cg.Graph("auto", edges="auto")
        wrap = {READ: cg.In, WRITE: cg.Out, READ | WRITE: cg.InOut}
        for spec in program:
            args = tuple(wrap[mode](0x10000 * (b + 1), offset=lo, nbytes=hi - lo) for b, lo, hi, mode in spec)
            g.kernel(CUkernel(), 1, 32, args)
        edges = [sorted(p.index for p in n.predecessors) for n in g.nodes]
        cut = cg.Graph("cut")
        nodes: list[Any] = []
        for v, spec in enumerate(program):
            args = tuple(wrap[mode](0x10000 * (b + 1), offset=lo, nbytes=hi - lo) for b, lo, hi, mode in spec)
            keep = [nodes[u] for k, u in enumerate(edges[v]) if (v + k) % 3]
            nodes.append(cut.kernel(CUkernel(), 1, 32, args, after=keep or None))
        return edges, [str(r) for r in g.races() + cut.races()]


access = st.tuples(st.integers(0, 2), st.integers(0, 255), st.integers(1, 256), st.sampled_from([1, 2, 3])).map(
    lambda t: (t[0], min(t[1], t[2] - 1), max(t[2], t[1] + 1), t[3])
)


@needs_built
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(access, max_size=3), min_size=1, max_size=30))
def test_graphs_get_the_same_edges_and_races_with_and_without_the_module(program: list[Any]) -> None:
    assert _build(program, python=False) == _build(program, python=True)


@needs_built
def test_hostile_values_raise_instead_of_crashing() -> None:
    with pytest.raises(OverflowError):
        RANGES.record({}, (Region(("mem",), -8, 8, WRITE, "what"),), 0)
    with pytest.raises(OverflowError):
        RANGES.race_pairs([(Region(("mem",), -8, 8, READ, "what"),)], [[]], 1024)
    with pytest.raises(TypeError):
        RANGES.record({}, (("mem",),), 0)
    r = REACH.Reach(8)
    r.append([])
    with pytest.raises(ValueError):
        r.append([1])
    with pytest.raises(ValueError):
        r.add([], [3])
    with pytest.raises(IndexError):
        r.missing(4, [])
    with pytest.raises(ValueError):
        r.missing(0, [-1])
    with pytest.raises(ValueError):
        RANGES.race_pairs([(), ()], [[], [2]], 8)
    with pytest.raises(ValueError):
        REACH.Reach(-1)
    # Empty ranges and ranges at the top touch only what they cover
    top = (Region(("mem",), TOP - 1, TOP, WRITE, "a"), Region(("mem",), TOP, TOP, WRITE, "b"))
    assert RANGES.record({}, top, 0) == []
    assert RANGES.race_pairs([top, top], [[], []], 8) == [(0, 1, ("mem",), TOP - 1, TOP, WRITE, WRITE)]


def test_both_modules_declare_their_gil_stance() -> None:
    folder = Path(compiled_ranges.__file__).parent
    for name in ("_reach.pyx", "_ranges.pyx"):
        head = (folder / name).read_text().split('"""', 1)[0]
        assert "# cython: freethreading_compatible = True" in head, name


def test_the_python_twins_run_with_cudagraph_no_c_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDAGRAPH_NO_C_ENTRY", "1")
    assert compiled_ranges.ranges_modules() == (None, None)
    monkeypatch.setattr(compiled_ranges, "RANGES", None)
    assert type(compiled_ranges.new_reach()) is reach.Reach
