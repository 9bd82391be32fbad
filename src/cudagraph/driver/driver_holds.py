"""Keeping alive what a driver graph refers to for as long as the driver holds that graph or a copy of it.

A ``CUgraph`` handed to a program (``exe.graph_handle``, a compat definition's ``handle``) may be copied by the
driver: ``cuGraphClone``, a child graph node made from it, an executable instantiated from a copy. The copies
name the same events, kernels, host callbacks and memory as the original, whose owners are Python objects: were
they collected with the definition, a launch of a copy would use a destroyed event or an unloaded kernel (seen
on an H100: a segmentation fault in the driver). So the graph is given a CUDA user object
(``cuUserObjectCreate``, moved into the graph with ``cuGraphRetainUserObject``), which every copy retains too, and
the owners stay in :data:`_HELD` until the driver destroys that user object: once the graph, every copy and every
launch of an executable made from one are gone.

The user object's destructor runs on a driver thread, where no Python code may run (it may even run after the
interpreter has finished). It is the C library's ``sem_post`` on a semaphore of its own (in memory from
``malloc``, never Python's): Python code polls the semaphores (``sem_trywait``) at the next :func:`hold` and after
each garbage collection, and drops the owners of the released ones. Where the C library or the driver calls are
missing (not glibc, an old driver), the owners are kept for the life of the process instead: a leak, never a
fault.
"""

from __future__ import annotations

import ctypes
import gc
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["hold", "held_count", "release_finished"]

#: semaphore address -> (the owners kept, what to call once released). Polled by :func:`release_finished`.
_HELD: dict[int, tuple[Any, Callable[[], None] | None]] = {}
#: The owners of graphs whose user object could not be made: kept for the life of the process.
_FOREVER: list[Any] = []
#: What to call for released graphs (:func:`hold`, :func:`release_finished`, after a garbage collection).
_AFTER: deque[Callable[[], None]] = deque()
_LOCK = threading.Lock()
#: sem_t is 32 bytes on 64-bit glibc; room for any layout.
_SEM_BYTES = 64


class _Libc:
    """The C library's semaphore and allocation calls (``None`` where they cannot be found)."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(None)
        self.malloc = lib.malloc
        self.malloc.argtypes, self.malloc.restype = (ctypes.c_size_t,), ctypes.c_void_p
        self.free = lib.free
        self.free.argtypes, self.free.restype = (ctypes.c_void_p,), None
        self.sem_init = lib.sem_init
        self.sem_init.argtypes, self.sem_init.restype = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint), ctypes.c_int
        self.sem_trywait = lib.sem_trywait
        self.sem_trywait.argtypes, self.sem_trywait.restype = (ctypes.c_void_p,), ctypes.c_int
        self.sem_destroy = lib.sem_destroy
        self.sem_destroy.argtypes, self.sem_destroy.restype = (ctypes.c_void_p,), ctypes.c_int
        self.sem_post_address = ctypes.cast(lib.sem_post, ctypes.c_void_p).value or 0


_LIBC: _Libc | bool | None = False  # False: not looked up yet


def _libc() -> _Libc | None:
    global _LIBC
    if _LIBC is False:
        try:
            _LIBC = _Libc()
        except (OSError, AttributeError):  # no C library with POSIX semaphores here
            _LIBC = None
    return _LIBC  # type: ignore[return-value]


def hold(graph: Any, owners: Any, on_release: Callable[[], None] | None = None) -> None:
    """Keep ``owners`` alive until the driver has let go of ``graph`` and of every copy made of it.

    Parameters
    ----------
    graph : CUgraph
        A driver graph about to be handed to a program.
    owners : object
        What its nodes refer to (the definition, its nodes and bodies, their operands).
    on_release : callable, optional
        Called once the driver has let go, e.g. to forget host callbacks: at the next :func:`hold` or
        :func:`release_finished`, or after a garbage collection, so it must never wait for a lock (the collection
        may run on a thread holding it).
    """
    release_finished()
    libc = _libc()
    sem = _new_semaphore(libc)
    if libc is None or sem is None or not _move_user_object(graph, sem, libc):
        _FOREVER.append(owners)  # (on_release never runs: what it would forget stays too)
        return
    with _LOCK:
        _HELD[sem] = (owners, on_release)


def _new_semaphore(libc: _Libc | None) -> int | None:
    """A semaphore at 0 in memory from ``malloc``, or ``None``."""
    if libc is None or not libc.sem_post_address:
        return None
    sem = libc.malloc(_SEM_BYTES)
    if sem and libc.sem_init(sem, 0, 0) == 0:
        return int(sem)
    if sem:
        libc.free(sem)
    return None


def _move_user_object(graph: Any, sem: int, libc: _Libc) -> bool:
    """Give ``graph`` a user object whose destructor posts ``sem``; ``False`` where the driver (or the bindings)
    refused, ``sem`` then freed or left to the destructor of the object the graph did not take."""
    from .calls import require_driver

    drv = require_driver()
    try:
        err, obj = drv.cuUserObjectCreate(
            sem, drv.CUhostFn(libc.sem_post_address), 1, drv.CUuserObject_flags.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC
        )
    except Exception:  # (bindings without the call, or taking other arguments: kept for good, as refused)
        err = 1
    if err:
        libc.sem_destroy(sem)
        libc.free(sem)
        return False
    try:
        (err,) = drv.cuGraphRetainUserObject(graph, obj, 1, drv.CUuserObjectRetain_flags.CU_GRAPH_USER_OBJECT_MOVE)
    except Exception:
        err = 1
    if err:  # (its destructor posts the semaphore, which stays allocated)
        drv.cuUserObjectRelease(obj, 1)
        return False
    return True


def _poll(wait: bool = True) -> None:
    """Drop the owners of every graph the driver has let go of; queue their ``on_release``. After a garbage
    collection (``wait=False``) it does nothing where the lock is taken: the collection may have started inside
    :func:`hold` on this very thread."""
    libc = _libc()
    if libc is None or not _HELD:
        return
    released = []
    if not _LOCK.acquire(blocking=wait):
        return
    try:
        for sem in list(_HELD):
            if libc.sem_trywait(sem) == 0:
                released.append(_HELD.pop(sem))
                libc.sem_destroy(sem)
                libc.free(sem)
    finally:
        _LOCK.release()
    for _owners, on_release in released:
        if on_release is not None:
            _AFTER.append(on_release)
    del released  # (the owners go here)


def release_finished() -> None:
    """Release the owners of every graph the driver has let go of, and run their ``on_release``."""
    _poll()
    while _AFTER:
        try:
            fn = _AFTER.popleft()
        except IndexError:  # (another thread took it)
            break
        fn()


def held_count() -> int:
    """How many handed-out graphs still hold their owners (released ones counted until the next poll)."""
    return len(_HELD)


def _after_collection(phase: str, info: dict[str, Any]) -> None:
    """Release, after a garbage collection, the owners of graphs the driver has let go of, and run their
    ``on_release`` (which :func:`hold` requires to be safe there: it must never wait for a lock)."""
    if phase == "stop" and (_HELD or _AFTER):
        _poll(wait=False)
        while _AFTER:
            try:
                fn = _AFTER.popleft()
            except IndexError:  # (another thread took it)
                break
            try:
                fn()
            except Exception:  # (nothing may escape a collector callback; the release itself is done)
                pass


gc.callbacks.append(_after_collection)
