"""Rebinding several names at once on the CPU: the compiled ``Executable._bind_many`` and its Python twin.

Every test runs with the recorder of ``test_bind_plan_cpu`` in both modes:
``native`` (the compiled ``patch`` and, where built, the compiled
``_bind_many``) and ``bindings`` (plans made for ``cuda.bindings``, which the
compiled method leaves to the twin). The same calls must give the same driver
calls, the same bindings, raw values and update counts, and the same typed
errors. Whether the compiled path took a call is seen by the checks it skips:
``ValueCheck.convert`` is not called for values it decides itself.
"""

from __future__ import annotations

import struct
import threading
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.executable.bind_checks as _checks
import cudagraph.executable.executable as _executable
from cudagraph.driver import c_entry
from cudagraph.errors import DriverError, ExecutableClosedError, OperandError
from cudagraph.executable.binding import Binding

drv = pytest.importorskip("cuda.bindings.driver")

import test_bind_plan_cpu as _plan  # noqa: E402
import test_parametrize_bind_cpu as _pbind  # noqa: E402
from test_bind_plan_cpu import ABSENT, Cai  # noqa: E402
from test_native_cpu import Buffer  # noqa: E402
from test_parametrize_bind_cpu import data, lifted  # noqa: E402
from test_parametrize_cpu import FakeTensor  # noqa: E402

K, make_exe = _plan.K, _plan.make_exe
calls = _plan.calls  # the recorder fixture
device_memory = _pbind.device_memory  # the fixture faking device memory

X, X2, X3 = 0x7F00_0000_0000, 0x7F10_0000_0000, 0x7F20_0000_0000
OUT, OUT2 = 0x7F00_1000_0000, 0x7F30_0000_0000


def compiled(calls: Any) -> bool:
    """Whether the compiled ``_bind_many`` runs the plans of this mode."""
    return c_entry.NATIVE is not None and getattr(calls, "callback", None) is not None


def parametrized() -> Any:
    g, _ = lifted()
    g.parametrize(x=FakeTensor(X, (32, 32)), out=FakeTensor(OUT, (16, 16)))
    return make_exe(g, x=X, out=OUT)


def recorded(calls: Any) -> list[tuple[int, bytes]]:
    return sorted((d, b) for d, b, _ in calls)


def test_the_method_is_compiled_with_the_twin_wrapped():
    if c_entry.NATIVE is None:
        assert _executable.Executable._bind_many is Binding._bind_many
        return
    method = _executable.Executable._bind_many
    assert type(method).__name__ == "BindManyMethod"
    assert method.func is Binding._bind_many and method.__wrapped__ is Binding._bind_many
    assert method.__doc__ == Binding._bind_many.__doc__ and method.__qualname__ == "Executable._bind_many"


def test_fresh_tensors_of_a_checked_layout_rebind_both_names(calls, converted):
    exe = parametrized()
    t1, t2 = FakeTensor(X2, (32, 32)), FakeTensor(OUT2, (16, 16))
    assert exe.bind(x=t1, out=t2) == 3  # first: checked in full, the plan made
    assert converted == ["x", "out"]
    assert recorded(calls) == [(0x100, data(X2 + 16)), (0x101, data(X2)), (0x102, data(OUT2))]
    converted.clear()
    calls.clear()
    t3, t4 = FakeTensor(X3, (32, 32)), FakeTensor(OUT, (16, 16))
    assert exe.bind(x=t3, out=t4) == 3
    assert converted == ([] if compiled(calls) else ["x", "out"])
    assert recorded(calls) == [(0x100, data(X3 + 16)), (0x101, data(X3)), (0x102, data(OUT))]
    assert exe._bindings == {"x": X3, "out": OUT} and exe.update_calls == 6
    assert exe._raw_bound["x"] is t3 and exe._raw_bound["out"] is t4
    calls.clear()
    t5, t6 = FakeTensor(X3, (32, 32)), FakeTensor(OUT, (16, 16))  # the same addresses under new objects
    assert exe.bind(x=t5, out=t6) == 0 and calls == [] and exe.update_calls == 6
    assert exe._raw_bound["x"] is t5 and exe._raw_bound["out"] is t6
    assert exe.bind(x=t5, out=t6) == 0 and calls == []  # the objects bound
    converted.clear()
    t7 = FakeTensor(X2, (32, 32))
    assert exe.bind(x=t7, out=t6) == 2  # one name changed: its own plan (made now), 2 nodes
    assert recorded(calls) == [(0x100, data(X2 + 16)), (0x101, data(X2))]
    assert exe.bind(x=FakeTensor(X3, (32, 32)), out=t6) == 2  # the plan of x alone, prepared
    assert converted == (["x"] if compiled(calls) else ["x", "x"])
    assert exe._bindings == {"x": X3, "out": OUT} and exe.update_calls == 10


