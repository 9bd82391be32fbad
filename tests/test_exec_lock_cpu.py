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


@pytest.mark.parametrize("factory", [threading.Lock, make], ids=["threading.Lock", "ExecLock"])
def test_timeouts_as_threading_lock(factory) -> None:
    """``acquire(timeout=)``: a held lock is waited for that long, then ``False``; a free one is taken; the
    arguments threading.Lock refuses are refused with its errors."""
    lock = factory()
    assert lock.acquire(timeout=0.5) is True
    for timeout, least in ((0, 0.0), (0.05, 0.045), (0.2, 0.19)):
        t0 = time.monotonic()
        assert lock.acquire(True, timeout) is False
        waited = time.monotonic() - t0
        assert least <= waited < least + 0.5, (timeout, waited)
    assert lock.acquire(timeout=-1, blocking=False) is False
    with pytest.raises(ValueError, match="can't specify a timeout for a non-blocking call"):
        lock.acquire(False, 1)
    with pytest.raises(ValueError, match="timeout value must be"):  # (positive, or a non-negative number: 3.13)
        lock.acquire(timeout=-2)
    with pytest.raises(OverflowError):
        lock.acquire(timeout=1e300)
    with pytest.raises(ValueError, match="Invalid value NaN"):
        lock.acquire(timeout=float("nan"))
    assert lock.locked() is True
    lock.release()
    done: list[bool] = []
    lock.acquire()
    t = threading.Thread(target=lambda: done.append(lock.acquire(timeout=5)))
    t.start()
    time.sleep(0.05)
    lock.release()  # the waiter takes it before its time is up
    t.join(5)
    assert done == [True] and lock.locked() is True
    lock.release()


@pytest.mark.parametrize("factory", [threading.Lock, make], ids=["threading.Lock", "ExecLock"])
def test_a_signal_during_a_wait_runs_its_handler(factory) -> None:
    """A signal while the main thread waits runs its handler: the wait goes on for the time left (timed) or
    ends with the handler's exception."""
    import signal

    lock = factory()
    lock.acquire()
    seen: list[float] = []

    def note(signum: int, frame: object) -> None:
        seen.append(time.monotonic())

    def fail(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("from the handler")

    old = signal.signal(signal.SIGALRM, note)
    try:
        t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        assert lock.acquire(timeout=0.3) is False
        waited = time.monotonic() - t0  # (a wait started again in full after the handler: 0.5)
        assert len(seen) == 1 and seen[0] - t0 < 0.29 and 0.29 <= waited < 0.45, (seen, waited)
        signal.signal(signal.SIGALRM, fail)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(KeyboardInterrupt, match="from the handler"):
            lock.acquire()  # no timeout: only the handler ends the wait
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert lock.locked() is True
    lock.release()
