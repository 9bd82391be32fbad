"""Fills, 1-D copies and empty nodes issued by the compiled ``StreamLauncher`` (``Graph.run``'s ``issue`` and the
capture backend's ``capture``), on the CPU.

The compiled launcher, taught these kinds by ``StreamLauncher.simple``, makes their
stream calls (``cuMemsetD*Async``, ``cuMemcpyAsync``) itself, in the batches of its
kernel launches (or node by node under capture, each after its dependencies); the
reference is the kinds' own ``issue`` (and ``capture``) through ``cuda.bindings``.
Every call either path makes lands in one recording fake driver (ctypes callbacks
with the C signatures for the compiled path, Python functions for ``cuda.bindings``),
kernels and fills in one list: the lists must be equal call for call, and the compiled
path must have made the fills and copies itself.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.materialize.eager as _eager
import cudagraph.ops.compiled_kinds as _compiled_kinds
import cudagraph.ops.kinds.copy as _copy
import cudagraph.ops.kinds.memset as _memset
import cudagraph.ops.operands as _operands
from cudagraph.driver import api, c_entry, stream_launch
from cudagraph.driver.kernel_args import PACKING_LOCK
from cudagraph.errors import DriverError, OperandError
from cudagraph.materialize.eager import StreamIssue
from cudagraph.ops.lower_state import LowerState
from driver_fakes import INVALID_VALUE
from test_native_simple_cpu import ATTR_PROTO, DEVICE, memory_type
from test_stream_launch_cpu import K1, K2, Driver, install, k1_bytes, replay, run_graph

drv = pytest.importorskip("cuda.bindings.driver")
native = c_entry.NATIVE
pytestmark = pytest.mark.skipif(native is None, reason="cudagraph.driver._native was not built")

U64, SZ, VP = ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_void_p
#: The C signatures of the stream calls, in the order of ``compiled_kinds.STREAM_CALLS``.
PROTOS = {
    "cuMemsetD8Async": ctypes.CFUNCTYPE(ctypes.c_int, U64, ctypes.c_ubyte, SZ, VP),
    "cuMemsetD16Async": ctypes.CFUNCTYPE(ctypes.c_int, U64, ctypes.c_ushort, SZ, VP),
    "cuMemsetD32Async": ctypes.CFUNCTYPE(ctypes.c_int, U64, ctypes.c_uint, SZ, VP),
    "cuMemsetD2D8Async": ctypes.CFUNCTYPE(ctypes.c_int, U64, SZ, ctypes.c_ubyte, SZ, SZ, VP),
    "cuMemsetD2D16Async": ctypes.CFUNCTYPE(ctypes.c_int, U64, SZ, ctypes.c_ushort, SZ, SZ, VP),
    "cuMemsetD2D32Async": ctypes.CFUNCTYPE(ctypes.c_int, U64, SZ, ctypes.c_uint, SZ, SZ, VP),
    "cuMemcpyAsync": ctypes.CFUNCTYPE(ctypes.c_int, U64, U64, SZ, VP),
}
assert tuple(PROTOS) == _compiled_kinds.STREAM_CALLS
A, B, C = DEVICE + 0x1000, DEVICE + 0x9000, DEVICE + 0x20000  # device memory
HOST = 0x5000_0000  # pageable host memory (below DEVICE: the fake's memory type 0)


class Ops:
    """The stream calls of fills and copies, recorded into a :class:`Driver`'s ``launches`` (one order)."""

    def __init__(self, d: Driver) -> None:
        self.d = d
        self.by_bindings = 0
        self.queries: list[int] = []
        self.refuse: str | None = None  # the call refused (its first call from then on)
        self.c = {name: proto(self._recorder(name)) for name, proto in PROTOS.items()}
        self.attributes = ATTR_PROTO(self._attributes)

    def _recorder(self, name: str) -> Any:
        def record(*args: Any) -> int:
            d = self.d
            if self.refuse == name:
                return INVALID_VALUE
            *values, stream = args
            d.launches.append((name, *[int(v) for v in values], stream or 0))
            if d.capturing:  # as the fake's kernel launches: a captured node after the stream's dependencies
                node = 0x1000 + len(d.made)
                d.made.append(node)
                d.edges += [(dep, node) for dep in d.deps]
                d.deps = [node]
            return 0

        return record

    def _attributes(self, count: int, attrs: Any, data: Any, ptr: int) -> int:
        self.queries.append(ptr)
        ctypes.c_uint.from_address(data[0]).value = memory_type(ptr)
        return 0

    def address(self, name: str) -> int:
        if name == "cuPointerGetAttributes":
            return ctypes.cast(self.attributes, ctypes.c_void_p).value or 0
        return ctypes.cast(self.c[name], ctypes.c_void_p).value or 0

    def bindings(self, base: Any) -> Any:
        """``cuda.bindings``' driver as the kinds' ``issue`` sees it: the stream calls recorded in Python."""

        def wrap(name: str) -> Any:
            record = self._recorder(name)

            def call(*args: Any) -> tuple[Any]:
                self.by_bindings += 1
                return (drv.CUresult(record(*args[:-1], int(args[-1]))),)

            call.__name__ = name
            return call

        return SimpleNamespace(**vars(base), **{name: wrap(name) for name in PROTOS})

    def query(self, ptr: int) -> int:
        self.queries.append(ptr)
        return memory_type(ptr)


