"""Graph.parametrize on the CPU: which slots of lifted-style definitions are rewritten, and refusals.

Lifted kernels hold their arguments as raw bytes; these definitions are built
the same way (``bytes`` arguments, int copy endpoints), so the rewriting logic
is checked without a GPU: the exact set of (graph, node, slot, offset).
"""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.memory_info import describe_memory
from cudagraph.definition.nodes import OpaqueNode, _set_base
from cudagraph.definition.param_offset import ParamAt, ParamBytes
from cudagraph.definition.parametrize import moving_slots, param_memory
from cudagraph.errors import DefinitionError, OperandError

drv = pytest.importorskip("cuda.bindings.driver")

K = drv.CUkernel(0x77)
X = 0x7F00_0000_0000  # a 4096-byte input
OUT = 0x7F00_0010_0000  # a 1024-byte output
POOL = 0x7F00_0020_0000  # intermediate memory (a graph pool): never a parameter


def q(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *values)


def lifted_like() -> tuple[cg.Graph, dict[str, Any]]:
    """A definition shaped like a lifted PyTorch graph: pointers as argument bytes, structs of pointers."""
    g = cg.Graph("lifted")
    n: dict[str, Any] = {}
    n["copy_in"] = g.memcpy(POOL, X + 256, 512, name="copy_in")
    # k(int n, float* x, Array<char*, 3> data, int64 scalar)
    n["ew"] = g.kernel(
        K,
        1,
        32,
        (struct.pack("<i", 1024), q(X), q(OUT + 16, POOL, X + 4096 - 8), q(7)),
        after=n["copy_in"],
        name="ew",
    )
    n["fill"] = g.memset(OUT + 512, 0, count=128, element_size=4, after=n["ew"], name="fill")
    body = cg.Graph("body")
    n["inner"] = body.kernel(K, 1, 32, (q(X + 8), q(X + 4096)), name="inner")  # X+4096 is one past the end
    n["child"] = g.child(body, after=n["fill"], name="child")
    cond = g.condition(default=1)
    n["if"] = g.if_(cond, after=n["child"], name="if")
    n["then"] = n["if"].body.kernel(K, 1, 32, (q(OUT), b"\x01\x02\x03\x04"), name="then")
    n["copy_out"] = g.memcpy(0x5000_0000, OUT, 1024, after=n["if"], name="copy_out")  # to host memory
    return g, n


def test_range_mode_rewrites_exactly_the_slots_in_the_ranges():
    g, n = lifted_like()
    report = g.parametrize(x=(X, 4096), out=(OUT, 1024))
    body = n["then"].graph.name
    assert report.keys() == {
        ("lifted", 0, "src", 256),
        ("lifted", 1, "args[1]", 0),
        ("lifted", 1, "args[2]", 16),
        ("lifted", 1, "args[2]@16", 4096 - 8),
        ("lifted", 2, "dst", 512),
        ("body", 0, "args[0]", 8),
        (body, 0, "args[0]", 0),
        ("lifted", 5, "src", 0),
    }
    assert report.count("x") == 4 and report.count("out") == 4 and not report.verified
    x, out = g.params["x"], g.params["out"]
    assert (x.default, out.default) == (X, OUT) and x.is_pointer
    assert n["copy_in"].src == ParamAt(x, 256) and n["copy_in"].dst == POOL
    ew = n["ew"].args
    assert ew[0] == struct.pack("<i", 1024) and ew[1] is x and ew[3] == q(7)
    assert type(ew[2]) is ParamBytes and [(p, par.name, o) for p, par, o in ew[2].patches] == [
        (0, "out", 16),
        (16, "x", 4088),
    ]
    assert ew[2].resolve({"x": 0x1000, "out": 0x9000}) == q(0x9010, POOL, 0x1000 + 4088)
    assert n["fill"].dst == ParamAt(out, 512)
    assert n["inner"].args == (ParamBytes(q(X + 8), ((0, x, 8),)), q(X + 4096))  # one past the end is not x's
    assert n["then"].args[0] is out and n["copy_out"].src is out and n["copy_out"].dst == 0x5000_0000
    g.validate()  # the rewritten operands pass the definition's checks
    assert {name: m.nbytes for name, m in param_memory(g).items()} == {"x": 4096, "out": 1024}
    assert g.parametrizations == [report]


