"""cuda.core 1.2's ``GraphBuilder`` (its stream-capture builder), built explicitly on a cudagraph Graph.

Where cuda.core records a stream, a builder here holds a :class:`~cudagraph.Path`: every op
(``cudagraph.compat.launch(gb, ...)``, ``cudagraph.memcpy(gb, ...)``, ``gb.callback(fn)``,
``gb.embed(child)``, a conditional) becomes a node after the builder's last op. ``split`` makes
paths that start after that same op; ``GraphBuilder.join`` merges their ends, so that the next op
depends on all of them (no node is added, as under capture). Nothing touches the driver until
``complete()``, which builds the graph explicitly, or until a library asks for the builder's stream
(``gb.stream``: cuda.core's memory resources and ``Buffer`` calls given ``stream=gb``). From then until
``end_building()`` the builder records as cuda.core's does, by stream capture: the launches into it and
everything issued on that stream are captured, and the recording becomes one node after the builder's
last op when building ends (kept as it was recorded where it holds graph memory, whose addresses the
program holds).

A builder is made by ``Device().create_graph_builder()`` (or ``GraphBuilder()``: a primary
builder), by ``split`` (a fork, which ends by being joined) or by a conditional (a body builder,
which builds one body of the conditional node). A primary or body builder goes from *not
started* to *building* (``begin_building``) to *ended* (``end_building``); a fork is building
until it is joined, which closes it.
"""

from __future__ import annotations

import operator
from typing import Any

from ...definition.graph import Graph
from ...definition.path import Path
from ...driver.devices import cuda_core_device
from ...errors import DefinitionError, OperandError, StateError
from ...materialize.capture_region import abandon_capture, begin_capture, end_capture_into
from ..launch import launch as _cg_launch
from ..launch import register_path_target
from .common import (
    DRIVER_KERNEL_TYPES,
    DriverRefusal,
    GraphCondition,
    add_callback,
    add_conditional,
    add_kernel,
    instantiate,
    kernel_args,
    write_dot,
)
from .definition import GraphDefinition
from .packing import convert_for, pack_graph

try:  # a compat builder is one of cuda.core's, so that cuda.core's calls take it as their stream (stream=gb)
    from cuda.core.graph import GraphBuilder as _CoreGraphBuilder
except Exception:  # pragma: no cover - cuda.core not importable: a plain class
    _CoreGraphBuilder = object

__all__ = ["BUILDING", "MAX_SPLIT", "GraphBuilder"]

# Kinds of builder.
_PRIMARY, _FORKED, _BODY = 0, 1, 2
_KIND_TEXT = {_PRIMARY: "primary", _FORKED: "forked", _BODY: "conditional body"}
_MADE_BY = {_PRIMARY: "Device.create_graph_builder()", _FORKED: "split()", _BODY: "a conditional"}

# States of a builder.
_NOT_STARTED, _ENDED, _CLOSED = 0, 2, 3
#: The state of a builder between ``begin_building()`` and ``end_building()``.
BUILDING = 1
#: Building, with its stream under capture (``gb.stream`` was asked for): launches go into that stream.
_CAPTURING = 4
#: The states of a builder that is building.
_OPEN = (BUILDING, _CAPTURING)
_STATE_TEXT = {
    _NOT_STARTED: "has not begun building (call begin_building() first)",
    BUILDING: "is building (call end_building() first)",
    _CAPTURING: "is building, its stream under capture (call end_building() first)",
    _ENDED: "has ended building (end_building() was called); nothing more is added to it",
    _CLOSED: "is closed (by close(), or joined into another builder by GraphBuilder.join)",
}
#: The build modes cuda.core takes (an explicit build captures nothing: all three build the same graph).
_MODES = ("relaxed", "global", "thread_local")
_STATE_NAME = {
    _NOT_STARTED: "not started",
    BUILDING: "building",
    _CAPTURING: "building (capturing)",
    _ENDED: "ended",
    _CLOSED: "closed",
}
#: The most builders one :meth:`GraphBuilder.split` makes (a guard against a runaway count: each
#: fork is an object, and a count of 2**70 would fill the memory before failing).
MAX_SPLIT = 1 << 16


#: cuda.core's own first sentence for a call a builder's state refuses, by state; compat's messages start with it (a
#: ported program may match it) and go on with compat's own words.
_CORE_TEXT = {
    _NOT_STARTED: "Graph has not finished building.",
    BUILDING: "Graph has not finished building.",
    _CAPTURING: "Graph has not finished building.",
    _CLOSED: "Graph builder has been closed.",
}


