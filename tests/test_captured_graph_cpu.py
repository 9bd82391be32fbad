"""A recording with graph memory (``CapturedGraphNode``) in a definition, lowered by the explicit materializer
with a stand-in ``Lowering.add``: one child graph node whose graph is the recording, moved into the graph built
(``CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE``), once. The driver side runs on GPUs
(tests/test_compat_graph_memory_gpu.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import cudagraph as cg
import cudagraph.materialize.explicit as _explicit
from cudagraph.definition.kinds.opaque import CapturedGraphNode, add_captured
from cudagraph.errors import UnsupportedError

drv = pytest.importorskip("cuda.bindings.driver")
pytestmark = pytest.mark.skipif(
    not hasattr(drv, "CUgraphChildGraphNodeOwnership"), reason="cuda-bindings without child graph ownership"
)


class Adds:
    """``Lowering.add``: records each node's type, child graph and ownership; refuses the node at ``refuse``."""

    def __init__(self, refuse: int | None = None) -> None:
        self.log: list[tuple[str, int, Any, list[int]]] = []
        self.refuse = refuse

    def __call__(self, graph: Any, deps: Any, n: int, params: Any) -> tuple[Any, Any]:
        if self.refuse is not None and len(self.log) == self.refuse:
            self.refuse = None
            return drv.CUresult.CUDA_ERROR_INVALID_VALUE, None
        kind = drv.CUgraphNodeType(int(params.type)).name.replace("CU_GRAPH_NODE_TYPE_", "")
        child = int(params.graph.graph) if kind == "GRAPH" else 0
        ownership = int(params.graph.ownership) if kind == "GRAPH" else None
        self.log.append((kind, child, ownership, [int(d) for d in (deps or [])][:n]))
        return drv.CUresult.CUDA_SUCCESS, drv.CUgraphNode(0x100 + len(self.log))


def lower(g: cg.Graph, adds: Adds) -> Any:
    lowering = _explicit.Lowering("ctx", {}, [])
    lowering.add = adds
    return lowering.lower_graph(g, drv.CUgraph(0x5000))


def recorded(g: cg.Graph) -> tuple[CapturedGraphNode, Any]:
    source = SimpleNamespace(handle=drv.CUgraph(0xC0FFEE), node_count=3, taken=False)
    path = g.path()
    first = path.empty(name="before")
    node = add_captured(path, source, "captured")
    path.empty(name="after")
    assert node.predecessors == (first,) and [n.kind for n in g.nodes] == ["empty", "captured", "empty"]
    return node, source


def test_the_recording_is_moved_into_the_graph_built_after_its_predecessor():
    g = cg.Graph("g")
    node, source = recorded(g)
    adds = Adds()
    lower(g, adds)
    move = int(drv.CUgraphChildGraphNodeOwnership.CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
    assert [(k, c, o) for k, c, o, _ in adds.log] == [("EMPTY", 0, None), ("GRAPH", 0xC0FFEE, move), ("EMPTY", 0, None)]
    assert adds.log[1][3] == [0x101] and adds.log[2][3] == [0x102]
    assert source.taken and "captured graph (3 nodes" in node.describe()


def test_a_second_build_is_refused_by_name():
    g = cg.Graph("g")
    node, _ = recorded(g)
    lower(g, Adds())
    with pytest.raises(UnsupportedError, match="moved into the first graph built") as info:
        lower(g, Adds())
    assert info.value.node is node


def test_a_build_the_driver_refuses_leaves_the_recording_to_its_owner():
    g = cg.Graph("g")
    _, source = recorded(g)
    with pytest.raises(cg.errors.CudaGraphError):
        lower(g, Adds(refuse=1))
    assert not source.taken  # the driver took nothing: the owner still destroys it
    adds = Adds()
    lower(g, adds)
    assert source.taken and [k for k, *_ in adds.log] == ["EMPTY", "GRAPH", "EMPTY"]


def test_the_recording_is_neither_run_nor_captured_nor_set_in_an_executable():
    from cudagraph.ops.registry import ops_for

    g = cg.Graph("g")
    node, _ = recorded(g)
    ops = ops_for(node)
    assert ops.exec_update is None and not ops.capturable
    assert "cannot express a captured node" in (ops.capture_refusal(node) or "")
    with pytest.raises(UnsupportedError, match="cannot run CapturedGraphNode"):
        ops.issue(node, None, None)
