"""The compiled lift (``cudagraph.driver._reads.lift_graph``, Cython over ``cuda.bindings.cydriver``) against its
Python twin (``_Lifter.into_steps``).

The twin runs here over ctypes fakes of the driver's reads (``lift_fakes.py``): refusals of each read, unreadable
arguments, edges to unknown nodes, wide fan-ins. The compiled lift calls the driver itself, so it runs in a
subprocess over the repository's fake ``libcuda.so.1`` (``bench/fake_driver/fake_libcuda.c`` with the knobs of
``test_reads_compiled_cpu.VARIANT_C`` and a few more): both lift the same random driver graphs (kernels of several
functions and library kernels, nodes of other types, fan-ins in any edge order, node lists in any order) through
the same recording callbacks, and must make the same calls in the same order with the same arguments and end the
same way; refusals of each read (with the node's position), unknown edges, and hostile callbacks (raising,
returning junk, dropping every reference to what they were given, adding nodes to the graph being lifted) too.
The compiled lift must never crash the interpreter and must hold what it hands out.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import random
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

drv = pytest.importorskip("cuda.bindings.driver")

import cudagraph as cg  # noqa: E402
from cudagraph.errors import DriverError, OperandError, UnsupportedError  # noqa: E402
from cudagraph.materialize import lift as _lift  # noqa: E402
from lift_fakes import EMPTY, GRAPH, FakeBindings, FakeDriver, make_fake  # noqa: E402
from test_reads_compiled_cpu import ROOT, VARIANT_C, _under_fake  # noqa: E402

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


@pytest.mark.parametrize("width", [31, 32, 33, 64, 65, 130])
@pytest.mark.parametrize("steps", [True], ids=["twin"])
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
@pytest.mark.parametrize("steps", [True], ids=["twin"])
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


@pytest.mark.parametrize("steps", [True], ids=["twin"])
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


@pytest.mark.parametrize("steps", [True], ids=["twin"])
def test_an_edge_from_a_node_not_listed_is_a_key_error(fake: Fake, steps: bool) -> None:
    f, _b, _infos = fake
    g = f.graph()
    a = f.kernel(g, [b"a" * 8, b"abcd", b"wxyz"])
    f.graphs[g][1].append((0xDEAD00, a))  # a dependency that is not a node of the graph
    with pytest.raises(KeyError, match=str(0xDEAD00)):
        _lift_with(f, g, steps)


@pytest.mark.parametrize("seed", range(6))
def test_into_over_fakes_is_the_twin(fake: Fake, seed: int) -> None:
    """A reader over a test's fakes has no compiled lift (it calls the driver's own entry points): into() runs the
    twin, and makes what into_steps and carry make."""
    f, _b, _infos = fake
    graph = _random_graph(f, random.Random(seed))
    assert f.reader().lift(graph, None, None, None) is None
    assert _described(_lift_with(f, graph, False)) == _described(_lift_with(f, graph, True))


# ------------------------------------------------------------------ the compiled lift, over the fake libcuda

_reads_spec = importlib.util.find_spec("cudagraph.driver._reads")
BUILT = _reads_spec is not None
needs_built = pytest.mark.skipif(not BUILT, reason="cudagraph.driver._reads was not built (see setup.py's note)")

#: test_reads_compiled_cpu.VARIANT_C with three knobs more: ``lift_fail_type(node, rc)`` and
#: ``lift_fail_kernel(node, rc)`` refuse those reads of one node, ``lift_spin_type(ns)`` makes each
#: ``cuGraphNodeGetType`` take that long.
LIFT_VARIANT_C = (
    """
#include <time.h>
#define cuGraphNodeGetType fake_base_get_type
#define cuGraphKernelNodeGetParams_v2 fake_base_get_kernel
#define cuGraphKernelNodeGetParams fake_base_get_kernel_alias
"""
    + VARIANT_C
    + r"""
