"""Graph shapes: structure, traversal, validation and renderings, parametrized over shapes (GPU-free)."""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field

import numpy as np
import pytest

import cudagraph as cg

# --------------------------------------------------------------------------- shapes


class CUkernel:
    pass


class CUevent:
    pass


@dataclass
class Shape:
    graph: cg.Graph
    edges: set[tuple[int, int]]  # expected (src index, dst index)
    kinds: dict[int, str] = field(default_factory=dict)  # index -> kind, default "empty"


def _empties(g: cg.Graph, n: int) -> list[cg.Node]:
    return [g.empty(name=f"n{i}") for i in range(n)]


def shape_empty() -> Shape:
    return Shape(cg.Graph("empty"), set())


def shape_single() -> Shape:
    g = cg.Graph("single")
    g.empty(name="n0")
    return Shape(g, set())


def _chain(n: int, name: str) -> Shape:
    g = cg.Graph(name)
    prev = None
    for i in range(n):
        prev = g.empty(after=prev, name=f"n{i}")
    return Shape(g, {(i, i + 1) for i in range(n - 1)})


def shape_chain() -> Shape:
    return _chain(6, "chain")


def shape_chain_10000() -> Shape:
    return _chain(10_000, "chain10k")


def shape_fan_out() -> Shape:
    g = cg.Graph("fan_out")
    root = g.empty(name="n0")
    for i in range(1, 6):
        g.empty(after=root, name=f"n{i}")
    return Shape(g, {(0, i) for i in range(1, 6)})


def shape_fan_in() -> Shape:
    g = cg.Graph("fan_in")
    srcs = _empties(g, 5)
    g.join(*srcs, name="n5")
    return Shape(g, {(i, 5) for i in range(5)})


def _wide(n: int, name: str) -> Shape:
    """root -> (n - 2) middles -> join: a fan-out and a fan-in of n nodes in all."""
    g = cg.Graph(name)
    root = g.empty(name="n0")
    mids = [g.empty(after=root, name=f"n{i}") for i in range(1, n - 1)]
    g.join(mids, name=f"n{n - 1}")
    return Shape(g, {(0, i) for i in range(1, n - 1)} | {(i, n - 1) for i in range(1, n - 1)})


def shape_wide_10000() -> Shape:
    return _wide(10_000, "wide10k")


def shape_diamond() -> Shape:
    g = cg.Graph("diamond")
    a = g.empty(name="n0")
    b = g.empty(after=a, name="n1")
    c = g.empty(after=a, name="n2")
    g.empty(after=[b, c], name="n3")
    return Shape(g, {(0, 1), (0, 2), (1, 3), (2, 3)})


def shape_disconnected() -> Shape:
    g = cg.Graph("disconnected")
    a = g.empty(name="n0")
    b = g.empty(after=a, name="n1")
    g.empty(after=b, name="n2")
    g.empty(name="n3")  # isolated
    d = g.empty(name="n4")
    g.empty(after=d, name="n5")
    return Shape(g, {(0, 1), (1, 2), (4, 5)})


def shape_backward() -> Shape:
    """Nodes created before their dependencies exist; every edge goes from a higher to a lower index."""
    g = cg.Graph("backward")
    ns = _empties(g, 5)
    for i in range(4, 0, -1):
        g.add_edge(ns[i], ns[i - 1])
    g.add_edge(ns[4], ns[0])
    return Shape(g, {(4, 3), (3, 2), (2, 1), (1, 0), (4, 0)})


def shape_mixed_edges() -> Shape:
    """A diamond whose edges are added later, in both index directions, plus one edge removed."""
    g = cg.Graph("mixed")
    ns = _empties(g, 6)
    g.add_edge(ns[3], ns[1])
    g.add_edge(ns[3], ns[2])
    g.add_edge(ns[1], ns[5])
    g.add_edge(ns[2], ns[5])
    g.add_edge(ns[5], ns[0])
    g.add_edge(ns[4], ns[0])
    g.add_edge(ns[3], ns[4])
    g.remove_edge(ns[3], ns[4])
    return Shape(g, {(3, 1), (3, 2), (1, 5), (2, 5), (5, 0), (4, 0)})


