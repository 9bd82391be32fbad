"""What both halves of ``cudagraph.compat`` share: the option classes, conditions, refusals, the one
kernel add, instantiation and the dot writer."""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import operator
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ...definition.condition import Condition
from ...definition.core import check_size
from ...definition.drawing import check_path
from ...definition.graph import Graph
from ...definition.node import Node
from ...driver.calls import require_driver
from ...errors import DefinitionError, ForeignNodeError, OperandError, StateError
from ...executable.executable import instantiate as instantiate_executable
from ..launch import _config, _kernel
from .lifetimes import AllocAddress, check_open_buffers, operand, record_addresses
from .packing import pack_graph

#: Kernels the definition layer takes as they are (the rest go through ``_kernel``: foreign kernels
#: converted, wrong kinds refused).
DRIVER_KERNEL_TYPES = frozenset({"Kernel", "CUkernel", "CUfunction"})

__all__ = [
    "SizeOverflow",
    "copy_size",
    "refuse_edge_removal",
    "DRIVER_KERNEL_TYPES",
    "DestroyedRefusal",
    "DriverRefusal",
    "ForeignDriverRefusal",
    "GraphCompleteOptions",
    "GraphCondition",
    "GraphDebugPrintOptions",
    "add_kernel",
    "add_callback",
    "add_conditional",
    "check_python_callback",
    "core_str_enum",
    "is_c_function",
    "condition_of",
    "instantiate",
    "kernel_args",
    "node_type",
    "unsupported",
    "write_dot",
]


@dataclasses.dataclass
class GraphCompleteOptions:
    """Instantiation options, as in cuda.core (``auto_free_on_launch``, ``upload_stream``,
    ``device_launch``, ``use_node_priority``): a dataclass as cuda.core's, compared by value."""

    auto_free_on_launch: bool = False
    upload_stream: Any = None
    device_launch: bool = False
    use_node_priority: bool = False


_OPTION_FIELDS = tuple(f.name for f in dataclasses.fields(GraphCompleteOptions))


def _cuda_core_error() -> tuple[type[BaseException], ...]:
    """cuda.core's ``CUDAError`` as a base class when cuda.core is installed (the class its graph API raises where
    the driver refuses a call), else nothing."""
    try:
        from cuda.core._utils.cuda_utils import CUDAError
    except Exception:  # no cuda.core, or one that keeps the class elsewhere: the refusals stay ValueErrors
        return ()
    return (CUDAError,)


#: The refusals of what cuda.core leaves to the driver (an edge to itself or to a destroyed node; a switch of no
#: branch; a condition of another graph; freeing address 0): cuda.core raises its ``CUDAError`` there. compat
#: refuses before the driver sees the graph, with a :class:`~cudagraph.errors.DefinitionError` (a ``ValueError``)
#: that is also cuda.core's ``CUDAError`` when cuda.core is installed, so that ``except CUDAError`` in a ported
#: program still catches it.
DriverRefusal: type[DefinitionError] = type(
    "DriverRefusal",
    (DefinitionError, *_cuda_core_error()),
    {
        "__module__": __name__,
        "__doc__": "A graph edit cuda.core leaves to the driver, which refuses it (a DefinitionError, and cuda.core's "
        "CUDAError when cuda.core is installed).",
    },
)
#: :data:`DriverRefusal` for a node or condition of another definition (also a ForeignNodeError). cuda.core refuses
#: an edge to another definition's node itself, with a ``ValueError``: this class is one too.
ForeignDriverRefusal: type[DefinitionError] = type(
    "ForeignDriverRefusal",
    (DriverRefusal, ForeignNodeError),
    {"__module__": __name__, "__doc__": "A node or condition of another definition (a DriverRefusal)."},
)


#: An edge to or from a destroyed node: cuda.core 1.2 raises ``RuntimeError("GraphNode has been destroyed")``. This
#: refusal is that :class:`~cudagraph.errors.StateError` and a :data:`DriverRefusal` too (a ``ValueError``, and
#: cuda.core's ``CUDAError``), so that a program catching what other cuda.core versions raise catches it as well.
DestroyedRefusal: type[StateError] = type(
    "DestroyedRefusal",
    (StateError, DriverRefusal),
    {"__module__": __name__, "__doc__": "An edge to or from a destroyed node (a StateError and a DriverRefusal)."},
)


