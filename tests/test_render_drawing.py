"""Pictures as files and in Jupyter: Graph.draw, _repr_mimebundle_, Executable.debug_dot (CPU, fakes for the driver)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import cudagraph as cg
from cudagraph.definition import drawing
from cudagraph.errors import CudaGraphError, DefinitionError, MissingDependencyError, OperandError


def small() -> cg.Graph:
    g = cg.Graph("small")
    a = g.empty(name="a")
    g.empty(after=a, name="b")
    return g


def needs_graphviz() -> None:
    pytest.importorskip("graphviz", reason="the graphviz Python package is not installed")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")


def test_draw_dot_and_mermaid_need_nothing(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz fails
    g = small()
    assert g.draw(tmp_path / "g.dot") == tmp_path / "g.dot"
    assert (tmp_path / "g.dot").read_text() == g.to_dot()
    g.draw(tmp_path / "g.mmd")
    assert (tmp_path / "g.mmd").read_text() == g.to_mermaid()
    g.draw(tmp_path / "picture", format="dot")
    assert (tmp_path / "picture").read_text() == g.to_dot()


def test_draw_svg_and_png(tmp_path):
    needs_graphviz()
    g = small()
    svg = g.draw(tmp_path / "g.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "<title>n0&#45;&gt;n1</title>" in svg
    png = g.draw(str(tmp_path / "g.png")).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_draw_without_the_graphviz_package_is_a_typed_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(MissingDependencyError, match=r"pip install graphviz.*to_dot\(\) gives the DOT text") as ei:
        small().draw(tmp_path / "g.svg")
    assert isinstance(ei.value, CudaGraphError) and isinstance(ei.value, ImportError)
    assert not (tmp_path / "g.svg").exists()


def test_draw_without_the_graphviz_programs_is_a_typed_error(tmp_path, monkeypatch):
    pytest.importorskip("graphviz", reason="the graphviz Python package is not installed")
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on PATH
    with pytest.raises(MissingDependencyError, match=r"needs the Graphviz programs \(dot\) on PATH"):
        small().draw(tmp_path / "g.png")


def test_draw_unknown_format(tmp_path):
    with pytest.raises(DefinitionError, match=r"cannot tell the picture format of '.*g\.txt'"):
        small().draw(tmp_path / "g.txt")


@pytest.mark.parametrize(("path", "fmt", "message"), [
    (None, None, "draw: path must be a str or a path-like object, got NoneType"),
    (3, None, "draw: path must be a str or a path-like object, got int"),
    (b"g.dot", None, "draw: path must be a str or a path-like object, got bytes"),
    ("g.dot", 1, "draw: format must be a str, got int"),
])  # fmt: skip
def test_draw_refuses_what_is_not_a_path_or_a_format(tmp_path, monkeypatch, path, fmt, message):
    monkeypatch.chdir(tmp_path)  # (nothing may be written, here or anywhere)
    with pytest.raises(OperandError, match=re.escape(message)):
        small().draw(path, fmt)
    assert list(tmp_path.iterdir()) == []


def test_repr_mimebundle_svg():
    needs_graphviz()
    bundle = small()._repr_mimebundle_()
    assert set(bundle) == {"image/svg+xml", "text/plain"}
    assert "<svg" in bundle["image/svg+xml"]
    assert bundle["text/plain"] == "<Graph 'small': 2 nodes, 1 edges>"


def test_repr_mimebundle_without_graphviz_is_text(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    bundle = small()._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    assert bundle["text/plain"].startswith("<Graph 'small': 2 nodes, 1 edges>\n(drawing a picture as svg needs")


def test_repr_mimebundle_of_a_large_graph_is_text(monkeypatch):
    monkeypatch.setattr(drawing, "REPR_MAX_NODES", 3)
    g = small()
    body = cg.Graph("body")
    body.empty()
    body.empty()
    g.child(body)
    assert g._repr_mimebundle_() == {
        "text/plain": "<Graph 'small': 3 nodes, 1 edges>\n(5 nodes: too many to draw here; use draw('file.svg'))"
    }


def _fake_executable(monkeypatch, calls):
    from cudagraph.driver import api
    from cudagraph.executable import executable as mod

    class Flags:
        CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE = 1

    def print_dot(handle, path, flags):
        calls.append((handle, path, flags))
        Path(path.decode()).write_text("digraph driver {}\n")
        return (0,)

    fake = SimpleNamespace(CUgraphDebugDot_flags=Flags, cuGraphDebugDotPrint=print_dot)
    monkeypatch.setattr(mod, "require_driver", lambda: fake)
    monkeypatch.setattr(api, "require_driver", lambda: fake)
    exe = object.__new__(mod.Executable)
    exe.graph = small()
    exe._exec = "exec"
    exe._lowered = SimpleNamespace(handle="cugraph", nodes=exe.graph.nodes)
    return exe


def test_executable_debug_dot_calls_the_driver(tmp_path, monkeypatch):
    calls: list = []
    exe = _fake_executable(monkeypatch, calls)
    out = exe.debug_dot(tmp_path / "driver.dot")
    assert out == tmp_path / "driver.dot"
    assert calls == [("cugraph", str(tmp_path / "driver.dot").encode(), 1)]
    assert out.read_text() == "digraph driver {}\n"
    exe.debug_dot(tmp_path / "brief.dot", verbose=False)
    assert calls[-1][2] == 0
    exe._exec = None
    with pytest.raises(cg.errors.ExecutableClosedError, match="the executable of Graph 'small' is closed"):
        exe.debug_dot(tmp_path / "closed.dot")
    assert len(calls) == 2


def test_executable_repr_mimebundle_draws_its_definition(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    exe = _fake_executable(monkeypatch, [])
    bundle = exe._repr_mimebundle_()
    assert bundle["text/plain"].startswith("<Executable of Graph 'small': 2 nodes, open>\n(drawing a picture")
    exe._exec = None


def test_debug_dot_refuses_a_path_that_is_not_one_before_it_reads_the_executable():
    # (an int would be opened as a file descriptor: the driver's picture written over stdout, then closed)
    with pytest.raises(OperandError, match=re.escape("debug_dot: path must be a str or a path-like object, got int")):
        cg.Executable.debug_dot(None, 1)  # type: ignore[arg-type]
