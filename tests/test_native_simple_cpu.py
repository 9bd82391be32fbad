"""Fills, 1-D copies and empty nodes added by the compiled loop (``KernelLoop.simple``), on the CPU.

The compiled loop writes these nodes' ``CUgraphNodeParams`` itself from their
slots; the reference is the kinds' own parameters, filled through
``cuda.bindings`` (``Lowering._add_node``). A recording ``cuGraphAddNode_v2``
keeps the 256 bytes of every structure it is handed, and a fake
``cuPointerGetAttributes`` answers memory types by address range, for both
paths alike: the bytes must be equal node by node, and decode to what the
definition says.
"""

from __future__ import annotations

import ctypes
import random
import struct
import sys
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.materialize.explicit as _explicit
import cudagraph.ops.compiled_kinds as _compiled_kinds
import cudagraph.ops.operands as _operands
from cudagraph.definition.nodes import EmptyNode, KernelNode, MemcpyNode, MemsetNode, Node
from cudagraph.definition.param_offset import ParamAt
from cudagraph.driver import c_entry as _c_entry
from cudagraph.errors import DriverError, OperandError
from cudagraph.executable.updating import _STALE
from driver_fakes import ADD_PROTO, INVALID_VALUE
from test_compiled_kinds_gpu import python_path_adds
from test_native_cpu import assert_diffs_agree

drv = pytest.importorskip("cuda.bindings.driver")
native = _c_entry.NATIVE
pytestmark = pytest.mark.skipif(native is None, reason="cudagraph.driver._native was not built")

#: CUresult cuPointerGetAttributes(unsigned int, CUpointer_attribute *, void **, CUdeviceptr)
ATTR_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_uint, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_void_p), ctypes.c_ulonglong
)
DEVICE = 0x7F00_0000_0000  # addresses from here on are device memory (memory type 2); below, pageable host
CTX = 0x7700
TYPES = {1: "memcpy", 2: "memset", 5: "empty"}
MEMSET = struct.Struct("<QQIIQQQ")  # CUDA_MEMSET_NODE_PARAMS_v2
END = struct.Struct("<QQQQi4xQQQQQQ")  # one side of a CUDA_MEMCPY3D


def memory_type(ptr: int) -> int:
    return 2 if ptr >= DEVICE else 0


class Recorder:
    """``cuGraphAddNode_v2`` and ``cuPointerGetAttributes`` as C callbacks: every structure's bytes, in order."""

    def __init__(self) -> None:
        self.params: list[bytes] = []
        self.deps: list[list[int]] = []
        self.queries: list[int] = []
        self.refuse_at: int | None = None
        self.during_query: Any = None  # called inside cuPointerGetAttributes (Python code run by the driver)
        self.add = ADD_PROTO(self._add)
        self.attributes = ATTR_PROTO(self._attributes)

    def _add(self, out: Any, graph: Any, deps: Any, edata: Any, n: int, params: Any) -> int:
        if self.refuse_at == len(self.params):
            return INVALID_VALUE
        self.params.append(ctypes.string_at(params, 256))
        self.deps.append([deps[i] for i in range(n)])
        out[0] = 0x1000 + len(self.params)
        return 0

    def _attributes(self, count: int, attrs: Any, data: Any, ptr: int) -> int:
        assert count == 1 and attrs[0] == 2  # CU_POINTER_ATTRIBUTE_MEMORY_TYPE
        self.queries.append(ptr)
        if self.during_query is not None:
            self.during_query()
        ctypes.c_uint.from_address(data[0]).value = memory_type(ptr)
        return 0

    def query(self, ptr: int) -> int:
        """The memory type the ``cuda.bindings`` path reads (``ops.operands.pointer_attribute``)."""
        self.queries.append(ptr)
        return memory_type(ptr)

    def record_bindings(self, graph: Any, deps: Any, n: int, params: Any) -> tuple[Any, Any]:
        """``Lowering.add`` (the ``cuda.bindings`` path)."""
        code = self._add([0], None, [int(d) for d in deps or []], None, n, params.getPtr())
        if code:
            return drv.CUresult(code), None
        return drv.CUresult.CUDA_SUCCESS, drv.CUgraphNode(0x1000 + len(self.params))

    def address(self, fn: Any) -> int:
        return ctypes.cast(fn, ctypes.c_void_p).value or 0


