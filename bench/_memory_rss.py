"""Resident memory per kernel node of a user-style chain, measured in a fresh process.

``tracemalloc`` counts what Python allocates, and nothing else: a cuda.core
``GraphDefinition`` adds each node to a driver graph at once, and the driver's
memory for it is invisible there, while a cudagraph definition holds its nodes
as Python objects and makes no driver node until it is lowered. This script
counts both the same way: the growth of the process's resident set
(``/proc/self/statm``) while one user-style chain of N kernel nodes is built
(``_user_style.define_user``, or the same chain through ``GraphDefinition``),
after a small chain of the same kind has warmed up every one-time cost
(modules, kernels, the driver's first allocations). One measurement per fresh
process, so that memory freed by an earlier measurement cannot be reused by a
later one and hide its growth.

What is built (the first argument):

- ``cudagraph``: the definition alone;
- ``lowered``: the definition and its driver graph (``materialize.explicit.lower``:
  ``cuGraphCreate`` + ``cuGraphAddNode``), the state a ``GraphDefinition`` is in;
- ``cuda.core``: a cuda.core ``GraphDefinition`` chain with the same arguments.

Run (``bench/construction.py`` does): ``python bench/_memory_rss.py MODE N [--fake]``;
prints one JSON object: ``{"mode": ..., "nodes": N, "bytes_per_node": float or null}``
(null where ``/proc/self/statm`` is missing). ``--fake``: no GPU, the driver of
``_fake_driver`` (``cudagraph`` only).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import import_cudagraph

import_cudagraph()

MODES = ("cudagraph", "lowered", "cuda.core")
WARM_NODES = 200


def resident_bytes() -> int | None:
    """The resident set of this process in bytes, or ``None`` without ``/proc/self/statm``."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def growth_per_node(build: Callable[[int], Any], n: int) -> float | None:
    """Resident bytes per node that ``build(n)`` adds (its result kept alive while measured), after
    ``build(WARM_NODES)`` warmed up."""
    warm = build(WARM_NODES)
    gc.collect()
    before = resident_bytes()
    kept = build(n)
    gc.collect()
    after = resident_bytes()
    del kept, warm
    if before is None or after is None:
        return None
    return (after - before) / n


def builders(mode: str, fake: bool) -> tuple[Callable[[int], Any], Callable[[], None]]:
    """``(build(n), close())`` for ``mode``."""
    import _user_style as user
    import cudagraph

    if fake:
        if mode != "cudagraph":
            raise SystemExit(f"--fake measures only 'cudagraph', not {mode!r}")
        import _fake_driver

        ctx = _fake_driver.fake_driver()
        fake_env = ctx.__enter__()
        kernels, buf = fake_env.kernels, fake_env.buf
        ue = None
        close: Callable[[], None] = lambda: ctx.__exit__(None, None, None)  # noqa: E731
    else:
        import construction

        env = construction.setup(False)
        ue = user.setup_user(env, cudagraph, construction.NELEM, construction.GRID, construction.BLOCK)
        kernels, buf = ue.kernels, ue.buf
        close = lambda: None  # noqa: E731

    def define(n: int) -> Any:
        return user.define_user(cudagraph, kernels, buf, 32, "chain", n, 1, 32)

    if mode == "cudagraph":
        return define, close
    if mode == "lowered":
        from cudagraph.materialize.explicit import lower

        def define_and_lower(n: int) -> Any:
            g = define(n)
            return g, lower(g, {}, [])

        return define_and_lower, close
    if mode == "cuda.core":
        assert ue is not None
        return (lambda n: user.define_core(ue, n)), close
    raise SystemExit(f"mode must be one of {MODES}, not {mode!r}")


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2 or argv[0] not in MODES:
        print(f"usage: python bench/_memory_rss.py {{{','.join(MODES)}}} N [--fake]", file=sys.stderr)
        return 2
    mode, n, fake = argv[0], int(argv[1]), "--fake" in argv[2:]
    build, close = builders(mode, fake)
    try:
        per_node = growth_per_node(build, n)
    finally:
        close()
    print(json.dumps({"mode": mode, "nodes": n, "bytes_per_node": per_node}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
