"""Fuzzing the compiled stream launcher's fills, 1-D copies and empty nodes (``StreamLauncher.issue`` and
``capture`` once ``simple()`` taught them) with Python code that changes the graph while it is read.

As ``test_stream_launch_fuzz`` does for kernel launches: Hypothesis draws a run of kernel, fill, copy and
empty nodes with random edges, a start, a driver refusal, and a schedule of hostile actions fired from the
fake driver's calls and from the memory-type queries of the copies (which also replace a fill's or a
copy's operand with another address or with something that is not one). With nothing fired the calls
made are exactly the nodes', in order, up to the refusal; with actions fired every call made is one a
node stood for at some moment. Under ``.ci/sanitize.sh`` a read of freed memory is reported.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import example, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import cudagraph as cg  # noqa: E402
from cudagraph.definition.nodes import EmptyNode, MemcpyNode, MemsetNode  # noqa: E402
from cudagraph.definition.param import Param  # noqa: E402
from cudagraph.definition.param_offset import ParamAt  # noqa: E402
from cudagraph.driver import c_entry  # noqa: E402
from cudagraph.materialize.driver_edges import driver_preds  # noqa: E402
from test_native_fuzz import CHAOS, FUZZ, K, arm, plans, targets  # noqa: E402
from test_native_fuzz import _disarm as _disarm  # noqa: E402  (a fixture: disarms after each test)
from test_stream_launch_fuzz import FUNC, FakeDriver, launcher, run_capture  # noqa: E402

native = c_entry.NATIVE
pytestmark = pytest.mark.skipif(native is None, reason="cudagraph.driver._native was not built")

U64, SZ, VP = ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_void_p
MEMSET32 = ctypes.CFUNCTYPE(ctypes.c_int, U64, ctypes.c_uint, SZ, VP)
MEMCPY = ctypes.CFUNCTYPE(ctypes.c_int, U64, U64, SZ, VP)
ATTR = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(VP), U64)
DEVICE = 0x7F00_0000_0000  # the fake's device memory starts here (below: pageable host memory)
MUTATIONS = ("address", "not-an-address", "parameter")
SIMPLE = (MemsetNode, MemcpyNode, EmptyNode)


class SimpleCalls:
    """The fills' and copies' stream calls and the memory-type queries, recorded into ``d``'s launches with its
    capture emulated (each call a captured node after the stream's dependencies); each pokes the chaos, is
    refused at ``d.fail_at``, and a query may replace an operand of a fill or copy (``mutate``)."""

    def __init__(self, d: FakeDriver, nodes: list[Any], mutate: dict[int, tuple[str, int]]) -> None:
        self.d, self.nodes, self.mutate = d, nodes, mutate
        self.before = [call_of(n) for n in nodes]  # the calls as built (a mutation may come before their read)
        self.queries = 0
        self.mutated: list[tuple[Any, ...] | None] = []  # the call of each node changed, just after its change
        self.cb = (MEMSET32(self.memset), MEMCPY(self.memcpy), ATTR(self.attributes))

    def _made(self, call: tuple[Any, ...]) -> int:
        d = self.d
        d.poke()
        if len(d.launches) == d.fail_at:
            return 1
        node = 0x1000 + len(d.launches)
        d.launches.append(call)
        d.edges += [(x, node) for x in d.deps]
        d.deps = [node]
        return 0

    def memset(self, dst: int, value: int, count: int, stream: Any) -> int:
        return self._made(("fill", dst, value, count, stream or 0))

    def memcpy(self, dst: int, src: int, nbytes: int, stream: Any) -> int:
        return self._made(("copy", dst, src, nbytes, stream or 0))

    def attributes(self, count: int, attrs: Any, data: Any, ptr: int) -> int:
        self.d.poke()
        self.queries += 1
        what = self.mutate.get(self.queries)
        if what is not None:
            kind, target = what
            node = self.nodes[target % len(self.nodes)]
            slot = {MemsetNode: "dst", MemcpyNode: "src"}.get(type(node))
            if slot is not None:
                new: Any = {"address": DEVICE + 0x9000, "not-an-address": "x", "parameter": P}[kind]
                setattr(node, slot, new)
                self.mutated.append(call_of(node))  # (what the node stands for from now on, until changed again)
        ctypes.c_uint.from_address(data[0]).value = 2 if ptr >= DEVICE else 0
        return 0

    def teach(self, fast: Any) -> None:
        addr = [ctypes.cast(cb, ctypes.c_void_p).value or 0 for cb in self.cb]
        ops = (0, 0, addr[0], 0, 0, 0, addr[1])  # 4-byte 1-D fills and copies; other widths go to Python
        fast.simple(ops, 0, addr[2], 1 << 16, MemsetNode, MemcpyNode, EmptyNode, Param, ParamAt)


P = cg.Graph("params").param("p")  # a parameter of no graph the runs bind: its operand goes to the twin


def build(kinds: list[str], edges: list[tuple[int, int]]) -> list[Any]:
    g = cg.Graph()
    order: list[Any] = []
    for i, k in enumerate(kinds):
        if k == "k":
            order.append(g.kernel(K, 1, 32, (0x2000 + 8 * i,)))
        elif k == "f":
            order.append(g.memset(DEVICE + 64 * i, i, count=4, element_size=4))
        elif k == "c":
            order.append(g.memcpy(DEVICE + 0x1000 + 64 * i, (DEVICE if i % 2 else 0x5000_0000) + 8 * i, 16))
        else:
            order.append(g.empty())
    for a, b in edges:
        if a < b < len(order):
            order[b]._preds.append(order[a])
    for i, n in enumerate(order):
        n.index = i
    return order


def call_of(n: Any) -> tuple[Any, ...] | None:
    """The call node ``n`` stands for as it is now (``None``: none, or not one the compiled path makes)."""
    if type(n) is MemsetNode:
        return ("fill", n.dst, n.value, n.width, 0x42) if type(n.dst) is int else None
    if type(n) is MemcpyNode:
        ok = type(n.src) is int and type(n.dst) is int
        return ("copy", n.dst, n.src, n.nbytes, 0x42) if ok else None
    if type(n) is EmptyNode:
        return None
    a = n.args
    if len(a) != 1 or type(a[0]) is not int or id(n.kernel) not in FUNC:
        return None
    return (FUNC[id(n.kernel)], 0x42, a[0].to_bytes(8, "little"))


def setup(kinds: list[str], edges: list[tuple[int, int]], fail_at: int, mutate: dict[int, tuple[str, int]]) -> Any:
    order = build(kinds, edges)
    d = FakeDriver(1, fail_at)
    calls = SimpleCalls(d, list(order), mutate)  # (a copy: the chaos may empty the order)
    table: dict[int, Any] = {}
    fast = launcher(d, ["int"], table)
    calls.teach(fast)
    d.fast = fast
    return order, d, calls, fast, table


run_args = dict(
    kinds=st.lists(st.sampled_from("kfce"), min_size=1, max_size=10),
    start=st.integers(0, 2),
    edges=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=10),
    plan=plans,
    target=targets,
    fail_at=st.integers(0, 12),
    mutate=st.dictionaries(st.integers(1, 6), st.tuples(st.sampled_from(MUTATIONS), st.integers(0, 9)), max_size=2),
)


def check_calls(order: list[Any], d: Any, calls: SimpleCalls, start: int, stopped: int, fail_at: int) -> int | None:
    """The calls of a run from ``start``: with anything fired, each is one a node stood for before or after; else
    exactly the nodes' up to the refusal. The end of the nodes done, or ``None`` when nothing more is checked."""
    order = calls.nodes  # (as built: the chaos may have emptied the list read)
    wanted = [call_of(n) for n in order]
    if CHAOS.fired or calls.mutated:
        allowed = {c for c in [*wanted, *calls.before, *calls.mutated] if c is not None}
        kernel_calls = [c for c in [*wanted, *calls.before] if c is not None and c[0] in FUNC.values()]
        # a kernel changed at one read and its arguments at another: the kernel of one moment, the bytes of another
        # (the kernel a node holds now counts even where its arguments now make no call)
        funcs = {f for f, _, _ in kernel_calls} | {
            FUNC[id(n.kernel)] for n in order if type(n) not in SIMPLE and id(n.kernel) in FUNC
        }
        allowed |= {(f, 0x42, data) for f in funcs for _, _, data in kernel_calls}
        for got in d.launches:
            assert got in allowed, got
        return None
    made = [c for c in wanted[start:] if c is not None]
    done = len(order) if fail_at >= len(made) else order.index(_nth_calling(order, start, fail_at))
    assert stopped == max(done, start) and d.launches == made[:fail_at]
    return done


def _nth_calling(order: list[Any], start: int, k: int) -> Any:
    return [n for n in order[start:] if call_of(n) is not None][k]


@FUZZ
@given(**run_args)
def test_issue_makes_each_nodes_call_or_stops_cleanly(kinds, start, edges, plan, target, fail_at, mutate):
    order, d, calls, fast, table = setup(kinds, edges, fail_at, mutate)
    size = len(order)
    chaos = arm(plan, target, graph_nodes=list(order), order=order, handles=table)
    try:
        stopped = fast.issue(order, start, 0x42)
    finally:
        chaos.armed = False
        d.fast = None
    assert isinstance(stopped, int) and start <= stopped <= max(size, start)
    assert fast.rc in (0, 1) and fast.failed in ("cuLaunchKernel", "cuMemsetD32Async", "cuMemcpyAsync")
    assert set(d.again) <= {-1, 0}  # declined while busy
    check_calls(order, d, calls, start, stopped, fail_at)


@FUZZ
@given(**run_args)
# the kernel changed at one call, the arguments at the next: the kernel of then, its bytes as built (which
# the node's new arguments no longer make)
@example(kinds=["k"], start=0, edges=[], plan={1: "kernel", 2: "args"}, target=0, fail_at=1, mutate={})
def test_capture_gives_each_call_its_dependencies_or_stops_cleanly(kinds, start, edges, plan, target, fail_at, mutate):
    order, d, calls, fast, table = setup(kinds, edges, fail_at, mutate)
    size = len(order)
    stopped, exits, raw, entry = run_capture(d, fast, order, start, plan, target, table)
    assert isinstance(stopped, int) and start <= stopped <= max(size, start)
    assert fast.rc in (0, 1, -1)
    assert set(d.again) <= {-1, 0}
    done = check_calls(order, d, calls, start, stopped, fail_at)
    if done is None:
        return
    made = iter(range(0x1000, 0x1000 + len(d.launches)))
    for n in order[start:done]:
        want = sorted({x for p in driver_preds(n) for x in exits[p.index]}) if n._preds else list(entry)
        if call_of(n) is None:  # an empty node: captured as nothing, its successors after its dependencies
            assert exits[n.index] == tuple(want) and raw[n.index] == 0
            continue
        node = next(made)
        assert sorted(a for a, b in d.edges if b == node) == want
        assert exits[n.index] == (node,) and raw[n.index] == node
