"""The benchmarks that run under the fake ``libcuda.so.1`` on the CPU (no GPU): bench/lift_cpu.py records the
graphs lowered under it and lifts them back through the driver's read entry points; bench/cache_cpu.py asks an
``ExecutableCache`` for rebuilt definitions."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings.driver")
pytest.importorskip("cuda.core")

ROOT = Path(__file__).resolve().parents[1]
#: Whether the compiled module is built (the scripts load it unless CUDAGRAPH_NO_C_ENTRY is set for them).
BUILT = importlib.util.find_spec("cudagraph.driver._native") is not None


def run_script(name: str, compiled: bool, *args: str) -> subprocess.CompletedProcess[str]:
    """Run bench/``name`` with ``args`` (it builds the fake driver and runs again under it); it must succeed."""
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler to build the fake driver library")
    import cudagraph

    env = {k: v for k, v in os.environ.items() if k not in ("CUDAGRAPH_FAKE_DRIVER", "CUDAGRAPH_NO_C_ENTRY")}
    env["PYTHONPATH"] = str(Path(cudagraph.__file__).resolve().parents[1])  # the cudagraph these tests import
    if not compiled:
        env["CUDAGRAPH_NO_C_ENTRY"] = "1"
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / name), *args], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.mark.parametrize("compiled", [True, False])
def test_the_lift_script_lifts_what_it_lowered_and_prints_the_ratio(compiled):
    r = run_script("lift_cpu.py", compiled, "--nodes", "60", "--repeats", "1")  # (it checks the lifted counts)
    assert f"compiled module: {compiled and BUILT}; fake driver (recorded graphs)" in r.stdout
    cell = r"([\d.]+) \(([\d.]+)\)"
    row = re.search(rf"^\| 60 \| {cell} \| {cell} \| {cell} \| ([\d.]+)x \|$", r.stdout, re.M)
    assert row is not None, r.stdout
    define, lift, shared, ratio = float(row[1]), float(row[3]), float(row[5]), float(row[7])
    assert define > 0 and lift > 0 and shared > 0 and ratio == pytest.approx(lift / shared, abs=0.01)
    assert "lift / explicit construction per node, largest:" in r.stdout


@pytest.mark.parametrize("compiled", [True, False])
def test_the_cache_script_updates_the_nodes_that_change(compiled):
    r = run_script("cache_cpu.py", compiled, "--nodes", "300", "--steps", "4")
    assert f"compiled module: {compiled and BUILT}; fake driver" in r.stdout
    for row in ("| Buffers |", "| a Param |"):
        assert row in r.stdout, r.stdout
    # nodes 0, 100 and 200 change Buffer every step: 3 driver updates a step
    for label in ("Buffers", "a Param"):
        assert f"driver updates made by the cache ({label}): 12 in 4 steps" in r.stdout, r.stdout
