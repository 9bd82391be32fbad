"""Pictures of definitions: what DOT, Mermaid and the summary show, escaping, deep nesting, real parsers.

The DOT text is checked with the real Graphviz (``dot -Tplain``, or where no
``dot`` is installed the same Graphviz compiled to WebAssembly, ``@viz-js/viz``,
under node) and the Mermaid text with the real Mermaid 11 parser
(``mermaid.parse`` under node with jsdom) when they are installed; those tests
skip, with the reason, otherwise. The node packages are looked for in
``$CUDAGRAPH_MERMAID_DIR`` (a folder whose ``node_modules`` holds ``mermaid``,
``jsdom`` and ``@viz-js/viz``; ``.ci/parsers.sh`` makes one and runs these tests).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition import render, seams


class CUkernel:
    pass


class NamedKernel:
    """A kernel handle (its type is named like the driver's) that carries its function's name."""

    def __init__(self, name: str) -> None:
        self.__name__ = name


NamedKernel.__name__ = "CUkernel"


PTR = 0x10000

HOSTILE_NAMES = [
    "`starts with a backtick",
    'say "hi"',
    "it's",
    "x#quot;y #35;",
    "<b>bold</b> & <script>",
    "end",
    "subgraph",
    "two\nlines",
    "nul\x00inside",
    "bell\x07 tab\t del\x7f",
    "%% not a comment",
    "a;b|c|[d]{e}(f)",
    "-->",
    "back\\slash\\",
    "ünïcödé ✓ 漢字",
    "lone \ud800 surrogate",
    "",
]


def rich_graph() -> cg.Graph:
    """Every kind of body: a child graph, a while loop with a predicate, a switch with an empty case, if/else."""
    g = cg.Graph("rich")
    x = g.param("x")
    res = g.param("res")
    k = g.kernel(NamedKernel("saxpy"), 4, 64, (x, np.float32(2.0), np.int32(256)), name="step")
    inner = cg.Graph("inner")
    inner.memset(x, 0, count=4, element_size=4, name="clear")
    ch = g.child(inner, after=k, name="sub")
    more = g.condition(default=1, name="more")
    loop = g.while_(more, after=ch, name="loop")
    lk = loop.body.kernel(NamedKernel("jacobi"), 1, 32, (x, res), name="sweep")
    loop.body.set_condition(more, res, ">", 1e-6, np.float32, after=lk, name="check")
    sel = g.condition(name="sel")
    sw = g.switch(sel, 2, after=loop, name="pick")
    ie = sw.cases[1].if_else(sw.cases[1].condition(name="flag"), name="branch")
    ie.then.kernel(CUkernel(), 1, 1, (), name="t")
    ie.else_.empty(name="e")
    g.memcpy(0x2000, x, 64, after=sw, name="out")
    return g


def nested_children(depth: int) -> cg.Graph:
    g = cg.Graph("level0")
    g.empty(name="leaf")
    for i in range(1, depth + 1):
        outer = cg.Graph(f"level{i}")
        outer.child(g, name=f"c{i}")
        g = outer
    return g


# ------------------------------------------------------------------------ what is shown


def test_kernel_shows_its_kernel_name_and_parameters_by_name():
    g = rich_graph()
    dot = g.to_dot()
    assert '  n0 [label="step\\nkernel#0\\nsaxpy(x, 2.0, 256)" ' in dot
    assert '"sweep\\nkernel#0\\njacobi(x, res)"' in dot
    mer = g.to_mermaid()
    assert '  n0["step (kernel#0)<br/>saxpy(x, 2.0, 256)"]' in mer.split("\n")


def test_set_condition_shows_its_predicate():
    g = rich_graph()
    assert '"check\\nset_condition#1\\nmore = res > 1e-06"' in g.to_dot()
    assert "check (set_condition#1)<br/>more = res #62; 1e-06" in g.to_mermaid()


def test_copies_and_fills_name_their_parameters():
    g = rich_graph()
    dot = g.to_dot()
    assert '"out\\nmemcpy#4\\nx -> 0x2000"' in dot
    assert '"clear\\nmemset#0\\nx = 0x0"' in dot
    plain = cg.Graph("plain")
    plain.memset(PTR, 0, count=4, element_size=4, name="z")
    assert '"z\\nmemset#0"' in plain.to_dot()  # no named operand: no detail line


def test_kernel_name_read_through_the_seam_for_cuda_kernels(monkeypatch):
    seen = []

    def info(kernel):
        seen.append(kernel)
        return SimpleNamespace(name="scale")

    monkeypatch.setattr(seams, "kernel_info", info)
    fake = type("CUkernel", (), {"__module__": "cuda.bindings.driver"})()
    g = cg.Graph("k")
    g.kernel(fake, 1, 1, (), name="a")
    g.kernel(fake, 1, 1, (), name="b")
    assert g.to_dot().count("\\nscale()") == 2
    assert seen == [fake]  # looked up once per rendering
    # A kernel that is no CUDA object is never looked up; a failing lookup draws no name.
    g2 = cg.Graph("k2")
    g2.kernel(CUkernel(), 1, 1, (), name="c")
    g2.to_dot()
    assert seen == [fake]
    monkeypatch.setattr(seams, "kernel_info", lambda k: 1 / 0)
    assert '"a\\nkernel#0" ' in g.to_dot()


def test_conditional_bodies_are_clusters_joined_to_their_node():
    dot = rich_graph().to_dot()
    lines = dot.split("\n")
    assert lines[2] == "  compound=true;"
    assert "  n2 -> n2_b0_n0 [style=dotted arrowhead=none lhead=cluster_n2_b0];" in lines
    # The empty case of the switch is drawn (a cluster needs a node to be seen and joined).
    assert '    n3_b0_none [label="(empty)" shape=plaintext];' in lines
    assert "  n3 -> n3_b0_none [style=dotted arrowhead=none lhead=cluster_n3_b0];" in lines
    assert "    n3_b1_n0 -> n3_b1_n0_b0_n0 [style=dotted arrowhead=none lhead=cluster_n3_b1_n0_b0];" in lines
    assert 'label="loop: while more != 0"; style=dotted;' in dot
    # A graph without conditionals keeps the plain header.
    assert "compound" not in nested_children(2).to_dot()


def test_summary_descends_into_bodies():
    text = rich_graph().summary()
    lines = text.split("\n")
    i = lines.index("    loop: while more != 0:")
    assert lines[i + 1].startswith("      #0    kernel  sweep ")
    assert lines[i + 2].startswith("      #1    set_condition check ")
    assert "    body 'inner':" in lines
    assert "    pick: case sel == 1:" in lines
    assert any(ln.startswith("          #0    kernel  t ") for ln in lines)  # if/else inside a switch case


def test_summary_limit_counts_body_lines():
    g = nested_children(10)
    lines = g.summary(limit=4).split("\n")
    assert len([ln for ln in lines if ln.lstrip().startswith("#")]) == 4
    assert lines[-1] == "  ... 7 more nodes"


# ------------------------------------------------------------------------ escaping


def test_dot_nul_and_control_characters_are_shown_not_written():
    g = cg.Graph("n\x00g")
    g.kernel(CUkernel(), 1, 1, name="a\x00b\x07")
    text = g.to_dot()
    assert "\x00" not in text and "\x07" not in text
    assert 'digraph "n\\\\x00g" {' in text
    assert '"a\\\\x00b\\\\x07\\nkernel#0"' in text


def test_dot_long_names_are_cut_below_the_graphviz_limit():
    g = cg.Graph("long")
    g.kernel(CUkernel(), 1, 1, name="é" * 20000)
    g.empty(name='"' * 20000)
    text = g.to_dot()
    strings = re.findall(r'"((?:[^"\\]|\\.)*)"', text)
    assert max(len(s.encode()) for s in strings) <= render.DOT_LIMIT
    assert any(s.startswith("éé") and s.endswith("\u2026\\nkernel#0") for s in strings)
    assert any(s.startswith('empty#1 \'\\"\\"') and s.endswith("\u2026") for s in strings)
    assert not any(s.endswith("\\\u2026") and not s.endswith("\\\\\u2026") for s in strings)  # no cut escape


def test_mermaid_escapes():
    g = cg.Graph("m")
    g.empty(name="`tick")
    g.empty(name="a#b<c>\nd")
    lines = g.to_mermaid().split("\n")
    assert '  n0(("#96;tick (empty#0)"))' in lines
    assert '  n1(("a#35;b#60;c#62;<br/>d (empty#1)"))' in lines


def test_mermaid_long_names_are_cut():
    g = cg.Graph("m")
    g.empty(name="x" * 5000)
    line = g.to_mermaid().split("\n")[1]
    assert len(line) < render.MERMAID_LIMIT + 40
    assert "x\u2026 (empty#0)" in line


# ------------------------------------------------------------------------ deep nesting


def test_two_thousand_nested_child_graphs_render_without_recursion():
    g = nested_children(2000)
    dot = g.to_dot()
    assert dot.count("subgraph cluster_") == 2000
    assert dot.count("{") == dot.count("}")
    mer = g.to_mermaid()
    assert sum(1 for ln in mer.split("\n") if ln.strip().startswith("subgraph ")) == 2000
    assert sum(1 for ln in mer.split("\n") if ln.strip() == "end") == 2000
    text = g.summary(limit=3000)
    assert text.count("#0    child") == 2000
    assert "#0    empty   leaf" in text


# ------------------------------------------------------------------------ real Graphviz


_VIZ_SCRIPT = """
import { instance } from "@viz-js/viz";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const viz = await instance();
const r = viz.render(text, { format: "plain" });
if (r.status !== "success") { console.error(r.errors.map((e) => e.message).join("\\n")); process.exit(1); }
process.stdout.write(r.output);
"""


def _dot_plain(text: str) -> str:
    exe = shutil.which("dot")
    if exe is not None:
        r = subprocess.run([exe, "-Tplain"], input=text.encode(), capture_output=True, timeout=120)
    else:
        where = os.environ.get("CUDAGRAPH_MERMAID_DIR")
        if not where or shutil.which("node") is None or not (Path(where) / "node_modules" / "@viz-js" / "viz").is_dir():
            pytest.skip(
                "Graphviz's dot is not installed (apt-get install graphviz), nor node with @viz-js/viz in "
                "$CUDAGRAPH_MERMAID_DIR (.ci/parsers.sh installs it)"
            )
        r = subprocess.run(
            ["node", "--input-type=module", "-e", _VIZ_SCRIPT],
            input=text.encode(),
            capture_output=True,
            cwd=where,
            timeout=120,
        )
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    return r.stdout.decode()


def test_graphviz_rejects_bad_dot():
    with pytest.raises(AssertionError, match="syntax error"):
        _dot_plain("digraph { a -> }")


def _expected_dot_nodes(dot: str) -> set[str]:
    return set(re.findall(r"^\s*(n[\w]*) \[", dot, flags=re.M)) - {"node"}


def _plain_nodes(plain: str) -> set[str]:
    plain = plain.replace("\\\n", "")  # long names are continued on the next line
    return {ln.split(" ")[1].strip('"') for ln in plain.split("\n") if ln.startswith("node ")}


def test_graphviz_reads_the_rich_graph():
    dot = rich_graph().to_dot()
    plain = _dot_plain(dot)
    assert _plain_nodes(plain) == _expected_dot_nodes(dot)
    edges = {tuple(ln.split(" ")[1:3]) for ln in plain.split("\n") if ln.startswith("edge ")}
    assert ("n2", "n2_b0_n0") in edges and ("n0", "n1") in edges


@pytest.mark.parametrize("name", HOSTILE_NAMES + ["é" * 20000, "\\" * 17000], ids=range(len(HOSTILE_NAMES) + 2))
def test_graphviz_reads_hostile_names(name):
    g = cg.Graph(name)
    a = g.kernel(NamedKernel(name), 1, 1, (g.param("p"),), name=name)
    body = cg.Graph(name)
    body.empty(name=name)
    g.child(body, after=a, name=name)
    c = g.condition(name=name)
    g.if_(c, name=name).body.empty(name=name)
    dot = g.to_dot()
    assert _plain_nodes(_dot_plain(dot)) == _expected_dot_nodes(dot)


def test_graphviz_reads_nested_children():
    dot = nested_children(60).to_dot()
    assert len(_plain_nodes(_dot_plain(dot))) == 61


# ------------------------------------------------------------------------ real Mermaid

_MERMAID_SCRIPT = """
import { JSDOM } from "jsdom";
const dom = new JSDOM("<!DOCTYPE html><body></body>");
globalThis.window = dom.window; globalThis.document = dom.window.document;
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false, maxTextSize: 10000000 });
let text = "";
for await (const chunk of process.stdin) text += chunk;
try { const r = await mermaid.parse(text); console.log(r.diagramType); }
catch (e) { console.error(String((e && e.message) || e)); process.exit(1); }
"""


def _mermaid_dir() -> Path:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    where = os.environ.get("CUDAGRAPH_MERMAID_DIR")
    if not where:
        pytest.skip("set CUDAGRAPH_MERMAID_DIR to a folder with node_modules/mermaid and node_modules/jsdom")
    path = Path(where)
    if not (path / "node_modules" / "mermaid").is_dir() or not (path / "node_modules" / "jsdom").is_dir():
        pytest.skip(f"{path} has no node_modules/mermaid and node_modules/jsdom (npm install mermaid@11 jsdom)")
    return path


def _mermaid_parse(text: str) -> None:
    where = _mermaid_dir()
    r = subprocess.run(
        ["node", "--input-type=module", "-e", _MERMAID_SCRIPT],
        input=text.encode(),
        capture_output=True,
        cwd=where,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    assert r.stdout.decode().strip() == "flowchart-v2"


def test_mermaid_parser_rejects_a_bad_label():
    with pytest.raises(AssertionError, match="Parse error"):
        _mermaid_parse('flowchart TD\n  n0["`a"] --> n1["b"]\n')


def test_mermaid_parser_reads_the_rich_graph_and_hostile_names():
    g = rich_graph()
    for name in HOSTILE_NAMES + ["x" * 5000]:
        body = cg.Graph(name)
        body.empty(name=name)
        g.child(body, name=name)
        g.kernel(NamedKernel(name), 1, 1, (g.param("p"),), name=name)
    _mermaid_parse(g.to_mermaid())


def test_mermaid_parser_reads_nested_children():
    _mermaid_parse(nested_children(60).to_mermaid())
