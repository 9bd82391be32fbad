"""What a compat definition keeps alive and releases, as cuda.core's does (weak references and the collector show
it without a GPU), the int ``dptr`` of a graph allocation, and the classes an allocation's size and memory type are
refused with."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cudagraph import compat
from cudagraph.errors import CudaGraphError
from cudagraph.frontends.compat.common import kernel_args
from cudagraph.frontends.compat.lifetimes import OWNERS, AllocAddress, record_addresses


class Owner:
    """Something a program hands a node to keep alive (weak-referenceable)."""


def released(ref: weakref.ref[Any]) -> bool:
    gc.collect()
    return ref() is None


def conditional(gd: Any, kind: str) -> tuple[Any, list[Any]]:
    c = gd.create_condition(0)
    if kind == "if":
        n = gd.if_then(c)
        return n, [n.then]
    if kind == "if_else":
        n = gd.if_else(c)
        return n, [n.then, n.else_]
    if kind == "while":
        n = gd.while_loop(c)
        return n, [n.body]
    n = gd.switch(c, 3)
    return n, list(n.branches)


def test_owners_live_with_their_node_and_go_with_it():
    gd = compat.GraphDefinition()
    dst, src = Owner(), Owner()
    refs = [weakref.ref(dst), weakref.ref(src)]
    copy = gd.memcpy(0x2000, 0x1000, 4, dst_owner=dst, src_owner=src)
    kept = gd.memset(0x3000, 1, 4, dst_owner=Owner())
    del dst, src
    assert not any(released(r) for r in refs)
    node = copy.node  # what an executable made before holds: the node, and through it the owners
    copy.destroy()
    del copy
    assert not any(released(r) for r in refs) and OWNERS[node]
    del node
    assert all(released(r) for r in refs)
    assert len(OWNERS[kept.node]) == 1  # the other node keeps its own


def test_owners_given_by_an_update_go_with_the_definition():
    gd = compat.GraphDefinition()
    owner = Owner()
    ref = weakref.ref(owner)
    gd.memcpy(0x2000, 0x1000, 4).update(src=0x4000, src_owner=owner)
    del owner
    assert not released(ref)
    del gd
    assert released(ref)


def test_a_destroyed_node_releases_its_callable():
    gd = compat.GraphDefinition()

    def fn() -> None:
        pass

    ref = weakref.ref(fn)
    node = gd.callback(fn)
    gd.nodes()  # (wrappers made for every node are no reference of their own)
    del fn
    assert not released(ref)
    node.destroy()
    del node
    assert released(ref)


@pytest.mark.parametrize("kind", ["if", "if_else", "while", "switch"])
def test_destroying_a_conditional_releases_and_invalidates_its_bodies(kind):
    gd = compat.GraphDefinition()
    node, bodies = conditional(gd, kind)
    refs, inner = [], []
    for body in bodies:

        def fn() -> None:
            pass

        refs.append(weakref.ref(fn))
        inner.append(body.callback(fn))
    nested_node, nested = conditional(bodies[0], "if")  # a body's body goes with it
    inner.append(nested[0].callback(fn))
    del fn
    assert all(b.is_valid for b in bodies + nested) and all(n.is_valid for n in inner)
    assert not any(released(r) for r in refs)
    node.destroy()
    assert not any(b.is_valid for b in bodies + nested) and not any(n.is_valid for n in inner)
    assert all(int(b.handle) == 0 for b in bodies + nested)  # cuda.core's null handle of a body whose node is gone
    hashes = [hash(b) for b in bodies]
    assert [hash(b) for b in bodies] == hashes and len(set(bodies)) == len(bodies)
    del node, nested_node, inner, body
    # the program still holds the bodies: what their nodes kept goes all the same, as under cuda.core
    assert all(released(r) for r in refs)
    assert all(b.nodes() == set() for b in bodies + nested)


@pytest.mark.parametrize("kind", ["if", "if_else", "while", "switch"])
def test_bodies_outlive_their_definition_and_take_nodes(kind):
    gd = compat.GraphDefinition()
    _, bodies = conditional(gd, kind)
    del gd, _
    gc.collect()
    for body in bodies:
        assert body.nodes() == set() and body.is_valid
        body.empty()
        assert len(body.nodes()) == 1


def test_destroying_a_child_node_invalidates_its_embedded_views_only():
    inner = compat.GraphDefinition()
    cb = inner.callback(lambda: None)
    outer = compat.GraphDefinition()
    child = outer.embed(inner)
    view = child.child_graph
    (seen,) = view.nodes()
    child.destroy()
    assert not child.is_valid and not view.is_valid and not seen.is_valid and int(view.handle) == 0
    assert inner.is_valid and cb.is_valid  # the program's own definition is not the embedded one


def test_a_child_view_outlives_its_parent():
    inner = compat.GraphDefinition()
    inner.empty()
    inner.empty()
    outer = compat.GraphDefinition()
    view = outer.embed(inner).child_graph
    del outer, inner
    gc.collect()
    assert len(view.nodes()) == 2 and view.is_valid


def test_a_definition_is_collected_with_what_it_keeps():
    gd = compat.GraphDefinition()

    def fn() -> None:
        pass

    refs = [weakref.ref(gd), weakref.ref(fn)]
    gd.callback(fn).memcpy(0x2000, 0x1000, 4, dst_owner=Owner())
    gd.nodes()
    del gd, fn
    assert all(released(r) for r in refs)


# ------------------------------------------------------------------------------------------ graph memory
@pytest.mark.parametrize(
    ("size", "memory_type", "builtin"),
    [
        (0, None, ValueError),  # the driver refuses 0 bytes (cuda.core: CUDAError)
        (-1, None, OverflowError),  # cuda.core's size_t
        (1.5, None, TypeError),
        (64, "pinned", ValueError),
        (64, 5, ValueError),
    ],
)
def test_allocation_refusals_have_cuda_cores_classes_and_add_nothing(size, memory_type, builtin):
    gd = compat.GraphDefinition()
    with pytest.raises(builtin) as info:
        gd.allocate(size, memory_type=memory_type)
    assert isinstance(info.value, CudaGraphError) and "compat GraphNode.allocate" in str(info.value)
    assert gd.nodes() == set()


def test_a_zero_size_allocation_is_cuda_cores_cuda_error_when_installed():
    from cudagraph.frontends.compat.common import DriverRefusal

    with pytest.raises(DriverRefusal):
        compat.GraphDefinition().allocate(0)


def test_a_memory_type_enum_is_taken_by_its_value():
    enum = SimpleNamespace(value="host")
    assert compat.GraphDefinition().allocate(64, memory_type=enum).memory_type == "host"


def test_an_allocations_dptr_is_an_int_that_builders_take_as_the_allocation():
    gd = compat.GraphDefinition()
    a = gd.allocate(64)
    p = a.dptr
    assert isinstance(p, int) and p == 0 and p.alloc is a.node  # no address before a build
    fill = a.memset(p, 0, 64)
    copy = fill.memcpy(0x9000, p, 64)
    free = copy.deallocate(p)
    assert fill.node.dst is a.node and copy.node.src is a.node and free.node.alloc is a.node
    assert free.dptr.alloc is a.node and fill.dptr.alloc is a.node
    record_addresses(SimpleNamespace(allocs={id(a.node): (a.node, 0x7F0000)}))  # what a build reports
    assert a.dptr == 0x7F0000 and free.dptr == 0x7F0000 and int(fill.dptr) == 0x7F0000
    assert kernel_args((a.dptr, np.int32(1)))[0] is a.node  # a node added later uses its own build's address
    now = kernel_args((a.dptr,), now=True)[0]
    assert type(now) is int and now == 0x7F0000  # a launch on a stream runs now: the address


def test_an_alloc_address_of_a_node_gone_is_forgotten():
    gd = compat.GraphDefinition()
    a = gd.allocate(64)
    node = a.node
    record_addresses(SimpleNamespace(allocs={id(node): (node, 0x1000)}))
    ref = weakref.ref(node)
    a.destroy()
    del a, node
    assert released(ref)
    assert isinstance(AllocAddress, type)


def test_a_destroyed_node_refuses_edges_and_updates_as_cuda_core_does():
    gd = compat.GraphDefinition()
    a, b = gd.empty(), gd.empty()
    b.destroy()
    for edit in (lambda: a.succ.add(b), lambda: b.pred.add(a)):
        with pytest.raises(RuntimeError, match="GraphNode has been destroyed") as info:
            edit()
        assert isinstance(info.value, ValueError) and isinstance(info.value, CudaGraphError)  # (earlier versions)
    assert gd.edges() == set()
    node = gd.memset(0x1000, 1, 4)
    node.destroy()
    with pytest.raises(RuntimeError, match="GraphNode has been destroyed"):
        node.update(value=2)


def test_a_buffer_closed_after_its_node_was_added_is_refused_when_the_graph_is_built():
    from cudagraph.errors import StateError
    from cudagraph.frontends.compat.common import instantiate
    from cudagraph.frontends.compat.lifetimes import check_open_buffers

    class Buffer:  # a cuda.core Buffer: its handle reads 0 once closed
        def __init__(self, address: int) -> None:
            self.handle, self.size, self.memory_resource = address, 64, None

        def close(self) -> None:
            self.handle = 0

    gd = compat.GraphDefinition()
    src, dst = Buffer(0x1000), Buffer(0x2000)
    gd.memcpy(dst, src, 8)
    check_open_buffers(gd.graph)  # (open: nothing to say)
    src.close()
    closed = r"^memcpy#0 'memcpy' of Graph 'GraphDefinition': a cuda.core Buffer it uses was closed after"
    with pytest.raises(StateError, match=closed):
        check_open_buffers(gd.graph)
    with pytest.raises(RuntimeError, match=r"keep the Buffer open until the graph's last launch"):
        instantiate(gd.graph, None)  # (refused before anything is built)
