"""The driver gate: one module, ``cudagraph.driver.calls``, imports ``cuda.bindings`` (every other module asks it
for the driver); ``cuda.core`` is imported in the driver layer and the interop frontends only.

``lint-imports`` (pyproject.toml) checks the layers below the frontends at package granularity (it sees
``cuda`` as one external package); this test reads every module's imports, lazy ones included, by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "cudagraph"


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``path``, those inside functions included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module)]
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_scan_sees_the_gate() -> None:
    gate = PACKAGE / "driver" / "calls.py"
    assert "cuda.bindings" in {mod for _, mod in _imports(gate)}  # a guarded import is read as one


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_gate_imports_cuda_bindings(path: Path) -> None:
    layer = path.relative_to(PACKAGE).parts[0]
    if path == PACKAGE / "driver" / "calls.py":
        return
    bad = [(line, mod) for line, mod in _imports(path) if mod == "cuda.bindings" or mod.startswith("cuda.bindings.")]
    assert bad == [], f"{path.relative_to(PACKAGE)} imports cuda.bindings; ask cudagraph.driver.calls for the driver"
    if layer == "driver":
        return
    if layer != "frontends":
        core = [(line, mod) for line, mod in _imports(path) if mod == "cuda" or mod.startswith("cuda.")]
        assert core == [], f"{path.relative_to(PACKAGE)} imports {core}; go through cudagraph.driver"
