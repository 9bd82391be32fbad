"""Checking and converting a new value of a parameter before :meth:`Executable.bind <cudagraph.Executable.bind>`.

Each parameter of an executable gets one converter on first bind
(:func:`value_check`): a scalar is coerced to its dtype; a pointer is read as an
address. A pointer made by :meth:`Graph.parametrize <cudagraph.Graph.parametrize>`
stands for memory the graph was captured on: a new value must be device memory
at least as large, on the same device, and (where both the captured and the
new object expose them) of the same dtype, shape and strides. Objects say most
of this themselves; a bare address or an ``(address, nbytes)`` pair is asked of
the driver (memory type, device).

Describing an object in full costs microseconds per bind; a rebinding launch
usually passes a fresh object of the same layout every step. So a
:class:`MemoryCheck` reads objects of the common types (PyTorch tensors, arrays
with a ``__cuda_array_interface__`` property, ``cuda.core`` Buffers) as their
address plus a key of everything else the checks read, and remembers the keys
that passed the full check: the same layout at another address passes without
it, anything else is checked in full (:func:`checked_address`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..definition.addresses import is_torch_tensor, plain_type
from ..definition.diff import same_value
from ..definition.memory_info import Memory, describe_memory
from ..definition.operands import buffer_like
from ..driver.calls import require_driver
from ..errors import OperandError
from ..ops.operands import pointer_attribute

__all__ = [
    "BUFFER_TYPES",
    "READERS",
    "TORCH_READS",
    "MemoryCheck",
    "ValueCheck",
    "checked_address",
    "probe",
    "remembered_address",
    "value_check",
]

#: Types seen to be ``cuda.core`` Buffer-like (their ``handle`` is the address); the
#: compiled ``Executable.bind`` reads the same set.
BUFFER_TYPES: set[type] = set()


def probe(address: int) -> tuple[bool, int | None]:
    """``(CUDA knows the address, its device ordinal or None)``, from ``cuPointerGetAttributes``."""
    drv = require_driver()
    A = drv.CUpointer_attribute
    if not pointer_attribute(A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address):
        return False, None
    return True, pointer_attribute(A.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address)


def checked_address(name: str, captured: Memory, value: Any, graph: str) -> int:
    """The address of ``value`` for parameter ``name``, after checking it against the ``captured`` memory.

    Raises
    ------
    OperandError
        Not memory, memory at address 0, host memory, smaller than the captured
        memory, another device, or another dtype, shape or strides (both sizes,
        devices or layouts are named).
    """
    what = f"Graph {graph!r}: bind {name!r}"
    mem = describe_memory(value, what)
    if not mem.address:
        raise OperandError(f"{what}: the new memory is at address 0 (a tensor whose storage was freed, or a meta one?)")
    device = mem.device
    if device is None and (type(value) is int or type(value) is tuple):
        known, device = probe(mem.address)
        if not known:
            raise OperandError(f"{what}: {mem.address:#x} is not memory CUDA knows (pageable host memory?)")
    if mem.nbytes is not None and captured.nbytes and mem.nbytes < captured.nbytes:
        raise OperandError(
            f"{what}: the new memory has {mem.nbytes} bytes, fewer than the {captured.nbytes} bytes of the memory "
            f"{name!r} was parametrized with (the extent the graph uses)"
        )
    if device is not None and captured.device is not None and device != captured.device:
        raise OperandError(
            f"{what}: the new memory is on device {device}, the graph was captured with {name!r} on device "
            f"{captured.device}"
        )
    for attr in ("dtype", "shape", "strides"):
        new, old = getattr(mem, attr), getattr(captured, attr)
        if new is not None and old is not None and new != old:
            raise OperandError(
                f"{what}: {attr} {new} differs from the captured {attr} {old} "
                f"(new memory {mem.nbytes} bytes, captured {captured.nbytes} bytes)"
            )
    return mem.address


# ------------------------------------------------------------------ reading common objects cheaply

#: ``reader(value) -> (address, key)``: the key holds everything but the address that
#: :func:`~cudagraph.definition.memory_info.describe_memory` reads of such a value.
Reader = Callable[[Any], tuple[int, Any]]


def _torch(t: Any) -> tuple[int, Any]:
    dev = t.device
    key = (type(t), t.dtype, t.shape, t.stride(), t.element_size(), getattr(dev, "type", "cuda"), dev.index)
    return int(t.data_ptr()), key


def _torch_tensor(t: Any) -> tuple[int, Any]:
    """:func:`_torch` for an exact ``torch.Tensor``, whose every attribute is torch's own.

    Its dtype fixes its element size, and ``is_cuda`` with ``get_device()`` say
    what ``device.type`` and ``device.index`` do for a CUDA tensor (the only
    kind a full check passes), in fewer and cheaper reads
    (bench/rebind_lifted_cpu.py where torch is importable). The key's first
    item, a ``torch.dtype``, sets it apart from the other readers' keys, which
    start with a type.
    """
    return t.data_ptr(), (t.dtype, t.shape, t.stride(), t.is_cuda, t.get_device())


def _torch_resolved(t: Any) -> tuple[int, Any]:
    """:func:`_torch_tensor`'s address and key plus ``requires_grad``: a plain pointer's reader of an exact
    ``torch.Tensor``, whose full resolution (its ``__cuda_array_interface__``) refuses a tensor that requires
    grad; everything else that resolution reads (the dtype's type string, the shape, whether it is contiguous,
    the number of elements, a CUDA tensor) the rest of the key fixes."""
    address, key = _torch_tensor(t)
    return address, (*key, t.requires_grad)


#: What :func:`_torch_tensor` and (all seven) :func:`_torch_resolved` read of a tensor, in order (methods
#: called: data_ptr, stride, get_device): the compiled ``Executable._bind_many`` reads the same through these names.
TORCH_READS = ("data_ptr", "dtype", "shape", "stride", "is_cuda", "get_device", "requires_grad")


def _cai(obj: Any) -> tuple[int, Any]:
    cai = obj.__cuda_array_interface__
    key = (type(obj), cai.get("typestr", "|u1"), cai.get("shape", ()), cai.get("strides"))
    return _cai_data(cai), key


def _cai_device(obj: Any) -> tuple[int, Any]:
    cai = obj.__cuda_array_interface__
    key = (type(obj), cai.get("typestr", "|u1"), cai.get("shape", ()), cai.get("strides"), obj.device.id)
    return _cai_data(cai), key


def _cai_data(cai: Any) -> int:
    """The address of an array interface's ``data`` pair (anything else raises: the full check says what)."""
    ptr, _read_only = cai["data"]
    return int(ptr)


