"""The graph definition: nodes, edges, inspection, validation and the materializer entry points (GPU-free).

The builders come from the kinds' mixins, composed in
:class:`~cudagraph.definition.builders.Builders`; the storage they work on is
:class:`~cudagraph.definition.core.GraphCore`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex

import numpy as np

from ..errors import CycleError, DefinitionError, DuplicateEdgeError, ForeignNodeError, OperandError
from . import render as _render
from . import seams
from .auto_edges import EDGE_MODES, EdgeInference
from .auto_graph import AutoBuilders
from .builders import Builders
from .capture_accessor import CaptureAccessor
from .core import MAX_NESTING, After, DimLike
from .diff import KERNEL_LAYOUT_CLASSES, is_flat, only_class
from .drawing import Drawing
from .edge_lists import drop_entry
from .edits import before_edit
from .kinds.kernel import KERNEL_TYPES_VALID, PROGRAMMATIC_PORTS, LaunchAttrs, plain_kernel_passes
from .node import Node, bodies_of, child_graphs
from .operands import ARG_TYPES_VALID
from .param import Param, param_dtype
from .parametrize import ParametrizeMixin
from .path import Path
from .races import RaceCheck, check_races
from .removal import remove_node
from .topology import find_cycle, find_path, format_cycle, kahn_order, keep_order
from .validation import check_tree

if TYPE_CHECKING:
    from ..executable.executable import Executable

__all__ = ["After", "DimLike", "Graph"]


def _nested_walk(root: Graph, steps: Callable[[Graph], Generator[tuple[Graph, Node], bool, bool]]) -> bool:
    """Run ``steps`` on ``root`` and, depth first, on each body it yields (an explicit stack, no recursion).

    A body's result is sent back to the generator that yielded it; the root's
    result is returned. A graph met again inside itself, or a body nested more
    than :data:`~cudagraph.definition.core.MAX_NESTING` levels deep, is refused.
    """
    stack = [(root, steps(root))]
    active = {id(root)}
    sent: bool | None = None
    while True:
        g, gen = stack[-1]
        try:
            body, via = gen.send(sent)  # type: ignore[arg-type]  # None starts a generator
        except StopIteration as stop:
            active.discard(id(g))
            stack.pop()
            if not stack:
                return bool(stop.value)
            sent = bool(stop.value)
            continue
        if id(body) in active:
            raise DefinitionError(f"Graph {body.name!r} contains itself through child nodes")
        if len(stack) > MAX_NESTING:
            raise DefinitionError(
                f"{via.label} of Graph {via.graph.name!r}: its body is nested {len(stack)} levels deep; "
                f"child graphs and conditional bodies nest at most {MAX_NESTING} levels"
            )
        active.add(id(body))
        stack.append((body, steps(body)))
        sent = None


class Graph(Builders, ParametrizeMixin, Drawing, RaceCheck):
    """A CUDA graph definition: nodes, their parameters and dependency edges.

    Building a definition needs no GPU. Nodes are added with the builders
    (:meth:`kernel`, :meth:`memcpy`, :meth:`memset`, :meth:`host`,
    :meth:`record`, :meth:`wait`, :meth:`child`, :meth:`empty`, :meth:`join`),
    each taking ``after=`` (a node or a sequence of nodes it depends on).
    :meth:`instantiate` turns the definition into a launchable
    :class:`~cudagraph.Executable` by explicit construction on the driver.

    Several threads may add nodes to one graph at once (in CPython with the
    GIL): every node gets the index of its position and its edges whole;
    nodes added concurrently take the order in which their builders finished.
    Builders take no lock (a lock would cost the kernel builder about a
    quarter of its time); they record a node in steps that other threads
    cannot interleave and correct the index when another thread's node got in
    first. :meth:`add_edge` and :meth:`remove_edge` hold a lock of the graph,
    and so does the first read of successor lists after nodes were added
    (builders record only a new node's predecessors; successors are derived
    from them under the lock), so ``node.successors`` and :attr:`num_edges`
    may be read while other threads add nodes. Reading the graph otherwise
    (validation, rendering, instantiation) while another thread edits it is
    not supported.

    Parameters
    ----------
    name : str
        A label used in summaries, pictures and error messages.
    edges : {"manual", "auto"}
        ``"auto"``: each new node also depends on the latest earlier nodes it conflicts with on memory
        (see :class:`~cudagraph.In` and ``docs/howto/auto-edges.md``), with no edge another path implies.

    Examples
    --------
    >>> import cudagraph as cg
    >>> g = cg.Graph("demo")
    >>> a = g.empty(name="a")
    >>> b = g.empty(after=a, name="b")
    >>> [n.name for n in g.topological_order()]
    ['a', 'b']
    """

    __slots__ = ()

    def __new__(cls, *args: Any, edges: str = "manual", **kwargs: Any) -> Graph:
        if not isinstance(edges, str) or edges not in EDGE_MODES:
            raise OperandError(f"Graph: edges must be one of {', '.join(EDGE_MODES)}, got {edges!r}")
        return object.__new__(AutoGraph if edges == "auto" and cls is Graph else cls)

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        raise DefinitionError(
            f"Graph {self.name!r} cannot be pickled (its nodes, operands and callables belong to this process); "
            "build the Graph again where it is needed"
        )

    def _blank(self, name: str) -> Graph:
        return Graph(name)

    def param(self, name: str, dtype: Any = None, *, default: Any = None) -> Param:
        """Declare a named parameter, bound at ``instantiate(name=value)``.

        Parameters
        ----------
        name : str
            The keyword used to bind it.
        dtype : numpy dtype, optional
            ``None`` (default) for a device pointer, else a scalar type.
        default : object, optional
            Value used when none is bound.

        Returns
        -------
        Param

        Raises
        ------
        DefinitionError
            If the name is not an identifier, is reserved, or is taken by a parameter of a different kind.
        OperandError
            If ``dtype`` is not a numpy dtype of a fixed-size scalar.
        """
        if not isinstance(name, str):
            raise DefinitionError(f"param name must be a Python identifier, got {name!r}")
        p = self._params.get(name)
        if p is not None:
            new_dtype = param_dtype(dtype, name)
            if (p.dtype is None) != (new_dtype is None) or p.dtype != new_dtype:
                raise DefinitionError(f"param {name!r} already exists with dtype {p.dtype}")
            return p
        p = Param(self, name, dtype, default)
        self._params[name] = p
        return p

    def path(self, after: After = None) -> Path:
        """Start an ordered path: each op added through it depends on the previous one.

        Use as ``with g.path() as p: p.kernel(...); p.memcpy(...)``; the first
        op depends on ``after``.

        Returns
        -------
        Path
        """
        return Path(self, self._deps(after, "path"))

    # ----------------------------------------------------------------- edges
    # ----------------------------------------------------------------- edges
    def _own(self, node: Any, what: str) -> Node:
        if not isinstance(node, Node):
            raise OperandError(f"{what}: expected a node, got {type(node).__name__}")
        if node.graph is not self:
            raise ForeignNodeError(f"{what}: {node.label} belongs to Graph {node.graph.name!r}, not {self.name!r}")
        return node

    def add_edge(self, src: Node, dst: Node, *, programmatic: bool | str = False) -> None:
        """Make ``dst`` depend on ``src``.

        Parameters
        ----------
        src, dst : Node
            Nodes of this graph.
        programmatic : bool or {"programmatic", "launch_order"}
            Make the edge between two kernels programmatic (programmatic
            dependent launch): ``dst`` may start once every block of ``src``
            has called ``cudaTriggerProgrammaticLaunchCompletion()`` or exited
            (``True``/``"programmatic"``), or once every block of ``src`` has
            started (``"launch_order"``). ``dst`` must wait with
            ``cudaGridDependencySynchronize()`` before reading what ``src`` wrote.

        Raises
        ------
        ForeignNodeError
            Either node belongs to another graph.
        DuplicateEdgeError
            The edge exists.
        CycleError
            The edge would close a cycle; the message spells the cycle out.
        DefinitionError
            A programmatic edge whose ends are not both kernel nodes.
        """
        self._own(src, "add_edge: src")
        self._own(dst, "add_edge: dst")
        port = None
        if type(programmatic) is not bool and isinstance(programmatic, np.bool_):
            programmatic = bool(programmatic)
        if programmatic is not False:
            port = "programmatic" if programmatic is True else programmatic
            # (a str first: `in` compares with ==, which an array answers with an array of no truth value)
            if not isinstance(port, str) or port not in PROGRAMMATIC_PORTS:
                got = repr(programmatic) if isinstance(programmatic, str) else type(programmatic).__name__
                raise OperandError(
                    f"add_edge: {src.label} -> {dst.label}: programmatic must be a bool or one of "
                    f"{', '.join(PROGRAMMATIC_PORTS)}; got {got}"
                )
            if not (src.programmatic_edges and dst.programmatic_edges):
                raise DefinitionError(
                    f"add_edge: a programmatic edge joins two kernel nodes; {src.label} -> {dst.label} does not"
                )
        if src is dst:
            raise CycleError(f"add_edge: {src.label} cannot depend on itself", [src, src])
        with self._lock:
            self._link(src, dst, None if port is None else str(port))

    def _link(self, src: Node, dst: Node, port: str | None) -> None:
        """The checks and the change of :meth:`add_edge` that must see no other edit (under the lock)."""
        self._fold()
        edges = self._edges_now()
        if (src, dst) in edges:
            raise DuplicateEdgeError(f"add_edge: {src.label} -> {dst.label} exists already")
        order = self._order
        if order or src.index > dst.index:
            if len(order) < len(self._nodes):
                order.extend(range(len(order), len(self._nodes)))
            if not keep_order(order, src, dst, self._nodes):
                back = find_path(dst, src)
                assert back is not None
                cycle = [*back, dst]
                raise CycleError(
                    f"add_edge: {src.label} -> {dst.label} would close the cycle {format_cycle(cycle)}", cycle
                )
            if src.index > dst.index:
                self._ordered = False
        before_edit(self)
        self._topo = None  # an existing node's predecessors change: the record no longer speaks for the graph
        dst._preds.append(src)
        src._succ_list.append(dst)
        edges.add((src, dst))
        self._nedges += 1
        if port is not None:
            # A new object: a node's attributes are never changed in place (executables keep the old one to
            # compare with; see cudagraph.definition.diff).
            attrs = dst.attrs.copy() if dst.attrs is not None else LaunchAttrs()  # type: ignore[attr-defined]
            attrs.programmatic.append((src, str(port)))
            dst.attrs = attrs  # type: ignore[attr-defined]
            self._attributed = True

    def remove_edge(self, src: Node, dst: Node) -> None:
        """Remove the dependency of ``dst`` on ``src``.

        Raises
        ------
        DefinitionError
            There is no such edge.
        """
        self._own(src, "remove_edge: src")
        self._own(dst, "remove_edge: dst")
        with self._lock:
            before_edit(self)
            self._unlink(src, dst)

    def _unlink(self, src: Node, dst: Node) -> None:
        """The check and the change of :meth:`remove_edge` (under the lock)."""
        self._fold()
        edges = self._edges_now()
        if (src, dst) not in edges:
            raise DefinitionError(f"remove_edge: there is no edge {src.label} -> {dst.label}")
        edges.discard((src, dst))
        self._topo = None  # (see _link)
        # O(1) expected whatever the fan-in or fan-out (the last entry takes the removed one's place)
        drop_entry(dst, dst._preds, src, succs=False)
        drop_entry(src, src._succ_list, dst, succs=True)
        self._nedges -= 1
        attrs = getattr(dst, "attrs", None)
        if attrs is not None and any(p is src for p, _ in attrs.programmatic):
            attrs = attrs.copy()  # (see _link)
            attrs.programmatic = [(p, port) for p, port in attrs.programmatic if p is not src]
            dst.attrs = None if attrs.empty else attrs  # type: ignore[attr-defined]

    def remove(self, node: Node) -> None:
        """Remove ``node`` and its edges (cuda.core's ``GraphNode.destroy``).

        The nodes created after it move down one place (their ``index``). The
        removed node can no longer be used: naming it in ``after=``, an edge or
        another removal raises :class:`~cudagraph.errors.ForeignNodeError`.
        Removing a free node leaves its allocation unfreed; removing a
        conditional node releases its condition (it may drive a new
        conditional node), the setters inside its bodies leaving with it;
        executables made before keep running what they were built from. Not
        to be called while another thread adds nodes to this graph.

        Raises
        ------
        ForeignNodeError
            ``node`` belongs to another graph, or was removed already.
        DefinitionError
            ``node`` is an allocation that a free node frees or another node
            uses (both named), or a conditional node whose condition nodes
            outside it still set (named): remove those first.
        """
        self._own(node, "remove")
        remove_node(self, node)

    # ------------------------------------------------------------ inspection
    @property
    def nodes(self) -> tuple[Node, ...]:
        """Every node, in creation order."""
        return tuple(self._nodes)

    @property
    def edges(self) -> list[tuple[Node, Node]]:
        """Every edge as ``(src, dst)``, grouped by ``dst`` in creation order."""
        return [(p, n) for n in self._nodes for p in n._preds]

    @property
    def params(self) -> dict[str, Param]:
        """The declared parameters by name (including those of child graphs is not implied)."""
        return dict(self._params)

    @property
    def num_edges(self) -> int:
        """The number of edges."""
        if self._succs_upto == len(self._nodes):
            return self._nedges
        with self._lock:  # (no fold: the nodes not folded yet are counted, making no successor list)
            return self._nedges + sum(len(n._preds) for n in self._nodes[self._succs_upto :])

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(tuple(self._nodes))

    def __contains__(self, node: object) -> bool:
        return isinstance(node, Node) and node.graph is self

    def roots(self) -> list[Node]:
        """Nodes with no predecessors."""
        return [n for n in self._nodes if not n._preds]

    def leaves(self) -> list[Node]:
        """Nodes with no successors, in creation order."""
        nodes = self._nodes
        if self._succs_upto == len(nodes):
            return [n for n in nodes if not n._succ_list]
        # Not folded: one pass over the predecessor lists, making no successor list (the capture backend
        # asks this of every graph it records).
        has_succs = bytearray(len(nodes))
        for n in nodes:
            for p in n._preds:
                has_succs[p.index] = 1
        return [n for n, h in zip(nodes, has_succs) if not h]

    def topological_order(self) -> list[Node]:
        """Every node, each after all of its predecessors (ties broken by creation order).

        Raises
        ------
        CycleError
            If the graph has a cycle.
        """
        if self._ordered:
            return list(self._nodes)
        order = kahn_order(self._nodes)
        if order is None:
            self._raise_cycle()
        assert order is not None
        return order

    def _raise_cycle(self) -> None:
        cycle = find_cycle(self._nodes)
        assert cycle is not None
        raise CycleError(f"Graph {self.name!r} has a cycle: {format_cycle(cycle)}", cycle)

    def validate(self, *, races: bool = False) -> None:
        """Check the whole definition, child graphs included.

        Checks that every edge joins nodes of this graph, that no edge is
        given twice, that the graph has no cycle, that child graphs are valid
        and do not contain this graph, and that node operands have the right
        kinds.

        With conditional nodes and graph memory it also checks that:
        conditions are used only inside the graph that declared them and by
        at least one conditional node; conditional bodies hold only the node
        kinds the driver allows there (kernel, empty, memcpy, memset, child
        graph, conditional); while bodies are not empty; every allocation is
        used only by nodes ordered after its alloc node and before its free
        node, in the graph that allocated it.

        Child graphs and conditional bodies may nest at most
        :data:`~cudagraph.definition.core.MAX_NESTING` (128) levels deep; a
        deeper body is refused here and by :meth:`instantiate` and :meth:`run`,
        naming the node that holds it.

        With ``races=True`` it also refuses every race (:meth:`races`), listing them in a
        :class:`~cudagraph.errors.RaceError`.

        Raises
        ------
        ForeignNodeError, DuplicateEdgeError, CycleError, DefinitionError, OperandError, RaceError
        """
        if self._validate():
            check_tree(self)
        if races:
            check_races(self)

    def _validate_structure(self) -> None:
        """The checks instantiation needs before lowering: cheap when edges were only added forward.

        Operands are checked by the lowering itself, node by node; conditional
        and graph-memory rules are checked here when the graph has such nodes.
        """
        if self._walk_structure():
            check_tree(self)

    def _walk_structure(self) -> bool:
        """Cycle checks of this graph and its bodies; ``True`` if any has special nodes."""
        return _nested_walk(self, Graph._structure_steps)

    def _structure_steps(self) -> Generator[tuple[Graph, Node], bool, bool]:
        """The checks of :meth:`_walk_structure` on this graph; yields each body to walk, is sent its result."""
        if not self._ordered and kahn_order(self._nodes) is None:
            self._raise_cycle()
        special = self._special > 0
        for n in self._nodes:
            if n.body_fields and not n.conditional_bodies:
                for b in child_graphs(n):
                    special = (yield b, n) or special
        if special:
            for n in self._nodes:
                if n.conditional_bodies:
                    for b in bodies_of(n):
                        yield b, n
        return special

    def _validate(self) -> bool:
        return _nested_walk(self, Graph._validate_steps)

    def _validate_steps(self) -> Generator[tuple[Graph, Node], bool, bool]:
        """The checks of :meth:`validate` on this graph; yields each body to check, is sent its result.

        A node of a kind whose fields are a kernel launch's (:data:`~cudagraph.definition.diff.KERNEL_LAYOUT_CLASSES`)
        and without launch attributes is asked :func:`~cudagraph.definition.kinds.kernel.plain_kernel_passes` first;
        where the compiled module is built, runs of plain kernel nodes are passed by its ``validate``
        (:attr:`_validator`, this loop's compiled twin), which hands back each node it does not pass.
        """
        special = self._special > 0
        seen: set[int] = set()  # memory objects among kernel arguments, checked once each
        launches, fast, nodes = KERNEL_LAYOUT_CLASSES, self._validator, self._nodes
        one = only_class(launches)
        # The tables fast reads, as tuples made again whenever they grew (they only grow).
        learned = -1
        kernel_types: tuple[type, ...] = ()
        arg_types: tuple[type, ...] = ()
        walk = enumerate(nodes)
        for i, n in walk:
            launch = type(n) is one or (one is None and type(n) in launches)
            if fast is not None and launch:
                if learned != len(KERNEL_TYPES_VALID) + len(ARG_TYPES_VALID):
                    learned = len(KERNEL_TYPES_VALID) + len(ARG_TYPES_VALID)
                    kernel_types, arg_types = tuple(KERNEL_TYPES_VALID), tuple(ARG_TYPES_VALID)
                stop = fast(self, nodes, i, seen, kernel_types, arg_types)
                if stop > i:  # nodes i to stop - 1 passed: the walk goes on at node stop
                    next(islice(walk, stop - i - 1, stop - i - 1), None)
                    continue
            if n.graph is not self or n.index != i:
                raise ForeignNodeError(f"Graph {self.name!r}: {n.label} is not a node of this graph")
            preds = n._preds
            if preds:
                k = len(preds)
                if k > 1 and (preds[0] is preds[1] if k == 2 else len({id(p) for p in preds}) != k):
                    raise DuplicateEdgeError(f"Graph {self.name!r}: {n.label} has a duplicate dependency")
                for p in preds:
                    try:
                        ours = p.graph is self
                    except AttributeError:  # not a node
                        ours = False
                    if not ours:
                        raise ForeignNodeError(self._foreign_dependency(n, p))
            if not launch or n.attrs is not None or not plain_kernel_passes(n, seen):  # type: ignore[attr-defined,arg-type]
                special = n._check() or special
            if n.body_fields:
                for b in bodies_of(n):
                    special = (yield b, n) or special
        if not self._ordered and kahn_order(self._nodes) is None:
            self._raise_cycle()
        return special

    def _foreign_dependency(self, node: Node, pred: Any) -> str:
        """The message refusing ``pred``, a predecessor of ``node`` that is not a node of this graph."""
        if not isinstance(pred, Node):
            return f"Graph {self.name!r}: {node.label} depends on a {type(pred).__name__}, which is not a node"
        return f"Graph {self.name!r}: {node.label} depends on {pred.label} of Graph {pred.graph.name!r}"

    def summary(self, limit: int = 50) -> str:
        """A text summary: counts by kind and one line per node (up to ``limit``).

        Raises
        ------
        OperandError
            ``limit`` is not a non-negative int.
        """
        if type(limit) is not int:
            if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)):
                raise OperandError(f"Graph {self.name!r}: summary: limit must be an int, got {type(limit).__name__}")
            limit = int(limit)
        if limit < 0:
            raise OperandError(f"Graph {self.name!r}: summary: limit must be non-negative, got {limit}")
        return _render.summary(self, limit)

    def to_dot(self) -> str:
        """The definition as Graphviz DOT text (child graphs as clusters)."""
        return _render.to_dot(self)

    def to_mermaid(self) -> str:
        """The definition as a Mermaid ``flowchart``."""
        return _render.to_mermaid(self)

    def __repr__(self) -> str:
        return f"<Graph {self.name!r}: {len(self._nodes)} nodes, {self.num_edges} edges>"

    #: ``with g.capture(after=...) as s:`` records library calls on ``s`` into one
    #: node (a :class:`~cudagraph.materialize.capture_region.CaptureRegion`);
    #: ``Graph.capture(fn, stream=None)`` runs ``fn(stream)`` under capture and
    #: returns what it recorded as a new definition.
    capture = CaptureAccessor()

    @classmethod
    def from_cuda_graph(cls, handle: Any, name: str = "lifted") -> Graph:
        """Read a driver graph made by anyone back into a typed definition.

        Parameters
        ----------
        handle : CUgraph, int, cuda.core GraphDefinition/GraphBuilder, torch.cuda.CUDAGraph, CuPy graph
            The graph (see :func:`cudagraph.lift`).
        name : str
            The definition's name.

        Returns
        -------
        Graph
        """
        graph: Graph = seams.lift(handle, name)
        return graph

    # ---------------------------------------------------------- run / build
    def run(self, stream: Any = None, **params: Any) -> None:
        """Run the definition eagerly, with no graph, in topological order on ``stream``.

        Kernels are launched with ``cuLaunchKernel``, copies and fills are
        issued as async calls, host nodes as host functions. Useful for
        debugging and as the reference the graph builds are checked against.
        Host-callback exceptions are raised after the stream is synchronized.

        Parameters
        ----------
        stream : cuda.core.Stream or object with ``__cuda_stream__``, optional
            Where to run (``None``: the legacy default stream).
        **params
            Values for the graph's parameters.
        """
        seams.run(self, stream, params)

    # ---------------------------------------------------------- instantiate
    def instantiate(
        self,
        *,
        upload_stream: Any = None,
        auto_free_on_launch: bool = False,
        device_launch: bool = False,
        use_node_priority: bool = False,
        backend: str = "explicit",
        **params: Any,
    ) -> Executable:
        """Validate, build on the driver (``cuGraphCreate`` + ``cuGraphAddNode``) and instantiate.

        Parameters
        ----------
        backend : {"explicit", "capture"}
            ``"explicit"`` (default) adds every node with ``cuGraphAddNode``;
            ``"capture"`` replays the definition onto streams under stream
            capture (events for fan-out and fan-in). Both give an
            :class:`Executable` that behaves the same; a node kind one
            backend cannot express raises an error naming the node.
        upload_stream : cuda.core.Stream or object with ``__cuda_stream__``, optional
            Upload the executable on this stream as part of instantiation.
        auto_free_on_launch : bool
            Free unfreed graph allocations when the executable is relaunched.
            Without it, every :meth:`alloc` must have a :meth:`free` node
            (a :class:`~cudagraph.errors.DefinitionError` names the others).
        device_launch : bool
            Make the executable launchable from the device.
        use_node_priority : bool
            Honour per-node priority launch attributes.
        **params
            Values for the graph's :class:`~cudagraph.Param` objects.

        Returns
        -------
        Executable

        Raises
        ------
        DefinitionError, OperandError, KernelArgumentError
            The definition is not valid (or a flag is not a bool, the backend not a str).
        DriverError
            A driver call failed; the message names the call and the node.
        DriverUnavailableError
            No NVIDIA driver or GPU was found.

        Notes
        -----
        Both backends leave out of the driver graph each edge ``p -> c``
        that another predecessor of ``c`` already implies (it comes directly
        after ``p``, and neither edge can be programmatic): the order is the
        same and the driver instantiates faster (``bench/construction.py``).
        The definition keeps every edge; reading the driver graph back shows
        the others only.
        """
        for flag, value in (
            ("auto_free_on_launch", auto_free_on_launch),
            ("device_launch", device_launch),
            ("use_node_priority", use_node_priority),
        ):
            if not isinstance(value, (bool, np.bool_)):  # (each is tested for its truth)
                got = type(value).__name__
                raise OperandError(f"Graph {self.name!r}: instantiate: {flag} must be a bool, got {got}")
        if not auto_free_on_launch and (self._special or not is_flat(self)):  # allocations count in _special
            unfreed = self._unfreed_allocs()
            if unfreed:
                names = ", ".join(f"{a.label} of Graph {a.graph.name!r}" for a in unfreed)
                raise DefinitionError(
                    f"Graph {self.name!r}: {names} {'is' if len(unfreed) == 1 else 'are'} never freed; add "
                    "g.free(alloc, after=...) or instantiate with auto_free_on_launch=True"
                )
        exe: Executable = seams.instantiate(
            self,
            upload_stream=upload_stream,
            auto_free_on_launch=auto_free_on_launch,
            device_launch=device_launch,
            use_node_priority=use_node_priority,
            params=params,
            backend=backend,
        )
        return exe


class AutoGraph(AutoBuilders, Graph):
    """A ``Graph(edges="auto")``: each builder adds the new node's edges from data (see :class:`Graph`)."""

    __slots__ = ()

    def __init__(self, name: str = "graph", *, edges: str = "auto") -> None:
        super().__init__(name)
        self._inference = EdgeInference()

    def _blank(self, name: str) -> Graph:
        return AutoGraph(name)
