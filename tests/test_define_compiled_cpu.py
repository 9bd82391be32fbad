"""Graph.kernel's compiled path (cudagraph.definition._define) against its Python twin, on the CPU.

The same random calls are made on two graphs, one through ``g.kernel`` (the compiled method, which takes
the common call and hands the rest to the Python method) and one through the Python method itself
(``COMPILED_KERNEL.func``); every node slot, the edge lists, the graph counters, ``summary()`` and every
error must be the same. Hostile objects (properties that run code, finalizers that run during the
compiled path's allocations, threads) must leave a consistent graph.
"""

from __future__ import annotations

import gc
import sys
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cudagraph as cg
from cudagraph.definition.builders import COMPILED_KERNEL
from cudagraph.definition.node import Node, parameter_slots
from cudagraph.errors import CudaGraphError

pytestmark = pytest.mark.skipif(COMPILED_KERNEL is None, reason="cudagraph.definition._define not built (or off)")


class CUkernel:  # recognised by type name, as cuda.bindings' CUkernel is
    pass


class NotAKernel:
    pass


class Buffer:
    """The attributes cudagraph reads of a cuda.core Buffer."""

    __slots__ = ("handle", "size", "memory_resource", "is_device_accessible")

    def __init__(self, accessible: bool = True) -> None:
        self.handle = 0x7F0000000000
        self.size = 1 << 20
        self.memory_resource = None
        self.is_device_accessible = accessible


class NoisyBuffer:
    """A Buffer whose is_device_accessible runs code: adds an empty node to its graph, or raises."""

    def __init__(self, graph: cg.Graph | None, fail: bool = False) -> None:
        self.handle = 0x7F0000001000
        self.size = 256
        self.memory_resource = None
        self.graph = graph
        self.fail = fail

    @property
    def is_device_accessible(self) -> bool:
        if self.fail:
            raise ValueError("no answer")
        if self.graph is not None:
            self.graph.empty(name="from-property")
        return True


KERNELS = (CUkernel(), CUkernel(), NotAKernel())
SCALARS = (np.float32(2.0), np.int32(7), np.int64(-3), np.uint8(1), 5, 0, 1 << 70, -1, b"\x01\x02", 1.5, None, True)
GRIDS = (1, 32, 4096, 2**31 - 1, 2**31, 0, -4, (2, 1, 1), (4, 2, 1), [2, 2], True, np.int32(4), (1, 1))
BLOCKS = (32, 256, 1024, 2048, (16, 16, 1), (32, 32, 2), 0, (8, 8, 8))
NAMES = (None, None, "", "k", "x" * 3, 5)

# One call, symbolically: (kernel, grid, block, args spec, args as list, after spec, name, keywords).
_arg = st.one_of(
    st.sampled_from(SCALARS).map(lambda v: ("value", v)),
    st.sampled_from(["buf", "hostbuf", "param", "foreign-param", "noisy", "failing"]).map(lambda s: (s, None)),
)


def _one_refusal_reading(spec: list[tuple[str, Any]]) -> bool:
    """Not a noisy Buffer beside a refused one: the compiled path reads the noisy one's property, meets the
    refused one and hands the call back, so the Python method reads it again (one more run of its code; the
    node and the error are the same, the property's side effect runs once more: a documented difference)."""
    kinds = {k for k, _ in spec}
    return not ("noisy" in kinds and kinds & {"hostbuf", "failing"})


_call = st.tuples(
    st.integers(0, len(KERNELS) - 1),
    st.sampled_from(GRIDS),
    st.sampled_from(BLOCKS),
    st.lists(_arg, max_size=5).filter(_one_refusal_reading),
    st.integers(0, 9),  # 0: args as a list; 1: left out; else a tuple
    st.sampled_from(["none", "prev", "two", "dup", "tuple", "empty", "foreign", "junk", "many", "absent"]),
    st.sampled_from(NAMES),
    st.sampled_from(["none", "smem0", "smem", "coop", "cluster-none", "priority", "cluster"]),
)


