"""Device-side control flow: conditional nodes, :class:`SetConditionNode` and their builders (GPU-free).

A :class:`~cudagraph.Condition` (declared by :meth:`Graph.condition <cudagraph.Graph.condition>`)
selects what the bodies of an if, if/else, while or switch node run on the GPU.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import DefinitionError, ForeignNodeError, OperandError
from ..condition import PREDICATE_DTYPES, PREDICATE_OPS, Condition
from ..core import After, GraphCore, builder
from ..node import Node, _short

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = [
    "MAX_SWITCH_CASES",
    "ConditionalBuilders",
    "ConditionalNode",
    "IfElseNode",
    "IfNode",
    "SetConditionNode",
    "SwitchNode",
    "WhileNode",
]

#: The most cases :meth:`Graph.switch <cudagraph.Graph.switch>` accepts. The driver documents no
#: bound for a switch beyond its ``unsigned int`` size; each case is a body graph of the definition.
MAX_SWITCH_CASES = 1 << 16


class ConditionalNode(Node):
    """A conditional node: its bodies run on the GPU according to a :class:`~cudagraph.Condition`.

    Made by :meth:`Graph.if_ <cudagraph.Graph.if_>`, :meth:`~cudagraph.Graph.if_else`,
    :meth:`~cudagraph.Graph.while_` and :meth:`~cudagraph.Graph.switch`. The
    bodies are :class:`~cudagraph.Graph` objects of their own, filled with the
    same builders (``node.body.kernel(...)``) and nestable.

    Attributes
    ----------
    cond : Condition
        The condition whose value selects what runs.
    bodies : tuple of Graph
        Every body, in driver order.
    """

    __slots__ = ("cond", "bodies")
    kind = "conditional"
    body_fields = ("bodies",)
    conditional_bodies = True
    in_conditional_body = True
    dot_style = 'shape=diamond style=filled fillcolor="#e0cffc"'
    mermaid_shape = ('{"', '"}')
    cond: Any
    bodies: tuple[Graph, ...]

    def describe(self) -> str:
        sizes = "/".join(str(len(b._nodes)) for b in self.bodies)
        return f"cond={self.cond.name!r} bodies={len(self.bodies)} ({sizes} nodes)"

    def update(self, **changes: Any) -> Node:
        """Conditional nodes are changed through their bodies; no keyword is accepted."""
        if changes:
            raise DefinitionError(
                f"{self.label}: a {self.kind} node has no parameters to update "
                f"(got {', '.join(sorted(changes))}); change its bodies' nodes instead"
            )
        return self

    def _check_bodies(self, where: str) -> None:
        """The kind's checks of its bodies, run by ``validate()`` (``where``: the graph, for messages)."""

    def body_title(self, i: int) -> str:
        """The title of body ``i`` in pictures: the value of the condition that selects it."""
        return f"{self.name}: case {self.cond.name} == {i}"


class IfNode(ConditionalNode):
    """Runs :attr:`body` once when the condition is non-zero."""

    __slots__ = ()
    kind = "if"

    def body_title(self, i: int) -> str:
        """The title of the body in pictures."""
        return f"{self.name}: if {self.cond.name} != 0"

    @property
    def body(self) -> Graph:
        """The graph run when the condition is non-zero."""
        return self.bodies[0]

    @property
    def then(self) -> Graph:
        """Alias of :attr:`body`."""
        return self.bodies[0]


class IfElseNode(ConditionalNode):
    """Runs :attr:`then` when the condition is non-zero, else :attr:`else_`."""

    __slots__ = ()
    kind = "if_else"

    def body_title(self, i: int) -> str:
        """The title of body ``i`` (0: then, 1: else) in pictures."""
        return f"{self.name}: {'if' if i == 0 else 'else'} ({self.cond.name} {'!=' if i == 0 else '=='} 0)"

    @property
    def then(self) -> Graph:
        """The graph run when the condition is non-zero."""
        return self.bodies[0]

    @property
    def else_(self) -> Graph:
        """The graph run when the condition is zero."""
        return self.bodies[1]


