"""Lifting whole PyTorch models (``tests/model_zoo.py``) and running them bit for bit as PyTorch replays them (GPU).

For each model of the zoo, PyTorch captures it as its documentation says (warm-up on a side stream,
``static_y = model(static_x)`` inside ``torch.cuda.graph(g)``, ``keep_graph=True``); a model that
PyTorch itself cannot capture is skipped with PyTorch's error. Then:

1. ``cg.lift(g, verify=True)``, launched on the captured memory, writes ``static_y`` with the same
   bits as ``g.replay()`` (the output is overwritten with a fill pattern before the launch).
2. ``cg.lift(g, params={"x": static_x, "out": static_y}, verify=True)``, launched on three new
   inputs into three new outputs, each inside a buffer whose bytes around it are a known pattern:
   the static tensors are left as they were, each output has the bits of PyTorch's
   ``static_x.copy_(x); g.replay()`` on the same input, the guards are untouched and the new
   inputs are not written.

A training step (forward, loss, backward, ``AdamW(capturable=True)`` step; its output is the loss)
changes the weights at every step: each lifted step runs from a saved state (parameters, buffers,
optimizer state) and PyTorch's replay runs again from the same state; the loss and every state
tensor must agree bit for bit.

A model whose own replay is not bitwise reproducible (two replays on the same input differ) is
skipped with that reason: its kernels add in a varying order, and no lift can match it bit for bit.
After each stage the device is synchronized, so that an asynchronous CUDA error fails the stage
that made it. At the end of the module one line per model gives its node count and the slots
that lifting with parameters rewrote.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

import pytest

import cudagraph as cg
import model_zoo
from model_zoo import GUARD_BYTE, bits, flat, guarded_like, guards_intact, restore, snapshot

pytestmark = pytest.mark.gpu

SEEDS = (1, 2, 3)  # the new inputs; the capture's input is seed 0

_SUMMARY: list[str] = []


@pytest.fixture(scope="module")
def torch(device: Any) -> Any:
    """PyTorch with CUDA (skips without it); ``device`` skips first where no GPU works."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return torch


@pytest.fixture(scope="module", autouse=True)
def _zoo_summary(request: pytest.FixtureRequest) -> Any:
    """Print one line per model lifted (nodes, slots rewritten, outcome) once the module is done."""
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if _SUMMARY and reporter is not None:
        reporter.write_line("")
        reporter.write_line(f"model zoo: {len(_SUMMARY)} models lifted")
        for line in _SUMMARY:
            reporter.write_line(line)


@pytest.fixture(autouse=True)
def _release() -> Any:
    """After each model: drop its graphs and give the memory back, so that the zoo does not pile up."""
    yield
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _capture(torch: Any, name: str) -> model_zoo.Captured:
    try:
        return model_zoo.capture_entry(torch, name)
    except model_zoo.ZooSkip as exc:
        pytest.skip(str(exc))


def _same(a: Any, b: Any) -> bool:
    """Bit for bit (dtype, shape and every byte)."""
    return a.dtype == b.dtype and a.shape == b.shape and bool(bits(a).equal(bits(b)))


