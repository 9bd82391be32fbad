"""Kernel launch attributes in the definition layer (GPU-free): clusters, cooperative launch,
priority, programmatic dependent launch edges and large dynamic shared memory; their checks,
their survival through ``node.update`` and edge removal, and how pictures show them.
"""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors


class CUkernel:
    """Stands in for cuda.bindings.driver.CUkernel."""


K = CUkernel()


def test_plain_kernel_has_no_attributes():
    g = cg.Graph("g")
    k = g.kernel(K, 4, 128, (), shared_mem=48 * 1024)
    assert k.attrs is None
    assert "cluster" not in k.describe()


def test_cluster_shapes():
    g = cg.Graph("g")
    a = g.kernel(K, 8, 32, (), cluster=2)
    b = g.kernel(K, (4, 6), 32, (), cluster=(2, 3))
    c = g.kernel(K, (4, 4, 2), 32, (), cluster=[2, 2, 2])
    assert (a.attrs.cluster, b.attrs.cluster, c.attrs.cluster) == ((2, 1, 1), (2, 3, 1), (2, 2, 2))
    assert "cluster=(2, 3, 1)" in b.describe()
    g.kernel(K, 16, 32, (), cluster=16)  # non-portable size: allowed, set on the kernel when built


@pytest.mark.parametrize(
    "grid, cluster, exc, text",
    [
        (6, 4, errors.DefinitionError, r"grid\[0\] = 6 is not a multiple of cluster\[0\] = 4"),
        ((4, 3), (1, 2), errors.DefinitionError, r"grid\[1\] = 3"),
        (32, 32, errors.DefinitionError, "the CUDA limit is 16"),
        (4, 0, errors.DefinitionError, "must be positive"),
        (4, (1, 1, 1, 1), errors.DefinitionError, "1 to 3 dimensions"),
        (4, 1.5, errors.OperandError, "cluster must be"),
        (4, True, errors.OperandError, "got bool"),
    ],
)
def test_cluster_errors(grid, cluster, exc, text):
    g = cg.Graph("g")
    with pytest.raises(exc, match=text) as ei:
        g.kernel(K, grid, 32, (), cluster=cluster, name="clustered")
    assert "kernel#0 'clustered'" in str(ei.value)
    assert len(g) == 0


def test_cooperative_and_priority():
    g = cg.Graph("g")
    k = g.kernel(K, 132, 64, (), cooperative=True, priority=-3)
    assert k.attrs.cooperative and k.attrs.priority == -3
    assert "cooperative" in k.describe() and "priority=-3" in k.describe()
    with pytest.raises(errors.DefinitionError, match="both cooperative and clustered"):
        g.kernel(K, 4, 32, (), cooperative=True, cluster=2)
    with pytest.raises(errors.OperandError, match="priority must be an int"):
        g.kernel(K, 4, 32, (), priority=1.5)
    with pytest.raises(errors.OperandError, match="cooperative must be a bool"):
        g.kernel(K, 4, 32, (), cooperative="yes")
    assert g.kernel(K, 4, 32, (), cooperative=False).attrs is None


def test_large_shared_memory_marks_the_kernel():
    g = cg.Graph("g")
    k = g.kernel(K, 1, 32, (), shared_mem=48 * 1024 + 1)
    assert k.attrs is not None and k.attrs.smem_optin and "smem>48KiB" in k.describe()
    k2 = g.kernel(K, 1, 32, (), shared_mem=np.int64(200 * 1024))
    assert k2.shared_mem == 200 * 1024 and type(k2.shared_mem) is int and k2.attrs.smem_optin
    with pytest.raises(errors.DefinitionError, match="non-negative"):
        g.kernel(K, 1, 32, (), shared_mem=-1)


def test_programmatic_from_kernel_keyword():
    g = cg.Graph("g")
    a = g.kernel(K, 4, 32, (), name="a")
    b = g.kernel(K, 4, 32, (), name="b")
    c = g.kernel(K, 4, 32, (), after=[a, b], programmatic=True, name="c")
    assert c.attrs.programmatic == [(a, "programmatic"), (b, "programmatic")]
    d = g.kernel(K, 4, 32, (), programmatic=a, name="d")  # adds the edge
    assert d.predecessors == (a,) and d.attrs.port_of(a) == "programmatic"
    e = g.kernel(K, 4, 32, (), after=c, programmatic=[a], name="e")
    assert e.predecessors == (c, a) and e.attrs.port_of(c) is None and e.attrs.port_of(a) == "programmatic"
    assert g.num_edges == 5
    g.validate()
    assert "programmatic<-#0" in d.describe()


