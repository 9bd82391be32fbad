"""Conditions of conditional nodes, and the CUDA snippet that sets them (GPU-free)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex

import numpy as np

from ..errors import DefinitionError

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["CONDITIONAL_SNIPPET", "PREDICATE_OPS", "PREDICATE_DTYPES", "Condition"]

#: Paste this into CUDA C++ source (NVRTC or nvcc) to set a condition from a kernel; no runtime
#: headers are needed. Pass the :class:`Condition` as the kernel argument of type
#: ``cudaGraphConditionalHandle`` and call ``cudaGraphSetConditional(handle, value)`` from one thread.
CONDITIONAL_SNIPPET = r"""
typedef __device_builtin__ unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                                      unsigned int value);
"""

#: Comparison operators of :meth:`Graph.set_condition`, with their code in the built-in kernels.
PREDICATE_OPS = {"<": 0, "<=": 1, ">": 2, ">=": 3, "==": 4, "!=": 5}

#: Scalar types :meth:`Graph.set_condition` reads, with the suffix of their built-in kernel.
PREDICATE_DTYPES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
}


class Condition:
    """The condition variable of conditional nodes (a ``CUgraphConditionalHandle`` once built).

    Made by :meth:`Graph.condition <cudagraph.Graph.condition>`. Pass it to
    :meth:`~cudagraph.Graph.if_`, :meth:`~cudagraph.Graph.if_else`,
    :meth:`~cudagraph.Graph.while_` or :meth:`~cudagraph.Graph.switch`, and set
    it on the GPU either with :meth:`~cudagraph.Graph.set_condition` (no device
    code) or from your own kernel: pass the condition as a kernel argument of
    type ``cudaGraphConditionalHandle`` (declared by
    :data:`~cudagraph.CONDITIONAL_SNIPPET`) and call
    ``cudaGraphSetConditional(handle, value)``.

    A condition belongs to the graph that declared it and drives exactly one
    conditional node, of that graph or of a conditional body inside it;
    kernels anywhere inside that graph may set it.

    Attributes
    ----------
    graph : Graph
        The graph that declared it.
    index : int
        Its position among the graph's conditions.
    name : str
        A label.
    default : int or None
        The value assigned at the start of every launch of the graph
        (``CU_GRAPH_COND_ASSIGN_DEFAULT``), or ``None`` for none.
    """

    __slots__ = ("graph", "index", "name", "default", "_nodes", "__weakref__")

    def __init__(self, graph: Graph, index: int, name: str, default: int | None) -> None:
        self.graph = graph
        self.index = index
        self.name = name
        self.default = default
        # The conditional nodes built on this condition.
        self._nodes: list[Any] = []

    @property
    def nodes(self) -> tuple[Any, ...]:
        """The conditional nodes that use this condition."""
        return tuple(self._nodes)

    @property
    def label(self) -> str:
        """``condition#index 'name'``, the form used in error messages."""
        return f"condition#{self.index} {self.name!r}"

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:  # (copy.copy reduces too: it is refused alike)
        raise DefinitionError(
            f"{self.label} cannot be pickled or copied (it belongs to Graph {self.graph.name!r}, and drives one "
            "conditional node); declare a condition with Graph.condition() instead"
        )

    def __repr__(self) -> str:
        d = "" if self.default is None else f" default={self.default}"
        return f"<Condition #{self.index} {self.name!r}{d} of Graph {self.graph.name!r}>"
