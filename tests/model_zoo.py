"""A zoo of small PyTorch models captured whole with ``torch.cuda.CUDAGraph``, for lifting tests and benchmarks.

Each :class:`Entry` names a model and a factory ``factory(torch) -> (module_or_callable, make_input)``:
random weights, float32 unless the name says autocast, batch 2, small inputs (64x64 images where the
architecture allows, 224 for ViT, DeiT and Swin, 16-32 tokens for the transformers). ``make_input(seed)``
returns a new CUDA tensor (a training step: a ``(data, target)`` pair) filled from a CPU generator
seeded with ``seed``, so the same seed gives the same values on any machine.

The capture helpers follow PyTorch's documentation for whole-network capture: three warm-up
iterations on a side stream, then ``static_y = model(static_x)`` inside ``torch.cuda.graph(g)``
(the output is the tensor the model returns, allocated in the graph's private pool). A training
step (forward, loss, backward, ``AdamW(capturable=True)`` step) is warmed up and captured the same
way, with ``optimizer.zero_grad(set_to_none=True)`` before the capture; its output is the loss.

Nothing here imports torch, torchvision, timm or transformers at import time: the names of the zoo
are known without them (pytest parametrizes over them on a machine without a GPU). A model that
cannot run here raises :class:`ZooSkip` with the reason: a package is missing, PyTorch itself
cannot capture it (:class:`CaptureError`), or its warm-up is too slow.

Used by ``tests/test_model_zoo_gpu.py`` and ``bench/zoo.py``.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

__all__ = [
    "BATCH",
    "QUICK",
    "ZOO",
    "CaptureError",
    "Captured",
    "Entry",
    "ZooSkip",
    "bits",
    "flat",
    "guarded_like",
    "guards_intact",
    "span",
    "capture",
    "capture_entry",
    "capture_train",
    "get",
    "names",
    "restore",
    "snapshot",
]

BATCH = 2
#: Batch of the training steps (a loss over 2 samples says little).
TRAIN_BATCH = 8
#: Warm-up iterations before a capture (PyTorch's documentation uses 3).
WARMUP = 3
#: A model whose warm-up iterations take longer than this (seconds) is skipped as too slow.
SLOW_S = 30.0
#: The byte that fills fresh output buffers and their guards (0xA5A5A5A5 is a float32 of about -2.9e-16).
GUARD_BYTE = 0xA5


class ZooSkip(Exception):
    """The model cannot run here; the message says why (a missing package, a capture PyTorch refuses, too slow)."""


class CaptureError(ZooSkip):
    """PyTorch itself cannot capture the model with ``torch.cuda.graph``."""


@dataclass(frozen=True)
class Entry:
    """One model of the zoo.

    ``factory(torch)`` returns ``(module_or_callable, make_input)``; ``kind`` is ``"inference"`` (the
    module maps one input tensor to one output tensor) or ``"training"`` (a :class:`TrainStep`-like
    callable ``step(data, target) -> loss`` with ``state_tensors()``; ``make_input(seed)`` returns
    ``(data, target)``).
    """

    name: str
    factory: Callable[[Any], tuple[Any, Callable[[int], Any]]] = field(repr=False)
    kind: str = "inference"
    note: str = ""


@dataclass
class Captured:
    """A model captured by PyTorch, with what the tests and the benchmark need around it.

    ``inputs`` are the static input tensors by parameter name (``x``; a training step also ``t``, its
    target); ``output`` is the static output (the tensor returned inside the capture, in the graph's
    pool); ``state`` the tensors one step changes besides the output (a training step: parameters,
    buffers, optimizer state; empty for inference); ``make_input(seed)`` new inputs by name.
    """

    name: str
    kind: str
    graph: Any
    inputs: dict[str, Any]
    output: Any
    state: list[Any]
    make_input: Callable[[int], dict[str, Any]]
    model: Any

    @property
    def params(self) -> dict[str, Any]:
        """``params=`` for ``cg.lift``: every static input by name, and the output as ``out``."""
        return {**self.inputs, "out": self.output}

    def torch_step(self, inputs: dict[str, Any]) -> Any:
        """PyTorch's way to run the graph on new inputs: copy them into the static tensors, replay.

        Returns the static output (read it before the next replay).
        """
        for key, value in inputs.items():
            self.inputs[key].copy_(value)
        self.graph.replay()
        return self.output


# --- helpers on tensors -----------------------------------------------------------------------------------


def bits(t: Any) -> Any:
    """The bytes of a tensor as a flat ``uint8`` tensor (a view where ``t`` is contiguous).

    Comparing these compares bit patterns: NaNs with the same payload are equal, ``-0.0 != 0.0``.
    """
    import torch

    return t.detach().reshape(-1).view(torch.uint8)


def span(t: Any) -> int:
    """Elements from a tensor's first to its last element in its storage (its numel where it is dense)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))


