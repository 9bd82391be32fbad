"""bench/build_beside_thread.py: its table and the longest wait it measures, on the CPU (fake driver)."""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import build_beside_thread as bench


def test_longest_wait_counts_the_ends_of_the_window():
    assert bench.longest_wait([1.0, 1.5, 4.0, 9.0], 0.5, 5.0) == pytest.approx(2.5)  # 1.5 -> 4.0
    assert bench.longest_wait([], 2.0, 3.0) == pytest.approx(1.0)  # no turn: the whole window
    assert bench.longest_wait([0.0, 10.0], 2.0, 3.0) == pytest.approx(1.0)  # turns outside it do not count


def test_the_stamping_thread_runs_beside_the_block_and_stops_after_it():
    stamps: list[float] = []
    with bench.busy_python_thread(stamps):
        t0 = time.perf_counter()
        time.sleep(0.02)  # (the GIL released: the thread stamps meanwhile)
        t1 = time.perf_counter()
        assert threading.active_count() >= 2
    assert any(t0 <= s <= t1 for s in stamps)
    count = len(stamps)
    time.sleep(0.01)
    assert len(stamps) == count  # stopped


def test_the_table_has_one_row_per_size_with_the_ratio():
    text = bench.table([(1000, 2.0, 3.0, 0.5), (100000, 10.0, 15.0, 11.25)])
    assert text.splitlines()[2] == "| 1000 | 2.00 | 3.00 | 1.50x | 0.50 |"
    assert text.splitlines()[3] == "| 100000 | 10.00 | 15.00 | 1.50x | 11.25 |"


def test_the_cpu_mode_builds_over_the_fake_driver(capsys, monkeypatch):
    pytest.importorskip("cuda.bindings.driver")
    pytest.importorskip("cuda.core")
    monkeypatch.setattr(sys, "argv", ["build_beside_thread.py", "--cpu", "--nodes", "2000,5000", "--repeats", "1"])
    assert bench.main() == 0
    out = capsys.readouterr().out
    assert "fake driver (bench/_fake_driver.py)" in out
    for n in (2000, 5000):
        row = re.search(rf"^\| {n} \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)x \| ([\d.]+) \|$", out, re.M)
        assert row is not None, out
        alone, beside, ratio, wait = map(float, row.groups())
        assert alone > 0 and beside > 0 and ratio == pytest.approx(beside / alone, rel=0.05) and wait >= 0