#undef cuGraphNodeGetType
#undef cuGraphKernelNodeGetParams_v2
#undef cuGraphKernelNodeGetParams
static H type_failing, kernel_failing;
static CUresult type_rc, kernel_rc;
static long long spin_ns;
void lift_fail_type(H n, int rc) { type_failing = n; type_rc = rc; }
void lift_fail_kernel(H n, int rc) { kernel_failing = n; kernel_rc = rc; }
void lift_spin_type(long long ns) { spin_ns = ns; }
static long long lift_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
CUresult cuGraphNodeGetType(H n, int *t) {
    if (spin_ns) { long long until = lift_now_ns() + spin_ns; while (lift_now_ns() < until) ; }
    if (type_failing && n == type_failing) return type_rc;
    return fake_base_get_type(n, t);
}
CUresult cuGraphKernelNodeGetParams_v2(H n, void *out) {
    if (kernel_failing && n == kernel_failing) return kernel_rc;
    return fake_base_get_kernel(n, out);
}
CUresult cuGraphKernelNodeGetParams(H n, void *out) __attribute__((alias("cuGraphKernelNodeGetParams_v2")));
"""
)


@pytest.fixture(scope="module")
def lift_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the fake ``libcuda.so.1`` with :data:`LIFT_VARIANT_C`'s knobs."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler to build the fake driver library")
    out = tmp_path_factory.mktemp("fake-cuda-lift")
    src = out / "variant.c"
    src.write_text(LIFT_VARIANT_C.replace("FAKE_C", str(ROOT / "bench" / "fake_driver" / "fake_libcuda.c")))
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out / "libcuda.so.1"), str(src), "-ldl"], check=True)
    return out


def _run(driver: Path, *parts: str) -> Any:
    """:func:`test_reads_compiled_cpu._under_fake` with faulthandler on (a crash shows where) and these tests'
    folder importable."""
    script = PRELUDE + "".join(textwrap.dedent(p) for p in parts)
    return _under_fake(driver, "import faulthandler; faulthandler.enable()\n" + script)


#: Graphs built straight through cuGraphAddNode on the fake (recorded: read back as the driver holds them), a
#: recording set of callbacks, and the twin (_Lifter.into_steps over GraphReader's ctypes reads) driven by them.
PRELUDE = textwrap.dedent(
    f"""
    import ctypes, gc, json, random, struct, sys
    sys.path.insert(0, {str(ROOT / "tests")!r})
    from cudagraph.driver import _reads
    from cudagraph.driver.graph_reader import graph_reader
    from cudagraph.materialize import lift as _lift
    from cudagraph.materialize.lift import _topo
    """
) + textwrap.dedent(
    """
    lib = ctypes.CDLL("libcuda.so.1")
    lib.fake_record_graphs(1)
    lib.cuInit(0)
    VP = ctypes.c_void_p
    KW = ("shared_mem", "after", "name")
    KERNEL_FUNCS = (0xF00, 0xF40, 0xF80)
    LIB_KERNELS = (0xAB0, 0xAC0)
    OTHER_TYPES = (1, 2, 3, 4, 5, 7)  # (never 13, a conditional node: the fake makes its bodies)

    class Built:
        def __init__(self):
            g = VP()
            assert lib.cuGraphCreate(ctypes.byref(g), 0) == 0
            self.graph = g.value
            self.handles = []  # in the order made
            self.keep = []

        def add(self, t, after=(), func=0, kern=0, grid=(1, 1, 1), block=(32, 1, 1), smem=0, args=b"", params=True):
            p = ctypes.create_string_buffer(256)
            struct.pack_into("<i", p, 0, t)
            if t == 0:
                argv = None
                if params:
                    data = ctypes.create_string_buffer(args.ljust(16, b"\\0"), 16)
                    argv = (VP * 3)(ctypes.addressof(data), ctypes.addressof(data) + 8, ctypes.addressof(data) + 12)
                    self.keep += [data, argv]
                struct.pack_into("<Q7I4xQQQ", p, 16, func, *grid, *block, smem,
                                 ctypes.addressof(argv) if argv is not None else 0, 0, kern)
            deps = (VP * max(len(after), 1))(*after)
            node = VP()
            assert lib.cuGraphAddNode(ctypes.byref(node), VP(self.graph), deps, None, len(after), p) == 0
            self.handles.append(node.value)
            return node.value

    def random_built(seed):
        rng = random.Random(seed)
        b = Built()
        made = []
        for i in range(rng.randint(0, 60)):
            k = rng.choice((0, 0, 1, 1, 1, 2, 3)) if made else 0
            after = rng.sample(made, min(len(made), k))
            if made and rng.random() < 0.03:
                after = rng.sample(made, min(len(made), rng.randint(30, 70)))  # fan-in past DEPS_ROOM
            roll = rng.random()
            if roll < 0.65:
                if rng.random() < 0.8:
                    func, kern = rng.choice(KERNEL_FUNCS), 0
                else:
                    func, kern = 0, rng.choice(LIB_KERNELS)
                made.append(b.add(0, after, func=func, kern=kern,
                                  grid=(rng.randint(1, 9), rng.choice((1, 1, 2)), rng.choice((1, 1, 3))),
                                  block=(rng.choice((32, 64)), rng.choice((1, 2)), 1), smem=rng.choice((0, 0, 256)),
                                  args=rng.randbytes(16), params=rng.random() > 0.05))
            else:
                made.append(b.add(rng.choice(OTHER_TYPES), after))
        return b

    class Handle:  # what kernel_of gives for a kernel (referenced by the lift alone once given)
        def __init__(self, value):
            self.value = value

    class Made:  # what a callback makes for a node (referenced by the lift alone once made)
        def __init__(self, k):
            self.k = k

    def tag(x):
        if isinstance(x, Made):
            return ["made", x.k]
        if isinstance(x, list):
            return [tag(y) for y in x]
        if isinstance(x, tuple):
            return ["tuple", [tag(y) for y in x]]
        if isinstance(x, bytes):
            return x.hex()
        return repr(x)

    class Calls:
        \"\"\"The callbacks, recording what they are given (handles as positions in the order made); `hostile`:
        {(callback, k-th call): action}.\"\"\"

        def __init__(self, built, hostile=None):
            self.built, self.hostile, self.log, self.counts = built, hostile or {}, [], {}

        def act(self, name):
            k = self.counts[name] = self.counts.get(name, 0) + 1
            what = self.hostile.get((name, k)) or self.hostile.get((name, "*"))
            if what == "raise":
                self.log.append([name, "raised"])
                raise RuntimeError(f"{name} {k} failed")
            if what == "collect":
                gc.collect()
            if what == "grow":  # a node added to the graph being lifted
                self.built.add(5, tuple(self.built.handles[:2]))
            return what

        def position(self, handle):
            return self.built.handles.index(handle) if handle in self.built.handles else repr(handle)

        def kernel_of(self, func, kern):
            what = self.act("kernel_of")
            self.log.append(["kernel_of", func, kern])
            sizes = () if func == 0xF80 else (4,) if kern else (8, 4, 4)
            if what == "junk":
                return ["not", "a", "tuple", "!"]
            return (Handle(func or kern), f"k{func:x}.{kern:x}", sizes, self.read_args)

        def read_args(self, address):
            what = self.act("read_args")
            self.log.append(["read_args", address])
            return "junk" if what == "junk" else ("unread",)

        def add_kernel(self, handle, grid, block, args, *, shared_mem, after, name):
            what = self.act("add_kernel")
            self.log.append(["kernel", handle.value, tag(grid), tag(block), tag(args), shared_mem, tag(after), name])
            if what == "junk":
                return [None, 5][len(self.log) % 2]
            return Made(len(self.log))

        def other(self, handle, t, after):
            what = self.act("other")
            self.log.append(["other", self.position(handle), t, tag(after)])
            if what == "junk":
                return "junk"
            return Made(len(self.log))

    def twin_args(sizes, read_args):
        n = len(sizes)

        def args(address):
            if not n:
                return ()
            ptrs = (VP * n).from_address(address)[:] if address else [None]
            if address and all(ptrs):
                return tuple(ctypes.string_at(p, s) for p, s in zip(ptrs, sizes))
            return read_args(address)

        return args

    class Twin(_lift._Lifter):
        \"\"\"into_steps with the callbacks of `calls` (kernel_of for each kernel, other for other nodes).\"\"\"

        def __init__(self, calls):
            super().__init__(graph_reader(), None)
            self.calls = calls

        def kernel(self, func, kern):
            handle, name, sizes, read_args = self.calls.kernel_of(func, kern)
            entry = self.kernels[(func, kern)] = type("Entry", (), {})()
            entry.handle, entry.name, entry.args = handle, name, twin_args(sizes, read_args)
            return entry

        def other(self, g, handle, t, after):
            return self.calls.other(handle, t, after)

    class Into:  # the definition into_steps adds to: Graph.kernel is the recording add_kernel
        def __init__(self, calls):
            self.kernel = calls.add_kernel

    def ending(fn):
        try:
            return ["returned", fn()]
        except Exception as e:
            return [type(e).__name__, str(e), getattr(e, "call", None), getattr(e, "position", None)]

    def compiled(built, hostile=None):
        calls = Calls(built, hostile)

        def run():
            count, handles, data = _reads.lift_graph(built.graph, calls.add_kernel, KW, calls.kernel_of, calls.other)
            return [count, [calls.position(h) for h in handles], data]

        end = ending(run)
        return {"end": end, "log": calls.log}

    def twin(built, hostile=None):
        calls = Calls(built, hostile)

        def run():
            reader = graph_reader()  # (the order carry reads, read as the lift starts: a callback may add nodes)
            nodes = reader.nodes(built.graph)
            data = []
            order, _ = _topo(nodes, *reader.edges(nodes, data))
            Twin(calls).into_steps(Into(calls), built.graph)
            return [len(nodes), [calls.position(nodes[i]) for i in order], data]

        end = ending(run)
        return {"end": end, "log": calls.log}
    """
)

RANDOM_SCRIPT = """
    out = []
    for seed in range(SEEDS):
        lib.variant_shuffle_nodes(seed % 3 and seed)  # a third in the order made, the others shuffled
        b = random_built(seed)
        out.append([compiled(b), twin(b)])
        lib.variant_shuffle_nodes(0)
    print(json.dumps(out))
