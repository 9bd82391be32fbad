"""Python callables as graph host nodes, with exceptions kept for the user."""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["HOST_FN_ADDRESS", "register", "unregister"]

# key -> (callable, args, sink, node); the driver passes the key as userData.
_REGISTRY: dict[int, tuple[Callable[..., Any], tuple[Any, ...], list[Any], Any]] = {}
_KEYS = itertools.count(1)
_LOCK = threading.Lock()


def _trampoline(user_data: int | None) -> None:
    entry = _REGISTRY.get(user_data or 0)
    if entry is None:
        return
    fn, args, sink, node = entry
    try:
        fn(*args)
    except BaseException as exc:
        sink.append((node, exc))


_HOST_FN_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_HOST_FN = _HOST_FN_TYPE(_trampoline)
#: Address of the C entry point that every host node calls.
HOST_FN_ADDRESS: int = ctypes.cast(_HOST_FN, ctypes.c_void_p).value or 0


def register(fn: Callable[..., Any], args: tuple[Any, ...], sink: list[Any], node: Any) -> int:
    """Register a callable; return the key to pass as the host node's ``userData``."""
    with _LOCK:
        key = next(_KEYS)
        _REGISTRY[key] = (fn, args, sink, node)
    return key


def unregister(keys: list[int]) -> None:
    """Forget callables (after the executable that used them is destroyed)."""
    with _LOCK:
        for k in keys:
            _REGISTRY.pop(k, None)
