"""PyTorch tensors as operands, on the CPU: a dense CUDA tensor is read through torch's getters.

CPU tensors stand for CUDA ones here (``Tensor.is_cuda`` is patched to say so): their
``__cuda_array_interface__``, which checks only ``is_cuda`` before describing the tensor, is
then the reference each read is compared with (address and extent). A tensor the interface
refuses (one that requires grad) or does not describe (sparse, or on the CPU) is read as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.definition.addresses import Deferred, _interface_nbytes, resolve_address
from cudagraph.definition.operands import normalize_kernel_args
from cudagraph.errors import DefinitionError, OperandError

torch = pytest.importorskip("torch")


@pytest.fixture
def on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every torch tensor says it is a CUDA tensor (to its getters and to DLPack's device query) but one given a
    true ``on_cpu`` attribute."""
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: not getattr(self, "on_cpu", False)))
    monkeypatch.setattr(
        torch.Tensor, "__dlpack_device__", lambda self: (1, 0) if getattr(self, "on_cpu", False) else (2, 0)
    )


def reference(t: Any) -> tuple[int, int]:
    """The address and extent the tensor's ``__cuda_array_interface__`` gives."""
    cai = t.__cuda_array_interface__
    return cai["data"][0], _interface_nbytes(cai, "ref", "__cuda_array_interface__", True)  # type: ignore[return-value]


def layouts() -> list[Any]:
    base = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)
    return [
        torch.zeros(32),
        base,
        base.t(),
        base[3:, 5:],
        base[:, ::2],
        base[1:40:3, 2:50:7],
        torch.zeros(1).expand(16, 16),
        torch.zeros(4, 1, 8)[:, :, 2:],
        torch.zeros((), dtype=torch.float64),
        torch.zeros(8, dtype=torch.bfloat16),
        torch.zeros(8, 8, dtype=torch.int8)[::2],
        torch.zeros(1, 5, dtype=torch.float16).as_strided((1, 5), (99, 1)),
    ]


@pytest.mark.usefixtures("on_cuda")
@pytest.mark.parametrize("index", range(len(layouts())))
def test_a_dense_tensor_is_read_as_its_array_interface_describes_it(index: int) -> None:
    t = layouts()[index]
    ptr, owner, size = resolve_address(t, "op")
    assert (ptr, size) == reference(t) and owner is t


@pytest.mark.usefixtures("on_cuda")
def test_float8_tensors_are_read_though_the_array_interface_knows_no_float8() -> None:
    dtype = getattr(torch, "float8_e4m3fn", None)
    if dtype is None:
        pytest.skip(f"torch {torch.__version__} has no float8_e4m3fn")
    t = torch.zeros(4, 16, dtype=dtype)[:, 4:]
    with pytest.raises(KeyError):
        t.__cuda_array_interface__  # noqa: B018 - the interface's own refusal
    assert resolve_address(t, "op") == (t.data_ptr(), t, 3 * 16 + 12)


@pytest.mark.usefixtures("on_cuda")
def test_an_empty_tensor_is_a_null_pointer() -> None:
    t = torch.zeros(0, 4)
    null = r"^op: null pointer \(a tensor of no elements, or whose storage was freed\)$"
    with pytest.raises(OperandError, match=null):
        resolve_address(t, "op")
    assert resolve_address(t, "op", allow_null=True) == (0, t, 0)
    assert reference(t) == (0, 0)


@pytest.mark.usefixtures("on_cuda")
def test_a_tensor_that_requires_grad_is_refused_as_its_interface_refuses_it() -> None:
    t = torch.zeros(8, requires_grad=True)
    refused = r"^op: reading the address of a Tensor failed: RuntimeError: .*requires grad"
    with pytest.raises(OperandError, match=refused):
        resolve_address(t, "op")


def test_a_cpu_tensor_is_left_to_dlpack_as_before() -> None:
    t = torch.zeros(8)
    ptr, owner, size = resolve_address(t, "op")
    assert type(ptr) is Deferred and ptr.obj is t and owner is t and size is None


@pytest.mark.usefixtures("on_cuda")
def test_kernel_arguments_and_copies_take_the_tensor_addresses() -> None:
    class CUkernel:  # the definition layer recognises kernels by type name
        pass

    src = torch.arange(64, dtype=torch.uint8)
    dst = torch.zeros(4, 32, dtype=torch.uint8)[:, 8:]  # 3 * 32 + 24 bytes from its first element
    g = cg.Graph("torch operands")
    args = (src, np.float32(1), np.int32(64))
    g.kernel(CUkernel(), 1, 32, args)
    assert normalize_kernel_args(args, "k") == (src.data_ptr(), *args[1:])
    c = g.memcpy(dst=dst, src=src, nbytes=64)
    assert (c.dst, c.src, c.nbytes) == (dst.data_ptr(), src.data_ptr(), 64)
    with pytest.raises(DefinitionError, match=r"^memcpy#2 'memcpy': nbytes = 65 exceeds the 64 bytes of src$"):
        g.memcpy(dst=dst, src=src, nbytes=65)
    with pytest.raises(DefinitionError, match=r"^memcpy#2 'memcpy': nbytes = 121 exceeds the 120 bytes of dst$"):
        g.memcpy(dst=dst, src=torch.zeros(200, dtype=torch.uint8), nbytes=121)


@pytest.mark.usefixtures("on_cuda")
def test_the_builders_take_cuda_tensors_by_one_read_and_refuse_a_cpu_one_alike() -> None:
    """``Graph.kernel`` accepts a CUDA tensor by its ``is_cuda`` once the first was checked in full (in C where
    the compiled builder is built, in the Python method's own loop otherwise), and refuses a CPU tensor as the
    full check does, naming the node and the argument."""
    from cudagraph.definition.builders import COMPILED_KERNEL

    class CUkernel:  # the definition layer recognises kernels by type name
        pass

    k = CUkernel()
    g = cg.Graph("tensors")
    kept = [torch.zeros(8) for _ in range(6)]
    g.kernel(k, 1, 32, (kept[0], np.float32(1), np.int32(8)))  # the first: checked in full, the type learned
    before = None if COMPILED_KERNEL is None else COMPILED_KERNEL.taken
    for t in kept[1:]:
        g.kernel(k, 1, 32, (t, np.float32(1), np.int32(8)))
    if COMPILED_KERNEL is not None:
        assert COMPILED_KERNEL.taken - before == 5 and torch.Tensor in COMPILED_KERNEL.known()["tensors"]
    assert [n.args[0] for n in g.nodes] == kept
    cpu = torch.zeros(8)
    cpu.on_cpu = True
    with pytest.raises(OperandError, match=r"kernel#6 'kernel': argument 0: the Tensor is in host memory"):
        g.kernel(k, 1, 32, (cpu, np.float32(1), np.int32(8)))
    assert len(g.nodes) == 6
