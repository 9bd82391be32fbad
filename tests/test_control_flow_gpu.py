"""GPU tests of device-side control flow: if / if-else / while / switch nodes, nesting, conditions
set by user kernels (the paste-in snippet) and by built-in predicate nodes, parameters in bodies,
and the driver graph they build. Every result is read back and compared with what Python expects.

Marked ``gpu``: they skip (with the reason shown) where no NVIDIA driver/GPU works.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cudagraph as cg
from cudagraph import errors

pytestmark = pytest.mark.gpu

SRC = str(Path(__file__).resolve().parents[1] / "src")
N = 64

SOURCE = (
    cg.CONDITIONAL_SNIPPET
    + r"""
extern "C" __global__ void add_i32(int* x, int v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += v;
}

// cond = *flag
extern "C" __global__ void set_from(cudaGraphConditionalHandle h, const int* flag) {
    if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(h, (unsigned int)*flag);
}

// ++*counter; cond = *counter < limit
extern "C" __global__ void count_to(cudaGraphConditionalHandle h, int* counter, int limit) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        int c = ++*counter;
        cudaGraphSetConditional(h, c < limit ? 1u : 0u);
    }
}

// cond = *counter % 2
extern "C" __global__ void set_odd(cudaGraphConditionalHandle h, const int* counter) {
    if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(h, (unsigned int)(*counter & 1));
}

extern "C" __global__ void scale_f32(float* r, float f) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *r *= f;
}

