"""The compiled :meth:`Graph.kernel <cudagraph.Graph.kernel>` (``cudagraph.definition._define``), when built.

The extension links nothing but Python (no driver: this is the definition layer). It builds the node of
the common call in C (exact types the Python method already accepted, interned 1-D sizes or 3-tuples,
no launch attribute, ``after=`` a node or distinct nodes of the graph) and hands every other call to the
Python method, :meth:`KernelBuilders.kernel <cudagraph.definition.kinds.kernel.KernelBuilders.kernel>`,
its twin (``COMPILED_KERNEL.func``, ``__wrapped__``), which also fills the tables the C side learns
from. ``CUDAGRAPH_NO_C_ENTRY=1``, or a build without the extension, leaves the Python method in place.

The same object's ``place`` places every other builder's node (twin: ``GraphCore._deps``, ``_set_base``
and ``_add``; installed as ``GraphCore._placer``) and its ``validate`` passes runs of plain kernel nodes
for :meth:`Graph.validate <cudagraph.Graph.validate>` (twin: ``Graph._validate_steps``, which checks the
nodes it hands back; installed as ``GraphCore._validator``).
"""

from __future__ import annotations

import functools
import importlib
import os
from types import MappingProxyType
from typing import Any, Final

from .core import NODE_CLASSES, GraphCore
from .dims import BLOCKS, DIMS_SEEN, GRIDS
from .free_threading import hand_written_c_refusal
from .kinds.kernel import KERNEL_TYPES_SEEN, KernelBuilders, KernelNode
from .node import Node
from .operands import ARG_BUFFER_TYPES, ARG_TENSOR_TYPES, ARG_TYPES_OK
from .param import Param

__all__ = ["DEFINE_SLOTS", "compiled_kernel", "define_module", "install_compiled_kernel"]

#: The ``__slots__`` the compiled method reads and writes, by role, in the order of its C structure
#: (``_define.h``): a node's base slots (:class:`~cudagraph.definition.node.Node`), a kernel node's own,
#: a graph's (:class:`~cudagraph.definition.core.GraphCore`).
DEFINE_SLOTS: Final[MappingProxyType[str, tuple[str, ...]]] = MappingProxyType(
    {
        "node": ("graph", "index", "name", "_preds"),
        "kernel_node": ("kernel", "grid", "block", "shared_mem", "args", "attrs"),
        "graph": ("_nodes", "_params", "_topo"),
        "param": ("name", "dtype"),
    }
)


def define_module() -> Any:
    """The extension ``cudagraph.definition._define``, or ``None`` when it is not built or
    ``CUDAGRAPH_NO_C_ENTRY`` is set (then every caller keeps its Python twin)."""
    if os.environ.get("CUDAGRAPH_NO_C_ENTRY") or hand_written_c_refusal() is not None:
        return None
    try:
        return importlib.import_module("cudagraph.definition._define")
    except ImportError:
        return None


def compiled_kernel(twin: Any) -> Any:
    """A compiled ``KernelMethod`` over ``twin`` (the Python method), or ``None`` without the extension."""
    module = define_module()
    if module is None:
        return None
    # The Python method's own tables, in the order of the C side's (S_KERNELS ... S_PARAM).
    sources = (
        KERNEL_TYPES_SEEN,
        ARG_TYPES_OK,
        ARG_BUFFER_TYPES,
        ARG_TENSOR_TYPES,
        NODE_CLASSES,
        GRIDS,
        BLOCKS,
        DIMS_SEEN,
        Param,
    )
    method = module.KernelMethod(twin, KernelNode, Node, GraphCore, dict(DEFINE_SLOTS), sources)
    functools.update_wrapper(method, twin)
    return method


def install_compiled_kernel() -> Any:
    """Make ``KernelBuilders.kernel`` the compiled method when it is built; returns it (or ``None``)."""
    current = KernelBuilders.__dict__["kernel"]
    twin = getattr(current, "func", current)  # installed once: a second call wraps the same Python method
    method = compiled_kernel(twin)
    if method is not None:
        setattr(KernelBuilders, "kernel", method)  # noqa: B010 - mypy knows the Python signature
    GraphCore._placer = None if method is None else method.place  # the other builders place their node in C
    GraphCore._validator = None if method is None else method.validate  # validate passes plain kernel nodes in C
    # Each new graph records its topology as nodes are placed in C (_define_topology.c: the signature at
    # N = 100,000 no longer walks the nodes).
    GraphCore._record_type = None if method is None else define_module().TopologyRecord
    return method
