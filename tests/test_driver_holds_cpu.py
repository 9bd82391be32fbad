"""What a handed-out driver graph keeps alive (cudagraph.driver.driver_holds), without a GPU: a stand-in driver
records the user object's destructor, and the test plays the driver letting go by calling it (the C library's
``sem_post``) as the driver's thread would."""

from __future__ import annotations

import ctypes
import gc
import weakref
from types import SimpleNamespace
from typing import Any

import pytest

from cudagraph.driver import calls, driver_holds


class Owner:
    """Something a graph's node refers to (weak-referenceable)."""


class StandInDriver:
    """``cuUserObjectCreate`` / ``cuGraphRetainUserObject`` recording what the driver is handed."""

    def __init__(self, create_error: int = 0, retain_error: int = 0) -> None:
        self.created: list[tuple[int, int]] = []
        self.retained: list[tuple[Any, Any, int, Any]] = []
        self.released: list[Any] = []
        self.create_error, self.retain_error = create_error, retain_error
        self.CUhostFn = int
        self.CUuserObject_flags = SimpleNamespace(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC=1)
        self.CUuserObjectRetain_flags = SimpleNamespace(CU_GRAPH_USER_OBJECT_MOVE=1)

    def cuUserObjectCreate(self, ptr: int, destroy: int, count: int, flags: int) -> tuple[int, Any]:
        assert (count, flags) == (1, 1)
        if self.create_error:
            return self.create_error, None
        self.created.append((ptr, destroy))
        return 0, f"obj{len(self.created)}"

    def cuGraphRetainUserObject(self, graph: Any, obj: Any, count: int, flags: int) -> tuple[int]:
        self.retained.append((graph, obj, count, flags))
        return (self.retain_error,)

    def cuUserObjectRelease(self, obj: Any, count: int) -> tuple[int]:
        self.released.append(obj)
        return (0,)


@pytest.fixture
def drv(monkeypatch: pytest.MonkeyPatch) -> StandInDriver:
    if driver_holds._libc() is None:
        pytest.skip("no C library with POSIX semaphores here")
    d = StandInDriver()
    monkeypatch.setattr(calls, "require_driver", lambda: d)
    return d


def let_go(destroy: int, ptr: int) -> None:
    """What the driver does once the graph and every copy are gone: call the destructor with its pointer."""
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(destroy)(ptr)


def test_owners_stay_until_the_driver_lets_go_then_go_and_on_release_runs(drv):
    owner, released = Owner(), []
    ref = weakref.ref(owner)
    before = driver_holds.held_count()
    driver_holds.hold("graph", (owner, [owner]), lambda: released.append(True))
    del owner
    gc.collect()
    assert ref() is not None and driver_holds.held_count() == before + 1
    ((ptr, destroy),) = drv.created
    assert destroy == driver_holds._libc().sem_post_address  # the C library's: no Python code in the destructor
    assert drv.retained == [("graph", "obj1", 1, 1)]  # the reference moved into the graph: copies retain it
    let_go(destroy, ptr)
    gc.collect()  # (polled after each collection)
    assert ref() is None and driver_holds.held_count() == before
    assert released == [True]  # run after the collection too (an on_release never waits for a lock)
    driver_holds.release_finished()
    assert released == [True]  # (once)


def test_a_key_forgotten_while_the_lock_is_held_is_forgotten_at_the_next_prune():
    from cudagraph.driver import host_callbacks

    key = host_callbacks.register(print, (), [], None)
    with host_callbacks._LOCK:  # (as a collection started while this thread registers a callback)
        host_callbacks.forget_soon([key])  # never waits: left for later
        assert key in host_callbacks._REGISTRY
    host_callbacks.prune_retired()
    assert key not in host_callbacks._REGISTRY and host_callbacks._FORGET_LATER == []
    other = host_callbacks.register(print, (), [], None)
    host_callbacks.forget_soon([other])  # the lock is free: at once
    assert other not in host_callbacks._REGISTRY


def test_a_refused_user_object_keeps_the_owners_for_good(drv, monkeypatch):
    monkeypatch.setattr(driver_holds, "_FOREVER", [])
    for create_error, retain_error in ((1, 0), (0, 1)):
        drv.create_error, drv.retain_error = create_error, retain_error
        owner = Owner()
        ref = weakref.ref(owner)
        driver_holds.hold("graph", owner)
        del owner
        gc.collect()
        assert ref() is not None  # a leak, never a launch of a copy reading a destroyed event
    assert len(driver_holds._FOREVER) == 2
    assert drv.released == ["obj1"]  # the object the graph did not take is released (its destructor posts)


def test_the_poll_after_a_collection_never_waits_for_the_lock(drv):
    owner = Owner()
    ref = weakref.ref(owner)
    driver_holds.hold("graph", owner)
    del owner
    ((ptr, destroy),) = drv.created
    let_go(destroy, ptr)
    with driver_holds._LOCK:  # (a collection started inside hold, on this thread)
        gc.collect()
        assert ref() is not None
    gc.collect()
    assert ref() is None


def test_bindings_that_refuse_the_arguments_keep_the_owners_and_raise_nothing(drv, monkeypatch):
    monkeypatch.setattr(driver_holds, "_FOREVER", [])

    def refuse(*args: Any) -> Any:
        raise TypeError("an argument of another type")

    monkeypatch.setattr(drv, "cuUserObjectCreate", refuse)
    owner = Owner()
    driver_holds.hold("graph", owner)
    assert driver_holds._FOREVER == [owner]