def flat(t: Any) -> Any:
    """A 1-D contiguous view of the storage a tensor spans (``t`` itself, flattened, where it is contiguous)."""
    return t.detach().as_strided((span(t),), (1,))


def guarded_like(t: Any, guard: int = 256, fill: int = GUARD_BYTE) -> tuple[Any, Any]:
    """A new tensor of ``t``'s shape, dtype and strides inside a buffer with ``guard`` elements on each side.

    Every byte of the buffer is ``fill`` (the tensor's own bytes included). Returns ``(out, buffer)``;
    :func:`guards_intact` tells whether anything wrote outside ``out``'s span.
    """
    import torch

    buf = torch.empty(span(t) + 2 * guard, dtype=t.dtype, device=t.device)
    buf.view(torch.uint8).fill_(fill)
    return buf.as_strided(t.shape, t.stride(), guard), buf


def guards_intact(out: Any, buf: Any, fill: int = GUARD_BYTE) -> bool:
    """Whether the bytes of ``buf`` before and after ``out``'s span still all hold ``fill``."""
    import torch

    raw, size = buf.view(torch.uint8), buf.element_size()
    lo, hi = out.storage_offset() * size, (out.storage_offset() + span(out)) * size
    return bool((raw[:lo] == fill).all()) and bool((raw[hi:] == fill).all())


def snapshot(tensors: list[Any]) -> list[Any]:
    """Copies of ``tensors`` (on the current stream)."""
    return [t.detach().clone() for t in tensors]


def restore(tensors: list[Any], saved: list[Any]) -> None:
    """Copy ``saved`` back into ``tensors`` (on the current stream)."""
    for t, s in zip(tensors, saved, strict=True):
        t.detach().copy_(s)


