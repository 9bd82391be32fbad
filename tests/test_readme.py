"""The README's code: every ```python block compiles, every name it uses of cudagraph exists, and its
Example (the section a newcomer copies first) runs on the GPU and computes what it asserts.

The README's other blocks are fragments of one story (they use the Example's ``g``, ``x``, ``saxpy``):
they are compiled and their names checked here; the pages of docs/ hold runnable versions of them
(tests/test_docs.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from test_docs import Block, parse_blocks

README = Path(__file__).resolve().parent.parent / "README.md"


def _blocks() -> list[Block]:
    return parse_blocks(README.read_text(), "README.md")


def _example() -> Block:
    """The first ```python block after the ``## Example`` heading."""
    text = README.read_text()
    line = text[: text.index("\n## Example\n")].count("\n") + 2
    return next(b for b in _blocks() if b.line > line)


def test_every_block_compiles() -> None:
    blocks = _blocks()
    assert len(blocks) >= 8
    for b in blocks:
        compile(b.source, f"README.md:{b.line}", "exec")


# What a name before the dot stands for in the README's blocks.
_RECEIVERS: dict[str, Any] = {
    "cg": cg,
    "g": cg.Graph,
    "g2": cg.Graph,
    "body": cg.Graph,
    "lifted": cg.Graph,
    "p": cg.Path,
    "exe": cg.Executable,
}


def test_every_name_used_exists() -> None:
    source = "\n".join(b.source for b in _blocks())
    used: dict[str, set[str]] = {}
    for receiver, name in re.findall(r"\b(cg|g|g2|body|lifted|p|exe)\.(\w+)", source):
        used.setdefault(receiver, set()).add(name)
    missing = sorted(f"{r}.{n}" for r, names in used.items() for n in names if not hasattr(_RECEIVERS[r], n))
    assert missing == []
    # The blocks do use the public surface they are meant to show.
    assert {"Graph", "lift", "launch"} <= used["cg"]
    assert {"kernel", "memcpy", "memset", "host", "path", "instantiate", "validate"} <= used["g"]
    assert {"launch", "update"} <= used["exe"]


def test_the_example_is_found() -> None:
    b = _example()
    assert b.source.startswith("import numpy as np\nimport cudagraph as cg\n")
    assert "g.instantiate(x=buf)" in b.source and "assert np.allclose(host, 3.0)" in b.source


@pytest.mark.gpu
def test_the_example_runs(device: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # it writes step.dot
    b = _example()
    ns: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(b.source, f"README.md:{b.line}", "exec"), ns)
    np.testing.assert_array_equal(ns["host"], np.full(1 << 20, 3.0, np.float32))  # (2 * 1 + 1) everywhere
    assert (tmp_path / "step.dot").read_text().startswith("digraph")
    assert len(ns["g"]) == 7  # fill, copy in, kernel, copy out, host callback, the path's kernel and fill
