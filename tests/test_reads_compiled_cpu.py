"""The compiled launch attribute reader (``cudagraph.driver._reads``, Cython over ``cuda.bindings.cydriver``)
against its reference, the ctypes loop of ``NodeReads``: its API here, and both read under the fake driver
(``bench/fake_driver/fake_libcuda.c``, with nodes given attributes and refusals, built into the
``libcuda.so.1`` that ``cuda.bindings`` loads in a subprocess): the same values, refusals, pruning, errors, and
the same lifted graph."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings.driver")

from cudagraph.driver import node_reads
from cudagraph.driver.node_reads import LAST_ATTRIBUTE_ID, UNSET, NodeReads

ROOT = Path(__file__).resolve().parents[1]
#: Whether the extension was built (setup.py skips it without Cython, cydriver.pxd or a recent enough cuda.h).
BUILT = importlib.util.find_spec("cudagraph.driver._reads") is not None
needs_built = pytest.mark.skipif(not BUILT, reason="cudagraph.driver._reads was not built (see setup.py's note)")

IDS = tuple(range(1, LAST_ATTRIBUTE_ID + 1))
PLAIN = b"".join(UNSET.get(i, bytes(64)) for i in IDS)

#: The repository's fake driver with a few knobs: ``variant_set(node, id, value)`` gives a node an attribute
#: (an int at the start of its 64 bytes), ``variant_fail(node, rc)`` makes every read of a node fail with
#: ``rc``, and id 13 is refused with ``CUDA_ERROR_NOT_SUPPORTED`` (the fake refuses others with INVALID_VALUE).
#: For the graph order: ``variant_edge(from, to, from_port, to_port, type)`` gives an edge data (read back by
#: ``cuGraphNodeGetDependencies``), ``variant_shuffle_nodes(seed)`` shuffles the ``cuGraphGetNodes`` list (the same
#: way at every call; 0: the order added), ``variant_fail_nodes(rc)`` and ``variant_fail_deps(node, rc)`` make those
#: reads fail, ``variant_extra_dep(node, handle)`` lists one more dependency of ``node`` (a handle of no node).
VARIANT_C = r"""
#define cuGraphKernelNodeGetAttribute fake_base_get_attribute
#define cuGraphGetNodes fake_base_get_nodes
#define cuGraphNodeGetDependencies_v2 fake_base_get_deps
#define cuGraphNodeGetDependencies fake_base_get_deps_alias
#include "FAKE_C"
#undef cuGraphKernelNodeGetAttribute
#undef cuGraphGetNodes
#undef cuGraphNodeGetDependencies_v2
#undef cuGraphNodeGetDependencies
static struct { H node; int attr, value; } given[64];
static size_t ngiven;
static H failing;
static CUresult failing_rc;
void variant_set(H node, int attr, int value) {
    if (ngiven < 64) { given[ngiven].node = node; given[ngiven].attr = attr; given[ngiven++].value = value; }
}
void variant_fail(H node, int rc) { failing = node; failing_rc = rc; }
CUresult cuGraphKernelNodeGetAttribute(H n, int a, void *v) {
    if (failing && n == failing) return failing_rc;
    if (a == 13) return 801; /* CUDA_ERROR_NOT_SUPPORTED */
    CUresult rc = fake_base_get_attribute(n, a, v);
    for (size_t i = 0; rc == 0 && i < ngiven; i++)
        if (given[i].node == n && given[i].attr == a) memcpy(v, &given[i].value, sizeof(int));
    return rc;
}
static struct { H from, to; unsigned char data[8]; } edge_given[64];
static size_t nedge_given;
static unsigned shuffle_seed;
static CUresult nodes_rc;
static H deps_failing, extra_to, extra_from;
static CUresult deps_rc;
void variant_edge(H from, H to, int from_port, int to_port, int type) {
    if (nedge_given == 64) return;
    edge_given[nedge_given].from = from; edge_given[nedge_given].to = to;
    memset(edge_given[nedge_given].data, 0, 8);
    edge_given[nedge_given].data[0] = (unsigned char)from_port;
    edge_given[nedge_given].data[1] = (unsigned char)to_port;
    edge_given[nedge_given++].data[2] = (unsigned char)type;
}
void variant_shuffle_nodes(unsigned seed) { shuffle_seed = seed; }
void variant_fail_nodes(int rc) { nodes_rc = rc; }
void variant_fail_deps(H node, int rc) { deps_failing = node; deps_rc = rc; }
void variant_extra_dep(H node, H from) { extra_to = node; extra_from = from; }
CUresult cuGraphGetNodes(H g, H *nodes, size_t *n) {
    if (nodes_rc) return nodes_rc;
    CUresult rc = fake_base_get_nodes(g, nodes, n);
    if (rc || !nodes || !shuffle_seed) return rc;
    unsigned long long s = shuffle_seed;
    for (size_t i = *n; i > 1; i--) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t j = (size_t)((s >> 33) % i);
        H t = nodes[i - 1]; nodes[i - 1] = nodes[j]; nodes[j] = t;
    }
    return 0;
}
CUresult cuGraphNodeGetDependencies_v2(H n, H *deps, void *edata, size_t *count) {
    if (deps_failing && n == deps_failing) return deps_rc;
    Obj *o = get(n);
    size_t k = o ? o->ndeps : 0, total = k + (extra_to && n == extra_to ? 1 : 0);
    if (!deps) { *count = total; return 0; }
    size_t w = total < *count ? total : *count;
    for (size_t i = 0; i < w; i++) {
        deps[i] = i < k ? o->deps[i] : extra_from;
        if (!edata) continue;
        unsigned char *d = (unsigned char *)edata + 8 * i;
        memset(d, 0, 8);
        for (size_t e = 0; e < nedge_given; e++)
            if (edge_given[e].from == deps[i] && edge_given[e].to == n) memcpy(d, edge_given[e].data, 8);
    }
    *count = w;
    return 0;
}
CUresult cuGraphNodeGetDependencies(H n, H *deps, void *edata, size_t *count)
    __attribute__((alias("cuGraphNodeGetDependencies_v2")));
