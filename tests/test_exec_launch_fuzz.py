"""The compiled ``Executable.launch`` against its Python twin, on random sequences of calls (no GPU).

Hypothesis draws a sequence of launches (on two streams, each given as its ``CUstream``, the same
stream by an int handle or a new ``__cuda_stream__`` object, or the legacy stream as ``None``;
positionally or as ``stream=``; with or without a parameter, an int address or a Buffer, rebound
through the compiled bind), host-callback errors to raise, driver refusals of the next launch, and a
close. The same sequence runs on a fresh executable with the compiled method in place and with the
twin alone, over one recording driver: the launches made (executable, stream), the set calls, the
bindings, the update count and each call's outcome (the exception's type and message) must be equal.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import cudagraph.executable.executable as _executable  # noqa: E402
from cudagraph.driver import c_entry  # noqa: E402
from cudagraph.executable.executable import Executable  # noqa: E402

drv = pytest.importorskip("cuda.bindings.driver")

import test_bind_plan_cpu as _plan  # noqa: E402
from test_native_cpu import Buffer  # noqa: E402

native = c_entry.NATIVE
pytestmark = pytest.mark.skipif(native is None, reason="cudagraph.driver._native was not built")

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
GRAPH_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
TWIN = getattr(Executable.launch, "func", Executable.launch)
INVALID = int(drv.CUresult.CUDA_ERROR_INVALID_VALUE)


class ProtoStream:
    """The stream 0x99 through ``__cuda_stream__``, a new object per call."""

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, 0x99)


STREAMS = {
    "s1": lambda: S1,
    "s2": lambda: S2,
    "int": lambda: 0x99,
    "proto": ProtoStream,
    "none": lambda: None,
}
S1, S2 = drv.CUstream(0x99), drv.CUstream(0x77)
VALUES = {"none": None, "a": 0x2000, "b": 0x3000, "buf_a": "buf_a", "buf_b": "buf_b"}

LAUNCH_OP = st.tuples(
    st.just("launch"), st.sampled_from(sorted(STREAMS)), st.booleans(), st.sampled_from(sorted(VALUES))
)
OPS = st.lists(
    st.one_of(
        LAUNCH_OP,
        LAUNCH_OP,
        LAUNCH_OP,
        st.just(("sink",)),
        st.just(("refuse",)),
        st.just(("close",)),
    ),
    min_size=1,
    max_size=25,
)


class Driver:
    """One record of the launches of both paths, and the refusal to give at the next one."""

    def __init__(self) -> None:
        self.launches: list[tuple[int, int]] = []
        self.refuse = 0

    def next_rc(self) -> int:
        rc, self.refuse = self.refuse, 0
        return rc

    def c_launch(self, exec_handle: int | None, stream: int | None) -> int:
        self.launches.append((exec_handle or 0, stream or 0))
        return self.next_rc()

    def py_launch(self, exec_handle: Any, stream: Any) -> tuple[Any]:
        self.launches.append((int(exec_handle), int(stream)))
        rc = self.next_rc()
        return (drv.CUresult(rc) if rc else 0,)


def run(ops: list[tuple[Any, ...]], compiled: bool, calls: Any) -> list[Any]:
    d = Driver()
    callback = GRAPH_LAUNCH(d.c_launch)
    address = ctypes.cast(callback, ctypes.c_void_p).value
    bufs = {"buf_a": Buffer(0xA000), "buf_b": Buffer(0xB000)}
    out: list[Any] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_executable, "_LAUNCH", d.py_launch)
        mp.setattr(Executable, "launch", native.LaunchMethod(TWIN, Executable, address) if compiled else TWIN)
        g, _ = _plan.build()
        exe = _plan.make_exe(g, p=0x1000)
        calls.clear()
        for op in ops:
            if op[0] == "sink":
                exe._sink.append((g.nodes[0], ValueError("boom")))
                continue
            if op[0] == "refuse":
                d.refuse = INVALID
                continue
            if op[0] == "close":
                exe.close()
                continue
            _, stream, by_keyword, value = op
            s = STREAMS[stream]()
            params = {} if value == "none" else {"p": bufs.get(VALUES[value], VALUES[value])}
            try:
                if by_keyword:
                    exe.launch(stream=s, **params)
                else:
                    exe.launch(s, **params)
                out.append(None)
            except Exception as exc:  # the outcome is compared, type and message
                out.append((type(exc).__name__, str(exc)))
        out += [d.launches, [(n, data) for n, data, _ in calls], dict(exe._bindings), exe.update_calls]
    return out


class Recorder:
    """The set-call recorder of ``test_bind_plan_cpu`` (its ``calls`` fixture, ``native`` mode) for one example."""

    def __enter__(self) -> Any:
        self.mp = pytest.MonkeyPatch()
        fixture = getattr(_plan.calls, "__wrapped__", _plan.calls)  # the function under pytest's decorator
        return fixture(type("Request", (), {"param": "native"})(), self.mp)

    def __exit__(self, *exc: object) -> None:
        self.mp.undo()


@FUZZ
@given(ops=OPS)
def test_the_compiled_launch_does_what_its_twin_does(ops):
    with Recorder() as calls:
        assert run(ops, True, calls) == run(ops, False, calls)
