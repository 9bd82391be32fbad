"""Hardening of parameters, on the CPU: the dtypes a scalar parameter may have, the values it takes, its name.

- A scalar parameter's dtype must be one the packers and the rebinding plans can write (bool, the integers of 1,
  2, 4 and 8 bytes, the floats of 2, 4 and 8 bytes): complex, structured, ``longdouble``... are refused when
  declared, naming the parameter and the dtype (they used to pass, then a rebind raised a ``KeyError`` after the
  new value was recorded). A bind whose plan cannot be made leaves the bindings and the driver nodes as they were.
- A scalar value is never truncated: a non-integral float for an integer, a value out of the dtype's range (a
  float that would become an infinity included), a bad default are refused with ``OperandError``, by checks made
  in Python (numpy 1.24 wraps ``np.uint32(-1)``, numpy 2 refuses it).
- A parameter cannot take the name of another argument of a method that takes parameter values as keywords.

The kernel-node update call is replaced by a recorder (both the compiled loop's entry point and the
``cuda.bindings`` call), the kernel's parameter layout by a fixed one, as in ``test_bind_plan_cpu``.
"""

from __future__ import annotations

import ctypes
import inspect
import struct
import warnings
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.executable.executable as _executable
import cudagraph.ops.kinds.kernel as _kernel_writer
from cudagraph.definition.param import RESERVED_BY, RESERVED_NAMES, SCALAR_CODES, param_dtype
from cudagraph.driver.kernel_args import _STRUCT_CODES, KernelInfo
from cudagraph.errors import DefinitionError, OperandError
from cudagraph.executable.cache import ExecutableCache
from cudagraph.executable.executable import Executable

drv = pytest.importorskip("cuda.bindings.driver")

import test_bind_plan_cpu as _plan  # noqa: E402

K, make_exe = _plan.K, _plan.make_exe
PTR = 0x7F00_0000_0000


# ------------------------------------------------------------------------------------------- the recorder
def layout(sizes: tuple[int, ...]) -> KernelInfo:
    """The layout of a kernel whose parameters have ``sizes`` bytes, each at an offset aligned to its size."""
    offsets, at = [], 0
    for s in sizes:
        at = (at + s - 1) // s * s
        offsets.append(at)
        at += s
    total = max(at, 1)
    info = KernelInfo.__new__(KernelInfo)
    info.kernel = None
    info.handle = drv.CUkernel(0x77)
    info.is_library_kernel = True
    info.name = "k"
    info.offsets, info.sizes, info.total = tuple(offsets), tuple(sizes), total
    info._scratch = (ctypes.c_char * total)()
    info._scratch_addr = ctypes.addressof(info._scratch)
    info._ptrs = (ctypes.c_void_p * len(sizes))(*[info._scratch_addr + o for o in offsets])
    info.params_address = ctypes.addressof(info._ptrs)
    info._packers = {}
    info._kinds = {}
    return info


class Recorder(list):  # type: ignore[type-arg]
    """``(driver node, the bytes of every argument)`` per kernel-node update; ``info`` is the kernel's layout."""

    info: KernelInfo
    callback: Any


@pytest.fixture(params=["native", "bindings"])
def rec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Recorder:
    out = Recorder()
    out.info = layout((8, 4, 4))
    monkeypatch.setattr(_kernel_writer, "kernel_info", lambda k: out.info)

    def record(dnode: int, kernel_params: int) -> None:
        argv = ctypes.cast(kernel_params, ctypes.POINTER(ctypes.c_void_p))
        out.append((dnode, b"".join(ctypes.string_at(argv[i], s) for i, s in enumerate(out.info.sizes))))

    def set_kernel(exec_handle: Any, dnode: Any, params: Any) -> tuple[Any]:
        record(int(dnode), params.kernelParams)
        return (drv.CUresult.CUDA_SUCCESS,)

    def set_kernel_c(exec_handle: int, dnode: int, params: int) -> int:
        (kernel_params,) = struct.unpack("<Q", ctypes.string_at(params + 40, 8))
        record(dnode, kernel_params)
        return 0

    monkeypatch.setattr(_kernel_writer, "_SET_KERNEL", set_kernel)
    if request.param == "native":
        if _kernel_writer._REBIND is None:
            pytest.skip("cudagraph.driver._native was not built")
        out.callback = _plan.SET_PROTO(set_kernel_c)
        monkeypatch.setattr(_kernel_writer, "_SET_KERNEL_ADDR", ctypes.cast(out.callback, ctypes.c_void_p).value)
    else:
        monkeypatch.setattr(_kernel_writer, "_SET_KERNEL_ADDR", None)
    return out