"""


# ------------------------------------------------------------------ the module's API (no driver)


@needs_built
def test_the_extension_imports_and_exposes_its_api():
    from cudagraph.driver import _reads

    assert _reads.VALUE_SIZE == 64 and _reads.MAX_IDS >= LAST_ATTRIBUTE_ID
    assert set(_reads.__all__) >= {"AttributeReads", "AttributeReadError"}
    reader = _reads.AttributeReads(IDS, PLAIN)
    assert reader.ids == IDS and reader.plain == PLAIN
    assert callable(reader.read)
    assert "AttributeReads(ids=(1, 2" in repr(reader)
    with pytest.raises(AttributeError):
        reader.ids = ()  # type: ignore[misc]  # (set once: a reader is shared by threads without a lock)
    err = _reads.AttributeReadError(400, 8)
    assert isinstance(err, RuntimeError) and (err.result, err.attribute) == (400, 8)


@needs_built
def test_the_reader_checks_its_arguments():
    from cudagraph.driver import _reads

    with pytest.raises(ValueError, match="plain is 64 bytes, not 128"):
        _reads.AttributeReads((1, 2), bytes(64))
    with pytest.raises(ValueError, match="at most"):
        _reads.AttributeReads(range(1, _reads.MAX_IDS + 2), bytes(64 * (_reads.MAX_IDS + 1)))
    with pytest.raises(TypeError):
        _reads.AttributeReads((1,), bytearray(64))
    assert _reads.AttributeReads((), b"").ids == ()


def test_the_module_declares_its_gil_stance():
    source = (ROOT / "src" / "cudagraph" / "driver" / "_reads.pyx").read_text()
    assert "# cython: freethreading_compatible = True" in source.split('"""', 1)[0]


@needs_built
@pytest.mark.skipif(not sysconfig.get_config_var("Py_GIL_DISABLED"), reason="not a free-threaded Python")
def test_importing_it_leaves_the_gil_off_on_free_threaded_python():
    code = "import sys; import cudagraph.driver._reads; print(sys._is_gil_enabled())"
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    env["PYTHONPATH"] = _pythonpath()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stdout + r.stderr


def test_node_reads_chooses_the_compiled_reader_only_for_the_drivers_own_entry_point(monkeypatch):
    class Module:
        class AttributeReadError(Exception):
            pass

        class AttributeReads:
            def __init__(self, ids, plain):
                self.ids, self.plain = ids, plain

    fake_entry = object()
    monkeypatch.setattr(node_reads, "c_function", lambda symbol: fake_entry)
    monkeypatch.setattr(node_reads, "compiled_reads", lambda: Module)
    reads = NodeReads()
    assert reads.compiled and reads._compiled.ids == IDS and reads._compiled.plain == PLAIN
    assert not NodeReads(compiled=False).compiled  # the reference, asked for
    assert not NodeReads(get_attr=lambda *a: 0).compiled  # a function of the caller's (a test's fake)
    assert not NodeReads(get_attr=None).compiled  # through cuda.bindings
    monkeypatch.setattr(node_reads, "compiled_reads", lambda: None)
    assert not NodeReads().compiled  # not built


