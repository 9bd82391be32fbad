"""cudagraph: build CUDA graphs explicitly from Python.

A :class:`Graph` is a definition (nodes, parameters, edges) that needs no GPU.
``Graph.instantiate()`` builds it on the CUDA driver with ``cuGraphCreate`` +
``cuGraphAddNode`` and returns an :class:`Executable` to launch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import errors
from .definition import seams as _seams
from .definition.access import In, InOut, Out
from .definition.condition import CONDITIONAL_SNIPPET, Condition
from .definition.graph import Graph
from .definition.nodes import (
    AllocNode,
    AllocOffset,
    BatchMemOpNode,
    ChildGraphNode,
    ConditionalNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    FreeNode,
    HostFunctionNode,
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
from .definition.param import Param
from .definition.parametrize import ParametrizeReport
from .definition.path import Path
from .definition.races import Race
from .errors import CudaGraphError
from .executable.cache import ExecutableCache

if TYPE_CHECKING:
    from . import compat
    from .definition.kinds.opaque import OpaqueNode
    from .driver.graph_memory import graph_memory_usage, trim_graph_memory
    from .executable.executable import Executable, UpdateResult
    from .executable.node_view import ExecutableNode
    from .executable.profile import ProfileResult
    from .frontends.launch import ForkedStream, fork, host, join, launch, memcpy, memset, record, wait
    from .materialize.capture_region import CaptureRegion, CaptureStream
    from .materialize.lift import lift, lift_exact
    from .materialize.lift_verify import verify_lift

# The definition layer reaches the layers above it only through its seams, wired here by module
# name: each module is imported on the first call, so importing cudagraph stays GPU-free.
_seams.instantiate.wire("cudagraph.executable.executable", "instantiate")
_seams.run.wire("cudagraph.materialize.eager", "run")
_seams.lift.wire("cudagraph.materialize.lift", "lift")
_seams.capture_region.wire("cudagraph.materialize.capture_region", "CaptureRegion")
_seams.capture_function.wire("cudagraph.materialize.capture_region", "capture_function")
_seams.profile.wire("cudagraph.executable.profile", "profile_graph")
_seams.kernel_info.wire("cudagraph.driver.kernel_args", "kernel_info")

__version__ = "0.1.0"

__all__ = [
    "Graph",
    "Path",
    "Param",
    "Node",
    "KernelNode",
    "MemcpyNode",
    "MemsetNode",
    "HostFunctionNode",
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
    "lift_exact",
    "verify_lift",
    "ParametrizeReport",
    "In",
    "Out",
    "InOut",
    "Race",
    "UpdateResult",
    "launch",
    "memcpy",
    "memset",
    "host",
    "record",
    "wait",
    "fork",
    "join",
    "ForkedStream",
    "compat",
    "ProfileResult",
    "CudaGraphError",
    "errors",
    "__version__",
]


def __dir__() -> list[str]:
    # The lazily loaded public names are listed too, before they are first used.
    return sorted(set(globals()) | set(__all__))


def __getattr__(name: str) -> Any:
    # The executable layer imports cuda.bindings; load it only when asked. The value is kept as a
    # module attribute: `cg.launch(...)` then costs one lookup, not this function and an import
    # statement (bench/cpu_overhead.py).
    value = _load(name)
    globals()[name] = value
    return value


def _load(name: str) -> Any:
    if name in ("Executable", "UpdateResult"):
        from .executable import executable as _executable

        return getattr(_executable, name)
    if name == "ProfileResult":
        from .executable.profile import ProfileResult

        return ProfileResult
    if name == "ExecutableNode":
        from .executable.node_view import ExecutableNode

        return ExecutableNode
    if name in ("lift", "lift_exact"):
        from .materialize import lift as _lift

        return getattr(_lift, name)
    if name == "verify_lift":
        from .materialize.lift_verify import verify_lift

        return verify_lift
    if name in ("graph_memory_usage", "trim_graph_memory"):
        from .driver import graph_memory

        return getattr(graph_memory, name)
    if name == "OpaqueNode":
        from .definition.kinds.opaque import OpaqueNode

        return OpaqueNode
    if name in ("CaptureRegion", "CaptureStream"):
        from .materialize import capture_region as _capture_region

        return getattr(_capture_region, name)
    if name == "compat":  # cuda.core's graph API (GraphDefinition, GraphBuilder), built explicitly
        import importlib

        return importlib.import_module(f"{__name__}.compat")
    if name in _LAUNCH_NAMES:
        from .frontends import launch as _launch

        return getattr(_launch, name)
    raise AttributeError(f"module 'cudagraph' has no attribute {name!r}")


# The free functions whose first argument is a stream, a stream under capture or a Path.
_LAUNCH_NAMES = frozenset({"launch", "memcpy", "memset", "host", "record", "wait", "fork", "join", "ForkedStream"})
