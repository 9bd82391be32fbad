"""The access cases of ``scripts/red_team.py --access``: graphs with declared accesses, built with ``edges="auto"``
(and by hand), attacked with hostile memory and edits (GPU-free; with ``--exec`` also instantiated and launched
under the fake driver). See ``red_team.py``.

Each case declares accesses of every accepted kind (int addresses with ``nbytes``, numpy arrays and slices,
objects with ``__cuda_array_interface__``, ``Buffer``-like objects, DLPack-only objects, pointer ``Param``\\ s,
graph allocations and their offsets, opaque objects in ``reads=`` / ``writes=``), with hostile ones mixed in
(dunders and properties that raise, give negative, huge or NaN values, or edit the graph mid-call), on kernels,
host nodes, copies, fills, child graphs and conditional bodies, with in-place edits between them. Invariants
checked after every call:

- a refused call leaves the graph as it was (nodes, edges, declarations), unless a hostile value edited it;
- ``races()`` equals a brute-force check written here (every conflicting pair with no path between them);
- in an auto graph that no edit touched, every conflicting pair is ordered (``races()`` is empty), and each
  edge of a node given no ``after=`` joins two conflicting nodes and no other path implies it;
- ``summary()``, ``to_dot()``, ``to_mermaid()`` and ``validate(races=True)`` pass or raise a typed error.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
from red_team import EV, HInt, Hostile, HTuple, K

import cudagraph as cg
from cudagraph.definition.access import WRITE, node_regions
from cudagraph.errors import CudaGraphError

__all__ = ["AccessCase"]

BASE = 0x100000
JUNK = [None, -1, -(2**70), 2**64, 2**64 - 1, 1.5, math.nan, "x", True, (), [], {}, object(), EV]


class Mutating(Hostile):
    """A :class:`Hostile` that tells its case when it edited the graph (a refused call may then differ)."""

    def __init__(self, case: AccessCase, mode: str, value: Any) -> None:
        super().__init__(case.g, mode, value)
        self._case = case

    def _act(self) -> Any:
        if self._mode in ("remove", "add"):
            self._case.mutated = True
        return super()._act()


class CAI:
    """Device memory of another library: ``__cuda_array_interface__`` (``how`` makes it hostile)."""

    def __init__(self, case: AccessCase, ptr: Any, n: Any, how: str = "plain") -> None:
        self._c, self._ptr, self._n, self._how = case, ptr, n, how

    @property
    def __cuda_array_interface__(self) -> Any:
        how = self._how
        if how == "raise":
            raise RuntimeError("hostile cai")
        if how in ("remove", "add"):
            Mutating(self._c, how, 0)._act()
        if how == "junk":
            return self._c.rng.choice([None, 3, {"data": None}, {"data": (self._ptr,)}, {"data": (math.nan, False)}])
        return {"data": (self._ptr, False), "shape": (self._n,), "typestr": "|u1", "version": 3}

    def __repr__(self) -> str:
        return f"CAI({self._ptr!r}, {self._n!r}, {self._how!r})"


class FakeBuffer:
    """A ``cuda.core`` ``Buffer`` look-alike (``handle``, ``size``, ``memory_resource``)."""

    memory_resource = None

    def __init__(self, case: AccessCase, ptr: Any, size: Any, how: str = "plain") -> None:
        self._c, self._ptr, self._size, self._how = case, ptr, size, how

    @property
    def handle(self) -> Any:
        if self._how == "raise":
            raise RuntimeError("hostile handle")
        if self._how in ("remove", "add"):
            Mutating(self._c, self._how, 0)._act()
        return self._ptr

    @property
    def size(self) -> Any:
        return self._size

    def __repr__(self) -> str:
        return f"FakeBuffer({self._ptr!r}, {self._size!r}, {self._how!r})"


class DLOnly:
    """An object with DLPack only (compared by identity); ``bad`` makes ``__dlpack__`` raise."""

    def __init__(self, bad: bool = False) -> None:
        self._bad = bad

    def __dlpack__(self, *a: Any, **k: Any) -> Any:
        if self._bad:
            raise RuntimeError("hostile dlpack")
        raise NotImplementedError

    def __dlpack_device__(self) -> Any:
        if self._bad:
            raise RuntimeError("hostile dlpack")
        return (2, 0)


class NBytes:
    """An object with ``nbytes`` and ``__index__`` that may raise or give junk."""

    def __init__(self, value: Any) -> None:
        self._v = value

    @property
    def nbytes(self) -> Any:
        if self._v == "raise":
            raise RuntimeError("hostile nbytes")
        return self._v

    def __index__(self) -> int:
        if self._v == "raise":
            raise RuntimeError("hostile index")
        return self._v if isinstance(self._v, int) else 7

    def __len__(self) -> int:
        if self._v == "raise":
            raise RuntimeError("hostile len")
        return self._v if isinstance(self._v, int) and self._v >= 0 else 0


class AccessCase:
    """A graph with declared accesses (auto edges with ``auto``), then random builders, edits and checks."""

    def __init__(self, rng: random.Random, dev: Any = None) -> None:
        self.rng = rng
        self.dev = dev
        self.auto = rng.random() < 0.8
        self.g = cg.Graph("red", edges="auto" if self.auto else "manual")
        self.other = cg.Graph("other", edges="auto")
        self.other_node = self.other.empty()
        self.p, self.q = self.g.param("p"), self.g.param("q")
        self.s = self.g.param("s", np.int32, default=1)
        self.arrays = [np.zeros(256, np.uint8), np.zeros(64, np.float32)]
        self.allocs: list[Any] = []
        self.removed: list[Any] = []
        self.edited = False  # an edit in place (or a hostile one): the auto invariant no longer holds
        self.mutated = False  # a hostile value edited the graph during the current call
        self.plain_nodes: set[Any] = set()  # nodes given no after= (all their edges are from data)
        self.log: list[str] = []
        self.violations: list[str] = []

    # ------------------------------------------------------------------ values
    def hostile(self, typical: Any) -> Any:
        r = self.rng
        h = Mutating(self, r.choice(("raise", "remove", "add", "plain")), typical)
        k = r.randrange(3)
        if k == 0:
            return h
        if k == 1 and isinstance(typical, int) and not isinstance(typical, bool):
            return HInt(h, typical)
        return NBytes(r.choice(["raise", -1, 2**64, 2**70, math.nan, 0, typical]))

    def size(self, typical: int) -> Any:
        x = self.rng.random()
        if x < 0.75:
            return typical
        if x < 0.88:
            return self.rng.choice([0, -1, 2**63, 2**64, 2**64 - 1, 1.5, math.nan, True, np.int64(typical), None])
        return self.hostile(typical)

    def memory(self) -> Any:
        """A value to declare: memory of an accepted kind, or a hostile / junk one."""
        r, g = self.rng, self.g
        x = r.randrange(14)
        lo, n = r.randrange(0, 256, 8), r.choice([1, 8, 16, 64, 128])
        if x <= 2:
            return BASE * r.randrange(1, 4) + lo  # (wrapped with nbytes)
        if x == 3:
            a = r.choice(self.arrays)
            return a[r.randrange(len(a) // 2) : r.randrange(len(a) // 2, len(a) + 1)] if r.random() < 0.6 else a
        if x == 4:
            return r.choice((self.p, self.q, self.s))
        if x == 5:
            if not self.allocs or r.random() < 0.3:
                self.mutated = True  # (a node added in the middle of the call)
                try:
                    self.allocs.append(self.build(lambda: g.alloc(256)))
                except CudaGraphError:
                    return self.p
            a = r.choice(self.allocs)
            return a.offset(r.randrange(0, 256, 16)) if r.random() < 0.5 else a
        if x == 6:
            how = r.choice(("plain", "plain", "raise", "remove", "add", "junk"))
            return CAI(self, BASE * r.randrange(1, 4) + lo, r.choice([n, 0, -1, 2**70, math.nan]), how)
        if x == 7:
            how = r.choice(("plain", "plain", "raise", "remove", "add"))
            return FakeBuffer(self, BASE * r.randrange(1, 4) + lo, r.choice([n, 0, -1, 2**70, 1.5]), how)
        if x == 8:
            return DLOnly(r.random() < 0.5)
        if x == 9:
            return NBytes(r.choice(["raise", 64, -3, 2**64]))
        if x == 10 and self.dev is not None:
            return r.choice([self.dev.buf, self.dev.buf2, self.dev.small])
        if x == 11:
            return self.hostile(BASE + lo)
        if x == 12:
            return r.choice(JUNK)
        return r.choice([self.other_node, *self.removed[-1:], cg.In(BASE, nbytes=4), self.g.condition()])

    def wrapped(self) -> Any:
        r = self.rng
        cls = r.choice((cg.In, cg.Out, cg.InOut))
        kw: dict[str, Any] = {}
        if r.random() < 0.4:
            kw["offset"] = self.size(r.randrange(0, 64, 4))
        if r.random() < 0.7:
            kw["nbytes"] = self.size(r.choice([1, 4, 16, 64, 128]))
        return cls(self.memory(), **kw)

    def keyword(self) -> Any:
        r = self.rng
        x = r.random()
        if x < 0.3:
            return None
        items = [r.choice([self.memory(), self.wrapped(), [1, 2], self.arrays[0]]) for _ in range(r.randrange(1, 4))]
        if x < 0.5:
            return items[0]
        if x < 0.85:
            return items
        return r.choice([HTuple(Mutating(self, "remove", None), tuple(items)), iter(items), {1: 2}, set(), "ab"])

    def node(self) -> Any:
        r = self.rng
        x = r.random()
        if x < 0.08:
            return self.other_node
        if x < 0.12 and self.removed:
            return r.choice(self.removed)
        nodes = self.g.nodes
        return r.choice(nodes) if nodes else None

    def after(self) -> Any:
        x = self.rng.random()
        if x < 0.75:
            return None
        return self.node() if x < 0.92 else [self.node(), self.node()]

    def args(self) -> tuple[Any, ...]:
        r = self.rng
        out: list[Any] = []
        for _ in range(r.randrange(0, 4)):
            out.append(self.wrapped() if r.random() < 0.8 else r.choice([np.int32(1), np.float32(2), BASE]))
        return tuple(out)

    def body(self, graph: Any) -> None:
        """Fill a child graph or conditional body with a few nodes that declare accesses."""
        r = self.rng
        for _ in range(r.randrange(0, 3)):
            k = r.randrange(3)
            if k == 0:
                graph.kernel(K, 1, 32, tuple(cg.InOut(BASE * r.randrange(1, 4) + 8 * i, nbytes=8) for i in range(2)))
            elif k == 1:
                graph.memset(BASE * r.randrange(1, 4) + r.randrange(0, 128, 4), 0, count=4, element_size=4)
            else:
                graph.host(print, reads=cg.In(self.p, nbytes=32), writes=[self.q])

    # ------------------------------------------------------------------ calls
    def build(self, call: Any, plain: bool = False) -> Any:
        node = call()
        if plain and not self.mutated:
            self.plain_nodes.add(node)
        return node

    def op(self) -> tuple[str, Any]:
        r, g = self.rng, self.g
        c = r.randrange(20)
        if c <= 4:

            def kern() -> Any:
                after = self.after()
                kw = {k: self.keyword() for k in ("reads", "writes") if r.random() < 0.3}
                return self.build(lambda: g.kernel(K, 1, 32, self.args(), after=after, **kw), after is None)

            return "kernel", kern
        if c == 5:

            def host() -> Any:
                after = self.after()
                kw = {"reads": self.keyword(), "writes": self.keyword()}
                return self.build(lambda: g.host(print, after=after, **kw), after is None)

            return "host", host
        if c == 6:

            def copy() -> Any:
                dst, src = self.memory(), self.memory()
                if type(dst) is int and type(src) is int:
                    return self.build(lambda: g.memcpy(dst, src, self.size(16)), True)
                return self.build(lambda: g.memcpy(dst, src, self.size(16)), True)

            return "memcpy", copy
        if c == 7:
            return "memset", lambda: self.build(
                lambda: g.memset(self.memory(), 0, count=self.size(4), element_size=4), True
            )
        if c == 8:

            def child() -> Any:
                sub = cg.Graph("child", edges=r.choice(["auto", "manual"]))
                self.body(sub)
                return self.build(lambda: g.child(sub), True)

            return "child", child

        if c == 9:

            def cond() -> Any:
                k = g.condition(default=1)
                n = self.build(lambda: r.choice([g.if_, g.while_, g.if_else])(k), True)
                for b in n.bodies if hasattr(n, "bodies") else [n.body]:
                    self.body(b)
                return n

            return "conditional", cond
        if c == 10:
            return "free", lambda: self.allocs and self.build(lambda: g.free(self.allocs.pop()), True)
        if c == 11:
            return "add_edge", lambda: self.edit(lambda: g.add_edge(self.node(), self.node()))
        if c == 12:
            return "remove_edge", lambda: self.edit(lambda: g.remove_edge(self.node(), self.node()))
        if c == 13:

            def rm() -> None:
                n = self.node()
                self.edit(lambda: g.remove(n))
                self.removed.append(n)
                self.plain_nodes.discard(n)

            return "remove", rm
        if c == 14:

            def upd() -> None:
                n = self.node()
                if getattr(n, "kind", "") == "kernel":
                    self.edit(lambda: n.update(args=self.args()))
                elif getattr(n, "kind", "") == "host":
                    self.edit(lambda: n.update(args=(self.memory(),)))

            return "update", upd
        if c == 15:
            return "races", lambda: g.races()
        if c == 16:
            return "validate", lambda: g.validate(races=r.random() < 0.7)
        if c == 17:
            return "render", lambda: (g.summary(), g.to_dot(), g.to_mermaid(), [repr(x) for x in g.races()])
        if c == 18 and self.dev is not None:
            return "instantiate", self.instantiate
        return "wrap", lambda: cg.In(self.memory(), offset=self.size(0), nbytes=self.size(4))

    def edit(self, call: Any) -> Any:
        self.edited = True
        return call()

    def instantiate(self) -> None:
        d, r = self.dev, self.rng
        exe = self.g.instantiate(p=d.buf, q=d.buf2, auto_free_on_launch=r.random() < 0.5)
        try:
            exe.launch(d.s, p=r.choice([d.buf, d.buf2, d.small]))
        finally:
            exe.close()

    # ------------------------------------------------------------------ invariants
    def snapshot(self) -> Any:
        g = self.g
        decl = dict(g._declared or {})
        return (
            list(g.nodes),
            [tuple(n.predecessors) for n in g.nodes],
            {id(k): v for k, v in decl.items()},
            [getattr(n, "args", None) for n in g.nodes],
        )

    def check_refused(self, before: Any) -> None:
        if self.mutated:
            return
        after = self.snapshot()
        for what, a, b in zip(("nodes", "edges", "declarations", "arguments"), before, after):
            if a != b:
                self.violations.append(f"a refused call changed the graph's {what}")
                return

    def check(self) -> None:
        for g in (self.g, self.other):
            nodes = g.nodes
            assert [n.index for n in nodes] == list(range(len(nodes))), "index != position"
            npreds = 0
            for n in nodes:
                npreds += len(n.predecessors)
                for p in n.predecessors:
                    assert p.graph is g, "predecessor of another graph"
                    assert sum(s is n for s in p.successors) == 1, "edge on one end only"
            assert g.num_edges == npreds, "edge count"
        if self.violations:
            raise AssertionError(self.violations.pop(0))
        try:
            races = self.g.races()
        except CudaGraphError:
            return  # (a cycle: validate says so)
        self.brute(self.g, races)

    def brute(self, g: Any, races: list[Any]) -> None:
        """``races`` against a brute force over ``g`` and its bodies; the auto invariants where they hold."""
        graphs = [g, *g._descendants()]
        found = {(id(x.first), id(x.second)) for x in races}
        want: set[tuple[int, int]] = set()
        for h in graphs:
            nodes = h.nodes
            anc = ancestors(nodes)
            regs = {id(n): node_regions(n) for n in nodes}
            for i, u in enumerate(nodes):
                for v in nodes[i + 1 :]:
                    if conflict(regs[id(u)], regs[id(v)]) and id(u) not in anc[id(v)] and id(v) not in anc[id(u)]:
                        want.add((id(u), id(v)))
            if h is g and self.auto and not self.edited:
                for v in nodes:
                    if v not in self.plain_nodes:
                        continue
                    for p in v.predecessors:
                        if not conflict(regs[id(p)], regs[id(v)]):
                            raise AssertionError(f"auto edge {p.label} -> {v.label} joins no conflict")
                        others = set().union(*(anc[id(o)] | {id(o)} for o in v.predecessors if o is not p))
                        if id(p) in others:
                            raise AssertionError(f"auto edge {p.label} -> {v.label} is implied by another path")
        unordered = {frozenset(x) for x in want}
        if {frozenset(x) for x in found} != unordered:
            missing = len(unordered - {frozenset(x) for x in found})
            extra = len({frozenset(x) for x in found} - unordered)
            raise AssertionError(f"races() differs from the brute force: {missing} missing, {extra} extra")
        if (
            self.auto
            and not self.edited
            and any(
                (id(x.first), id(x.second)) in want or (id(x.second), id(x.first)) in want
                for x in races
                if x.first.graph is g
            )
        ):
            raise AssertionError("an auto graph no edit touched has a race")


def ancestors(nodes: list[Any]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}

    def of(n: Any) -> set[int]:
        got = out.get(id(n))
        if got is None:
            got = out[id(n)] = set()
            stack = list(n.predecessors)
            while stack:
                p = stack.pop()
                if id(p) not in got:
                    got.add(id(p))
                    stack.extend(p.predecessors)
        return got

    for n in nodes:
        of(n)
    return out


def conflict(a: Any, b: Any) -> bool:
    return any(x.space == y.space and x.lo < y.hi and y.lo < x.hi and (x.mode | y.mode) & WRITE for x in a for y in b)
