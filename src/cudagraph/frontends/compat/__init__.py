"""The implementation of :mod:`cudagraph.compat` (its public import path): cuda.core 1.2's graph API,
built explicitly.

``common`` (options, conditions, refusals, the one kernel add), ``definition`` (``GraphDefinition``
and its nodes), ``builder`` (``GraphBuilder``), ``entry`` (``Device`` and ``launch``).
"""

from __future__ import annotations

from .builder import GraphBuilder
from .common import GraphCompleteOptions, GraphCondition, GraphDebugPrintOptions
from .definition import (
    AllocNode,
    ChildGraphNode,
    ConditionalNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    FreeNode,
    GraphDefinition,
    GraphNode,
    HostCallbackNode,
    IfElseNode,
    IfNode,
    KernelNode,
    MemcpyNode,
    MemsetNode,
    SwitchNode,
    WhileNode,
)
from .entry import Device, launch

__all__ = [
    "AllocNode",
    "ChildGraphNode",
    "ConditionalNode",
    "Device",
    "EmptyNode",
    "EventRecordNode",
    "EventWaitNode",
    "FreeNode",
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
