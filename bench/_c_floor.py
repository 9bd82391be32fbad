"""The C driver floor of explicit construction, for ``bench/construction.py``.

A plain C loop of ``cuGraphAddNode_v2`` building a chain with one prepared
``CUgraphNodeParams`` (no Python between the calls), then
``cuGraphInstantiateWithFlags`` on it, each timed in C: what any library
building the same graph pays the driver. Compiled here with the system C
compiler (``cc``) and loaded with ctypes; the driver's entry points are found
in the ``libcuda.so.1`` that ``cuda.bindings`` already loaded. Without a
compiler (or that library) there is no floor and the columns say ``n/a``.
"""

from __future__ import annotations

import ctypes
from typing import Any

from _common import compile_c

__all__ = ["CFloor", "c_floor"]

_SOURCE = r"""
#include <dlfcn.h>
#include <stddef.h>
#include <time.h>

typedef int (*create_fn)(void **, unsigned int);
typedef int (*add_fn)(void **, void *, void *const *, const void *, size_t, void *);
typedef int (*inst_fn)(void **, void *, unsigned long long);
typedef int (*destroy_fn)(void *);

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A chain of n nodes (each after the previous) with the CUgraphNodeParams at `params`: seconds of the
 * adding loop in out[0], of cuGraphInstantiateWithFlags in out[1]; the graph and the executable are
 * destroyed. 0, a CUresult, or -1 / -2 when the driver library or an entry point is missing. */
int floor_chain(void *params, long n, double *out)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        return -1;
    create_fn create = (create_fn)dlsym(lib, "cuGraphCreate");
    add_fn add = (add_fn)dlsym(lib, "cuGraphAddNode_v2");
    inst_fn inst = (inst_fn)dlsym(lib, "cuGraphInstantiateWithFlags");
    destroy_fn graph_destroy = (destroy_fn)dlsym(lib, "cuGraphDestroy");
    destroy_fn exec_destroy = (destroy_fn)dlsym(lib, "cuGraphExecDestroy");
    if (!create || !add || !inst || !graph_destroy || !exec_destroy) {
        dlclose(lib);
        return -2;
    }
    void *graph = NULL, *prev = NULL, *node = NULL, *exe = NULL;
    int rc = create(&graph, 0);
    if (rc) {
        dlclose(lib);
        return rc;
    }
    double t0 = now();
    for (long i = 0; i < n && !rc; i++) {
        rc = add(&node, graph, prev ? &prev : NULL, NULL, prev ? 1 : 0, params);
        prev = node;
    }
    double t1 = now();
    if (!rc)
        rc = inst(&exe, graph, 0);
    double t2 = now();
    if (exe != NULL)
        exec_destroy(exe);
    graph_destroy(graph);
    dlclose(lib);
    out[0] = t1 - t0;
    out[1] = t2 - t1;
    return rc;
}
"""


class CFloor:
    """``floor_chain`` compiled and loaded: :meth:`chain` times one chain."""

    def __init__(self, dll: Any) -> None:
        self._fn = dll.floor_chain
        self._fn.argtypes = (ctypes.c_void_p, ctypes.c_long, ctypes.POINTER(ctypes.c_double))
        self._fn.restype = ctypes.c_int

    def chain(self, params_address: int, nodes: int) -> tuple[float, float]:
        """Seconds of adding a chain of ``nodes`` kernel nodes with the ``CUgraphNodeParams`` at
        ``params_address`` (the current context's), and of instantiating it."""
        out = (ctypes.c_double * 2)()
        rc = self._fn(params_address, nodes, out)
        if rc:
            raise RuntimeError(f"floor_chain failed: {rc}")
        return out[0], out[1]


def c_floor() -> CFloor | None:
    """The compiled floor, or ``None`` without a C compiler."""
    dll = compile_c(_SOURCE, "c-floor", "-ldl")
    return None if dll is None else CFloor(dll)