#: A number outside the C type cuda.core converts it to (a negative ``size_t``, a fill byte above 255): cuda.core's
#: ``OverflowError``, and an :class:`~cudagraph.errors.OperandError`.
SizeOverflow: type[OperandError] = type(
    "SizeOverflow",
    (OperandError, OverflowError),
    {
        "__module__": __name__,
        "__doc__": "A number its C type cannot hold, where cuda.core converts it (OverflowError).",
    },
)


def refuse_edge_removal(g: Graph, what: str) -> None:
    """Refuse to remove an edge of ``g`` where the driver refuses it (:data:`DriverRefusal`, cuda.core's
    ``CUDAError``): its graph holds an allocation or a free node (``cuGraphRemoveDependencies`` and
    ``cuGraphDestroyNode`` of a connected node return an error there), checked before anything changes."""
    if any(n.kind in ("alloc", "free", "captured") for n in g._nodes):  # (a recording with graph memory too)
        raise DriverRefusal(
            f"{what}: the driver removes no edge from a graph that holds allocation or free nodes "
            "(cuda.core: the driver's CUDAError); nothing was changed"
        )


def copy_size(call: str, size: Any) -> int:
    """A copy's ``size`` as cuda.core takes its ``size_t``: a negative one is :data:`SizeOverflow`, else
    :func:`~cudagraph.definition.core.check_size`'s answer (no integer, 0)."""
    if isinstance(size, int) and not isinstance(size, bool) and size < 0:
        raise SizeOverflow(f"compat {call}: size: a size_t cannot hold {size}")
    return check_size(size, f"compat {call}", "size")


@functools.cache
def _core_enum(name: str) -> Any:
    try:
        from cuda.core import typing as core_typing

        return getattr(core_typing, name)
    except Exception:  # no cuda.core, or one without the enum: plain strings
        return None


def core_str_enum(name: str, value: str) -> str:
    """``value`` as a member of cuda.core's string enum ``cuda.core.typing.<name>`` (a ``str`` that equals
    ``value``) where cuda.core has it, else ``value`` itself."""
    enum = _core_enum(name)
    return value if enum is None else enum(value)  # type: ignore[no-any-return]


@dataclasses.dataclass
class GraphDebugPrintOptions:
    """The flags of cuda.core's ``debug_dot_print`` (the driver's ``CU_GRAPH_DEBUG_DOT_FLAGS_*``).

    Taken as cuda.core takes them; cudagraph writes its own dot (:meth:`cudagraph.Graph.to_dot`, every
    node's kind, label and parameters), whatever flags are set. ``Executable.debug_dot`` writes the
    driver's view.
    """

    verbose: bool = False
    runtime_types: bool = False
    kernel_node_params: bool = False
    memcpy_node_params: bool = False
    memset_node_params: bool = False
    host_node_params: bool = False
    event_node_params: bool = False
    ext_semas_signal_node_params: bool = False
    ext_semas_wait_node_params: bool = False
    kernel_node_attributes: bool = False
    handles: bool = False
    mem_alloc_node_params: bool = False
    mem_free_node_params: bool = False
    batch_mem_op_node_params: bool = False
    extra_topo_info: bool = False
    conditional_node_params: bool = False


_DOT_FLAGS = tuple(f.name for f in dataclasses.fields(GraphDebugPrintOptions))


class GraphCondition:
    """A condition variable (``create_condition``); pass it (or its ``handle``) to the kernel that sets it."""

    __slots__ = ("condition",)

    def __init__(self, condition: Condition) -> None:
        self.condition = condition

    @property
    def handle(self) -> Condition:
        """The condition as a kernel argument (its driver handle is made when the graph is built)."""
        return self.condition

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GraphCondition) and other.condition is self.condition

    def __hash__(self) -> int:
        return hash(id(self.condition))

    def __repr__(self) -> str:
        return f"<GraphCondition {self.condition.name!r}>"


#: node kind -> the ``CUgraphNodeType`` member its driver node has (an opaque node names its own).
_NODE_TYPES = {
    "kernel": "KERNEL",
    "set_condition": "KERNEL",
    "empty": "EMPTY",
    "memset": "MEMSET",
    "memcpy": "MEMCPY",
    "memcpy2d": "MEMCPY",
    "memcpy3d": "MEMCPY",
    "alloc": "MEM_ALLOC",
    "free": "MEM_FREE",
    "child": "GRAPH",
    "captured": "GRAPH",
    "record": "EVENT_RECORD",
    "wait": "WAIT_EVENT",
    "host": "HOST",
    "host_fn": "HOST",
    "if": "CONDITIONAL",
    "if_else": "CONDITIONAL",
    "while": "CONDITIONAL",
    "switch": "CONDITIONAL",
    "write_value": "BATCH_MEM_OP",
    "wait_value": "BATCH_MEM_OP",
}