def test_no_c_entry_turns_the_compiled_reader_off():
    code = "from cudagraph.driver.node_reads import compiled_reads; print(compiled_reads() is None)"
    env = dict(os.environ, CUDAGRAPH_NO_C_ENTRY="1", PYTHONPATH=_pythonpath())
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stdout + r.stderr


@needs_built
def test_compiled_reads_loads_the_module():
    if os.environ.get("CUDAGRAPH_NO_C_ENTRY"):
        pytest.skip("CUDAGRAPH_NO_C_ENTRY is set")
    from cudagraph.driver import _reads

    assert node_reads.compiled_reads() is _reads


# ------------------------------------------------------------------ both readers under the fake driver


def _pythonpath() -> str:
    import cudagraph

    return str(Path(cudagraph.__file__).resolve().parents[1])  # the cudagraph these tests import


@pytest.fixture(scope="module")
def variant_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the fake ``libcuda.so.1`` with :data:`VARIANT_C`'s knobs."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler to build the fake driver library")
    out = tmp_path_factory.mktemp("fake-cuda-reads")
    src = out / "variant.c"
    src.write_text(VARIANT_C.replace("FAKE_C", str(ROOT / "bench" / "fake_driver" / "fake_libcuda.c")))
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out / "libcuda.so.1"), str(src), "-ldl"], check=True)
    return out


def _under_fake(driver: Path, script: str) -> dict:
    """Run ``script`` with the fake driver first on the library path; it prints one JSON object last."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDAGRAPH_NO_C_ENTRY", "CUDAGRAPH_FAKE_DRIVER")}
    env["LD_LIBRARY_PATH"] = f"{driver}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else str(driver)
    env["PYTHONPATH"] = _pythonpath()
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


READS_SCRIPT = """
    import ctypes, json
    from cudagraph.driver import _reads
    from cudagraph.driver.node_reads import LAST_ATTRIBUTE_ID, UNSET, NodeReads
    from cudagraph.errors import DriverError

    lib = ctypes.CDLL("libcuda.so.1")
    PLAIN, GIVEN, FAILING = 0x200000, 0x200010, 0x200020
    lib.variant_set(ctypes.c_void_p(GIVEN), 8, 2)  # priority
    lib.variant_set(ctypes.c_void_p(GIVEN), 10, 1)  # mem_sync_domain
    lib.variant_fail(ctypes.c_void_p(FAILING), 400)  # CUDA_ERROR_INVALID_HANDLE

    ids = tuple(range(1, LAST_ATTRIBUTE_ID + 1))
    reader = _reads.AttributeReads(ids, b"".join(UNSET.get(i, bytes(64)) for i in ids))
    first_raw, first_refused = reader.read(PLAIN)
    kept = tuple(i for i in ids if i not in first_refused)
    pruned = _reads.AttributeReads(kept, b"".join(UNSET.get(i, bytes(64)) for i in kept))
    given_raw, given_refused = pruned.read(GIVEN)
    try:
        pruned.read(FAILING)
        failure = None
    except _reads.AttributeReadError as e:
        failure = [e.result, e.attribute]

    def through(compiled):
        NodeReads._driver_refuses = frozenset()  # (each reader learns the refusals anew; see "learned" below)
        reads = NodeReads(compiled=compiled)
        assert reads.compiled == compiled, (reads.compiled, compiled)
        got = {}
        for name, node in (("plain", PLAIN), ("given", GIVEN), ("plain again", PLAIN)):
            values = reads.attributes(node)
            got[name] = {str(k): v.hex() for k, v in values.items()}
            got[name + " ids"] = list(reads.ids)
        try:
            reads.attributes(FAILING)
            got["error"] = None
        except DriverError as e:
            got["error"] = [type(e).__name__, str(e)]
        every = NodeReads(prune=False, compiled=compiled).attributes(GIVEN)
        got["unpruned"] = {str(k): v.hex() for k, v in every.items()}
        later = NodeReads(compiled=compiled)  # a later pruning reader of the driver: the refusals are known
        got["learned"] = [list(later.ids), {str(k): v.hex() for k, v in later.attributes(PLAIN).items()}]
        same = later.attributes(GIVEN)
        got["one dict for equal values"] = same is later.attributes(GIVEN) and same == reads.attributes(GIVEN)
        return got

    print(json.dumps({
        "first": [first_raw.hex() if first_raw is not None else None, list(first_refused)],
        "plain": list(pruned.read(PLAIN)[1]) if pruned.read(PLAIN)[0] is None else "not plain",
        "given": [given_raw.hex() if given_raw is not None else None, list(given_refused), list(kept)],
        "failure": failure,
        "compiled": through(True),
        "ctypes": through(False),
    }))