def _need(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or a broken install raising something else at import
        raise ZooSkip(f"needs {module}: {type(exc).__name__}: {exc}") from exc


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- inputs -------------------------------------------------------------------------------------------------


def _randn(*shape: int, dtype: str = "float32") -> Callable[[int], Any]:
    def make(seed: int) -> Any:
        import torch

        gen = torch.Generator().manual_seed(seed)
        return torch.randn(*shape, generator=gen).to(device="cuda", dtype=getattr(torch, dtype))

    return make


def _images(size: int, channels: int = 3) -> Callable[[int], Any]:
    return _randn(BATCH, channels, size, size)


def _tokens(vocab: int, length: int, batch: int = BATCH) -> Callable[[int], Any]:
    def make(seed: int) -> Any:
        import torch

        gen = torch.Generator().manual_seed(seed)
        return torch.randint(0, vocab, (batch, length), generator=gen).to("cuda")

    return make


def _classification(data: Callable[[int], Any], classes: int) -> Callable[[int], tuple[Any, Any]]:
    def make(seed: int) -> tuple[Any, Any]:
        import torch

        gen = torch.Generator().manual_seed(seed + 1_000_003)
        x = data(seed)
        return x, torch.randint(0, classes, (x.shape[0],), generator=gen).to("cuda")

    return make


# --- hand-written modules (defined once torch is imported) ---------------------------------------------------


@functools.cache
def _modules() -> SimpleNamespace:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class HandAttention(nn.Module):
        """Multi-head self-attention written out: softmax(Q K^T / sqrt(d)) V, then a projection."""

        def __init__(self, dim: int = 64, heads: int = 4) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = self.qkv(x).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
            att = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5), dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            return self.proj(y)

    class SdpaBlock(nn.Module):
        """A pre-norm transformer block with ``F.scaled_dot_product_attention`` (causal) and a GELU MLP."""

        def __init__(self, dim: int = 64, heads: int = 4) -> None:
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class RmsSwiGlu(nn.Module):
        """RMSNorm, then a SiLU-gated MLP (as in Llama), with a residual."""

        def __init__(self, dim: int = 64, hidden: int = 172) -> None:
            super().__init__()
            self.norm = nn.RMSNorm(dim)
            self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
            self.down = nn.Linear(hidden, dim, bias=False)

        def forward(self, x: Any) -> Any:
            h = self.norm(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    class TokenEmbedding(nn.Module):
        """Token and position embeddings (``nn.Embedding`` on integer inputs), LayerNorm, a projection."""

        def __init__(self, vocab: int = 1000, length: int = 32, dim: int = 64) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, dim)
            self.pos = nn.Embedding(length, dim)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, dim)

        def forward(self, ids: Any) -> Any:
            positions = torch.arange(ids.shape[1], device=ids.device)
            return self.head(self.norm(self.tok(ids) + self.pos(positions)))

    class EmbeddingBagMean(nn.Module):
        """``nn.EmbeddingBag`` (mean of each row's tokens) beside a max over ``nn.Embedding``."""

        def __init__(self, vocab: int = 1000, dim: int = 64) -> None:
            super().__init__()
            self.bag = nn.EmbeddingBag(vocab, dim, mode="mean")
            self.emb = nn.Embedding(vocab, dim)

        def forward(self, ids: Any) -> Any:
            return torch.cat([self.bag(ids), self.emb(ids).amax(dim=1)], dim=1)

    class Pooling(nn.Module):
        """Max, average, adaptive average and adaptive max pooling between convolutions."""

        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
            self.maxpool, self.avgpool = nn.MaxPool2d(2), nn.AvgPool2d(2)
            self.adaptive_avg, self.adaptive_max = nn.AdaptiveAvgPool2d((3, 3)), nn.AdaptiveMaxPool2d(1)
            self.head = nn.Linear(32 * 9 + 32, 10)

        def forward(self, x: Any) -> Any:
            x = self.avgpool(F.relu(self.conv2(self.maxpool(F.relu(self.conv1(x))))))
            pooled = torch.cat([self.adaptive_avg(x).flatten(1), self.adaptive_max(x).flatten(1)], dim=1)
            return self.head(pooled)

    class BatchNormEval(nn.Module):
        """Conv, BatchNorm2d, ReLU twice, then a global mean, BatchNorm1d and a classifier (eval mode)."""

        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(3, 16, 3, padding=1, bias=False),
                nn.BatchNorm2d(16),
                nn.ReLU(),
                nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(32),
                nn.ReLU(),
            )
            self.bn = nn.BatchNorm1d(32)
            self.head = nn.Linear(32, 10)

        def forward(self, x: Any) -> Any:
            return self.head(self.bn(self.body(x).mean(dim=(2, 3))))

    class UpsampleDecoder(nn.Module):
        """A small decoder: transposed convolution, bilinear and nearest upsampling, a 1x1 convolution."""

        def __init__(self) -> None:
            super().__init__()
            self.down = nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.out = nn.Conv2d(8, 3, 1)

        def forward(self, x: Any) -> Any:
            y = F.relu(self.up(F.relu(self.down(x))))
            y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
            y = F.interpolate(y, scale_factor=0.5, mode="nearest")
            return self.out(y)

    class LstmLast(nn.Module):
        """A two-layer LSTM (cuDNN); the output sequence (batch first: on the GPU a transposed, non-contiguous
        view of what cuDNN writes)."""

        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(32, 64, num_layers=2, batch_first=True)

        def forward(self, x: Any) -> Any:
            return self.lstm(x)[0]

    class LastHidden(nn.Module):
        """A transformers model called as ``model(input_ids=x).last_hidden_state``."""

        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: Any) -> Any:
            return self.model(input_ids=ids).last_hidden_state

    class Autocast(nn.Module):
        """``inner`` run under ``torch.autocast("cuda", dtype)`` (no cast cache: the casts are captured too)."""

        def __init__(self, inner: Any, dtype: Any) -> None:
            super().__init__()
            self.inner = inner
            self.dtype = dtype

        def forward(self, x: Any) -> Any:
            with torch.autocast("cuda", dtype=self.dtype, cache_enabled=False):
                return self.inner(x)

    class TrainStep:
        """One training step: forward, loss, backward, optimizer step; returns the loss (detached).

        ``deterministic_cudnn`` picks cuDNN's deterministic algorithms while it runs (the backward of
        a convolution may otherwise add with atomics, so that two replays differ in their last bits).
        """

        def __init__(self, model: Any, optimizer: Any, loss_fn: Any, deterministic_cudnn: bool = False) -> None:
            self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
            self.deterministic_cudnn = deterministic_cudnn

        def __call__(self, data: Any, target: Any) -> Any:
            before = torch.backends.cudnn.deterministic
            torch.backends.cudnn.deterministic = before or self.deterministic_cudnn
            try:
                loss = self.loss_fn(self.model(data), target)
                loss.backward()
                self.optimizer.step()
            finally:
                torch.backends.cudnn.deterministic = before
            return loss.detach()

        def state_tensors(self) -> list[Any]:
            """Parameters, buffers and the optimizer's state tensors, in a fixed order (after a first step)."""
            out = [p.detach() for p in self.model.parameters()] + [b for b in self.model.buffers()]
            for p in self.model.parameters():
                state = self.optimizer.state.get(p, {})
                out += [state[k] for k in sorted(state) if torch.is_tensor(state[k])]
            return out

    class ConvBnRelu(nn.Module):
        """Two convolutions with batch norm (eval) and ReLU, then global pooling and a linear head: what Inductor
        fuses into Triton kernels around its convolutions."""

        def __init__(self) -> None:
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
            self.c2, self.b2 = nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32)
            self.head = nn.Linear(32, 10)

        def forward(self, x: Any) -> Any:
            x = F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))))
            return self.head(x.mean(dim=(2, 3)))

    return SimpleNamespace(**{k: v for k, v in locals().items() if isinstance(v, type)})


