"""The compiled stream launcher against hostile objects, threads and re-entrant calls.

``StreamLauncher`` (``launch``, ``issue``, ``capture``) and ``LaunchKernel`` run Python code in a few
places: a stream target's ``__cuda_stream__`` or ``__int__``, a configuration's attributes, a buffer's
``handle``, the release of a reference (a ``__del__``), the collector when a tuple is allocated, and,
in these tests, the driver itself (ctypes callbacks, which also let another thread run while the GIL
is released around ``cuLaunchKernel``). The tests below make that code replace what the C code was
reading, re-enter the launcher, or launch from another thread, and check that nothing freed is read,
that every launch the driver sees carries its own argument bytes, and that the compiled path and its
Python twin raise the same typed errors. Tests that would crash the interpreter before a fix run in
a subprocess with ``-X faulthandler`` (and, under ``.ci/sanitize.sh``, with AddressSanitizer).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np
import pytest

import cudagraph
import cudagraph as cg
from cudagraph.driver import c_entry, stream_launch
from cudagraph.errors import DriverError, OperandError
from cudagraph.frontends import launch as L
from driver_fakes import run_fresh
from test_stream_launch_cpu import (  # the recording fake driver and its kernels
    INVALID_VALUE,
    K1,
    K2,
    Buffer,
    Driver,
    LaunchConfig,
    Stream,
    calls_both_ways,
    install,
    k1_bytes,
    k2_bytes,
    mixed_graph,
    replay,
    run_graph,
)
from test_stream_launch_cpu import fake as fake  # the fixture: the recording driver, through each path

native = c_entry.NATIVE
needs_native = pytest.mark.skipif(native is None, reason="cudagraph.driver._native was not built")


PRELUDE = """
import ctypes, gc, struct, sys
import cudagraph as cg
from cudagraph.definition.nodes import KernelNode, Node
from cudagraph.driver import stream_launch
from cudagraph.driver.c_entry import NATIVE as native

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_void_p)
INFO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                        ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_void_p),
                        ctypes.POINTER(ctypes.POINTER(ctypes.c_void_p)), ctypes.POINTER(ctypes.c_void_p),
                        ctypes.POINTER(ctypes.c_size_t))
UPDATE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                          ctypes.c_size_t, ctypes.c_uint)
LIMITS = (2**31 - 1, 65535, 65535, 1024, 1024, 64)

def address(cb):
    return ctypes.cast(cb, ctypes.c_void_p).value or 0

class CUkernel:  # the definition layer recognises kernels by type name
    pass

SEEN = []   # (function, first argument) of every launch
HOOKS = []  # run by the driver after recording a launch

def launched(f, gx, gy, gz, bx, by, bz, smem, s, p, e):
    argv = ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p))
    SEEN.append((f, struct.unpack("<Q", ctypes.string_at(argv[0], 8))[0]))
    for hook in list(HOOKS):
        hook()
    return 0

CB_LAUNCH = LAUNCH(launched)
KERNELS = {}

def launcher(info=None, update=None):
    return native.StreamLauncher(address(CB_LAUNCH), address(info) if info else 0,
                                 address(update) if update else 0, KernelNode, Node, KERNELS,
                                 stream_launch.CONFIG_ATTRS, LIMITS)

def prepare(kernel, func, n):
    # A kernel of n pointer parameters whose argument kinds are learned for n ints.
    KERNELS[id(kernel)] = native.LaunchKernel(kernel, func, {(int,) * n: b"P" * n},
                                              tuple(range(0, 8 * n, 8)), (8,) * n)
