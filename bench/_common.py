"""Helpers shared by the benchmark scripts: versions, garbage-collector control, formatting."""

from __future__ import annotations

import ctypes
import gc
import importlib
import inspect
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "busy_python_thread",
    "compiled_bind_many",
    "compile_c",
    "fmt",
    "import_cudagraph",
    "no_gc",
    "relaunch_under_fake_driver",
    "verdict",
    "versions",
]

HERE = Path(__file__).resolve().parent


def relaunch_under_fake_driver() -> None:
    """Build the fake ``libcuda.so.1`` (``fake_driver/fake_libcuda.c``) and run this script again with it first on
    the library path and ``CUDAGRAPH_FAKE_DRIVER`` set (a script calls this when that variable is unset)."""
    out = Path(tempfile.mkdtemp(prefix="cudagraph-fake-cuda-"))
    cc = os.environ.get("CC", "cc")
    src = HERE / "fake_driver" / "fake_libcuda.c"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out / "libcuda.so.1"), str(src), "-ldl"], check=True)
    env = dict(os.environ, CUDAGRAPH_FAKE_DRIVER=str(out))
    env["LD_LIBRARY_PATH"] = f"{out}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else str(out)
    env.setdefault("PYTHONPATH", str(HERE.parent / "src"))
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def compiled_bind_many(exe: Any) -> bool:
    """Whether ``exe._bind_many`` (an executable or its class) is the compiled ``BindManyMethod``, not its Python
    twin (``CUDAGRAPH_NO_C_ENTRY=1``, or no compiled module)."""
    from cudagraph.driver.c_entry import NATIVE

    return NATIVE is not None and isinstance(inspect.getattr_static(exe, "_bind_many"), NATIVE.BindManyMethod)


@contextmanager
def busy_python_thread(stamps: list[float] | None = None) -> Iterator[None]:
    """Another thread runs Python for the duration (as a data-loading or logging thread may): each release of
    the GIL inside hands it to that thread for its whole switch interval (``sys.getswitchinterval()``).

    With ``stamps``, the thread appends ``time.perf_counter()`` to it at each of its turns, and the block
    starts once it has run."""
    stop = threading.Event()

    def spin() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    def stamp(out: list[float]) -> None:
        while not stop.is_set():
            out.append(time.perf_counter())

    thread = threading.Thread(target=spin if stamps is None else stamp, args=() if stamps is None else (stamps,))
    thread.daemon = True
    thread.start()
    while stamps is not None and not stamps:  # (it runs)
        time.sleep(0.001)
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def no_gc() -> Iterator[None]:
    """Collect garbage, then keep the collector off for the timed region."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def versions(env: Any) -> dict[str, str]:
    """Versions of everything that the numbers depend on (``env`` has ``driver`` and ``dev``)."""
    import cuda.bindings
    import cuda.core
    import numpy as np

    import cudagraph

    out = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cuda.core": str(getattr(cuda.core, "__version__", "?")),
        "cuda.bindings": str(getattr(cuda.bindings, "__version__", "?")),
        "cudagraph": str(getattr(cudagraph, "__version__", "?")),
    }
    from cudagraph.driver.c_entry import NATIVE

    out["cudagraph compiled loops"] = "no (cuda.bindings calls)" if NATIVE is None else "yes (_native)"
    try:
        err, v = env.driver.cuDriverGetVersion()
        out["driver (CUDA)"] = f"{int(v) // 1000}.{(int(v) % 1000) // 10}" if not err else f"error {err}"
    except Exception as exc:  # informational only
        out["driver (CUDA)"] = f"unknown ({exc})"
    try:
        out["gpu"] = f"{env.dev.name} (sm_{env.dev.arch})"
    except Exception as exc:  # informational only
        out["gpu"] = f"unknown ({exc})"
    return out


def fmt(v: float | None, digits: int = 3) -> str:
    """A number for a table cell (``n/a`` for ``None``)."""
    return "n/a" if v is None else f"{v:.{digits}f}"


def verdict(ok: bool) -> str:
    """``PASS`` or ``MISS``."""
    return "PASS" if ok else "MISS"


def import_cudagraph() -> None:
    """Import cudagraph, falling back to the checkout's ``src/`` when it is not on ``PYTHONPATH``."""
    try:
        importlib.import_module("cudagraph")
    except ImportError:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
        importlib.import_module("cudagraph")


def compile_c(source: str, name: str, *flags: str) -> Any:
    """``source`` compiled with the system C compiler (``$CC`` or ``cc``) into a shared library and loaded
    with ctypes, or ``None`` without a compiler or when it fails (``flags`` go after the source)."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        return None
    folder = tempfile.mkdtemp(prefix=f"cudagraph-{name}-")
    src, lib = os.path.join(folder, f"{name}.c"), os.path.join(folder, f"lib{name}.so")
    with open(src, "w") as f:
        f.write(source)
    try:
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", lib, src, *flags], check=True, capture_output=True)
        return ctypes.CDLL(lib)
    except (OSError, subprocess.CalledProcessError):
        return None
