"""cuda.core 1.2's ``GraphDefinition`` and its node classes, built on a cudagraph :class:`~cudagraph.Graph`.

Each builder method of a node adds a node depending on it, so calls chain
(``gd.launch(cfg, k).launch(cfg, k2).memcpy(dst, src, n)``); the definition's own builder methods
add entry points. Nothing touches the driver until ``instantiate()`` (or a ``handle``: :mod:`.handles`).
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ...definition.graph import Graph
from ...definition.node import Node
from ...driver.calls import require_driver
from ...errors import CudaGraphError, DefinitionError, OperandError, StateError
from .adjacency import Adjacency
from .common import (
    DriverRefusal,
    GraphCompleteOptions,
    GraphCondition,
    SizeOverflow,
    add_callback,
    add_conditional,
    add_kernel,
    copy_size,
    instantiate,
    node_type,
    refuse_edge_removal,
    unsupported,
    write_dot,
)
from .exec_views import ExecutableGraphNode, executable_view
from .handles import definition_handle, node_handle
from .lifetimes import keep, operand
from .packing import pack_graph
from .updates import (
    memset_shape,
    memset_value,
    owner_check,
)

if TYPE_CHECKING:
    from .node_kinds import (
        AllocNode,
        ChildGraphNode,
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

__all__ = ["KINDS", "GraphDefinition", "GraphNode"]


#: node kind -> the compat class of its nodes (filled by :mod:`.node_kinds`; a kind not listed: GraphNode).
KINDS: dict[str, type[GraphNode]] = {}


class GraphNode:
    """A node of a :class:`GraphDefinition` (the entry point when it wraps no node).

    Each builder method adds a node depending on this one and returns it, so calls chain:
    ``g.launch(cfg, k).launch(cfg, k2).memcpy(dst, src, n)``.
    """

    __slots__ = ("_def", "_node", "__weakref__")

    def __init__(self, definition: GraphDefinition, node: Node | None) -> None:
        self._def = definition
        self._node = node

    @property
    def graph(self) -> GraphDefinition:
        """The definition this node belongs to."""
        return self._def

    @property
    def node(self) -> Node | None:
        """The cudagraph node underneath (``None`` for the entry point)."""
        return self._node

    @property
    def pred(self) -> Adjacency:
        """The nodes this one depends on, a live mutable set: adding a node adds the edge, discarding removes it."""
        return Adjacency(self, succs=False)

    @pred.setter
    def pred(self, value: GraphNode | Iterable[GraphNode]) -> None:
        Adjacency(self, succs=False).replace(value)

    @property
    def succ(self) -> Adjacency:
        """The nodes depending on this one, a live mutable set (as :attr:`pred`)."""
        return Adjacency(self, succs=True)

    @succ.setter
    def succ(self, value: GraphNode | Iterable[GraphNode]) -> None:
        Adjacency(self, succs=True).replace(value)

    @property
    def is_valid(self) -> bool:
        """Whether the node is still in its definition: ``False`` once :meth:`destroy` removed it, or once the
        conditional or child node whose body holds it was destroyed (or given another child graph)."""
        return self._node is None or (self._node.graph is self._def._g and self._def._attached())

    def destroy(self) -> None:
        """Remove the node and its edges (:meth:`cudagraph.Graph.remove`); nothing for a removed node or the
        entry point. What the node kept alive (its callable, kernel, owners, a conditional's bodies) goes with it
        once no executable made before holds it, as in cuda.core."""
        node = self._node
        if node is not None and self.is_valid:
            if len(self.pred) or len(self.succ):
                refuse_edge_removal(self._def._g, f"compat GraphNode.destroy: {node.label}")
            self._def._g.remove(node)
            self._def._wrappers.pop(id(node), None)
            self._def._release_bodies(node)

    def _executable_view(self, exe: Any) -> ExecutableGraphNode:  # exe[node]: see Executable.__getitem__
        return executable_view(self, exe)

    def _changed(self, changes: dict[str, Any], owners: tuple[Any, ...] = ()) -> None:
        """Apply builder keywords to the node in the definition (all or nothing); keep ``owners`` alive."""
        node = self._node
        if node is None or not self.is_valid:
            raise StateError(f"compat {type(self).__name__}.update: GraphNode has been destroyed")
        node.update(**changes)
        keep(node, *owners)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GraphNode) and other._def is self._def and other._node is self._node

    def __hash__(self) -> int:
        return hash((id(self._def), id(self._node)))

    def __repr__(self) -> str:
        """cuda.core's form: ``<KernelNode handle=0x...>`` (with the kind's own fields after the handle, as cuda.core
        gives them where compat holds them), ``<GraphNode entry>`` for the entry point; a destroyed node, or one whose
        definition cannot be built into a driver graph now, by its label."""
        node = self._node
        if node is None:
            return "<GraphNode entry>"
        name = type(self).__name__
        if not self.is_valid:
            return f"<{name} {node.label} (destroyed)>"
        try:
            handle = int(self.handle)
        except (CudaGraphError, TypeError, ValueError):  # (no driver here, a definition the driver refuses now)
            return f"<{name} {node.label}>"
        return f"<{name} handle=0x{handle:x}{self._repr_fields()}>"

    def _repr_fields(self) -> str:
        """What :meth:`__repr__` shows after the handle (cuda.core's fields of the kind)."""
        return ""

    # ---------------------------------------------------------------------------------------- builders
    def _after(self) -> Any:
        return None if self._node is None else self._node

    def _add(self, node: Node) -> Any:
        """The wrapper of ``node`` (the class of its kind, :data:`KINDS`), made now: it was just added, so none
        exists yet."""
        d = self._def
        w = KINDS.get(node.kind, GraphNode)(d, node)
        d._wrappers[id(node)] = w
        return w

    def launch(self, config: Any, kernel: Any, *args: Any) -> KernelNode:
        """Add a kernel launch depending on this node (``config`` is a cuda.core ``LaunchConfig``).

        A clustered or cooperative ``config`` is refused, as cuda.core's ``GraphDefinition`` refuses it
        (:data:`ClusteredLaunchRefusal`, a ``NotImplementedError``); a compat ``GraphBuilder`` takes one, as
        cuda.core's, and so does :meth:`cudagraph.Graph.kernel` (``cluster=``, ``cooperative=``).
        """
        if getattr(config, "cluster", None) is not None or getattr(config, "is_cooperative", False) is True:
            raise ClusteredLaunchRefusal(
                "clustered or cooperative kernel launches are not supported in a GraphDefinition (compat "
                "GraphDefinition.launch, as cuda.core's; cudagraph.Graph.kernel(cluster=, cooperative=) builds one)"
            )
        node = add_kernel(self._def._g, self._after(), config, kernel, args, "GraphDefinition.launch")
        return self._add(node)  # type: ignore[no-any-return]

    def empty(self) -> EmptyNode:
        """Add an empty node depending on this node."""
        return self._add(self._def._g.empty(after=self._after()))  # type: ignore[no-any-return]

    def join(self, *nodes: GraphNode) -> EmptyNode:
        """Add an empty node depending on this node and on ``nodes``."""
        deps = [] if self._node is None else [self._node]
        for i, n in enumerate(nodes):
            if not isinstance(n, GraphNode):
                raise OperandError(f"compat GraphNode.join: nodes[{i}]: expected a GraphNode, got {type(n).__name__}")
            if n._def is not self._def:
                raise OperandError(f"compat GraphNode.join: nodes[{i}]: a node of another GraphDefinition")
            if n._node is not None and not any(n._node is d for d in deps):
                deps.append(n._node)
        return self._add(self._def._g.join(*deps))  # type: ignore[no-any-return]

    def memset(
        self, dst: Any, value: Any, width: int, height: int = 1, pitch: int = 0, *, dst_owner: Any = None
    ) -> MemsetNode:
        """Fill ``width`` x ``height`` elements at ``dst`` (an int ``value`` fills bytes)."""
        call = "GraphNode.memset"
        owner_check(call, dst_owner, dst, "dst")
        v, es = memset_value(call, value)
        w, h, p = memset_shape(call, width, height, pitch)
        dst = operand(dst)
        if h > 1:
            node = self._def._g.memset(dst, v, element_size=es, width=w, height=h, pitch=p or None, after=self._after())
        else:
            node = self._def._g.memset(dst, v, count=w, element_size=es, after=self._after())
        keep(node, dst_owner)
        return self._add(node)  # type: ignore[no-any-return]

    def memcpy(self, dst: Any, src: Any, size: int, *, dst_owner: Any = None, src_owner: Any = None) -> MemcpyNode:
        """Copy ``size`` bytes from ``src`` to ``dst`` (device or pinned host memory)."""
        call = "GraphNode.memcpy"
        owner_check(call, dst_owner, dst, "dst")
        owner_check(call, src_owner, src, "src")
        nbytes = copy_size(call, size)
        node = self._def._g.memcpy(operand(dst), operand(src), nbytes, after=self._after())
        keep(node, dst_owner, src_owner)
        return self._add(node)  # type: ignore[no-any-return]

    def allocate(self, size: int, *, device: Any = None, memory_type: Any = None, peer_access: Any = None) -> AllocNode:
        """Add a graph allocation of ``size`` bytes; its :attr:`AllocNode.dptr` is passed to later nodes.

        ``device``, ``memory_type`` (``"device"``, ``"host"``, ``"managed"`` or cuda.core's ``GraphMemoryType``)
        and ``peer_access`` are :meth:`cudagraph.Graph.alloc`'s. As cuda.core: a ``size`` that is no integer is a
        ``TypeError``, a negative one an ``OverflowError`` (its ``size_t``), 0 the driver's refusal
        (:data:`DriverRefusal`), another memory type a ``ValueError``; all at the call.
        """
        call = "compat GraphNode.allocate"
        try:
            n = operator.index(size) if not isinstance(size, bool) else None
        except TypeError:  # (an array has __index__ and refuses it)
            n = None
        if n is None:
            raise OperandError(f"{call}: size: expected an int, got {type(size).__name__}")
        if n < 0:
            raise SizeOverflow(f"{call}: size: a size_t cannot hold {n}")
        if n == 0:  # (cuGraphAddMemAllocNode refuses 0 bytes: CUDA_ERROR_INVALID_VALUE under cuda.core)
            raise DriverRefusal(f"{call}: size: an allocation of 0 bytes")
        kind = "device" if memory_type is None else getattr(memory_type, "value", memory_type)  # (an enum's value)
        if type(kind) is not str or kind not in ("device", "host", "managed"):
            raise DefinitionError(
                f"{memory_type!r} is not a valid GraphMemoryType. Must be one of 'device', 'host' or 'managed' "
                f"({call}: memory_type)"
            )
        node = self._def._g.alloc(
            n,
            device=device,
            memory_type=kind,
            peer_access=peer_access,
            after=self._after(),
        )
        return self._add(node)  # type: ignore[no-any-return]

    def deallocate(self, dptr: Any) -> FreeNode:
        """Free a graph allocation (the ``dptr`` of an :class:`AllocNode` of this definition)."""
        alloc: Any = dptr._node if isinstance(dptr, GraphNode) else operand(dptr)
        if type(alloc) is int and alloc == 0:  # the driver refuses a free of no address (cuda.core: CUDAError)
            raise DriverRefusal("compat GraphNode.deallocate: dptr: 0 is no graph allocation")
        if getattr(alloc, "kind", None) != "alloc":
            raise unsupported(
                "GraphNode.deallocate", "dptr", f"{type(dptr).__name__}; only the dptr of an allocate() node"
            )
        return self._add(self._def._g.free(alloc, after=self._after()))  # type: ignore[no-any-return]

    def embed(self, child: GraphDefinition) -> ChildGraphNode:
        """Add ``child`` as a child graph node."""
        if not isinstance(child, GraphDefinition):
            raise unsupported("GraphNode.embed", "child", f"{type(child).__name__}; only a compat GraphDefinition")
        return self._add(self._def._g.child(child._g, after=self._after()))  # type: ignore[no-any-return]

    def record(self, event: Any) -> EventRecordNode:
        """Record ``event``."""
        return self._add(self._def._g.record(event, after=self._after()))  # type: ignore[no-any-return]

    def wait(self, event: Any) -> EventWaitNode:
        """Wait for ``event``."""
        return self._add(self._def._g.wait(event, after=self._after()))  # type: ignore[no-any-return]

    def callback(self, fn: Any, *, user_data: Any = None) -> HostCallbackNode:
        """Call ``fn()`` or the ctypes function ``fn(user_data)`` (bytes, copied, or an int address) on the host."""
        node = add_callback(self._def._g, fn, user_data, "GraphNode.callback", after=self._after())
        return self._add(node)  # type: ignore[no-any-return]

    def if_then(self, condition: GraphCondition) -> IfNode:
        """Add an if node; fill its :attr:`IfNode.then` definition."""
        node = add_conditional("GraphNode.if_then", self._def._g.if_, condition, after=self._after())
        return self._add(node)  # type: ignore[no-any-return]

    def if_else(self, condition: GraphCondition) -> IfElseNode:
        """Add an if/else node; fill :attr:`IfElseNode.then` and :attr:`IfElseNode.else_`."""
        node = add_conditional("GraphNode.if_else", self._def._g.if_else, condition, after=self._after())
        return self._add(node)  # type: ignore[no-any-return]

    def while_loop(self, condition: GraphCondition) -> WhileNode:
        """Add a while node; fill its :attr:`WhileNode.body` definition."""
        node = add_conditional("GraphNode.while_loop", self._def._g.while_, condition, after=self._after())
        return self._add(node)  # type: ignore[no-any-return]

    def switch(self, condition: GraphCondition, count: int) -> SwitchNode:
        """Add a switch node of ``count`` branches (:attr:`SwitchNode.branches`)."""
        node = add_conditional("GraphNode.switch", self._def._g.switch, condition, count, after=self._after())
        return self._add(node)  # type: ignore[no-any-return]

    @property
    def handle(self) -> Any:
        """The node's ``CUgraphNode`` in the definition's driver graph (:mod:`~cudagraph.frontends.compat.handles`)."""
        return node_handle(self)

    @property
    def type(self) -> Any:  # (last in the class: the name would shadow the builtin in annotations below it)
        """The driver node type (a ``CUgraphNodeType``); ``None`` for the entry point and a destroyed node."""
        return node_type(self._node) if self._node is not None and self.is_valid else None


def _bodies(node: Any) -> tuple[Graph, ...]:
    """The graphs a conditional (``bodies``) or child (``body``) node holds."""
    bodies = getattr(node, "bodies", None)
    if bodies is not None:
        return tuple(bodies)
    body = getattr(node, "body", None)
    return () if body is None else (body,)


#: A negative ``size``: cuda.core's ``size_t`` conversion raises ``OverflowError``.
#: A clustered or cooperative launch added to a compat ``GraphDefinition``: cuda.core's ``NotImplementedError``
#: (and an OperandError).
ClusteredLaunchRefusal: type[OperandError] = type(
    "ClusteredLaunchRefusal",
    (OperandError, NotImplementedError),
    {"__module__": __name__, "__doc__": "A clustered or cooperative launch in a GraphDefinition (NotImplemented)."},
)


_BUILDERS = (
    "launch",
    "empty",
    "memset",
    "memcpy",
    "allocate",
    "deallocate",
    "embed",
    "record",
    "wait",
    "callback",
    "if_then",
    "if_else",
    "while_loop",
    "switch",
)


class GraphDefinition:
    """cuda.core's ``GraphDefinition``, built explicitly on a cudagraph :class:`~cudagraph.Graph`.

    Its builder methods add entry-point nodes (no dependencies); a node's methods add nodes
    depending on it. :attr:`graph` is the cudagraph definition underneath.
    """

    __slots__ = ("_g", "_wrappers", "_children", "_parent", "_owner", "_handles", "__weakref__")

    def __init__(
        self, _graph: Graph | None = None, _parent: GraphDefinition | None = None, _owner: Node | None = None
    ) -> None:
        self._g = _graph if _graph is not None else Graph("GraphDefinition")
        # The wrappers and body views made so far, held weakly (as cuda.core's node registry): a destroyed node or
        # body that no program object names is released with what it keeps alive.
        self._wrappers: weakref.WeakValueDictionary[int, GraphNode] = weakref.WeakValueDictionary()
        self._children: weakref.WeakValueDictionary[int, GraphDefinition] = weakref.WeakValueDictionary()
        self._parent = _parent
        self._owner = _owner  # the conditional or child node whose body this is (None: made by GraphDefinition())
        self._handles: Any = None  # the driver graphs built for handles (handles.DriverGraphs)

    @property
    def graph(self) -> Graph:
        """The cudagraph definition underneath."""
        return self._g

    @property
    def handle(self) -> Any:
        """The driver ``CUgraph`` of the definition as it is now (:mod:`~cudagraph.frontends.compat.handles`); a
        null ``CUgraph`` for a body whose node was destroyed (:attr:`is_valid` false), as cuda.core gives."""
        if not self._attached():
            return require_driver().CUgraph(0)
        return definition_handle(self)

    #: The class of ``exe.update(...)``'s refusal of another topology: cuda.core leaves that to the driver, whose
    #: ``CUDAError`` a ported program catches (a DriverRefusal is one, and a DefinitionError).
    _topology_refusal = DriverRefusal

    def _update_source(self) -> Graph:  # exe.update(gd): see Executable.update
        pack_graph(self._g)
        return self._g

    @property
    def is_valid(self) -> bool:
        """``True``, except for a body read through its node once that conditional or child node was destroyed
        (or given another child graph): cuda.core's handle of such a body is then null."""
        return self._attached()

    def _attached(self) -> bool:
        """Whether each node whose body this is (up to the definition made by ``GraphDefinition()``) is still in its
        definition and still holds the body."""
        d = self
        while d._parent is not None:
            o: Any = d._owner
            if o is None or o.graph is not d._parent._g or not any(b is d._g for b in _bodies(o)):
                return False
            d = d._parent
        return True

    def _release_bodies(self, owner: Node) -> None:
        """Detach the body views of the destroyed node ``owner`` (and theirs, all the way down): each is left
        empty, with a null handle, so what its nodes kept alive goes once no program object names those nodes, as
        cuda.core's destroyed bodies release theirs."""
        for view in list(self._children.values()):
            if view._owner is owner:
                view._detach()

    def _detach(self) -> None:
        for view in list(self._children.values()):
            view._detach()
        self._children.clear()
        self._wrappers.clear()
        self._g = Graph("GraphDefinition")
        self._owner = None
        self._handles = None

    def _wrap(self, node: Node) -> GraphNode:
        w = self._wrappers.get(id(node))
        if w is None or w._node is not node:
            w = KINDS.get(node.kind, GraphNode)(self, node)
            self._wrappers[id(node)] = w
        return w

    def _child(self, body: Graph, owner: Node) -> GraphDefinition:
        w = self._children.get(id(body))
        if w is None or w._g is not body or w._owner is not owner:
            w = GraphDefinition(body, self, owner)
            self._children[id(body)] = w
        return w

    def join(self, *nodes: GraphNode) -> EmptyNode:
        """Add an empty node depending on every node in ``nodes``."""
        return GraphNode(self, None).join(*nodes)

    def create_condition(self, default_value: int | None = None) -> GraphCondition:
        """A condition variable, set from device code (``cudaGraphSetConditional``)."""
        return GraphCondition(self._g.condition(default=default_value))

    def nodes(self) -> set[GraphNode]:
        """Every node."""
        return {self._wrap(n) for n in self._g.nodes}

    def edges(self) -> set[tuple[GraphNode, GraphNode]]:
        """Every edge as ``(from, to)``."""
        return {(self._wrap(a), self._wrap(b)) for a, b in self._g.edges}

    def instantiate(self, options: GraphCompleteOptions | None = None) -> Any:
        """Build the graph explicitly and instantiate it; returns an :class:`~cudagraph.Executable`."""
        return instantiate(self._g, options)

    def debug_dot_print(self, path: str, options: Any = None) -> None:
        """Write the graph in Graphviz dot to ``path`` (``options`` may set no flag)."""
        write_dot(self._g, path, options, "GraphDefinition.debug_dot_print")

    def __repr__(self) -> str:
        return f"<compat GraphDefinition {len(self._g)} nodes>"


def _entry_method(name: str) -> Any:
    method = getattr(GraphNode, name)

    def entry(self: GraphDefinition, *args: Any, **kwargs: Any) -> Any:
        return method(GraphNode(self, None), *args, **kwargs)

    entry.__name__ = name
    entry.__qualname__ = f"GraphDefinition.{name}"
    entry.__doc__ = f"{(method.__doc__ or '').splitlines()[0].replace(' depending on this node', '')} (an entry point)."
    return entry


for _name in _BUILDERS:
    setattr(GraphDefinition, _name, _entry_method(_name))
del _name