def simple_loop(rec: Recorder) -> Any:
    """A compiled loop over ``rec``'s ``cuGraphAddNode_v2`` that adds fills, copies and empty nodes, their memory
    types read from ``rec`` (the caller holds ``rec``: the loop calls it by address)."""
    loop = native.KernelLoop(rec.address(rec.add), 0x5000, 1, KernelNode, Node)
    loop.simple(CTX, rec.address(rec.attributes), 1 << 16, MemsetNode, MemcpyNode, EmptyNode)
    return loop


def lower(graph: cg.Graph, path: str, monkeypatch: pytest.MonkeyPatch, rec: Recorder | None = None) -> Recorder:
    """Lower ``graph`` through ``path``: ``"native"`` (the compiled loop with simple kinds) or ``"bindings"``."""
    rec = rec or Recorder()
    monkeypatch.setattr(_operands, "pointer_attribute", lambda attribute, ptr: rec.query(ptr))
    if path == "native":
        monkeypatch.setattr(
            _compiled_kinds, "c_address", lambda symbol: rec.address(rec.attributes) if "Pointer" in symbol else None
        )
        monkeypatch.setattr(
            _explicit,
            "kernel_loop",
            lambda graph, params: native.KernelLoop(rec.address(rec.add), graph, params, KernelNode, Node),
        )
    else:
        monkeypatch.setattr(_explicit, "kernel_loop", lambda graph, params: None)
    lowering = _explicit.Lowering(drv.CUcontext(CTX), {"p": 0x7F00_0000_4000}, [])
    lowering.add = rec.record_bindings
    with lowering.state.constructing():  # as explicit.lower builds
        lowering.lower_graph(graph, drv.CUgraph(0x5000))
    return rec


def simple_graph() -> cg.Graph:
    """Fills of each element size, 1-D and 2-D; copies each way; empty nodes; a fan-in."""
    g = cg.Graph("simple")
    dev, dev2, host = DEVICE + 0x1000, DEVICE + 0x9000, 0x5555_0000
    a = g.memset(dev, 7, count=256)
    b = g.memset(dev, np.float32(1.5), count=64, after=a)
    c = g.memset(dev2, np.uint16(0xBEEF), width=16, height=4, pitch=64, after=a)
    d = g.memset(dev, -1, count=8, element_size=4, after=[b, c])
    e = g.memcpy(dev2, dev, 512, after=d)
    f = g.memcpy(host, dev, 128, after=e)
    h = g.memcpy(dev, host, 64, after=f)
    j = g.join(h, c)
    g.memcpy(host + 64, host, 32, after=j)
    g.empty()
    return g


def test_the_compiled_loop_writes_the_parameters_the_kinds_fill(monkeypatch):
    with monkeypatch.context() as m:
        ours = lower(simple_graph(), "native", m)
    with monkeypatch.context() as m:
        theirs = lower(simple_graph(), "bindings", m)
    assert len(ours.params) == len(simple_graph()) == 10
    assert ours.params == theirs.params  # byte for byte
    assert ours.deps == theirs.deps
    assert ours.queries == theirs.queries  # each copy asks its two endpoints, source first


