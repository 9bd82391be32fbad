"""The definition layer imports no CUDA module (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

SCRIPT = textwrap.dedent(
    """
    import json
    import sys

    attempts = []


    class Watch:
        # Records every attempt to import a module named cuda or cuda.*, even one that is caught.
        def find_spec(self, name, path=None, target=None):
            if name == "cuda" or name.startswith("cuda."):
                attempts.append(name)
            return None


    sys.meta_path.insert(0, Watch())

    import numpy as np

    import cudagraph as cg


    class CUkernel:
        pass


    class CUevent:
        pass


    class Buffer:
        def __init__(self, handle, size):
            self.handle, self.size, self.memory_resource = handle, size, object()


    g = cg.Graph("no_cuda")
    x = g.param("x")
    n = g.param("n", np.int32)
    z = g.memset(x, 0, count=256, element_size=4)
    k = g.kernel(CUkernel(), 4, 64, (x, n, np.float32(2.0)), after=z)
    c = g.memcpy(np.zeros(256, np.float32), Buffer(0x1000, 1024), after=k)
    h = g.host(print, "done", after=c)
    ev = CUevent()
    r = g.record(ev, after=k)
    w = g.wait(ev, after=r)
    body = cg.Graph("body")
    body.empty()
    ch = g.child(body, after=w)
    j = g.join(h, ch)
    with g.path(after=j) as p:
        p.empty()
        p.memset(x, 1, 16)
    late = g.empty()
    g.add_edge(late, z)
    try:
        g.add_edge(j, z)
    except cg.errors.CycleError:
        pass
    g.validate()
    order = g.topological_order()
    text = g.summary() + g.to_dot() + g.to_mermaid() + repr(g) + "".join(repr(v) for v in g.nodes)
    x.coerce(0x2000)
    n.coerce(3)
    cuda = sorted(m for m in sys.modules if m == "cuda" or m.startswith("cuda."))
    print(json.dumps({
        "cuda_modules": cuda,
        "attempts": attempts,
        "nodes": len(g),
        "order_first": order[0].index,
        "text_len": len(text),
        "cudagraph_loaded": sorted(m for m in sys.modules if m == "cudagraph" or m.startswith("cudagraph.")),
    }))
    """
)


def test_definition_layer_imports_no_cuda_module():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["cuda_modules"] == []
    assert out["attempts"] == []
    assert out["nodes"] == 11
    assert out["order_first"] == 10  # the node added last, then made a predecessor of the first
    assert out["text_len"] > 0
    assert "cudagraph.definition.graph" in out["cudagraph_loaded"]
    assert not any(m.startswith("cudagraph.driver") for m in out["cudagraph_loaded"])


def test_watch_detects_a_cuda_import():
    """The import watch of the script above does see an attempt to import ``cuda`` (even a failed one)."""
    probe = SCRIPT.split("import numpy as np")[0] + textwrap.dedent(
        """
        try:
            import cuda.bindings.driver  # noqa: F401
        except ImportError:
            pass
        print(json.dumps(attempts))
        """
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    attempts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert attempts and attempts[0] == "cuda"


def test_dir_lists_every_public_name_loaded_or_not():
    """``dir(cudagraph)`` lists the lazily loaded names (Executable, lift, ...) before their first use."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, cudagraph as cg; print(json.dumps([sorted(cg.__all__), dir(cg), "
            "sorted(m for m in sys.modules if m.startswith(('cuda.', 'cudagraph.executable.executable', "
            "'cudagraph.materialize')))]))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])},
    )
    assert proc.returncode == 0, proc.stderr
    public, listed, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [n for n in public if n not in listed] == []
    assert {"Executable", "lift", "CaptureRegion", "trim_graph_memory"} <= set(listed)
    assert loaded == []  # listing them loaded neither the driver nor the layers that use it
