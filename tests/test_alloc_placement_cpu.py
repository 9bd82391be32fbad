"""Where a graph allocation lives, without a GPU: ``Graph.alloc(device=, memory_type=, peer_access=)``, the
``MEM_ALLOC`` parameters it gives, the memory pool a stream draws it from, and the device rules checked before
anything is added (against fake drivers)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.diff import node_state
from cudagraph.errors import OperandError, UnsupportedError


class CUkernel:  # the definition layer recognises kernels by type name
    pass


class Device:
    """What ``device=`` reads of a cuda.core ``Device``: its ``device_id``."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id


K = CUkernel()


# ------------------------------------------------------------------ the definition


def test_placement_is_kept_on_the_node_with_cuda_core_defaults():
    g = cg.Graph("m")
    plain = g.alloc(64, name="plain")
    dev = g.alloc(64, device=Device(1), peer_access=[0, Device(2), 0], name="dev")
    host = g.alloc(64, memory_type="HOST", name="host")
    managed = g.alloc(64, device=np.int64(0), memory_type="managed", name="managed")
    assert (plain.device, plain.memory_type, plain.peer_access, plain.default_memory) == (None, "device", (), True)
    assert (dev.device, dev.memory_type, dev.peer_access, dev.default_memory) == (1, "device", (0, 2), False)
    assert (host.device, host.memory_type, host.default_memory) == (None, "host", False)
    assert (managed.device, managed.memory_type) == (0, "managed") and type(managed.device) is int
    assert [n.describe() for n in (plain, dev, host, managed)] == [
        "64 B never freed",
        "64 B on device 1 peers 0,2 never freed",
        "64 B host never freed",
        "64 B managed on device 0 never freed",
    ]
    assert "64 B host never freed" in g.summary()


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"memory_type": "pinned"}, "memory_type must be one of device, host, managed, got 'pinned'"),
        ({"memory_type": 3}, "memory_type must be one of device, host, managed, got int"),
        ({"device": -1}, "device must be a non-negative ordinal, got -1"),
        ({"device": "0"}, "device must be a cuda.core Device or an int ordinal, got str"),
        ({"device": 0, "memory_type": "host"}, "device=0 does not apply to host memory (it resides on the host)"),
        ({"peer_access": 1}, "peer_access must be an iterable of cuda.core Devices or int ordinals, got int"),
        ({"peer_access": "01"}, "peer_access must be an iterable of cuda.core Devices or int ordinals, got str"),
        ({"peer_access": [0, True]}, "peer_access: device must be a cuda.core Device or an int ordinal, got bool"),
    ],
)
def test_bad_placements_are_refused_by_name_and_add_nothing(kwargs: dict[str, Any], text: str) -> None:
    g = cg.Graph("m")
    with pytest.raises(OperandError) as info:
        g.alloc(64, name="buf", **kwargs)
    assert str(info.value) == f"alloc#0 'buf': {text}"
    assert len(g) == 0


def test_the_placement_is_part_of_the_nodes_state():
    def state(**kw: Any) -> tuple[Any, ...]:
        return node_state(cg.Graph("m").alloc(64, **kw))

    assert state() == state(memory_type="device", peer_access=[])
    assert len({state(), state(device=0), state(memory_type="host"), state(peer_access=[1])}) == 4


# ------------------------------------------------------------------ the driver side (faked)

drv = pytest.importorskip("cuda.bindings.driver")
from cudagraph.driver import alloc_placement, device_checks, devices  # noqa: E402

SUCCESS = drv.CUresult.CUDA_SUCCESS
T, L = drv.CUmemAllocationType, drv.CUmemLocationType


def _params(node: Any, current: int = 0) -> Any:
    p = drv.CUgraphNodeParams()
    alloc_placement.fill_alloc_params(p.alloc, node, current)
    return p.alloc


