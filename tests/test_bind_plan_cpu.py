"""Rebinding through prepared plans, on the CPU: which driver calls ``Executable.bind`` makes.

The kernel-node update call is replaced by a recorder and the kernel's
parameter layout by a fixed one (a pointer, a float, an int), so the plan's
grouping, the bytes written and the error path are checked without a GPU.
"""

from __future__ import annotations

import ctypes
import inspect
import struct
import threading
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import cudagraph.executable.executable as _executable
import cudagraph.ops.kinds.kernel as _kernel_writer
from cudagraph.driver.kernel_args import KernelInfo
from cudagraph.errors import DriverError, ExecutableClosedError, OperandError
from cudagraph.executable.executable import Executable
from cudagraph.materialize.explicit import LoweredGraph

drv = pytest.importorskip("cuda.bindings.driver")

from test_cache_cpu import StubLowering  # noqa: E402
from test_native_cpu import Buffer  # noqa: E402


class CUkernel:  # the definition layer recognises kernels by type name
    pass


K = CUkernel()


def fake_info() -> KernelInfo:
    """The layout of ``k(float* x, float a, int n)``."""
    info = KernelInfo.__new__(KernelInfo)
    info.kernel = None
    info.handle = drv.CUkernel(0x77)
    info.is_library_kernel = True
    info.name = "k"
    info.offsets, info.sizes, info.total = (0, 8, 12), (8, 4, 4), 16
    info._scratch = (ctypes.c_char * 16)()
    info._scratch_addr = ctypes.addressof(info._scratch)
    info._ptrs = (ctypes.c_void_p * 3)(*[info._scratch_addr + o for o in info.offsets])
    info.params_address = ctypes.addressof(info._ptrs)
    info._packers = {}
    info._kinds = {}
    return info


class Calls(list):  # type: ignore[type-arg]
    """The recorded updates; ``refuse`` holds driver nodes whose update fails."""

    refuse: set[int]
    callback: Any


SET_PROTO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


