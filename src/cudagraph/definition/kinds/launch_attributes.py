"""The driver's kernel launch attributes beyond cluster, cooperative and priority (GPU-free).

A kernel node carries these in ``attrs.extra`` (a sorted tuple of ``(name, value)``), given to
:meth:`Graph.kernel <cudagraph.Graph.kernel>` as ``attributes={name: value}`` or read by
:func:`cudagraph.lift` from a captured graph (cuDNN and cuBLAS kernels set a cluster scheduling policy,
some a memory synchronization domain). Each is set on the driver node with
``cuGraphKernelNodeSetAttribute`` when the graph is built, and on an eager launch with
``cuLaunchKernelEx``.

The table says, per attribute, its ``CUlaunchAttributeID``, how its value is laid out at the start of the
64-byte ``CUlaunchAttributeValue`` union (a :mod:`struct` format) and the value a node has when the
attribute was never set (what the driver reports for such a node; ``tests/test_lift_fidelity_gpu.py``
checks it). A node whose value equals the default carries nothing.
"""

from __future__ import annotations

import math
import operator
import struct
from collections.abc import Mapping
from typing import Any

from ...errors import DefinitionError, OperandError

__all__ = [
    "ATTRIBUTES",
    "ATTRIBUTE_IDS",
    "FIRST_CLASS_IDS",
    "STREAM_ONLY_IDS",
    "VALUE_SIZE",
    "Attribute",
    "check_attributes",
    "decode",
    "encode",
]

#: ``sizeof(CUlaunchAttributeValue)``.
VALUE_SIZE = 64


class Attribute:
    """One launch attribute: its name, driver id, value layout and default.

    Attributes
    ----------
    name : str
        The keyword in ``attributes={...}``.
    id : int
        The ``CUlaunchAttributeID`` (``CUkernelNodeAttrID``).
    layout : struct.Struct
        The value's layout at the start of the union.
    default : tuple
        The value of a node on which the attribute was never set.
    fields : tuple of str
        The names of the value's fields (for messages).
    """

    __slots__ = ("name", "id", "layout", "default", "fields")

    def __init__(self, name: str, attr_id: int, fmt: str, default: tuple[Any, ...], fields: tuple[str, ...]) -> None:
        self.name = name
        self.id = attr_id
        self.layout = struct.Struct(fmt)
        self.default = default
        self.fields = fields

    def __repr__(self) -> str:
        return f"<Attribute {self.name} id={self.id} fields={self.fields}>"


#: The attributes carried in ``attrs.extra``, by name.
ATTRIBUTES: dict[str, Attribute] = {
    a.name: a
    for a in (
        Attribute(
            "access_policy_window",
            1,
            "<QQfii",
            (0, 0, 0.0, 0, 0),
            ("base_ptr", "num_bytes", "hit_ratio", "hit_prop", "miss_prop"),
        ),
        Attribute("cluster_scheduling_policy", 5, "<i", (0,), ("policy",)),
        Attribute("mem_sync_domain_map", 9, "<BB", (0, 1), ("default", "remote")),
        Attribute("mem_sync_domain", 10, "<i", (0,), ("domain",)),
        Attribute("preferred_cluster", 11, "<III", (0, 0, 0), ("x", "y", "z")),
        Attribute("device_updatable", 13, "<i", (0,), ("device_updatable",)),
        Attribute("preferred_shared_memory_carveout", 14, "<I", (0,), ("carveout",)),
        Attribute("nvlink_util_centric_scheduling", 16, "<I", (0,), ("enabled",)),
        Attribute("portable_cluster_size_mode", 17, "<i", (0,), ("mode",)),
        Attribute("shared_memory_mode", 18, "<i", (0,), ("mode",)),
    )
}

#: ``id -> Attribute`` of the table.
ATTRIBUTE_IDS: dict[int, Attribute] = {a.id: a for a in ATTRIBUTES.values()}