def shape_kinds() -> Shape:
    """Every node kind in a small DAG."""
    g = cg.Graph("kinds")
    x = g.param("x")
    z = g.memset(x, 0, count=16, element_size=4, name="n0")
    k = g.kernel(CUkernel(), 4, 64, (x, np.int32(16)), after=z, name="n1")
    c = g.memcpy(0x2000, x, 64, after=k, name="n2")
    h = g.host(print, "done", after=c, name="n3")
    ev = CUevent()
    r = g.record(ev, after=k, name="n4")
    w = g.wait(ev, after=r, name="n5")
    body = cg.Graph("body")
    body.empty(name="inner")
    ch = g.child(body, after=w, name="n6")
    g.join(h, ch, name="n7")
    kinds = {0: "memset", 1: "kernel", 2: "memcpy", 3: "host", 4: "record", 5: "wait", 6: "child", 7: "empty"}
    return Shape(g, {(0, 1), (1, 2), (2, 3), (1, 4), (4, 5), (5, 6), (3, 7), (6, 7)}, kinds)


def shape_path() -> Shape:
    g = cg.Graph("path")
    a = g.empty(name="n0")
    with g.path(after=a) as p:
        for i in range(1, 5):
            p.empty(name=f"n{i}")
    return Shape(g, {(i, i + 1) for i in range(4)})


SMALL = [
    shape_empty,
    shape_single,
    shape_chain,
    shape_fan_out,
    shape_fan_in,
    shape_diamond,
    shape_disconnected,
    shape_backward,
    shape_mixed_edges,
    shape_kinds,
    shape_path,
]
LARGE = [shape_chain_10000, shape_wide_10000]
ALL = SMALL + LARGE


def _ids(fns):
    return [f.__name__.removeprefix("shape_") for f in fns]


# --------------------------------------------------------------------------- independent reference algorithms