class World:
    """One graph and the objects its calls use (each graph has its own parameters and noisy buffers)."""

    def __init__(self, foreign: cg.Graph) -> None:
        self.g = cg.Graph("g")
        self.x = self.g.param("x")
        self.foreign = foreign
        self.objects = {
            "buf": Buffer(),
            "hostbuf": Buffer(False),
            "noisy": NoisyBuffer(self.g),
            "failing": NoisyBuffer(None, fail=True),
        }

    def args(self, spec: list[tuple[str, Any]]) -> list[Any]:
        out = []
        for kind, v in spec:
            if kind == "value":
                out.append(v)
            elif kind == "param":
                out.append(self.x)
            elif kind == "foreign-param":
                out.append(self.foreign_param)
            else:
                out.append(self.objects[kind])
        return out

    def after(self, spec: str) -> Any:
        nodes = self.g.nodes
        prev = nodes[-1] if nodes else None
        prev2 = nodes[-2] if len(nodes) > 1 else None
        return {
            "none": None,
            "prev": prev,
            "two": [prev, prev2] if prev2 is not None else prev,
            "dup": [prev, prev],
            "tuple": tuple(nodes[-3:]),
            "empty": [],
            "foreign": self.foreign.nodes[0],
            "junk": "node",
            "many": list(nodes[-40:]),
        }.get(spec)

    foreign_param: Any = None


def _keywords(spec: str) -> dict[str, Any]:
    return {
        "none": {},
        "smem0": {"shared_mem": 0},
        "smem": {"shared_mem": 1024},
        "coop": {"cooperative": False},
        "cluster-none": {"cluster": None, "priority": None, "programmatic": None, "device": None},
        "priority": {"priority": 3},
        "cluster": {"cluster": 1},
    }[spec]


def _apply(world: World, call: tuple[Any, ...], fn: Any) -> tuple[str, str] | None:
    kernel, grid, block, spec, how, after, name, kw = call
    args: Any = world.args(spec)
    if how:
        args = tuple(args)
    keywords = _keywords(kw)
    if after != "absent":
        keywords["after"] = world.after(after)
    if name is not None:
        keywords["name"] = name
    if how != 1:
        keywords["args"] = args
    try:
        fn(world.g, KERNELS[kernel], grid, block, **keywords)
    except (CudaGraphError, TypeError, ValueError) as e:
        return type(e).__name__, str(e)
    return None


def node_state(n: Node) -> tuple[Any, ...]:
    """Everything a node holds, with nodes as indices and graphs by name."""

    def plain(v: Any, body: bool = False) -> Any:
        if isinstance(v, Node):
            return ("node", v.index)
        if isinstance(v, cg.Graph):  # a body (child graph, conditional branch) by its nodes too
            return ("graph", v.name) + ((tuple(node_state(b) for b in v.nodes),) if body else ())
        if isinstance(v, cg.Condition):
            return ("condition", repr(v))
        if type(v) is tuple and not all(type(i) is int for i in v):
            return tuple(
                (type(i).__name__, id(i)) if type(i).__name__ in ("Param", "NoisyBuffer") else plain(i, body) for i in v
            )
        return v

    slots = tuple((s, plain(getattr(n, s), body=True)) for s in parameter_slots(type(n)) if hasattr(n, s))
    return (
        type(n),
        n.index,
        n.name,
        type(n.name),
        plain(n.graph),
        [p.index for p in n._preds],
        [s.index for s in n._succs],
        slots,
    )


def graph_state(g: cg.Graph) -> tuple[Any, ...]:
    return (
        [node_state(n) for n in g.nodes],
        g.num_edges,
        g._special,
        g._ordered,
        sorted(g._params),
        g.summary(),
        [i for i, n in enumerate(g.nodes) if n.index != i],
    )


