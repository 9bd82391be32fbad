"""``Graph.kernel(..., device=)`` without a GPU: the keyword, its checks, its rendering, and the primary
context that lowering gives a node with a device (against recording fake drivers)."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

import cudagraph as cg
import test_native_cpu as native_cpu
from cudagraph.definition.kinds.kernel import LaunchAttrs
from cudagraph.errors import OperandError, UnsupportedError


class CUkernel:  # the definition layer recognises kernels by type name
    def __init__(self, name: str) -> None:
        self.name = name


class Device:
    """What ``device=`` reads of a cuda.core ``Device``: its ``device_id``."""

    def __init__(self, device_id: Any) -> None:
        self.device_id = device_id


K = CUkernel("k")


# ------------------------------------------------------------------ the definition


def test_device_is_kept_on_the_node_and_absent_by_default():
    g = cg.Graph("d")
    plain = g.kernel(K, 1, 32, name="plain")
    by_int = g.kernel(K, 1, 32, device=0, name="int", after=plain)
    by_dev = g.kernel(K, 1, 32, device=Device(3), name="dev", after=by_int)
    by_np = g.kernel(K, 1, 32, device=np.int64(2), name="np")
    assert plain.device is None and plain.attrs is None
    assert (by_int.device, by_dev.device, by_np.device) == (0, 3, 2)
    assert type(by_np.device) is int
    assert isinstance(by_dev.attrs, LaunchAttrs) and by_dev.attrs.device == 3
    assert by_dev.attrs.cluster is None and by_dev.attrs.priority is None and not by_dev.attrs.cooperative
    assert by_dev._preds == [by_int] and by_int._succs == [by_dev]
    assert g._special == 3  # instantiate checks the ordinals before adding any node
    g.validate()


def test_device_goes_with_other_launch_attributes():
    g = cg.Graph("d")
    k = g.kernel(K, 4, 32, priority=5, cluster=2, device=1, name="k")
    assert (k.attrs.priority, k.attrs.cluster, k.attrs.device) == (5, (2, 1, 1), 1)
    assert k.attrs.describe() == "cluster=(2, 1, 1) priority=5 @dev1"
    assert k.attrs.copy().device == 1


def test_a_path_takes_device():
    g = cg.Graph("p")
    p = g.path()
    first = p.kernel(K, 1, 32, device=1, name="a")
    second = p.kernel(K, 1, 32, name="b")
    assert (first.device, second.device) == (1, None)
    assert second._preds == [first] and g._nodes == [first, second]


@pytest.mark.parametrize(
    ("value", "got"),
    [
        (True, "got bool"),
        (np.bool_(False), "got bool"),
        (1.0, "got float"),
        ("cuda:1", "got str"),
        (Device("1"), "got Device"),
        (Device(True), "got bool"),
        (object(), "got object"),
    ],
)
def test_a_device_of_the_wrong_type_is_refused_and_nothing_is_added(value, got):
    g = cg.Graph("d")
    a = g.kernel(K, 1, 32, name="a")
    msg = rf"kernel#1 'bad': device must be a cuda.core Device or an int ordinal, {got}"
    with pytest.raises(OperandError, match=msg):
        g.kernel(K, 1, 32, device=value, after=a, name="bad")
    assert len(g) == 1 and a._succs == [] and g.num_edges == 0


def test_a_negative_ordinal_is_refused():
    g = cg.Graph("d")
    with pytest.raises(OperandError, match=r"kernel#0 'neg': device must be a non-negative ordinal, got -1"):
        g.kernel(K, 1, 32, device=-1, name="neg")
    assert len(g) == 0


def test_update_sets_changes_and_drops_the_device():
    g = cg.Graph("u")
    k = g.kernel(K, 1, 32, priority=2, name="k")
    special = g._special
    assert k.update(device=Device(1)) is k
    assert (k.device, k.attrs.priority) == (1, 2)
    assert g._special == special + 1
    k.update(grid=2)  # other keywords keep it
    assert (k.grid, k.device) == ((2, 1, 1), 1)
    k.update(device=None)
    assert k.device is None and k.attrs.priority == 2
    k.update(priority=None)
    assert k.attrs is None  # nothing left: a plain launch again
    msg = r"kernel#0 'k'.*device must be a cuda.core Device or an int ordinal, got bool"
    with pytest.raises(OperandError, match=msg):
        k.update(device=True, grid=4)
    assert (k.grid, k.device, k.attrs) == ((2, 1, 1), None, None)  # all or nothing


# ------------------------------------------------------------------ rendering


def _two() -> cg.Graph:
    g = cg.Graph("r")
    a = g.kernel(K, 1, 32, device=1, name="a")
    g.kernel(K, 1, 32, after=a, name="b")
    return g


def test_summary_shows_the_device():
    lines = _two().summary().splitlines()
    a_line = next(line for line in lines if " a " in line)
    b_line = next(line for line in lines if " b " in line)
    assert a_line.endswith("args=0 @dev1")
    assert "@dev" not in b_line


def test_dot_and_mermaid_show_the_device():
    dot = _two().to_dot()
    assert 'n0 [label="a\\nkernel#0@dev1\\nk()" shape=box' in dot
    assert 'n1 [label="b\\nkernel#1\\nk()" shape=box' in dot
    mermaid = _two().to_mermaid()
    assert 'n0["a (kernel#0@dev1)<br/>k()"]' in mermaid
    assert 'n1["b (kernel#1)<br/>k()"]' in mermaid


# ------------------------------------------------------------------ the driver side (faked)

drv = pytest.importorskip("cuda.bindings.driver")
from cudagraph.driver import device_checks, devices  # noqa: E402
from cudagraph.materialize import explicit  # noqa: E402
from cudagraph.ops.kinds import kernel as kernel_ops  # noqa: E402

#: A fake primary context's handle: 0xC0 + the ordinal.
CTX = 0xC0
SUCCESS = drv.CUresult.CUDA_SUCCESS
#: Where ``ctx`` lies in ``CUgraphNodeParams`` (its kernel parameters start at 16).
CTX_OFFSET = 16 + 64


class Devices:
    """A fake driver's devices: ``count`` of them; records every primary context retained."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.retained: list[int] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> Devices:
        monkeypatch.setattr(devices, "_PRIMARY", {})
        monkeypatch.setattr(devices, "_COUNT", [])
        monkeypatch.setattr(drv, "cuDeviceGetCount", lambda: (SUCCESS, self.count))
        monkeypatch.setattr(drv, "cuDeviceGet", lambda o: (SUCCESS, drv.CUdevice(o)))
        monkeypatch.setattr(drv, "cuDevicePrimaryCtxRetain", self._retain)
        return self

    def _retain(self, dev: Any) -> tuple[Any, Any]:
        self.retained.append(int(dev))
        return SUCCESS, drv.CUcontext(CTX + int(dev))