"""


@needs_built
def test_the_compiled_reader_reads_what_the_driver_holds(variant_driver):
    out = _under_fake(variant_driver, READS_SCRIPT)
    refused = [3, 6, 7, 12, 13, 15, 19, 20, 21, 22, 23]  # the fake's INVALID_VALUE ones, and 13 (NOT_SUPPORTED)
    raw, first_refused = out["first"]
    assert first_refused == refused and raw is not None  # (a refusal comes back with the values read)
    assert bytes.fromhex(raw) == b"".join(bytes(64) if i in refused else UNSET.get(i, bytes(64)) for i in IDS)
    assert out["plain"] == []  # (None, ()): a plain node, once the refused ids are asked no more
    given, given_refused, kept = out["given"]
    assert given_refused == [] and kept == [i for i in IDS if i not in refused]
    values = bytes.fromhex(given)
    assert values[64 * kept.index(8) : 64 * kept.index(8) + 4] == (2).to_bytes(4, "little")
    assert values[64 * kept.index(10) : 64 * kept.index(10) + 4] == (1).to_bytes(4, "little")
    assert out["failure"] == [400, 1]  # the first id asked


@needs_built
def test_node_reads_gives_the_same_through_both_readers(variant_driver):
    out = _under_fake(variant_driver, READS_SCRIPT)
    compiled, reference = out["compiled"], out["ctypes"]
    assert compiled == reference
    # refusals are learned once per process: a later reader asks the refused ids no more, a plain node is {}
    assert compiled["learned"] == [compiled["plain again ids"], {}]
    assert compiled["one dict for equal values"] is True
    # the first node's read, which had refusals, comes back whole (the ctypes loop's way); then a plain node is {}
    assert set(compiled["plain"]) == {str(i) for i in compiled["plain ids"]} and compiled["plain again"] == {}
    assert set(compiled["given"]) == {str(i) for i in compiled["given ids"]}  # a node with attributes: every id
    assert compiled["given"]["8"].startswith("02000000") and compiled["given"]["10"].startswith("01000000")
    assert 13 not in compiled["given ids"] and len(compiled["unpruned"]) == len(compiled["given ids"])
    kind, message = compiled["error"]
    assert kind == "DriverError" and "cuGraphKernelNodeGetAttribute" in message and "attribute id 1" in message, message


LIFT_SCRIPT = """
    import ctypes, json
    from cuda.core import Device, ObjectCode
    import numpy as np
    import cudagraph as cg
    from cudagraph.driver import node_reads
    from cudagraph.driver.graph_reader import graph_reader
    from cudagraph.materialize.explicit import lower

    lib = ctypes.CDLL("libcuda.so.1")
    lib.fake_record_graphs(1)
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    kernels = [ObjectCode.from_cubin(b"\\0" * 64).get_kernel(name) for name in ("inc", "dec")]
    buf = dev.allocate(4096, stream=stream)
    g = cg.Graph("chain")
    prev = None
    for i in range(12):
        prev = g.kernel(kernels[i % 2], 4, 64, (buf, np.float32(1.0), np.int32(i)), after=prev)
    lowered = lower(g, {}, [])
    handles = list(lowered.driver_nodes)
    for k, value in ((2, 3), (5, 1), (9, 2)):
        lib.variant_set(ctypes.c_void_p(int(handles[k])), 8, value)  # priority
    lib.variant_set(ctypes.c_void_p(int(handles[7])), 10, 1)  # mem_sync_domain

    def lifted():
        out = cg.lift(lowered.handle)
        return [[n.kind, n.name, repr(n.attrs)] for n in out.nodes]

    compiled_used = graph_reader().attributes.__self__.compiled
    through_compiled = lifted()
    node_reads.compiled_reads = lambda: None  # NodeReads now reads through its ctypes loop
    reference_used = graph_reader().attributes.__self__.compiled
    through_ctypes = lifted()
    print(json.dumps({"used": [compiled_used, reference_used], "compiled": through_compiled, "ctypes": through_ctypes}))