"""


def run_script(*parts: str) -> str:
    """Run PRELUDE and ``parts`` in a fresh interpreter with faulthandler on; its stdout (a crash fails)."""
    return run_fresh(PRELUDE, *parts)


# ------------------------------------------------------------------------------------------- runs of nodes
#: A node's argument tuple of 100 ints is larger than the allocator's small blocks: once freed, the
#: next allocation of its size (a bytearray's buffer here) gets its memory. FORGED looks like a tuple
#: of 100 items whose type is read at address 0x10: reading it through a dangling pointer crashes.
FORGE = """
N = 100
FORGED = b"\\0" * 16 + struct.pack("<qQq", 1 << 40, id(tuple), N) + struct.pack("<Q", 8) * N
FORGED = FORGED[:-1]  # the bytearray adds the last (zero) byte: a buffer of the freed tuple's size
JUNK = []
"""


@needs_native
@pytest.mark.parametrize("released", ["kernel", "packed"])
def test_issue_holds_the_node_arguments_while_releasing_the_previous_kernel(released):
    """Switching kernels releases the previous node's LaunchKernel and argument tuple; their last
    references run a ``__del__`` that frees the next node's arguments (read before the switch). The
    batch holds both until it is launched: the ``__del__`` runs after the launches, each with the bytes
    its node had when it was read."""
    out = run_script(
        FORGE,
        f"""
        RELEASED = {released!r}

        class Doomed:
            handle = 1

            def __del__(self):
                n1.args = None  # frees the argument tuple the launcher read from n1
                JUNK.append(bytearray(FORGED))
                n1.args = tuple([0x3000 + i for i in range(N)])
                print("freed")

        KA, KB = CUkernel(), CUkernel()
        prepare(KA, 0xA, N)
        prepare(KB, 0xB, N)
        g = cg.Graph()
        n0 = g.kernel(KA, 1, 32, tuple(range(N)))
        n1 = g.kernel(KB, 1, 32, tuple(range(N)), after=n0)
        n1.args = tuple([0x2000 + i for i in range(N)])  # held by n1 alone
        if RELEASED == "kernel":
            KA.doomed = Doomed()
        else:
            n0.args = tuple([Doomed() if i == 1 else i for i in range(N)])
            KERNELS[id(KA)] = native.LaunchKernel(KA, 0xA, {{(int, Doomed) + (int,) * (N - 2): b"PH" + b"P" * (N - 2)}},
                                                  tuple(range(0, 8 * N, 8)), (8,) * N)

        def after_n0():
            # n0 launched: what it used is now held by the launcher's run alone.
            HOOKS.clear()
            if RELEASED == "kernel":
                del KERNELS[id(KA)]
                n0.kernel = KB
                del globals()["KA"]
            else:
                n0.args = tuple(range(N))

        HOOKS.append(after_n0)
        fast = launcher()
        print(fast.issue([n0, n1], 0, 0x42), SEEN)
        """,
    )
    # both launched with the arguments read (n1's 0x2000), then what the batch held released
    assert out.split("\n")[-3:] == ["freed", "2 [(10, 0), (11, 8192)]", ""], out


@needs_native
def test_issue_launches_runs_longer_than_a_batch_in_order_and_stops_at_a_refusal():
    """Graph.run's runs are launched in batches (64 launches, 8 KB of arguments): a run of 150 nodes of
    three kernels, one of whose 10000-byte argument fits no batch (launched alone), is launched whole and
    in order, each launch with its own bytes; a refusal stops at its node (its index returned, the later
    nodes not launched, the earlier ones launched once)."""
    out = run_script(
        """
        REFUSE_AT = [0]

        def counted(f, gx, gy, gz, bx, by, bz, smem, s, p, e):
            argv = ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p))
            SEEN.append((f, struct.unpack("<Q", ctypes.string_at(argv[0], 8))[0]))
            return 1 if len(SEEN) == REFUSE_AT[0] else 0

        CB = LAUNCH(counted)
        KA, KB, BIG = CUkernel(), CUkernel(), CUkernel()
        prepare(KA, 0xA, 1)
        prepare(KB, 0xB, 2)
        KERNELS[id(BIG)] = native.LaunchKernel(BIG, 0xC, {(bytes,): b"B"}, (0,), (10000,))
        g = cg.Graph()
        nodes, want = [], []
        for i in range(150):
            if i == 70:
                nodes.append(g.kernel(BIG, 1, 32, (bytes([7]) * 10000,)))
                want.append((0xC, 0x0707070707070707))
            elif i % 2:
                nodes.append(g.kernel(KB, 1, 32, (0x100 + i, 0)))
                want.append((0xB, 0x100 + i))
            else:
                nodes.append(g.kernel(KA, 1, 32, (0x100 + i,)))
                want.append((0xA, 0x100 + i))
        fast = native.StreamLauncher(address(CB), 0, 0, KernelNode, Node, KERNELS, stream_launch.CONFIG_ATTRS, LIMITS)
        print(fast.issue(nodes, 0, 0x42), fast.rc, SEEN == want)
        for at in (100, 71, 70, 1):
            SEEN.clear()
            REFUSE_AT[0] = at
            print(fast.issue(nodes, 0, 0x42), fast.rc, SEEN == want[:at])
        REFUSE_AT[0] = 0
        SEEN.clear()
        print(fast.issue(nodes, 99, 0x42), fast.rc, SEEN == want[99:])
        """
    )
    assert out.split("\n")[-7:] == [
        "150 0 True",
        "99 1 True",
        "70 1 True",
        "69 1 True",
        "0 1 True",
        "150 0 True",
        "",
    ], out


@needs_native
def test_issue_reads_the_node_again_after_releasing_the_previous_arguments():
    """Packing the next node of the same kernel releases the previous node's argument tuple, whose
    last reference would run a ``__del__`` that gives the node other arguments: the batch holds that
    tuple until it is launched, so each node is launched with the bytes of the arguments it had when it
    was read, and the ``__del__`` runs after."""
    out = run_script(
        """
        class Doomed:
            handle = 1

            def __del__(self):
                n1.args = (0x3000, 0x3001)
                print("changed")

        K = CUkernel()
        KERNELS[id(K)] = native.LaunchKernel(K, 0xA, {(int, Doomed): b"PH", (int, int): b"PP"}, (0, 8), (8, 8))
        g = cg.Graph()
        n0 = g.kernel(K, 1, 32, (0x10, 0x11))
        n1 = g.kernel(K, 1, 32, (0x20, 0x21), after=n0)
        n0.args = (0x1000, Doomed())
        n1.args = (0x2000, 0x2001)

        def after_n0():
            HOOKS.clear()
            n0.args = (0x10, 0x11)  # the run holds the packed tuple alone

        HOOKS.append(after_n0)
        print(launcher().issue([n0, n1], 0, 0x42), SEEN)
        """
    )
    assert out.split("\n")[-3:] == ["changed", "2 [(10, 4096), (10, 8192)]", ""], out


@needs_native
def test_capture_copies_the_stream_dependencies_before_the_collector_can_run():
    """The driver's array of capture dependencies is valid until its next call on the stream: a
    finalizer run by the collector while the tuple of dependencies is allocated replaces it (as a
    driver call from that finalizer would), and the array's memory is taken by other data."""
    out = run_script(
        """
        N = 100
        STATE = {"deps": [], "arr": None, "after_info": False}
        JUNK, KEEP, FIRED = [], [], []

        def info(s, status, cid, graph, deps, edata, n):
            status[0] = 1
            # 100 handles: an array larger than the allocator's small blocks (malloc'd, reused at once)
            STATE["arr"] = (ctypes.c_void_p * max(len(STATE["deps"]), 1))(*STATE["deps"])
            # (cast from the address: the pointer written keeps no reference to the array)
            deps[0] = ctypes.cast(ctypes.addressof(STATE["arr"]), ctypes.POINTER(ctypes.c_void_p))
            n[0] = len(STATE["deps"])
            gc.set_threshold(100000)
            gc.collect()
            KEEP[:] = [[] for _ in range(50)]  # the next tracked allocation runs the collector
            gc.set_threshold(1)
            STATE["after_info"] = True
            return 0

        def update(s, deps, edata, n, flags):
            STATE["deps"] = [deps[i] for i in range(n)]
            return 0

        class Bomb:
            def __init__(self):
                self.me = self  # a cycle: freed by the collector

            def __del__(self):
                if STATE["after_info"]:
                    STATE["after_info"] = False
                    STATE["arr"] = None
                    JUNK.append(bytearray(b"A" * (8 * N - 1)))
                    FIRED.append(1)
                Bomb()

        def after_launch():
            STATE["after_info"] = False
            STATE["deps"] = [0x1000 + len(SEEN)] + [0x7000 + i for i in range(N - 1)]

        HOOKS.append(after_launch)
        CB_INFO, CB_UPDATE = INFO(info), UPDATE(update)
        K = CUkernel()
        prepare(K, 0xA, 1)
        g = cg.Graph()
        nodes = [g.kernel(K, 1, 32, (0x10 + i,)) for i in range(3)]
        fast = launcher(CB_INFO, CB_UPDATE)
        exits, raw = [None] * 3, [0] * 3
        Bomb()
        done = fast.capture(nodes, 0, 0x42, exits, raw, ())
        gc.set_threshold(700)
        want = [tuple(sorted([0x1000 + k] + [0x7000 + i for i in range(N - 1)])) for k in range(1, 4)]
        print(done, fast.rc, bool(FIRED), exits == want, raw)
        """
    )
    assert out.split() == ["3", "0", "True", "True", "[0,", "0,", "0]"], out


