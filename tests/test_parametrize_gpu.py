"""Captured graphs rebound to new memory with no copy (GPU): PyTorch, CuPy and cuda.core captures.

Each graph is captured once, lifted with ``params=`` (or parametrized), and
launched on new inputs at new addresses writing into new outputs; every
output must equal, bit for bit, the same work run eagerly on that input, and
the memory captured must be left as it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cudagraph as cg

pytestmark = pytest.mark.gpu

N = 1024


def _torch() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch


def _capture_torch(torch: Any, model: Any, static_x: Any, static_out: Any) -> Any:
    """``static_out.copy_(model(static_x))`` captured by PyTorch (kept, not instantiated by us)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):  # warm up: library handles, workspaces, kernel choices
            static_out.copy_(model(static_x))
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g), torch.no_grad():
        static_out.copy_(model(static_x))
    torch.cuda.synchronize()
    return g


def _rebind_torch_model(torch: Any, model: Any, shape: tuple[int, ...], stream: Any, min_kernels: int) -> None:
    torch.manual_seed(0)
    static_x = torch.randn(*shape, device="cuda")
    with torch.no_grad():
        static_out = torch.empty_like(model(static_x))
    g = _capture_torch(torch, model, static_x, static_out)
    x_before, out_before = static_x.clone(), static_out.clone()
    with torch.no_grad():
        assert torch.equal(static_out, model(static_x))  # the capture computed the eager result
    lifted = cg.lift(g, params={"x": static_x, "out": static_out})
    kernels = [n for n in lifted.nodes if n.kind == "kernel"]
    assert len(kernels) >= min_kernels, len(kernels)
    (report,) = lifted.parametrizations
    assert report.count("x") >= 1 and report.count("out") >= 1 and not report.verified
    # the input is read and the output written by user kernels; nothing else points into them
    with lifted.instantiate() as exe:
        keep = []
        for i in range(5):
            keep.append(torch.empty(4096 * (i + 1), device="cuda"))  # move the allocator on: new addresses
            x = torch.randn(*shape, device="cuda")
            out = torch.empty_like(static_out)
            assert x.data_ptr() != static_x.data_ptr() and out.data_ptr() != static_out.data_ptr()
            torch.cuda.synchronize()
            # Our stream, then torch's current one (a new Stream object per call, the same handle, twice) in turn.
            for s in [stream] if i % 2 == 0 else [torch.cuda.current_stream(), torch.cuda.current_stream()]:
                exe.launch(s, x=x, out=out)
            torch.cuda.synchronize()
            with torch.no_grad():
                expected = model(x)
            torch.cuda.synchronize()
            assert torch.equal(out, expected), f"input {i}: max diff {(out - expected).abs().max().item()}"
    assert torch.equal(static_x, x_before) and torch.equal(static_out, out_before)


def test_torch_mlp_runs_on_new_tensors(gpu, stream):
    torch = _torch()
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512),
        torch.nn.GELU(),
        torch.nn.Linear(512, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 128),
    ).cuda()
    model.eval()
    _rebind_torch_model(torch, model, (64, 256), stream, min_kernels=5)


def _block(torch: Any, dim: int, heads: int) -> Any:
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    return nn.Sequential(*[Block() for _ in range(4)]).cuda().eval()


def test_torch_transformer_block_runs_on_new_tensors(gpu, stream):
    torch = _torch()
    torch.manual_seed(2)
    _rebind_torch_model(torch, _block(torch, 128, 4), (2, 64, 128), stream, min_kernels=40)


