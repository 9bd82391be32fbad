"""scripts/bench_ab.py: two trees' benchmark figures compared, fastest against fastest (no GPU needed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import bench_ab


def test_every_list_of_numbers_is_a_measurement_and_lone_floats_count_too():
    data = {"mode": "x", "rows": [{"n": 1000, "us": {"define": [3.0, 2.0], "lower": [1, 2]}}], "ratio": 0.5}
    assert dict(bench_ab.samples(data)) == {
        "/rows[0]/us/define": [3.0, 2.0],
        "/rows[0]/us/lower": [1.0, 2.0],
        "/ratio": [0.5],
    }


def test_the_fastest_of_every_round_is_compared_and_ratios_above_the_limit_are_flagged(tmp_path: Path):
    def write(tag: str, define: list[float], lower: list[float]) -> None:
        (tmp_path / f"construction.{tag}.json").write_text(json.dumps({"us": {"define": define, "lower": lower}}))

    write("old0", [3.0, 2.5], [1.0, 1.2])
    write("old1", [2.0, 4.0], [1.1, 1.0])
    write("new0", [2.2, 3.0], [1.5, 1.3])
    write("new1", [2.4, 2.1], [0.0, 1.25])  # (a zero is no time: left out)
    best_old = bench_ab.fastest(tmp_path, "construction", ["old0", "old1"])
    assert best_old == {"/us/define": 2.0, "/us/lower": 1.0}
    lines = bench_ab.compare(tmp_path, "construction", rounds=2, limit=1.1, show=5)
    assert lines[0] == "construction: 2 figures, median new/old 1.150, 1 above 1.1"
    assert lines[1] == "   1.250 ! /us/lower"
    assert lines[2] == "   1.050   /us/define"


def test_a_tree_without_the_package_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        bench_ab.main([str(tmp_path), str(tmp_path), "--no-build"])
    assert "has no src/cudagraph" in capsys.readouterr().err
