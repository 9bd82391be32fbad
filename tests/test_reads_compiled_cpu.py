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
VARIANT_C = r"""
#define cuGraphKernelNodeGetAttribute fake_base_get_attribute
#include "FAKE_C"
#undef cuGraphKernelNodeGetAttribute
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
