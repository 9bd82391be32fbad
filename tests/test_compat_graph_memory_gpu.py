"""A builder's stream, asked for while building, records as cuda.core's does (stream capture): cuda.core's
``GraphMemoryResource`` allocates into it, ``Buffer`` copies and fills go into it, and launches into the builder
are recorded in order among them. The same programs run through cuda.core and through cudagraph.compat (the
``graph_api`` parametrization); results are read back and compared."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SOURCE = r"""
extern "C" __global__ void add_one(char* a, size_t n) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) a[i] += 1;
}
extern "C" __global__ void set_zero(char* a, size_t n) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) a[i] = 0;
}
"""
N = 64


@pytest.fixture(scope="module")
def k(nvrtc: Any) -> Any:
    return nvrtc(SOURCE, ("add_one", "set_zero"))


def api(G: Any) -> tuple[Any, Any]:
    import cuda.core

    import cudagraph

    if G is cudagraph.compat:
        return G.Device, G.launch
    return cuda.core.Device, cuda.core.launch


def cfg() -> Any:
    from cuda.core import LaunchConfig

    return LaunchConfig(grid=1, block=64)


def filled(gpu: Any, value: int) -> Any:
    """A device buffer of ``N`` bytes, each ``value``."""
    buf = gpu.alloc(N)
    gpu.write(buf, np.full(N, value, np.uint8))
    return buf


def graph_memory(device: Any) -> Any:
    from cuda.core import GraphMemoryResource

    if not device.properties.memory_pools_supported:
        pytest.skip("the device has no memory pools (graph memory)")
    return GraphMemoryResource(device)


@pytest.mark.parametrize("mode", ["relaxed", "global", "thread_local"])
def test_an_allocation_used_and_freed_inside_the_graph(graph_api, k, gpu, stream, device, mode):
    Device, launch = api(graph_api)
    gmr = graph_memory(device)
    out = filled(gpu, 0)
    gb = Device().create_graph_builder().begin_building(mode)
    scratch = gmr.allocate(N, stream=gb)
    scratch.copy_from(out, stream=gb)
    for _ in range(3):
        launch(gb, cfg(), k.add_one, scratch, np.uint64(N))
    out.copy_from(scratch, stream=gb)
    scratch.close()
    exe = gb.end_building().complete()
    for expected in (3, 6):
        exe.launch(stream)
        stream.sync()
        assert (gpu.read(out, N, np.uint8) == expected).all()


def test_launches_before_the_stream_is_asked_for_come_first(graph_api, k, gpu, stream, device):
    Device, launch = api(graph_api)
    gmr = graph_memory(device)
    out = filled(gpu, 9)
    gb = Device().create_graph_builder().begin_building()
    launch(gb, cfg(), k.set_zero, out, np.uint64(N))  # before: an explicit node in compat
    scratch = gmr.allocate(N, stream=gb)
    scratch.fill(5, stream=gb)
    launch(gb, cfg(), k.add_one, scratch, np.uint64(N))
    out.copy_from(scratch, stream=gb)
    scratch.close()
    exe = gb.end_building().complete()
    exe.launch(stream)
    stream.sync()
    assert (gpu.read(out, N, np.uint8) == 6).all()


def test_an_allocation_that_outlives_the_graph(graph_api, k, gpu, stream, device):
    from cuda.core.graph import GraphCompleteOptions

    Device, launch = api(graph_api)
    gmr = graph_memory(device)
    src = filled(gpu, 4)
    gb = Device().create_graph_builder().begin_building()
    out = gmr.allocate(N, stream=gb)
    out.copy_from(src, stream=gb)
    launch(gb, cfg(), k.add_one, out, np.uint64(N))
    exe = gb.end_building().complete(GraphCompleteOptions(auto_free_on_launch=True))
    exe.launch(stream)
    stream.sync()
    assert (gpu.read(out, N, np.uint8) == 5).all()
    gpu.write(src, np.full(N, 10, np.uint8))
    exe.launch(stream)
    stream.sync()
    assert (gpu.read(out, N, np.uint8) == 11).all()


def test_graph_memory_refuses_a_stream_that_is_not_captured(graph_api, device, stream):
    Device, _ = api(graph_api)
    gmr = graph_memory(device)
    with pytest.raises(RuntimeError, match="non-capturing stream"):
        gmr.allocate(1, stream=stream)
    gb = Device().create_graph_builder().begin_building()
    gmr.allocate(1, stream=gb)  # the builder's stream is under capture
    gb.end_building().complete()


def test_a_recording_without_graph_memory_is_lifted_and_builds_again(k, gpu, stream):
    from cuda.core import launch as core_launch

    import cudagraph
    from cudagraph import compat

    out = filled(gpu, 0)
    gb = compat.Device().create_graph_builder().begin_building()
    core_launch(gb.stream, cfg(), k.add_one, out, np.uint64(N))  # cuda.core's own launch, into the capture
    compat.launch(gb, cfg(), k.add_one, out, np.uint64(N))  # recorded into the same capture
    gb.end_building()
    (node,) = gb.graph.nodes
    assert isinstance(node, cudagraph.ChildGraphNode) and [n.kind for n in node.body.nodes] == ["kernel", "kernel"]
    for exe in (gb.complete(), gb.complete()):  # built twice: a lifted recording is an ordinary definition
        exe.launch(stream)
        stream.sync()
    assert (gpu.read(out, N, np.uint8) == 4).all()


def test_a_recording_with_graph_memory_is_built_once(device, stream):
    from cudagraph import compat
    from cudagraph.definition.kinds.opaque import CapturedGraphNode
    from cudagraph.errors import UnsupportedError

    gmr = graph_memory(device)
    gb = compat.Device().create_graph_builder().begin_building()
    gmr.allocate(N, stream=gb).close()
    gb.end_building()
    (node,) = gb.graph.nodes
    assert isinstance(node, CapturedGraphNode) and node.source.node_count == 2
    gb.complete().launch(stream)
    stream.sync()
    with pytest.raises(UnsupportedError, match="moved into the first graph built") as info:
        gb.complete()
    assert info.value.node is node


def test_ops_a_capture_cannot_record_are_refused_and_close_drops_the_capture(device):
    from cudagraph import compat
    from cudagraph.driver.calls import require_driver
    from cudagraph.errors import StateError

    gb = compat.Device().create_graph_builder().begin_building()
    s = gb.stream
    assert gb.stream is s and gb.is_building and gb.__cuda_stream__()[1] == int(s.handle)
    for call in (lambda: gb.split(2), gb.create_condition, lambda: gb.callback(print)):
        with pytest.raises(StateError, match="stream is under capture"):
            call()
    drv = require_driver()
    assert drv.cuStreamIsCapturing(s.handle)[1] == drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
    gb.close()
    assert drv.cuStreamIsCapturing(s.handle)[1] == drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
    assert gb.is_closed