def _state_error(where: str, builder: GraphBuilder, core: str | None = None) -> StateError:
    """A call the builder's state does not allow: a ``RuntimeError``, as cuda.core raises there, whose message
    starts with cuda.core's (``core``, else the one of the builder's state)."""
    first = core if core is not None else _CORE_TEXT.get(builder._state)
    text = f"{where}: the GraphBuilder {_STATE_TEXT[builder._state]}"
    return StateError(text if first is None else f"{first} ({text})")


class GraphBuilder(_CoreGraphBuilder):  # type: ignore[misc, valid-type]
    """cuda.core's ``GraphBuilder``, built explicitly: a cudagraph :class:`~cudagraph.Graph` underneath.

    Put work into it with ``cudagraph.compat.launch(gb, config, kernel, *args)`` (cuda.core's
    ``launch``) or any of ``cudagraph.launch/memcpy/memset/host/record/wait(gb, ...)``; each op
    depends on the builder's previous one. The pre-1.0 names ``create_conditional_handle``,
    ``if_cond`` and ``add_child`` are kept as aliases of ``create_condition``, ``if_then`` and
    ``embed``.

    Asked for its :attr:`stream` while building (a primary builder), it records by stream capture from
    then until :meth:`end_building`, as cuda.core's does: ``GraphMemoryResource.allocate(n, stream=gb)``,
    ``buffer.copy_from(src, stream=gb)`` and launches into the builder are captured in order, and become
    one node after the builder's last op. Unlike cuda.core's, :meth:`complete` returns an
    :class:`~cudagraph.Executable` (``launch(stream)``, ``upload(stream)``, ``close()``), and a
    child graph is referenced, not copied. Anything it cannot do raises
    :class:`~cudagraph.errors.OperandError` naming the call and the argument, and adds nothing.
    """

    __slots__ = (
        "_kind",
        "_state",
        "_graph",
        "_path",
        "_owner",
        "_root",
        "_forks",
        "_bodies",
        "_view",
        "_mode",
        "_capture",
    ) + (("__weakref__",) if _CoreGraphBuilder is object else ())  # (cuda.core's class has the weak reference slot)

    def __init__(self) -> None:
        self._kind = _PRIMARY
        self._state = _NOT_STARTED
        self._graph: Graph | None = None  # made by begin_building()
        self._path: Path | None = None  # while building
        # The builder whose end_building() ends this builder's graph (itself, or for a fork the builder it
        # came from), and the primary builder of the whole tree.
        self._owner: GraphBuilder = self
        self._root: GraphBuilder = self
        self._forks: list[GraphBuilder] = []  # on an owner: its forks not joined yet
        self._bodies: list[GraphBuilder] = []  # on a root: every body builder made under it
        self._view: GraphDefinition | None = None
        self._mode = "relaxed"  # begin_building's, which a capture of the builder's stream is made in
        self._capture: Any = None  # the cuda.core Stream under capture, while _state is _CAPTURING

    @classmethod
    def _made(cls, kind: int, state: int, graph: Graph, path: Path | None, owner: GraphBuilder | None) -> GraphBuilder:
        b = cls()
        b._kind, b._state, b._graph, b._path = kind, state, graph, path
        if owner is not None:
            b._owner, b._root = owner, owner._root
        return b

    # ------------------------------------------------------------------------------------ properties
    @property
    def is_building(self) -> bool:
        """``True`` between :meth:`begin_building` and :meth:`end_building` (for a fork: until joined)."""
        return self._state in _OPEN

    @property
    def is_join_required(self) -> bool:
        """``True`` for a builder made by :meth:`split`: it must be joined before building ends."""
        return self._kind == _FORKED

    @property
    def is_closed(self) -> bool:
        """``True`` once closed (by :meth:`close`, or joined into another builder)."""
        return self._state == _CLOSED

    @property
    def graph(self) -> Graph | None:
        """The cudagraph definition underneath (``None`` before ``begin_building()`` and once closed)."""
        return self._graph

    @property
    def graph_definition(self) -> GraphDefinition:
        """The graph as a :class:`~cudagraph.compat.GraphDefinition` (the same graph, not a copy).

        As cuda.core gives it: for a primary builder once building has ended; for a body builder
        before ``begin_building()`` and after ``end_building()``; never while building, never for a
        fork (ask the builder it was split from), never once closed (a view taken before stays
        valid). Refused with a :class:`~cudagraph.errors.StateError` (a ``RuntimeError``).
        """
        call = "compat GraphBuilder.graph_definition"
        if self._kind == _PRIMARY and self._state == _NOT_STARTED:
            raise _state_error(call, self, "graph_definition is not available before begin_building().")
        if self._state == _CLOSED or self._graph is None:
            raise _state_error(call, self)
        if self._kind == _FORKED:
            raise StateError(
                f"{call}: a builder made by split() (a forked builder) shares the graph of the builder it was split "
                "from; use that builder's graph_definition"
            )
        if self._state in _OPEN:
            raise StateError(f"{call}: the GraphBuilder is building (a capture is in progress): end_building() first")
        if self._view is None:
            self._view = GraphDefinition(self._graph)
        return self._view

    @property
    def stream(self) -> Any:
        """The builder's stream, under capture: asked for while a primary builder is building, it makes the
        builder record as cuda.core's does until :meth:`end_building` (see the class).

        Returns
        -------
        cuda.core Stream
            A stream of the current device, capturing in the builder's mode (``begin_building(mode)``);
            cuda.core's calls given ``stream=gb`` take it.

        Raises
        ------
        StateError
            The builder is not building.
        OperandError
            A builder made by ``split()`` or by a conditional (they have no stream here).
        """
        if self._state == _CAPTURING:
            return self._capture
        call = "compat GraphBuilder.stream"
        if self._state != BUILDING:
            raise _state_error(call, self)
        if self._kind != _PRIMARY:
            raise OperandError(
                f"{call}: a builder made by {_MADE_BY[self._kind]} has no stream here (only a builder made by "
                "Device.create_graph_builder() records by capture); pass the builder itself as the target: "
                "cudagraph.compat.launch(gb, ...), cudagraph.memcpy(gb, ...)"
            )
        stream = cuda_core_device(None).create_stream()
        begin_capture(stream.handle, self._mode)
        self._capture, self._state = stream, _CAPTURING
        return stream

    def __cuda_stream__(self) -> tuple[int, int]:
        """The stream protocol of :attr:`stream` (asking for it starts the capture)."""
        answer: tuple[int, int] = self.stream.__cuda_stream__()
        return answer

    def _end_capture(self) -> None:
        """End the capture of the builder's stream: what it recorded becomes a node after the last op."""
        stream, self._capture, self._state = self._capture, None, BUILDING
        assert self._path is not None
        end_capture_into(stream.handle, self._path, "captured")

    def __del__(self) -> None:
        if getattr(self, "_state", None) == _CAPTURING:  # dropped while its stream is captured: end the capture
            try:
                abandon_capture(self._capture.handle)
            except Exception:  # pragma: no cover - the interpreter is shutting down
                pass

    def _get_conditional_context(self, *args: Any, **kwargs: Any) -> Any:
        raise OperandError("compat GraphBuilder: a condition is made by GraphBuilder.create_condition()")

    # ------------------------------------------------------------------------------------ lifecycle
    def begin_building(self, mode: str = "relaxed") -> GraphBuilder:
        """Begin building; returns the builder.

        Parameters
        ----------
        mode : str
            ``"relaxed"`` (the default), ``"global"`` or ``"thread_local"``, as cuda.core takes them. The
            last two forbid unsafe CUDA calls while a stream is captured; an explicit build captures
            nothing, so all three build the same graph.

        Raises
        ------
        StateError
            The builder is building, has ended (cuda.core cannot resume building either) or is closed.
        DefinitionError
            Another mode (a ``ValueError``, as cuda.core's).
        """
        call = "GraphBuilder.begin_building"
        if self._state != _NOT_STARTED:
            core = "Graph builder is already building." if self._state in _OPEN else None
            raise _state_error(f"compat {call}", self, core)
        if mode is not None and type(mode) is not str:  # (compared with strings: an array's answer has no truth value)
            raise OperandError(
                f"compat {call}: mode: expected 'relaxed', 'global' or 'thread_local', got {type(mode).__name__}"
            )
        if mode not in _MODES:
            raise DefinitionError(
                f"Unsupported build mode: {mode!r} (compat {call}: mode: expected 'relaxed', 'global' or "
                "'thread_local')"
            )
        if self._kind == _PRIMARY:
            self._graph = Graph("GraphBuilder")
        assert self._graph is not None  # a body builder has its body from the start
        self._path = Path(self._graph, [])
        self._state = BUILDING
        self._mode = mode if mode is not None else "relaxed"
        return self

    def end_building(self) -> GraphBuilder:
        """End building; returns the builder. Every builder split from it must have been joined."""
        call = "compat GraphBuilder.end_building"
        if self._state == _CAPTURING:
            self._end_capture()
        self._building("end_building")
        # What the driver refuses under cuda.core (ending the capture of a forked stream, or with streams not joined).
        if self._kind == _FORKED:
            raise DriverRefusal(f"{call}: a builder made by split() is not ended: join it with GraphBuilder.join(...)")
        if self._forks:
            raise DriverRefusal(
                f"{call}: {len(self._forks)} builder(s) split from this one are not joined; "
                "GraphBuilder.join(...) them first"
            )
        self._state = _ENDED
        self._path = None
        return self

    def complete(self, options: Any = None) -> Any:
        """Build the graph explicitly and instantiate it.

        Parameters
        ----------
        options : GraphCompleteOptions, optional
            cuda.core's (or :class:`~cudagraph.compat.GraphCompleteOptions`).

        Returns
        -------
        Executable
            ``launch(stream)``, ``upload(stream)``, ``close()``, as cuda.core's ``Graph``.
        """
        call = "compat GraphBuilder.complete"
        if self._kind == _FORKED and self._state in _OPEN:  # (cuda.core: "Graph has not finished building")
            raise StateError(f"{call}: a builder made by split() has not finished building: join it")
        if self._kind != _PRIMARY and self._state != _CLOSED:
            raise OperandError(
                f"{call}: a builder made by {_MADE_BY[self._kind]} is completed with the graph it belongs to: "
                "complete() the builder made by Device.create_graph_builder()"
            )
        if self._state != _ENDED or self._graph is None:
            raise _state_error(call, self)
        self._no_open_bodies(call)
        return instantiate(self._graph, options)

    #: The class of ``exe.update(...)``'s refusal of another topology: cuda.core leaves that to the driver, whose
    #: ``CUDAError`` a ported program catches (a DriverRefusal is one, and a DefinitionError).
    _topology_refusal = DriverRefusal

    def _update_source(self) -> Graph:
        """The graph ``exe.update(builder)`` makes the executable run: only once building has ended (cuda.core:
        "Graph has not finished building")."""
        if self._state != _ENDED or self._graph is None:
            raise DefinitionError(
                "Graph has not finished building (compat Executable.update: the GraphBuilder has not ended; "
                "end_building() first)"
            )
        self._no_open_bodies("compat Executable.update")
        pack_graph(self._graph)
        return self._graph

    def close(self) -> None:
        """Close the builder (a fork that is not joined leaves its nodes in the graph; a capture of its stream
        in progress is ended, and what it recorded dropped)."""
        stream, self._capture = self._capture, None
        try:
            if self._state == _CAPTURING:
                abandon_capture(stream.handle)
        finally:  # closed whatever ending the capture answered
            self._close()

    def _close(self) -> None:
        if self._kind == _FORKED and self._state != _CLOSED:
            forks = self._owner._forks
            for i, f in enumerate(forks):
                if f is self:
                    del forks[i]
                    break
        self._state = _CLOSED
        self._graph = None
        self._path = None
        self._view = None

    def debug_dot_print(self, path: str, options: Any = None) -> None:
        """Write the graph in Graphviz dot to ``path`` once building has ended (``options`` may set no flag)."""
        if self._state != _ENDED or self._graph is None:
            raise _state_error("compat GraphBuilder.debug_dot_print", self)
        write_dot(self._graph, path, options, "GraphBuilder.debug_dot_print")

    # ------------------------------------------------------------------------------------ fork / join
    def split(self, count: int) -> tuple[GraphBuilder, ...]:
        """``count`` builders that start after this builder's last op: this one first, then new forks.

        Each fork must be joined back (:meth:`join`) before the builder it came from ends. ``count``
        is at most :data:`MAX_SPLIT` (a larger one is refused before any fork is made).
        """
        call = "compat GraphBuilder.split"
        try:
            n = operator.index(count)
        except TypeError:
            raise OperandError(f"{call}: count: expected an int >= 2, got {type(count).__name__}") from None
        if n < 2:  # (a ValueError, as cuda.core's)
            raise DefinitionError(f"Invalid split count: expecting >= 2, got {n} ({call}: count)")
        if n > MAX_SPLIT:
            raise OperandError(f"{call}: count: at most {MAX_SPLIT} builders at once, got {n}")
        p = self._building("split", "Graph builder must be building before it can be split.")
        forks = tuple(
            GraphBuilder._made(_FORKED, BUILDING, p.graph, Path(p.graph, list(p._tail)), self._owner)
            for _ in range(n - 1)
        )
        self._owner._forks.extend(forks)
        return (self, *forks)

    @staticmethod
    def join(*graph_builders: GraphBuilder) -> GraphBuilder:
        """Join builders of one graph: the first that is not a fork (else the first) continues after all of them.

        The others are closed. No node is added: the next op depends on every builder's last op.
        """
        call = "compat GraphBuilder.join"
        for i, b in enumerate(graph_builders):
            if type(b) is not GraphBuilder:
                raise OperandError(
                    f"{call}: graph_builders[{i}]: expected a compat GraphBuilder, got {type(b).__name__}"
                )
        if len(graph_builders) < 2:
            raise DefinitionError(  # (a ValueError, as cuda.core's)
                f"Must join with at least two graph builders ({call}: graph_builders: got {len(graph_builders)})"
            )
        first = graph_builders[0]
        for i, b in enumerate(graph_builders):
            if b._state != BUILDING:
                raise _state_error(f"{call}: graph_builders[{i}]", b, _capture_text(b))
            for j in range(i):
                if graph_builders[j] is b:
                    raise OperandError(f"{call}: graph_builders[{i}]: the same builder as graph_builders[{j}]")
            if b._graph is not first._graph:
                other, mine = (getattr(x._graph, "name", None) for x in (b, first))
                raise OperandError(
                    f"{call}: graph_builders[{i}]: a builder of another graph (Graph {other!r}, not {mine!r}); "
                    "only builders split from one builder are joined"
                )
        root = next((b for b in graph_builders if b._kind != _FORKED), first)
        assert root._path is not None
        tail = list(root._path._tail)
        for b in graph_builders:
            if b is not root:
                assert b._path is not None
                tail += [n for n in b._path._tail if not any(n is t for t in tail)]
        for b in graph_builders:
            if b is not root:
                b.close()
        root._path._tail = tail
        return root

    # ------------------------------------------------------------------------------------ ops
    def _building(self, name: str, core: str | None = None) -> Path:
        """The path of a building builder, or the refusal of ``GraphBuilder.<name>`` (starting with ``core``, where
        cuda.core words it its own way)."""
        p = self._path
        if self._state != BUILDING or p is None:
            raise _state_error(f"compat GraphBuilder.{name}", self, _capture_text(self) or core)
        return p

    def _launch(self, config: Any, kernel: Any, args: tuple[Any, ...]) -> None:
        """``cudagraph.compat.launch(self, config, kernel, *args)``: a kernel node after the last op (a launch into
        the builder's stream while it is captured)."""
        if self._state == _CAPTURING:
            launch_on_stream(self._capture, config, kernel, args)
            return
        p = self._path
        if self._state != BUILDING or p is None:
            raise _state_error("cudagraph.compat.launch: target", self)
        tail = p._tail
        # One predecessor is passed as a node, the definition's fast path.
        after: Any = tail[0] if len(tail) == 1 else (list(tail) if tail else None)
        node = add_kernel(p.graph, after, config, kernel, args, "compat.launch")
        p._tail = [node]
        p._last = node

    def create_condition(self, default_value: int | None = None) -> GraphCondition:
        """A condition variable for :meth:`if_then`, :meth:`if_else`, :meth:`while_loop`, :meth:`switch`.

        Set it on the GPU with ``cudaGraphSetConditional`` from a kernel given the condition as an
        argument (see :data:`cudagraph.CONDITIONAL_SNIPPET`); ``default_value`` is assigned at the
        start of every launch.
        """
        p = self._building("create_condition")
        return GraphCondition(p.graph.condition(default=default_value))

    def _conditional(self, name: str, method: str, condition: Any, *extra: Any) -> tuple[GraphBuilder, ...]:
        p = self._building(name)
        node: Any = add_conditional(f"GraphBuilder.{name}", getattr(p, method), condition, *extra)
        bodies = tuple(GraphBuilder._made(_BODY, _NOT_STARTED, body, None, None) for body in node.bodies)
        for b in bodies:
            b._root = self._root
        self._root._bodies.extend(bodies)
        return bodies

    def if_then(self, condition: GraphCondition) -> GraphBuilder:
        """Add an if node after the last op; returns the builder of its body (``begin_building()`` it)."""
        return self._conditional("if_then", "if_", condition)[0]

    def if_else(self, condition: GraphCondition) -> tuple[GraphBuilder, GraphBuilder]:
        """Add an if/else node after the last op; returns the builders of its two bodies (then, else)."""
        then, else_ = self._conditional("if_else", "if_else", condition)
        return then, else_

    def while_loop(self, condition: GraphCondition) -> GraphBuilder:
        """Add a while node after the last op; returns the builder of its body."""
        return self._conditional("while_loop", "while_", condition)[0]

    def switch(self, condition: GraphCondition, count: int) -> tuple[GraphBuilder, ...]:
        """Add a switch node of ``count`` cases after the last op; returns the builders of its bodies."""
        return self._conditional("switch", "switch", condition, count)

    def embed(self, child: GraphBuilder) -> None:
        """Add the graph of ``child`` (a primary builder that has ended building) as a child graph node."""
        # cuda.core's order and classes: the child's kind (TypeError), the child not finished, then the parent not
        # building (both ValueError).
        call = "compat GraphBuilder.embed"
        if type(child) is not GraphBuilder:
            raise OperandError(f"{call}: child: expected a compat GraphBuilder, got {type(child).__name__}")
        if child._kind == _FORKED and child._state in _OPEN:
            raise DefinitionError(f"{call}: child: a builder made by split() has not finished building")
        if child._kind != _PRIMARY and child._state != _CLOSED:
            raise OperandError(
                f"{call}: child: a builder made by {_MADE_BY[child._kind]} builds part of another graph; embed a "
                "builder made by Device.create_graph_builder()"
            )
        if child._state != _ENDED or child._graph is None:
            raise DefinitionError(f"{call}: child: the GraphBuilder {_STATE_TEXT[child._state]}")
        p = self._path
        if self._state != BUILDING or p is None:
            text = _capture_text(self) or f"the parent GraphBuilder {_STATE_TEXT[self._state]}"
            raise DefinitionError(f"{call}: {text}")
        child._no_open_bodies(f"{call}: child")
        p.child(child._graph)

    def callback(self, fn: Any, *, user_data: Any = None) -> None:
        """Call the Python callable ``fn()``, or the ctypes function pointer ``fn(user_data)``, on the host after
        the last op."""
        add_callback(self._building("callback"), fn, user_data, "GraphBuilder.callback")

    def _no_open_bodies(self, where: str) -> None:
        open_bodies = [b for b in self._bodies if b._state in _OPEN]
        if open_bodies:
            names = ", ".join(repr(b._graph.name) for b in open_bodies if b._graph is not None)
            raise StateError(
                f"{where}: {len(open_bodies)} conditional body builder(s) are still building ({names}); "
                "end_building() them first"
            )

    # The names of cuda.core before 1.0.
    create_conditional_handle = create_condition
    if_cond = if_then
    add_child = embed

    def __repr__(self) -> str:
        n = 0 if self._graph is None else len(self._graph)
        return f"<compat GraphBuilder {_KIND_TEXT[self._kind]}, {_STATE_NAME[self._state]}, {n} nodes>"


