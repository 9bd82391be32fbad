"""Host callbacks (GPU-free): :class:`HostNode` (a Python callable, :meth:`Graph.host <cudagraph.Graph.host>`)
and :class:`HostFunctionNode` (a C function ``void fn(void*)`` and its data pointer,
:meth:`Graph.host_function <cudagraph.Graph.host_function>`)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import DefinitionError, OperandError
from ..access import declare, keyword_regions
from ..core import After, GraphCore, builder
from ..node import Node

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = [
    "LOWEST_FUNCTION_ADDRESS",
    "HostBuilders",
    "HostFunctionNode",
    "HostNode",
    "function_address",
    "user_data_address",
]


class HostNode(Node):
    """A Python callable run on a host thread by the driver."""

    __slots__ = ("fn", "args")
    kind = "host"
    update_fields = ("fn", "args")
    dot_style = 'shape=hexagon style=filled fillcolor="#f8d7da"'
    mermaid_shape = ('{{"', '"}}')

    fn: Callable[..., Any]
    args: tuple[Any, ...]

    def describe(self) -> str:
        return f"{getattr(self.fn, '__qualname__', type(self.fn).__name__)}(+{len(self.args)} args)"

    def _check(self) -> bool:
        if not callable(self.fn):
            raise OperandError(f"{self.label}: fn is not callable")
        return False

    def _rebuild(self, scratch: Graph, values: dict[str, Any], changes: dict[str, Any]) -> Node:
        args = values["args"]
        if not isinstance(args, (tuple, list)):
            raise OperandError(f"{self.label}: args must be a tuple of arguments for fn, got {type(args).__name__}")
        return scratch.host(values["fn"], *args, name=self.name)


#: Code is never mapped below this address (Linux ``vm.mmap_min_addr`` is 64 KiB on most systems, Windows
#: reserves the first 64 KiB): a smaller "function address" is an integer passed by mistake.
LOWEST_FUNCTION_ADDRESS = 1 << 16


def function_address(fn: Any, what: str) -> int:
    """The address of a C host function: a ctypes function pointer (``CFUNCTYPE(None, c_void_p)``), a
    ``CUhostFn`` or an int."""
    if isinstance(fn, ctypes._CFuncPtr):  # type: ignore[attr-defined]
        address = ctypes.cast(fn, ctypes.c_void_p).value or 0
    elif type(fn).__name__ == "CUhostFn" or (isinstance(fn, int) and not isinstance(fn, bool)):
        address = int(fn)
    else:
        raise OperandError(
            f"{what}: fn must be a C function pointer (a ctypes CFUNCTYPE(None, c_void_p) object, a CUhostFn or an "
            f"int address), got {type(fn).__name__}"
        )
    if not 0 < address < 1 << 64:
        raise OperandError(f"{what}: fn: {address:#x} is not a function address")
    if address < LOWEST_FUNCTION_ADDRESS:
        # The driver would call it: a jump into the null page, which no loader maps (a segfault, not an error).
        raise OperandError(
            f"{what}: fn: {address:#x} is not a function address (below {LOWEST_FUNCTION_ADDRESS:#x}, the "
            "unmapped first 64 KiB)"
        )
    return address


def user_data_address(user_data: Any, what: str) -> tuple[int, Any]:
    """``(address, kept)`` of a host function's data: ``None`` (null), an int address (passed as is, owned by
    the caller) or a bytes-like object (copied: the copy, kept with the node, is what the function reads)."""
    if user_data is None:
        return 0, None
    if isinstance(user_data, int) and not isinstance(user_data, bool):
        if not 0 <= user_data < 1 << 64:
            raise OperandError(f"{what}: user_data: {user_data:#x} is not an address")
        return user_data, None
    try:
        raw = bytes(memoryview(user_data).cast("B"))
    except TypeError:
        raise OperandError(
            f"{what}: user_data must be None, an int address or a bytes-like object, got {type(user_data).__name__}"
        ) from None
    except (ValueError, BufferError) as e:  # a released memoryview, an exporter that refuses
        raise DefinitionError(f"{what}: user_data: the {type(user_data).__name__} cannot be read: {e}") from None
    copy = ctypes.create_string_buffer(raw, max(len(raw), 1))
    return ctypes.addressof(copy), copy


class HostFunctionNode(Node):
    """A C host function ``void fn(void* user_data)`` run on a host thread by the driver (no Python runs
    unless ``fn`` is a ctypes callback of Python code, which takes the GIL itself).

    Attributes
    ----------
    fn : ctypes function pointer, CUhostFn or int
        As given (a ctypes object is kept alive with the node).
    user_data : None, int or bytes-like
        As given.
    fn_address, data_address : int
        What the driver calls and passes (``data_address`` points at the node's own copy of bytes-like data).
    """

    __slots__ = ("fn", "user_data", "fn_address", "data_address", "_keep")
    kind = "host_fn"
    update_fields = ("fn", "user_data")
    dot_style = 'shape=hexagon style=filled fillcolor="#f8d7da"'
    mermaid_shape = ('{{"', '"}}')

    fn: Any
    user_data: Any
    fn_address: int
    data_address: int
    _keep: Any

    def describe(self) -> str:
        return f"fn={self.fn_address:#x} user_data={self.data_address:#x}"

    def _rebuild(self, scratch: Graph, values: dict[str, Any], changes: dict[str, Any]) -> Node:
        return scratch.host_function(values["fn"], values["user_data"], name=self.name)


class HostBuilders(GraphCore):
    """The host-callback builder of :class:`~cudagraph.Graph`."""

    __slots__ = ()

    @builder
    def host(
        self,
        fn: Callable[..., Any],
        *args: Any,
        reads: Any = None,
        writes: Any = None,
        after: After = None,
        name: str | None = None,
    ) -> HostNode:
        """Add a host node that calls ``fn(*args)`` on a driver thread.

        The callable must not call CUDA. If it raises, the exception is kept
        and raised as :class:`~cudagraph.errors.HostCallbackError` by the next
        ``launch`` or by ``Executable.check()``. Use ``functools.partial`` for
        keyword arguments.

        Parameters
        ----------
        fn : callable
            The function to run.
        *args
            Positional arguments, kept alive with the definition.
        reads, writes : memory or sequence of memory, optional
            What ``fn`` reads and writes: host or device memory, a parameter, or any other object (a
            Python list it fills), which stands for memory of its own (see :meth:`races`).
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label (defaults to the function's name).

        Returns
        -------
        HostNode
        """
        what = self._what("host", name)
        if not callable(fn):
            raise OperandError(f"{what}: fn must be callable, got {type(fn).__name__}")
        declared = keyword_regions(reads, writes, what) if reads is not None or writes is not None else ()
        node = HostNode.__new__(HostNode)
        node.fn, node.args = fn, args
        self._place(node, after, what, name or str(getattr(fn, "__name__", "host")))
        if declared:
            declare(self, node, declared)
        return node

    @builder
    def host_function(
        self,
        fn: Any,
        user_data: Any = None,
        *,
        reads: Any = None,
        writes: Any = None,
        after: After = None,
        name: str | None = None,
    ) -> HostFunctionNode:
        """Add a host node that calls the C function ``fn(user_data)`` on a driver thread (``CUhostFn``).

        No Python runs for a compiled function, so it can be given, and called, without the GIL; a ctypes
        callback of Python code takes the GIL itself (an exception it raises is printed by ctypes, not
        raised by a launch). The function must not call CUDA.

        Parameters
        ----------
        fn : ctypes function pointer, CUhostFn or int
            ``void fn(void*)``: a ``ctypes.CFUNCTYPE(None, ctypes.c_void_p)`` object (kept alive with the node),
            a ``cuda.bindings`` ``CUhostFn`` or an address.
        user_data : None, int or bytes-like, optional
            What ``fn`` receives: null, an address passed as is (the caller keeps it valid), or bytes copied
            into memory the node keeps.
        reads, writes : memory or sequence of memory, optional
            What ``fn`` reads and writes (as for :meth:`host`).
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label (defaults to the function's name, or ``"host_function"``).

        Returns
        -------
        HostFunctionNode

        Raises
        ------
        OperandError
            ``fn`` is no function pointer (an int below 64 KiB is none), or ``user_data`` is none of the above.
        DefinitionError
            ``user_data`` is a bytes-like object that cannot be read (a released ``memoryview``).
        """
        what = self._what("host_function", name)
        address = function_address(fn, what)
        data, kept = user_data_address(user_data, what)
        declared = keyword_regions(reads, writes, what) if reads is not None or writes is not None else ()
        node = HostFunctionNode.__new__(HostFunctionNode)
        node.fn, node.user_data, node.fn_address, node.data_address, node._keep = fn, user_data, address, data, kept
        self._place(node, after, what, name or str(getattr(fn, "__name__", "host_function")))
        if declared:
            declare(self, node, declared)
        return node