def test_mem_alloc_parameters_follow_the_placement():
    g = cg.Graph("m")
    plain = _params(g.alloc(100), current=3)
    assert (plain.poolProps.allocType, plain.poolProps.location.type) == (
        T.CU_MEM_ALLOCATION_TYPE_PINNED,
        L.CU_MEM_LOCATION_TYPE_DEVICE,
    )
    assert (plain.poolProps.location.id, plain.bytesize, plain.accessDescCount) == (3, 100, 0)
    host = _params(g.alloc(8, memory_type="host", peer_access=[0, 1]))
    assert (host.poolProps.allocType, host.poolProps.location.type, host.poolProps.location.id) == (
        T.CU_MEM_ALLOCATION_TYPE_PINNED,
        L.CU_MEM_LOCATION_TYPE_HOST,
        0,
    )
    assert [d.location.id for d in host.accessDescs] == [0, 1]  # host memory has no resident device
    managed = _params(g.alloc(8, device=2, memory_type="managed"))
    assert (managed.poolProps.allocType, managed.poolProps.location.id) == (T.CU_MEM_ALLOCATION_TYPE_MANAGED, 2)
    peers = _params(g.alloc(8, device=1, peer_access=[0, 1, 2]))
    assert peers.poolProps.location.id == 1 and peers.accessDescCount == 2  # the resident device goes without saying
    assert [(d.location.type, d.location.id, d.flags) for d in peers.accessDescs] == [
        (L.CU_MEM_LOCATION_TYPE_DEVICE, p, drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE) for p in (0, 2)
    ]


class Pools:
    """A fake driver's memory pools: records each pool made and each access set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[tuple[Any, Any, int]] = []
        self.access: list[tuple[int, list[int]]] = []
        monkeypatch.setattr(alloc_placement, "_POOLS", {})
        monkeypatch.setattr(drv, "cuMemPoolCreate", self._create)
        monkeypatch.setattr(drv, "cuMemPoolSetAccess", self._access)

    def _create(self, props: Any) -> tuple[Any, Any]:
        self.made.append((props.allocType, props.location.type, props.location.id))
        return SUCCESS, drv.CUmemoryPool(0x7000 + len(self.made))

    def _access(self, pool: Any, descs: Any, count: int) -> tuple[Any]:
        self.access.append((int(pool), [d.location.id for d in descs][:count]))
        return (SUCCESS,)


def test_a_stream_draws_each_placement_from_one_pool_made_once(monkeypatch):
    pools = Pools(monkeypatch)
    g = cg.Graph("m")
    assert alloc_placement.stream_pool(g.alloc(8), 0) is None  # cuMemAllocAsync: the device's default pool
    assert alloc_placement.stream_pool(g.alloc(8, device=0, peer_access=[0]), 0) is None  # the same placement
    host = alloc_placement.stream_pool(g.alloc(8, memory_type="host"), 0)
    assert alloc_placement.stream_pool(g.alloc(16, memory_type="host", peer_access=[0]), 0) is host  # made once
    other = alloc_placement.stream_pool(g.alloc(8, device=1, peer_access=[0]), 0)
    managed = alloc_placement.stream_pool(g.alloc(8, memory_type="managed"), 1)
    assert len({int(host), int(other), int(managed)}) == 3
    assert pools.made == [
        (T.CU_MEM_ALLOCATION_TYPE_PINNED, L.CU_MEM_LOCATION_TYPE_HOST, 0),
        (T.CU_MEM_ALLOCATION_TYPE_PINNED, L.CU_MEM_LOCATION_TYPE_DEVICE, 1),
        (T.CU_MEM_ALLOCATION_TYPE_MANAGED, L.CU_MEM_LOCATION_TYPE_DEVICE, 1),
    ]
    assert pools.access == [(int(host), [0]), (int(other), [0])]  # host memory: the current device reaches it


class Machine:
    """A fake driver's devices: ``count`` of them, ``current`` the context's; ``peers`` the pairs
    ``(accessing, owner)`` with a peer path."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, count: int, current: int = 0, peers: Any = ()) -> None:
        self.peers = set(peers)
        self.asked_current = 0
        monkeypatch.setattr(devices, "_PRIMARY", {})
        monkeypatch.setattr(devices, "_COUNT", [])
        monkeypatch.setattr(drv, "cuDeviceGetCount", lambda: (SUCCESS, count))
        monkeypatch.setattr(drv, "cuDeviceGet", lambda o: (SUCCESS, drv.CUdevice(o)))
        monkeypatch.setattr(drv, "cuDevicePrimaryCtxRetain", lambda d: (SUCCESS, drv.CUcontext(0xC0 + int(d))))
        monkeypatch.setattr(drv, "cuDeviceCanAccessPeer", lambda a, b: (SUCCESS, int((int(a), int(b)) in self.peers)))
        monkeypatch.setattr(drv, "cuCtxGetDevice", self._current(current))

    def _current(self, ordinal: int) -> Any:
        def get() -> tuple[Any, Any]:
            self.asked_current += 1
            return SUCCESS, drv.CUdevice(ordinal)

        return get