# --- factories ----------------------------------------------------------------------------------------------


def _torchvision(fn: str, size: int = 64, **kwargs: Any) -> Callable[[Any], tuple[Any, Any]]:
    def factory(torch: Any) -> tuple[Any, Any]:
        tv = _need("torchvision")
        return getattr(tv.models, fn)(weights=None, **kwargs), _images(size)

    return factory


def _timm(name: str, size: int = 64, **kwargs: Any) -> Callable[[Any], tuple[Any, Any]]:
    def factory(torch: Any) -> tuple[Any, Any]:
        timm = _need("timm")
        return timm.create_model(name, pretrained=False, **kwargs), _images(size)

    return factory


def _transformers(
    config_cls: str, model_cls: str, impl: str, length: int = 32, **config: Any
) -> Callable[[Any], tuple[Any, Any]]:
    """A tiny transformers model built from its config (random weights, no download), dropout 0."""

    def factory(torch: Any) -> tuple[Any, Any]:
        tf = _need("transformers")
        cfg = getattr(tf, config_cls)(**config)
        cls = getattr(tf, model_cls)
        from_config = getattr(cls, "_from_config", None)
        model = from_config(cfg, attn_implementation=impl) if from_config else cls(cfg)
        return _modules().LastHidden(model.float()), _tokens(config.get("vocab_size", 1000), length)

    return factory


