"""Two source trees' benchmarks in one run, taking turns, and the ratio of every figure (new / old).

A change that must keep speed (a rewrite of a compiled module, say) is measured against the commit before it on
the same machine, in the same process environment, with the two trees' runs interleaved so that a drift of the
machine (clocks, other load) falls on both. Each tree is a checkout of its own (for example
``git archive OLD | tar -x -C /tmp/old``); its compiled modules are built in place first (``--no-build`` skips
that), and each benchmark is run from the tree's own ``bench/`` with ``PYTHONPATH`` set to the tree's ``src/``.

The benchmarks that write JSON (``--json``: ``construction.py``, ``updates.py``, ``materializers.py``) are
compared figure by figure: every list of numbers in the JSON (a measurement's repeats) is reduced to its
fastest, over every round, and ``new / old`` of it printed, largest first, with the median per benchmark. The
others (``launch_targets.py``, ``rebind_lifted.py``) keep their printed tables, one file per tree and round,
beside the summary. Ratios above ``--limit`` (default 1.1) are flagged. A figure that is itself a ratio or a
difference (a peer ratio, "own" time left after subtracting) is compared like the rest: read those by eye.

Usage (from either checkout's root, on the GPU machine)::

    python3 scripts/bench_ab.py OLD_TREE NEW_TREE [--out DIR] [--rounds 2] [--bench NAME ...] [--cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: bench script -> (its arguments, whether it writes --json)
BENCHES: dict[str, tuple[tuple[str, ...], bool]] = {
    "construction": (("--quick",), True),
    "updates": (("--quick",), True),
    "materializers": (("--quick",), True),
    "launch_targets": ((), False),
    "rebind_lifted": ((), False),
}


def build(tree: Path) -> None:
    """Build the tree's optional compiled modules in place (a failure is reported, not fatal)."""
    done = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree, capture_output=True, text=True
    )
    if done.returncode:
        print(f"bench_ab: the build in {tree} failed:\n{done.stderr[-2000:]}", file=sys.stderr)


def run(tree: Path, bench: str, args: tuple[str, ...], out: Path, tag: str) -> float:
    """Run ``bench`` of ``tree`` once with ``args``; its output goes to ``out/<bench>.<tag>.txt`` (and ``.json``).
    Seconds taken."""
    writes_json = BENCHES[bench][1]
    cmd = [sys.executable, f"bench/{bench}.py", *args]
    if writes_json:
        cmd += ["--json", str(out / f"{bench}.{tag}.json")]
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    start = time.perf_counter()
    with open(out / f"{bench}.{tag}.txt", "w") as log:
        done = subprocess.run(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode:
        print(f"bench_ab: {bench} in {tree} exited with {done.returncode} (see {out}/{bench}.{tag}.txt)")
    return time.perf_counter() - start


def samples(data: Any, path: str = "") -> Iterator[tuple[str, list[float]]]:
    """``(path, numbers)`` for every list of numbers in ``data`` (a measurement's repeats) and every lone float."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from samples(value, f"{path}/{key}")
    elif isinstance(data, list):
        if data and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in data):
            yield path, [float(v) for v in data]
        else:
            for i, value in enumerate(data):
                yield from samples(value, f"{path}[{i}]")
    elif isinstance(data, float):
        yield path, [data]


def fastest(out: Path, bench: str, tags: list[str]) -> dict[str, float]:
    """Each figure's fastest over the rounds ``tags`` of one tree (figures of zero or below left out)."""
    best: dict[str, float] = {}
    for tag in tags:
        file = out / f"{bench}.{tag}.json"
        if not file.exists():
            continue
        for path, values in samples(json.loads(file.read_text())):
            positive = [v for v in values if v > 0]
            if positive:
                best[path] = min(best.get(path, positive[0]), *positive)
    return best


def compare(out: Path, bench: str, rounds: int, limit: float, show: int) -> list[str]:
    """The summary lines of one JSON benchmark: median ratio, then the largest ratios."""
    old = fastest(out, bench, [f"old{r}" for r in range(rounds)])
    new = fastest(out, bench, [f"new{r}" for r in range(rounds)])
    ratios = sorted(((new[k] / old[k], k) for k in old.keys() & new.keys()), reverse=True)
    if not ratios:
        return [f"{bench}: no figures in both trees' JSON"]
    over = [r for r in ratios if r[0] > limit]
    lines = [
        f"{bench}: {len(ratios)} figures, median new/old {statistics.median(r for r, _ in ratios):.3f}, "
        f"{len(over)} above {limit:g}"
    ]
    lines += [f"  {r:6.3f}{' !' if r > limit else '  '} {k}" for r, k in ratios[:show]]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path, help="the tree measured against (a checkout)")
    ap.add_argument("new", type=Path, help="the tree measured (a checkout)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-ab")), help="(default: $OUT)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each benchmark per tree, taking turns")
    ap.add_argument("--bench", nargs="+", choices=sorted(BENCHES), default=list(BENCHES))
    ap.add_argument("--limit", type=float, default=1.1, help="flag ratios above this (default 1.1)")
    ap.add_argument("--show", type=int, default=8, help="largest ratios printed per benchmark")
    ap.add_argument("--no-build", action="store_true", help="use the trees' compiled modules as they are")
    ap.add_argument("--cpu", action="store_true", help="no GPU: construction.py --cpu only (over a fake driver)")
    opts = ap.parse_args(argv)
    args = {name: spec[0] for name, spec in BENCHES.items()}
    if opts.cpu:
        args["construction"] = ("--cpu", "--quick")
        opts.bench = ["construction"]
    trees = {"old": opts.old.resolve(), "new": opts.new.resolve()}
    for name, tree in trees.items():
        if not (tree / "src" / "cudagraph").is_dir():
            ap.error(f"{name} tree {tree} has no src/cudagraph")
    opts.out.mkdir(parents=True, exist_ok=True)
    if not opts.no_build:
        for tree in trees.values():
            build(tree)
    for bench in opts.bench:
        for r in range(opts.rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")  # who goes first alternates too
            for name in order:
                took = run(trees[name], bench, args[bench], opts.out, f"{name}{r}")
                print(f"bench_ab: {bench} {name} round {r}: {took:.0f} s", flush=True)
    lines = []
    for bench in opts.bench:
        if BENCHES[bench][1]:
            lines += compare(opts.out, bench, opts.rounds, opts.limit, opts.show)
        else:
            lines.append(f"{bench}: tables in {opts.out}/{bench}.old0.txt and {bench}.new0.txt (and later rounds)")
    summary = "\n".join(lines)
    (opts.out / "summary.txt").write_text(summary + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