"""


@needs_built
def test_the_compiled_lift_makes_the_twins_calls_on_random_graphs(lift_driver: Path) -> None:
    results = _run(lift_driver, RANDOM_SCRIPT.replace("SEEDS", "60"))
    kinds = set()
    for seed, (got, want) in enumerate(results):
        assert got == want, seed
        assert got["end"][0] == "returned", (seed, got["end"])
        kinds |= {entry[0] for entry in got["log"]}
        count, order, data = got["end"][1]
        assert count == len(order) and data == []
        assert sorted(order) == list(range(count)), seed
    assert kinds == {"kernel_of", "kernel", "other", "read_args"}  # every callback was reached
    # kernel_of asked once per kernel, when its first node is added
    for got, _ in results:
        asked = [tuple(e[1:]) for e in got["log"] if e[0] == "kernel_of"]
        assert len(asked) == len(set(asked))
    # a fan-in past DEPS_ROOM (32) was read whole, in edge order
    assert any(
        isinstance(e[-2], list) and len(e[-2]) > 32
        for got, _ in results
        for e in got["log"]
        if e[0] in ("kernel", "other")
    )


HOSTILE_SCRIPT = """
    PLANS = [
        {("add_kernel", 1): "raise"}, {("add_kernel", 4): "raise"}, {("other", 2): "raise"},
        {("kernel_of", 1): "raise"}, {("kernel_of", 2): "raise"}, {("read_args", 1): "raise"},
        {("add_kernel", "*"): "junk", ("other", "*"): "junk"}, {("read_args", "*"): "junk"},
        {("add_kernel", "*"): "collect", ("other", "*"): "collect", ("kernel_of", "*"): "collect"},
        {("add_kernel", "*"): "grow", ("other", 3): "grow"},
    ]
    out = []
    for seed in range(SEEDS):
        for plan in PLANS:
            # (a graph of its own for each run: "grow" adds nodes to the graph being lifted)
            got = compiled(random_built(seed), plan)
            want = twin(random_built(seed), plan)
            out.append([seed, [list(k) + [v] for k, v in plan.items()], got, want])
    print(json.dumps(out))
