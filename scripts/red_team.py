"""Red team on the CPU: random public-API sequences with hostile values, for a while (GPU-free).

Each case builds a small graph, then makes random calls of the builders, ``node.update``, edge edits,
``remove``, ``validate``, ``to_dot`` and ``summary`` with arguments drawn from plain values and hostile ones:
objects whose dunders raise, edit the graph mid-call (remove or add a node), or give huge, negative or NaN
values; nodes of other graphs and removed nodes. After each call the graph must be consistent (indices are
positions, edges on both ends, the edge count right) and ``validate()`` must pass or raise a typed error.
In the executable cases, a hostile value's own exception passed through unchanged (which the executable layer
allows, see tests/test_bad_input_executable_cpu.py) is counted apart from the raw families.

With ``--exec``, a share of the cases (``--exec-share``) also drive executables through the fake
``libcuda.so.1`` of ``bench/fake_driver`` (built with the system C compiler; the script runs itself again with it
on the library path): ``instantiate``, ``launch``, ``bind``, ``update`` (identical, changed, edited in place,
of another topology, of no graph), node views (``exe[node].update``, ``disable``, ``is_enabled``), the cache,
``Graph.run``, ``close`` and every call again after ``close`` (which must raise ``ExecutableClosedError``). A
refused call must leave the executable as it was: its graph, its bindings and whether it is closed.

Counts: cases, calls, raw families (an exception not derived from ``CudaGraphError``, keyed by its type and
the innermost ``cudagraph`` frame) with the shortest call that raised each, and broken invariants.

With ``--access``, a share of the cases (``--access-share``) are access cases (``red_team_access.py``): graphs with
declared accesses built with ``edges="auto"`` and by hand, hostile memory, edits in place, ``races()`` checked
against a brute force; a refused call there must leave the graph as it was (nodes, edges, declarations).

Usage: python scripts/red_team.py [--seconds N] [--seed S] [--json PATH] [--exec [--exec-share F]]
                                  [--access [--access-share F]]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
import traceback
from typing import Any

import cudagraph as cg
from cudagraph.errors import CudaGraphError

sys.modules.setdefault("red_team", sys.modules[__name__])  # (red_team_exec imports this module, run as a script)


class CUkernel:  # recognised as a kernel handle by type name
    pass


class CUevent:  # recognised as an event handle by type name
    pass


K = CUkernel()
EV = CUevent()


class Hostile:
    """Every dunder runs ``mode`` on the target graph: raise, remove a node, add a node; then gives ``value``."""

    def __init__(self, graph: Any, mode: str, value: Any) -> None:
        self._g = graph
        self._mode = mode
        self._value = value

    def _act(self) -> Any:
        g, mode = self._g, self._mode
        if mode == "raise":
            raise RuntimeError("hostile")
        if mode == "remove" and g.nodes:
            try:
                g.remove(g.nodes[-1])
            except CudaGraphError:
                pass
        elif mode == "add":
            g.empty(name="intruder")
        return self._value

    def __index__(self) -> int:
        v = self._act()
        return v if isinstance(v, int) else 1

    def __int__(self) -> int:
        return self.__index__()

    def __float__(self) -> float:
        v = self._act()
        return float(v) if isinstance(v, (int, float)) else math.nan

    def __len__(self) -> int:
        self._act()
        return 1

    def __iter__(self) -> Any:
        self._act()
        return iter([self._value])

    def __bool__(self) -> bool:
        self._act()
        return True

    def __eq__(self, other: object) -> bool:
        self._act()
        return False

    def __hash__(self) -> int:
        self._act()
        return 7

    def __repr__(self) -> str:
        return f"Hostile({self._mode!r}, {self._value!r})"


class HInt(int):
    """An int whose comparisons and conversions run a hostile mode."""

    h: Hostile

    def __new__(cls, h: Hostile, value: int) -> HInt:
        self = super().__new__(cls, value)
        self.h = h
        return self

    def _v(self) -> int:
        self.h._act()
        return int.__int__(self)

    __index__ = _v
    __int__ = _v

    def __lt__(self, o: Any) -> bool:
        return self._v() < o

    def __le__(self, o: Any) -> bool:
        return self._v() <= o

    def __gt__(self, o: Any) -> bool:
        return self._v() > o

    def __ge__(self, o: Any) -> bool:
        return self._v() >= o

    def __eq__(self, o: object) -> bool:
        return self._v() == o

    def __hash__(self) -> int:
        return hash(self._v())

    def __repr__(self) -> str:
        return f"HInt({self.h._mode!r}, {int.__repr__(self)})"


class HTuple(tuple):  # type: ignore[type-arg]
    h: Hostile

    def __new__(cls, h: Hostile, items: tuple[Any, ...]) -> HTuple:
        self = super().__new__(cls, items)
        self.h = h
        return self

    def __len__(self) -> int:
        self.h._act()
        return tuple.__len__(self)

    def __iter__(self) -> Any:
        self.h._act()
        return tuple.__iter__(self)

    def __repr__(self) -> str:
        return f"HTuple({self.h._mode!r}, {tuple.__repr__(self)})"


MODES = ("raise", "remove", "add", "plain")
PLAIN = [0, 1, 2, 4, 32, 256, 1024, -1, 2**31, 2**63, 2**64, -(2**70), None, 1.5, math.nan, "x", True, (), (1, 2)]


class Case:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.g = cg.Graph("red")
        self.other = cg.Graph("other")
        self.other_node = self.other.empty()
        self.removed: list[Any] = []
        self.log: list[str] = []
        self.host_fn: Any = print

    def value(self, typical: Any) -> Any:
        r = self.rng
        x = r.random()
        if x < 0.4:
            return typical
        if x < 0.6:
            return r.choice(PLAIN)
        mode = r.choice(MODES)
        h = Hostile(self.g, mode, typical if not isinstance(typical, tuple) else 1)
        kind = r.randrange(3)
        if kind == 0:
            return h
        if kind == 1 and isinstance(typical, int) and not isinstance(typical, bool):
            return HInt(h, typical)
        return HTuple(h, typical if isinstance(typical, tuple) else (typical,))

    def node(self) -> Any:
        r = self.rng
        x = r.random()
        if x < 0.1:
            return self.other_node
        if x < 0.15 and self.removed:
            return r.choice(self.removed)
        nodes = self.g.nodes
        return r.choice(nodes) if nodes else None

    def after(self) -> Any:
        r = self.rng
        x = r.random()
        if x < 0.3:
            return None
        if x < 0.7:
            return self.node()
        picks = [self.node() for _ in range(r.randrange(3))]
        if x < 0.85:
            return picks
        return HTuple(Hostile(self.g, r.choice(MODES), None), tuple(picks))

    def op(self) -> tuple[str, Any]:
        r, g, v, a = self.rng, self.g, self.value, self.after
        ptr = 0x10000
        choice = r.randrange(16)
        if choice == 0:
            kw: dict[str, Any] = {}
            for key, typ in (("cluster", 1), ("priority", 2), ("shared_mem", 50000), ("device", 0)):
                if r.random() < 0.3:
                    kw[key] = v(typ)
            if r.random() < 0.2:
                kw["attributes"] = {r.choice(["preferred_shared_memory_carveout", "mem_sync_domain"]): v(1)}
            if r.random() < 0.15:
                kw["attributes"] = {"access_policy_window": (ptr, v(256), v(0.5), 1, 0)}
            if r.random() < 0.15:
                kw["programmatic"] = r.choice([True, self.node(), [self.node()]])
            if r.random() < 0.1:
                kw["cooperative"] = v(1)
            args = (ptr, v(3)) if r.random() < 0.3 else (ptr,)
            return "kernel", lambda: g.kernel(K, v(2), v(32), args, after=a(), **kw)
        if choice == 1:
            return "memset", lambda: g.memset(ptr, v(0), count=v(16), element_size=v(4), after=a())
        if choice == 2:
            return "memcpy", lambda: g.memcpy(ptr, ptr + 4096, v(64), after=a())
        if choice == 3:
            return "memcpy2d", lambda: g.memcpy2d(ptr, v(64), ptr + 8192, v(64), v(32), v(2), after=a())
        if choice == 4:
            return "memcpy3d", lambda: g.memcpy3d(ptr, ptr + 65536, v(8), v(2), v(2), after=a())
        if choice == 5:
            return "alloc", lambda: g.alloc(v(1 << 20), after=a())
        if choice == 6:
            return (
                "write/wait_value",
                lambda: (
                    g.write_value(ptr, v(5), bits=v(32), after=a())
                    if r.random() < 0.5
                    else g.wait_value(ptr, v(5), after=a())
                ),
            )
        if choice == 7:
            return (
                "empty/join",
                lambda: g.empty(after=a()) if r.random() < 0.5 else g.join(*(n for n in [self.node()] if n)),
            )
        if choice == 8:
            return (
                "host/record",
                lambda: g.host(self.host_fn, v(1), after=a()) if r.random() < 0.5 else g.record(EV, after=a()),
            )
        if choice == 9:
            return "switch", lambda: g.switch(g.condition(), v(2), after=a())
        if choice == 10:
            return "add_edge", lambda: g.add_edge(self.node(), self.node())  # type: ignore[arg-type]
        if choice == 11:
            return "remove_edge", lambda: g.remove_edge(self.node(), self.node())  # type: ignore[arg-type]
        if choice == 12:

            def rm() -> None:
                n = self.node()
                g.remove(n)
                self.removed.append(n)

            return "remove", rm
        if choice == 13:

            def upd() -> None:
                n = self.node()
                if n is None:
                    return
                if n.kind == "kernel":
                    key = r.choice(["grid", "block", "cluster", "priority", "shared_mem"])
                    n.update(**{key: v({"grid": 2, "block": 32, "cluster": 1, "priority": 1, "shared_mem": 0}[key])})
                elif n.kind == "memset":
                    n.update(value=v(1))
                elif n.kind == "memcpy":
                    n.update(nbytes=v(32))

            return "update", upd
        if choice == 14:
            return "validate", lambda: g.validate()
        return "render", lambda: (g.to_dot(), g.summary())

    def check(self) -> None:
        for g in (self.g, self.other):
            nodes = g.nodes
            assert [n.index for n in nodes] == list(range(len(nodes))), "index != position"
            assert all(n.graph is g for n in nodes), "node of another graph"
            npreds = 0
            for n in nodes:
                npreds += len(n.predecessors)
                for p in n.predecessors:
                    assert p.graph is g, "predecessor of another graph"
                    assert sum(s is n for s in p.successors) == 1, "edge on one end only"
            assert g.num_edges == npreds, "edge count"


def _hostile_own(e: BaseException) -> bool:
    """Whether ``e`` is a hostile value's own exception (``Hostile._act``), passed through unchanged."""
    frames = traceback.extract_tb(e.__traceback__)
    return type(e) is RuntimeError and str(e) == "hostile" and bool(frames) and frames[-1].name == "_act"


