"""Text and picture renderings of a definition: summary, DOT, Mermaid."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import Graph
    from .nodes import Node

__all__ = ["summary", "to_dot", "to_mermaid"]

_DOT_STYLE = {
    "kernel": 'shape=box style="rounded,filled" fillcolor="#cfe2ff"',
    "memcpy": 'shape=box style=filled fillcolor="#d1e7dd"',
    "memset": 'shape=box style=filled fillcolor="#fff3cd"',
    "host": 'shape=hexagon style=filled fillcolor="#f8d7da"',
    "record": 'shape=invtriangle style=filled fillcolor="#e2e3e5"',
    "wait": 'shape=triangle style=filled fillcolor="#e2e3e5"',
    "child": 'shape=box3d style=filled fillcolor="#ffffff"',
    "empty": 'shape=circle label="" width=0.2 style=filled fillcolor="#adb5bd"',
    "if": 'shape=diamond style=filled fillcolor="#e0cffc"',
    "if_else": 'shape=diamond style=filled fillcolor="#e0cffc"',
    "while": 'shape=diamond style="filled,bold" fillcolor="#e0cffc"',
    "switch": 'shape=diamond style=filled fillcolor="#e0cffc"',
    "set_condition": 'shape=box style="rounded,filled,dashed" fillcolor="#e0cffc"',
    "alloc": 'shape=cylinder style=filled fillcolor="#c3fae8"',
    "free": 'shape=cylinder style="filled,dashed" fillcolor="#c3fae8"',
    "memcpy2d": 'shape=box style=filled fillcolor="#d1e7dd"',
    "memcpy3d": 'shape=box style=filled fillcolor="#d1e7dd"',
    "write_value": 'shape=note style=filled fillcolor="#ffe8cc"',
    "wait_value": 'shape=note style="filled,dashed" fillcolor="#ffe8cc"',
}

#: Edge style of a programmatic (programmatic dependent launch) edge.
_DOT_PROGRAMMATIC = ' [style=dashed color="#6f42c1" label="pdl"]'


def _programmatic_port(n: Node, p: Node) -> str | None:
    attrs = getattr(n, "attrs", None)
    return attrs.port_of(p) if attrs is not None else None


def summary(graph: Graph, limit: int = 50) -> str:
    """Counts by kind, roots and leaves, then one line per node."""
    nodes = graph._nodes
    kinds = Counter(n.kind for n in nodes)
    lines = [
        f"Graph {graph.name!r}: {len(nodes)} nodes, {graph.num_edges} edges",
        "  kinds: " + (", ".join(f"{k}={v}" for k, v in sorted(kinds.items())) or "none"),
    ]
    if graph._params:
        lines.append("  params: " + ", ".join(sorted(graph._params)))
    for n in nodes[:limit]:
        deps = ", ".join(f"#{p.index}" for p in n._preds) or "-"
        d = n.describe()
        lines.append(f"  #{n.index:<4} {n.kind:<7} {n.name:<16} after {deps:<12} {d}".rstrip())
    if len(nodes) > limit:
        lines.append(f"  ... {len(nodes) - limit} more nodes")
    return "\n".join(lines)


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _dot_body(graph: Graph, prefix: str, out: list[str], indent: str) -> None:
    from .nodes import ChildGraphNode, ConditionalNode

    for n in graph._nodes:
        nid = f"{prefix}n{n.index}"
        if isinstance(n, ChildGraphNode):
            out.append(f"{indent}subgraph cluster_{nid} {{")
            out.append(f'{indent}  label="{_esc(n.label)}"; style=dashed;')
            out.append(f'{indent}  {nid} [label="{_esc(n.name)}" {_DOT_STYLE["child"]}];')
            _dot_body(n.body, nid + "_", out, indent + "  ")
            out.append(f"{indent}}}")
            continue
        if isinstance(n, ConditionalNode):
            # The node, then one cluster per body, labelled with the value that selects it.
            label = f"{_esc(n.name)}\\n{n.kind}#{n.index} ({_esc(n.cond.name)})"
            out.append(f'{indent}{nid} [label="{label}" {_DOT_STYLE.get(n.kind, "shape=diamond")}];')
            for i, body in enumerate(n.bodies):
                bid = f"{nid}_b{i}"
                out.append(f"{indent}subgraph cluster_{bid} {{")
                out.append(f'{indent}  label="{_esc(_body_title(n, i))}"; style=dotted;')
                _dot_body(body, bid + "_", out, indent + "  ")
                out.append(f"{indent}}}")
            continue
        label = f"{_esc(n.name)}\\n{n.kind}#{n.index}"
        style = _DOT_STYLE.get(n.kind, "shape=box")
        if n.kind == "empty":
            out.append(f'{indent}{nid} [{style} tooltip="{_esc(n.label)}"];')
        else:
            out.append(f'{indent}{nid} [label="{label}" {style}];')
    for n in graph._nodes:
        for p in n._preds:
            style = _DOT_PROGRAMMATIC if _programmatic_port(n, p) else ""
            out.append(f"{indent}{prefix}n{p.index} -> {prefix}n{n.index}{style};")


def _body_title(n: Node, i: int) -> str:
    kind = n.kind
    if kind == "if":
        return f"{n.name}: if {n.cond.name} != 0"  # type: ignore[attr-defined]
    if kind == "if_else":
        return f"{n.name}: {'if' if i == 0 else 'else'} ({n.cond.name} {'!=' if i == 0 else '=='} 0)"  # type: ignore[attr-defined]
    if kind == "while":
        return f"{n.name}: while {n.cond.name} != 0"  # type: ignore[attr-defined]
    return f"{n.name}: case {n.cond.name} == {i}"  # type: ignore[attr-defined]


def to_dot(graph: Graph) -> str:
    """Graphviz DOT text for ``graph``."""
    out = [f'digraph "{_esc(graph.name)}" {{', "  rankdir=TB;", '  node [fontname="Helvetica" fontsize=10];']
    _dot_body(graph, "", out, "  ")
    out.append("}")
    return "\n".join(out) + "\n"


_MERMAID_SHAPE = {
    "kernel": ('["', '"]'),
    "memcpy": ('[/"', '"/]'),
    "memset": ('[\\"', '"\\]'),
    "host": ('{{"', '"}}'),
    "record": ('>"', '"]'),
    "wait": ('>"', '"]'),
    "child": ('[["', '"]]'),
    "empty": ('(("', '"))'),
    "if": ('{"', '"}'),
    "if_else": ('{"', '"}'),
    "while": ('{"', '"}'),
    "switch": ('{"', '"}'),
    "alloc": ('[("', '")]'),
    "free": ('[("', '")]'),
    "memcpy2d": ('[/"', '"/]'),
    "memcpy3d": ('[/"', '"/]'),
}


def _mermaid_label(n: Node) -> str:
    return f"{n.name} ({n.kind}#{n.index})".replace('"', "'")


def _mermaid_body(graph: Graph, prefix: str, out: list[str], indent: str) -> None:
    from .nodes import ChildGraphNode, ConditionalNode

    for n in graph._nodes:
        nid = f"{prefix}n{n.index}"
        opening, closing = _MERMAID_SHAPE.get(n.kind, ('["', '"]'))
        out.append(f"{indent}{nid}{opening}{_mermaid_label(n)}{closing}")
        if isinstance(n, ChildGraphNode):
            title = n.body.name.replace('"', "'")
            out.append(f'{indent}subgraph {nid}_body["{title}"]')
            _mermaid_body(n.body, nid + "_", out, indent + "  ")
            out.append(f"{indent}end")
            out.append(f"{indent}{nid} -.- {nid}_body")
        elif isinstance(n, ConditionalNode):
            for i, body in enumerate(n.bodies):
                bid = f"{nid}_b{i}"
                title = _body_title(n, i).replace('"', "'")
                out.append(f'{indent}subgraph {bid}["{title}"]')
                _mermaid_body(body, bid + "_", out, indent + "  ")
                out.append(f"{indent}end")
                out.append(f"{indent}{nid} -.- {bid}")
    for n in graph._nodes:
        for p in n._preds:
            arrow = "-. pdl .->" if _programmatic_port(n, p) else "-->"
            out.append(f"{indent}{prefix}n{p.index} {arrow} {prefix}n{n.index}")


def to_mermaid(graph: Graph) -> str:
    """A Mermaid ``flowchart TD`` for ``graph``."""
    out = ["flowchart TD"]
    _mermaid_body(graph, "", out, "  ")
    return "\n".join(out) + "\n"
