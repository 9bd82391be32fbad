"""Differential testing: random DAGs built once, run explicitly, by capture and eagerly; bit-identical."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cudagraph as cg

pytestmark = pytest.mark.gpu

N = 64
NBUF = 4
# Fewer under the memory checker, which makes each launch far slower (see README).
EXAMPLES = int(os.environ.get("CUDAGRAPH_DIFF_EXAMPLES", "320"))

# op = (kind, a, b, c, x): kind 0 scale_add(buf a), 1 copy a->b, 2 fill a, 3 combine a,b->c, 4 axpb a->b
OP = st.tuples(
    st.integers(0, 4),
    st.integers(0, NBUF - 1),
    st.integers(0, NBUF - 1),
    st.integers(0, NBUF - 1),
    st.integers(-3, 3),
)


def build(kernels, bufs, ops, extra_edges):
    """Conflicting ops are ordered by edges from the last writer/readers of each buffer."""
    g = cg.Graph("random")
    last_write: dict[int, cg.Node] = {}
    reads_since: dict[int, list[cg.Node]] = {i: [] for i in range(NBUF)}
    nodes: list[cg.Node] = []
    n32 = np.int32(N)
    for kind, a, b, c, x in ops:
        if kind in (1, 3, 4) and a == b:
            b = (a + 1) % NBUF
        if kind == 3 and c in (a, b):
            c = next(i for i in range(NBUF) if i not in (a, b))
        reads, writes = {0: ([a], [a]), 1: ([a], [b]), 2: ([], [a]), 3: ([a, b], [c]), 4: ([a], [b])}[kind]
        deps: list[cg.Node] = []
        for r in reads:
            if r in last_write:
                deps.append(last_write[r])
        for w in writes:
            if w in last_write:
                deps.append(last_write[w])
            deps.extend(reads_since[w])
        uniq = list({id(d): d for d in deps}.values())
        if kind == 0:
            node = g.kernel(kernels.scale_add, 1, N, (bufs[a], np.float32(x or 1.5), np.float32(x), n32), after=uniq)
        elif kind == 1:
            node = g.memcpy(bufs[b], bufs[a], 4 * N, after=uniq)
        elif kind == 2:
            node = g.memset(bufs[a], np.float32(x), count=N, after=uniq)
        elif kind == 3:
            node = g.kernel(kernels.combine, 1, N, (bufs[c], bufs[a], bufs[b], n32), after=uniq)
        else:
            node = g.kernel(kernels.axpb, 1, N, (bufs[b], bufs[a], np.float32(x), np.float32(0.25), n32), after=uniq)
        for r in reads:
            reads_since[r].append(node)
        for w in writes:
            last_write[w] = node
            reads_since[w] = []
        nodes.append(node)
    for i, j in extra_edges:
        if nodes and i % len(nodes) < j % len(nodes):
            src, dst = nodes[i % len(nodes)], nodes[j % len(nodes)]
            if src not in dst.predecessors:
                g.add_edge(src, dst)
    return g


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
@given(
    ops=st.lists(OP, min_size=1, max_size=200),
    extra=st.lists(st.tuples(st.integers(0, 199), st.integers(0, 199)), max_size=20),
)
def test_three_materializers_agree(gpu, kernels, stream, ops, extra):
    init = np.random.default_rng(len(ops)).standard_normal((NBUF, N)).astype(np.float32)
    bufs = _BUFS.setdefault("b", [gpu.alloc(4 * N) for _ in range(NBUF)])
    g = build(kernels, bufs, ops, extra)
    results = []
    for how in ("explicit", "capture", "eager"):
        for i in range(NBUF):
            gpu.write(bufs[i], init[i])
        if how == "eager":
            g.run(stream)
        else:
            with g.instantiate(backend=how) as exe:
                exe.launch(stream)
        stream.sync()
        results.append(np.stack([gpu.read(bufs[i], N).view(np.uint32) for i in range(NBUF)]))
    assert np.array_equal(results[0], results[2]), "explicit differs from eager"
    assert np.array_equal(results[1], results[2]), "capture differs from eager"


_BUFS: dict[str, list] = {}
