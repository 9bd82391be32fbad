"""C host functions without a GPU: ``Graph.host_function`` reads the function's address and its data (bytes
copied, an address passed as is), refuses what is neither by name, updates in place, and gives the driver
exactly those two words; compat's ``callback`` takes ctypes function pointers with ``user_data``."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

import cudagraph as cg
from cudagraph.definition.diff import node_state
from cudagraph.errors import DefinitionError, OperandError

CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@CALLBACK
def first(data: Any) -> None:  # never called here: only its address is read
    pass


@CALLBACK
def second(data: Any) -> None:
    pass


def address(fn: Any) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value  # type: ignore[return-value]


def read(addr: int, n: int) -> bytes:
    return ctypes.string_at(addr, n)


def test_the_function_and_its_data_are_read_once():
    g = cg.Graph("h")
    payload = bytearray(b"\x5a\x01")
    n = g.host_function(first, payload, name="cb")
    assert isinstance(n, cg.HostFunctionNode) and n.kind == "host_fn" and n.label == "host_fn#0 'cb'"
    assert n.fn is first and n.fn_address == address(first) and n.user_data is payload
    payload[0] = 0  # the node reads its own copy
    assert read(n.data_address, 2) == b"\x5a\x01"
    raw = g.host_function(address(second), 0x1234, after=n)
    assert (raw.fn_address, raw.data_address, raw.name) == (address(second), 0x1234, "host_function")
    none = g.host_function(first)
    assert none.data_address == 0 and none.describe() == f"fn={address(first):#x} user_data=0x0"
    assert [p.index for p in raw.predecessors] == [0]


def test_a_cuhostfn_is_an_address():
    drv = pytest.importorskip("cuda.bindings.driver")
    g = cg.Graph("h")
    assert g.host_function(drv.CUhostFn(address(first))).fn_address == address(first)


@pytest.mark.parametrize(
    ("fn", "user_data", "text"),
    [
        (print, None, "fn must be a C function pointer (a ctypes CFUNCTYPE(None, c_void_p) object, a CUhostFn or an"),
        (0, None, "fn: 0x0 is not a function address"),
        (True, None, "fn must be a C function pointer"),
        (first, [1, 2], "user_data must be None, an int address or a bytes-like object, got list"),
        (first, -1, "user_data: -0x1 is not an address"),
    ],
)
def test_what_is_no_function_or_data_is_refused_by_name(fn, user_data, text):
    g = cg.Graph("h")
    with pytest.raises(OperandError) as info:
        g.host_function(fn, user_data, name="bad")
    assert str(info.value).startswith("host_function#0 'bad': ") and text in str(info.value)
    assert len(g) == 0


def test_an_update_changes_the_function_or_the_data_and_the_state():
    g = cg.Graph("h")
    n = g.host_function(first, b"\x01")
    before = node_state(n)
    n.update(user_data=b"\x02\x03")
    assert read(n.data_address, 2) == b"\x02\x03" and n.fn is first
    n.update(fn=second)
    assert n.fn_address == address(second) and read(n.data_address, 2) == b"\x02\x03"
    assert node_state(n) != before
    with pytest.raises(OperandError, match=r"fn must be a C function pointer"):
        n.update(fn=print)
    assert n.fn is second
    with pytest.raises(DefinitionError):
        n.update(args=())  # a keyword a host function does not take


def test_the_driver_gets_the_two_words():
    drv = pytest.importorskip("cuda.bindings.driver")
    from cudagraph.ops.registry import ops_for

    class Env:
        def node_params(self, node_type: Any) -> Any:
            p = drv.CUgraphNodeParams()
            p.type = node_type
            return p

    g = cg.Graph("h")
    n = g.host_function(first, b"\x07")
    p = ops_for(n).params(n, Env())  # type: ignore[arg-type]
    assert p.type == drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_HOST
    assert (int(p.host.fn), int(p.host.userData)) == (address(first), n.data_address)


def test_compat_callbacks_take_ctypes_functions():
    compat = cg.compat
    gd = compat.GraphDefinition()
    c = gd.callback(first, user_data=b"\x5a")
    py = gd.callback(print)
    assert c.node.kind == "host_fn" and c.callback is None and read(c.node.data_address, 1) == b"\x5a"
    assert isinstance(c, compat.HostCallbackNode) and py.callback is print
    c.update(second, user_data=0x10)
    assert (c.node.fn_address, c.node.data_address) == (address(second), 0x10)
    with pytest.raises(OperandError, match=r"fn: builtin_function_or_method for a callback made with a ctypes"):
        c.update(print)
    with pytest.raises(OperandError, match=r"fn: a ctypes function pointer for a callback made with a Python"):
        py.update(first)
    with pytest.raises(DefinitionError, match=r"user_data is only supported with a ctypes function pointer"):
        gd.callback(print, user_data=b"x")
    gb = compat.GraphBuilder().begin_building()
    gb.callback(first, user_data=b"\x01")
    assert [n.kind for n in gb.graph.nodes] == ["host_fn"]