def install_ops(path: str, monkeypatch: pytest.MonkeyPatch, entry_points: bool = True) -> tuple[Driver, Ops]:
    """The recording driver of ``test_stream_launch_cpu`` with the stream calls of fills and copies; the compiled
    launcher is taught them (``entry_points=False``: taught without their addresses)."""
    d = install(path, monkeypatch)
    ops = Ops(d)
    base = SimpleNamespace(CUresult=drv.CUresult, CUstream=drv.CUstream)
    fake_bindings = ops.bindings(base)
    monkeypatch.setattr(_memset, "require_driver", lambda: fake_bindings)
    monkeypatch.setattr(_copy, "require_driver", lambda: fake_bindings)
    monkeypatch.setattr(api, "require_driver", lambda: fake_bindings)
    monkeypatch.setattr(_operands, "pointer_attribute", lambda attribute, ptr: ops.query(ptr))
    monkeypatch.setattr(
        _compiled_kinds,
        "c_address",
        lambda symbol: ops.address(symbol) if entry_points or symbol == "cuPointerGetAttributes" else None,
    )
    monkeypatch.setattr(_eager, "_TAUGHT", [None])
    d.ops = ops  # type: ignore[attr-defined]  (held with the driver: the launcher calls it by address)
    return d, ops


def teach_with_query(launcher: Any, ops: Ops, query: Any) -> None:
    """Teach ``launcher`` the fills and copies of ``ops``, its memory types read by the Python ``query`` (held)."""
    ops.attributes = ATTR_PROTO(query)
    launcher.simple(
        tuple(ops.address(n) for n in PROTOS),
        0,
        ops.address("cuPointerGetAttributes"),
        1 << 16,
        *_compiled_kinds.compiled_classes(),
    )


def both_ways(monkeypatch: pytest.MonkeyPatch, g: cg.Graph, **kw: Any) -> tuple[tuple[Driver, Ops], ...]:
    out = []
    for path in ("compiled", "python"):
        with monkeypatch.context() as m:
            d, ops = install_ops(path, m, **kw)
            run_graph(d, g)
            out.append((d, ops))
        stream_launch.forget()
    return tuple(out)