def _buffer(b: Any) -> tuple[int, Any]:
    return int(b.handle), (type(b), b.size, b.device_id, b.is_device_accessible)


#: ``type -> its reader`` (``None``: every value of the type is checked in full); the compiled
#: ``Executable._bind_many`` reads the same dict (filled here only, by :func:`reader`).
_READERS: dict[type, Reader | None] = {}
READERS = _READERS


def reader(t: type) -> Reader | None:
    """The reader of values of type ``t`` (decided once per type), or ``None``.

    It follows :func:`~cudagraph.definition.memory_info.describe_memory`'s
    order. A tensor-like type (``data_ptr`` and ``stride`` methods) is read
    through the same calls, which fail (then the value is checked in full)
    where an instance would be described otherwise. An array or a Buffer is
    read only when its type fixes its instances' attributes (no ``__dict__``,
    no attribute hooks), so that every instance is described the same way.
    """
    found = _READERS.get(t, _READERS)
    if found is not _READERS:
        return found  # type: ignore[return-value]
    read: Reader | None = None
    if issubclass(t, (int, tuple)):  # addresses and (address, nbytes) pairs: the driver is asked
        read = None
    elif callable(getattr(t, "data_ptr", None)) and callable(getattr(t, "stride", None)):
        read = _torch_tensor if is_torch_tensor(t) else _torch
    elif plain_type(t):
        if getattr(t, "__cuda_array_interface__", None) is not None:
            read = _cai_device if hasattr(t, "device") else _cai
        elif all(hasattr(t, a) for a in ("handle", "size", "memory_resource", "device_id", "is_device_accessible")):
            read = _buffer
    _READERS[t] = read
    return read


def remembered_address(passed: dict[Any, None], read: Reader, value: Any, full: Callable[[Any], int]) -> int:
    """The address of ``value`` by its reader ``read`` where its layout key is in ``passed`` (layouts whose
    values ``full``, the complete check, gave their reader's address), else ``full(value)``, remembering the key.

    The key holds everything but the address that the complete check reads, so a value of a remembered layout
    passes it. An address outside 1..2**64-1 (a tensor whose storage was freed, or on the meta device), a
    reader that raises (an object its type does not describe): the complete check says what it is. The
    compiled ``Executable._bind_many`` decides the same in C.
    """
    key: Any = None
    try:
        address, key = read(value)
        if key in passed and type(address) is int and 0 < address < 1 << 64:
            return address
    except Exception:
        key = None
    checked = full(value)
    if key is not None and checked == address:
        if len(passed) >= MemoryCheck.LIMIT:
            passed.clear()
        passed[key] = None
    return checked


