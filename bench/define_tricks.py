"""What each shortcut of ``Graph.kernel``'s hot path buys: define time with it and without it.

``Graph.kernel``'s Python method (:meth:`KernelBuilders.kernel
<cudagraph.definition.kinds.kernel.KernelBuilders.kernel>`) keeps three shortcuts for the common call
(a kernel type seen before, a 1-D grid and block given as ints, one node of this graph as ``after=``):
module-level tables, each one set or dict lookup. This script times a 1,000-kernel chain defined as
the README writes it, then again with each shortcut switched off (its table replaced by one that
never remembers), the cases interleaved, and prints the fastest run of each (the least disturbed by
other load on the machine) per node, and the ratio.

Every case runs the Python method, installed as ``Graph.kernel`` for the measurement: where the
compiled method (``cudagraph.definition._define``) is built, it is the one ``Graph.kernel`` calls, and
it reads the tables it was given at import, so replacing a table would not switch its shortcut off
(nor would it measure the Python method). The compiled method's time for the same chain, all
shortcuts on, is printed apart as a reference (no ratio: it has no shortcut to switch off here).
The output says which method each figure is of. No GPU is needed: definition needs no driver, and
the kernel is a stand-in object of the type name the definition layer recognises.

Run: ``PYTHONPATH=src python bench/define_tricks.py [--nodes 1000] [--repeats 30]``
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import cudagraph as cg
from cudagraph.definition import dims as dims_module
from cudagraph.definition.builders import COMPILED_KERNEL
from cudagraph.definition.kinds import kernel as kernel_kind
from cudagraph.definition.kinds.kernel import KernelBuilders


class CUkernel:  # recognised by type name, as cuda.bindings' CUkernel is
    pass


class _Forgetful(set[type]):
    """A set that never keeps what is added: every call takes the slow path."""

    def add(self, item: type) -> None:
        pass


class _ForgetfulDict(dict[int, tuple[int, int, int]]):
    """A dict that is always empty: every size is checked and built again."""

    def __setitem__(self, key: int, value: tuple[int, int, int]) -> None:
        pass


@contextmanager
def _patched(**values: Any) -> Iterator[None]:
    """Replace names of the kernel kind's module (and the same names of the dimension module, which it shares)."""
    targets = [(m, k) for k in values for m in (kernel_kind, dims_module) if hasattr(m, k.lstrip("_")) or hasattr(m, k)]
    old = {}
    for m, k in targets:
        name = k if hasattr(m, k) else k.lstrip("_")
        old[(m, name)] = getattr(m, name)
        setattr(m, name, values[k])
    try:
        yield
    finally:
        for (m, name), v in old.items():
            setattr(m, name, v)


@contextmanager
def _python_method() -> Iterator[None]:
    """``Graph.kernel`` is the Python method for the block (the compiled one, if installed, after it)."""
    installed = KernelBuilders.__dict__["kernel"]
    setattr(KernelBuilders, "kernel", getattr(installed, "func", installed))  # noqa: B010
    try:
        yield
    finally:
        setattr(KernelBuilders, "kernel", installed)  # noqa: B010


def compiled_state() -> str:
    """Which ``Graph.kernel`` a plain call runs in this process, in words."""
    if COMPILED_KERNEL is not None and KernelBuilders.__dict__["kernel"] is COMPILED_KERNEL:
        return "the compiled method (cudagraph.definition._define)"
    why = "CUDAGRAPH_NO_C_ENTRY=1" if os.environ.get("CUDAGRAPH_NO_C_ENTRY") else "not built"
    return f"the Python method (compiled method: {why})"


def _chain(n: int) -> float:
    """Seconds to define an ``n``-kernel chain, fresh argument tuples, as a user writes it."""
    k = CUkernel()
    g = cg.Graph()
    x = g.param("x")
    gc.disable()
    t0 = time.perf_counter()
    prev = None
    for _ in range(n):
        prev = g.kernel(k, grid=4, block=256, args=(x, np.float32(1.0), np.int32(n)), after=prev)
    t = time.perf_counter() - t0
    gc.enable()
    return t


#: The cases: label, and the tables replaced (names of the kernel kind's module).
CASES: list[tuple[str, dict[str, Any]]] = [
    ("all shortcuts", {}),
    ("kernel types not remembered (KERNEL_TYPES_SEEN)", {"KERNEL_TYPES_SEEN": _Forgetful()}),
    ("sizes not interned (_GRIDS/_BLOCKS)", {"_GRIDS": _ForgetfulDict(), "_BLOCKS": _ForgetfulDict()}),
    ("after= node classes not remembered (_NODE_CLASSES)", {"_NODE_CLASSES": _Forgetful()}),
]


def measure(n: int, r: int) -> tuple[list[float], float | None]:
    """(µs per node of each case of :data:`CASES`, Python method; µs per node of the compiled method with
    every shortcut, or ``None`` where ``Graph.kernel`` is not the compiled method), fastest of ``r`` runs."""
    compiled = COMPILED_KERNEL is not None and KernelBuilders.__dict__["kernel"] is COMPILED_KERNEL
    best = [float("inf")] * len(CASES)
    best_compiled = float("inf")
    for _ in range(r):
        for c, (_label, patch) in enumerate(CASES):
            with _python_method(), _patched(**patch):
                best[c] = min(best[c], _chain(n) / n * 1e6)
        if compiled:
            best_compiled = min(best_compiled, _chain(n) / n * 1e6)
    return best, (best_compiled if compiled else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=30)
    a = ap.parse_args()
    n, r = a.nodes, a.repeats
    state = compiled_state()
    best, compiled = measure(n, r)
    print(f"Graph.kernel, {n}-node chain, fastest of {r} interleaved runs (µs per node)")
    print(f"A plain g.kernel(...) in this process runs {state}.")
    print("Every case below runs the Python method (KernelBuilders.kernel), whose shortcuts these are.")
    print(f"{'case (Python method)':52s} {'µs/node':>8s} {'vs all':>7s}")
    for (label, _), us in zip(CASES, best):
        print(f"{label:52s} {us:8.3f} {us / best[0]:6.2f}x")
    if compiled is not None:
        print(f"{'reference: compiled method, all shortcuts':52s} {compiled:8.3f}")


if __name__ == "__main__":
    main()
