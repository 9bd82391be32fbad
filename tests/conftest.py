"""Shared fixtures of the test-suite.

GPU tests are marked ``gpu`` and use the fixtures below; every fixture that
needs CUDA depends on ``device``, which *skips* (with the reason shown in the
summary) when ``cuda.core``/``cuda.bindings`` are missing or no NVIDIA driver
or GPU works. CUDA modules are imported lazily, so the CPU tests of this
directory collect and run on a machine without CUDA.
"""

from __future__ import annotations

import ctypes
import os
import weakref
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

#: Test kernels, compiled once per session with NVRTC (see the ``kernels`` fixture).
KERNEL_SOURCE = r"""
struct Pair { double a; int b; };

extern "C" __global__ void axpb(float* y, const float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}

// In place: x = x * a + k (order of two such updates matters).
extern "C" __global__ void scale_add(float* x, float a, float k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + k;
}

extern "C" __global__ void add_i32(int* x, int v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += v;
}

// out = a - 2 * b (not symmetric: checks that operands are not swapped).
extern "C" __global__ void combine(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] - 2.0f * b[i];
}

// By-value struct of 16 bytes (double at offset 0, int at 8, 4 bytes padding).
extern "C" __global__ void pair_out(Pair p, double* out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = p.a * 2.0 + (double)p.b;
}

// Mixed sizes and alignments: offsets 0, 8, 16, 24.
extern "C" __global__ void mixed(char c, double d, short s, double* out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = (double)c;
        out[1] = d;
        out[2] = (double)s;
    }
}
"""

KERNEL_NAMES = ("axpb", "scale_add", "add_i32", "combine", "pair_out", "mixed")

