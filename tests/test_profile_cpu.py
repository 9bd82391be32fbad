"""Per-node profiles on the CPU: the critical path, the result table and timeline, argument checks."""

from __future__ import annotations

import sys

import pytest

import cudagraph as cg
from cudagraph.definition import seams
from cudagraph.errors import MissingDependencyError, OperandError
from cudagraph.executable.profile import NodeTiming, ProfileResult, critical_path


def diamond() -> tuple[cg.Graph, list]:
    g = cg.Graph("diamond")
    a = g.empty(name="a")
    slow = g.empty(after=a, name="slow")
    fast = g.empty(after=a, name="fast")
    d = g.join(slow, fast, name="d")
    return g, [a, slow, fast, d]


def test_critical_path_takes_the_slow_branch():
    g, (a, slow, fast, d) = diamond()
    times = {id(a): 1.0, id(slow): 100.0, id(fast): 5.0, id(d): 2.0}
    path, length = critical_path(g.topological_order(), times)
    assert path == [a, slow, d]
    assert length == 103.0
    times[id(fast)] = 150.0
    assert critical_path(g.topological_order(), times) == ([a, fast, d], 153.0)


def test_critical_path_of_disconnected_parts_and_edges_added_backwards():
    g = cg.Graph("parts")
    x = g.empty(name="x")
    y = g.empty(name="y")
    z = g.empty(name="z")
    g.add_edge(z, x)  # an edge from a later node: creation order is no longer topological
    times = {id(x): 3.0, id(y): 10.0, id(z): 4.0}
    assert critical_path(g.topological_order(), times) == ([y], 10.0)
    times[id(y)] = 6.0
    assert critical_path(g.topological_order(), times) == ([z, x], 7.0)
    assert critical_path([], {}) == ([], 0.0)


def test_critical_path_ties_go_to_the_earlier_node():
    g, (a, slow, fast, d) = diamond()
    times = {id(a): 1.0, id(slow): 5.0, id(fast): 5.0, id(d): 1.0}
    assert critical_path(g.topological_order(), times)[0] == [a, slow, d]


def test_profile_result_table_and_schedule():
    g, (a, slow, fast, d) = diamond()
    samples = {id(a): [1.0, 3.0, 2.0], id(slow): [100.0, 90.0, 110.0], id(fast): [5.0] * 3, id(d): [2.0, 2.0, 4.0]}
    r = ProfileResult(g, g.topological_order(), samples, [105.0, 104.0, 200.0])
    assert [t.median_us for t in r.nodes] == [2.0, 100.0, 5.0, 2.0]
    assert [t.min_us for t in r.nodes] == [1.0, 90.0, 5.0, 2.0]
    assert r.launch_us == 105.0
    assert r.critical_path == [a, slow, d] and r.critical_path_us == 104.0
    assert r.eager_us == 109.0
    assert [(t.name, start) for t, start in r.schedule()] == [("a", 0.0), ("slow", 2.0), ("fast", 2.0), ("d", 102.0)]
    assert str(r).split("\n") == [
        "Profile of Graph 'diamond': 4 nodes",
        "      # kind          name  median us     min us  critical",
        "      0 empty         a          2.00       1.00  *",
        "      1 empty         slow     100.00      90.00  *",
        "      2 empty         fast       5.00       5.00  ",
        "      3 empty         d          2.00       2.00  *",
        "  critical path: #0 -> #1 -> #3: 104.00 us",
        "  nodes one after another: 109.00 us",
        "  whole graph launch: 105.00 us",
    ]
    assert repr(r) == "<ProfileResult of Graph 'diamond': 4 nodes, critical path 104.00 us>"
    no_launch = ProfileResult(g, g.topological_order(), samples, [])
    assert no_launch.launch_us is None and "whole graph launch" not in str(no_launch)


def test_node_timing_needs_samples():
    _g, (a, *_) = diamond()
    with pytest.raises(OperandError, match="NodeTiming: empty#0 'a' has no time samples"):
        NodeTiming(a, [])


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    g, nodes = diamond()
    r = ProfileResult(g, g.topological_order(), {id(n): [float(i + 1)] for i, n in enumerate(nodes)}, [5.0])
    out = r.plot(tmp_path / "t.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_a_typed_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    g, nodes = diamond()
    r = ProfileResult(g, g.topological_order(), {id(n): [1.0] for n in nodes}, [])
    with pytest.raises(MissingDependencyError, match=r"plot needs matplotlib \(pip install matplotlib\)"):
        r.plot(tmp_path / "t.png")
    assert not (tmp_path / "t.png").exists()


def test_graph_profile_goes_through_the_seam(monkeypatch):
    assert seams.profile.target == "cudagraph.executable.profile:profile_graph"
    seen = []
    monkeypatch.setattr(seams, "profile", lambda *a: seen.append(a) or "result")
    g, _ = diamond()
    assert g.profile("s", repeats=3, x=1) == "result"
    assert seen == [(g, "s", 3, {"x": 1})]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_profile_repeats_are_checked_before_the_driver(bad):
    g, _ = diamond()
    with pytest.raises(OperandError, match=rf"profile: repeats must be a positive int, got {bad!r}"):
        g.profile(None, repeats=bad)