extern "C" __global__ void inc_i32(int* c) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *c += 1;
}
"""
)
NAMES = ("add_i32", "set_from", "count_to", "set_odd", "scale_f32", "inc_i32")


@pytest.fixture(scope="module")
def k(nvrtc):
    return nvrtc(SOURCE, NAMES)


def add(g, k, x, v, *, after=None, name=None):
    return g.kernel(k.add_i32, 1, N, (x, np.int32(v), np.int32(N)), after=after, name=name)


def ints(gpu, values):
    return gpu.upload(np.asarray(values, dtype=np.int32))


def launch(exe, stream):
    exe.launch(stream)
    stream.sync()


# =============================================================================== if / if-else


def test_if_runs_body_only_when_condition_is_set(gpu, k, stream):
    x = ints(gpu, np.zeros(N))
    flag = ints(gpu, [1])
    g = cg.Graph("if")
    c = g.condition()
    s = g.kernel(k.set_from, 1, 1, (c, flag), name="set")
    node = g.if_(c, after=s, name="maybe")
    add(node.body, k, x, 1)
    assert node.then is node.body and isinstance(node, cg.IfNode)
    with g.instantiate() as exe:
        launch(exe, stream)
        np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.ones(N))
        gpu.write(flag, np.array([0], np.int32))
        launch(exe, stream)
        np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.ones(N))
        gpu.write(flag, np.array([7], np.int32))
        launch(exe, stream)
        np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, 2))


@pytest.mark.parametrize("default, expect", [(1, 5), (0, 0), (True, 5)])
def test_if_default_value_applies_at_every_launch(gpu, k, stream, default, expect):
    x = ints(gpu, np.zeros(N))
    g = cg.Graph("if_default")
    node = g.if_(g.condition(default=default))
    add(node.body, k, x, 5)
    with g.instantiate() as exe:
        launch(exe, stream)
        launch(exe, stream)
    np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, 2 * expect))


def test_if_else_takes_the_right_branch(gpu, k, stream):
    x = ints(gpu, np.zeros(N))
    flag = ints(gpu, [0])
    g = cg.Graph("if_else")
    c = g.condition()
    s = g.kernel(k.set_from, 1, 1, (c, flag))
    node = g.if_else(c, after=s)
    add(node.then, k, x, 1, name="then")
    add(node.else_, k, x, 100, name="else")
    after = add(g, k, x, 1000, after=node, name="after")
    assert after.predecessors == (node,)
    total = 0
    with g.instantiate() as exe:
        for value in (0, 1, 0, 5, 0):
            gpu.write(flag, np.array([value], np.int32))
            launch(exe, stream)
            total += (1 if value else 100) + 1000
            np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, total))


def test_if_else_with_an_empty_branch(gpu, k, stream):
    x = ints(gpu, np.zeros(N))
    flag = ints(gpu, [0])
    g = cg.Graph("if_else_empty")
    c = g.condition()
    node = g.if_else(c, after=g.kernel(k.set_from, 1, 1, (c, flag)))
    add(node.then, k, x, 3)  # else_ stays empty
    with g.instantiate() as exe:
        launch(exe, stream)
        gpu.write(flag, np.array([1], np.int32))
        launch(exe, stream)
    np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, 3))


# =============================================================================== while


@pytest.mark.parametrize("limit", [1, 2, 17])
def test_while_loops_the_right_number_of_times(gpu, k, stream, limit):
    x = ints(gpu, np.zeros(N))
    counter = ints(gpu, [0])
    g = cg.Graph("while")
    c = g.condition(default=1)
    z = g.memset(counter, 0, count=1, element_size=4, name="reset")
    loop = g.while_(c, after=z, name="loop")
    a = add(loop.body, k, x, 1)
    loop.body.kernel(k.count_to, 1, 1, (c, counter, np.int32(limit)), after=a)
    with g.instantiate() as exe:
        launch(exe, stream)
        assert gpu.read(counter, 1, np.int32)[0] == limit
        np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, limit))
        launch(exe, stream)  # the default and the reset apply again
    assert gpu.read(counter, 1, np.int32)[0] == limit
    np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, 2 * limit))


def test_while_not_entered_when_condition_starts_at_zero(gpu, k, stream):
    x = ints(gpu, np.zeros(N))
    counter = ints(gpu, [0])
    g = cg.Graph("while0")
    c = g.condition(default=0)
    loop = g.while_(c)
    a = add(loop.body, k, x, 1)
    loop.body.kernel(k.count_to, 1, 1, (c, counter, np.int32(5)), after=a)
    with g.instantiate() as exe:
        launch(exe, stream)
    np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.zeros(N))


def test_while_driven_by_builtin_predicate_on_device_scalar(gpu, k, stream):
    residual = gpu.upload(np.array([1.0], np.float32))
    iters = ints(gpu, [0])
    g = cg.Graph("predicate_loop")
    c = g.condition(default=1)
    init = g.memset(residual, np.float32(1.0), count=1, name="r=1")
    zero = g.memset(iters, 0, count=1, element_size=4, name="it=0")
    loop = g.while_(c, after=[init, zero])
    step = loop.body.kernel(k.scale_f32, 1, 1, (residual, np.float32(0.5)), name="halve")
    count = loop.body.kernel(k.inc_i32, 1, 1, (iters,), after=step)
    sc = loop.body.set_condition(c, residual, ">", 1e-3, np.float32, after=count, name="r>1e-3")
    assert isinstance(sc, cg.SetConditionNode) and sc.dtype == np.float32
    with g.instantiate() as exe:
        for _ in range(3):
            launch(exe, stream)
            assert gpu.read(iters, 1, np.int32)[0] == 10  # 0.5**10 < 1e-3 < 0.5**9
            assert gpu.read(residual, 1, np.float32)[0] == np.float32(0.5**10)
    from cudagraph.driver.builtin_kernels import loaded_from

    assert set(loaded_from().values()) <= {"nvrtc", "ptx"}


PREDICATE_CASES = [
    (np.float32, 1.5, 1.5),
    (np.float32, -2.0, 3.25),
    (np.float64, 1e-300, 2e-300),
    (np.int32, -7, -7),
    (np.int32, 5, -3),
    (np.int64, 1 << 40, (1 << 40) + 1),
    (np.uint32, 4000000000, 5),
    (np.uint64, (1 << 63) + 5, 1 << 63),
]
OPS = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}


def test_builtin_predicates_every_dtype_and_operator(gpu, k, stream):
    results = gpu.upload(np.zeros(len(PREDICATE_CASES) * len(OPS), np.int32))
    base = int(results.handle)
    g = cg.Graph("predicates")
    expected = []
    slot = 0
    keep = []
    for dtype, stored, value in PREDICATE_CASES:
        scalar = gpu.upload(np.array([stored], dtype))
        keep.append(scalar)
        for op, fn in OPS.items():
            c = g.condition(name=f"c{slot}")
            sc = g.set_condition(c, scalar, op, value, dtype)
            node = g.if_(c, after=sc)
            node.body.kernel(k.inc_i32, 1, 1, (base + 4 * slot,))
            expected.append(int(fn(dtype(stored), dtype(value))))
            slot += 1
    with g.instantiate() as exe:
        launch(exe, stream)
    got = gpu.read(results, slot, np.int32)
    np.testing.assert_array_equal(got, expected)


_PTX_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import cudagraph as cg
    from cudagraph.driver.builtin_kernels import loaded_from
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    buf = dev.allocate(8, stream=s)
    s.sync()
    g = cg.Graph("ptx")
    c = g.condition(default=1)
    init = g.memset(buf, np.float32(8.0), count=1)
    loop = g.while_(c, after=init)
    # One pass: the body zeroes r, then the predicate r > 0 ends the loop.
    z = loop.body.memset(buf, np.float32(0.0), count=1)
    loop.body.set_condition(c, buf, ">", 0.0, np.float32, after=z)
    with g.instantiate() as exe:
        exe.launch(s)
        s.sync()
    out = np.zeros(1, np.float32)
    from cuda.bindings import driver
    driver.cuMemcpyDtoH(out.ctypes.data, int(buf.handle), 4)
    print("RESULT", out[0], loaded_from())
    """
)