def scalar_graph(dtype: Any) -> tuple[cg.Graph, cg.Param]:
    """``k(float* x, T a, int n)`` twice, ``a`` a parameter of ``dtype``."""
    g = cg.Graph("g")
    a = g.param("a", dtype)
    use = (PTR, a, np.int32(8))
    g.kernel(K, 1, 32, use)
    g.kernel(K, 1, 32, use)
    return g, a


def state(exe: Executable) -> tuple[dict[str, Any], dict[str, Any], int]:
    return dict(exe._bindings), dict(exe._raw_bound), exe.update_calls


# ---------------------------------------------------------------------- 1. dtypes a scalar may have
@pytest.mark.parametrize(
    "dtype",
    [
        np.complex64,
        np.complex128,
        np.dtype([("a", "<f4"), ("b", "<i4")]),  # a structured dtype (8 bytes, like a double)
        np.dtype("V8"),
        np.dtype(("<i4", (2,))),  # a subarray
        np.clongdouble,
        pytest.param(
            np.longdouble,
            marks=pytest.mark.skipif(np.dtype(np.longdouble).itemsize == 8, reason="longdouble is double here"),
        ),
    ],
    ids=str,
)
def test_a_dtype_without_packing_is_refused_when_declared(dtype):
    g = cg.Graph("g")
    k = g.kernel(K, 1, 32, (PTR,))
    with pytest.raises(OperandError) as e:
        g.param("z", dtype)
    msg = str(e.value)
    assert type(e.value) is OperandError
    assert "param 'z'" in msg and str(np.dtype(dtype)) in msg and "cannot be a scalar parameter" in msg, msg
    assert g.params == {} and len(g) == 1 and k.args == (PTR,)


def test_every_dtype_a_scalar_may_have_has_a_struct_code():
    """One table: whatever ``param_dtype`` takes, the packers and plans can write (the refused ones above used to
    pass ``param_dtype`` and then fail a rebind with ``KeyError: ('c', 8)``)."""
    assert _STRUCT_CODES is SCALAR_CODES
    taken = set()
    for code in np.typecodes["All"]:
        try:
            dt = param_dtype(code, "p")
        except OperandError:
            continue
        assert dt is not None and (dt.kind, dt.itemsize) in SCALAR_CODES, code
        taken.add((dt.kind, dt.itemsize))
    assert taken == set(SCALAR_CODES)


def test_a_non_native_byte_order_is_the_native_dtype():
    g = cg.Graph("g")
    p = g.param("n", np.dtype(">i4" if np.little_endian else "<i4"))
    assert p.dtype == np.dtype(np.int32) and p.dtype.isnative
    assert type(p.coerce(5)) is np.int32


@pytest.mark.parametrize("code", sorted({c for k, c in SCALAR_CODES.items()}))
def test_every_scalar_dtype_rebinds_to_the_bytes_of_its_value(rec, code):
    dt = np.dtype("<" + code)
    rec.info = layout((8, dt.itemsize, 4))
    g, _a = scalar_graph(dt)
    first, second = (np.bool_(False), True) if dt.kind == "b" else (dt.type(1), 3)
    exe = make_exe(g, a=first)
    assert exe.bind(a=second) == 2
    want = struct.pack("<Q", PTR) + struct.pack("<" + code, second) + struct.pack("<i", 8)
    assert [data for _d, data in rec] == [want, want]
    assert exe._bindings["a"] == second and type(exe._bindings["a"]) is dt.type


