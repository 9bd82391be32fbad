"""Symbolic parameters: values bound at instantiation or at launch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DefinitionError, OperandError
from .addresses import resolve_address

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["RESERVED_NAMES", "Param"]

#: Keywords of ``Graph.instantiate``/``Graph.run`` that cannot name a parameter.
RESERVED_NAMES = frozenset({"upload_stream", "auto_free_on_launch", "device_launch", "use_node_priority", "stream"})


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
        self.graph = graph
        self.name = name
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.default = default

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
            if not isinstance(ptr, int):
                raise OperandError(f"param {self.name!r}: a pointer value cannot be another param")
            return ptr
        if isinstance(value, (bool, np.bool_)) and self.dtype.kind != "b":
            raise OperandError(f"param {self.name!r}: expected {self.dtype}, got bool")
        try:
            out = self.dtype.type(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise OperandError(
                f"param {self.name!r}: expected a {self.dtype} scalar, got {type(value).__name__}"
            ) from exc
        if isinstance(value, np.generic) and value.dtype.itemsize != self.dtype.itemsize:
            raise OperandError(
                f"param {self.name!r}: expected {self.dtype.itemsize}-byte {self.dtype}, "
                f"got {value.dtype.itemsize}-byte {value.dtype}"
            )
        return out

    def __repr__(self) -> str:
        kind = "pointer" if self.dtype is None else str(self.dtype)
        return f"<Param {self.name!r} {kind} of Graph {self.graph.name!r}>"