def _hand(cls: str, make_input: Callable[[int], Any], **kwargs: Any) -> Callable[[Any], tuple[Any, Any]]:
    def factory(torch: Any) -> tuple[Any, Any]:
        return getattr(_modules(), cls)(**kwargs), make_input

    return factory


def _mlp(norm: str, act: str, dim: int = 64) -> Callable[[Any], tuple[Any, Any]]:
    def factory(torch: Any) -> tuple[Any, Any]:
        nn = torch.nn
        return nn.Sequential(
            getattr(nn, norm)(dim), nn.Linear(dim, 4 * dim), getattr(nn, act)(), nn.Linear(4 * dim, dim)
        ), _randn(BATCH, 32, dim)

    return factory


def _inductor(inner: Callable[[Any], tuple[Any, Any]]) -> Callable[[Any], tuple[Any, Any]]:
    """``inner``'s model compiled by ``torch.compile`` (Inductor: Triton kernels), compiled here on its first input
    (the compile is not counted as warm-up time)."""

    def factory(torch: Any) -> tuple[Any, Any]:
        try:
            import triton  # noqa: F401
        except ImportError as exc:
            raise ZooSkip(f"needs Triton ({exc})") from exc
        model, make_input = inner(torch)
        compiled = torch.compile(model.cuda().eval())
        with torch.no_grad():
            compiled(make_input(0))
        torch.cuda.synchronize()
        return compiled, make_input

    return factory


def _triton_matmul(torch: Any) -> tuple[Any, Any]:
    try:
        import zoo_triton
    except ImportError as exc:
        raise ZooSkip(f"needs Triton ({exc})") from exc
    model = zoo_triton.TritonMatmul().cuda()
    make_input = _randn(256, 256, dtype="float16")
    with torch.no_grad():
        model(make_input(0))  # (compiled here: Triton's first launch raises the kernel's shared-memory limit)
    torch.cuda.synchronize()
    return model, make_input


def _batchnorm_eval(torch: Any) -> tuple[Any, Any]:
    model = _modules().BatchNormEval()
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():  # running statistics other than (0, 1), so that eval-mode batch norm does something
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.rand(m.num_features, generator=gen) - 0.5)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    return model, _images(64)


def _autocast(inner: Callable[[Any], tuple[Any, Any]], dtype: str) -> Callable[[Any], tuple[Any, Any]]:
    def factory(torch: Any) -> tuple[Any, Any]:
        model, make_input = inner(torch)
        return _modules().Autocast(model, getattr(torch, dtype)), make_input

    return factory


def _train_mlp(torch: Any) -> tuple[Any, Any]:
    nn = torch.nn
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, capturable=True)
    step = _modules().TrainStep(model, opt, torch.nn.functional.cross_entropy)
    return step, _classification(_randn(TRAIN_BATCH, 64), 10)


def _train_cnn(torch: Any) -> tuple[Any, Any]:
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(16 * 8 * 8, 10),
    ).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True, fused=True)
    step = _modules().TrainStep(model, opt, torch.nn.functional.cross_entropy, deterministic_cudnn=True)
    return step, _classification(_randn(TRAIN_BATCH, 3, 32, 32), 10)


