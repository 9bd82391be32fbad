"""The model zoo lifted: lift time per node and one step rebound against PyTorch's replay, model by model.

What is measured (one process, one GPU), for each model of ``tests/model_zoo.py`` (about 40 small
architectures with random weights: cuDNN and depthwise convolutions, attention, norms, embeddings,
transformers models from tiny configs, mixed precision, whole training steps with AdamW), captured
whole by PyTorch as its documentation says (``static_y = model(static_x)`` inside
``torch.cuda.graph(g)``, ``keep_graph=True``; a training step's output is its loss):

- ``nodes``: the nodes of the captured graph (as lifted);
- ``not kernels``: those of them that are not kernel nodes, by kind (an ``opaque`` one makes the lift read a
  clone of the graph);
- ``lift µs/node``: ``cg.lift(g)``, the median of ``--lifts`` calls, per node;
- ``lift+params µs/node``: ``cg.lift(g, params={"x": static_x, "out": static_y})`` (a training step
  also names its target ``t``), the median of ``--param-lifts`` calls, per node;
- one step on a new input into a new output, two (input, output) pairs alternating so that every step
  changes the addresses: ``torch`` is PyTorch's copy-in/replay/copy-out (``static_x.copy_(x);
  g.replay(); out.copy_(static_y)``), ``cudagraph`` is ``exe.launch(s, x=x, out=out)`` on the graph
  lifted with parameters. Host µs per step: ``perf_counter`` over ``--steps`` steps queued without
  synchronization, the median of ``--rounds`` rounds in which the paths take turns. GPU ms per step:
  CUDA events around ``--steps`` steps on the stream, the median of the rounds. The ratios are
  torch / cudagraph (above 1: cudagraph is faster);
- ``result``: ``ok`` where the lifted step's output (and, for a training step, every parameter and
  optimizer state tensor after it, both steps run from the same saved state) equals PyTorch's bit for
  bit on one input, else ``MISMATCH``; a model PyTorch cannot capture, or whose package is missing, is
  listed as skipped with the reason, and an error of cudagraph as ``ERROR``.

Then the mean lift µs per node over the models measured (and the total lift time over all their nodes).

Run from the repository root: ``python bench/zoo.py [--quick] [--models a,b,c] [--steps 20] [--rounds 5]``
(``--list`` prints the names of the zoo).
"""

from __future__ import annotations

import argparse
import collections
import gc
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import fmt, import_cudagraph, no_gc

import_cudagraph()
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import cudagraph as cg  # noqa: E402
import model_zoo  # noqa: E402

Pair = tuple[dict[str, Any], Any]  # (inputs by name, output)


@dataclass
class Row:
    name: str
    nodes: int | None = None
    others: str = ""  # the lifted nodes that are not kernels, by kind ("memset 2, opaque 1")
    lift_s: float | None = None  # one cg.lift(g), seconds (median)
    param_s: float | None = None  # one cg.lift(g, params=...), seconds (median)
    host_torch: float | None = None  # µs per step
    host_ours: float | None = None
    gpu_torch: float | None = None  # ms per step
    gpu_ours: float | None = None
    result: str = ""

    def per_node(self, seconds: float | None) -> float | None:
        return None if seconds is None or not self.nodes else seconds / self.nodes * 1e6

    def cells(self) -> list[str]:
        def ratio(a: float | None, b: float | None) -> str:
            return "n/a" if a is None or not b else fmt(a / b, 2)

        return [
            self.name,
            "n/a" if self.nodes is None else str(self.nodes),
            self.others or ("none" if self.nodes else "n/a"),
            fmt(self.per_node(self.lift_s), 2),
            fmt(self.per_node(self.param_s), 2),
            fmt(self.host_torch, 1),
            fmt(self.host_ours, 1),
            ratio(self.host_torch, self.host_ours),
            fmt(self.gpu_torch, 4),
            fmt(self.gpu_ours, 4),
            ratio(self.gpu_torch, self.gpu_ours),
            self.result,
        ]