def test_summary_lists_every_slot_and_says_range_mode_is_not_verified():
    g, _ = lifted_like()
    report = g.parametrize(x=(X, 4096))
    text = report.summary()
    assert "4 slots in 3 nodes" in text and "not verified" in text and "cg.lift_exact" in text
    assert "args[2]@16 -> $x+4088" in text and "memcpy#0 'copy_in' of Graph 'lifted': src -> $x+256" in text
    assert "$x: 0x7f0000000000, 4096 B, 4 slots" in text


def test_a_scalar_equal_to_an_address_is_rewritten_in_range_mode():
    g = cg.Graph("g")
    k = g.kernel(K, 1, 1, (q(X), q(X)))  # (float* x, int64 v) with v == the address of x
    report = g.parametrize(x=(X, 64))
    assert report.keys() == {("g", 0, "args[0]", 0), ("g", 0, "args[1]", 0)}
    assert k.args == (g.params["x"], g.params["x"])


def test_built_pointer_arguments_and_numpy_scalars():
    g = cg.Graph("built")
    k = g.kernel(K, 1, 1, (X + 4, np.int64(X), np.float32(1.0)))
    report = g.parametrize(x=(X, 64))
    assert report.keys() == {("built", 0, "args[0]", 4)}  # typed scalars are not pointers
    assert k.args[0] == ParamBytes((X + 4).to_bytes(8, "little"), ((0, g.params["x"], 4),))


def test_a_second_parametrize_adds_to_the_patches():
    g = cg.Graph("g")
    k = g.kernel(K, 1, 1, (q(X + 8, OUT),))
    g.parametrize(x=(X, 64))
    g.parametrize(out=(OUT, 64))
    assert [(p, par.name, o) for p, par, o in k.args[0].patches] == [(0, "x", 8), (8, "out", 0)]
    assert len(g.parametrizations) == 2


def test_an_existing_pointer_param_is_reused():
    g = cg.Graph("g")
    x = g.param("x")
    a = g.kernel(K, 1, 1, (x,))
    b = g.kernel(K, 1, 1, (X,))
    g.parametrize(x=(X, 64))
    assert a.args == (x,) and b.args == (x,) and x.default is None


def opaque(g: cg.Graph, driver_type: str, params: Any) -> OpaqueNode:
    node = OpaqueNode.__new__(OpaqueNode)
    _set_base(node, g, len(g._nodes), driver_type.replace("CU_GRAPH_NODE_TYPE_", "").lower())
    node.driver_type, node.params, node.source = driver_type, params, None
    return g._add(node, [])  # type: ignore[return-value]


def test_a_pointer_inside_an_opaque_node_is_refused_naming_it_and_nothing_changes():
    g = cg.Graph("g")
    k = g.kernel(K, 1, 1, (q(X),))
    copy = SimpleNamespace(copyParams=SimpleNamespace(srcDevice=POOL, dstDevice=X + 32, Height=4, WidthInBytes=16))
    op = opaque(g, "CU_GRAPH_NODE_TYPE_MEMCPY", SimpleNamespace(memcpy=copy))
    with pytest.raises(OperandError) as e:
        g.parametrize(x=(X, 4096))
    msg = str(e.value)
    assert op.label in msg and "memcpy.copyParams.dstDevice" in msg and "'x' (offset 32)" in msg
    assert k.args == (q(X),) and "x" not in g.params and g.parametrizations == []


class CUdeviceptr:  # a driver handle type: an int through __int__, with methods of its own
    def __init__(self, v: int) -> None:
        self.v = v

    def __int__(self) -> int:
        return self.v

    def getPtr(self) -> int:
        return 0


def test_a_driver_pointer_type_inside_an_opaque_node_is_seen():
    g = cg.Graph("g")
    fill = SimpleNamespace(dst=CUdeviceptr(X + 8), value=0, elementSize=4)
    op = opaque(g, "CU_GRAPH_NODE_TYPE_MEMSET", SimpleNamespace(memset=fill, kernel=SimpleNamespace(func=X)))
    with pytest.raises(OperandError, match=r"memset\.dst = 0x7f0000000008 points into 'x' \(offset 8\)") as e:
        g.parametrize(x=(X, 64))
    assert op.label in str(e.value)


def test_opaque_nodes_outside_the_ranges_stay():
    g = cg.Graph("g")
    op = opaque(g, "CU_GRAPH_NODE_TYPE_MEM_ALLOC", SimpleNamespace(alloc=SimpleNamespace(dptr=POOL, bytesize=64)))
    k = g.kernel(K, 1, 1, (q(X),), after=op)
    report = g.parametrize(x=(X, 64))
    assert report.keys() == {("g", 1, "args[0]", 0)} and k.args == (g.params["x"],)