class CtxDriver(native_cpu.Driver):
    """The recording driver of test_native_cpu, also reading each kernel node's ``ctx``."""

    def __init__(self) -> None:
        super().__init__()
        self.ctx: list[int] = []

    def _add_c(self, out: Any, graph: Any, deps: Any, edata: Any, n: int, params: Any) -> int:
        self.ctx.append(int.from_bytes(ctypes.string_at(params + CTX_OFFSET, 8), "little"))
        return super()._add_c(out, graph, deps, edata, n, params)

    def add_bindings(self, graph: Any, deps: Any, edata: Any, n: int, params: Any) -> tuple[Any, Any]:
        self.ctx.append(int(params.kernel.ctx))
        return super().add_bindings(graph, deps, edata, n, params)

    def add_other(self, graph: Any, deps: Any, n: int, params: Any) -> tuple[Any, Any]:
        # Lowering.add: the launch-attribute path adds kernel nodes through it.
        assert int(params.type) == int(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL)
        self.ctx.append(int(params.kernel.ctx))
        launch = native_cpu.read_kernel_params(params.getPtr(), 16)
        h = self._record(int(graph), [int(d) for d in deps or []][:n], "kernel", launch)
        return SUCCESS, drv.CUgraphNode(h)


@pytest.fixture(params=["native", "bindings"])
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> CtxDriver:
    if request.param == "native" and native_cpu.native is None:
        pytest.skip("cudagraph.driver._native was not built")
    monkeypatch.setattr(native_cpu, "Driver", CtxDriver)
    d = native_cpu.install(request.param, monkeypatch)
    assert isinstance(d, CtxDriver)
    return d


def _args(i: int) -> tuple[Any, ...]:
    return (0x2000 + 64 * i, np.float32(i), np.int32(i))


