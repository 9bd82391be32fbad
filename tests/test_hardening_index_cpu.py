"""Hostile values that edit the graph while a builder reads them (GPU-free).

A value's ``__index__``, ``__int__``, ``__float__``, comparison, ``__len__`` or ``__iter__`` (or a mapping's
``items``, a device's ``device_id``) may remove a node, add one, or raise, in the middle of a builder call.
The call then either completes consistently (the new node at its position, every index its position, the
graph valid) or raises a :class:`~cudagraph.errors.CudaGraphError`, having added nothing of its own.

The launch keywords of :meth:`Graph.kernel` used to be read after the node's index was taken: a ``cluster=``
whose ``__index__`` removed the node's predecessor raised a raw ``IndexError`` and left the node in the graph
at a stale index, after a removed node (the graph could never validate again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

import cudagraph as cg
from cudagraph.errors import CudaGraphError, OperandError


class CUkernel:  # recognised as a kernel handle by type name
    pass


K = CUkernel()
PTR = 0x10000


class Act:
    """What a hostile value does the first time user code of it runs: edit ``graph`` or raise."""

    def __init__(self, graph: cg.Graph, action: str) -> None:
        self.graph = graph
        self.action = action
        self.fired = False
        self.made: list[cg.Node] = []

    def __call__(self) -> None:
        if self.fired:
            return
        self.fired = True
        g = self.graph
        if self.action == "raise":
            raise RuntimeError("hostile")
        if self.action in ("remove", "swap") and g.nodes:
            g.remove(g.nodes[-1])
        if self.action in ("add", "swap"):
            self.made.append(g.empty(name="intruder"))


class HIndex:
    """Every numeric conversion runs the action, then gives ``value``."""

    def __init__(self, act: Act, value: Any) -> None:
        self.act = act
        self.value = value

    def __index__(self) -> int:
        self.act()
        return int(self.value)

    def __int__(self) -> int:
        self.act()
        return int(self.value)

    def __float__(self) -> float:
        self.act()
        return float(self.value)


class HInt(int):
    """An int whose comparisons, hash and conversions run the action."""

    act: Act

    def __new__(cls, act: Act, value: int) -> HInt:
        self = super().__new__(cls, value)
        self.act = act
        return self

    def _v(self) -> int:
        self.act()
        return int.__int__(self)

    def __index__(self) -> int:
        return self._v()

    def __int__(self) -> int:
        return self._v()

    def __eq__(self, other: object) -> bool:
        return self._v() == other

    def __ne__(self, other: object) -> bool:
        return self._v() != other

    def __lt__(self, other: Any) -> bool:
        return self._v() < other

    def __le__(self, other: Any) -> bool:
        return self._v() <= other

    def __gt__(self, other: Any) -> bool:
        return self._v() > other

    def __ge__(self, other: Any) -> bool:
        return self._v() >= other

    def __hash__(self) -> int:
        return hash(self._v())

    def __bool__(self) -> bool:
        return bool(self._v())


class HTuple(tuple):  # type: ignore[type-arg]
    """A tuple whose ``__len__`` and ``__iter__`` run the action."""

    act: Act

    def __new__(cls, act: Act, items: tuple[Any, ...]) -> HTuple:
        self = super().__new__(cls, items)
        self.act = act
        return self

    def __len__(self) -> int:
        self.act()
        return tuple.__len__(self)

    def __iter__(self) -> Iterator[Any]:
        self.act()
        return tuple.__iter__(self)


class HList(list):  # type: ignore[type-arg]
    """A list whose ``__len__`` and ``__iter__`` run the action."""

    def __init__(self, act: Act, items: list[Any]) -> None:
        super().__init__(items)
        self.act = act

    def __len__(self) -> int:
        self.act()
        return list.__len__(self)

    def __iter__(self) -> Iterator[Any]:
        self.act()
        return list.__iter__(self)


class HMap(Mapping):  # type: ignore[type-arg]
    """A mapping whose reads run the action."""

    def __init__(self, act: Act, items: dict[str, Any]) -> None:
        self.act = act
        self.items_ = items

    def __getitem__(self, key: str) -> Any:
        self.act()
        return self.items_[key]

    def __iter__(self) -> Iterator[str]:
        self.act()
        return iter(self.items_)

    def __len__(self) -> int:
        self.act()
        return len(self.items_)

    def items(self) -> Any:
        self.act()
        return self.items_.items()


class HDevice:
    """A device whose ``device_id`` runs the action."""

    def __init__(self, act: Act) -> None:
        self.act = act

    @property
    def device_id(self) -> int:
        self.act()
        return 0


# (name, call): call(g, act, prev) makes the builder call with one hostile value; ``prev`` is the graph's last
# node (a kernel), passed as after=.
Call = Callable[[cg.Graph, Act, cg.Node], Any]
CASES: list[tuple[str, Call]] = [
    ("kernel grid", lambda g, a, p: g.kernel(K, HIndex(a, 2), 32, after=p)),
    ("kernel grid HInt", lambda g, a, p: g.kernel(K, HInt(a, 2), 32, after=p)),
    ("kernel grid tuple", lambda g, a, p: g.kernel(K, HTuple(a, (2, 1)), 32, after=p)),
    ("kernel block", lambda g, a, p: g.kernel(K, 2, (HIndex(a, 32), 1), after=p)),
    ("kernel block list", lambda g, a, p: g.kernel(K, 2, HList(a, [32, 1]), after=p)),
    ("kernel shared_mem", lambda g, a, p: g.kernel(K, 2, 32, shared_mem=HInt(a, 50000), after=p)),
    ("kernel args", lambda g, a, p: g.kernel(K, 2, 32, HList(a, [PTR]), after=p)),
    ("kernel cluster", lambda g, a, p: g.kernel(K, 2, 32, cluster=HIndex(a, 1), after=p)),
    ("kernel cluster HInt", lambda g, a, p: g.kernel(K, 2, 32, cluster=HInt(a, 2), after=p)),
    ("kernel cluster tuple", lambda g, a, p: g.kernel(K, 2, 32, cluster=HTuple(a, (2, 1)), after=p)),
    ("kernel cluster list", lambda g, a, p: g.kernel(K, 2, 32, cluster=HList(a, [1, HIndex(a, 1)]), after=p)),
    ("kernel priority", lambda g, a, p: g.kernel(K, 2, 32, priority=HIndex(a, 3), after=p)),
    ("kernel priority HInt", lambda g, a, p: g.kernel(K, 2, 32, priority=HInt(a, 3), after=p)),
    ("kernel cooperative", lambda g, a, p: g.kernel(K, 2, 32, cooperative=HInt(a, 1), after=p)),
    ("kernel device", lambda g, a, p: g.kernel(K, 2, 32, device=HDevice(a), after=p)),
    ("kernel device index", lambda g, a, p: g.kernel(K, 2, 32, device=HInt(a, 0), after=p)),
    ("kernel programmatic", lambda g, a, p: g.kernel(K, 2, 32, programmatic=HList(a, [p]), after=p)),
    (
        "kernel attributes map",
        lambda g, a, p: g.kernel(K, 2, 32, attributes=HMap(a, {"preferred_shared_memory_carveout": 50}), after=p),
    ),
    (
        "kernel attributes index",
        lambda g, a, p: g.kernel(K, 2, 32, attributes={"preferred_shared_memory_carveout": HIndex(a, 50)}, after=p),
    ),
    (
        "kernel attributes float",
        lambda g, a, p: g.kernel(
            K, 2, 32, attributes={"access_policy_window": (PTR, 256, HIndex(a, 0.5), 1, 0)}, after=p
        ),
    ),
    (
        "kernel attributes tuple",
        lambda g, a, p: g.kernel(K, 2, 32, attributes={"preferred_cluster": HTuple(a, (1, 1, 1))}, after=p),
    ),
    ("kernel after list", lambda g, a, p: g.kernel(K, 2, 32, after=HList(a, [p]))),
    ("kernel after list + priority", lambda g, a, p: g.kernel(K, 2, 32, priority=1, after=HList(a, [p]))),
    ("memset count", lambda g, a, p: g.memset(PTR, 0, count=HIndex(a, 16), element_size=4, after=p)),
    ("memset element_size", lambda g, a, p: g.memset(PTR, 0, count=16, element_size=HIndex(a, 4), after=p)),
    ("memset value", lambda g, a, p: g.memset(PTR, HIndex(a, 7), count=16, element_size=4, after=p)),
    ("memset 2d", lambda g, a, p: g.memset(PTR, 0, width=HIndex(a, 8), height=HIndex(a, 2), pitch=64, after=p)),
    ("memcpy nbytes", lambda g, a, p: g.memcpy(PTR, PTR + 4096, HIndex(a, 64), after=p)),
    ("memcpy nbytes HInt", lambda g, a, p: g.memcpy(PTR, PTR + 4096, HInt(a, 64), after=p)),
    ("memcpy2d", lambda g, a, p: g.memcpy2d(PTR, 64, PTR + 4096, 64, HIndex(a, 32), HIndex(a, 2), after=p)),
    ("memcpy3d", lambda g, a, p: g.memcpy3d(PTR, PTR + 65536, HIndex(a, 8), 2, HIndex(a, 2), after=p)),
    ("alloc nbytes", lambda g, a, p: g.alloc(HIndex(a, 1 << 20), after=p)),
    ("alloc nbytes HInt", lambda g, a, p: g.alloc(HInt(a, 1 << 20), after=p)),
    ("write_value", lambda g, a, p: g.write_value(PTR, HIndex(a, 5), after=p)),
    ("write_value bits", lambda g, a, p: g.write_value(PTR, 5, bits=HIndex(a, 32), after=p)),
    ("wait_value", lambda g, a, p: g.wait_value(PTR, HIndex(a, 5), after=p)),
    ("switch n", lambda g, a, p: g.switch(g.condition(), HIndex(a, 2), after=p)),
    ("switch n HInt", lambda g, a, p: g.switch(g.condition(), HInt(a, 2), after=p)),
    ("memset element_size HInt", lambda g, a, p: g.memset(PTR, 0, count=16, element_size=HInt(a, 4), after=p)),
    ("memset value HInt", lambda g, a, p: g.memset(PTR, HInt(a, 7), count=16, element_size=4, after=p)),
    ("memset count HInt", lambda g, a, p: g.memset(PTR, 0, count=HInt(a, 16), element_size=4, after=p)),
    ("write_value HInt", lambda g, a, p: g.write_value(PTR, HInt(a, 5), after=p)),
    ("write_value bits HInt", lambda g, a, p: g.write_value(PTR, 5, bits=HInt(a, 32), after=p)),
    ("wait_value HInt", lambda g, a, p: g.wait_value(PTR, HInt(a, 5), after=p)),
    ("memcpy2d HInt", lambda g, a, p: g.memcpy2d(PTR, HInt(a, 64), PTR + 4096, 64, 32, HInt(a, 2), after=p)),
    ("memcpy3d HInt", lambda g, a, p: g.memcpy3d(PTR, PTR + 65536, HInt(a, 8), 2, 2, after=p)),
    ("join after list", lambda g, a, p: g.join(g.nodes[0], after=HList(a, [p]))),
    ("empty after tuple", lambda g, a, p: g.empty(after=HTuple(a, (p,)))),
]

ACTIONS = ("remove", "add", "swap", "raise")


def _consistent(g: cg.Graph) -> None:
    nodes = g.nodes
    assert [n.index for n in nodes] == list(range(len(nodes)))
    assert all(n.graph is g for n in nodes)
    npreds = 0
    for n in nodes:
        npreds += len(n.predecessors)
        for p in n.predecessors:
            assert p.graph is g
            assert sum(s is n for s in p.successors) == 1
    assert g.num_edges == npreds


def _start() -> tuple[cg.Graph, cg.Node]:
    g = cg.Graph("hostile")
    a = g.empty(name="a")
    return g, g.kernel(K, 2, 32, after=a, name="k")


def _params() -> list[Any]:
    out = []
    for case, _ in CASES:
        for action in ACTIONS:
            out.append(pytest.param(case, action, id=f"{case}-{action}"))
    return out


@pytest.mark.parametrize("case, action", _params())
def test_hostile_value_mid_call(case: str, action: str) -> None:
    call = dict(CASES)[case]
    g, prev = _start()
    g.validate()
    act = Act(g, action)
    before = {id(n) for n in g.nodes}
    try:
        node = call(g, act, prev)
    except CudaGraphError as e:
        # Nothing of the call's own stays: every node is one from before or one the hostile value added.
        allowed = before | {id(n) for n in act.made}
        assert all(id(n) in allowed for n in g.nodes), e
    else:
        assert action != "raise" or not act.fired  # a value that raised was not swallowed silently
        assert node.graph is g
        assert g.nodes[node.index] is node
        assert all(p.graph is g for p in node.predecessors)
    _consistent(g)
    try:
        g.validate()
    except CudaGraphError:
        pass  # (a refusal is fine; what matters is the graph can still validate)
    # The graph stays usable: another node goes at its place and the graph validates.
    k = g.kernel(K, 2, 32, after=g.nodes[-1] if g.nodes else None)
    assert g.nodes[k.index] is k
    _consistent(g)
    g.validate()


@pytest.mark.parametrize(
    "keyword, value",
    [
        ("cluster", "index"),
        ("priority", "index"),
        ("attributes", "index"),
        ("attributes", "float"),
        ("attributes", "map"),
        ("device", "device"),
        ("programmatic", "list"),
        ("cluster", "tuple"),
    ],
)
def test_launch_keyword_raising_is_typed_and_named(keyword: str, value: str) -> None:
    g, prev = _start()
    act = Act(g, "raise")
    v: Any
    if value == "index":
        h = HIndex(act, 1)
        v = {"preferred_shared_memory_carveout": h} if keyword == "attributes" else h
    elif value == "float":
        v = {"access_policy_window": (PTR, 256, HIndex(act, 0.5), 1, 0)}
    elif value == "map":
        v = HMap(act, {"preferred_shared_memory_carveout": 50})
    elif value == "device":
        v = HDevice(act)
    elif value == "list":
        v = HList(act, [prev])
    else:
        v = HTuple(act, (1, 1))
    n = len(g.nodes)
    with pytest.raises(OperandError, match=rf"kernel#2 'kernel': .*{keyword}") as info:
        g.kernel(K, 2, 32, after=prev, **{keyword: v})
    assert isinstance(info.value.__cause__, RuntimeError) or keyword in str(info.value)
    assert len(g.nodes) == n
    assert list(prev.successors) == []
    _consistent(g)
    g.validate()


def test_cluster_removing_predecessor_is_refused_and_graph_stays_valid() -> None:
    """The red-team reproducer: ``cluster=``'s ``__index__`` removes the node named in ``after=``."""
    g, prev = _start()

    class Cluster:
        def __index__(self) -> int:
            g.remove(prev)
            return 1

    with pytest.raises(CudaGraphError, match="after="):
        g.kernel(K, 2, 32, cluster=Cluster(), after=prev)
    assert [n.name for n in g.nodes] == ["a"]
    _consistent(g)
    g.validate()


