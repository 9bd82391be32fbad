"""Random definitions for the tests that compare two implementations on many shapes."""

from __future__ import annotations

import random
from typing import Any

import cudagraph as cg


def random_graph(rng: random.Random, size: int, kernel: Any, args: tuple[Any, ...]) -> cg.Graph:
    """``size`` nodes, each with up to three random predecessors: mostly kernels (``kernel``
    launched with ``args``), then fills, empty nodes and child graphs of zero to two fills."""
    g = cg.Graph("r")
    nodes: list[Any] = []
    for i in range(size):
        kind = rng.choice("kkkmec")
        k = rng.randint(0, min(3, i))
        after = rng.sample(nodes, k) if k else None
        if kind == "k":
            nodes.append(g.kernel(kernel, 1, 32, args, after=after))
        elif kind == "m":
            nodes.append(g.memset(0x10000, 0, count=4, after=after))
        elif kind == "e":
            nodes.append(g.empty(after=after))
        else:
            body = cg.Graph("b")
            prev = None
            for _ in range(rng.randint(0, 2)):
                prev = body.memset(0x10000, 0, count=4, after=prev)
            nodes.append(g.child(body, after=after))
    return g
