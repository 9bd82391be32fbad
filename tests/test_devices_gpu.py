"""``Graph.kernel(..., device=)`` on a GPU: nodes placed on device 0 (by ordinal or by cuda.core ``Device``)
compute what the same graph without devices computes, rebind and update alike, and an ordinal the
machine lacks is refused by ``instantiate``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.errors import UnsupportedError

pytestmark = pytest.mark.gpu

N = 256
#: (a, k) of each in-place step x = x * a + k; every intermediate value is exact in float32.
STEPS = [(2.0, 1.0), (0.5, 3.0), (3.0, -1.0), (2.0, 0.0), (0.5, 0.5), (4.0, -2.0)]


def _reference(x0: np.ndarray) -> np.ndarray:
    x = x0.astype(np.float32)
    for a, k in STEPS:
        x = x * np.float32(a) + np.float32(k)
    return x


def _chain(kernels: Any, x: Any, devices: list[Any]) -> cg.Graph:
    g = cg.Graph("steps")
    prev = None
    for i, ((a, k), dev) in enumerate(zip(STEPS, devices)):
        args = (x, np.float32(a), np.float32(k), np.int32(N))
        prev = g.kernel(kernels.scale_add, 1, N, args, device=dev, after=prev, name=f"s{i}")
    return g


def _device_count() -> int:
    from cuda.bindings import driver

    err, count = driver.cuDeviceGetCount()
    assert not err
    return int(count)


def test_a_chain_on_device_0_computes_what_it_computes_without_devices(gpu, kernels, stream, device):
    x0 = np.arange(N, dtype=np.float32) - 100
    plain_buf, placed_buf = gpu.upload(x0), gpu.upload(x0)
    plain = _chain(kernels, plain_buf, [None] * len(STEPS))
    placed = _chain(kernels, placed_buf, [0, device, None, 0, device, None])
    assert [n.device for n in placed._nodes] == [0, 0, None, 0, 0, None]
    assert "@dev0" in placed.summary()
    with plain.instantiate() as e1, placed.instantiate() as e2:
        e1.launch(stream)
        e2.launch(stream)
        stream.sync()
        got_plain, got_placed = gpu.read(plain_buf, N), gpu.read(placed_buf, N)
    np.testing.assert_array_equal(got_placed, got_plain)
    np.testing.assert_array_equal(got_placed, _reference(x0))


def test_every_node_on_device_0_and_an_eager_run_agree(gpu, kernels, stream, device):
    x0 = np.arange(N, dtype=np.float32)
    built, eager = gpu.upload(x0), gpu.upload(x0)
    with _chain(kernels, built, [device] * len(STEPS)).instantiate() as exe:
        exe.launch(stream)
        stream.sync()
    _chain(kernels, eager, [0] * len(STEPS)).run(stream)
    stream.sync()
    np.testing.assert_array_equal(gpu.read(built, N), _reference(x0))
    np.testing.assert_array_equal(gpu.read(eager, N), _reference(x0))


def test_bind_rebinds_a_pointer_of_a_node_on_device_0(gpu, kernels, stream, device):
    first, second = gpu.upload(np.full(N, 1.0, np.float32)), gpu.upload(np.full(N, 10.0, np.float32))
    g = cg.Graph("bind")
    x = g.param("x")
    g.kernel(kernels.scale_add, 1, N, (x, np.float32(2.0), np.float32(1.0), np.int32(N)), device=0, name="on0")
    with g.instantiate(x=first) as exe:
        exe.launch(stream)
        stream.sync()
        np.testing.assert_array_equal(gpu.read(first, N), np.full(N, 3.0, np.float32))
        assert exe.bind(x=second) == 1
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(gpu.read(second, N), np.full(N, 21.0, np.float32))
    np.testing.assert_array_equal(gpu.read(first, N), np.full(N, 3.0, np.float32))  # not touched again


def test_update_sets_a_node_on_device_0(gpu, kernels, stream, device):
    buf = gpu.upload(np.full(N, 1.0, np.float32))

    def build(a: float) -> cg.Graph:
        g = cg.Graph("upd")
        g.kernel(kernels.scale_add, 1, N, (buf, np.float32(a), np.float32(0.0), np.int32(N)), device=device, name="k")
        return g

    with build(2.0).instantiate() as exe:
        exe.update(build(5.0))
        exe.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(gpu.read(buf, N), np.full(N, 5.0, np.float32))


def test_an_ordinal_the_machine_lacks_is_refused_by_instantiate(gpu, kernels, device):
    count = _device_count()
    if count >= 2:
        pytest.skip(f"the machine has {count} GPUs: device=1 exists")
    buf = gpu.upload(np.zeros(N, np.float32))
    g = _chain(kernels, buf, [None, 1, None, None, None, None])
    msg = r"kernel#1 's1' of Graph 'steps': device=1, but the driver has 1 device\(s\) \(ordinals 0..0\)"
    with pytest.raises(UnsupportedError, match=msg):
        g.instantiate()
    g._nodes[1].update(device=0)
    with g.instantiate() as exe:  # the same definition, on a device it has
        exe.launch()
    np.testing.assert_array_equal(gpu.read(buf, N), _reference(np.zeros(N, np.float32)))
