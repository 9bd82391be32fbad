"""The compiled ``Executable.launch`` (``_native_exec_launch.c``) against its Python twin, on the CPU.

The driver's ``cuGraphLaunch`` is a C shim compiled here: it records the handles it is given, counts the
calls made with the GIL held, and returns the code the test sets. The compiled method is built on that
shim and put in place of ``Executable.launch``; the twin's own launches (the first on each stream, and
every call the compiled path hands over) go through ``executable._LAUNCH``, recorded apart. Rebinding
launches use the recorders of ``test_bind_plan_cpu`` and ``test_bind_many_cpu`` (the compiled rebind and
the ``cuda.bindings`` one).
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

import cudagraph.executable.executable as _executable
from cudagraph.driver import c_entry
from cudagraph.errors import DriverError, ExecutableClosedError, HostCallbackError, OperandError
from cudagraph.executable.executable import Executable

drv = pytest.importorskip("cuda.bindings.driver")

import test_bind_many_cpu as _many  # noqa: E402
import test_bind_plan_cpu as _plan  # noqa: E402
from driver_fakes import compile_shim  # noqa: E402
from test_parametrize_cpu import FakeTensor  # noqa: E402

calls = _plan.calls  # the recorder fixture (both modes)

SHIM = r"""
#include <Python.h>

static void *last_exec, *last_stream;
static long count, held;
static int next_rc;

int shim_graph_launch(void *exec, void *stream)
{
    count++;
    if (PyGILState_Check())
        held++;
    last_exec = exec;
    last_stream = stream;
    return next_rc;
}
void shim_reset(int rc) { count = held = 0; next_rc = rc; last_exec = last_stream = NULL; }
long shim_count(void) { return count; }
long shim_held(void) { return held; }
void *shim_exec(void) { return last_exec; }
void *shim_stream(void) { return last_stream; }
"""

TWIN = getattr(Executable.launch, "func", Executable.launch)


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Any:
    dll = compile_shim(SHIM, tmp_path_factory.mktemp("launch-shim"), "the cuGraphLaunch shim")
    dll.shim_count.restype = dll.shim_held.restype = ctypes.c_long
    dll.shim_exec.restype = dll.shim_stream.restype = ctypes.c_void_p
    return dll


class Launches:
    """What reached the shim (compiled) and ``_LAUNCH`` (the twin)."""

    def __init__(self, dll: Any) -> None:
        self.dll = dll
        self.twin: list[tuple[int, int]] = []

    def compiled(self) -> tuple[int, int, int | None, int | None]:
        """``(calls, calls with the GIL held, last exec handle, last stream)``."""
        d = self.dll
        return d.shim_count(), d.shim_held(), d.shim_exec(), d.shim_stream()

    def refuse_with(self, rc: int) -> None:
        self.dll.shim_reset(rc)


@pytest.fixture
def launches(shim: Any, monkeypatch: pytest.MonkeyPatch) -> Launches:
    out = Launches(shim)
    shim.shim_reset(0)
    address = ctypes.cast(shim.shim_graph_launch, ctypes.c_void_p).value
    method = c_entry.NATIVE.LaunchMethod(TWIN, Executable, address)
    monkeypatch.setattr(Executable, "launch", method)
    monkeypatch.setattr(_executable, "_LAUNCH", lambda e, s: (out.twin.append((int(e), int(s))) or 0,))
    return out


def plain_exe() -> Executable:
    g, _ = _plan.build()
    return _plan.make_exe(g, p=0x1000)


def test_the_method_is_compiled_where_the_driver_is_found():
    method = Executable.launch
    if type(method).__name__ != "LaunchMethod":  # no compiled module, or no libcuda.so.1 on this machine
        assert c_entry.NATIVE is None or c_entry.c_address("cuGraphLaunch") is None
        return
    assert method.func is TWIN and method.__wrapped__ is TWIN
    assert method.__doc__ == TWIN.__doc__ and method.__qualname__ == "Executable.launch"


def test_the_first_launch_on_a_stream_goes_to_the_twin_then_the_driver_is_called_without_the_gil(launches):
    exe = plain_exe()
    s1, s2 = drv.CUstream(0x99), drv.CUstream(0x77)
    exe.launch(s1)
    assert launches.twin == [(0x4242, 0x99)] and launches.compiled()[0] == 0
    assert exe._last_stream_addr == 0x99 and exe._exec_addr == 0x4242
    exe.launch(s1)
    exe.launch(stream=s1)
    bound = exe.launch
    bound(s1)
    assert launches.compiled() == (3, 0, 0x4242, 0x99) and len(launches.twin) == 1
    exe.launch(s2)  # another stream: the twin records it
    exe.launch(s2)
    assert launches.twin[-1] == (0x4242, 0x77) and launches.compiled() == (4, 0, 0x4242, 0x77)
    exe.launch()  # None: the legacy stream, a stream like the others
    exe.launch(None)
    assert launches.twin[-1] == (0x4242, 0) and launches.compiled() == (5, 0, 0x4242, None)


class ProtoStream:
    """A stream known through ``__cuda_stream__``, made anew per call (as ``torch.cuda.current_stream()`` is)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.asked = 0

    def __cuda_stream__(self) -> Any:
        self.asked += 1
        return self.handle