def test_one_fresh_tensor_of_a_checked_layout_takes_the_compiled_path_too(calls, converted, monkeypatch):
    """``exe.bind(x=t)`` and ``exe.launch(s, x=t)`` of one name: where the one-name compiled bind leaves the
    value (a tensor, read by its reader), the compiled ``_bind_many`` takes it with that one name, as the
    twins (``_bind_one``, ``_bind_many``) do the same for one name."""
    launched: list[tuple[int, int]] = []
    monkeypatch.setattr(_executable, "_LAUNCH", lambda e, s: launched.append((int(e), int(s))) or (0,))
    _plan.python_launch(monkeypatch)
    exe = parametrized()
    assert exe.bind(x=FakeTensor(X2, (32, 32))) == 2  # first: checked in full, the plan made
    assert converted == ["x"]
    converted.clear()
    calls.clear()
    t = FakeTensor(X3, (32, 32))
    assert exe.bind(x=t) == 2
    assert converted == ([] if compiled(calls) else ["x"])
    assert recorded(calls) == [(0x100, data(X3 + 16)), (0x101, data(X3))]
    assert exe._bindings == {"x": X3, "out": OUT} and exe._raw_bound["x"] is t and exe.update_calls == 4
    assert exe.bind(x=t) == 0 and exe.bind(x=FakeTensor(X3, (32, 32))) == 0 and exe.update_calls == 4
    converted.clear()
    calls.clear()
    stream = drv.CUstream(0x99)
    exe.launch(stream, x=FakeTensor(X2, (32, 32)))
    assert converted == ([] if compiled(calls) else ["x"])
    assert recorded(calls) == [(0x100, data(X2 + 16)), (0x101, data(X2))]
    assert launched == [(0x4242, 0x99)] and exe._bindings == {"x": X2, "out": OUT} and exe.update_calls == 6
    with pytest.raises(OperandError, match="2048 bytes, fewer than the 4096"):  # a new layout: the twin's check
        exe.bind(x=FakeTensor(X3, (16, 32)))
    assert exe._bindings == {"x": X2, "out": OUT} and exe.update_calls == 6


def test_a_rebinding_launch_takes_the_same_path_and_launches_once(calls, converted, monkeypatch):
    launched: list[tuple[int, int]] = []
    monkeypatch.setattr(_executable, "_LAUNCH", lambda e, s: launched.append((int(e), int(s))) or (0,))
    _plan.python_launch(monkeypatch)
    exe = parametrized()
    stream = drv.CUstream(0x99)
    exe.launch(stream, x=FakeTensor(X2, (32, 32)), out=FakeTensor(OUT2, (16, 16)))
    converted.clear()
    calls.clear()
    exe.launch(stream, x=FakeTensor(X3, (32, 32)), out=FakeTensor(OUT, (16, 16)))
    assert recorded(calls) == [(0x100, data(X3 + 16)), (0x101, data(X3)), (0x102, data(OUT))]
    assert converted == ([] if compiled(calls) else ["x", "out"])
    assert launched == [(0x4242, 0x99)] * 2 and exe.update_calls == 6


