"""The definition layer imports nothing above it and has no import cycle."""

from __future__ import annotations

import import_graph as ig


def test_no_cycle_involves_a_definition_module():
    graph = ig.import_graph()
    bad = [c for c in ig.cycles(graph) if any(m.startswith("cudagraph.definition") for m in c)]
    assert bad == []


def test_no_definition_module_imports_a_higher_layer():
    graph = ig.import_graph()
    bad = [(a, b) for a, b in ig.upward_imports(graph) if a.startswith("cudagraph.definition")]
    assert bad == []


def test_the_kinds_package_imports_no_kind_module():
    # kinds/__init__ stays empty so importing one family never imports the others.
    graph = ig.import_graph()
    assert graph["cudagraph.definition.kinds"] == set()
