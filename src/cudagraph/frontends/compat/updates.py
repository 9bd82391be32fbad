"""cuda.core's node updates, in cudagraph's terms: each function turns the keywords of a cuda.core
``update()`` (a definition node's, where omitted values are kept, or an executable view's, where every
value is given) into the builder keywords of :meth:`cudagraph.Node.update` /
:meth:`cudagraph.ExecutableNode.update`, checked as the builder checks them.

The one translation per kind serves both: ``KernelNode.update`` changes the definition,
``ExecutableKernelNode.update`` (``exe[node]``) the executable only.
"""

from __future__ import annotations

import operator
from typing import Any

from ...errors import DefinitionError, OperandError
from ..launch import _config, _kernel
from .common import (
    DRIVER_KERNEL_TYPES,
    SizeOverflow,
    check_python_callback,
    copy_size,
    is_c_function,
    kernel_args,
    unsupported,
)
from .lifetimes import operand

__all__ = [
    "ClusteredUpdateRefusal",
    "callback_changes",
    "child_changes",
    "kernel_changes",
    "memcpy_changes",
    "memset_changes",
    "memset_shape",
    "memset_value",
    "owner_check",
]


#: An update of a clustered or cooperative kernel node: cuda.core refuses it with ``NotImplementedError("updating
#: clustered or cooperative kernel nodes is not supported")``; this refusal is that class (and an OperandError).
ClusteredUpdateRefusal: type[OperandError] = type(
    "ClusteredUpdateRefusal",
    (OperandError, NotImplementedError),
    {"__module__": __name__, "__doc__": "An update of a clustered or cooperative kernel node (NotImplementedError)."},
)
_CLUSTERED_UPDATE = "updating clustered or cooperative kernel nodes is not supported"


def owner_check(call: str, owner: Any, value: Any, arg: str) -> None:
    """Refuse an ``*_owner`` given without its value or beside a ``Buffer`` (cuda.core takes one only beside a
    raw address)."""
    if owner is None:
        return
    if value is None:  # (cuda.core's words, whole: ValueError("dst_owner requires dst"))
        raise DefinitionError(f"{arg}_owner requires {arg}")
    if type(value).__name__ == "Buffer":
        # (cuda.core's ValueError and sentence first)
        raise DefinitionError(f"{arg}_owner cannot be used when {arg} is a Buffer (compat {call}: it keeps itself)")