def _chain(devices_of: list[Any]) -> cg.Graph:
    g = cg.Graph("chain")
    prev = None
    for i, dev in enumerate(devices_of):
        prev = g.kernel(native_cpu.K1, 1, 32, _args(i), device=dev, after=prev, name=f"k{i}")
    return g


def test_nodes_with_a_device_get_its_primary_context_and_the_others_none(fake, monkeypatch):
    fake_devices = Devices(2).install(monkeypatch)
    g = _chain([None, 0, None, None, Device(1), 1, None, Device(0)])
    dn = native_cpu.lower(g, fake)
    assert fake.ctx == [0, CTX + 0, 0, 0, CTX + 1, CTX + 1, 0, CTX + 0]
    assert fake_devices.retained == [0, 1]  # once per ordinal, kept
    # Each node its own arguments, in order, and its predecessor.
    for i, call in enumerate(fake.calls):
        assert call["launch"]["data"] == np.array([0x2000 + 64 * i], "<u8").tobytes() + np.float32(i).tobytes() + (
            np.int32(i).tobytes()
        )
        assert call["deps"] == ([] if i == 0 else [fake.calls[i - 1]["handle"]])
    assert list(dn.raw) == [c["handle"] for c in fake.calls]


def test_without_devices_no_context_is_asked_for(fake, monkeypatch):
    fake_devices = Devices(1).install(monkeypatch)
    native_cpu.lower(_chain([None] * 4), fake)
    assert fake.ctx == [0, 0, 0, 0]
    assert fake_devices.retained == [] and devices._COUNT == []


def test_an_ordinal_the_driver_lacks_is_refused_before_any_node_is_added(fake, monkeypatch):
    Devices(1).install(monkeypatch)
    created: list[int] = []
    monkeypatch.setattr(explicit, "ensure_context", lambda: "ctx")
    monkeypatch.setattr(drv, "cuGraphCreate", lambda flags: created.append(flags) or (SUCCESS, drv.CUgraph(0x5000)))
    g = _chain([None, 0, 1, None])
    msg = r"kernel#2 'k2' of Graph 'chain': device=1, but the driver has 1 device\(s\) \(ordinals 0..0\)"
    with pytest.raises(UnsupportedError, match=msg):
        explicit.lower(g, {}, [])
    assert created == [] and fake.calls == []


def test_an_ordinal_in_a_child_body_is_checked_too(monkeypatch):
    Devices(2).install(monkeypatch)
    body = cg.Graph("body")
    body.kernel(K, 1, 32, device=5, name="far")
    g = cg.Graph("outer")
    g.child(body)
    with pytest.raises(UnsupportedError, match=r"kernel#0 'far' of Graph 'body': device=5, but the driver has 2"):
        device_checks.check_devices(g)


def test_prepared_parameters_carry_the_context(monkeypatch):
    Devices(2).install(monkeypatch)
    monkeypatch.setattr(kernel_ops, "kernel_info", lambda k: native_cpu.INFOS[id(k)])
    g = _chain([None, 1])
    plain, on_1 = (kernel_ops.PreparedKernel(n, {}) for n in g._nodes)
    assert int(plain.params.ctx) == 0
    assert int(on_1.params.ctx) == CTX + 1


def test_the_writer_hands_a_node_with_a_device_to_the_general_path(monkeypatch):
    sets: list[Any] = []
    monkeypatch.setattr(kernel_ops, "_SET_KERNEL", lambda *a: sets.append(a) or (SUCCESS,))
    writer = kernel_ops.KernelWriter(drv.CUgraphExec(0x9000))
    node = _chain([0])._nodes[0]
    assert writer.write(node, drv.CUgraphNode(0x1000), {}) is False
    assert sets == [] and writer._p is None  # nothing packed, nothing set


def test_an_eager_launch_on_another_device_is_refused_before_the_driver():
    class State:
        def device(self) -> Any:
            return drv.CUdevice(0)

    node = _chain([1])._nodes[0]
    msg = r"kernel#0 'k0' of Graph 'chain': device=1 is not the current device \(0\)"
    with pytest.raises(UnsupportedError, match=msg):
        kernel_ops.KernelOps._launch_ex(node, None, 0, None, State())  # type: ignore[arg-type]


def test_capture_refuses_a_node_with_a_device():
    node = _chain([0])._nodes[0]
    why = kernel_ops.KernelOps().capture_refusal(node)
    assert why is not None and "device" in why and "kernel#0 'k0'" in why
