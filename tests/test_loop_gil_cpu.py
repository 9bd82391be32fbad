"""A long run of the compiled KernelLoop offers the GIL to other threads (no GPU).

The loop adds nodes in C without running Python code between them, so the interpreter never offers the
GIL there by itself; once it has held it twice the switch interval (``cg_offer_period_ns``; the clock read
every 256 nodes) it releases and re-takes it, where a thread that has asked for it takes it, as between two
bytecodes of Python code. The driver's ``cuGraphAddNode_v2`` is a C shim compiled here that spins for 3 µs
and hands out a handle, without touching Python; a busy Python thread records the time at each of its
turns; the switch interval is 1 ms. (Without the offers: one gap of 93 ms, the whole run; with them 2.8 to
3.7 ms at most, the run 138 ms against 94.)
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import pytest

import cudagraph as cg
from cudagraph.definition.nodes import KernelNode, Node
from cudagraph.driver import c_entry
from driver_fakes import busy_thread_stamps, compile_shim, longest_wait

pytestmark = pytest.mark.skipif(c_entry.NATIVE is None, reason="cudagraph.driver._native was not built")

SHIM = r"""
#include <stddef.h>
#include <stdint.h>
#include <time.h>

static uintptr_t next_handle = 0x100000;

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int shim_add(void **out, void *graph, void *const *deps, const void *edges, size_t n, void *params)
{
    long long until = now_ns() + 3000;
    while (now_ns() < until)
        ;
    *out = (void *)(next_handle++);
    return 0;
}
"""

NODES = 30000


class CUkernel:  # the definition layer recognises kernels by type name
    pass


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return compile_shim(SHIM, tmp_path_factory.mktemp("loop-gil-shim"), "the spinning cuGraphAddNode_v2 shim")


def test_a_long_run_of_adds_lets_a_busy_python_thread_run(shim):
    native = c_entry.NATIVE
    kernel = CUkernel()
    g = cg.Graph()
    order = [g.kernel(kernel, 1, 32, (0x9000 + i,)) for i in range(NODES)]
    params = ctypes.create_string_buffer(256)
    ptrs = (ctypes.c_void_p * 4)()
    scratch = ctypes.create_string_buffer(8)
    loop = native.KernelLoop(
        ctypes.cast(shim.shim_add, ctypes.c_void_p).value, 1, ctypes.addressof(params), KernelNode, Node
    )
    loop.use(kernel, {(int,): b"P"}, (0,), (8,), ctypes.addressof(scratch), 8, 0x70, True, ctypes.addressof(ptrs), None)
    raw = [0] * NODES
    with busy_thread_stamps() as stamps:
        t0 = time.perf_counter()
        done = loop.run(order, 0, raw)
        t1 = time.perf_counter()
    assert done == NODES and loop.rc == 0
    assert raw == list(range(raw[0], raw[0] + NODES)) and raw[0] >= 0x100000  # every node added, in order
    took = t1 - t0
    assert took >= NODES * 3e-6  # the shim's spinning alone
    turns, longest = longest_wait(stamps, t0, t1)
    # Holding the GIL through the run, the busy thread would get no turn in it: one gap of the whole run.
    assert turns > 2 + 10 and longest < took / 3, (turns, longest, took)
