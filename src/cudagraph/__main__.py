"""Command line: ``python -m cudagraph {demo,info,bench,inspect}`` (see :mod:`cudagraph.frontends.cli`)."""

from __future__ import annotations

import sys

from .frontends.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