def test_values_the_compiled_path_cannot_decide_get_the_twins_errors(calls, converted, device_memory):
    exe = parametrized()
    exe.bind(x=FakeTensor(X2, (32, 32)), out=FakeTensor(OUT2, (16, 16)))
    calls.clear()
    converted.clear()
    cases = [
        ({"x": FakeTensor(X3, (16, 32)), "out": FakeTensor(OUT, (16, 16))}, "2048 bytes, fewer than the 4096"),
        ({"x": FakeTensor(X3, (32, 32)), "out": FakeTensor(OUT, (16, 16), dtype="torch.int32")}, "dtype torch.int32"),
        ({"x": FakeTensor(X3, (32, 32)), "nope": 1}, "has no parameter 'nope'"),
        ({"x": FakeTensor(X3, (32, 32)), "out": np.zeros(4)}, "host memory"),
    ]
    for params, words in cases:
        with pytest.raises(OperandError, match=words):
            exe.bind(**params)
        assert calls == [] and exe._bindings == {"x": X2, "out": OUT2} and exe.update_calls == 3
    assert converted[-1] == "out"  # the twin checked them
    assert exe.bind(x=X3, out=OUT2) == 2  # an address not bound: asked of the driver by the twin
    assert device_memory == [X3]
    assert exe._bindings == {"x": X3, "out": OUT2}


def test_torch_tensors_take_the_compiled_path_once_their_layout_passed(calls, converted, monkeypatch):
    torch = pytest.importorskip("torch")
    checked: list[tuple[int, ...]] = []

    def full(name: str, captured: Any, value: Any, graph: str) -> int:  # CPU tensors stand for CUDA ones here
        checked.append(tuple(value.shape))
        if tuple(value.shape) not in ((32, 32), (16, 16)) or not value.is_contiguous() or value.dtype != torch.float32:
            raise OperandError(f"bind {name!r}: another layout")
        return int(value.data_ptr())

    monkeypatch.setattr(_checks, "checked_address", full)
    exe = parametrized()
    exe.bind(x=torch.zeros(32, 32), out=torch.zeros(16, 16))
    assert checked == [(32, 32), (16, 16)]
    converted.clear()
    calls.clear()
    c, d = torch.zeros(32, 32), torch.zeros(16, 16)
    assert exe.bind(x=c, out=d) == 3 and checked == [(32, 32), (16, 16)]  # the layouts passed: not checked again
    cp, dp = c.data_ptr(), d.data_ptr()
    assert recorded(calls) == sorted([(0x100, data(cp + 16)), (0x101, data(cp)), (0x102, data(dp))])
    assert converted == ([] if compiled(calls) else ["x", "out"])
    assert exe._bindings == {"x": cp, "out": dp} and exe.update_calls == 6
    e = torch.zeros(32, 32)
    e.resize_(16, 64)  # another layout, changed in place: checked in full
    with pytest.raises(OperandError, match="bind 'x': another layout"):
        exe.bind(x=e, out=torch.zeros(16, 16))
    assert exe._bindings == {"x": cp, "out": dp} and exe.update_calls == 6


def test_a_refusal_leaves_the_state_as_the_twin_does(calls, converted):
    exe = parametrized()
    exe.bind(x=FakeTensor(X2, (32, 32)), out=FakeTensor(OUT2, (16, 16)))
    calls.clear()
    converted.clear()
    calls.refuse.add(0x101)
    t1, t2 = FakeTensor(X3, (32, 32)), FakeTensor(OUT, (16, 16))
    with pytest.raises(DriverError, match=r"cuGraphExecKernelNodeSetParams failed.*kernel#1"):
        exe.bind(x=t1, out=t2)
    assert converted == ([] if compiled(calls) else ["x", "out"])
    assert exe._bindings == {"x": X3, "out": OUT} and exe._raw_bound == {"x": t1, "out": t2}
    assert exe.update_calls == 3  # no count added for the refused rebind
    assert [d for d, _b, _s in calls] == [0x100, 0x101]  # (one entry: the node before, then the refused one)


def test_one_name_of_a_refused_plan_of_its_own(calls):
    exe = parametrized()
    t = FakeTensor(OUT, (16, 16))
    exe.bind(x=FakeTensor(X2, (32, 32)), out=t)  # out is the object bound: x alone
    calls.clear()
    calls.refuse.add(0x100)
    with pytest.raises(DriverError, match=r"kernel#0"):
        exe.bind(x=FakeTensor(X3, (32, 32)), out=t)
    assert exe._bindings["x"] == X3 and exe.update_calls == 2


