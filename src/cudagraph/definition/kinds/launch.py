"""The launch attributes of a kernel node (GPU-free): :class:`LaunchAttrs`, what it signs for a comparison
of two definitions, and the checks of ``Graph.kernel``'s launch keywords (``cluster=``, ``cooperative=``,
``priority=``, ``programmatic=``, ``device=``, ``attributes=``)."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import CudaGraphError, DefinitionError, ForeignNodeError, OperandError
from ..devices import device_ordinal
from ..node import Node
from .launch_attributes import check_attributes

if TYPE_CHECKING:
    from .kernel import KernelNode

__all__ = [
    "MAX_CLUSTER_SIZE",
    "PLAIN_LAUNCH",
    "PORTABLE_CLUSTER_SIZE",
    "PRIORITY_RANGE",
    "PROGRAMMATIC_PORTS",
    "SMEM_DEFAULT_LIMIT",
    "SMEM_MAX",
    "LaunchAttrs",
    "check_cluster",
    "check_cooperative",
    "check_launch_attrs",
    "check_priority",
    "finish_launch_attrs",
    "launch_signature",
    "launch_values",
    "make_launch_attrs",
    "read_launch_value",
]


#: Dynamic shared memory above this many bytes needs the kernel attribute
#: ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` (48 KiB).
SMEM_DEFAULT_LIMIT = 48 * 1024
#: The most dynamic shared memory a launch can ask for: the driver's field is an unsigned 32-bit int
#: (the device's own limit, far lower, is checked when the graph is built).
SMEM_MAX = 2**32 - 1
#: The range of ``priority=`` (``CU_LAUNCH_ATTRIBUTE_PRIORITY`` is a C ``int``; the device clamps it
#: to its own range).
PRIORITY_RANGE = (-(2**31), 2**31 - 1)
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
    device : int or None
        The device ordinal whose primary context the node runs in (``None``: the current context).
    extra : tuple of (str, tuple)
        Other driver launch attributes, sorted by name, each with its non-default value
        (:mod:`cudagraph.definition.kinds.launch_attributes`).

    Notes
    -----
    Once a node holds a ``LaunchAttrs`` it is never changed in place: every edit (``update``, a new or removed
    programmatic edge) works on a :meth:`copy` and gives the node the copy. Nodes launched alike may therefore
    hold one object (a lift gives one to every node whose driver node read the same values).
    """

    __slots__ = ("cluster", "cooperative", "priority", "programmatic", "smem_optin", "device", "extra")

    def __init__(self) -> None:
        self.cluster: tuple[int, int, int] | None = None
        self.cooperative = False
        self.priority: int | None = None
        self.programmatic: list[tuple[Node, str]] = []
        self.smem_optin = False
        self.device: int | None = None
        self.extra: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    @property
    def empty(self) -> bool:
        """``True`` when no attribute is set (the node can drop its ``attrs``)."""
        return (
            self.cluster is None
            and not self.cooperative
            and self.priority is None
            and not self.programmatic
            and not self.smem_optin
            and self.device is None
            and not self.extra
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
        out.device = self.device
        out.extra = self.extra
        return out

    def signature(self) -> tuple[Any, ...]:
        """What the driver node holds of these attributes, comparable between two definitions.

        Programmatic edges by predecessor index and port: two nodes whose launches differ in any
        attribute or edge port have different signatures (an executable made for one is not the other's).
        """
        programmatic = self.programmatic
        return (
            self.cluster,
            self.cooperative,
            self.priority,
            tuple(sorted([(p.index, port) for p, port in programmatic])) if programmatic else (),
            self.device,
            self.extra,
        )

    #: The names of the fields of :meth:`signature`, in order.
    SIGNATURE_FIELDS = ("cluster", "cooperative", "priority", "programmatic", "device", "extra")

    def __eq__(self, other: object) -> bool:
        """The same launch: the same :meth:`signature` (and the same large shared memory opt-in)."""
        if type(other) is not LaunchAttrs:
            return NotImplemented
        return self is other or (self.smem_optin == other.smem_optin and self.signature() == other.signature())

    def __hash__(self) -> int:
        # (a node's attributes are replaced, never changed in place, once the node holds them)
        return hash((self.smem_optin, self.signature()))

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
        if self.device is not None:
            parts.append(f"@dev{self.device}")
        parts.extend(f"{name}={value[0] if len(value) == 1 else value}" for name, value in self.extra)
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"<LaunchAttrs {self.describe() or 'none'}>"


#: :meth:`LaunchAttrs.signature` of a launch without attributes: a node whose attributes sign so (only the large
#: shared memory opt-in, which follows ``shared_mem``) launches as a plain node does.
PLAIN_LAUNCH: tuple[Any, ...] = LaunchAttrs().signature()


def launch_signature(attrs: LaunchAttrs | None) -> tuple[Any, ...] | None:
    """``attrs.signature()``, or ``None`` for a plain launch (no attributes, or only the shared memory opt-in)."""
    if attrs is None:
        return None
    sig = attrs.signature()
    return None if sig == PLAIN_LAUNCH else sig


def check_cluster(value: Any, grid: tuple[int, int, int], what: str) -> tuple[int, int, int]:
    if isinstance(value, bool):
        raise OperandError(f"{what}: cluster must be an int or a tuple of up to 3 ints, got bool")
    if isinstance(value, (tuple, list)):
        try:
            items = list(value)  # (a subclass's __iter__ is user code: read once, then only the plain list)
        except Exception:
            raise OperandError(f"{what}: cluster could not be read as a tuple of ints") from None
        if not 1 <= len(items) <= 3:
            raise DefinitionError(f"{what}: cluster must have 1 to 3 dimensions, got {len(items)}")
    else:
        items = [value]
    try:
        dims = [operator.index(v) for v in items]
    except Exception:
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


def check_priority(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise OperandError(f"{what}: priority must be an int, got bool")
    try:
        p = operator.index(value)
    except Exception:
        raise OperandError(f"{what}: priority must be an int, got {type(value).__name__}") from None
    lo, hi = PRIORITY_RANGE
    if not lo <= p <= hi:
        raise DefinitionError(f"{what}: priority {p} is outside the driver's int range {lo}..{hi}")
    return p


def check_cooperative(value: Any, what: str) -> bool:
    if type(value) is bool:
        return value
    if isinstance(value, (int, np.integer, np.bool_)) and value in (0, 1):
        return bool(value)
    raise OperandError(f"{what}: cooperative must be a bool, got {type(value).__name__} {value!r}")


def _programmatic_choice(value: Any, what: str) -> Any:
    """``programmatic=`` as ``True``, ``False`` or a new plain list of nodes (which nodes, not yet whose)."""
    if value is True or value is False:
        return value
    if isinstance(value, Node):
        return [value]
    if isinstance(value, (list, tuple)):
        chosen = list(value)
        for v in chosen:
            if not isinstance(v, Node):
                raise OperandError(f"{what}: programmatic= must hold nodes, got {type(v).__name__}")
        return chosen
    raise OperandError(f"{what}: programmatic= must be True, a kernel node or a sequence of kernel nodes")


def _programmatic_nodes(graph: Any, node: KernelNode, value: Any, what: str) -> list[tuple[Node, str]]:
    """Resolve ``programmatic=``: True (every predecessor) or a node / nodes; adds missing edges."""
    value = _programmatic_choice(value, what)
    if value is True:
        chosen = list(node._preds)
        if not chosen:
            raise DefinitionError(f"{what}: programmatic=True needs predecessor kernels in after=")
    elif value is False:
        return []
    else:
        chosen = value
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
            node._preds.append(p)  # (the node is not in its graph yet: nothing else to record)
        out.append((p, "programmatic"))
    return out


def read_launch_value(keyword: str, what: str, check: Any, *args: Any) -> Any:
    """``check(*args)``, the value of launch keyword ``keyword``; an error that user code raised (a ``__index__``,
    ``__iter__``, ``__float__``, ``device_id`` ...) becomes an :class:`OperandError` naming the keyword."""
    try:
        return check(*args)
    except CudaGraphError:
        raise
    except Exception as exc:
        raise OperandError(f"{what}: {keyword}= could not be read ({type(exc).__name__} raised by its value)") from exc


def launch_values(
    cluster: Any,
    cooperative: Any,
    priority: Any,
    programmatic: Any,
    device: Any,
    attributes: Any,
    grid: tuple[int, int, int],
    shared_mem: int,
    what: str,
) -> tuple[LaunchAttrs, Any]:
    """The launch keywords of :meth:`Graph.kernel` checked and turned into plain values (ints, tuples, a list
    of nodes), reading nothing of the graph: the first half of :func:`make_launch_attrs`.

    Every piece of user code the values carry (``__index__``, ``__len__``, ``__iter__``, ``__float__``, a
    mapping's ``items``, a ``device_id``) runs here, so a builder calls this before it reads its graph
    (``after=``, the node count): a value that adds or removes nodes cannot leave the node at a stale index or
    after a removed node. Returns the attributes but for the programmatic edges, and ``programmatic=`` as
    ``None``, ``True``, ``False`` or a plain list of nodes, for :func:`finish_launch_attrs`.
    """
    a = LaunchAttrs()
    if cluster is not None:
        a.cluster = read_launch_value("cluster", what, check_cluster, cluster, grid, what)
    a.cooperative = read_launch_value("cooperative", what, check_cooperative, cooperative, what)
    if a.cooperative and a.cluster is not None:
        raise DefinitionError(f"{what}: a launch cannot be both cooperative and clustered")
    if priority is not None:
        a.priority = read_launch_value("priority", what, check_priority, priority, what)
    if programmatic is not None:
        programmatic = read_launch_value("programmatic", what, _programmatic_choice, programmatic, what)
    a.smem_optin = shared_mem > SMEM_DEFAULT_LIMIT
    if attributes is not None:
        a.extra = read_launch_value("attributes", what, check_attributes, attributes, what)
    if device is not None:
        a.device = read_launch_value("device", what, device_ordinal, device, what)
    return a, programmatic


def finish_launch_attrs(graph: Any, node: KernelNode, values: tuple[LaunchAttrs, Any], what: str) -> LaunchAttrs | None:
    """The node's attributes from :func:`launch_values`: resolves the programmatic edges (adding the missing
    ones to the node's predecessors) and counts a ``device=`` node. Runs no user code.

    Called after the node's dependencies are recorded, before it is appended to the graph.
    """
    a, programmatic = values
    if programmatic is not None:
        a.programmatic = _programmatic_nodes(graph, node, programmatic, what)
    if a.device is not None:
        graph._special += 1  # instantiate checks the ordinal before adding any node
    return None if a.empty else a


def make_launch_attrs(
    graph: Any,
    node: KernelNode,
    cluster: Any,
    cooperative: Any,
    priority: Any,
    programmatic: Any,
    what: str,
    device: Any = None,
    attributes: Any = None,
) -> LaunchAttrs | None:
    """Check the launch keywords of :meth:`Graph.kernel` and build the node's attributes.

    :func:`launch_values` then :func:`finish_launch_attrs`. Called after the node's dependencies are
    recorded (``programmatic=`` may add edges), before it is appended to the graph; a builder whose keywords
    may carry user code calls the two halves apart, the first before it reads the graph.
    """
    values = launch_values(
        cluster, cooperative, priority, programmatic, device, attributes, node.grid, node.shared_mem, what
    )
    return finish_launch_attrs(graph, node, values, what)


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
