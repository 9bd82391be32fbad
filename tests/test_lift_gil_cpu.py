"""A long lift through a reader over shim entry points lets other threads run (no GPU).

A reader given entry points other than the driver's own lifts through the Python twin (``_Lifter.into_steps``):
its ctypes reads release the GIL at each call and its adding loop is Python code. The driver's four reads are a C
shim compiled here over a chain of kernel nodes whose ``cuGraphNodeGetType`` spins for 3 µs; a busy Python thread
records the time at each of its turns; the switch interval is 1 ms. The reads and the adds are timed apart (the
kernel's description is asked for when the first node is added). The compiled lift (``_reads.lift_graph``: its
reads without the GIL, its adding loop offering it) is held to the same in
``tests/test_lift_compiled_cpu.py::test_a_long_compiled_lift_lets_a_busy_python_thread_run``, over the fake
``libcuda.so.1``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

drv = pytest.importorskip("cuda.bindings.driver")

import cudagraph as cg  # noqa: E402
from cudagraph.driver.graph_reader import KERNEL_PARAMS_SIZE, GraphReader  # noqa: E402
from cudagraph.materialize import lift as _lift  # noqa: E402
from driver_fakes import busy_thread_stamps, compile_shim, longest_wait  # noqa: E402
from lift_fakes import GET_ATTR, KERNEL, make_fake  # noqa: E402

NODES = 50000
BASE = 0x200000

SHIM = rf"""
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define NODES {NODES}
#define BASE ((uintptr_t){BASE})

static unsigned char x[8] = {{1, 2, 3, 4, 5, 6, 7, 8}};
static int a = 3, n = 4;
static void *argv[3] = {{x, &a, &n}};

static long long now_ns(void)
{{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}}

int shim_nodes(void *graph, void **out, size_t *count)
{{
    size_t k = NODES;
    if (out != NULL) {{
        k = *count < NODES ? *count : NODES;
        for (size_t i = 0; i < k; i++)
            out[i] = (void *)(BASE + 0x40 * i);
    }}
    *count = k;
    return 0;
}}

int shim_deps(void *node, void **out, void *data, size_t *count)
{{
    size_t k = (uintptr_t)node == BASE ? 0 : 1; /* a chain: each node after the one before it */
    if (out != NULL) {{
        k = k < *count ? k : *count;
        if (k) {{
            out[0] = (void *)((uintptr_t)node - 0x40);
            memset(data, 0, 8);
        }}
    }}
    *count = k;
    return 0;
}}

int shim_type(void *node, int *out)
{{
    long long until = now_ns() + 3000;
    while (now_ns() < until)
        ;
    *out = {KERNEL};
    return 0;
}}

int shim_kernel(void *node, unsigned char *out)
{{
    uint64_t func = 0xF00;
    uint32_t dims[7] = {{1, 1, 1, 32, 1, 1, 0}};
    void **params = argv;
    memset(out, 0, {KERNEL_PARAMS_SIZE});
    memcpy(out, &func, 8);
    memcpy(out + 8, dims, sizeof dims);
    memcpy(out + 40, &params, 8);
    return 0;
}}
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return compile_shim(SHIM, tmp_path_factory.mktemp("lift-gil-shim"), "the spinning graph-reading shim")


def test_a_long_compiled_lift_lets_a_busy_python_thread_run(shim: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    make_fake(monkeypatch)  # kernel_info answers for the shim's function handle
    info, adding = _lift.kernel_info, []

    def kernel_info(handle: Any) -> Any:  # asked once, when the first node is added: the reads are done
        adding.append(time.perf_counter())
        return info(handle)

    monkeypatch.setattr(_lift, "kernel_info", kernel_info)
    no_attributes = GET_ATTR(lambda node, attr, out: 1)  # CUDA_ERROR_INVALID_VALUE: none set
    reader = GraphReader(shim.shim_nodes, shim.shim_deps, shim.shim_type, shim.shim_kernel, no_attributes)
    g = cg.Graph("lifted")
    with busy_thread_stamps() as stamps:
        t0 = time.perf_counter()
        _lift._Lifter(reader, None).into(g, 0x1234)
        t1 = time.perf_counter()
    nodes = g.nodes
    assert len(nodes) == NODES and all(n.kind == "kernel" for n in nodes)
    assert nodes[0].predecessors == ()
    assert all(nodes[i].predecessors == (nodes[i - 1],) for i in (1, NODES // 2, NODES - 1))
    assert bytes(nodes[-1].args[0]) == bytes(range(1, 9))  # the arguments were read through the shim
    assert len(adding) == 1 and t0 < adding[0] < t1
    assert t1 - t0 >= NODES * 3e-6  # the shim's spinning alone
    # Holding the GIL through a phase (the reads, then the adds), the busy thread would get no turn in it.
    for start, end in ((t0, adding[0]), (adding[0], t1)):
        turns, longest = longest_wait(stamps, start, end)
        assert turns > 2 + 10 and longest < (end - start) / 3, (turns, longest, end - start)
