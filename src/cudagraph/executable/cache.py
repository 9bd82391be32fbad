"""Reusing instantiated graphs across definitions of the same shape."""

from __future__ import annotations

from collections import OrderedDict
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from ..definition.graph import Graph
from ..errors import CudaGraphError, OperandError
from .compare import topology_signature

if TYPE_CHECKING:
    from .executable import Executable

__all__ = ["ExecutableCache"]


class ExecutableCache:
    """Executables keyed by topology: a rebuilt definition of a known shape is updated, not instantiated.

    ``cache.get(g)`` returns an executable for ``g``. When a definition with
    the same nodes kinds, order, edges, edge types and kernel launch attributes
    (cluster, priority, cooperative, ``attributes=``: what no driver update
    changes) was seen before, its executable is
    updated in place (:meth:`Executable.update`: only the changed nodes, or
    ``cuGraphExecUpdate``) — much cheaper than instantiating. Otherwise ``g``
    is instantiated and remembered; the least recently used executable is
    closed once more than ``maxsize`` are held.

    Parameters
    ----------
    maxsize : int
        The most executables kept (default 16).
    **instantiate_options
        Passed to :meth:`Graph.instantiate` on a miss (``upload_stream=``, ...).

    Attributes
    ----------
    hits, misses, evictions : int
        Counters, also in :meth:`stats`.

    Notes
    -----
    An executable returned by ``get`` stays owned by the cache: do not close
    it; it may be updated for a later definition of the same shape, so launch
    it before the next ``get`` of that shape.
    """

    __slots__ = ("_entries", "_last", "_last_key", "_options", "evictions", "hits", "maxsize", "misses")

    def __init__(self, maxsize: int = 16, **instantiate_options: Any) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 1:
            raise OperandError(f"ExecutableCache: maxsize must be a positive int, got {maxsize!r}")
        self.maxsize = maxsize
        self._options = instantiate_options
        # signature -> (that signature object, executable); most recently used last.
        self._entries: OrderedDict[Any, tuple[Any, Executable]] = OrderedDict()
        self._last: Executable | None = None  # the most recently used executable
        self._last_key: Any = None  # and its signature
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def get(self, graph: Graph, **params: Any) -> Executable:
        """An executable running ``graph`` (updated from a cached one when the shape is known).

        Parameters
        ----------
        graph : Graph
            The definition.
        **params
            Parameter values.

        Returns
        -------
        Executable

        Raises
        ------
        OperandError
            ``graph`` is not a :class:`~cudagraph.Graph`.
        CudaGraphError
            What :meth:`Graph.instantiate` or :meth:`Executable.update` raised (the
            cached executable then still runs its previous definition). An
            unexpected exception from an update drops that executable from the
            cache (closed) before it propagates.
        """
        if not isinstance(graph, Graph):
            raise OperandError(f"ExecutableCache.get: graph must be a Graph, got {type(graph).__name__}")
        key = topology_signature(graph)
        last = self._last
        # The shape of the previous call first: an equality test, where a lookup hashes the signature.
        entry = (self._last_key, last) if last is not None and key == self._last_key else self._entries.get(key)
        if entry is not None and not entry[1].closed:
            stored, exe = entry
            if exe is not last:
                self._entries.move_to_end(key)
                self._last, self._last_key = exe, stored
            # ``stored`` equals ``key``; while it is also the executable's own signature
            # object, update() recognises the topology by identity.
            try:
                exe.update(graph, reinstantiate_if_needed=True, _signature=stored, **params)
            except CudaGraphError:
                # Refused before any change (a bad definition or bindings), or failed part way with the
                # nodes to set again marked: the executable still runs its previous definition.
                raise
            except BaseException:
                self._drop(key, exe)  # an unexpected failure: the executable is not trusted again
                raise
            self.hits += 1
            return exe
        self.misses += 1
        exe = graph.instantiate(**self._options, **params)
        exe._remember_signature(key)
        self._entries[key] = (key, exe)
        self._entries.move_to_end(key)
        self._last, self._last_key = exe, key
        while len(self._entries) > self.maxsize:
            _, (_, old) = self._entries.popitem(last=False)
            old.close()
            self.evictions += 1
        return exe

    def _drop(self, key: Any, exe: Executable) -> None:
        """Forget and close ``exe``, cached under ``key``."""
        entry = self._entries.get(key)
        if entry is not None and entry[1] is exe:
            del self._entries[key]
        if self._last is exe:
            self._last = self._last_key = None
        with suppress(Exception):  # (the failure being raised is the one to report)
            exe.close()

    def stats(self) -> dict[str, int]:
        """``{"hits", "misses", "evictions", "size", "maxsize"}``."""
        return {
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
            "size": len(self._entries),
            "maxsize": self.maxsize,
        }

    def clear(self) -> None:
        """Close and forget every executable (counters are kept)."""
        for _, exe in self._entries.values():
            exe.close()
        self._entries.clear()
        self._last = self._last_key = None

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        s = self.stats()
        return (
            f"<ExecutableCache size={s['size']}/{s['maxsize']} hits={s['hits']} "
            f"misses={s['misses']} evictions={s['evictions']}>"
        )
