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


def python_path_adds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The labels of the nodes lowering adds through the Python path (``Lowering._add_node``), as they come."""
    adds: list[str] = []
    real = explicit.Lowering._add_node

    def counted(self, loop, node, handle, dn, raw):  # type: ignore[no-untyped-def]
        adds.append(node.label)
        return real(self, loop, node, handle, dn, raw)

    monkeypatch.setattr(explicit.Lowering, "_add_node", counted)
    return adds


def python_path_sets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The labels of the nodes updates set through the Python path (``set_node_params``), as they come."""
    import cudagraph.executable.base as base

    sets: list[str] = []
    real = base.set_node_params

    def counted(exec_handle, node, *args, **kwargs):  # type: ignore[no-untyped-def]
        sets.append(node.label)
        return real(exec_handle, node, *args, **kwargs)

    monkeypatch.setattr(base, "set_node_params", counted)
    return sets


def test_fills_copies_and_empty_nodes_each_way(gpu, stream, monkeypatch):
    python_adds = python_path_adds(monkeypatch)
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
    assert exe._lowered.state.memory_types is None  # remembered only while the driver graph was built
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


def test_a_parameter_operand_is_resolved_from_the_bindings_in_c(gpu, stream, monkeypatch):
    python_adds = python_path_adds(monkeypatch)
    a, b = gpu.alloc(N * 4), gpu.alloc(N * 4)
    g = cg.Graph("param")
    out = g.param("out")
    f = g.memset(a, np.float32(4.0), name="fill")
    g.memcpy(out, a, nbytes=N * 4, after=f, name="copy_out")
    exe = g.instantiate(out=b)
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(b, N), np.full(N, 4.0, np.float32))
    assert python_adds == ([] if NATIVE is not None else ["memset#0 'fill'", "memcpy#1 'copy_out'"])
    outs = [gpu.alloc(N * 4) for _ in range(3)]
    exe.launch(stream, out=outs[0])  # rebound: the copy's destination set anew
    g.run(stream, out=outs[1])  # eagerly, the parameter bound by the run
    captured = g.instantiate(backend="capture", out=outs[2])
    captured.launch(stream)
    stream.sync()
    for o in outs:
        np.testing.assert_array_equal(gpu.read(o, N), np.full(N, 4.0, np.float32))
    captured.close()
    exe.close()


def test_updates_of_fills_and_copies_are_set_from_c(gpu, stream, monkeypatch):
    python_sets = python_path_sets(monkeypatch)
    a, b = gpu.alloc(N * 4), gpu.alloc(N * 4)
    host_out = np.zeros(N, np.float32)

    def build(value: float, forward: bool) -> cg.Graph:
        g = cg.Graph("steps")
        src, dst = (a, b) if forward else (b, a)
        f = g.memset(src, np.float32(value))
        c = g.memcpy(dst, src, after=f)
        g.memcpy(host_out, dst, after=c)
        return g

    exe = build(1.0, True).instantiate()
    for value, forward in [(2.0, False), (3.5, True), (3.5, False)]:  # every node changes each time
        result = exe.update(build(value, forward))
        assert result.mode == "per-node", result
        exe.launch(stream)
        stream.sync()
        np.testing.assert_array_equal(host_out, np.full(N, value, np.float32))
        np.testing.assert_array_equal(gpu.read(a, N), np.full(N, value, np.float32))
        np.testing.assert_array_equal(gpu.read(b, N), np.full(N, value, np.float32))
    exe.close()
    assert python_sets == [] if NATIVE is not None else len(python_sets) == 9


def test_fills_and_copies_defined_in_c_compute_what_numpy_says(gpu, stream):
    from cudagraph.definition.builders import COMPILED_OPS

    a, b, c = gpu.alloc(N * 4), gpu.alloc(N * 4), gpu.alloc(N * 4)
    cg.Graph("teach").memcpy(b, a)  # the Buffer class and its handle class, read once by the Python method
    before = {k: m.taken for k, m in COMPILED_OPS.items()}
    g = cg.Graph("defined")
    f0 = g.memset(b, 0)  # every byte, the count from the Buffer
    f1 = g.memset(a, 0x3F800000, element_size=4, after=f0)  # 1.0f in every float
    f2 = g.memset(int(b.handle) + 192, 0x40, count=8, after=f1)  # bytes 192..199 (an int destination)
    f3 = g.memset(b, 0x4000, width=4, height=3, pitch=64, element_size=2, after=f2)  # 3 rows of 4 halves, at 0, 64, 128
    c1 = g.memcpy(c, a, after=f3)  # nbytes from src
    c2 = g.memcpy(int(c.handle) + 512, b, 256, after=c1)  # an int destination
    host = np.zeros(N, np.float32)
    g.memcpy(host, c, after=c2)  # device -> a numpy array (pageable host memory), nbytes from the array
    exe = g.instantiate()
    exe.launch(stream)
    stream.sync()
    expect_b = np.zeros(N * 4, np.uint8)
    expect_b[192:200] = 0x40
    for row in range(3):
        expect_b[row * 64 : row * 64 + 8] = np.frombuffer(np.full(4, 0x4000, "<u2").tobytes(), np.uint8)
    np.testing.assert_array_equal(gpu.read(a, N), np.ones(N, np.float32))
    b_read = gpu.read(b, N).view(np.uint8)
    np.testing.assert_array_equal(b_read, expect_b)
    expect_c = np.ones(N, np.float32).view(np.uint8).copy()
    expect_c[512:768] = b_read[:256]
    np.testing.assert_array_equal(gpu.read(c, N).view(np.uint8), expect_c)
    np.testing.assert_array_equal(host.view(np.uint8), expect_c)
    exe.close()
    if COMPILED_OPS:
        assert {k: COMPILED_OPS[k].taken - before[k] for k in ("memset", "memcpy")} == {"memset": 4, "memcpy": 3}


