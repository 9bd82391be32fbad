"""What the red team's executable cases (``scripts/red_team.py --exec``) found, each with its fix (no GPU).

The calls run for real in a fresh interpreter under the fake ``libcuda.so.1`` of ``bench/fake_driver`` (built
with the system C compiler), with the compiled module and with its Python twins (``CUDAGRAPH_NO_C_ENTRY``):

- a rebind that a node refuses part way (a copy whose endpoint becomes no memory) left the new value in
  ``exe.bindings`` while the copy kept the old one and the kernels using the parameter had the new one: a later
  bind of that value was a no-op. Now the bindings and the nodes already set get their previous values back;
- ``exe.launch(stream, **params)`` with a stream that is refused rebound the parameters first, then refused;
- ``exe.update(rebuilt)`` after the definition was edited in place (a node removed) moved the parameter users by
  their new indices: the next ``bind`` raised a raw ``KeyError``;
- ``exe.update(g)`` of a definition whose nodes before a kernel were removed compared that kernel's launch
  attributes with another node's recorded state: a raw ``AttributeError``;
- a kernel or an event of a type named like a handle (the definition layer knows them by type name) that has
  no ``handle`` raised a raw ``AttributeError`` when lowered; now an ``OperandError`` names the node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings.driver")
pytest.importorskip("cuda.core")

ROOT = Path(__file__).resolve().parents[1]

PRELUDE = r"""
import numpy as np
from cuda.core import Device, ObjectCode
import cudagraph as cg
from cudagraph.errors import CudaGraphError, DefinitionError, OperandError

dev = Device(0)
dev.set_current()
s = dev.create_stream()
k = ObjectCode.from_cubin(b"\0" * 64).get_kernel("inc")  # the fake driver's kernels: inc(float*, float, int)
buf, buf2 = dev.allocate(1 << 12, stream=s), dev.allocate(1 << 12, stream=s)


def copy_graph(memset=False):
    g = cg.Graph("rt")
    p, f = g.param("p"), g.param("f", np.float32, default=1.0)
    kn = g.kernel(k, 1, 32, (p, f, np.int32(4)), name="use")
    g.memcpy(buf2, p, 64, name="copy", after=kn)
    if memset:
        g.memset(p, 0, count=4, element_size=4, name="fill")
    return g
"""


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake driver library")
    out = tmp_path_factory.mktemp("fake_cuda")
    src = ROOT / "bench" / "fake_driver" / "fake_libcuda.c"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out / "libcuda.so.1"), str(src), "-ldl"], check=True)
    return out


@pytest.fixture(params=["compiled", "python"])
def run(request: pytest.FixtureRequest, fake_driver: Path) -> object:
    import cudagraph

    env = dict(os.environ, CUDAGRAPH_FAKE_DRIVER=str(fake_driver), CUDAGRAPH_BUILTIN_KERNELS="ptx")
    library_path = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{fake_driver}:{library_path}" if library_path else str(fake_driver)
    env["PYTHONPATH"] = str(Path(cudagraph.__file__).resolve().parents[1])
    if request.param == "python":
        env["CUDAGRAPH_NO_C_ENTRY"] = "1"
    else:
        env.pop("CUDAGRAPH_NO_C_ENTRY", None)

    def go(code: str) -> list[str]:
        r = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", PRELUDE + code],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=fake_driver,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.splitlines()

    return go


def test_a_rebind_refused_by_a_node_part_way_leaves_the_executable_as_it_was(run: object) -> None:
    out = run(  # type: ignore[operator]
        r"""
for memset in (False, True):
    for call in ("bind p", "bind p f", "launch p", "launch p f"):
        exe = copy_graph(memset).instantiate(p=buf)
        before, calls = exe.bindings, exe.update_calls
        kw = {"p": 0, "f": 2.0} if call.endswith(" f") else {"p": 0}
        try:
            exe.bind(**kw) if call.startswith("bind") else exe.launch(s, **kw)
        except OperandError as e:
            print("refused", type(e).__name__, e)
        print("kept", exe.bindings == before, exe.update_calls == calls)
        print("same value costs", exe.bind(p=buf), "new value costs", exe.bind(p=buf2))
        print("bound", exe.bindings["p"] == int(buf2.handle), float(exe.bindings["f"]))
        exe.close()
