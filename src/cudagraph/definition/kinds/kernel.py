"""Kernel launches: :class:`KernelNode`, :meth:`Graph.kernel <cudagraph.Graph.kernel>`, their launch
attributes (clusters, cooperative launch, priority, programmatic dependent launch, large dynamic shared
memory) and their checks (GPU-free).

A :class:`~cudagraph.KernelNode` made without any launch attribute has ``attrs = None``
and costs nothing more to build or to lower.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import CudaGraphError, DefinitionError, OperandError
from ..access import ACCESS_TYPES, declare, keyword_regions, split_args
from ..condition import Condition
from ..core import NODE_CLASSES as _NODE_CLASSES
from ..core import After, DimLike, GraphCore, builder
from ..devices import device_ordinal
from ..dims import BLOCKS as _BLOCKS
from ..dims import GRIDS as _GRIDS
from ..dims import MAX_BLOCK, MAX_GRID, dim3, dim_tuple, known_dims, remember_dims
from ..edits import before_edit
from ..node import Dim3, Node, graph_address, parameter_slots, update_definition_node
from ..operands import (
    ARG_BUFFER_TYPES,
    ARG_TENSOR_TYPES,
    ARG_TYPES_OK,
    check_kernel_arg,
    kernel_args_pass,
    normalize_kernel_args,
)
from ..param import PARAM_GRAPH, Param
from .launch import (
    MAX_CLUSTER_SIZE,
    PLAIN_LAUNCH,
    PORTABLE_CLUSTER_SIZE,
    PRIORITY_RANGE,
    PROGRAMMATIC_PORTS,
    SMEM_DEFAULT_LIMIT,
    SMEM_MAX,
    LaunchAttrs,
    check_cluster,
    check_cooperative,
    check_launch_attrs,
    check_priority,
    finish_launch_attrs,
    launch_signature,
    launch_values,
    make_launch_attrs,
    read_launch_value,
)
from .launch_attributes import check_attributes

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = [
    "KERNEL_TYPES_SEEN",
    "KERNEL_TYPES_VALID",
    "MAX_CLUSTER_SIZE",
    "PORTABLE_CLUSTER_SIZE",
    "PROGRAMMATIC_PORTS",
    "PRIORITY_RANGE",
    "SMEM_DEFAULT_LIMIT",
    "SMEM_MAX",
    "KernelBuilders",
    "LAUNCH_KEYWORDS",
    "PLAIN_LAUNCH",
    "KernelNode",
    "LaunchAttrs",
    "check_launch_attrs",
    "launch_signature",
    "make_launch_attrs",
    "placeholder_args",
    "plain_kernel_passes",
    "update_kernel_node",
]

_KERNEL_TYPES = ("CUkernel", "CUfunction", "CUDADispatcher", "RawKernel", "Function")  # + Numba, CuPy kernels
#: Kernel types already accepted (by type name, or a cuda.core type): the hot path of ``Graph.kernel``
#: tests membership only, and its compiled twin (``cudagraph.definition._define``) reads this same set.
#: Filled as types are seen (bench/define_tricks.py).
KERNEL_TYPES_SEEN: set[type] = set()
# Argument types every value of which passes check_kernel_arg (one set lookup each on the hot path).
_ARG_TYPES_OK = ARG_TYPES_OK
# Buffer types: an object of one is accepted when its is_device_accessible is True.
_ARG_BUFFER_TYPES = ARG_BUFFER_TYPES
_ARG_TENSOR_TYPES = ARG_TENSOR_TYPES
_new = object.__new__  # the hot path sets every slot itself: no Node.__init__ call


def _check_kernel(kernel: Any, what: str) -> None:
    tname = type(kernel).__name__
    if tname in _KERNEL_TYPES:
        return
    handle = getattr(kernel, "handle", None)
    if handle is not None and type(handle).__name__ in _KERNEL_TYPES:
        return
    raise OperandError(f"{what}: expected a cuda.core Kernel or a CUkernel/CUfunction handle, got {tname}")


#: Kernel types whose every object _check_kernel accepts (by type name), or that it does not check (``Kernel``).
KERNEL_TYPES_VALID: set[type] = set()


def plain_kernel_passes(node: KernelNode, seen: set[int]) -> bool:
    """Whether :meth:`KernelNode._check` passes for ``node``, a node without launch attributes, answered
    without building a message (``seen``: see :func:`~cudagraph.definition.operands.kernel_args_pass`).

    ``True`` only when it passes (and the node needs no whole-tree checks); ``False``: ``_check`` decides.
    :meth:`Graph.validate <cudagraph.Graph.validate>` asks this first (bench/construction.py --cpu: validate).
    """
    kernel = node.kernel
    t = type(kernel)
    if t not in KERNEL_TYPES_VALID:
        if t.__name__ != "Kernel" and t.__name__ not in _KERNEL_TYPES:
            return False
        KERNEL_TYPES_VALID.add(t)
    return kernel_args_pass(node.args, seen)


#: A stand-in address for an operand that has none yet (checks only need its kind and size).
_PLACEHOLDER = 1 << 16


def placeholder_args(args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """``args`` with conditions and allocations replaced by placeholder ints, or ``None`` if it has none."""
    out = None
    for i, a in enumerate(args):
        if type(a) is Condition or graph_address(a):
            if out is None:
                out = list(args)
            out[i] = _PLACEHOLDER
    return None if out is None else tuple(out)


class KernelNode(Node):
    """A kernel launch.

    Attributes
    ----------
    kernel : object
        A ``cuda.core`` ``Kernel`` or a raw ``CUkernel``/``CUfunction``.
    grid, block : tuple of 3 ints
        Launch dimensions.
    shared_mem : int
        Dynamic shared memory in bytes.
    args : tuple
        The arguments as given (checked by ``validate()`` and at
        instantiation).
    """

    __slots__ = ("kernel", "grid", "block", "shared_mem", "args", "attrs")
    kind = "kernel"
    toggleable = True
    arg_fields = ("args",)
    in_conditional_body = True
    programmatic_edges = True
    update_fields = ("kernel", "grid", "block", "args", "shared_mem")
    dot_style = 'shape=box style="rounded,filled" fillcolor="#cfe2ff"'
    mermaid_shape = ('["', '"]')

    kernel: Any
    grid: Dim3
    block: Dim3
    shared_mem: int
    args: tuple[Any, ...]
    #: Launch attributes (:class:`~cudagraph.definition.kinds.kernel.LaunchAttrs`), ``None`` for a plain launch.
    attrs: Any

    @property
    def device(self) -> int | None:
        """The device ordinal given with ``device=`` (kept in ``attrs``; ``None``: the current context's)."""
        return None if self.attrs is None else self.attrs.device  # type: ignore[no-any-return]

    def describe(self) -> str:
        g, b = self.grid, self.block
        text = f"grid={g} block={b} smem={self.shared_mem} args={len(self.args)}"
        if self.attrs is not None:
            text += " " + self.attrs.describe()
        return text

    def update(self, **changes: Any) -> Node:
        """Change the launch in the definition; returns ``self``.

        Takes the keywords of :meth:`Graph.kernel <cudagraph.Graph.kernel>`
        (``args=``, ``grid=``, ``block=``, ``shared_mem=``, ``kernel=``) and
        its launch attributes (``cluster=``, ``cooperative=``, ``priority=``, ``device=``, ``attributes=``;
        ``attributes=`` replaces the node's other driver attributes as a whole, ``None`` clears them).
        Attributes not named are kept.
        """
        update_kernel_node(self, changes)
        return self

    def _check(self) -> bool:
        _check_kernel(self.kernel, self.label) if type(self.kernel).__name__ != "Kernel" else None
        try:
            normalize_kernel_args(self.args, self.label)
        except OperandError:
            plain = placeholder_args(self.args)
            if plain is None:
                raise
            normalize_kernel_args(plain, self.label)
            special = True
        else:
            special = False
        if self.attrs is not None:
            check_launch_attrs(self)
        return special

    def _rebuild(self, scratch: Graph, values: dict[str, Any], changes: dict[str, Any]) -> Node:
        new = scratch.kernel(
            values["kernel"],
            values["grid"],
            values["block"],
            values["args"],
            shared_mem=values["shared_mem"],
            name=self.name,
        )
        # Launch attributes (cluster, cooperative, priority, programmatic edges) are kept.
        new.attrs = self.attrs
        if self.attrs is not None:
            scratch._attributed = True
        return new


class KernelBuilders(GraphCore):
    """The kernel builder of :class:`~cudagraph.Graph`."""

    __slots__ = ()

    @builder
    def kernel(
        self,
        kernel: Any,
        grid: DimLike,
        block: DimLike,
        args: Sequence[Any] = (),
        *,
        shared_mem: int = 0,
        cluster: DimLike | None = None,
        cooperative: bool = False,
        priority: int | None = None,
        programmatic: bool | Node | Sequence[Node] | None = None,
        device: Any = None,
        attributes: Mapping[str, Any] | None = None,
        reads: Any = None,
        writes: Any = None,
        after: After = None,
        name: str | None = None,
    ) -> KernelNode:
        """Add a kernel launch.

        Parameters
        ----------
        kernel : cuda.core.Kernel or CUkernel or CUfunction
            The kernel to launch.
        grid, block : int or tuple of up to 3 ints
            Grid and block dimensions.
        args : tuple
            Kernel arguments: numpy scalars, ctypes scalars or structures,
            ``bytes`` for by-value structs, ints (pointers), ``cuda.core``
            ``Buffer`` objects, objects with ``__cuda_array_interface__`` or
            ``__dlpack__``, and :class:`~cudagraph.Param`. Arguments that can
            never be right are refused here: Python ``float``, ``bool`` and
            ``None``, and host memory the GPU cannot read (numpy arrays, DLPack
            objects on the CPU, Buffers whose ``is_device_accessible`` is
            false; pinned and managed memory are fine). The rest is stored as
            given and checked by :meth:`validate` and at instantiation, against
            the kernel's real parameter layout.
        shared_mem : int
            Dynamic shared memory in bytes (below 2**32). Above 48 KiB the kernel's
            ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` is raised for
            it when the graph is built.
        cluster : int or tuple of up to 3 ints, optional
            Thread-block cluster shape (``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION``);
            the grid must be a whole number of clusters (compute capability 9.0+).
        cooperative : bool
            Cooperative launch: every block is resident at once, so grid-wide
            synchronization is safe. The driver refuses grids too large to be
            co-resident.
        priority : int, optional
            Node priority (a C ``int``), honoured with ``instantiate(use_node_priority=True)``.
        programmatic : True, KernelNode or sequence of KernelNode, optional
            Programmatic dependent launch: the edges from these predecessor
            kernels (``True``: from every node in ``after``) become
            programmatic, so this kernel may start before they finish; it
            must call ``cudaGridDependencySynchronize()`` (PTX
            ``griddepcontrol.wait``) before reading their results. Nodes not
            in ``after`` are added as dependencies.
        device : cuda.core.Device or int, optional
            The device to run on: the node gets that device's primary context (``None``: the current
            context); a ``CUfunction`` runs in its own. An ordinal the driver lacks is refused at instantiation.
        attributes : mapping, optional
            Other driver launch attributes, by name: ``cluster_scheduling_policy``, ``mem_sync_domain``,
            ``mem_sync_domain_map`` (default, remote), ``preferred_cluster`` (x, y, z),
            ``preferred_shared_memory_carveout``, ``access_policy_window`` (base_ptr, num_bytes, hit_ratio,
            hit_prop, miss_prop), ``device_updatable``, ``nvlink_util_centric_scheduling``,
            ``portable_cluster_size_mode``, ``shared_memory_mode`` (see
            :mod:`cudagraph.definition.kinds.launch_attributes`). Each is set on the node with
            ``cuGraphKernelNodeSetAttribute``; the driver refuses values it does not take, naming the node.
        reads, writes : memory or sequence of memory, optional
            Memory the kernel reads or writes besides its wrapped arguments (an argument wrapped as
            :class:`~cudagraph.In`, :class:`~cudagraph.Out` or :class:`~cudagraph.InOut` is passed as the
            value it wraps and declares that access): see :meth:`races` and ``Graph(edges="auto")``.
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label (defaults to ``"kernel"``).

        Returns
        -------
        KernelNode

        Raises
        ------
        OperandError
            The kernel or an argument has the wrong kind.
        DefinitionError
            Bad dimensions or shared memory size.
        ForeignNodeError, DuplicateEdgeError
            Bad ``after=``.
        """
        # Hot path: a type test, a dict lookup or an identity test per argument;
        # anything unusual (and every error message) goes through _kernel_field.
        if name is not None and type(name) is not str:
            name = self._kernel_field("name", name, None)
        if type(kernel) not in KERNEL_TYPES_SEEN:
            _check_kernel(kernel, self._what("kernel", name))
            if type(kernel).__name__ in _KERNEL_TYPES or type(kernel).__module__.startswith("cuda.core"):
                KERNEL_TYPES_SEEN.add(type(kernel))
        # Both tables hold only valid sizes, so a hit needs no range check.
        g = _GRIDS.get(grid) if type(grid) is int else None
        if g is None:
            g = self._kernel_field("grid", grid, name)
        b = _BLOCKS.get(block) if type(block) is int else None
        if b is None:
            b = self._kernel_field("block", block, name)
        if type(shared_mem) is not int or shared_mem:  # (a non-int first: its truth may raise)
            shared_mem = self._kernel_field("shared_mem", shared_mem, name)
        declared = None
        if type(args) is not tuple:
            args, declared = self._kernel_args(args, reads, writes, name)
        else:
            # One set lookup per argument; a type not seen yet (or memory whose
            # location is per object: Buffers, tensors) is checked by _kernel_field.
            # (Its cost is part of define in bench/define_tricks.py.)
            ok = _ARG_TYPES_OK
            for a in args:
                t = type(a)
                if t in ok:
                    continue
                if t in _ARG_BUFFER_TYPES:
                    try:
                        if a.is_device_accessible is True:
                            continue
                    except Exception:
                        pass  # _kernel_field names the argument
                elif t in _ARG_TENSOR_TYPES and a.is_cuda is True:  # (a CPU tensor: _kernel_field refuses it)
                    continue
                args, declared = self._kernel_args(args, reads, writes, name)
                break
        if declared is None and (reads is not None or writes is not None):
            args, declared = self._kernel_args(args, reads, writes, name)
        if PARAM_GRAPH[0] and PARAM_GRAPH[0] != id(self):  # a parameter of another graph may be among args
            for a in args:
                if type(a) is Param:
                    self._kernel_params(args, name)  # type: ignore[arg-type]  # a tuple here
                    break
        # Launch keywords are read before the graph is (after=, the node count): the user code they may carry
        # (an __index__, an __iter__, a mapping's items) may add or remove nodes.
        if (
            cluster is None
            and priority is None
            and programmatic is None
            and cooperative is False
            and device is None
            and attributes is None
            and shared_mem <= 49152
        ):
            launch = None
        else:
            launch = self._launch_values(
                g, shared_mem, (cluster, cooperative, priority, programmatic, device, attributes), name
            )
        nodes = self._nodes
        node = _new(KernelNode)
        if after is None:
            node._preds = []
        elif type(after) in _NODE_CLASSES and after.graph is self:  # type: ignore[union-attr]
            node._preds = [after]  # type: ignore[list-item]
        else:
            # A list or tuple of this graph's nodes is taken with no message built (bench/construction.py
            # --cpu, user-style chain: every fourth node has two dependencies).
            deps = self._dep_list(after)
            if deps is None:
                deps = self._deps(after, self._what("kernel", name))
            node._preds = deps
        node.graph = self  # type: ignore[assignment]  # every GraphCore is a Graph
        node.index = i = len(nodes)
        node.name = name or "kernel"
        node.kernel = kernel
        node.grid = g
        node.block = b
        node.shared_mem = shared_mem
        node.args = args  # type: ignore[assignment]
        if launch is None:
            node.attrs = None
        else:
            node.attrs = self._launch_attrs(node, launch, name)
        nodes.append(node)
        if nodes[i] is not node:  # another thread added a node meanwhile: take its position (a cheap test)
            node.index = nodes.index(node, i)
        if declared:
            declare(self, node, declared)
        if node.attrs is None:
            if self._topo is not None:
                self._record(node)
        else:
            self._topo = None  # the record holds no launch attributes: the signature reads the nodes
            self._attributed = True
        return node

    def _kernel_args(self, args: Any, reads: Any, writes: Any, name: str | None) -> tuple[Any, Any]:
        """The checked arguments (accesses unwrapped) and the regions declared by them and by ``reads=`` /
        ``writes=`` (see :mod:`~cudagraph.definition.access`)."""
        regions: tuple[Any, ...] = ()
        if type(args) in (list, tuple) and any(type(a) in ACCESS_TYPES for a in args):
            args, regions = split_args(tuple(args), self._what("kernel", name))
        args = self._kernel_field("args", args, name)
        if reads is not None or writes is not None:
            regions += keyword_regions(reads, writes, self._what("kernel", name))
        return args, regions

    def _kernel_field(self, field: str, value: Any, name: str | None) -> Any:
        """The checked value of a :meth:`kernel` argument the hot path did not take (or the error).

        An error the value's own code raises (a ``__len__``, ``__iter__``, ``__index__``, comparison or hash)
        is an :class:`OperandError` naming the argument.
        """
        try:
            return self._kernel_value(field, value, name)
        except CudaGraphError:
            raise
        except Exception as exc:
            what = self._what("kernel", name if field != "name" else None)
            raise OperandError(f"{what}: {field} could not be read ({type(exc).__name__} raised by its value)") from exc

    def _kernel_value(self, field: str, value: Any, name: str | None) -> Any:
        seen = known_dims(field, value)
        if seen is not None:
            return seen
        what = self._what("kernel", name)
        if field == "grid":
            if type(value) is int and 0 < value <= MAX_GRID[0]:
                return dim_tuple(value)
            g = dim3(value, f"{what}: grid", MAX_GRID)
            return remember_dims(field, value, dim_tuple(g[0]) if g[1] == g[2] == 1 else g)
        if field == "block":
            b = dim3(value, f"{what}: block", MAX_BLOCK)
            if b[0] * b[1] * b[2] > 1024:
                raise DefinitionError(f"{what}: block {b} has {b[0] * b[1] * b[2]} threads; the CUDA limit is 1024")
            return remember_dims(field, value, _BLOCKS.get(b[0], b) if b[1] == b[2] == 1 else b)
        if field == "shared_mem":
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise DefinitionError(f"{what}: shared_mem must be a non-negative int, got {value!r}")
            if value > SMEM_MAX:
                raise DefinitionError(
                    f"{what}: shared_mem = {value} bytes does not fit the driver's 32-bit field (at most {SMEM_MAX})"
                )
            return int(value)
        if field == "name":
            if isinstance(value, str):  # a str subclass (np.str_), as every other builder takes
                return str(value)
            raise OperandError(f"{what}: name must be a str, got {type(value).__name__}")
        if not isinstance(value, (list, tuple)):
            raise OperandError(f"{what}: args must be a tuple of kernel arguments, got {type(value).__name__}")
        args = tuple(value)
        for i, a in enumerate(args):
            t = type(a)
            if t in _ARG_TYPES_OK:
                continue
            if t is Condition or graph_address(a):
                _ARG_TYPES_OK.add(t)
                continue
            check_kernel_arg(a, i, what)
        return args

    def _launch_values(
        self, grid: Any, shared_mem: int, keywords: tuple[Any, Any, Any, Any, Any, Any], name: str | None
    ) -> Any:
        """:func:`launch_values` of :meth:`kernel`'s launch keywords: plain values, all user code run."""
        cluster, cooperative, priority, programmatic, device, attributes = keywords
        what = self._what("kernel", name)
        return (
            launch_values(cluster, cooperative, priority, programmatic, device, attributes, grid, shared_mem, what),
            what,
        )

    def _launch_attrs(self, node: KernelNode, launch: Any, name: str | None) -> Any:
        """The node's attributes from :meth:`_launch_values` (runs no user code)."""
        # (nothing to undo on an error: the node's edges are in its own predecessor list only)
        values, what = launch
        return finish_launch_attrs(self, node, values, what)


_LAUNCH_KEYWORDS = ("cluster", "cooperative", "priority", "device", "attributes")
#: The keywords of :meth:`Graph.kernel` that set launch attributes or edge types (``programmatic=``): what
#: ``cuGraphExecKernelNodeSetParams`` cannot change in an instantiated graph.
LAUNCH_KEYWORDS = (*_LAUNCH_KEYWORDS, "programmatic")


def update_kernel_node(node: KernelNode, changes: dict[str, Any]) -> None:
    """``KernelNode.update``: the builder's keywords plus launch attributes, all or nothing."""
    launch = {k: changes.pop(k) for k in _LAUNCH_KEYWORDS if k in changes}
    old = node.attrs
    saved = {slot: getattr(node, slot) for slot in parameter_slots(type(node))}
    if launch and not changes:
        before_edit(node.graph)  # (update_definition_node tells the executables when other keywords come too)
    try:
        update_definition_node(node, changes)
        base = old.copy() if old is not None else LaunchAttrs()
        what = node.label
        if "cluster" in launch:
            base.cluster = None if launch["cluster"] is None else check_cluster(launch["cluster"], node.grid, what)
        elif base.cluster is not None:
            base.cluster = check_cluster(base.cluster, node.grid, what)
        if "cooperative" in launch:
            base.cooperative = read_launch_value("cooperative", what, check_cooperative, launch["cooperative"], what)
        if "priority" in launch:
            base.priority = None if launch["priority"] is None else check_priority(launch["priority"], what)
        if "device" in launch:
            d = launch["device"]
            base.device = None if d is None else read_launch_value("device", what, device_ordinal, d, what)
            node.graph._special += base.device is not None
        if "attributes" in launch:
            x = launch["attributes"]
            base.extra = () if x is None else read_launch_value("attributes", what, check_attributes, x, what)
        if base.cooperative and base.cluster is not None:
            raise DefinitionError(f"{what}: a launch cannot be both cooperative and clustered")
        base.programmatic = [(p, port) for p, port in base.programmatic if any(q is p for q in node._preds)]
        base.smem_optin = node.shared_mem > SMEM_DEFAULT_LIMIT
        node.attrs = None if base.empty else base
        if node.attrs is not None:
            # The topology record holds no launch attributes: the signature reads the nodes from now on.
            node.graph._topo = None
            node.graph._attributed = True
    except BaseException:
        for slot, value in saved.items():
            setattr(node, slot, value)
        raise
