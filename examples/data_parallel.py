"""Data-parallel training with an NCCL all-reduce inside an explicit graph, one process per GPU.

Every process builds the same definition on its own GPU: a kernel computes the gradient of the
process's batch, an NCCL all-reduce sums the gradients of every process (a capture region: what
NCCL records on the region's stream becomes one child-graph node), and a kernel applies the summed
gradient. Each step is one graph launch that rebinds the step's batch (nothing is copied into
static buffers). The all-reduce goes through ``torch.distributed`` (NCCL backend), or through
CuPy's NCCL communicator with ``--comm cupy``. After the steps every process checks its weights
against the same steps in numpy (bit for bit with one or two processes, whose sums are exact;
within 1e-5 with more, whose order of summation NCCL chooses).

The model is elementwise least squares, ``pred = w * x`` fitted to ``y``: rank ``r``'s gradient is
``2 (w x_r - y_r) x_r`` and every rank applies ``w -= lr / world * sum_r grad_r``.

NCCL refuses two processes on one GPU, so a machine with one GPU runs one process: its all-reduce
has nothing to sum and NCCL records nothing (the region is an empty child graph); the kernels, the
rebinding and the processes' set-up run as they do on several GPUs. NVLink multicast is left off
(``NCCL_NVLS_ENABLE=0``).

Run from the repository root (needs NVIDIA GPUs and PyTorch with NCCL; CuPy for ``--comm cupy``)::

    PYTHONPATH=src python3 examples/data_parallel.py [--world N] [--steps 100] [--comm torch|cupy]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import cudagraph as cg

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast: NCCL must not call cuMulticastCreate

KERNELS = r"""
// grad = 2 (w x - y) x, rounded as numpy rounds it (no fused multiply-add)
extern "C" __global__ void gradient(const float* w, float* grad, const float* x, const float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float err = __fsub_rn(__fmul_rn(w[i], x[i]), y[i]);
        grad[i] = __fmul_rn(__fmul_rn(2.0f, err), x[i]);
    }
}
// w -= lr * grad
extern "C" __global__ void apply(float* w, const float* grad, float lr, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) w[i] = __fsub_rn(w[i], __fmul_rn(lr, grad[i]));
}
"""

BLOCK = 256
BATCHES = 4  # batches per process, visited in turn
LR = 0.2
NAME = "examples/data_parallel.py"


def needs(what: str, exc: BaseException) -> int:
    """Say in one sentence what this example needs and is missing; the exit code (0: nothing failed)."""
    print(f"{NAME} needs {what}; none is usable here ({type(exc).__name__}).")
    return 0


def true_weights(n: int) -> np.ndarray:
    """The weights every process's data is made from."""
    return np.random.default_rng(0).uniform(-2, 2, n).astype(np.float32)