#: Attributes a kernel node keeps in its own fields: ``id -> (name, layout, default)``.
FIRST_CLASS_IDS: dict[int, tuple[str, struct.Struct, tuple[Any, ...]]] = {
    2: ("cooperative", struct.Struct("<i"), (0,)),
    4: ("cluster", struct.Struct("<III"), (0, 0, 0)),
    8: ("priority", struct.Struct("<i"), (0,)),
}

#: Attributes that only a stream launch has (a graph holds them as edges or not at all): a node that
#: reports one of them set is refused by the lift. ``id -> name``.
STREAM_ONLY_IDS: dict[int, str] = {
    3: "synchronization_policy",
    6: "programmatic_stream_serialization",
    7: "programmatic_event",
    12: "launch_completion_event",
}


def encode(attr: Attribute, value: tuple[Any, ...]) -> bytes:
    """The 64 bytes of the ``CUlaunchAttributeValue`` holding ``value``."""
    return attr.layout.pack(*value).ljust(VALUE_SIZE, b"\0")


def decode(attr: Attribute, raw: bytes) -> tuple[Any, ...]:
    """The value of ``attr`` in the union bytes ``raw``."""
    return attr.layout.unpack_from(raw)


def _value(attr: Attribute, value: Any, what: str) -> tuple[Any, ...]:
    """``value`` checked against ``attr``'s layout, as a tuple (a single field may be given bare)."""
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    if len(items) != len(attr.fields):
        raise DefinitionError(
            f"{what}: attribute {attr.name!r} takes {len(attr.fields)} value(s) {attr.fields}, got {value!r}"
        )
    out: list[Any] = []
    for field, fmt_default, v in zip(attr.fields, attr.default, items):
        if isinstance(fmt_default, float):
            try:
                if isinstance(v, (bool, str, bytes)):
                    raise TypeError
                f = float(v)
            except (TypeError, ValueError, OverflowError):
                raise OperandError(
                    f"{what}: attribute {attr.name!r} field {field!r} must be a number, got {type(v).__name__}"
                ) from None
            if not math.isfinite(f):
                raise DefinitionError(f"{what}: attribute {attr.name!r} field {field!r} must be finite, got {v!r}")
            out.append(f)
            continue
        if isinstance(v, bool):
            v = int(v)
        try:
            out.append(operator.index(v))
        except TypeError:
            raise OperandError(
                f"{what}: attribute {attr.name!r} field {field!r} must be an int, got {type(v).__name__}"
            ) from None
    try:
        packed = attr.layout.pack(*out)
    except struct.error:
        raise DefinitionError(
            f"{what}: attribute {attr.name!r} value {tuple(out)} does not fit the driver's fields {attr.fields}"
        ) from None
    return attr.layout.unpack(packed)  # floats as the driver stores them (32-bit)


def check_attributes(attributes: Any, what: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """``attributes={name: value}`` of :meth:`Graph.kernel` as a sorted tuple of non-default ``(name, value)``.

    Raises
    ------
    OperandError
        Not a mapping, a name that is not a str, a field of the wrong type.
    DefinitionError
        An unknown name (the known ones are listed), a value of the wrong length or out of range.
    """
    if not isinstance(attributes, Mapping):
        raise OperandError(f"{what}: attributes must be a mapping of name to value, got {type(attributes).__name__}")
    out: list[tuple[str, tuple[Any, ...]]] = []
    for name, value in list(attributes.items()):
        if type(name) is not str:
            raise OperandError(f"{what}: attribute names must be str, got {type(name).__name__}")
        attr = ATTRIBUTES.get(name)
        if attr is None:
            raise DefinitionError(
                f"{what}: unknown launch attribute {name!r}; known: {', '.join(sorted(ATTRIBUTES))} "
                "(cluster=, cooperative= and priority= are keywords of their own)"
            )
        v = _value(attr, value, what)
        if v != attr.default:
            out.append((name, v))
    out.sort()
    return tuple(out)