def test_the_bytes_decode_to_the_definition(monkeypatch):
    rec = lower(simple_graph(), "native", monkeypatch)
    kinds = [TYPES[struct.unpack_from("<i", p)[0]] for p in rec.params]
    assert kinds == ["memset"] * 4 + ["memcpy"] * 3 + ["empty", "memcpy", "empty"]
    fills = [MEMSET.unpack_from(p, 16) for p in rec.params[:4]]
    dev, dev2 = DEVICE + 0x1000, DEVICE + 0x9000
    assert fills == [
        (dev, 0, 7, 1, 256, 1, CTX),
        (dev, 0, 0x3FC00000, 4, 64, 1, CTX),  # np.float32(1.5) by bit pattern
        (dev2, 64, 0xBEEF, 2, 16, 4, CTX),  # 2-D: the pitch is written
        (dev, 0, 0xFFFFFFFF, 4, 8, 1, CTX),
    ]
    flags, reserved, copy_ctx = struct.unpack_from("<iiQ", rec.params[4], 16)
    assert (flags, reserved, copy_ctx) == (0, 0, CTX)

    def ends(p: bytes) -> tuple[Any, ...]:
        src, dst = END.unpack_from(p, 32), END.unpack_from(p, 32 + 88)
        width, height, depth = struct.unpack_from("<QQQ", p, 32 + 176)
        # (memory type, host pointer, device pointer) of each side; every other field zero
        assert src[:4] == dst[:4] == (0, 0, 0, 0) and src[7:] == dst[7:] == (0, 0, 0, 0)
        return src[4:7], dst[4:7], (width, height, depth)

    host = 0x5555_0000
    assert ends(rec.params[4]) == ((4, 0, dev), (4, 0, dev2), (512, 1, 1))  # UNIFIED: memory CUDA knows
    assert ends(rec.params[5]) == ((4, 0, dev), (1, host, 0), (128, 1, 1))  # HOST: pageable memory
    assert ends(rec.params[6]) == ((1, host, 0), (4, 0, dev), (64, 1, 1))
    assert ends(rec.params[8]) == ((1, host, 0), (1, host + 64, 0), (32, 1, 1))
    assert rec.params[7][16:] == rec.params[9][16:] == bytes(240)


def test_parameter_operands_are_resolved_from_the_lowering_bindings(monkeypatch):
    g = cg.Graph("mixed")
    p = g.param("p")
    a = g.memset(p, 1, count=16)  # a parameter: the lowering's binding
    b = g.memset(ParamAt(p, 64), 2, count=16, after=a)  # a parameter plus an offset (g.parametrize makes them)
    c = g.memcpy(p, DEVICE, 16, after=b)
    d = g.memcpy(DEVICE + 64, ParamAt(p, 128), 16, after=c)
    g.record(EVENT, after=d)  # a kind the loop does not write
    python_adds = python_path_adds(monkeypatch)
    with monkeypatch.context() as m:
        ours = lower(g, "native", m)
    assert python_adds == [g.nodes[-1].label]  # the event record alone
    with monkeypatch.context() as m:
        theirs = lower(g, "bindings", m)
    assert ours.params == theirs.params and len(ours.params) == 5
    bound = 0x7F00_0000_4000
    assert [MEMSET.unpack_from(x, 16)[0] for x in ours.params[:2]] == [bound, bound + 64]
    assert END.unpack_from(ours.params[2], 32 + 88)[4:7] == (4, 0, bound)  # the copy's destination, device memory
    assert END.unpack_from(ours.params[3], 32)[4:7] == (4, 0, bound + 128)  # the source at the offset


