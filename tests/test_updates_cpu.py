"""Parameters, unbound-parameter errors and definition diffing (no GPU)."""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.bindings import all_params, resolve_bindings
from cudagraph.definition.diff import changed_nodes, describe_topology_diff, node_state, topology_signature
from cudagraph.errors import DefinitionError, OperandError


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K = CUkernel()


def build(ptr: int = 0x10000, scale: float = 2.0, extra_edge: bool = False, kind_swap: bool = False) -> cg.Graph:
    g = cg.Graph("g")
    a = g.memset(ptr, 0, count=4, element_size=4, name="zero")
    b = g.kernel(K, 1, 32, (ptr, np.float32(scale)), after=a, name="k")
    c = g.empty(name="j") if kind_swap else g.memcpy(0x20000, ptr, 16, after=b, name="out")
    if extra_edge:
        g.add_edge(a, c)
    return g


def test_same_topology_same_signature_and_changes_listed():
    g1, g2 = build(), build(ptr=0x30000)
    assert topology_signature(g1) == topology_signature(g2)
    states = [node_state(n) for n in g1.nodes]
    assert changed_nodes(states, g1) == []
    assert [n.index for n in changed_nodes(states, g2)] == [0, 1, 2]
    g3 = build(scale=3.0)
    assert [n.name for n in changed_nodes(states, g3)] == ["k"]


def test_numpy_scalars_of_other_type_are_a_change():
    g1 = build(scale=2.0)
    g2 = cg.Graph("g")
    a = g2.memset(0x10000, 0, count=4, element_size=4)
    b = g2.kernel(K, 1, 32, (0x10000, np.float64(2.0)), after=a)
    g2.memcpy(0x20000, 0x10000, 16, after=b)
    states = [node_state(n) for n in g1.nodes]
    assert [n.index for n in changed_nodes(states, g2)] == [1]


def test_topology_differences_are_described():
    base = build()
    assert describe_topology_diff(base, build()) == []
    assert describe_topology_diff(base, build(extra_edge=True)) == ["edge added: #0 -> memcpy#2 'out'"]
    assert describe_topology_diff(build(extra_edge=True), base) == ["edge removed: #0 -> memcpy#2 'out'"]
    assert describe_topology_diff(base, build(kind_swap=True)) == [
        "node #2: kind changed from memcpy ('out') to empty ('j')"
    ]
    bigger = build()
    bigger.empty(after=bigger.nodes[2], name="tail")
    assert describe_topology_diff(base, bigger) == ["node added: empty#3 'tail'"]
    assert describe_topology_diff(bigger, base) == ["node removed: empty#3 'tail'"]
    assert topology_signature(base) != topology_signature(bigger)


def test_child_bodies_are_part_of_topology_and_state():
    def with_child(n_body: int, value: int = 1) -> cg.Graph:
        body = cg.Graph("body")
        prev = None
        for _ in range(n_body):
            prev = body.memset(0x10000, value, count=4, after=prev)
        g = cg.Graph("parent")
        g.child(body)
        return g

    assert topology_signature(with_child(2)) == topology_signature(with_child(2, value=7))
    assert topology_signature(with_child(2)) != topology_signature(with_child(3))
    g1 = with_child(2)
    states = [node_state(n) for n in g1.nodes]
    assert [n.index for n in changed_nodes(states, with_child(2, value=7))] == [0]
    assert changed_nodes(states, with_child(2)) == []
    assert describe_topology_diff(with_child(2), with_child(3)) == ["node added in /child#0 'body': memset#2 'memset'"]


def test_unbound_parameters_are_listed():
    g = cg.Graph("p")
    x = g.param("x")
    y = g.param("y")
    g.param("alpha", np.float32, default=1.5)
    g.memcpy(x, y, 16)
    with pytest.raises(DefinitionError, match=r"unbound parameter\(s\) 'x', 'y'"):
        resolve_bindings(g, {})
    with pytest.raises(OperandError, match=r"no parameter\(s\) 'z'"):
        resolve_bindings(g, {"x": 0x10000, "y": 0x20000, "z": 1})
    b = resolve_bindings(g, {"x": 0x10000, "y": 0x20000})
    assert b == {"x": 0x10000, "y": 0x20000, "alpha": np.float32(1.5)}
    assert type(b["alpha"]) is np.float32


def test_parameter_values_are_checked():
    g = cg.Graph("p")
    g.param("x")
    g.param("n", np.int32)
    with pytest.raises(OperandError, match="param 'x'"):
        resolve_bindings(g, {"x": 1.5, "n": 1})
    with pytest.raises(OperandError, match="param 'n'"):
        resolve_bindings(g, {"x": 0x10000, "n": "ten"})
    with pytest.raises(OperandError, match="param 'n'"):
        resolve_bindings(g, {"x": 0x10000, "n": 2**40})
    with pytest.raises(OperandError, match="param 'n': expected 4-byte int32"):
        resolve_bindings(g, {"x": 0x10000, "n": np.int64(3)})


def test_params_of_child_graphs_are_collected_and_must_agree():
    parent = cg.Graph("parent")
    parent.param("x")
    body = cg.Graph("body")
    body.param("y", np.float32)
    parent.child(body)
    assert sorted(all_params(parent)) == ["x", "y"]
    clash = cg.Graph("clash")
    clash.param("x", np.int32)
    parent.child(clash)
    with pytest.raises(DefinitionError, match="param 'x' is a pointer in Graph 'parent' but a int32"):
        all_params(parent)


def test_reserved_parameter_names():
    g = cg.Graph()
    for name in ("upload_stream", "device_launch", "stream"):
        with pytest.raises(DefinitionError, match="reserved"):
            g.param(name)


def test_definition_node_update_checks_and_is_atomic():
    g = build()
    k = g.nodes[1]
    before = node_state(k)
    with pytest.raises(DefinitionError, match="unknown keyword"):
        k.update(nbytes=3)
    with pytest.raises(DefinitionError, match=r"kernel#1 'k': grid\[0\] must be positive"):
        k.update(grid=0)
    assert node_state(k) == before
    k.update(grid=(2, 3), args=(0x10000, np.float32(5.0)))
    assert k.grid == (2, 3, 1) and k.args[1] == np.float32(5.0)
    assert k.predecessors == (g.nodes[0],)
    m = g.nodes[2]
    with pytest.raises(DefinitionError, match="nbytes must be positive"):
        m.update(nbytes=0)
    m.update(nbytes=8)
    assert m.nbytes == 8


def test_executable_cache_rejects_bad_size():
    with pytest.raises(OperandError, match="maxsize"):
        cg.ExecutableCache(0)
    assert repr(cg.ExecutableCache(3)) == "<ExecutableCache size=0/3 hits=0 misses=0 evictions=0>"
