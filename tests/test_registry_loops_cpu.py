"""The generic loops read what a kind can do from its ops and spec, never from its class (no GPU needed).

Explicit construction, validation, comparison, device checks, binding and updates find the batched kernel paths
through :data:`cudagraph.ops.registry.LAUNCHES` (the kinds whose ops declare ``launches``), the kinds carrying
launch attributes through :data:`cudagraph.definition.diff.LAUNCH_ATTR_CLASSES` (their spec's
``programmatic_edges``) and a kernel launch's fields through :data:`cudagraph.definition.diff.KERNEL_LAYOUT_CLASSES`;
a conditional body's kinds before CUDA 12.4 through their ops' ``driver_kernel``. ``KernelNode`` is named only in
its spec, its ops, the public re-exports, the handoffs to compiled code and type hints.
"""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.materialize.explicit as _explicit
from cudagraph.definition import diff
from cudagraph.definition.nodes import NODE_CLASSES, KernelNode, MemsetNode, Node
from cudagraph.errors import UnsupportedError
from cudagraph.materialize import driver_edges
from cudagraph.ops import registry
from cudagraph.ops.kinds import base, control
from cudagraph.ops.kinds.kernel import KernelOps
from cudagraph.ops.kinds.memset import MemsetOps

SRC = Path(cg.__file__).parent

#: The generic loops' modules: they test no node class and call the kernel kind's ops through the registry.
GENERIC = (
    "definition/diff.py",
    "definition/graph.py",
    "driver/device_checks.py",
    "executable/base.py",
    "executable/binding.py",
    "executable/compare.py",
    "executable/updating.py",
    "materialize/driver_edges.py",
    "materialize/explicit.py",
    "materialize/kernel_loop.py",
    "ops/kinds/control.py",
)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _RuntimeNames(ast.NodeVisitor):
    """Every name a module reads or imports at run time: ``(name, line, how)``, ``how`` being ``"import"``,
    ``"name"`` or ``"attribute"``; annotations and the imports under ``if TYPE_CHECKING:`` are left out."""

    def __init__(self) -> None:
        self.found: list[tuple[str, int, str]] = []

    def visit_arg(self, node: ast.arg) -> None:
        pass  # an annotation

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expr in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if expr is not None:
                self.visit(expr)
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            self.found.append((alias.asname or alias.name, node.lineno, "import"))

    def visit_Name(self, node: ast.Name) -> None:
        self.found.append((node.id, node.lineno, "name"))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.found.append((node.attr, node.lineno, "attribute"))
        self.generic_visit(node)


def runtime_names(path: Path) -> list[tuple[str, int, str]]:
    """The names ``path`` reads or imports at run time (see :class:`_RuntimeNames`)."""
    visitor = _RuntimeNames()
    visitor.visit(ast.parse(path.read_text()))
    return visitor.found


def test_the_scan_sees_run_time_uses_and_skips_type_hints():
    source = (
        "from typing import TYPE_CHECKING, cast\n"
        "from m import Used\n"
        "if TYPE_CHECKING:\n"
        "    from m import Hinted\n"
        "def f(a: Hinted, b=Used) -> Hinted:\n"
        "    x: Hinted = cast('Hinted', a)\n"
        "    return type(x) is Used or registry.KERNEL\n"
    )
    visitor = _RuntimeNames()
    visitor.visit(ast.parse(source))
    names = {(name, how) for name, _line, how in visitor.found}
    assert ("Used", "import") in names and ("Used", "name") in names and ("KERNEL", "attribute") in names
    assert not any(name == "Hinted" for name, _how in names)


#: The generic modules and every module of the generic layers (materialize, executable).
ALL_GENERIC = sorted(
    {*GENERIC, *(str(p.relative_to(SRC)) for d in ("materialize", "executable") for p in (SRC / d).glob("*.py"))}
)


@pytest.mark.parametrize("module", ALL_GENERIC)
def test_a_generic_module_names_no_kernel_node_at_run_time(module):
    """``KernelNode`` only in type hints (and imports under ``TYPE_CHECKING``); the loops read the registry."""
    path = SRC / module
    if not path.exists():
        pytest.skip(f"{module} is not in this tree")
    uses = [(line, how) for name, line, how in runtime_names(path) if name == "KernelNode"]
    assert uses == [], f"{module} names KernelNode at run time: {uses}"


@pytest.mark.parametrize("module", GENERIC)
def test_a_generic_module_calls_no_kernel_ops_directly(module):
    """The kernel kind's ops are reached through the per-class table (``LAUNCHES``) or ``ops_for``, not ``KERNEL``."""
    uses = [(line, how) for name, line, how in runtime_names(SRC / module) if name == "KERNEL" and how != "import"]
    assert uses == [], f"{module} calls registry.KERNEL: {uses}"