def test_builtin_predicate_kernels_from_shipped_ptx(device):
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["CUDAGRAPH_BUILTIN_KERNELS"] = "ptx"
    r = subprocess.run([sys.executable, "-c", _PTX_SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")][-1]
    assert "0.0" in line and "'ptx'" in line, line


# =============================================================================== switch


def test_switch_runs_the_selected_case(gpu, k, stream):
    x = ints(gpu, np.zeros(N))
    flag = ints(gpu, [0])
    g = cg.Graph("switch")
    c = g.condition()
    s = g.kernel(k.set_from, 1, 1, (c, flag))
    sw = g.switch(c, 3, after=s)
    assert len(sw.cases) == 3 and isinstance(sw, cg.SwitchNode)
    for i, case in enumerate(sw.cases):
        add(case, k, x, 10**i, name=f"case{i}")
    total = 0
    with g.instantiate() as exe:
        for value in (0, 1, 2, 3, 99, 2, 0):
            gpu.write(flag, np.array([value], np.int32))
            launch(exe, stream)
            total += 10**value if value < 3 else 0
            np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, total))


# =============================================================================== nesting


def test_if_nested_in_while(gpu, k, stream):
    x = ints(gpu, np.zeros(N))
    counter = ints(gpu, [0])
    g = cg.Graph("nested")
    loop_c = g.condition(default=1, name="loop")
    odd_c = g.condition(name="odd")  # declared by the outer graph, used two levels down
    z = g.memset(counter, 0, count=1, element_size=4)
    loop = g.while_(loop_c, after=z)
    step = loop.body.kernel(k.count_to, 1, 1, (loop_c, counter, np.int32(7)), name="count")
    parity = loop.body.kernel(k.set_odd, 1, 1, (odd_c, counter), after=step, name="parity")
    inner = loop.body.if_(odd_c, after=parity, name="if_odd")
    add(inner.body, k, x, 1)
    with g.instantiate() as exe:
        launch(exe, stream)
    # counter takes 1..7; odd values: 1, 3, 5, 7
    np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, 4))