def test_a_definition_of_default_allocations_asks_nothing_of_the_devices(monkeypatch):
    m = Machine(monkeypatch, 1)
    g = cg.Graph("m")
    a = g.alloc(64)
    k = g.kernel(K, 1, 32, (a,), after=a)
    g.free(a, after=k)
    device_checks.check_devices(g)
    assert m.asked_current == 0 and devices._COUNT == []


@pytest.mark.parametrize(
    ("count", "kwargs", "text"),
    [
        (2, {"device": 2}, "alloc#0 'buf' of Graph 'm': device names device 2, but the driver has 2 device(s)"),
        (2, {"peer_access": [5]}, "alloc#0 'buf' of Graph 'm': peer_access names device 5, but the driver has 2"),
        (
            2,
            {"peer_access": [1]},
            "alloc#0 'buf' of Graph 'm': peer_access names device 1, which cannot access the memory of device 0",
        ),
        (2, {"memory_type": "host", "peer_access": [3]}, "peer_access names device 3, but the driver has 2"),
    ],
)
def test_allocations_on_devices_the_driver_lacks_or_without_a_peer_path_are_refused(monkeypatch, count, kwargs, text):
    Machine(monkeypatch, count)
    g = cg.Graph("m")
    g.alloc(64, name="buf", **kwargs)
    with pytest.raises(UnsupportedError) as info:
        device_checks.check_devices(g)
    assert text in str(info.value)


def test_a_peer_with_a_path_is_accepted(monkeypatch):
    Machine(monkeypatch, 2, peers={(1, 0)})
    g = cg.Graph("m")
    a = g.alloc(64, peer_access=[1], name="shared")
    g.kernel(K, 1, 32, (a,), device=1, after=a, name="reader")
    device_checks.check_devices(g)


def test_a_kernel_on_another_device_than_its_allocation_needs_peer_access(monkeypatch):
    Machine(monkeypatch, 2, current=0, peers={(1, 0), (0, 1)})
    g = cg.Graph("m")
    a = g.alloc(64, name="buf")  # on the current device, 0
    g.kernel(K, 1, 32, (np.int32(1), a.offset(8)), device=1, after=a, name="far")
    text = (
        "kernel#1 'far' of Graph 'm': argument 1 is alloc#0 'buf', device memory of device 0, but the kernel runs "
        "on device 1; give the allocation peer_access=[1] or run the kernel on device 0"
    )
    with pytest.raises(UnsupportedError) as info:
        device_checks.check_devices(g)
    assert str(info.value) == text
    # The other way round: memory on device 1, a kernel on the current device.
    g2 = cg.Graph("m2")
    b = g2.alloc(64, device=1, name="remote")
    g2.kernel(K, 1, 32, (b,), after=b, name="near")
    with pytest.raises(UnsupportedError, match=r"argument 0 is alloc#0 'remote', device memory of device 1, but "):
        device_checks.check_devices(g2)
    # Host and managed memory: any device.
    g3 = cg.Graph("m3")
    for kind in ("host", "managed"):
        c = g3.alloc(64, memory_type=kind)
        g3.kernel(K, 1, 32, (c,), device=1, after=c)
    device_checks.check_devices(g3)


