"""Edge edits on a definition: ``Graph.add_edge`` and ``Graph.remove_edge`` at scale (GPU-free).

What is measured (one process, no GPU): a graph of 20,001 empty nodes built
with no edges, then 100,000 edge edits, each timed as a whole:

- ``fan-in``: 20,000 edges into one node (every other node -> the last one)
  added, then all removed in random order (the fan-in stays while the
  other phases run);
- ``forward``: 20,000 random edges from a lower to a higher index added, then
  removed in random order;
- ``backward``: 10,000 edges that follow a random order of the nodes (most go
  from a higher to a lower index, none closes a cycle), added then removed;
  each such edge moves the nodes between its ends in the topological order
  that add_edge keeps.

Adds and removes together make 100,000 edits; the target is under a second
(printed next to the total). The duplicate test and the cycle test run on
every add.

Run from the repository root::

    PYTHONPATH=src python3 bench/edge_edits.py
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import no_gc

N = 20_000


def main() -> None:
    import cudagraph as cg

    rng = random.Random(0)
    g = cg.Graph("edges")
    nodes = [g.empty() for _ in range(N + 1)]
    hub = nodes[-1]
    fan = [(nodes[i], hub) for i in range(N)]
    fwd: set[tuple[int, int]] = set()
    while len(fwd) < 20_000:
        a, b = rng.randrange(N), rng.randrange(N)
        if a < b:
            fwd.add((a, b))
    forward = [(nodes[a], nodes[b]) for a, b in sorted(fwd)]
    rng.shuffle(forward)
    # backward by index but acyclic: edges follow a random order of the nodes
    perm = list(range(N))
    rng.shuffle(perm)
    back: list[tuple[cg.Node, cg.Node]] = []
    seen: set[tuple[int, int]] = set()
    while len(back) < 10_000:
        i = rng.randrange(N - 1)
        j = min(i + rng.randrange(1, 50), N - 1)
        a, b = perm[i], perm[j]
        if a > b and (a, b) not in seen:
            seen.add((a, b))
            back.append((nodes[a], nodes[b]))
    removal = forward[:]
    rng.shuffle(removal)
    fan_removal = fan[:]
    rng.shuffle(fan_removal)
    phases = [
        ("fan-in add", g.add_edge, fan),
        ("forward add", g.add_edge, forward),
        ("forward remove", g.remove_edge, removal),
        ("backward add", g.add_edge, back),
        ("backward remove", g.remove_edge, back),
        ("fan-in remove", g.remove_edge, fan_removal),
    ]
    total = 0.0
    edits = 0
    for name, op, edges in phases:
        with no_gc():
            t0 = time.perf_counter()
            for s, d in edges:
                op(s, d)
            dt = time.perf_counter() - t0
        total += dt
        edits += len(edges)
        print(f"{name:16s} {len(edges):7d} edits {dt * 1e3:8.1f} ms  {dt / len(edges) * 1e6:6.2f} µs/edit")
    assert g.num_edges == 0
    g.validate()
    verdict = "ok" if total < 1.0 else "SLOW"
    print(f"{'total':16s} {edits:7d} edits {total * 1e3:8.1f} ms  (target < 1000 ms: {verdict})")


if __name__ == "__main__":
    main()
