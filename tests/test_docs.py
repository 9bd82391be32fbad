"""Every ```python block of the documentation site (docs/) runs as a test.

A page's blocks run in order in one namespace. A block preceded by an HTML comment marking it
runs only where that fits:

- ``<!-- gpu -->`` needs an NVIDIA GPU and driver: it runs in the page's GPU test (marked ``gpu``,
  skipped with the suite's reason on a machine without one); words after ``gpu`` name modules the
  block needs (``<!-- gpu torch -->``), and the GPU test skips when one is not installed;
- ``<!-- cpu-only -->`` stands in for what a GPU block provides (placeholder kernels), so the
  page's CPU test can run the blocks after it; the GPU test leaves it out;
- unmarked blocks run in both.

So each page has a CPU test (its unmarked and ``cpu-only`` blocks) and, when it has GPU blocks,
a GPU test (its unmarked and ``gpu`` blocks). Blocks run in a temporary working directory.
"""

from __future__ import annotations

import importlib.util
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
_MARK = re.compile(r"^\s*<!--\s*(?P<body>[^>]*?)\s*-->\s*$")


@dataclass
class Block:
    """One fenced ```python block: where it starts, its source and its marker."""

    page: str
    line: int
    source: str
    where: str = "both"  # "both", "gpu" or "cpu-only"
    needs: tuple[str, ...] = field(default_factory=tuple)


def parse_blocks(text: str, page: str = "page.md") -> list[Block]:
    """The ```python blocks of a markdown text, with the marker of the comment just before each.

    Raises
    ------
    ValueError
        A marker comment that is not ``gpu [modules]`` or ``cpu-only``, or a fence left open.
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    mark: str | None = None
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            c = _MARK.match(lines[i])
            if c is not None:
                mark = c.group("body")
            elif lines[i].strip():
                mark = None  # a marker applies only to the block right after it
            i += 1
            continue
        fence, info, indent = m.group("fence"), m.group("info").strip(), m.group("indent")
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence) and lines[i].strip() == fence):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"{page}:{start + 1}: the code fence {fence!r} is never closed")
        i += 1
        if info.split()[:1] == ["python"]:
            where, needs = "both", ()
            if mark is not None:
                words = mark.split()
                if words[:1] == ["gpu"]:
                    where, needs = "gpu", tuple(words[1:])
                elif words == ["cpu-only"]:
                    where = "cpu-only"
                else:
                    raise ValueError(f"{page}:{start}: unknown marker <!-- {mark} --> (expected 'gpu' or 'cpu-only')")
            blocks.append(Block(page, start + 1, textwrap.dedent("\n".join(body)) + "\n", where, needs))
        mark = None
    return blocks


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _page_id(p: Path) -> str:
    return p.relative_to(DOCS).as_posix()


def _run(blocks: list[Block], path: Path) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": f"docs.{path.stem}"}
    for b in blocks:
        code = compile(b.source, f"{path}:{b.line}", "exec")
        exec(code, ns)
    return ns


PAGES = _pages()
CPU_PAGES = [p for p in PAGES if any(b.where != "gpu" for b in parse_blocks(p.read_text(), _page_id(p)))]
GPU_PAGES = [p for p in PAGES if any(b.where == "gpu" for b in parse_blocks(p.read_text(), _page_id(p)))]


@pytest.mark.parametrize("path", CPU_PAGES, ids=_page_id)
def test_page_cpu_blocks(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = [b for b in parse_blocks(path.read_text(), _page_id(path)) if b.where != "gpu"]
    _run(blocks, path)


@pytest.mark.gpu
@pytest.mark.parametrize("path", GPU_PAGES, ids=_page_id)
def test_page_gpu_blocks(path: Path, device: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [b for b in parse_blocks(path.read_text(), _page_id(path)) if b.where != "cpu-only"]
    for module in sorted({m for b in blocks for m in b.needs}):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{_page_id(path)} needs {module}, which is not installed")
    monkeypatch.chdir(tmp_path)
    _run(blocks, path)


def test_the_site_has_pages_and_runnable_blocks() -> None:
    ids = {_page_id(p) for p in PAGES}
    assert {"index.md", "getting-started.md", "tutorial.md", "api.md", "peers.md", "benchmarks.md"} <= ids
    assert {"howto/rebind-torch.md", "howto/capture-regions.md", "howto/graph-memory.md"} <= ids
    assert {"howto/control-flow.md", "howto/fast-paths.md"} <= ids
    every = [b for p in PAGES for b in parse_blocks(p.read_text(), _page_id(p))]
    assert sum(b.where == "gpu" for b in every) >= 8 and sum(b.where != "gpu" for b in every) >= 8
    assert "tutorial.md" in {_page_id(p) for p in GPU_PAGES} and "tutorial.md" in {_page_id(p) for p in CPU_PAGES}


def test_parse_blocks_reads_markers_and_order() -> None:
    text = (
        "# t\n\n```python\na = 1\n```\n\n<!-- gpu torch -->\n```python\nb = a\n```\n\n"
        "<!-- cpu-only -->\n\n```python\n  c = 3\n```\n\n<!-- gpu -->\nSome text.\n\n```python\nd = 4\n```\n"
        "```bash\necho no\n```\n  ```python\n  e = 5\n  ```\n"
    )
    got = [(b.line, b.source, b.where, b.needs) for b in parse_blocks(text)]
    assert got == [
        (3, "a = 1\n", "both", ()),
        (8, "b = a\n", "gpu", ("torch",)),
        (14, "c = 3\n", "cpu-only", ()),
        (21, "d = 4\n", "both", ()),  # the marker was followed by text, not by the block
        (27, "e = 5\n", "both", ()),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- gpus -->\n```python\nx = 1\n```\n", r"page\.md:1: unknown marker <!-- gpus -->"),
        ("```python\nx = 1\n", r"page\.md:1: the code fence '```' is never closed"),
    ],
)
def test_parse_blocks_refuses_bad_markup(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_blocks(text)
