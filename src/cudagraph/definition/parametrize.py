"""Turning addresses into parameter uses: :meth:`Graph.parametrize <cudagraph.Graph.parametrize>` (GPU-free).

A graph captured by someone else (PyTorch, CuPy, cuda.core) holds raw
addresses: kernel argument bytes, copy endpoints, fill destinations. Given a
name and the memory behind it, every operand that points into that memory
becomes a use of a pointer :class:`~cudagraph.Param`, at its offset: the
parameter itself at offset 0, a :class:`~cudagraph.definition.param_offset.ParamAt`
elsewhere, and :class:`~cudagraph.definition.param_offset.ParamBytes` inside
kernel-argument bytes (pointers in by-value structs included). The executable
then rebinds the name at launch (``exe.launch(stream, x=new_x)``) through its
prepared bind plans.

Two modes:

- **range** (``g.parametrize(...)``, ``cg.lift(obj, params=...)``): every
  8-byte-aligned 8-byte slot of kernel arguments whose value lies in the range
  is rewritten; a scalar that merely equals such an address is rewritten too,
  so the report says the slots were not verified.
- **exact** (``cg.lift_exact``): the work is captured twice on different
  memory; only the slots whose values moved with the memory by the same
  offset are rewritten (``only=`` here).
"""

from __future__ import annotations

import itertools
import struct
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DefinitionError, OperandError
from .edits import before_edit
from .memory_info import Memory, describe_memory
from .node import Node, bodies_of
from .param import Param
from .param_offset import ParamAt, ParamBytes

if TYPE_CHECKING:
    from .graph import Graph

__all__ = [
    "ParametrizeReport",
    "Parametrizing",
    "Rewrite",
    "SlotKey",
    "keep_alive",
    "moving_slots",
    "param_memory",
    "parametrize",
    "public_fields",
    "walk_nodes",
]

_U64 = struct.Struct("<Q")

#: Where a slot is: ``("args", argument index, byte position)`` or ``(pointer field, None, 0)``.
SlotKey = tuple[str, "int | None", int]

#: ``Graph -> {param name: Memory as captured}``: what binds of a parametrized name are checked against.
_MEMORY: weakref.WeakKeyDictionary[Any, dict[str, Memory]] = weakref.WeakKeyDictionary()
#: ``Graph -> [ParametrizeReport]``: every parametrization of a definition, in order.
_REPORTS: weakref.WeakKeyDictionary[Any, list[ParametrizeReport]] = weakref.WeakKeyDictionary()
#: ``Graph -> [objects]``: sources kept alive with a definition (a captured graph's memory pool).
_KEEP: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()

#: The ``CUgraphNodeParams`` field read for each opaque driver node type (the one valid union member).
_OPAQUE_FIELDS = {
    "MEMCPY": "memcpy",
    "MEMSET": "memset",
    "MEM_ALLOC": "alloc",
    "MEM_FREE": "free",
    "BATCH_MEM_OP": "memOp",
    "EXT_SEMAS_SIGNAL": "extSemSignal",
    "EXT_SEMAS_WAIT": "extSemWait",
    "CONDITIONAL": "conditional",
    "HOST": "host",
}


def param_memory(graph: Any) -> dict[str, Memory]:
    """``{name: Memory}`` of the parameters :func:`parametrize` made on ``graph`` (empty if none)."""
    return _MEMORY.get(graph, {})


def keep_alive(graph: Any, obj: Any) -> None:
    """Keep ``obj`` alive as long as ``graph`` (for example the captured graph owning intermediate memory)."""
    _KEEP.setdefault(graph, []).append(obj)


class Rewrite:
    """One operand turned into a parameter use.

    Attributes
    ----------
    node : Node
        The node rewritten.
    field : str
        ``"args"`` or the pointer field (``"src"``, ``"dst"``, ...).
    index : int or None
        The kernel argument, for ``"args"``.
    position : int
        The byte position of the pointer inside that argument (0 for a pointer field).
    param : str
        The parameter now used.
    offset : int
        Bytes from the parameter's address.
    """

    __slots__ = ("node", "field", "index", "position", "param", "offset")

    def __init__(self, node: Node, field: str, index: int | None, position: int, param: str, offset: int) -> None:
        self.node = node
        self.field = field
        self.index = index
        self.position = position
        self.param = param
        self.offset = offset

    @property
    def where(self) -> str:
        """``"args[2]"``, ``"args[2]@16"`` (a pointer 16 bytes into the argument), or the field name."""
        if self.index is None:
            return self.field
        return f"{self.field}[{self.index}]" + (f"@{self.position}" if self.position else "")

    def key(self) -> tuple[str, int, str, int]:
        """``(graph name, node index, where, offset)``: a comparable summary of the rewrite."""
        return (self.node.graph.name, self.node.index, self.where, self.offset)

    def __repr__(self) -> str:
        return f"<Rewrite {self.node.label} {self.where} -> ${self.param}+{self.offset}>"


