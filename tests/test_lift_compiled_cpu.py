"""The compiled lift (``lift_graph``) against its Python twin (``_Lifter.into_steps``), over a fake driver.

Both lift the same random driver graphs (kernels of several functions and library kernels, empty nodes,
child graphs, fan-ins in any edge order, node lists in any order) into definitions that must agree node by
node: kind, kernel handle, name, dimensions, shared memory, argument bytes, predecessors in order, child
bodies. Refusals of each driver read, unreadable arguments, edges to unknown nodes and callbacks that raise
end both the same way, with nothing added.
"""

from __future__ import annotations

import ctypes
import gc
import random
import sys
from typing import Any

import pytest

drv = pytest.importorskip("cuda.bindings.driver")

import cudagraph as cg  # noqa: E402
from cudagraph.driver.c_entry import NATIVE  # noqa: E402
from cudagraph.errors import DriverError, OperandError, UnsupportedError  # noqa: E402
from cudagraph.materialize import lift as _lift  # noqa: E402
from lift_fakes import EMPTY, GRAPH, FakeBindings, FakeDriver, make_fake  # noqa: E402

needs_native = pytest.mark.skipif(NATIVE is None, reason="the compiled module is not built (or CUDAGRAPH_NO_C_ENTRY)")

Fake = tuple[FakeDriver, FakeBindings, list[Any]]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Fake:
    return make_fake(monkeypatch)


def _random_graph(f: FakeDriver, rng: random.Random, depth: int = 0) -> int:
    """A random driver graph: kernels (3 functions, 2 library kernels), empty nodes, a child graph or two."""
    g = f.graph()
    made: list[int] = []
    for _ in range(rng.randint(0, 30 if depth == 0 else 6)):
        after = tuple(rng.sample(made, min(len(made), rng.choice((0, 1, 1, 1, 2, 3)))))
        roll = rng.random()
        if roll < 0.7:
            if rng.random() < 0.8:
                func, kern = rng.choice((0xF00, 0xF40, 0xF80)), 0
                args = [rng.randbytes(8), rng.randbytes(4), rng.randbytes(4)]
            else:
                func, kern = 0, rng.choice((0xAB0, 0xAC0))
                args = [rng.randbytes(4)]
            dims = (rng.randint(1, 9), rng.choice((1, 1, 2)), rng.choice((1, 1, 3)))
            block = (rng.choice((32, 64)), rng.choice((1, 2)), 1)
            made.append(
                f.kernel(g, args, after, func=func, kern=kern, grid=dims, block=block, smem=rng.choice((0, 0, 256)))
            )
        elif roll < 0.9 or depth >= 2:
            made.append(f.node(g, EMPTY, after))
        else:
            child = f.node(g, GRAPH, after)
            f.children[child] = _random_graph(f, rng, depth + 1)
            made.append(child)
    nodes, edges = f.graphs[g]
    rng.shuffle(nodes)  # the driver's lists are in no particular order
    rng.shuffle(edges)
    return g


def _described(g: cg.Graph) -> list[Any]:
    """Everything a lifted definition holds, node by node (child bodies nested)."""
    out: list[Any] = []
    for n in g.nodes:
        preds = [p.index for p in n.predecessors]
        if n.kind == "kernel":
            k = n.kernel
            out.append(("kernel", type(k).__name__, int(k), n.name, n.grid, n.block, n.shared_mem, n.args, preds))
        elif n.kind == "child":
            out.append(("child", _described(n.body), preds))
        else:
            out.append((n.kind, preds))
    return out


def _lift_with(f: FakeDriver, graph: int, steps: bool) -> cg.Graph:
    g = cg.Graph("lifted")
    lifter = _lift._Lifter(f.reader(), None)
    if steps:  # the Python twin of the compiled lift, then what into() does after either
        lifter.into_steps(g, graph)
        lifter.carry(g, graph, 0)
    else:
        lifter.into(g, graph)
    return g