def test_priority_adding_node_takes_the_next_position() -> None:
    g, prev = _start()

    class Priority:
        def __index__(self) -> int:
            g.empty(name="intruder")
            return 2

    k = g.kernel(K, 2, 32, priority=Priority(), after=prev)
    assert [n.name for n in g.nodes] == ["a", "k", "intruder", "kernel"]
    assert k.index == 3 and k.attrs is not None and k.attrs.priority == 2
    _consistent(g)
    g.validate()


def test_device_keyword_counts_only_placed_nodes() -> None:
    """A ``device=`` call refused afterwards (a bad programmatic edge) leaves the graph's counters alone."""
    g, prev = _start()
    special = g._special
    with pytest.raises(CudaGraphError):
        g.kernel(K, 2, 32, device=0, programmatic=True)  # no predecessors: refused
    assert g._special == special
    g.kernel(K, 2, 32, device=0, after=prev)
    assert g._special == special + 1


@pytest.mark.parametrize("keyword", ["cluster", "cooperative", "priority", "device", "attributes"])
def test_update_launch_keyword_raising_is_typed(keyword: str) -> None:
    g, prev = _start()
    act = Act(g, "raise")
    values = {
        "cluster": HTuple(act, (2, 1)),
        "cooperative": HInt(act, 1),
        "priority": HIndex(act, 1),
        "device": HDevice(act),
        "attributes": HMap(act, {"preferred_shared_memory_carveout": 50}),
    }
    with pytest.raises(CudaGraphError):
        prev.update(**{keyword: values[keyword]})
    assert prev.attrs is None
    _consistent(g)
    g.validate()