def test_plain_pointers_take_ints_and_buffers(calls, converted):
    g = cg.Graph("g")
    p, r = g.param("p"), g.param("r")
    a, n = np.float32(2.0), np.int32(64)
    g.kernel(K, 1, 32, (p, a, n))
    g.kernel(K, 1, 32, (r, a, n))
    exe = make_exe(g, p=0x1000, r=0x2000)
    assert exe.bind(p=Buffer(0x3000), r=0x4000) == 2
    converted.clear()
    calls.clear()
    assert exe.bind(p=Buffer(0x5000), r=0x6000) == 2
    assert [(d, b[:8]) for d, b, _ in calls] == [(0x100, struct.pack("<Q", 0x5000)), (0x101, struct.pack("<Q", 0x6000))]
    assert converted == ([] if compiled(calls) else ["p", "r"])
    assert exe.bind(p=Buffer(0x5000), r=0x6000) == 0  # the same addresses
    converted.clear()
    for bad, words in (
        (-5, "address -5 is outside"),
        (1 << 64, "address 18446744073709551616 is outside"),
        (1.5, "expected device memory or an address, got float 1.5"),
    ):
        with pytest.raises(OperandError, match=f"param 'p': {words}"):
            exe.bind(p=bad, r=0x7000)
        assert exe._bindings == {"p": 0x5000, "r": 0x6000}
    assert converted == ["p"] * 3 and exe.update_calls == 4
    calls.clear()
    assert exe.bind(p=0, r=0x7000) == 2  # a null address: the twin takes it
    assert [(d, b[:8]) for d, b, _ in calls] == [(0x100, bytes(8)), (0x101, struct.pack("<Q", 0x7000))]
    assert exe._bindings == {"p": 0, "r": 0x7000} and exe.update_calls == 6


def test_scalars_go_to_the_twin(calls, converted):
    g = cg.Graph("g")
    p, s = g.param("p"), g.param("s", np.float32)
    g.kernel(K, 1, 32, (p, s, np.int32(64)))
    exe = make_exe(g, p=0x1000, s=np.float32(1.0))
    assert exe.bind(p=0x2000, s=2.5) == 1
    converted.clear()
    calls.clear()
    assert exe.bind(p=0x3000, s=3.5) == 1
    assert converted == ["p", "s"]  # (a scalar: the twin converts both)
    assert calls[0][1] == struct.pack("<Qfi", 0x3000, 3.5, 64)


def test_a_held_lock_makes_the_call_wait(calls):
    exe = parametrized()
    exe.bind(x=FakeTensor(X2, (32, 32)), out=FakeTensor(OUT2, (16, 16)))
    calls.clear()
    out: list[int] = []
    exe._lock.acquire()
    try:
        t = threading.Thread(
            target=lambda: out.append(exe.bind(x=FakeTensor(X3, (32, 32)), out=FakeTensor(OUT, (16, 16))))
        )
        t.start()
        t.join(0.3)
        assert t.is_alive() and calls == [] and exe._bindings["x"] == X2
    finally:
        exe._lock.release()
    t.join(10)
    assert out == [3] and exe._bindings == {"x": X3, "out": OUT}


def test_a_closed_executable_is_named(calls):
    exe = parametrized()
    exe.bind(x=FakeTensor(X2, (32, 32)), out=FakeTensor(OUT2, (16, 16)))
    exe.close()
    with pytest.raises(ExecutableClosedError):
        exe.bind(x=FakeTensor(X3, (32, 32)), out=FakeTensor(OUT, (16, 16)))


def _layouts(torch: Any) -> list[Any]:
    """Tensors of many layouts: shapes, dtypes, transposes, slices, expanded and 0-d ones."""
    base = torch.zeros(32, 32)
    return [
        torch.zeros(32, 32),
        torch.zeros(16, 16),
        torch.zeros(32, 32, dtype=torch.float64),
        torch.zeros(32, 32, dtype=torch.int32),
        base.t(),
        base[1:],
        base[:, ::2],
        base.view(16, 64),
        base.view(1, 32, 32),
        torch.zeros(1).expand(32, 32),
        torch.zeros(()),
        torch.zeros(32, 32)[0:32],
        torch.zeros(16, 16).t().contiguous(),
    ]


@pytest.fixture(params=["dlpack", "getters"])
def tensor_reads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the compiled ``_bind_many`` reads an exact torch tensor: through DLPack's C exchange API (where the
    installed torch has one) or through torch's getters (``torch_dlpack=False``)."""
    if request.param == "getters" and c_entry.NATIVE is not None:
        monkeypatch.setattr(_executable.Executable, "_bind_many", _executable._bind_many_method(torch_dlpack=False))
    return str(request.param)


