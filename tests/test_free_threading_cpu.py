"""On a free-threaded Python running without the GIL, the hand-written compiled modules are not loaded (they
would turn the GIL back on for the whole process); the Python paths run and ``info`` says why."""

from __future__ import annotations

import sys
import sysconfig

import pytest

from cudagraph.definition import compiled_kernel, free_threading
from cudagraph.definition.free_threading import hand_written_c_refusal

c_entry = pytest.importorskip("cudagraph.driver.c_entry")


def _interpreter(monkeypatch: pytest.MonkeyPatch, free_threaded: bool, gil: bool | None) -> None:
    real = sysconfig.get_config_var
    monkeypatch.setattr(
        free_threading.sysconfig,
        "get_config_var",
        lambda name: (1 if free_threaded else 0) if name == "Py_GIL_DISABLED" else real(name),
    )
    if gil is None:
        monkeypatch.delattr(sys, "_is_gil_enabled", raising=False)
    else:
        monkeypatch.setattr(sys, "_is_gil_enabled", lambda: gil, raising=False)


@pytest.mark.parametrize(
    ("free_threaded", "gil", "refused"),
    [(False, None, False), (False, True, False), (True, True, False), (True, False, True), (True, None, True)],
)
def test_the_refusal_follows_the_interpreter(monkeypatch, free_threaded, gil, refused):
    _interpreter(monkeypatch, free_threaded, gil)
    why = hand_written_c_refusal()
    assert (why is not None) == refused
    if refused:
        assert "free-threaded" in why and "GIL" in why


def test_without_the_gil_neither_hand_written_module_is_loaded(monkeypatch):
    _interpreter(monkeypatch, True, False)
    assert c_entry._load_native() is None
    assert compiled_kernel.define_module() is None
    from cudagraph.frontends.environment import native_status

    assert native_status() == hand_written_c_refusal()


def test_with_the_gil_they_load_where_built(monkeypatch):
    _interpreter(monkeypatch, True, True)
    monkeypatch.delenv("CUDAGRAPH_NO_C_ENTRY", raising=False)
    built = c_entry.NATIVE is not None
    assert (c_entry._load_native() is not None) == built