def test_a_plan_that_cannot_be_made_leaves_the_bindings_and_the_nodes_as_they_were(rec, monkeypatch):
    """Whatever stops a plan from being made (here: the prepared structure of a kernel node), the new value is
    not recorded: the next bind of it is made in full, not taken for the one bound."""
    g, _a = scalar_graph(np.float32)
    exe = make_exe(g, a=np.float32(1.0))
    before = state(exe)

    def refuse(*args: Any) -> Any:
        raise OperandError("no structure today")

    with monkeypatch.context() as m:
        m.setattr(_executable.Executable, "_make_plan", refuse)
        with pytest.raises(OperandError, match="no structure today"):
            exe.bind(a=2.0)
        with pytest.raises(OperandError, match="no structure today"):
            exe.bind(a=2.0)  # the same value again: not taken for the bound one
    assert state(exe) == before and rec == [] and exe._plans == {}
    assert exe.bind(a=2.0) == 2  # now made, and the nodes get the value
    assert exe._bindings["a"] == np.float32(2.0) and len(rec) == 2


def test_a_plan_of_several_names_that_cannot_be_made_changes_nothing(rec, monkeypatch):
    g = cg.Graph("g")
    a, n = g.param("a", np.float32), g.param("n", np.int32)
    g.kernel(K, 1, 32, (PTR, a, n))
    exe = make_exe(g, a=np.float32(1.0), n=np.int32(8))
    before = state(exe)

    def refuse(*args: Any) -> Any:
        raise OperandError("nope")

    with monkeypatch.context() as m:
        m.setattr(_executable.Executable, "_make_plan", refuse)
        with pytest.raises(OperandError, match="nope"):
            exe.bind(a=2.0, n=9)
    assert state(exe) == before and rec == []
    assert exe.bind(a=2.0, n=9) == 1
    assert rec == [(0x100, struct.pack("<Qfi", PTR, 2.0, 9))]


# --------------------------------------------------------------------------- 2. no silent truncation
REFUSED = [
    (np.int32, 1.7, ["1.7", "int32", "not an integer"]),
    (np.int32, -0.5, ["-0.5", "int32", "not an integer"]),
    (np.uint8, 255.9, ["255.9", "uint8", "not an integer"]),
    (np.int32, np.float32(1.5), ["1.5", "int32", "not an integer"]),
    (np.int32, float("nan"), ["nan", "int32", "not an integer"]),
    (np.int64, float("inf"), ["inf", "int64", "not an integer"]),
    (np.float32, 1e39, ["1e+39", "float32", "out of the range"]),
    (np.float32, -1e39, ["-1e+39", "float32", "out of the range"]),
    (np.float32, 10**39, [str(10**39), "float32", "out of the range"]),
    (np.float16, 70000.0, ["70000.0", "float16", "out of the range"]),
    (np.float64, 10**400, ["float64", "out of the range"]),
    (np.float64, Decimal("1e400"), ["Decimal('1E+400')", "float64", "out of the range"]),  # (float() gives inf)
    (np.uint32, -1, ["-1", "uint32", "out of the range", "0..4294967295"]),
    (np.uint32, 2**40, [str(2**40), "uint32", "out of the range"]),
    (np.uint8, 256, ["256", "uint8", "0..255"]),
    (np.int8, -129, ["-129", "int8", "-128..127"]),
    (np.uint64, 2**64, [str(2**64), "uint64", "out of the range"]),
    (np.int64, 2.0**63, ["9.223372036854776e+18", "int64", "out of the range"]),
    (np.int32, np.uint32(4_000_000_000), ["4000000000", "int32", "out of the range"]),
    (np.uint16, np.int16(-1), ["-1", "uint16", "out of the range"]),
    (np.bool_, 2, ["2", "bool", "0..1"]),
    (np.float64, np.complex64(1 + 2j), ["float64", "got complex64"]),  # (the imaginary part would be dropped)
    (np.int32, np.array([5]), ["int32", "got ndarray"]),
]


