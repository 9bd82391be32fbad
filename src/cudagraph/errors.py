"""The exceptions raised by cudagraph.

Every exception the library raises on purpose derives from
:class:`CudaGraphError`. The more specific classes also derive from the
built-in exception a Python programmer would expect (``TypeError`` for an
operand of the wrong kind, ``ValueError`` for a bad size, ``RuntimeError`` for
a driver failure), so ``except ValueError`` keeps working.

Messages name the node (``kernel#3 'saxpy'``), the argument and what was
expected, so that the error can be fixed without a debugger.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "UnwiredSeamError",
    "CudaGraphError",
    "DefinitionError",
    "CycleError",
    "ForeignNodeError",
    "NodeNotFoundError",
    "DuplicateEdgeError",
    "RaceError",
    "OperandError",
    "KernelArgumentError",
    "DriverError",
    "DriverUnavailableError",
    "UnsupportedError",
    "ExecutableClosedError",
    "StateError",
    "LiftMismatchError",
    "HostCallbackError",
    "MissingDependencyError",
]


class CudaGraphError(Exception):
    """Base class of every error raised by cudagraph."""


class DefinitionError(CudaGraphError, ValueError):
    """A graph definition is not valid (bad structure or bad sizes)."""


class CycleError(DefinitionError):
    """An edge would close a cycle.

    Attributes
    ----------
    cycle : list
        The nodes of the cycle in order; the first node is repeated at the end.
    """

    def __init__(self, message: str, cycle: Sequence[object]) -> None:
        super().__init__(message)
        self.cycle = list(cycle)


class ForeignNodeError(DefinitionError):
    """A node, edge or condition that belongs to another graph was used."""


class NodeNotFoundError(CudaGraphError, KeyError):
    """A node that is not a node of the executable it was looked up in (``exe[node]``, ``exe.driver_node``).

    A ``KeyError`` too, as for a look-up in a mapping; its message reads as written (not quoted).
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DuplicateEdgeError(DefinitionError):
    """The same dependency edge was given twice."""


class RaceError(DefinitionError):
    """Nodes conflict on memory with no path between them (``Graph.validate(races=True)``).

    Attributes
    ----------
    races : list of Race
        Every race found (:meth:`Graph.races <cudagraph.Graph.races>`).
    """

    def __init__(self, message: str, races: Sequence[object]) -> None:
        super().__init__(message)
        self.races = list(races)


class OperandError(CudaGraphError, TypeError):
    """An operand (pointer, value, event, callable, kernel) has the wrong kind."""


class KernelArgumentError(OperandError):
    """Kernel arguments do not match the kernel's real parameter layout.

    Attributes
    ----------
    kernel : str
        The kernel's name.
    index : int or None
        The parameter index at fault, if one is.
    expected : int or None
        The size in bytes (or the count) the kernel expects.
    given : int or None
        The size in bytes (or the count) that was given.
    """

    def __init__(
        self,
        message: str,
        kernel: str = "",
        index: int | None = None,
        expected: int | None = None,
        given: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kernel = kernel
        self.index = index
        self.expected = expected
        self.given = given


class DriverError(CudaGraphError, RuntimeError):
    """A CUDA driver call failed.

    Attributes
    ----------
    call : str
        The driver function, e.g. ``"cuGraphInstantiateWithParams"``.
    code : int
        The numeric ``CUresult``.
    name : str
        The symbolic name of the result, e.g. ``"CUDA_ERROR_INVALID_VALUE"``.
    node : object or None
        The definition node involved, where known.
    """

    def __init__(
        self,
        message: str,
        call: str = "",
        code: int = 0,
        name: str = "",
        node: object | None = None,
    ) -> None:
        super().__init__(message)
        self.call = call
        self.code = code
        self.name = name
        self.node = node


class DriverUnavailableError(DriverError):
    """No usable NVIDIA driver or GPU was found (or ``cuda-bindings`` is missing)."""


class UnsupportedError(DriverError):
    """The running driver or device does not support a requested feature."""


class LiftMismatchError(CudaGraphError):
    """A lifted definition, rebuilt, is not what the driver graph it was read from holds.

    Raised by ``cg.lift(obj, verify=True)`` and :func:`cudagraph.verify_lift`, naming the first node (or
    edge) that differs and what differs in it.
    """


class ExecutableClosedError(CudaGraphError):
    """An executable (or lowered graph) was used after ``close()``."""


class StateError(CudaGraphError, RuntimeError):
    """An object was asked for something its state does not allow (for example a ``cudagraph.compat``
    GraphBuilder that has not begun building, has ended or is closed); a ``RuntimeError`` too."""


class UnwiredSeamError(CudaGraphError):
    """A seam of the definition layer was called before anything was wired to it.

    ``import cudagraph`` wires every seam; this is raised only when the
    definition layer is used with the root package's wiring undone or skipped.
    """


class HostCallbackError(CudaGraphError):
    """A host callback node raised; the original exception is ``__cause__``.

    Attributes
    ----------
    node : object
        The host node whose callable raised.
    """

    def __init__(self, message: str, node: object) -> None:
        super().__init__(message)
        self.node = node


class MissingDependencyError(CudaGraphError, ImportError):
    """An optional package or program a feature needs (``graphviz``, ``matplotlib``) is not installed."""
