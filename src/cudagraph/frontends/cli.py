"""The command line: ``python -m cudagraph {demo,info,bench,inspect}``.

Exit codes: 0 success, 2 bad usage (argparse's message), 1 a failure at run
time, reported in one sentence on standard error with no traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect as _inspect
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..definition.graph import Graph
from ..driver import calls
from . import environment as env

__all__ = ["BENCHES", "CommandError", "find_bench_dir", "load_target", "main"]


class CommandError(Exception):
    """A failure reported as one sentence and exit code 1."""


#: The benchmark scripts of ``bench/`` by name, with the options ``--quick`` stands for.
BENCHES: dict[str, list[str]] = {
    "construction": ["--quick"],
    "updates": ["--quick"],
    "materializers": ["--quick"],
    "control_flow": ["--sizes", "32,64", "--repeats", "3"],
}


# ------------------------------------------------------------------------------- info


def cmd_info(args: argparse.Namespace, drv: Any = None, bindings: str | None = None) -> int:
    """Print versions, the driver, every GPU and the features this driver and GPU support."""
    print(f"cudagraph {__version__} ({env.python_line()})")
    if drv is None:
        bindings = env.bindings_version()
    print(f"cuda-bindings: {bindings or 'not installed (pip install cuda-bindings)'}")
    try:
        import cuda.core

        print(f"cuda-core: {getattr(cuda.core, '__version__', 'unknown')}")
    except ImportError:
        print("cuda-core: not installed (pip install cuda-core)")
    print(f"compiled module: {env.native_status()}")
    for name, what, status in env.compiled_statuses():
        print(f"compiled {name} ({what}): {status}")
    if drv is None and bindings is not None:
        drv = calls.driver
    if drv is None:
        print("driver: unknown (cuda-bindings is not installed)")
        return 0
    found = env.probe(drv, bindings)
    if found.driver_version is not None:
        print(f"driver: CUDA {env.fmt_version(found.driver_version)} ({found.driver_version})")
    if found.problem is not None:
        print(found.message)
        if found.problem != env.NO_GPU or found.driver_version is None:
            return 0
        print("features of this driver (no GPU to ask about its own):")
        for feature, ok, why in env.features(drv, found.driver_version, None):
            print(f"  {feature:<38} {'yes' if ok else 'no ':<4} ({why})")
        return 0
    assert found.driver_version is not None
    for line in env.device_report(drv, found.driver_version):
        print(line)
    return 0


# ------------------------------------------------------------------------------ bench


def find_bench_dir(start: Path | None = None) -> Path:
    """The ``bench/`` folder of the source tree this package runs from (or of the current directory).

    Raises
    ------
    CommandError
        Neither has one (an installed package has no benchmarks).
    """
    here = Path(__file__).resolve().parents[3] if start is None else start  # src/cudagraph/frontends/cli.py
    for root in (here, Path.cwd()):
        if (root / "bench" / "_common.py").is_file():
            return root / "bench"
    raise CommandError(
        "the benchmarks live in the bench/ folder of a cudagraph checkout, not in the installed package; "
        "run python -m cudagraph bench from the root of a checkout"
    )


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the chosen ``bench/`` scripts one after another, printing their tables as they come."""
    folder = find_bench_dir()
    names = args.names or list(BENCHES)
    for name in names:
        if not (folder / f"{name}.py").is_file():
            raise CommandError(f"there is no benchmark {name!r} in {folder}")
    src = Path(__file__).resolve().parents[2]
    path = os.environ.get("PYTHONPATH")
    child_env = dict(os.environ, PYTHONPATH=str(src) + (os.pathsep + path if path else ""))
    failed = []
    for i, name in enumerate(names, 1):
        cmd = [sys.executable, str(folder / f"{name}.py"), *(BENCHES.get(name, []) if args.quick else [])]
        print(f"[{i}/{len(names)}] {name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, env=child_env, cwd=folder.parent)
        took = time.perf_counter() - t0
        state = "done" if rc == 0 else f"failed (exit code {rc})"
        print(f"[{i}/{len(names)}] {name}: {state} in {took:.1f} s", file=sys.stderr, flush=True)
        if rc:
            failed.append(name)
    if failed:
        raise CommandError(f"benchmark(s) {', '.join(failed)} failed; their output is above")
    return 0


# ---------------------------------------------------------------------------- inspect


def load_target(spec: str) -> Any:
    """Call ``FILE.py:function`` and return what it made, as a :class:`Graph`.

    The function takes no argument and returns a Graph (or an Executable, or
    anything :meth:`Graph.from_cuda_graph` reads); or it takes one argument,
    a stream, and records work on it, which is captured into a Graph.

    Raises
    ------
    CommandError
        The file, the function or what it returns is not usable.
    """
    file, sep, func = spec.rpartition(":")
    if not sep or not file or not func:
        raise CommandError(f"expected FILE.py:function, got {spec!r}")
    path = Path(file)
    if not path.is_file():
        raise CommandError(f"there is no file {file!r}")
    mod_spec = importlib.util.spec_from_file_location(f"_cudagraph_inspect_{path.stem}", path)
    if mod_spec is None or mod_spec.loader is None:
        raise CommandError(f"{file!r} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(mod_spec)
    sys.path.insert(0, str(path.resolve().parent))
    try:
        mod_spec.loader.exec_module(module)
    except Exception as exc:
        raise CommandError(f"importing {file!r} raised {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.pop(0)
    fn = getattr(module, func, None)
    if not callable(fn):
        raise CommandError(f"{file!r} has no function {func!r}")
    try:
        required = [
            p
            for p in _inspect.signature(fn).parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        required = []
    try:
        result = Graph.capture(fn, name=func) if len(required) == 1 else fn()
    except Exception as exc:
        raise CommandError(f"{func}() raised {type(exc).__name__}: {exc}") from exc
    if isinstance(result, Graph):
        return result
    graph = getattr(result, "graph", None)
    if isinstance(graph, Graph):  # an Executable
        return graph
    try:
        return Graph.from_cuda_graph(result, name=func)
    except Exception as exc:
        raise CommandError(
            f"{func}() returned {type(result).__name__}, which is neither a Graph, an Executable nor a driver graph "
            f"({type(exc).__name__}: {exc})"
        ) from exc


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print the summary of the graph a function makes and write its pictures."""
    g = load_target(args.target)
    print(g.summary(limit=args.limit))
    stem = args.out or args.target.rpartition(":")[2]
    dot = Path(f"{stem}.dot")
    g.draw(dot)
    written = [str(dot)]
    if args.mermaid:
        written.append(str(g.draw(f"{stem}.mmd")))
    for fmt in args.formats:
        try:
            written.append(str(g.draw(f"{stem}.{fmt}")))
        except Exception as exc:  # graphviz missing: the DOT file is there
            print(f"not written: {stem}.{fmt} ({exc})", file=sys.stderr)
    print("wrote " + ", ".join(written))
    return 0


# ------------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m cudagraph``."""
    from .demo import add_arguments

    ap = argparse.ArgumentParser(
        prog="python -m cudagraph",
        description="Build CUDA graphs explicitly from Python: a demo, this machine's CUDA, benchmarks, pictures.",
    )
    ap.add_argument("--version", action="version", version=f"cudagraph {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="build, check and time a small real graph")
    add_arguments(demo)
    sub.add_parser("info", help="the driver, CUDA versions, GPUs and the graph features they support")
    bench = sub.add_parser("bench", help="run the benchmarks of bench/ (from a checkout) and print their tables")
    bench.add_argument("names", nargs="*", metavar="NAME", help=f"which: {', '.join(BENCHES)} (default: all)")
    bench.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    insp = sub.add_parser("inspect", help="summarize a graph made by a function and write its picture")
    insp.add_argument("target", metavar="FILE.py:function", help="a function returning a Graph (or capturing one)")
    insp.add_argument("--out", help="file name stem of the pictures (default: the function's name)")
    insp.add_argument("--limit", type=int, default=200, help="node lines of the summary (default 200)")
    insp.add_argument("--mermaid", action="store_true", help="also write a Mermaid file (.mmd)")
    insp.add_argument(
        "--formats",
        type=lambda s: [f for f in s.split(",") if f],
        default=["svg", "png"],
        help="rendered formats when Graphviz is installed (default svg,png; '' for none)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run ``python -m cudagraph``; returns the exit code."""
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    if args.command is None:
        ap.print_usage(sys.stderr)
        print("python -m cudagraph: error: a command is required (demo, info, bench, inspect)", file=sys.stderr)
        return 2
    if args.command == "bench" and any(n not in BENCHES for n in args.names):
        bad = next(n for n in args.names if n not in BENCHES)
        ap.print_usage(sys.stderr)
        print(f"python -m cudagraph bench: error: unknown benchmark {bad!r} (choose from {', '.join(BENCHES)})",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        if args.command == "demo":
            from .demo import run

            return run(args)
        if args.command == "info":
            return cmd_info(args)
        if args.command == "bench":
            return cmd_bench(args)
        return cmd_inspect(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except CommandError as exc:
        print(f"python -m cudagraph {args.command}: error: {exc}.", file=sys.stderr)
        return 1
    except Exception as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"python -m cudagraph {args.command}: error: {type(exc).__name__}: {text}", file=sys.stderr)
        return 1