"""


@needs_built
def test_a_lift_through_the_compiled_reader_is_the_lift_through_ctypes(variant_driver):
    pytest.importorskip("cuda.core")
    out = _under_fake(variant_driver, LIFT_SCRIPT)
    assert out["used"] == [True, False]
    assert out["compiled"] == out["ctypes"]
    attrs = [a for _, _, a in out["compiled"]]
    assert len(attrs) == 12 and len(set(attrs)) > 1, attrs  # some nodes were lifted with attributes, others plain


# ------------------------------------------------------------------ the graph order (graph_order, _Lifter.carry)


@needs_built
def test_the_graph_order_api():
    from cudagraph.driver import _reads, graph_reader

    assert {"graph_order", "GraphReadError", "DEPS_ROOM"} <= set(_reads.__all__) and callable(_reads.graph_order)
    assert _reads.DEPS_ROOM == graph_reader.DEPS_ROOM  # (the same calls as GraphReader.edges)
    err = _reads.GraphReadError(400, "cuGraphNodeGetDependencies")
    assert isinstance(err, RuntimeError) and (err.result, err.call) == (400, "cuGraphNodeGetDependencies")


def test_node_reads_gives_the_graph_order_only_for_the_drivers_own_entry_points(monkeypatch):
    from cudagraph.errors import DriverError

    class GraphReadError(Exception):
        def __init__(self, result, call):
            self.result, self.call = result, call

    class Module:
        class AttributeReadError(Exception):
            pass

        class AttributeReads:
            def __init__(self, ids, plain):
                pass

    Module.GraphReadError = GraphReadError  # type: ignore[attr-defined]
    Module.graph_order = staticmethod(lambda graph: (1, [graph + 1], []))  # type: ignore[attr-defined]
    entries = {"cuGraphKernelNodeGetAttribute": object(), "cuGraphNodeGetDependencies_v2": object()}
    monkeypatch.setattr(node_reads, "c_function", entries.get)
    monkeypatch.setattr(node_reads, "compiled_reads", lambda: Module)
    assert NodeReads().graph_order(0x100) == (1, [0x101], [])
    assert NodeReads(compiled=False).graph_order(0x100) is None  # the reference, asked for
    assert NodeReads(get_deps=lambda *a: 0).graph_order(0x100) is None  # a function of the caller's (a test's fake)
    assert NodeReads(get_deps=None).graph_order(0x100) is None  # through cuda.bindings
    assert NodeReads(get_attr=lambda *a: 0).graph_order(0x100) is None  # attributes not compiled: nor the order

    def refused(graph):
        raise GraphReadError(400, "cuGraphNodeGetDependencies")

    Module.graph_order = staticmethod(refused)  # type: ignore[attr-defined]
    with pytest.raises(DriverError, match="cuGraphNodeGetDependencies failed") as e:
        NodeReads().graph_order(0x100)
    assert e.value.code == 400
    del Module.graph_order  # type: ignore[attr-defined]  # (a module built before graph_order)
    assert NodeReads().graph_order(0x100) is None
    monkeypatch.setattr(node_reads, "compiled_reads", lambda: None)
    assert NodeReads().graph_order(0x100) is None  # not built


#: Random graphs under the fake driver (kernels and empty nodes; chains, fan-in past DEPS_ROOM, fan-out), their node
#: lists in the order added or shuffled: graph_order against the reads and order of the reference, and the lift with
#: it against the lift through the reference (NodeReads.graph_order giving None).
ORDER_SCRIPT = """
    import ctypes, json, random
    from cuda.core import Device, ObjectCode
    import numpy as np
    import cudagraph as cg
    from cudagraph.driver import _reads, node_reads
    from cudagraph.driver.graph_reader import GraphReader, graph_reader
    from cudagraph.materialize.explicit import lower
    from cudagraph.materialize.lift import _topo

    lib = ctypes.CDLL("libcuda.so.1")
    lib.fake_record_graphs(1)
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    kernels = [ObjectCode.from_cubin(b"\\\\0" * 64).get_kernel(name) for name in ("inc", "dec", "mul")]
    buf = dev.allocate(4096, stream=stream)

    def random_graph(rng):
        g = cg.Graph("random")
        made = []
        shape = rng.choice(["chain", "fan", "wide", "mixed"])
        for i in range(rng.randint(1, 120)):
            if not made:
                after = None
            elif shape == "chain":
                after = made[-1]
            elif shape == "fan":  # every node after one of the first few: fan-out, then fan-in at the end
                after = rng.choice(made[:3])
            elif shape == "wide" and i == 60:
                after = list(made)  # fan-in past DEPS_ROOM (32) dependencies
            else:
                after = rng.sample(made, min(len(made), rng.randint(0, 5))) or None
            if rng.random() < 0.15:
                made.append(g.empty(after=after))
            else:
                made.append(g.kernel(rng.choice(kernels), rng.randint(1, 9), 32, (buf, np.float32(i), np.int32(i)),
                                     after=after))
        if shape == "fan" and len(made) > 3:
            made.append(g.kernel(kernels[0], 1, 32, (buf, np.float32(0), np.int32(0)), after=made[3:]))
        return g

    def reference_order(handle):
        reader = graph_reader()
        nodes = reader.nodes(handle)
        data = []
        frm, to = reader.edges(nodes, data)
        order, _ = _topo(nodes, frm, to)
        return [len(nodes), [nodes[i] for i in order], [list(e) for e in data]]

    def described(g):
        out = []
        for n in g.nodes:
            preds = [p.index for p in n.predecessors]
            if n.kind == "kernel":
                args = [a.hex() for a in n.args]
                out.append([n.kind, n.name, list(n.grid), list(n.block), args, repr(n.attrs), preds])
            else:
                out.append([n.kind, n.name, preds])
        return out

    used = []
    order_of, lift_of = _reads.graph_order, _reads.lift_graph
    # (NodeReads and GraphReader look them up when made; the compiled lift reads the order for the carry itself)
    _reads.graph_order = lambda graph: used.append(graph) or order_of(graph)
    _reads.lift_graph = lambda graph, *rest: used.append(graph) or lift_of(graph, *rest)
    reference, reference_lift = node_reads.NodeReads.graph_order, GraphReader.lift

    def lifted(handle, compiled):
        node_reads.NodeReads.graph_order = reference if compiled else (lambda self, graph: None)
        GraphReader.lift = reference_lift if compiled else (lambda self, *rest: None)
        try:
            return described(cg.lift(handle))
        finally:
            node_reads.NodeReads.graph_order, GraphReader.lift = reference, reference_lift

    results = []
    for seed in range(SEEDS):
        rng = random.Random(seed)
        g = random_graph(rng)
        lowered = lower(g, {}, [])
        handle = int(lowered.handle)
        lib.variant_shuffle_nodes(seed % 3 and seed)  # a third in the order added, the others shuffled
        count, handles, data = order_of(handle)
        before = len(used)
        through_compiled = lifted(handle, True)
        compiled_used = len(used) > before
        before = len(used)
        through_reference = lifted(handle, False)
        reference_used = len(used) > before
        lib.variant_shuffle_nodes(0)
        results.append({
            "order": [count, handles, [list(e) for e in data]],
            "reference order": reference_order(handle) if not seed % 3 else None,
            "shuffled": bool(seed % 3),
            "used": [compiled_used, reference_used],
            "nodes": len(g.nodes),
            "compiled": through_compiled,
            "reference": through_reference,
            "added order": handles == sorted(handles),
        })
        if seed % 3:  # (the reference order under the same shuffle)
            lib.variant_shuffle_nodes(seed)
            results[-1]["reference order"] = reference_order(handle)
            lib.variant_shuffle_nodes(0)
        lowered.destroy()
    print(json.dumps(results))
