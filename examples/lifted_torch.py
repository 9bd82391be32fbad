"""A PyTorch model captured once with ``torch.cuda.CUDAGraph``, lifted into a cudagraph definition
with its input and output named, and launched on new tensors with no copy into static buffers.

PyTorch's own way to run a captured graph on new data is ``static_x.copy_(x); g.replay();
out.copy_(static_out)``. ``cg.lift(g, params={"x": static_x, "out": static_out})`` turns every
kernel argument and copy operand that points into those tensors into a parameter, so
``exe.launch(stream, x=x, out=out)`` reads ``x`` and writes ``out`` where they are. Every result is
checked against the same MLP computed in numpy from the model's weights, and the captured input
is checked to be left as it was.

Run from the repository root (needs an NVIDIA GPU and driver, and PyTorch with CUDA)::

    PYTHONPATH=src python3 examples/lifted_torch.py [--batches 5]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

import cudagraph as cg

SHAPE = (64, 256)


def open_device() -> tuple[Any, Any]:
    """cuda.core's Device 0, made current, and a stream on it."""
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    return dev, dev.create_stream()


def needs_gpu(exc: BaseException) -> int:
    """Say in one sentence that this example needs a GPU; the exit code (0: nothing failed)."""
    print(f"examples/lifted_torch.py needs an NVIDIA GPU and driver; none is usable here ({type(exc).__name__}).")
    return 0


def capture(torch: Any, model: Any, static_x: Any, static_out: Any) -> Any:
    """``static_out.copy_(model(static_x))`` captured by PyTorch, the graph kept so it can be read."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):  # warm up outside the capture: library handles, workspaces, kernel choices
            static_out.copy_(model(static_x))
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g), torch.no_grad():
        static_out.copy_(model(static_x))
    torch.cuda.synchronize()
    return g


def numpy_mlp(model: Any, x: np.ndarray) -> np.ndarray:
    """The model (Linear, ReLU, Linear) in float64 numpy, from its weights."""
    w1, b1, w2, b2 = (p.detach().double().cpu().numpy() for p in model.parameters())
    return np.maximum(x @ w1.T + b1, 0.0) @ w2.T + b2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=5, help="new input tensors run (default 5)")
    args = ap.parse_args(argv)
    try:
        _dev, stream = open_device()
    except Exception as exc:  # no cuda.core, no driver library, no device
        return needs_gpu(exc)
    try:
        import torch
    except ImportError:
        print("examples/lifted_torch.py needs PyTorch with CUDA (pip install torch); it is not installed here.")
        return 0
    if not torch.cuda.is_available():
        print("examples/lifted_torch.py needs PyTorch with CUDA; this PyTorch sees no GPU.")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 matmuls, comparable with numpy
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 128)).cuda().eval()
    static_x = torch.randn(*SHAPE, device="cuda")
    with torch.no_grad():
        static_out = torch.empty_like(model(static_x))
    g = capture(torch, model, static_x, static_out)
    x_before = static_x.clone()

    try:
        lifted = cg.lift(g, params={"x": static_x, "out": static_out})
    except cg.errors.DriverUnavailableError as exc:
        return needs_gpu(exc)
    report = lifted.parametrizations[-1]
    print(report.summary())
    kernels = sum(1 for node in lifted.nodes if node.kind == "kernel")
    worst = 0.0
    moved = True
    with lifted.instantiate() as exe:
        for _ in range(args.batches):
            x = torch.randn(*SHAPE, device="cuda")
            out = torch.empty_like(static_out)
            moved = moved and x.data_ptr() != static_x.data_ptr() and out.data_ptr() != static_out.data_ptr()
            torch.cuda.synchronize()  # x was written on PyTorch's stream; the graph runs on ours
            exe.launch(stream, x=x, out=out)
            stream.sync()
            expected = numpy_mlp(model, x.double().cpu().numpy())
            got = out.double().cpu().numpy()
            worst = max(worst, float(np.max(np.abs(got - expected) / (1 + np.abs(expected)))))
    untouched = bool(torch.equal(static_x, x_before))
    ok = worst < 1e-4 and untouched and moved and report.count("x") >= 1 and report.count("out") >= 1
    print(
        f"{args.batches} new input tensors through the lifted graph ({kernels} kernels): outputs checked "
        f"against the MLP in numpy, max relative error {worst:.2e}; the captured input left as it was: {untouched}"
    )
    print("lifted_torch: results match numpy" if ok else "lifted_torch: RESULTS DIFFER FROM NUMPY")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
