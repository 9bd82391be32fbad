"""The seam through which the definition layer reaches the layers above it."""

from __future__ import annotations

import sys

import pytest

import cudagraph as cg
from cudagraph.definition import seams
from cudagraph.definition.seams import Seam
from cudagraph.errors import UnwiredSeamError


def test_an_unwired_seam_raises_a_cudagraph_error():
    hook = Seam("nothing", "a hook nobody wired")
    assert hook.target is None
    with pytest.raises(UnwiredSeamError, match="'nothing' is not wired") as info:
        hook()
    assert isinstance(info.value, cg.CudaGraphError)
    assert "unwired" in repr(hook)


def test_a_wired_seam_imports_its_module_on_first_use_and_reads_the_attribute_each_call(monkeypatch):
    hook = Seam("sqrt", "square roots")
    hook.wire("math", "sqrt")
    assert hook.target == "math:sqrt"
    assert hook(9.0) == 3.0
    import math

    monkeypatch.setattr(math, "sqrt", lambda x: -1.0)
    assert hook(9.0) == -1.0
    hook.unwire()
    with pytest.raises(UnwiredSeamError):
        hook(9.0)


def test_the_root_package_wires_every_seam_by_module_name():
    assert seams.instantiate.target == "cudagraph.executable.executable:instantiate"
    assert seams.run.target == "cudagraph.materialize.eager:run"
    assert seams.lift.target == "cudagraph.materialize.lift:lift"
    assert seams.capture_region.target == "cudagraph.materialize.capture_region:CaptureRegion"
    assert seams.capture_function.target == "cudagraph.materialize.capture_region:capture_function"


def test_graph_methods_go_through_the_seams(monkeypatch):
    calls = []
    for name in ("instantiate", "run", "lift", "capture_region", "capture_function"):
        hook = Seam(name, "test")
        module = type(sys)("fake_upper_" + name)
        setattr(module, name, lambda *a, _n=name, **k: calls.append((_n, a, k)) or _n)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        hook.wire(module.__name__, name)
        monkeypatch.setattr(seams, name, hook)
    g = cg.Graph("g")
    assert g.instantiate(backend="capture") == "instantiate"
    assert calls[-1][0] == "instantiate" and calls[-1][1] == (g,) and calls[-1][2]["backend"] == "capture"
    assert g.run(None, x=1) is None and calls[-1] == ("run", (g, None, {"x": 1}), {})
    assert cg.Graph.from_cuda_graph(7, "n") == "lift" and calls[-1] == ("lift", (7, "n"), {})
    assert g.capture(name="c") == "capture_region" and calls[-1] == ("capture_region", (g, None, "c", None), {})
    fn = print
    assert cg.Graph.capture(fn) == "capture_function" and calls[-1] == ("capture_function", (fn, None, "captured"), {})


def test_unwired_seams_make_graph_methods_raise(monkeypatch):
    monkeypatch.setattr(seams, "instantiate", Seam("instantiate", "test"))
    with pytest.raises(UnwiredSeamError, match="instantiate"):
        cg.Graph("g").instantiate()
