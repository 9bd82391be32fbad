"""Fuzzing the compiled module's entry points with objects whose Python code changes what they read.

Every place where ``cudagraph.driver._native`` can run Python code is reached
by an object of these tests: ``int()`` of a buffer's ``handle`` (``__int__``,
``__index__``), a type's ``__hash__``/``__eq__`` in a set or dict lookup (a
metaclass), a dict key's ``__eq__``, a lock's ``acquire`` and ``release``, and the driver
itself (ctypes callbacks). Each of those calls counts; hypothesis draws a
schedule of hostile actions (replace a node's arguments, grow or empty its
predecessors, empty a list being read, change a node's index or kernel, swap
a node for one of a kind with nested bodies, raise, collect, churn memory) to
run at given counts. Whatever happens, the answer is a typed exception or the
correct one: with no action run, exactly what the Python twin or the
definition says; with actions run, a result of the documented shape (or the
one the Python twin gives for the graph as it is afterwards). Run under
``.ci/sanitize.sh``, a read of freed memory is also reported where it does not
crash.
"""

from __future__ import annotations

import ctypes
import gc
import struct
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import cudagraph as cg  # noqa: E402
from cudagraph.definition import diff as _diff  # noqa: E402
from cudagraph.definition.diff import node_state  # noqa: E402
from cudagraph.definition.nodes import ChildGraphNode, KernelNode, Node  # noqa: E402
from cudagraph.driver import c_entry  # noqa: E402
from cudagraph.materialize.driver_edges import driver_preds  # noqa: E402
from driver_fakes import ADD_PROTO as ADD  # noqa: E402
from driver_fakes import SET_PROTO as SET  # noqa: E402
from driver_fakes import address  # noqa: E402

native = c_entry.NATIVE
pytestmark = pytest.mark.skipif(native is None, reason="cudagraph.driver._native was not built")

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)

GET_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int))
GET_KERNEL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class HostileError(Exception):
    """Raised by the hostile objects' Python code (it must come out as it is, or be handled)."""


#: What a call of the compiled module may raise besides the answer (HostileError: the objects' own).
TYPED = (HostileError, RuntimeError, TypeError, ValueError)

ACTIONS = (
    "args",  # replace a node's argument tuple (frees the one being read)
    "grow",  # append many predecessors to a node
    "preds",  # empty a node's predecessors (a new list)
    "clear",  # empty the list being read (order, nodes, states, groups ...)
    "raw",  # empty the list of driver handles
    "index",  # give a node an index out of range, or not an int
    "kernel",  # give a node another kernel
    "nested",  # swap a node in the list for a node of a kind with nested bodies
    "state",  # replace the executable's state (plans, bindings, update count)
    "raise",
    "gc",
    "churn",  # allocate objects of the sizes just freed
)


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K, K2 = CUkernel(), CUkernel()
JUNK: list[Any] = []


class Chaos:
    """Counts the hostile calls and runs the scheduled action at each scheduled count (while armed)."""

    def __init__(self, plan: dict[int, str], target: int) -> None:
        self.plan, self.target = plan, target
        self.calls = 0
        self.fired: list[str] = []
        self.armed = False
        self.world: dict[str, Any] = {}

    def poke(self) -> None:
        if not self.armed:
            return
        self.calls += 1
        action = self.plan.get(self.calls)
        if action is None:
            return
        self.fired.append(action)
        w = self.world
        nodes = w.get("graph_nodes") or [None]
        node = nodes[self.target % len(nodes)]
        if action == "args" and isinstance(node, KernelNode):
            node.args = (0x5000, b"x" * 8)
        elif action == "grow" and node is not None:
            node._preds.extend([nodes[0]] * 1000)
        elif action == "preds" and node is not None:
            node._preds = []
        elif action == "clear":
            for name in ("order", "nodes", "states", "groups", "handles"):
                if name in w:
                    w[name].clear()
        elif action == "raw" and "raw" in w:
            w["raw"].clear()
        elif action == "index" and node is not None:
            node.index = (1 << 70) if self.target % 2 else None
        elif action == "kernel" and isinstance(node, KernelNode):
            node.kernel = K2
        elif action == "nested" and w.get("nodes") and "child" in w:
            w["nodes"][self.target % len(w["nodes"])] = w["child"]
        elif action == "state" and "exe" in w:
            e = w["exe"]
            e._plans, e._bindings, e._raw_bound, e.update_calls = {}, {}, {}, 7
        elif action == "raise":
            raise HostileError("hostile")
        elif action == "gc":
            gc.collect()
        elif action == "churn":
            JUNK[:] = [b"A" * size for size in (16, 40, 56, 72, 88, 120, 248) for _ in range(30)]