def _differ(got: Any, want: Any) -> str:
    """Where two tensors differ, for an assertion message."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}"
    g, w = got.detach().reshape(-1), want.detach().reshape(-1)
    if g.is_floating_point():
        gf, wf = g.double(), w.double()
        wrong = ~((gf == wf) | (gf.isnan() & wf.isnan()))
        worst = (gf - wf).abs().nan_to_num(nan=float("inf"))[wrong]
        tail = f", max |difference| {worst.max().item():.3g}" if worst.numel() else ""
    else:
        wrong = g != w
        tail = ""
    n = int(wrong.sum().item())
    first = int(wrong.nonzero()[0].item()) if n else -1
    return f"{n} of {g.numel()} elements differ (first at flat index {first}){tail}"


def _first_state_difference(got: list[Any], want: list[Any]) -> str | None:
    """``None`` when two lists of state tensors agree bit for bit, else which tensor differs and how."""
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        if not _same(a, b):
            return f"state tensor {i} ({b.dtype}, {tuple(b.shape)}): {_differ(a, b)}"
    return None


def _lift(name: str, g: Any, **kwargs: Any) -> cg.Graph:
    """``cg.lift(g, verify=True, **kwargs)``; the device is synchronized after."""
    import torch

    lifted = cg.lift(g, verify=True, **kwargs)
    torch.cuda.synchronize()
    assert len(lifted.nodes) > 0, f"{name}: the lift holds no node"
    return lifted


def _describe(name: str, lifted: cg.Graph, keys: Any) -> str:
    kernels = sum(1 for n in lifted.nodes if n.kind == "kernel")
    slots = ""
    if lifted.parametrizations:
        report = lifted.parametrizations[-1]
        try:
            slots = f"; {len(report)} slots rewritten ({', '.join(f'{k} {report.count(k)}' for k in keys)})"
        except Exception as exc:  # the summary is informational
            slots = f"; report unreadable ({type(exc).__name__})"
    return f"  {name}: {len(lifted.nodes)} nodes ({kernels} kernels){slots}"


@pytest.mark.parametrize("name", model_zoo.names("inference"))
def test_zoo_inference(name: str, torch: Any) -> None:
    cap = _capture(torch, name)
    g, static_x, static_y = cap.graph, cap.inputs["x"], cap.output
    side = torch.cuda.Stream()
    x0 = static_x.clone()

    # PyTorch's own result on the captured input, and whether its replay is reproducible at all.
    g.replay()
    torch.cuda.synchronize()
    ref = static_y.clone()
    g.replay()
    torch.cuda.synchronize()
    if not _same(static_y, ref):
        pytest.skip(f"PyTorch's replay of {name} is not bitwise reproducible: {_differ(static_y, ref)}")
    writes_input = not _same(static_x, x0)

    # 1. Lifted without parameters, launched on the captured memory: the same bits in static_y.
    g0 = _lift(name, g)
    flat(static_y).view(torch.uint8).fill_(GUARD_BYTE)
    torch.cuda.synchronize()
    with g0.instantiate() as exe:
        exe.launch(side)
        torch.cuda.synchronize()
    assert _same(static_y, ref), (
        f"{name}: the lift without parameters differs from g.replay(): {_differ(static_y, ref)}"
    )
    del g0

    # 2. Lifted with x and out as parameters, launched on new inputs into new, guarded outputs.
    g1 = _lift(name, g, params=cap.params)
    xs = [cap.make_input(seed)["x"] for seed in SEEDS]
    xs_before = [x.clone() for x in xs]
    outs = [guarded_like(static_y) for _ in xs]
    x_before, y_before = static_x.clone(), static_y.clone()
    torch.cuda.synchronize()
    with g1.instantiate() as exe:
        for x, (out, _buf) in zip(xs, outs):
            exe.launch(side, x=x, out=out)
        torch.cuda.synchronize()
    assert _same(static_x, x_before), f"{name}: the lifted launches wrote static_x: {_differ(static_x, x_before)}"
    assert _same(static_y, y_before), f"{name}: the lifted launches wrote static_y: {_differ(static_y, y_before)}"
    refs = [cap.torch_step({"x": x_ref}).clone() for x_ref in xs_before]  # PyTorch: copy in, replay
    torch.cuda.synchronize()
    for i, ((out, buf), want) in enumerate(zip(outs, refs)):
        assert _same(out, want), (
            f"{name}: input {i}: the lifted graph differs from PyTorch's replay: {_differ(out, want)}"
        )
        assert guards_intact(out, buf), f"{name}: input {i}: the lifted graph wrote outside its output tensor"
        if not writes_input:
            assert _same(xs[i], xs_before[i]), f"{name}: input {i}: the lifted graph wrote its input tensor"
    _SUMMARY.append(_describe(name, g1, cap.params) + ": ok")


@pytest.mark.parametrize("name", model_zoo.names("training"))
def test_zoo_training(name: str, torch: Any) -> None:
    cap = _capture(torch, name)
    g, loss, state = cap.graph, cap.output, cap.state
    side = torch.cuda.Stream()

    # PyTorch's own step from a saved state, twice: reproducible, and it changes the weights.
    start = snapshot(state)
    g.replay()
    torch.cuda.synchronize()
    ref_loss, ref_state = loss.clone(), snapshot(state)
    restore(state, start)
    g.replay()
    torch.cuda.synchronize()
    again = _first_state_difference(state, ref_state)
    if not _same(loss, ref_loss) or again is not None:
        pytest.skip(f"PyTorch's replay of {name} is not bitwise reproducible: {again or _differ(loss, ref_loss)}")
    assert _first_state_difference(ref_state, start) is not None, f"{name}: a step of PyTorch changes no state tensor"

    # 1. Lifted without parameters, from the same saved state: the same loss and the same new state.
    g0 = _lift(name, g)
    restore(state, start)
    flat(loss).view(torch.uint8).fill_(GUARD_BYTE)
    torch.cuda.synchronize()
    with g0.instantiate() as exe:
        exe.launch(side)
        torch.cuda.synchronize()
    assert _same(loss, ref_loss), f"{name}: the lift without parameters: loss {_differ(loss, ref_loss)}"
    wrong = _first_state_difference(state, ref_state)
    assert wrong is None, f"{name}: the lift without parameters: {wrong}"
    del g0

    # 2. Lifted with x, t and out as parameters: each step on a new batch, then PyTorch from the same state.
    g1 = _lift(name, g, params=cap.params)
    statics = list(cap.params.values())
    with g1.instantiate() as exe:
        for i, seed in enumerate(SEEDS):
            batch = cap.make_input(seed)
            batch_before = snapshot(list(batch.values()))
            out, buf = guarded_like(loss)
            before, statics_before = snapshot(state), snapshot(statics)
            torch.cuda.synchronize()
            exe.launch(side, **batch, out=out)
            torch.cuda.synchronize()
            for key, now, was in zip(cap.params, statics, statics_before):
                assert _same(now, was), f"{name}: step {i}: the lifted step wrote the static {key}: {_differ(now, was)}"
            for key, now, was in zip(batch, batch.values(), batch_before):
                assert _same(now, was), f"{name}: step {i}: the lifted step wrote its input {key}"
            lifted_state = snapshot(state)
            assert _first_state_difference(lifted_state, before) is not None, f"{name}: step {i}: no weight changed"
            restore(state, before)
            want = cap.torch_step(batch).clone()  # PyTorch: copy in, replay, from the same state
            torch.cuda.synchronize()
            assert _same(out, want), f"{name}: step {i}: the lifted loss differs from PyTorch's: {_differ(out, want)}"
            wrong = _first_state_difference(lifted_state, state)
            assert wrong is None, f"{name}: step {i}: after the lifted step, {wrong}"
            assert guards_intact(out, buf), f"{name}: step {i}: the lifted step wrote outside its loss tensor"
    _SUMMARY.append(_describe(name, g1, cap.params) + ": ok")
