"""cudagraph: build CUDA graphs explicitly from Python.

A :class:`Graph` is a definition (nodes, parameters, edges) that needs no GPU.
``Graph.instantiate()`` builds it on the CUDA driver with ``cuGraphCreate`` +
``cuGraphAddNode`` and returns an :class:`Executable` to launch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import errors
from ._cache import ExecutableCache
from ._condition import CONDITIONAL_SNIPPET, Condition
from ._graph import Graph
from ._graph_memory import graph_memory_usage, trim_graph_memory
from ._nodes import (
    AllocNode,
    AllocOffset,
    BatchMemOpNode,
    ChildGraphNode,
    ConditionalNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    FreeNode,
    HostNode,
    IfElseNode,
    IfNode,
    KernelNode,
    Memcpy2DNode,
    Memcpy3DNode,
    MemcpyNode,
    MemsetNode,
    Node,
    SetConditionNode,
    SwitchNode,
    WaitValueNode,
    WhileNode,
    WriteValueNode,
)
from ._param import Param
from ._path import Path
from .errors import CudaGraphError

if TYPE_CHECKING:
    from ._capture_region import CaptureRegion, CaptureStream
    from ._exec_node import ExecutableNode
    from ._executable import Executable, UpdateResult
    from ._lift import lift
    from ._opaque import OpaqueNode

__version__ = "0.1.0"

__all__ = [
    "Graph",
    "Path",
    "Param",
    "Node",
    "KernelNode",
    "MemcpyNode",
    "MemsetNode",
    "HostNode",
    "EventRecordNode",
    "EventWaitNode",
    "ChildGraphNode",
    "EmptyNode",
    "Condition",
    "CONDITIONAL_SNIPPET",
    "ConditionalNode",
    "IfNode",
    "IfElseNode",
    "WhileNode",
    "SwitchNode",
    "SetConditionNode",
    "AllocNode",
    "AllocOffset",
    "FreeNode",
    "Memcpy2DNode",
    "Memcpy3DNode",
    "BatchMemOpNode",
    "WriteValueNode",
    "WaitValueNode",
    "trim_graph_memory",
    "graph_memory_usage",
    "Executable",
    "ExecutableCache",
    "ExecutableNode",
    "CaptureRegion",
    "CaptureStream",
    "OpaqueNode",
    "lift",
    "UpdateResult",
    "CudaGraphError",
    "errors",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # The executable layer imports cuda.bindings; load it only when asked.
    if name in ("Executable", "UpdateResult"):
        from . import _executable

        return getattr(_executable, name)
    if name == "ExecutableNode":
        from ._exec_node import ExecutableNode

        return ExecutableNode
    if name == "lift":
        from ._lift import lift

        return lift
    if name == "OpaqueNode":
        from ._opaque import OpaqueNode

        return OpaqueNode
    if name in ("CaptureRegion", "CaptureStream"):
        from . import _capture_region

        return getattr(_capture_region, name)
    raise AttributeError(f"module 'cudagraph' has no attribute {name!r}")