@pytest.mark.usefixtures("tensor_reads")
def test_torch_tensors_read_in_c_decide_as_the_twins_key_lookup(calls, converted, monkeypatch):
    """The compiled rebind compares a tensor's layout with those that passed item by item: it takes the value
    exactly when the twin's reader key is in the layouts that passed, and leaves every other to the twin."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(_checks, "checked_address", lambda name, captured, value, graph: int(value.data_ptr()))
    kept: list[Any] = []  # every tensor stays alive: a new one at a freed one's address would change the plan
    for first, second in [(0, 1), (4, 1), (2, 3), (9, 10), (6, 7)]:
        exe = parametrized()
        tensors = _layouts(torch)
        kept.append(tensors)
        exe.bind(x=tensors[first], out=tensors[second])  # these layouts pass the check (in full, by the twin)
        passed_x, passed_out = exe._checks["x"].memory.passed, exe._checks["out"].memory.passed
        for i in range(len(tensors)):
            for u in (_layouts(torch)[second], torch.zeros(16, 16, dtype=torch.float64)):
                t = _layouts(torch)[i]  # fresh objects at new addresses: both names change, one plan
                kept.append((t, u))
                expected = _checks._torch_tensor(t)[1] in passed_x and _checks._torch_tensor(u)[1] in passed_out
                converted.clear()
                exe.bind(x=t, out=u)
                took = compiled(calls) and not converted
                assert took == (expected and compiled(calls)), (first, second, t.shape, t.stride(), t.dtype, converted)
                assert converted in ([], ["x", "out"])
                assert exe._bindings == {"x": t.data_ptr(), "out": u.data_ptr()}


def test_a_tensor_of_no_address_goes_to_the_twin(calls, converted, monkeypatch):
    """A tensor of a layout that passed but at address 0 (its storage freed, or on the meta device) is not taken
    by the compiled rebind: the twin checks it (here the check refuses it) and nothing is changed."""
    torch = pytest.importorskip("torch")

    def check(name: str, captured: Any, value: Any, graph: str) -> int:
        if not value.data_ptr():
            raise OperandError(f"bind {name!r}: no memory")
        return int(value.data_ptr())

    monkeypatch.setattr(_checks, "checked_address", check)
    exe = parametrized()
    a, b = torch.zeros(32, 32), torch.zeros(16, 16)
    exe.bind(x=a, out=b)
    c, d = torch.zeros(32, 32), torch.zeros(16, 16)
    converted.clear()
    exe.bind(x=c, out=d)
    assert converted == ([] if compiled(calls) else ["x", "out"])
    for gone in (torch.zeros(32, 32), torch.empty(32, 32, device="meta")):
        if gone.device.type == "cpu":
            gone.untyped_storage().resize_(0)
        converted.clear()
        with pytest.raises(OperandError, match="bind 'x': no memory"):
            exe.bind(x=gone, out=torch.zeros(16, 16))
        assert converted == ["x"]  # the twin checked it (and stopped there)
        assert exe._bindings == {"x": c.data_ptr(), "out": d.data_ptr()}


class CaiOnDevice(Cai):
    """The same with ``device.id``, as CuPy arrays have it (read by ``bind_checks._cai_device``)."""

    __slots__ = ("device",)

    def __init__(self, ptr: int, shape: Any, device: int = 0, **kw: Any) -> None:
        super().__init__(ptr, shape, **kw)
        self.device = type("Device", (), {"__slots__": (), "id": device})()


def _cai_layouts(cls: type, ptr: int) -> list[Any]:
    """Arrays of many layouts (typestr, shape, strides present or not; device ids); the last ones hold items
    of other types (a numpy int in the shape, a str subclass), which the twin's key compares equal."""

    class Str(str):
        pass

    extra = [{"device": 1}] if cls is CaiOnDevice else []
    kinds = [
        {},
        {"typestr": "<f2"},
        {"typestr": ABSENT},
        {"strides": (128, 4)},
        {"strides": ABSENT},
        {"strides": (4, 128)},
        *extra,
    ]
    made = [cls(ptr, (32, 32), **k) for k in kinds]
    made += [cls(ptr, (16, 64)), cls(ptr, (1024,)), cls(ptr, ())]
    made += [cls(ptr, (np.int64(32), 32)), cls(ptr, (32, 32), typestr=Str("<f4"))]
    return made


