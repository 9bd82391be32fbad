"""Whether the hand-written compiled modules may be loaded in this interpreter.

``cudagraph.driver._native`` and ``cudagraph.definition._define`` are hand-written C over the CPython API
whose shared state is guarded by the GIL, and they are initialised without a ``Py_mod_gil`` slot. On a
free-threaded interpreter (3.13t, 3.14t) running with the GIL disabled, importing either would turn the
GIL back on for the whole process. There they are not imported: the Python reference implementations run
instead (and ``python -m cudagraph info`` says why). The Cython modules (``cudagraph.driver._reads``,
``cudagraph.definition._ranges``) declare themselves free-threading compatible and load everywhere.
"""

from __future__ import annotations

import sys
import sysconfig

__all__ = ["hand_written_c_refusal"]


def hand_written_c_refusal() -> str | None:
    """Why the hand-written compiled modules are not loaded here, or ``None`` where they may be.

    Returns
    -------
    str or None
        A sentence where the interpreter is free-threaded with the GIL disabled, else ``None``.
    """
    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    if is_enabled is not None and is_enabled():
        return None  # (PYTHON_GIL=1 or an extension already turned it on: loading changes nothing)
    return (
        "not loaded: this free-threaded Python runs without the GIL, and the hand-written compiled modules "
        "would turn it back on for the whole process (the Python paths run instead)"
    )
