"""Per-node profiles, the driver's picture and kernel names on a GPU (skipped without one)."""

from __future__ import annotations

import numpy as np
import pytest

import cudagraph as cg

# Spins for ``ns`` nanoseconds of the global timer, then counts itself in ``out``.
SPIN_SOURCE = r"""
extern "C" __global__ void spin(unsigned long long ns, int* out) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(out, 1);
}
"""


def _diamond(spin, out):
    g = cg.Graph("diamond")
    a = g.kernel(spin, 1, 32, (np.uint64(20_000), out), name="a")
    slow = g.kernel(spin, 1, 32, (np.uint64(2_000_000), out), after=a, name="slow")
    fast = g.kernel(spin, 1, 32, (np.uint64(50_000), out), after=a, name="fast")
    d = g.kernel(spin, 1, 32, (np.uint64(20_000), out), after=[slow, fast], name="d")
    return g, [a, slow, fast, d]


@pytest.mark.gpu
def test_profile_diamond_critical_path_is_the_slow_branch(gpu, stream, nvrtc):
    spin = nvrtc(SPIN_SOURCE, ["spin"]).spin
    out = gpu.upload(np.zeros(1, dtype=np.int32))
    g, (a, slow, fast, d) = _diamond(spin, out)
    r = g.profile(stream, repeats=5)
    assert [t.node for t in r.nodes] == [a, slow, fast, d]
    assert [t.kind for t in r.nodes] == ["kernel"] * 4
    assert all(len(t.samples_us) == 5 for t in r.nodes)
    assert 2000.0 <= r.nodes[1].median_us < 2600.0
    assert 50.0 <= r.nodes[2].median_us < 600.0
    assert r.critical_path == [a, slow, d]
    assert r.launch_us is not None and len(r.launch_samples_us) == 5
    assert abs(r.critical_path_us - r.launch_us) <= 0.2 * r.launch_us, str(r)
    assert "critical path: #0 -> #1 -> #3" in str(r)
    # 6 runs of the nodes (one warm-up) and 6 launches (one warm-up), 4 kernels each.
    assert int(gpu.read(out, 1, np.int32)[0]) == 6 * 4 + 6 * 4


@pytest.mark.gpu
def test_executable_profile_uses_its_bindings(gpu, stream, nvrtc):
    spin = nvrtc(SPIN_SOURCE, ["spin"]).spin
    out = gpu.upload(np.zeros(1, dtype=np.int32))
    g = cg.Graph("bound")
    p = g.param("out")
    a = g.kernel(spin, 1, 32, (np.uint64(500_000), p), name="a")
    b = g.kernel(spin, 1, 32, (np.uint64(10_000), p), name="b")
    with g.instantiate(out=out) as exe:
        r = exe.profile(stream, repeats=3)
    assert r.critical_path == [a]
    assert b in [t.node for t in r.nodes]
    assert int(gpu.read(out, 1, np.int32)[0]) == 4 * 2 + 4 * 2


@pytest.mark.gpu
def test_debug_dot_and_kernel_names(gpu, stream, nvrtc, tmp_path):
    spin = nvrtc(SPIN_SOURCE, ["spin"]).spin
    out = gpu.upload(np.zeros(1, dtype=np.int32))
    g, _ = _diamond(spin, out)
    assert '"a\\nkernel#0\\nspin(20000, Buffer)"' in g.to_dot()
    with g.instantiate() as exe:
        path = exe.debug_dot(tmp_path / "driver.dot")
    text = path.read_text()
    assert text.startswith("digraph") and "spin" in text