# ------------------------------------------------------------------------------------------- driver results
@needs_native
def test_a_launch_between_issue_and_reading_rc_leaves_the_refusal(monkeypatch):
    """``rc`` is the answer of the last issue() or capture(): a cudagraph.launch made by another thread
    before the caller reads it (the launcher runs no lock) does not erase a refusal."""
    d = install("compiled", monkeypatch)
    g = mixed_graph()
    run_graph(d, g)  # learned
    fast = stream_launch.LAUNCHER
    s = Stream(1)
    cg.launch(s, (1, 32), K1, 0x10, np.float32(1), np.int32(1))
    cg.launch(s, (1, 32), K1, 0x10, np.float32(1), np.int32(1))  # taken by the compiled launcher
    d.launches.clear()
    d.refuse_at = 3
    from cudagraph.driver.kernel_args import PACKING_LOCK

    with PACKING_LOCK:
        i = fast.issue(g.topological_order(), 0, 0x42)
    d.refuse_at = None
    before = d.by_bindings
    cg.launch(s, (1, 32), K1, 0x10, np.float32(1), np.int32(1))
    assert d.by_bindings == before and len(d.launches) == 4  # the compiled launcher took it
    assert (i, fast.rc) == (3, INVALID_VALUE)


class RefusingDriver(Driver):
    """The recording driver, refusing the first call of one kind (``"update"`` or ``"info"``) made once
    ``after`` kernels were launched."""

    refuse: str | None = None
    after = 0

    def _refuses(self, what: str) -> bool:
        if self.refuse == what and len(self.launches) >= self.after:
            self.refuse = None
            return True
        return False

    def _update_c(self, s: Any, deps: Any, edata: Any, n: int, flags: int) -> int:
        return INVALID_VALUE if self._refuses("update") else super()._update_c(s, deps, edata, n, flags)

    def _info_c(self, s: Any, status: Any, cid: Any, graph: Any, deps: Any, edata: Any, n: Any) -> int:
        return INVALID_VALUE if self._refuses("info") else super()._info_c(s, status, cid, graph, deps, edata, n)

    def update_bindings(self, h: Any, nodes: Any, edata: Any, n: int, flags: int) -> tuple[Any]:
        if self._refuses("update"):
            return (drv.CUresult(INVALID_VALUE),)
        return super().update_bindings(h, nodes, edata, n, flags)

    def info_bindings(self, h: Any) -> tuple[Any, ...]:
        if self._refuses("info"):
            return (drv.CUresult(INVALID_VALUE), 0, 0, None, [], [], 0)
        return super().info_bindings(h)