def fills_and_copies(n: int = 3) -> cg.Graph:
    """Kernels between fills of every width, 1-D and 2-D, copies every way, empty nodes and a parameter."""
    g = cg.Graph("simple")
    prev = g.kernel(K1, 1, 32, (A, np.float32(1), np.int32(1)))
    for i in range(n):
        prev = g.memset(A + 64 * i, 0xAB, count=16 + i, element_size=1, after=prev)
        prev = g.memset(B, 0xBEEF, count=8, element_size=2, after=prev)
        prev = g.memset(C, 0x3F800000 + i, count=32, element_size=4, after=prev)
        prev = g.memset(A, 7, width=16, height=3, pitch=64, element_size=1, after=prev)
        prev = g.memset(B, 0x1234, width=8, height=2, pitch=32, element_size=2, after=prev)
        prev = g.memset(C, 0xFFFFFFFF, width=4, height=5, pitch=16, element_size=4, after=prev)
        prev = g.kernel(K2, 2, 64, (np.int32(i), np.float64(i)), after=prev)
        prev = g.memcpy(B + 8 * i, A, nbytes=256, after=prev)  # device to device
        prev = g.memcpy(A, HOST + 16 * i, nbytes=64, after=prev)  # pageable host to device
        prev = g.memcpy(HOST, C, nbytes=32, after=prev)  # device to host
        prev = g.join(prev, g.empty(after=prev))
        prev = g.kernel(K1, 1, 32, (B, np.float32(i), np.int32(i)), after=prev)
    g.memset(g.param("x"), 0, count=4, element_size=4, after=prev)  # a parameter, bound by the run
    return g


def test_fills_copies_and_empty_nodes_make_the_same_calls_both_ways(monkeypatch):
    g = fills_and_copies()
    (c, cops), (p, pops) = both_ways(monkeypatch, g)
    assert c.launches == p.launches
    names = [x[0] for x in c.launches]
    assert len(names) == 1 + 3 * 11 + 1  # every node but the empty ones is one call
    fills = list(PROTOS)[:6]  # every width, 1-D then 2-D: the order of the fills in the graph
    assert names[1:12] == [*fills, 0x72, "cuMemcpyAsync", "cuMemcpyAsync", "cuMemcpyAsync", 0x71]
    assert c.launches[1] == ("cuMemsetD8Async", A, 0xAB, 16, 0x42)
    assert c.launches[3] == ("cuMemsetD32Async", C, 0x3F800000, 32, 0x42)
    assert c.launches[6] == ("cuMemsetD2D32Async", C, 16, 0xFFFFFFFF, 4, 5, 0x42)
    assert c.launches[9] == ("cuMemcpyAsync", A, HOST, 64, 0x42)
    assert c.launches[11][5] == k1_bytes(B, 0.0, 0)
    assert c.launches[-1] == ("cuMemsetD32Async", 0xF000, 0, 4, 0x42)  # the parameter bound to 0xF000
    # the twin makes every fill and copy through cuda.bindings; the compiled launcher none
    assert pops.by_bindings == 3 * 9 + 1 and cops.by_bindings == 0


def test_a_copy_asks_each_end_its_memory_type_once_a_run(monkeypatch):
    g = cg.Graph("copies")
    prev = None
    for _ in range(5):
        prev = g.memcpy(B, A, nbytes=16, after=prev)
    prev = g.memcpy(A, HOST, nbytes=16, after=prev)
    (c, cops), (p, pops) = both_ways(monkeypatch, g)
    assert c.launches == p.launches == [("cuMemcpyAsync", B, A, 16, 0x42)] * 5 + [("cuMemcpyAsync", A, HOST, 16, 0x42)]
    assert pops.queries == [A, B] * 5 + [HOST, A]  # the twin asks at every copy
    assert cops.queries == [A, B, HOST]  # the compiled run remembers what it asked
    with monkeypatch.context() as m:  # a second run asks again: memory may have been freed and allocated since
        d, ops = install_ops("compiled", m)
        run_graph(d, g)
        run_graph(d, g)
        assert ops.queries == [A, B, HOST] * 2
    stream_launch.forget()


def test_runs_longer_than_a_batch_keep_their_order(monkeypatch):
    g = cg.Graph("long")
    prev = None
    for i in range(150):  # more calls than one batch holds (64), kernels among them
        prev = g.memset(A + 4 * i, i, count=1, element_size=4, after=prev)
        if i % 7 == 0:
            prev = g.kernel(K1, 1, 32, (C + i, np.float32(i), np.int32(i)), after=prev)
    (c, cops), (p, _) = both_ways(monkeypatch, g)
    assert c.launches == p.launches and len(c.launches) == 150 + 22
    fills = [x for x in c.launches if x[0] == "cuMemsetD32Async"]
    assert fills == [("cuMemsetD32Async", A + 4 * i, i, 1, 0x42) for i in range(150)]
    assert cops.by_bindings == 0