def memset_value(call: str, value: Any) -> tuple[int, int]:
    """``(value, element size)`` from an int (one byte) or a 1-, 2- or 4-byte buffer-protocol object."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < 256:  # (cuda.core: the OverflowError of its unsigned char)
            raise SizeOverflow(f"compat {call}: value: an int fills bytes: expected 0..255, got {value}")
        return value, 1
    try:
        raw = bytes(memoryview(value).cast("B"))
    except TypeError:
        raise OperandError(
            f"compat {call}: value: expected an int or a buffer-protocol object of 1, 2 or 4 bytes, "
            f"got {type(value).__name__}"
        ) from None
    except (ValueError, BufferError) as e:  # a released memoryview, an exporter that refuses (cuda.core: ValueError)
        raise DefinitionError(f"compat {call}: value: the {type(value).__name__} cannot be read: {e}") from None
    if len(raw) not in (1, 2, 4):
        raise DefinitionError(f"compat {call}: value: a fill value of {len(raw)} bytes; expected 1, 2 or 4")
    return int.from_bytes(raw, "little"), len(raw)


def _fill_dim(call: str, arg: str, value: Any, zero: bool) -> int:
    """``value`` as cuda.core's ``size_t`` argument ``arg`` takes it: an int (or ``__index__``), not negative;
    0 only where ``zero`` (a pitch: rows of width elements)."""
    if type(value) is int and (0 < value or (zero and value == 0)) and value < 1 << 63:  # (the common case)
        return value
    try:
        v = operator.index(value)
    except Exception:  # TypeError, or whatever a user __index__ raises (cuda.core: TypeError)
        raise OperandError(f"compat {call}: {arg}: expected an int, got {type(value).__name__}") from None
    if v < 0 or (v == 0 and not zero) or v >= 1 << 63:
        need = "0 (rows of width elements) or positive" if zero else "positive"
        raise DefinitionError(f"compat {call}: {arg}: must be {need}, below 2**63; got {v}")
    return v


def memset_shape(call: str, width: Any, height: Any, pitch: Any, *, keep: bool = False) -> tuple[Any, Any, Any]:
    """``(width, height, pitch)`` of a fill, each checked as cuda.core's ``size_t`` (a type error: an
    :class:`~cudagraph.errors.OperandError`, a ``TypeError``); with ``keep``, ``None`` stays ``None`` (an update
    keeps the value)."""
    return (
        None if keep and width is None else _fill_dim(call, "width", width, False),
        None if keep and height is None else _fill_dim(call, "height", height, False),
        None if keep and pitch is None else _fill_dim(call, "pitch", pitch, True),
    )


def kernel_changes(node: Any, config: Any, kernel: Any, args: Any, call: str) -> dict[str, Any]:
    """The kernel keywords of ``config`` (a cuda.core ``LaunchConfig``), ``kernel`` and ``args``; ``None``
    keeps a value. A new kernel needs its ``args`` (``()`` for none), as in cuda.core; clusters,
    cooperative launches and programmatic serialization are refused, as cuda.core refuses them here."""
    changes: dict[str, Any] = {}
    if config is not None:
        c = _config(config, call)
        if c.cluster is not None or c.cooperative:
            raise ClusteredUpdateRefusal(_CLUSTERED_UPDATE)
        if c.pdl:
            raise unsupported(call, "config", "a programmatic launch (cuda.core refuses it too)")
        changes.update(grid=c.grid, block=c.block, shared_mem=c.smem)
    attrs = node.attrs
    if attrs is not None and (attrs.cluster is not None or attrs.cooperative):
        raise ClusteredUpdateRefusal(_CLUSTERED_UPDATE)
    if kernel is not None and args is None:
        raise DefinitionError(f"compat {call}: args: a new kernel needs its arguments (args=() for none)")
    if args is not None:
        if not isinstance(args, (tuple, list)):
            raise OperandError(f"compat {call}: args: expected a tuple or list, got {type(args).__name__}")
        a = kernel_args(tuple(args))
        if kernel is None:
            changes["args"] = a
        elif type(kernel).__name__ in DRIVER_KERNEL_TYPES:
            changes.update(kernel=kernel, args=a)
        else:
            k, a = _kernel(kernel, a, call)
            changes.update(kernel=k, args=a)
    return changes


def memcpy_changes(
    dst: Any, src: Any, size: Any, dst_owner: Any, src_owner: Any, call: str
) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """The copy keywords and the owners to keep alive; ``None`` keeps a value. (A 2-D or 3-D copy, made by
    :meth:`cudagraph.Graph.memcpy2d` / ``memcpy3d``, is no compat ``MemcpyNode``: it has no ``update``.)"""
    owner_check(call, dst_owner, dst, "dst")
    owner_check(call, src_owner, src, "src")
    changes: dict[str, Any] = {}
    if dst is not None:
        changes["dst"] = operand(dst)
    if src is not None:
        changes["src"] = operand(src)
    if size is not None:
        changes["nbytes"] = copy_size(call, size)
    return changes, (dst_owner, src_owner)


def memset_changes(
    node: Any, dst: Any, value: Any, width: Any, height: Any, pitch: Any, dst_owner: Any, call: str
) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """The fill keywords and the owner to keep alive; ``None`` keeps a value. An int ``value`` fills bytes,
    a 2- or 4-byte buffer-protocol value elements of its size (as :meth:`GraphNode.memset`); a ``pitch`` of
    0 is a row of ``width`` elements."""
    owner_check(call, dst_owner, dst, "dst")
    width, height, pitch = memset_shape(call, width, height, pitch, keep=True)
    changes: dict[str, Any] = {}
    if dst is not None:
        changes["dst"] = operand(dst)
    if value is not None:
        changes["value"], changes["element_size"] = memset_value(call, value)
    if width is not None:
        changes["width"] = width
    if height is not None:
        changes["height"] = height
    if pitch is not None:
        changes["pitch"] = pitch or None  # cuda.core's 0: rows of width elements, the builder's default
    return changes, (dst_owner,)


def callback_changes(node: Any, fn: Any, user_data: Any, call: str) -> dict[str, Any]:
    """The host keywords of a new callback: a Python callable for a Python callback node, a C function pointer
    (and its ``user_data``) for one made with a function pointer; a switch between the two is refused."""
    if node.kind == "host_fn":
        if not is_c_function(fn):
            if user_data is not None:  # (cuda.core's ValueError for user_data beside a Python callable comes first)
                check_python_callback(call, fn, user_data)
            raise unsupported(call, "fn", f"{type(fn).__name__} for a callback made with a ctypes function pointer")
        return {"fn": fn, "user_data": user_data}
    if is_c_function(fn):
        raise unsupported(call, "fn", "a ctypes function pointer for a callback made with a Python callable")
    check_python_callback(call, fn, user_data)
    return {"fn": fn, "args": ()}


def child_changes(node: Any, child: Any, call: str) -> dict[str, Any]:
    """The child keywords of a compat ``GraphDefinition`` ``child``."""
    graph = getattr(child, "graph", None)
    if type(child).__name__ != "GraphDefinition" or graph is None:
        raise unsupported(call, "child", f"{type(child).__name__}; only a compat GraphDefinition")
    return {"body": graph}
