"""Path offers every builder of Graph, from the same source, each op chained after the previous one."""

from __future__ import annotations

import inspect
import itertools

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.builders import builder_names


class CUkernel:
    """Stands in for cuda.bindings.driver.CUkernel (the library checks the type name)."""


def _public_node_builders(cls: type) -> set[str]:
    """Public methods of ``cls`` whose return annotation names a node class of cudagraph."""
    out = set()
    # (unwrapped: a builder may be a compiled method wrapping its Python twin, as Graph.kernel)
    for name, fn in inspect.getmembers(cls, lambda f: inspect.isfunction(inspect.unwrap(f))):
        if name.startswith("_"):
            continue
        ret = inspect.signature(fn).return_annotation
        node_cls = getattr(cg, ret, None) if isinstance(ret, str) else ret
        if isinstance(node_cls, type) and issubclass(node_cls, cg.Node):
            out.add(name)
    return out


def test_every_public_builder_of_graph_is_on_path():
    graph_builders = _public_node_builders(cg.Graph)
    path_ops = {n for n in dir(cg.Path) if not n.startswith("_") and callable(getattr(cg.Path, n))}
    assert graph_builders == path_ops
    assert graph_builders == set(builder_names())
    # The kinds the hand-written Path lacked are there.
    for name in (
        "alloc",
        "free",
        "if_",
        "if_else",
        "while_",
        "switch",
        "set_condition",
        "memcpy2d",
        "memcpy3d",
        "write_value",
        "wait_value",
        "join",
    ):
        assert name in path_ops


@pytest.mark.parametrize("name", builder_names())
def test_path_op_has_the_graph_builder_signature_and_a_docstring(name):
    op = getattr(cg.Path, name)
    assert inspect.signature(op) == inspect.signature(getattr(cg.Graph, name))
    assert op.__doc__ and f"Graph.{name}" in op.__doc__
    assert op.__qualname__ == f"Path.{name}"


def test_path_ops_of_every_family_chain():
    g = cg.Graph("g")
    cond = g.condition(default=1)
    other = g.condition()
    flag = np.zeros(1, np.int32)
    with g.path() as p:
        a = p.alloc(256, name="a")
        k = p.kernel(CUkernel(), 1, 32, (a,))
        m2 = p.memcpy2d(0x2000, 64, 0x1000, 64, 32, 2)
        m3 = p.memcpy3d(0x4000, 0x3000, 16, 2, 2)
        wv = p.write_value(0x8000, 1)
        wt = p.wait_value(0x8000, 1, cmp="eq")
        loop = p.while_(cond)
        br = p.if_(other)
        sc = p.set_condition(other, flag, "==", 0)
        j = p.join(k)
        f = p.free(a)
    chain = [a, k, m2, m3, wv, wt, loop, br, sc, j, f]
    assert list(g.nodes) == chain
    assert a.predecessors == ()
    for prev, nxt in itertools.pairwise(chain):
        assert prev in nxt.predecessors
    # join depends on the previous op and on the node given
    assert j.predecessors == (k, sc)
    assert p.last is f
    loop.body.empty()
    br.body.empty()
    g.validate()


def test_path_after_adds_to_the_previous_op_for_generated_ops():
    g = cg.Graph("g")
    x = g.empty(name="x")
    p = g.path()
    a = p.alloc(64)
    f = p.free(a, after=x)
    assert f.predecessors == (a, x)