"""


@needs_built
def test_hostile_callbacks_end_the_compiled_lift_as_they_end_the_twin(lift_driver: Path) -> None:
    results = _run(lift_driver, HOSTILE_SCRIPT.replace("SEEDS", "12"))
    raised = 0
    for seed, plan, got, want in results:
        assert got["log"] == want["log"], (seed, plan)
        assert got["end"][:2] == want["end"][:2], (seed, plan, got["end"], want["end"])
        raised += got["end"][0] == "RuntimeError"
    assert raised > 20


MALFORMED_SCRIPT = """
    b = Built()
    first = b.add(0, (), func=0xF00, args=b"a" * 16)
    second = b.add(5, (first,))
    b.add(0, (first, second), func=0xF40, args=b"c" * 16)
    out = {}
    for name, given in [
        ("list sizes", ("h", "k", [8, 4, 4], print)),
        ("three", ("h", "k", (8, 4, 4))),
        ("a list", ["h", "k", (8, 4, 4), print]),
        ("negative", ("h", "k", (8, -1, 4), print)),
        ("a str size", ("h", "k", (8, "4", 4), print)),
        ("huge", ("h", "k", (8, 1 << 70, 4), print)),
        ("junk", None),
    ]:
        made = []
        end = ending(lambda: _reads.lift_graph(b.graph, lambda *a, **k: made.append(a), KW, lambda f, k: given, print))
        out[name] = [end[:2], made]
    # a callback that raises, 50 times: what the lift was given and made is released
    handle, sentinel = object(), object()
    before = [sys.getrefcount(handle), sys.getrefcount(sentinel)]
    for fails in ("add_kernel", "other", "kernel_of"):
        cbs = {
            "add_kernel": lambda *a, **k: sentinel,
            "other": lambda h, t, after: sentinel,
            "kernel_of": lambda func, kern: (handle, "k", (8, 4, 4), print),
        }
        def boom(*a, **k):
            raise RuntimeError(f"{fails} failed")
        cbs[fails] = boom
        for _ in range(50):
            end = ending(lambda: _reads.lift_graph(b.graph, cbs["add_kernel"], KW, cbs["kernel_of"], cbs["other"]))
            assert end[:2] == ["RuntimeError", f"{fails} failed"], end
    gc.collect()
    out["refcounts"] = [before, [sys.getrefcount(handle), sys.getrefcount(sentinel)]]
    # the same calls as the C lift made: one kernel_of per kernel, after as None, the one node made, or a list
    calls, asked = [], []
    def kernel_of(func, kern):
        asked.append([func, kern])
        return f"h{func:x}", f"n{func:x}", (8, 4, 4), print
    def add_kernel(*args, **kw):
        calls.append(["kernel", list(args[:3]), [a.hex() for a in args[3]], kw])
        return f"kernel-{len(calls)}"
    def other(handle, t, after):
        calls.append(["other", b.handles.index(handle), t, after])
        return "empty-node"
    count, handles, _ = _reads.lift_graph(b.graph, add_kernel, KW, kernel_of, other)
    out["result"] = [count, [b.handles.index(h) for h in handles]]
    out["calls"], out["asked"] = list(calls), list(asked)
    # keywords of other names: the same values under those names
    calls.clear()
    _reads.lift_graph(b.graph, add_kernel, ("smem", "deps", "label"), kernel_of, other)
    out["renamed"] = [c[3] for c in calls if c[0] == "kernel"]
    print(json.dumps(out))
