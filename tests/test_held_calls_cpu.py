"""The driver calls made from C with the GIL held: ``cuCtxGetCurrent``, ``cuGraphCreate`` and
``cuPointerGetAttributes`` (no GPU).

Both return at once; through ``cuda.bindings`` each releases the GIL, which hands it to any other busy
Python thread for its switch interval. ``ensure_context`` and ``create_graph`` (``driver/calls.py``) call
them through the compiled module where it and the driver library are found. Here the driver's entry
points are a C shim (compiled at test time) that counts the calls made with the GIL held and answers
what the test sets.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from cudagraph.driver import c_entry, calls
from cudagraph.errors import DriverError

drv = pytest.importorskip("cuda.bindings.driver")

from driver_fakes import compile_shim  # noqa: E402

SHIM = r"""
#include <Python.h>

static long count, held;
static void *context;
static int result;

static void seen(void) { count++; if (PyGILState_Check()) held++; }
int shim_get_context(void **out) { seen(); *out = context; return result; }
int shim_create_graph(void **out, unsigned int flags)
{
    seen();
    *out = (void *)(0x5150 + (size_t)flags);
    return result;
}
static unsigned int last_attr;
static unsigned long long last_ptr;
int shim_pointer_attributes(unsigned int n, int *attrs, void **data, unsigned long long ptr)
{
    seen();
    if (n != 1)
        return 1;
    last_attr = (unsigned int)attrs[0];
    last_ptr = ptr;
    if (attrs[0] == 2) /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE: an unsigned int */
        *(unsigned int *)data[0] = (unsigned int)(size_t)context;
    else
        *(unsigned long long *)data[0] = (unsigned long long)(size_t)context;
    return result;
}
unsigned int shim_last_attr(void) { return last_attr; }
unsigned long long shim_last_ptr(void) { return last_ptr; }
void shim_answer(void *ctx, int rc) { context = ctx; result = rc; count = held = 0; }
long shim_count(void) { return count; }
long shim_held(void) { return held; }
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Any:
    dll = compile_shim(SHIM, tmp_path_factory.mktemp("held-shim"), "the driver-call shim")
    dll.shim_answer.argtypes = (ctypes.c_void_p, ctypes.c_int)
    dll.shim_count.restype = dll.shim_held.restype = ctypes.c_long
    dll.shim_last_attr.restype = ctypes.c_uint
    dll.shim_last_ptr.restype = ctypes.c_ulonglong
    return dll


def addresses(shim: Any) -> tuple[int, int]:
    get = ctypes.cast(shim.shim_get_context, ctypes.c_void_p).value
    create = ctypes.cast(shim.shim_create_graph, ctypes.c_void_p).value
    assert get and create
    return get, create


def test_the_compiled_calls_answer_with_the_gil_held(shim):
    native = c_entry.NATIVE
    get, create = addresses(shim)
    shim.shim_answer(0x1234, 0)
    assert native.current_context(get) == (0, 0x1234)
    assert native.create_graph(create, 0) == (0, 0x5150)
    assert native.create_graph(create, 2) == (0, 0x5152)
    shim.shim_answer(0x1234, 201)
    assert native.current_context(get) == (201, 0) and native.create_graph(create, 0) == (201, 0)
    assert shim.shim_count() == shim.shim_held() == 2
    with pytest.raises(ValueError, match="must not be 0"):
        native.current_context(0)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        native.create_graph(create)
    with pytest.raises(OverflowError, match="32 bits"):
        native.create_graph(create, 1 << 32)
    with pytest.raises(TypeError):
        native.current_context("0x10")
    assert shim.shim_count() == 2