@pytest.fixture(params=["native", "bindings"])
def calls(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Records ``(driver node, the 16 argument bytes, the parameter structure)`` per update.

    ``native``: the compiled loop calls a ctypes callback in place of
    ``cuGraphExecKernelNodeSetParams_v2``; ``bindings``: the ``cuda.bindings``
    call is replaced. The structure is identified by its address, or by the
    object's id.
    """
    info = fake_info()
    monkeypatch.setattr(_kernel_writer, "kernel_info", lambda k: info)
    out = Calls()
    refuse: set[int] = set()

    def record(dnode: int, kernel_params: int, structure: int) -> bool:
        argv = ctypes.cast(kernel_params, ctypes.POINTER(ctypes.c_void_p))
        data = b"".join(ctypes.string_at(argv[i], s) for i, s in enumerate(info.sizes))
        out.append((dnode, data, structure))
        return dnode not in refuse

    def set_kernel(exec_handle: Any, dnode: Any, params: Any) -> tuple[Any]:
        assert int(exec_handle) == 0x4242
        if record(int(dnode), params.kernelParams, id(params)):
            return (drv.CUresult.CUDA_SUCCESS,)
        return (drv.CUresult.CUDA_ERROR_INVALID_VALUE,)

    def set_kernel_c(exec_handle: int, dnode: int, params: int) -> int:
        assert exec_handle == 0x4242
        (kernel_params,) = struct.unpack("<Q", ctypes.string_at(params + 40, 8))
        return 0 if record(dnode, kernel_params, params) else 1

    monkeypatch.setattr(_kernel_writer, "_SET_KERNEL", set_kernel)
    if request.param == "native":
        if _kernel_writer._REBIND is None:
            pytest.skip("cudagraph.driver._native was not built")
        out.callback = SET_PROTO(set_kernel_c)  # kept alive with the recorder
        monkeypatch.setattr(_kernel_writer, "_SET_KERNEL_ADDR", ctypes.cast(out.callback, ctypes.c_void_p).value)
    else:
        monkeypatch.setattr(_kernel_writer, "_SET_KERNEL_ADDR", None)
    out.refuse = refuse
    return out


def python_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Executable.launch`` as its Python twin, which launches through ``executable._LAUNCH`` (faked by the
    caller); the compiled method, where the driver is found, calls the driver's ``cuGraphLaunch`` itself."""
    monkeypatch.setattr(Executable, "launch", getattr(Executable.launch, "func", Executable.launch))


def make_exe(graph: cg.Graph, **bindings: Any) -> Executable:
    dn = [drv.CUgraphNode(0x100 + i) for i in range(len(graph))]
    lw = LoweredGraph(None, graph, dn, StubLowering(graph, dn))  # type: ignore[arg-type]
    exe = Executable(graph, lw, drv.CUgraphExec(0x4242), [], dict(bindings))
    exe._finalizer.detach()
    exe._ctx = "ctx"
    return exe


def args_bytes(ptr: int, a: float, n: int) -> bytes:
    return struct.pack("<Qfi", ptr, a, n)


def build() -> tuple[cg.Graph, list[Any]]:
    g = cg.Graph("g")
    p = g.param("p")
    a, a2, n = np.float32(2.0), np.float32(3.0), np.int32(64)
    use = (p, a, n)
    nodes = [
        g.kernel(K, 1, 32, use),
        g.kernel(K, 1, 32, use),
        g.kernel(K, 1, 32, (p, a2, n)),  # another scalar: a structure of its own
        g.kernel(K, 1, 32, (p, a, n)),  # a new tuple of the same objects: shared
        g.kernel(K, 2, 32, use),  # another grid: its own
        g.kernel(K, 1, 32, (0x9000, a, n)),  # no parameter
    ]
    return g, nodes


def test_nodes_with_the_same_objects_share_one_structure(calls):
    g, _ = build()
    exe = make_exe(g, p=0x1000)
    assert exe.bind(p=0x2000) == 5 and exe.update_calls == 5
    assert sorted(d for d, _, _ in calls) == [0x100, 0x101, 0x102, 0x103, 0x104]
    by_node = {d: (data, sid) for d, data, sid in calls}
    assert by_node[0x102][0] == args_bytes(0x2000, 3.0, 64)
    for d in (0x100, 0x101, 0x103, 0x104):
        assert by_node[d][0] == args_bytes(0x2000, 2.0, 64)
    assert by_node[0x100][1] == by_node[0x101][1] == by_node[0x103][1]  # one structure for the three
    assert len({sid for _, sid in by_node.values()}) == 3
    calls.clear()
    assert exe.bind(p=0x2000) == 0 and calls == []  # same value: nothing
    assert exe.bind(p=0x3000) == 5
    assert {data for _, data, _ in calls} == {args_bytes(0x3000, 2.0, 64), args_bytes(0x3000, 3.0, 64)}


def test_a_node_updated_alone_leaves_the_group_and_keeps_its_change(calls):
    g, nodes = build()
    exe = make_exe(g, p=0x1000)
    exe.bind(p=0x2000)
    calls.clear()
    exe[nodes[1]].update(args=(g.param("p"), np.float32(5.0), np.int32(64)))
    assert [(d, data) for d, data, _ in calls] == [(0x101, args_bytes(0x2000, 5.0, 64))]  # through the one writer
    calls.clear()
    assert exe.bind(p=0x4000) == 5
    by_node = {d: data for d, data, _ in calls}
    assert by_node[0x101] == args_bytes(0x4000, 5.0, 64)
    assert by_node[0x100] == by_node[0x103] == args_bytes(0x4000, 2.0, 64)


def test_a_refused_update_names_the_node(calls):
    g, _ = build()
    exe = make_exe(g, p=0x1000)
    calls.refuse.add(0x103)
    with pytest.raises(DriverError, match=r"cuGraphExecKernelNodeSetParams failed.*kernel#3"):
        exe.bind(p=0x2000)


def test_a_multi_parameter_bind_refreshes_shared_structures(calls):
    g = cg.Graph("g")
    p, q = g.param("p"), g.param("q", np.float32)
    use = (p, q, np.int32(8))
    for _ in range(3):
        g.kernel(K, 1, 32, use)
    exe = make_exe(g, p=0x1000, q=np.float32(1.0))
    exe.bind(p=0x2000)
    calls.clear()
    assert exe.bind(p=0x5000, q=np.float32(4.0)) == 3  # each node set from its prepared structure
    assert [data for _, data, _ in calls] == [args_bytes(0x5000, 4.0, 8)] * 3
    calls.clear()
    assert exe.bind(p=0x6000) == 3
    assert [data for _, data, _ in calls] == [args_bytes(0x6000, 4.0, 8)] * 3


# The compiled Executable.bind (``_native_bind.c``): one pointer through a prepared plan in C,
# everything else through the Python method. In "bindings" mode the plan has no compiled
# groups, so the same assertions check the Python path.


def chain(users: int = 3) -> tuple[cg.Graph, list[Any]]:
    g = cg.Graph("g")
    p = g.param("p")
    use = (p, np.float32(2.0), np.int32(8))
    return g, [g.kernel(K, 1, 32, use) for _ in range(users)]


def compiled() -> bool:
    return _kernel_writer._SET_KERNEL_ADDR is not None and _executable.NATIVE is not None


def test_bind_is_the_compiled_method_with_the_python_docstring():
    if _executable.NATIVE is None:
        pytest.skip("cudagraph.driver._native was not built")
    method = Executable.__dict__["bind"]
    assert type(method).__name__ == "BindMethod"
    assert method.__doc__ == method.func.__doc__ and method.__doc__.startswith("Rebind parameters")
    assert method.__name__ == "bind" and method.__qualname__ == "Executable.bind"
    assert str(inspect.signature(Executable.bind)) == "(self, **params: 'Any') -> 'int'"


def test_buffers_and_addresses_rebind_after_the_plan_is_made(calls, monkeypatch):
    g, _ = chain()
    a, b = Buffer(0xA000), Buffer(0xB000)
    exe = make_exe(g, p=0x1000)
    assert exe.bind(p=a) == 3  # the plan is made here, by the Python method
    if compiled():  # from now on the Python method must not be reached

        def no_python(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the compiled path was not taken")

        monkeypatch.setattr(Executable, "_bind_one", no_python)
    calls.clear()
    assert exe.bind(p=b) == 3 and exe.update_calls == 6
    assert [(d, data) for d, data, _ in calls] == [(0x100 + i, args_bytes(0xB000, 2.0, 8)) for i in range(3)]
    assert exe.bindings == {"p": 0xB000}
    calls.clear()
    assert exe.bind(p=b) == 0 and calls == []  # the same object
    assert exe.bind(p=0xB000) == 0 and calls == []  # the same address as an int
    assert exe.bind(p=Buffer(0xB000)) == 0 and calls == []  # ... and under another buffer
    assert exe.bind(p=0xC000) == 3 and exe.bindings == {"p": 0xC000} and exe.update_calls == 9
    assert [data for _, data, _ in calls] == [args_bytes(0xC000, 2.0, 8)] * 3
    bound = exe.bind
    assert bound.__self__ is exe and bound(p=a) == 3  # the bound method goes the same way
    calls.clear()
    assert exe.bind(p=a) == 0 and calls == []


def test_a_refusal_on_the_compiled_path_names_the_node_and_keeps_the_new_value(calls):
    g, _ = chain()
    exe = make_exe(g, p=0x1000)
    exe.bind(p=0x2000)
    calls.refuse.add(0x101)
    calls.clear()
    with pytest.raises(DriverError, match=r"cuGraphExecKernelNodeSetParams failed.*kernel#1"):
        exe.bind(p=0x3000)
    assert exe.bindings == {"p": 0x3000}
    assert [d for d, _, _ in calls][-1] == 0x101


def test_bad_values_and_closed_executables_get_the_python_errors(calls):
    g, _ = chain()
    exe = make_exe(g, p=0x1000)
    exe.bind(p=0x2000)
    for bad in (-1, 1 << 64, 2.5, "x"):
        calls.clear()
        with pytest.raises(OperandError, match="'p'"):
            exe.bind(p=bad)
        assert calls == [] and exe.bindings == {"p": 0x2000}
    with pytest.raises(OperandError, match="'nope'"):
        exe.bind(nope=0x2000)
    assert exe.bind(p=0) == 3 and exe.bindings == {"p": 0}  # NULL is an address (the Python path takes it)
    assert exe.bind(p=0x2000) == 3
    exe._exec = None  # what close() leaves
    with pytest.raises(ExecutableClosedError):
        exe.bind(p=0x2000)  # the bound value: closed all the same
    with pytest.raises(ExecutableClosedError):
        exe.bind(p=0x5000)


def test_the_compiled_path_waits_for_a_thread_holding_the_lock(calls):
    g, _ = chain()
    exe = make_exe(g, p=0x1000)
    exe.bind(p=0x2000)
    calls.clear()
    got: list[int] = []
    with exe._lock:  # another thread is changing the executable
        worker = threading.Thread(target=lambda: got.append(exe.bind(p=0x3000)))
        worker.start()
        worker.join(0.2)
        assert worker.is_alive() and calls == [] and got == []
    worker.join(5)
    assert got == [3] and exe.bindings == {"p": 0x3000}
    assert [data for _, data, _ in calls] == [args_bytes(0x3000, 2.0, 8)] * 3


def test_a_replaced_value_whose_release_binds_again_does_not_deadlock(calls):
    g, _ = build()
    exe = make_exe(g, p=0x1000)
    rebound: list[int] = []

    class Finalized(Buffer):
        def __del__(self) -> None:  # runs when the executable lets go of it
            rebound.append(exe.bind(p=0x9000))

    exe.bind(p=Finalized(0x2000))
    out: list[int] = []
    t = threading.Thread(target=lambda: out.append(exe.bind(p=0x5000)), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "the release of the replaced value ran under the executable's lock: a deadlock"
    assert out == [5] and rebound == [5]  # released after the lock, its bind then ran in full
    assert exe._bindings["p"] == 0x9000 and exe._raw_bound["p"] == 0x9000


ABSENT = object()


class Cai:
    """CuPy-like: a slotted array whose ``__cuda_array_interface__`` is a property making a fresh dict (read by
    ``bind_checks._cai``); ``typestr`` or ``strides`` left out of the dict where ``ABSENT``; ``data`` in place
    of the ``(ptr, False)`` pair where given."""

    __slots__ = ("ptr", "shape", "typestr", "strides", "data")

    def __init__(
        self, ptr: int, shape: Any = (64,), typestr: Any = "<f4", strides: Any = None, data: Any = None
    ) -> None:
        self.ptr, self.shape, self.typestr, self.strides, self.data = ptr, shape, typestr, strides, data

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        d = {"data": (self.ptr, False) if self.data is None else self.data, "shape": self.shape, "version": 3}
        if self.typestr is not ABSENT:
            d["typestr"] = self.typestr
        if self.strides is not ABSENT:
            d["strides"] = self.strides
        return d


def test_arrays_of_a_layout_that_resolved_rebind_a_plain_pointer_without_resolving_again(calls, converted, monkeypatch):
    """A plain ``g.param`` pointer bound to arrays: the first of a layout is resolved in full (its interface read
    by ``resolve_address``); later ones of that layout are taken by their reader's address (in C where built),
    with the same driver calls and state; a malformed interface or address 0 is resolved in full as before."""
    import cudagraph.executable.bind_checks as checks

    resolved: list[Any] = []
    real = checks._pointer
    monkeypatch.setattr(checks, "_pointer", lambda param, value: resolved.append(value) or real(param, value))
    g, _ = chain()
    exe = make_exe(g, p=0x1000)
    first = Cai(0xA000)
    assert exe.bind(p=first) == 3 and resolved == [first]  # resolved in full; the plan made
    assert exe.bindings == {"p": 0xA000}
    in_c = _executable.NATIVE is not None and getattr(calls, "callback", None) is not None  # the compiled plans
    for ptr in (0xB000, 0xC000, 0xB000):
        calls.clear()
        converted.clear()
        assert exe.bind(p=Cai(ptr)) == 3 and resolved == [first]  # the layout resolved: not again
        assert converted == ([] if in_c else ["p"])  # (the compiled _bind_many decides it without the twin)
        assert [data for _, data, _ in calls] == [args_bytes(ptr, 2.0, 8)] * 3 and exe.bindings == {"p": ptr}
    assert exe.bind(p=Cai(0xB000)) == 0 and exe.update_calls == 12  # the address bound: no driver call
    other = Cai(0xD000, shape=(8, 8))
    assert exe.bind(p=other) == 3 and resolved == [first, other]  # another layout: resolved, then remembered
    assert exe.bind(p=Cai(0xE000, shape=(8, 8))) == 3 and len(resolved) == 2
    with pytest.raises(OperandError, match=r"must be a \(pointer, read_only\) pair"):
        exe.bind(p=Cai(0xF000, data=(0xF000,)))  # a malformed interface of a layout that resolved
    assert exe.bindings == {"p": 0xE000} and len(resolved) == 3
    assert exe.bind(p=Cai(0)) == 3 and exe.bindings == {"p": 0} and len(resolved) == 4  # address 0: in full


def _tensor_pointer(monkeypatch: pytest.MonkeyPatch, resolved: list[Any]) -> None:
    """``bind_checks._pointer`` resolving CPU tensors as a CUDA tensor's ``__cuda_array_interface__`` would: its
    data pointer, or (a tensor that requires grad) an ``OperandError``; every value it sees is recorded."""
    import cudagraph.executable.bind_checks as checks

    def pointer(param: Any, value: Any) -> int:
        resolved.append(value)
        if value.requires_grad:
            raise OperandError(f"param {param.name!r}: reading __cuda_array_interface__ failed (requires grad)")
        return int(value.data_ptr())

    monkeypatch.setattr(checks, "_pointer", pointer)


def test_tensors_of_a_resolved_layout_rebind_a_plain_pointer_without_resolving_again(calls, converted, monkeypatch):
    """A plain ``g.param`` pointer bound to torch tensors: the first of a layout is resolved in full; later ones
    of that layout are taken by their address (in C where built, without the twin), with the same driver calls
    and state; a tensor of that layout that requires grad, which the full resolution refuses, is still refused."""
    torch = pytest.importorskip("torch")
    resolved: list[Any] = []
    _tensor_pointer(monkeypatch, resolved)
    g, _ = chain()
    exe = make_exe(g, p=0x1000)
    first = torch.zeros(64)
    assert exe.bind(p=first) == 3 and resolved == [first]
    in_c = _executable.NATIVE is not None and getattr(calls, "callback", None) is not None  # the compiled plans
    kept = [first]
    for _ in range(3):
        t = torch.zeros(64)
        kept.append(t)
        calls.clear()
        converted.clear()
        assert exe.bind(p=t) == 3 and resolved == [first]  # the layout resolved: not again
        assert converted == ([] if in_c else ["p"])  # (the compiled _bind_many decides it without the twin)
        assert [data for _, data, _ in calls] == [args_bytes(t.data_ptr(), 2.0, 8)] * 3
        assert exe.bindings == {"p": t.data_ptr()}
    grad = torch.zeros(64, requires_grad=True)
    converted.clear()
    with pytest.raises(OperandError, match="requires grad"):
        exe.bind(p=grad)
    assert resolved == [first, grad] and converted == ["p"] and exe.bindings == {"p": kept[-1].data_ptr()}
    other = torch.zeros(8, 8)
    assert exe.bind(p=other) == 3 and resolved == [first, grad, other]  # another layout: resolved, remembered
    again = torch.zeros(8, 8)
    assert exe.bind(p=again) == 3 and len(resolved) == 3 and exe.bindings == {"p": again.data_ptr()}


def test_tensors_on_a_plain_pointer_decide_as_the_twins_key_lookup(calls, converted, monkeypatch):
    """The compiled rebind takes a tensor for a plain pointer exactly when the twin's key (``_torch_resolved``'s,
    with ``requires_grad``) is one of the layouts that resolved, and leaves every other to the twin."""
    torch = pytest.importorskip("torch")
    import cudagraph.executable.bind_checks as checks

    monkeypatch.setattr(checks, "_pointer", lambda param, value: int(value.data_ptr()))  # every layout resolves

    def layouts() -> list[Any]:
        base = torch.zeros(32, 32)
        return [
            torch.zeros(32, 32),
            torch.zeros(32, 32, requires_grad=True),
            torch.zeros(16, 16),
            torch.zeros(32, 32, dtype=torch.float64),
            base.t(),
            base[:, ::2],
            base.view(1, 32, 32),
            torch.zeros(1).expand(32, 32),
            torch.zeros(()),
        ]

    in_c = _executable.NATIVE is not None and getattr(calls, "callback", None) is not None
    kept: list[Any] = []  # every tensor stays alive: a new one at a freed one's address binds nothing
    for first in (0, 1, 4, 8):
        g, _ = chain()
        exe = make_exe(g, p=0x1000)
        kept.append(layouts())
        exe.bind(p=kept[-1][first])  # this layout resolves (in full, by the twin)
        passed = exe._checks["p"].passed
        assert list(passed) == [checks._torch_resolved(kept[-1][first])[1]]
        for t in layouts():
            kept.append(t)
            expected = checks._torch_resolved(t)[1] in passed
            converted.clear()
            exe.bind(p=t)
            assert (converted == []) == (expected and in_c), (first, t.shape, t.stride(), t.requires_grad)
            assert exe.bindings == {"p": t.data_ptr()}
