"""Symbolic parameters: values bound at instantiation or at launch."""

from __future__ import annotations

import math
import operator
import weakref
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex

import numpy as np

from ..errors import DefinitionError, OperandError
from .addresses import resolve_address

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["PARAM_GRAPH", "RESERVED_NAMES", "SCALAR_CODES", "Param", "param_dtype"]

#: The other arguments of every method that takes parameter values as ``**params`` keywords (``name=value``),
#: with the methods naming them: a parameter of that name could not be bound through them. The one list;
#: ``tests/test_hardening_params_cpu.py`` checks it against the methods' signatures.
RESERVED_BY: dict[str, str] = {
    "self": "every method taking parameter values",
    "stream": "Graph.run, Graph.profile, Executable.launch",
    "repeats": "Graph.profile",
    "backend": "Graph.instantiate",
    "upload_stream": "Graph.instantiate",
    "auto_free_on_launch": "Graph.instantiate",
    "device_launch": "Graph.instantiate",
    "use_node_priority": "Graph.instantiate",
    "graph": "Executable.update, ExecutableCache.get",
    "reinstantiate_if_needed": "Executable.update",
    "_signature": "Executable.update",
}
#: Names that cannot name a parameter (see :data:`RESERVED_BY`).
RESERVED_NAMES = frozenset(RESERVED_BY)

#: ``(dtype kind, itemsize) -> struct code`` of every scalar type a parameter (and a numpy kernel argument packed
#: by a ``struct`` format) may have: bool, the signed and unsigned integers, the binary floats. The packers and
#: rebinding plans write a scalar parameter by this code, so a dtype without one is refused by :func:`param_dtype`.
SCALAR_CODES: dict[tuple[str, int], str] = {
    ("b", 1): "?",
    ("i", 1): "b",
    ("i", 2): "h",
    ("i", 4): "i",
    ("i", 8): "q",
    ("u", 1): "B",
    ("u", 2): "H",
    ("u", 4): "I",
    ("u", 8): "Q",
    ("f", 2): "e",
    ("f", 4): "f",
    ("f", 8): "d",
}

#: ``id()`` of the one live graph that has declared parameters, 0 while none has, -1 while several have.
#: While it is 0 or the building graph's, no kernel argument can be a parameter of another graph, so
#: :meth:`Graph.kernel` need not look at its arguments (bench/construction.py --cpu: define; testing this gate
#: is within the noise of that loop).
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


def param_dtype(dtype: Any, name: Any) -> np.dtype[Any] | None:
    """The numpy dtype of parameter ``name`` (``None`` for a pointer), or the error naming it.

    A scalar parameter is a bool, a signed or unsigned integer of 1, 2, 4 or 8 bytes or a float of 2, 4 or 8
    bytes (:data:`SCALAR_CODES`), in the machine's byte order (a non-native one is taken as the native dtype:
    the device reads little-endian values). Complex, structured, ``longdouble`` and the other dtypes are refused:
    pass such a value as a literal kernel argument (a numpy scalar, or ``bytes`` for a struct).

    Raises
    ------
    OperandError
        ``dtype`` is not a numpy dtype, or not one a scalar parameter may have.
    """
    if dtype is None:
        return None
    try:
        dt: np.dtype[Any] = np.dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise OperandError(f"param {name!r}: dtype {dtype!r} is not a numpy dtype ({exc})") from None
    if (dt.kind, dt.itemsize) not in SCALAR_CODES or dt.fields is not None or dt.subdtype is not None:
        raise OperandError(
            f"param {name!r}: dtype {dt} cannot be a scalar parameter; use bool, an integer of 1, 2, 4 or 8 bytes "
            "or a float of 2, 4 or 8 bytes (np.int32, np.float32, ...), or None for a pointer (a complex or "
            "structured value can be a literal kernel argument: a numpy scalar, or bytes for a struct)"
        )
    if not dt.isnative:
        dt = dt.newbyteorder("=")
    return dt


def _bounds(dt: np.dtype[Any]) -> tuple[int, int, float, float, bool]:
    """``(least int, greatest int, least float, greatest float, integral)``: the Python ``int`` and ``float``
    values that a scalar parameter of dtype ``dt`` takes exactly (a float's rounding aside), and whether a float
    must be integral. The bounds are compared in Python, so that what is refused does not hang on numpy's
    version (numpy 1.24 wraps ``np.uint32(-1)`` and ``np.uint32(2**40)``, numpy 2 refuses them)."""
    if dt.kind == "f":
        top = float(np.finfo(dt).max)  # (exact in a Python float for float16, float32 and float64)
        return -int(top), int(top), -top, top, False
    if dt.kind == "b":
        return 0, 1, 0.0, 1.0, True
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)
    flo, fhi = float(lo), float(hi)  # (powers of two, or 0: exact for the least)
    if fhi > hi:  # the greatest float not above hi (2**63 - 1 and 2**64 - 1 are not floats)
        fhi = math.nextafter(fhi, 0.0)
    return lo, hi, flo, fhi, True


