"""Pictures of a definition as files and in Jupyter, and its profile: :class:`Drawing`, a mixin of Graph (GPU-free).

The DOT text (:meth:`Graph.to_dot <cudagraph.Graph.to_dot>`) needs nothing
installed. Rendering it to SVG or PNG uses the optional ``graphviz`` Python
package and the Graphviz programs; without them a
:class:`~cudagraph.errors.MissingDependencyError` says what to install, and
``.dot``/``.mmd`` files are still written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError, MissingDependencyError, OperandError
from . import seams

if TYPE_CHECKING:
    from ..executable.profile import ProfileResult

__all__ = ["REPR_MAX_NODES", "Drawing", "check_path", "mimebundle", "render_dot", "write_picture"]

#: Jupyter draws definitions of at most this many nodes (bodies included); larger ones are summarized.
REPR_MAX_NODES = 400

_TEXT_FORMATS = {".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".mermaid": "mermaid"}
_RENDERED = ("svg", "png", "pdf", "jpg", "jpeg")


def render_dot(dot: str, fmt: str = "svg") -> bytes:
    """Render DOT text with Graphviz (through the ``graphviz`` package) to ``fmt`` bytes.

    Raises
    ------
    MissingDependencyError
        The ``graphviz`` package or the Graphviz programs are not installed.
    DefinitionError
        Graphviz refused the text or the format.
    """
    try:
        import graphviz  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        raise MissingDependencyError(
            f"drawing a picture as {fmt} needs the graphviz Python package and the Graphviz programs "
            "(pip install graphviz; apt-get install graphviz or conda install graphviz); "
            "to_dot() gives the DOT text without them"
        ) from None
    try:
        data: bytes = graphviz.Source(dot).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise MissingDependencyError(
            f"drawing a picture as {fmt} needs the Graphviz programs (dot) on PATH "
            "(apt-get install graphviz, brew install graphviz or conda install graphviz); "
            "to_dot() gives the DOT text without them"
        ) from None
    except (graphviz.CalledProcessError, ValueError) as exc:
        detail = str(getattr(exc, "stderr", b"") or exc)
        raise DefinitionError(f"Graphviz could not draw the picture as {fmt}: {detail.strip()[:300]}") from exc
    return data


def check_path(path: Any, what: str) -> None:
    """Refuse a ``path`` that is not a str or path-like (an int would be taken as a file descriptor).

    Raises
    ------
    OperandError
        Naming ``what``.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise OperandError(f"{what} must be a str or a path-like object, got {type(path).__name__}")


def write_picture(path: str | os.PathLike[str], dot: str, mermaid: Any = None, fmt: str | None = None) -> Path:
    """Write a picture to ``path``; the format is ``fmt`` or the suffix (``.svg .png .pdf .dot .mmd``).

    ``mermaid`` is a callable returning the Mermaid text (``None``: no ``.mmd``).
    Returns the path written.

    Raises
    ------
    OperandError
        ``path`` is not a str or path-like, or ``fmt`` not a str.
    """
    check_path(path, "draw: path")
    if fmt is not None and not isinstance(fmt, str):
        raise OperandError(f"draw: format must be a str, got {type(fmt).__name__}")
    out = Path(path)
    kind = (fmt or _TEXT_FORMATS.get(out.suffix.lower()) or out.suffix.lower().lstrip(".")).lower()
    if kind in ("dot", "gv"):
        out.write_text(dot, encoding="utf-8")
    elif kind in ("mermaid", "mmd") and mermaid is not None:
        out.write_text(mermaid(), encoding="utf-8")
    elif kind in _RENDERED:
        out.write_bytes(render_dot(dot, "jpg" if kind == "jpeg" else kind))
    else:
        raise DefinitionError(
            f"draw: cannot tell the picture format of {str(out)!r}; use a .svg, .png, .pdf, .dot or .mmd file "
            "or pass format="
        )
    return out


def mimebundle(dot: str, text: str, nodes: int) -> dict[str, Any]:
    """What Jupyter shows: an SVG when Graphviz is installed and the picture is small enough, else text."""
    if nodes > REPR_MAX_NODES:
        return {"text/plain": f"{text}\n({nodes} nodes: too many to draw here; use draw('file.svg'))"}
    try:
        svg = render_dot(dot, "svg").decode("utf-8")
    except (MissingDependencyError, DefinitionError) as exc:
        return {"text/plain": f"{text}\n({exc})"}
    return {"image/svg+xml": svg, "text/plain": text}


class Drawing:
    """Pictures of a definition (:meth:`draw` to a file, its picture in Jupyter) and its per-node :meth:`profile`.

    A mixin of :class:`~cudagraph.Graph`; it uses the graph's
    :meth:`~cudagraph.Graph.to_dot` and :meth:`~cudagraph.Graph.to_mermaid`.
    """

    __slots__ = ()

    def to_dot(self) -> str:  # pragma: no cover - provided by Graph
        raise NotImplementedError

    def to_mermaid(self) -> str:  # pragma: no cover - provided by Graph
        raise NotImplementedError

    def _picture_nodes(self) -> int:
        graph: Any = self
        return len(graph._nodes) + sum(len(b._nodes) for b in graph._descendants())

    def draw(self, path: str | os.PathLike[str], format: str | None = None) -> Path:
        """Write the picture of the definition to ``path``.

        Parameters
        ----------
        path : str or path-like
            The file; its suffix gives the format: ``.svg``, ``.png``, ``.pdf``
            (rendered by Graphviz), ``.dot``/``.gv`` (the DOT text) or ``.mmd``
            (the Mermaid text).
        format : str, optional
            The format, when the suffix does not say it.

        Returns
        -------
        pathlib.Path
            The file written.

        Raises
        ------
        MissingDependencyError
            An SVG/PNG/PDF was asked for and the ``graphviz`` package or the
            Graphviz programs are not installed (``.dot`` needs neither).
        DefinitionError
            The format is unknown.
        OperandError
            ``path`` is not a str or path-like, or ``format`` not a str.
        """
        return write_picture(path, self.to_dot(), self.to_mermaid, format)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The picture (SVG) Jupyter shows, or the summary when Graphviz is missing or the graph is large."""
        return mimebundle(self.to_dot(), repr(self), self._picture_nodes())

    def profile(self, stream: Any = None, *, repeats: int = 20, **params: Any) -> ProfileResult:
        """Time every node (run eagerly, one by one, between CUDA events) and the whole graph launch.

        Each top-level node is run eagerly in topological order on ``stream``
        between two events, ``repeats`` times after one warm-up run; then the
        graph is instantiated and launched ``repeats`` times between events.

        Parameters
        ----------
        stream : cuda.core.Stream or object with ``__cuda_stream__``, optional
            Where to run (``None``: the legacy default stream).
        repeats : int
            Timed runs of each (the medians are reported).
        **params
            Values for the graph's parameters.

        Returns
        -------
        ProfileResult
            Per-node medians, the critical path through the DAG and its
            length, the whole launch's median; ``str()`` is a table and
            ``plot(path)`` draws a timeline.

        Raises
        ------
        DefinitionError
            The graph has conditional nodes (they run only inside a graph).
        DriverUnavailableError
            No NVIDIA driver or GPU was found.
        """
        result: ProfileResult = seams.profile(self, stream, repeats, params)
        return result
