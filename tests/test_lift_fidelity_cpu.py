"""Lifting reads the whole node (CPU, fake driver): launch attributes, programmatic edges, refusals by name;
and relocating a definition's intermediate memory (GPU-free)."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors
from cudagraph.definition.kinds.launch_attributes import ATTRIBUTES, check_attributes, encode
from cudagraph.definition.relocation import plan_relocation

drv = pytest.importorskip("cuda.bindings.driver")

import lift_fakes  # noqa: E402
from lift_fakes import FakeBindings, FakeDriver, make_fake  # noqa: E402


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeDriver, FakeBindings, list[Any]]:
    return make_fake(monkeypatch)


ARGS = [b"\x01" * 8, b"abcd", b"wxyz"]


def _raw(fmt: str, *values: Any) -> bytes:
    return struct.pack(fmt, *values).ljust(64, b"\0")


def test_cluster_priority_and_other_attributes_are_carried(fake):
    f, _b, _ = fake
    g = f.graph()
    a = f.kernel(g, ARGS, grid=(8, 2, 1))
    b = f.kernel(g, ARGS, after=(a,))
    f.attrs[a] = {
        4: _raw("<III", 2, 1, 1),  # cluster
        5: _raw("<i", 1),  # scheduling policy: spread
        8: _raw("<i", 0),  # priority 0: the default, left out
        10: _raw("<i", 1),  # sync domain: remote
        9: _raw("<BB", 0, 1),  # domain map: the default
    }
    f.attrs[b] = {8: _raw("<i", -2), 14: _raw("<I", 25), 13: _raw("<iiQ", 0, 0, 0xDEAD)}
    lifted = cg.lift(g)
    la, lb = lifted.nodes
    assert la.attrs.cluster == (2, 1, 1) and la.attrs.priority is None
    assert la.attrs.extra == (("cluster_scheduling_policy", (1,)), ("mem_sync_domain", (1,)))
    assert lb.attrs.cluster is None and lb.attrs.priority == -2
    assert lb.attrs.extra == (("preferred_shared_memory_carveout", (25,)),)
    assert "cluster=(2, 1, 1)" in la.describe() and "mem_sync_domain=1" in la.describe()


def test_nodes_reading_the_same_values_get_equal_attributes_of_their_own(fake):
    f, _b, _ = fake
    g = f.graph()
    nodes = [f.kernel(g, ARGS)]
    for _ in range(3):
        nodes.append(f.kernel(g, ARGS, after=(nodes[-1],)))
    same = {4: _raw("<III", 2, 1, 1), 10: _raw("<i", 1)}
    for n in nodes[:3]:
        f.attrs[n] = dict(same)
    f.attrs[nodes[3]] = {4: _raw("<III", 4, 1, 1)}
    lifted = cg.lift(g).nodes
    assert [n.attrs.cluster for n in lifted] == [(2, 1, 1)] * 3 + [(4, 1, 1)]
    assert [n.attrs.extra for n in lifted[:3]] == [(("mem_sync_domain", (1,)),)] * 3 and lifted[3].attrs.extra == ()
    # Nodes that read alike share one LaunchAttrs (never changed in place): an edit of one node is its own.
    assert lifted[1].attrs is lifted[2].attrs and lifted[3].attrs is not lifted[2].attrs
    lifted[0].update(grid=(2, 1, 1), priority=-1)
    assert lifted[0].attrs.priority == -1 and lifted[0].attrs.cluster == (2, 1, 1)
    assert [n.attrs.priority for n in lifted[1:]] == [None] * 3 and lifted[1].attrs.cluster == (2, 1, 1)


def test_a_node_without_attributes_stays_plain(fake):
    f, _b, _ = fake
    g = f.graph()
    a = f.kernel(g, ARGS)
    f.attrs[a] = {4: _raw("<III", 0, 0, 0), 5: _raw("<i", 0), 8: _raw("<i", 0)}
    assert cg.lift(g).nodes[0].attrs is None


@pytest.mark.parametrize(
    ("attr_id", "what"),
    [
        (19, "an attribute cudagraph does not know"),
        (6, "the stream-only attribute 'programmatic_stream_serialization'"),
    ],
)
def test_an_attribute_not_understood_is_refused_by_name(fake, attr_id, what, monkeypatch):
    monkeypatch.setattr(lift_fakes, "REFUSED_IDS", frozenset())  # a driver that reports this id on a node
    f, _b, _ = fake
    g = f.graph()
    a = f.kernel(g, ARGS)
    f.kernel(g, ARGS, after=(a,))
    f.attrs[a] = {attr_id: _raw("<i", 3)}
    with pytest.raises(errors.UnsupportedError) as exc:
        cg.lift(g)
    msg = str(exc.value)
    assert "kernel#0" in msg and "'fnf00'" in msg and f"attribute id {attr_id}" in msg and what in msg
    assert "refused rather than dropped" in msg


def test_programmatic_edges_and_ports_are_carried(fake):
    f, _b, _ = fake
    g = f.graph()
    a = f.kernel(g, ARGS)
    b = f.kernel(g, ARGS, after=(a,))
    c = f.kernel(g, ARGS, after=(a, b))
    f.edge_data[(a, b)] = bytes([1, 0, 1, 0, 0, 0, 0, 0])  # programmatic port, programmatic type
    f.edge_data[(b, c)] = bytes([2, 0, 1, 0, 0, 0, 0, 0])  # launch order port
    lifted = cg.lift(g)
    la, lb, lc = lifted.nodes
    assert lb.attrs.programmatic == [(la, "programmatic")]
    assert lc.attrs.programmatic == [(lb, "launch_order")]  # the edge from a stays plain
    assert {(p.index, q.index) for p, q in lifted.edges} == {(0, 1), (0, 2), (1, 2)}


@pytest.mark.parametrize("data", [bytes([0, 3, 1, 0, 0, 0, 0, 0]), bytes([0, 0, 2, 0, 0, 0, 0, 0])])
def test_edge_data_not_modelled_is_refused(fake, data):
    f, _b, _ = fake
    g = f.graph()
    a = f.kernel(g, ARGS)
    b = f.kernel(g, ARGS, after=(a,))
    f.edge_data[(a, b)] = data
    with pytest.raises(errors.UnsupportedError, match=r"kernel#1 .*edge from kernel#0.*refused rather than dropped"):
        cg.lift(g)


def test_attributes_keyword_is_checked():
    assert check_attributes({"mem_sync_domain": 1, "mem_sync_domain_map": (0, 1)}, "k") == (("mem_sync_domain", (1,)),)
    with pytest.raises(errors.DefinitionError, match="unknown launch attribute 'bogus'; known: access_policy_window"):
        check_attributes({"bogus": 1}, "k")
    with pytest.raises(errors.DefinitionError, match="takes 3 value"):
        check_attributes({"preferred_cluster": (1, 2)}, "k")
    with pytest.raises(errors.DefinitionError, match="does not fit"):
        check_attributes({"mem_sync_domain_map": (300, 0)}, "k")
    with pytest.raises(errors.OperandError, match="must be an int, got str"):
        check_attributes({"mem_sync_domain": "1"}, "k")
    with pytest.raises(errors.OperandError, match="mapping"):
        check_attributes([("mem_sync_domain", 1)], "k")
    raw = encode(ATTRIBUTES["preferred_cluster"], (2, 1, 1))
    assert len(raw) == 64 and raw[:12] == struct.pack("<III", 2, 1, 1)


def test_kernel_attributes_keyword_update_and_describe():
    g = cg.Graph("a")
    k = g.kernel(drv.CUfunction(0x10), 1, 32, (), attributes={"mem_sync_domain": 1})
    assert k.attrs.extra == (("mem_sync_domain", (1,)),)
    assert "mem_sync_domain=1" in k.describe()
    plain = g.kernel(drv.CUfunction(0x10), 1, 32, (), attributes={"mem_sync_domain": 0})
    assert plain.attrs is None  # the default is no attribute at all
    k.update(attributes=None)
    assert k.attrs is None
    with pytest.raises(errors.DefinitionError, match="unknown launch attribute"):
        k.update(attributes={"nope": 1})
    assert k.attrs is None  # nothing half-changed


def test_relocation_moves_every_use_into_the_ranges():
    g = cg.Graph("r")
    pool = 0x7000_0000
    inside = struct.pack("<QQ", pool + 16, 5) + struct.pack("<Q", pool + 4096)  # a struct: two pointers, a scalar
    a = g.kernel(drv.CUfunction(0x10), 1, 32, (inside, (pool + 8).to_bytes(8, "little"), np.int32(7)))
    m = g.memset(pool + 64, 0, count=4, element_size=4, after=a)
    other = g.memcpy(0x9000_0000, pool + 4096, 16, after=m)
    plan = plan_relocation(g, [(pool, 4096), (pool + 4096, 4096), (0x5000_0000, 64)])
    assert plan.used == [0, 1] and plan.slots == 5
    plan.apply({0: 0x1_0000_0000, 1: 0x2_0000_0000})
    args = a.args
    assert args[0] == struct.pack("<QQ", 0x1_0000_0010, 5) + struct.pack("<Q", 0x2_0000_0000)
    assert args[1] == (0x1_0000_0008).to_bytes(8, "little") and args[2] == np.int32(7)
    assert m.dst == 0x1_0000_0040 and other.src == 0x2_0000_0000 and other.dst == 0x9000_0000


def test_arguments_packed_in_an_extra_buffer_are_read(fake):
    """cuBLASLt launches its kernels with ``extra`` (one packed buffer, no kernelParams)."""
    f, _b, _ = fake
    g = f.graph()
    a = f.kernel(g, ARGS)
    f.kernel(g, [b"\x02" * 8, b"efgh", b"ijkl"], after=(a,), packed=True)
    f.kernel(g, [b"\x03" * 8, b"mnop", b"qrst"], after=(a,), packed=True)
    lifted = cg.lift(g)
    assert [n.args for n in lifted.nodes] == [
        tuple(ARGS),
        (b"\x02" * 8, b"efgh", b"ijkl"),
        (b"\x03" * 8, b"mnop", b"qrst"),
    ]
