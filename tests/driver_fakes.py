"""What the CPU tests of the compiled module fake of the driver: the C signatures of the entry points it
calls by address (for ctypes callbacks standing for them), and kernels read from no driver.

Shared by the tests of the graph-building loops (``test_native_*``) and of stream launches
(``test_stream_launch_*``). The ``KernelInfo`` stand-in is the benchmarks' (``bench/_fake_driver.py``,
which ``bench/construction.py --cpu`` measures over), so that both build it one way.
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_BENCH = str(Path(__file__).resolve().parents[1] / "bench")
if _BENCH not in sys.path:
    sys.path.append(_BENCH)  # (last: a bench script never shadows a module the tests import)

from _common import busy_python_thread  # noqa: E402
from _fake_driver import fake_info as _bench_fake_info  # noqa: E402

__all__ = [
    "busy_thread_stamps",
    "compile_shim",
    "longest_wait",
    "ADD_PROTO",
    "INFO_PROTO",
    "INVALID_VALUE",
    "LAUNCH_PROTO",
    "SET_PROTO",
    "UPDATE_PROTO",
    "address",
    "fake_info",
    "run_fresh",
]

#: CUresult cuGraphAddNode_v2(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
#: CUgraphNodeParams*)
ADD_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_void_p,
)
#: CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*)
SET_PROTO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
#: CUresult cuLaunchKernel(CUfunction, gx, gy, gz, bx, by, bz, sharedMemBytes, CUstream, void**, void**)
LAUNCH_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)
#: CUresult cuStreamGetCaptureInfo_v3(CUstream, status*, id*, CUgraph*, const CUgraphNode**,
#: const CUgraphEdgeData**, size_t*)
INFO_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_int),
    ctypes.POINTER(ctypes.c_ulonglong),
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.POINTER(ctypes.c_void_p)),
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_size_t),
)
#: CUresult cuStreamUpdateCaptureDependencies_v2(CUstream, CUgraphNode*, const CUgraphEdgeData*, size_t, unsigned)
UPDATE_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint
)
#: CUDA_ERROR_INVALID_VALUE: what a fake entry point answers when it refuses a call.
INVALID_VALUE = 1


def address(cb: Any) -> int:
    """The address of a ctypes callback (what the compiled module is given for an entry point)."""
    return ctypes.cast(cb, ctypes.c_void_p).value or 0


def fake_info(handle: int, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> Any:
    """A ``KernelInfo`` of the ``CUkernel`` ``handle`` named ``k<handle in hex>``, read from no driver:
    parameter i has ``sizes[i]`` bytes at ``offsets[i]`` of its own packing buffer."""
    return _bench_fake_info(handle, offsets, sizes, prefix="k")


def run_fresh(prelude: str, *parts: str) -> str:
    """Run ``prelude`` and ``parts`` in a fresh interpreter with faulthandler on and the compiled module on;
    its stdout (a crash, or any non-zero exit, fails)."""
    import cudagraph

    env = dict(os.environ, PYTHONPATH=str(Path(cudagraph.__file__).resolve().parents[1]))
    env.pop("CUDAGRAPH_NO_C_ENTRY", None)
    code = prelude + "".join(textwrap.dedent(part) for part in parts)
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def compile_shim(source: str, folder: Path, what: str) -> ctypes.CDLL:
    """``source`` (C, may include ``Python.h``) compiled into a shared library in ``folder`` and loaded.

    Skips the test (naming ``what``) when the compiled module was not built or there is no C compiler
    or no ``Python.h``: the shims stand for driver entry points that the compiled module calls.
    """
    import pytest

    from cudagraph.driver import c_entry

    if c_entry.NATIVE is None:
        pytest.skip("cudagraph.driver._native was not built")
    cc = shutil.which("cc")
    include = sysconfig.get_paths()["include"]
    if cc is None or not Path(include, "Python.h").exists():
        pytest.skip(f"no C compiler or no Python.h to build {what}")
    src, lib = folder / "shim.c", folder / "libshim.so"
    src.write_text(source)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", f"-I{include}", "-o", str(lib), str(src)], check=True)
    return ctypes.CDLL(str(lib))


@contextmanager
def busy_thread_stamps(interval: float = 0.001) -> Iterator[list[float]]:
    """A Python thread that records ``time.perf_counter()`` at each of its turns while the block runs (the
    list yielded, once it has run), the switch interval set to ``interval`` and the cyclic collector off (its
    passes over new objects hold the GIL too): the tests of the compiled loops' GIL offers."""
    old, collecting = sys.getswitchinterval(), gc.isenabled()
    sys.setswitchinterval(interval)
    gc.disable()
    stamps: list[float] = []
    try:
        with busy_python_thread(stamps):
            yield stamps
    finally:
        if collecting:
            gc.enable()
        sys.setswitchinterval(old)


def longest_wait(stamps: list[float], start: float, end: float) -> tuple[int, float]:
    """``(turns, longest wait)`` of the busy thread between ``start`` and ``end``: the number of its stamps in
    that time plus the two ends, and the longest time between two of them."""
    inside = [start, *(s for s in stamps if start <= s <= end), end]
    return len(inside), max(b - a for a, b in itertools.pairwise(inside))