def test_another_object_of_the_last_streams_handle_is_that_stream(launches):
    exe = plain_exe()
    assert exe._last_stream_addr is None
    exe.launch(ProtoStream((0, 0x99)))
    assert launches.twin == [(0x4242, 0x99)] and exe._last_stream_addr == 0x99
    fresh = [ProtoStream((0, 0x99)) for _ in range(3)]
    for s in fresh:
        exe.launch(s)
    exe.launch(0x99)  # an int of the handle
    assert launches.compiled() == (4, 0, 0x4242, 0x99) and [s.asked for s in fresh] == [1, 1, 1]
    exe.launch(stream=drv.CUstream(0x99))  # by its __cuda_stream__ where it has one, else by the twin
    by_protocol = hasattr(drv.CUstream, "__cuda_stream__")
    assert launches.compiled()[0] == 4 + by_protocol and len(launches.twin) == 2 - by_protocol
    for other in (ProtoStream((0, 0x77)), ProtoStream((0, -1)), ProtoStream([0, 0x99]), ProtoStream("x")):
        try:  # another handle, or an answer the compiled path does not read: the twin reads it again
            exe.launch(other)
        except Exception as exc:  # the twin's error for a bad answer
            assert type(exc).__name__ == "OperandError" and "__cuda_stream__" in str(exc)
        assert other.asked >= 1
    assert launches.twin[-1] == (0x4242, 0x99) and launches.compiled()[0] == 4 + by_protocol
    exe.launch(0x77)  # another stream: recorded by the twin
    exe.launch(None)
    assert launches.twin[-2:] == [(0x4242, 0x77), (0x4242, 0)]
    exe.launch(0)  # the legacy stream again, by its handle
    assert launches.compiled() == (5 + by_protocol, 0, 0x4242, None)


def test_a_refused_launch_raises_the_twins_typed_error(launches):
    exe = plain_exe()
    s = drv.CUstream(0x99)
    exe.launch(s)
    launches.refuse_with(int(drv.CUresult.CUDA_ERROR_INVALID_VALUE))
    with pytest.raises(DriverError, match="cuGraphLaunch failed: CUDA_ERROR_INVALID_VALUE"):
        exe.launch(s)
    launches.refuse_with(int(drv.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS))
    with pytest.raises(DriverError, match=r"CUDA_ERROR_ILLEGAL_ADDRESS.*context is now unusable"):
        exe.launch(s)
    assert launches.compiled()[0] == 1


def test_closed_executables_callback_errors_and_bad_calls_go_to_the_twin(launches):
    exe = plain_exe()
    s = drv.CUstream(0x99)
    exe.launch(s)
    with pytest.raises(TypeError, match="multiple values for argument 'stream'"):
        exe.launch(s, stream=s)
    exe._sink.append((exe.graph.nodes[0], ValueError("boom")))
    with pytest.raises(HostCallbackError, match="raised ValueError: boom"):
        exe.launch(s)
    assert exe._sink == []
    exe.launch(s)  # the error was raised once: launched again
    exe.close()
    with pytest.raises(ExecutableClosedError, match="is closed"):
        exe.launch(s)
    with pytest.raises(ExecutableClosedError, match="is closed"):
        exe.launch(s, p=0x2000)
    assert launches.compiled()[0] == 1 and len(launches.twin) == 1
    with pytest.raises(AttributeError):
        Executable.launch(object())  # not an executable: the twin's error


def test_one_parameter_is_rebound_then_launched(calls, launches):
    exe = plain_exe()
    s = drv.CUstream(0x99)
    exe.launch(s)
    exe.launch(s, p=0x2000)  # the first rebind makes the plan
    calls.clear()
    exe.launch(s, p=0x3000)
    exe.launch(stream=s, p=0x4000)
    exe.launch(p=0x5000, stream=s)
    assert exe._bindings == {"p": 0x5000} and launches.compiled() == (4, 0, 0x4242, 0x99)
    assert sorted(d for d, _, _ in calls) == sorted([0x100, 0x101, 0x102, 0x103, 0x104] * 3)
    assert exe.update_calls == 20
    with pytest.raises(OperandError, match="has no parameter 'q'"):
        exe.launch(s, q=1)
    assert launches.compiled()[0] == 4 and exe._bindings == {"p": 0x5000}


