"""Graph memory, pitched copies and memory-operation nodes in the definition layer (GPU-free):
alloc / free builders, allocations as operands, every ordering and ownership check, the unfreed
allocation check of instantiate, memcpy2d / memcpy3d and write_value / wait_value.
"""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors


class CUkernel:
    """Stands in for cuda.bindings.driver.CUkernel."""


K = CUkernel()
PTR = 0x10000


class Buffer:
    def __init__(self, handle: int, size: int) -> None:
        self.handle, self.size, self.memory_resource = handle, size, object()


# =============================================================================== alloc / free


def test_alloc_and_free_nodes():
    g = cg.Graph("g")
    a = g.alloc(4096, name="tmp")
    assert isinstance(a, cg.AllocNode) and a.kind == "alloc" and a.nbytes == 4096 and a.freed_by is None
    k = g.kernel(K, 4, 128, (a, np.int32(3)), after=a)
    f = g.free(a, after=k, name="release")
    assert isinstance(f, cg.FreeNode) and f.alloc is a and a.freed_by is f
    assert "4096 B freed by #2" in a.describe() and "frees alloc#0 'tmp'" in f.describe()
    g.validate()
    assert g._unfreed_allocs() == []


@pytest.mark.parametrize("bad", [0, -5])
def test_alloc_size_must_be_positive(bad):
    with pytest.raises(errors.DefinitionError, match="nbytes must be positive"):
        cg.Graph().alloc(bad)


def test_alloc_as_operand_everywhere():
    g = cg.Graph("g")
    a = g.alloc(1024)
    m = g.memset(a, np.float32(1.0), after=a)
    assert m.dst is a and m.width == 256  # the count comes from the allocation's size
    c1 = g.memcpy(a.offset(512), PTR, after=m)
    assert c1.nbytes == 512 and c1.dst.alloc is a and c1.dst.offset == 512
    c2 = g.memcpy(PTR, a, after=c1)
    assert c2.nbytes == 1024
    k = g.kernel(K, 1, 1, (a, a.offset(8)), after=c2)
    p2 = g.memcpy2d(a, 64, PTR, 32, 32, 16, after=k)
    c = g.condition()
    s = g.set_condition(c, a, ">", 0, np.int32, after=p2)
    g.if_(c, after=s).body.kernel(K, 1, 1, (a,))
    g.free(a, after=g.nodes[-1])
    g.validate()
    assert "alloc#0+512" in c1.describe() and "alloc#0" in c2.describe()


def test_memory_operations_refuse_graph_allocations():
    g = cg.Graph("g")
    a = g.alloc(64)
    with pytest.raises(errors.OperandError, match="graph allocation") as ei:
        g.write_value(a, 1, after=a, name="signal")
    assert "write_value#1 'signal'" in str(ei.value)
    with pytest.raises(errors.OperandError, match="graph allocation"):
        g.wait_value(a.offset(8), 1, after=a)
    assert len(g) == 1


def test_alloc_offset_checks():
    g = cg.Graph("g")
    a = g.alloc(64)
    with pytest.raises(errors.DefinitionError, match="outside"):
        a.offset(64)
    with pytest.raises(errors.OperandError):
        a.offset(1.5)
    assert repr(a.offset(8)) == "<AllocOffset alloc#0 'alloc' + 8>"
    with pytest.raises(errors.DefinitionError, match="exceeds"):
        g.memcpy(a.offset(32), PTR, 64, after=a)


def test_free_of_something_not_allocated_in_this_graph():
    g, other = cg.Graph("g"), cg.Graph("other")
    a = other.alloc(16, name="theirs")
    with pytest.raises(errors.ForeignNodeError) as ei:
        g.free(a, name="mine")
    assert "free#0 'mine'" in str(ei.value) and "alloc#0 'theirs'" in str(ei.value)
    with pytest.raises(errors.OperandError, match="AllocNode"):
        g.free(PTR)
    with pytest.raises(errors.OperandError, match="AllocNode"):
        g.free(a.offset(4))
    b = g.alloc(16)
    body = g.if_(g.condition(default=1)).body
    with pytest.raises(errors.ForeignNodeError):
        body.free(b)  # freed in the graph that allocated it
    assert len(other) == 1


