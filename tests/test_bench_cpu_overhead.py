"""bench/cpu_overhead.py on the CPU: it builds a fake ``libcuda.so.1`` and runs under it (no GPU).

Under that library every compiled path that calls the driver by address is in place, as on a GPU: the
compiled ``Executable.launch`` (found through ``cuGraphLaunch``), ``Graph.run``'s batches (a chain longer
than one batch), context and graph creation from C. The script runs end to end and prints every table.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings.driver")
pytest.importorskip("cuda.core")

ROOT = Path(__file__).resolve().parents[1]


def test_the_script_runs_every_path_under_the_fake_driver():
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler to build the fake driver library")
    import cudagraph
    from cudagraph.driver.c_entry import NATIVE

    env = {k: v for k, v in os.environ.items() if k != "CUDAGRAPH_FAKE_DRIVER"}
    env["PYTHONPATH"] = str(Path(cudagraph.__file__).resolve().parents[1])  # the cudagraph these tests import
    args = ["--repeats", "1", "--launches", "200", "--chain", "70", "--nodes", "50"]
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "cpu_overhead.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    built = NATIVE is not None
    assert f"compiled module: {built}, compiled launcher: {built}, compiled launch: {built}" in out
    for row in (
        "cudagraph.launch (Buffer)",
        "cuda.core Graph.launch(s)",
        "exe.launch(s) ",
        "exe.launch(a new stream object)",
        "exe.launch(s, p=Buffer), 2 in turn",
        "rebinding launch (45 kernels, 4 rebound)",
        "x=, out=: fresh CAI arrays",
        "g.param x=: a fresh CAI array",
        "Graph.run ",
        "instantiate(backend='capture')",
        "instantiate(backend='explicit')",
    ):
        assert row in out, out
    torch_rows = (
        "x=, out=: two torch tensors in turn",
        "x=: one torch tensor in turn",
        "g.param x=: a torch tensor in turn",
    )
    for row in torch_rows if importlib.util.find_spec("torch") else ("torch is not importable",):
        assert row in out, out
    from cudagraph.definition.builders import COMPILED_OPS

    define = ("memset, int value", "memset, numpy float", "memcpy, Buffer to Buffer", "memcpy, from a numpy array")
    for row in define if COMPILED_OPS else ("no compiled builders",):
        assert row in out, out
