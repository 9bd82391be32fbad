"""The package's structure: layers imported only downwards, no import cycles, small modules."""

from __future__ import annotations

import pytest

import import_graph as ig

#: No Python module or C source of the package is longer than this.
MAX_LINES = 700


def test_no_import_cycles():
    """No two modules of the package import each other, directly or through others."""
    assert ig.cycles(ig.import_graph()) == []


def test_layers_import_only_downwards():
    """errors <- definition <- driver <- ops <- materialize <- executable <- frontends."""
    assert ig.upward_imports(ig.import_graph()) == []


def test_every_module_belongs_to_a_layer():
    """Apart from the package root, its command line, the public path of cudagraph.compat and the error leaf,
    every module sits in a layer package."""
    loose = [m for m in ig.module_names() if ig.layer_of(m) is None]
    assert sorted(loose) == ["cudagraph", "cudagraph.__main__", "cudagraph.compat"]


def test_import_graph_sees_function_local_and_skips_type_checking(tmp_path, monkeypatch):
    """The checks above can fail: a function-local upward import and a cycle are found, TYPE_CHECKING ones are not."""
    pkg = tmp_path / "cudagraph"
    for sub in ("definition", "executable"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "definition" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..executable import c\n"
        "def f():\n    from ..executable import b\n"
    )
    (pkg / "executable" / "b.py").write_text("from ..definition import a\n")
    (pkg / "executable" / "c.py").write_text("")
    monkeypatch.setattr(ig, "PACKAGE_DIR", pkg)
    g = ig.import_graph()
    assert g["cudagraph.definition.a"] == {"cudagraph.executable.b", "cudagraph.executable"}
    assert ig.upward_imports(g) == [
        ("cudagraph.definition.a", "cudagraph.executable"),
        ("cudagraph.definition.a", "cudagraph.executable.b"),
    ]
    assert ig.cycles(g) == [["cudagraph.definition.a", "cudagraph.executable.b"]]


@pytest.mark.parametrize("suffix", [".py", ".c", ".h"])
def test_no_module_over_the_line_limit(suffix):
    """One idea per module: none is longer than MAX_LINES lines."""
    long = {
        str(p.relative_to(ig.PACKAGE_DIR)): n
        for p in ig.PACKAGE_DIR.rglob(f"*{suffix}")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