def test_double_free():
    g = cg.Graph("g")
    a = g.alloc(16)
    f = g.free(a, after=a, name="first")
    with pytest.raises(errors.DefinitionError, match="double free") as ei:
        g.free(a, after=f, name="second")
    assert "free#2 'second'" in str(ei.value) and "free#1 'first'" in str(ei.value)
    assert len(g) == 2


def test_use_not_ordered_after_alloc():
    g = cg.Graph("g")
    a = g.alloc(64, name="buf")
    k = g.kernel(K, 1, 1, (a,), name="early")  # no after=a
    g.free(a, after=[a, k])
    with pytest.raises(errors.DefinitionError) as ei:
        g.validate()
    assert "kernel#1 'early'" in str(ei.value) and "alloc#0 'buf'" in str(ei.value)
    assert "not ordered after" in str(ei.value)


def test_use_after_free():
    g = cg.Graph("g")
    a = g.alloc(64)
    f = g.free(a, after=a)
    g.memset(a, 0, after=f, name="late")
    with pytest.raises(errors.DefinitionError, match="after it is freed") as ei:
        g.validate()
    assert "memset#2 'late'" in str(ei.value)


def test_use_not_ordered_before_free():
    g = cg.Graph("g")
    a = g.alloc(64)
    k = g.kernel(K, 1, 1, (a,), after=a, name="racy")
    g.free(a, after=a)  # not after k
    with pytest.raises(errors.DefinitionError, match="not ordered before") as ei:
        g.validate()
    assert "kernel#1 'racy'" in str(ei.value)
    del k


def test_free_not_ordered_after_alloc():
    g = cg.Graph("g")
    a = g.alloc(64)
    g.free(a, name="orphan")
    with pytest.raises(errors.DefinitionError, match="free#1 'orphan' frees alloc#0"):
        g.validate()


def test_uses_inside_bodies_are_ordered_through_the_conditional_node():
    g = cg.Graph("g")
    a = g.alloc(64)
    node = g.if_(g.condition(default=1), after=a, name="branch")
    node.body.kernel(K, 1, 1, (a,), name="inner")
    g.free(a, after=node)
    g.validate()
    # The same use, with the conditional node not ordered after the alloc.
    g2 = cg.Graph("g2")
    a2 = g2.alloc(64)
    node2 = g2.if_(g2.condition(default=1), name="branch")
    node2.body.kernel(K, 1, 1, (a2,), name="inner")
    g2.free(a2, after=[a2, node2])
    with pytest.raises(errors.DefinitionError) as ei:
        g2.validate()
    assert "kernel#0 'inner' (inside if#1 'branch')" in str(ei.value)


def test_allocation_of_an_unrelated_graph():
    g, other = cg.Graph("g"), cg.Graph("other")
    a = other.alloc(64)
    other.free(a, after=a)
    g.kernel(K, 1, 1, (a,), name="stranger")
    with pytest.raises(errors.ForeignNodeError) as ei:
        g.validate()
    assert "kernel#0 'stranger'" in str(ei.value) and "'other'" in str(ei.value)
    g2 = cg.Graph("g2")
    g2.memset(a, 0, name="stranger")
    with pytest.raises(errors.ForeignNodeError):
        g2._validate_structure()


def test_allocation_used_in_a_child_graph_of_its_graph():
    g = cg.Graph("g")
    a = g.alloc(64)
    child = cg.Graph("child")
    child.kernel(K, 1, 1, (a,))
    ch = g.child(child, after=a)
    g.free(a, after=ch)
    g.validate()