"""
    )
    refusals = [line for line in out if line.startswith("refused")]
    assert len(refusals) == 8
    assert all("memcpy#1 'copy': src: 0x0 is not an address of device or host memory" in r for r in refusals)
    assert out.count("kept True True") == 8
    assert out.count("same value costs 0 new value costs 2") == 4  # the kernel and the copy
    assert out.count("same value costs 0 new value costs 3") == 4  # and the fill
    assert out.count("bound True 1.0") == 8


def test_a_launch_on_a_refused_stream_rebinds_nothing(run: object) -> None:
    out = run(  # type: ignore[operator]
        r"""
exe = copy_graph().instantiate(p=buf)
for stream in ("x", 1.5, object()):
    before, calls = exe.bindings, exe.update_calls
    try:
        exe.launch(stream, p=buf2, f=3.0)
    except OperandError as e:
        print("refused", str(e).split(":")[0])
    print("kept", exe.bindings == before, exe.update_calls == calls)
exe.launch(s, p=buf2, f=3.0)
print("then", exe.bindings["p"] == int(buf2.handle), float(exe.bindings["f"]), exe.update_calls)
"""
    )
    assert out == ["refused stream", "kept True True"] * 3 + ["then True 3.0 2"]


def test_update_after_an_in_place_removal_keeps_the_parameter_users(run: object) -> None:
    out = run(  # type: ignore[operator]
        r"""
def built():
    g = cg.Graph("rt")
    p = g.param("p")
    g.memset(buf, 0, count=4, element_size=4, name="first")
    g.memcpy(buf2, p, 64, name="copy")
    return g

g = built()
exe = g.instantiate(p=buf)
g.remove(g.nodes[0])  # the definition is edited in place: "copy" is now its node 0
print(exe.update(built()).mode)
print("bind", exe.bind(p=buf2), exe.bindings["p"] == int(buf2.handle))
print("again", exe.bind(p=buf2), exe.bind(p=buf))
"""
    )
    assert out == ["unchanged", "bind 1 True", "again 0 1"]


def test_update_in_place_after_removing_the_nodes_before_a_kernel(run: object) -> None:
    out = run(  # type: ignore[operator]
        r"""
for first in ("memset", "memcpy", "kernel"):
    g = cg.Graph("rt")
    if first == "memset":
        g.memset(buf, 0, count=4, element_size=4)
    elif first == "memcpy":
        g.memcpy(buf2, buf, 64)
    else:
        g.kernel(k, 2, 64, (buf, np.float32(1), np.int32(4)))
    g.kernel(k, 1, 32, (buf, np.float32(1), np.int32(4)), name="kept")
    exe = g.instantiate()
    g.remove(g.nodes[0])
    try:
        exe.update(g)
    except DefinitionError as e:
        print(first, "refused", "edited in place" in str(e))
    r = exe.update(g, reinstantiate_if_needed=True)
    print(first, r.mode, r.nodes_updated)
"""
    )
    assert out == [
        f"{first} {line}" for first in ("memset", "memcpy", "kernel") for line in ("refused True", "reinstantiated 1")
    ]


def test_a_kernel_or_event_without_a_handle_is_refused_naming_the_node(run: object) -> None:
    out = run(  # type: ignore[operator]
        r"""
class CUkernel:  # named like a handle, which the definition layer accepts by name
    pass

class CUevent:
    pass

def kernel_graph():
    g = cg.Graph("rt")
    g.empty()
    g.kernel(CUkernel(), 1, 32, (buf, np.float32(1), np.int32(4)), name="fake")
    return g

def event_graph():
    g = cg.Graph("rt")
    g.record(CUevent(), name="mark")
    return g

for make in (kernel_graph, event_graph):
    for how in ("instantiate", "capture", "run"):
        g = make()
        try:
            if how == "run":
                g.run(s)
            else:
                g.instantiate(backend="explicit" if how == "instantiate" else "capture").close()
            print("accepted")
        except OperandError as e:
            print(type(e).__name__, e)
"""
    )
    assert len(out) == 6, out
    for line in out[:3]:  # lowered, captured and run eagerly
        assert line.startswith("OperandError kernel#1 'fake': kernel: expected a cuda.core Kernel"), line
        assert "CUkernel (it has no handle)" in line
    for line in out[3:]:
        assert line.startswith("OperandError record#0 'mark': event: expected a cuda.core Event"), line
        assert "CUevent (it has no handle)" in line