@needs_native
@pytest.mark.parametrize("seed", range(40))
def test_compiled_lift_makes_the_twins_definition(fake: Fake, seed: int) -> None:
    f, _b, _infos = fake
    graph = _random_graph(f, random.Random(seed))
    compiled, twin = _lift_with(f, graph, False), _lift_with(f, graph, True)
    assert _described(compiled) == _described(twin)
    assert len(compiled) == len(f.graphs[graph][0])
    # kernels of one function share one handle object, in one lift
    by_handle = {}
    for n in compiled.nodes:
        if n.kind == "kernel":
            assert by_handle.setdefault(int(n.kernel), n.kernel) is n.kernel


@needs_native
def test_compiled_lift_of_a_large_chain_and_fan(fake: Fake) -> None:
    f, _b, infos = fake
    g = f.graph()
    root = f.kernel(g, [b"r" * 8, b"abcd", b"wxyz"])
    tails = []
    for c in range(8):
        prev = root
        for j in range(50):
            prev = f.kernel(g, [bytes([c, j]) * 4, b"abcd", b"wxyz"], (prev,), func=0xF00 + 0x40 * (j % 3))
        tails.append(prev)
    f.node(g, EMPTY, tuple(tails))
    lifted = cg.lift(g)
    assert len(lifted) == 402 and len(infos) == 3
    assert _described(lifted) == _described(_lift_with(f, g, True))
    sink = lifted.nodes[-1]
    assert sink.kind == "empty" and len(sink.predecessors) == 8


@pytest.mark.parametrize("width", [31, 32, 33, 64, 65, 130])
@pytest.mark.parametrize("steps", [False, True], ids=["compiled", "twin"])
def test_a_node_with_more_dependencies_than_read_at_first_gets_them_all(fake: Fake, width: int, steps: bool) -> None:
    """Dependencies are read 32 a call at first; a wider fan-in is read again with more room, in order."""
    f, _b, _infos = fake
    g = f.graph()
    heads = [f.kernel(g, [bytes([i]) * 8, b"abcd", b"wxyz"]) for i in range(width)]
    order = heads[:]
    random.Random(width).shuffle(order)
    sink = f.node(g, EMPTY, tuple(order))
    lifted = _lift_with(f, g, steps)
    assert len(lifted) == width + 1
    made = lifted.nodes[-1]
    assert made.kind == "empty"
    assert [p.args[0][:1] for p in made.predecessors] == [bytes([heads.index(h)]) for h in order]
    assert f.deps_of(sink) == order


@pytest.mark.parametrize(
    ("symbol", "call", "at"),
    [
        ("cuGraphGetNodes", "cuGraphGetNodes", 1),
        ("cuGraphNodeGetDependencies_v2", "cuGraphNodeGetDependencies", 1),
        ("cuGraphNodeGetDependencies_v2", "cuGraphNodeGetDependencies", 3),
        ("cuGraphNodeGetType", "cuGraphNodeGetType", 1),
        ("cuGraphNodeGetType", "cuGraphNodeGetType", 3),
        ("cuGraphKernelNodeGetParams_v2", "cuGraphKernelNodeGetParams", 1),
        ("cuGraphKernelNodeGetParams_v2", "cuGraphKernelNodeGetParams", 2),
    ],
)
@pytest.mark.parametrize("steps", [False, True], ids=["compiled", "twin"])
def test_a_refused_read_is_a_typed_error_and_nothing_is_added(
    fake: Fake, symbol: str, call: str, at: int, steps: bool
) -> None:
    f, _b, _infos = fake
    g = f.graph()
    a = f.kernel(g, [b"a" * 8, b"abcd", b"wxyz"])
    b = f.kernel(g, [b"b" * 8, b"abcd", b"wxyz"], (a,))
    f.node(g, EMPTY, (b,))
    calls = 0
    original = f._count

    def count(name: str) -> int:
        nonlocal calls
        if name != symbol:
            return original(name)
        calls += 1
        return 1 if calls == at else original(name)  # CUDA_ERROR_INVALID_VALUE at the at-th call

    f._count = count  # type: ignore[method-assign]
    lifted = cg.Graph("lifted")
    lifter = _lift._Lifter(f.reader(), None)
    with pytest.raises(DriverError) as info:
        (lifter.into_steps if steps else lifter.into)(lifted, g)
    assert info.value.call == call and info.value.name == "CUDA_ERROR_INVALID_VALUE"
    assert len(lifted) == 0  # every node is read before the first is added