@pytest.fixture
def held(shim: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    get, create = addresses(shim)
    monkeypatch.setattr(calls, "_held", lambda: (c_entry.NATIVE, get, create))
    monkeypatch.setattr(calls, "_driver_checked", True)  # (the version check: tests/test_driver_version_cpu.py)
    return shim


def test_ensure_context_reads_the_current_context_with_the_gil_held(held, monkeypatch):
    held.shim_answer(0x1234, 0)
    ctx = calls.ensure_context()
    assert isinstance(ctx, drv.CUcontext) and int(ctx) == 0x1234
    assert held.shim_count() == held.shim_held() == 1
    # none current (or an error): the cuda.bindings path decides, as without the compiled module
    monkeypatch.setattr(drv, "cuCtxGetCurrent", lambda: (drv.CUresult.CUDA_SUCCESS, drv.CUcontext(0x777)))
    for rc in (0, int(drv.CUresult.CUDA_ERROR_NOT_INITIALIZED)):
        held.shim_answer(0, rc)
        assert int(calls.ensure_context()) == 0x777


def test_create_graph_makes_the_graph_with_the_gil_held_and_names_a_refusal(held):
    held.shim_answer(0, 0)
    graph = calls.create_graph()
    assert isinstance(graph, drv.CUgraph) and int(graph) == 0x5150
    held.shim_answer(0, int(drv.CUresult.CUDA_ERROR_OUT_OF_MEMORY))
    with pytest.raises(DriverError, match="cuGraphCreate failed: CUDA_ERROR_OUT_OF_MEMORY"):
        calls.create_graph()
    assert held.shim_count() == held.shim_held() == 1


def test_without_the_compiled_calls_cuda_bindings_makes_them(monkeypatch):
    monkeypatch.setattr(calls, "_held", lambda: None)
    monkeypatch.setattr(calls, "_driver_checked", True)
    made: list[int] = []
    monkeypatch.setattr(drv, "cuGraphCreate", lambda flags: made.append(flags) or (0, drv.CUgraph(0x99)))
    assert int(calls.create_graph()) == 0x99 and made == [0]
    monkeypatch.setattr(drv, "cuCtxGetCurrent", lambda: (drv.CUresult.CUDA_SUCCESS, drv.CUcontext(0x55)))
    assert int(calls.ensure_context()) == 0x55


A = drv.CUpointer_attribute


def test_the_compiled_pointer_attribute_reads_one_value_with_the_gil_held(shim):
    native = c_entry.NATIVE
    fn = ctypes.cast(shim.shim_pointer_attributes, ctypes.c_void_p).value
    shim.shim_answer(0x7F00DEADBEEF, 0)
    kind = int(A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
    pool = int(A.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)
    assert native.pointer_attribute(fn, kind, 0xFFFF_0000_1234_5678) == (0, 0xDEADBEEF)  # 4 bytes: the low half
    assert (shim.shim_last_attr(), shim.shim_last_ptr()) == (kind, 0xFFFF_0000_1234_5678)
    assert native.pointer_attribute(fn, pool, 0x9000) == (0, 0x7F00DEADBEEF)  # a pointer: 8 bytes
    shim.shim_answer(0x1, int(drv.CUresult.CUDA_ERROR_INVALID_VALUE))
    assert native.pointer_attribute(fn, kind, 0x9000) == (1, 0)  # refused: no value
    assert shim.shim_count() == shim.shim_held() == 1
    with pytest.raises(TypeError, match="takes 3 arguments"):
        native.pointer_attribute(fn, kind)
    with pytest.raises(ValueError, match="not an attribute number"):
        native.pointer_attribute(fn, -1, 0x9000)
    with pytest.raises(OverflowError):
        native.pointer_attribute(fn, kind, 1 << 64)
    with pytest.raises(ValueError, match="must not be 0"):
        native.pointer_attribute(0, kind, 0x9000)
    assert shim.shim_count() == 1


def test_memory_types_and_pool_handles_are_read_in_c_and_device_ordinals_by_cuda_bindings(shim, monkeypatch):
    fn = ctypes.cast(shim.shim_pointer_attributes, ctypes.c_void_p).value
    unsigned = frozenset({int(A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE), int(A.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)})
    monkeypatch.setattr(calls, "_held_attributes", lambda: (c_entry.NATIVE, fn, unsigned))
    asked: list[tuple[Any, int]] = []

    def bindings(n: int, attrs: list[Any], ptr: int) -> tuple[Any, list[Any]]:
        asked.append((attrs[0], ptr))
        return drv.CUresult.CUDA_SUCCESS, [-2]

    monkeypatch.setattr(drv, "cuPointerGetAttributes", bindings)
    shim.shim_answer(0x2, 0)
    assert calls.pointer_attribute(A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0xA000) == 2
    assert calls.pointer_attribute(A.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, 0xA000) == 2
    assert shim.shim_count() == 2 and asked == []
    shim.shim_answer(0x2, int(drv.CUresult.CUDA_ERROR_INVALID_VALUE))
    assert calls.pointer_attribute(A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0xA000) == 0  # unknown memory: 0
    assert calls.pointer_attribute(A.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, 0xB000) == -2  # (signed: cuda.bindings)
    assert asked == [(A.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, 0xB000)]
    monkeypatch.setattr(calls, "_held_attributes", lambda: None)  # no compiled module: cuda.bindings for all
    assert calls.pointer_attribute(A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0xC000) == -2
    assert asked[-1] == (A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0xC000)