_probe_result: list[str | None] = []


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The skips: one line per skipped test, except the GPU tests, counted on one line per reason.

    ``addopts`` asks pytest for failures, errors and xfails only (``-rfExX``); the skips are
    reported here, so that a CPU machine prints one line for its skipped GPU tests.
    """
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    gpu: dict[str, int] = {}
    for r in skipped:
        if hasattr(r, "wasxfail"):
            continue
        path, line, reason = r.longrepr if isinstance(r.longrepr, tuple) else ("?", None, str(r.longrepr))
        reason = reason.removeprefix("Skipped: ")
        if "gpu" in getattr(r, "keywords", ()):  # (a module skipped whole reports no keywords)
            gpu[reason] = gpu.get(reason, 0) + 1
        else:
            where = path if line is None else f"{path}:{line + 1}"
            terminalreporter.write_line(f"SKIPPED {where}: {reason}", yellow=True)
    for reason, count in sorted(gpu.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"SKIPPED {count} GPU tests ({reason})", yellow=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gpu: needs an NVIDIA GPU and driver (skipped, with the reason shown, when none works)"
    )


def _probe() -> str | None:
    """``None`` when a GPU and driver work, else the reason why not."""
    if _probe_result:
        return _probe_result[0]
    reason: str | None = None
    try:
        import cuda.core  # noqa: F401
        from cuda.bindings import driver
    except Exception as exc:
        reason = f"cuda.core/cuda.bindings not importable: {type(exc).__name__}: {exc}"
    else:
        try:
            (err,) = driver.cuInit(0)
            if err:
                reason = f"cuInit(0) failed: {getattr(err, 'name', err)}"
            else:
                err, count = driver.cuDeviceGetCount()
                if err:
                    reason = f"cuDeviceGetCount failed: {getattr(err, 'name', err)}"
                elif count < 1:
                    reason = "cuDeviceGetCount found 0 devices"
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
    _probe_result.append(reason)
    return reason


def _check(result: Any, call: str) -> Any:
    err = result[0]
    if err:
        raise RuntimeError(f"{call} failed: {getattr(err, 'name', err)}")
    return result[1] if len(result) == 2 else result[1:] if len(result) > 2 else None


def address(obj: Any) -> int:
    """The address of a Buffer, an object with ``__cuda_array_interface__`` or an int."""
    if isinstance(obj, int):
        return obj
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    return int(obj.handle)


class GpuHelper:
    """Allocation and host<->device copies for tests (synchronous, context-wide).

    Every read and write first synchronizes the whole context, so results of
    work on any stream (including non-blocking ones) are visible.
    """

    def __init__(self, device: Any, stream: Any) -> None:
        from cuda.bindings import driver

        self.driver = driver
        self.device = device
        self.stream = stream

    address = staticmethod(address)

    def sync(self) -> None:
        """Wait for all work in the context (releases the GIL, so host nodes can run)."""
        _check(self.driver.cuCtxSynchronize(), "cuCtxSynchronize")

    def alloc(self, nbytes: int) -> Any:
        """A device ``Buffer`` of ``nbytes`` bytes, ready to use from any stream.

        From the device's stream-ordered pool, or with ``CUDAGRAPH_TEST_ALLOC=plain`` (which
        ``scripts/compute_sanitizer.sh`` sets) from ``cuMemAlloc``, freed by ``cuMemFree`` with the
        Buffer: memcheck's table of pool allocations, read by kernels that conditional nodes launch
        from the device, can lag an address the pool has just handed out again, and reports reads of
        it as out of bounds although the results are right.
        """
        if os.environ.get("CUDAGRAPH_TEST_ALLOC") == "plain":
            from cuda.core import Buffer

            ptr = _check(self.driver.cuMemAlloc(max(int(nbytes), 1)), "cuMemAlloc")
            buf = Buffer.from_handle(int(ptr), nbytes)
            weakref.finalize(buf, self.driver.cuMemFree, ptr)
            return buf
        buf = self.device.allocate(nbytes, stream=self.stream)
        self.stream.sync()
        return buf

    def write(self, dst: Any, arr: np.ndarray, offset: int = 0) -> None:
        """Copy a numpy array to device memory at ``dst`` (+ ``offset`` bytes)."""
        arr = np.ascontiguousarray(arr)
        self.sync()
        _check(self.driver.cuMemcpyHtoD(address(dst) + offset, arr.ctypes.data, arr.nbytes), "cuMemcpyHtoD")
        # From pageable memory the call returns once the bytes are staged, before the DMA lands; work on a
        # non-blocking stream does not wait for it, so wait here.
        self.sync()

    def upload(self, arr: np.ndarray) -> Any:
        """A new device ``Buffer`` holding a copy of ``arr``."""
        arr = np.ascontiguousarray(arr)
        buf = self.alloc(max(arr.nbytes, 1))
        self.write(buf, arr)
        return buf

    def read(self, src: Any, count: int, dtype: Any = np.float32, offset: int = 0) -> np.ndarray:
        """``count`` elements of ``dtype`` copied back from ``src`` (+ ``offset`` bytes)."""
        out = np.empty(count, dtype=dtype)
        self.sync()
        _check(self.driver.cuMemcpyDtoH(out.ctypes.data, address(src) + offset, out.nbytes), "cuMemcpyDtoH")
        return out

    def pinned(self, nbytes: int) -> tuple[Any, np.ndarray]:
        """Pinned host memory: ``(cuda.core Buffer, numpy view of its bytes)``.

        Skips the test when cuda.core offers no pinned memory resource.
        """
        try:
            from cuda.core import LegacyPinnedMemoryResource

            buf = LegacyPinnedMemoryResource().allocate(nbytes)
        except Exception as exc:
            pytest.skip(f"no pinned memory from cuda.core: {exc}")
        raw = (ctypes.c_uint8 * nbytes).from_address(int(buf.handle))
        view = np.ctypeslib.as_array(raw)
        return buf, view


@pytest.fixture(scope="session")
def device() -> Any:
    """The cuda.core ``Device`` 0, set current; skips when no GPU/driver works."""
    reason = _probe()
    if reason is not None:
        pytest.skip(f"no NVIDIA GPU/driver: {reason}")
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    return dev


@pytest.fixture
def stream(device: Any) -> Any:
    """A fresh cuda.core ``Stream`` (synchronized at teardown)."""
    device.set_current()
    s = device.create_stream()
    yield s
    s.sync()


@pytest.fixture
def gpu(device: Any, stream: Any) -> GpuHelper:
    """Helpers: ``alloc``, ``upload``, ``write``, ``read``, ``pinned``, ``sync``."""
    return GpuHelper(device, stream)


def compile_kernels(device: Any, source: str, names: tuple[str, ...]) -> SimpleNamespace:
    """Compile ``source`` with NVRTC for ``device``; a namespace of cuda.core ``Kernel`` by name."""
    from cuda.core import Program, ProgramOptions

    prog = Program(source, "c++", ProgramOptions(arch=f"sm_{device.arch}"))
    mod = prog.compile("cubin")
    ns = SimpleNamespace(**{name: mod.get_kernel(name) for name in names})
    ns._module = mod
    return ns


@pytest.fixture(scope="session")
def nvrtc(device: Any) -> Any:
    """``nvrtc(source, names)``: compile a fresh module; returns a namespace of ``Kernel`` objects."""
    return lambda source, names: compile_kernels(device, source, tuple(names))


@pytest.fixture(scope="session")
def compat_kernels(nvrtc: Any) -> Any:
    """The kernels of ``tests/compat_kernels.py`` (the programs written against cuda.core), compiled once."""
    from compat_kernels import NAMES, SOURCE

    return nvrtc(SOURCE, NAMES)


@pytest.fixture(params=["cuda.core", "cudagraph.compat"])
def graph_api(request: Any) -> Any:
    """``cuda.core.graph`` or ``cudagraph.compat``: a program written against cuda.core's graph API runs with
    each (the cuda.core case is skipped where cuda.core is not installed)."""
    if request.param == "cuda.core":
        return pytest.importorskip("cuda.core.graph")
    import cudagraph

    return cudagraph.compat


@pytest.fixture
def GD(graph_api: Any) -> Any:
    """The ``GraphDefinition`` class of :func:`graph_api`."""
    return graph_api.GraphDefinition


@pytest.fixture(scope="session")
def kernels(device: Any) -> SimpleNamespace:
    """The test kernels of :data:`KERNEL_SOURCE` as cuda.core ``Kernel`` objects (compiled once)."""
    try:
        return compile_kernels(device, KERNEL_SOURCE, KERNEL_NAMES)
    except Exception as exc:
        pytest.fail(f"NVRTC compilation of the test kernels failed: {type(exc).__name__}: {exc}")


@pytest.fixture
def converted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The parameter names whose new values went through ``ValueCheck.convert`` (the Python checks of a rebind,
    which the compiled ``_bind_many`` skips for values it decides itself)."""
    from cudagraph.executable.bind_checks import ValueCheck

    seen: list[str] = []
    real = ValueCheck.convert

    def convert(self: ValueCheck, value: Any, bound: Any) -> Any:
        seen.append(self.param.name)
        return real(self, value, bound)

    monkeypatch.setattr(ValueCheck, "convert", convert)
    return seen