def test_kernels_in_a_conditional_body_run_on_the_current_device(monkeypatch):
    Machine(monkeypatch, 2, current=1)
    g = cg.Graph("m")
    branch = g.if_(g.condition(default=1), name="branch")
    branch.body.kernel(K, 1, 32, device=1, name="here")
    device_checks.check_devices(g)
    inner = branch.body.child(cg.Graph("deep"), name="nest")
    inner.body.kernel(K, 1, 32, device=0, name="there")
    text = (
        "kernel#0 'there' of Graph 'deep': device=0 inside a conditional body; the bodies of a conditional node run "
        "in its context, the current device's (1)"
    )
    with pytest.raises(UnsupportedError) as info:
        device_checks.check_devices(g)
    assert str(info.value) == text
    # The same kernel in a plain child graph is fine.
    g2 = cg.Graph("m2")
    g2.child(inner.body)
    device_checks.check_devices(g2)


def test_an_eager_run_checks_the_devices_before_issuing_anything(monkeypatch):
    from cudagraph.materialize import eager

    Machine(monkeypatch, 2, current=0)
    issued: list[Any] = []
    monkeypatch.setattr(eager, "ensure_context", lambda: "ctx")
    monkeypatch.setattr(eager, "stream_handle", lambda s: issued.append(s))
    g = cg.Graph("m")
    b = g.alloc(64, device=1, name="remote")
    g.kernel(K, 1, 32, (b,), after=b, name="near")
    with pytest.raises(UnsupportedError, match=r"kernel#1 'near' of Graph 'm': argument 0 is alloc#0 'remote'"):
        eager.run(g, object(), {})
    assert issued == []  # refused before the stream was even read


def test_a_profile_checks_the_devices_before_timing_anything(monkeypatch):
    from cudagraph.executable import profile

    Machine(monkeypatch, 2, current=0)
    created: list[Any] = []
    monkeypatch.setattr(profile, "ensure_context", lambda: "ctx")
    monkeypatch.setattr(profile, "stream_handle", lambda s: 7)
    monkeypatch.setattr(drv, "cuEventCreate", lambda flags: created.append(flags) or (SUCCESS, drv.CUevent()))
    g = cg.Graph("m")
    b = g.alloc(64, device=1, name="remote")
    g.kernel(K, 1, 32, (b,), after=b, name="near")
    with pytest.raises(UnsupportedError, match=r"kernel#1 'near' of Graph 'm': argument 0 is alloc#0 'remote'"):
        profile.profile_graph(g, object(), 1, {})
    assert created == []  # refused before any event was made or node issued


def test_an_allocation_issued_on_a_stream_asks_no_peer_path_again(monkeypatch):
    """The devices are checked once per run (check_devices_of), not again by each allocation's issue."""
    from types import SimpleNamespace

    from cudagraph.ops.kinds import memory
    from cudagraph.ops.registry import ops_for

    Machine(monkeypatch, 2, current=0)
    asked: list[Any] = []
    monkeypatch.setattr(drv, "cuDeviceCanAccessPeer", lambda a, b: asked.append((int(a), int(b))) or (SUCCESS, 1))
    monkeypatch.setattr(memory, "stream_pool", lambda node, current: "pool")
    monkeypatch.setattr(drv, "cuMemAllocFromPoolAsync", lambda n, pool, s: (SUCCESS, drv.CUdeviceptr(0x1000)))
    g = cg.Graph("m")
    a = g.alloc(64, peer_access=[1], name="shared")
    device_checks.check_devices_of(g)
    assert asked == [(1, 0)]
    run = SimpleNamespace(state=SimpleNamespace(device=lambda: 0, allocs={}))
    ops_for(a).issue(a, "stream", run)
    assert asked == [(1, 0)] and run.state.allocs == {id(a): (a, 0x1000)}