@pytest.mark.parametrize("refused", ["cuMemsetD16Async", "cuMemsetD2D32Async", "cuMemcpyAsync"])
def test_a_refused_fill_or_copy_is_a_driver_error_naming_the_call_and_node(monkeypatch, refused):
    g = fills_and_copies(1)
    errors = []
    for path in ("compiled", "python"):
        with monkeypatch.context() as m:
            d, ops = install_ops(path, m)
            ops.refuse = refused
            with pytest.raises(DriverError) as info:
                run_graph(d, g)
            errors.append((str(info.value), info.value.call, info.value.node, list(d.launches)))
        stream_launch.forget()
    assert errors[0] == errors[1]
    message, call, node, made = errors[0]
    assert call == refused and message.startswith(f"{refused} failed for {node.label} of Graph 'simple'")
    assert node.kind == ("memcpy" if refused == "cuMemcpyAsync" else "memset")
    assert refused not in [x[0] for x in made]  # nothing after the refused call was made


def test_a_copy_from_an_address_no_allocation_has_is_left_to_the_twin_which_names_it(monkeypatch):
    g = cg.Graph("low")
    k = g.kernel(K1, 1, 32, (A, np.float32(1), np.int32(1)))
    g.memcpy(A, 0x100, nbytes=8, after=g.memset(A, 1, count=2, element_size=4, after=k))
    seen = []
    for path in ("compiled", "python"):
        with monkeypatch.context() as m:
            d, _ = install_ops(path, m)
            with pytest.raises(OperandError, match=r"src: 0x100 is not an address of device or host memory"):
                run_graph(d, g)
            seen.append(list(d.launches))
        stream_launch.forget()
    assert seen[0] == seen[1] and [x[0] for x in seen[0]] == [0x71, "cuMemsetD32Async"]


def test_without_their_entry_points_fills_and_copies_go_through_the_twin(monkeypatch):
    g = fills_and_copies(2)
    (c, cops), (p, pops) = both_ways(monkeypatch, g, entry_points=False)
    assert c.launches == p.launches
    assert cops.by_bindings == pops.by_bindings == 2 * 9 + 1


def test_simple_refuses_a_malformed_call_and_changes_nothing():
    launcher = stream_launch.compiled_launcher(0x1234, 0, 0)
    classes = _compiled_kinds.compiled_classes()
    with pytest.raises(TypeError, match=r"simple\(ops: tuple of 7 addresses"):
        launcher.simple((0,) * 6, 0, 0, 1 << 16, *classes)
    with pytest.raises(TypeError, match="must be a type"):
        launcher.simple((0,) * 7, 0, 0, 1 << 16, classes[0], classes[1], "empty")
    with pytest.raises(TypeError):
        launcher.simple(("x",) + (0,) * 6, 0, 0, 1 << 16, *classes)
    assert launcher.issue([], 0, 0x42) == 0 and launcher.rc == 0


def test_python_code_run_by_a_memory_type_query_finds_the_launcher_busy(monkeypatch):
    g = cg.Graph("hostile")
    copy = g.memcpy(B, A, nbytes=16)
    g.memset(C, 5, count=4, element_size=4, after=copy)
    d, ops = install_ops("compiled", monkeypatch)
    run_graph(d, cg.Graph("empty"))  # taught
    launcher = stream_launch.LAUNCHER
    seen: list[Any] = []
    query = ops._attributes

    def hostile(count: int, attrs: Any, data: Any, ptr: int) -> int:
        try:
            launcher.simple((0,) * 7, 0, 0, 1 << 16, *_compiled_kinds.compiled_classes())
        except RuntimeError as e:
            seen.append(str(e))
        seen.append(launcher.issue([copy], 0, 0x43))  # declines: the index it was given
        copy.nbytes = 999  # read before the query: the call made is the node as it was read
        return query(count, attrs, data, ptr)

    teach_with_query(launcher, ops, hostile)
    d.launches.clear()
    with monkeypatch.context() as m:
        m.setattr(_eager, "_TAUGHT", [launcher])  # (taught above, with the hostile query)
        run_graph(d, g)
    assert seen[:2] == ["simple: the launcher is issuing", 0]
    assert d.launches == [("cuMemcpyAsync", B, A, 16, 0x42), ("cuMemsetD32Async", C, 5, 4, 0x42)]
    assert ops.by_bindings == 0


