"""Fuzzing the compiled stream launcher (``StreamLauncher.issue``, ``capture``, ``launch``) with objects
whose Python code changes what it reads, as ``test_native_fuzz`` does for the graph-building loops.

Every place where the launcher runs Python code is reached: a buffer's ``handle`` and ``int()`` of it,
a type's ``__hash__``/``__eq__`` (the argument-kind lookup), a stream target's ``__cuda_stream__``, a
configuration's attributes, and the driver itself (ctypes callbacks, which also call the launcher
again: it must decline). Hypothesis draws a schedule of hostile actions (replace a node's arguments,
change its kernel or index, grow or empty its predecessors, empty the list being read or the table of
prepared kernels, raise, collect, churn memory). With no action run the answer is exactly the
definition's (every node launched with its own bytes and, under capture, its own dependencies); with
actions run it has the documented shape, and every launch the driver saw carried the bytes of the
arguments of a node that was launched. Under ``.ci/sanitize.sh`` a read of freed memory is reported.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import example, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import cudagraph as cg  # noqa: E402
import test_native_fuzz as base  # noqa: E402
from cudagraph.definition.nodes import KernelNode, Node  # noqa: E402
from cudagraph.driver import c_entry, stream_launch  # noqa: E402
from cudagraph.materialize.driver_edges import driver_preds  # noqa: E402
from driver_fakes import INFO_PROTO as INFO  # noqa: E402
from driver_fakes import LAUNCH_PROTO as LAUNCH  # noqa: E402
from driver_fakes import UPDATE_PROTO as UPDATE  # noqa: E402
from test_native_fuzz import CHAOS, FUZZ, K2, HostileError, K, address, arm, plans, targets  # noqa: E402
from test_native_fuzz import _disarm as _disarm  # noqa: E402  (a fixture: disarms after each test)

native = c_entry.NATIVE
pytestmark = pytest.mark.skipif(native is None, reason="cudagraph.driver._native was not built")

LIMITS = (2**31 - 1, 65535, 65535, 1024, 1024, 64)
FUNC = {id(K): 0xA, id(K2): 0xB}


class DelBuf:
    """A buffer whose release runs hostile code (the last reference may be the launcher's)."""

    size = 8
    memory_resource = None
    is_device_accessible = True

    def __init__(self, value: int) -> None:
        self.handle = self.value = value

    def __del__(self) -> None:
        try:
            CHAOS.poke()
        except HostileError:
            pass


#: Argument kinds: those of test_native_fuzz, and a buffer released hostilely.
ARG_KINDS = (*base.ARG_KINDS, "hdel")
KIND_LETTER = {**base.KIND_LETTER, "hdel": b"H"}


def make_arg(kind: str, value: int) -> Any:
    return DelBuf(value) if kind == "hdel" else base.make_arg(kind, value)


def pack(a: Any) -> bytes:
    return struct.pack("<Q", a.value) if type(a) is DelBuf else base.pack(a)


class FakeDriver:
    """Records launches (function, bytes) and emulates one stream's capture; each call pokes the chaos,
    may be refused (``fail_at``: the count of launches before the refused call), and calls the launcher
    again (which must decline)."""

    def __init__(self, n: int, fail_at: int) -> None:
        self.n, self.fail_at = n, fail_at
        self.launches: list[tuple[int, int, bytes]] = []
        self.deps: list[int] = []
        self.edges: list[tuple[int, int]] = []
        self.arr: Any = None
        self.fast: Any = None
        self.again: list[Any] = []
        self.cb = (LAUNCH(self.launch), INFO(self.info), UPDATE(self.update))

    def poke(self) -> None:
        try:
            CHAOS.poke()
        except HostileError:
            pass
        if self.fast is not None:  # busy: declined, whatever it is given
            self.again.append(self.fast.launch(1, (1, 1), K, ()))
            self.again.append(self.fast.issue([], 0, 1))

    def launch(self, f: int, *rest: Any) -> int:
        self.poke()
        if len(self.launches) == self.fail_at:
            return 1
        argv = ctypes.cast(rest[-2], ctypes.POINTER(ctypes.c_void_p))
        data = b"".join(ctypes.string_at(argv[i], 8) for i in range(self.n))
        node = 0x1000 + len(self.launches)
        self.launches.append((f, rest[-3] or 0, data))
        self.edges += [(d, node) for d in self.deps]
        self.deps = [node]
        return 0

    def info(self, s: Any, status: Any, cid: Any, graph: Any, deps: Any, edata: Any, n: Any) -> int:
        self.poke()
        status[0] = 1
        self.arr = (ctypes.c_void_p * max(len(self.deps), 1))(*self.deps)
        deps[0] = ctypes.cast(ctypes.addressof(self.arr), ctypes.POINTER(ctypes.c_void_p))
        n[0] = len(self.deps)
        return 0

    def update(self, s: Any, deps: Any, edata: Any, n: int, flags: int) -> int:
        self.poke()
        self.deps = [deps[i] for i in range(n)]
        return 0


def launcher(d: FakeDriver, kinds: list[str], table: dict[int, Any]) -> Any:
    n = len(kinds)
    for k in (K, K2):
        example = tuple(make_arg(x, 0) for x in kinds)
        letters = b"".join(KIND_LETTER[x] for x in kinds)
        table[id(k)] = native.LaunchKernel(
            k, FUNC[id(k)], {tuple(type(a) for a in example): letters}, tuple(range(0, 8 * n, 8)), (8,) * n
        )
    return native.StreamLauncher(
        *(address(cb) for cb in d.cb), KernelNode, Node, table, stream_launch.CONFIG_ATTRS, LIMITS
    )


def build(kinds: list[str], which: list[bool], shared: bool, edges: list[tuple[int, int]]) -> list[Any]:
    g = cg.Graph()
    shared_args = tuple(make_arg(k, 0x1000 + 8 * j) for j, k in enumerate(kinds))
    order: list[Any] = []
    for i, other in enumerate(which):
        args = shared_args if shared else tuple(make_arg(k, 0x2000 + 64 * i + 8 * j) for j, k in enumerate(kinds))
        order.append(g.kernel(K2 if other else K, 1, 32, args))
    for a, b in edges:
        if a < b < len(order):
            order[b]._preds.append(order[a])
    return order


def packs_alone(kinds: list[str]) -> bool:
    """Whether the compiled packer takes arguments of these kinds (an int subclass is not a pointer)."""
    return "hint" not in kinds


run_args = dict(
    kinds=st.lists(st.sampled_from(ARG_KINDS), min_size=1, max_size=3),
    which=st.lists(st.booleans(), min_size=1, max_size=8),
    shared=st.booleans(),
    start=st.integers(0, 2),
    edges=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=10),
    plan=plans,
    target=targets,
    fail_at=st.integers(0, 12),
)