def node_type(node: Node) -> Any:
    """The ``CUgraphNodeType`` of the driver node that ``node`` becomes."""
    if node.kind == "opaque":  # (a node lifted from a driver graph names its type)
        name = str(node.driver_type)  # type: ignore[attr-defined]
    else:
        name = f"CU_GRAPH_NODE_TYPE_{_NODE_TYPES[node.kind]}"
    return getattr(require_driver().CUgraphNodeType, name)


def unsupported(call: str, arg: str, why: str) -> OperandError:
    """The refusal of a cuda.core signature this layer does not support."""
    return OperandError(f"compat {call}: {arg}: {why} (not supported by cudagraph.compat)")


#: What cuda.core makes of an argument cudagraph does not take as it is: a condition wrapper its condition, a
#: Python float a double, a complex a double complex (``Graph.kernel`` refuses a Python float as ambiguous), a
#: Python bool the int 0 or 1 (sized by the parameter before the driver sees it: :mod:`.packing`).
_CONVERTED: dict[type, Callable[[Any], Any]] = {
    GraphCondition: lambda a: a.condition,
    float: np.float64,
    complex: np.complex128,
    bool: int,
    AllocAddress: operand,
}


#: :data:`_CONVERTED` for a launch on a stream, which runs now: an allocation's ``dptr`` is its address.
_CONVERTED_NOW: dict[type, Callable[[Any], Any]] = {**_CONVERTED, AllocAddress: int}


def kernel_args(args: tuple[Any, ...], now: bool = False) -> tuple[Any, ...]:
    """``args`` as cuda.core passes them: each :class:`GraphCondition` replaced by its condition, each Python
    ``float`` by a ``np.float64`` and ``complex`` by a ``np.complex128`` (a double, a double complex), each
    ``bool`` by the ``int`` 0 or 1 (:mod:`.packing` gives it the parameter's size, as a Python ``int``), each
    allocation's ``dptr`` (:class:`~.lifetimes.AllocAddress`) by its allocation, or with ``now`` (a launch on a
    stream) by its address."""
    table = _CONVERTED_NOW if now else _CONVERTED
    for a in args:  # a plain loop: any() over a generator cost as much as the rest of launch()
        if type(a) in table:
            return tuple(table[type(a)](a) if type(a) in table else a for a in args)
    return args


def condition_of(call: str, condition: Any) -> Condition:
    """The condition of a :class:`GraphCondition`, or the refusal naming ``call``."""
    if type(condition) is not GraphCondition:
        raise OperandError(
            f"compat {call}: condition: expected a GraphCondition from create_condition(), "
            f"got {type(condition).__name__}"
        )
    return condition.condition


def add_conditional(call: str, add: Callable[..., Node], condition: Any, *args: Any, **kwargs: Any) -> Node:
    """``add(condition, *args, **kwargs)`` (a conditional builder of a Graph or a Path) with the
    :class:`GraphCondition` ``condition``: a condition of another graph is a :data:`ForeignDriverRefusal`, a switch
    of no case a :data:`DriverRefusal`, as the driver refuses them under cuda.core."""
    cond = condition_of(call, condition)
    if call.endswith(".switch") and args:
        try:
            count = operator.index(args[0])
        except TypeError:
            count = None  # (the core names the wrong kind)
        if count is not None and not isinstance(args[0], bool) and count < 1:
            raise DriverRefusal(f"compat {call}: count: a switch needs at least one case, got {count}")
    try:
        return add(cond, *args, **kwargs)
    except ForeignNodeError as exc:
        raise ForeignDriverRefusal(f"compat {call}: condition: {exc}") from exc


def add_kernel(g: Graph, after: Any, config: Any, kernel: Any, args: tuple[Any, ...], call: str) -> Node:
    """Add ``kernel(*args)`` launched with the cuda.core ``config`` to ``g`` after ``after``.

    ``after`` is ``None``, one node or a list of nodes. ``programmatic_stream_serialization`` makes
    the edge from a single kernel predecessor programmatic, as cuda.core's launch does.
    """
    c = _config(config, call)
    if type(kernel).__name__ in DRIVER_KERNEL_TYPES:
        k, a = kernel, kernel_args(args)
    else:
        k, a = _kernel(kernel, kernel_args(args), call)
    if c.cluster is None and not c.cooperative and not c.pdl:
        # Only the keywords that differ from the defaults: fewer keywords for the compiled Graph.kernel to
        # match (bench/compat.py: GraphBuilder build).
        if c.smem:
            return g.kernel(k, c.grid, c.block, a, shared_mem=c.smem, after=after)  # type: ignore[no-any-return]
        return g.kernel(k, c.grid, c.block, a, after=after)  # type: ignore[no-any-return]
    programmatic = True if c.pdl and type(after) is not list and after is not None and after.kind == "kernel" else None
    return g.kernel(  # type: ignore[no-any-return]
        k,
        c.grid,
        c.block,
        a,
        shared_mem=c.smem,
        cluster=c.cluster,
        cooperative=c.cooperative,
        programmatic=programmatic,
        after=after,
    )