class ParametrizeReport:
    """What :meth:`Graph.parametrize <cudagraph.Graph.parametrize>` rewrote.

    Attributes
    ----------
    rewrites : list of Rewrite
        Every operand rewritten, in walk order (graph, then node, then field).
    params : dict
        ``name -> Memory`` of each parameter as captured.
    verified : bool
        ``True`` when every slot was checked to move with its memory (exact
        mode); ``False`` in range mode, where a value that merely equals an
        address in the range is rewritten too.
    outputs : dict
        ``name -> copy node`` of each name whose memory lay in the source's
        private pool (:func:`cudagraph.lift`): not rewritten, but copied from the
        definition's own memory into the bound memory after the graph's last nodes.
    relocated : list of (int, int, int)
        ``(source address, nbytes, new address)`` of each pool segment the definition
        was given memory of its own for.
    unexplained : list of (Node, str, int, int)
        :func:`cudagraph.lift_exact`: ``(node, where, first value, second value)`` of every slot whose
        bytes differ between the two captures in a way no named memory explains (rebinding cannot
        follow them: the result on new memory may differ from a fresh capture there).
    """

    __slots__ = ("rewrites", "params", "verified", "graph_name", "outputs", "relocated", "unexplained")

    def __init__(self, graph_name: str, params: dict[str, Memory], rewrites: list[Rewrite], verified: bool) -> None:
        self.graph_name = graph_name
        self.params = params
        self.rewrites = rewrites
        self.verified = verified
        self.outputs: dict[str, Node] = {}
        self.relocated: list[tuple[int, int, int]] = []
        self.unexplained: list[tuple[Node, str, int, int]] = []

    def __len__(self) -> int:
        return len(self.rewrites)

    def __iter__(self) -> Iterator[Rewrite]:
        return iter(self.rewrites)

    def keys(self) -> set[tuple[str, int, str, int]]:
        """The set of :meth:`Rewrite.key` of every rewrite."""
        return {r.key() for r in self.rewrites}

    def count(self, name: str | None = None) -> int:
        """Slots rewritten (for parameter ``name`` only, when given)."""
        return sum(1 for r in self.rewrites if name is None or r.param == name)

    def summary(self) -> str:
        """A readable table: one line per parameter, then one per rewritten slot."""
        nodes = len({id(r.node) for r in self.rewrites})
        mode = (
            "exact mode: every slot verified to move with its memory"
            if self.verified
            else "range mode: not verified (a value that only equals an address in a range was rewritten too; "
            "cg.lift_exact verifies)"
        )
        lines = [f"parametrize Graph {self.graph_name!r}: {len(self.rewrites)} slots in {nodes} nodes ({mode})"]
        for name, mem in self.params.items():
            lay = mem.layout()
            lines.append(
                f"  ${name}: {mem.address:#x}, {mem.nbytes} B{' ' + lay if lay else ''}, {self.count(name)} slots"
            )
        for src, nbytes, new in self.relocated:
            lines.append(f"  pool segment {src:#x}, {nbytes} B: moved to the definition's own memory at {new:#x}")
        for name, node in self.outputs.items():
            lines.append(
                f"  ${name}: in the capture's memory pool (its bytes also held other intermediates): not "
                f"rewritten; {node.label} copies it into the bound memory after the graph's last nodes"
            )
        for node, where, v1, v2 in self.unexplained:
            lines.append(
                f"  unexplained: {node.label} of Graph {node.graph.name!r} {where} is {v1:#x} in one capture and "
                f"{v2:#x} in the other, and no named memory explains it"
            )
        for r in self.rewrites:
            lines.append(f"    {r.node.label} of Graph {r.node.graph.name!r}: {r.where} -> ${r.param}+{r.offset}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        mode = "exact" if self.verified else "range, not verified"
        return f"<ParametrizeReport {len(self.rewrites)} slots, params {list(self.params)} ({mode})>"


def walk_nodes(graph: Graph) -> Iterator[Node]:
    """Every node of ``graph`` and of its child graphs and conditional bodies, depth first, in creation order."""
    stack: list[Any] = [iter(graph._nodes)]
    seen: set[int] = {id(graph)}
    while stack:
        for n in stack[-1]:
            yield n
            bodies = [b for b in bodies_of(n) if id(b) not in seen] if n.body_fields else []
            if bodies:
                seen.update(id(b) for b in bodies)
                stack.extend(iter(b._nodes) for b in reversed(bodies))
                break
        else:
            stack.pop()


class _Region:
    __slots__ = ("name", "start", "end", "param", "memory")

    def __init__(self, name: str, memory: Memory, param: Param) -> None:
        self.name = name
        self.start = memory.address
        self.end = memory.address + (memory.nbytes or 0)
        self.param = param
        self.memory = memory


class Parametrizing:
    """One parametrization: the regions, then the planned changes, applied all at once.

    Parameters
    ----------
    graph : Graph
        The definition (its child graphs and bodies are walked too).
    named : dict
        ``name -> memory object or (address, nbytes)``.
    only : dict, optional
        ``id(node) -> set of SlotKey``: rewrite only these slots (exact mode).
    """

    def __init__(self, graph: Graph, named: dict[str, Any], only: dict[int, set[SlotKey]] | None = None) -> None:
        if not named:
            raise DefinitionError(f"Graph {graph.name!r}: parametrize() needs at least one name=memory")
        self.graph = graph
        self.only = only
        self.regions: list[_Region] = []
        self.new_params: list[Param] = []
        for name, obj in named.items():
            mem = describe_memory(obj, f"parametrize {name!r} of Graph {graph.name!r}")
            if not mem.nbytes:
                raise OperandError(
                    f"parametrize {name!r} of Graph {graph.name!r}: the memory has no known size; "
                    "pass an (address, nbytes) pair"
                )
            self.regions.append(_Region(name, mem, self._param(name, mem.address)))
        ordered = sorted(self.regions, key=lambda r: r.start)
        for a, b in itertools.pairwise(ordered):
            if b.start < a.end:
                raise OperandError(
                    f"parametrize Graph {graph.name!r}: the memory of {a.name!r} ({a.start:#x}, {a.end - a.start} B) "
                    f"overlaps that of {b.name!r} ({b.start:#x}, {b.end - b.start} B)"
                )
        self._starts = [r.start for r in ordered]
        self._ordered = ordered
        self.changes: list[tuple[Node, str, Any]] = []
        self.rewrites: list[Rewrite] = []

    def _param(self, name: str, address: int) -> Param:
        p = self.graph._params.get(name)
        if p is None:
            p = Param(self.graph, name, None, address)  # checks the name; bound to the captured memory by default
            self.new_params.append(p)
        elif p.dtype is not None:
            raise OperandError(
                f"parametrize {name!r} of Graph {self.graph.name!r}: {name!r} is already a {p.dtype} scalar param"
            )
        return p

    def region(self, value: int) -> _Region | None:
        """The region holding address ``value``, if any."""
        starts = self._starts
        lo, hi = 0, len(starts)
        while lo < hi:
            mid = (lo + hi) // 2
            if starts[mid] <= value:
                lo = mid + 1
            else:
                hi = mid
        if lo:
            r = self._ordered[lo - 1]
            if value < r.end:
                return r
        return None

    def _allowed(self, node: Node, key: SlotKey) -> bool:
        only = self.only
        return only is None or key in only.get(id(node), ())

    # -------------------------------------------------------------- planning
    def plan(self) -> None:
        """Find every slot to rewrite; raise (changing nothing) on a pointer inside an opaque node."""
        nodes = list(walk_nodes(self.graph))
        hits = self._argument_hits(nodes)
        for k, node in enumerate(nodes):
            if node.kind == "opaque":
                self._opaque(node)
                continue
            for field in node.pointer_fields:
                self._pointer_field(node, field)
            for field in node.arg_fields:
                found = hits.get((k, field))
                if found:
                    self._args(node, field, found)

    def _argument_hits(self, nodes: list[Node]) -> dict[tuple[int, str], dict[int, list[tuple[int, int]]]]:
        """The aligned 8-byte words of kernel arguments whose values lie in a region, found in one pass.

        ``{(node position, field): {argument index: [(byte position, value), ...]}}``, positions
        ascending. Every argument that can hold an address (an int, raw bytes) is laid end to end
        and read as one array of words, compared with each region at once: lifted kernels carry
        structs of hundreds of bytes, which a word-by-word loop reads slowly (bench/rebind_lifted_cpu.py).
        """
        chunks: list[Any] = []
        keys: list[tuple[int, str, int]] = []
        starts: list[int] = []
        n = 0
        for k, node in enumerate(nodes):
            if node.kind == "opaque":
                continue
            for field in node.arg_fields:
                for i, a in enumerate(getattr(node, field)):
                    t = type(a)
                    if t is int:
                        data: Any = a.to_bytes(8, "little")
                    elif t is bytes or t is ParamBytes:
                        data = a
                    else:
                        continue  # Params, numpy scalars (typed by the builder), late operands
                    words = len(data) >> 3
                    if not words:
                        continue
                    chunks.append(data if len(data) == words << 3 else data[: words << 3])
                    keys.append((k, field, i))
                    starts.append(n)
                    n += words
        if not n:
            return {}
        values = np.frombuffer(b"".join(chunks), dtype="<u8")
        inside = np.zeros(n, dtype=bool)
        for r in self._ordered:
            inside |= (values >= np.uint64(r.start)) & (values < np.uint64(r.end))
        at = np.flatnonzero(inside)
        out: dict[tuple[int, str], dict[int, list[tuple[int, int]]]] = {}
        if not at.size:
            return out
        spans = (np.searchsorted(np.asarray(starts), at, side="right") - 1).tolist()
        for word, span, v in zip(at.tolist(), spans, values[at].tolist()):
            k, field, i = keys[span]
            out.setdefault((k, field), {}).setdefault(i, []).append(((word - starts[span]) << 3, v))
        return out

    def _pointer_field(self, node: Node, field: str) -> None:
        v = getattr(node, field)
        if type(v) is not int or not self._allowed(node, (field, None, 0)):
            return
        r = self.region(v)
        if r is None:
            return
        off = v - r.start
        self.changes.append((node, field, r.param if not off else ParamAt(r.param, off)))
        self.rewrites.append(Rewrite(node, field, None, 0, r.name, off))

    def _args(self, node: Node, field: str, hits: dict[int, list[tuple[int, int]]]) -> None:
        """Rewrite the ``hits`` (``{argument index: [(byte position, value)]}``) of ``node.<field>``."""
        args = getattr(node, field)
        out = list(args)
        changed = False
        for i, words in hits.items():
            a = args[i]
            t = type(a)
            if t is int:
                data, patches = a.to_bytes(8, "little"), []
            else:
                data, patches = bytes(a), list(a.patches) if t is ParamBytes else []
            taken = {pos for pos, _p, _o in patches}
            found = []
            for pos, v in words:
                if pos in taken or not self._allowed(node, (field, i, pos)):
                    continue
                r = self.region(v)
                if r is not None:
                    found.append((pos, r, v - r.start))
            if not found:
                continue
            for pos, r, off in found:
                patches.append((pos, r.param, off))
                self.rewrites.append(Rewrite(node, field, i, pos, r.name, off))
            changed = True
            if len(data) == 8 and len(patches) == 1 and patches[0][2] == 0:
                out[i] = patches[0][1]  # a whole pointer argument at the start: the parameter itself
            else:
                out[i] = ParamBytes(data, tuple(patches))
        if changed:
            self.changes.append((node, field, tuple(out)))

    def _opaque(self, node: Node) -> None:
        driver_type = str(getattr(node, "driver_type", ""))
        field = _OPAQUE_FIELDS.get(driver_type.replace("CU_GRAPH_NODE_TYPE_", ""))
        params = getattr(node, "params", None)
        sub = getattr(params, field, None) if field and params is not None else None
        if sub is None:
            return
        for path, v in _ints(sub, field or "", 0):
            r = self.region(v)
            if r is not None:
                raise OperandError(
                    f"{node.label} of Graph {node.graph.name!r} ({driver_type}): its parameter {path} = {v:#x} points "
                    f"into {r.name!r} (offset {v - r.start}), but an opaque node is re-created from its captured "
                    "parameters and cannot be parametrized; nothing was changed"
                )

    # -------------------------------------------------------------- applying
    def apply(self, verified: bool) -> ParametrizeReport:
        """Declare the new parameters, write the planned changes, record the memory; return the report."""
        g = self.graph
        for p in self.new_params:
            g._params[p.name] = p
        for graph in {id(node.graph): node.graph for node, _, _ in self.changes}.values():
            before_edit(graph)
        for node, field, value in self.changes:
            setattr(node, field, value)
        memory = _MEMORY.setdefault(g, {})
        for r in self.regions:
            memory[r.name] = r.memory
        return ParametrizeReport(g.name, {r.name: r.memory for r in self.regions}, self.rewrites, verified)


def public_fields(obj: Any, skip: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """``(name, value)`` of the public fields of a driver parameter structure: its attributes that read without
    an error and are not methods (driver handles, which convert to ``int``, are fields)."""
    for attr in dir(obj):
        if attr.startswith("_") or attr in skip:
            continue
        try:
            v = getattr(obj, attr)
        except Exception:
            continue
        if callable(v) and not hasattr(v, "__int__"):
            continue
        yield attr, v


def _ints(obj: Any, path: str, depth: int) -> Iterator[tuple[str, int]]:
    """``(attribute path, value)`` of the integer attributes of a driver parameter structure (3 levels)."""
    if depth > 3:
        return
    for attr, v in public_fields(obj):
        where = f"{path}.{attr}"
        if isinstance(v, bool) or isinstance(v, (str, bytes, float)):
            continue
        if isinstance(v, int):
            yield where, v
        elif hasattr(v, "__int__"):  # driver handle types (CUdeviceptr, ...)
            try:
                yield where, int(v)
            except Exception:
                continue
        elif isinstance(v, (list, tuple)):
            for j, e in enumerate(v[:64]):
                if isinstance(e, int) and not isinstance(e, bool):
                    yield f"{where}[{j}]", e
                elif e is not None and not isinstance(e, (str, bytes, float)):
                    yield from _ints(e, f"{where}[{j}]", depth + 1)
        elif v is not None:
            yield from _ints(v, where, depth + 1)


def parametrize(graph: Graph, named: dict[str, Any], only: dict[int, set[SlotKey]] | None = None) -> ParametrizeReport:
    """Rewrite every operand of ``graph`` pointing into the named memory as a use of that name.

    See :meth:`Graph.parametrize <cudagraph.Graph.parametrize>`; ``only``
    restricts the rewrite to verified slots (exact mode).
    """
    work = Parametrizing(graph, named, only)
    work.plan()
    report = work.apply(verified=only is not None)
    _REPORTS.setdefault(graph, []).append(report)
    return report


def _slots_of(node: Node) -> Iterator[tuple[SlotKey, int]]:
    """``(slot, value)`` of every place of ``node`` that can hold an address (not yet a parameter)."""
    for field in node.pointer_fields:
        v = getattr(node, field)
        if type(v) is int:
            yield (field, None, 0), v
    for field in node.arg_fields:
        for i, a in enumerate(getattr(node, field)):
            t = type(a)
            if t is int:
                yield (field, i, 0), a
            elif t is bytes or t is ParamBytes:
                data = bytes(a)
                for pos in range(0, len(data) - 7, 8):
                    yield (field, i, pos), _U64.unpack_from(data, pos)[0]


def moving_slots(
    g1: Graph,
    g2: Graph,
    first: dict[str, Any],
    second: dict[str, Any],
    unexplained: list[tuple[Node, str, int, int]] | None = None,
) -> dict[int, set[SlotKey]]:
    """The slots of ``g1`` whose values move with the memory: ``id(node) -> {SlotKey}`` (exact mode).

    ``g1`` and ``g2`` are the same work captured on the memory of ``first``
    and of ``second`` (same names). A slot counts when its value in ``g1`` is
    ``first[name]``'s address plus an offset inside that memory and its value
    in ``g2`` is ``second[name]``'s address plus the same offset.

    ``unexplained``, when given, receives ``(node, where, value in g1, value in g2)`` of every slot
    whose value differs between the captures and is not a moving use of a named memory: an address
    of memory not named (an intermediate the capture allocated anew, a pointer the program keeps
    elsewhere), or a scalar that changed; rebinding cannot follow it.

    Raises
    ------
    OperandError
        The two graphs differ in their nodes (the first difference is named),
        or two memory objects of a name share their address.
    """
    work = Parametrizing.__new__(Parametrizing)
    work.graph, work.only = g1, None
    regions = []
    seconds: dict[str, int] = {}
    for name, obj in first.items():
        mem = describe_memory(obj, f"lift_exact {name!r} (first)")
        other = describe_memory(second[name], f"lift_exact {name!r} (second)")
        if other.address == mem.address:
            raise OperandError(f"lift_exact {name!r}: both memory objects are at {mem.address:#x}; give two different")
        if not mem.nbytes:
            raise OperandError(f"lift_exact {name!r}: the memory has no known size; pass an (address, nbytes) pair")
        dummy = Param.__new__(Param)
        dummy.name, dummy.dtype = name, None
        regions.append(_Region(name, mem, dummy))
        seconds[name] = other.address
    work._ordered = sorted(regions, key=lambda r: r.start)
    work._starts = [r.start for r in work._ordered]
    n1, n2 = list(walk_nodes(g1)), list(walk_nodes(g2))
    out: dict[int, set[SlotKey]] = {}
    for i in range(max(len(n1), len(n2))):
        a = n1[i] if i < len(n1) else None
        b = n2[i] if i < len(n2) else None
        if a is None or b is None or type(a) is not type(b) or a.graph.name != b.graph.name:
            where = a.label if a is not None else (b.label if b is not None else "")
            raise OperandError(
                f"lift_exact Graph {g1.name!r}: the two captures differ at {where} ({len(n1)} and {len(n2)} nodes); "
                "the function must record the same work for both sets of memory"
            )
        values2 = dict(_slots_of(b))
        for key, v in _slots_of(a):
            v2 = values2.get(key)
            r = work.region(v)
            if r is not None and v2 is not None and v2 - seconds[r.name] == v - r.start:
                out.setdefault(id(a), set()).add(key)
            elif unexplained is not None and v2 is not None and v2 != v:
                field, index, pos = key
                where = field if index is None else f"{field}[{index}]" + (f"@{pos}" if pos else "")
                unexplained.append((a, where, v, v2))
    return out


class ParametrizeMixin:
    """:meth:`parametrize`, mixed into :class:`~cudagraph.Graph`."""

    __slots__ = ()

    def parametrize(self, **named: Any) -> ParametrizeReport:
        """Turn every operand pointing into the given memory into a use of a pointer parameter.

        Kernel pointer arguments (at any offset into the memory: slices and
        views of one allocation), pointers inside by-value struct arguments
        (the raw argument bytes of lifted kernels, read in aligned 8-byte
        slots), copy sources and destinations and fill destinations, in child
        graphs and conditional bodies too, become uses of the named
        :class:`~cudagraph.Param` plus their offset. The parameter is declared
        on this graph (bound by default to the memory given), so
        ``exe.launch(stream, x=new_x)`` runs the same work on new memory and
        leaves the captured memory untouched. Binds are checked against the
        memory given here: smaller memory, another device, host memory, or
        (where both expose them) another dtype, shape or strides are refused.

        This is range mode: any 8-byte value inside a range is taken as a
        pointer, so a scalar that equals such an address is rewritten too (the
        report says the slots are not verified). ``cg.lift_exact`` captures
        twice and rewrites only slots that move with the memory.

        Parameters
        ----------
        **named
            ``name=memory``: a PyTorch tensor, a CuPy array, a ``cuda.core``
            Buffer, an object with ``__cuda_array_interface__`` or DLPack, or
            an ``(address, nbytes)`` pair.

        Returns
        -------
        ParametrizeReport
            Every slot rewritten (node, field or argument index and byte
            position, offset); ``summary()`` prints them.

        Raises
        ------
        OperandError
            Host memory, overlapping ranges, a name already used by a scalar
            parameter, or a pointer inside an :class:`~cudagraph.OpaqueNode`
            (named); nothing is changed.
        DefinitionError
            No names, or a name that is not a Python identifier.
        """
        return parametrize(self, named)  # type: ignore[arg-type]

    @property
    def parametrizations(self) -> list[ParametrizeReport]:
        """The reports of every :meth:`parametrize` of this graph (``cg.lift(..., params=)`` included), in order."""
        return list(_REPORTS.get(self, ()))
