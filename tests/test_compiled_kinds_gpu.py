"""Fills, copies and empty nodes added by the compiled construction loop, on the GPU.

Where the compiled module is built, explicit construction writes these nodes'
parameters in C (``KernelLoop.simple``): none of them goes through the Python
path (``Lowering._add_node``), and what the graph computes is what numpy says.
With ``CUDAGRAPH_NO_C_ENTRY=1`` the same graphs go through the Python path.
"""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.materialize.explicit as explicit
from cudagraph.driver.c_entry import NATIVE

pytestmark = pytest.mark.gpu

N = 1024


def test_fills_copies_and_empty_nodes_each_way(gpu, stream, monkeypatch):
    python_adds: list[str] = []
    real = explicit.Lowering._add_node

    def counted(self, loop, node, handle, dn, raw):  # type: ignore[no-untyped-def]
        python_adds.append(node.label)
        return real(self, loop, node, handle, dn, raw)

    monkeypatch.setattr(explicit.Lowering, "_add_node", counted)
    host_in = np.arange(N, dtype=np.float32) - 7
    host_out = np.zeros(N, np.float32)
    pin, pin_view = gpu.pinned(N * 4)
    pin_view.view(np.float32)[:] = 0
    a, b = gpu.alloc(N * 4), gpu.alloc(N * 4)
    g = cg.Graph("kinds")
    f1 = g.memset(a, np.float32(2.5))  # the count from the Buffer
    f2 = g.memset(int(a.handle) + 64, np.uint16(0x4000), count=8, after=f1)  # bytes 64..79: halves of 2.0
    j = g.join(f2)
    c1 = g.memcpy(b, a, after=j)  # device -> device
    c2 = g.memcpy(a, host_in, nbytes=16 * 4, after=c1)  # pageable host -> device (first 16 floats)
    c3 = g.memcpy(host_out, a, after=c2)  # device -> pageable host
    g.memcpy(pin, b, after=c3)  # device -> pinned host
    g.empty()
    exe = g.instantiate()
    for _ in range(2):
        host_out[:] = 0
        exe.launch(stream)
        stream.sync()
        expect_b = np.full(N, 2.5, np.float32)
        expect_b[16:20] = np.frombuffer(np.full(8, 0x4000, "<u2").tobytes(), np.float32)
        expect_a = expect_b.copy()
        expect_a[:16] = host_in[:16]
        np.testing.assert_array_equal(gpu.read(b, N), expect_b)
        np.testing.assert_array_equal(host_out, expect_a)
        np.testing.assert_array_equal(pin_view.view(np.float32), expect_b)
    exe.close()
    if NATIVE is None:
        assert len(python_adds) == len(g)  # the Python path added every node
    else:
        assert python_adds == []  # the compiled loop wrote them all


def test_a_parameter_operand_goes_through_python(gpu, stream, monkeypatch):
    python_adds: list[str] = []
    real = explicit.Lowering._add_node

    def counted(self, loop, node, handle, dn, raw):  # type: ignore[no-untyped-def]
        python_adds.append(node.label)
        return real(self, loop, node, handle, dn, raw)

    monkeypatch.setattr(explicit.Lowering, "_add_node", counted)
    a, b = gpu.alloc(N * 4), gpu.alloc(N * 4)
    g = cg.Graph("param")
    out = g.param("out")
    f = g.memset(a, np.float32(4.0), name="fill")
    g.memcpy(out, a, nbytes=N * 4, after=f, name="copy_out")
    exe = g.instantiate(out=b)
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(b, N), np.full(N, 4.0, np.float32))
    exe.close()
    expected = ["memcpy#1 'copy_out'"] if NATIVE is not None else ["memset#0 'fill'", "memcpy#1 'copy_out'"]
    assert python_adds == expected