class MemoryCheck:
    """The checks of new memory for one parametrized name, remembering the layouts that passed.

    Parameters
    ----------
    name : str
        The parameter.
    captured : Memory
        The memory it was parametrized with.
    graph : str
        The graph's name (for messages).
    """

    __slots__ = ("name", "captured", "graph", "passed")

    #: Keys remembered per name at most (a program alternating between more layouts is checked in full).
    LIMIT = 64

    def __init__(self, name: str, captured: Memory, graph: str) -> None:
        self.name = name
        self.captured = captured
        self.graph = graph
        self.passed: dict[Any, None] = {}

    def address(self, value: Any) -> int:
        """The address of ``value``, checked against the captured memory.

        Raises
        ------
        OperandError
            As :func:`checked_address`.
        """
        read = reader(type(value))

        def full(v: Any) -> int:
            return checked_address(self.name, self.captured, v, self.graph)

        if read is None:
            return full(value)
        # a layout seen before skips the full check (bench/cpu_overhead.py: fresh CAI arrays rebound)
        return remembered_address(self.passed, read, value, full)


class ValueCheck:
    """How new values of one parameter are checked and converted (made once per parameter; see :func:`value_check`).

    Attributes
    ----------
    scalar : bool
        A scalar parameter (values compared with ``same_value``), else a pointer (addresses compared).
    """

    __slots__ = ("param", "scalar", "memory", "passed")

    def __init__(self, param: Any, memory: MemoryCheck | None) -> None:
        self.param = param
        self.scalar = param.dtype is not None
        self.memory = memory
        #: A plain pointer's array and tensor layouts (its reader's keys, ``_cai``/``_cai_device``/``_torch_resolved``)
        #: that resolved to their reader's address: one of them resolves again the same way (the key holds all but
        #: the address).
        self.passed: dict[Any, None] = {}

    def convert(self, value: Any, bound: Any) -> Any:
        """``value`` as the executable binds it (an address, or a scalar of the parameter's dtype).

        ``bound`` is the value bound now: an address equal to it is taken without asking the driver.

        Raises
        ------
        OperandError
            A value of the wrong kind, or memory the checks refuse.
        """
        if self.scalar:
            return self.param.coerce(value)
        t = type(value)
        if self.memory is not None:
            if t is int and value == bound:
                return value  # the address bound now (checked when it was bound, or the captured one)
            return self.memory.address(value)
        if t is int and 0 < value < 1 << 64:
            return value
        if t in BUFFER_TYPES:
            return int(value.handle) or _pointer(self.param, value)
        read = _PLAIN_READERS.get(reader(t))
        if read is None:
            return _pointer(self.param, value)
        # An array (CuPy's kind) or a tensor of a layout that resolved: no full check (bench/cpu_overhead.py, a
        # fresh array on a g.param; the compiled _bind_many reads it in C, this is the path without it)
        return remembered_address(self.passed, read, value, lambda v: _pointer(self.param, v))

    def same(self, v: Any, bound: Any) -> bool:
        """Whether the converted value ``v`` equals the ``bound`` one (no driver call needed)."""
        return same_value(v, bound) if self.scalar else bool(v == bound)


#: A plain pointer's reader for each reader that has one (its key fixes how the full resolution,
#: ``resolve_address``, goes): arrays as they are, a torch tensor with ``requires_grad`` added.
_PLAIN_READERS: dict[Reader | None, Reader] = {_cai: _cai, _cai_device: _cai_device, _torch_tensor: _torch_resolved}


def value_check(param: Any, memory: Memory | None, graph: str) -> ValueCheck:
    """The :class:`ValueCheck` of ``param``; ``memory`` is what :meth:`Graph.parametrize` made it from, if any."""
    check = None if memory is None or param.dtype is not None else MemoryCheck(param.name, memory, graph)
    return ValueCheck(param, check)


def _pointer(param: Any, value: Any) -> int:
    """A pointer parameter's value as an address (the common cases first)."""
    if buffer_like(value):
        BUFFER_TYPES.add(type(value))
        ptr = int(value.handle)
        if ptr:
            return ptr
    return param.coerce(value)  # type: ignore[no-any-return]
