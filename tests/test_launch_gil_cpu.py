"""Which compiled stream launches release the GIL (no GPU).

A launch into a capturing stream (the capture backend) only records a node and never waits: the compiled
loop keeps the GIL across it, as explicit construction keeps it across each ``cuGraphAddNode`` (offering it
only once it has held it twice the switch interval, ``tests/test_loop_gil_cpu.py``), because each release
hands the GIL to any other busy Python thread for that thread's whole switch interval. An eager
launch (``Graph.run``, ``cudagraph.launch`` on a stream) may wait for room in the launch queue, that is for
earlier work, and a host function among that work needs the GIL: those release it, as ``cuda.bindings``
does. The driver's ``cuLaunchKernel`` is replaced by a C shim (compiled here) that counts the calls made
with and without the GIL, then hands each to the recording fake driver of ``test_stream_launch_cpu``.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.driver import stream_launch
from driver_fakes import compile_shim
from test_stream_launch_cpu import K1, Driver, capture_graph, install, mixed_graph, replay, run_graph

pytest.importorskip("cuda.bindings.driver")

SHIM = r"""
#include <Python.h>

typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                         void **, void **);
static launch_fn next_launch;
static long held, released;

void shim_forward_to(launch_fn f) { next_launch = f; held = released = 0; }
long shim_held(void) { return held; }
long shim_released(void) { return released; }

int shim_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned smem, void *stream, void **params, void **extra)
{
    if (PyGILState_Check())
        held++;
    else
        released++;
    return next_launch(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
}
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Any:
    dll = compile_shim(SHIM, tmp_path_factory.mktemp("gil-shim"), "the GIL-counting launch shim")
    dll.shim_forward_to.argtypes = (ctypes.c_void_p,)
    dll.shim_held.restype = dll.shim_released.restype = ctypes.c_long
    return dll


def counts(shim: Any) -> tuple[int, int]:
    return shim.shim_held(), shim.shim_released()


def through_shim(shim: Any, monkeypatch: pytest.MonkeyPatch) -> Driver:
    d = install("compiled", monkeypatch, ctypes.cast(shim.shim_launch, ctypes.c_void_p).value)
    shim.shim_forward_to(d.address(d.cb_launch))
    return d


def test_capture_launches_keep_the_gil(shim, monkeypatch):
    d = through_shim(shim, monkeypatch)
    replay(d, capture_graph())
    compiled = len(d.launches) - d.by_bindings  # (the first launch of each kernel goes through cuda.bindings)
    assert compiled >= 10 and len(d.made) == len(d.launches)
    assert counts(shim) == (compiled, 0)
    stream_launch.forget()


def test_eager_launches_release_the_gil(shim, monkeypatch):
    d = through_shim(shim, monkeypatch)
    run_graph(d, mixed_graph())
    compiled = len(d.launches) - d.by_bindings
    assert compiled >= 10 and counts(shim) == (0, compiled)
    shim.shim_forward_to(d.address(d.cb_launch))  # (counts from 0)
    launched, by_bindings = len(d.launches), d.by_bindings
    for i in range(6):  # cudagraph.launch on a stream
        cg.launch(0x99, (1, 32), K1, 0xB000 + i, np.float32(0.5), np.int32(i))
    compiled = (len(d.launches) - launched) - (d.by_bindings - by_bindings)
    assert compiled >= 4 and counts(shim) == (0, compiled)
    stream_launch.forget()