@FUZZ
@given(**run_args)
# a node's kernel changed, then the list read emptied: the launch is the node's kernel now with its bytes
@example(
    kinds=["hbuf"], which=[False, False], shared=False, start=0, edges=[], plan={1: "kernel", 3: "clear"}, target=1,
    fail_at=2,
)  # fmt: skip
def test_issue_launches_each_node_with_its_own_bytes_or_stops_cleanly(
    kinds, which, shared, start, edges, plan, target, fail_at
):
    order = build(kinds, which, shared, edges)
    size = len(order)
    d = FakeDriver(len(kinds), fail_at)
    table: dict[int, Any] = {}
    fast = launcher(d, kinds, table)
    d.fast = fast
    wanted = {id(n): (FUNC[id(n.kernel)], b"".join(pack(a) for a in n.args)) for n in order}
    nodes = list(order)  # as built: the chaos may empty the list read
    chaos = arm(plan, target, graph_nodes=list(order), order=order, handles=table)
    stopped = fast.issue(order, start, 0x42)
    chaos.armed = False
    d.fast = None
    assert isinstance(stopped, int) and start <= stopped <= max(size, start)
    assert fast.rc in (0, 1) and fast.failed == "cuLaunchKernel"
    assert set(d.again) <= {-1, 0}  # declined (issue([], 0, .) answers its start)
    assert len(d.launches) <= max(size - start, 0)
    _launched_as_wanted(d, fast, nodes, wanted, chaos, start, stopped, kinds, fail_at)


