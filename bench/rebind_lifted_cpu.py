"""The host cost of rebinding a lifted graph, on the CPU with a fake driver (no GPU needed).

The twin of ``bench/rebind_lifted.py`` for the host side: a definition shaped
like a lifted PyTorch transformer block (45 kernel nodes of four kernels whose
arguments are raw bytes, as lifted kernels have them, and 2 copies), made a
parametrized graph by ``g.parametrize(x=..., out=...)``: 6 kernel nodes use
``x`` or ``out`` (a whole pointer argument, a pointer inside a by-value struct,
a pointer at a byte offset, both names in one node) and both copies do (one at
an offset). The driver is replaced: kernel-node and node updates count their
calls (a C function when a C compiler is found, so that the compiled paths are
timed without a Python callback; else a ctypes callback, whose cost is then
included), and the launch returns at once.

Printed, in µs per step (best of several rounds of many steps):

- ``exe.launch(s)``, the floor;
- ``exe.launch(s, x=a, out=b)`` alternating two addresses with a fresh memory
  object every step, as users pass them: an object with
  ``__cuda_array_interface__`` (CuPy-like, its interface a property), a
  ``cuda.core``-Buffer-like object, and the same two objects of each pair again;
- the same objects a second time (no change: no driver call);
- the cost above the floor against the target of 2 µs plus 1 µs per rebound
  node, and the driver calls per step;
- where PyTorch is importable, reading one fresh tensor (its address and layout
  key, and the key's look-up) with the exact ``torch.Tensor`` reader and with the
  general one (CPU tensors cost what CUDA ones do to read); and, with the compiled
  module, ``exe.launch(s, x=, out=)`` with two tensors in turn, the compiled
  rebind reading them in C and through that Python reader;
- ``g.parametrize(x=..., out=...)`` per node of the definition (and of one 20
  times larger).

Run: ``python bench/rebind_lifted_cpu.py [--steps 20000] [--rounds 5]`` (set
``CUDAGRAPH_NO_C_ENTRY=1`` to time the pure-Python paths).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import compiled_bind_many, fmt, import_cudagraph, no_gc, verdict

import_cudagraph()

import cudagraph as cg  # noqa: E402

X1, X2 = 0x7F00_0000_0000, 0x7F10_0000_0000
OUT1, OUT2 = 0x7F00_0100_0000, 0x7F20_0000_0000
POOL = 0x7E00_0000_0000  # intermediate memory: never a parameter
SHAPE = (1, 128, 128)
NBYTES = 4 * 128 * 128


def q(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *values)


# ------------------------------------------------------------------ memory objects, as users pass them
class Device:
    __slots__ = ("id",)

    def __init__(self, ordinal: int) -> None:
        self.id = ordinal


DEVICE0 = Device(0)


class CaiArray:
    """A CuPy-like array: ``__cuda_array_interface__`` is a property making a fresh dict."""

    __slots__ = ("ptr", "shape")

    def __init__(self, ptr: int, shape: tuple[int, ...] = SHAPE) -> None:
        self.ptr, self.shape = ptr, shape

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": "<f4", "data": (self.ptr, False), "version": 3, "strides": None}

    @property
    def device(self) -> Device:
        return DEVICE0


class BufferLike:
    """What a ``cuda.core`` Buffer shows: ``handle`` (the address), ``size``, ``device_id``..."""

    __slots__ = ("handle", "size")
    memory_resource = None
    device_id = 0
    is_device_accessible = True

    def __init__(self, ptr: int, size: int = NBYTES) -> None:
        self.handle, self.size = ptr, size


# ------------------------------------------------------------------ the definition
class CUkernel:  # the definition layer recognises kernels by type name
    def __init__(self, name: str, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> None:
        self.name, self.offsets, self.sizes = name, offsets, sizes


EW = CUkernel("elementwise", (0, 8, 32), (4, 24, 8))  # (int n, Array<char*, 3>, int64)
GEMM = CUkernel("gemm", (0, 8, 16, 24, 28, 32, 36), (8, 8, 8, 4, 4, 4, 4))  # (a, b, c, m, n, k, alpha)
LN = CUkernel("layernorm", (0, 8, 16, 24, 32, 40, 48, 56), (8,) * 7 + (4,))  # (x, w, b, y, mean, rstd, n, eps)
RED = CUkernel("reduce", (0, 512), (512, 4))  # (ReduceOp by value, int n)
LOOP = CUkernel("elementwise_loop", (0, 8), (4, 648))  # (int n, a functor holding an OffsetCalculator)
KERNELS = (EW, GEMM, LN, RED, LOOP)


def args_of(k: CUkernel, i: int, x: int, out: int, role: int) -> tuple[bytes, ...]:
    """Lifted-style arguments of the ``i``-th node; ``role`` > 0 puts ``x``/``out`` in it (6 kinds of use)."""
    p = POOL + 0x10000 * i
    if k is EW:
        data = {1: q(p, x, p + 64), 4: q(out + 16, x + 256, p)}.get(role, q(p, p + 8, p + 16))
        return (struct.pack("<i", 4096), data, q(7))
    if k is GEMM:
        a, c = {3: (p, x + 4096), 6: (x, out)}.get(role, (p, p + 32))
        return (q(a), q(p + 8), q(c), *(struct.pack("<i", v) for v in (128, 128, 64)), struct.pack("<f", 1.0))
    if k is LN:
        first = x if role == 2 else p
        return (q(first), *(q(p + 8 * j) for j in range(1, 6)), q(128), struct.pack("<f", 1e-5))
    if k is LOOP:
        functor = bytearray(648)
        struct.pack_into("<QQQ", functor, 0, p, p + 8, p + 16)
        struct.pack_into("<25I", functor, 24, *range(1, 26))  # sizes, strides: small ints
        return (struct.pack("<i", 4096), bytes(functor))
    red = bytearray(512)
    struct.pack_into("<QQ", red, 0, p, p + 8)
    struct.pack_into("<Q", red, 256, out + 1024 if role == 5 else p + 24)
    return (bytes(red), struct.pack("<i", 512))


def lifted_like(kernels: int = 45, x: int = X1, out: int = OUT1) -> cg.Graph:
    """45 kernel nodes (6 using x or out) between two copies, in a chain, as a lifted graph holds them."""
    g = cg.Graph("block")
    roles = {3: 1, 9: 2, 17: 3, 24: 4, 31: 5, 40: 6}  # node index -> kind of use
    by_role = {1: EW, 2: LN, 3: GEMM, 4: EW, 5: RED, 6: GEMM}
    prev = g.memcpy(POOL, x + 256, 4096, name="copy_in")
    for i in range(kernels):
        role = roles.get(i % 45, 0) if i < 45 else 0
        k = by_role[role] if role else KERNELS[i % len(KERNELS)]
        prev = g.kernel(k, 1, 128, args_of(k, i, x, out, role), after=prev)
    g.memcpy(out, POOL + 64, NBYTES, after=prev, name="copy_out")
    return g


# ------------------------------------------------------------------ the fake driver
_FAKE_C = """
static unsigned long long calls;
int cg_fake_set(void *exec, void *node, const void *params) { (void)exec; (void)node; (void)params; calls++; return 0; }
unsigned long long cg_fake_calls(void) { return calls; }
"""


class FakeDriver:
    """Replaces the driver calls that rebinding and launching make; counts the node updates."""

    def __init__(self) -> None:
        import cuda.bindings.driver as drv

        self.drv = drv
        self.py_calls = 0
        self.c_lib: Any = None
        self.c_address: int | None = None
        self.callback: Any = None
        self.how = "none"
        self.folder: Path | None = None
        self._saved: list[tuple[Any, str, Any]] = []

    def c_calls(self) -> int:
        if self.c_lib is not None:
            return int(self.c_lib.cg_fake_calls())
        return self.py_calls

    def calls(self) -> int:
        return self.c_calls() + (self.py_calls if self.c_lib is not None else 0)

    def _compile(self) -> None:
        cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        if cc is not None:
            folder = self.folder = Path(tempfile.mkdtemp(prefix="cg_fake_driver_"))
            (folder / "fake.c").write_text(_FAKE_C)
            try:
                subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(folder / "fake.so"), str(folder / "fake.c")],
                               check=True, capture_output=True)  # fmt: skip
                lib = ctypes.CDLL(str(folder / "fake.so"))
                lib.cg_fake_calls.restype = ctypes.c_ulonglong
                self.c_lib = lib
                self.c_address = ctypes.cast(lib.cg_fake_set, ctypes.c_void_p).value
                self.how = f"a C function ({Path(cc).name})"
                return
            except (OSError, subprocess.CalledProcessError):
                pass
        proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)

        def counted(e: int, n: int, p: int) -> int:
            self.py_calls += 1
            return 0

        self.callback = proto(counted)
        self.c_address = ctypes.cast(self.callback, ctypes.c_void_p).value
        self.how = "a ctypes callback (no C compiler: its cost is included)"

    def _set(self, obj: Any, name: str, value: Any) -> None:
        if hasattr(obj, name):
            self._saved.append((obj, name, getattr(obj, name)))
            setattr(obj, name, value)

    def install(self) -> None:
        import cudagraph.driver.kernel_args as kargs
        import cudagraph.executable.executable as executable
        import cudagraph.ops.kinds.kernel as kernel_ops
        from cudagraph.driver.c_entry import NATIVE

        drv = self.drv
        ok = (drv.CUresult.CUDA_SUCCESS,)
        infos = {id(k): fake_info(drv, k) for k in KERNELS}

        def counted(*args: Any) -> tuple[Any]:
            self.py_calls += 1
            return ok

        memory_type = drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
        device_type = int(drv.CUmemorytype.CU_MEMORYTYPE_DEVICE)

        def attributes(n: int, attrs: list[Any], ptr: int) -> tuple[Any, list[int]]:
            return drv.CUresult.CUDA_SUCCESS, [device_type if attrs[0] == memory_type else 0]

        self._set(kernel_ops, "kernel_info", lambda k: infos[id(k)])
        self._set(kargs, "kernel_info", lambda k: infos[id(k)])
        self._set(kernel_ops, "_SET_KERNEL", counted)
        self._set(executable, "_LAUNCH", lambda e, s: ok)
        self._set(drv, "cuGraphExecNodeSetParams", counted)
        self._set(drv, "cuPointerGetAttributes", attributes)
        if NATIVE is not None:
            self._compile()
            self._set(kernel_ops, "_SET_KERNEL_ADDR", self.c_address)
            for module, name in _NODE_SET_ADDRESSES:
                self._set(module, name, self.c_address)
        else:
            self.how = "Python functions (CUDAGRAPH_NO_C_ENTRY or no compiled module)"

    def uninstall(self) -> None:
        for obj, name, value in reversed(self._saved):
            setattr(obj, name, value)
        self._saved.clear()
        if self.folder is not None:  # (the library stays loaded)
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


#: ``(module, attribute)`` of further driver entry points held as addresses (filled where they exist).
_NODE_SET_ADDRESSES: list[tuple[Any, str]] = []


def _node_set_addresses() -> None:
    import importlib

    try:
        patch_plan = importlib.import_module("cudagraph.executable.patch_plan")
    except ImportError:  # (a version without it: copies are set through cuda.bindings)
        return
    _NODE_SET_ADDRESSES.append((patch_plan, "_SET_NODE_ADDR"))


def fake_info(drv: Any, k: CUkernel) -> Any:
    from cudagraph.driver.kernel_args import KernelInfo

    info = KernelInfo.__new__(KernelInfo)
    info.kernel = None
    info.handle = drv.CUkernel(0x7700 + KERNELS.index(k))
    info.is_library_kernel = True
    info.name = k.name
    info.offsets, info.sizes = k.offsets, k.sizes
    info.total = max(o + s for o, s in zip(k.offsets, k.sizes))
    info._scratch = (ctypes.c_char * info.total)()
    info._scratch_addr = ctypes.addressof(info._scratch)
    info._ptrs = (ctypes.c_void_p * len(k.offsets))(*[info._scratch_addr + o for o in k.offsets])
    info.params_address = ctypes.addressof(info._ptrs)
    info._packers = {}
    info._kinds = {}
    return info


def make_exe(drv: Any, g: cg.Graph) -> Any:
    """An Executable of ``g`` over fake driver nodes (what instantiate() makes, without a driver)."""
    from cudagraph.definition.bindings import node_params_uses, resolve_bindings
    from cudagraph.executable.executable import Executable
    from cudagraph.materialize.explicit import LoweredGraph

    class Lowering:
        def __init__(self) -> None:
            self.host_keys: list[int] = []
            self.state = None
            self.bodies: list[Any] = []
            self.param_users: dict[str, list[Any]] = {}
            for n in g._nodes:
                for name in node_params_uses(n):
                    self.param_users.setdefault(name, []).append(n)

        def node_map(self) -> dict[int, tuple[Any, Any]]:
            return {id(n): (n, d) for n, d in zip(g._nodes, dn)}

    dn = [drv.CUgraphNode(0x1000 + i) for i in range(len(g))]
    lowered = LoweredGraph(None, g, dn, Lowering())  # type: ignore[arg-type]
    exe = Executable(g, lowered, drv.CUgraphExec(0x4242), [], resolve_bindings(g, {}))
    exe._finalizer.detach()
    exe._ctx = drv.CUcontext(0x5151)
    return exe


# ------------------------------------------------------------------ measuring
def per_step(step: Callable[[int], None], steps: int, rounds: int) -> float:
    """Best µs per call of ``step(i)`` over ``rounds`` rounds of ``steps`` calls."""
    best = float("inf")
    for _ in range(rounds):
        with no_gc():
            t0 = time.perf_counter()
            for i in range(steps):
                step(i)
            best = min(best, (time.perf_counter() - t0) / steps * 1e6)
    return best


def parametrize_cost(kernels: int, repeats: int) -> tuple[float, int, float]:
    """``(µs per node of g.parametrize(x=..., out=...), nodes, 8-byte slots per node)`` on fresh definitions."""
    best = float("inf")
    nodes = 0
    slots = 0.0
    for _ in range(repeats):
        g = lifted_like(kernels)
        nodes = len(g)
        slots = sum(len(a) // 8 for n in g.nodes if n.kind == "kernel" for a in n.args) / nodes  # type: ignore[attr-defined]
        x, out = CaiArray(X1), CaiArray(OUT1)
        t0 = time.perf_counter()
        g.parametrize(x=x, out=out)
        best = min(best, (time.perf_counter() - t0) / nodes * 1e6)
    return best, nodes, slots


def torch_readers(steps: int, rounds: int) -> None:
    """µs to read a fresh PyTorch tensor's address and layout key and look the key up, per reader (needs torch).

    CPU tensors cost what CUDA ones do to read; the exact ``torch.Tensor`` reader is
    timed against the general one that subclasses and look-alikes get.
    """
    try:
        import torch
    except ImportError:
        print("\ntorch is not importable: its tensor readers are not timed")
        return
    from cudagraph.executable import bind_checks

    tensors = [torch.empty(SHAPE) for _ in range(2)]
    print("\n| reader of one fresh torch tensor (address, key, key look-up) | µs |")
    print("| --- | --- |")
    for label, read in (
        ("exact torch.Tensor (`_torch_tensor`)", bind_checks.reader(torch.Tensor)),
        ("general tensor-like (`_torch`)", bind_checks._torch),
    ):
        assert read is not None
        passed = {read(tensors[0])[1]: None}

        def step(i: int, read: Any = read, passed: dict[Any, None] = passed) -> None:
            _address, key = read(tensors[i & 1])
            assert key in passed

        print(f"| {label} | {fmt(per_step(step, steps, rounds), 2)} |")


def torch_rebinds(fake: FakeDriver, steps: int, rounds: int, native: bool) -> None:
    """µs above ``exe.launch(s)`` of ``exe.launch(s, x=, out=)`` with two PyTorch tensors (two pairs in turn), the
    compiled ``_bind_many`` reading them in C and through the Python reader (needs torch and the compiled module).

    The graph is parametrized with address ranges and the full check of a new layout is replaced: CPU tensors,
    which it refuses as host memory, stand for CUDA ones (they cost the same to read).
    """
    try:
        import torch
    except ImportError:
        print("\ntorch is not importable: rebinding torch tensors is not timed")
        return
    from cudagraph.executable import bind_checks, executable
    from cudagraph.executable.executable import Executable

    compiled = Executable.__dict__.get("_bind_many")
    if not native or not compiled_bind_many(Executable):
        print("\nno compiled _bind_many: rebinding torch tensors is not timed")
        return
    g = lifted_like()
    g.parametrize(x=(X1, NBYTES), out=(OUT1, NBYTES))
    exe = make_exe(fake.drv, g)
    s = fake.drv.CUstream(0x99)
    pairs = [(torch.empty(SHAPE), torch.empty(SHAPE)) for _ in range(2)]
    full = bind_checks.checked_address
    bind_checks.checked_address = lambda name, captured, value, graph: int(value.data_ptr())  # type: ignore[assignment]
    python_reader = executable._bind_many_method(read_torch=False)
    getters = executable._bind_many_method(torch_dlpack=False)
    try:
        for x, out in pairs:
            exe.launch(s, x=x, out=out)  # the layouts pass the check once; the plans are made

        def plain(i: int) -> None:
            exe.launch(s)

        def rebind(i: int) -> None:
            x, out = pairs[i & 1]
            exe.launch(s, x=x, out=out)

        floor = per_step(plain, steps, rounds)
        print("\n| two torch tensors, launch(s, x=, out=) | host µs/step | above exe.launch(s) |")
        print("| --- | --- | --- |")
        for label, method in (
            ("tensors read in C (DLPack's C exchange API where torch has it)", compiled),
            ("tensors read in C through torch's getters", getters),
            ("through the Python reader", python_reader),
        ):
            Executable._bind_many = method  # type: ignore[method-assign]
            t = per_step(rebind, steps, rounds)
            print(f"| {label} | {fmt(t, 2)} | {fmt(t - floor, 2)} |")
    finally:
        Executable._bind_many = compiled  # type: ignore[method-assign]
        bind_checks.checked_address = full


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from cudagraph.driver.c_entry import NATIVE

    _node_set_addresses()
    fake = FakeDriver()
    fake.install()
    try:
        run(fake, args.steps, args.rounds, NATIVE is not None)
    finally:
        fake.uninstall()


def run(fake: FakeDriver, steps: int, rounds: int, native: bool) -> None:
    drv = fake.drv
    g = lifted_like()
    report = g.parametrize(x=CaiArray(X1), out=CaiArray(OUT1))
    rebound = len({id(r.node) for r in report})
    exe = make_exe(drv, g)
    s = drv.CUstream(0x99)
    print(f"compiled module: {'yes' if native else 'no'}; fake driver calls: {fake.how}")
    print(
        f"{len(g)} nodes ({sum(1 for n in g.nodes if n.kind == 'kernel')} kernels), {len(report)} slots rewritten "
        f"in {rebound} nodes ({report.count('x')} x, {report.count('out')} out)"
    )
    n = steps
    cai = [(CaiArray(X1 if i % 2 else X2), CaiArray(OUT1 if i % 2 else OUT2)) for i in range(n)]
    bufs = [(BufferLike(X1 if i % 2 else X2), BufferLike(OUT1 if i % 2 else OUT2)) for i in range(n)]
    two = [cai[0], cai[1]]
    launch = exe.launch
    exe.launch(s, x=cai[0][0], out=cai[0][1])  # the plans are made outside the timing
    exe.launch(s, x=bufs[1][0], out=bufs[1][1])

    before = fake.calls()
    exe.launch(s, x=cai[2][0], out=cai[2][1])
    calls_per_rebind = fake.calls() - before
    before = fake.calls()
    exe.launch(s, x=CaiArray(cai[2][0].ptr), out=CaiArray(cai[2][1].ptr))
    calls_same = fake.calls() - before

    def plain(i: int) -> None:
        launch(s)

    def rebind_cai(i: int) -> None:
        a, b = cai[i]
        launch(s, x=a, out=b)

    def rebind_buf(i: int) -> None:
        a, b = bufs[i]
        launch(s, x=a, out=b)

    def rebind_two(i: int) -> None:
        a, b = two[i & 1]
        launch(s, x=a, out=b)

    def same(i: int) -> None:
        launch(s, x=a0, out=b0)

    a0, b0 = cai[0]
    floor = per_step(plain, n, rounds)
    rows = [
        ("exe.launch(s)", floor),
        ("launch(s, x=, out=): fresh __cuda_array_interface__ objects", per_step(rebind_cai, n, rounds)),
        ("launch(s, x=, out=): fresh Buffer-like objects", per_step(rebind_buf, n, rounds)),
        ("launch(s, x=, out=): the same two pairs in turn", per_step(rebind_two, n, rounds)),
    ]
    exe.launch(s, x=a0, out=b0)
    rows.append(("launch(s, x=, out=): the values bound (no change)", per_step(same, n, rounds)))
    target = 2.0 + 1.0 * calls_per_rebind
    print(f"\ndriver calls per rebinding launch: {calls_per_rebind} (same addresses again: {calls_same})")
    print("| path | host µs/step | above exe.launch(s) | target |")
    print("| --- | --- | --- | --- |")
    for label, t in rows:
        above = t - floor
        mark = "" if t is floor or "no change" in label else f"{fmt(target, 1)} {verdict(above <= target)}"
        print(f"| {label} | {fmt(t, 2)} | {fmt(above, 2) if t is not floor else ''} | {mark} |")
    torch_readers(steps, rounds)
    torch_rebinds(fake, steps, rounds, native)
    small, nodes, slots = parametrize_cost(45, 20)
    big, big_nodes, _ = parametrize_cost(45 * 20, 3)
    print(f"\ng.parametrize(x=, out=): {fmt(small, 2)} µs per node ({nodes} nodes, {slots:.0f} argument words per "
          f"node on average), {fmt(big, 2)} µs per node ({big_nodes} nodes)")  # fmt: skip


if __name__ == "__main__":
    main()