class WhileNode(ConditionalNode):
    """Runs :attr:`body` again and again while the condition is non-zero (tested before each pass)."""

    __slots__ = ()
    kind = "while"
    dot_style = 'shape=diamond style="filled,bold" fillcolor="#e0cffc"'

    def _check_bodies(self, where: str) -> None:
        if not self.bodies[0]._nodes:
            raise DefinitionError(
                f"{self.label} of {where} has an empty body: the loop could never end; add the "
                "work and a node that sets the condition to 0"
            )

    def body_title(self, i: int) -> str:
        """The title of the loop body in pictures."""
        return f"{self.name}: while {self.cond.name} != 0"

    @property
    def body(self) -> Graph:
        """The loop body; one of its kernels must eventually set the condition to 0."""
        return self.bodies[0]


class SwitchNode(ConditionalNode):
    """Runs ``cases[v]`` where ``v`` is the condition's value (nothing when ``v >= len(cases)``)."""

    __slots__ = ()
    kind = "switch"

    @property
    def cases(self) -> tuple[Graph, ...]:
        """The case bodies, by condition value."""
        return self.bodies


class SetConditionNode(Node):
    """A built-in kernel: ``cond = (*ptr <op> value)``, no user device code needed.

    Attributes
    ----------
    cond : Condition
        The condition it sets.
    ptr : int, Param or AllocNode
        The device scalar it reads.
    op : str
        One of ``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``.
    value : numpy scalar
        The value compared against, of :attr:`dtype`.
    dtype : numpy.dtype
        The scalar type at ``ptr``.
    """

    __slots__ = ("cond", "ptr", "op", "value", "dtype", "_keep")
    kind = "set_condition"
    condition_fields = ("cond",)
    pointer_fields = ("ptr",)
    in_conditional_body = True
    dot_style = 'shape=box style="rounded,filled,dashed" fillcolor="#e0cffc"'
    cond: Any
    ptr: Any
    op: str
    value: Any
    dtype: Any
    _keep: tuple[Any, ...]

    def describe(self) -> str:
        return f"{self.cond.name} = *{_short(self.ptr)} {self.op} {self.value!r} ({self.dtype})"

    def update(self, **changes: Any) -> Node:
        """Not supported: build a new node instead."""
        raise DefinitionError(f"{self.label}: a set_condition node cannot be updated; add a new one")