def is_c_function(fn: Any) -> bool:
    """Whether ``fn`` is a C function pointer (a ctypes function or a ``CUhostFn``): a host function node."""
    return isinstance(fn, ctypes._CFuncPtr) or type(fn).__name__ == "CUhostFn"  # type: ignore[attr-defined]


def check_python_callback(call: str, fn: Any, user_data: Any) -> None:
    """Refuse what a Python callback cannot take: ``user_data`` (cuda.core: ``ValueError``), a non-callable."""
    if user_data is not None:
        raise DefinitionError(
            f"user_data is only supported with a ctypes function pointer, not a Python callable (compat {call})"
        )
    if not callable(fn):
        raise OperandError(
            f"compat {call}: fn: expected a Python callable or a ctypes function pointer, got {type(fn).__name__}"
        )


def add_callback(target: Any, fn: Any, user_data: Any, call: str, **after: Any) -> Node:
    """cuda.core's ``callback(fn, user_data=...)`` on ``target`` (a Graph or a Path): a C function pointer
    becomes a :class:`~cudagraph.HostFunctionNode` of ``fn`` and ``user_data``, a Python callable a
    :class:`~cudagraph.HostNode`."""
    if is_c_function(fn):
        return target.host_function(fn, user_data, **after)  # type: ignore[no-any-return]
    check_python_callback(call, fn, user_data)
    return target.host(fn, **after)  # type: ignore[no-any-return]


def instantiate(g: Graph, options: Any) -> Any:
    """Build ``g`` explicitly and instantiate it with cuda.core's ``GraphCompleteOptions`` (or ours).

    The kernel arguments are packed as cuda.core packs them first (:func:`~.packing.pack_graph`); an allocation
    with no free node is accepted, as cuda.core accepts it (see the comment below).
    """
    o = options if options is not None else GraphCompleteOptions()
    if not all(hasattr(o, f) for f in _OPTION_FIELDS):  # cuda.core's own has the same fields
        raise OperandError(
            "compat instantiate: options must be a GraphCompleteOptions (cuda.core's or compat's), "
            f"got {type(o).__name__}"
        )
    flags = {f: getattr(o, f) for f in ("auto_free_on_launch", "device_launch", "use_node_priority")}
    for flag, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise OperandError(f"compat instantiate: options.{flag} must be a bool, got {type(value).__name__}")
    pack_graph(g)
    check_open_buffers(g)
    # Not Graph.instantiate: it refuses an allocation no free node releases, which cuda.core (and the driver)
    # accept: the memory outlives the launch, and launching again before it is freed is refused by the driver
    # (CUDA_ERROR_INVALID_VALUE, a DriverError) unless auto_free_on_launch is set.
    exe = instantiate_executable(g, upload_stream=o.upload_stream, params={}, **flags)
    lowered = getattr(exe, "_lowered", None)
    if lowered is not None:  # (AllocNode.dptr: the addresses of this build)
        record_addresses(lowered.state)
    return exe


def write_dot(g: Graph, path: Any, options: Any, call: str) -> None:
    """Write ``g`` in Graphviz dot to ``path`` (a str, bytes or path-like, as cuda.core takes it).

    ``options`` is a :class:`GraphDebugPrintOptions` (cuda.core's or compat's) or ``None``; its flags choose what
    the driver's dot would show, and cudagraph's dot shows the nodes' parameters whatever they are.
    """
    if isinstance(path, (bytes, bytearray)):
        if b"\0" in path:
            raise OperandError(f"compat {call}: path: a file name has no NUL byte, got {bytes(path)!r}")
        path = os.fsdecode(bytes(path))
    check_path(path, f"{call}: path")
    if options is not None and not all(hasattr(options, f) for f in _DOT_FLAGS):
        raise OperandError(
            f"options must be a GraphDebugPrintOptions (compat {call}: options: got {type(options).__name__})"
        )
    with open(path, "w") as f:
        f.write(g.to_dot())