_BERT = dict(
    vocab_size=1000,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=128,
    max_position_embeddings=64,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    pad_token_id=None,  # (else transformers 4 looks for padding in the input ids on the host: a sync)
)
_DISTILBERT = dict(
    vocab_size=1000,
    dim=64,
    n_layers=2,
    n_heads=2,
    hidden_dim=128,
    max_position_embeddings=64,
    dropout=0.0,
    attention_dropout=0.0,
    pad_token_id=None,
)
_GPT2 = dict(
    vocab_size=1000,
    n_embd=64,
    n_layer=2,
    n_head=2,
    n_positions=64,
    resid_pdrop=0.0,
    embd_pdrop=0.0,
    attn_pdrop=0.0,
    bos_token_id=1,
    eos_token_id=2,
    use_cache=False,
)
_T5 = dict(
    vocab_size=1000,
    d_model=64,
    d_kv=16,
    d_ff=128,
    num_layers=2,
    num_heads=4,
    relative_attention_num_buckets=8,
    dropout_rate=0.0,
    use_cache=False,
)
_LLAMA = dict(
    vocab_size=1000,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    use_cache=False,
)

ZOO: list[Entry] = [
    # convolutions (cuDNN)
    Entry("resnet18", _torchvision("resnet18")),
    Entry("resnet50", _torchvision("resnet50")),
    Entry("timm_resnet26d", _timm("resnet26d")),
    # depthwise convolutions
    Entry("mobilenet_v3_small", _torchvision("mobilenet_v3_small")),
    Entry("efficientnet_b0", _torchvision("efficientnet_b0")),
    Entry("timm_mobilenetv3_large_100", _timm("mobilenetv3_large_100")),
    Entry("convnext_tiny", _torchvision("convnext_tiny")),
    Entry("timm_convnext_atto", _timm("convnext_atto")),
    Entry("densenet121", _torchvision("densenet121")),
    Entry("regnet_y_400mf", _torchvision("regnet_y_400mf")),
    Entry("googlenet", _torchvision("googlenet", aux_logits=False, init_weights=False)),
    Entry("shufflenet_v2_x1_0", _torchvision("shufflenet_v2_x1_0")),
    Entry("squeezenet1_1", _torchvision("squeezenet1_1")),
    Entry("mnasnet0_5", _torchvision("mnasnet0_5")),
    Entry("vgg11_bn", _torchvision("vgg11_bn")),
    # attention
    Entry("timm_vit_tiny_patch16_224", _timm("vit_tiny_patch16_224", 224)),
    Entry("timm_deit_tiny_patch16_224", _timm("deit_tiny_patch16_224", 224)),
    Entry("swin_t", _torchvision("swin_t", 224)),
    Entry("timm_mobilevit_xxs", _timm("mobilevit_xxs", 64)),
    Entry("hand_attention", _hand("HandAttention", _randn(BATCH, 32, 64)), note="softmax(QK^T)V written out"),
    Entry("sdpa_block", _hand("SdpaBlock", _randn(BATCH, 32, 64)), note="F.scaled_dot_product_attention"),
    # norms, activations, embeddings, pooling, batch norm, upsampling, recurrent
    Entry("layernorm_gelu_mlp", _mlp("LayerNorm", "GELU")),
    Entry("rmsnorm_silu_mlp", _mlp("RMSNorm", "SiLU")),
    Entry("rmsnorm_swiglu", _hand("RmsSwiGlu", _randn(BATCH, 32, 64))),
    Entry("embedding", _hand("TokenEmbedding", _tokens(1000, 32))),
    Entry("embedding_bag", _hand("EmbeddingBagMean", _tokens(1000, 16))),
    Entry("pooling", _hand("Pooling", _images(64))),
    Entry("batchnorm_eval", _batchnorm_eval),
    Entry("upsample_decoder", _hand("UpsampleDecoder", _images(64))),
    Entry("lstm", _hand("LstmLast", _randn(BATCH, 16, 32))),
    # transformers, tiny configs, random weights
    Entry("hf_bert_eager", _transformers("BertConfig", "BertModel", "eager", **_BERT)),
    Entry(
        "hf_bert_sdpa",
        _transformers("BertConfig", "BertModel", "sdpa", **_BERT),
        note="transformers 4 reads its mask on the host: PyTorch cannot capture it there",
    ),
    Entry("hf_distilbert_eager", _transformers("DistilBertConfig", "DistilBertModel", "eager", **_DISTILBERT)),
    Entry("hf_gpt2_sdpa", _transformers("GPT2Config", "GPT2Model", "sdpa", **_GPT2)),
    Entry("hf_t5_encoder_eager", _transformers("T5Config", "T5EncoderModel", "eager", length=16, **_T5)),
    Entry("hf_llama_sdpa", _transformers("LlamaConfig", "LlamaModel", "sdpa", **_LLAMA)),
    Entry("hf_llama_eager", _transformers("LlamaConfig", "LlamaModel", "eager", length=16, **_LLAMA)),
    # mixed precision
    Entry("resnet18_fp16_autocast", _autocast(_torchvision("resnet18"), "float16")),
    Entry("sdpa_block_bf16_autocast", _autocast(_hand("SdpaBlock", _randn(BATCH, 32, 64)), "bfloat16")),
    Entry("layernorm_gelu_mlp_bf16_autocast", _autocast(_mlp("LayerNorm", "GELU"), "bfloat16")),
    # Triton kernels: Inductor's, and one that needs more than 48 KiB of dynamic shared memory
    Entry("inductor_layernorm_gelu_mlp", _inductor(_mlp("LayerNorm", "GELU")), note="torch.compile, Triton kernels"),
    Entry("inductor_conv_bn_relu", _inductor(_hand("ConvBnRelu", _images(64))), note="torch.compile, Triton kernels"),
    Entry("triton_matmul_96k_smem", _triton_matmul, note="a Triton kernel with 96 KiB of dynamic shared memory"),
    # whole training steps
    Entry("train_mlp_adamw", _train_mlp, kind="training", note="AdamW(capturable=True), foreach"),
    Entry("train_cnn_adamw_fused", _train_cnn, kind="training", note="AdamW(capturable=True, fused=True)"),
]