drv = pytest.importorskip("cuda.bindings.driver")


@needs_native
@pytest.mark.parametrize("call, after", [("update", 1), ("update", 5), ("info", 1), ("info", 4)])
def test_a_refused_capture_call_is_named_the_same_way_by_both_paths(monkeypatch, call, after):
    import test_stream_launch_cpu as base

    g = mixed_graph(6)
    errors = []

    def work(d: Any) -> None:
        replay(d, g)  # learned
        d.launches.clear()
        d.sets = 0
        d.refuse, d.after = call, after
        with pytest.raises(DriverError) as info:
            replay(d, g)
        e = info.value
        errors.append((e.call, e.node, str(e), len(d.launches), d.refuse, d.by_bindings))

    monkeypatch.setattr(base, "Driver", RefusingDriver)
    c, p = calls_both_ways(monkeypatch, work)
    names = {"update": "cuStreamUpdateCaptureDependencies", "info": "cuStreamGetCaptureInfo"}
    (c_error, p_error) = errors
    assert c_error[:5] == p_error[:5]
    assert c_error[0] == names[call] and c_error[4] is None and f"{names[call]} failed for" in c_error[2]
    assert c.launches == p.launches
    assert c_error[5] < p_error[5]  # the compiled loop made the refused call


# ------------------------------------------------------------------------------------------- threads
class SlowReads:
    """Wraps a driver's recording: before it reads the argument bytes, other threads may run."""

    def __init__(self, d: Driver, pause: Any) -> None:
        self.record, self.pause = d._record, pause
        d._record = self  # type: ignore[method-assign]

    def __call__(self, func: int, dims: Any, smem: int, stream: int, params: int) -> int:
        self.pause(stream)
        return self.record(func, dims, smem, stream, params)  # type: ignore[no-any-return]


