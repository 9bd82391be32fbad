"""The compiled rebinds release the GIL in every driver call and hold the executable's lock meanwhile.

The driver's set call is replaced by libc's ``usleep``: called as
``set(exec, node, params)`` with the executable handle of these tests (0x4242),
it blocks for 16962 µs and returns 0 (success) without touching Python. While a
worker thread rebinds, the main thread counts its own turns and how often it
sees the executable's lock held: with the GIL held through the driver call it
would get no turn during the 17 ms sleeps, and the compiled fast paths (which
hold the lock from their test to the write-back) would never show it held.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any

import pytest

import cudagraph.ops.kinds.kernel as _kernel_writer
from cudagraph.driver import c_entry
from cudagraph.errors import ExecutableClosedError
from cudagraph.executable.binding import Binding

pytest.importorskip("cuda.bindings.driver")

import test_bind_plan_cpu as _plan
from test_bind_many_cpu import OUT, OUT2, X2, X, parametrized
from test_parametrize_cpu import FakeTensor

calls = _plan.calls  # the recorder fixture: the fake kernel layout, then replaced by the sleeping driver here

pytestmark = [
    pytest.mark.skipif(c_entry.NATIVE is None, reason="cudagraph.driver._native is not built, or CUDAGRAPH_NO_C_ENTRY"),
    pytest.mark.parametrize("calls", ["native"], indirect=True),  # the compiled rebinds run the native plans only
]


@pytest.fixture
def sleeping_driver(calls: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``usleep`` as the kernel-node set call (native mode only); lists the names the Python twin checked."""
    if getattr(calls, "callback", None) is None:
        pytest.skip("the compiled rebinds run only the plans made for the compiled module")
    usleep = ctypes.CDLL(None).usleep
    monkeypatch.setattr(_kernel_writer, "_SET_KERNEL_ADDR", ctypes.cast(usleep, ctypes.c_void_p).value)
    checked: list[str] = []
    real = Binding._new_value

    def new_value(self: Any, name: str, value: Any) -> Any:
        checked.append(name)
        return real(self, name, value)

    monkeypatch.setattr(Binding, "_new_value", new_value)
    return checked


def watched(exe: Any, work: Any) -> tuple[int, int]:
    """Run ``work()`` in a thread; the main thread's turns meanwhile, and how many saw the lock held."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    t = threading.Thread(target=run)
    turns = held = 0
    t.start()
    while t.is_alive():
        turns += 1
        held += exe._lock.locked()
        time.sleep(0.0005)
    t.join()
    if errors:
        raise errors[0]
    return turns, held


def test_one_name_rebound_in_c_lets_other_threads_run_and_holds_the_lock(sleeping_driver):
    g, _ = _plan.build()
    exe = _plan.make_exe(g, p=0x1000)
    assert exe.bind(p=0x2000) == 5  # the Python method: makes the plan
    sleeping_driver.clear()
    before = exe.update_calls
    t0 = time.perf_counter()
    turns, held = watched(exe, lambda: [exe.bind(p=a) for a in (0x3000, 0x4000, 0x5000)])
    took = time.perf_counter() - t0
    assert sleeping_driver == []  # every call was the compiled method's
    assert exe.update_calls == before + 15 and exe._bindings["p"] == 0x5000 and exe._raw_bound["p"] == 0x5000
    assert took >= 15 * 0.016  # fifteen sleeping driver calls
    assert turns >= 20 and held >= 10, (turns, held)  # the main thread ran during the calls, the lock held
    assert not exe._lock.locked()


def test_several_names_rebound_in_c_let_other_threads_run_and_hold_the_lock(sleeping_driver):
    exe = parametrized()
    pairs = [(X2, OUT2), (X, OUT)]
    assert exe.bind(x=FakeTensor(X2, (32, 32)), out=FakeTensor(OUT2, (16, 16))) == 3  # the twin: checks, plans
    sleeping_driver.clear()
    before = exe.update_calls

    def work() -> None:
        for i in range(4):
            x, out = pairs[(i + 1) % 2]
            assert exe._bind_many({"x": FakeTensor(x, (32, 32)), "out": FakeTensor(out, (16, 16))}) == 3

    turns, held = watched(exe, work)
    assert sleeping_driver == []  # layouts already checked: every call was the compiled method's
    assert exe.update_calls == before + 12 and exe._bindings == {"x": X2, "out": OUT2}
    assert turns >= 20 and held >= 10, (turns, held)
    assert not exe._lock.locked()


def test_threads_rebinding_one_executable_leave_the_bindings_and_raw_values_agreeing(sleeping_driver):
    g, _ = _plan.build()
    exe = _plan.make_exe(g, p=0x1000)
    exe.bind(p=0x2000)
    before = exe.update_calls
    done: list[int] = []

    def worker(base: int) -> None:
        for i in range(3):
            done.append(exe.bind(p=base + 0x100 * i))

    threads = [threading.Thread(target=worker, args=(0x10_0000 * (t + 1),)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert done == [5] * 9  # every bind changed the address: five nodes each, none lost
    assert exe.update_calls == before + 45
    assert exe._bindings["p"] == exe._raw_bound["p"]  # the last writer's address, in both
    assert not exe._lock.locked()


def test_close_waits_for_a_rebind_running_in_another_thread(sleeping_driver):
    g, _ = _plan.build()
    exe = _plan.make_exe(g, p=0x1000)
    exe.bind(p=0x2000)
    out: list[int] = []
    t = threading.Thread(target=lambda: out.append(exe.bind(p=0x3000)))  # five sleeping calls, about 85 ms
    t.start()
    while not exe._lock.locked():  # the compiled bind holds the lock through its driver calls
        time.sleep(0.0005)
    t0 = time.perf_counter()
    exe.close()
    waited = time.perf_counter() - t0
    t.join()
    assert out == [5] and exe.closed
    assert waited >= 0.016  # at least the rest of one driver call
    with pytest.raises(ExecutableClosedError):
        exe.bind(p=0x4000)
