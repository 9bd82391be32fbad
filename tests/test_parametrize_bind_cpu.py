"""Binding parametrized names on the CPU: the bytes each node update carries, and the checks of new memory.

Uses the recorder of ``test_bind_plan_cpu`` (the kernel-node update replaced,
a fixed layout ``k(float* x, float a, int n)``), with lifted-style ``bytes``
arguments, in both the compiled and the ``cuda.bindings`` path.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.executable.bind_checks as _checks
from cudagraph.errors import OperandError

drv = pytest.importorskip("cuda.bindings.driver")

import test_bind_plan_cpu as _plan  # noqa: E402
from test_parametrize_cpu import FakeTensor  # noqa: E402

K, make_exe = _plan.K, _plan.make_exe
calls = _plan.calls  # the recorder fixture

X, X2, X3 = 0x7F00_0000_0000, 0x7F10_0000_0000, 0x7F20_0000_0000
OUT, OUT2 = 0x7F00_1000_0000, 0x7F30_0000_0000
A, N = struct.pack("<f", 2.0), struct.pack("<i", 64)


def q(v: int) -> bytes:
    return struct.pack("<Q", v)


def data(ptr: int) -> bytes:
    return q(ptr) + A + N


@pytest.fixture
def device_memory(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bare addresses are device memory of device 0 (the driver's answer, faked); the probed ones are listed."""
    probed: list[int] = []

    def probe(address: int) -> tuple[bool, int | None]:
        probed.append(address)
        return True, 0

    monkeypatch.setattr(_checks, "probe", probe)
    return probed


def lifted() -> tuple[cg.Graph, list[Any]]:
    g = cg.Graph("lifted")
    nodes = [
        g.kernel(K, 1, 32, (q(X + 16), A, N)),  # a pointer 16 bytes into x
        g.kernel(K, 1, 32, (q(X), A, N)),  # x itself
        g.kernel(K, 1, 32, (q(OUT), A, N)),  # out
        g.kernel(K, 1, 32, (q(0x9000_0000), A, N)),  # neither
    ]
    return g, nodes


def test_a_bind_writes_the_new_address_plus_each_offset(calls, device_memory):
    g, _ = lifted()
    g.parametrize(x=(X, 4096), out=(OUT, 1024))
    exe = make_exe(g, x=X, out=OUT)
    assert exe.bind(x=(X2, 4096)) == 2
    assert sorted((d, b) for d, b, _ in calls) == [(0x100, data(X2 + 16)), (0x101, data(X2))]
    assert device_memory == [X2]
    calls.clear()
    assert exe.bind(x=(X2, 4096)) == 0 and calls == []  # the same memory: no driver call
    assert exe.bind(x=X3) == 2  # a bare address is taken at its word (no size to check)
    assert sorted((d, b) for d, b, _ in calls) == [(0x100, data(X3 + 16)), (0x101, data(X3))]
    calls.clear()
    assert exe.bind(x=(X2, 8192), out=(OUT2, 1024)) == 3  # several at once: each user refreshed
    assert sorted((d, b) for d, b, _ in calls) == [(0x100, data(X2 + 16)), (0x101, data(X2)), (0x102, data(OUT2))]


def test_the_compiled_bind_leaves_checked_names_to_python(calls, device_memory):
    g, _ = lifted()
    g.parametrize(out=(OUT, 1024))
    exe = make_exe(g, x=X, out=OUT)
    exe.bind(out=(OUT2, 1024))
    assert exe._plans["out"].pointer_groups is None and exe._plans["out"].memory.nbytes == 1024
    device_memory.clear()
    exe.bind(out=OUT2 + 4096)
    assert device_memory == [OUT2 + 4096]  # checked by the Python method, every time


def test_tensors_are_checked_against_the_captured_one(calls, device_memory):
    g, _ = lifted()
    g.parametrize(x=FakeTensor(X, (32, 32)))
    exe = make_exe(g, x=X)
    assert exe.bind(x=FakeTensor(X2, (32, 32))) == 2 and device_memory == []  # the tensor says its device
    cases = [
        (FakeTensor(X3, (16, 32)), ["'x'", "2048 bytes", "fewer than the 4096 bytes"]),
        (FakeTensor(X3, (1024,)), ["shape (1024,) differs from the captured shape (32, 32)"]),
        (FakeTensor(X3, (32, 32), dtype="torch.int32"), ["dtype torch.int32 differs", "torch.float32"]),
        (FakeTensor(X3, (32, 32), device=SimpleNamespace(type="cuda", index=1)), ["device 1", "on device 0"]),
        (FakeTensor(X3, (32, 32), device=SimpleNamespace(type="cpu", index=None)), ["host memory"]),
        (np.zeros((32, 32), np.float32), ["host memory", "ndarray"]),
        ((X3, 1024), ["1024 bytes", "fewer than the 4096 bytes"]),
        (FakeTensor(0, (32, 32)), ["at address 0", "storage was freed"]),  # the layout passed: checked all the same
    ]
    for value, words in cases:
        calls.clear()
        with pytest.raises(OperandError) as e:
            exe.bind(x=value)
        assert all(w in str(e.value) for w in words), str(e.value)
        assert "Graph 'lifted': bind 'x'" in str(e.value)
        assert calls == [] and exe._bindings["x"] == X2  # nothing changed


def test_host_addresses_are_refused(calls, monkeypatch):
    g, _ = lifted()
    g.parametrize(x=(X, 4096))
    exe = make_exe(g, x=X)
    monkeypatch.setattr(_checks, "probe", lambda address: (False, None))
    with pytest.raises(OperandError, match="not memory CUDA knows"):
        exe.bind(x=(X2, 4096))
    assert calls == []


def test_another_device_by_the_driver(calls, monkeypatch):
    g, _ = lifted()
    g.parametrize(x=FakeTensor(X, (1024,)))
    exe = make_exe(g, x=X)
    monkeypatch.setattr(_checks, "probe", lambda address: (True, 3))
    with pytest.raises(OperandError, match="on device 3, the graph was captured with 'x' on device 0"):
        exe.bind(x=X2)