@needs_native
@pytest.mark.parametrize("intruder", ["launcher", "pack"])
def test_a_kernel_buffer_the_driver_reads_is_not_packed_by_another_thread(monkeypatch, intruder):
    """While one thread is in cuLaunchKernel (the GIL released), another packs the same kernel through a
    second launcher over the same kernels, or LaunchKernel.pack: the launch in flight keeps its bytes."""
    d = install("compiled", monkeypatch)
    cg.launch(0x5, (1, 32), K1, 0x10, np.float32(1), np.int32(1))  # learned: int targets, the kernel
    inside, done = threading.Event(), threading.Event()

    def pause(stream: int) -> None:
        if stream == 0x77:
            inside.set()
            assert done.wait(10)

    SlowReads(d, pause)
    other = stream_launch.compiled_launcher(d.address(d.cb_launch), 0, 0)
    other.learn_target(int, 1)
    lk = stream_launch._NATIVE_KERNELS[id(K1)]
    answers = []

    def intrude() -> None:
        assert inside.wait(10)
        if intruder == "launcher":
            answers.append(other.launch(0x88, (1, 32), K1, (0xBB, np.float32(2), np.int32(2))))
        else:
            answers.append(lk.pack((0xBB, np.float32(2), np.int32(2))))
        done.set()

    t = threading.Thread(target=intrude)
    t.start()
    rc = stream_launch.LAUNCHER.launch(0x77, (1, 32), K1, (0xAA, np.float32(1), np.int32(1)))
    t.join()
    assert rc == 0 and answers == [-1 if intruder == "launcher" else None]  # declined: the buffer is in use
    assert d.launches[-1] == (0x71, (1, 1, 1), (32, 1, 1), 0, 0x77, k1_bytes(0xAA, 1.0, 1))
    # and once it is not, both pack and launch again
    assert lk.pack((0xBB, np.float32(2), np.int32(2))) == k1_bytes(0xBB, 2.0, 2)
    assert other.launch(0x88, (1, 32), K1, (0xBB, np.float32(2), np.int32(2))) == 0
    assert d.launches[-1][4:] == (0x88, k1_bytes(0xBB, 2.0, 2))