@pytest.mark.parametrize("how", ["run", "capture"])
def test_eager_runs_and_captures_issue_fills_and_copies_from_c(gpu, stream, monkeypatch, how):
    from cudagraph.ops.kinds.copy import MemcpyOps
    from cudagraph.ops.kinds.memset import MemsetOps

    python_issues: list[str] = []
    for ops in (MemsetOps, MemcpyOps):
        real = ops.issue

        def counted(self, node, s, run, real=real):  # type: ignore[no-untyped-def]
            python_issues.append(node.label)
            return real(self, node, s, run)

        monkeypatch.setattr(ops, "issue", counted)
    a, b, c = gpu.alloc(N * 4), gpu.alloc(N * 4), gpu.alloc(N * 4)
    host_in = np.arange(N, dtype=np.float32) * 0.5
    host_out = np.zeros(N, np.float32)
    pin, pin_view = gpu.pinned(N * 4)
    g = cg.Graph("eager")
    f0 = g.memset(b, 0)  # 1-byte fill of every byte
    f1 = g.memset(a, np.float32(1.0), after=f0)  # 4-byte fill
    f2 = g.memset(int(b.handle) + 192, 0x40, count=8, after=f1)  # 1-byte fill at an offset
    f3 = g.memset(b, 0x4000, width=4, height=3, pitch=64, element_size=2, after=f2)  # 2-D, 2-byte
    f4 = g.memset(int(c.handle) + 2048, 0x3F800000, width=2, height=4, pitch=256, element_size=4, after=f3)
    c1 = g.memcpy(int(c.handle), a, 256, after=f4)  # device -> device
    c2 = g.memcpy(int(c.handle) + 512, b, 256, after=c1)
    c3 = g.memcpy(int(a.handle) + 1024, host_in, nbytes=64, after=c2)  # pageable host -> device
    c4 = g.memcpy(host_out, a, after=g.join(c3))  # device -> pageable host
    g.memcpy(pin, c, after=c4)  # device -> pinned host
    expect_b = np.zeros(N * 4, np.uint8)
    expect_b[192:200] = 0x40
    for row in range(3):
        expect_b[row * 64 : row * 64 + 8] = np.frombuffer(np.full(4, 0x4000, "<u2").tobytes(), np.uint8)
    expect_a = np.ones(N, np.float32)
    expect_a[256:272] = host_in[:16]
    exe = g.instantiate(backend="capture") if how == "capture" else None
    for _ in range(2):  # a second run asks the memory types again
        gpu.write(c, np.zeros(N, np.float32))
        host_out[:] = 0
        pin_view[:] = 0
        if exe is None:
            g.run(stream)
        else:
            exe.launch(stream)
        stream.sync()
        expect_c = np.zeros(N * 4, np.uint8)
        expect_c[:256] = np.ones(64, np.float32).view(np.uint8)
        expect_c[512:768] = expect_b[:256]
        for row in range(4):
            expect_c[2048 + row * 256 : 2048 + row * 256 + 8] = np.ones(2, np.float32).view(np.uint8)
        np.testing.assert_array_equal(gpu.read(a, N), expect_a)
        np.testing.assert_array_equal(gpu.read(b, N).view(np.uint8), expect_b)
        np.testing.assert_array_equal(gpu.read(c, N).view(np.uint8), expect_c)
        np.testing.assert_array_equal(host_out, expect_a)
        np.testing.assert_array_equal(pin_view, expect_c)
    if exe is not None:
        exe.close()
    if NATIVE is None:
        assert len(python_issues) == (10 if how == "capture" else 2 * 10)  # the kinds' issue made every call
    else:
        assert python_issues == []  # the compiled launcher made them all


def test_updates_of_fills_and_copies_of_parameters_are_set_from_c(gpu, stream, monkeypatch):
    python_sets = python_path_sets(monkeypatch)
    a, b, c = gpu.alloc(N * 4), gpu.alloc(N * 4), gpu.alloc(N * 4)

    def build_counted(value: float) -> cg.Graph:
        g = cg.Graph("param steps")
        out = g.param("out")
        f = g.memset(out, np.float32(value), count=N)
        g.memcpy(a, out, nbytes=N * 4, after=f)
        return g

    exe = build_counted(1.0).instantiate(out=b)
    result = exe.update(build_counted(2.5), out=c)  # a new value and a new address for both nodes
    assert result.mode == "per-node", result
    assert python_sets == ([] if NATIVE is not None else ["memset#0 'memset'", "memcpy#1 'memcpy'"])
    exe.launch(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(c, N), np.full(N, 2.5, np.float32))
    np.testing.assert_array_equal(gpu.read(a, N), np.full(N, 2.5, np.float32))
    exe.launch(stream, out=b)  # rebound: both nodes set anew
    stream.sync()
    np.testing.assert_array_equal(gpu.read(b, N), np.full(N, 2.5, np.float32))
    exe.close()
