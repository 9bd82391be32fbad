"""bench/rebind_lifted_cpu.py on the CPU: its lifted-like definition and the driver calls it counts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings.driver")

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import rebind_lifted_cpu as bench  # noqa: E402


def test_the_definition_is_shaped_like_the_lifted_transformer_block():
    g = bench.lifted_like()
    assert [n.kind for n in g.nodes] == ["memcpy"] + ["kernel"] * 45 + ["memcpy"]
    report = g.parametrize(x=bench.CaiArray(bench.X1), out=bench.CaiArray(bench.OUT1))
    assert {(r.node.index, r.where, r.param, r.offset) for r in report} == {
        (0, "src", "x", 256),
        (4, "args[1]@8", "x", 0),
        (10, "args[0]", "x", 0),
        (18, "args[2]", "x", 4096),
        (25, "args[1]", "out", 16),
        (25, "args[1]@8", "x", 256),
        (32, "args[0]@256", "out", 1024),
        (41, "args[0]", "x", 0),
        (41, "args[2]", "out", 0),
        (46, "dst", "out", 0),
    }


def test_a_rebinding_launch_makes_one_driver_call_per_user_and_none_for_the_same_memory(capsys):
    from cudagraph.driver.c_entry import NATIVE

    bench._node_set_addresses()
    fake = bench.FakeDriver()
    fake.install()
    try:
        bench.run(fake, steps=20, rounds=1, native=NATIVE is not None)
    finally:
        fake.uninstall()
    out = capsys.readouterr().out
    assert "47 nodes (45 kernels), 10 slots rewritten in 8 nodes (6 x, 4 out)" in out
    assert "driver calls per rebinding launch: 8 (same addresses again: 0)" in out
    assert "| exe.launch(s) |" in out and "g.parametrize(x=, out=):" in out


def test_the_breakdown_leaves_out_the_rest_where_the_compiled_bind_many_runs():
    import rebind_lifted as gpu_bench
    from cudagraph.driver.c_entry import NATIVE
    from cudagraph.executable.binding import Binding
    from cudagraph.executable.executable import Executable

    assert gpu_bench.compiled_bind_many(Executable) is (NATIVE is not None)
    assert gpu_bench.compiled_bind_many(Binding) is False  # the twin, a plain function
    row = gpu_bench.rest_row(True, 5.0, 6.0, 1.0)
    assert "| n/a |" in row and "-" not in row.split("|")[2]
    assert gpu_bench.rest_row(False, 5.0, 2.5, 1.0).split("|")[2].strip() == "1.50"
