"""The same programs, written against cuda.core 1.2's graph API, run through cuda.core and through cudagraph.compat
(the ``graph_api`` parametrization): kernel arguments passed as Python bools and ints, a graph allocation no node
frees, and the exception class of a refused argument. Results are read back and compared."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SOURCE = r"""
extern "C" __global__ void store(bool b, int v, short s, int* out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = b ? 1 : 0;
        out[1] = v;
        out[2] = (int)s;
    }
}
extern "C" __global__ void add_one(int* x) {
    if (blockIdx.x == 0 && threadIdx.x == 0) x[0] += 1;
}
"""


@pytest.fixture(scope="module")
def k(nvrtc: Any) -> Any:
    return nvrtc(SOURCE, ("store", "add_one"))


def cfg() -> Any:
    from cuda.core import LaunchConfig

    return LaunchConfig(grid=1, block=1)


def builder_api(G: Any) -> tuple[Any, Any]:
    """``(Device, launch)`` of the API ``G`` belongs to."""
    import cuda.core

    import cudagraph

    if G is cudagraph.compat:
        return G.Device, G.launch
    return cuda.core.Device, cuda.core.launch


@pytest.mark.parametrize(("flag", "value", "short"), [(True, 7, -3), (False, -1, 2)])
def test_python_bool_and_int_arguments_in_a_definition(graph_api, k, gpu, stream, flag, value, short):
    out = gpu.alloc(16)
    gd = graph_api.GraphDefinition()
    gd.launch(cfg(), k.store, flag, value, short, out)
    exe = gd.instantiate()
    exe.launch(stream)
    stream.sync()
    assert list(gpu.read(out, 3, np.int32)) == [int(flag), value, short]


def test_python_bool_and_int_arguments_in_a_builder(graph_api, k, gpu, stream):
    Device, launch = builder_api(graph_api)
    outs = [gpu.alloc(16) for _ in range(3)]
    gb = Device().create_graph_builder().begin_building()
    for i, out in enumerate(outs):  # repeated calls: the same config and kernel each time
        launch(gb, cfg(), k.store, i % 2 == 0, 10 + i, -i, out)
    exe = gb.end_building().complete()
    exe.launch(stream)
    stream.sync()
    assert [list(gpu.read(out, 3, np.int32)) for out in outs] == [[1, 10, 0], [0, 11, -1], [1, 12, -2]]


def test_an_allocation_no_node_frees_is_instantiated_and_launched(graph_api, k, stream):
    gd = graph_api.GraphDefinition()
    a = gd.allocate(1024)
    fill = a.memset(a.dptr, 0, 1024)
    fill.launch(cfg(), k.add_one, a.dptr)
    exe = gd.instantiate()
    exe.launch(stream)
    stream.sync()


def test_an_argument_of_no_kernel_type_is_a_type_error(graph_api, k, gpu):
    gd = graph_api.GraphDefinition()
    with pytest.raises(TypeError):
        gd.launch(cfg(), k.store, "no", 1, 2, gpu.alloc(16))


def refusal_classes(exc: BaseException) -> set[str]:
    """The classes of ``exc`` a ported program may catch: the built-in ones and cuda.core's ``CUDAError``."""
    names = {"RuntimeError", "ValueError", "TypeError", "CUDAError"}
    return {c.__name__ for c in type(exc).__mro__ if c.__name__ in names}


def edge_refusals(G: Any) -> list[BaseException | None]:
    """What ``G``'s ``succ.add`` raises (``None``: nothing) for an edge to the node itself, to a node of another
    definition and to a destroyed node; no edge is added by any of them."""
    gd, other = G.GraphDefinition(), G.GraphDefinition()
    a, b, c = gd.empty(), gd.empty(), other.empty()
    b.destroy()
    raised: list[BaseException | None] = []
    for call in (lambda: a.succ.add(a), lambda: a.succ.add(c), lambda: a.succ.add(b)):
        try:
            call()
            raised.append(None)
        except Exception as e:
            raised.append(e)
    assert len(gd.edges()) == 0 and len(other.edges()) == 0
    return raised