"""


@needs_built
def test_the_compiled_lift_passes_what_the_c_lift_passed_and_refuses_malformed_answers(lift_driver: Path) -> None:
    out = _run(lift_driver, MALFORMED_SCRIPT)
    for name in ("list sizes", "three", "a list", "junk"):
        assert out[name] == [
            ["TypeError", "lift_graph: kernel_of must give (handle, name, sizes: tuple, read_args)"],
            [],
        ]
    for name in ("negative", "a str size"):
        assert out[name] == [["ValueError", "lift_graph: argument sizes must be non-negative ints"], []]
    assert out["huge"][0][0] == "OverflowError" and out["huge"][1] == []
    before, after = out["refcounts"]
    assert before == after
    assert out["result"] == [3, [0, 1, 2]]
    a, c = (b"a" * 16)[:8].hex(), (b"c" * 16)[:8].hex()
    assert out["calls"] == [
        ["kernel", ["hf00", 1, 32], [a, "61616161", "61616161"], {"shared_mem": 0, "after": None, "name": "nf00"}],
        ["other", 1, 5, "kernel-1"],
        [
            "kernel",
            ["hf40", 1, 32],
            [c, "63636363", "63636363"],
            {"shared_mem": 0, "after": ["kernel-1", "empty-node"], "name": "nf40"},
        ],
    ]
    assert out["asked"] == [[0xF00, 0], [0xF40, 0]]
    assert out["renamed"] == [
        {"smem": 0, "deps": None, "label": "nf00"},
        {"smem": 0, "deps": ["kernel-1", "empty-node"], "label": "nf40"},
    ]


REFUSED_SCRIPT = """
    import cudagraph as cg
    from cudagraph.driver.graph_reader import GraphReader
    from cudagraph.errors import DriverError

    def case(arm, disarm):
        b = Built()
        a = b.add(0, (), func=0xF00, args=b"a" * 16)
        k = b.add(0, (a,), func=0xF00, args=b"b" * 16)
        b.add(5, (k,))
        arm(b)
        got = compiled(b)
        want = twin(b)
        lifted = cg.Graph("lifted")
        through = ending(lambda: _lift._Lifter(graph_reader(), None).into(lifted, b.graph))
        disarm()
        return {"compiled": got, "twin": want, "into": through, "added": len(lifted)}

    h = lambda b, i: VP(b.handles[i])
    out = {
        "nodes": case(lambda b: lib.variant_fail_nodes(1), lambda: lib.variant_fail_nodes(0)),
        "deps": case(lambda b: lib.variant_fail_deps(h(b, 1), 400), lambda: lib.variant_fail_deps(None, 0)),
        "type": case(lambda b: lib.lift_fail_type(h(b, 2), 1), lambda: lib.lift_fail_type(None, 0)),
        "kernel": case(lambda b: lib.lift_fail_kernel(h(b, 1), 1), lambda: lib.lift_fail_kernel(None, 0)),
        "unknown": case(
            lambda b: lib.variant_extra_dep(h(b, 2), VP(0xDEAD00)), lambda: lib.variant_extra_dep(None, None)
        ),
    }
    print(json.dumps(out))
