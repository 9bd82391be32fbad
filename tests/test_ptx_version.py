"""The shipped PTX (the fallback where NVRTC is missing) loads on CUDA 12.0+ drivers: PTX ISA 8.0, sm_75."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import cudagraph

KERNELS = Path(cudagraph.__file__).parent / "_kernels"
PTX = sorted(KERNELS.glob("*.ptx"))


def header(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^\.(version|target|address_size) (\S+)$", path.read_text(), re.M))


def test_every_kernel_source_ships_its_ptx():
    assert {p.stem for p in PTX} == {p.stem for p in KERNELS.glob("*.cu")} == {"demo", "predicates"}


@pytest.mark.parametrize("path", PTX, ids=lambda p: p.name)
def test_ptx_declares_an_isa_a_cuda_12_driver_can_jit(path):
    # PTX ISA 8.0 is CUDA 12.0's; a driver JITs PTX up to its own CUDA version's ISA.
    assert header(path) == {"version": "8.0", "target": "sm_75", "address_size": "64"}


def _ptxas() -> str | None:
    found = shutil.which("ptxas")
    if found is None:
        candidates = sorted(glob.glob("/usr/local/cuda*/bin/ptxas"), reverse=True)
        found = os.environ.get("PTXAS") or (candidates[0] if candidates else None)
    return found


@pytest.mark.skipif(_ptxas() is None, reason="no ptxas (CUDA toolkit) found")
@pytest.mark.parametrize("path", PTX, ids=lambda p: p.name)
def test_ptxas_assembles_the_ptx_at_its_declared_isa(path, tmp_path):
    # ptxas refuses an instruction or target newer than the declared .version.
    out = subprocess.run(
        [_ptxas(), "-arch=sm_75", "-o", str(tmp_path / "k.cubin"), str(path)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "k.cubin").stat().st_size > 0
