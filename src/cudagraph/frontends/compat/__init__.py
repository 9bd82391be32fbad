"""The implementation of :mod:`cudagraph.compat` (its public import path): cuda.core 1.2's graph API,
built explicitly.

``common`` (options, conditions, refusals, the one kernel add), ``definition`` (``GraphDefinition``
and ``GraphNode``, the builders), ``node_kinds`` (the typed node classes: read-back and ``update``),
``updates`` (cuda.core's update keywords in cudagraph's terms), ``exec_views`` (``exe[node]``), ``handles``
(driver handles), ``builder`` (``GraphBuilder``), ``entry`` (``Device`` and ``launch``). ``Graph``, cuda.core's
executable, is :class:`cudagraph.Executable`.
"""

from __future__ import annotations

from ...executable.executable import Executable as Graph
from .builder import GraphBuilder
from .common import GraphCompleteOptions, GraphCondition, GraphDebugPrintOptions
from .definition import GraphDefinition, GraphNode
from .entry import Device, launch
from .exec_views import (
    ExecutableChildGraphNode,
    ExecutableEventRecordNode,
    ExecutableEventWaitNode,
    ExecutableGraphNode,
    ExecutableHostCallbackNode,
    ExecutableKernelNode,
    ExecutableMemcpyNode,
    ExecutableMemsetNode,
)
from .node_kinds import (
    AllocNode,
    ChildGraphNode,
    ConditionalNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    FreeNode,
    HostCallbackNode,
    IfElseNode,
    IfNode,
    KernelNode,
    MemcpyNode,
    MemsetNode,
    SwitchNode,
    WhileNode,
)

__all__ = [
    "AllocNode",
    "ChildGraphNode",
    "ConditionalNode",
    "Device",
    "EmptyNode",
    "EventRecordNode",
    "EventWaitNode",
    "ExecutableChildGraphNode",
    "ExecutableEventRecordNode",
    "ExecutableEventWaitNode",
    "ExecutableGraphNode",
    "ExecutableHostCallbackNode",
    "ExecutableKernelNode",
    "ExecutableMemcpyNode",
    "ExecutableMemsetNode",
    "FreeNode",
    "Graph",
    "GraphBuilder",
    "GraphCompleteOptions",
    "GraphCondition",
    "GraphDebugPrintOptions",
    "GraphDefinition",
    "GraphNode",
    "HostCallbackNode",
    "IfElseNode",
    "IfNode",
    "KernelNode",
    "MemcpyNode",
    "MemsetNode",
    "SwitchNode",
    "WhileNode",
    "launch",
]
