"""A destroyed executable's launches in flight keep reading its nodes' operands and its bound values: those are
held until an event recorded after the launches has completed (driver.host_callbacks.retire), then released."""

from __future__ import annotations

import gc
import types
import weakref

import pytest

from cudagraph.driver import calls, host_callbacks

NOT_READY = 600  # CUDA_ERROR_NOT_READY


class Owner:
    """Stands for an object owning device memory (a Buffer, a tensor)."""


class FakeDriver:
    """The few driver calls retire makes: streams busy or idle, events pending until ``finish()``."""

    def __init__(self, busy: bool) -> None:
        self.busy = busy
        self.done = False
        self.destroyed: list[int] = []
        self.made = 0
        self.CUresult = lambda code: types.SimpleNamespace(name="CUDA_ERROR_NOT_READY" if code == NOT_READY else "X")
        self.CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)

    def cuStreamQuery(self, h):
        return (NOT_READY if self.busy else 0,)

    def cuEventCreate(self, flags):
        self.made += 1
        return 0, self.made

    def cuEventRecord(self, event, h):
        return (0,)

    def cuEventQuery(self, event):
        return (0 if self.done else NOT_READY,)

    def cuEventDestroy(self, event):
        self.destroyed.append(event)
        return (0,)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    def make(busy: bool) -> FakeDriver:
        f = FakeDriver(busy)
        monkeypatch.setattr(calls, "driver", f)
        monkeypatch.setattr(host_callbacks, "_RETIRED", [])
        return f

    return make  # type: ignore[return-value]


def test_what_a_launch_in_flight_reads_lives_until_its_event_completes(fake):
    f = fake(busy=True)
    owner = Owner()
    gone = weakref.ref(owner)
    key = host_callbacks.register(print, (), [], None)
    host_callbacks.retire([key], ["stream"], keep=(owner,))
    del owner
    gc.collect()
    assert gone() is not None and host_callbacks.callback(host_callbacks.HOST_FN_ADDRESS, key) is not None
    host_callbacks.prune_retired()  # the launch still runs
    gc.collect()
    assert gone() is not None
    f.done = True
    host_callbacks.prune_retired()
    gc.collect()
    assert gone() is None and f.destroyed == [1]
    assert host_callbacks.callback(host_callbacks.HOST_FN_ADDRESS, key) is None


def test_idle_streams_release_at_once(fake):
    fake(busy=False)
    owner = Owner()
    gone = weakref.ref(owner)
    host_callbacks.retire([], ["stream"], keep=(owner,))
    del owner
    gc.collect()
    assert gone() is None and host_callbacks._RETIRED == []


def test_objects_alone_are_kept_too(fake):
    f = fake(busy=True)
    owner = Owner()
    gone = weakref.ref(owner)
    host_callbacks.retire([], ["a", "b"], keep=[owner])  # (a graph with no host callback)
    del owner
    gc.collect()
    assert gone() is not None and len(host_callbacks._RETIRED) == 2
    f.done = True
    host_callbacks.prune_retired()
    gc.collect()
    assert gone() is None


def test_closing_an_executable_retires_its_nodes_and_bound_objects(monkeypatch):
    from cudagraph.driver import api
    from cudagraph.executable import executable as ex
    from cudagraph.materialize import explicit

    retired = []
    monkeypatch.setattr(
        explicit, "retire", lambda keys, streams, keep=None: retired.append((keys, list(streams), keep))
    )
    fake = types.SimpleNamespace(cuGraphDestroy=lambda h: (0,), cuGraphExecDestroy=lambda h: (0,))
    monkeypatch.setattr(api, "require_driver", lambda: fake)
    lowered = explicit.LoweredGraph.__new__(explicit.LoweredGraph)
    definition, nodes, owner = object(), [object()], Owner()
    lowered.handle, lowered.definition, lowered.nodes, lowered.bodies, lowered.host_keys = 7, definition, nodes, [], [3]
    ex._destroy([9, lowered], {1: "s"}, ({"x": 0x1000}, {"x": owner}))
    [(keys, streams, keep)] = retired
    assert keys == [3] and streams == ["s"]
    assert keep[0] is definition and keep[1] is nodes and keep[3] == ({"x": 0x1000}, {"x": owner})