@pytest.mark.parametrize(("dtype", "value", "words"), REFUSED, ids=lambda x: repr(x)[:20])
def test_a_value_the_dtype_cannot_hold_is_refused(dtype, value, words):
    p = cg.Graph("g").param("n", dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no numpy overflow or deprecation warning on the way)
        with pytest.raises(OperandError) as e:
            p.coerce(value)
    msg = str(e.value)
    assert type(e.value) is OperandError
    assert msg.startswith("param 'n': ") and all(w in msg for w in words), msg


TAKEN = [
    (np.int32, 2.0, 2),
    (np.int32, np.float32(-3.0), -3),
    (np.uint8, 255, 255),
    (np.int8, -128, -128),
    (np.uint64, 2**64 - 1, 2**64 - 1),
    (np.int64, -(2**63), -(2**63)),
    (np.int64, 2.0**62, 2**62),
    (np.int32, np.uint32(5), 5),
    (np.int32, np.array(7), 7),
    (np.float32, 3.4028234663852886e38, 3.4028234663852886e38),
    (np.float32, -(2**100), -(2.0**100)),
    (np.float32, 1e-50, 0.0),  # (underflow rounds to zero: a rounding, not a truncation)
    (np.float16, 65504.0, 65504.0),
    (np.float16, np.int16(-7), -7.0),
    (np.float32, float("inf"), float("inf")),  # an infinity given stays one
    (np.float64, Decimal("-Infinity"), float("-inf")),
    (np.float32, Decimal("1.5"), 1.5),
    (np.int16, Decimal("-7"), -7),
    (np.bool_, 1, True),
    (np.bool_, 0.0, False),
    (np.bool_, True, True),
]