def _teach(world: World) -> None:
    """Show the Python method every type once (its tables only grow: later calls meet no first sight)."""
    g = cg.Graph("teach")
    prev = g.empty()
    for kernel in KERNELS:
        for spec in [[("value", v)] for v in SCALARS] + [[(s, None)] for s in world.objects] + [[("param", None)]]:
            try:
                COMPILED_KERNEL.func(g, kernel, 1, 32, tuple(world.args(spec)), after=prev)
            except CudaGraphError:
                pass
    g.kernel(KERNELS[0], 1, 32, (), after=g.kernel(KERNELS[0], 1, 32, ()))


def _twin_state(calls: list[tuple[Any, ...]]) -> None:
    foreign = cg.Graph("foreign")
    foreign.empty()
    fp = foreign.param("fp")
    worlds = (World(foreign), World(foreign))
    for w in worlds:
        w.foreign_param = fp
    _teach(World(foreign))
    compiled, twin = cg.Graph.kernel, COMPILED_KERNEL.func
    for call in calls:
        errors = [_apply(w, call, fn) for w, fn in zip(worlds, (compiled, twin))]
        assert errors[0] == errors[1], call
        a, b = (graph_state(w.g) for w in worlds)
        # Arguments are compared by value, with Params and noisy buffers by their place in their own world.
        assert len(a[0]) == len(b[0])
        for na, nb, node_a, node_b in zip(a[0], b[0], worlds[0].g.nodes, worlds[1].g.nodes):
            assert na[:7] == nb[:7], call
            for s in parameter_slots(type(node_a)):
                va, vb = getattr(node_a, s), getattr(node_b, s)
                if s == "args":
                    assert type(va) is type(vb) and len(va) == len(vb)
                    for ia, ib in zip(va, vb):
                        assert type(ia) is type(ib)
                        if isinstance(ia, (Buffer, CUkernel)) or type(ia).__name__ in ("Param", "NoisyBuffer"):
                            continue
                        assert ia is ib or (ia == ib and type(ia) is type(ib)), (s, call)
                elif s == "kernel":
                    assert va is vb
                elif s == "attrs":
                    assert repr(va) == repr(vb), call
                elif s in ("grid", "block"):
                    assert va == vb and type(va) is tuple and (va is vb or va[1:] != (1, 1)), (s, call)
                else:
                    assert va == vb and type(va) is type(vb), (s, call)
        assert a[1:] == b[1:], call


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_call, min_size=1, max_size=25))
def test_compiled_and_python_paths_build_the_same_nodes(calls: list[tuple[Any, ...]]) -> None:
    _twin_state(calls)


def test_the_common_call_takes_the_compiled_path() -> None:
    g = cg.Graph("chain")
    k, buf = CUkernel(), Buffer()
    prev = g.kernel(k, 1, 32, (buf, np.float32(1.0), np.int32(4)))  # learned by the Python path (first sight)
    prev = g.kernel(k, 1, 32, (buf, np.float32(1.0), np.int32(4)), after=prev)  # KernelNode in after=
    before = COMPILED_KERNEL.taken
    for i in range(20):
        after = [prev, g.nodes[-2]] if i % 4 == 3 else prev
        prev = g.kernel(k, 1, 32, (buf, np.float32(1.0), np.int32(4)), after=after)
    assert COMPILED_KERNEL.taken - before == 20
    for _ in range(2):  # 3-tuples: taken once the Python method remembered them (DIMS_SEEN)
        g.kernel(k, grid=(2, 1, 1), block=(32, 1, 1), args=(buf,), after=tuple(g.nodes[-3:]), name="t")
    assert COMPILED_KERNEL.taken - before in (21, 22)
    assert g.num_edges == sum(len(n._preds) for n in g.nodes) == 21 + 5 + 3 + 3
    assert [n.index for n in g.nodes] == list(range(24))
    assert g.nodes[-1].grid is g.nodes[-2].grid == (2, 1, 1)
    assert g.nodes[-1].name == "t" and g.nodes[1].name == "kernel"
    assert g.nodes[1].grid is g.nodes[2].grid == (1, 1, 1)
    assert g.nodes[-1]._preds == list(g.nodes[-4:-1])