HEADER = [
    "model",
    "nodes",
    "not kernels",
    "lift µs/node",
    "lift+params µs/node",
    "host µs torch",
    "host µs cudagraph",
    "host torch/cg",
    "GPU ms torch",
    "GPU ms cudagraph",
    "GPU torch/cg",
    "result",
]


def table_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def short(exc: BaseException, limit: int = 160) -> str:
    text = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    return (text if len(text) <= limit else text[: limit - 3] + "...").replace("|", "/")


def host_rounds(torch: Any, paths: dict[str, Any], pairs: list[Pair], steps: int, rounds: int) -> dict[str, float]:
    """Host µs per step of each path: the median over rounds of ``steps`` steps queued without synchronization,
    the paths taking turns in each round (each round starts on an idle GPU after four untimed steps)."""
    out: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, step in paths.items():
            for i in range(4):
                step(*pairs[i % 2])
            torch.cuda.synchronize()
            with no_gc():
                t0 = time.perf_counter()
                for i in range(steps):
                    step(*pairs[i % 2])
                out[name].append((time.perf_counter() - t0) / steps * 1e6)
            torch.cuda.synchronize()
    return {name: statistics.median(v) for name, v in out.items()}


def gpu_rounds(
    torch: Any, paths: dict[str, Any], pairs: list[Pair], steps: int, rounds: int, stream: Any
) -> dict[str, float]:
    """GPU ms per step of each path: CUDA events around ``steps`` steps, the median over rounds (paths in turn)."""
    out: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, step in paths.items():
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with no_gc():
                start.record(stream)
                for i in range(steps):
                    step(*pairs[i % 2])
                end.record(stream)
            end.synchronize()
            out[name].append(start.elapsed_time(end) / steps)
    return {name: statistics.median(v) for name, v in out.items()}


def timed(fn: Any, repeats: int) -> tuple[float, Any]:
    """The median seconds of ``repeats`` calls of ``fn()`` and the last result (the ones before are dropped
    and collected before the next call, so that lifts holding device memory do not pile up)."""
    times = []
    result = None
    for _ in range(max(repeats, 1)):
        result = None
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def same(a: Any, b: Any) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(model_zoo.bits(a).equal(model_zoo.bits(b)))


def agrees(torch: Any, cap: model_zoo.Captured, torch_step: Any, ours: Any, pair: Pair) -> bool:
    """Whether one lifted step and one PyTorch step, from the same state, give the same bits."""
    inputs, _ = pair
    out_ours, out_torch = torch.empty_like(cap.output), torch.empty_like(cap.output)
    torch.cuda.synchronize()
    before = model_zoo.snapshot(cap.state)
    ours(inputs, out_ours)
    torch.cuda.synchronize()
    after = model_zoo.snapshot(cap.state)
    model_zoo.restore(cap.state, before)
    torch_step(inputs, out_torch)
    torch.cuda.synchronize()
    return same(out_ours, out_torch) and all(same(a, b) for a, b in zip(after, cap.state))


def measure(torch: Any, entry: model_zoo.Entry, args: argparse.Namespace) -> Row:
    row = Row(entry.name)
    try:
        cap = model_zoo.capture_entry(torch, entry)
    except model_zoo.ZooSkip as exc:
        row.result = "skipped: " + " ".join(str(exc).split()).replace("|", "/")[:160]
        return row
    g = cap.graph
    exe = None
    try:
        g.replay()  # PyTorch's executable is made here, outside the timing
        torch.cuda.synchronize()
        row.lift_s, lifted = timed(lambda: cg.lift(g), args.lifts)
        row.nodes = len(lifted.nodes)
        kinds = collections.Counter(n.kind for n in lifted.nodes if n.kind != "kernel")
        row.others = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
        del lifted
        row.param_s, lifted = timed(lambda: cg.lift(g, params=cap.params), args.param_lifts)
        exe = lifted.instantiate()
        stream = torch.cuda.current_stream()
        pairs: list[Pair] = [(cap.make_input(seed), torch.empty_like(cap.output)) for seed in (1, 2)]
        static_out = cap.output

        def torch_step(inputs: dict[str, Any], out: Any) -> None:
            cap.torch_step(inputs)
            out.copy_(static_out)

        def ours(inputs: dict[str, Any], out: Any) -> None:
            exe.launch(stream, **inputs, out=out)

        paths = {"torch": torch_step, "ours": ours}
        host = host_rounds(torch, paths, pairs, args.steps, args.rounds)
        gpu = gpu_rounds(torch, paths, pairs, args.steps, args.rounds, stream)
        row.host_torch, row.host_ours = host["torch"], host["ours"]
        row.gpu_torch, row.gpu_ours = gpu["torch"], gpu["ours"]
        row.result = "ok" if agrees(torch, cap, torch_step, ours, pairs[0]) else "MISMATCH"
    except Exception as exc:  # one model's failure is a row of the table, not the end of the run
        row.result = "ERROR: " + short(exc)
    finally:
        if exe is not None:
            exe.close()
    return row