def test_the_capture_backend_captures_fills_copies_and_empty_nodes_the_same_both_ways(monkeypatch):
    g = fills_and_copies()
    first = g.nodes[0]
    fan = [g.memset(C + 4 * i, i, count=1, element_size=4, after=first) for i in range(3)]  # three branches
    g.memset(A, 1, count=4, element_size=4, after=g.join(*fan))  # joined by an empty node
    seen = []
    for path in ("compiled", "python"):
        with monkeypatch.context() as m:
            d, ops = install_ops(path, m)
            _eager.stream_launcher()  # taught (the replay below reads the launcher as it is)
            exits, mapped = replay(d, g)
            seen.append((d.launches, d.edges, d.made, exits, mapped, ops.by_bindings))
        stream_launch.forget()
    (launches, edges, made, exits, mapped, by_bindings), python = seen[0], seen[1]
    assert seen[0][:5] == python[:5]
    assert by_bindings == 0 and python[5] == 3 * 9 + 5  # the compiled path made them all
    captured = [n for n in g.nodes if n.kind != "empty"]
    assert len(made) == len(launches) == len(captured)
    assert [mapped.get(id(n)) for n in captured] == made  # each call's node, in order
    assert not any(id(n) in mapped for n in g.nodes if n.kind == "empty")
    last = g.nodes[-1]
    assert sorted(src for src, dst in edges if dst == mapped[id(last)]) == [mapped[id(n)] for n in fan]
    assert {src for src, dst in edges if dst in {mapped[id(n)] for n in fan}} == {mapped[id(first)]}
    param_fill = g.nodes[-len(fan) - 3]  # the parameter's fill, a leaf like the last node
    assert param_fill.kind == "memset" and not param_fill.successors
    assert exits == sorted([mapped[id(param_fill)], mapped[id(last)]])


def test_a_launcher_busy_when_first_needed_is_taught_at_a_later_run(monkeypatch):
    g = cg.Graph("later")
    g.memset(C, 3, count=4, element_size=4, after=g.memcpy(B, A, nbytes=16))
    d, ops = install_ops("compiled", monkeypatch)
    launcher = _eager.stream_launcher()
    seen: list[Any] = []
    query = ops._attributes

    def teach_while_busy(count: int, attrs: Any, data: Any, ptr: int) -> int:
        if not seen:  # (the launcher is issuing the copy: busy)
            _eager._TAUGHT[0] = None
            seen.append((_eager.stream_launcher(), _eager._TAUGHT[0]))
        return query(count, attrs, data, ptr)

    teach_with_query(launcher, ops, teach_while_busy)
    _eager._TAUGHT[0] = launcher
    run_graph(d, g)
    assert seen == [(launcher, None)]  # refused while busy: no error, not marked taught
    assert d.launches == [("cuMemcpyAsync", B, A, 16, 0x42), ("cuMemsetD32Async", C, 3, 4, 0x42)]
    run_graph(d, g)  # taught again at the next run
    assert _eager._TAUGHT[0] is launcher and ops.by_bindings == 0 and len(d.launches) == 4


def parametrized() -> cg.Graph:
    """Fills and copies whose operands ``g.parametrize`` turned into ``x`` plus offsets (and one it left)."""
    g = cg.Graph("ranges")
    f = g.memset(A + 0x1000, 7, count=4, element_size=4)
    c = g.memcpy(B + 0x8000, A + 0x1080, nbytes=32, after=f)
    c2 = g.memcpy(A + 0x1100, HOST, nbytes=8, after=c)
    g.memset(C, 1, count=2, element_size=2, after=c2)  # outside the range: stays an int
    report = g.parametrize(x=(A, 0x2000))
    assert sorted(r.offset for r in report) == [0x1000, 0x1080, 0x1100]
    return g


