"""Every public entry point that needs no GPU, given hostile values in each argument: a typed error or a result.

Each call gets, one at a time, values of the wrong type, out of range, of no truth value (numpy arrays),
huge (2**70), objects of another graph, and an object whose ``__index__``, ``__bool__``, ``__len__`` and
``__iter__`` raise. The call must either succeed or raise a :class:`~cudagraph.errors.CudaGraphError`
(the user's own exception from such an object may pass through); never another exception (a raw
``TypeError``, numpy's ``ValueError``, a ``MemoryError``), and on an error the graph keeps the nodes and
edges it had. A sweep like this one found an int path opened as a file descriptor and a split of 2**70
builders that filled the memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import compat
from cudagraph.errors import CudaGraphError


class CUkernel:  # recognised as a kernel handle by type name
    pass


class CUevent:  # recognised as an event handle by type name
    pass


class Hostile:
    """Raises from every conversion a library might try."""

    def __index__(self) -> int:
        raise RuntimeError("hostile __index__")

    def __bool__(self) -> bool:
        raise RuntimeError("hostile __bool__")

    def __len__(self) -> int:
        raise RuntimeError("hostile __len__")

    def __iter__(self) -> Any:
        raise RuntimeError("hostile __iter__")


class Cfg:  # a cuda.core LaunchConfig stand-in (same attribute names)
    grid = 1
    block = 32
    shmem_size = 0
    cluster = None
    is_cooperative = False


K, E = CUkernel(), CUevent()
VALUES = [
    None, "x", 1.5, -1, 0, 2**70, [], (), {}, object(), np.float64(1), np.array([1, 2]), np.array(3), b"\0",
    [1, None], (None,), float("nan"), True, Hostile(), cg.Graph("other").empty(),
]  # fmt: skip

Call = Callable[[cg.Graph, Any, Any], Any]


def _made(g: cg.Graph, kind: str = "kernel") -> Any:
    """The node of ``kind`` that every graph of the sweep starts with (after the empty node ``a``)."""
    return next(n for n in g.nodes if n.kind == kind)


def _compat(f: Callable[[Any, Any, Any], Any]) -> Call:
    def run(g: cg.Graph, a: Any, v: Any) -> Any:
        gd = compat.GraphDefinition()
        return f(gd, gd.empty(), v)

    return run


def _builder(f: Callable[[Any, Any], Any]) -> Call:
    def run(g: cg.Graph, a: Any, v: Any) -> Any:
        return f(compat.Device().create_graph_builder().begin_building(), v)

    return run


CALLS: dict[str, Call] = {
    "kernel grid": lambda g, a, v: g.kernel(K, v, 32, (1,)),
    "kernel block": lambda g, a, v: g.kernel(K, 1, v, (1,)),
    "kernel args": lambda g, a, v: g.kernel(K, 1, 32, v),
    "kernel an argument": lambda g, a, v: g.kernel(K, 1, 32, (v,)),
    "kernel after": lambda g, a, v: g.kernel(K, 1, 32, (1,), after=v),
    "kernel name": lambda g, a, v: g.kernel(K, 1, 32, (1,), name=v),
    "kernel shared_mem": lambda g, a, v: g.kernel(K, 1, 32, (1,), shared_mem=v),
    "kernel cluster": lambda g, a, v: g.kernel(K, 4, 32, (1,), cluster=v),
    "kernel priority": lambda g, a, v: g.kernel(K, 4, 32, (1,), priority=v),
    "kernel programmatic": lambda g, a, v: g.kernel(K, 4, 32, (1,), after=_made(g), programmatic=v),
    "kernel cooperative": lambda g, a, v: g.kernel(K, 4, 32, (1,), cooperative=v),
    "kernel device": lambda g, a, v: g.kernel(K, 4, 32, (1,), device=v),
    "kernel kernel": lambda g, a, v: g.kernel(v, 4, 32, (1,)),
    "memset dst": lambda g, a, v: g.memset(v, 1, count=4, element_size=4),
    "memset value": lambda g, a, v: g.memset(0x1000, v, count=4, element_size=4),
    "memset count": lambda g, a, v: g.memset(0x1000, 1, count=v, element_size=4),
    "memset element_size": lambda g, a, v: g.memset(0x1000, 1, count=4, element_size=v),
    "memset width": lambda g, a, v: g.memset(0x1000, 1, width=v, height=2, pitch=64, element_size=4),
    "memset height": lambda g, a, v: g.memset(0x1000, 1, width=4, height=v, pitch=64, element_size=4),
    "memset pitch": lambda g, a, v: g.memset(0x1000, 1, width=4, height=2, pitch=v, element_size=4),
    "memcpy dst": lambda g, a, v: g.memcpy(v, 0x2000, nbytes=16),
    "memcpy src": lambda g, a, v: g.memcpy(0x1000, v, nbytes=16),
    "memcpy nbytes": lambda g, a, v: g.memcpy(0x1000, 0x2000, nbytes=v),
    "memcpy2d width": lambda g, a, v: g.memcpy2d(0x1000, 64, 0x2000, 64, v, 2),
    "record": lambda g, a, v: g.record(v),
    "wait": lambda g, a, v: g.wait(v),
    "alloc": lambda g, a, v: g.alloc(v),
    "free": lambda g, a, v: g.free(v),
    "write_value value": lambda g, a, v: g.write_value(0x1000, v),
    "write_value dst": lambda g, a, v: g.write_value(v, 1),
    "wait_value": lambda g, a, v: g.wait_value(0x1000, v),
    "if_": lambda g, a, v: g.if_(v),
    "if_else": lambda g, a, v: g.if_else(v),
    "while_": lambda g, a, v: g.while_(v),
    "switch cases": lambda g, a, v: g.switch(g.condition(), v),
    "condition default": lambda g, a, v: g.condition(default=v),
    "child": lambda g, a, v: g.child(v),
    "join": lambda g, a, v: g.join(v),
    "join after": lambda g, a, v: g.join(a, after=v),
    "empty after": lambda g, a, v: g.empty(after=v),
    "host fn": lambda g, a, v: g.host(v),
    "param name": lambda g, a, v: g.param(v),
    "param dtype": lambda g, a, v: g.param("p", v),
    "param default": lambda g, a, v: g.param("p", np.float32, default=v),
    "parametrize": lambda g, a, v: g.parametrize(x=v),
    "parametrize range start": lambda g, a, v: g.parametrize(x=(v, 16)),
    "parametrize range size": lambda g, a, v: g.parametrize(x=(0x1000, v)),
    "add_edge": lambda g, a, v: g.add_edge(a, v),
    "remove_edge": lambda g, a, v: g.remove_edge(v, a),
    "precede": lambda g, a, v: a.precede(v),
    "succeed": lambda g, a, v: a.succeed(v),
    "update args": lambda g, a, v: _made(g).update(args=v),
    "update grid": lambda g, a, v: _made(g).update(grid=v),
    "summary": lambda g, a, v: g.summary(v),
    "draw path": lambda g, a, v: g.draw(v),
    "draw format": lambda g, a, v: g.draw("never.written", v),
    "instantiate backend": lambda g, a, v: g.instantiate(backend=v),
    "instantiate auto_free_on_launch": lambda g, a, v: g.instantiate(auto_free_on_launch=v),
    "instantiate device_launch": lambda g, a, v: g.instantiate(device_launch=v),
    "instantiate use_node_priority": lambda g, a, v: g.instantiate(use_node_priority=v),
    "Graph name": lambda g, a, v: cg.Graph(v),
    "path after": lambda g, a, v: g.path(after=v),
    "launch target": lambda g, a, v: cg.launch(v, Cfg(), K, 1),
    "launch config": lambda g, a, v: cg.launch(g.path(), v, K, 1),
    "launch kernel": lambda g, a, v: cg.launch(g.path(), Cfg(), v, 1),
    "launch argument": lambda g, a, v: cg.launch(g.path(), Cfg(), K, v),
    "cg.memcpy nbytes": lambda g, a, v: cg.memcpy(g.path(), 0x1000, 0x2000, v),
    "cg.memset value": lambda g, a, v: cg.memset(g.path(), 0x1000, v, 4),
    "cg.host fn": lambda g, a, v: cg.host(g.path(), v),
    "cg.record event": lambda g, a, v: cg.record(g.path(), v),
    "cg.wait event": lambda g, a, v: cg.wait(g.path(), v),
    "path memset count": lambda g, a, v: g.path(after=a).memset(0x1000, 1, count=v, element_size=4),
    "path kernel grid": lambda g, a, v: g.path(after=a).kernel(K, v, 32, (1,)),
    "update memset value": lambda g, a, v: _made(g, "memset").update(value=v),
    "update memcpy nbytes": lambda g, a, v: _made(g, "memcpy").update(nbytes=v),
    "update name": lambda g, a, v: _made(g).update(name=v),
    "cg.fork": lambda g, a, v: cg.fork(v),
    "cg.join": lambda g, a, v: cg.join(g.path(), v),
    "compat launch config": _compat(lambda gd, e, v: gd.launch(v, K, 1)),
    "compat launch argument": _compat(lambda gd, e, v: e.launch(Cfg(), K, v)),
    "compat memset value": _compat(lambda gd, e, v: gd.memset(0x1000, v, 4)),
    "compat memcpy size": _compat(lambda gd, e, v: gd.memcpy(0x1000, 0x2000, v)),
    "compat join": _compat(lambda gd, e, v: gd.join(e, v)),
    "compat embed": _compat(lambda gd, e, v: gd.embed(v)),
    "compat callback": _compat(lambda gd, e, v: gd.callback(v)),
    "compat allocate size": _compat(lambda gd, e, v: gd.allocate(v)),
    "compat allocate device": _compat(lambda gd, e, v: gd.allocate(64, device=v)),
    "compat deallocate": _compat(lambda gd, e, v: gd.deallocate(v)),
    "compat switch": _compat(lambda gd, e, v: gd.switch(gd.create_condition(), v)),
    "compat debug_dot_print": _compat(lambda gd, e, v: gd.debug_dot_print(v)),
    "compat instantiate": _compat(lambda gd, e, v: gd.instantiate(v)),
    "builder launch config": _builder(lambda gb, v: compat.launch(gb, v, K, 1)),
    "builder launch argument": _builder(lambda gb, v: compat.launch(gb, Cfg(), K, v)),
    "builder split": _builder(lambda gb, v: gb.split(v)),
    "builder join": _builder(lambda gb, v: compat.GraphBuilder.join(gb, v)),
    "builder callback": _builder(lambda gb, v: gb.callback(v)),
    "builder begin_building": lambda g, a, v: compat.Device().create_graph_builder().begin_building(v),
}


def _hostile_own(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and str(exc).startswith("hostile ")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_hostile_values_get_a_typed_error_or_a_result(name: str, tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)  # (a call that takes a path writes only here)
    call = CALLS[name]
    leaked = []
    for v in VALUES:
        g = cg.Graph("sweep")
        a = g.empty(name="a")
        g.kernel(K, 1, 32, (1,), after=a)
        g.memset(0x1000, 1, count=4, element_size=4, after=a)
        g.memcpy(0x1000, 0x2000, nbytes=16, after=a)
        before = (len(g), g.num_edges)
        try:
            call(g, a, v)
        except CudaGraphError:
            assert (len(g), g.num_edges) == before, f"{name}({v!r}): half-built"
        except Exception as exc:  # anything else is a defect, unless it is the hostile object's own
            if not _hostile_own(exc):
                leaked.append(f"{v!r:.30}: {type(exc).__name__}: {exc}")
    assert not leaked, f"{name}: " + "; ".join(leaked)
