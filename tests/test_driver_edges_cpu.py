"""The edges explicit construction and capture give the driver (cudagraph.materialize.driver_edges).

The rule leaves out an edge p -> c when another predecessor of c comes directly after p. Here, on
random DAGs: what reaches what is unchanged, every edge left out is one the rule names, and nothing
else is left out. (The compiled rule is compared with this twin through the driver calls both make,
tests/test_native_cpu.py and tests/test_stream_launch_cpu.py.)
"""

from __future__ import annotations

import random
from typing import Any

import cudagraph as cg
from cudagraph.materialize.driver_edges import driver_preds


def random_dag(rng: random.Random, size: int, fan: int) -> cg.Graph:
    """``size`` empty and fill nodes, each after up to ``fan`` random earlier ones."""
    g = cg.Graph("r")
    nodes: list[Any] = []
    for i in range(size):
        after = rng.sample(nodes, rng.randint(0, min(fan, i))) or None
        nodes.append(g.empty(after=after) if rng.random() < 0.7 else g.memset(0x1000, 0, count=4, after=after))
    return g


def reach(g: cg.Graph, preds_of: Any) -> dict[int, set[int]]:
    """Node index -> indices of every node that reaches it, through the edges ``preds_of(node)`` gives."""
    out: dict[int, set[int]] = {}
    for n in g.nodes:  # creation order is a topological order here
        seen: set[int] = set()
        for p in preds_of(n):
            seen.add(p.index)
            seen |= out[p.index]
        out[n.index] = seen
    return out


def test_what_reaches_what_is_unchanged_on_random_dags():
    rng = random.Random(11)
    left_out = 0
    for trial in range(300):
        g = random_dag(rng, rng.randint(1, 40), 3 if trial % 2 else 14)  # 14: the wide path too
        assert reach(g, driver_preds) == reach(g, lambda n: n.predecessors)
        for n in g.nodes:
            kept = driver_preds(n)
            preds = n.predecessors
            dropped = [p for p in preds if all(p is not k for k in kept)]
            assert [p for p in preds if any(p is k for k in kept)] == list(kept)  # order kept
            for p in preds:  # left out exactly when another predecessor comes directly after it
                implied = any(q is not p and p in q.predecessors for q in preds)
                assert (p in dropped) == implied
            left_out += len(dropped)
    assert left_out > 100  # the random DAGs have such edges


def test_a_node_with_one_predecessor_keeps_its_list():
    g = cg.Graph("g")
    a = g.empty()
    b = g.empty(after=a)
    c = g.empty(after=[a, g.empty()])
    assert driver_preds(b) is b._preds and driver_preds(c) is c._preds  # nothing left out: no copy
    assert driver_preds(a) == []