#: About 8 models for a quick look (``bench/zoo.py --quick``).
QUICK = (
    "resnet18",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "timm_vit_tiny_patch16_224",
    "sdpa_block",
    "hf_bert_eager",
    "hf_llama_sdpa",
    "train_mlp_adamw",
)

_BY_NAME = {e.name: e for e in ZOO}
assert len(_BY_NAME) == len(ZOO), "zoo names must be unique"


def names(kind: str | None = None) -> list[str]:
    """The names of the zoo (of one ``kind``: ``"inference"`` or ``"training"``), in order."""
    return [e.name for e in ZOO if kind is None or e.kind == kind]


def get(name: str) -> Entry:
    """The entry called ``name`` (``KeyError`` naming the known ones otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no model {name!r} in the zoo; known: {', '.join(_BY_NAME)}") from None


# --- capture --------------------------------------------------------------------------------------------------


def _end_failed_capture(torch: Any) -> None:
    """After a capture PyTorch refused: wait for the device and clear the error state the runtime may keep."""
    try:
        torch.cuda.synchronize()
    except Exception:  # (the error already raised is the one reported)
        pass


def capture(torch: Any, model: Any, static_x: Any, warmup: int = WARMUP) -> tuple[Any, Any, Any]:
    """Capture ``static_y = model(static_x)`` whole, as PyTorch's documentation does; ``(g, static_x, static_y)``.

    ``warmup`` iterations run first on a side stream (library handles, workspaces, lazy
    initialization), then the forward pass is captured under ``torch.no_grad()`` into a
    ``torch.cuda.CUDAGraph(keep_graph=True)``; ``static_y`` is the tensor the model returns inside
    the capture (in the graph's private memory pool).

    Raises
    ------
    CaptureError
        PyTorch cannot capture the model (the message holds PyTorch's error).
    ZooSkip
        The warm-up took longer than :data:`SLOW_S`.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    t0 = time.perf_counter()
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(warmup):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    spent = time.perf_counter() - t0
    if spent > SLOW_S:
        raise ZooSkip(f"too slow: {warmup} warm-up iterations took {spent:.1f} s (limit {SLOW_S:.0f} s)")
    g = torch.cuda.CUDAGraph(keep_graph=True)
    try:
        with torch.cuda.graph(g), torch.no_grad():
            static_y = model(static_x)
        torch.cuda.synchronize()
    except Exception as exc:
        _end_failed_capture(torch)
        raise CaptureError(_short(exc)) from exc
    return g, static_x, static_y


def capture_train(
    torch: Any, step: Any, static_data: Any, static_target: Any, warmup: int = WARMUP
) -> tuple[Any, Any, Any, Any]:
    """Capture a whole training step as PyTorch's documentation does; ``(g, static_data, static_target, static_loss)``.

    ``step(data, target)`` runs forward, loss, backward and the optimizer step and returns the loss;
    ``step.optimizer`` is its optimizer (built with ``capturable=True``). ``warmup`` steps run first
    on a side stream (each after ``zero_grad(set_to_none=True)``: the optimizer's state is made
    there), then the gradients are set to ``None`` and one step is captured: its backward allocates
    the gradients in the graph's pool, and each replay writes them anew.

    Raises
    ------
    CaptureError
        PyTorch cannot capture the step.
    ZooSkip
        The warm-up took longer than :data:`SLOW_S`.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    t0 = time.perf_counter()
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step.optimizer.zero_grad(set_to_none=True)
            step(static_data, static_target)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    spent = time.perf_counter() - t0
    if spent > SLOW_S:
        raise ZooSkip(f"too slow: {warmup} warm-up steps took {spent:.1f} s (limit {SLOW_S:.0f} s)")
    step.optimizer.zero_grad(set_to_none=True)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    try:
        with torch.cuda.graph(g):
            static_loss = step(static_data, static_target)
        torch.cuda.synchronize()
    except Exception as exc:
        _end_failed_capture(torch)
        raise CaptureError(_short(exc)) from exc
    return g, static_data, static_target, static_loss


def _build(torch: Any, entry: Entry) -> tuple[Any, Callable[[int], Any]]:
    torch.manual_seed(0)  # the same random weights on every run
    try:
        model, make_input = entry.factory(torch)
    except ZooSkip as exc:
        raise ZooSkip(f"{entry.name} {exc}") from exc
    if entry.kind == "inference":
        model = model.cuda().eval()
    return model, make_input


def capture_entry(torch: Any, entry: Entry | str, seed: int = 0) -> Captured:
    """Build ``entry`` (random weights, on the GPU), capture it on ``make_input(seed)``; a :class:`Captured`.

    Raises
    ------
    ZooSkip
        A package is missing, PyTorch cannot capture the model (:class:`CaptureError`, the message
        starting ``PyTorch cannot capture <name>``), or it is too slow. Anything else (the model
        failing to run at all) propagates.
    """
    if isinstance(entry, str):
        entry = get(entry)
    model, make_input = _build(torch, entry)
    try:
        if entry.kind == "training":
            data, target = make_input(seed)
            g, data, target, loss = capture_train(torch, model, data, target)
            inputs = {"x": data, "t": target}

            def make(seed: int) -> dict[str, Any]:
                d, t = make_input(seed)
                return {"x": d, "t": t}

            return Captured(entry.name, entry.kind, g, inputs, loss, model.state_tensors(), make, model)
        g, static_x, static_y = capture(torch, model, make_input(seed))
    except CaptureError as exc:
        raise CaptureError(f"PyTorch cannot capture {entry.name}: {exc}") from exc
    except ZooSkip as exc:
        raise ZooSkip(f"{entry.name}: {exc}") from exc
    return Captured(entry.name, entry.kind, g, {"x": static_x}, static_y, [], lambda s: {"x": make_input(s)}, model)
