"""Python callables as graph host nodes, with exceptions kept for the user."""

from __future__ import annotations

import ctypes
import gc
import itertools
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = [
    "HOST_FN_ADDRESS",
    "callback",
    "forget_soon",
    "launch_host_func",
    "prune_retired",
    "register",
    "retire",
    "unregister",
]

# key -> (callable, args, sink, weak reference to the node); the driver passes
# the key as userData. The node is held weakly so that a callback still
# registered while its last launch drains does not keep the definition alive.
_REGISTRY: dict[int, tuple[Callable[..., Any], tuple[Any, ...], list[Any], Any]] = {}
_KEYS = itertools.count(1)
_LOCK = threading.Lock()


def _trampoline(user_data: int | None) -> None:
    entry = _REGISTRY.get(user_data or 0)
    if entry is None:
        return
    fn, args, sink, node_ref = entry
    try:
        fn(*args)
    except BaseException as exc:
        sink.append((node_ref(), exc))


_HOST_FN_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_HOST_FN = _HOST_FN_TYPE(_trampoline)
#: Address of the C entry point that every host node calls.
HOST_FN_ADDRESS: int = ctypes.cast(_HOST_FN, ctypes.c_void_p).value or 0


_LAUNCH_HOST_FUNC: Any = None


def launch_host_func(stream: Any, key: int) -> int:
    """``cuLaunchHostFunc(stream, trampoline, key)`` called on the driver itself; return the ``CUresult`` as an int.

    cuda.bindings' ``cuLaunchHostFunc`` hands the driver a wrapper of its own
    with a block of data it frees after the first call: a host node recorded by
    stream capture would then name that wrapper (so a lift cannot find the
    callable) and call it with freed data on its second launch. Called here,
    the driver records this library's trampoline and key, as an explicit host
    node holds them.
    """
    global _LAUNCH_HOST_FUNC
    fn = _LAUNCH_HOST_FUNC
    if fn is None:
        fn = ctypes.CDLL("libcuda.so.1").cuLaunchHostFunc  # the library cuda.bindings already loaded
        fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        fn.restype = ctypes.c_int
        _LAUNCH_HOST_FUNC = fn
    return int(fn(int(stream) or None, HOST_FN_ADDRESS, key))


# (event, keys, keep): callables of destroyed executables whose last launches may still be running, and what
# those launches read (the nodes' operands, the bound values); forgotten once the event has completed.
_RETIRED: list[tuple[Any, list[int], Any]] = []


def _prune() -> None:
    """Forget the callables and the objects of retired executables whose work has finished (and the keys
    :func:`forget_soon` left for later)."""
    while _FORGET_LATER:
        _REGISTRY.pop(_FORGET_LATER.pop(), None)
    if not _RETIRED:
        return
    from .calls import driver

    keep = []
    done = []
    for entry in _RETIRED:
        (err,) = driver.cuEventQuery(entry[0])
        if err and driver.CUresult(int(err)).name == "CUDA_ERROR_NOT_READY":
            keep.append(entry)
            continue
        driver.cuEventDestroy(entry[0])
        done.append(entry[1])
    _RETIRED[:] = keep
    pending = {k for _, keys, _ in keep for k in keys}
    for keys in done:
        for k in keys:
            if k not in pending:
                _REGISTRY.pop(k, None)


def _after_collection(phase: str, info: dict[str, Any]) -> None:
    """After a garbage collection, release what retired executables kept for launches finished since (a program
    waiting for an owner to go, collecting as it waits, sees it go); nothing where another thread holds the lock
    (the collection may have started inside a retire on this very thread)."""
    if phase == "stop" and (_RETIRED or _FORGET_LATER) and _LOCK.acquire(blocking=False):
        try:
            _prune()
        finally:
            _LOCK.release()


gc.callbacks.append(_after_collection)


def prune_retired() -> None:
    """Release what retired executables kept for their launches, where those launches have finished."""
    if _RETIRED or _FORGET_LATER:
        with _LOCK:
            _prune()


def retire(keys: list[int], streams: Any, keep: Any = None) -> None:
    """Forget ``keys``, and drop ``keep``, once the work already queued on ``streams`` has finished.

    ``keep`` is what that work may still read from the host side's point of view: the objects owning the memory
    of a destroyed executable's nodes and bound values (a launch in flight reads them after ``close``). Held
    until an event recorded on each stream has completed (checked at the next retire or
    :func:`prune_retired`), or dropped now where every stream is idle.
    """
    streams = list(streams)
    if not keys and keep is None:
        return
    if not streams:
        unregister(keys)
        return
    from .calls import driver

    if all(driver.cuStreamQuery(h)[0] == 0 for h in streams):
        unregister(keys)  # nothing in flight: forget them now
        return
    with _LOCK:
        _prune()
        recorded = False
        for h in streams:
            err, event = driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            if err:
                continue
            if driver.cuEventRecord(event, h)[0]:  # (a stream destroyed since: nothing to wait for on it)
                driver.cuEventDestroy(event)
                continue
            _RETIRED.append((event, list(keys), keep))
            recorded = True
        if not recorded:  # (no event to wait for: forgotten now, as with idle streams)
            for k in keys:
                _REGISTRY.pop(k, None)


def _weak(node: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(node)
    except TypeError:
        return lambda: node


def register(fn: Callable[..., Any], args: tuple[Any, ...], sink: list[Any], node: Any) -> int:
    """Register a callable; return the key to pass as the host node's ``userData``."""
    with _LOCK:
        key = next(_KEYS)
        _REGISTRY[key] = (fn, args, sink, _weak(node))
    return key


def callback(fn_address: int, key: int) -> tuple[Callable[..., Any], tuple[Any, ...]] | None:
    """``(callable, args)`` of a host node calling ``fn_address`` with ``key``; ``None`` if not one of ours."""
    if fn_address != HOST_FN_ADDRESS:
        return None
    entry = _REGISTRY.get(key)
    return None if entry is None else (entry[0], entry[1])


def unregister(keys: list[int]) -> None:
    """Forget callables (after the executable that used them is destroyed)."""
    with _LOCK:
        for k in keys:
            _REGISTRY.pop(k, None)


#: Keys :func:`forget_soon` could not forget at once (the lock was taken): forgotten at the next prune.
_FORGET_LATER: list[int] = []


def forget_soon(keys: list[int]) -> None:
    """:func:`unregister` where the lock is free now, else at the next :func:`prune_retired` or garbage collection:
    safe to call from a garbage collector callback (it never waits for the lock, which this very thread may hold)."""
    if _LOCK.acquire(blocking=False):
        try:
            for k in keys:
                _REGISTRY.pop(k, None)
        finally:
            _LOCK.release()
    else:
        _FORGET_LATER.extend(keys)
