"""bench/lift_cpu.py on the CPU: it builds the fake ``libcuda.so.1``, records the graphs lowered under it and
lifts them back through the driver's read entry points (no GPU)."""

from __future__ import annotations

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


@pytest.mark.parametrize("compiled", [True, False])
def test_the_script_lifts_what_it_lowered_and_prints_the_ratio(compiled):
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler to build the fake driver library")
    import cudagraph
    from cudagraph.driver.c_entry import NATIVE

    env = {k: v for k, v in os.environ.items() if k not in ("CUDAGRAPH_FAKE_DRIVER", "CUDAGRAPH_NO_C_ENTRY")}
    env["PYTHONPATH"] = str(Path(cudagraph.__file__).resolve().parents[1])  # the cudagraph these tests import
    if not compiled:
        env["CUDAGRAPH_NO_C_ENTRY"] = "1"
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "lift_cpu.py"), "--nodes", "60", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr  # (it checks the lifted node and edge counts itself)
    assert f"compiled module: {compiled and NATIVE is not None}; fake driver (recorded graphs)" in r.stdout
    row = re.search(r"^\| 60 \| ([\d.]+) \(([\d.]+)\) \| ([\d.]+) \(([\d.]+)\) \| ([\d.]+)x \|$", r.stdout, re.M)
    assert row is not None, r.stdout
    define, lift, ratio = float(row[1]), float(row[3]), float(row[5])
    assert define > 0 and lift > 0 and ratio == pytest.approx(lift / define, abs=0.01)
    assert "lift / explicit construction per node, largest:" in r.stdout