@pytest.mark.parametrize("steps", [False, True], ids=["compiled", "twin"])
@pytest.mark.parametrize(
    ("where", "message"), [(40, "its driver node has no kernelParams and no 'extra'"), (1, "argument 1 has no value")]
)
def test_unreadable_arguments_are_refused_naming_the_kernel(fake: Fake, steps: bool, where: int, message: str) -> None:
    f, _b, _infos = fake
    g = f.graph()
    first = f.kernel(g, [b"a" * 8, b"abcd", b"wxyz"])
    n = f.kernel(g, [b"b" * 8, b"abcd", b"wxyz"], (first,))
    if where == 40:  # kernelParams NULL: the arguments came in 'extra'
        p = bytearray(f.params[n])
        p[40:48] = bytes(8)
        f.params[n] = bytes(p)
    else:  # a NULL pointer to argument 1
        address = int.from_bytes(f.params[n][40:48], "little")
        ctypes.c_void_p.from_address(address + 8 * where).value = None
    error = UnsupportedError if where == 40 else OperandError
    with pytest.raises(error, match=f"kernel 'fnf00'.*{message}"):
        _lift_with(f, g, steps)


@pytest.mark.parametrize("steps", [False, True], ids=["compiled", "twin"])
def test_an_edge_from_a_node_not_listed_is_a_key_error(fake: Fake, steps: bool) -> None:
    f, _b, _infos = fake
    g = f.graph()
    a = f.kernel(g, [b"a" * 8, b"abcd", b"wxyz"])
    f.graphs[g][1].append((0xDEAD00, a))  # a dependency that is not a node of the graph
    with pytest.raises(KeyError, match=str(0xDEAD00)):
        _lift_with(f, g, steps)


# ------------------------------------------------------------------ the compiled call itself
def _fns(f: FakeDriver) -> tuple[int, ...]:
    return tuple(ctypes.cast(fn, ctypes.c_void_p).value or 0 for fn in f.fns)


KW = ("shared_mem", "after", "name")


def _no_args(address: int) -> Any:
    raise AssertionError("the arguments are readable")


def _graph3(f: FakeDriver) -> int:
    g = f.graph()
    a = f.kernel(g, [b"a" * 8, b"abcd", b"wxyz"])
    b = f.node(g, EMPTY, (a,))
    f.kernel(g, [b"c" * 8, b"abcd", b"wxyz"], (a, b), func=0xF40)
    return g


@needs_native
def test_lift_graph_passes_what_the_twin_passes() -> None:
    f = FakeDriver()
    g = _graph3(f)
    calls: list[Any] = []
    asked: list[Any] = []

    def kernel_of(func: int, kern: int) -> Any:
        asked.append((func, kern))
        return f"h{func:x}", f"n{func:x}", (8, 4, 4), _no_args

    def add_kernel(*args: Any, **kw: Any) -> Any:
        calls.append(("kernel", args, kw))
        return f"kernel-{len(calls)}"

    def other(handle: int, t: int, after: Any) -> Any:
        calls.append(("other", handle, t, after))
        return "empty-node"

    assert NATIVE.lift_graph(_fns(f), g, add_kernel, KW, kernel_of, other) is None
    b = f.graphs[g][0][1]
    assert calls == [
        ("kernel", ("hf00", 1, 32, (b"a" * 8, b"abcd", b"wxyz")), {"shared_mem": 0, "after": None, "name": "nf00"}),
        ("other", b, EMPTY, "kernel-1"),
        (
            "kernel",
            ("hf40", 1, 32, (b"c" * 8, b"abcd", b"wxyz")),
            {"shared_mem": 0, "after": ["kernel-1", "empty-node"], "name": "nf40"},
        ),
    ]
    assert asked == [(0xF00, 0), (0xF40, 0)]  # once per kernel


def _kernel_of(func: int, kern: int) -> Any:
    return "h", "k", (8, 4, 4), _no_args


