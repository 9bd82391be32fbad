"""The topology a graph records as its nodes are placed (``Graph._topo``, ``_define_topology.c``): the signature
read from it is the definition layer's, every edit that changes an existing node's predecessors or index drops
it, and it can be neither forged nor crashed from Python."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition import diff as _diff
from cudagraph.definition.core import GraphCore
from cudagraph.executable.compare import topology_signature

pytestmark = pytest.mark.skipif(GraphCore._record_type is None, reason="the compiled module is not built")


class CUkernel:  # the definition layer recognises kernels by type name
    pass


class CUevent:
    pass


K1, K2 = CUkernel(), CUkernel()


def _args(i: int) -> tuple[Any, ...]:
    return (0x1000 + 64 * i, np.float32(i), np.int32(i))


def _mixed(n: int) -> cg.Graph:
    """Kernels, fills, copies, joins, empty, host, event and allocation nodes, placed in C and in Python."""
    g = cg.Graph("mixed")
    prev: list[Any] = []
    for i in range(n):
        after = prev[-2:] if i % 5 == 4 else (prev[-1] if prev else None)
        kind = i % 7
        if kind in (0, 1):
            node = g.kernel(K1 if kind else K2, 1, 32, _args(i), after=after)
        elif kind == 2:
            node = g.memset(0x2000, np.float32(i), count=4, after=after)
        elif kind == 3:
            node = g.memcpy(0x3000, 0x2000, 16, after=after)
        elif kind == 4:
            node = g.join(*prev[-3:]) if prev else g.empty()
        elif kind == 5:
            node = g.host(print, i, after=after)
        else:
            node = g.record(CUevent(), after=after)
        prev.append(node)
    return g


@pytest.mark.parametrize("n", [0, 1, 2, 7, 50, 400])
def test_the_recorded_signature_is_the_definition_layers(n: int) -> None:
    g = _mixed(n)
    assert g._topo is not None and len(g._topo) == len(g)
    topology_signature(g)  # (the first reads the nodes, learning the classes' codes)
    sig = g._topo.signature(g._nodes, _diff.CODED_CLASSES)
    assert sig is not None and sig == topology_signature(g) == _diff.topology_signature(g)
    assert type(sig) is bytes and len(sig) == 4 * (len(g) + g.num_edges)


@pytest.mark.parametrize(
    "edit",
    [
        lambda g, n: g.add_edge(n[0], n[-1]),
        lambda g, n: g.remove_edge(n[-2], n[-1]),
        lambda g, n: g.remove(n[3]),
        lambda g, n: n[1].precede(n[-1]),
    ],
    ids=["add_edge", "remove_edge", "remove", "precede"],
)
def test_an_edit_drops_the_record_and_the_signature_reads_the_nodes(edit: Any) -> None:
    g = _mixed(20)
    edit(g, list(g.nodes))
    assert g._topo is None
    assert topology_signature(g) == _diff.topology_signature(g)
    g.kernel(K1, 1, 32, _args(0))  # later nodes: still signed from the nodes
    assert g._topo is None and topology_signature(g) == _diff.topology_signature(g)


def test_a_node_placed_without_the_record_leaves_it_behind_then_dropped():
    from cudagraph.definition.node import _set_base
    from cudagraph.definition.nodes import EmptyNode

    g = _mixed(10)
    stray = EmptyNode.__new__(EmptyNode)  # appended as code outside the builders might (no record written)
    _set_base(stray, g, len(g), "stray")
    stray._preds = [g.nodes[-1]]
    g._nodes.append(stray)
    assert len(g._topo) == len(g) - 1
    assert g._topo.signature(g._nodes, _diff.CODED_CLASSES) is None  # it has not seen every node
    assert topology_signature(g) == _diff.topology_signature(g)
    g.kernel(K1, 1, 32, _args(0), after=stray)  # the next C placement finds the record behind: dropped
    assert g._topo is None and topology_signature(g) == _diff.topology_signature(g)


def test_graphs_with_nested_bodies_keep_the_tuple_form():
    body = _mixed(6)
    g = cg.Graph("outer")
    e = g.empty()
    g.child(body, after=e)
    topology_signature(g)
    assert g._topo.signature(g._nodes, _diff.CODED_CLASSES) is None  # a child graph node has no code
    sig = topology_signature(g)
    assert type(sig) is tuple and sig == _diff.topology_signature(g) and _diff.has_bodies(sig)
    assert sig[2] == (topology_signature(body),)


def test_the_record_cannot_be_forged_or_crashed_from_python():
    record_type = GraphCore._record_type
    with pytest.raises(TypeError, match="takes no arguments"):
        record_type(1)
    r = record_type()
    assert len(r) == 0 and r.signature([], ()) == b""
    with pytest.raises(TypeError, match=r"signature\(nodes: list, classes: tuple\)"):
        r.signature((), ())
    with pytest.raises(TypeError):
        memoryview(r)  # no buffer: its words are not readable, nor writable
    with pytest.raises(AttributeError):
        r.add(object())  # no index attribute
    g = _mixed(12)
    nodes = list(g.nodes)
    nodes[5].index = 10**12  # a user rebinding a node's index (its old int may be freed): no crash
    import gc

    gc.collect()
    assert g._topo.signature(g._nodes, _diff.CODED_CLASSES) is not None
    assert g._topo.add(nodes[5]) is False  # not the next node


def test_threads_adding_nodes_leave_a_record_that_agrees_or_none():
    g = cg.Graph("threads")
    start = threading.Barrier(4)

    def work(t: int) -> None:
        start.wait()
        prev = None
        for i in range(300):
            prev = g.kernel(K1 if t % 2 else K2, 1, 32, _args(i), after=prev)
            if i % 50 == 0:
                g.host(print, after=prev)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(g) == 4 * 306
    assert g._topo is None or len(g._topo) == len(g)
    assert topology_signature(g) == _diff.topology_signature(g)
