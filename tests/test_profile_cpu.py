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


class FakeClockDriver:
    """Events that read a fake GPU clock; each issued node advances it by its duration (ms)."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.calls: list[str] = []
        self.live: set[int] = set()
        self.next = 0

    def cuEventCreate(self, flags):
        self.next += 1
        self.live.add(self.next)
        self.calls.append("create")
        return (0, {"id": self.next, "t": None})

    def cuEventRecord(self, event, stream):
        event["t"] = self.clock
        self.calls.append("record")
        return (0,)

    def cuEventElapsedTime(self, start, end):
        return (0, end["t"] - start["t"])

    def cuEventSynchronize(self, event):
        return (0,)

    def cuStreamSynchronize(self, stream):
        self.calls.append("sync")
        return (0,)

    def cuEventDestroy(self, event):
        self.live.discard(event["id"])
        return (0,)


def test_profile_graph_times_each_node_between_its_events(monkeypatch):
    from cudagraph.driver import api
    from cudagraph.executable import profile as prof

    drv = FakeClockDriver()
    durations = {"a": 0.001, "slow": 0.5, "fast": 0.02, "d": 0.003}  # ms
    issued = []

    def issue(node, stream, run):
        issued.append(node.name)
        drv.clock += durations[node.name]

    launches = []

    class FakeExe:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            launches.append("closed")

        def launch(self, stream):
            launches.append(stream)
            drv.clock += 0.51

        def check(self):
            pass

    monkeypatch.setattr(prof, "require_driver", lambda: drv)
    monkeypatch.setattr(api, "require_driver", lambda: drv)
    monkeypatch.setattr(prof, "ensure_context", lambda: "ctx")
    monkeypatch.setattr(prof, "stream_handle", lambda s: f"h({s})")
    monkeypatch.setattr(prof, "issue_node", issue)
    monkeypatch.setattr(seams, "instantiate", lambda graph, **kw: FakeExe())
    g, (a, slow, _fast, d) = diamond()
    r = g.profile("s", repeats=3)
    assert issued == ["a", "slow", "fast", "d"] * 4  # one warm-up run, then 3 timed
    assert [t.samples_us for t in r.nodes] == [pytest.approx([us] * 3) for us in (1.0, 500.0, 20.0, 3.0)]
    assert r.critical_path == [a, slow, d]
    assert r.critical_path_us == pytest.approx(504.0)
    assert r.launch_samples_us == pytest.approx([510.0] * 3)
    assert launches == ["s"] * 4 + ["closed"]
    assert not drv.live  # every event destroyed


def test_profile_refuses_conditional_nodes_before_running(monkeypatch):
    from cudagraph.driver import api
    from cudagraph.executable import profile as prof

    drv = FakeClockDriver()
    monkeypatch.setattr(prof, "require_driver", lambda: drv)
    monkeypatch.setattr(api, "require_driver", lambda: drv)
    monkeypatch.setattr(prof, "ensure_context", lambda: "ctx")
    monkeypatch.setattr(prof, "stream_handle", lambda s: s)
    g = cg.Graph("loop")
    c = g.condition(default=1, name="more")
    g.while_(c, name="w").body.empty()
    with pytest.raises(
        cg.errors.DefinitionError, match=r"profile: while#0 'w' of Graph 'loop' runs only inside a graph"
    ):
        g.profile(None, repeats=2)
    assert drv.calls == []