def test_programmatic_errors_leave_nothing_behind():
    g = cg.Graph("g")
    m = g.memset(0x10000, 0, count=4, name="fill")
    with pytest.raises(errors.DefinitionError, match="must come from a kernel node") as ei:
        g.kernel(K, 4, 32, (), after=m, programmatic=True, name="k")
    assert "memset#0 'fill'" in str(ei.value)
    assert len(g) == 1 and m.successors == () and g.num_edges == 0
    with pytest.raises(errors.DefinitionError, match="needs predecessor kernels"):
        g.kernel(K, 4, 32, (), programmatic=True)
    other = cg.Graph("other")
    ok = other.kernel(K, 1, 1, ())
    with pytest.raises(errors.ForeignNodeError):
        g.kernel(K, 4, 32, (), programmatic=ok)
    with pytest.raises(errors.OperandError):
        g.kernel(K, 4, 32, (), programmatic="yes")
    with pytest.raises(errors.OperandError):
        g.kernel(K, 4, 32, (), programmatic=[1])
    assert len(g) == 1 and g.num_edges == 0


def test_programmatic_edge_with_add_edge_and_remove_edge():
    g = cg.Graph("g")
    a = g.kernel(K, 4, 32, (), name="a")
    b = g.kernel(K, 4, 32, (), name="b")
    c = g.kernel(K, 4, 32, (), name="c")
    g.add_edge(a, b, programmatic=True)
    g.add_edge(b, c, programmatic="launch_order")
    assert b.attrs.port_of(a) == "programmatic" and c.attrs.port_of(b) == "launch_order"
    g.remove_edge(a, b)
    assert b.attrs is None and b.predecessors == ()
    e = g.empty()
    with pytest.raises(errors.DefinitionError, match="joins two kernel nodes"):
        g.add_edge(e, c, programmatic=True)
    with pytest.raises(errors.OperandError, match="programmatic must be"):
        g.add_edge(a, c, programmatic="fast")
    assert c.predecessors == (b,)


def test_update_keeps_and_changes_launch_attributes():
    g = cg.Graph("g")
    a = g.kernel(K, 4, 32, (), name="a")
    k = g.kernel(K, 8, 32, (np.int32(1),), cluster=2, priority=1, programmatic=a, name="k")
    k.update(args=(np.int32(2),))
    assert k.args == (np.int32(2),)
    assert k.attrs.cluster == (2, 1, 1) and k.attrs.priority == 1 and k.attrs.port_of(a) == "programmatic"
    k.update(priority=None, cluster=4)
    assert k.attrs.priority is None and k.attrs.cluster == (4, 1, 1)
    with pytest.raises(errors.DefinitionError, match="not a multiple"):
        k.update(grid=6)
    assert k.grid == (8, 1, 1) and k.attrs.cluster == (4, 1, 1)  # all or nothing
    with pytest.raises(errors.DefinitionError, match="unknown keyword"):
        k.update(speed=3)
    k.update(cooperative=True, cluster=None)
    assert k.attrs.cooperative and k.attrs.cluster is None
    k2 = g.kernel(K, 1, 32, (), shared_mem=100_000)
    k2.update(shared_mem=1024)
    assert k2.attrs is None
    k2.update(shared_mem=60_000)
    assert k2.attrs.smem_optin


def test_picture_marks_programmatic_edges():
    g = cg.Graph("g")
    a = g.kernel(K, 4, 32, (), name="a")
    b = g.kernel(K, 4, 32, (), name="b", programmatic=a)
    g.kernel(K, 4, 32, (), after=b, name="c")
    dot = g.to_dot()
    assert 'n0 -> n1 [style=dashed color="#6f42c1" label="pdl"];' in dot
    assert "n1 -> n2;" in dot
    mer = g.to_mermaid()
    assert "n0 -. pdl .-> n1" in mer and "n1 --> n2" in mer


def test_path_forwards_launch_attributes():
    g = cg.Graph("g")
    with g.path() as p:
        a = p.kernel(K, 4, 32, ())
        b = p.kernel(K, 4, 32, (), cluster=2, programmatic=True)
    assert b.predecessors == (a,) and b.attrs.cluster == (2, 1, 1) and b.attrs.port_of(a) == "programmatic"
