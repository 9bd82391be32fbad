"""``Graph.kernel(..., device=)`` without a GPU: the keyword, its checks, its rendering, and the primary
context that lowering gives a node with a device (against recording fake drivers)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.kinds.kernel import LaunchAttrs
from cudagraph.errors import OperandError


class CUkernel:  # the definition layer recognises kernels by type name
    def __init__(self, name: str) -> None:
        self.name = name


class Device:
    """What ``device=`` reads of a cuda.core ``Device``: its ``device_id``."""

    def __init__(self, device_id: Any) -> None:
        self.device_id = device_id


K = CUkernel("k")


# ------------------------------------------------------------------ the definition


def test_device_is_kept_on_the_node_and_absent_by_default():
    g = cg.Graph("d")
    plain = g.kernel(K, 1, 32, name="plain")
    by_int = g.kernel(K, 1, 32, device=0, name="int", after=plain)
    by_dev = g.kernel(K, 1, 32, device=Device(3), name="dev", after=by_int)
    by_np = g.kernel(K, 1, 32, device=np.int64(2), name="np")
    assert plain.device is None and plain.attrs is None
    assert (by_int.device, by_dev.device, by_np.device) == (0, 3, 2)
    assert type(by_np.device) is int
    assert isinstance(by_dev.attrs, LaunchAttrs) and by_dev.attrs.device == 3
    assert by_dev.attrs.cluster is None and by_dev.attrs.priority is None and not by_dev.attrs.cooperative
    assert by_dev._preds == [by_int] and by_int._succs == [by_dev]
    assert g._special == 3  # instantiate checks the ordinals before adding any node
    g.validate()


def test_device_goes_with_other_launch_attributes():
    g = cg.Graph("d")
    k = g.kernel(K, 4, 32, priority=5, cluster=2, device=1, name="k")
    assert (k.attrs.priority, k.attrs.cluster, k.attrs.device) == (5, (2, 1, 1), 1)
    assert k.attrs.describe() == "cluster=(2, 1, 1) priority=5 @dev1"
    assert k.attrs.copy().device == 1


def test_a_path_takes_device():
    g = cg.Graph("p")
    p = g.path()
    first = p.kernel(K, 1, 32, device=1, name="a")
    second = p.kernel(K, 1, 32, name="b")
    assert (first.device, second.device) == (1, None)
    assert second._preds == [first] and g._nodes == [first, second]


@pytest.mark.parametrize(
    ("value", "got"),
    [
        (True, "got bool"),
        (np.bool_(False), "got bool"),
        (1.0, "got float"),
        ("cuda:1", "got str"),
        (Device("1"), "got Device"),
        (Device(True), "got bool"),
        (object(), "got object"),
    ],
)
def test_a_device_of_the_wrong_type_is_refused_and_nothing_is_added(value, got):
    g = cg.Graph("d")
    a = g.kernel(K, 1, 32, name="a")
    msg = rf"kernel#1 'bad': device must be a cuda.core Device or an int ordinal, {got}"
    with pytest.raises(OperandError, match=msg):
        g.kernel(K, 1, 32, device=value, after=a, name="bad")
    assert len(g) == 1 and a._succs == [] and g._nedges == 0


def test_a_negative_ordinal_is_refused():
    g = cg.Graph("d")
    with pytest.raises(OperandError, match=r"kernel#0 'neg': device must be a non-negative ordinal, got -1"):
        g.kernel(K, 1, 32, device=-1, name="neg")
    assert len(g) == 0


def test_update_sets_changes_and_drops_the_device():
    g = cg.Graph("u")
    k = g.kernel(K, 1, 32, priority=2, name="k")
    special = g._special
    assert k.update(device=Device(1)) is k
    assert (k.device, k.attrs.priority) == (1, 2)
    assert g._special == special + 1
    k.update(grid=2)  # other keywords keep it
    assert (k.grid, k.device) == ((2, 1, 1), 1)
    k.update(device=None)
    assert k.device is None and k.attrs.priority == 2
    k.update(priority=None)
    assert k.attrs is None  # nothing left: a plain launch again
    msg = r"kernel#0 'k'.*device must be a cuda.core Device or an int ordinal, got bool"
    with pytest.raises(OperandError, match=msg):
        k.update(device=True, grid=4)
    assert (k.grid, k.device, k.attrs) == ((2, 1, 1), None, None)  # all or nothing


# ------------------------------------------------------------------ rendering


def _two() -> cg.Graph:
    g = cg.Graph("r")
    a = g.kernel(K, 1, 32, device=1, name="a")
    g.kernel(K, 1, 32, after=a, name="b")
    return g


def test_summary_shows_the_device():
    lines = _two().summary().splitlines()
    a_line = next(line for line in lines if " a " in line)
    b_line = next(line for line in lines if " b " in line)
    assert a_line.endswith("args=0 @dev1")
    assert "@dev" not in b_line


def test_dot_and_mermaid_show_the_device():
    dot = _two().to_dot()
    assert 'n0 [label="a\\nkernel#0@dev1\\nk()" shape=box' in dot
    assert 'n1 [label="b\\nkernel#1\\nk()" shape=box' in dot
    mermaid = _two().to_mermaid()
    assert 'n0["a (kernel#0@dev1)<br/>k()"]' in mermaid
    assert 'n1["b (kernel#1)<br/>k()"]' in mermaid