# ------------------------------------------------------------------ the tables the loops read


def test_the_tables_are_read_from_the_kinds_declarations():
    assert registry.LAUNCHES == {cls: ops for cls, ops in registry.OPS.items() if ops.launches}
    assert registry.LAUNCHES == {KernelNode: registry.KERNEL}
    assert {cls for cls, ops in registry.OPS.items() if ops.driver_kernel} == {KernelNode, cg.SetConditionNode}
    assert diff.LAUNCH_ATTR_CLASSES == {c for c in NODE_CLASSES if c.programmatic_edges} == {KernelNode}
    assert KernelNode in diff.KERNEL_LAYOUT_CLASSES
    assert not base.KindOps.launches and not base.KindOps.driver_kernel


def _new_launch_kind() -> type[Node]:
    """A new kind with a kernel node's fields (a node made by ``Graph.kernel`` changes its class to it), that
    may have programmatic edges; not a subclass of ``KernelNode`` (other tests read the leaves of the classes)."""

    class FusedNode(Node):
        __slots__ = KernelNode.__slots__
        kind = "fused"
        programmatic_edges = True

    return FusedNode


@pytest.fixture
def fused_kind() -> Iterator[type[Node]]:
    """:func:`_new_launch_kind`, forgotten after the test (``Node.__subclasses__()`` holds it until collected)."""
    yield _new_launch_kind()
    gc.collect()


class FusedOps(KernelOps):
    """Its ops: a kernel launch, as the kernel kind's (``launches`` inherited)."""

    __slots__ = ()


class NotAKernel(MemsetOps):
    __slots__ = ()
    launches = True


def test_a_kind_declaring_launches_is_listed_and_must_have_the_kernel_ops_interface(fused_kind):
    ops = FusedOps()
    table = {**registry.OPS, fused_kind: ops}
    assert registry.launch_kinds(table) == {KernelNode: registry.KERNEL, fused_kind: ops}
    with pytest.raises(ValueError, match="MemsetNode: ops declaring launches must be a KernelOps"):
        registry.launch_kinds({MemsetNode: NotAKernel()})


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K = CUkernel()


def _lower_with_the_python_loop(graph: cg.Graph, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any]]:
    """Lower ``graph`` through the kernel loop's Python twin over a recording ``cuGraphAddNode``: ``(calls, nodes
    given to Lowering._add_node)``."""
    drv = pytest.importorskip("cuda.bindings.driver")
    from driver_fakes import fake_info

    info = fake_info(0x71, (0, 8, 12), (8, 4, 4))  # k(float* x, float a, int n)
    calls: list[Any] = []

    def add(graph_handle: Any, deps: Any, edges: Any, n: int, params: Any) -> Any:
        k = params.kernel
        calls.append((int(params.type), (k.gridDimX, k.blockDimX), [int(d) for d in deps or []][:n]))
        return drv.CUresult.CUDA_SUCCESS, drv.CUgraphNode(0x1000 + len(calls))

    general: list[Any] = []
    real_add_node = _explicit.Lowering._add_node

    def add_node(self: Any, loop: Any, node: Any, *args: Any) -> None:
        general.append(node)
        real_add_node(self, loop, node, *args)

    monkeypatch.setattr(drv, "cuGraphAddNode", add)
    monkeypatch.setattr(_explicit, "kernel_info", lambda kernel: info)
    monkeypatch.setattr(_explicit, "kernel_loop", lambda graph_handle, params: None)  # the Python twin
    monkeypatch.setattr(_explicit.Lowering, "_add_node", add_node)
    lowering = _explicit.Lowering("ctx", {}, [])
    lowering.lower_graph(graph, drv.CUgraph(0x5000))
    return calls, general


def _three_launches(kind: type[Node]) -> tuple[cg.Graph, Any]:
    """Three kernel nodes in a chain, the middle one made a node of ``kind``."""
    g = cg.Graph("g")
    args = (0x9000, np.float32(1.0), np.int32(4))
    a = g.kernel(K, 1, 32, args)
    b = g.kernel(K, 2, 64, args, after=a)
    g.kernel(K, 1, 32, args, after=b)
    b.__class__ = kind
    return g, b


