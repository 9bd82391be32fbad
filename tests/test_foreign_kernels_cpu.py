"""Foreign kernels without a GPU: CuPy and Numba stand-ins (same type and attribute names) converted by
driver/foreign_kernels.py, accepted by Graph.kernel and cudagraph.launch, and their refusals."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

drv = pytest.importorskip("cuda.bindings.driver")

import cudagraph as cg  # noqa: E402
from cudagraph.driver import foreign_kernels as fk  # noqa: E402
from cudagraph.errors import OperandError  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(fk, "_CACHE", {})


# ----------------------------------------------------------------------------------------- CuPy stand-ins
class Function:  # cupy.cuda.function.Function
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class RawKernel:  # cupy.RawKernel
    def __init__(self, ptr: int) -> None:
        self.kernel = Function(ptr)


def test_cupy_raw_kernel_and_module_function_become_cufunctions():
    rk = RawKernel(0x1234)
    out = fk.resolve(rk, (np.int32(1),), "t")
    assert isinstance(out.kernel, drv.CUfunction) and int(out.kernel) == 0x1234
    assert out.convert is None and out.source is rk
    fn = Function(0x5678)
    assert int(fk.resolve(fn, None, "t").kernel) == 0x5678
    assert fk.resolve(rk, None, "t") is out  # cached per object


def test_a_cupy_kernel_without_a_function_pointer_is_refused():
    with pytest.raises(OperandError, match=r"cudagraph.launch: kernel: a RawKernel without a loaded CUfunction"):
        fk.resolve(RawKernel(0), (), "cudagraph.launch: kernel")


def test_graph_kernel_accepts_cupy_kernels_by_type_name():
    g = cg.Graph("g")
    rk = RawKernel(0x10)
    n = g.kernel(rk, 1, 32, (np.int32(3),))
    assert n.kernel is rk
    g.validate()
    m = cg.launch(g.path(after=n), (2, 64), Function(0x20), np.int32(1))
    assert int(m.kernel) == 0x20 and m.grid == (2, 1, 1)


def test_kernel_info_reads_the_handle_of_a_foreign_kernel(monkeypatch):
    from cudagraph.driver import kernel_args

    seen: list[Any] = []

    class Info:
        def __init__(self, kernel: Any) -> None:
            seen.append(kernel)
            self.kernel = None

    monkeypatch.setattr(kernel_args, "KernelInfo", Info)
    monkeypatch.setattr(kernel_args, "_INFO", {})
    kernel_args.kernel_info(RawKernel(0x4242))
    assert isinstance(seen[0], drv.CUfunction) and int(seen[0]) == 0x4242


# ----------------------------------------------------------------------------------------- Numba stand-ins
class NumbaType:
    def __init__(self, name: str, ndim: int = 0) -> None:
        self.name = name
        self.ndim = ndim

    def __str__(self) -> str:
        return self.name


class Array(NumbaType):
    pass


class CPointer(NumbaType):
    pass


F32 = NumbaType("float32")
I32 = NumbaType("int32")


class Overload:
    def __init__(self, types: tuple[Any, ...], handle: int) -> None:
        self.argument_types = types
        self.bound = 0
        cufunc = SimpleNamespace(handle=drv.CUfunction(handle))
        self._codelibrary = SimpleNamespace(get_cufunc=lambda: cufunc)

    def bind(self) -> None:
        self.bound += 1


class CUDADispatcher:
    def __init__(self, overloads: dict[tuple[Any, ...], Overload], can_compile: bool = True) -> None:
        self.overloads = overloads
        self._can_compile = can_compile
        self.compiled: list[tuple[Any, ...]] = []

    def typeof_pyval(self, v: Any) -> Any:
        if hasattr(v, "__cuda_array_interface__"):
            return ARR1
        return F32 if isinstance(v, (float, np.float32)) else I32

    def compile(self, types: tuple[Any, ...]) -> Overload:
        self.compiled.append(types)
        ov = Overload(types, 0x900 + len(self.compiled))
        self.overloads[types] = ov
        return ov


ARR1 = Array("array(float32, 1d, C)", ndim=1)


class DevArray:
    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str = "<f4", strides: Any = None) -> None:
        self.__cuda_array_interface__ = {
            "data": (ptr, False),
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "version": 3,
        }


def test_numba_explicit_signature_expands_arrays_as_numba_passes_them():
    ov = Overload((ARR1, F32, I32), 0x777)
    d = CUDADispatcher({(ARR1, F32, I32): ov}, can_compile=False)
    x = DevArray(0xD000, (10,))
    out = fk.resolve(d, (x, 2.5, 7), "cudagraph.launch: kernel")
    assert int(out.kernel) == 0x777 and ov.bound == 1
    args = out.convert((x, 2.5, 7), "cudagraph.launch")
    # meminfo, parent, nitems, itemsize, data, shape[0], strides[0], then the scalars
    assert args == (0, 0, 10, 4, 0xD000, 10, 4, np.float32(2.5), np.int32(7))
    assert [type(a) for a in args] == [int, int, np.int64, np.int64, int, np.int64, np.int64, np.float32, np.int32]


def test_numba_two_dimensional_array_strides_from_the_interface_or_c_order():
    a2 = Array("array(float32, 2d, C)", ndim=2)
    d = CUDADispatcher({(a2,): Overload((a2,), 0x1)}, can_compile=False)
    out = fk.resolve(d, (DevArray(0x10, (3, 5)),), "t")
    assert out.convert((DevArray(0x10, (3, 5)),), "t")[5:] == (3, 5, 20, 4)
    assert out.convert((DevArray(0x10, (3, 5), strides=(4, 12)),), "t")[5:] == (3, 5, 4, 12)


def test_numba_lazy_dispatcher_is_specialised_from_the_argument_types():
    d = CUDADispatcher({})
    x = DevArray(0xD000, (4,))
    out = fk.resolve(d, (x, np.float32(1)), "t")
    assert d.compiled == [(ARR1, F32)] and int(out.kernel) == 0x901
    again = fk.resolve(d, (DevArray(0xE000, (8,)), np.float32(2)), "t")
    assert again is out and d.compiled == [(ARR1, F32)]  # same argument types: cached


def test_numba_launch_on_a_path_adds_the_expanded_arguments():
    ov = Overload((ARR1, I32), 0x31)
    d = CUDADispatcher({(ARR1, I32): ov}, can_compile=False)
    g = cg.Graph("g")
    n = cg.launch(g.path(), (1, 32), d, DevArray(0xA0, (6,)), 3)
    assert int(n.kernel) == 0x31
    assert n.args == (0, 0, 6, 4, 0xA0, 6, 4, np.int32(3))


@pytest.mark.parametrize(
    "args, text",
    [
        (
            (5, np.int32(1)),
            "cudagraph.launch: argument 0: Numba parameter of type array(float32, 1d, C) takes a device",
        ),
        ((DevArray(1, (2, 2)), np.int32(1)), "argument 0: Numba parameter of type array(float32, 1d, C) takes 1 dim"),
        ((DevArray(1, (2,)),), "the Numba kernel takes 2 arguments, got 1"),
    ],
)
def test_numba_arguments_that_do_not_fit_are_refused_and_nothing_is_added(args, text):
    d = CUDADispatcher({(ARR1, I32): Overload((ARR1, I32), 0x31)}, can_compile=False)
    g = cg.Graph("g")
    with pytest.raises(OperandError) as info:
        cg.launch(g.path(), (1, 32), d, *args)
    assert text in str(info.value)
    assert len(g) == 0


def test_numba_unsupported_parameter_type_is_named():
    rec = NumbaType("Record(a[type=int32;offset=0])")
    d = CUDADispatcher({(rec,): Overload((rec,), 0x1)}, can_compile=False)
    out = fk.resolve(d, (1,), "t")
    with pytest.raises(OperandError, match=r"t: argument 0: Numba parameter type Record.* is not supported"):
        out.convert((1,), "t")


def test_a_numba_dispatcher_of_several_overloads_needs_its_arguments():
    d = CUDADispatcher({(I32,): Overload((I32,), 1), (F32,): Overload((F32,), 2)})
    with pytest.raises(OperandError, match=r"a Numba dispatcher with 2 compiled overloads: give the arguments"):
        fk.foreign_handle(d)


def test_numba_compilation_failure_is_a_typed_error():
    class Failing(CUDADispatcher):
        def compile(self, types: tuple[Any, ...]) -> Overload:
            raise RuntimeError("typing failed")

    Failing.__name__ = "CUDADispatcher"
    with pytest.raises(OperandError, match=r"w: Numba could not compile the kernel for .*RuntimeError: typing failed"):
        fk.resolve(Failing({}), (1,), "w")


def test_int_handles_go_through_cuda_core_kernel_from_handle(monkeypatch):
    core = pytest.importorskip("cuda.core")
    made: list[int] = []

    class Kernel:
        @staticmethod
        def from_handle(h: int) -> Any:
            made.append(h)
            return ("kernel", h)

    monkeypatch.setattr(core, "Kernel", Kernel)
    assert fk.resolve(0xBEEF, None, "t").kernel == ("kernel", 0xBEEF)
    assert fk.resolve(0xBEEF, None, "t").kernel == ("kernel", 0xBEEF)
    assert made == [0xBEEF]
    with pytest.raises(OperandError, match=r"t: -1 is not a CUkernel handle"):
        fk.resolve(-1, None, "t")


def test_something_else_is_not_a_foreign_kernel():
    assert not fk.is_foreign(True) and not fk.is_foreign("k") and fk.is_foreign(RawKernel(1))
    with pytest.raises(OperandError, match=r"t: expected a cuda.core Kernel, .* got bool"):
        fk.resolve(True, None, "t")
