"""The public surface of the materializers that needs no GPU: argument checks and wiring."""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.errors import ForeignNodeError, OperandError
from cudagraph.materialize.capture_region import CaptureRegion


def test_backend_name_is_checked_before_the_driver():
    g = cg.Graph("b")
    g.empty()
    with pytest.raises(OperandError, match="backend must be 'explicit' or 'capture', got 'graphs'"):
        g.instantiate(backend="graphs")
    with pytest.raises(OperandError, match="backend must be 'explicit' or 'capture', got ndarray"):
        g.instantiate(backend=np.array(["explicit", "capture"]))


def test_capture_on_the_class_is_a_function_and_on_a_graph_a_region():
    assert callable(cg.Graph.capture)
    g = cg.Graph("g")
    a = g.empty(name="a")
    region = g.capture(after=a, name="lib")
    assert isinstance(region, CaptureRegion)
    assert region.node is None and region.body is None
    assert region.depends() == [a]
    assert "CaptureRegion 'lib'" in repr(region)
    assert len(g) == 1  # nothing is added before the region is recorded


def test_capture_region_rejects_foreign_dependencies():
    g, other = cg.Graph("g"), cg.Graph("other")
    o = other.empty(name="o")
    with pytest.raises(ForeignNodeError, match=r"capture region 'lib'.*Graph 'other'"):
        g.capture(after=o, name="lib")


def test_capture_region_again_needs_a_recording():
    g = cg.Graph("g")
    with pytest.raises(OperandError, match="has not been recorded yet"):
        g.capture(name="r").again()


def test_lift_rejects_objects_without_a_graph():
    pytest.importorskip("cuda.bindings")
    from cudagraph.materialize.lift import cuda_graph_handle

    with pytest.raises(OperandError, match="cannot find a CUgraph in object"):
        cuda_graph_handle(object())
    from cuda.bindings import driver

    assert int(cuda_graph_handle(0x1234)) == 0x1234
    h = driver.CUgraph(0x5678)
    assert cuda_graph_handle(h) is h


def test_lift_is_exported():
    assert cg.lift.__name__ == "lift"
    assert cg.Graph.from_cuda_graph.__doc__ and "typed definition" in cg.Graph.from_cuda_graph.__doc__


def test_capture_pauses_the_garbage_collector_and_restores_it(monkeypatch):
    """A collection during capture may free device memory (cuMemFreeAsync) and invalidate the capture."""
    import gc
    import types

    from cudagraph.driver import api
    from cudagraph.materialize import capture_region, lift

    fake = types.SimpleNamespace(cuGraphDestroy=lambda g: None)
    monkeypatch.setattr(capture_region, "require_driver", lambda: fake)
    monkeypatch.setattr(api, "require_driver", lambda: fake)
    monkeypatch.setattr(capture_region, "ensure_context", lambda: None)
    monkeypatch.setattr(capture_region, "begin_capture", lambda h, mode="thread_local": None)
    monkeypatch.setattr(capture_region, "_end", lambda h, what: "graph")
    monkeypatch.setattr(capture_region, "abandon_capture", lambda h: None)
    monkeypatch.setattr(lift, "lift", lambda graph, name: cg.Graph(name))
    seen: list[bool] = []
    assert gc.isenabled()
    g = capture_region.capture_function(lambda s: seen.append(gc.isenabled()), stream=0, name="c")
    assert seen == [False] and gc.isenabled() and g.name == "c"

    def fails(s):
        raise ValueError("in the captured function")

    with pytest.raises(ValueError, match="in the captured function"):
        capture_region.capture_function(fails, stream=0, name="c")
    assert gc.isenabled()
    gc.disable()
    try:
        capture_region.capture_function(lambda s: None, stream=0, name="c")
        assert not gc.isenabled()  # a collector the caller stopped stays stopped
    finally:
        gc.enable()