@pytest.mark.parametrize(
    "named, error, words",
    [
        ({"x": np.zeros(4)}, OperandError, ["host memory", "ndarray"]),
        ({"x": (X, 64), "y": (X + 32, 64)}, OperandError, ["'x'", "overlaps", "'y'"]),
        ({"x": (0, 64)}, OperandError, ["non-null address"]),
        ({"x": (X, 2**70)}, OperandError, ["ends past the 64-bit address space"]),
        ({"x": X}, OperandError, ["no known size", "(address, nbytes)"]),
        ({"x": "buffer"}, OperandError, ["str"]),
        ({"stream": (X, 64)}, DefinitionError, ["reserved"]),
        ({}, DefinitionError, ["at least one"]),
    ],
)
def test_bad_memory_is_refused_and_nothing_changes(named, error, words):
    g = cg.Graph("g")
    k = g.kernel(K, 1, 1, (q(X),))
    with pytest.raises(error) as e:
        g.parametrize(**named)
    assert all(w in str(e.value) for w in words), str(e.value)
    assert k.args == (q(X),) and g.params == {}


def test_a_scalar_param_of_the_same_name_is_refused():
    g = cg.Graph("g")
    g.param("x", np.int32)
    with pytest.raises(OperandError, match="'x' is already a int32 scalar param"):
        g.parametrize(x=(X, 64))


# ----------------------------------------------------------------- memory objects
class FakeTensor:
    """What describe_memory reads of a PyTorch tensor."""

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: str = "torch.float32", device: Any = None) -> None:
        self.ptr, self.shape, self.dtype = ptr, shape, dtype
        self.device = device or SimpleNamespace(type="cuda", index=0)

    def data_ptr(self) -> int:
        return self.ptr

    def element_size(self) -> int:
        return 4

    def stride(self) -> tuple[int, ...]:
        out, step = [], 1
        for d in reversed(self.shape):
            out.append(step)
            step *= d
        return tuple(reversed(out))


class FakeCai:
    def __init__(self, ptr: int, shape: tuple[int, ...], strides: Any = None) -> None:
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": "<f2", "strides": strides}


def test_memory_objects_describe_themselves():
    t = describe_memory(FakeTensor(X, (4, 8)), "t")
    assert (t.address, t.nbytes, t.device, t.dtype, t.shape, t.strides) == (
        X,
        128,
        0,
        "torch.float32",
        (4, 8),
        (32, 4),
    )
    c = describe_memory(FakeCai(X, (3, 5), (20, 2)), "c")
    assert (c.nbytes, c.dtype, c.strides) == (2 * 20 + 4 * 2 + 2, "float16", (20, 2))
    assert describe_memory(FakeCai(X, (3, 5)), "c").strides == (10, 2)
    buf = SimpleNamespace(handle=X, size=256, memory_resource=None, device_id=1, is_device_accessible=True)
    b = describe_memory(buf, "b")
    assert (b.address, b.nbytes, b.device) == (X, 256, 1)
    with pytest.raises(OperandError, match="host memory"):
        describe_memory(FakeTensor(X, (4,), device=SimpleNamespace(type="cpu", index=None)), "t")
    with pytest.raises(OperandError, match="host memory"):
        describe_memory(SimpleNamespace(handle=X, size=4, memory_resource=None, is_device_accessible=False), "b")


def test_dlpack_producers_are_read_and_host_ones_refused():
    a = np.arange(6, dtype=np.float32)

    class DLOnly:
        def __dlpack__(self, **kw: Any) -> Any:
            return a.__dlpack__(**kw)

    with pytest.raises(OperandError, match="DLPack device type 1"):
        describe_memory(DLOnly(), "d")  # the capsule was read: a CPU tensor

    class DLWithDevice(DLOnly):
        def __dlpack_device__(self) -> tuple[int, int]:
            return a.__dlpack_device__()

    with pytest.raises(OperandError, match="kDLCPU"):
        describe_memory(DLWithDevice(), "d")