def batch(rank: int, b: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Batch ``b`` of process ``rank``: (x, y = w_true x), float32."""
    x = np.random.default_rng(1000 * rank + b + 1).uniform(0.5, 1.5, n).astype(np.float32)
    return x, true_weights(n) * x


def reference(world: int, n: int, steps: int) -> np.ndarray:
    """The weights after ``steps`` steps of ``world`` processes, in numpy (ranks summed in rank order)."""
    f = np.float32
    data = [[batch(r, b, n) for b in range(BATCHES)] for r in range(world)]
    lr = f(LR / world)
    w = np.zeros(n, np.float32)
    for t in range(steps):
        total = np.zeros(n, np.float32)
        for r in range(world):
            x, y = data[r][t % BATCHES]
            total = total + (f(2) * (w * x - y)) * x
        w = w - lr * total
    return w


class TorchComm:
    """The all-reduce through ``torch.distributed`` (NCCL backend, a file rendezvous)."""

    name = "torch.distributed"

    def __init__(self, rank: int, world: int, init: str) -> None:
        import torch
        import torch.distributed as dist

        self._torch, self._dist = torch, dist
        cuda = torch.device("cuda", rank)
        dist.init_process_group("nccl", init_method=init, rank=rank, world_size=world, device_id=cuda)

    def all_reduce(self, t: Any, stream: Any) -> None:
        """Sum the float32 tensor ``t`` over every process, in place, on the torch stream ``stream``."""
        with self._torch.cuda.stream(stream):
            self._dist.all_reduce(t)

    def close(self) -> None:
        self._dist.destroy_process_group()


class CupyComm:
    """The all-reduce through CuPy's NCCL communicator (``cupy.cuda.nccl``), made from ``uid``."""

    name = "CuPy NCCL"

    def __init__(self, rank: int, world: int, uid: Any) -> None:
        import cupy
        from cupy.cuda import nccl

        cupy.cuda.Device(rank).use()
        self._nccl = nccl
        self._comm = nccl.NcclCommunicator(world, uid, rank)

    def all_reduce(self, t: Any, stream: Any) -> None:
        """Sum the float32 tensor ``t`` over every process, in place, on the torch stream ``stream``."""
        nccl, ptr = self._nccl, t.data_ptr()
        self._comm.allReduce(ptr, ptr, t.numel(), nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.cuda_stream)

    def close(self) -> None:
        self._comm.destroy()


class Rank:
    """One process's GPU, buffers, kernels and communicator (see :func:`open_rank`)."""

    def __init__(self, rank: int, world: int, n: int, comm: TorchComm | CupyComm) -> None:
        import torch
        from cuda.core import Device, Program, ProgramOptions

        self.rank, self.world, self.n, self.comm, self.torch = rank, world, n, comm, torch
        self.dev = Device(rank)
        self.dev.set_current()
        self.stream = self.dev.create_stream()
        code = Program(KERNELS, "c++", ProgramOptions(arch=f"sm_{self.dev.arch}")).compile("cubin")
        self.gradient, self.apply = code.get_kernel("gradient"), code.get_kernel("apply")
        cuda = torch.device("cuda", rank)
        self.w = torch.zeros(n, dtype=torch.float32, device=cuda)
        self.grad = torch.zeros(n, dtype=torch.float32, device=cuda)
        self.batches = [tuple(torch.from_numpy(a).to(cuda) for a in batch(rank, b, n)) for b in range(BATCHES)]
        self.side = torch.cuda.Stream(cuda)
        comm.all_reduce(self.grad, self.side)  # NCCL sets up its communicator on first use, outside capture
        torch.cuda.synchronize(cuda)

    def step_graph(self) -> cg.Graph:
        """One step: the gradient of the batch ``x``, ``y`` (parameters), its all-reduce, the update."""
        n, blocks = self.n, (self.n + BLOCK - 1) // BLOCK
        g = cg.Graph("data-parallel step")
        x, y = g.param("x"), g.param("y")
        k = g.kernel(self.gradient, blocks, BLOCK, (self.w, self.grad, x, y, np.int32(n)), name="gradient")
        with g.capture(after=k, name="all-reduce", stream=self.side) as s:
            self.comm.all_reduce(self.grad, s.torch())
        lr = np.float32(LR / self.world)
        g.kernel(self.apply, blocks, BLOCK, (self.w, self.grad, lr, np.int32(n)), after=g.nodes[-1], name="apply")
        return g

    def eager_step(self, x: Any, y: Any, stream: Any) -> None:
        """The same step launched eagerly on the cuda.core stream ``self.stream`` (``stream``: it as a torch
        stream)."""
        n, cfg = self.n, ((self.n + BLOCK - 1) // BLOCK, BLOCK)
        cg.launch(self.stream, cfg, self.gradient, self.w, self.grad, x, y, np.int32(n))
        self.comm.all_reduce(self.grad, stream)
        cg.launch(self.stream, cfg, self.apply, self.w, self.grad, np.float32(LR / self.world), np.int32(n))

    def agree(self, ok: bool) -> bool:
        """Whether every process says ``ok`` (an all-reduce of a flag, eager)."""
        flag = self.torch.tensor([0.0 if ok else 1.0], device=self.torch.device("cuda", self.rank))
        self.comm.all_reduce(flag, self.torch.cuda.current_stream())
        return float(flag.item()) == 0.0


def open_rank(rank: int, world: int, n: int, comm: str, rendezvous: Any) -> Rank:
    """Process ``rank``'s :class:`Rank`; ``rendezvous`` is the file URL (torch) or NCCL unique id (CuPy)."""
    import torch

    torch.cuda.set_device(rank)
    c = TorchComm(rank, world, rendezvous) if comm == "torch" else CupyComm(rank, world, rendezvous)
    return Rank(rank, world, n, c)


def region_kinds(g: cg.Graph) -> str:
    """The node kinds NCCL recorded in the all-reduce region of the step graph ``g``."""
    body = g.nodes[1].body
    kinds = [n.kind for n in body.nodes]
    return f"{len(kinds)} node(s)" + (f": {', '.join(sorted(set(kinds)))}" if kinds else "")


def worker(rank: int, world: int, n: int, steps: int, comm: str, rendezvous: Any) -> None:
    """One process: build, launch ``steps`` times rebinding the batch, check against numpy."""
    r = open_rank(rank, world, n, comm, rendezvous)
    try:
        g = r.step_graph()
        x0, y0 = r.batches[0]
        with g.instantiate(x=x0, y=y0) as exe:
            for t in range(steps):
                x, y = r.batches[t % BATCHES]
                exe.launch(r.stream, x=x, y=y)
            r.stream.sync()
        got = r.w.cpu().numpy()
        want = reference(world, n, steps)
        diff = float(np.max(np.abs(got - want)))
        ok = bool(np.array_equal(got, want)) if world <= 2 else bool(np.allclose(got, want, rtol=1e-5, atol=1e-6))
        fitted = float(np.max(np.abs(got - true_weights(n))))
        every = r.agree(ok)
        if rank == 0:
            print(
                f"data_parallel: {world} process(es), all-reduce through {r.comm.name}; "
                f"the region NCCL recorded holds {region_kinds(g)}"
            )
            print(
                f"data_parallel: {steps} steps of {len(g)} nodes, n={n}; max |w - numpy| = {diff:.3g} on rank 0; "
                f"max |w - w_true| = {fitted:.3g}"
            )
            print("data_parallel: results match numpy" if every else "data_parallel: results DIFFER from numpy")
        if not every:
            sys.exit(1)
    finally:
        r.comm.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=0, help="processes, one per GPU (default: every GPU)")
    ap.add_argument("--steps", type=int, default=100, help="steps (default 100)")
    ap.add_argument("-n", type=int, default=4096, help="weights (default 4096)")
    ap.add_argument("--comm", choices=("torch", "cupy"), default="torch", help="who all-reduces (default torch)")
    args = ap.parse_args(argv)
    try:
        from cuda.core import Device

        Device(0).set_current()
    except Exception as exc:  # no cuda.core, no driver library, no device
        return needs("an NVIDIA GPU and driver", exc)
    try:
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp

        if not (torch.cuda.is_available() and dist.is_nccl_available()):
            raise RuntimeError("PyTorch without CUDA or NCCL")
        gpus = torch.cuda.device_count()
    except Exception as exc:
        return needs("PyTorch with CUDA and NCCL", exc)
    world = args.world or gpus
    if not 1 <= world <= gpus:
        ap.error(f"--world must be between 1 and the {gpus} GPU(s) here")
    with tempfile.TemporaryDirectory() as tmp:
        if args.comm == "cupy":
            try:
                from cupy.cuda import nccl

                rendezvous: Any = nccl.get_unique_id()
            except Exception as exc:
                return needs("CuPy with NCCL", exc)
        else:
            rendezvous = (Path(tmp) / "rendezvous").as_uri()
        try:
            mp.spawn(worker, args=(world, args.n, args.steps, args.comm, rendezvous), nprocs=world)
        except mp.ProcessExitedException as exc:  # a process found its results differ (its message is printed)
            print(f"data_parallel: {exc}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