def test_forget_sends_calls_back_to_the_python_path_which_teaches_again() -> None:
    g = cg.Graph("learn")
    k = CUkernel()
    g.kernel(k, 1, 32, (np.float32(1.0),))
    COMPILED_KERNEL.forget()
    empty = {"kernels": (), "arguments": (), "buffers": (), "tensors": (), "nodes": (), "graphs": ()}
    assert COMPILED_KERNEL.known() == empty
    before = COMPILED_KERNEL.taken
    g.kernel(k, 1, 32, (np.float32(1.0),), after=g.nodes[0])
    assert COMPILED_KERNEL.taken == before  # the Python method answered, and taught
    known = COMPILED_KERNEL.known()
    assert known["kernels"] == (CUkernel,) and known["graphs"] == (cg.Graph,) and np.float32 in known["arguments"]
    g.kernel(k, 1, 32, (np.float32(1.0),), after=g.nodes[1])
    assert COMPILED_KERNEL.taken == before + 1


def test_a_property_adding_nodes_meanwhile_leaves_a_consistent_graph() -> None:
    g = cg.Graph("noisy")
    k, noisy = CUkernel(), NoisyBuffer(None)
    noisy.graph = g
    first = g.kernel(k, 1, 32, (noisy,))
    node = g.kernel(k, 1, 32, (noisy,), after=first)
    node = g.kernel(k, 1, 32, (noisy,), after=node)
    assert [n.index for n in g.nodes] == list(range(len(g.nodes)))
    assert [n.name for n in g.nodes] == ["from-property", "kernel"] * 3
    assert node._preds == [g.nodes[3]] and g.nodes[3]._succs == [node]
    assert g.num_edges == 2


def assert_whole(g: cg.Graph) -> None:
    """Every index the node's position, every edge once in its predecessor's successors, the edge count right."""
    assert [n.index for n in g.nodes] == list(range(len(g.nodes)))
    assert g.num_edges == sum(len(n._preds) for n in g.nodes)
    for n in g.nodes:
        assert len({id(p) for p in n._preds}) == len(n._preds)
        for p in n._preds:
            assert p.graph is g and sum(s is n for s in p._succs) == 1
    g.validate()


class _Finalizer:
    """Garbage in a cycle whose finalizer edits the graph (run by a collection during an allocation)."""

    def __init__(self, g: cg.Graph, after: list[Node]) -> None:
        self.g, self.after, self.me = g, after, self

    def __del__(self) -> None:
        self.g.empty(name="gc")
        if self.after:
            self.after.pop()


def test_finalizers_run_by_collections_mid_call_leave_a_consistent_graph() -> None:
    g = cg.Graph("gc")
    k = CUkernel()
    g.kernel(k, 1, 32, (np.int32(1),))
    assert_finalizers_keep_it_whole(g, lambda i, after: g.kernel(k, 1, 32, (np.int32(1),), after=after))


def assert_finalizers_keep_it_whole(g: cg.Graph, add: Any) -> None:
    """300 nodes added to ``g`` (``add(i, after)``, after the last three nodes) while a collection runs at every
    allocation, each finding a :class:`_Finalizer` that adds a node and shortens ``after``: ``g`` stays whole."""
    old = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        for i in range(300):
            # (g._nodes sliced, not tuple(g._nodes): CPython's list -> tuple copy reads the list's items through
            # a pointer taken before it allocates, so a finalizer appending meanwhile would make it read freed memory)
            after = g._nodes[-3:]
            _Finalizer(g, after)
            add(i, after)
    finally:
        gc.set_threshold(*old)
    gc.collect()
    assert_whole(g)


def test_threads_adding_nodes_at_once_leave_every_index_and_edge_whole() -> None:
    g = cg.Graph("threads")
    k = CUkernel()
    root = g.kernel(k, 1, 32, (np.int32(1),))
    assert_threads_keep_it_whole(
        g, root, lambda i, after: g.kernel(k, 1, 32, (np.int32(1), np.float32(2.0)), after=after)
    )


