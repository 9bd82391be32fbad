"""Programs written once against cuda.core's documented GraphBuilder API, for cuda.core and cudagraph.compat.

Each program takes ``api`` (a namespace of ``Device``, ``GraphBuilder``, ``launch`` and ``LaunchConfig``:
cuda.core's, or cudagraph.compat's with cuda.core's LaunchConfig), ``k`` (kernels by name) and its
operands; it builds with ``api.Device().create_graph_builder()`` and returns the builder after
``end_building()``. tests/test_compat_builder_gpu.py runs each with both APIs and compares the results;
tests/test_compat_builder_cpu.py checks the definition each builds with cudagraph.compat.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compat_kernels import NAMES as NAMES  # the kernels of the programs (tests/compat_kernels.py)
from compat_kernels import SOURCE as SOURCE

N = 256
F = np.float32

HEAT_STEPS = 100  # two launches each: 200 kernel nodes
HEAT_R = F(0.25)
WHILE_LIMIT = F(100)


def cfg(api: Any, n: int = N) -> Any:
    """One thread per element, 128 per block."""
    return api.LaunchConfig(grid=(n + 127) // 128, block=128)


def chain(api: Any, k: Any, x: Any, y: Any, calls: list[str]) -> Any:
    """x = (x * 2 + 1) * 3; a host callback; y = 0.5 * x - 1."""
    n = np.int32(N)
    gb = api.Device().create_graph_builder().begin_building()
    api.launch(gb, cfg(api), k.scale_add, x, F(2), F(1), n)
    api.launch(gb, cfg(api), k.scale_add, x, F(3), F(0), n)
    gb.callback(lambda: calls.append("done"))
    api.launch(gb, cfg(api), k.axpb, y, x, F(0.5), F(-1), n)
    return gb.end_building()


def fork_join(api: Any, k: Any, x: Any, y: Any, z: Any, out: Any) -> Any:
    """x = 2x + 1; then side by side y = 3x and z = 2 (5 - x); joined: out = y - 2z."""
    n = np.int32(N)
    gb = api.Device().create_graph_builder().begin_building()
    api.launch(gb, cfg(api), k.scale_add, x, F(2), F(1), n)
    left, right = gb.split(2)
    api.launch(left, cfg(api), k.axpb, y, x, F(3), F(0), n)
    api.launch(right, cfg(api), k.axpb, z, x, F(-1), F(5), n)
    api.launch(right, cfg(api), k.scale_add, z, F(2), F(0), n)
    gb = api.GraphBuilder.join(left, right)
    api.launch(gb, cfg(api), k.combine, out, y, z, n)
    return gb.end_building()


def heat(api: Any, k: Any, u: Any, v: Any) -> Any:
    """HEAT_STEPS explicit steps of the 1-D heat equation, u -> v -> u, one launch each."""
    n = np.int32(N)
    gb = api.Device().create_graph_builder().begin_building()
    for _ in range(HEAT_STEPS):
        api.launch(gb, cfg(api), k.heat_step, v, u, HEAT_R, n)
        api.launch(gb, cfg(api), k.heat_step, u, v, HEAT_R, n)
    return gb.end_building()


def if_else(api: Any, k: Any, x: Any, flag: Any) -> Any:
    """A kernel sets the condition from ``flag``; then x += 10, else x = (x - 1) * 2; then x += 0.5."""
    n = np.int32(N)
    gb = api.Device().create_graph_builder().begin_building()
    cond = gb.create_condition()
    api.launch(gb, cfg(api, 1), k.set_if_positive, cond, flag)
    then, otherwise = gb.if_else(cond)
    then.begin_building()
    api.launch(then, cfg(api), k.scale_add, x, F(1), F(10), n)
    then.end_building()
    otherwise.begin_building()
    api.launch(otherwise, cfg(api), k.scale_add, x, F(1), F(-1), n)
    api.launch(otherwise, cfg(api), k.scale_add, x, F(2), F(0), n)
    otherwise.end_building()
    api.launch(gb, cfg(api), k.scale_add, x, F(1), F(0.5), n)
    return gb.end_building()


def while_device_condition(api: Any, k: Any, x: Any) -> Any:
    """While x[0] < WHILE_LIMIT (tested by a kernel before the loop and at the end of each pass): x *= 2."""
    n = np.int32(N)
    gb = api.Device().create_graph_builder().begin_building()
    cond = gb.create_condition(default_value=0)
    api.launch(gb, cfg(api, 1), k.set_while_below, cond, x, WHILE_LIMIT)
    body = gb.while_loop(cond)
    body.begin_building()
    api.launch(body, cfg(api), k.scale_add, x, F(2), F(0), n)
    api.launch(body, cfg(api, 1), k.set_while_below, cond, x, WHILE_LIMIT)
    body.end_building()
    return gb.end_building()


def child_graph(api: Any, k: Any, x: Any) -> Any:
    """x = x + 1; a child graph: x = x * 2 + 3; then x = -x."""
    n = np.int32(N)
    child = api.Device().create_graph_builder().begin_building()
    api.launch(child, cfg(api), k.scale_add, x, F(2), F(0), n)
    api.launch(child, cfg(api), k.scale_add, x, F(1), F(3), n)
    child.end_building()
    gb = api.Device().create_graph_builder().begin_building()
    api.launch(gb, cfg(api), k.scale_add, x, F(1), F(1), n)
    gb.embed(child)
    api.launch(gb, cfg(api), k.scale_add, x, F(-1), F(0), n)
    return gb.end_building()


def switch(api: Any, k: Any, x: Any, value: Any) -> Any:
    """A kernel sets the condition from ``value``: case 0 x += 1, case 1 x += 10, case 2 x *= 2; then x += 0.25."""
    n = np.int32(N)
    gb = api.Device().create_graph_builder().begin_building()
    cond = gb.create_condition()
    api.launch(gb, cfg(api, 1), k.set_case, cond, value)
    cases = gb.switch(cond, 3)
    for case, (a, b) in zip(cases, [(F(1), F(1)), (F(1), F(10)), (F(2), F(0))]):
        case.begin_building()
        api.launch(case, cfg(api), k.scale_add, x, a, b, n)
        case.end_building()
    api.launch(gb, cfg(api), k.scale_add, x, F(1), F(0.25), n)
    return gb.end_building()
