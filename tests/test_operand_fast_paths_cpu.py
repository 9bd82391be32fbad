"""The builders' fast paths for plain operands: int addresses, buffers of a class read before, int sizes.

Each answers as the general path does; errors are still typed and name the node and the operand.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition import addresses
from cudagraph.errors import DefinitionError, OperandError


class SlotBuffer:
    """A ``cuda.core`` Buffer look-alike whose objects cannot grow an array interface (slots only)."""

    __slots__ = ("handle", "size", "memory_resource")

    def __init__(self, handle: Any, size: Any) -> None:
        self.handle, self.size, self.memory_resource = handle, size, None


class DictBuffer:
    """The same with an instance dict: an object of it may carry an array interface of its own."""

    def __init__(self, handle: Any, size: Any) -> None:
        self.handle, self.size, self.memory_resource = handle, size, None


def test_a_buffer_class_read_once_is_read_directly_after(monkeypatch):
    monkeypatch.setattr(addresses, "BUFFER_TYPES", set())
    g = cg.Graph("g")
    a = g.memset(SlotBuffer(0x10000, 4096), 1)
    assert SlotBuffer in addresses.BUFFER_TYPES
    b = g.memset(SlotBuffer(0x20000, 64), np.uint32(5), after=a)  # the size still sets the count
    assert (b.dst, b.width, b.element_size, b._keep[0].size) == (0x20000, 16, 4, 64)
    c = g.memcpy(SlotBuffer(0x30000, 256), SlotBuffer(0x40000, 128), after=b)
    assert (c.dst, c.src, c.nbytes) == (0x30000, 0x40000, 128)
    with pytest.raises(OperandError, match=r"memset#3 'memset': dst: the Buffer is closed or empty"):
        g.memset(SlotBuffer(0, 64), 0)
    with pytest.raises(OperandError, match=r"memcpy#3 'memcpy': src: the Buffer's size must be a non-negative int"):
        g.memcpy(SlotBuffer(0x30000, 256), SlotBuffer(0x40000, -1))
    with pytest.raises(OperandError, match=r"memset#3 'memset': dst: the address in the Buffer handle must be an int"):
        g.memset(SlotBuffer(object(), 64), 0)
    with pytest.raises(DefinitionError, match=r"memset#3 'memset': the fill covers 128 bytes but dst has 64"):
        g.memset(SlotBuffer(0x20000, 64), 0, count=128)
    assert len(g) == 3


class Flaky:
    """A buffer whose handle raises once it is closed."""

    __slots__ = ("open", "size", "memory_resource")

    def __init__(self) -> None:
        self.open, self.size, self.memory_resource = True, 64, None

    @property
    def handle(self) -> int:
        if not self.open:
            raise RuntimeError("buffer closed")
        return 0x10000


def test_what_a_known_buffer_raises_becomes_an_operand_error(monkeypatch):
    monkeypatch.setattr(addresses, "BUFFER_TYPES", set())
    g = cg.Graph("g")
    buf = Flaky()
    g.memset(buf, 0)
    assert Flaky in addresses.BUFFER_TYPES
    buf.open = False
    with pytest.raises(
        OperandError,
        match=r"memset#1 'memset': dst: reading the address of a Flaky failed: "
        r"RuntimeError: buffer closed",
    ):
        g.memset(buf, 0)


def test_a_class_with_an_instance_dict_is_read_in_full_every_time(monkeypatch):
    monkeypatch.setattr(addresses, "BUFFER_TYPES", set())
    g = cg.Graph("g")
    g.memset(DictBuffer(0x10000, 4096), 1)
    assert DictBuffer not in addresses.BUFFER_TYPES
    other = DictBuffer(0x50000, 4096)
    other.__cuda_array_interface__ = {"data": (0x60000, False), "shape": (8,), "typestr": "<f4", "version": 3}
    node = g.memset(other, 0)
    assert (node.dst, node.width) == (0x60000, 32)  # its own array interface, as before


def test_int_operands_and_sizes_keep_their_checks():
    g = cg.Graph("g")
    with pytest.raises(OperandError, match=r"memset#0 'fill': dst: null pointer \(address 0\)"):
        g.memset(0, 1, count=4, name="fill")
    with pytest.raises(OperandError, match=r"memcpy#0 'memcpy': src: address -5 is outside 0\.\.2\*\*64-1"):
        g.memcpy(0x10000, -5, 16)
    with pytest.raises(OperandError, match=r"memcpy#0 'memcpy': dst: address 18446744073709551616 is outside"):
        g.memcpy(1 << 64, 0x10000, 16)
    with pytest.raises(DefinitionError, match=r"memset#0 'memset': count must be positive, got 0"):
        g.memset(0x10000, 1, count=0)
    with pytest.raises(DefinitionError, match=r"memcpy#0 'memcpy': nbytes = 9223372036854775808 overflows 64 bits"):
        g.memcpy(0x10000, 0x20000, 1 << 63)
    with pytest.raises(OperandError, match=r"memset#0 'memset': height must be an integer, got float"):
        g.memset(0x10000, 1, width=4, height=2.0)
    node = g.memset(0x10000, 1, count=np.int64(4), height=1)  # a numpy integer: the general path
    assert (node.width, type(node.width)) == (4, int)
    assert len(g) == 1
