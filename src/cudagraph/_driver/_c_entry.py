"""Driver entry points called through ctypes, for the hot loops (adding and updating kernel nodes).

The ``cuda.bindings`` wrapper costs about 1.4 µs per call above the driver
itself (it converts the dependency list and the parameter object on every
call). Explicit construction adds thousands of kernel nodes that differ only in
a few fields of one prepared ``CUgraphNodeParams``; calling the exported C
entry point with that structure's address and a reused dependency array
removes most of that cost; the same holds for rebinding a kernel node of an
executable (``cuGraphExecKernelNodeSetParams_v2``). Where a symbol cannot be
found (an older driver, no ``libcuda.so.1``), :func:`c_function` returns
``None`` and the callers keep using ``cuda.bindings``. ``CUDAGRAPH_NO_C_ENTRY=1`` turns the
direct call off.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

__all__ = ["CAddNode", "c_add_node", "c_function"]


class CAddNode:
    """``cuGraphAddNode_v2(&out, graph, deps, NULL, n, params)`` with reused arguments.

    One instance serves one lowering of one driver graph (it is not shared
    between threads). The hot loop calls :attr:`fn` itself with the prepared
    arguments (``fn(out_ref, graph, deps, None, one, params)`` for a node with
    one dependency in ``deps[0]``); :meth:`add` handles any count.

    Attributes
    ----------
    fn : ctypes function
        The C entry point (returns the ``CUresult`` as an int).
    out : ctypes.c_void_p
        Receives the new node's handle; ``out_ref`` is its address.
    graph, params : ctypes.c_void_p
        The driver graph and the address of the ``CUgraphNodeParams``.
    deps : ctypes array of c_void_p
        The reused dependency array (at least 8 entries).
    one : ctypes.c_size_t
        The count 1.
    """

    __slots__ = ("fn", "graph", "params", "deps", "one", "_sizes", "out", "out_ref")

    def __init__(self, fn: Any, graph: int, params_address: int) -> None:
        self.fn = fn
        self.graph = ctypes.c_void_p(graph)
        self.params = ctypes.c_void_p(params_address)
        self.deps: Any = (ctypes.c_void_p * 8)()
        self._sizes = [ctypes.c_size_t(i) for i in range(9)]
        self.one = self._sizes[1]
        self.out = ctypes.c_void_p()
        self.out_ref = ctypes.byref(self.out)

    def add(self, deps: list[int]) -> int:
        """Add the prepared node after ``deps`` (raw node handles); return the CUresult as int.

        The new node's handle is then in :attr:`out`.
        """
        n = len(deps)
        if n == 0:
            return int(self.fn(self.out_ref, self.graph, None, None, self._sizes[0], self.params))
        if n > len(self.deps):
            self.deps = (ctypes.c_void_p * (2 * n))()
        self.deps[:n] = deps
        size = self._sizes[n] if n < len(self._sizes) else ctypes.c_size_t(n)
        return int(self.fn(self.out_ref, self.graph, self.deps, None, size, self.params))


_FUNCTIONS: dict[str, Any] = {}


def c_function(symbol: str) -> Any:
    """The driver's exported ``symbol`` as a ctypes function returning an int, or ``None``.

    Every argument must be passed as a ctypes object (or ``None``): no
    ``argtypes`` are set, so the call converts nothing by lookup.
    """
    if symbol in _FUNCTIONS:
        return _FUNCTIONS[symbol]
    fn = None
    if not os.environ.get("CUDAGRAPH_NO_C_ENTRY"):
        try:
            lib = ctypes.CDLL("libcuda.so.1")  # the library cuda.bindings already loaded
            fn = getattr(lib, symbol)
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
    _FUNCTIONS[symbol] = fn
    return fn


def c_add_node(graph: int, params_address: int) -> CAddNode | None:
    """A :class:`CAddNode` for driver graph ``graph`` and the parameters at ``params_address``.

    Returns ``None`` when the C entry point is unavailable.
    """
    fn = c_function("cuGraphAddNode_v2")
    return None if fn is None else CAddNode(fn, graph, params_address)
