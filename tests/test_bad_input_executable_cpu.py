"""The executable layer given hostile values, on the CPU: under a fake ``libcuda.so.1`` (``bench/fake_driver``).

``g.instantiate()``, ``exe.bind``, ``exe.launch``, ``exe[node]``, ``exe.update``, ``g.run``, the node views,
the cache and stream launches (``cg.launch``, ``cg.memcpy``, ``cg.memset``) run for real over a driver whose
calls do nothing, in a fresh interpreter (the Python twins where ``CUDAGRAPH_NO_C_ENTRY`` is set). Each call
gets values of the wrong type, out of range, of no truth value, huge, of another graph, and an object whose
conversions raise; it must succeed or raise a :class:`~cudagraph.errors.CudaGraphError` (the hostile object's
own exception may pass through). A sweep like this one found a float parameter bound to ``(1.0,)`` reaching
``struct.pack``.
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

SWEEP = r"""
import numpy as np
from cuda.core import Device, LaunchConfig, ObjectCode
import cudagraph as cg
from cudagraph.errors import CudaGraphError

dev = Device(0)
dev.set_current()
s = dev.create_stream()
k = ObjectCode.from_cubin(b"\0" * 64).get_kernel("inc")
buf = dev.allocate(1 << 12, stream=s)
cfg = LaunchConfig(grid=1, block=32)


class Hostile:
    def __index__(self):
        raise RuntimeError("hostile __index__")

    def __bool__(self):
        raise RuntimeError("hostile __bool__")

    def __len__(self):
        raise RuntimeError("hostile __len__")

    def __iter__(self):
        raise RuntimeError("hostile __iter__")


VALUES = [None, "x", 1.5, -1, 0, 2**70, [], (), {}, object(), np.float64(1), np.array([1, 2]), np.array(3),
          b"\0", [1, None], (None,), float("nan"), True, Hostile(), cg.Graph("other").empty(), buf]


def made():
    g = cg.Graph("e")
    p, f = g.param("p"), g.param("f", np.float32, default=1.0)
    kn = g.kernel(k, 1, 32, (p, f, np.int32(4)))
    ms = g.memset(buf, 1, count=4, element_size=4, after=kn)
    return g, g.instantiate(p=buf), kn, ms


CALLS = {
    "bind pointer": lambda g, exe, kn, ms, v: exe.bind(p=v),
    "bind scalar": lambda g, exe, kn, ms, v: exe.bind(f=v),
    "bind both": lambda g, exe, kn, ms, v: exe.bind(p=v, f=v),
    "bind unknown": lambda g, exe, kn, ms, v: exe.bind(q=v),
    "launch stream": lambda g, exe, kn, ms, v: exe.launch(v),
    "launch pointer": lambda g, exe, kn, ms, v: exe.launch(s, p=v),
    "launch both": lambda g, exe, kn, ms, v: exe.launch(s, p=v, f=v),
    "update": lambda g, exe, kn, ms, v: exe.update(v),
    "exe[node]": lambda g, exe, kn, ms, v: exe[v],
    "driver_node": lambda g, exe, kn, ms, v: exe.driver_node(v),
    "node update args": lambda g, exe, kn, ms, v: exe[kn].update(args=v),
    "node update grid": lambda g, exe, kn, ms, v: exe[kn].update(grid=v),
    "node update value": lambda g, exe, kn, ms, v: exe[ms].update(value=v),
    "upload": lambda g, exe, kn, ms, v: exe.upload(v),
    "instantiate pointer": lambda g, exe, kn, ms, v: g.instantiate(p=v).close(),
    "instantiate flag": lambda g, exe, kn, ms, v: g.instantiate(p=buf, auto_free_on_launch=v).close(),
    "instantiate upload_stream": lambda g, exe, kn, ms, v: g.instantiate(p=buf, upload_stream=v).close(),
    "run stream": lambda g, exe, kn, ms, v: g.run(v, p=buf),
    "run pointer": lambda g, exe, kn, ms, v: g.run(s, p=v),
    "cg.launch stream": lambda g, exe, kn, ms, v: cg.launch(v, cfg, k, buf, np.float32(1), np.int32(4)),
    "cg.launch config": lambda g, exe, kn, ms, v: cg.launch(s, v, k, buf, np.float32(1), np.int32(4)),
    "cg.launch argument": lambda g, exe, kn, ms, v: cg.launch(s, cfg, k, buf, v, np.int32(4)),
    "cg.memcpy nbytes": lambda g, exe, kn, ms, v: cg.memcpy(s, buf, buf, v),
    "cg.memset value": lambda g, exe, kn, ms, v: cg.memset(s, buf, v, 4),
    "cache get graph": lambda g, exe, kn, ms, v: cg.ExecutableCache().get(v),
    "cache get pointer": lambda g, exe, kn, ms, v: cg.ExecutableCache().get(g, p=v),
}

for name, call in CALLS.items():
    for v in VALUES:
        g, exe, kn, ms = made()
        try:
            call(g, exe, kn, ms, v)
        except CudaGraphError:
            pass
        except Exception as exc:
            if not (isinstance(exc, RuntimeError) and str(exc).startswith("hostile ")):
                print(f"LEAK {name} {v!r:.30}: {type(exc).__name__}: {exc}")
        finally:
            exe.close()
print(f"swept {len(CALLS)} calls x {len(VALUES)} values")
"""


def test_hostile_values_at_the_executable_layer_get_a_typed_error_or_a_result(tmp_path: Path) -> None:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake driver library")
    src = ROOT / "bench" / "fake_driver" / "fake_libcuda.c"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(tmp_path / "libcuda.so.1"), str(src), "-ldl"], check=True)
    import cudagraph

    env = dict(os.environ, CUDAGRAPH_FAKE_DRIVER=str(tmp_path))
    env["LD_LIBRARY_PATH"] = f"{tmp_path}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else str(tmp_path)
    env["PYTHONPATH"] = str(Path(cudagraph.__file__).resolve().parents[1])  # the cudagraph these tests import
    r = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", SWEEP],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "swept 26 calls x 21 values" in r.stdout, r.stdout + r.stderr
    leaks = [line for line in r.stdout.splitlines() if line.startswith("LEAK")]
    assert not leaks, "\n".join(leaks)