# ----------------------------------------------------------------- exact mode
def test_moving_slots_keeps_a_scalar_that_only_equals_the_address():
    def capture(x: int, out: int) -> cg.Graph:
        g = cg.Graph("cap")
        c = g.memcpy(out, x + 64, 64)
        g.kernel(K, 1, 1, (q(x), q(X), q(out + 8, POOL)), after=c)  # q(X): a constant equal to the first x
        return g

    g1, g2 = capture(X, OUT), capture(X + 0x10_0000_0000, OUT + 0x10_0000_0000)
    only = moving_slots(
        g1,
        g2,
        {"x": (X, 4096), "out": (OUT, 1024)},
        {"x": (X + 0x10_0000_0000, 4096), "out": (OUT + 0x10_0000_0000, 1024)},
    )
    from cudagraph.definition.parametrize import parametrize

    report = parametrize(g1, {"x": (X, 4096), "out": (OUT, 1024)}, only)
    assert report.verified and "every slot verified" in report.summary()
    assert report.keys() == {
        ("cap", 0, "dst", 0),
        ("cap", 0, "src", 64),
        ("cap", 1, "args[0]", 0),
        ("cap", 1, "args[2]", 8),
    }
    assert g1.nodes[1].args[1] == q(X)  # kept
    # range mode rewrites the constant
    g3 = capture(X, OUT)
    assert ("cap", 1, "args[1]", 0) in g3.parametrize(x=(X, 4096)).keys()


def test_moving_slots_refuses_different_captures():
    g1, g2 = cg.Graph("a"), cg.Graph("a")
    g1.kernel(K, 1, 1, (q(X),))
    g2.memset(X, 0, count=4, element_size=4)
    with pytest.raises(OperandError, match="the two captures differ at kernel#0"):
        moving_slots(g1, g2, {"x": (X, 64)}, {"x": (X + 4096, 64)})
    with pytest.raises(OperandError, match="both memory objects are at"):
        moving_slots(g1, g1, {"x": (X, 64)}, {"x": (X, 64)})


def test_parametrize_report_is_public():
    assert cg.ParametrizeReport.__name__ == "ParametrizeReport" and "lift_exact" in cg.__all__


def test_lift_with_params_rewrites_the_lifted_argument_bytes(monkeypatch):
    from cudagraph.materialize import lift as _lift
    from lift_fakes import FakeBindings, FakeDriver
    from test_lift_cpu import ARGS

    f = FakeDriver()
    b = FakeBindings(f)
    monkeypatch.setattr(_lift, "graph_reader", f.reader)
    monkeypatch.setattr(_lift, "ensure_context", lambda: None)
    monkeypatch.setattr(_lift, "require_driver", lambda: b)
    monkeypatch.setattr(_lift, "kernel_info", lambda h: SimpleNamespace(name="fn", sizes=(8, 4, 4)))
    src = f.graph()
    first = f.kernel(src, ARGS)
    f.kernel(src, ARGS, (first,))
    base = 0x7F00_0000_0000  # ARGS[0] is base + 0x1000
    g = cg.lift(src, params={"x": (base, 0x2000)})
    (report,) = g.parametrizations
    assert report.keys() == {("lifted", 0, "args[0]", 0x1000), ("lifted", 1, "args[0]", 0x1000)}
    x = g.params["x"]
    assert [n.args for n in g.nodes] == [(ParamBytes(ARGS[0], ((0, x, 0x1000),)), ARGS[1], ARGS[2])] * 2
    assert cg.lift(src).nodes[0].args == tuple(ARGS)  # without params: as captured


def test_moving_slots_reports_what_no_named_memory_explains():
    from cudagraph.definition.parametrize import moving_slots as _moving

    def capture(x: int, scratch: int, salt: int) -> cg.Graph:
        g = cg.Graph("c")
        g.memset(x, 0, count=4, element_size=4)
        g.memset(scratch, 0, count=4, element_size=4)  # memory the function allocates anew each time
        g.kernel(drv.CUfunction(0x10), 1, 32, (x.to_bytes(8, "little"), salt.to_bytes(8, "little")))
        return g

    g1, g2 = capture(X, 0x5000_0000, 1), capture(X + 4096, 0x6000_0000, 2)
    unexplained: list = []
    only = _moving(g1, g2, {"x": (X, 64)}, {"x": (X + 4096, 64)}, unexplained)
    assert sum(len(v) for v in only.values()) == 2  # the memset's dst and the kernel's first argument
    got = {(n.index, where, v1, v2) for n, where, v1, v2 in unexplained}
    assert got == {(1, "dst", 0x5000_0000, 0x6000_0000), (2, "args[1]", 1, 2)}
