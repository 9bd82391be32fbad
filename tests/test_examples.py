"""The programs in examples/ run as scripts: on a machine without a GPU each says so in one sentence
and exits 0 with nothing on standard error; on a GPU machine each checks its results against numpy
and prints its success line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import _probe

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

#: script -> the line it prints when every check passed (its quick options for the GPU run).
SUCCESS = {
    "dag_pipeline.py": ("dag_pipeline: results match numpy", ["--batches", "3"]),
    "training_step.py": ("training_step: results match numpy", ["--steps", "12"]),
    "lifted_torch.py": ("lifted_torch: results match numpy", ["--batches", "3"]),
    "graph_memory.py": ("graph_memory: results match numpy", ["--launches", "20"]),
    "jacobi_while.py": ("solution matches numpy", ["-n", "32"]),
}
#: the examples that explain themselves on a machine without a GPU (every one).
CPU_AWARE = list(SUCCESS)


def _run(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_example_is_tested() -> None:
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(SUCCESS)


@pytest.mark.parametrize("name", CPU_AWARE)
def test_without_a_gpu_the_example_says_so_and_exits_0(name: str) -> None:
    if _probe() is None:
        pytest.skip("a GPU is present: the example runs (see the gpu test)")
    proc = _run(name)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    assert re.fullmatch(
        rf"examples/{re.escape(name)} needs an NVIDIA GPU and driver; none is usable here \(\w+\)\.", lines[0]
    ), lines[0]


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(SUCCESS))
def test_on_a_gpu_the_example_checks_its_results(name: str, device: Any) -> None:
    if name == "lifted_torch.py":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("torch without CUDA")
    line, args = SUCCESS[name]
    proc = _run(name, *args)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert line in proc.stdout.splitlines(), proc.stdout
    assert "DIFFER" not in proc.stdout
