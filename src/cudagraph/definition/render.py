"""Text and picture renderings of a definition: summary, DOT, Mermaid (GPU-free).

Every walk is iterative (a stack of generators, one per graph being drawn), so
a definition nested thousands of levels deep renders without ``RecursionError``.
Names are made safe for each format: control characters (NUL included) are
shown as ``\\xNN``, lone surrogates as U+FFFD, DOT strings longer than
Graphviz accepts (16 KiB) and Mermaid labels longer than :data:`MERMAID_LIMIT`
are cut with an ellipsis, and Mermaid's special characters (a leading backtick
starts a Markdown string in Mermaid 11) are written as entity codes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from . import seams
from .access import access_label
from .condition import Condition
from .node import Node, bodies_of
from .param import Param

if TYPE_CHECKING:
    from .graph import Graph

__all__ = [
    "DOT_CHARS",
    "DOT_LIMIT",
    "MERMAID_LIMIT",
    "kernel_name",
    "node_detail",
    "operand_name",
    "summary",
    "to_dot",
    "to_mermaid",
]

#: Edge style of a programmatic (programmatic dependent launch) edge.
_DOT_PROGRAMMATIC = ' [style=dashed color="#6f42c1" label="pdl"]'
#: Longest quoted DOT string written, in UTF-8 bytes (Graphviz refuses strings over 16384 bytes).
DOT_LIMIT = 16000
#: Longest name drawn in DOT, in characters (Graphviz cannot lay out a node much wider).
DOT_CHARS = 2000
#: Longest Mermaid label written, in characters.
MERMAID_LIMIT = 2000
#: Longest detail line (kernel call, predicate, copy operands) under a node's name, in characters.
_DETAIL_LIMIT = 120
#: Deepest indentation written; deeper levels are written at this depth.
_MAX_INDENT = 32
_ELLIPSIS = "\u2026"
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
_MERMAID_SPECIAL = re.compile(r'[#"`<>\n]')
_MERMAID_CODES = {"#": "#35;", '"': "'", "`": "#96;", "<": "#60;", ">": "#62;", "\n": "<br/>"}

_Walk = Callable[["Graph", str, int], Iterator[tuple["Graph", str, int]]]


def _walk(root: Graph, visit: _Walk) -> None:
    """Run ``visit(graph, prefix, depth)`` on ``root`` and, without recursion, on every body it yields.

    ``visit`` is a generator: each ``(body, prefix, depth)`` it yields is visited
    completely before the generator resumes (so it can close what it opened).
    """
    stack = [visit(root, "", 1)]
    while stack:
        try:
            child = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        stack.append(visit(*child))


def _indent(depth: int) -> str:
    return "  " * min(depth, _MAX_INDENT)


def _clean(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN`` (newlines kept) and lone surrogates replaced."""
    if _CONTROL.search(text):
        text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


# ----------------------------------------------------------------- labels


def operand_name(value: Any) -> str:
    """How an operand is shown in pictures: a parameter or condition by name, an address in hex, a scalar's value."""
    if isinstance(value, (Param, Condition)):
        return str(value.name)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return hex(value)
    if isinstance(value, (np.generic, float)):
        return str(value)
    tname = type(value).__name__
    if tname in ("AllocNode", "AllocOffset"):
        alloc = getattr(value, "alloc", value)
        off = getattr(value, "offset", 0)
        return f"alloc#{alloc.index}" + (f"+{off}" if isinstance(off, int) and off else "")
    if isinstance(value, bytes):
        return f"<{len(value)} B>"
    inner = getattr(value, "value", None)  # ctypes scalars
    if isinstance(inner, (int, float)) and type(value).__module__ == "ctypes":
        return str(inner)
    return tname


