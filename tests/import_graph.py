"""The run-time import graph of the ``cudagraph`` package, read from its sources with :mod:`ast`.

Every ``import`` and ``from ... import`` counts, function-local ones included;
those under ``if TYPE_CHECKING:`` do not. Used by ``test_layers.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "src" / "cudagraph"

#: Layers from the bottom up: a module may import only from its own layer and the layers below.
LAYERS = ("errors", "definition", "driver", "ops", "materialize", "executable", "frontends")


def module_names() -> dict[str, Path]:
    """``dotted name -> file`` for every module of the package."""
    out = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """``module -> {modules of the package it imports at run time}``."""
    modules = module_names()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        deps: set[str] = set()
        for imp in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(imp, ast.Import):
                targets = [a.name for a in imp.names]
            else:
                if imp.level:
                    base = package.split(".")
                    base = base[: len(base) - (imp.level - 1)]
                    mod = ".".join(base + ([imp.module] if imp.module else []))
                else:
                    mod = imp.module or ""
                targets = [mod] + [f"{mod}.{a.name}" for a in imp.names]
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name and t.startswith("cudagraph"):
                    deps.add(t)
        graph[name] = deps
    return graph


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of ``module``'s layer (``None`` for the package root and ``__main__``)."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in LAYERS:
        return None
    return LAYERS.index(parts[1])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(importer, imported)`` pairs where a module imports from a layer above its own."""
    bad = []
    for mod, deps in graph.items():
        lm = layer_of(mod)
        if lm is None:
            continue
        for d in deps:
            ld = layer_of(d)
            if ld is not None and ld > lm:
                bad.append((mod, d))
    return sorted(bad)