def test_instantiate_rejects_unfreed_allocation_without_auto_free():
    g = cg.Graph("g")
    a = g.alloc(64, name="kept")
    g.kernel(K, 1, 1, (a,), after=a)
    with pytest.raises(errors.DefinitionError, match="never freed") as ei:
        g.instantiate()
    assert "alloc#0 'kept'" in str(ei.value) and "auto_free_on_launch=True" in str(ei.value)
    assert g._unfreed_allocs() == [a]


def test_alloc_and_free_cannot_be_updated():
    g = cg.Graph("g")
    a = g.alloc(64)
    f = g.free(a, after=a)
    with pytest.raises(errors.DefinitionError):
        a.update(nbytes=128)
    with pytest.raises(errors.DefinitionError):
        f.update()


# =============================================================================== pitched copies


def test_memcpy2d_fields_and_defaults():
    g = cg.Graph("g")
    n = g.memcpy2d(PTR, 256, PTR + 4096, 128, 100, 8, name="tile")
    assert isinstance(n, cg.Memcpy2DNode) and isinstance(n, cg.Memcpy3DNode) and n.kind == "memcpy2d"
    assert (n.width, n.height, n.depth) == (100, 8, 1)
    assert (n.dst_pitch, n.src_pitch, n.dst_height, n.src_height) == (256, 128, 8, 8)
    assert "100x8 B" in n.describe() and "pitch 128" in n.describe()


def test_memcpy3d_fields_and_defaults():
    g = cg.Graph("g")
    n = g.memcpy3d(PTR, PTR + 8192, 16, 4, 3, dst_pitch=32, src_height=6)
    assert n.kind == "memcpy3d" and (n.width, n.height, n.depth) == (16, 4, 3)
    assert (n.dst_pitch, n.src_pitch, n.dst_height, n.src_height) == (32, 16, 4, 6)
    assert "16x4x3 B" in n.describe()


@pytest.mark.parametrize(
    "call, text",
    [
        (lambda g: g.memcpy2d(PTR, 32, PTR, 64, 40, 2), "dst_pitch 32 is smaller than a row"),
        (lambda g: g.memcpy2d(PTR, 64, PTR, 16, 40, 2), "src_pitch 16 is smaller"),
        (lambda g: g.memcpy2d(PTR, 64, PTR, 64, 0, 2), "width must be positive"),
        (lambda g: g.memcpy2d(PTR, 64, PTR, 64, 8, 0), "height must be positive"),
        (lambda g: g.memcpy3d(PTR, PTR, 8, 4, 0), "depth must be positive"),
        (lambda g: g.memcpy3d(PTR, PTR, 8, 4, 2, dst_height=3), "dst_height 3 is smaller"),
        (lambda g: g.memcpy2d(Buffer(PTR, 100), 64, PTR, 64, 64, 2), "spans 128 bytes of dst, which has 100"),
        (lambda g: g.memcpy3d(PTR, Buffer(PTR, 255), 16, 4, 2, src_pitch=32), "spans 240 bytes of src"),
    ],
)
def test_pitched_copy_errors(call, text):
    g = cg.Graph("g")
    if "240" in text:
        # 32 * 4 * (2 - 1) + 32 * (4 - 1) + 16 = 240 <= 255: fits; one more slice does not.
        call(g)
        with pytest.raises(errors.DefinitionError, match="spans 368 bytes of src"):
            g.memcpy3d(PTR, Buffer(PTR, 255), 16, 4, 3, src_pitch=32)
        return
    with pytest.raises(errors.DefinitionError, match=text):
        call(g)


def test_pitched_copy_operand_errors():
    g = cg.Graph("g")
    with pytest.raises(errors.OperandError, match="null pointer"):
        g.memcpy2d(0, 64, PTR, 64, 8, 2)
    with pytest.raises(errors.OperandError):
        g.memcpy3d(PTR, "src", 8, 2, 1)


def test_pitched_copy_with_host_arrays():
    host = np.zeros((4, 10), np.float32)
    g = cg.Graph("g")
    n = g.memcpy2d(PTR, 64, host, 40, 40, 4)
    assert n.src == host.ctypes.data and n._keep[1] is host
    with pytest.raises(errors.DefinitionError, match="spans"):
        g.memcpy2d(PTR, 64, host, 40, 40, 5)


