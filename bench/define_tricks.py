"""What each shortcut of ``Graph.kernel``'s hot path buys: define time with it and without it.

``Graph.kernel`` keeps three shortcuts for the common call (a kernel type
seen before, a 1-D grid and block given as ints, one node of this graph as
``after=``). This script times a 1,000-kernel chain defined as the README
writes it, then again with each shortcut switched off (its cache replaced by
one that never remembers), the cases interleaved, and prints the fastest run
of each (the least disturbed by other load on the machine) per node, and the
ratio. No GPU is needed: definition is pure Python, and the kernel is a
stand-in object of the type name the definition layer recognises.

Run: ``PYTHONPATH=src python bench/define_tricks.py [--nodes 1000] [--repeats 30]``
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import cudagraph as cg
from cudagraph.definition import dims as dims_module
from cudagraph.definition.kinds import kernel as kernel_kind


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=30)
    a = ap.parse_args()
    n, r = a.nodes, a.repeats
    cases: list[tuple[str, Callable[[], float]]] = [
        ("all shortcuts", lambda: _chain(n)),
        ("kernel types not remembered (KERNEL_TYPES_SEEN)", lambda: _chain(n)),
        ("sizes not interned (_GRIDS/_BLOCKS)", lambda: _chain(n)),
        ("after= node classes not remembered (_NODE_CLASSES)", lambda: _chain(n)),
    ]
    patches: list[dict[str, Any]] = [
        {},
        {"KERNEL_TYPES_SEEN": _Forgetful()},
        {"_GRIDS": _ForgetfulDict(), "_BLOCKS": _ForgetfulDict()},
        {"_NODE_CLASSES": _Forgetful()},
    ]
    best = [float("inf")] * len(cases)
    for _ in range(r):
        for c, ((_, fn), patch) in enumerate(zip(cases, patches)):
            with _patched(**patch):
                best[c] = min(best[c], fn() / n * 1e6)
    print(f"Graph.kernel, {n}-node chain, fastest of {r} interleaved runs (µs per node)")
    print(f"{'case':52s} {'µs/node':>8s} {'vs all':>7s}")
    for (label, _), us in zip(cases, best):
        print(f"{label:52s} {us:8.3f} {us / best[0]:6.2f}x")


if __name__ == "__main__":
    main()
