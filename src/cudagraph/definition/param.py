"""Symbolic parameters: values bound at instantiation or at launch."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DefinitionError, OperandError
from .addresses import resolve_address

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["PARAM_GRAPH", "RESERVED_NAMES", "Param", "param_dtype"]

#: Keywords of ``Graph.instantiate``/``Graph.run`` that cannot name a parameter.
RESERVED_NAMES = frozenset({"upload_stream", "auto_free_on_launch", "device_launch", "use_node_priority", "stream"})

#: ``id()`` of the one live graph that has declared parameters, 0 while none has, -1 while several have.
#: While it is 0 or the building graph's, no kernel argument can be a parameter of another graph, so
#: :meth:`Graph.kernel` need not look at its arguments (looking costs ~150-200 ns of a ~800 ns 3-argument
#: kernel call in a chain-building loop on CPU; testing this gate is within the noise of that loop).
PARAM_GRAPH: list[int] = [0]

#: ``id()`` of each live graph that has declared parameters -> the finalizer that forgets it.
_LIVE: dict[int, Any] = {}


def _gate() -> None:
    PARAM_GRAPH[0] = 0 if not _LIVE else next(iter(_LIVE)) if len(_LIVE) == 1 else -1


def _forget(gid: int) -> None:
    _LIVE.pop(gid, None)
    _gate()


def _note_graph(graph: Any) -> None:
    """Count ``graph`` among the graphs holding parameters until it is collected (see :data:`PARAM_GRAPH`)."""
    gid = id(graph)
    if gid not in _LIVE:
        _LIVE[gid] = weakref.finalize(graph, _forget, gid)
        _gate()


#: numpy dtype kinds a scalar parameter may have (bool, signed, unsigned, float, complex, structured).
_SCALAR_KINDS = frozenset("biufcV")


def param_dtype(dtype: Any, name: Any) -> np.dtype[Any] | None:
    """The numpy dtype of parameter ``name`` (``None`` for a pointer), or the error naming it.

    Raises
    ------
    OperandError
        ``dtype`` is not a numpy dtype, or not one of a fixed-size scalar.
    """
    if dtype is None:
        return None
    try:
        dt: np.dtype[Any] = np.dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise OperandError(f"param {name!r}: dtype {dtype!r} is not a numpy dtype ({exc})") from None
    if dt.kind not in _SCALAR_KINDS or dt.itemsize == 0 or dt.hasobject:
        raise OperandError(
            f"param {name!r}: dtype {dt} cannot be a kernel scalar; use a numeric numpy dtype "
            "(np.int32, np.float32, ...) or None for a pointer"
        )
    return dt


class Param:
    """A named placeholder for a device pointer or a scalar.

    A parameter stands in for a kernel argument, a copy source or destination,
    or a fill destination, and receives its value when the graph is
    instantiated (``g.instantiate(x=buf)``). Create one with
    :meth:`cudagraph.Graph.param`.

    Attributes
    ----------
    name : str
        The name used as a keyword when binding.
    dtype : numpy.dtype or None
        ``None`` for a device pointer, else the scalar type.
    default : object
        The value used when none is bound (``None`` means required).
    graph : Graph
        The graph that owns the parameter.
    """

    __slots__ = ("name", "dtype", "default", "graph")

    def __init__(self, graph: Graph, name: str, dtype: Any = None, default: Any = None) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise DefinitionError(f"param name must be a Python identifier, got {name!r}")
        if name in RESERVED_NAMES:
            raise DefinitionError(f"param name {name!r} is reserved by Graph.instantiate(); choose another name")
        self.dtype = param_dtype(dtype, name)
        self.graph = graph
        self.name = name
        self.default = default
        _note_graph(graph)

    @property
    def is_pointer(self) -> bool:
        """``True`` when the parameter is a device pointer."""
        return self.dtype is None

    @property
    def nbytes(self) -> int:
        """The size of the value in bytes (8 for a pointer)."""
        return 8 if self.dtype is None else int(self.dtype.itemsize)

    def coerce(self, value: Any) -> Any:
        """Check a bound value and convert it to what the driver layer packs.

        Parameters
        ----------
        value : object
            For a pointer parameter: an ``int``, a ``cuda.core`` ``Buffer`` or an
            object with ``__cuda_array_interface__``; for a scalar parameter: a
            number, converted to :attr:`dtype`.

        Returns
        -------
        int or numpy.generic
            The address, or the scalar as a numpy scalar of :attr:`dtype`.

        Raises
        ------
        OperandError
            If the value has the wrong kind.
        """
        if self.dtype is None:
            if type(value) is Param:
                if value.dtype is not None:
                    raise OperandError(
                        f"param {self.name!r}: param {value.name!r} is a {value.dtype} scalar, expected a pointer param"
                    )
                raise OperandError(f"param {self.name!r}: a pointer value cannot be another param")
            ptr, _owner, _size = resolve_address(value, f"param {self.name!r}", allow_null=True)
            if not isinstance(ptr, int):  # an object only DLPack describes (a CPU tensor has no CUDA interface)
                raise OperandError(
                    f"param {self.name!r}: a {type(value).__name__} without __cuda_array_interface__ (host memory, "
                    "such as a CPU tensor, or an object only DLPack describes) cannot be bound to a pointer; bind "
                    "device memory: a CUDA tensor or array, a cuda.core Buffer or an int address"
                )
            return ptr
        if isinstance(value, (bool, np.bool_)) and self.dtype.kind != "b":
            raise OperandError(f"param {self.name!r}: expected {self.dtype}, got bool")
        out: Any = None
        failed: Exception | None = None
        if value is not None and not isinstance(value, (str, bytes)):  # (numpy reads None as NaN, parses strings)
            try:
                out = self.dtype.type(value)
            except Exception as exc:  # TypeError, ValueError, OverflowError, or a user __float__'s own
                failed = exc
        if type(out) is not self.dtype.type:  # (a sequence or an array of several gives an array)
            raise OperandError(
                f"param {self.name!r}: expected a {self.dtype} scalar, got {type(value).__name__}"
            ) from failed
        if isinstance(value, np.generic) and value.dtype.itemsize != self.dtype.itemsize:
            raise OperandError(
                f"param {self.name!r}: expected {self.dtype.itemsize}-byte {self.dtype}, "
                f"got {value.dtype.itemsize}-byte {value.dtype}"
            )
        return out

    def __repr__(self) -> str:
        kind = "pointer" if self.dtype is None else str(self.dtype)
        return f"<Param {self.name!r} {kind} of Graph {self.graph.name!r}>"