@pytest.mark.parametrize(("dtype", "value", "want"), TAKEN, ids=lambda x: repr(x)[:20])
def test_a_value_the_dtype_holds_is_taken(dtype, value, want):
    p = cg.Graph("g").param("n", dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = p.coerce(value)
    assert type(out) is np.dtype(dtype).type and out == want


def test_nan_stays_nan_and_an_exact_scalar_is_taken_as_it_is():
    p = cg.Graph("g").param("a", np.float32)
    assert np.isnan(p.coerce(float("nan")))
    v = np.float32(2.5)
    assert p.coerce(v) is v


def test_the_range_checks_do_not_hang_on_numpy(monkeypatch):
    """numpy 1.24 (which pyproject allows) gives ``np.uint32(-1) == 4294967295`` and ``np.uint32(2**40) == 0``;
    numpy 2 raises. The checks are made in Python before numpy converts: with a converter that wraps as numpy
    1.24 does, the same values are refused."""
    p = cg.Graph("g").param("n", np.uint32)

    def wrapping(v: Any) -> Any:
        return np.uint32(int(v) % 2**32)

    monkeypatch.setattr(p, "_type", wrapping)
    for bad in (-1, 2**40, -1.0, 2.0**40):
        with pytest.raises(OperandError, match=r"param 'n': .* is out of the range of uint32 \(0\.\.4294967295\)"):
            p.coerce(bad)
    assert p.coerce(7) == 7


@pytest.mark.parametrize(
    ("dtype", "default", "words"),
    [
        (np.uint8, 300, ["bad default 300", "uint8", "0..255"]),
        (np.int32, 1.5, ["bad default 1.5", "int32", "not an integer"]),
        (np.float32, 1e39, ["bad default 1e+39", "float32", "out of the range"]),
        (np.float32, "1.0", ["bad default '1.0'", "float32", "got str"]),
        (None, -1, ["bad default -1", "outside 0..2**64-1"]),
        (None, 1.5, ["bad default 1.5", "got float"]),
    ],
)
def test_a_bad_default_is_refused_when_declared(dtype, default, words):
    g = cg.Graph("g")
    with pytest.raises(OperandError) as e:
        g.param("m", dtype, default=default)
    msg = str(e.value)
    assert type(e.value) is OperandError
    assert msg.startswith("param 'm': ") and all(w in msg for w in words), msg
    assert g.params == {}
    p = g.param("m", dtype, default=255 if dtype is not None else PTR)  # the name is free: nothing was left
    assert p.default == (255 if dtype is not None else PTR)


def test_a_refused_scalar_bind_changes_nothing(rec):
    g, _a = scalar_graph(np.int32)
    exe = make_exe(g, a=np.int32(1))
    before = state(exe)
    for bad in (1.7, 2**31, -(2**31) - 1, 1e39):
        with pytest.raises(OperandError, match="param 'a': "):
            exe.bind(a=bad)
        assert state(exe) == before and rec == []
    assert exe.bind(a=2.0) == 2 and exe._bindings["a"] == 2  # an integral float is an int
    assert [data[8:12] for _d, data in rec] == [struct.pack("<i", 2)] * 2


def test_a_float_that_would_overflow_is_refused_by_a_rebinding_launch(rec, monkeypatch):
    launched: list[Any] = []
    monkeypatch.setattr(_executable, "_LAUNCH", lambda e, s: launched.append(int(s)) or (0,))
    _plan.python_launch(monkeypatch)
    g, _a = scalar_graph(np.float32)
    exe = make_exe(g, a=np.float32(1.0))
    before = state(exe)
    with pytest.raises(OperandError, match=r"param 'a': 1e\+39 is out of the range of float32"):
        exe.launch(drv.CUstream(0x99), a=1e39)
    assert state(exe) == before and rec == [] and launched == []
    exe.launch(drv.CUstream(0x99), a=2.0)
    assert launched == [0x99] and [data[8:12] for _d, data in rec] == [struct.pack("<f", 2.0)] * 2


# --------------------------------------------------------------------------------- 3. reserved names
#: Every method taking parameter values as ``**params``, unwrapped from a compiled method where one replaces it.
def methods_taking_params() -> dict[str, inspect.Signature]:
    found = {}
    for cls in (cg.Graph, Executable, ExecutableCache):
        for name, fn in inspect.getmembers(cls):
            fn = getattr(fn, "func", fn)
            try:
                sig = inspect.signature(fn)
            except (TypeError, ValueError):
                continue
            if any(p.kind is p.VAR_KEYWORD and p.name == "params" for p in sig.parameters.values()):
                found[f"{cls.__name__}.{name}"] = sig
    return found


def test_the_reserved_names_are_the_other_arguments_of_every_method_taking_parameter_values():
    found = methods_taking_params()
    assert {
        "Graph.instantiate",
        "Graph.run",
        "Graph.profile",
        "Executable.launch",
        "Executable.bind",
        "Executable.update",
        "ExecutableCache.get",
    } <= set(found)
    taken = {p.name for sig in found.values() for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD}
    assert taken <= RESERVED_NAMES, taken - RESERVED_NAMES
    assert set(RESERVED_BY) == RESERVED_NAMES


@pytest.mark.parametrize("name", sorted(RESERVED_NAMES))
def test_a_reserved_name_is_refused_and_the_reserved_names_listed(name):
    g = cg.Graph("g")
    with pytest.raises(DefinitionError) as e:
        g.param(name, np.float32)
    msg = str(e.value)
    assert f"param name {name!r} is reserved" in msg and RESERVED_BY[name] in msg
    assert all(other in msg for other in RESERVED_NAMES), msg
    assert g.params == {}


@pytest.mark.parametrize("name", ["backend", "repeats", "stream", "graph"])
def test_a_name_once_taken_is_refused_by_parametrize(name):
    g = cg.Graph("g")
    k = g.kernel(K, 1, 1, (struct.pack("<Q", PTR),))
    with pytest.raises(DefinitionError, match=f"param name {name!r} is reserved"):
        g.parametrize(**{"x": (PTR + 4096, 64), name: (PTR, 64)})
    assert g.params == {} and k.args == (struct.pack("<Q", PTR),) and g.parametrizations == []