"""


@needs_built
def test_the_compiled_graph_order_is_the_reference_order_and_lifts_the_same(variant_driver):
    pytest.importorskip("cuda.core")
    results = _under_fake(variant_driver, ORDER_SCRIPT.replace("SEEDS", "30"))
    assert len(results) == 30
    for seed, r in enumerate(results):
        assert r["order"] == r["reference order"], seed
        assert r["order"][0] == r["nodes"] == len(r["order"][1]) and r["order"][2] == [], seed
        assert r["used"] == [True, False], seed
        assert r["compiled"] == r["reference"], seed
    # the shuffled lists make orders other than the order the nodes were added in
    assert any(r["shuffled"] and not r["added order"] for r in results)
    # the fan-in past DEPS_ROOM was read whole (the node after 60 others)
    assert any(max(len(n[-1]) for n in r["compiled"]) > 32 for r in results)


#: Edges with data under the fake driver: programmatic ports lifted the same through both orders; data cudagraph does
#: not model refused the same way.
DATA_SCRIPT = """
    import ctypes, json
    from cuda.core import Device, ObjectCode
    import numpy as np
    import cudagraph as cg
    from cudagraph.driver import node_reads
    from cudagraph.driver.graph_reader import GraphReader, graph_reader
    from cudagraph.errors import UnsupportedError
    from cudagraph.materialize.explicit import lower

    lib = ctypes.CDLL("libcuda.so.1")
    lib.fake_record_graphs(1)
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    kernel = ObjectCode.from_cubin(b"\\\\0" * 64).get_kernel("inc")
    buf = dev.allocate(4096, stream=stream)
    g = cg.Graph("data")
    made = []
    for i in range(8):
        after = [made[0], made[1]] if i == 5 else (made[-1] if made else None)
        made.append(g.kernel(kernel, 1, 32, (buf, np.float32(i), np.int32(i)), after=after))
    made.append(g.empty(after=made[-1]))
    made.append(g.kernel(kernel, 1, 32, (buf, np.float32(9), np.int32(9)), after=made[-1]))
    lowered = lower(g, {}, [])
    h = [int(n) for n in lowered.driver_nodes]
    handle = int(lowered.handle)
    reference, reference_lift = node_reads.NodeReads.graph_order, GraphReader.lift

    def lift(compiled):
        node_reads.NodeReads.graph_order = reference if compiled else (lambda self, graph: None)
        GraphReader.lift = reference_lift if compiled else (lambda self, *rest: None)
        try:
            out = cg.lift(handle)
            # (a kernel named by the int it was given: lifting orders the nodes its own way)
            return [
                [n.kind, int.from_bytes(n.args[2], "little"), repr(n.attrs),
                 [[int.from_bytes(p.args[2], "little"), port] for p, port in n.attrs.programmatic] if n.attrs else []]
                if n.kind == "kernel" else [n.kind, None, None, []]
                for n in out.nodes
            ]
        except UnsupportedError as e:
            return ["UnsupportedError", str(e)]
        finally:
            node_reads.NodeReads.graph_order, GraphReader.lift = reference, reference_lift

    def data_edges():
        reader = graph_reader()
        data = []
        reader.edges(reader.nodes(handle), data)
        compiled = reader.attributes.__self__.graph_order(handle)
        return [[list(e) for e in compiled[2]], [list(e) for e in data]]

    out = {}
    lib.variant_edge(ctypes.c_void_p(h[2]), ctypes.c_void_p(h[3]), 1, 0, 1)  # programmatic
    lib.variant_edge(ctypes.c_void_p(h[1]), ctypes.c_void_p(h[5]), 2, 0, 1)  # launch order, one of two edges
    out["edges"] = data_edges()
    out["ports"] = [lift(True), lift(False)]
    lib.variant_edge(ctypes.c_void_p(h[8]), ctypes.c_void_p(h[9]), 1, 0, 1)  # from an empty node: refused
    out["from empty"] = [lift(True), lift(False)]
    lib.variant_shuffle_nodes(7)
    out["shuffled"] = [lift(True), lift(False)]
    out["shuffled edges"] = data_edges()
    print(json.dumps(out))
