"""bench/node_kinds.py on the CPU: the chains it defines and its table (no GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import cudagraph as cg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import node_kinds as nk


@pytest.mark.parametrize("kind", nk.KINDS)
def test_each_chain_has_its_kind_one_after_another(kind):
    g = nk.define_ours(cg, kind, 7, 0x10000, 0x20000)
    nodes = g.nodes
    assert len(nodes) == 7 and {n.kind for n in nodes} == {kind.split("-")[0]}
    assert [p for n in nodes for p in n.predecessors] == list(nodes[:-1])
    g.validate()
    g2 = nk.define_ours(cg, kind, 7, 0x10000, 0x20000, shift=1)
    assert [n.kind for n in g2.nodes] == [n.kind for n in nodes]
    if kind == "memset":
        assert [n.value for n in g2.nodes] == [(i + 1) & 0xFF for i in range(7)]
    if kind == "memset-np":  # the bits of the float, 4-byte elements
        assert [n.value for n in g2.nodes] == [int(np.float32(i + 1).view(np.uint32)) for i in range(7)]
        assert {n.element_size for n in g2.nodes} == {4}
    if kind == "memcpy-h2d":  # from the numpy array, its 4096 bytes; g2 into the other buffer
        assert {(n.src, n.nbytes) for n in nodes} == {(nk._HOST.ctypes.data, 4096)}
        assert {n.dst for n in nodes} == {0x10000} and {n.dst for n in g2.nodes} == {0x20000}


def test_the_table_shows_medians_in_microseconds_and_the_ratio():
    rows = {
        "memset": {c: [1e-6, 3e-6, 2e-6] for c in nk.COLUMNS},
        "host": {c: [] for c in nk.COLUMNS},
    }
    rows["memset"]["cuda.core builder"] = [4e-6, 4e-6, 4e-6]
    out = nk.table(rows).splitlines()
    assert out[0].startswith("| kind | define µs/node | lower µs/node | define+lower µs/node")
    assert out[2] == "| memset | 2.000 | 2.000 | 2.000 | 4.000 | 2.000 | 2.000 | 2.000 | 2.000 | 2.000 | 0.500x |"
    assert out[3] == "| host | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a |"