def test_without_the_attribute_entry_point_copies_stay_with_python(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(_operands, "pointer_attribute", lambda attribute, ptr: memory_type(ptr))
    loop = native.KernelLoop(rec.address(rec.add), 0x5000, 1, KernelNode, Node)
    loop.simple(CTX, 0, 1 << 16, MemsetNode, MemcpyNode, EmptyNode)
    g = cg.Graph("copies")
    a = g.memset(DEVICE, 1, count=4)
    g.memcpy(DEVICE + 64, DEVICE, 16, after=a)
    raw = [0, 0]
    assert loop.run(list(g.nodes), 0, raw) == 1  # the fill added; the copy handed back
    assert loop.done == 1 and raw[0] == 0x1001 and rec.queries == []


def test_construction_ends_its_memory_types_with_it(monkeypatch):
    """``explicit.lower`` asks each endpoint once, and leaves no remembered type to the executable's updates."""
    from test_node_params_pool_cpu import recording_lowering

    rec = Recorder()
    recording_lowering(monkeypatch, lambda graph, deps, edata, n, p: rec.record_bindings(graph, deps, n, p))
    monkeypatch.setattr(_operands, "pointer_attribute", lambda attribute, ptr: rec.query(ptr))
    g = cg.Graph("copies")
    prev = None
    for _ in range(5):
        prev = g.memcpy(DEVICE + 0x100, DEVICE, 16, after=prev)
    lowered = _explicit.lower(g, {}, [])
    assert rec.queries == [DEVICE, DEVICE + 0x100] and len(rec.params) == 5
    assert lowered.state.memory_types is None


def test_memory_types_are_remembered_only_inside_a_construction():
    """A state outlives its construction (an executable's updates read it): outside ``constructing()``,
    and after one that failed, it remembers no memory type."""
    from cudagraph.ops.lower_state import LowerState

    state = LowerState(drv.CUcontext(CTX))
    assert state.memory_types is None
    with pytest.raises(KeyError), state.constructing():
        assert state.memory_types == {}
        state.memory_types[DEVICE] = "UNIFIED"
        raise KeyError("a failed construction")
    assert state.memory_types is None


def test_a_loop_asks_memory_types_again_at_each_run(monkeypatch):
    """A loop kept across runs (an executable's setter is) forgets the memory types it read: between two runs
    the memory at an address may be freed and allocated again, as host memory this time."""
    rec = Recorder()
    loop = simple_loop(rec)
    g = cg.Graph("copies")
    a = g.memcpy(DEVICE + 0x100, DEVICE, 16)
    g.memcpy(DEVICE + 0x200, DEVICE, 16, after=a)
    assert loop.run(list(g.nodes), 0, [0, 0]) == 2
    assert rec.queries == [DEVICE, DEVICE + 0x100, DEVICE + 0x200]  # the shared source once
    monkeypatch.setattr(sys.modules[__name__], "memory_type", lambda ptr: 0)  # now pageable host memory
    assert loop.run(list(g.nodes), 0, [0, 0]) == 2
    assert rec.queries[3:] == [DEVICE, DEVICE + 0x100, DEVICE + 0x200]
    src_types = [END.unpack_from(p, 32)[4] for p in rec.params]
    assert src_types == [4, 4, 1, 1]  # UNIFIED in the first run, HOST in the second


def test_a_copy_from_an_address_no_allocation_has_is_named_by_python(monkeypatch):
    g = cg.Graph("low")
    g.memcpy(DEVICE, 0x100, 16, name="h2d")
    with pytest.raises(OperandError, match=r"memcpy#0 'h2d': src: 0x100 is not an address of device or host"):
        lower(g, "native", monkeypatch)


def test_a_refused_fill_is_named_and_nothing_after_it_is_added(monkeypatch):
    rec = Recorder()
    rec.refuse_at = 1
    g = cg.Graph("refuse")
    a = g.memset(DEVICE, 1, count=4)
    b = g.memset(DEVICE, 2, count=4, after=a, name="second")
    g.memset(DEVICE, 3, count=4, after=b)
    with pytest.raises(DriverError, match=r"cuGraphAddNode.*memset#1 'second'"):
        lower(g, "native", monkeypatch, rec)
    assert len(rec.params) == 1


def test_python_code_run_by_a_query_cannot_break_the_loop(monkeypatch):
    """The driver's memory-type query is a Python callback here: it empties the lists the loop reads and
    tries to use the loop; the loop refuses the call, keeps its node and stops safely."""
    rec = Recorder()
    loop = simple_loop(rec)
    g = cg.Graph("hostile")
    a = g.memcpy(DEVICE + 64, DEVICE, 16)
    g.memcpy(DEVICE + 128, DEVICE, 16, after=a)
    order, raw = list(g.nodes), [0, 0]
    refused: list[str] = []

    def meddle() -> None:
        order.clear()
        raw.clear()
        try:
            loop.run([], 0, [])
        except RuntimeError as e:
            refused.append(str(e))

    rec.during_query = meddle
    done = loop.run(order, 0, raw)
    assert done == 0 and loop.rc == -1 and refused  # raw was emptied: the handle could not be stored
    assert len(rec.params) == 1 and "running a call" in refused[0]


def test_simple_refuses_bad_arguments():
    rec = Recorder()
    loop = native.KernelLoop(rec.address(rec.add), 0x5000, 1, KernelNode, Node)
    with pytest.raises(TypeError, match=r"simple\(ctx, attributes, lowest"):
        loop.simple(CTX, 0, 1 << 16)
    with pytest.raises(TypeError, match="memset_type must be a type"):
        loop.simple(CTX, 0, 1 << 16, "MemsetNode", MemcpyNode, EmptyNode)
    with pytest.raises(TypeError, match="ctx must be an address"):
        loop.simple("ctx", 0, 1 << 16, MemsetNode, MemcpyNode, EmptyNode)
    with pytest.raises(TypeError, match="set_fn must be an address"):
        loop.simple(CTX, 0, 1 << 16, MemsetNode, MemcpyNode, EmptyNode, "set")
    assert not loop.knows_simple  # (the refused calls changed nothing)
    setter = native.KernelLoop(rec.address(rec.add), 0x5000, 1, KernelNode, Node, True)
    setter.simple(CTX, 0, 1 << 16, MemsetNode, MemcpyNode, EmptyNode)  # no set_fn: fills stay with Python
    assert setter.knows_simple
    g0 = cg.Graph("fill")
    g0.memset(DEVICE, 1, count=4)
    assert setter.run(list(g0.nodes), 0, [0x100]) == 0 and setter.done == 0
    g = cg.Graph("unknown")
    g.empty()
    assert loop.run(list(g.nodes), 0, [0]) == 0  # nothing known yet: handed back


def test_a_context_that_is_not_a_handle_leaves_the_kinds_to_python():
    rec = Recorder()
    loop = native.KernelLoop(rec.address(rec.add), 0x5000, 1, KernelNode, Node)
    _compiled_kinds.add_simple_kinds(loop, "context")
    g = cg.Graph("plain")
    g.empty()
    assert loop.run(list(g.nodes), 0, [0]) == 0 and rec.params == []


def test_the_kinds_declare_what_the_loop_writes():
    assert _compiled_kinds.compiled_classes() == (MemsetNode, MemcpyNode, EmptyNode)


# --------------------------------------------------------------------------- per-node executable updates

SET_PROTO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def update_chain(step: int) -> cg.Graph:
    """Fills and copies, each changing with ``step`` (a kernel-free chain: every node goes to the writer)."""
    g = cg.Graph("steps")
    prev = None
    for i in range(6):
        prev = g.memset(DEVICE + 64 * i, step + i, count=16, after=prev)
        prev = g.memcpy(DEVICE + 0x1000 + step, 0x5555_0000 + 8 * i, 32 + step, after=prev)
    g.memset(DEVICE, np.float32(step), count=2, after=g.join(prev))
    return g


def compiled_setter(monkeypatch: pytest.MonkeyPatch, set_node: Any, rec: Recorder) -> Any:
    """An executable of :func:`update_chain` whose writer's compiled loop sets nodes through the C callback
    ``set_node`` (a ``SET_PROTO``, for kernels and the simple kinds) and reads memory types from ``rec``.

    The loop calls both callbacks by address: the caller holds ``set_node`` and ``rec`` while it updates.
    """
    import cudagraph.ops.kinds.kernel as _kernel_writer
    from test_bind_plan_cpu import make_exe

    address = ctypes.cast(set_node, ctypes.c_void_p).value
    addresses = {"cuGraphExecNodeSetParams": address, "cuPointerGetAttributes": rec.address(rec.attributes)}
    monkeypatch.setattr(_compiled_kinds, "c_address", addresses.get)
    monkeypatch.setattr(
        _kernel_writer,
        "kernel_loop",
        lambda target, params, set_mode: native.KernelLoop(address, target, params, KernelNode, Node, True),
    )
    monkeypatch.setattr(_kernel_writer, "c_address", lambda symbol: address)
    exe = make_exe(update_chain(0))
    exe._ctx = drv.CUcontext(CTX)
    return exe


def run_updates(path: str, monkeypatch: pytest.MonkeyPatch) -> list[list[bytes]]:
    """Two per-node updates of :func:`update_chain` through ``path``: the bytes each set call got, per update."""
    import cudagraph.ops.kinds.kernel as _kernel_writer
    from test_bind_plan_cpu import make_exe

    seen: list[tuple[int, int, bytes]] = []
    rec = Recorder()

    def set_c(exec_handle: int, dnode: int, params: int) -> int:
        seen.append((exec_handle, dnode, ctypes.string_at(params, 256)))
        return 0

    def set_bindings(exec_handle: Any, dnode: Any, params: Any) -> tuple[Any]:
        seen.append((int(exec_handle), int(dnode), ctypes.string_at(params.getPtr(), 256)))
        return (drv.CUresult.CUDA_SUCCESS,)

    cb = SET_PROTO(set_c)
    monkeypatch.setattr(drv, "cuGraphExecNodeSetParams", set_bindings)
    monkeypatch.setattr(_operands, "pointer_attribute", lambda attribute, ptr: rec.query(ptr))
    if path == "native":
        exe = compiled_setter(monkeypatch, cb, rec)
    else:
        monkeypatch.setattr(_kernel_writer, "kernel_loop", lambda *a, **k: None)
        exe = make_exe(update_chain(0))
        exe._ctx = drv.CUcontext(CTX)
    out: list[list[bytes]] = []
    for step in (1, 2):
        seen.clear()
        g2 = update_chain(step)
        result = exe.update(g2)
        changed = [n for n in g2.nodes if not isinstance(n, EmptyNode)]
        assert result.mode == "per-node" and result.nodes_updated == len(changed)
        assert [(e, d) for e, d, _ in seen] == [(0x4242, 0x100 + n.index) for n in changed]
        out.append([p for _, _, p in seen])
    return out


def test_per_node_updates_set_fills_and_copies_with_the_kinds_parameters(monkeypatch):
    """Executable.update of a rebuilt definition: the compiled writer sets each changed fill and copy through
    cuGraphExecNodeSetParams with the bytes the kinds' own parameters hold (the bindings path)."""
    with monkeypatch.context() as m:
        ours = run_updates("native", m)
    with monkeypatch.context() as m:
        theirs = run_updates("bindings", m)
    assert ours == theirs and len(ours[0]) == 13
    fill = MEMSET.unpack_from(ours[1][-1], 16)
    assert fill == (DEVICE, 0, 0x40000000, 4, 2, 1, CTX)  # np.float32(2.0) at step 2


def param_chain(value: int) -> cg.Graph:
    """A fill of a parameter and a copy from it at an offset, beside a fill of a plain address."""
    g = cg.Graph("params")
    p = g.param("p")
    f = g.memset(p, value, count=4, element_size=4)
    c = g.memcpy(DEVICE + 0x2000, ParamAt(p, 64), 16, after=f)
    g.memset(DEVICE, value, count=4, element_size=4, after=c)
    return g


@pytest.mark.parametrize("path", ["native", "bindings"])
def test_per_node_updates_read_parameter_operands_from_the_update_bindings(monkeypatch, path):
    import cudagraph.ops.kinds.kernel as _kernel_writer
    from test_bind_plan_cpu import make_exe

    seen: list[tuple[int, bytes]] = []
    by_bindings: list[int] = []
    rec = Recorder()

    def set_c(exec_handle: int, dnode: int, params: int) -> int:
        seen.append((dnode, ctypes.string_at(params, 256)))
        return 0

    def set_bindings(exec_handle: Any, dnode: Any, params: Any) -> tuple[Any]:
        by_bindings.append(int(dnode))
        seen.append((int(dnode), ctypes.string_at(params.getPtr(), 256)))
        return (drv.CUresult.CUDA_SUCCESS,)

    cb = SET_PROTO(set_c)
    monkeypatch.setattr(drv, "cuGraphExecNodeSetParams", set_bindings)
    monkeypatch.setattr(_operands, "pointer_attribute", lambda attribute, ptr: rec.query(ptr))
    if path == "native":
        compiled_setter(monkeypatch, cb, rec)
    else:
        monkeypatch.setattr(_kernel_writer, "kernel_loop", lambda *a, **k: None)
    p0, p1 = DEVICE + 0x8000, DEVICE + 0x9000
    exe = make_exe(param_chain(1), p=p0)
    exe._ctx = drv.CUcontext(CTX)
    result = exe.update(param_chain(2), p=p1)  # every node changes: the values, and the parameter's address
    assert result.mode == "per-node" and result.nodes_updated == 3
    assert [d for d, _ in seen] == [0x100, 0x101, 0x102]
    assert MEMSET.unpack_from(seen[0][1], 16)[:3] == (p1, 0, 2)  # the parameter's new address, the new value
    assert END.unpack_from(seen[1][1], 32)[4:7] == (4, 0, p1 + 64)  # the copy's source at its offset
    assert by_bindings == ([] if path == "native" else [0x100, 0x101, 0x102])
    before = len(seen)
    exe.update(param_chain(2), p=p1)  # nothing changed: nothing set
    assert len(seen) == before


def test_a_refused_update_names_the_copy(monkeypatch):
    cb = SET_PROTO(lambda e, d, p: INVALID_VALUE if d == 0x101 else 0)
    monkeypatch.setattr(drv, "cuGraphExecNodeSetParams", lambda *a: pytest.fail("the Python path ran"))
    rec = Recorder()  # (held: the loop calls its memory-type callback by address)
    exe = compiled_setter(monkeypatch, cb, rec)
    g2 = update_chain(1)
    with pytest.raises(DriverError, match=r"cuGraphExecNodeSetParams.*memcpy#1 'memcpy'"):
        exe._per_node_update(list(g2.nodes), {})
    assert exe.update_calls == 1  # the fill before it was set: it is marked stale, as the refused copy is
    assert [i for i, st in enumerate(exe._recorded_states()) if st is _STALE] == [0, 1]


EVENT = drv.CUevent(0xE7E7)


def random_simple_graph(rng: random.Random, size: int) -> cg.Graph:
    """``size`` nodes with up to three random predecessors: fills (of every element size, some of a
    parameter), copies each way (some from or to a parameter at an offset), empty nodes and event records
    (whose parameters Python always makes)."""
    g = cg.Graph("r")
    p = g.param("p")
    nodes: list[Any] = []
    for i in range(size):
        k = rng.randint(0, min(3, i))
        after = rng.sample(nodes, k) or None
        kind = rng.choice("ffccepqx")
        if kind == "f":
            value = rng.choice([0, 7, -1, np.float32(0.5), np.uint16(3), np.int32(-9)])
            nodes.append(g.memset(DEVICE + 64 * rng.randint(0, 8), value, count=rng.randint(1, 16), after=after))
        elif kind == "c":
            ends = [DEVICE + 0x100 * rng.randint(0, 4), 0x5555_0000 + 0x40 * rng.randint(0, 4)]
            rng.shuffle(ends)
            nodes.append(g.memcpy(ends[0], ends[1], rng.randint(1, 64), after=after))
        elif kind == "e":
            nodes.append(g.empty(after=after))
        elif kind == "p":
            nodes.append(g.memset(p, 1, count=4, after=after))
        elif kind == "q":  # a copy from or to a parameter at an offset
            ends = [ParamAt(p, 8 * rng.randint(0, 4)), DEVICE + 0x100 * rng.randint(0, 4)]
            rng.shuffle(ends)
            nodes.append(g.memcpy(ends[0], ends[1], 8, after=after))
        else:
            nodes.append(g.record(EVENT, after=after))
    return g


def test_both_paths_write_the_same_parameters_on_random_graphs(monkeypatch):
    rng = random.Random(5)
    for trial in range(30):
        size = rng.randint(1, 40)
        state = rng.getstate()
        runs = []
        for path in ("native", "bindings"):
            rng.setstate(state)  # the same graph both times
            with monkeypatch.context() as m:
                runs.append(lower(random_simple_graph(rng, size), path, m))
        ours, theirs = runs
        assert ours.params == theirs.params, trial
        assert ours.deps == theirs.deps, trial
        # Each path asks only the copies' endpoints: the Python path each once per construction, the compiled
        # loop each once while it is among the last four it asked in a run (10 endpoints here: some again).
        assert set(ours.queries) == set(theirs.queries), trial
        assert len(theirs.queries) == len(set(theirs.queries)), trial
        assert len(ours.queries) >= len(theirs.queries), trial


def test_a_chain_of_copies_asks_each_endpoint_once_per_construction(monkeypatch):
    g = cg.Graph("copies")
    prev = None
    for i in range(50):
        ends = (DEVICE + 0x100, 0x5555_0000) if i % 2 else (0x5555_0000, DEVICE + 0x100)
        prev = g.memcpy(ends[0], ends[1], 64, after=prev)
    for path in ("native", "bindings"):
        with monkeypatch.context() as m:
            rec = lower(g, path, m)
            assert rec.queries == [DEVICE + 0x100, 0x5555_0000], path  # source first
            lower(g, path, m, rec)  # a later construction asks again: memory may have changed meanwhile
            assert rec.queries == [DEVICE + 0x100, 0x5555_0000] * 2, path
            assert len(rec.params) == 100


# --------------------------------------------------------------------------- the compiled diff of fills and copies


def test_the_compiled_diff_of_fills_and_copies_equals_the_definition_layers():
    from cudagraph.definition.diff import node_state

    rng = random.Random(8)

    def big(v: int) -> int:
        return int(str(v))  # an equal int that is another object (above the small-int cache)

    for _ in range(60):
        size = rng.randint(1, 25)
        plan = [
            (rng.choice("fc"), DEVICE + 0x1000 * rng.randint(0, 3), rng.choice([0, 7, 300, 70000]), rng.randint(1, 64))
            for _ in range(size)
        ]

        def build(change: bool, base: list[tuple[str, int, int, int]], g: cg.Graph, p: Any) -> cg.Graph:
            prev = None
            for kind, addr, value, n in base:
                r = rng.random() if change else 1.0
                if r < 0.15:
                    addr += 0x40  # another address
                elif r < 0.3:
                    addr, value, n = big(addr), big(value), big(n)  # equal values, other objects
                elif r < 0.35:
                    addr = p  # a parameter: the Python path decides
                if kind == "f":
                    prev = g.memset(addr, value & 0xFF, count=n, after=prev)
                else:
                    prev = g.memcpy(addr, DEVICE + 0x8000, n, after=prev)
            return g

        g1 = cg.Graph("a")
        build(False, plan, g1, g1.param("p"))
        states = [node_state(x) for x in g1.nodes]
        g2 = cg.Graph("b")
        build(True, plan, g2, g2.param("p"))
        assert_diffs_agree(states, g2)


def test_the_compiled_diff_is_told_of_fills_and_copies_only_when_their_states_are_its_slots():
    from cudagraph.definition import diff as _diff
    from cudagraph.executable import compare as _compare

    layout = native.Layout(KernelNode, Node)
    with pytest.raises(TypeError, match=r"simple\(memset_type: type, memcpy_type: type\)"):
        layout.simple(MemsetNode)
    with pytest.raises(AttributeError, match=r"has no attribute 'src'.*NATIVE_SLOTS\['memcpy_node'\]"):
        layout.simple(MemsetNode, MemsetNode)
    assert _diff.state_fields(MemsetNode) == _c_entry.NATIVE_SLOTS["memset_node"]
    assert _diff.state_fields(MemcpyNode) == _c_entry.NATIVE_SLOTS["memcpy_node"]
    layout = _compare._layout()
    g1, g2 = update_chain(0), update_chain(1)
    states = [_diff.node_state(n) for n in g1.nodes]
    changed, suspects = layout.diff(list(g2.nodes), states, _diff.IDENTITY_TYPES)
    fills_copies = [n.index for n in g2.nodes if not isinstance(n, EmptyNode)]
    assert [n.index for n in changed] == fills_copies  # decided in C: every fill and copy changed
    assert suspects == [i for i, n in enumerate(g2.nodes) if isinstance(n, EmptyNode)]  # (not told of these)
