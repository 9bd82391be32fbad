"""Kernels the model zoo compiles with Triton (imported by :mod:`model_zoo` only when such an entry is built).

:class:`TritonMatmul` multiplies by a weight matrix with a hand-written Triton kernel whose tiles need about
96 KiB of dynamic shared memory: more than the 48 KiB a kernel gets without raising its
``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``, which Triton's launcher does before the first launch. A
captured launch of it is a kernel node whose shared memory only works with that function attribute set.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

#: Tile sizes and pipeline depth: (128*64 + 64*128) fp16 elements per stage, 3 stages: 96 KiB of shared memory.
BLOCK_M, BLOCK_N, BLOCK_K, STAGES, WARPS = 128, 128, 64, 3, 8


@triton.jit
def _matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # type: ignore[no-untyped-def]
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(
            a + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0
        )
        y = tl.load(
            b + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0
        )
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


class TritonMatmul(torch.nn.Module):
    """``relu(x @ w1) @ w2`` for an fp16 ``x`` of shape ``(M, dim)``, both products by :func:`_matmul`."""

    def __init__(self, dim: int = 256) -> None:
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(dim, dim, dtype=torch.float16) / dim**0.5)
        self.w2 = torch.nn.Parameter(torch.randn(dim, dim, dtype=torch.float16) / dim**0.5)

    def _mm(self, x: Any, w: Any) -> Any:
        (m, k), n = x.shape, w.shape[1]
        out = torch.empty((m, n), device=x.device, dtype=torch.float16)
        grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
        _matmul[grid](x, w, out, m, n, k, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, num_stages=STAGES, num_warps=WARPS)
        return out

    def forward(self, x: Any) -> Any:
        return self._mm(torch.relu(self._mm(x.contiguous(), self.w1)), self.w2)
