"""Text and picture renderings of a definition: summary, DOT, Mermaid."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from .node import Node, bodies_of

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["summary", "to_dot", "to_mermaid"]

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
    for n in graph._nodes:
        nid = f"{prefix}n{n.index}"
        if n.body_fields and not n.conditional_bodies:
            # A child graph: the node inside a cluster holding its body.
            out.append(f"{indent}subgraph cluster_{nid} {{")
            out.append(f'{indent}  label="{_esc(n.label)}"; style=dashed;')
            out.append(f'{indent}  {nid} [label="{_esc(n.name)}" {n.dot_style}];')
            for body in bodies_of(n):
                _dot_body(body, nid + "_", out, indent + "  ")
            out.append(f"{indent}}}")
            continue
        if n.conditional_bodies:
            # The node, then one cluster per body, labelled with the value that selects it.
            label = f"{_esc(n.name)}\\n{n.kind}#{n.index} ({_esc(n.cond.name)})"  # type: ignore[attr-defined]
            out.append(f'{indent}{nid} [label="{label}" {n.dot_style}];')
            for i, body in enumerate(bodies_of(n)):
                bid = f"{nid}_b{i}"
                out.append(f"{indent}subgraph cluster_{bid} {{")
                out.append(f'{indent}  label="{_esc(_body_title(n, i))}"; style=dotted;')
                _dot_body(body, bid + "_", out, indent + "  ")
                out.append(f"{indent}}}")
            continue
        label = f"{_esc(n.name)}\\n{n.kind}#{n.index}"
        style = n.dot_style
        if n.kind == "empty":  # drawn as a dot, its label in the tooltip
            out.append(f'{indent}{nid} [{style} tooltip="{_esc(n.label)}"];')
        else:
            out.append(f'{indent}{nid} [label="{label}" {style}];')
    for n in graph._nodes:
        for p in n._preds:
            style = _DOT_PROGRAMMATIC if _programmatic_port(n, p) else ""
            out.append(f"{indent}{prefix}n{p.index} -> {prefix}n{n.index}{style};")


def _body_title(n: Node, i: int) -> str:
    return n.body_title(i)  # type: ignore[attr-defined,no-any-return]


def to_dot(graph: Graph) -> str:
    """Graphviz DOT text for ``graph``."""
    out = [f'digraph "{_esc(graph.name)}" {{', "  rankdir=TB;", '  node [fontname="Helvetica" fontsize=10];']
    _dot_body(graph, "", out, "  ")
    out.append("}")
    return "\n".join(out) + "\n"


def _mermaid_label(n: Node) -> str:
    return f"{n.name} ({n.kind}#{n.index})".replace('"', "'")


def _mermaid_body(graph: Graph, prefix: str, out: list[str], indent: str) -> None:
    for n in graph._nodes:
        nid = f"{prefix}n{n.index}"
        opening, closing = n.mermaid_shape
        out.append(f"{indent}{nid}{opening}{_mermaid_label(n)}{closing}")
        if n.body_fields and not n.conditional_bodies:
            for body in bodies_of(n):
                title = body.name.replace('"', "'")
                out.append(f'{indent}subgraph {nid}_body["{title}"]')
                _mermaid_body(body, nid + "_", out, indent + "  ")
                out.append(f"{indent}end")
                out.append(f"{indent}{nid} -.- {nid}_body")
        elif n.conditional_bodies:
            for i, body in enumerate(bodies_of(n)):
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