def expected_topological_order(n: int, edges: set[tuple[int, int]]) -> list[int]:
    """Kahn's algorithm, ties broken by the smallest index (the documented order)."""
    succs: dict[int, list[int]] = {i: [] for i in range(n)}
    indeg = [0] * n
    for s, d in edges:
        succs[s].append(d)
        indeg[d] += 1
    heap = [i for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        i = heapq.heappop(heap)
        out.append(i)
        for d in succs[i]:
            indeg[d] -= 1
            if indeg[d] == 0:
                heapq.heappush(heap, d)
    assert len(out) == n
    return out


def check_structure(shape: Shape) -> None:
    g, edges = shape.graph, shape.edges
    n = len(g)
    nodes = g.nodes
    assert [x.index for x in nodes] == list(range(n))
    assert all(x.graph is g for x in nodes)
    assert list(g) == list(nodes)
    got_edges = [(s.index, d.index) for s, d in g.edges]
    assert len(got_edges) == len(edges)  # no duplicates
    assert set(got_edges) == edges
    assert g.num_edges == len(edges)
    preds: dict[int, set[int]] = {i: set() for i in range(n)}
    succs: dict[int, set[int]] = {i: set() for i in range(n)}
    for s, d in edges:
        preds[d].add(s)
        succs[s].add(d)
    for x in nodes:
        assert len(x.predecessors) == len(preds[x.index])
        assert {p.index for p in x.predecessors} == preds[x.index]
        assert len(x.successors) == len(succs[x.index])
        assert {s.index for s in x.successors} == succs[x.index]
    assert [x.index for x in g.roots()] == [i for i in range(n) if not preds[i]]
    assert [x.index for x in g.leaves()] == [i for i in range(n) if not succs[i]]
    for i, kind in shape.kinds.items():
        assert nodes[i].kind == kind
    for x in nodes:
        if x.index not in shape.kinds:
            assert x.kind == "empty"


def check_topological_order(g: cg.Graph, edges: set[tuple[int, int]]) -> None:
    order = g.topological_order()
    assert len(order) == len(g)
    assert {id(x) for x in order} == {id(x) for x in g.nodes}
    pos = {x.index: i for i, x in enumerate(order)}
    for s, d in edges:
        assert pos[s] < pos[d], (s, d)
    for x in order:  # every node comes after each of its predecessors
        assert all(pos[p.index] < pos[x.index] for p in x.predecessors)
    assert [x.index for x in order] == expected_topological_order(len(g), edges)


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize("make", ALL, ids=_ids(ALL))
def test_structure(make):
    shape = make()
    check_structure(shape)
    check_topological_order(shape.graph, shape.edges)
    shape.graph.validate()


def test_expected_sizes():
    assert len(shape_empty().graph) == 0
    assert len(shape_single().graph) == 1
    assert len(shape_chain_10000().graph) == 10_000
    wide = shape_wide_10000()
    assert len(wide.graph) == 10_000
    assert len(wide.graph.nodes[0].successors) == 9_998
    assert len(wide.graph.nodes[-1].predecessors) == 9_998
    assert len(wide.edges) == 2 * 9_998


@pytest.mark.parametrize("make", SMALL, ids=_ids(SMALL))
def test_backward_edge_keeps_a_valid_order(make):
    """Append a node, then make every earlier root depend on it: edges against creation order, still acyclic."""
    shape = make()
    g = shape.graph
    roots = [r.index for r in g.roots()]
    first = g.empty(name="first")
    for r in roots:
        g.add_edge(first, g.nodes[r])
    shape.edges |= {(first.index, r) for r in roots}
    check_structure(shape)
    order = g.topological_order()
    assert order[0] is first
    check_topological_order(g, shape.edges)
    g.validate()


@pytest.mark.parametrize("make", LARGE, ids=_ids(LARGE))
def test_backward_edge_on_large_shapes(make):
    shape = make()
    g = shape.graph
    n = len(g)
    first = g.empty(name="first")
    g.add_edge(first, g.nodes[0])
    shape.edges.add((n, 0))
    order = g.topological_order()
    assert order[0] is first
    assert [x.index for x in order[1:]] == list(range(n))
    check_topological_order(g, shape.edges)
    g.validate()


@pytest.mark.parametrize("make", SMALL, ids=_ids(SMALL))
def test_remove_every_edge(make):
    shape = make()
    g = shape.graph
    for s, d in sorted(shape.edges):
        g.remove_edge(g.nodes[s], g.nodes[d])
    assert g.edges == []
    assert g.num_edges == 0
    assert g.roots() == list(g.nodes)
    assert g.leaves() == list(g.nodes)
    assert [x.index for x in g.topological_order()] == list(range(len(g)))
    g.validate()


def test_predecessor_order_is_edge_order():
    g = cg.Graph("g")
    a, b, c, d = (g.empty(name=x) for x in "abcd")
    g.add_edge(c, d)
    g.add_edge(a, d)
    g.add_edge(b, d)
    assert d.predecessors == (c, a, b)
    assert g.edges == [(c, d), (a, d), (b, d)]
    e = g.empty(after=[b, a], name="e")
    assert e.predecessors == (b, a)
    assert a.successors == (d, e)


# --------------------------------------------------------------------------- summary


def test_summary_exact():
    g = shape_kinds().graph
    g.param("n", np.int32)
    assert g.summary() == "\n".join(
        [
            "Graph 'kinds': 8 nodes, 8 edges",
            "  kinds: child=1, empty=1, host=1, kernel=1, memcpy=1, memset=1, record=1, wait=1",
            "  params: n, x",
            "  #0    memset  n0               after -            $x = 0x0 (4 B x 16)",
            "  #1    kernel  n1               after #0           grid=(4, 1, 1) block=(64, 1, 1) smem=0 args=2",
            "  #2    memcpy  n2               after #1           $x -> 0x2000 64 B",
            "  #3    host    n3               after #2           print(+1 args)",
            "  #4    record  n4               after #1",
            "  #5    wait    n5               after #4",
            "  #6    child   n6               after #5           graph='body' (1 nodes)",
            "    body 'body':",
            "      #0    empty   inner            after -",
            "  #7    empty   n7               after #3, #6",
        ]
    )


def test_summary_empty_graph():
    assert cg.Graph("e").summary() == "Graph 'e': 0 nodes, 0 edges\n  kinds: none"


@pytest.mark.parametrize("make", ALL, ids=_ids(ALL))
def test_summary_content(make):
    shape = make()
    g = shape.graph
    text = g.summary()
    lines = text.split("\n")
    assert lines[0] == f"Graph {g.name!r}: {len(g)} nodes, {len(shape.edges)} edges"
    kinds: dict[str, int] = {}
    for x in g.nodes:
        kinds[x.kind] = kinds.get(x.kind, 0) + 1
    assert lines[1] == "  kinds: " + (", ".join(f"{k}={v}" for k, v in sorted(kinds.items())) or "none")
    body = [ln for ln in lines[2:] if ln.startswith("  #")]
    assert len(body) == min(len(g), 50)
    for ln, x in zip(body, g.nodes):
        m = re.match(r"^  #(\d+)\s+(\w+)\s+(\S+)\s+after (-|#\d+(?:, #\d+)*)", ln)
        assert m, ln
        assert int(m.group(1)) == x.index
        assert m.group(2) == x.kind
        assert m.group(3) == x.name
        deps = [] if m.group(4) == "-" else [int(t.strip().lstrip("#")) for t in m.group(4).split(",")]
        assert deps == [p.index for p in x.predecessors]
    if len(g) > 50:
        assert lines[-1] == f"  ... {len(g) - 50} more nodes"
    else:
        assert "more nodes" not in text


def test_summary_limit():
    g = _chain(12, "c").graph
    lines = g.summary(limit=5).split("\n")
    assert len([ln for ln in lines if ln.startswith("  #")]) == 5
    assert lines[-1] == "  ... 7 more nodes"
    assert "more nodes" not in g.summary(limit=12)


# --------------------------------------------------------------------------- DOT


_DOT_NODE = re.compile(r"^\s*([A-Za-z_][\w]*) \[(.*)\];$")
_DOT_EDGE = re.compile(r"^\s*([A-Za-z_][\w]*) -> ([A-Za-z_][\w]*);$")
_DOT_CLUSTER = re.compile(r"^\s*subgraph (cluster_[\w]+) \{$")


def parse_dot(text: str):
    """Return (nodes: id -> (attrs, cluster or None), edges: list, clusters: name -> (label, parent))."""
    lines = text.split("\n")
    assert lines[-1] == ""
    lines = lines[:-1]
    assert re.match(r'^digraph ".*" \{$', lines[0]), lines[0]
    assert lines[-1] == "}"
    nodes: dict[str, tuple[str, str | None]] = {}
    edges: list[tuple[str, str, str | None]] = []
    clusters: dict[str, tuple[str, str | None]] = {}
    stack: list[str] = []
    for ln in lines[1:-1]:
        if m := _DOT_CLUSTER.match(ln):
            clusters[m.group(1)] = ("", stack[-1] if stack else None)
            stack.append(m.group(1))
        elif ln.strip() == "}":
            stack.pop()
        elif m := re.match(r'^\s*label="(.*)"; style=dashed;$', ln):
            assert stack
            clusters[stack[-1]] = (m.group(1), clusters[stack[-1]][1])
        elif m := _DOT_EDGE.match(ln):
            edges.append((m.group(1), m.group(2), stack[-1] if stack else None))
        elif m := _DOT_NODE.match(ln):
            if m.group(1) == "node":
                continue
            assert m.group(1) not in nodes, f"node {m.group(1)} declared twice"
            nodes[m.group(1)] = (m.group(2), stack[-1] if stack else None)
        else:
            assert ln.strip() in ("rankdir=TB;",), f"unexpected DOT line {ln!r}"
    assert not stack
    return nodes, edges, clusters


def expected_render(g: cg.Graph, prefix: str = "", cluster: str | None = None, out=None):
    """Walk the definition: node id -> (node, cluster id it lives in), edges -> cluster they are drawn in."""
    if out is None:
        out = ({}, set(), {})
    nodes, edges, clusters = out
    for x in g.nodes:
        nid = f"{prefix}n{x.index}"
        if x.kind == "child":
            cid = f"cluster_{nid}"
            clusters[cid] = (x, cluster)
            nodes[nid] = (x, cid)
            expected_render(x.body, nid + "_", cid, out)
        else:
            nodes[nid] = (x, cluster)
        for p in x.predecessors:
            edges.add((f"{prefix}n{p.index}", nid, cluster))
    return out


def check_dot(g: cg.Graph) -> None:
    text = g.to_dot()
    assert text.startswith(f'digraph "{g.name}" {{\n')
    nodes, edges, clusters = parse_dot(text)
    exp_nodes, exp_edges, exp_clusters = expected_render(g)
    assert set(nodes) == set(exp_nodes)
    assert len(edges) == len(exp_edges)
    assert set(edges) == exp_edges
    assert {c: parent for c, (_, parent) in clusters.items()} == {c: parent for c, (_, parent) in exp_clusters.items()}
    for cid, (label, _) in clusters.items():
        assert label == exp_clusters[cid][0].label
    for nid, (attrs, cluster) in nodes.items():
        x, exp_cluster = exp_nodes[nid]
        assert cluster == exp_cluster, nid
        if x.kind == "empty":
            assert 'label=""' in attrs
            assert f'tooltip="{x.label}"' in attrs
        elif x.kind == "child":
            assert attrs.startswith(f'label="{x.name}" ')
            assert "shape=box3d" in attrs
        else:
            assert re.match(rf'label="{re.escape(x.name)}\\n{x.kind}#{x.index}(\\n[^"]+)?" ', attrs), attrs


@pytest.mark.parametrize("make", ALL, ids=_ids(ALL))
def test_dot(make):
    check_dot(make().graph)


def test_dot_exact_small():
    g = cg.Graph("tiny")
    a = g.kernel(CUkernel(), 1, 1, name="k")
    g.empty(after=a, name="e")
    assert g.to_dot() == "\n".join(
        [
            'digraph "tiny" {',
            "  rankdir=TB;",
            '  node [fontname="Helvetica" fontsize=10];',
            '  n0 [label="k\\nkernel#0" shape=box style="rounded,filled" fillcolor="#cfe2ff"];',
            '  n1 [shape=circle label="" width=0.2 style=filled fillcolor="#adb5bd" tooltip="empty#1 \'e\'"];',
            "  n0 -> n1;",
            "}",
            "",
        ]
    )


def test_dot_escapes_quotes_and_backslashes():
    g = cg.Graph('say "hi"')
    g.kernel(CUkernel(), 1, 1, name='a"b\\c')
    text = g.to_dot()
    assert text.startswith('digraph "say \\"hi\\"" {\n')
    assert '  n0 [label="a\\"b\\\\c\\nkernel#0" ' in text


# --------------------------------------------------------------------------- Mermaid


_MM_SHAPES = {
    "kernel": ('["', '"]'),
    "memcpy": ('[/"', '"/]'),
    "memset": ('[\\"', '"\\]'),
    "host": ('{{"', '"}}'),
    "record": ('>"', '"]'),
    "wait": ('>"', '"]'),
    "child": ('[["', '"]]'),
    "empty": ('(("', '"))'),
}


def parse_mermaid(text: str):
    lines = text.split("\n")
    assert lines[-1] == ""
    lines = lines[:-1]
    assert lines[0] == "flowchart TD"
    nodes: dict[str, tuple[str, str | None]] = {}
    edges: list[tuple[str, str, str | None]] = []
    links: list[tuple[str, str]] = []
    subgraphs: dict[str, tuple[str, str | None]] = {}
    stack: list[str] = []
    for ln in lines[1:]:
        s = ln.strip()
        if m := re.match(r'^subgraph (\w+)\["(.*)"\]$', s):
            subgraphs[m.group(1)] = (m.group(2), stack[-1] if stack else None)
            stack.append(m.group(1))
        elif s == "end":
            stack.pop()
        elif m := re.match(r"^(\w+) --> (\w+)$", s):
            edges.append((m.group(1), m.group(2), stack[-1] if stack else None))
        elif m := re.match(r"^(\w+) -\.- (\w+)$", s):
            links.append((m.group(1), m.group(2)))
        elif m := re.match(r"^(\w+?)(\(\(|\[\[|\[/|\[\\|\{\{|\[|>)(\".*)$", s):
            assert m.group(1) not in nodes
            nodes[m.group(1)] = (m.group(2) + m.group(3), stack[-1] if stack else None)
        else:
            raise AssertionError(f"unexpected Mermaid line {ln!r}")
    assert not stack
    return nodes, edges, links, subgraphs


def check_mermaid(g: cg.Graph) -> None:
    nodes, edges, links, subgraphs = parse_mermaid(g.to_mermaid())
    exp_nodes, exp_edges, exp_clusters = expected_render(g)

    def sub_of(cluster: str | None) -> str | None:
        return None if cluster is None else cluster.removeprefix("cluster_") + "_body"

    assert set(nodes) == set(exp_nodes)
    assert len(edges) == len(exp_edges)
    assert set(edges) == {(s, d, sub_of(c)) for s, d, c in exp_edges}
    exp_subs = {sub_of(c): (x.body.name, sub_of(parent)) for c, (x, parent) in exp_clusters.items()}
    assert subgraphs == exp_subs
    assert sorted(links) == sorted((c.removeprefix("cluster_"), sub_of(c)) for c in exp_clusters)
    for nid, (text, sub) in nodes.items():
        x, cluster = exp_nodes[nid]
        opening, closing = _MM_SHAPES[x.kind]
        assert re.fullmatch(
            rf"{re.escape(opening + x.name)} \({x.kind}#{x.index}\)(<br/>.+)?{re.escape(closing)}", text
        )
        # a child node is drawn next to (not inside) the subgraph of its body
        parent_cluster = exp_clusters[cluster][1] if x.kind == "child" else cluster
        assert sub == sub_of(parent_cluster), nid


@pytest.mark.parametrize("make", ALL, ids=_ids(ALL))
def test_mermaid(make):
    check_mermaid(make().graph)


def test_mermaid_exact_small():
    g = cg.Graph("tiny")
    a = g.memset(0x1000, 0, 4, name="z")
    g.host(print, after=a)
    assert g.to_mermaid() == "\n".join(
        ["flowchart TD", '  n0[\\"z (memset#0)"\\]', '  n1{{"print (host#1)"}}', "  n0 --> n1", ""]
    )


def test_mermaid_quotes_in_names():
    g = cg.Graph("q")
    g.empty(name='say "x"')
    assert "  n0((\"say 'x' (empty#0)\"))" in g.to_mermaid().split("\n")


# --------------------------------------------------------------------------- child graphs


def nested() -> cg.Graph:
    inner = cg.Graph("inner")
    i0 = inner.memset(0x1000, 1, 8, name="i0")
    inner.empty(after=i0, name="i1")
    body = cg.Graph("body")
    b0 = body.kernel(CUkernel(), 1, 1, name="b0")
    b1 = body.child(inner, after=b0, name="b1")
    body.empty(after=[b0, b1], name="b2")
    outer = cg.Graph("outer")
    o0 = outer.empty(name="o0")
    o1 = outer.child(body, after=o0, name="o1")
    outer.host(print, after=o1, name="o2")
    outer.child(inner, name="o3")  # the same body used twice, in two places
    return outer


def test_nested_child_validate_and_order():
    g = nested()
    g.validate()
    assert [x.name for x in g.topological_order()] == ["o0", "o1", "o2", "o3"]
    assert [x.name for x in g.nodes[1].body.topological_order()] == ["b0", "b1", "b2"]


def test_nested_child_dot():
    g = nested()
    check_dot(g)
    nodes, edges, clusters = parse_dot(g.to_dot())
    assert clusters == {
        "cluster_n1": ("child#1 'o1'", None),
        "cluster_n1_n1": ("child#1 'b1'", "cluster_n1"),
        "cluster_n3": ("child#3 'o3'", None),
    }
    assert {nid: c for nid, (_, c) in nodes.items()} == {
        "n0": None,
        "n1": "cluster_n1",
        "n1_n0": "cluster_n1",
        "n1_n1": "cluster_n1_n1",
        "n1_n1_n0": "cluster_n1_n1",
        "n1_n1_n1": "cluster_n1_n1",
        "n1_n2": "cluster_n1",
        "n2": None,
        "n3": "cluster_n3",
        "n3_n0": "cluster_n3",
        "n3_n1": "cluster_n3",
    }
    assert set(edges) == {
        ("n0", "n1", None),
        ("n1", "n2", None),
        ("n1_n0", "n1_n1", "cluster_n1"),
        ("n1_n0", "n1_n2", "cluster_n1"),
        ("n1_n1", "n1_n2", "cluster_n1"),
        ("n1_n1_n0", "n1_n1_n1", "cluster_n1_n1"),
        ("n3_n0", "n3_n1", "cluster_n3"),
    }


def test_nested_child_mermaid():
    g = nested()
    check_mermaid(g)
    nodes, edges, links, subgraphs = parse_mermaid(g.to_mermaid())
    assert subgraphs == {
        "n1_body": ("body", None),
        "n1_n1_body": ("inner", "n1_body"),
        "n3_body": ("inner", None),
    }
    assert sorted(links) == [("n1", "n1_body"), ("n1_n1", "n1_n1_body"), ("n3", "n3_body")]
    assert set(edges) == {
        ("n0", "n1", None),
        ("n1", "n2", None),
        ("n1_n0", "n1_n1", "n1_body"),
        ("n1_n0", "n1_n2", "n1_body"),
        ("n1_n1", "n1_n2", "n1_body"),
        ("n1_n1_n0", "n1_n1_n1", "n1_n1_body"),
        ("n3_n0", "n3_n1", "n3_body"),
    }
    assert nodes["n1"] == ('[["o1 (child#1)"]]', None)
    assert nodes["n1_n1"] == ('[["b1 (child#1)"]]', "n1_body")
    assert nodes["n1_n1_n0"] == ('[\\"i0 (memset#0)"\\]', "n1_n1_body")


def test_child_body_changes_are_seen_by_renderings():
    g = nested()
    inner = g.nodes[3].body
    inner.empty(name="late")
    check_dot(g)
    check_mermaid(g)
    assert "n1_n1_n2" in parse_dot(g.to_dot())[0]
    assert "n3_n2" in parse_mermaid(g.to_mermaid())[0]


def test_mermaid_quotes_in_child_graph_names():
    body = cg.Graph('say "hi"')
    body.empty()
    g = cg.Graph("g")
    g.child(body, name="c")
    titles = [ln.strip() for ln in g.to_mermaid().split("\n") if ln.strip().startswith("subgraph ")]
    assert len(titles) == 1
    m = re.match(r'^subgraph n0_body\["([^"]*)"\]$', titles[0])
    assert m, titles[0]