def _launched_as_wanted(
    d: Any,
    fast: Any,
    order: list[Any],  # the nodes as built (the list the launcher read may have been emptied by the chaos)
    wanted: dict[int, Any],
    chaos: Any,
    start: int,
    stopped: int,
    kinds: list[str],
    fail_at: int,
) -> int | None:
    """The launches of a run from ``start`` that stopped at ``stopped``: with chaos, each one is a node's (its
    function and bytes at one moment: as they were, as they are now, or the kernel of one and the arguments of
    the other, when the chaos changed them one at a time between the launcher's reads of two nodes); else
    exactly the nodes' from ``start`` up to the driver's failure. The end of the launched nodes, or ``None``
    when nothing more is to be checked."""
    size = len(order)
    if chaos.fired:
        allowed = set(wanted.values())
        for n in order:
            if _packable(n):
                f_now, d_now = FUNC.get(id(n.kernel)), b"".join(pack(a) for a in n.args)
                f_was, d_was = wanted.get(id(n), (f_now, d_now))
                allowed |= {(f, data) for f in (f_was, f_now) for data in (d_was, d_now)}
        for f, stream, data in d.launches:
            assert stream == 0x42 and (f, data) in allowed
        return None
    if start >= size or not packs_alone(kinds):
        assert stopped == start and d.launches == []
        return None
    last = size if fail_at >= size - start else start + fail_at
    assert stopped == last and fast.rc == (1 if last < size else 0)
    assert [(f, data) for f, _, data in d.launches] == [wanted[id(n)] for n in order[start:last]]
    return last


def _packable(n: Any) -> bool:
    try:
        b"".join(pack(a) for a in n.args)
    except Exception:
        return False
    return True


@FUZZ
@given(**run_args)
# 0 -> 2 is implied by 0 -> 1 -> 2: left out of the captured dependencies
@example(
    kinds=["int"],
    which=[False, False, False],
    shared=False,
    start=0,
    edges=[(0, 1), (0, 2), (1, 2)],
    plan={},
    target=0,
    fail_at=3,
)
# the kernel changed at the capture-info call, the arguments at the launch: the node's kernel then, its old bytes
@example(
    kinds=["int"], which=[False], shared=False, start=0, edges=[], plan={1: "kernel", 2: "args"}, target=0, fail_at=1
)
def test_capture_gives_each_node_its_dependencies_or_stops_cleanly(
    kinds, which, shared, start, edges, plan, target, fail_at
):
    order = build(kinds, which, shared, edges)
    for i, n in enumerate(order):
        n.index = i
    size = len(order)
    d = FakeDriver(len(kinds), fail_at)
    table: dict[int, Any] = {}
    fast = launcher(d, kinds, table)
    d.fast = fast
    wanted = {id(n): (FUNC[id(n.kernel)], b"".join(pack(a) for a in n.args)) for n in order}
    nodes = list(order)  # as built: the chaos may empty the list read
    stopped, exits, raw, entry = run_capture(d, fast, order, start, plan, target, table)
    assert isinstance(stopped, int) and start <= stopped <= max(size, start)
    assert fast.rc in (0, 1, -1)
    assert fast.failed in ("cuLaunchKernel", "cuStreamGetCaptureInfo", "cuStreamUpdateCaptureDependencies")
    assert set(d.again) <= {-1, 0}
    last = _launched_as_wanted(d, fast, nodes, wanted, CHAOS, start, stopped, kinds, fail_at)
    if last is None:
        return
    for k, n in enumerate(order[start:last]):
        made = 0x1000 + k
        want = sorted({x for p in driver_preds(n) for x in exits[p.index]}) if n._preds else list(entry)
        assert sorted(a for a, b in d.edges if b == made) == want
        assert exits[n.index] == (made,) and raw[n.index] == made


