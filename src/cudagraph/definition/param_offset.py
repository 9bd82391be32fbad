"""Operands that point into the memory bound to a pointer :class:`~cudagraph.Param` (GPU-free).

:meth:`Graph.parametrize <cudagraph.Graph.parametrize>` turns addresses into
parameter uses. An address at the start of the bound memory becomes the
:class:`~cudagraph.Param` itself; one further in becomes a :class:`ParamAt`
(copy and fill endpoints), and kernel-argument bytes holding such addresses
(a pointer at an offset, or pointers inside a by-value struct, as lifted
kernels have them) become :class:`ParamBytes`.
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import DefinitionError
from .param import Param

__all__ = ["ParamAt", "ParamBytes"]

_U64 = struct.Struct("<Q")


class ParamAt:
    """A pointer parameter plus a byte offset: ``offset`` bytes into the memory bound to ``param``.

    Attributes
    ----------
    param : Param
        A pointer parameter.
    offset : int
        Bytes from the bound address (positive).
    """

    __slots__ = ("param", "offset")

    def __init__(self, param: Param, offset: int) -> None:
        if type(param) is not Param or param.dtype is not None:
            raise DefinitionError(f"ParamAt needs a pointer Param, got {param!r}")
        self.param = param
        self.offset = int(offset)

    def value(self, bindings: dict[str, Any]) -> int:
        """The address for the bound value of :attr:`param`."""
        return int(bindings[self.param.name]) + self.offset

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is ParamAt and other.param.name == self.param.name and other.offset == self.offset  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash((self.param.name, self.offset))

    def __repr__(self) -> str:
        return f"${self.param.name}+{self.offset}"


class ParamBytes(bytearray):
    """Kernel-argument bytes with pointer parameters written in at byte positions.

    Its contents are the bytes as captured (so it has the argument's size and
    is packed as bytes wherever no bindings are known); :meth:`resolve` writes
    ``bound address + offset`` of each patch over them.

    Attributes
    ----------
    patches : tuple of (int, Param, int)
        ``(byte position in the argument, pointer parameter, offset into its memory)``.
    """

    __slots__ = ("patches",)

    def __init__(self, data: bytes, patches: tuple[tuple[int, Param, int], ...]) -> None:
        super().__init__(data)
        for pos, p, _off in patches:
            if pos < 0 or pos + 8 > len(data):
                raise DefinitionError(f"ParamBytes: a pointer at byte {pos} does not fit {len(data)} bytes")
            if type(p) is not Param or p.dtype is not None:
                raise DefinitionError(f"ParamBytes needs pointer Params, got {p!r}")
        self.patches = tuple(sorted(patches, key=lambda t: t[0]))

    def names(self) -> list[str]:
        """The parameter names used, once each, in patch order."""
        out: list[str] = []
        for _pos, p, _off in self.patches:
            if p.name not in out:
                out.append(p.name)
        return out

    def resolve(self, bindings: dict[str, Any]) -> bytes:
        """The argument bytes with every patch written from ``bindings``."""
        data = bytearray(self)
        for pos, p, off in self.patches:
            _U64.pack_into(data, pos, int(bindings[p.name]) + off)
        return bytes(data)

    def __eq__(self, other: object) -> bool:
        if type(other) is not ParamBytes:
            return False
        return bytes(self) == bytes(other) and [(a, p.name, o) for a, p, o in self.patches] == [
            (a, p.name, o) for a, p, o in other.patches
        ]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        uses = ", ".join(f"@{pos}: ${p.name}+{off}" for pos, p, off in self.patches)
        return f"<ParamBytes {len(self)} B {uses}>"
