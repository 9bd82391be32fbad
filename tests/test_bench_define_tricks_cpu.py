"""bench/define_tricks.py on the CPU: every case runs Graph.kernel's Python method, and the output says so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cudagraph.definition.builders import COMPILED_KERNEL
from cudagraph.definition.kinds import kernel as kernel_kind
from cudagraph.definition.kinds.kernel import KernelBuilders

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import define_tricks  # noqa: E402


def test_the_cases_run_the_python_method_with_the_table_replaced_and_restore_both(monkeypatch):
    installed = KernelBuilders.__dict__["kernel"]
    table = kernel_kind.KERNEL_TYPES_SEEN
    seen = []

    def chain(n: int) -> float:
        method = KernelBuilders.__dict__["kernel"]
        seen.append((getattr(method, "__name__", None), method is COMPILED_KERNEL, kernel_kind.KERNEL_TYPES_SEEN))
        return 1e-6 * n

    monkeypatch.setattr(define_tricks, "_chain", chain)
    best, compiled = define_tricks.measure(10, 2)
    assert best == [1.0] * len(define_tricks.CASES)
    python_runs = [s for s in seen if not s[1]]
    assert len(python_runs) == 2 * len(define_tricks.CASES)
    assert all(name == "kernel" for name, _, _ in python_runs)
    forgetful = [s[2] for s in python_runs[1 :: len(define_tricks.CASES)]]  # the KERNEL_TYPES_SEEN case
    assert all(isinstance(t, define_tricks._Forgetful) for t in forgetful)
    if COMPILED_KERNEL is not None and installed is COMPILED_KERNEL:
        assert compiled == 1.0 and len(seen) == 2 * (len(define_tricks.CASES) + 1)
    else:
        assert compiled is None and len(seen) == 2 * len(define_tricks.CASES)
    assert KernelBuilders.__dict__["kernel"] is installed and kernel_kind.KERNEL_TYPES_SEEN is table


def test_the_output_names_the_method_measured(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["define_tricks.py", "--nodes", "20", "--repeats", "1"])
    define_tricks.main()
    out = capsys.readouterr().out
    assert "Every case below runs the Python method (KernelBuilders.kernel)" in out
    assert "case (Python method)" in out
    if COMPILED_KERNEL is not None and KernelBuilders.__dict__["kernel"] is COMPILED_KERNEL:
        assert "runs the compiled method (cudagraph.definition._define)" in out
        assert "reference: compiled method, all shortcuts" in out
    else:
        assert "runs the Python method (compiled method: " in out
        assert "reference: compiled method" not in out


@pytest.mark.parametrize("env, words", [("1", "CUDAGRAPH_NO_C_ENTRY=1"), (None, "not built")])
def test_the_state_says_why_the_python_method_runs(monkeypatch, env, words):
    monkeypatch.setattr(define_tricks, "COMPILED_KERNEL", None)
    if env is None:
        monkeypatch.delenv("CUDAGRAPH_NO_C_ENTRY", raising=False)
    else:
        monkeypatch.setenv("CUDAGRAPH_NO_C_ENTRY", env)
    assert define_tricks.compiled_state() == f"the Python method (compiled method: {words})"