def test_threads_launching_one_kernel_each_get_their_own_bytes(fake):
    """Threads launch one learned kernel with different arguments (cudagraph.launch) while another runs
    a graph (Graph.run); every launch the driver records carries the bytes of its own call."""
    import time

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    SlowReads(fake, lambda stream: time.sleep(0))
    g = mixed_graph()
    run_graph(fake, g)  # learned, and the expected launches of one run
    one_run = list(fake.launches)
    s = Stream(1)
    cfg = LaunchConfig(grid=(2, 1), block=(64, 1))
    cg.launch(s, cfg, K1, Buffer(0x10), np.float32(0), np.int32(0))
    cg.launch(0x5, (1, 32), K2, np.int32(0), np.float64(0))
    fake.launches.clear()
    errors: list[BaseException] = []
    count = 150

    def launcher(t: int) -> None:
        try:
            for i in range(count):
                if t % 2:
                    cg.launch(Stream(0x100 + t), cfg, K1, Buffer(0x1000 * t + i), np.float32(i), np.int32(-i))
                else:
                    cg.launch(0x100 + t, (1, 32), K2, np.int32(1000 * t + i), np.float64(i / 4))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def runner() -> None:
        try:
            for _ in range(10):
                run_graph(fake, g)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=launcher, args=(t,)) for t in range(1, 5)]
    threads.append(threading.Thread(target=runner))
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    by_stream: dict[int, list[Any]] = {}
    for call in fake.launches:
        by_stream.setdefault(call[4], []).append(call)
    assert by_stream.pop(0x42) == one_run * 10
    for t in range(1, 5):
        got = by_stream.pop(0x100 + t)
        if t % 2:
            want = [(0x71, (2, 1, 1), (64, 1, 1), 0, 0x100 + t, k1_bytes(0x1000 * t + i, i, -i)) for i in range(count)]
        else:
            want = [(0x72, (1, 1, 1), (32, 1, 1), 0, 0x100 + t, k2_bytes(1000 * t + i, i / 4)) for i in range(count)]
        assert got == want
    assert by_stream == {}


# ------------------------------------------------------------------------------------------- re-entrancy
class ReentrantRun:
    """A buffer whose address is read by running a graph, and launching, on other streams."""

    def __init__(self, address: int, graph: cg.Graph, d: Driver) -> None:
        self.address, self.graph, self.d = address, graph, d
        self.size = 4096
        self.memory_resource = None

    @property
    def handle(self) -> int:
        run_graph(self.d, self.graph)
        cg.launch(0x9, (1, 1), K2, np.int32(self.address), np.float64(1))
        return self.address

    def __dlpack__(self, stream: Any = None) -> Any:
        raise NotImplementedError


def test_graph_run_and_launch_from_code_a_run_runs(monkeypatch):
    """Packing a node of Graph.run runs code that itself runs a graph and launches: each launch carries
    its own bytes, and the outer run goes on where it was. Both paths make the same launches; the
    compiled one launches the outer kernels in a batch once read, so the inner runs' launches (made
    while they are read) come first there."""
    inner = cg.Graph("inner")
    a = inner.kernel(K2, 1, 32, (np.int32(7), np.float64(7)))
    inner.kernel(K1, 1, 32, (0x77, np.float32(7), np.int32(7)), after=a)

    def work(d: Driver) -> None:
        outer = cg.Graph("outer")
        prev = None
        for i in range(4):
            prev = outer.kernel(K1, 2, 32, (ReentrantRun(0x100 + i, inner, d), np.float32(i), np.int32(i)), after=prev)
        run_graph(d, outer)
        run_graph(d, outer)

    c, p = calls_both_ways(monkeypatch, work)
    assert sorted(c.launches, key=repr) == sorted(p.launches, key=repr)
    outer_calls = [x for x in c.launches if x[1] == (2, 1, 1)]
    assert outer_calls == [x for x in p.launches if x[1] == (2, 1, 1)]
    assert [x[5] for x in outer_calls] == [k1_bytes(0x100 + i, i, i) for i in range(4)] * 2
    inner_k1 = [x for x in c.launches if x[0] == 0x71 and x[1] == (1, 1, 1)]
    assert inner_k1 and all(x[5] == k1_bytes(0x77, 7.0, 7) for x in inner_k1)