class ConditionalBuilders(GraphCore):
    """The control-flow builders of :class:`~cudagraph.Graph`: conditions, if/else, while, switch, set_condition."""

    __slots__ = ()

    def condition(self, default: int | bool | None = None, *, name: str | None = None) -> Condition:
        """Declare a condition for conditional nodes.

        Parameters
        ----------
        default : int or bool, optional
            Assigned at the start of every launch (``CU_GRAPH_COND_ASSIGN_DEFAULT``);
            ``None`` (default) leaves the value to the kernels that set it.
            ``default=1`` makes a while loop run its first pass.
        name : str, optional
            A label (defaults to ``"cond<i>"``).

        Returns
        -------
        Condition
            Pass it to :meth:`if_`, :meth:`if_else`, :meth:`while_`,
            :meth:`switch` and :meth:`set_condition`, or to a kernel as a
            ``cudaGraphConditionalHandle`` argument.

        Raises
        ------
        OperandError
            ``default`` is not an int.
        DefinitionError
            ``default`` does not fit in 32 unsigned bits.
        """
        index = len(self._conditions)
        label = name or f"cond{index}"
        what = f"condition#{index} {label!r}"
        if default is not None:
            if isinstance(default, (bool, np.bool_)):
                default = int(default)
            try:
                default = operator.index(default)
            except Exception:  # TypeError, or whatever a user __index__ raises
                raise OperandError(f"{what}: default must be an int or None, got {type(default).__name__}") from None
            if not 0 <= default < 1 << 32:
                raise DefinitionError(f"{what}: default {default} does not fit in 32 unsigned bits")
        if not isinstance(label, str):
            raise OperandError(f"{what}: name must be a str")
        cond = Condition(self, index, label, default)  # type: ignore[arg-type]  # every GraphCore is a Graph
        self._conditions.append(cond)
        return cond

    @property
    def conditions(self) -> tuple[Condition, ...]:
        """The conditions declared by this graph."""
        return tuple(self._conditions)

    @property
    def owner(self) -> ConditionalNode | None:
        """The conditional node whose body this graph is, or ``None``."""
        return self._owner

    def _check_condition(self, cond: Any, what: str) -> Condition:
        if not isinstance(cond, Condition):
            raise OperandError(f"{what}: expected a Condition from Graph.condition(), got {type(cond).__name__}")
        g: GraphCore | None = self
        while g is not None:
            if g is cond.graph:
                return cond
            g = g._owner.graph if g._owner is not None else None
        raise ForeignNodeError(
            f"{what}: {cond.label} belongs to Graph {cond.graph.name!r}; a condition is used in the graph "
            f"that declared it or in the conditional bodies inside that graph, not in Graph {self.name!r}"
        )

    def _conditional(self, cls: Any, kind: str, cond: Any, suffixes: list[str], after: After, name: str | None) -> Any:
        what = self._what(kind, name)
        self._check_condition(cond, what)
        if cond._nodes:
            other = cond._nodes[0]
            raise DefinitionError(
                f"{what}: {cond.label} already drives {other.label} of Graph {other.graph.name!r}; the driver "
                "ties a condition to one conditional node: declare another condition"
            )
        label = name or kind
        node = cls.__new__(cls)
        node.cond = cond
        bodies = []
        for suffix in suffixes:
            body = self._blank(f"{self.name}/{label}.{suffix}")
            body._params = self._params  # parameters declared in a body are the parent's
            body._owner = node
            bodies.append(body)
        node.bodies = tuple(bodies)
        self._place(node, after, what, label)
        cond._nodes.append(node)
        self._special += 1
        return node

    @builder
    def if_(self, cond: Condition, *, after: After = None, name: str | None = None) -> IfNode:
        """Add an if node: ``node.body`` runs once when ``cond`` is non-zero.

        Parameters
        ----------
        cond : Condition
            From :meth:`condition` (of this graph or of a graph whose
            conditional body this graph is).
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label.

        Returns
        -------
        IfNode
            Fill ``node.body`` (a :class:`Graph`) with the usual builders.

        Raises
        ------
        OperandError
            ``cond`` is not a Condition.
        ForeignNodeError
            ``cond`` belongs to a graph that does not enclose this one.
        """
        node: IfNode = self._conditional(IfNode, "if", cond, ["body"], after, name)
        return node

    @builder
    def if_else(self, cond: Condition, *, after: After = None, name: str | None = None) -> IfElseNode:
        """Add an if/else node: ``node.then`` runs when ``cond`` is non-zero, else ``node.else_``.

        Needs a CUDA 12.8 or newer driver. See :meth:`if_` for the parameters.

        Returns
        -------
        IfElseNode
        """
        node: IfElseNode = self._conditional(IfElseNode, "if_else", cond, ["then", "else"], after, name)
        return node

    @builder
    def while_(self, cond: Condition, *, after: After = None, name: str | None = None) -> WhileNode:
        """Add a while node: ``node.body`` runs again and again while ``cond`` is non-zero.

        The condition is tested before every pass (so ``default=1`` or a
        kernel before the loop must set it for a first pass), and a node of
        the body must set it to 0 to end the loop: a kernel calling
        ``cudaGraphSetConditional`` or a :meth:`set_condition` node. See
        :meth:`if_` for the parameters.

        Returns
        -------
        WhileNode
        """
        node: WhileNode = self._conditional(WhileNode, "while", cond, ["body"], after, name)
        return node

    @builder
    def switch(self, cond: Condition, n: int, *, after: After = None, name: str | None = None) -> SwitchNode:
        """Add a switch node: ``node.cases[v]`` runs where ``v`` is the value of ``cond``.

        Nothing runs when ``v >= n``. Needs a CUDA 12.8 or newer driver.

        Parameters
        ----------
        cond : Condition
            The selector.
        n : int
            The number of cases, 1 to :data:`MAX_SWITCH_CASES` (65536). The
            driver documents no limit beyond its 32-bit ``size`` field; every
            case is a body graph held by the definition, so cudagraph bounds
            the count.

        Returns
        -------
        SwitchNode

        Raises
        ------
        OperandError
            ``n`` is not an int.
        DefinitionError
            ``n`` is smaller than 1 or larger than :data:`MAX_SWITCH_CASES`.
        """
        what = self._what("switch", name)
        if isinstance(n, bool):
            raise OperandError(f"{what}: the number of cases must be an int, got bool")
        try:
            count = operator.index(n)
        except Exception:  # TypeError, or whatever a user __index__ raises
            raise OperandError(f"{what}: the number of cases must be an int, got {type(n).__name__}") from None
        if count < 1:
            raise DefinitionError(f"{what}: a switch needs at least one case, got {count}")
        if count > MAX_SWITCH_CASES:
            raise DefinitionError(
                f"{what}: {count} cases exceed cudagraph's limit of {MAX_SWITCH_CASES} cases per switch "
                "(each case is a body graph)"
            )
        cases = [f"case{i}" for i in range(count)]
        node: SwitchNode = self._conditional(SwitchNode, "switch", cond, cases, after, name)
        return node

    @builder
    def set_condition(
        self,
        cond: Condition,
        ptr: Any,
        op: str,
        value: Any,
        dtype: Any = None,
        *,
        after: After = None,
        name: str | None = None,
    ) -> SetConditionNode:
        """Add a built-in kernel that sets ``cond = (*ptr <op> value)``; no device code needed.

        For example ``g.set_condition(cond, residual, ">", 1e-6, np.float32)``
        at the end of a while body keeps looping while the device scalar
        ``residual`` is above 1e-6. The kernels are compiled once per process
        (NVRTC, or the PTX shipped with cudagraph) and cached.

        Parameters
        ----------
        cond : Condition
            The condition to set.
        ptr : Buffer, array, int, Param or AllocNode
            Device memory holding the scalar.
        op : {"<", "<=", ">", ">=", "==", "!="}
            The comparison.
        value : number
            The right-hand side, converted to ``dtype``.
        dtype : numpy dtype, optional
            float32, float64, int32, int64, uint32 or uint64; defaults to the
            dtype of a numpy ``value``, else of an array ``ptr``.
        after : Node or sequence of Node, optional
            Dependencies.
        name : str, optional
            A label.

        Returns
        -------
        SetConditionNode

        Raises
        ------
        OperandError
            Bad condition, pointer, operator or value.
        DefinitionError
            No dtype could be chosen, or ``ptr`` is smaller than one scalar.
        """
        what = self._what("set_condition", name)
        self._check_condition(cond, what)
        if type(op) is not str or op not in PREDICATE_OPS:
            raise OperandError(f"{what}: op must be one of {', '.join(PREDICATE_OPS)}; got {op!r}")
        p, keep, size = self._pointer(ptr, what, "ptr")
        if dtype is None:
            if isinstance(value, np.generic):
                dtype = value.dtype
            else:
                iface = getattr(ptr, "__cuda_array_interface__", None) or getattr(ptr, "__array_interface__", None)
                if iface is None:
                    raise DefinitionError(f"{what}: dtype is required (the scalar type at ptr)")
                dtype = iface.get("typestr")
        try:
            dt = np.dtype(dtype)
        except Exception:
            raise OperandError(f"{what}: dtype {dtype!r} is not a numpy dtype") from None
        if dt not in PREDICATE_DTYPES:
            raise OperandError(
                f"{what}: dtype {dt} is not supported; use one of {', '.join(str(d) for d in PREDICATE_DTYPES)}"
            )
        if isinstance(value, (bool, np.bool_, str, bytes, np.str_, np.bytes_)) or value is None or np.ndim(value) != 0:
            raise OperandError(f"{what}: value must be a number (a scalar), got {type(value).__name__}")
        if dt.kind in "iu":
            try:
                ivalue = operator.index(value)
            except Exception:
                raise OperandError(f"{what}: value must be an integer for dtype {dt}, got {value!r}") from None
            info = np.iinfo(dt)
            if not info.min <= ivalue <= info.max:
                raise OperandError(f"{what}: value {ivalue} does not fit in {dt}")
            v = dt.type(ivalue)
        else:
            try:
                with np.errstate(over="ignore"):
                    v = dt.type(value)
                finite = bool(np.isfinite(value))
            except Exception:
                raise OperandError(f"{what}: value must be a number, got {type(value).__name__}") from None
            if not isinstance(v, np.generic):
                raise OperandError(f"{what}: value must be a number (a scalar), got {type(value).__name__}")
            if finite and not np.isfinite(v):
                raise OperandError(f"{what}: value {value!r} overflows {dt} (it would compare against {v})")
        if size is not None and size < dt.itemsize:
            raise DefinitionError(f"{what}: ptr holds {size} bytes, less than one {dt} ({dt.itemsize} bytes)")
        node = SetConditionNode.__new__(SetConditionNode)
        node.cond, node.ptr, node.op, node.value, node.dtype = cond, p, op, v, dt
        node._keep = (keep,)
        self._place(node, after, what, name or "set_condition")
        self._note_late(p)
        self._special += 1
        return node