"""


@needs_built
def test_edges_with_data_lift_the_same_through_both_orders(variant_driver):
    pytest.importorskip("cuda.core")
    out = _under_fake(variant_driver, DATA_SCRIPT)
    compiled, reference = out["edges"]
    assert compiled == reference and [e[2:] for e in compiled] == [[1, 0, 1], [2, 0, 1]]
    with_ports, through_reference = out["ports"]
    assert with_ports == through_reference
    ports = {i: edges for _, i, _, edges in with_ports if edges}
    assert ports == {3: [[2, "programmatic"]], 5: [[1, "launch_order"]]}, with_ports
    refused, refused_reference = out["from empty"]
    assert refused == refused_reference and refused[0] == "UnsupportedError"
    assert "refused rather than dropped" in refused[1]
    assert out["shuffled"][0] == out["shuffled"][1] == refused
    compiled, reference = out["shuffled edges"]
    assert compiled == reference and len(compiled) == 3


#: Failed reads and a dependency that is no node, through graph_order, NodeReads.graph_order and _Lifter.carry, against
#: the reference (GraphReader's reads and _topo).
ERRORS_SCRIPT = """
    import ctypes, json
    from cuda.core import Device, ObjectCode
    import numpy as np
    import cudagraph as cg
    from cudagraph.driver import _reads, node_reads
    from cudagraph.driver.graph_reader import graph_reader
    from cudagraph.materialize import lift as _lift
    from cudagraph.materialize.explicit import lower

    lib = ctypes.CDLL("libcuda.so.1")
    lib.fake_record_graphs(1)
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    kernel = ObjectCode.from_cubin(b"\\\\0" * 64).get_kernel("inc")
    buf = dev.allocate(4096, stream=stream)
    g = cg.Graph("errors")
    prev = None
    for i in range(6):
        prev = g.kernel(kernel, 1, 32, (buf, np.float32(i), np.int32(i)), after=prev)
    lowered = lower(g, {}, [])
    h = [int(n) for n in lowered.driver_nodes]
    handle = int(lowered.handle)
    reference = node_reads.NodeReads.graph_order

    def caught(fn):
        try:
            fn()
            return None
        except Exception as e:
            key = list(e.args) if isinstance(e, KeyError) else None
            return [type(e).__name__, str(e), getattr(e, "code", None), key]

    def raw():
        try:
            _reads.graph_order(handle)
            return None
        except _reads.GraphReadError as e:
            return [e.result, e.call]
        except KeyError as e:
            return ["KeyError", list(e.args)]

    def through_reference():
        reader = graph_reader()
        nodes = reader.nodes(handle)
        frm, to = reader.edges(nodes, [])
        _lift._topo(nodes, frm, to)

    def carry(compiled):
        node_reads.NodeReads.graph_order = reference if compiled else (lambda self, graph: None)
        try:
            return caught(lambda: _lift._Lifter(graph_reader(), None).carry(cg.Graph("x"), handle, 0))
        finally:
            node_reads.NodeReads.graph_order = reference

    def case():
        return {
            "raw": raw(),
            "node reads": caught(lambda: graph_reader().attributes.__self__.graph_order(handle)),
            "reference": caught(through_reference),
            "carry": [carry(True), carry(False)],
        }

    out = {}
    lib.variant_fail_deps(ctypes.c_void_p(h[3]), 400)  # CUDA_ERROR_INVALID_HANDLE
    out["deps"] = case()
    lib.variant_fail_deps(None, 0)
    lib.variant_fail_nodes(2)  # CUDA_ERROR_OUT_OF_MEMORY
    out["nodes"] = case()
    lib.variant_fail_nodes(0)
    lib.variant_extra_dep(ctypes.c_void_p(h[4]), ctypes.c_void_p(0x7777770))
    out["unknown"] = case()
    lib.variant_extra_dep(None, None)
    out["none"] = case()
    print(json.dumps(out))
