"""A training-style loop: the same step runs on a new batch every iteration, first by rebinding
the parameters of one executable, then with a definition rebuilt every step and handed to an
``ExecutableCache``, which updates one executable in place instead of instantiating again.

The model is elementwise, ``pred = w * x``, fitted to ``y`` by gradient descent on the squared
error: each step computes the per-element loss and gradient and updates ``w``. The weights and
losses after every step are checked against the same steps in numpy.

Run from the repository root (needs an NVIDIA GPU and driver)::

    PYTHONPATH=src python3 examples/training_step.py [-n 4096] [--steps 20]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

import cudagraph as cg

KERNELS = r"""
// loss[i] = (w x - y)^2; w -= lr * d loss / d w
extern "C" __global__ void sgd_step(float* w, float* loss, const float* x, const float* y, float lr, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float err = __fsub_rn(__fmul_rn(w[i], x[i]), y[i]);
        loss[i] = __fmul_rn(err, err);
        w[i] = __fsub_rn(w[i], __fmul_rn(lr, __fmul_rn(__fmul_rn(2.0f, err), x[i])));
    }
}
"""

BLOCK = 256


def open_device() -> tuple[Any, Any]:
    """cuda.core's Device 0, made current, and a stream on it."""
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    return dev, dev.create_stream()


def needs_gpu(exc: BaseException) -> int:
    """Say in one sentence that this example needs a GPU; the exit code (0: nothing failed)."""
    print(f"examples/training_step.py needs an NVIDIA GPU and driver; none is usable here ({type(exc).__name__}).")
    return 0


def numpy_step(w: np.ndarray, x: np.ndarray, y: np.ndarray, lr: float) -> tuple[np.ndarray, np.ndarray]:
    """One step in float32, rounded as the kernel rounds (no fused multiply-add): (new w, loss)."""
    f = np.float32
    err = w * x - y
    loss = err * err
    return w - f(lr) * ((f(2) * err) * x), loss


def step_graph(kernel: Any, n: int, loss_host: np.ndarray, x: Any = None, y: Any = None, lr: Any = None) -> cg.Graph:
    """One training step; ``x``, ``y`` and ``lr`` are parameters unless given (then baked in)."""
    g = cg.Graph("step")
    w, loss = g.param("w"), g.param("loss")
    x = g.param("x") if x is None else x
    y = g.param("y") if y is None else y
    lr = g.param("lr", np.float32) if lr is None else np.float32(lr)
    k = g.kernel(kernel, (n + BLOCK - 1) // BLOCK, BLOCK, (w, loss, x, y, lr, np.int32(n)), name="sgd step")
    g.memcpy(loss_host, loss, loss_host.nbytes, after=k, name="loss to host")
    return g


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=4096, help="weights (default 4096)")
    ap.add_argument("--steps", type=int, default=20, help="steps of each loop (default 20)")
    args = ap.parse_args(argv)
    try:
        dev, stream = open_device()
    except Exception as exc:  # no cuda.core, no driver library, no device
        return needs_gpu(exc)
    from cuda.core import Program, ProgramOptions

    code = Program(KERNELS, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
    kernel = code.get_kernel("sgd_step")
    n, steps = args.n, args.steps
    rng = np.random.default_rng(0)
    w_true = rng.uniform(-2, 2, n).astype(np.float32)
    batches = []  # (x, y) on the host and on the device; a few batches, visited in turn
    for _ in range(4):
        xb = rng.uniform(0.5, 1.5, n).astype(np.float32)
        yb = w_true * xb
        dx, dy = dev.allocate(4 * n, stream=stream), dev.allocate(4 * n, stream=stream)
        cg.memcpy(stream, dx, xb, xb.nbytes)
        cg.memcpy(stream, dy, yb, yb.nbytes)
        batches.append((xb, yb, dx, dy))
    w = dev.allocate(4 * n, stream=stream)
    loss = dev.allocate(4 * n, stream=stream)
    loss_host = np.zeros(n, np.float32)
    w_host = np.zeros(n, np.float32)
    stream.sync()

    def lr_at(step: int) -> float:
        return 0.2 / (1 + 0.1 * step)

    # 1. One executable; every step rebinds the batch and the learning rate (no driver call for
    #    a parameter whose value is unchanged).
    cg.memset(stream, w, np.float32(0.0), n)
    ref_w = np.zeros(n, np.float32)
    worst_w = worst_loss = 0.0
    losses = []
    try:
        exe = step_graph(kernel, n, loss_host).instantiate(w=w, loss=loss, x=batches[0][2], y=batches[0][3], lr=0.0)
    except cg.errors.DriverUnavailableError as exc:
        return needs_gpu(exc)
    with exe:
        for step in range(steps):
            xb, yb, dx, dy = batches[step % len(batches)]
            exe.launch(stream, x=dx, y=dy, lr=np.float32(lr_at(step)))
            stream.sync()
            ref_w, ref_loss = numpy_step(ref_w, xb, yb, lr_at(step))
            worst_loss = max(worst_loss, float(np.max(np.abs(loss_host - ref_loss))))
            losses.append(float(loss_host.mean()))
    cg.memcpy(stream, w_host, w, w_host.nbytes)
    stream.sync()
    worst_w = float(np.max(np.abs(w_host - ref_w)))
    print(f"rebinding: {steps} steps, mean loss {losses[0]:.4g} -> {losses[-1]:.4g}")

    # 2. A definition rebuilt every step with the batch and learning rate baked in: the cache
    #    recognises the shape and updates its executable (only the kernel node changes).
    cg.memset(stream, w, np.float32(0.0), n)
    ref_w = np.zeros(n, np.float32)
    cache = cg.ExecutableCache(maxsize=4)
    for step in range(steps):
        xb, yb, dx, dy = batches[step % len(batches)]
        g = step_graph(kernel, n, loss_host, x=dx, y=dy, lr=lr_at(step))
        cache.get(g, w=w, loss=loss).launch(stream)
        stream.sync()
        ref_w, ref_loss = numpy_step(ref_w, xb, yb, lr_at(step))
        worst_loss = max(worst_loss, float(np.max(np.abs(loss_host - ref_loss))))
    cg.memcpy(stream, w_host, w, w_host.nbytes)
    stream.sync()
    worst_w = max(worst_w, float(np.max(np.abs(w_host - ref_w))))
    stats = cache.stats()
    print(f"ExecutableCache: {stats}")
    cache.clear()
    for _, _, dx, dy in batches:
        dx.close(stream)
        dy.close(stream)
    w.close(stream)
    loss.close(stream)
    stream.sync()

    ok = worst_w <= 1e-6 and worst_loss <= 1e-5 and stats["misses"] == 1 and stats["hits"] == steps - 1
    ok = ok and losses[-1] < losses[0]
    print(
        f"weights and losses of {2 * steps} steps checked against numpy: max |w - numpy| = {worst_w:.2e}, "
        f"max |loss - numpy| = {worst_loss:.2e}"
    )
    print("training_step: results match numpy" if ok else "training_step: RESULTS DIFFER FROM NUMPY")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
