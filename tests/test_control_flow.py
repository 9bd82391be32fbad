"""Conditional nodes in the definition layer (GPU-free): conditions, if / if-else / while / switch
builders and their bodies, set_condition nodes, every validation error, rendering, and the rule
that the definition layer imports no CUDA module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors


class CUkernel:
    """Stands in for cuda.bindings.driver.CUkernel (the library checks the type name)."""


K = CUkernel()
PTR = 0x10000


class DevArray:
    def __init__(self, addr: int, n: int = 4, typestr: str = "<f4") -> None:
        self.__cuda_array_interface__ = {
            "shape": (n,),
            "typestr": typestr,
            "data": (addr, False),
            "version": 3,
            "strides": None,
        }


# =============================================================================== conditions


def test_condition_defaults_names_and_repr():
    g = cg.Graph("g")
    a = g.condition()
    b = g.condition(default=1, name="loop")
    c = g.condition(default=True)
    assert (a.default, b.default, c.default) == (None, 1, 1)
    assert (a.name, b.name, c.name) == ("cond0", "loop", "cond2")
    assert (a.index, b.index) == (0, 1)
    assert a.graph is g and g.conditions == (a, b, c)
    assert a.label == "condition#0 'cond0'"
    assert "default=1" in repr(b) and "'loop'" in repr(b) and "Graph 'g'" in repr(b)
    assert b.nodes == ()


@pytest.mark.parametrize("bad", [-1, 1 << 32])
def test_condition_default_out_of_range(bad):
    with pytest.raises(errors.DefinitionError, match="32 unsigned bits"):
        cg.Graph().condition(default=bad)


@pytest.mark.parametrize("bad", [1.5, "1", object()])
def test_condition_default_wrong_type(bad):
    with pytest.raises(errors.OperandError, match="default must be an int"):
        cg.Graph().condition(default=bad)


def test_snippet_declares_set_conditional_without_headers():
    s = cg.CONDITIONAL_SNIPPET
    assert "cudaGraphConditionalHandle" in s and "cudaGraphSetConditional" in s
    assert "#include" not in s


# =============================================================================== builders


def test_if_node_and_body():
    g = cg.Graph("g")
    c = g.condition(default=1)
    e = g.empty()
    node = g.if_(c, after=e, name="branch")
    assert isinstance(node, cg.IfNode) and isinstance(node, cg.ConditionalNode)
    assert node.kind == "if" and node.cond is c and node.predecessors == (e,)
    assert node.body is node.then is node.bodies[0]
    assert isinstance(node.body, cg.Graph) and len(node.body) == 0
    assert node.body.name == "g/branch.body" and node.body.owner is node and g.owner is None
    assert c.nodes == (node,)
    k = node.body.kernel(K, 1, 1, (PTR,))
    assert k.graph is node.body and k not in g
    assert node.label == "if#1 'branch'"


def test_if_else_while_switch_bodies():
    g = cg.Graph("g")
    c1, c2, c3 = g.condition(), g.condition(), g.condition()
    ie = g.if_else(c1)
    assert isinstance(ie, cg.IfElseNode) and ie.kind == "if_else"
    assert ie.then is ie.bodies[0] and ie.else_ is ie.bodies[1] and ie.then is not ie.else_
    assert ie.then.name.endswith(".then") and ie.else_.name.endswith(".else")
    w = g.while_(c2, after=ie)
    assert isinstance(w, cg.WhileNode) and w.kind == "while" and w.body is w.bodies[0]
    sw = g.switch(c3, 4, after=w)
    assert isinstance(sw, cg.SwitchNode) and len(sw.cases) == 4 and sw.cases == sw.bodies
    assert [b.name.rsplit(".", 1)[1] for b in sw.cases] == ["case0", "case1", "case2", "case3"]
    assert (c1.nodes, c2.nodes, c3.nodes) == ((ie,), (w,), (sw,))
    assert len({id(b) for b in sw.cases}) == 4


def test_a_condition_drives_one_conditional_node():
    g = cg.Graph("g")
    c = g.condition()
    first = g.if_(c, name="first")
    with pytest.raises(errors.DefinitionError) as ei:
        g.while_(c, after=first, name="second")
    msg = str(ei.value)
    assert "while#1 'second'" in msg and "if#0 'first'" in msg and "condition#0 'cond0'" in msg
    assert len(g) == 1 and c.nodes == (first,) and first.successors == ()
    body_user = first.body.kernel(K, 1, 1, (c,))  # kernels may still set it
    assert body_user.args == (c,)


def test_switch_needs_cases():
    g = cg.Graph("g")
    c = g.condition()
    with pytest.raises(errors.DefinitionError, match="at least one case"):
        g.switch(c, 0, name="none")
    with pytest.raises(errors.OperandError):
        g.switch(c, 2.0)
    with pytest.raises(errors.OperandError):
        g.switch(c, True)
    assert len(g) == 0


def test_nesting_and_conditions_of_enclosing_graphs():
    g = cg.Graph("g")
    outer = g.condition(default=1)
    inner = g.condition()
    loop = g.while_(outer)
    k = loop.body.kernel(K, 1, 1, (outer, inner))
    branch = loop.body.if_(inner, after=k)  # a condition of the enclosing graph
    local = branch.body.condition(default=0, name="local")
    deep = branch.body.switch(local, 2)
    deep.cases[1].kernel(K, 1, 1, (local, outer))
    assert branch.body.owner is branch and branch.graph is loop.body
    g.validate()
    assert loop.body in g._descendants() and deep.cases[1] in g._descendants()


def test_conditional_bodies_share_parameters():
    g = cg.Graph("g")
    x = g.param("x")
    loop = g.while_(g.condition(default=1))
    y = loop.body.param("y", np.int32)
    assert loop.body.param("x") is x
    assert set(g.params) == {"x", "y"} and y.graph is loop.body
    with pytest.raises(errors.DefinitionError):
        loop.body.param("x", np.float32)


def test_set_condition_node():
    g = cg.Graph("g")
    c = g.condition(default=1)
    loop = g.while_(c)
    k = loop.body.kernel(K, 1, 1, ())
    node = loop.body.set_condition(c, PTR, ">", 1e-6, np.float32, after=k, name="check")
    assert isinstance(node, cg.SetConditionNode) and node.kind == "set_condition"
    assert node.cond is c and node.ptr == PTR and node.op == ">" and node.dtype == np.float32
    assert node.value == np.float32(1e-6) and type(node.value) is np.float32
    assert "check" in repr(node) and "> " in node.describe()
    # dtype from a numpy value, from an array's typestr
    n2 = loop.body.set_condition(c, PTR, "<=", np.int64(5), after=node)
    assert n2.dtype == np.int64
    n3 = loop.body.set_condition(c, DevArray(PTR, 2, "<u4"), "==", 3, after=n2)
    assert n3.dtype == np.uint32 and n3.value == 3
    g.validate()


@pytest.mark.parametrize(
    "kwargs, exc, text",
    [
        ({"op": "=>"}, errors.OperandError, "op must be one of"),
        ({"dtype": np.int8}, errors.OperandError, "not supported"),
        ({"dtype": "nonsense"}, errors.OperandError, "not a numpy dtype"),
        ({"value": "big"}, errors.OperandError, "must be a number"),
        ({"value": True}, errors.OperandError, "must be a number"),
        ({"value": 1 << 40, "dtype": np.int32}, errors.OperandError, "does not fit"),
        ({"value": 1.5, "dtype": np.int32}, errors.OperandError, "must be an integer"),
        ({"value": -1, "dtype": np.uint32}, errors.OperandError, "does not fit"),
        ({"dtype": None, "value": 1.0}, errors.DefinitionError, "dtype is required"),
        ({"ptr": DevArray(PTR, 1, "<u2"), "dtype": np.float32}, errors.DefinitionError, "less than one"),
        ({"ptr": 0}, errors.OperandError, "null pointer"),
        ({"ptr": 2.5}, errors.OperandError, "expected device memory"),
    ],
)
def test_set_condition_errors(kwargs, exc, text):
    g = cg.Graph("g")
    c = g.condition()
    g.if_(c)
    args = {"ptr": PTR, "op": ">", "value": 1.0, "dtype": np.float32}
    args.update(kwargs)
    with pytest.raises(exc, match=text) as ei:
        g.set_condition(c, args["ptr"], args["op"], args["value"], args["dtype"], name="pred")
    assert "set_condition#1 'pred'" in str(ei.value)
    assert len(g) == 1


def test_set_condition_wrong_condition_kind():
    g = cg.Graph("g")
    with pytest.raises(errors.OperandError, match="expected a Condition"):
        g.set_condition(object(), PTR, ">", 1.0, np.float32)


# =============================================================================== validation errors


def test_condition_of_another_graph_is_rejected_at_build():
    g, other = cg.Graph("g"), cg.Graph("other")
    c = other.condition()
    with pytest.raises(errors.ForeignNodeError) as ei:
        g.if_(c, name="wrong")
    assert "if#0 'wrong'" in str(ei.value) and "condition#0 'cond0'" in str(ei.value) and "'other'" in str(ei.value)
    with pytest.raises(errors.ForeignNodeError):
        g.set_condition(c, PTR, ">", 0, np.int32)
    assert len(g) == 0


def test_condition_of_a_body_used_outside_it():
    g = cg.Graph("g")
    loop = g.while_(g.condition(default=1))
    local = loop.body.condition()
    with pytest.raises(errors.ForeignNodeError):
        g.if_(local)  # the body's condition in the enclosing graph
    sibling = g.if_(g.condition())
    with pytest.raises(errors.ForeignNodeError):
        sibling.body.while_(local)


def test_condition_kernel_argument_from_unrelated_graph_fails_validation():
    g, other = cg.Graph("g"), cg.Graph("other")
    c = other.condition()
    other.if_(c).body.empty()
    node = g.if_(g.condition(default=1))
    node.body.kernel(K, 1, 1, (c,), name="setter")
    with pytest.raises(errors.ForeignNodeError) as ei:
        g.validate()
    assert "kernel#0 'setter'" in str(ei.value) and "condition#0 'cond0' of Graph 'other'" in str(ei.value)


def test_condition_across_a_child_graph_boundary():
    # A kernel in a child graph may set a condition of the graph around it ...
    g = cg.Graph("g")
    c = g.condition(default=1)
    child = cg.Graph("child")
    child.kernel(K, 1, 1, (c,))
    loop = g.while_(c)
    loop.body.child(child)
    g.validate()
    # ... but a conditional node in a child graph needs a condition declared in that graph.
    child2 = cg.Graph("child2")
    with pytest.raises(errors.ForeignNodeError):
        child2.if_(c)


def test_condition_used_by_kernels_only_is_rejected():
    g = cg.Graph("g")
    c = g.condition()
    g.kernel(K, 1, 1, (c,), name="setter")
    g.while_(g.condition(default=1)).body.kernel(K, 1, 1, ())  # makes the graph "special"
    with pytest.raises(errors.DefinitionError, match="no conditional node uses it") as ei:
        g.validate()
    assert "kernel#0 'setter'" in str(ei.value)


@pytest.mark.parametrize("kind", ["host", "record", "wait", "alloc", "write_value", "wait_value"])
def test_node_kinds_not_allowed_in_a_body(kind):
    class CUevent:
        pass

    g = cg.Graph("g")
    node = g.if_(g.condition(default=1), name="branch")
    b = node.body
    if kind == "host":
        b.host(print, name="bad")
    elif kind == "record":
        b.record(CUevent(), name="bad")
    elif kind == "wait":
        b.wait(CUevent(), name="bad")
    elif kind == "alloc":
        b.alloc(16, name="bad")
    elif kind == "write_value":
        b.write_value(PTR, 1, name="bad")
    else:
        b.wait_value(PTR, 1, name="bad")
    with pytest.raises(errors.DefinitionError) as ei:
        g.validate()
    msg = str(ei.value)
    assert f"{kind}#0 'bad'" in msg and "if#0 'branch'" in msg and "conditional body" in msg
    with pytest.raises(errors.DefinitionError):
        g._validate_structure()  # what instantiate and run check first


def test_body_rule_applies_inside_child_graphs_and_nested_bodies():
    g = cg.Graph("g")
    child = cg.Graph("child")
    child.host(print, name="cb")
    node = g.while_(g.condition(default=1), name="loop")
    inner = node.body.if_(g.condition(), name="inner")
    inner.body.child(child)
    node.body.kernel(K, 1, 1, ())
    with pytest.raises(errors.DefinitionError) as ei:
        g.validate()
    assert "host#0 'cb'" in str(ei.value) and "if#0 'inner'" in str(ei.value)


def test_allowed_body_kinds_pass():
    g = cg.Graph("g")
    c = g.condition(default=1)
    node = g.while_(c)
    b = node.body
    k = b.kernel(K, 1, 1, ())
    m = b.memset(PTR, 0, count=4, after=k)
    cp = b.memcpy(PTR, PTR + 64, 16, after=m)
    c2 = b.memcpy2d(PTR, 64, PTR + 1024, 64, 32, 2, after=cp)
    e = b.empty(after=c2)
    ch = b.child(cg.Graph("leaf"), after=e)
    c2 = g.condition()
    s = b.set_condition(c2, PTR, "!=", 0, np.int32, after=ch)
    b.if_else(c2, after=s)
    g.validate()


def test_empty_while_body_is_rejected():
    g = cg.Graph("g")
    g.while_(g.condition(default=1), name="spin")
    with pytest.raises(errors.DefinitionError, match="empty body") as ei:
        g.validate()
    assert "while#0 'spin'" in str(ei.value)


def test_empty_if_else_and_switch_bodies_are_allowed():
    g = cg.Graph("g")
    g.if_(g.condition())
    g.if_else(g.condition())
    g.switch(g.condition(), 3)
    g.validate()


def test_body_cycle_is_found():
    g = cg.Graph("g")
    node = g.if_(g.condition(default=1))
    a = node.body.empty(name="a")
    b = node.body.empty(after=a, name="b")
    node.body._nodes[0]._preds.append(b)  # forge a cycle behind the builders' back (successors follow)
    node.body._ordered = False
    with pytest.raises(errors.CycleError):
        g.validate()
    with pytest.raises(errors.CycleError):
        g._validate_structure()


def test_graph_cannot_contain_itself_through_a_body():
    g = cg.Graph("g")
    node = g.while_(g.condition(default=1))
    with pytest.raises(errors.DefinitionError, match="contains"):
        node.body.child(g)


def test_conditional_nodes_cannot_be_updated():
    g = cg.Graph("g")
    node = g.if_(g.condition())
    assert node.update() is node
    with pytest.raises(errors.DefinitionError, match="no parameters"):
        node.update(cond=g.condition())
    s = g.set_condition(node.cond, PTR, ">", 1, np.int32)
    with pytest.raises(errors.DefinitionError):
        s.update(value=2)


def test_eager_run_needs_no_gpu_to_reject_validation_errors():
    g = cg.Graph("g")
    g.while_(g.condition(default=1), name="spin")
    with pytest.raises(errors.DefinitionError):
        g.run()


def test_instantiate_rejects_before_the_driver():
    g = cg.Graph("g")
    node = g.if_(g.condition(default=1))
    node.body.host(print)
    with pytest.raises(errors.DefinitionError):
        g.instantiate()


# =============================================================================== rendering


def _graph_for_pictures() -> cg.Graph:
    g = cg.Graph("pic")
    c = g.condition(default=1, name="more")
    loop = g.while_(c, name="loop")
    k = loop.body.kernel(K, 1, 1, (c,), name="step")
    loop.body.set_condition(c, PTR, ">", 0.5, np.float32, after=k, name="check")
    sel = g.condition(name="sel")
    sw = g.switch(sel, 2, after=loop, name="pick")
    sw.cases[0].empty(name="zero")
    ie = sw.cases[1].if_else(g.condition(name="flag"), name="inner")
    ie.then.kernel(K, 1, 1, (), name="t")
    return g


def test_summary_lists_conditional_nodes():
    text = _graph_for_pictures().summary()
    assert "while=1" in text and "switch=1" in text
    assert "cond='more' bodies=1 (2 nodes)" in text
    assert "bodies=2 (1/1 nodes)" in text


def test_dot_draws_bodies_as_clusters():
    dot = _graph_for_pictures().to_dot()
    assert dot.count("subgraph cluster_") == 5  # while body, 2 switch cases, 2 if-else branches
    assert 'label="loop: while more != 0"' in dot
    assert 'label="pick: case sel == 1"' in dot
    assert "n0_b0_n0 -> n0_b0_n1;" in dot
    assert "shape=diamond" in dot
    assert dot.count("{") == dot.count("}")


def test_mermaid_draws_bodies_as_subgraphs():
    text = _graph_for_pictures().to_mermaid()
    lines = text.split("\n")
    assert sum(1 for ln in lines if ln.strip().startswith("subgraph ")) == 5
    assert sum(1 for ln in lines if ln.strip() == "end") == 5
    assert "  n0 -.- n0_b0" in lines
    assert any("n1_b1_n0_b0" in ln for ln in lines)


# =============================================================================== no CUDA import

SRC = Path(__file__).resolve().parents[1] / "src"

SCRIPT = textwrap.dedent(
    """
    import json
    import sys

    attempts = []


    class Watch:
        def find_spec(self, name, path=None, target=None):
            if name == "cuda" or name.startswith("cuda."):
                attempts.append(name)
            return None


    sys.meta_path.insert(0, Watch())
    import numpy as np

    import cudagraph as cg


    class CUkernel:
        pass


    g = cg.Graph("no_cuda")
    c = g.condition(default=1)
    loop = g.while_(c)
    k = loop.body.kernel(CUkernel(), 1, 1, (c,))
    loop.body.set_condition(c, 0x10000, ">", 1.0, np.float32, after=k)
    a = g.alloc(64, after=loop)
    m = g.memset(a, 0, after=a)
    kk = g.kernel(CUkernel(), 2, 32, (a,), cluster=2, after=m)
    k2 = g.kernel(CUkernel(), 2, 32, (), programmatic=kk, shared_mem=100000)
    f = g.free(a, after=[kk, k2])
    g.memcpy2d(0x20000, 64, 0x30000, 64, 16, 4)
    g.write_value(0x40000, 1)
    g.wait_value(0x40000, 1)
    g.validate()
    text = g.summary() + g.to_dot() + g.to_mermaid()
    cuda = sorted(m for m in sys.modules if m == "cuda" or m.startswith("cuda."))
    print(json.dumps({"cuda_modules": cuda, "attempts": attempts, "nodes": len(g), "text": len(text)}))
    """
)


def test_new_node_kinds_import_no_cuda_module():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["cuda_modules"] == [] and out["attempts"] == []
    assert out["nodes"] == 9 and out["text"] > 0