def _where(tb: Any) -> str:
    frames = [f for f in traceback.extract_tb(tb) if "/cudagraph/" in f.filename]
    if not frames:
        return "<outside cudagraph>"
    f = frames[-1]
    return f"{f.filename.split('/cudagraph/')[-1]}:{f.lineno} {f.name}"


def replay(seed: int, dev: Any, steps: int, access: bool = False) -> None:
    """Run the case of ``seed`` (an executable case when ``dev`` is given), printing each call and what it raised."""
    from red_team_access import AccessCase
    from red_team_exec import ExecCase

    c: Any
    if access:
        c = AccessCase(random.Random(seed), dev)
    else:
        c = ExecCase(random.Random(seed), dev) if dev is not None else Case(random.Random(seed))
    for step in range(steps):
        label, fn = c.op()
        before = c.snapshot() if access else None
        try:
            c.mutated = False
            fn()
            print(f"{step} {label}: ok")
        except Exception as e:
            print(f"{step} {label}: {type(e).__name__}: {e}")
            if not isinstance(e, CudaGraphError):
                traceback.print_exc()
            if access:
                c.check_refused(before)
        try:
            c.check()
        except AssertionError as e:
            print(f"{step} broken: {e}")
            break


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--json", default=None)
    ap.add_argument("--exec", action="store_true", help="also drive executables through the fake driver")
    ap.add_argument("--exec-share", type=float, default=0.5, help="the share of the cases that are executable cases")
    ap.add_argument("--replay", type=int, default=None, help="run the case of this seed, printing every call")
    ap.add_argument("--access", action="store_true", help="also run access cases (declared accesses, auto edges)")
    ap.add_argument("--access-share", type=float, default=0.5, help="the share of the cases that are access cases")
    ns = ap.parse_args()
    dev = None
    from red_team_access import AccessCase
    from red_team_exec import DeviceObjects, ExecCase, relaunch_under_fake_driver

    if ns.exec:
        if not os.environ.get("CUDAGRAPH_FAKE_DRIVER"):
            relaunch_under_fake_driver()
        dev = DeviceObjects()
    if ns.replay is not None:
        replay(ns.replay, dev, ns.steps, ns.access)
        return 0
    rng = random.Random(ns.seed)
    end = time.monotonic() + ns.seconds
    cases = calls = exec_cases = exec_calls = access_cases = 0
    raw: dict[str, dict[str, Any]] = {}
    passed: dict[str, dict[str, Any]] = {}
    broken: dict[str, dict[str, Any]] = {}
    while time.monotonic() < end:
        case_seed = rng.randrange(1 << 62)
        is_access = ns.access and rng.random() < ns.access_share
        is_exec = dev is not None and rng.random() < ns.exec_share and not is_access
        case_rng = random.Random(case_seed)
        cases += 1
        exec_cases += is_exec
        access_cases += is_access
        c: Any
        try:
            if is_access:
                c = AccessCase(case_rng, dev)
            else:
                c = ExecCase(case_rng, dev) if is_exec and dev is not None else Case(case_rng)
        except Exception as e:  # (the definition an executable case starts from is built from valid values)
            fam = broken.setdefault(f"{type(e).__name__}: {e} @ {_where(e.__traceback__)}", {"count": 0})
            fam["count"] += 1
            fam.setdefault("example", {"op": "build", "seed": case_seed, "exec": is_exec})
            continue
        for step in range(ns.steps):
            label, fn = c.op()
            calls += 1
            exec_calls += is_exec
            before = c.snapshot() if is_access else None
            try:
                c.mutated = False
                fn()
            except CudaGraphError:
                if is_access:
                    c.check_refused(before)
            except RecursionError:
                raise
            except Exception as e:
                if is_access:
                    c.check_refused(before)
                key = f"{type(e).__name__} @ {_where(e.__traceback__)}"
                fam = (passed if is_exec and _hostile_own(e) else raw).setdefault(key, {"count": 0, "example": None})
                fam["count"] += 1
                if fam["example"] is None:
                    fam["example"] = {
                        "op": label, "seed": case_seed, "exec": is_exec, "access": is_access, "step": step,
                        "message": str(e)[:300],
                    }  # fmt: skip
            try:
                c.check()
                try:
                    c.g.validate()
                except CudaGraphError:
                    pass
            except Exception as e:
                key = f"{type(e).__name__}: {e} @ {_where(e.__traceback__)}"
                fam = broken.setdefault(key, {"count": 0, "example": None})
                fam["count"] += 1
                if fam["example"] is None:
                    fam["example"] = {
                        "op": label,
                        "seed": case_seed,
                        "exec": is_exec,
                        "access": is_access,
                        "step": step,
                    }
                break
        if isinstance(c, ExecCase):
            try:
                c.finish()
            except Exception as e:
                fam = broken.setdefault(f"close: {type(e).__name__}: {e} @ {_where(e.__traceback__)}", {"count": 0})
                fam["count"] += 1
                fam.setdefault("example", {"op": "finish", "seed": case_seed, "exec": is_exec})
    report = {
        "cases": cases,
        "calls": calls,
        "exec_cases": exec_cases,
        "exec_calls": exec_calls,
        "access_cases": access_cases,
        "raw_families": raw,
        "hostile_passed_through": passed,
        "broken_invariants": broken,
    }
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if ns.json:
        with open(ns.json, "w") as f:
            f.write(text)
    return 1 if raw or broken else 0


if __name__ == "__main__":
    sys.exit(main())