def test_a_new_kind_declaring_launches_takes_the_kernel_loop(monkeypatch, fused_kind):
    """Registered with ops declaring ``launches``, a new kind is added by the kernel loop like a kernel node,
    with no edit of the loop; without it, it is left to the general path, where its ops add nothing."""
    ops = FusedOps()
    monkeypatch.setitem(registry.OPS, fused_kind, ops)
    monkeypatch.setitem(registry.LAUNCHES, fused_kind, ops)
    g, _fused = _three_launches(fused_kind)
    calls, general = _lower_with_the_python_loop(g, monkeypatch)
    kernel_type = 0  # CU_GRAPH_NODE_TYPE_KERNEL
    assert calls == [(kernel_type, (1, 32), []), (kernel_type, (2, 64), [0x1001]), (kernel_type, (1, 32), [0x1002])]
    assert general == []

    monkeypatch.delitem(registry.LAUNCHES, fused_kind)
    g, _fused = _three_launches(fused_kind)
    with pytest.raises(UnsupportedError, match="has no single-node driver parameters"):
        _lower_with_the_python_loop(g, monkeypatch)


def test_the_edges_of_a_kind_carrying_launch_attributes_are_read_from_its_spec(monkeypatch, fused_kind):
    """A node of a kind of LAUNCH_ATTR_CLASSES without attributes has plain incoming edges; one of an unlisted
    kind whose spec says it may have programmatic edges is taken as programmatic (not reduced)."""
    g, fused = _three_launches(fused_kind)
    assert not driver_edges.plain_in(fused)  # its spec says programmatic_edges, and it is not listed
    monkeypatch.setattr(driver_edges, "LAUNCH_ATTR_CLASSES", diff.LAUNCH_ATTR_CLASSES | {fused_kind})
    assert driver_edges.plain_in(fused)
    fill = g.memset(0x9000, 0, count=4)
    assert driver_edges.plain_in(fill) and driver_edges.plain_in(g.nodes[0])


class _Builder:
    """What ``ConditionalOps``' driver check reads of a construction (a :class:`~cudagraph.ops.kinds.base.Builder`):
    the registry."""

    def ops_for(self, node: Any) -> Any:
        return registry.ops_for(node)


def test_before_cuda_12_4_a_body_holds_only_kinds_the_driver_holds_as_kernel_nodes(monkeypatch):
    builder: Any = _Builder()
    monkeypatch.setattr(control, "_DRIVER_VERSION", [12030])
    g = cg.Graph("g")
    cond = g.condition(default=1)
    loop = g.while_(cond)
    loop.body.kernel(K, 1, 32, ())
    loop.body.set_condition(cond, 0x9000, "<", 4, dtype=np.int32)
    control._check_driver_support(loop, builder)  # kernel and set_condition: kernel nodes in the driver
    fill = loop.body.memset(0x9000, 0, count=4)
    with pytest.raises(UnsupportedError, match="allows only kernel nodes in conditional bodies") as err:
        control._check_driver_support(loop, builder)
    assert err.value.node is fill

    class KernelFill(MemsetOps):  # a kind the driver would hold as a kernel node: allowed, with no edit
        __slots__ = ()
        driver_kernel = True

    monkeypatch.setitem(registry.OPS, MemsetNode, KernelFill())
    control._check_driver_support(loop, builder)
    monkeypatch.setattr(control, "_DRIVER_VERSION", [12040])
    monkeypatch.setitem(registry.OPS, MemsetNode, MemsetOps())
    control._check_driver_support(loop, builder)  # CUDA 12.4: any kind a body may hold


def test_only_class_names_the_one_class_of_a_set():
    assert diff.only_class(frozenset({KernelNode})) is KernelNode
    assert diff.only_class(frozenset()) is None
    assert diff.only_class(frozenset({KernelNode, MemsetNode})) is None


@pytest.mark.parametrize("several", [False, True])
def test_a_kind_with_a_kernel_nodes_fields_takes_the_fast_comparison(monkeypatch, fused_kind, several):
    """``diff_states`` compares the nodes of every kind of KERNEL_LAYOUT_CLASSES field by field (no state built
    for an unchanged one), whether one kind or several have that layout."""
    g, fused = _three_launches(fused_kind)
    states = [diff.node_state(n) for n in g.nodes]
    if several:
        monkeypatch.setattr(diff, "KERNEL_LAYOUT_CLASSES", diff.KERNEL_LAYOUT_CLASSES | {fused_kind})
    built: list[Any] = []
    real = diff.node_state
    monkeypatch.setattr(diff, "node_state", lambda n, *a: built.append(n) or real(n, *a))
    changed, _ = diff.diff_states(states, g)
    assert changed == []
    assert built == ([] if several else [fused])  # a kind not in the set: its state is built and compared
