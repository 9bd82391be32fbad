"""The driver gate: one module, ``cudagraph.driver.calls``, imports ``cuda.bindings`` (every other module asks it
for the driver); ``cuda.core`` is imported in the driver layer and the interop frontends only. Outside the driver
package, every driver call goes through ``cudagraph.driver.api``, which asks ``require_driver()`` at each call.

``lint-imports`` (pyproject.toml) checks the layers below the frontends at package granularity (it sees
``cuda`` as one external package); this test reads every module's imports, lazy ones included, by name, and
every module's code (not its comments or docstrings) for the driver's entry points.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "cudagraph"
#: A driver entry point (``cuGraphDestroy``); ``CUgraph``, ``CUresult`` and the other types and enums are not.
ENTRY_POINT = re.compile(r"^cu[A-Z]")
#: Modules outside the driver package whose functions take the driver module as an argument (a fake in their
#: tests) and call it: the probe of what the machine offers, which must answer where no driver library loads.
TAKE_THE_DRIVER = {"frontends/environment.py"}


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


def _entry_points(path: Path) -> list[tuple[int, str, ast.expr]]:
    """``(line, name, object)`` of every driver entry point ``path`` calls or reads: ``obj.cuName(...)``,
    ``obj.cuName`` held to be called later, ``getattr(obj, "cuName")``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and ENTRY_POINT.match(node.attr):
            found.append((node.lineno, node.attr, node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and ENTRY_POINT.match(name.value):
                found.append((node.lineno, name.value, node.args[0]))
    return sorted(found, key=lambda f: (f[0], f[1]))


def _is_require_driver_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "require_driver"


def _outside_the_driver_package() -> list[Path]:
    return [p for p in _modules() if p.relative_to(PACKAGE).parts[0] != "driver"]


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


def test_the_scan_sees_driver_calls() -> None:
    names = {name for _, name, _ in _entry_points(PACKAGE / "driver" / "calls.py")}
    assert {"cuGetErrorString", "cuGraphCreate", "cuPointerGetAttributes", "cuDriverGetVersion"} <= names
    assert not [name for name in names if name.startswith("CU")]  # types and enums are not entry points


@pytest.mark.parametrize("path", _outside_the_driver_package(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_driver_package_calls_the_driver(path: Path) -> None:
    where = path.relative_to(PACKAGE).as_posix()
    if where in TAKE_THE_DRIVER:
        return
    found = [(line, name) for line, name, _ in _entry_points(path)]
    assert found == [], f"{where} calls the driver {found}; call it through cudagraph.driver.api"


def test_the_modules_that_take_the_driver_exist() -> None:
    assert all(_entry_points(PACKAGE / where) for where in TAKE_THE_DRIVER)


def test_the_api_calls_the_driver_only_through_require_driver_at_call_time() -> None:
    path = PACKAGE / "driver" / "api.py"
    found = _entry_points(path)
    assert len(found) > 50
    bad = [(line, name) for line, name, obj in found if not _is_require_driver_call(obj)]
    assert bad == [], f"cudagraph.driver.api calls {bad} on something other than require_driver()"
    tree = ast.parse(path.read_text(), str(path))
    at_import = [
        node.lineno
        for statement in tree.body
        if not isinstance(statement, ast.FunctionDef)
        for node in ast.walk(statement)
        if _is_require_driver_call(node)
    ]
    assert at_import == [], f"cudagraph.driver.api asks for the driver at import (lines {at_import})"


def test_the_api_lists_its_functions_sorted() -> None:
    tree = ast.parse((PACKAGE / "driver" / "api.py").read_text())
    defined = [s.name for s in tree.body if isinstance(s, ast.FunctionDef) and not s.name.startswith("_")]
    listed = next(
        ast.literal_eval(s.value)
        for s in tree.body
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in s.targets)
    )
    assert listed == sorted(listed) == sorted(defined)