def test_several_parameters_are_rebound_together_then_launched(calls, launches, monkeypatch):
    exe = _many.parametrized()
    s = drv.CUstream(0x99)
    exe.launch(s, x=FakeTensor(_many.X2, (32, 32)), out=FakeTensor(_many.OUT2, (16, 16)))  # twin: plans made
    calls.clear()
    exe.launch(s, x=FakeTensor(_many.X3, (32, 32)), out=FakeTensor(_many.OUT, (16, 16)))
    exe.launch(x=FakeTensor(_many.X2, (32, 32)), stream=s, out=FakeTensor(_many.OUT2, (16, 16)))
    assert _many.recorded(calls) == sorted(
        [(0x100, _many.data(_many.X3 + 16)), (0x101, _many.data(_many.X3)), (0x102, _many.data(_many.OUT))]
        + [(0x100, _many.data(_many.X2 + 16)), (0x101, _many.data(_many.X2)), (0x102, _many.data(_many.OUT2))]
    )
    assert launches.compiled() == (2, 0, 0x4242, 0x99) and launches.twin == [(0x4242, 0x99)]
    assert exe._bindings == {"x": _many.X2, "out": _many.OUT2} and exe.update_calls == 9
    with pytest.raises(OperandError, match="2048 bytes, fewer than the 4096"):
        exe.launch(s, x=FakeTensor(_many.X3, (16, 32)), out=FakeTensor(_many.OUT, (16, 16)))
    assert launches.compiled()[0] == 2


def watch_order(calls: Any, launches: Launches) -> list[tuple[int, int]]:
    """``(driver node, launches made so far)`` per set call, as they happen."""
    order: list[tuple[int, int]] = []

    def append(item: Any) -> None:
        order.append((item[0], launches.compiled()[0]))
        list.append(calls, item)

    calls.append = append  # (the recorder appends each call it sees)
    return order


@pytest.mark.parametrize("names", [1, 2])
def test_the_launch_comes_after_every_set_call_and_not_after_a_refused_one(calls, launches, names):
    if names == 1:
        exe, s = plain_exe(), drv.CUstream(0x99)
        steps = [{"p": 0x2000}, {"p": 0x3000}, {"p": 0x4000}]
        users = [0x100, 0x101, 0x102, 0x103, 0x104]
    else:
        exe, s = _many.parametrized(), drv.CUstream(0x99)
        steps = [
            {"x": FakeTensor(x, (32, 32)), "out": FakeTensor(o, (16, 16))}
            for x, o in ((_many.X2, _many.OUT2), (_many.X3, _many.OUT), (_many.X2, _many.OUT2))
        ]
        users = [0x100, 0x101, 0x102]
    exe.launch(s, **steps[0])  # the twin: plans made
    order = watch_order(calls, launches)
    exe.launch(s, **steps[1])
    exe.launch(s, **steps[2])
    assert sorted(order) == sorted([(d, 0) for d in users] + [(d, 1) for d in users])
    assert launches.compiled() == (2, 0, 0x4242, 0x99)
    order.clear()
    calls.refuse.add(users[-1])
    with pytest.raises(DriverError, match="CUDA_ERROR_INVALID_VALUE"):
        exe.launch(s, **steps[1])
    assert launches.compiled()[0] == 2 and len(launches.twin) == 1  # not launched
    calls.refuse.clear()
    launches.refuse_with(int(drv.CUresult.CUDA_ERROR_INVALID_VALUE))
    with pytest.raises(DriverError, match="cuGraphLaunch failed"):
        exe.launch(s, **steps[2])  # the sets made, then the launch refused: the new values are bound
    assert launches.compiled()[0] == 1
    assert exe._bindings == ({"p": 0x4000} if names == 1 else {"x": _many.X2, "out": _many.OUT2})


def test_a_bind_that_closes_the_executable_hands_the_launch_to_the_twin(launches, monkeypatch):
    exe = plain_exe()
    s = drv.CUstream(0x99)
    exe.launch(s)

    def closing_bind(self: Executable, **params: Any) -> int:
        self.close()
        return 0

    monkeypatch.setattr(Executable, "bind", closing_bind)
    with pytest.raises(ExecutableClosedError, match="is closed"):
        exe.launch(s, p=0x2000)
    assert launches.compiled()[0] == 0 and len(launches.twin) == 1


def test_the_method_is_made_with_a_launch_address(shim):
    with pytest.raises(ValueError, match="non-zero address"):
        c_entry.NATIVE.LaunchMethod(TWIN, Executable, 0)
    with pytest.raises(TypeError):
        c_entry.NATIVE.LaunchMethod(TWIN, Executable, "0x10")
    with pytest.raises(TypeError, match="callable"):
        c_entry.NATIVE.LaunchMethod(None, Executable, 0x10)
