"""The executable cases of ``scripts/red_team.py --exec``: executables driven through the fake ``libcuda.so.1`` of
``bench/fake_driver`` (instantiate, launch, bind, update, node views, the cache, ``Graph.run``, close and use after
close), with the definition cases' hostile values and edits. See ``red_team.py``.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from red_team import Case, Hostile, HTuple

import cudagraph as cg
from cudagraph.errors import CudaGraphError

__all__ = ["DeviceObjects", "ExecCase", "relaunch_under_fake_driver"]


# --------------------------------------------------------------------------- executables (--exec)


class DeviceObjects:
    """What the executable cases run on under the fake driver: streams, a kernel ``inc(float*, float, int)`` and
    buffers (cuda.core objects over the fake ``libcuda.so.1``)."""

    def __init__(self) -> None:
        from cuda.core import Device, ObjectCode

        dev = Device(0)
        dev.set_current()
        self.s, self.s2 = dev.create_stream(), dev.create_stream()
        self.k = ObjectCode.from_cubin(b"\0" * 64).get_kernel("inc")
        self.buf, self.buf2 = dev.allocate(1 << 12, stream=self.s), dev.allocate(1 << 12, stream=self.s)
        self.small = dev.allocate(16, stream=self.s)
        self.dot = Path(tempfile.mkdtemp(prefix="cudagraph-red-team-")) / "exe.dot"


class CAI:
    """An object with ``__cuda_array_interface__`` (a device array of another library); ``bad`` gives a broken one."""

    def __init__(self, ptr: Any, nbytes: Any = 64, bad: bool = False) -> None:
        self._ptr, self._n, self._bad = ptr, nbytes, bad

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self._bad:
            return {"data": (self._ptr, "no"), "shape": (self._n, -1), "typestr": "<f9", "version": 3}
        return {"data": (self._ptr, False), "shape": (self._n,), "typestr": "|u1", "version": 3}


class BadStream:
    def __init__(self, answer: Any) -> None:
        self._answer = answer

    def __cuda_stream__(self) -> Any:
        return self._answer


def _noop(*args: Any) -> None:
    return None


ExecRecipe = list[tuple[int, int, int, int]]


class ExecCase(Case):
    """A graph of the kinds an executable updates (kernels with parameters, fills, copies, host callbacks,
    allocations, loops and branches, child graphs) instantiated under the fake driver, then random calls on its
    executables, the definition (the definition case's edits), the cache and closed executables."""

    def __init__(self, rng: random.Random, dev: DeviceObjects) -> None:
        super().__init__(rng)
        self.dev = dev
        self.recipe: ExecRecipe = [
            (rng.randrange(9), rng.randrange(2), rng.randrange(2), rng.randrange(2)) for _ in range(rng.randrange(1, 7))
        ]
        self.g = self.build(self.recipe, 0)
        self.host_fn = _noop  # (executable cases run their graphs: eagerly, the host nodes are called)
        self.exe: Any = None
        self.closed_exes: list[Any] = []
        self.views: list[Any] = []
        self.cache = cg.ExecutableCache(maxsize=2)
        self.violations: list[str] = []

    def build(self, recipe: ExecRecipe, scale: int) -> Any:
        d, g = self.dev, cg.Graph("red")
        p, f, n = g.param("p"), g.param("f", np.float32, default=1.0), g.param("n", np.int32, default=4)
        prev: Any = None
        for kind, x, y, chain in recipe:
            after = prev if chain else None
            ptr = p if x else d.buf
            if kind == 0:
                prev = g.kernel(d.k, 1 + scale, 32, (ptr, f if y else np.float32(2 + scale), n), after=after)
            elif kind == 1:
                prev = g.memset(ptr, scale, count=4, element_size=4, after=after)
            elif kind == 2:
                prev = g.memcpy(d.buf2, ptr, 64 + scale, after=after)
            elif kind == 3:
                prev = g.host(_noop, scale, after=after)
            elif kind == 4:
                a = g.alloc(256, after=after)
                prev = g.free(a, after=g.memset(a, scale, count=4, element_size=4, after=a))
            elif kind in (5, 6):
                c = g.condition(default=1 - scale if y else 1)
                prev = g.while_(c, after=after) if kind == 5 else g.if_(c, after=after)
                prev.body.memset(ptr, scale, count=4, element_size=4)
            elif kind == 7:
                child = cg.Graph("child")
                child.memset(d.buf, scale, count=4, element_size=4)
                prev = g.child(child, after=after)
            else:
                prev = g.kernel(d.k, 2, 32 + 32 * scale, (d.buf, np.float32(1), np.int32(4)), after=after)
        return g

    def pointer(self) -> Any:
        d, r = self.dev, self.rng
        return r.choice(
            [d.buf, d.buf2, d.small, d.buf.handle, 0x10000, 0, -1, None, 1.5, "x", CAI(0x20000), CAI(0, bad=True),
             np.zeros(4, np.float32), self.value(0x10000), HTuple(Hostile(self.g, "raise", 1), (d.buf,))]
        )  # fmt: skip

    def scalar(self, typical: Any) -> Any:
        r = self.rng
        return r.choice(
            [typical, 1.7, 255.9, 1e39, -(2**40), 2**40, math.nan, 1 + 2j, "x", None, np.float64(3), np.int64(5),
             np.array([1, 2]), np.array(3), True, self.value(typical)]
        )  # fmt: skip

    def params(self) -> dict[str, Any]:
        r, out = self.rng, {}
        for name in ("p", "f", "n"):
            if r.random() < 0.4:
                out[name] = self.pointer() if name == "p" else self.scalar(1.0 if name == "f" else 4)
        if r.random() < 0.05:
            out[r.choice(["q", "backend", "repeats"])] = 1
        return out

    def stream(self) -> Any:
        d, r = self.dev, self.rng
        return r.choice([d.s, d.s, d.s2, None, 0, "x", 1.5, BadStream((0, 0)), BadStream("x"), self.value(0)])

    def other_graph(self) -> Any:
        r = self.rng
        x = r.random()
        if x < 0.3:
            return self.build(self.recipe, 0)
        if x < 0.6:
            return self.build(self.recipe, 1)
        if x < 0.7:
            return self.build(self.recipe + [(r.randrange(9), 1, 1, 1)], 0)
        if x < 0.85:
            return self.g
        return r.choice([None, 1, "g", self.other, self.other_node, self.value(1)])

    def target(self) -> Any:
        """An open executable if there is one, else a closed one (or None)."""
        if self.exe is not None:
            return self.exe
        return self.closed_exes[-1] if self.closed_exes else None

    def op(self) -> tuple[str, Any]:
        r = self.rng
        choice = r.randrange(16)
        if choice <= 2:
            return super().op()  # an edit of the definition (its nodes, edges, render and validate)
        if choice == 3 or self.target() is None:

            def inst() -> None:
                kw = self.params()
                if r.random() < 0.2:
                    kw["backend"] = r.choice(["explicit", "capture", "other", self.value("explicit")])
                if r.random() < 0.2:
                    kw["upload_stream"] = self.stream()
                exe = self.g.instantiate(**kw)
                if self.exe is not None and r.random() < 0.5:
                    self.exe.close()
                    self.closed_exes.append(self.exe)
                self.exe = exe

            return "instantiate", inst
        if choice == 4:
            return "launch", lambda: self.guarded(lambda e: e.launch(self.stream(), **self.params()))
        if choice == 5:
            return "bind", lambda: self.guarded(lambda e: e.bind(**self.params()))
        if choice == 6:
            return "update", lambda: self.guarded(
                lambda e: e.update(self.other_graph(), reinstantiate_if_needed=r.random() < 0.5, **self.params())
            )
        if choice == 7:
            return "node view update", lambda: self.guarded(self.view_update)
        if choice == 8:
            return "node view toggle", lambda: self.guarded(self.view_toggle)
        if choice == 9:

            def close() -> None:
                if self.exe is not None:
                    self.exe.close()
                    self.closed_exes.append(self.exe)
                    self.exe = None

            return "close", close
        if choice == 10:
            return "cache get", lambda: self.cache.get(self.other_graph(), **self.params())
        if choice == 11:
            return "run", lambda: self.g.run(self.stream(), **self.params())
        if choice == 12:

            def misc() -> None:
                e = self.target()
                x = r.randrange(5)
                if x == 0:
                    e.upload(self.stream())
                elif x == 1:
                    e.check()
                elif x == 2:
                    e.debug_dot(self.dev.dot, verbose=r.random() < 0.5)
                elif x == 3:
                    repr(e), e.bindings, e.handle, e.graph_handle
                else:
                    e.driver_node(self.node())

            return "upload/check/dot/handles", lambda: self.guarded(lambda e: misc())
        return "use after close", self.after_close

    def view_update(self, e: Any) -> None:
        r, d = self.rng, self.dev
        node = self.node() if r.random() < 0.9 else r.choice([None, 3, "x"])
        view = e[node]
        self.views.append(view)
        kind = getattr(node, "kind", "")
        if kind == "kernel":
            key = r.choice(["grid", "block", "args", "shared_mem", "cluster"])
            val = {
                "grid": self.value(2),
                "block": self.value(64),
                "args": r.choice(
                    [(d.buf, np.float32(1), np.int32(2)), (self.pointer(), self.scalar(1.0), self.scalar(4)), (d.buf,)]
                ),
                "shared_mem": self.value(0),
                "cluster": self.value(1),
            }[key]
            view.update(**{key: val})
        elif kind == "memset":
            view.update(**{r.choice(["value", "count", "dst"]): r.choice([self.value(1), self.pointer()])})
        elif kind == "memcpy":
            view.update(**{r.choice(["nbytes", "src", "dst"]): r.choice([self.value(32), self.pointer()])})
        elif kind == "host":
            view.update(args=self.value((1,)))
        elif kind == "child":
            view.update(graph=r.choice([self.build([(1, 0, 0, 0)], 1), self.other, None]))
        else:
            view.update(**{r.choice(["value", "grid", "x"]): self.value(1)})

    def view_toggle(self, e: Any) -> None:
        view = e[self.node()]
        self.views.append(view)
        x = self.rng.randrange(3)
        if x == 0:
            view.disable()
        elif x == 1:
            view.enable()
        else:
            view.is_enabled  # noqa: B018 - the read is the call

    def guarded(self, call: Any) -> None:
        """``call(exe)``; when it raises, the executable must be as it was (graph, bindings, closed or not)."""
        e = self.target()
        before = (e.graph, dict(e._bindings), e.closed)
        try:
            call(e)
        except BaseException:
            after = (e.graph, dict(e._bindings), e.closed)
            if after[0] is not before[0] or after[2] != before[2]:
                self.violations.append("a refused call changed the executable's graph or closed it")
            elif after[1].keys() != before[1].keys() or any(after[1][k] is not v for k, v in before[1].items()):
                changed = sorted(k for k, v in before[1].items() if after[1].get(k) is not v)
                self.violations.append(f"a refused call changed the executable's bindings {changed}")
            raise

    def after_close(self) -> None:
        """Every call on a closed executable (and a node view made before the close) raises ExecutableClosedError."""
        if not self.closed_exes:
            return
        r = self.rng
        e = r.choice(self.closed_exes)
        views = [v for v in self.views if v.executable is e]
        calls = {
            "launch": lambda: e.launch(self.dev.s),
            "launch with params": lambda: e.launch(self.dev.s, p=self.dev.buf),
            "bind": lambda: e.bind(f=2.0),
            "update": lambda: e.update(e.graph),
            "exe[node]": lambda: e[e.graph.nodes[0]] if e.graph.nodes else e.handle,
            "upload": lambda: e.upload(self.dev.s),
            "handle": lambda: e.handle,
            "graph_handle": lambda: e.graph_handle,
            "view update": lambda: views[-1].update(grid=2) if views else e.handle,
            "view disable": lambda: views[-1].disable() if views else e.handle,
        }
        name = r.choice(sorted(calls))
        try:
            calls[name]()
        except cg.errors.ExecutableClosedError:
            return
        except CudaGraphError as exc:  # (a view of a node that cannot be toggled may say so first)
            if "closed" not in str(exc) and not name.startswith("view"):
                self.violations.append(f"{name} of a closed executable raised {type(exc).__name__}, not closed")
            return
        self.violations.append(f"{name} of a closed executable did not raise")
        e.close()

    def check(self) -> None:
        super().check()
        if self.violations:
            raise AssertionError(self.violations.pop(0))

    def finish(self) -> None:
        for e in (self.exe, *self.closed_exes):
            if e is not None:
                e.close()
        self.cache.clear()


def relaunch_under_fake_driver() -> None:
    """Build the fake ``libcuda.so.1`` and run this script again with it first on the library path (as
    ``bench/_common.py`` does); the predicate kernels are read from the shipped PTX (the fake driver has no
    NVRTC to go with it)."""
    out = Path(tempfile.mkdtemp(prefix="cudagraph-fake-cuda-"))
    src = Path(__file__).resolve().parents[1] / "bench" / "fake_driver" / "fake_libcuda.c"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out / "libcuda.so.1"), str(src), "-ldl"], check=True)
    env = dict(os.environ, CUDAGRAPH_FAKE_DRIVER=str(out), CUDAGRAPH_BUILTIN_KERNELS="ptx")
    env["LD_LIBRARY_PATH"] = f"{out}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else str(out)
    os.execve(sys.executable, [sys.executable, *sys.argv], env)