@pytest.mark.parametrize("cls", [Cai, CaiOnDevice])
def test_array_interfaces_read_in_c_decide_as_the_twins_key_lookup(calls, converted, monkeypatch, cls):
    """The compiled rebind reads a fresh ``__cuda_array_interface__`` and compares its layout with those that
    passed item by item: it never takes a value the twin's key lookup would not (a layout that did not pass,
    an item of another type) and takes every plain one that passed."""
    read = _checks._cai_device if cls is CaiOnDevice else _checks._cai
    assert _checks.reader(cls) is read
    monkeypatch.setattr(
        _checks, "checked_address", lambda name, captured, value, graph: value if type(value) is int else read(value)[0]
    )
    plain = len(_cai_layouts(cls, X)) - 2  # the last two hold items of other types
    for first, second in [(0, 1), (3, 2), (4, 5), (plain - 1, 0)]:
        exe = parametrized()
        exe.bind(x=_cai_layouts(cls, X2)[first], out=_cai_layouts(cls, OUT2)[second])  # these layouts pass
        passed_x, passed_out = exe._checks["x"].memory.passed, exe._checks["out"].memory.passed
        for i, t in enumerate(_cai_layouts(cls, X3)):
            for j, u in enumerate((_cai_layouts(cls, OUT)[second], cls(OUT, (7,), typestr="<i8"))):
                expected = read(t)[1] in passed_x and read(u)[1] in passed_out
                converted.clear()
                exe.bind(x=t, out=u)
                took = compiled(calls) and not converted
                assert took <= expected, (first, second, i, j)
                if i < plain:
                    assert took == (expected and compiled(calls)), (first, second, i, j, converted)
                assert exe._bindings == {"x": X3, "out": OUT}
                exe.bind(x=X2, out=OUT2)  # (addresses: the next pair changes both names again)


def test_torch_tensors_are_read_through_dlpack_where_torch_has_its_c_exchange_api(calls, converted, monkeypatch):
    """Where torch offers DLPack's C exchange API, the compiled rebind reads a tensor's address, shape, strides and
    device through it (torch's getters for those are not called; the dtype is still read) and takes the same
    decisions and addresses as through the getters."""
    torch = pytest.importorskip("torch")
    if not compiled(calls):
        pytest.skip("the compiled _bind_many does not run the plans of this mode")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} has no __dlpack_c_exchange_api__ (the getters are read)")
    monkeypatch.setattr(_checks, "checked_address", lambda name, captured, value, graph: int(value.data_ptr()))
    exe = parametrized()
    exe.bind(x=torch.zeros(32, 32), out=torch.zeros(16, 16))  # the layouts pass (in full, by the twin)
    read: list[str] = []
    for getter in ("data_ptr", "stride", "get_device"):
        monkeypatch.setattr(torch.Tensor, getter, _counted(getattr(torch.Tensor, getter), getter, read))
    for name in ("shape", "is_cuda"):
        monkeypatch.setattr(torch.Tensor, name, property(_counted(getattr(torch.Tensor, name).__get__, name, read)))
    for getters in (False, True):
        method = _executable._bind_many_method(torch_dlpack=not getters)
        monkeypatch.setattr(_executable.Executable, "_bind_many", method)
        kept = [(torch.zeros(32, 32), torch.zeros(16, 16)) for _ in range(3)]
        for x, out in kept:
            read.clear()
            converted.clear()
            exe.bind(x=x, out=out)
            assert converted == []  # decided in C
            assert sorted(set(read)) == (["data_ptr", "get_device", "is_cuda", "shape", "stride"] if getters else [])
            assert exe._bindings == {"x": x.data_ptr(), "out": out.data_ptr()}
        read.clear()
        converted.clear()
        other = torch.zeros(16, 128 if getters else 64)  # a layout not seen yet: the twin checks it
        exe.bind(x=other, out=torch.zeros(16, 16))
        assert converted == ["x", "out"]


def _counted(getter: Any, name: str, read: list[str]) -> Any:
    def counted(self: Any, *args: Any) -> Any:
        read.append(name)
        return getter(self, *args)

    return counted
