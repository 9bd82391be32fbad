"""Kernel launch attributes of a definition: clusters, cooperative launch, priority,
programmatic dependent launch and large dynamic shared memory (GPU-free).

A :class:`~cudagraph.KernelNode` made without any of them has ``attrs = None``
and costs nothing more to build or to lower.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError, ForeignNodeError, OperandError
from .node import Node, parameter_slots, update_definition_node

if TYPE_CHECKING:
    from .kinds.kernel import KernelNode

__all__ = [
    "SMEM_DEFAULT_LIMIT",
    "MAX_CLUSTER_SIZE",
    "PORTABLE_CLUSTER_SIZE",
    "PROGRAMMATIC_PORTS",
    "LaunchAttrs",
    "check_launch_attrs",
    "make_launch_attrs",
    "update_kernel_node",
]

#: Dynamic shared memory above this many bytes needs the kernel attribute
#: ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` (48 KiB).
SMEM_DEFAULT_LIMIT = 48 * 1024
#: Blocks per cluster that every cluster-capable GPU supports.
PORTABLE_CLUSTER_SIZE = 8
#: The most blocks per cluster any GPU supports (non-portable sizes need a kernel attribute).
MAX_CLUSTER_SIZE = 16
#: ``programmatic=`` port names: ``"programmatic"`` lets the dependent kernel start once every
#: block of the primary has called ``cudaTriggerProgrammaticLaunchCompletion()`` (or exited);
#: ``"launch_order"`` once every block of the primary has started.
PROGRAMMATIC_PORTS = ("programmatic", "launch_order")


class LaunchAttrs:
    """The launch attributes of one kernel node.

    Attributes
    ----------
    cluster : tuple of 3 ints or None
        Thread-block cluster shape (``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION``).
    cooperative : bool
        Cooperative launch (``CU_LAUNCH_ATTRIBUTE_COOPERATIVE``): every block
        is resident at once, so a grid-wide barrier is safe.
    priority : int or None
        Node priority (``CU_LAUNCH_ATTRIBUTE_PRIORITY``); honoured when the
        executable is made with ``instantiate(use_node_priority=True)``.
    programmatic : list of (Node, str)
        Predecessor kernels whose edge to this node is programmatic, with the
        port (``"programmatic"`` or ``"launch_order"``).
    smem_optin : bool
        ``shared_mem`` exceeds 48 KiB: the kernel's maximum dynamic shared
        memory attribute is raised before the node is added.
    """

    __slots__ = ("cluster", "cooperative", "priority", "programmatic", "smem_optin")

    def __init__(self) -> None:
        self.cluster: tuple[int, int, int] | None = None
        self.cooperative = False
        self.priority: int | None = None
        self.programmatic: list[tuple[Node, str]] = []
        self.smem_optin = False

    @property
    def empty(self) -> bool:
        """``True`` when no attribute is set (the node can drop its ``attrs``)."""
        return (
            self.cluster is None
            and not self.cooperative
            and self.priority is None
            and not self.programmatic
            and not self.smem_optin
        )

    def port_of(self, pred: Node) -> str | None:
        """The programmatic port of the edge from ``pred``, or ``None`` for a normal edge."""
        for p, port in self.programmatic:
            if p is pred:
                return port
        return None

    def copy(self) -> LaunchAttrs:
        out = LaunchAttrs()
        out.cluster = self.cluster
        out.cooperative = self.cooperative
        out.priority = self.priority
        out.programmatic = list(self.programmatic)
        out.smem_optin = self.smem_optin
        return out

    def describe(self) -> str:
        parts = []
        if self.cluster is not None:
            parts.append(f"cluster={self.cluster}")
        if self.cooperative:
            parts.append("cooperative")
        if self.priority is not None:
            parts.append(f"priority={self.priority}")
        if self.programmatic:
            parts.append("programmatic<-" + ",".join(f"#{p.index}" for p, _ in self.programmatic))
        if self.smem_optin:
            parts.append("smem>48KiB")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"<LaunchAttrs {self.describe() or 'none'}>"


def _cluster(value: Any, grid: tuple[int, int, int], what: str) -> tuple[int, int, int]:
    if isinstance(value, bool):
        raise OperandError(f"{what}: cluster must be an int or a tuple of up to 3 ints, got bool")
    if isinstance(value, (tuple, list)):
        if not 1 <= len(value) <= 3:
            raise DefinitionError(f"{what}: cluster must have 1 to 3 dimensions, got {len(value)}")
        items = list(value)
    else:
        items = [value]
    try:
        dims = [operator.index(v) for v in items]
    except TypeError:
        raise OperandError(f"{what}: cluster must be an int or a tuple of up to 3 ints, got {value!r}") from None
    while len(dims) < 3:
        dims.append(1)
    for axis, d in enumerate(dims):
        if d <= 0:
            raise DefinitionError(f"{what}: cluster[{axis}] must be positive, got {d}")
        if grid[axis] % d:
            raise DefinitionError(
                f"{what}: grid[{axis}] = {grid[axis]} is not a multiple of cluster[{axis}] = {d}; "
                "the grid must be a whole number of clusters"
            )
    size = dims[0] * dims[1] * dims[2]
    if size > MAX_CLUSTER_SIZE:
        raise DefinitionError(
            f"{what}: cluster {tuple(dims)} has {size} blocks; the CUDA limit is {MAX_CLUSTER_SIZE} "
            f"({PORTABLE_CLUSTER_SIZE} portable)"
        )
    return (dims[0], dims[1], dims[2])


def _priority(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise OperandError(f"{what}: priority must be an int, got bool")
    try:
        return operator.index(value)
    except TypeError:
        raise OperandError(f"{what}: priority must be an int, got {type(value).__name__}") from None


def _programmatic_nodes(graph: Any, node: KernelNode, value: Any, what: str) -> list[tuple[Node, str]]:
    """Resolve ``programmatic=``: True (every predecessor) or a node / nodes; adds missing edges."""
    if value is True:
        chosen = list(node._preds)
        if not chosen:
            raise DefinitionError(f"{what}: programmatic=True needs predecessor kernels in after=")
    elif value is False:
        return []
    elif isinstance(value, Node):
        chosen = [value]
    elif isinstance(value, (list, tuple)):
        chosen = list(value)
        for v in chosen:
            if not isinstance(v, Node):
                raise OperandError(f"{what}: programmatic= must hold nodes, got {type(v).__name__}")
    else:
        raise OperandError(f"{what}: programmatic= must be True, a kernel node or a sequence of kernel nodes")
    out: list[tuple[Node, str]] = []
    for p in chosen:
        if p.graph is not graph:
            raise ForeignNodeError(f"{what}: programmatic= names {p.label} of Graph {p.graph.name!r}")
        if not p.programmatic_edges:
            raise DefinitionError(
                f"{what}: a programmatic edge must come from a kernel node; {p.label} is a {p.kind} node"
            )
        if any(q is p for q, _ in out):
            continue
        if not any(q is p for q in node._preds):
            graph._deps(p, what)
            node._preds.append(p)
            p._succs.append(node)
            graph._nedges += 1
        out.append((p, "programmatic"))
    return out


def make_launch_attrs(
    graph: Any,
    node: KernelNode,
    cluster: Any,
    cooperative: Any,
    priority: Any,
    programmatic: Any,
    what: str,
) -> LaunchAttrs | None:
    """Check the launch keywords of :meth:`Graph.kernel` and build the node's attributes.

    Called after the node's dependencies are recorded (``programmatic=``
    may add edges), before it is appended to the graph.
    """
    a = LaunchAttrs()
    if cluster is not None:
        a.cluster = _cluster(cluster, node.grid, what)
    if not isinstance(cooperative, (bool, int)) or (isinstance(cooperative, int) and cooperative not in (0, 1)):
        raise OperandError(f"{what}: cooperative must be a bool, got {cooperative!r}")
    a.cooperative = bool(cooperative)
    if a.cooperative and a.cluster is not None:
        raise DefinitionError(f"{what}: a launch cannot be both cooperative and clustered")
    if priority is not None:
        a.priority = _priority(priority, what)
    if programmatic is not None:
        a.programmatic = _programmatic_nodes(graph, node, programmatic, what)
    a.smem_optin = node.shared_mem > SMEM_DEFAULT_LIMIT
    return None if a.empty else a


def check_launch_attrs(node: KernelNode) -> None:
    """Launch attributes still agree with the node (programmatic edges, cluster shape)."""
    attrs = node.attrs
    for p, _port in attrs.programmatic:
        if not any(q is p for q in node._preds):
            raise DefinitionError(f"{node.label}: its programmatic edge from {p.label} is not an edge of the graph")
        if not p.programmatic_edges:
            raise DefinitionError(f"{node.label}: a programmatic edge must come from a kernel; {p.label} is not one")
    if attrs.cluster is not None:
        for axis, (g, c) in enumerate(zip(node.grid, attrs.cluster)):
            if g % c:
                raise DefinitionError(f"{node.label}: grid[{axis}] = {g} is not a multiple of cluster[{axis}] = {c}")


_LAUNCH_KEYWORDS = ("cluster", "cooperative", "priority")


def update_kernel_node(node: KernelNode, changes: dict[str, Any]) -> None:
    """``KernelNode.update``: the builder's keywords plus launch attributes, all or nothing."""
    launch = {k: changes.pop(k) for k in _LAUNCH_KEYWORDS if k in changes}
    old = node.attrs
    saved = {slot: getattr(node, slot) for slot in parameter_slots(type(node))}
    try:
        update_definition_node(node, changes)
        base = old.copy() if old is not None else LaunchAttrs()
        what = node.label
        if "cluster" in launch:
            base.cluster = None if launch["cluster"] is None else _cluster(launch["cluster"], node.grid, what)
        elif base.cluster is not None:
            base.cluster = _cluster(base.cluster, node.grid, what)
        if "cooperative" in launch:
            base.cooperative = bool(launch["cooperative"])
        if "priority" in launch:
            base.priority = None if launch["priority"] is None else _priority(launch["priority"], what)
        if base.cooperative and base.cluster is not None:
            raise DefinitionError(f"{what}: a launch cannot be both cooperative and clustered")
        base.programmatic = [(p, port) for p, port in base.programmatic if any(q is p for q in node._preds)]
        base.smem_optin = node.shared_mem > SMEM_DEFAULT_LIMIT
        node.attrs = None if base.empty else base
    except BaseException:
        for slot, value in saved.items():
            setattr(node, slot, value)
        raise