@pytest.mark.parametrize("how", ["run", "capture"])
def test_parameter_operands_at_offsets_are_resolved_from_the_bindings_both_ways(monkeypatch, how):
    g = parametrized()
    seen = []
    for path in ("compiled", "python"):
        with monkeypatch.context() as m:
            d, ops = install_ops(path, m)
            m.setattr(_eager, "_TAUGHT", [None])
            _eager.stream_launcher()
            if how == "run":
                run_graph(d, g)  # x bound to 0xF000 (run_graph's bindings)
            else:
                replay(d, g)
            seen.append((list(d.launches), ops.by_bindings))
        stream_launch.forget()
    (c, c_bindings), (p, p_bindings) = seen
    x = 0xF000  # (run_graph's and replay's binding: x + 0x1000 is the lowest address an allocation can have)
    expected = [
        ("cuMemsetD32Async", x + 0x1000, 7, 4, 0x42),
        ("cuMemcpyAsync", B + 0x8000, x + 0x1080, 32, 0x42),
        ("cuMemcpyAsync", x + 0x1100, HOST, 8, 0x42),
        ("cuMemsetD16Async", C, 1, 2, 0x42),
    ]
    assert c == p == expected
    assert c_bindings == 0 and p_bindings == 4


def test_a_parameter_the_bindings_leave_out_or_bind_to_a_non_int_goes_to_the_twin(monkeypatch):
    g = cg.Graph("unbound")
    g.memset(g.param("x"), 5, count=1, element_size=4)
    d, _ = install_ops("compiled", monkeypatch)
    launcher = _eager.stream_launcher()

    for bindings, twin in (({"x": 0xF000}, 0), ({"x": np.uint64(0xF000)}, 1), ({}, None), (None, None)):
        d.launches.clear()
        with PACKING_LOCK:
            run = StreamIssue(bindings or {}, [], [], LowerState("ctx", eager=True))
            order = g.topological_order()
            stopped = launcher.issue(order, 0, 0x42, bindings)
        if twin == 0:
            assert stopped == 1 and d.launches == [("cuMemsetD32Async", 0xF000, 5, 1, 0x42)]
        else:
            assert stopped == 0 and d.launches == []  # handed back: the twin resolves it, or names the error
            if twin == 1:
                run.issue_graph(g, 0x42)
                assert d.launches == [("cuMemsetD32Async", 0xF000, 5, 1, 0x42)]
    with pytest.raises(TypeError, match="bindings"):
        launcher.issue([], 0, 0x42, [("x", 1)])


def test_a_kernel_without_parameters_is_launched_with_no_kernel_params_after_other_calls(monkeypatch):
    import test_stream_launch_cpu as sl
    from driver_fakes import fake_info

    k0 = sl.CUkernel()
    monkeypatch.setitem(sl.INFOS, id(k0), fake_info(0x73, (), ()))
    monkeypatch.setitem(sl.SIZES, 0x73, ())
    d, _ = install_ops("compiled", monkeypatch)
    given: list[Any] = []
    record = d._record

    def record_params(func: int, dims: Any, smem: int, stream: int, params: Any) -> int:
        given.append((func, params))
        return record(func, dims, smem, stream, params)

    monkeypatch.setattr(d, "_record", record_params)
    first = cg.Graph("first")  # the batch's entries hold a launch with parameters, then a fill
    prev = first.kernel(K1, 1, 32, (A, np.float32(1), np.int32(1)))
    prev = first.kernel(K1, 1, 32, (A, np.float32(2), np.int32(2)), after=prev)
    first.memset(A, 1, count=1, element_size=4, after=prev)
    second = cg.Graph("second")  # a kernel without parameters takes the first entry, then the second
    second.kernel(k0, 1, 32, (), after=second.kernel(k0, 1, 32, ()))
    for g in (first, first, second, second):  # (each kernel learned on its first run)
        run_graph(d, g)
    assert [f for f, _ in given] == [0x71] * 4 + [0x73] * 4
    k1_params = {p for f, p in given if f == 0x71}
    k0_params = [p for f, p in given if f == 0x73]
    # the twin's first launch passes its empty array; the compiled ones NULL, never an earlier entry's pointer
    assert k0_params.count(None) == 3 and not k1_params & set(k0_params)