# =============================================================================== memory operations


def test_write_value_node():
    g = cg.Graph("g")
    w = g.write_value(PTR, 7, name="signal")
    assert isinstance(w, cg.WriteValueNode) and isinstance(w, cg.BatchMemOpNode) and w.kind == "write_value"
    assert (w.ptr, w.value, w.bits, w.flags) == (PTR, 7, 32, 0)
    assert "= 0x7 (32-bit)" in w.describe()
    w64 = g.write_value(PTR, 1 << 40)
    assert (w64.bits, w64.flags) == (64, 0) and "(64-bit)" in w64.describe()
    with pytest.raises(TypeError):
        g.write_value(PTR, 1, memory_barrier=False)  # the driver's v2 memory operations have no such flag
    wn = g.write_value(PTR, -1)
    assert (wn.bits, wn.value) == (32, 0xFFFFFFFF)
    wu = g.write_value(PTR, np.uint64(3))
    assert wu.bits == 64
    wb = g.write_value(PTR, 3, bits=64)
    assert wb.bits == 64


def test_wait_value_node_comparisons_and_flags():
    g = cg.Graph("g")
    for cmp, code in (("geq", 0), ("eq", 1), ("and", 2), ("nor", 3)):
        n = g.wait_value(PTR, 1, cmp=cmp)
        assert isinstance(n, cg.WaitValueNode) and n.flags == code and n.cmp == cmp
    f = g.wait_value(PTR, 2, flush=True, bits=64)
    assert f.flags == 1 << 30 and f.bits == 64 and "flush" in f.describe()


@pytest.mark.parametrize(
    "call, exc, text",
    [
        (lambda g: g.write_value(PTR, 1, bits=16), errors.DefinitionError, "bits must be 32 or 64"),
        (lambda g: g.write_value(PTR, 1 << 32, bits=32), errors.OperandError, "does not fit in 32 bits"),
        (lambda g: g.write_value(PTR, 1.5), errors.OperandError, "must be an integer"),
        (lambda g: g.write_value(PTR, True), errors.OperandError, "must be an integer"),
        (lambda g: g.write_value(PTR + 2, 1), errors.DefinitionError, "not aligned to 4 bytes"),
        (lambda g: g.write_value(PTR + 4, 1, bits=64), errors.DefinitionError, "not aligned to 8 bytes"),
        (lambda g: g.wait_value(PTR, 1, cmp="lt"), errors.OperandError, "cmp must be one of"),
        (lambda g: g.wait_value(Buffer(PTR, 4), 1, bits=64), errors.DefinitionError, "less than a 64-bit word"),
        (lambda g: g.wait_value(0, 1), errors.OperandError, "null pointer"),
    ],
)
def test_memop_errors(call, exc, text):
    g = cg.Graph("g")
    with pytest.raises(exc, match=text):
        call(g)
    assert len(g) == 0


def test_memop_and_pitched_nodes_cannot_be_updated():
    g = cg.Graph("g")
    w = g.write_value(PTR, 1)
    c = g.memcpy2d(PTR, 64, PTR, 64, 8, 2)
    with pytest.raises(errors.DefinitionError):
        w.update(value=2)
    with pytest.raises(errors.DefinitionError):
        c.update(width=4)


def test_pictures_of_memory_nodes():
    g = cg.Graph("mem")
    a = g.alloc(64)
    c = g.memcpy2d(a, 32, PTR, 32, 16, 2, after=a)
    w = g.write_value(PTR, 1, after=c)
    f = g.free(a, after=w)
    dot = g.to_dot()
    assert "shape=cylinder" in dot and "shape=note" in dot
    mer = g.to_mermaid()
    assert '[("alloc (alloc#0)")]' in mer and "n2 --> n3" in mer
    text = g.summary()
    assert "alloc=1" in text and "free=1" in text and "memcpy2d=1" in text and "write_value=1" in text
    del f