# ------------------------------------------------------------------------------------------- twins
class ProtocolStream:
    """A stream of the protocol whose answer is set per object."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def __cuda_stream__(self) -> Any:
        return self.answer() if callable(self.answer) else self.answer


class AnswerStream(ProtocolStream):
    """A stream of the protocol one of whose objects holds its answer (not callable) itself."""


class F32(np.float32):
    """A numpy scalar whose __float__ is not its value."""

    def __float__(self) -> float:
        return 99.0


TARGETS = [
    (2**64, "target: expected"),
    (-1, "target: expected"),
    (ProtocolStream((0, -5)), "target: expected"),
    (ProtocolStream((0, 2**64)), "target: expected"),
    (ProtocolStream((0, "x")), "target: expected"),
    (ProtocolStream((0,)), "target: expected"),
    (ProtocolStream(None), "target: expected"),
    (ProtocolStream(lambda: (0, -1)), "target: expected"),
]


@pytest.mark.parametrize("target, text", TARGETS)
def test_a_bad_stream_target_is_an_operand_error_before_and_after_its_type_was_learned(fake, target, text):
    with pytest.raises(OperandError, match=text):
        cg.launch(target, (1, 32), K1, 0x10, np.float32(1), np.int32(1))
    good = ProtocolStream((0, 0x33)) if type(target) is ProtocolStream else 0x33
    cg.launch(good, (1, 32), K1, 0x10, np.float32(1), np.int32(1))  # the type learned
    cg.launch(good, (1, 32), K1, 0x10, np.float32(1), np.int32(1))
    before = len(fake.launches)
    with pytest.raises(OperandError, match=text):
        cg.launch(target, (1, 32), K1, 0x10, np.float32(1), np.int32(1))
    assert len(fake.launches) == before == 2 and fake.launches[-1][4] == 0x33


class Dim:
    """A dimension that converts through __index__ to whatever it holds now."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_a_stream_object_holding_its_protocol_answer_launches_after_its_type_was_learned(fake):
    s = AnswerStream((0, 0x33))
    cg.launch(s, (1, 32), K1, 0x10, np.float32(1), np.int32(1))  # the type learned (its method)
    s.__cuda_stream__ = (0, 0x44)  # this object holds its answer
    cg.launch(s, (1, 32), K1, 0x10, np.float32(1), np.int32(1))
    cg.launch(s, (1, 32), K1, 0x10, np.float32(1), np.int32(1))
    assert [x[4] for x in fake.launches] == [0x33, 0x44, 0x44]


@pytest.mark.parametrize("grid", ["list", "index"])
def test_a_config_whose_dimensions_change_in_place_is_read_again(fake, grid):
    """A configuration is taken from the cache while it holds the same objects; objects that can change
    in place (a list, an object converted by __index__) are read again at each launch."""
    g = [2, 1, 1] if grid == "list" else (Dim(2), 1, 1)
    cfg = LaunchConfig(grid=g, block=32)
    s = Stream(1)
    for n in (2, 3, 5):
        if grid == "list":
            g[0] = n
        else:
            g[0].value = n
        cg.launch(s, cfg, K1, 0x10, np.float32(1), np.int32(1))
        cg.launch(s, cfg, K1, 0x10, np.float32(1), np.int32(1))
    assert [x[1][0] for x in fake.launches] == [2, 2, 3, 3, 5, 5]


def test_a_cuda_core_like_config_is_still_taken_by_the_compiled_launcher(fake):
    cfg = LaunchConfig(grid=(2, 1, 1), block=(32, 1, 1))
    for _ in range(3):
        cg.launch(Stream(1), cfg, K1, 0x10, np.float32(1), np.int32(1))
    assert fake.by_bindings == (1 if L._FAST is not None else 3)


def test_two_configs_sharing_a_place_in_the_cache_both_stay_compiled(fake):
    """The compiled launcher remembers a configuration in one of two places chosen by its address: two
    configurations whose addresses share a place, launched in turn, are both taken after their first launch."""
    places: dict[int, LaunchConfig] = {}
    kept = []
    while True:  # configurations until two share a place (8 places: a few at most)
        cfg = LaunchConfig(grid=(2, 1, 1), block=(32, 1, 1))
        kept.append(cfg)
        place = (id(cfg) >> 4) % 8
        if place in places:
            a, b = places[place], cfg
            break
        places[place] = cfg
    for _ in range(3):
        for cfg in (a, b):
            cg.launch(Stream(1), cfg, K1, 0x10, np.float32(1), np.int32(1))
    assert len(fake.launches) == 6
    assert fake.by_bindings == (2 if L._FAST is not None else 6)  # the first launch of each: the Python path


