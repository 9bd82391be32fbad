"""cudagraph's own kernels (the predicates of ``Graph.set_condition``), built once per process.

They are compiled from ``_kernels/predicates.cu`` with NVRTC through
``cuda.core.Program`` for the running GPU; when NVRTC is missing or fails, the
PTX shipped beside the source (``nvcc -ptx -arch=compute_75``) is loaded and
JIT-compiled by the driver. ``CUDAGRAPH_BUILTIN_KERNELS=ptx`` (or ``nvrtc``)
forces one way.
"""

from __future__ import annotations

import os
import threading
from importlib import resources
from typing import Any

import numpy as np

from ..definition.condition import PREDICATE_DTYPES
from ..errors import UnsupportedError

__all__ = ["predicate_kernel", "load_predicate_kernels", "loaded_from"]

_LOCK = threading.Lock()
# device arch -> (how, {suffix: Kernel}, object code kept alive)
_CACHE: dict[str, tuple[str, dict[str, Any], Any]] = {}
_PREFIX = "cudagraph_set_condition_"


def _arch() -> str:
    from cuda.core import Device

    return str(Device().arch)


def load_predicate_kernels(arch: str, prefer: str | None = None) -> tuple[str, dict[str, Any], Any]:
    """Build the predicate kernels for ``arch``; returns ``(how, kernels by dtype suffix, object code)``.

    Parameters
    ----------
    arch : str
        Compute capability as ``cuda.core`` spells it (``"90"``).
    prefer : {"nvrtc", "ptx"}, optional
        Use only this way (default: NVRTC, then the shipped PTX).

    Raises
    ------
    UnsupportedError
        Neither way worked (the reasons are in the message).
    """
    from cuda.core import ObjectCode

    pkg = resources.files("cudagraph")
    failures = []
    ways = [prefer] if prefer else ["nvrtc", "ptx"]
    for how in ways:
        try:
            if how == "nvrtc":
                from cuda.core import Program, ProgramOptions

                src = pkg.joinpath("_kernels/predicates.cu").read_text()
                code = Program(src, "c++", ProgramOptions(arch=f"sm_{arch}")).compile("cubin")
            elif how == "ptx":
                code = ObjectCode.from_ptx(pkg.joinpath("_kernels/predicates.ptx").read_bytes())
            else:
                raise ValueError(f"unknown way {how!r}")
            kernels = {s: code.get_kernel(_PREFIX + s) for s in PREDICATE_DTYPES.values()}
            return how, kernels, code
        except Exception as exc:
            text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            failures.append(f"{how}: {type(exc).__name__}: {text}")
    raise UnsupportedError(
        "cudagraph could not build its set_condition kernels (" + "; ".join(failures) + ")",
        call="cuLibraryLoadData",
    )


def _kernels() -> dict[str, Any]:
    arch = _arch()
    entry = _CACHE.get(arch)
    if entry is None:
        with _LOCK:
            entry = _CACHE.get(arch)
            if entry is None:
                prefer = os.environ.get("CUDAGRAPH_BUILTIN_KERNELS") or None
                entry = load_predicate_kernels(arch, prefer)
                _CACHE[arch] = entry
    return entry[1]


def predicate_kernel(dtype: Any) -> Any:
    """The cached ``cuda.core`` Kernel that sets a condition from a scalar of ``dtype``."""
    return _kernels()[PREDICATE_DTYPES[np.dtype(dtype)]]


def loaded_from() -> dict[str, str]:
    """How the kernels were built, by device arch (``"nvrtc"`` or ``"ptx"``)."""
    return {arch: entry[0] for arch, entry in _CACHE.items()}
