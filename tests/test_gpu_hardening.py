"""Faults, lifetimes, leaks and threads on the GPU."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest

import cudagraph as cg
from cudagraph.driver import host_callbacks as _host_callbacks
from cudagraph.executable.executable import Executable
from cudagraph.materialize.explicit import LoweredGraph

pytestmark = pytest.mark.gpu

N = 128
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _mem_used() -> int:
    from cuda.bindings import driver

    err, free, total = driver.cuMemGetInfo()
    assert not err
    return int(total) - int(free)


def _live(cls: type) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is cls)


def _graph_of_50(kernels, buf, host_log: list[int] | None = None) -> cg.Graph:
    g = cg.Graph("soak")
    prev = g.memset(buf, 0, count=N, element_size=4)
    for _ in range(48):
        prev = g.kernel(kernels.add_i32, 1, N, (buf, np.int32(1), np.int32(N)), after=prev)
    if host_log is not None:
        g.host(host_log.append, 1, after=prev)
    else:
        g.empty(after=prev)
    return g


def test_soak_10000_graphs_no_growth(gpu, kernels, stream):
    buf = gpu.alloc(4 * N)
    log: list[int] = []
    for _ in range(20):  # warm caches and pools
        with _graph_of_50(kernels, buf, log).instantiate() as warm:
            warm.launch(stream)
    del warm
    stream.sync()
    mem0 = _mem_used()
    exe0, low0 = _live(Executable), _live(LoweredGraph)
    reg0 = len(_host_callbacks._REGISTRY)
    rounds = int(os.environ.get("CUDAGRAPH_SOAK_ROUNDS", "10000"))
    for i in range(rounds):
        exe = _graph_of_50(kernels, buf, log if i % 10 == 0 else None).instantiate()
        exe.launch(stream)
        del exe  # dropped, not closed: the finalizer must free it
        if i % 500 == 499:
            stream.sync()
    stream.sync()
    gc.collect()
    assert gpu.read(buf, N, np.int32).tolist() == [48] * N
    assert len(log) == 20 + rounds // 10
    mem1 = _mem_used()
    print(f"soak: {rounds} graphs of 50 nodes; device memory in use {mem0} -> {mem1} bytes")
    assert abs(mem1 - mem0) <= 8 << 20
    assert _live(Executable) == exe0
    assert _live(LoweredGraph) == low0
    # host callbacks of dropped executables are forgotten once their work is done
    with _host_callbacks._LOCK:
        _host_callbacks._prune()
    assert len(_host_callbacks._REGISTRY) <= reg0


def test_operands_released_after_executable(gpu, kernels, stream):
    buf = gpu.alloc(4 * N)

    class Callback:
        def __call__(self) -> None:
            pass

    cb = Callback()
    ref = weakref.ref(cb)
    g = cg.Graph("life")
    g.kernel(kernels.add_i32, 1, N, (buf, np.int32(1), np.int32(N)))
    g.host(cb)
    del cb
    exe = g.instantiate()
    del g
    gc.collect()
    assert ref() is not None
    exe.launch(stream)
    stream.sync()
    exe.close()
    del exe
    gc.collect()
    with _host_callbacks._LOCK:
        _host_callbacks._prune()
    gc.collect()
    assert ref() is None


def test_eight_threads_build_instantiate_launch(device, kernels):
    errors: list[BaseException] = []
    results: list[bool] = []

    def worker(tid: int) -> None:
        try:
            device.set_current()
            s = device.create_stream()
            buf = device.allocate(4 * N, stream=s)
            host = np.zeros(N, np.int32)
            for r in range(100):
                g = cg.Graph(f"t{tid}")
                z = g.memset(buf, 0, count=N, element_size=4)
                k = g.kernel(kernels.add_i32, 1, N, (buf, np.int32(tid + r), np.int32(N)), after=z)
                g.memcpy(host, buf, 4 * N, after=k)
                with g.instantiate() as exe:
                    exe.launch(s)
                    s.sync()
                results.append(bool((host == tid + r).all()))
            buf.close(s)
            s.sync()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert len(results) == 800 and all(results)


def test_concurrent_bind_and_launch_on_one_executable(gpu, kernels, stream, device):
    # Fewer under compute-sanitizer (scripts/compute_sanitizer.sh), which reprocesses the graph on every update.
    launches = int(os.environ.get("CUDAGRAPH_THREAD_LAUNCHES", "200"))
    bufs = [gpu.upload(np.zeros(N, np.int32)) for _ in range(4)]
    g = cg.Graph("shared")
    p = g.param("p")
    g.kernel(kernels.add_i32, 1, N, (p, np.int32(1), np.int32(N)))
    exe = g.instantiate(p=bufs[0])
    errors: list[BaseException] = []

    def worker(tid: int) -> None:
        try:
            device.set_current()
            for _ in range(launches):
                exe.launch(stream, p=bufs[tid])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stream.sync()
    assert not errors, errors[0]
    total = sum(int(gpu.read(b, 1, np.int32)[0]) for b in bufs)
    assert total == 4 * launches  # every launch incremented exactly one buffer
    exe.close()


def test_faulting_kernel_names_executable_and_unusable_context(device):
    script = textwrap.dedent(
        """
        import numpy as np, cudagraph as cg
        from cuda.core import Device, Program, ProgramOptions
        dev = Device(); dev.set_current(); s = dev.create_stream()
        src = 'extern "C" __global__ void oob(int* p) { p[threadIdx.x * 1048576 * 64] = 1; }'
        k = Program(src, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin").get_kernel("oob")
        buf = dev.allocate(4, stream=s); s.sync()
        g = cg.Graph("faulty")
        g.kernel(k, 1, 32, (buf,), name="oob")
        exe = g.instantiate()
        try:
            for _ in range(3):
                exe.launch(s)
                s.sync()
        except Exception:
            pass
        try:
            exe.launch(s)
        except cg.errors.DriverError as e:
            print("ERROR:", type(e).__name__, e)
        """
    )
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("ERROR:")]
    assert line, out.stdout + out.stderr
    assert "Graph 'faulty'" in line[0]
    assert "context is now unusable" in line[0]
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in line[0] or "CUDA_ERROR_LAUNCH_FAILED" in line[0]


def test_host_callback_error_then_relaunch(gpu, stream):
    calls: list[int] = []

    def flaky() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first call fails")

    g = cg.Graph("flaky")
    g.host(flaky, name="flaky")
    exe = g.instantiate()
    exe.launch(stream)
    stream.sync()
    with pytest.raises(cg.errors.HostCallbackError, match="host#0 'flaky'") as info:
        exe.launch(stream)
    assert isinstance(info.value.__cause__, RuntimeError)
    exe.launch(stream)
    stream.sync()
    exe.check()
    assert len(calls) == 2
    exe.close()