def test_a_numpy_scalar_subclass_packs_its_value_on_every_launch(fake):
    """The value of a numpy scalar is its bytes (what the first, checked launch packs), on every
    launch and on both paths, not what a subclass's __float__ says."""
    for _ in range(3):
        cg.launch(Stream(1), (1, 32), K1, 0x10, F32(1.5), np.int32(1))
    assert [x[5] for x in fake.launches] == [k1_bytes(0x10, 1.5, 1)] * 3


class BadHandle:
    """A buffer whose address cannot be read."""

    size = 4096
    memory_resource = None

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    @property
    def handle(self) -> Any:
        if isinstance(self._handle, BaseException):
            raise self._handle
        return self._handle

    def __dlpack__(self, stream: Any = None) -> Any:
        raise NotImplementedError


#: Arguments of k1(float* x, float a, int n) that no launch may take, each after good ones of the same
#: types (so that the compiled launcher has learned their kinds and must decline them).
BAD_ARGS = [
    (0x10, np.float64(1), np.int32(1)),
    (-5, np.float32(1), np.int32(1)),
    (2**64, np.float32(1), np.int32(1)),
    (0x10, np.float32(1)),
    (0x10, np.float32(1), np.int32(1), np.int32(1)),
    (0x10, np.float32(1), b"\0" * 8),
    (0x10, 1.5, np.int32(1)),
    (BadHandle(-1), np.float32(1), np.int32(1)),
    (BadHandle(2**64), np.float32(1), np.int32(1)),
    (BadHandle(RuntimeError("no address")), np.float32(1), np.int32(1)),
]


def _good(bad: tuple[Any, ...]) -> tuple[Any, ...]:
    """Good arguments whose first is of the type of ``bad``'s (its kinds learned from them)."""
    return (BadHandle(0x20) if type(bad[0]) is BadHandle else 0x10, np.float32(1), np.int32(1))


@needs_native
@pytest.mark.parametrize("bad", BAD_ARGS, ids=lambda a: "-".join(type(x).__name__ for x in a))
@pytest.mark.parametrize("where", ["launch", "run", "capture"])
def test_bad_arguments_raise_the_same_typed_error_on_both_paths(monkeypatch, bad, where):
    """What the compiled launcher has learned does not change what bad arguments raise: both paths
    raise the same exception (type and message), naming the call or the node, and launch nothing."""
    outcomes = []

    def work(d: Driver) -> None:
        good = _good(bad)
        g = cg.Graph("bad")
        node = g.kernel(K1, 1, 32, good, name="victim")
        for _ in range(2):  # learned (the compiled path takes the second)
            if where == "launch":
                cg.launch(0x5, (1, 32), K1, *good)
            elif where == "run":
                run_graph(d, g)
            else:
                replay(d, g)
        before = len(d.launches)
        node.args = bad
        with pytest.raises(Exception) as info:
            if where == "launch":
                cg.launch(0x5, (1, 32), K1, *bad)
            elif where == "run":
                run_graph(d, g)
            else:
                replay(d, g)
        outcomes.append((type(info.value), str(info.value), len(d.launches) - before))

    c, p = calls_both_ways(monkeypatch, work)
    assert c.by_bindings < p.by_bindings  # the compiled launcher took the learned launches
    (c_type, c_text, c_count), python = outcomes
    assert outcomes[0] == python
    assert c_count == 0
    if isinstance(bad[0], BadHandle) and isinstance(bad[0]._handle, RuntimeError):
        assert c_type is RuntimeError and c_text == "no address"  # the buffer's own error, as it raised it
    else:
        assert issubclass(c_type, (OperandError, cudagraph.errors.KernelArgumentError)), (c_type, c_text)
        assert ("kernel#0 'victim'" if where != "launch" else "cudagraph.launch") in c_text