def test_three_levels_switch_while_if_else_and_body_conditions(gpu, k, stream):
    x = ints(gpu, np.zeros(N))
    counter = ints(gpu, [0])
    flag = ints(gpu, [1])
    g = cg.Graph("deep")
    sel = g.condition(name="sel")
    sw = g.switch(sel, 2, after=g.kernel(k.set_from, 1, 1, (sel, flag)))
    add(sw.cases[0], k, x, 1000)
    case1 = sw.cases[1]
    loop_c = case1.condition(default=1, name="loop")  # declared by a body
    z = case1.memset(counter, 0, count=1, element_size=4)
    loop = case1.while_(loop_c, after=z)
    step = loop.body.kernel(k.count_to, 1, 1, (loop_c, counter, np.int32(4)))
    odd_c = loop.body.condition(name="odd")
    parity = loop.body.kernel(k.set_odd, 1, 1, (odd_c, counter), after=step)
    ie = loop.body.if_else(odd_c, after=parity)
    add(ie.then, k, x, 1)
    add(ie.else_, k, x, 10)
    with g.instantiate() as exe:
        launch(exe, stream)
        # counter 1..4: odd 1, 3 -> +1 each; even 2, 4 -> +10 each
        np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, 22))
        gpu.write(flag, np.array([0], np.int32))
        launch(exe, stream)
    np.testing.assert_array_equal(gpu.read(x, N, np.int32), np.full(N, 1022))


def test_child_graph_and_copies_inside_a_body(gpu, k, stream):
    x = ints(gpu, np.zeros(N))
    y = ints(gpu, np.zeros(N))
    child = cg.Graph("child")
    add(child, k, x, 2)
    g = cg.Graph("body_kinds")
    node = g.if_(g.condition(default=1))
    ch = node.body.child(child)
    cp = node.body.memcpy(y, x, after=ch)
    e = node.body.empty(after=cp)
    node.body.memset(x, 0, count=1, element_size=4, after=e)
    with g.instantiate() as exe:
        launch(exe, stream)
    expect = np.full(N, 2)
    np.testing.assert_array_equal(gpu.read(y, N, np.int32), expect)
    expect[0] = 0
    np.testing.assert_array_equal(gpu.read(x, N, np.int32), expect)


# =============================================================================== params and handles


def test_params_inside_bodies(gpu, k, stream):
    a = ints(gpu, np.zeros(N))
    b = ints(gpu, np.zeros(N))
    counter = ints(gpu, [0])
    g = cg.Graph("params")
    px = g.param("x")
    c = g.condition(default=1)
    loop = g.while_(c, after=g.memset(counter, 0, count=1, element_size=4))
    pv = loop.body.param("v", np.int32)  # declared in the body: bound on the whole graph
    s1 = loop.body.kernel(k.add_i32, 1, N, (px, pv, np.int32(N)))
    loop.body.kernel(k.count_to, 1, 1, (c, counter, np.int32(3)), after=s1)
    assert set(g.params) == {"x", "v"}
    with g.instantiate(x=a, v=2) as exe:
        launch(exe, stream)
    with g.instantiate(x=b, v=5) as exe:
        launch(exe, stream)
    np.testing.assert_array_equal(gpu.read(a, N, np.int32), np.full(N, 6))
    np.testing.assert_array_equal(gpu.read(b, N, np.int32), np.full(N, 15))


