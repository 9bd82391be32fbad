"""Ordered paths: a stream-like builder where each op depends on the previous one."""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex, TypeVar

from ..errors import DefinitionError
from .builders import Builders, builder_names
from .core import After
from .node import Node

if TYPE_CHECKING:
    from .graph import Graph

    # Type checkers see every builder of Graph on Path, with its signature.
    _PathBuilders = Builders
else:
    _PathBuilders = object

__all__ = ["Path"]

_N = TypeVar("_N", bound=Node)


class Path(_PathBuilders):
    """A builder that chains every op it adds after the previous one.

    Obtained from :meth:`Graph.path`; usable as a context manager. It offers
    every builder of :class:`~cudagraph.Graph` (``p.kernel(...)``,
    ``p.memcpy(...)``, ``p.alloc(...)``, ``p.while_(...)``, ...), with the same
    arguments; an ``after=`` given to one of them adds dependencies on top of
    the previous op.

    Attributes
    ----------
    graph : Graph
        The graph the ops are added to.
    last : Node or None
        The most recent op (``None`` before the first).
    """

    __slots__ = ("graph", "_tail", "_last")

    def __init__(self, graph: Graph, start: list[Node]) -> None:
        self.graph = graph
        self._tail: list[Node] = start
        self._last: Node | None = None

    @property
    def last(self) -> Node | None:
        """The most recent op, or ``None``."""
        return self._last

    def __enter__(self) -> Path:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _after(self, after: After) -> list[Node]:
        extra = self.graph._deps(after, "path")
        return self._tail + [n for n in extra if not any(n is t for t in self._tail)]

    def _push(self, node: _N) -> _N:
        self._tail = [node]
        self._last = node
        return node

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:  # (copy.copy reduces too: it is refused alike)
        raise DefinitionError(
            f"a Path of Graph {self.graph.name!r} cannot be pickled or copied (it adds to that Graph); "
            "start another with Graph.path(after=...) instead"
        )

    def __repr__(self) -> str:
        last = self.last
        return f"<Path in Graph {self.graph.name!r}, last={last.label if last else None}>"


def _path_op(name: str) -> Any:
    """The :class:`Path` method for the builder ``name``: the graph's builder, after the previous op."""
    graph_builder = getattr(Builders, name)

    @functools.wraps(graph_builder)
    def op(self: Path, *args: Any, after: After = None, **kwargs: Any) -> Any:
        return self._push(getattr(self.graph, name)(*args, after=self._after(after), **kwargs))

    summary = (graph_builder.__doc__ or "").strip().splitlines()[0] if graph_builder.__doc__ else f"``{name}``"
    op.__doc__ = (
        f"{summary.rstrip('.')}, after the previous op of the path.\n\n"
        f"Takes the arguments of :meth:`Graph.{name} <cudagraph.Graph.{name}>`; ``after=`` adds dependencies."
    )
    op.__qualname__ = f"Path.{name}"
    op.__signature__ = inspect.signature(graph_builder)  # type: ignore[attr-defined]
    del op.__wrapped__  # type: ignore[attr-defined]  # help() shows the docstring above, not the graph's
    return op


# Every builder of Graph, from the one source (builders.Builders), explicitly at class creation.
for _name in builder_names():
    setattr(Path, _name, _path_op(_name))
del _name
