"""bench/construction.py on the CPU: its options, the user-style shapes, tables and verdicts (no GPU)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import cudagraph as cg

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import _user_style as us  # noqa: E402
import construction  # noqa: E402


class CUkernel:  # the definition layer recognises kernels by type name
    pass


KERNELS = (CUkernel(), CUkernel(), CUkernel())


def test_options_default_to_the_user_style_table():
    o = construction.parse_args([])
    assert (o.mode, o.quick, o.big, o.repeats, o.vary_args, o.json) == ("user", False, False, None, False, None)
    o = construction.parse_args(["--mode", "all", "--quick", "--big", "--json", "x.json"])
    assert (o.mode, o.quick, o.big, o.json) == ("all", True, True, Path("x.json"))
    with pytest.raises(SystemExit):
        construction.parse_args(["--mode", "fast"])
    assert construction.scaling_sizes(False) == (1000, 10000)
    assert construction.scaling_sizes(True) == (1000, 10000, 100000)


def test_the_user_style_chain_has_fresh_arguments_three_kernels_and_some_second_dependencies():
    g = us.define_user(cg, KERNELS, 0x10000, 32, "chain", 12, 1, 32)
    nodes = g.nodes
    assert len(nodes) == us.node_count("chain", 12) == 12
    assert [tuple(p.index for p in n.predecessors) for n in nodes] == us.chain_deps(12)
    assert us.chain_deps(8) == [(), (0,), (1,), (2, 1), (3,), (4,), (5,), (6, 5)]
    assert [KERNELS.index(n.kernel) for n in nodes] == [i % 3 for i in range(12)]  # type: ignore[attr-defined]
    args = [n.args for n in nodes]  # type: ignore[attr-defined]
    assert len({id(a) for a in args}) == 12 and len({id(a[1]) for a in args}) == 12
    assert all(a[0] == 0x10000 and type(a[1]) is np.float32 and a[2] == np.int32(32) for a in args)


def test_the_user_style_dag_is_16_chains_of_64_joined_at_both_ends():
    g = us.define_user(cg, KERNELS, 0x10000, 32, "dag", 0, 1, 32)
    nodes = g.nodes
    assert len(nodes) == us.node_count("dag", 0) == 16 * 64 + 2
    root, sink = nodes[0], nodes[-1]
    assert root.predecessors == () and len(root.successors) == 16
    assert len(sink.predecessors) == 16 and sink.successors == ()
    heads = set(root.successors)
    assert all(len(n.predecessors) == 1 for n in nodes[1:-1])
    assert sum(1 for n in nodes[1:-1] if n.predecessors[0] is root) == 16 and heads <= set(nodes[1:-1])
    assert {KERNELS.index(n.kernel) for n in nodes} == {0, 1, 2}  # type: ignore[attr-defined]
    g.validate()


class FakeBuilder:
    """Records what the capture of a user-style shape asks of a cuda.core GraphBuilder."""

    log: ClassVar[list[Any]] = []

    def __init__(self, name: str, forked: bool = False) -> None:
        self.name = name
        self.forked = forked

    def split(self, count: int) -> tuple[FakeBuilder, ...]:
        FakeBuilder.log.append(("split", self.name, count))
        return (self, *(FakeBuilder(f"{self.name}.{i}", True) for i in range(1, count)))

    @staticmethod
    def join(*builders: FakeBuilder) -> FakeBuilder:
        FakeBuilder.log.append(("join", tuple(b.name for b in builders)))
        return next(b for b in builders if not b.forked)


def test_the_capture_of_the_dag_splits_into_16_and_joins_them():
    launches: list[tuple[str, int]] = []

    def launch(gb: FakeBuilder, cfg: Any, kernel: Any, *args: Any) -> None:
        assert cfg == "cfg" and args[0] == 0x10000 and type(args[1]) is np.float32 and args[2] == np.int32(32)
        launches.append((gb.name, KERNELS.index(kernel)))

    FakeBuilder.log = []
    gb = FakeBuilder("gb")
    assert us.capture_user(gb, launch, "cfg", KERNELS, 0x10000, 32, "dag", 0) is gb
    assert FakeBuilder.log == [("split", "gb", 16), ("join", ("gb", *(f"gb.{i}" for i in range(1, 16))))]
    assert len(launches) == 16 * 64 + 2 and launches[0] == ("gb", 0) and launches[-1] == ("gb", 1)
    assert sum(1 for name, _ in launches if name == "gb.7") == 64
    launches.clear()
    FakeBuilder.log = []
    assert us.capture_user(gb, launch, "cfg", KERNELS, 0x10000, 32, "chain", 5) is gb
    assert launches == [("gb", i % 3) for i in range(5)] and FakeBuilder.log == []


def _row(shape: str, **us_per_node: float) -> us.UserRow:
    row = us.UserRow(shape, 1000, 1000 if shape == "chain" else 1026)
    for key, value in us_per_node.items():
        row.add(key, value * row.nodes * 1e-6)
    return row


def test_the_user_table_and_its_verdicts():
    chain = _row(
        "chain", define=1.0, user_code=0.7, lower=0.4, define_lower=1.4, instantiate=1.8, end_to_end=2.0, own=0.05
    )
    chain.add("capture", 2.4 * 1000 * 1e-6)
    dag = _row("dag", define_lower=1.6, end_to_end=2.0, capture=3.0, own=0.2, floor=0.3, floor_inst=1.1)
    failed = us.UserRow("dag", 1024, 1026, status="failed")
    text = us.user_table([chain, dag, failed])
    lines = text.splitlines()
    assert lines[0].startswith(
        "| shape | N | nodes | define µs/node | of which the user's code µs/node | lower µs/node | "
        "define+lower µs/node |"
    )
    assert lines[0].endswith("| C floor: cuGraphAddNode loop µs/node | C floor: cuGraphInstantiate µs/node |")
    assert lines[2] == (
        "| chain | 1000 | 1000 | 1.000 | 0.700 | 0.400 | 1.400 | 1.800 | 2.000 | 0.050 | 2.400 | n/a | n/a |"
    )
    assert lines[3] == "| dag | 1000 | 1026 | n/a | n/a | n/a | 1.600 | n/a | 2.000 | 0.200 | 3.000 | 0.300 | 1.100 |"
    assert lines[4] == "| dag | 1024 | 1026 | " + " | ".join(["failed"] * 10) + " |"
    verdicts = [(r["name"], r["where"], round(r["value"], 3), r["pass"]) for r in us.user_ratios([chain, dag])]
    assert verdicts == [
        ("define+lower, user-style (µs/node)", "chain, 1000 nodes", 1.4, True),
        ("end to end / cuda.core capture", "chain, 1000 nodes", 0.833, True),
        ("own work inside g.instantiate() (µs/node)", "chain, 1000 nodes", 0.05, True),
        ("define+lower, user-style (µs/node)", "dag, 1026 nodes", 1.6, False),
        ("end to end / cuda.core capture", "dag, 1026 nodes", 0.667, False),
        ("own work inside g.instantiate() (µs/node)", "dag, 1026 nodes", 0.2, False),
    ]
    line = us.ratio_line(us.user_ratios([dag])[1])
    assert line == "- end to end / cuda.core capture [dag, 1026 nodes]: 0.667 x (target <= 0.6x) MISS"
    dag.add("user_code", 0.5 * 1026 * 1e-6)
    dag.add("instantiate", 1.0 * 1026 * 1e-6)
    assert us.reachable_lines([chain, dag]) == [  # the chain has no floor column: no line
        "- lowest reachable end to end / cuda.core capture [dag, 1026 nodes]: 0.600 x (the user's code 0.500 + C "
        "cuGraphAddNode loop 0.300 + cuGraphInstantiate 1.000 = 1.800 µs/node, against 3.000; target 0.6x)"
    ]


def test_the_scaling_table_and_its_verdicts():
    per_node = {
        1000: {"define": 1.0, "validate": 0.1, "lower": 0.8, "signature": 0.02, "define, collector on": 1.1},
        100000: {"define": 1.2, "validate": 0.2, "lower": 0.9, "signature": 0.02, "define, collector on": 3.3},
    }
    got = [(r["name"], round(r["value"], 2), r["pass"]) for r in us.scaling_ratios(per_node)]
    assert got == [
        ("define: per-node cost N=100000 / N=1000", 1.2, True),
        ("validate: per-node cost N=100000 / N=1000", 2.0, False),
        ("lower: per-node cost N=100000 / N=1000", 1.12, True),
        ("signature: per-node cost N=100000 / N=1000", 1.0, True),
        ("define, collector on: per-node cost N=100000 / N=1000", 3.0, False),
    ]
    assert us.scaling_ratios({1000: per_node[1000]}) == []
    assert us.scaling_table(per_node).splitlines() == [
        "| N | define µs/node | validate µs/node | lower µs/node | signature µs/node | define, collector on µs/node |",
        "|---:|---:|---:|---:|---:|---:|",
        "| 1000 | 1.000 | 0.100 | 0.800 | 0.020 | 1.100 |",
        "| 100000 | 1.200 | 0.200 | 0.900 | 0.020 | 3.300 |",
    ]


def test_memory_lines():
    lines = us.memory_lines(420.4, 210.0)
    assert lines[0].startswith("- cudagraph definition, user-style kernel node: 420 B")
    assert lines[1].startswith("- cuda.core GraphDefinition kernel node: 210 B")
    assert lines[2] == "- ratio cudagraph / cuda.core: 2.00x"
    assert us.memory_lines(None, 210.0)[0].startswith("- cudagraph definition, user-style kernel node: n/a")
    assert len(us.memory_lines(420.0, None)) == 2


def test_rss_lines_name_each_build_and_the_ratios():
    lines = us.rss_lines({"cudagraph": 470.2, "lowered": 900.0, "cuda.core": 1800.0}, n=1000)
    assert lines[0].startswith("- resident memory per kernel node (growth of the process's resident set while a ")
    assert "chain of 1000 nodes" in lines[0]
    assert lines[1:4] == [
        "  - cudagraph definition: 470 B",
        "  - cudagraph definition + its driver graph (lowered): 900 B",
        "  - cuda.core GraphDefinition (Python objects + the driver's nodes): 1800 B",
    ]
    assert lines[4] == "  - ratio cudagraph (definition + driver graph) / cuda.core GraphDefinition: 0.50x"
    assert lines[5] == "  - ratio cudagraph definition / cuda.core GraphDefinition: 0.26x"
    assert us.rss_lines({"cudagraph": None}) == [us.rss_lines({})[0], "  - cudagraph definition: n/a"]


def test_the_resident_memory_script_measures_a_definition_in_a_fresh_process():
    pytest.importorskip("cuda.bindings.driver")
    if not Path("/proc/self/statm").exists():
        pytest.skip("no /proc/self/statm: resident memory is not measured on this system")
    rss = us.measure_rss(n=20000, fake=True)
    assert set(rss) == {"cudagraph"}
    # A kernel node with its argument tuple, two scalars and its edges: a few hundred bytes (tracemalloc
    # counts about 430 of them), never nothing and never kilobytes.
    assert 200 < rss["cudagraph"] < 2000  # type: ignore[operator]


def test_the_resident_memory_script_refuses_a_bad_mode():
    import subprocess

    script = BENCH / "_memory_rss.py"
    done = subprocess.run([sys.executable, str(script), "nothing", "10"], capture_output=True, text=True)
    assert done.returncode == 2 and "usage: python bench/_memory_rss.py {cudagraph,lowered,cuda.core} N" in done.stderr
    done = subprocess.run([sys.executable, str(script), "lowered", "10", "--fake"], capture_output=True, text=True)
    assert done.returncode == 1 and "--fake measures only 'cudagraph', not 'lowered'" in done.stderr


def test_main_without_a_gpu_says_so(capsys):
    assert construction.main(["--quick"]) == 2
    assert "cannot set up the GPU" in capsys.readouterr().err


def test_the_cpu_mode_measures_cudagraph_over_a_driver_that_does_nothing(capsys, tmp_path):
    pytest.importorskip("cuda.bindings.driver")
    """``--cpu``: the user-style table (no capture column), the scaling table and the memory, with no GPU."""
    import json

    clock, summary = us.perf_counter, us.summary
    try:
        assert construction.main(["--cpu", "--quick", "--repeats", "1", "--json", str(tmp_path / "cpu.json")]) == 0
    finally:
        us.use_clock(clock, summary)
    out = capsys.readouterr().out
    assert "# cudagraph construction on the CPU (fake driver)" in out
    doc = json.loads((tmp_path / "cpu.json").read_text())["user_style"]
    rows = {(r["shape"], r["n"]): r for r in doc["rows"]}
    assert set(rows) == {("chain", 1000), ("dag", 1024)} and all(r["status"] == "ok" for r in rows.values())
    for r in rows.values():
        samples = r["us_per_node"]
        assert {"define", "lower", "define_lower", "instantiate", "end_to_end", "own"} <= set(samples)
        assert "capture" not in samples and "floor" not in samples
        assert all(len(v) == 1 and v[0] > 0 for k, v in samples.items() if k != "own")
    assert set(doc["scaling_us_per_node"]) == {"1000", "10000"}
    assert all(set(v) == set(us.PHASES) for v in doc["scaling_us_per_node"].values())
    assert 100 < doc["memory_bytes_per_node"]["cudagraph"] < 1000
    assert doc["memory_bytes_per_node"]["cuda.core GraphDefinition"] is None
    if Path("/proc/self/statm").exists():
        assert 200 < doc["resident_bytes_per_node"]["cudagraph"] < 2000
        assert "  - cudagraph definition: " in out
    assert "| chain | 1000 | 1000 |" in out and "| dag | 1024 | 1026 |" in out


def test_busy_python_thread_runs_python_beside_the_block_and_stops_after_it():
    import threading
    import time

    from _common import busy_python_thread

    before = threading.active_count()
    with busy_python_thread():
        assert threading.active_count() == before + 1
        time.sleep(0.01)
    assert threading.active_count() == before