def test_edge_refusals_are_caught_as_cuda_core_catches_them(gpu):
    import cuda.core.graph

    import cudagraph

    theirs = edge_refusals(cuda.core.graph)
    ours = edge_refusals(cudagraph.compat)
    # an edge to another definition's node: cuda.core refuses it itself (ValueError), the others reach the driver
    assert theirs[1] is not None and refusal_classes(theirs[1]) == {"ValueError"}
    assert theirs[0] is not None and refusal_classes(theirs[0]) == {"CUDAError"}
    assert theirs[2] is not None, "cuda.core accepts an edge to a destroyed node"
    for mine, reference in zip(ours, theirs):
        assert isinstance(mine, cudagraph.errors.CudaGraphError)
        assert refusal_classes(reference) <= refusal_classes(mine), (mine, reference)


def test_builder_states_raise_cuda_cores_classes(graph_api, k):
    Device, launch = builder_api(graph_api)
    gb = Device().create_graph_builder()
    seen = []
    for call in (gb.complete, lambda: gb.split(2), lambda: gb.graph_definition, gb.end_building):
        with pytest.raises(Exception) as info:
            call()
        seen.append(refusal_classes(info.value))
    gb.begin_building()
    for call in (gb.begin_building, gb.complete, lambda: gb.graph_definition, lambda: gb.split(1)):
        with pytest.raises(Exception) as info:
            call()
        seen.append(refusal_classes(info.value))
    launch(gb, cfg(), k.add_one, 0)  # (never launched)
    gb.end_building()
    with pytest.raises(Exception) as info:
        gb.begin_building()
    seen.append(refusal_classes(info.value))
    assert len(gb.graph_definition.nodes()) == 1
    assert seen == [{"RuntimeError"}] * 7 + [{"ValueError"}, {"RuntimeError"}]


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_every_build_mode_completes(graph_api, k, gpu, stream, mode):
    Device, launch = builder_api(graph_api)
    out = gpu.alloc(16)
    gb = Device().create_graph_builder().begin_building(mode=mode)
    launch(gb, cfg(), k.store, True, 5, 6, out)
    gb.end_building().complete().launch(stream)
    stream.sync()
    assert list(gpu.read(out, 3, np.int32)) == [1, 5, 6]


def test_debug_dot_print_with_every_flag(graph_api, gpu, tmp_path):
    gd = graph_api.GraphDefinition()
    a, b = gd.empty(), gd.empty()
    a.succ.add(b)
    options = graph_api.GraphDebugPrintOptions(
        **{f: True for f in graph_api.GraphDebugPrintOptions.__dataclass_fields__}
    )
    path = tmp_path / "g.dot"
    gd.debug_dot_print(str(path), options)  # (cuda.core 1.2 takes a str path; bytes are a TypeError)
    assert path.read_text().lstrip().startswith("digraph")


# ------------------------------------------------------------------------------------------ graph memory, lifetimes
class Owner:
    """Something a program hands a node to keep alive (weak-referenceable)."""


def released_soon(ref: Any) -> bool:
    """Whether ``ref`` dies within a few seconds of collections (cuda.core releases attachments asynchronously)."""
    import gc
    import time

    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        gc.collect()
        if ref() is None:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize(
    ("size", "memory_type", "builtin"), [(-1, "device", OverflowError), (64, "pinned", ValueError)]
)
def test_allocation_refusals_have_cuda_cores_classes(graph_api, gpu, size, memory_type, builtin):
    with pytest.raises(builtin):
        graph_api.GraphDefinition().allocate(size, memory_type=memory_type)


def test_a_zero_size_allocation_is_a_cuda_error(graph_api, gpu):
    from cuda.core._utils.cuda_utils import CUDAError

    with pytest.raises(CUDAError):
        graph_api.GraphDefinition().allocate(0)


def test_an_allocations_dptr_is_an_address_a_driver_call_reads(graph_api, k, stream):
    from cuda.bindings import driver as drv

    gd = graph_api.GraphDefinition()
    a = gd.allocate(16)
    a.memset(a.dptr, 0, 16).launch(cfg(), k.add_one, a.dptr)
    exe = gd.instantiate()
    exe.launch(stream)
    stream.sync()
    out = np.zeros(4, np.int32)
    (err,) = drv.cuMemcpyDtoH(out.ctypes.data, a.dptr, 16)
    assert not err and list(out) == [1, 0, 0, 0] and isinstance(a.dptr, int)


