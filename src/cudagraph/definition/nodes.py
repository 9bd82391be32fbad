"""Node kinds of a graph definition (GPU-free): every node class, re-exported from its family module.

Each family of kinds lives in a module of :mod:`cudagraph.definition.kinds`
(node classes, spec, builders, checks); this module is the single place other
modules and layers import node classes from.
"""

from __future__ import annotations

from .kinds.conditionals import ConditionalNode, IfElseNode, IfNode, SetConditionNode, SwitchNode, WhileNode
from .kinds.copy import Memcpy2DNode, Memcpy3DNode, MemcpyNode
from .kinds.events import EventRecordNode, EventWaitNode
from .kinds.graph_memory import AllocNode, AllocOffset, FreeNode
from .kinds.host import HostFunctionNode, HostNode
from .kinds.kernel import KernelNode
from .kinds.memory_ops import WAIT_COMPARISONS as WAIT_COMPARISONS
from .kinds.memory_ops import WAIT_VALUE_FLUSH as WAIT_VALUE_FLUSH
from .kinds.memory_ops import (
    BatchMemOpNode,
    MemsetNode,
    WaitValueNode,
    WriteValueNode,
)
from .kinds.opaque import CapturedGraphNode, OpaqueNode
from .kinds.structure import ChildGraphNode, EmptyNode
from .node import Dim3 as Dim3
from .node import Node
from .node import _set_base as _set_base
from .node import _short as _short
from .node import parameter_slots as parameter_slots

__all__ = [
    "Node",
    "KernelNode",
    "MemcpyNode",
    "MemsetNode",
    "HostNode",
    "HostFunctionNode",
    "EventRecordNode",
    "EventWaitNode",
    "ChildGraphNode",
    "EmptyNode",
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
]

#: Every node class, the abstract bases (``ConditionalNode``, ``BatchMemOpNode``) and
#: :class:`~cudagraph.definition.kinds.opaque.OpaqueNode` included.
NODE_CLASSES: tuple[type[Node], ...] = (
    KernelNode,
    MemcpyNode,
    MemsetNode,
    HostNode,
    HostFunctionNode,
    EventRecordNode,
    EventWaitNode,
    ChildGraphNode,
    EmptyNode,
    ConditionalNode,
    IfNode,
    IfElseNode,
    WhileNode,
    SwitchNode,
    SetConditionNode,
    AllocNode,
    FreeNode,
    Memcpy3DNode,
    Memcpy2DNode,
    BatchMemOpNode,
    WriteValueNode,
    WaitValueNode,
    OpaqueNode,
    CapturedGraphNode,
)
