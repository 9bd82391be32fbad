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
    "data_parallel.py": ("data_parallel: results match numpy", ["--steps", "100"]),
    "auto_edges.py": ("auto_edges: results match numpy", ["--launches", "2"]),
}
#: the examples that need PyTorch with CUDA on the GPU machine.
NEEDS_TORCH = {"lifted_torch.py", "data_parallel.py"}
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
    if name in NEEDS_TORCH:
        _need_torch()
    line, args = SUCCESS[name]
    proc = _run(name, *args)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert line in proc.stdout.splitlines(), proc.stdout
    assert "DIFFER" not in proc.stdout


def _need_torch() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("comm", ["torch", "cupy"])
def test_data_parallel_records_the_all_reduce_in_a_region_node(comm: str, device: Any) -> None:
    """The data-parallel step through either communicator: one process per GPU, the all-reduce a child-graph
    node holding what NCCL recorded (nothing with one process, NCCL kernels with several), 100 steps checked
    bit for bit against numpy by every process."""
    torch = _need_torch()
    if comm == "cupy":
        nccl = pytest.importorskip("cupy.cuda.nccl")
        if not nccl.available:
            pytest.skip("CuPy without NCCL")
    proc = _run("data_parallel.py", "--comm", comm, "--steps", "100", "-n", "1000")
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    world = torch.cuda.device_count()
    name = "torch.distributed" if comm == "torch" else "CuPy NCCL"
    head = f"data_parallel: {world} process(es), all-reduce through {name}; the region NCCL recorded holds "
    region = [ln[len(head) :] for ln in lines if ln.startswith(head)]
    assert len(region) == 1, proc.stdout
    if world == 1:  # one rank: nothing to sum, nothing recorded
        assert region[0] == "0 node(s)"
    else:
        assert "kernel" in region[0], region[0]
    steps = [ln for ln in lines if ln.startswith("data_parallel: 100 steps of 3 nodes, n=1000;")]
    assert len(steps) == 1, proc.stdout
    if world <= 2:  # a sum of one or two gradients is exact: bit for bit
        assert "max |w - numpy| = 0 on rank 0" in steps[0], steps[0]
    assert lines[-1] == "data_parallel: results match numpy"