def assert_threads_keep_it_whole(g: cg.Graph, root: Node, add: Any) -> None:
    """Four threads each add 2000 nodes to ``g`` (``add(i, after)``), each after the one before and ``root``,
    while a fifth reads successor lists and the edge count (folding the nodes added so far): every index,
    edge and count stays whole, and every successor list is its node's successors in creation order.

    Each adding thread waits at its 1000th node until the reader has seen some nodes, so that it reads a
    graph that then grows however the threads are scheduled (on a loaded machine the system may not run the
    reader for the whole of the adds: the switch interval only lets it take the GIL once it runs)."""
    done, midway = threading.Event(), threading.Event()
    seen: list[int] = []
    failed: list[BaseException] = []

    def work() -> None:
        prev = root
        for i in range(2000):
            if i == 1000:
                midway.wait(30)
            prev = add(i, [prev, root] if prev is not root else root)

    def read() -> None:
        try:
            while not done.is_set():
                k = len(root.successors)
                seen.append(k)
                assert g.num_edges >= k, (g.num_edges, k)  # (read after: the graph only grows)
                if k:
                    midway.set()
        except BaseException as exc:  # failed in the main thread
            midway.set()
            failed.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    reader = threading.Thread(target=read)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        reader.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        done.set()
        reader.join()
        sys.setswitchinterval(old)
    assert not failed, failed
    assert len(g.nodes) == 1 + 4 * 2000
    assert [n.index for n in g.nodes] == list(range(len(g.nodes)))
    assert g.num_edges == sum(len(n._preds) for n in g.nodes) == 4 * (1 + 2 * 1999)
    assert len(root._succs) == 4 * 2000
    assert seen == sorted(seen) and any(0 < k < 4 * 2000 for k in seen), "the reader did not run while the graph grew"
    succs: dict[int, list[Node]] = {id(n): [] for n in g.nodes}
    for n in g.nodes:
        for p in n._preds:
            succs[id(p)].append(n)
    assert all(list(n.successors) == succs[id(n)] for n in g.nodes)


def test_compiled_method_looks_like_the_python_one() -> None:
    assert COMPILED_KERNEL.__wrapped__ is COMPILED_KERNEL.func
    assert cg.Graph.kernel.__doc__ == COMPILED_KERNEL.func.__doc__
    assert cg.Graph.kernel.__name__ == "kernel"
    assert getattr(cg.Graph.kernel, "__cudagraph_builder__", False) is True
    g = cg.Graph("m")
    assert g.kernel.__self__ is g
    with pytest.raises(TypeError):
        g.kernel()  # the Python method's own error


def test_a_graphs_own_parameters_are_taken_while_other_graphs_have_parameters():
    """Several live graphs with parameters (an ExecutableCache holding the last definition): a parameter the
    building graph declared is taken in C; another graph's parameter, or one of the same name made by another
    graph, goes to the Python method, which names it (the same error as the Python method alone)."""
    k = CUkernel()
    older = cg.Graph("older")
    theirs = older.param("x")
    g = cg.Graph("building")
    x, n = g.param("x"), g.param("n", np.int32)
    g.kernel(k, 1, 32, (x, n))  # teaches the types
    before = COMPILED_KERNEL.taken
    for _ in range(10):
        g.kernel(k, 1, 32, (x, n))
    assert COMPILED_KERNEL.taken - before == 10
    errors = []
    for method in (g.kernel, lambda *a, **kw: COMPILED_KERNEL.func(g, *a, **kw)):
        count = len(g)
        with pytest.raises(CudaGraphError) as info:
            method(k, 1, 32, (theirs, n))
        errors.append((type(info.value), str(info.value)))
        assert len(g) == count  # nothing added
    assert errors[0] == errors[1] and "older" in errors[0][1]
    assert COMPILED_KERNEL.taken - before == 10
    del older, theirs
