"""The driver's version is checked once, at the first context asked for (no GPU: cuda.bindings' calls faked).

cudagraph builds graphs with calls that CUDA 12.3 drivers have (``cuGraphAddNode`` with
``CUgraphNodeParams``, ``cuStreamGetCaptureInfo_v3``); an older driver is refused with a typed error
naming both versions, before any of them is reached, instead of ``cuda.bindings``' own error for a
function its driver lacks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.driver import calls
from cudagraph.errors import DriverError, DriverUnavailableError, UnsupportedError

drv = pytest.importorskip("cuda.bindings.driver")


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A driver of the version put in ``state["version"]``, with a context current; counts the version asks."""
    state: dict[str, Any] = {"version": 13000, "asked": 0, "err": drv.CUresult.CUDA_SUCCESS}

    def get_version() -> tuple[Any, int]:
        state["asked"] += 1
        if isinstance(state["version"], Exception):
            raise state["version"]
        return state["err"], state["version"]

    monkeypatch.setattr(calls, "_held", lambda: None)
    monkeypatch.setattr(calls, "_driver_checked", False)
    monkeypatch.setattr(drv, "cuDriverGetVersion", get_version)
    monkeypatch.setattr(drv, "cuCtxGetCurrent", lambda: (drv.CUresult.CUDA_SUCCESS, drv.CUcontext(0x55)))
    return state


@pytest.mark.parametrize("version", [12030, 12080, 13000, 13020])
def test_a_driver_of_cuda_12_3_or_newer_is_asked_once(driver, version):
    driver["version"] = version
    assert int(calls.ensure_context()) == 0x55
    assert int(calls.ensure_context()) == 0x55
    assert driver["asked"] == 1
    assert calls.check_driver_version() == version


@pytest.mark.parametrize(("version", "shown"), [(12020, "12.2"), (12000, "12.0"), (11080, "11.8")])
def test_an_older_driver_is_refused_naming_both_versions_every_time(driver, version, shown):
    driver["version"] = version
    for _ in range(2):  # (not remembered as passed)
        with pytest.raises(UnsupportedError) as info:
            calls.ensure_context()
        msg = str(info.value)
        assert f"for CUDA {shown} (cuDriverGetVersion answered {version})" in msg
        assert "CUDA 12.3 or newer" in msg
        assert info.value.call == "cuDriverGetVersion"
    assert driver["asked"] == 2


def test_a_driver_library_that_cannot_load_is_unavailable(driver):
    driver["version"] = RuntimeError("libcuda.so.1: cannot open shared object file")
    with pytest.raises(DriverUnavailableError, match=r"needs an NVIDIA GPU and driver: libcuda\.so\.1") as info:
        calls.ensure_context()
    assert info.value.call == "cuDriverGetVersion"


def test_a_failing_version_call_is_a_driver_error(driver):
    driver["err"] = drv.CUresult.CUDA_ERROR_NOT_INITIALIZED
    with pytest.raises(DriverError, match="cuDriverGetVersion failed: CUDA_ERROR_NOT_INITIALIZED"):
        calls.ensure_context()


def test_explicit_construction_on_an_old_driver_is_refused_before_any_graph_is_made(driver, monkeypatch):
    made: list[Any] = []
    monkeypatch.setattr(drv, "cuGraphCreate", lambda flags: made.append(flags) or (0, drv.CUgraph(0x99)))
    driver["version"] = 12010
    g = cg.Graph("old")
    g.memset(0x1000, np.uint8(0), count=16, element_size=1)
    with pytest.raises(UnsupportedError, match=r"for CUDA 12\.1 "):
        g.instantiate()
    assert made == []