def test_torch_binds_are_checked(gpu, stream):
    torch = _torch()
    static_x = torch.randn(N, device="cuda")
    static_out = torch.empty(N, device="cuda")
    g = _capture_torch(torch, lambda x: x * 2 + 1, static_x, static_out)
    lifted = cg.lift(g, params={"x": static_x, "out": static_out})
    with lifted.instantiate() as exe:
        with pytest.raises(
            cg.errors.OperandError, match=r"bind 'x': the new memory has 2048 bytes, fewer than the 4096"
        ):
            exe.launch(stream, x=torch.randn(N // 2, device="cuda"), out=torch.empty(N, device="cuda"))
        with pytest.raises(cg.errors.OperandError, match=r"dtype torch\.float64 differs"):
            exe.bind(x=torch.randn(N, device="cuda", dtype=torch.float64))
        with pytest.raises(cg.errors.OperandError, match="host memory"):
            exe.bind(x=torch.randn(N))
        x, out = torch.randn(N, device="cuda"), torch.empty(N, device="cuda")
        torch.cuda.synchronize()
        exe.launch(stream, x=x, out=out)
        stream.sync()
        assert torch.equal(out, x * 2 + 1)


def _lifted_affine(torch: Any) -> tuple[cg.Graph, tuple[Any, Any]]:
    """``out = x * 2 + 1`` on 64 x 64 floats captured by PyTorch and lifted with ``x`` and ``out`` as parameters;
    also the captured tensors (to be kept alive with it)."""
    static_x = torch.randn(64, 64, device="cuda")
    static_out = torch.empty(64, 64, device="cuda")
    g = _capture_torch(torch, lambda x: x * 2 + 1, static_x, static_out)
    return cg.lift(g, params={"x": static_x, "out": static_out}), (static_x, static_out)


def test_torch_tensors_of_a_layout_that_passed_skip_the_full_check_others_are_refused(gpu, stream, monkeypatch):
    import cudagraph.executable.bind_checks as checks

    torch = _torch()
    lifted, _static = _lifted_affine(torch)
    described: list[Any] = []
    real = checks.describe_memory

    def describe(obj: Any, what: str) -> Any:
        described.append(obj)
        return real(obj, what)

    monkeypatch.setattr(checks, "describe_memory", describe)
    with lifted.instantiate() as exe:
        for _ in range(4):
            x, out = torch.randn(64, 64, device="cuda"), torch.empty(64, 64, device="cuda")
            torch.cuda.synchronize()
            exe.launch(stream, x=x, out=out)
            stream.sync()
            assert torch.equal(out, x * 2 + 1)
        assert len(described) == 2  # the first x and the first out; the others had a layout that passed
        bound = exe.bindings
        with pytest.raises(
            cg.errors.OperandError, match=r"bind 'x': strides \(4, 256\) differs from the captured strides \(256, 4\)"
        ):
            exe.bind(x=torch.randn(64, 64, device="cuda").t())
        with pytest.raises(
            cg.errors.OperandError, match=r"bind 'out': shape \(4096,\) differs from the captured shape \(64, 64\)"
        ):
            exe.bind(out=torch.empty(4096, device="cuda"))
        assert exe.bindings == bound
        resized = torch.randn(64, 64, device="cuda")
        exe.bind(x=resized)
        exe.bind(x=torch.randn(64, 64, device="cuda"))  # `resized` is no longer the object bound
        resized.resize_(32, 64)  # in place: a layout that has not passed
        with pytest.raises(
            cg.errors.OperandError, match=r"bind 'x': the new memory has 8192 bytes, fewer than the 16384"
        ):
            exe.bind(x=resized)


def test_rebinding_launches_of_fresh_tensors_are_checked_once_then_run_in_c(gpu, stream, converted):
    from cudagraph.driver import c_entry

    torch = _torch()
    lifted, _static = _lifted_affine(torch)
    keep = []  # every tensor stays alive: each launch rebinds both names to new addresses
    with lifted.instantiate() as exe:
        counts = []
        for _ in range(4):
            x, out = torch.randn(64, 64, device="cuda"), torch.empty(64, 64, device="cuda")
            keep.append((x, out))
            torch.cuda.synchronize()
            before = exe.update_calls
            exe.launch(stream, x=x, out=out)
            counts.append(exe.update_calls - before)
            stream.sync()
            assert torch.equal(out, x * 2 + 1)
        # the compiled Executable._bind_many takes every launch after the first (no Python-level check)
        assert converted == ["x", "out"] * (1 if c_entry.NATIVE is not None else 4)
        assert counts[0] >= 1 and counts == counts[:1] * 4
        assert exe.bindings == {"x": x.data_ptr(), "out": out.data_ptr()}


def test_cupy_elementwise_chain_runs_on_new_arrays(gpu, stream):
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(N, dtype=cupy.float32) / 7
    t = cupy.empty_like(x)  # an intermediate: stays as captured
    out = cupy.empty_like(x)

    def chain(x: Any, out: Any) -> None:
        cupy.multiply(x, 3, out=t)
        cupy.sin(t, out=t)
        cupy.add(t, x, out=t)
        cupy.sqrt(cupy.abs(t, out=t), out=out)

    chain(x, out)  # load the kernels before capture
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        chain(x, out)
        graph = s.end_capture()
    try:
        lifted = cg.lift(graph, params={"x": x, "out": out})
    except cg.errors.OperandError as exc:
        if "cannot find a CUgraph" not in str(exc):
            raise

        def body(st: Any) -> None:
            with st.cupy():
                chain(x, out)

        lifted = cg.Graph.capture(body)
        lifted.parametrize(x=x, out=out)
    x_before = x.copy()
    cupy.cuda.runtime.deviceSynchronize()
    out_before = out.copy()
    assert [n.kind for n in lifted.nodes] == ["kernel"] * 5
    with lifted.instantiate() as exe:
        for i in range(5):
            nx = cupy.random.random(N, dtype=cupy.float32) + i
            nout = cupy.empty_like(nx)
            cupy.cuda.runtime.deviceSynchronize()
            exe.launch(stream, x=nx, out=nout)
            stream.sync()
            expected = cupy.empty_like(nx)
            tt = cupy.sqrt(cupy.abs(cupy.add(cupy.sin(cupy.multiply(nx, 3)), nx)))
            expected[...] = tt
            np.testing.assert_array_equal(cupy.asnumpy(nout), cupy.asnumpy(expected))
    np.testing.assert_array_equal(cupy.asnumpy(x), cupy.asnumpy(x_before))
    np.testing.assert_array_equal(cupy.asnumpy(out), cupy.asnumpy(out_before))


def test_cuda_core_graph_builder_runs_on_new_buffers(gpu, kernels, device):
    from cuda.core import LaunchConfig, launch

    host = np.arange(N, dtype=np.float32)
    x, y, mid = gpu.upload(host), gpu.alloc(4 * N), gpu.alloc(4 * N)
    cfg = LaunchConfig(grid=N // 256, block=256)
    gb = device.create_graph_builder()
    gb.begin_building()
    launch(gb, cfg, kernels.axpb, mid, x, np.float32(2.0), np.float32(1.0), np.int32(N))
    launch(gb, cfg, kernels.axpb, y, mid, np.float32(3.0), np.float32(-1.0), np.int32(N))
    gb.end_building()
    lifted = cg.lift(gb, params={"x": x, "y": y})
    (report,) = lifted.parametrizations
    assert {(r.node.index, r.where, r.param, r.offset) for r in report} == {
        (0, "args[1]", "x", 0),
        (1, "args[0]", "y", 0),
    }
    s = device.create_stream()
    with lifted.instantiate() as exe:
        for i in range(5):
            data = np.random.default_rng(i).standard_normal(N).astype(np.float32)
            nx, ny = gpu.upload(data), gpu.alloc(4 * N)
            exe.launch(s, x=nx, y=ny)
            # The same two kernels launched eagerly on the new memory: the bits to match (fused multiply-adds).
            rmid, ry = gpu.alloc(4 * N), gpu.alloc(4 * N)
            launch(s, cfg, kernels.axpb, rmid, nx, np.float32(2.0), np.float32(1.0), np.int32(N))
            launch(s, cfg, kernels.axpb, ry, rmid, np.float32(3.0), np.float32(-1.0), np.int32(N))
            s.sync()
            np.testing.assert_array_equal(gpu.read(ny, N), gpu.read(ry, N))
            expected = (np.float32(2.0) * data + np.float32(1.0)) * np.float32(3.0) + np.float32(-1.0)
            np.testing.assert_allclose(gpu.read(ny, N), expected, rtol=1e-5, atol=1e-6)
        with pytest.raises(cg.errors.OperandError, match="fewer than the 4096 bytes"):
            exe.launch(s, x=gpu.alloc(4 * N - 4))
    np.testing.assert_array_equal(gpu.read(x, N), host)


TAG_SOURCE = r"""
extern "C" __global__ void tagged(float* y, const float* x, long long tag, long long* tags, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
    if (i == 0) tags[0] = tag;
}
"""


def test_exact_mode_keeps_a_scalar_that_equals_the_address(gpu, nvrtc, device):
    from cuda.core import LaunchConfig, launch

    k = nvrtc(TAG_SOURCE, ["tagged"]).tagged
    cfg = LaunchConfig(grid=N // 256, block=256)
    x1, x2, y1, y2 = (gpu.alloc(4 * N) for _ in range(4))
    tags = gpu.alloc(8)
    tag = np.int64(int(x1.handle))  # a constant that happens to equal x1's address

    def fn(s: Any, x: Any, y: Any) -> None:
        # a capture region's stream (lift_exact) as a cuda.core Stream; a cuda.core GraphBuilder as it is
        launch(s.core() if hasattr(s, "core") else s, cfg, k, y, x, tag, tags, np.int32(N))

    exact = cg.lift_exact(fn, {"x": (x1, x2), "y": (y1, y2)})
    (report,) = exact.parametrizations
    assert report.verified and report.keys() == {("lifted", 0, "args[0]", 0), ("lifted", 0, "args[1]", 0)}

    gb = device.create_graph_builder()
    gb.begin_building()
    fn(gb, x1, y1)
    gb.end_building()
    ranged = cg.lift(gb, params={"x": x1, "y": y1})
    assert ("lifted", 0, "args[2]", 0) in ranged.parametrizations[0].keys()  # range mode takes the scalar too
    assert "not verified" in ranged.parametrizations[0].summary()

    s = device.create_stream()
    data = np.arange(N, dtype=np.float32)
    x3, y3 = gpu.upload(data), gpu.alloc(4 * N)
    with exact.instantiate() as exe:
        exe.launch(s, x=x3, y=y3)
        s.sync()
    np.testing.assert_array_equal(gpu.read(y3, N), 2 * data)
    assert int(gpu.read(tags, 1, np.int64)[0]) == int(x1.handle)  # kept
    with ranged.instantiate() as exe:
        exe.launch(s, x=x3, y=y3)
        s.sync()
    assert int(gpu.read(tags, 1, np.int64)[0]) == int(x3.handle)  # rewritten


def test_copies_fills_and_pointers_at_offsets_rebind_together(gpu, kernels, stream):
    """A copy from x at an offset, a kernel writing out at an offset, a fill of out: rebound as one."""
    x, out, mid = gpu.alloc(8 * N), gpu.alloc(8 * N), gpu.alloc(4 * N)
    xa, oa, ma = int(x.handle), int(out.handle), int(mid.handle)
    original = np.arange(2 * N, dtype=np.float32)
    gpu.write(x, original)
    gpu.write(out, np.zeros(2 * N, np.float32))
    g = cg.Graph("offsets")
    c = g.memcpy(ma, xa + 4 * N, 4 * N)  # mid = x[N:]
    k = g.kernel(kernels.combine, N // 256, 256, (oa + 4 * N, xa, ma, np.int32(N)), after=c)  # out[N:] = x[:N] - 2 mid
    g.memset(oa, 0x3F800000, count=N, element_size=4, after=k)  # out[:N] = 1.0
    report = g.parametrize(x=x, out=out)
    assert {(r.node.index, r.where, r.param, r.offset) for r in report} == {
        (0, "src", "x", 4 * N),
        (1, "args[0]", "out", 4 * N),
        (1, "args[1]", "x", 0),
        (2, "dst", "out", 0),
    }
    with g.instantiate() as exe:
        outs = []
        for i in range(4):
            data = np.random.default_rng(i).standard_normal(2 * N).astype(np.float32)
            nx, nout = gpu.upload(data), gpu.alloc(8 * N)
            assert exe.bind(x=nx, out=nout) == 3  # each node once
            exe.launch(stream)
            stream.sync()
            got = gpu.read(nout, 2 * N)
            np.testing.assert_array_equal(got[:N], np.ones(N, np.float32))
            np.testing.assert_array_equal(got[N:], data[:N] - np.float32(2.0) * data[N:])
            nx2 = gpu.upload(data[::-1].copy())
            exe.launch(stream, x=nx2)  # x alone: the copy and the kernel; out stays
            stream.sync()
            np.testing.assert_array_equal(gpu.read(nout, N, offset=4 * N), data[::-1][:N] - 2 * data[::-1][N:])
            outs.append((nx, nout, nx2))
    np.testing.assert_array_equal(gpu.read(x, 2 * N), original)  # the captured memory is left as it was
    np.testing.assert_array_equal(gpu.read(out, 2 * N), np.zeros(2 * N, np.float32))
