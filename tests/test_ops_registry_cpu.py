"""The per-kind ops and their one registry, without a GPU: coverage, explicit registration, dispatch."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition import nodes as _nodes
from cudagraph.definition.kinds.opaque import OpaqueNode
from cudagraph.definition.nodes import KernelNode, MemsetNode, Node
from cudagraph.errors import DefinitionError, UnsupportedError
from cudagraph.ops import registry
from cudagraph.ops.kinds import base, control, kernel, memset
from cudagraph.ops.lower_state import LowerState


class CUkernel:  # the definition layer recognises kernels by type name
    def __init__(self, name: str) -> None:
        self.name = name


K = CUkernel("k")
SRC = Path(cg.__file__).parent


def _node_classes() -> list[type[Node]]:
    """Every node class of the package a graph can hold: the leaves of the Node hierarchy, and the 3-D copy."""
    out: list[type[Node]] = [_nodes.Memcpy3DNode]
    stack = list(Node.__subclasses__())
    while stack:
        cls = stack.pop()
        subs = cls.__subclasses__()
        stack.extend(subs)
        if not subs and cls.__module__.startswith("cudagraph."):
            out.append(cls)
    return out


def test_every_node_kind_has_ops():
    classes = _node_classes()
    assert len(classes) >= 19
    assert [c.__name__ for c in classes if c not in registry.OPS] == []
    assert all(isinstance(ops, base.KindOps) for ops in registry.OPS.values())
    assert registry.KERNEL is registry.OPS[KernelNode] and registry.OPAQUE is registry.OPS[OpaqueNode]


def test_the_table_is_built_from_the_families_it_is_given():
    assert registry.build(registry.FAMILIES) == registry.OPS
    only = registry.build([kernel, memset])
    assert set(only) == {KernelNode, MemsetNode}
    assert registry.build([]) == {}
    with pytest.raises(ValueError, match="MemsetNode has ops in two families"):
        registry.build([memset, memset])


def test_importing_a_family_registers_nothing():
    before = dict(registry.OPS)
    import importlib

    importlib.reload(control)
    assert registry.OPS == before  # the table is read once from FAMILIES, not filled by imports


def test_each_driver_type_is_lifted_by_one_kind():
    drv = pytest.importorskip("cuda.bindings.driver")
    assert set(registry.LIFTS) == {
        "CU_GRAPH_NODE_TYPE_MEMSET",
        "CU_GRAPH_NODE_TYPE_MEMCPY",
        "CU_GRAPH_NODE_TYPE_HOST",
        "CU_GRAPH_NODE_TYPE_EVENT_RECORD",
        "CU_GRAPH_NODE_TYPE_WAIT_EVENT",
        "CU_GRAPH_NODE_TYPE_GRAPH",
        "CU_GRAPH_NODE_TYPE_EMPTY",
    }
    for name in registry.LIFTS:
        assert hasattr(drv.CUgraphNodeType, name)


def test_ops_for_falls_back_to_a_registered_base_and_names_an_unknown_class():
    class Tagged(MemsetNode):
        __slots__ = ()

    class Plain(Node):
        __slots__ = ()

    g = cg.Graph("g")
    m = g.memset(0x10000, 0, count=4)
    m.__class__ = Tagged
    assert registry.ops_for(m) is registry.OPS[MemsetNode]
    plain = Plain.__new__(Plain)
    _nodes._set_base(plain, g, 1, "plain")
    with pytest.raises(TypeError, match="no driver behaviour is registered for Plain"):
        registry.ops_for(plain)


def test_generic_loops_do_not_import_node_kinds():
    """materialize/ names no node class but Node and the kernel kind of its inline fast paths."""
    allowed = {"Node", "KernelNode", "ChildGraphNode"}  # ChildGraphNode: the capture region's node type
    for path in sorted((SRC / "materialize").glob("*.py")):
        tree = ast.parse(path.read_text())
        for stmt in ast.walk(tree):
            if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").endswith("definition.nodes"):
                names = {a.name for a in stmt.names}
                assert names <= allowed, (path.name, names - allowed)


def test_no_module_level_lowering_state():
    from cudagraph.ops import lower_state

    assert not hasattr(lower_state, "current") and not hasattr(lower_state, "_CURRENT")


def test_graph_allocations_have_addresses_only_in_their_construction():
    pytest.importorskip("cuda.bindings.driver")
    from cudagraph.ops.node_params import node_params
    from cudagraph.ops.operands import pointer_value

    g = cg.Graph("g")
    a = g.alloc(256)
    m = g.memset(a.offset(16), 0, count=4, after=a)
    with pytest.raises(DefinitionError, match="only while its graph is built"):
        node_params(m, None, {}, [], [])
    state = LowerState(None)
    state.allocs[id(a)] = (a, 0x70000)
    assert pointer_value(a.offset(16), {}, "x", state) == 0x70010
    p = node_params(m, None, {}, [], [], state)
    assert int(p.memset.dst) == 0x70010


class _Run:
    def __init__(self) -> None:
        self.bindings: dict[str, Any] = {}
        self.sink: list[Any] = []
        self.host_keys: list[int] = []
        self.state = LowerState(None, eager=True)

    def issue_graph(self, graph: Any, stream: Any) -> None:
        raise AssertionError("not reached")


def test_conditional_kinds_refuse_to_run_on_a_stream_before_any_driver_call():
    g = cg.Graph("g")
    c = g.condition(default=1)
    loop = g.while_(c)
    with pytest.raises(UnsupportedError, match=r"while nodes run only inside an instantiated graph"):
        registry.ops_for(loop).issue(loop, 0, _Run())


def test_capture_refusals():
    g = cg.Graph("g")
    plain = g.kernel(K, 1, 32, ())
    big = g.kernel(K, 1, 32, (), shared_mem=64 * 1024)
    wide = g.kernel(K, 2, 32, (), cluster=2)
    m = g.memset(0x10000, 0, count=4)
    a = g.alloc(64)
    assert registry.ops_for(plain).capture_refusal(plain) is None
    assert registry.ops_for(m).capture_refusal(m) is None
    for n in (big, wide):
        assert "cannot carry launch attributes" in str(registry.ops_for(n).capture_refusal(n))
    assert "cannot express a alloc node" in str(registry.ops_for(a).capture_refusal(a))


def test_the_python_twin_has_the_compiled_loops_interface():
    from cudagraph.driver import c_entry
    from cudagraph.materialize.kernel_loop import KernelLoopTwin

    names = {"use", "run", "put", "add_with", "write_dims", "kernel", "args", "rc", "done"}
    assert names <= set(dir(KernelLoopTwin))
    if c_entry.NATIVE is not None:
        assert names <= set(dir(c_entry.NATIVE.KernelLoop))
        for name in ("use", "run", "put", "add_with"):
            doc = getattr(c_entry.NATIVE.KernelLoop, name).__doc__ or ""
            params = list(inspect.signature(getattr(KernelLoopTwin, name)).parameters)[1:]
            assert doc.startswith(f"{name}(") and all(p in doc for p in params if p != "params"), (name, params)


def test_kernel_args_of_a_lifted_kernel_are_read_by_their_sizes():
    import ctypes

    values = [ctypes.c_uint64(0x9000), ctypes.c_float(2.5)]
    argv = (ctypes.c_void_p * 2)(*[ctypes.addressof(v) for v in values])
    entry = registry.KERNEL.lifted_kernel(K, "k", (8, 4))
    assert entry.args(ctypes.addressof(argv)) == (values[0].value.to_bytes(8, "little"), bytes(values[1]))
    assert np.frombuffer(entry.args(ctypes.addressof(argv))[1], np.float32)[0] == np.float32(2.5)


class _RecordingSetter:
    """An :class:`~cudagraph.ops.kinds.base.ExecSetter` that records which of its ways was asked for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any]] = []

    def set_params(self, node: Any, driver_node: Any) -> None:
        self.calls.append(("set_params", node, driver_node))

    def write_kernel(self, node: Any, driver_node: Any) -> None:
        self.calls.append(("write_kernel", node, driver_node))

    def set_child_graph(self, node: Any, driver_node: Any) -> None:
        self.calls.append(("set_child_graph", node, driver_node))


def test_each_kind_says_how_an_executable_sets_it():
    """Per-node executable updates read the registry: kernels go to the writer, child graphs are re-lowered."""
    g = cg.Graph()
    x = g.param("x")
    k = g.kernel(K, grid=1, block=1, args=(x,))
    body = cg.Graph()
    body.empty()
    child = g.child(body)
    fill = g.memset(x, np.uint32(0), 4)
    setter = _RecordingSetter()
    for i, node in enumerate((k, child, fill)):
        registry.ops_for(node).exec_set(setter, node, i)
    assert setter.calls == [("write_kernel", k, 0), ("set_child_graph", child, 1), ("set_params", fill, 2)]


def test_toggleable_kinds_are_exactly_those_the_driver_can_enable():
    """``exe[node].enable()/disable()`` read the spec attribute; cuGraphNodeSetEnabled takes kernels, memcpy, memset."""
    toggleable = {cls.__name__ for cls in _node_classes() if cls.toggleable}
    assert toggleable == {"KernelNode", "MemcpyNode", "MemsetNode"}
