"""The compiled ``ExecLock``, an executable's lock, behaves as its twin ``threading.Lock`` (no GPU).

The Python paths use it as ``with exe._lock:``; the compiled binds take it without waiting and give it
back by C calls (``cg_lock_take`` / ``cg_lock_give``), which ``tests/test_native_gil_cpu.py`` and
``tests/test_bind_plan_cpu.py`` exercise through real executables.
"""

from __future__ import annotations

import threading
import time

import pytest

from cudagraph.driver import c_entry

pytestmark = pytest.mark.skipif(c_entry.NATIVE is None, reason="cudagraph.driver._native was not built")


def make() -> object:
    return c_entry.NATIVE.ExecLock()


@pytest.mark.parametrize("factory", [threading.Lock, make], ids=["threading.Lock", "ExecLock"])
def test_take_give_and_with_as_threading_lock(factory) -> None:
    lock = factory()
    assert lock.locked() is False
    assert lock.acquire() is True and lock.locked() is True
    assert lock.acquire(False) is False and lock.acquire(blocking=False) is False
    lock.release()
    assert lock.locked() is False
    with lock:
        assert lock.locked() is True
    assert lock.locked() is False
    with pytest.raises(RuntimeError, match="release unlocked lock"):
        lock.release()
    with pytest.raises(ValueError), lock:  # an exception inside `with` gives the lock back
        raise ValueError("inside")
    assert lock.locked() is False


def test_a_waiting_thread_takes_it_once_given_back_and_other_threads_run_meanwhile() -> None:
    lock = make()
    lock.acquire()
    order: list[str] = []

    def waiter() -> None:
        with lock:  # waits with the GIL released
            order.append("waiter")

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)  # the waiter is blocked, and this thread kept running
    order.append("holder")
    assert lock.locked()
    lock.release()
    t.join(5)
    assert not t.is_alive()
    assert order == ["holder", "waiter"] and not lock.locked()


def test_construction_refuses_arguments_and_repr_says_the_state() -> None:
    with pytest.raises(TypeError, match="takes no arguments"):
        c_entry.NATIVE.ExecLock(1)
    with pytest.raises(TypeError, match="takes no arguments"):
        c_entry.NATIVE.ExecLock(x=1)
    lock = make()
    assert repr(lock) == "<cudagraph ExecLock unlocked>"
    lock.acquire()
    assert repr(lock) == "<cudagraph ExecLock locked>"
    del lock  # freed while taken: given back first


def test_executables_hold_one_where_the_module_is_built() -> None:
    from cudagraph.executable import executable

    assert executable._new_lock is c_entry.NATIVE.ExecLock
