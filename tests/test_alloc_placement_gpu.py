"""Graph allocations of pinned host memory and managed memory, on a named device, with peers, on a GPU: the
driver's node holds what was asked, kernels read and write the memory, the host reads it where it can, and the
eager and capture materializers give the same results; devices the machine lacks are refused by name.

Marked ``gpu``: they skip (with the reason shown) where no NVIDIA driver/GPU works.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors

pytestmark = pytest.mark.gpu

N = 256
BLOCK = 128


def _graph(kernels: Any, host_in: np.ndarray, host_out: np.ndarray, **placement: Any) -> tuple[cg.Graph, Any]:
    """alloc (placed) -> copy in -> x = 2 x + 1 -> copy out -> free."""
    g = cg.Graph("placed")
    a = g.alloc(N * 4, name="buf", **placement)
    h2d = g.memcpy(a, host_in, N * 4, after=a, name="in")
    k = g.kernel(kernels.scale_add, N // BLOCK, BLOCK, (a, np.float32(2), np.float32(1), np.int32(N)), after=h2d)
    out = g.memcpy(host_out, a, N * 4, after=k, name="out")
    g.free(a, after=out)
    return g, a


PLACEMENTS = [
    {"memory_type": "host"},
    {"memory_type": "managed"},
    {"device": 0, "peer_access": [0]},
    {"memory_type": "managed", "device": 0},
]


def _run(g: cg.Graph, backend: str, stream: Any) -> None:
    if backend == "eager":
        g.run(stream)
    else:
        with g.instantiate() as exe:
            exe.launch(stream)
    stream.sync()


@pytest.mark.parametrize("placement", PLACEMENTS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
@pytest.mark.parametrize("backend", ["explicit", "eager"])
def test_placed_allocations_compute_what_device_memory_computes(gpu, kernels, stream, placement, backend):
    """Explicit: a MEM_ALLOC node of that placement; eager: ``cuMemAllocFromPoolAsync`` from a pool of it. A
    driver that has no host graph memory (``CUDA_ERROR_NOT_SUPPORTED``) gets its refusal named."""
    host_in = np.arange(N, dtype=np.float32)
    host_out = np.zeros(N, np.float32)
    g, _a = _graph(kernels, host_in, host_out, **placement)
    for step in range(3):
        host_in[:] = np.arange(N, dtype=np.float32) * (step + 1)
        host_out[:] = 0
        try:
            _run(g, backend, stream)
        except errors.UnsupportedError as exc:
            assert backend == "explicit" and placement == {"memory_type": "host"}, exc
            assert str(exc).startswith(
                "cuGraphAddNode failed for alloc#0 'buf' of Graph 'placed': CUDA_ERROR_NOT_SUPPORTED"
            )
            pytest.skip(f"this driver has no host graph memory: {exc}")
        np.testing.assert_array_equal(host_out, host_in * 2 + 1)


@pytest.mark.parametrize("placement", PLACEMENTS[:2], ids=["host", "managed"])
def test_the_capture_backend_refuses_graph_allocations_by_name(gpu, kernels, placement):
    g, _a = _graph(kernels, np.zeros(N, np.float32), np.zeros(N, np.float32), **placement)
    with pytest.raises(errors.UnsupportedError) as info:
        g.instantiate(backend="capture")
    assert str(info.value).startswith("alloc#0 'buf': the capture backend cannot express a alloc node")


@pytest.mark.parametrize(
    ("placement", "alloc_type", "location"),
    [
        ({}, "CU_MEM_ALLOCATION_TYPE_PINNED", "CU_MEM_LOCATION_TYPE_DEVICE"),
        ({"memory_type": "managed"}, "CU_MEM_ALLOCATION_TYPE_MANAGED", "CU_MEM_LOCATION_TYPE_DEVICE"),
    ],
)
def test_the_drivers_alloc_node_holds_the_placement(gpu, kernels, device, placement, alloc_type, location):
    from cuda.bindings import driver

    from cudagraph.materialize.explicit import lower

    g, a = _graph(kernels, np.zeros(N, np.float32), np.zeros(N, np.float32), **placement)
    lowered = lower(g, {}, [])
    try:
        err, p = driver.cuGraphMemAllocNodeGetParams(lowered.driver_nodes[a.index])
        assert not err, err
        assert p.poolProps.allocType == getattr(driver.CUmemAllocationType, alloc_type)
        assert p.poolProps.location.type == getattr(driver.CUmemLocationType, location)
        if location.endswith("DEVICE"):
            assert p.poolProps.location.id == device.device_id
        assert p.bytesize == N * 4 and p.accessDescCount == 0
    finally:
        lowered.destroy()


def test_the_host_reads_host_memory_of_an_eager_run_in_place(gpu, kernels, stream, monkeypatch):
    """An eager run's host allocation is pinned host memory the kernels reach and the host reads at the same
    address (a host node reads it between the kernel and the free)."""
    g = cg.Graph("host reads")
    a = g.alloc(N * 4, memory_type="host", name="buf")
    z = g.memset(a, np.float32(3.0), after=a)
    k = g.kernel(kernels.scale_add, N // BLOCK, BLOCK, (a, np.float32(2), np.float32(1), np.int32(N)), after=z)
    seen: list[np.ndarray] = []
    addresses: list[int] = []

    def read() -> None:
        (addr,) = addresses
        seen.append(np.frombuffer(ctypes.string_at(addr, N * 4), np.float32).copy())

    h = g.host(read, after=k, name="read")
    g.free(a, after=h)
    from cudagraph.ops.kinds import memory

    real = memory.AllocOps.issue

    def issue(self: Any, node: Any, s: Any, run: Any) -> None:  # the address the run allocated
        real(self, node, s, run)
        addresses.append(run.state.allocs[id(node)][1])

    monkeypatch.setattr(memory.AllocOps, "issue", issue)
    g.run(stream)
    stream.sync()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], np.full(N, 7.0, np.float32))


def test_devices_the_machine_lacks_are_refused_by_name_before_anything_is_built(gpu, kernels, stream):
    from cudagraph.driver.devices import device_count

    count = device_count()
    host_in, host_out = np.zeros(N, np.float32), np.zeros(N, np.float32)
    for placement, text in (
        ({"device": count}, f"device names device {count}, but the driver has {count} device(s)"),
        ({"peer_access": [count + 1]}, f"peer_access names device {count + 1}, but the driver has {count}"),
        ({"memory_type": "host", "peer_access": [count]}, f"peer_access names device {count}, but the driver"),
    ):
        g, _a = _graph(kernels, host_in, host_out, **placement)
        for how in ("explicit", "eager"):
            with pytest.raises(errors.UnsupportedError) as info:
                if how == "eager":
                    g.run(stream)
                else:
                    g.instantiate(backend=how)
            assert f"alloc#0 'buf' of Graph 'placed': {text}" in str(info.value)
    stream.sync()


def test_compat_allocate_places_memory_as_cuda_core_does(gpu, kernels, stream):
    from cudagraph import compat

    host_out = np.zeros(N, np.float32)
    gd = compat.GraphDefinition()
    a = gd.allocate(N * 4, memory_type="managed")
    f = a.memset(a.dptr, np.float32(5.0), N)
    c = f.memcpy(host_out, a.dptr, N * 4)
    c.deallocate(a.dptr)
    assert (a.memory_type, a.device_id, a.peer_access) == ("managed", None, ())
    with gd.instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(host_out, np.full(N, 5.0, np.float32))