def run_capture(
    d: Any, fast: Any, order: list[Any], start: int, plan: Any, target: int, table: dict[int, Any]
) -> tuple[int, list[Any], list[int], tuple[int, ...]]:
    """``fast.capture`` of ``order`` from ``start`` on the fake stream, the chaos armed with ``plan``: the nodes
    before ``start`` as if an earlier call captured them. ``(stopped, exits, raw, entry)``."""
    size = len(order)
    exits: list[Any] = [None] * size
    raw = [0] * size
    entry = (0x900,)
    for i in range(min(start, size)):
        exits[i] = (0x800 + i,)
    d.deps = [0x800 + start - 1] if 0 < start <= size else list(entry)
    chaos = arm(plan, target, graph_nodes=list(order), order=order, handles=table, raw=raw)
    try:
        stopped = fast.capture(order, start, 0x42, exits, raw, entry)
    finally:
        chaos.armed = False
        d.fast = None
    return stopped, exits, raw, entry


class HStream:
    """A stream target whose __cuda_stream__ runs hostile code."""

    def __cuda_stream__(self) -> tuple[int, int]:
        CHAOS.poke()
        return (0, 0x55)


class HConfig:
    """A configuration whose attributes run hostile code (remembered as a plain one)."""

    def __init__(self) -> None:
        self._grid, self._block = (2, 1, 1), (32, 1, 1)

    @property
    def grid(self) -> Any:
        CHAOS.poke()
        return self._grid

    @property
    def block(self) -> Any:
        CHAOS.poke()
        return self._block

    @property
    def shmem_size(self) -> int:
        CHAOS.poke()
        return 0

    cluster = None
    is_cooperative = False


@FUZZ
@given(
    kinds=st.lists(st.sampled_from(ARG_KINDS), min_size=1, max_size=3),
    hostile_target=st.booleans(),
    hostile_config=st.booleans(),
    plan=plans,
    target=targets,
    fail_at=st.integers(0, 2),
)
def test_launch_launches_with_its_own_bytes_or_declines(kinds, hostile_target, hostile_config, plan, target, fail_at):
    d = FakeDriver(len(kinds), fail_at)
    table: dict[int, Any] = {}
    fast = launcher(d, kinds, table)
    fast.learn_target(HStream, 2)
    fast.learn_target(int, 1)
    config = HConfig() if hostile_config else ((2, 1, 1), (32, 1, 1))
    if hostile_config:
        fast.remember_config(config, config._grid, config._block, 0, (2, 1, 1, 32, 1, 1))
    args = tuple(make_arg(k, 0x3000 + 8 * j) for j, k in enumerate(kinds))
    want = b"".join(pack(a) for a in args)
    d.fast = fast
    chaos = arm(plan, target, handles=table)
    try:
        rc = fast.launch(HStream() if hostile_target else 0x55, config, K, args)  # raises nothing: declines
    finally:
        chaos.armed = False
        d.fast = None
    assert rc in (-1, 0, 1) and fast.rc == 0  # launch() leaves issue()'s answer alone
    assert set(d.again) <= {-1, 0}
    assert all(x == (0xA, 0x55, want) for x in d.launches) and len(d.launches) <= 1
    if rc == 0:
        assert d.launches == [(0xA, 0x55, want)]
    if not chaos.fired:
        assert rc == (-1 if not packs_alone(kinds) else 1 if fail_at == 0 else 0)
        assert table[id(K)].pack(args) == (want if packs_alone(kinds) else None)  # given back after the call