def test_parametrized_memory_in_a_child_graph_and_a_loop_body_is_rebound_in_place(gpu, k, stream):
    """``parametrize`` reaches a kernel and a fill inside a child graph and a kernel (at an offset) inside a
    while body; one executable then runs on new memory at every launch, and the memory it was built with
    is never written."""
    original = np.arange(N, dtype=np.int32)
    x, counter = ints(gpu, original), ints(gpu, [0])
    xa = int(x.handle)
    child_body = cg.Graph("child body")
    inc = child_body.kernel(k.add_i32, 1, N, (xa, np.int32(1), np.int32(N)))  # x += 1
    child_body.memset(xa + 4 * (N - 4), 7, count=4, element_size=4, after=inc)  # x[-4:] = 7
    g = cg.Graph("nested params")
    child = g.child(child_body)
    c = g.condition(default=1)
    loop = g.while_(c, after=g.memset(counter, 0, count=1, element_size=4, after=child))
    half = loop.body.kernel(k.add_i32, 1, N // 2, (xa + 4 * (N // 2), np.int32(10), np.int32(N // 2)))
    loop.body.kernel(k.count_to, 1, 1, (c, counter, np.int32(3)), after=half)  # three rounds
    report = g.parametrize(x=x)
    assert report.keys() == {
        ("child body", 0, "args[0]", 0),
        ("child body", 1, "dst", 4 * (N - 4)),
        (loop.body.name, 0, "args[0]", 4 * (N // 2)),
    }
    rng = np.random.default_rng(7)
    with g.instantiate() as exe:
        for i in range(3):
            data = rng.integers(-1000, 1000, N).astype(np.int32)
            new = ints(gpu, data)
            assert int(new.handle) != xa
            exe.launch(stream, x=new)
            stream.sync()
            expect = data + 1
            expect[-4:] = 7
            expect[N // 2 :] += 30
            np.testing.assert_array_equal(gpu.read(new, N, np.int32), expect, err_msg=f"launch {i}")
    np.testing.assert_array_equal(gpu.read(x, N, np.int32), original)  # never written


def test_driver_graph_has_conditional_nodes_and_bodies(gpu, k):
    from cuda.bindings import driver

    from cudagraph.materialize.explicit import lower

    x = ints(gpu, np.zeros(N))
    g = cg.Graph("structure")
    c = g.condition(default=1)
    sw = g.switch(c, 3)
    add(sw.cases[0], k, x, 1)
    inner = add(sw.cases[2], k, x, 2)
    add(sw.cases[2], k, x, 3, after=inner)
    lowered = lower(g, {}, [])
    try:
        dn = lowered.driver_nodes[sw.index]
        err, t = driver.cuGraphNodeGetType(dn)
        assert not err and t == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        # Body nodes are tracked with handles that stay valid (the bodies belong to the node).
        _node, body_dnode = lowered.all_nodes[id(inner)]
        err, t = driver.cuGraphNodeGetType(body_dnode)
        assert not err and t == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
        assert lowered.node_for(body_dnode) is inner
        assert sw.cases[1] in [b for b, _ in lowered.bodies]
    finally:
        lowered.destroy()


# =============================================================================== errors


def test_disallowed_body_node_is_rejected_before_the_driver(gpu, k):
    g = cg.Graph("bad_body")
    node = g.while_(g.condition(default=1), name="loop")
    node.body.host(print, "no", name="callback")
    with pytest.raises(errors.DefinitionError) as ei:
        g.instantiate()
    assert "host#0 'callback'" in str(ei.value) and "while#0 'loop'" in str(ei.value)


def test_eager_run_of_a_conditional_is_unsupported(gpu, k, stream):
    g = cg.Graph("eager")
    node = g.if_(g.condition(default=1), name="branch")
    node.body.empty()
    with pytest.raises(errors.UnsupportedError) as ei:
        g.run(stream)
    assert "if#0 'branch'" in str(ei.value)


def test_condition_kernel_argument_without_conditional_node_is_rejected(gpu, k):
    flag = ints(gpu, [1])
    g = cg.Graph("orphan")
    c = g.condition()
    g.kernel(k.set_from, 1, 1, (c, flag), name="setter")
    with pytest.raises(errors.DefinitionError) as ei:
        g.instantiate()
    assert "kernel#0 'setter'" in str(ei.value) and "no conditional node" in str(ei.value)


# =============================================================================== example


@pytest.mark.parametrize("n", [16, 48])
def test_jacobi_example_loops_on_the_gpu_and_matches_numpy(gpu, n):
    """``examples/jacobi_while.py`` runs its while loop to the tolerance and agrees with numpy."""
    example = Path(__file__).resolve().parent.parent / "examples" / "jacobi_while.py"
    env = dict(os.environ, PYTHONPATH=str(example.parent.parent / "src"))
    r = subprocess.run(
        [sys.executable, str(example), "-n", str(n), "--tol", "1e-4"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "solution matches numpy" in r.stdout
    iterations = int(r.stdout.split(" iterations on the GPU")[0].rsplit(" ", 1)[1])
    assert 1 < iterations < 100000