"""


@needs_built
def test_failed_reads_raise_the_same_through_both_orders(variant_driver):
    pytest.importorskip("cuda.core")
    out = _under_fake(variant_driver, ERRORS_SCRIPT)
    deps = out["deps"]
    assert deps["raw"] == [400, "cuGraphNodeGetDependencies"]
    assert deps["node reads"] == deps["reference"] == deps["carry"][0] == deps["carry"][1]
    kind, message, code, _ = deps["node reads"]
    assert kind == "DriverError" and message.startswith("cuGraphNodeGetDependencies failed") and code == 400
    nodes = out["nodes"]
    assert nodes["raw"] == [2, "cuGraphGetNodes"]
    assert nodes["node reads"] == nodes["reference"] == nodes["carry"][0] == nodes["carry"][1]
    assert nodes["node reads"][1].startswith("cuGraphGetNodes failed") and nodes["node reads"][2] == 2
    unknown = out["unknown"]
    assert unknown["raw"] == ["KeyError", [0x7777770]]
    assert unknown["node reads"] == unknown["reference"] == unknown["carry"][0] == unknown["carry"][1]
    assert unknown["node reads"][0] == "KeyError" and unknown["node reads"][3] == [0x7777770]
    none = out["none"]
    assert none["raw"] is None and none["node reads"] is None and none["reference"] is None
    # (carry into a definition holding none of the nodes: refused the same way by both)
    assert none["carry"][0] == none["carry"][1] and none["carry"][0][0] == "UnsupportedError"