"""


@needs_built
def test_a_refused_read_ends_the_compiled_lift_naming_the_call_and_the_node(lift_driver: Path) -> None:
    out = _run(lift_driver, REFUSED_SCRIPT)
    for case, (call, position, rc) in {
        "nodes": ("cuGraphGetNodes", -1, 1),
        "deps": ("cuGraphNodeGetDependencies", 1, 400),
        "type": ("cuGraphNodeGetType", 2, 1),
        "kernel": ("cuGraphKernelNodeGetParams", 1, 1),
    }.items():
        got = out[case]
        assert got["compiled"]["end"][0] == "GraphReadError" and got["compiled"]["end"][2:] == [call, position], case
        assert got["compiled"]["end"][1] == str((rc, call)), case
        assert got["compiled"]["log"] == got["twin"]["log"] == [], case  # every node is read before the first is added
        assert got["twin"]["end"][0] == got["into"][0] == "DriverError" and got["into"][2] == call, case
        assert got["into"][1] == got["twin"]["end"][1] and got["added"] == 0, case
    unknown = out["unknown"]
    assert (
        unknown["compiled"]["end"][:2]
        == unknown["twin"]["end"][:2]
        == unknown["into"][:2]
        == ["KeyError", str(0xDEAD00)]
    )
    assert unknown["compiled"]["log"] == [] and unknown["added"] == 0


@needs_built
def test_the_compiled_lift_checks_its_arguments() -> None:
    from cudagraph.driver import _reads

    assert {"lift_graph", "kernel_args"} <= set(_reads.__all__)
    kw = ("shared_mem", "after", "name")
    for argv, error, match in [
        ((), TypeError, "lift_graph"),
        ((1, print, ["shared_mem", "after", "name"], print, print), TypeError, "keywords: tuple"),
        ((1, print, ("shared_mem", "after", 3), print, print), TypeError, "keywords must be 3 str"),
        ((1, 5, kw, print, print), TypeError, "add_kernel: callable"),
        ((1, print, kw, None, print), TypeError, "kernel_of: callable"),
        (("g", print, kw, print, print), TypeError, "graph must be an address"),
    ]:
        with pytest.raises(error, match=match):
            _reads.lift_graph(*argv)
    err = _reads.GraphReadError(1, "cuGraphNodeGetType", 3)
    assert (err.result, err.call, err.position) == (1, "cuGraphNodeGetType", 3)
    assert _reads.GraphReadError(1, "cuGraphGetNodes").position == -1


GIL_SCRIPT = """
    import time
    from types import SimpleNamespace
    import cudagraph as cg
    from driver_fakes import busy_thread_stamps, longest_wait

    NODES = 50000
    b = Built()
    prev = ()
    for i in range(NODES):
        prev = (b.add(0, prev, func=0xF00, args=bytes(range(1, 17))),)
    adding = []

    def kernel_info(handle):  # asked once, when the first node is added: the reads are done
        adding.append(time.perf_counter())
        return SimpleNamespace(name="spin", sizes=(8, 4, 4), offsets=(0, 8, 12))

    _lift.kernel_info = kernel_info
    reader = graph_reader()
    lib.lift_spin_type(3000)
    g = cg.Graph("lifted")
    with busy_thread_stamps() as stamps:
        t0 = time.perf_counter()
        _lift._Lifter(reader, None).into(g, b.graph)
        t1 = time.perf_counter()
    lib.lift_spin_type(0)
    nodes = g.nodes
    waits = [longest_wait(stamps, start, end) + (end - start,) for start, end in ((t0, adding[0]), (adding[0], t1))]
    print(json.dumps({
        "compiled": reader._lift is not None,
        "count": len(nodes), "kernels": all(n.kind == "kernel" for n in nodes),
        "chain": nodes[0].predecessors == ()
        and all(nodes[i].predecessors == (nodes[i - 1],) for i in (1, NODES // 2, NODES - 1)),
        "args": bytes(nodes[-1].args[0]).hex(),
        "adding": len(adding), "inside": t0 < adding[0] < t1, "took": t1 - t0, "waits": waits,
    }))
"""


@needs_built
def test_a_long_compiled_lift_lets_a_busy_python_thread_run(lift_driver: Path) -> None:
    """The reads run without the GIL; the adding loop offers it once held twice the switch interval (a chain of
    50,000 kernel nodes whose cuGraphNodeGetType spins 3 µs; a busy thread stamps its turns; switch interval 1 ms)."""
    out = _run(lift_driver, GIL_SCRIPT)
    assert out["compiled"] and out["count"] == 50000 and out["kernels"] and out["chain"]
    assert out["args"] == bytes(range(1, 9)).hex()  # the arguments were read through the fake
    assert out["adding"] == 1 and out["inside"]
    assert out["took"] >= 50000 * 3e-6  # the spinning alone
    for turns, longest, span in out["waits"]:  # holding the GIL through a phase, the busy thread gets no turn in it
        assert turns > 2 + 10 and longest < span / 3, (turns, longest, span)
