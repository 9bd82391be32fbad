"""Resolving parameter values for an instantiation (GPU-free)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError, OperandError
from .node import Node, bodies_of, child_graphs
from .param import Param
from .param_offset import ParamAt, ParamBytes

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["all_params", "body_uses_params", "node_params_uses", "resolve_bindings"]


def node_params_uses(node: Node) -> list[str]:
    """Names of the parameters a node uses directly (not inside bodies)."""
    names: list[str] = []
    for field in node.arg_fields:
        for a in getattr(node, field):  # (one pass: lowering asks it of every node when a graph has parameters)
            t = type(a)
            if t is Param:
                names.append(a.name)
            elif t is ParamBytes:
                names += a.names()
    for field in node.pointer_fields:
        v = getattr(node, field)
        if type(v) is Param:
            names.append(v.name)
        elif type(v) is ParamAt:
            names.append(v.param.name)
    return names


def body_uses_params(node: Node, names: set[str]) -> bool:
    """Whether a graph nested in ``node`` (at any depth) uses a parameter named in ``names``."""
    stack = [node]  # an explicit stack: bodies may nest deeper than recursion goes
    seen: set[int] = set()
    while stack:
        for body in bodies_of(stack.pop()):
            if id(body) in seen:
                continue
            seen.add(id(body))
            for n in body._nodes:
                if not names.isdisjoint(node_params_uses(n)):
                    return True
                if n.body_fields:
                    stack.append(n)
    return False


def all_params(graph: Graph) -> dict[str, Param]:
    """Every parameter declared by ``graph`` and its child graphs, by name.

    Raises
    ------
    DefinitionError
        Two graphs declare the same name with different kinds.
    """
    out: dict[str, Param] = {}
    stack = [graph]
    seen: set[int] = set()
    while stack:
        g = stack.pop()
        if id(g) in seen:
            continue
        seen.add(id(g))
        for name, p in g._params.items():
            q = out.get(name)
            if q is not None and q.dtype != p.dtype:
                raise DefinitionError(
                    f"param {name!r} is a {q.dtype or 'pointer'} in Graph {q.graph.name!r} "
                    f"but a {p.dtype or 'pointer'} in Graph {p.graph.name!r}"
                )
            out.setdefault(name, p)
        for n in g._nodes:
            if n.body_fields:
                stack.extend(child_graphs(n))
    return out


def resolve_bindings(graph: Graph, given: dict[str, Any]) -> dict[str, Any]:
    """Coerce the given values and fill defaults; every parameter must end up bound.

    Raises
    ------
    OperandError
        A name is not a parameter of the graph, or a value has the wrong kind.
    DefinitionError
        Some parameters have neither a value nor a default (all are listed).
    """
    params = all_params(graph)
    unknown = sorted(set(given) - set(params))
    if unknown:
        raise OperandError(
            f"Graph {graph.name!r} has no parameter(s) {', '.join(map(repr, unknown))}; "
            f"its parameters are {sorted(params) or 'none'}"
        )
    out: dict[str, Any] = {}
    missing = []
    for name, p in params.items():
        if name in given:
            out[name] = p.coerce(given[name])
        elif p.default is not None:
            out[name] = p.coerce(p.default)
        else:
            missing.append(name)
    if missing:
        raise DefinitionError(
            f"Graph {graph.name!r}: unbound parameter(s) {', '.join(map(repr, sorted(missing)))}; "
            f"pass them to instantiate(name=value) or give them a default"
        )
    return out