def test_an_executable_keeps_a_destroyed_nodes_callable(graph_api, stream):
    calls = []

    def fn() -> None:
        calls.append(1)

    refs = [weakref.ref(fn)]
    gd = graph_api.GraphDefinition()
    node = gd.callback(fn)
    exe = gd.instantiate()
    node.destroy()
    del fn, node, gd
    assert not released_soon(refs[0])
    exe.launch(stream)
    stream.sync()
    assert calls == [1]
    del exe
    assert released_soon(refs[0])


def test_owners_live_while_an_executable_does(graph_api, gpu, stream):
    buf = gpu.alloc(8)
    address = int(buf.handle)
    dst, src = Owner(), Owner()
    refs = [weakref.ref(dst), weakref.ref(src)]
    gd = graph_api.GraphDefinition()
    node = gd.memcpy(address, address + 4, 4, dst_owner=dst, src_owner=src)
    exe = gd.instantiate()
    node.destroy()
    del dst, src, node, gd
    assert not any(released_soon(r) for r in refs)
    del exe
    assert all(released_soon(r) for r in refs)


@pytest.mark.parametrize("kind", ["if", "while", "switch"])
def test_destroying_a_conditional_nulls_its_bodies_handles_and_releases_them(graph_api, gpu, kind):
    gd = graph_api.GraphDefinition()
    c = gd.create_condition(default_value=0)
    node = {"if": lambda: gd.if_then(c), "while": lambda: gd.while_loop(c), "switch": lambda: gd.switch(c, 2)}[kind]()
    bodies = list(node.branches)

    def fn() -> None:
        pass

    ref = weakref.ref(fn)
    inner = [b.callback(fn) for b in bodies]
    del fn
    assert not released_soon(ref)
    node.destroy()
    assert all(int(b.handle) == 0 for b in bodies) and not any(n.is_valid for n in inner)
    del node, inner
    assert released_soon(ref)


def test_destroying_a_child_node_nulls_its_embedded_views(graph_api, gpu):
    inner = graph_api.GraphDefinition()
    inner.callback(lambda: None)
    outer = graph_api.GraphDefinition()
    child = outer.embed(inner)
    view = child.child_graph
    (seen,) = view.nodes()
    child.destroy()
    assert not child.is_valid and int(view.handle) == 0 and not seen.is_valid


def test_a_clone_of_the_handle_runs_after_the_definition_and_its_event_are_gone(graph_api, k, gpu, device, stream):
    """A program clones ``gd.handle`` (``cuGraphClone``), then drops the definition and the event its nodes record
    and wait on: the clone still launches (cuda.core keeps them with CUDA user objects; a clone of a graph whose
    event was destroyed faulted the driver), and what the nodes held goes once the clone is destroyed."""
    import gc

    from cuda.bindings import driver as drv

    out = gpu.alloc(16)
    gpu.write(out, np.zeros(4, np.int32))
    gd = graph_api.GraphDefinition()
    event = device.create_event()
    gd.record(event).wait(event).launch(cfg(), k.add_one, out)

    def callback() -> None:
        pass

    ref = weakref.ref(callback)
    gd.callback(callback)
    err, clone = drv.cuGraphClone(drv.CUgraph(int(gd.handle)))
    assert err == drv.CUresult.CUDA_SUCCESS
    del event, gd, callback
    gc.collect()
    assert not released_soon(ref)  # the clone holds it
    err, exe = drv.cuGraphInstantiate(clone, 0)
    assert err == drv.CUresult.CUDA_SUCCESS
    for _ in range(2):
        assert drv.cuGraphLaunch(exe, drv.CUstream(int(stream.handle)))[0] == drv.CUresult.CUDA_SUCCESS
    stream.sync()
    assert list(gpu.read(out, 1, np.int32)) == [2]
    assert drv.cuGraphExecDestroy(exe)[0] == drv.cuGraphDestroy(clone)[0] == drv.CUresult.CUDA_SUCCESS
    assert released_soon(ref)
