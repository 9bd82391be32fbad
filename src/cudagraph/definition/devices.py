"""Device ordinals as the definition layer takes them (``Graph.kernel(..., device=)``), GPU-free."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import OperandError

__all__ = ["device_ordinal"]


def device_ordinal(value: Any, what: str) -> int:
    """The ordinal of ``device=``: a cuda.core ``Device`` (its ``device_id``) or an int >= 0.

    Raises
    ------
    OperandError
        Anything else (a bool, a float, a string, a negative int); the message starts with ``what``.
    """
    d = getattr(value, "device_id", value)
    if isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)):
        if d >= 0:
            return int(d)
        raise OperandError(f"{what}: device must be a non-negative ordinal, got {d}")
    got = "bool" if isinstance(d, (bool, np.bool_)) else type(value).__name__
    raise OperandError(f"{what}: device must be a cuda.core Device or an int ordinal, got {got}")
