"""Command line: ``python -m cudagraph demo``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``python -m cudagraph <command>``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m cudagraph demo [-n N] [--iterations K] [--dot PATH]")
        return 0 if argv else 2
    if argv[0] == "demo":
        from .frontends.demo import main as demo

        return demo(argv[1:])
    print(f"unknown command {argv[0]!r}; try: python -m cudagraph demo", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