@needs_native
@pytest.mark.parametrize(
    ("argv", "error", "match"),
    [
        ((), TypeError, "lift_graph"),
        (((1, 2, 3), 1, print, KW, print, print), TypeError, "4 addresses"),
        (((1, 2, 3, 0), 1, print, KW, print, print), ValueError, "get_kernel must not be NULL"),
        ((("x", 2, 3, 4), 1, print, KW, print, print), TypeError, "get_nodes must be an address"),
        (((1, 2, 3, 4), 1, print, ["shared_mem", "after", "name"], print, print), TypeError, "keywords: tuple"),
        (((1, 2, 3, 4), 1, print, ("shared_mem", "after", 3), print, print), TypeError, "keywords must be 3 str"),
        (((1, 2, 3, 4), 1, 5, KW, print, print), TypeError, "add_kernel: callable"),
        (((1, 2, 3, 4), "g", print, KW, print, print), TypeError, "graph must be an address"),
    ],
)
def test_lift_graph_refuses_malformed_calls(argv: tuple[Any, ...], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        NATIVE.lift_graph(*argv)


@needs_native
@pytest.mark.parametrize(
    ("given", "error", "match"),
    [
        (("h", "k", [8, 4, 4], _no_args), TypeError, "kernel_of must give"),
        (("h", "k", (8, 4, 4)), TypeError, "kernel_of must give"),
        (["h", "k", (8, 4, 4), _no_args], TypeError, "kernel_of must give"),
        (("h", "k", (8, -1, 4), _no_args), ValueError, "non-negative ints"),
        (("h", "k", (8, "4", 4), _no_args), ValueError, "non-negative ints"),
        (("h", "k", (8, 1 << 70, 4), _no_args), OverflowError, ""),
    ],
)
def test_a_malformed_kernel_answer_is_refused(given: Any, error: type, match: str) -> None:
    f = FakeDriver()
    g = _graph3(f)
    made: list[Any] = []
    with pytest.raises(error, match=match or None):
        NATIVE.lift_graph(_fns(f), g, lambda *a, **k: made.append(a), KW, lambda func, kern: given, print)
    assert made == []


@needs_native
@pytest.mark.parametrize("fails", ["add_kernel", "other", "kernel_of"])
def test_a_callback_that_raises_ends_the_lift_and_leaks_nothing(fails: str) -> None:
    f = FakeDriver()
    g = _graph3(f)
    handle = object()
    sentinel = object()

    def boom(*args: Any, **kw: Any) -> Any:
        raise RuntimeError(f"{fails} failed")

    cbs: dict[str, Any] = {
        "add_kernel": lambda *a, **k: sentinel,
        "other": lambda h, t, after: sentinel,
        "kernel_of": lambda func, kern: (handle, "k", (8, 4, 4), _no_args),
    }
    cbs[fails] = boom
    before = (sys.getrefcount(handle), sys.getrefcount(sentinel))
    for _ in range(50):
        with pytest.raises(RuntimeError, match=f"{fails} failed"):
            NATIVE.lift_graph(_fns(f), g, cbs["add_kernel"], KW, cbs["kernel_of"], cbs["other"])
    gc.collect()
    assert (sys.getrefcount(handle), sys.getrefcount(sentinel)) == before


@needs_native
def test_lift_graph_holds_what_it_hands_out_while_python_runs() -> None:
    """add_kernel drops every reference to what kernel_of gave and to the nodes made: the lift holds its own."""
    f = FakeDriver()
    g = f.graph()
    prev: tuple[int, ...] = ()
    for i in range(20):
        prev = (f.kernel(g, [bytes([i]) * 8, b"abcd", b"wxyz"], prev, func=0xF00 + 0x40 * (i % 2)),)
    given: dict[Any, Any] = {}
    seen: list[Any] = []

    def kernel_of(func: int, kern: int) -> Any:
        out = given[(func, kern)] = (object(), f"n{func:x}", (8, 4, 4), _no_args)
        return out

    def add_kernel(handle: Any, grid: Any, block: Any, args: Any, shared_mem: int, after: Any, name: str) -> Any:
        given.clear()
        gc.collect()
        seen.append((name, args[0][:1], after))
        return [len(seen)]  # a fresh object, referenced only by the lift

    assert NATIVE.lift_graph(_fns(f), g, add_kernel, KW, kernel_of, print) is None
    assert [s[1] for s in seen] == [bytes([i]) for i in range(20)]
    assert seen[0][2] is None and all(seen[i][2] == [i] for i in range(1, 20))
    assert [s[0] for s in seen[:3]] == ["nf00", "nf40", "nf00"]