def select(args: argparse.Namespace) -> list[model_zoo.Entry]:
    if args.models:
        return [model_zoo.get(n.strip()) for n in args.models.split(",") if n.strip()]
    if args.quick:
        return [model_zoo.get(n) for n in model_zoo.QUICK]
    return list(model_zoo.ZOO)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"{len(model_zoo.QUICK)} models: {', '.join(model_zoo.QUICK)}")
    ap.add_argument("--models", default="", help="comma-separated names of the zoo (see --list)")
    ap.add_argument("--list", action="store_true", help="print the names of the zoo and stop")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed round (default 20)")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds, the paths taking turns (default 5)")
    ap.add_argument("--lifts", type=int, default=5, help="cg.lift(g) calls timed per model (default 5)")
    ap.add_argument("--param-lifts", type=int, default=3, help="cg.lift(g, params=...) calls timed (default 3)")
    args = ap.parse_args(argv)
    if args.list:
        for e in model_zoo.ZOO:
            print(f"{e.name} ({e.kind}{': ' + e.note if e.note else ''})")
        return 0
    entries = select(args)
    try:
        import torch
    except ImportError:
        print("bench/zoo.py needs PyTorch with CUDA (pip install torch); it is not installed here.")
        return 0
    if not torch.cuda.is_available():
        print("bench/zoo.py needs an NVIDIA GPU and PyTorch with CUDA; this PyTorch sees no GPU.")
        return 0
    from cudagraph.driver.c_entry import NATIVE

    print(
        f"torch {torch.__version__} on {torch.cuda.get_device_name()}; cudagraph "
        f"{getattr(cg, '__version__', '?')}, compiled loops: {'no' if NATIVE is None else 'yes'}; "
        f"{len(entries)} models, {args.steps} steps x {args.rounds} rounds"
    )
    print()
    print(table_row(HEADER))
    print(table_row(["---"] * len(HEADER)))
    rows = []
    for entry in entries:
        row = measure(torch, entry, args)
        rows.append(row)
        print(table_row(row.cells()), flush=True)
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    lifted = [r for r in rows if r.nodes and r.lift_s is not None]
    if lifted:
        mean = statistics.mean(r.per_node(r.lift_s) or 0.0 for r in lifted)
        params = [r.per_node(r.param_s) for r in lifted if r.param_s is not None]
        nodes = sum(r.nodes or 0 for r in lifted)
        total = sum(r.lift_s or 0.0 for r in lifted)
        print()
        print(
            f"mean lift µs/node over {len(lifted)} models: {fmt(mean, 2)} (lift+params: "
            f"{fmt(statistics.mean(p or 0.0 for p in params), 2) if params else 'n/a'}); "
            f"all {nodes} nodes in {total * 1e3:.1f} ms = {fmt(total / nodes * 1e6, 2)} µs/node"
        )
    bad = [r.name for r in rows if r.result == "MISMATCH" or r.result.startswith("ERROR")]
    skipped = [r.name for r in rows if r.result.startswith("skipped")]
    print(f"{len(rows) - len(bad) - len(skipped)} ok, {len(bad)} mismatched or failed, {len(skipped)} skipped")
    if bad:
        print("not ok: " + ", ".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
