"""Host overhead per launch on the CPU, against a fake CUDA driver whose calls cost (almost) nothing.

No GPU needed: ``bench/fake_driver/fake_libcuda.c`` is built into a ``libcuda.so.1`` that
``cuda.bindings`` (and so ``cuda.core`` and cudagraph) loads instead of the driver; every figure is
then the Python/C work above the driver call, the part these libraries add. Side by side, interleaved
within each repeat, medians:

- ``cudagraph.launch`` vs ``cuda.core.launch`` on a stream (Buffer and int-pointer arguments, a
  LaunchConfig and a (grid, block) tuple; two LaunchConfigs used in turn that share a place in the
  compiled launcher's cache; a kernel given as a new int handle object per call), ns per launch;
- a graph's launch call: ``exe.launch(s)`` (and rebinding a pointer parameter) vs cuda.core's
  ``Graph.launch(s)`` vs ``cuda.bindings``' bare ``cuGraphLaunch``, ns per launch;
- a rebinding launch, ``exe.launch(s, x=, out=)`` of a 45-kernel chain made a parametrized graph by
  ``g.parametrize`` (4 kernels use ``x`` or ``out``), with a fresh ``__cuda_array_interface__`` object
  per name and step (two pairs of addresses in turn), and with two PyTorch tensors in turn where torch is
  importable, and one of them alone (CPU tensors, which cost what CUDA ones do to read, stand for CUDA
  ones: the full check of a new layout is replaced); and the same chain over a plain ``g.param`` pointer
  rebound to a fresh array; ns above ``exe.launch(s)``: the compiled launch,
  reads and patch, the path ``bench/rebind_lifted.py`` times on a GPU (``bench/rebind_lifted_cpu.py``
  times the compiled rebind through the Python launch, over a Python fake driver);
- ``Graph.run`` of an N-kernel chain vs the same launches in a ``cuda.core.launch`` loop, ns per kernel;
- ``g.instantiate(backend="capture")`` of an N-kernel chain vs cuda.core's capture of the same
  launches into a GraphBuilder + ``complete()``, and vs ``backend="explicit"``, ns per node;
- defining chains of fills (int and numpy float values), copies (Buffer to Buffer, from a numpy array) and
  joins: the compiled builders (``Graph.memset``, ``memcpy``, ``join``) vs their Python twins, ns per node
  (the user's loop included).

On a GPU each figure adds the driver's own cost to both sides (cuLaunchKernel is about 2-3 µs on an
H200), so these ratios bound the GPU ratios from above when cudagraph's overhead is the smaller one.

Run from the repository root: ``python bench/cpu_overhead.py [--repeats 7] [--chain 100] [--nodes 1000]``
(with ``CUDAGRAPH_NO_C_ENTRY=1`` for the Python paths). Needs a C compiler; on a machine with a real
driver it still uses the fake one.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import relaunch_under_fake_driver


def _interleaved(peers: dict[str, Callable[[], Any]], count: int, repeats: int, per: int) -> dict[str, float]:
    """Median ns per unit of each peer (``count`` calls of ``per`` units per repeat), peers interleaved."""
    for fn in peers.values():
        for _ in range(min(count, 50)):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in peers}
    for _ in range(repeats):
        for name, fn in peers.items():
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                for _ in range(count):
                    fn()
                samples[name].append((time.perf_counter() - t0) / (count * per) * 1e9)
            finally:
                gc.enable()
    return {name: statistics.median(v) for name, v in samples.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--chain", type=int, default=100)
    ap.add_argument("--nodes", type=int, default=1000)
    opts = ap.parse_args()
    if not os.environ.get("CUDAGRAPH_FAKE_DRIVER"):
        relaunch_under_fake_driver()

    import numpy as np
    from cuda.core import Device, LaunchConfig, ObjectCode, launch

    import cudagraph as cg
    from cudagraph.driver.c_entry import NATIVE

    try:
        from cudagraph.driver.stream_launch import LAUNCHER
    except ImportError:  # a checkout from before the compiled launcher: measured all the same
        LAUNCHER = None

    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    k = ObjectCode.from_cubin(b"\0" * 64).get_kernel("inc")  # the fake driver takes any image
    buf = dev.allocate(128, stream=s)
    addr = int(buf.handle)
    cfg = LaunchConfig(grid=1, block=32)
    a, n = np.float32(1.0), np.int32(32)
    compiled_launch = type(cg.Executable.launch).__name__ == "LaunchMethod"
    compiled = (
        f"compiled module: {NATIVE is not None}, compiled launcher: {LAUNCHER is not None}, "
        f"compiled launch: {compiled_launch}"
    )
    print(f"python {sys.version.split()[0]}, {compiled}")

    # Two LaunchConfigs whose addresses share a place in the compiled launcher's configuration cache, used
    # in turn; and a kernel given as an int handle, a new int object per call (as int(kernel.handle) gives).
    places: dict[int, Any] = {}
    while True:
        c = LaunchConfig(grid=1, block=32)
        if (id(c) >> 4) % 8 in places:
            pair = [places[(id(c) >> 4) % 8], c]
            break
        places[(id(c) >> 4) % 8] = c
    turn = [0]

    def two_configs() -> None:
        turn[0] ^= 1
        cg.launch(s, pair[turn[0]], k, addr, a, n)

    handle = str(int(k.handle))

    one = _interleaved(
        {
            "cuda.core.launch (Buffer)": lambda: launch(s, cfg, k, buf, a, n),
            "cudagraph.launch (Buffer)": lambda: cg.launch(s, cfg, k, buf, a, n),
            "cuda.core.launch (int ptr)": lambda: launch(s, cfg, k, addr, a, n),
            "cudagraph.launch (int ptr)": lambda: cg.launch(s, cfg, k, addr, a, n),
            "cudagraph.launch ((grid, block))": lambda: cg.launch(s, (1, 32), k, addr, a, n),
            "cudagraph.launch (2 configs, 1 place)": two_configs,
            "cudagraph.launch (int(str) kernel)": lambda: cg.launch(s, cfg, int(handle), addr, a, n),
        },
        opts.launches,
        opts.repeats,
        1,
    )
    print(f"\n{'stream launch':<38} {'ns/launch':>10}")
    for name, v in one.items():
        print(f"{name:<38} {v:>10.0f}")
    for form in ("Buffer", "int ptr"):
        r = one[f"cudagraph.launch ({form})"] / one[f"cuda.core.launch ({form})"]
        print(f"ratio cudagraph.launch / cuda.core.launch ({form}): {r:.2f}")

    graph_launch(dev, s, k, buf, a, n, opts)
    rebinding_launch(s, k, a, opts)

    kargs = (buf, a, n)
    chain = cg.Graph("chain")
    prev = None
    for _ in range(opts.chain):
        prev = chain.kernel(k, 1, 32, kargs, after=prev)

    def loop() -> None:
        for _ in range(opts.chain):
            launch(s, cfg, k, *kargs)

    run = _interleaved(
        {"cuda.core.launch loop": loop, "Graph.run": lambda: chain.run(s)},
        max(1, opts.launches // opts.chain // 4),
        opts.repeats,
        opts.chain,
    )
    print(f"\n{f'{opts.chain}-kernel chain':<34} {'ns/kernel':>10}")
    for name, v in run.items():
        print(f"{name:<34} {v:>10.0f}")
    print(f"ratio Graph.run / cuda.core.launch loop: {run['Graph.run'] / run['cuda.core.launch loop']:.2f}")

    big = cg.Graph("chain")
    prev = None
    for _ in range(opts.nodes):
        prev = big.kernel(k, 1, 32, kargs, after=prev)

    def core_capture() -> None:
        builder = dev.create_graph_builder()
        builder.begin_building()
        for _ in range(opts.nodes):
            launch(builder, cfg, k, *kargs)
        builder.end_building()
        builder.complete().close()
        builder.close()

    cap = _interleaved(
        {
            "cuda.core capture + complete": core_capture,
            "instantiate(backend='capture')": lambda: big.instantiate(backend="capture").close(),
            "instantiate(backend='explicit')": lambda: big.instantiate().close(),
        },
        3,
        opts.repeats,
        opts.nodes,
    )
    print(f"\n{f'{opts.nodes}-kernel chain, build + instantiate':<34} {'ns/node':>10}")
    for name, v in cap.items():
        print(f"{name:<34} {v:>10.0f}")
    r = cap["instantiate(backend='capture')"] / cap["cuda.core capture + complete"]
    print(f"ratio capture backend / cuda.core capture + complete: {r:.2f}")
    define_builders(buf, opts)
    return 0


def rebinding_launch(s: Any, k: Any, a: Any, opts: argparse.Namespace) -> None:
    """ns above ``exe.launch(s)`` of ``exe.launch(s, x=, out=)`` on a parametrized 45-kernel chain: fresh
    ``__cuda_array_interface__`` objects, and torch tensors in turn (also on a plain ``g.param``) where torch is
    importable."""
    import numpy as np

    import cudagraph as cg
    from cudagraph.executable import bind_checks

    x1, x2, out1, out2, pool, nbytes = (
        0x7F00_0000_0000,
        0x7F10_0000_0000,
        0x7F20_0000_0000,
        0x7F30_0000_0000,
        0x7E00_0000_0000,
        1 << 16,
    )
    users = {3: x1, 9: x1 + 256, 17: x1 + 4096, 40: out1}  # node -> the pointer it takes
    g = cg.Graph("lifted-like")
    prev = None
    for i in range(45):
        prev = g.kernel(k, 1, 32, (users.get(i, pool + 0x10000 * i), a, np.int32(32)), after=prev)
    g.parametrize(x=(x1, nbytes), out=(out1, nbytes))
    exe = g.instantiate()

    class Array:  # CuPy-like: a property makes the interface anew
        __slots__ = ("ptr",)

        def __init__(self, ptr: int) -> None:
            self.ptr = ptr

        @property
        def __cuda_array_interface__(self) -> dict[str, Any]:
            return {"shape": (nbytes // 4,), "typestr": "<f4", "data": (self.ptr, False), "version": 3}

    turn = [0]

    def arrays() -> None:
        turn[0] ^= 1
        exe.launch(s, x=Array(x2 if turn[0] else x1), out=Array(out2 if turn[0] else out1))

    plain = cg.Graph("plain")  # the same chain over a g.param pointer (not parametrized)
    p = plain.param("x")
    prev = None
    for i in range(45):
        prev = plain.kernel(k, 1, 32, (p if i in users else pool + 0x10000 * i, a, np.int32(32)), after=prev)
    plain_exe = plain.instantiate(x=x1)

    def plain_array() -> None:
        turn[0] ^= 1
        plain_exe.launch(s, x=Array(x2 if turn[0] else x1))

    peers: dict[str, Callable[[], Any]] = {
        "exe.launch(s)": lambda: exe.launch(s),
        "x=, out=: fresh CAI arrays": arrays,
        "g.param x=: a fresh CAI array": plain_array,
    }
    try:
        import torch
    except ImportError:
        torch = None
        print("\ntorch is not importable: rebinding torch tensors is not timed")
    full, resolve = bind_checks.checked_address, bind_checks._pointer
    if torch is not None:  # (CPU tensors stand for CUDA ones in the first, full check of each layout)
        pairs = [(torch.empty(nbytes // 4), torch.empty(nbytes // 4)) for _ in range(2)]
        bind_checks.checked_address = lambda name, captured, value, graph: (  # type: ignore[assignment]
            int(value.data_ptr()) if isinstance(value, torch.Tensor) else full(name, captured, value, graph)
        )
        bind_checks._pointer = lambda param, value: (
            int(value.data_ptr()) if isinstance(value, torch.Tensor) else resolve(param, value)
        )

        def tensors() -> None:
            turn[0] ^= 1
            x, out = pairs[turn[0]]
            exe.launch(s, x=x, out=out)

        peers["x=, out=: two torch tensors in turn"] = tensors

        def one_tensor() -> None:
            turn[0] ^= 1
            exe.launch(s, x=pairs[turn[0]][0])

        peers["x=: one torch tensor in turn"] = one_tensor

        def plain_tensor() -> None:
            turn[0] ^= 1
            plain_exe.launch(s, x=pairs[turn[0]][0])

        peers["g.param x=: a torch tensor in turn"] = plain_tensor
    try:
        got = _interleaved(peers, opts.launches, opts.repeats, 1)
    finally:
        bind_checks.checked_address, bind_checks._pointer = full, resolve
    print(f"\n{'rebinding launch (45 kernels, 4 rebound)':<38} {'ns/launch':>10} {'above':>8}")
    floor = got["exe.launch(s)"]
    for name, v in got.items():
        print(f"{name:<38} {v:>10.0f} {v - floor:>8.0f}")
    exe.close()
    plain_exe.close()


def define_builders(buf: Any, opts: argparse.Namespace) -> None:
    """Chains of fills, copies and joins defined by the compiled builders and by their Python twins, ns per node."""
    import numpy as np

    import cudagraph as cg
    from cudagraph.definition.builders import COMPILED_OPS

    if not COMPILED_OPS:
        print("\ndefining fills, copies and joins: no compiled builders (not built, or CUDAGRAPH_NO_C_ENTRY=1)")
        return
    host = np.zeros(32, np.float32)  # (128 bytes, as the Buffer)
    calls: dict[str, tuple[str, Callable[[Any, Any, int], Any]]] = {
        "memset, int value": ("memset", lambda f, prev, i: f(buf, i & 0xFF, count=32, element_size=4, after=prev)),
        "memset, numpy float": ("memset", lambda f, prev, i: f(buf, np.float32(i), after=prev)),
        "memcpy, Buffer to Buffer": ("memcpy", lambda f, prev, i: f(buf, buf, 64, after=prev)),
        "memcpy, from a numpy array": ("memcpy", lambda f, prev, i: f(buf, host, after=prev)),
        "join": ("join", lambda f, prev, i: f(prev)),
    }

    def chain(kind: str, call: Callable[[Any, Any, int], Any], python: bool) -> Callable[[], None]:
        def build() -> None:
            g = cg.Graph("define")
            f = COMPILED_OPS[kind].func.__get__(g) if python else getattr(g, kind)
            prev = g.empty()
            for i in range(opts.nodes):
                prev = call(f, prev, i)

        return build

    print(f"\n{f'define a chain of {opts.nodes}':<34} {'compiled':>10} {'Python':>10} {'ratio':>7}  (ns/node)")
    for name, (kind, call) in calls.items():
        r = _interleaved(
            {"compiled": chain(kind, call, False), "python": chain(kind, call, True)}, 3, opts.repeats, opts.nodes
        )
        print(f"{name:<34} {r['compiled']:>10.0f} {r['python']:>10.0f} {r['compiled'] / r['python']:>7.2f}")


def graph_launch(dev: Any, s: Any, k: Any, buf: Any, a: Any, n: Any, opts: argparse.Namespace) -> None:
    """ns per launch call of a one-kernel graph: ``exe.launch(s)`` (also on a new ``__cuda_stream__`` object
    of the same stream per call, and with a parameter rebound to one of two Buffers in turn) vs cuda.core's
    ``Graph.launch(s)`` vs ``cuda.bindings``' bare ``cuGraphLaunch``."""
    from cuda.bindings import driver
    from cuda.core import LaunchConfig, launch

    import cudagraph as cg

    g = cg.Graph("one")
    p = g.param("p")
    g.kernel(k, 1, 32, (p, a, n))
    exe = g.instantiate(p=buf)
    other = dev.allocate(128, stream=s)
    builder = dev.create_graph_builder().begin_building()
    launch(builder, LaunchConfig(grid=1, block=32), k, buf, a, n)
    core = builder.end_building().complete()
    handle, stream = exe.handle, driver.CUstream(int(s.handle))
    bare = driver.cuGraphLaunch
    turn = [buf, other]

    class Fresh:  # a stream object made anew per call, as torch.cuda.current_stream() makes one
        __slots__ = ("h",)

        def __init__(self, h: int) -> None:
            self.h = h

        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, self.h)

    sh = int(s.handle)

    def rebinding() -> None:
        turn.reverse()
        exe.launch(s, p=turn[0])

    got = _interleaved(
        {
            "cuda.bindings cuGraphLaunch": lambda: bare(handle, stream),
            "cuda.core Graph.launch(s)": lambda: core.launch(s),
            "exe.launch(s)": lambda: exe.launch(s),
            "exe.launch(a new stream object)": lambda: exe.launch(Fresh(sh)),
            "exe.launch(s, p=Buffer), 2 in turn": rebinding,
        },
        opts.launches,
        opts.repeats,
        1,
    )
    print(f"\n{'graph launch (one kernel)':<38} {'ns/launch':>10}")
    for name, v in got.items():
        print(f"{name:<38} {v:>10.0f}")
    ours = got["exe.launch(s)"]
    print(f"ratio exe.launch(s) / cuda.core Graph.launch(s): {ours / got['cuda.core Graph.launch(s)']:.2f}")
    print(f"ratio exe.launch(s) / cuda.bindings cuGraphLaunch: {ours / got['cuda.bindings cuGraphLaunch']:.2f}")
    exe.close()
    core.close()


if __name__ == "__main__":
    sys.exit(main())