def kernel_name(kernel: Any) -> str | None:
    """The name of a kernel function, or ``None`` when it cannot be known here.

    Read from ``__name__`` (Numba dispatchers, wrapped functions) or a ``name``
    attribute; for ``cuda.core``/``cuda.bindings`` kernels, from the driver
    (``cuKernelGetName``/``cuFuncGetName``) through the ``kernel_info`` seam,
    only when that object exists (so CUDA is loaded already).
    """
    for attr in ("__name__", "name"):
        value = getattr(kernel, attr, None)
        if isinstance(value, str) and value:
            return value
    if not type(kernel).__module__.startswith("cuda"):
        return None
    try:
        name = seams.kernel_info(kernel).name
    except Exception:  # a placeholder or foreign handle: drawn without its name
        return None
    return name if isinstance(name, str) and name and not name.startswith("<") else None


def _short(text: str, limit: int = _DETAIL_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + _ELLIPSIS


def node_detail(node: Node, names: dict[int, str | None] | None = None) -> str:
    """The detail line drawn under a node's name: the kernel call, a predicate, copy operands (or ``""``).

    Parameters
    ----------
    node : Node
    names : dict, optional
        A cache of kernel names by ``id(kernel)``, shared over one rendering.
    """
    kind = node.kind
    if kind == "kernel":
        args: tuple[Any, ...] = node.args  # type: ignore[attr-defined]
        kernel = node.kernel  # type: ignore[attr-defined]
        if names is None:
            names = {}
        if id(kernel) not in names:
            names[id(kernel)] = kernel_name(kernel)
        kname = names[id(kernel)]
        if kname is None and not any(isinstance(a, (Param, Condition)) for a in args):
            return ""
        return _short(f"{kname or ''}({', '.join(operand_name(a) for a in args)})")
    if kind == "set_condition":
        cond, ptr, op, value = node.cond, node.ptr, node.op, node.value  # type: ignore[attr-defined]
        # str(), not format(): a float32 1e-06 is shown as 1e-06, not as the double 9.99...e-07.
        return _short(f"{cond.name} = {operand_name(ptr)} {op} {np.dtype(node.dtype).type(value)!s}")  # type: ignore[attr-defined]
    # Copies and fills name their operands when one of them has a name (a parameter, an allocation).
    if kind in ("memcpy", "memcpy2d", "memcpy3d"):
        src, dst = node.src, node.dst  # type: ignore[attr-defined]
        if _named(src) or _named(dst):
            return _short(f"{operand_name(src)} -> {operand_name(dst)}")
    elif kind == "memset" and _named(node.dst):  # type: ignore[attr-defined]
        return _short(f"{operand_name(node.dst)} = {node.value:#x}")  # type: ignore[attr-defined]
    return ""


def _named(value: Any) -> bool:
    return isinstance(value, Param) or type(value).__name__ in ("AllocNode", "AllocOffset")


# ----------------------------------------------------------------- summary


def summary(graph: Graph, limit: int = 50) -> str:
    """Counts by kind, roots and leaves, then one line per node, the nodes of bodies indented under theirs.

    ``limit`` is the number of node lines written (bodies included); the rest are counted.
    """
    nodes = graph._nodes
    kinds = Counter(n.kind for n in nodes)
    lines = [
        f"Graph {graph.name!r}: {len(nodes)} nodes, {graph.num_edges} edges",
        "  kinds: " + (", ".join(f"{k}={v}" for k, v in sorted(kinds.items())) or "none"),
    ]
    if graph._params:
        lines.append("  params: " + ", ".join(sorted(graph._params)))
    shown = [0, 0]  # node lines written, node lines left out

    def visit(g: Graph, prefix: str, depth: int) -> Iterator[tuple[Graph, str, int]]:
        pad = _indent(depth)
        for n in g._nodes:
            if shown[0] >= limit:
                shown[1] += 1
            else:
                shown[0] += 1
                deps = ", ".join(f"#{p.index}" for p in n._preds) or "-"
                line = f"{pad}#{n.index:<4} {n.kind:<7} {n.name:<16} after {deps:<12} {n.describe()}".rstrip()
                acc = access_label(n)
                lines.append(f"{line}  [{acc}]" if acc else line)
            if n.body_fields:
                for i, body in enumerate(bodies_of(n)):
                    if shown[0] < limit:
                        title = n.body_title(i) if n.conditional_bodies else f"body {body.name!r}"  # type: ignore[attr-defined]
                        lines.append(f"{_indent(depth + 1)}{title}:")
                    yield body, "", depth + 2

    _walk(graph, visit)
    if shown[1]:
        lines.append(f"  ... {shown[1]} more nodes")
    return "\n".join(lines)


# --------------------------------------------------------------------- DOT


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _dot_str(text: str, limit: int = DOT_LIMIT) -> str:
    """``text`` as the inside of a quoted DOT string: escaped, and cut to ``limit`` UTF-8 bytes."""
    text = _clean(text)
    out = _dot_escape(text)
    if len(text) <= DOT_CHARS and (len(out) * 4 <= limit or len(out.encode("utf-8")) <= limit):
        return out
    text = text[: DOT_CHARS - 1]
    budget = limit - len(_ELLIPSIS.encode("utf-8"))
    lo, hi = 0, len(text)  # the longest prefix of text whose escaped form fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(_dot_escape(text[:mid]).encode("utf-8")) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return _dot_escape(text[:lo]) + _ELLIPSIS


def _esc(text: str) -> str:
    return _dot_str(text)


def _programmatic_port(n: Node, p: Node) -> str | None:
    attrs = getattr(n, "attrs", None)
    return attrs.port_of(p) if attrs is not None else None


def _body_title(n: Node, i: int) -> str:
    return n.body_title(i)  # type: ignore[attr-defined,no-any-return]


def _on_device(n: Node) -> str:
    """``"@dev1"`` for a node given ``device=1``, else ``""``."""
    d = getattr(n, "device", None)
    return "" if d is None else f"@dev{d}"


def _dot_label(n: Node, names: dict[int, str | None], extra: str = "") -> str:
    # The name is cut first, so the kind line and the detail line stay whole.
    detail = node_detail(n, names)
    acc = access_label(n)
    rest = f"\n{n.kind}#{n.index}{_on_device(n)}{extra}" + (f"\n{detail}" if detail else "")
    rest += f"\n{acc}" if acc else ""
    return _dot_str(n.name, DOT_LIMIT - 4 * len(rest) - 8) + _dot_str(rest)


def to_dot(graph: Graph) -> str:
    """Graphviz DOT text for ``graph``.

    Child graphs are clusters holding their node; conditional bodies are
    clusters titled with the value that selects them, each joined to its
    conditional node by a dotted edge. Kernels show their kernel's name and
    arguments (parameters by name), ``set_condition`` nodes their predicate.
    """
    out = [f'digraph "{_dot_str(graph.name)}" {{', "  rankdir=TB;", '  node [fontname="Helvetica" fontsize=10];']
    names: dict[int, str | None] = {}
    compound = [False]

    def visit(g: Graph, prefix: str, depth: int) -> Iterator[tuple[Graph, str, int]]:
        pad = _indent(depth)
        for n in g._nodes:
            nid = f"{prefix}n{n.index}"
            if n.body_fields and not n.conditional_bodies:
                # A child graph: the node inside a cluster holding its body.
                out.append(f"{pad}subgraph cluster_{nid} {{")
                out.append(f'{pad}  label="{_dot_str(n.label)}"; style=dashed;')
                out.append(f'{pad}  {nid} [label="{_dot_str(n.name)}" {n.dot_style}];')
                for body in bodies_of(n):
                    yield body, nid + "_", depth + 1
                out.append(f"{pad}}}")
            elif n.conditional_bodies:
                # The node, then one cluster per body, labelled with the value that selects it.
                cond = f" ({n.cond.name})"  # type: ignore[attr-defined]
                out.append(f'{pad}{nid} [label="{_dot_label(n, names, cond)}" {n.dot_style}];')
                for i, body in enumerate(bodies_of(n)):
                    bid = f"{nid}_b{i}"
                    out.append(f"{pad}subgraph cluster_{bid} {{")
                    out.append(f'{pad}  label="{_dot_str(_body_title(n, i))}"; style=dotted;')
                    if body._nodes:
                        head = f"{bid}_n{body._nodes[0].index}"
                        yield body, bid + "_", depth + 1
                    else:
                        head = f"{bid}_none"
                        out.append(f'{pad}  {head} [label="(empty)" shape=plaintext];')
                    out.append(f"{pad}}}")
                    out.append(f"{pad}{nid} -> {head} [style=dotted arrowhead=none lhead=cluster_{bid}];")
                    compound[0] = True
            elif n.kind == "empty":  # drawn as a dot, its label in the tooltip
                out.append(f'{pad}{nid} [{n.dot_style} tooltip="{_dot_str(n.label)}"];')
            else:
                out.append(f'{pad}{nid} [label="{_dot_label(n, names)}" {n.dot_style}];')
        for n in g._nodes:
            for p in n._preds:
                style = _DOT_PROGRAMMATIC if _programmatic_port(n, p) else ""
                out.append(f"{pad}{prefix}n{p.index} -> {prefix}n{n.index}{style};")

    _walk(graph, visit)
    if compound[0]:
        out.insert(2, "  compound=true;")
    out.append("}")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------- Mermaid


def _mermaid_text(text: str) -> str:
    """``text`` for a quoted Mermaid label: entity codes for ``# ` < >``, ``'`` for ``"``, ``<br/>`` for newlines."""
    text = _clean(text)
    if len(text) > MERMAID_LIMIT:
        text = text[: MERMAID_LIMIT - 1] + _ELLIPSIS
    if _MERMAID_SPECIAL.search(text):
        text = _MERMAID_SPECIAL.sub(lambda m: _MERMAID_CODES[m.group()], text)
    return text


def _mermaid_label(n: Node, names: dict[int, str | None]) -> str:
    detail = node_detail(n, names)
    text = f"{_mermaid_text(n.name)} ({n.kind}#{n.index}{_on_device(n)})"
    acc = access_label(n)
    return text + (f"<br/>{_mermaid_text(detail)}" if detail else "") + (f"<br/>{_mermaid_text(acc)}" if acc else "")


def to_mermaid(graph: Graph) -> str:
    """A Mermaid ``flowchart TD`` for ``graph`` (bodies as subgraphs linked to their node)."""
    out = ["flowchart TD"]
    names: dict[int, str | None] = {}

    def visit(g: Graph, prefix: str, depth: int) -> Iterator[tuple[Graph, str, int]]:
        pad = _indent(depth)
        for n in g._nodes:
            nid = f"{prefix}n{n.index}"
            opening, closing = n.mermaid_shape
            out.append(f"{pad}{nid}{opening}{_mermaid_label(n, names)}{closing}")
            if n.body_fields:
                for i, body in enumerate(bodies_of(n)):
                    if n.conditional_bodies:
                        bid, title = f"{nid}_b{i}", _body_title(n, i)
                        inner = bid + "_"
                    else:
                        bid, title = f"{nid}_body", body.name
                        inner = nid + "_"
                    out.append(f'{pad}subgraph {bid}["{_mermaid_text(title) or " "}"]')
                    yield body, inner, depth + 1
                    out.append(f"{pad}end")
                    out.append(f"{pad}{nid} -.- {bid}")
        for n in g._nodes:
            for p in n._preds:
                arrow = "-. pdl .->" if _programmatic_port(n, p) else "-->"
                out.append(f"{pad}{prefix}n{p.index} {arrow} {prefix}n{n.index}")

    _walk(graph, visit)
    return "\n".join(out) + "\n"
