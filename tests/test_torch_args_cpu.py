"""PyTorch tensors as kernel arguments of stream launches, on the CPU: the compiled packer's kind 'T'.

CPU tensors stand for CUDA ones: ``Tensor.is_cuda`` and ``__dlpack_device__`` say CUDA, and
``torch.Tensor.__dlpack_c_exchange_api__`` is replaced by a table (built with ctypes) whose
``dltensor_from_py_object_no_sync`` calls torch's own and reports the tensor on CUDA device 0.
``cg.launch`` then runs through the compiled launcher and its Python twin against the recording
driver of ``test_stream_launch_cpu``: the same calls, the bytes the tensors' addresses, and the
compiled path taking every launch after the first of a kind.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.memory_info import _GET_POINTER, _DLTensor
from cudagraph.errors import OperandError

torch = pytest.importorskip("torch")

from test_stream_launch_cpu import K1, Driver, Stream, calls_both_ways, k1_bytes  # noqa: E402

pytestmark = pytest.mark.skipif(
    not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"),
    reason=f"torch {torch.__version__} has no __dlpack_c_exchange_api__",
)


FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_DLTensor))


class Table(ctypes.Structure):  # DLPackExchangeAPI: its header, then five function pointers
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("prev_api", ctypes.c_void_p),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", FROM_PY),
        ("current_work_stream", ctypes.c_void_p),
    ]


@pytest.fixture
def on_cuda(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Tensors on "CUDA device 0" (see the module's docstring); the list counts the table's calls."""
    real = ctypes.cast(
        _GET_POINTER(torch.Tensor.__dlpack_c_exchange_api__, b"dlpack_exchange_api"), ctypes.POINTER(Table)
    ).contents
    calls: list[int] = []

    def from_py(obj: int, out: Any) -> int:
        calls.append(obj)
        rc = real.dltensor_from_py_object_no_sync(obj, out)
        out.contents.device_type, out.contents.device_id = 2, 0  # kDLCUDA, device 0
        return int(rc)

    table = Table(real.major, real.minor, None, None, None, None, FROM_PY(from_py), None)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    name = ctypes.c_char_p(b"dlpack_exchange_api")  # (the capsule keeps the pointer: kept alive with the table)
    capsule = new(ctypes.addressof(table), name, None)
    monkeypatch.setattr(torch.Tensor, "__dlpack_c_exchange_api__", capsule)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(torch.Tensor, "__dlpack_device__", lambda self: (2, 0))
    yield calls  # (the table, its name and the callback stay alive until the test ends)
    del table, name


def tensors() -> list[Any]:
    base = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)
    return [
        torch.zeros(32),
        base[3:, 5:],
        base.t(),
        torch.zeros(1).expand(16, 16),
        torch.zeros(4, dtype=torch.float16),
        torch.zeros(0, 8),  # no elements: address 0
    ]


def test_tensors_launch_through_the_compiled_packer_as_through_python(monkeypatch, on_cuda):
    kept = [tensors() for _ in range(3)]

    def work(d: Driver) -> None:
        s = Stream(0x77)
        for ts in kept:
            for i, t in enumerate(ts):
                cg.launch(s, (1, 32), K1, t, np.float32(i), np.int32(i))

    compiled, python = calls_both_ways(monkeypatch, work)
    assert compiled.launches == python.launches and len(compiled.launches) == 18
    want = [t.data_ptr() if t.numel() else 0 for ts in kept for t in ts]
    assert [call[-1] for call in compiled.launches] == [k1_bytes(w, float(i % 6), i % 6) for i, w in enumerate(want)]
    assert python.by_bindings == 18 and compiled.by_bindings == 1  # the first teaches the kinds
    assert len(on_cuda) >= 17  # the compiled packer read each later tensor through the table


def test_a_tensor_that_requires_grad_is_refused_both_ways(monkeypatch, on_cuda):
    errors: list[str] = []

    def work(d: Driver) -> None:
        s = Stream(0x77)
        cg.launch(s, (1, 32), K1, torch.zeros(8), np.float32(1), np.int32(1))  # teaches the kinds
        with pytest.raises(OperandError, match="requires grad") as e:
            cg.launch(s, (1, 32), K1, torch.zeros(8, requires_grad=True), np.float32(1), np.int32(1))
        errors.append(str(e.value))

    compiled, python = calls_both_ways(monkeypatch, work)
    assert len(compiled.launches) == len(python.launches) == 1 and errors[0] == errors[1]


def test_without_the_table_the_getters_serve(monkeypatch, on_cuda):
    monkeypatch.delattr(torch.Tensor, "__dlpack_c_exchange_api__")
    t = torch.zeros(8)

    def work(d: Driver) -> None:
        for _ in range(3):
            cg.launch(Stream(0x77), (1, 32), K1, t, np.float32(1), np.int32(1))

    compiled, python = calls_both_ways(monkeypatch, work)
    assert (
        compiled.launches
        == python.launches
        == [(0x71, (1, 1, 1), (32, 1, 1), 0, 0x77, k1_bytes(t.data_ptr(), 1, 1))] * 3
    )
    assert compiled.by_bindings == 3 and on_cuda == []  # the compiled packer declined: the Python path packed