def _target_path(builder: GraphBuilder, call: str) -> Path:
    """The path ``cudagraph.<call>(builder, ...)`` adds to, or the refusal naming the target."""
    p = builder._path
    if builder._state != BUILDING or p is None:
        raise _state_error(f"cudagraph.{call}: target", builder, _capture_text(builder))
    return p


def _capture_text(builder: GraphBuilder) -> str | None:
    """Why a call that adds a node by itself is refused while the builder's stream is captured (``None`` when it
    is not)."""
    if builder._state != _CAPTURING:
        return None
    return (
        "the GraphBuilder's stream is under capture (its stream was asked for): until end_building(), work goes "
        "into that stream: cudagraph.compat.launch(gb, ...), or cudagraph.<call>(gb.stream, ...); "
        "conditionals, split(), join(), embed() and callback() are not recorded into a capture here"
    )


def launch_on_stream(stream: Any, config: Any, kernel: Any, args: tuple[Any, ...]) -> None:
    """cuda.core's ``launch(stream, config, kernel, *args)``: arguments packed as cuda.core packs them."""
    a = kernel_args(args, now=True)
    if type(kernel).__name__ not in DRIVER_KERNEL_TYPES:
        _cg_launch(stream, config, kernel, *a)  # (a foreign kernel: cudagraph.launch converts it, then packs)
    else:
        _cg_launch(stream, config, kernel, *convert_for(kernel, a))


register_path_target(GraphBuilder, _target_path)