def _equal(a: Any, b: float) -> bool:
    """Whether ``a == b`` (``False`` where asking raises)."""
    try:
        return bool(a == b)
    except Exception:
        return False


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

    __slots__ = ("name", "dtype", "default", "graph", "_type", "_lo", "_hi", "_flo", "_fhi", "_integral")

    def __init__(self, graph: Graph, name: str, dtype: Any = None, default: Any = None) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise DefinitionError(f"param name must be a Python identifier, got {name!r}")
        if name in RESERVED_NAMES:
            raise DefinitionError(
                f"param name {name!r} is reserved: an argument of that name is taken, beside the parameter values "
                f"given as keywords, by {RESERVED_BY[name]}; choose another name (reserved: "
                f"{', '.join(sorted(RESERVED_NAMES))})"
            )
        dt = self.dtype = param_dtype(dtype, name)
        self.name = name
        self._type: Any = None
        if dt is not None:
            self._type = dt.type
            self._lo, self._hi, self._flo, self._fhi, self._integral = _bounds(dt)
        if default is not None:  # refused now rather than at instantiate
            try:
                self.coerce(default)
            except OperandError as exc:
                said = str(exc).removeprefix(f"param {name!r}: ")
                raise OperandError(f"param {name!r}: bad default {default!r}: {said}") from None
        self.graph = graph
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
            number that :attr:`dtype` holds, converted to it (a float is rounded
            to a float dtype, never truncated to an integer one).

        Returns
        -------
        int or numpy.generic
            The address, or the scalar as a numpy scalar of :attr:`dtype`.

        Raises
        ------
        OperandError
            If the value has the wrong kind, or the dtype does not hold it: a
            float that is not an integer for an integer dtype, a value out of the
            dtype's range (a finite value that would become an infinity included),
            a numpy scalar of another size.
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
        t = type(value)
        if t is self._type:  # a numpy scalar of the dtype: as it is
            return value
        if t is int:
            if self._lo <= value <= self._hi:
                return self._type(value)
        elif t is float:
            if self._flo <= value <= self._fhi and (not self._integral or value.is_integer()):
                return self._type(value)
        return self._coerce_scalar(value)

    def _coerce_scalar(self, value: Any) -> Any:
        """:meth:`coerce` of a scalar parameter, in full: every kind of value, and the errors."""
        dt = self.dtype
        assert dt is not None
        name = self.name
        v = value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value  # a 0-d array: its scalar
        if isinstance(v, (bool, np.bool_)):
            if dt.kind != "b":
                raise OperandError(f"param {name!r}: expected {dt}, got bool")
            return self._type(v)
        if (
            v is None
            or isinstance(v, (str, bytes, np.ndarray))  # (numpy reads None as NaN, parses strings)
            or (isinstance(v, np.generic) and v.dtype.kind not in "iuf")  # (a complex value would lose a part)
        ):
            raise OperandError(f"param {name!r}: expected a {dt} scalar, got {type(value).__name__}")
        if isinstance(value, np.generic) and value.dtype.itemsize != dt.itemsize:
            raise OperandError(
                f"param {name!r}: expected {dt.itemsize}-byte {dt}, got {value.dtype.itemsize}-byte {value.dtype}"
            )
        number: int | float
        try:
            number = operator.index(v)  # an integer, exactly (numpy's, a 0-d array's, a tensor's)
        except TypeError:
            try:
                number = float(v)
            except Exception as exc:  # TypeError, ValueError, or a user __float__'s own
                raise OperandError(f"param {name!r}: expected a {dt} scalar, got {type(value).__name__}") from exc
        if type(number) is float:
            finite = math.isfinite(number)
            if self._integral and not (finite and number.is_integer()):
                raise OperandError(
                    f"param {name!r}: {value!r} is not an integer; dtype {dt} takes integers only (a value is never "
                    "truncated: round it first, e.g. int(round(x)))"
                )
            if not finite and (math.isnan(number) or _equal(v, number)):
                return self._type(number)  # (an infinity or a NaN given stays one)
            ok = finite and self._flo <= number <= self._fhi  # (a finite value read as an infinity: too large)
            if self._integral:
                number = int(number)
        else:
            ok = self._lo <= number <= self._hi
        if not ok:
            span = f"{self._lo}..{self._hi}" if self._integral else f"finite {self._flo!r}..{self._fhi!r}"
            raise OperandError(f"param {name!r}: {value!r} is out of the range of {dt} ({span})")
        return self._type(number)

    def __repr__(self) -> str:
        kind = "pointer" if self.dtype is None else str(self.dtype)
        return f"<Param {self.name!r} {kind} of Graph {self.graph.name!r}>"

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        raise DefinitionError(
            f"param {self.name!r} of Graph {self.graph.name!r} cannot be pickled (it stands for a value bound to "
            "that graph's executables in this process)"
        )

    def __copy__(self) -> Param:
        return self  # (a parameter is its graph's: a copy is the same parameter)

    def __deepcopy__(self, memo: Any) -> Param:
        return self