CHAOS = Chaos({}, 0)


class Meta(type):
    """A metaclass whose __hash__ and __eq__ run hostile code (set and dict lookups of the types)."""

    def __hash__(cls) -> int:
        CHAOS.poke()
        return id(cls) >> 4

    def __eq__(cls, other: object) -> bool:
        CHAOS.poke()
        return cls is other


class HInt(int):
    """An int whose __index__ and __int__ run hostile code (the compiled module reads it as it is)."""

    def __index__(self) -> int:
        CHAOS.poke()
        return int.__int__(self)

    def __int__(self) -> int:
        CHAOS.poke()
        return int.__int__(self)


class HIndex:
    """Not an int: converts through __int__ / __index__, which run hostile code."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __int__(self) -> int:
        CHAOS.poke()
        return self.value

    __index__ = __int__


class HBuf(metaclass=Meta):
    """A buffer whose `handle` runs hostile code and may be an HIndex."""

    size = 8
    memory_resource = None
    is_device_accessible = True

    def __init__(self, value: int, wrap: bool) -> None:
        self.value, self.wrap = value, wrap

    @property
    def handle(self) -> Any:
        CHAOS.poke()
        return HIndex(self.value) if self.wrap else self.value


class HArg(metaclass=Meta):
    """An argument of a type whose hash runs hostile code; equal only to itself."""


class HNode(Node, metaclass=Meta):
    """A flat node kind whose type lookups run hostile code."""

    __slots__ = ()


class HKey(str):
    """A dict key equal to the name of a parameter, whose __eq__ runs hostile code."""

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        CHAOS.poke()
        return str.__eq__(self, other)


class Lock:
    def __init__(self, held: bool) -> None:
        self.held = held

    def acquire(self, blocking: bool = True) -> bool:
        CHAOS.poke()
        return not self.held

    def release(self) -> None:
        CHAOS.poke()


@pytest.fixture(autouse=True)
def _disarm():
    yield
    CHAOS.armed = False
    CHAOS.world = {}
    JUNK.clear()


def arm(plan: dict[int, str], target: int, **world: Any) -> Chaos:
    CHAOS.__init__(plan, target)  # type: ignore[misc]
    CHAOS.world = world
    CHAOS.armed = True
    return CHAOS


#: A schedule: the hostile call (counted from 1) at which each action runs. Most calls come early.
plans = st.dictionaries(st.one_of(st.integers(1, 6), st.integers(1, 40)), st.sampled_from(ACTIONS), max_size=3)
targets = st.integers(0, 1000)

# ------------------------------------------------------------------------------------------- KernelLoop

#: Argument kinds: (type made, kind letter, how the value packs).
ARG_KINDS = ("int", "hint", "bytes", "scalar", "hbuf", "hbuf_wrapped")


def make_arg(kind: str, value: int) -> Any:
    if kind == "int":
        return value
    if kind == "hint":
        return HInt(value)
    if kind == "bytes":
        return struct.pack("<Q", value)
    if kind == "scalar":
        return np.uint64(value)
    return HBuf(value, kind == "hbuf_wrapped")


#: ("hint" under b"P" is declined: KernelInfo learns b"P" for int alone, and so the compiled packer reads it.)
KIND_LETTER = {"int": b"P", "hint": b"P", "bytes": b"B", "scalar": b"S", "hbuf": b"H", "hbuf_wrapped": b"H"}


@FUZZ
@given(
    kinds=st.lists(st.sampled_from(ARG_KINDS), min_size=1, max_size=3),
    size=st.integers(1, 8),
    shared=st.booleans(),
    set_mode=st.booleans(),
    start=st.integers(0, 2),
    edges=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=10),
    plan=plans,
    target=targets,
    fail_at=st.integers(0, 12),
)
# 0 -> 2 is implied by 0 -> 1 -> 2: left out of the driver's edges
@example(
    kinds=["int"],
    size=3,
    shared=False,
    set_mode=False,
    start=0,
    edges=[(0, 1), (0, 2), (1, 2)],
    plan={},
    target=0,
    fail_at=3,
)
def test_kernel_loop_packs_and_adds_each_node_or_stops_cleanly(
    kinds, size, shared, set_mode, start, edges, plan, target, fail_at
):
    g = cg.Graph()
    n = len(kinds)
    shared_args = tuple(make_arg(k, 0x1000 + 8 * j) for j, k in enumerate(kinds))
    order = []
    for i in range(size):
        args = shared_args if shared else tuple(make_arg(k, 0x2000 + 64 * i + 8 * j) for j, k in enumerate(kinds))
        order.append(g.kernel(K, 1, 32, args))
    for a, b in edges:
        if a < b < size:
            order[b]._preds.append(order[a])
    scratch = ctypes.create_string_buffer(8 * n)
    params = ctypes.create_string_buffer(256)
    calls: list[tuple[int, list[int], bytes]] = []

    def driver(*argv: Any) -> int:
        try:
            CHAOS.poke()
        except HostileError:
            pass
        if len(calls) == fail_at:
            return 1  # CUDA_ERROR_INVALID_VALUE
        if set_mode:
            calls.append((argv[1] or 0, [], scratch.raw))
        else:
            out, deps, count = argv[0], argv[2], argv[4]
            calls.append((0, [deps[j] for j in range(count)], scratch.raw))
            out[0] = 0x7000 + len(calls)
        return 0

    cb = SET(driver) if set_mode else ADD(driver)
    loop = native.KernelLoop(address(cb), 0x42, ctypes.addressof(params), KernelNode, Node, set_mode)
    type_key = tuple(type(a) for a in shared_args)
    ptrs = (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(scratch) + 8 * j for j in range(n)])
    loop.use(
        K,
        {type_key: b"".join(KIND_LETTER[k] for k in kinds)},
        tuple(range(0, 8 * n, 8)),
        (8,) * n,
        ctypes.addressof(scratch),
        8 * n,
        0x71,
        True,
        ctypes.addressof(ptrs),
        ptrs,
    )
    raw = [0x100 + i for i in range(size)] if set_mode else [0] * size
    if not set_mode:  # the nodes before `start` were added by an earlier call
        raw[:start] = [0x300 + i for i in range(min(start, size))]
    expected_raw = list(raw)
    chaos = arm(plan, target, graph_nodes=list(order), order=order, raw=raw)
    stopped = loop.run(order, start, raw)
    chaos.armed = False
    assert isinstance(stopped, int) and stopped >= start
    assert loop.rc in (0, 1, -1)
    if chaos.fired:
        assert len(calls) <= max(size - start, 0)
        return
    # Nothing hostile ran: every node from `start` is done, in order, with its own arguments and edges.
    last = min(size, start + fail_at) if fail_at < size - start else size
    if start >= size:
        assert stopped == start and calls == []
        return
    if "hint" in kinds:  # an int subclass is not a pointer (as for stream launches): the first node is declined
        assert stopped == start and calls == [] and loop.rc == 0 and loop.done == 0
        return
    assert stopped == last
    assert loop.rc == (1 if last < size else 0)
    assert len(calls) == last - start  # (the refused call is not recorded)
    for i, (handle, deps, packed) in zip(range(start, size), calls):
        node = order[i]
        want = b"".join(pack(a) for a in node.args)
        assert packed == want, (i, packed, want)
        if set_mode:
            assert handle == 0x100 + i
        else:
            assert deps == [expected_raw[p.index] for p in driver_preds(node)]  # (implied edges left out)
            if i < last:
                expected_raw[i] = 0x7000 + (i - start) + 1
                assert raw[i] == expected_raw[i]
    assert loop.done == last - start


def pack(a: Any) -> bytes:
    if isinstance(a, bytes):
        return a
    if isinstance(a, np.generic):
        return a.tobytes()
    if isinstance(a, HBuf):
        return struct.pack("<Q", a.value)
    return struct.pack("<Q", int.__int__(a))


# ------------------------------------------------------------------------------------------------ Layout


class FakeGraph:
    def __init__(self, nodes: list[Any]) -> None:
        self._nodes = nodes


def hnode(g: cg.Graph, index: int, preds: list[Node]) -> HNode:
    h = HNode.__new__(HNode)
    h.graph, h.index, h.name, h._preds = g, index, f"h{index}", list(preds)
    return h


@FUZZ
@given(
    shape=st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 30), max_size=3)), min_size=1, max_size=8),
    plan=plans,
    target=targets,
    known=st.booleans(),
)
def test_signature_is_the_python_twins_or_none_and_runs_no_python_code(shape, plan, target, known):
    g = cg.Graph()
    nodes: list[Any] = []
    for i, (hostile, preds) in enumerate(shape):
        ps = [nodes[p % i] for p in preds] if i else []
        if hostile:
            nodes.append(hnode(g, i, ps))
        else:
            nodes.append(g.kernel(K, 1, 32, (0x9000,)))
            nodes[-1].index = i
            nodes[-1]._preds[:] = ps
    layout = native.Layout(KernelNode, Node)
    # HNode's hash and __eq__ run hostile code: the classes are compared by identity, so they never run. The
    # codes are the definition layer's (the twin's); HNode unknown: left out of the tuple.
    for cls in (KernelNode, HNode):
        _diff.type_code(cls)
    flat = _diff.CODED_CLASSES if known else tuple(c if c is not HNode else ChildGraphNode for c in _diff.CODED_CLASSES)
    chaos = arm(plan, target, graph_nodes=list(nodes), nodes=nodes)
    try:
        sig = layout.signature(nodes, flat)
    finally:
        chaos.armed = False
    assert not chaos.fired
    if not known and any(type(n) is HNode for n in nodes):
        assert sig is None  # a type not listed: signed in Python
    else:
        assert sig == _diff.topology_signature(FakeGraph(nodes))  # type: ignore[arg-type]


@FUZZ
@given(
    changes=st.lists(st.sampled_from(["same", "tuple", "int", "hint", "harg", "type", "grid"]), min_size=1, max_size=8),
    plan=plans,
    target=targets,
)
def test_diff_decides_only_what_the_python_twin_decides_the_same_way(changes, plan, target):
    g = cg.Graph()
    args0 = [(0x9000 + i, HArg(), 1.5) for i in range(len(changes))]
    # Built with valid arguments, then given arguments no builder accepts (the diff reads them as they are).
    nodes = [g.kernel(K, 1, 32, (a[0], np.int64(0), np.float64(0))) for a in args0]
    for node, a in zip(nodes, args0):
        node.args = a
    states = [node_state(x) for x in nodes]
    for node, change in zip(nodes, changes):
        a = node.args
        if change == "tuple":
            node.args = tuple(a)
        elif change == "int":
            node.args = (a[0] + 1, a[1], a[2])
        elif change == "hint":
            node.args = (HInt(a[0]), a[1], a[2])
        elif change == "harg":
            node.args = (a[0], HArg(), a[2])
        elif change == "type":
            node.args = (a[0], a[1], 2)
        elif change == "grid":
            node.grid = (2, 1, 1)
    identity = {HArg}
    before = list(states)
    chaos = arm(plan, target, graph_nodes=list(nodes), nodes=nodes, states=states)
    try:
        changed, suspects = native.Layout(KernelNode, Node).diff(nodes, states, identity)
    except TYPED:
        assert chaos.fired
        return
    finally:
        chaos.armed = False
    assert isinstance(changed, list) and isinstance(suspects, list)
    assert all(isinstance(x, KernelNode) for x in changed)
    assert all(isinstance(i, int) for i in suspects)
    if chaos.fired:
        return
    py_changed, py_states = _diff.diff_states(before, FakeGraph(nodes))  # type: ignore[arg-type]
    decided = [i for i in range(len(nodes)) if i not in suspects]
    assert {x.index for x in changed} == {i for i in decided if nodes[i] in py_changed}
    for i in decided:  # the recorded state of a decided node: the twin's
        assert states[i][4] is py_states[i][4] or states[i][4] == py_states[i][4]


# ------------------------------------------------------------------------------------ rebind, patch, bind


@FUZZ
@given(
    counts=st.lists(st.integers(0, 4), min_size=1, max_size=4),
    value=st.sampled_from(["int", "hint", "bytes"]),
    fail_at=st.integers(0, 12),
    plan=plans,
    target=targets,
)
def test_rebind_writes_every_group_or_says_where_the_driver_refused(counts, value, fail_at, plan, target):
    bufs = [ctypes.create_string_buffer(24) for _ in counts]
    groups = [
        (ctypes.addressof(b), 24, (0, 16), 0x700 + g, [HInt(0x31 + 8 * g + i) for i in range(c)])
        for g, (b, c) in enumerate(zip(bufs, counts))
    ]
    seen: list[tuple[int, int]] = []

    def setter(e: int, n: int, p: int) -> int:
        try:
            CHAOS.poke()
        except HostileError:
            pass
        if len(seen) == fail_at:
            return 1
        seen.append((n, p))
        return 0

    cb = SET(setter)
    v = {"int": 0x1234, "hint": HInt(0x1234), "bytes": b"\x34\x12\0\0\0\0\0\0"}[value]
    chaos = arm(plan, target, groups=groups)
    try:
        result = native.rebind(address(cb), 0x42, groups, v)
    except TYPED:
        assert chaos.fired
        return
    finally:
        chaos.armed = False
    if chaos.fired:
        assert result is None or (isinstance(result, tuple) and len(result) == 3 and result[2] == 1)
        return
    everything = [(int(n), 0x700 + g) for g, c in enumerate(counts) for n in groups[g][4][:c]]
    if fail_at < len(everything):
        assert seen == everything[:fail_at]
        g = everything[fail_at][1] - 0x700
        assert result == (g, fail_at - sum(counts[:g]), 1)
    else:
        assert result is None and seen == everything
        assert all(b.raw[0:8] == b.raw[16:24] == struct.pack("<Q", 0x1234) for b in bufs)


@FUZZ
@given(
    counts=st.lists(st.integers(0, 4), min_size=1, max_size=4),
    value=st.sampled_from(["int", "hint", "bytes"]),
    fail_at=st.integers(0, 12),
    plan=plans,
    target=targets,
)
def test_patch_writes_every_entry_or_says_where_the_driver_refused(counts, value, fail_at, plan, target):
    seen: list[tuple[int, int]] = []

    def setter(e: int, n: int, p: int) -> int:
        try:
            CHAOS.poke()
        except HostileError:
            pass
        if len(seen) == fail_at:
            return 1
        seen.append((n, p))
        return 0

    cb = SET(setter)
    v = {"int": 0x1234, "hint": HInt(0x1234), "bytes": b"\x34\x12\0\0\0\0\0\0"}[value]
    add = 0 if value == "bytes" else 8
    writes = struct.pack("<qqqqqq", 0, 0, 0, 16, 0, add)
    bufs = [ctypes.create_string_buffer(24) for _ in counts]
    nodes = [[HInt(0x31 + 8 * g + i) for i in range(c)] for g, c in enumerate(counts)]
    entries = [(address(cb), ctypes.addressof(b), 24, writes, 0x700 + g, nodes[g]) for g, b in enumerate(bufs)]
    chaos = arm(plan, target, groups=entries, nodes=nodes[0])
    try:
        result = native.patch(0x42, entries, (v,))
    except TYPED:
        assert chaos.fired
        return
    finally:
        chaos.armed = False
    if chaos.fired:
        assert result is None or (isinstance(result, tuple) and len(result) == 3 and result[2] == 1)
        return
    everything = [(int(n), 0x700 + g) for g, c in enumerate(counts) for n in nodes[g][:c]]
    if fail_at < len(everything):
        assert seen == everything[:fail_at]
        g = everything[fail_at][1] - 0x700
        assert result == (g, fail_at - sum(counts[:g]), 1)
    else:
        assert result is None and seen == everything
        assert all(
            b.raw[0:8] == struct.pack("<Q", 0x1234) and b.raw[16:24] == struct.pack("<Q", 0x1234 + add) for b in bufs
        )


@FUZZ
@given(
    value=st.sampled_from(["int", "same", "bound", "hbuf", "hbuf_wrapped", "hint", "other"]),
    held=st.booleans(),
    hostile_keys=st.booleans(),
    groups=st.integers(1, 3),
    plan=plans,
    target=targets,
)
def test_bind_takes_the_fast_path_or_hands_the_call_to_python(value, held, hostile_keys, groups, plan, target):
    ExeSlots, PlanSlots = c_entry.NATIVE_SLOTS["executable"], c_entry.NATIVE_SLOTS["bind_plan"]
    Exe = type("Exe", (), {"__slots__": ExeSlots})
    Plan = type("Plan", (), {"__slots__": PlanSlots})
    seen: list[int] = []

    def setter(e: int, n: int, p: int) -> int:
        try:
            CHAOS.poke()
        except HostileError:
            pass
        seen.append(n)
        return 0

    cb = SET(setter)
    python_calls: list[dict[str, Any]] = []

    def python_bind(self: Any, **kw: Any) -> int:
        python_calls.append(kw)
        return -1

    Exe.bind = native.BindMethod(python_bind, Exe, Plan, {HBuf})
    buf = ctypes.create_string_buffer(16)
    e = Exe()
    key: Any = HKey("p") if hostile_keys else "p"
    first = 0x1000
    e._exec, e._exec_addr, e._lock = 1, 0x4242, Lock(held)
    e._raw_bound, e._bindings = {key: first}, {key: first}
    p = Plan()
    p.pointer_groups = [(ctypes.addressof(buf), 16, (0,), 0x700, [0x31 + i, 0x40 + i]) for i in range(groups)]
    p.set_address, p.count = address(cb), 2 * groups
    e._plans = {key: p}
    e.update_calls = 10**15
    v: Any = {
        "int": 0x2000,
        "same": first,
        "bound": 0x1000 + 0,  # the same address as another object
        "hbuf": HBuf(0x3000, False),
        "hbuf_wrapped": HBuf(0x3000, True),
        "hint": HInt(0x2000),
        "other": "not an address",
    }[value]
    if value == "bound":
        v = int(str(first))  # a distinct int object of the bound address
    chaos = arm(plan, target, exe=e)
    try:
        result = e.bind(p=v)
    except TYPED:
        assert chaos.fired
        return
    finally:
        chaos.armed = False
    assert isinstance(result, int)
    assert isinstance(e.update_calls, int)
    if chaos.fired:
        assert result in (-1, 0, 2 * groups)
        return
    fast = value in ("int", "hbuf", "hbuf_wrapped") and not held
    if value == "same" or (value == "bound" and not held):
        assert result == 0 and seen == [] and python_calls == []  # nothing to do
    elif fast:
        want = 0x2000 if value == "int" else 0x3000
        assert result == 2 * groups and python_calls == []
        assert seen == [n for i in range(groups) for n in (0x31 + i, 0x40 + i)]
        assert e._bindings["p"] == want and e._raw_bound["p"] is v
        assert e.update_calls == 10**15 + 2 * groups
        assert buf.raw[:8] == struct.pack("<Q", want)
    else:
        assert result == -1 and python_calls == [{"p": v}] and seen == []


# ------------------------------------------------------------------------------------- reading graphs


@FUZZ
@given(sizes=st.lists(st.sampled_from(["int", "hint", "hindex", "negative"]), max_size=5))
def test_kernel_args_copies_each_argument_or_refuses_a_size(sizes):
    values = [struct.pack("<Q", 0x1111 * (i + 1)) for i in range(len(sizes))]
    bufs = [ctypes.create_string_buffer(v, 8) for v in values]
    ptrs = (ctypes.c_void_p * max(len(sizes), 1))(*[ctypes.addressof(b) for b in bufs])
    made = {"int": 8, "hint": HInt(8), "hindex": HIndex(8), "negative": -1}
    reads = pytest.importorskip("cudagraph.driver._reads", reason="cudagraph.driver._reads was not built")
    chaos = arm({1: "raise"}, 0)
    try:
        out = reads.kernel_args(ctypes.addressof(ptrs), tuple(made[s] for s in sizes))
    except (TypeError, ValueError):
        assert any(s in ("hindex", "negative") for s in sizes)
        assert chaos.calls == 0  # __index__ is not called: a size must be an int
        return
    finally:
        chaos.armed = False
    assert not any(s in ("hindex", "negative") for s in sizes)
    assert out == tuple(values)
