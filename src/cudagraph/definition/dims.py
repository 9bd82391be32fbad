"""Kernel launch dimensions: their checks, and the shared tuples that make the common ones cheap (GPU-free)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..errors import DefinitionError, OperandError

__all__ = ["BLOCKS", "GRIDS", "MAX_BLOCK", "MAX_GRID", "dim3", "dim_tuple", "known_dims", "remember_dims"]

#: The CUDA limits of a grid (in blocks) and of a block (in threads), per axis.
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)

# One shared (n, 1, 1) tuple per 1-D size: nodes of the same shape hold the
# same object, so lowering compares dimensions by identity. BLOCKS holds every
# valid 1-D block; GRIDS the 1-D grids seen (and the block sizes), all valid
# (bench/define_tricks.py).
BLOCKS: dict[int, tuple[int, int, int]] = {n: (n, 1, 1) for n in range(1, 1025)}
GRIDS: dict[int, tuple[int, int, int]] = dict(BLOCKS)


def dim_tuple(n: int) -> tuple[int, int, int]:
    """The shared ``(n, 1, 1)`` of a valid 1-D size ``n``."""
    t = GRIDS.get(n)
    if t is None:
        t = (n, 1, 1)
        if len(GRIDS) < 8192:
            GRIDS[n] = t
    return t


# (field, a 3-tuple of ints given as grid or block) -> its checked, interned value: a 3-tuple takes
# one lookup instead of a full check (cudagraph.compat's launches give LaunchConfig's 3-tuples: bench/compat.py).
DIMS_SEEN: dict[tuple[str, tuple[int, ...]], tuple[int, int, int]] = {}


def remember_dims(field: str, value: Any, dims: tuple[int, int, int]) -> tuple[int, int, int]:
    """``dims``, remembered as the checked value of ``value`` when that is a 3-tuple of ints."""
    if type(value) is tuple and len(value) == 3 and type(value[0]) is type(value[1]) is type(value[2]) is int:
        if len(DIMS_SEEN) < 8192:
            DIMS_SEEN[(field, value)] = dims
    return dims


def dim3(value: Any, what: str, limits: tuple[int, int, int]) -> tuple[int, int, int]:
    """``value`` (an int or 1 to 3 ints) as a checked 3-tuple within ``limits``; errors name ``what``."""
    if type(value) is int:
        if 0 < value <= limits[0]:
            return (value, 1, 1)
        dims: list[int] = [value]
    elif isinstance(value, (tuple, list)):
        if not 1 <= len(value) <= 3:
            raise DefinitionError(f"{what} must have 1 to 3 dimensions, got {len(value)}")
        if any(isinstance(v, (bool, np.bool_)) for v in value):
            raise OperandError(f"{what} must be integers, got a bool in {value!r} (a bool is not a size)")
        try:
            dims = [operator.index(v) for v in value]
        except Exception:  # TypeError, or whatever a user __index__ raises
            raise OperandError(f"{what} must be integers, got {value!r}") from None
    else:
        if isinstance(value, (bool, np.bool_)):
            raise OperandError(f"{what} must be an int or a tuple of ints, got bool (a bool is not a size)")
        try:
            dims = [operator.index(value)]
        except Exception:
            raise OperandError(f"{what} must be an int or a tuple of ints, got {type(value).__name__}") from None
    while len(dims) < 3:
        dims.append(1)
    for axis, (d, lim) in enumerate(zip(dims, limits)):
        if d <= 0:
            raise DefinitionError(f"{what}[{axis}] must be positive, got {d}")
        if d > lim:
            raise DefinitionError(f"{what}[{axis}] = {d} exceeds the CUDA limit {lim}")
    return (dims[0], dims[1], dims[2])


def known_dims(field: str, value: Any) -> tuple[int, int, int] | None:
    """The checked value remembered for ``value`` (a 3-tuple of ints) as ``field``, else ``None``."""
    if type(value) is tuple and len(value) == 3 and type(value[0]) is type(value[1]) is type(value[2]) is int:
        return DIMS_SEEN.get((field, value))
    return None
