"""What this machine offers: the driver, the GPU, their features, and why graphs cannot run when they cannot.

:func:`probe` tells the four ways a machine can fail to run graphs apart, by
what fails: the driver library is not found (no driver), ``cuDriverGetVersion``
reports a CUDA version below what ``cuda-bindings`` needs (driver too old),
``cuInit`` finds no device (no GPU); and :class:`KernelsUnavailable` is the
fourth, raised by the demo when neither its PTX loads nor NVRTC is there to
compile its source. Every function takes the driver module as an argument, so
each branch is tested with a fake.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from ..definition.free_threading import hand_written_c_refusal
from ..driver import calls
from ..driver.calls import MIN_DRIVER_VERSION
from ..driver.compat import BINDINGS_VERSION

__all__ = [
    "DRIVER_TOO_OLD",
    "NO_BINDINGS",
    "NO_DRIVER",
    "NO_GPU",
    "Probe",
    "KernelsUnavailable",
    "bindings_version",
    "device_report",
    "features",
    "fmt_version",
    "native_status",
    "probe",
]

NO_BINDINGS = "no cuda-bindings"
NO_DRIVER = "no driver"
DRIVER_TOO_OLD = "driver too old"
NO_GPU = "no GPU"


def fmt_version(version: int) -> str:
    """``13000`` -> ``"13.0"``."""
    return f"{version // 1000}.{version % 1000 // 10}"


def bindings_version() -> str | None:
    """The version of ``cuda-bindings``, or ``None`` when it is not installed."""
    return BINDINGS_VERSION


def _name(err: Any) -> str:
    name = getattr(err, "name", None)
    return name if isinstance(name, str) else f"CUresult({int(err)})"


class KernelsUnavailable(Exception):
    """Neither the shipped PTX loads nor NVRTC can compile the source (the message is one sentence)."""


class Probe:
    """The result of :func:`probe`: ``problem`` (``None`` when graphs can run) and a one-sentence ``message``.

    Attributes
    ----------
    problem : str or None
        :data:`NO_BINDINGS`, :data:`NO_DRIVER`, :data:`DRIVER_TOO_OLD`, :data:`NO_GPU` or ``None``.
    message : str
        What was found, in one sentence.
    driver_version : int or None
        ``cuDriverGetVersion()`` when it could be read.
    devices : int
        Number of GPUs ``cuInit`` found.
    """

    __slots__ = ("problem", "message", "driver_version", "devices")

    def __init__(self, problem: str | None, message: str, driver_version: int | None = None, devices: int = 0):
        self.problem = problem
        self.message = message
        self.driver_version = driver_version
        self.devices = devices

    def __repr__(self) -> str:
        return f"<Probe {self.problem or 'ok'}: {self.message}>"


def _load_driver() -> tuple[Any, str | None]:
    if calls.driver is None:
        return None, calls.driver_import_error()
    return calls.driver, bindings_version()


def probe(drv: Any = None, bindings: str | None = None) -> Probe:
    """Find out whether graphs can run here, and if not, which of the four reasons it is.

    Parameters
    ----------
    drv : module, optional
        The ``cuda.bindings.driver`` module (a fake in tests); imported when ``None``.
    bindings : str, optional
        The ``cuda-bindings`` version (its major version is the CUDA version the driver must reach).
    """
    if drv is None:
        drv, bindings = _load_driver()
        if drv is None:
            return Probe(NO_BINDINGS, f"cuda-bindings is not installed ({bindings}); pip install cuda-bindings.")
    try:
        err, version = drv.cuDriverGetVersion()
    except Exception:  # the driver library could not be loaded
        return Probe(NO_DRIVER, "No NVIDIA driver: the driver library (libcuda) could not be loaded.")
    if err:
        return Probe(NO_DRIVER, f"No NVIDIA driver: the driver library answered {_name(err)} to cuDriverGetVersion.")
    version = int(version)
    major = int(bindings.split(".")[0]) if bindings and bindings.split(".")[0].isdigit() else 0
    if version < major * 1000:
        return Probe(
            DRIVER_TOO_OLD,
            f"The NVIDIA driver is too old: it supports CUDA {fmt_version(version)} and cuda-bindings {bindings} "
            f"needs CUDA {major}.0 or newer (update the driver, or install cuda-bindings {version // 1000}.x).",
            version,
        )
    if version < MIN_DRIVER_VERSION:
        return Probe(
            DRIVER_TOO_OLD,
            f"The NVIDIA driver is too old: it supports CUDA {fmt_version(version)} and cudagraph needs CUDA "
            f"{fmt_version(MIN_DRIVER_VERSION)} or newer (update the driver).",
            version,
        )
    (err,) = drv.cuInit(0)
    if err:
        name = _name(err)
        if name == "CUDA_ERROR_INSUFFICIENT_DRIVER":
            return Probe(
                DRIVER_TOO_OLD,
                f"The NVIDIA driver is too old: cuInit answered {name} (the driver supports CUDA "
                f"{fmt_version(version)}).",
                version,
            )
        if name == "CUDA_ERROR_STUB_LIBRARY":
            return Probe(NO_DRIVER, "No NVIDIA driver: only the CUDA toolkit's stub libcuda was found.", version)
        return Probe(
            NO_GPU,
            f"No GPU: the NVIDIA driver (CUDA {fmt_version(version)}) is installed but cuInit answered {name}.",
            version,
        )
    err, count = drv.cuDeviceGetCount()
    if err or int(count) < 1:
        return Probe(NO_GPU, f"No GPU: the NVIDIA driver (CUDA {fmt_version(version)}) found no device.", version)
    return Probe(None, f"{int(count)} GPU(s), driver CUDA {fmt_version(version)}.", version, int(count))


def native_status() -> str:
    """Whether the compiled module (``cudagraph.driver._native``) is loaded, and why not."""
    if os.environ.get("CUDAGRAPH_NO_C_ENTRY"):
        return "off (CUDAGRAPH_NO_C_ENTRY is set)"
    refusal = hand_written_c_refusal()
    if refusal is not None:
        return refusal
    try:
        from ..driver.c_entry import NATIVE
    except Exception as exc:  # pragma: no cover - cuda-bindings missing
        return f"not loaded ({type(exc).__name__}: {exc})"
    if NATIVE is not None:
        return "loaded"
    # (an install where no C compiler or no Python headers were found leaves it out; the Python paths run)
    return (
        "not built (it needs a C compiler and the Python headers at install: install them and reinstall, or in a "
        "checkout python setup.py build_ext --inplace); the same code runs in Python"
    )


#: The optional compiled modules beside ``cudagraph.driver._native``: (module, what it speeds up, whether it is
#: hand-written C, which a GIL-disabled interpreter does not load).
_OTHER_COMPILED: tuple[tuple[str, str, bool], ...] = (
    ("cudagraph.definition._define", "the common builder calls", True),
    ("cudagraph.driver._reads", "launch attributes and graph reads of a lift", False),
    ("cudagraph.definition._ranges", "edges from data and races()", False),
    ("cudagraph.definition._reach", "edges from data and races()", False),
)


def compiled_statuses() -> list[tuple[str, str, str]]:
    """Each optional compiled module other than ``cudagraph.driver._native``: ``(module, what it speeds up,
    status)``, the status being ``loaded``, ``off (...)`` or ``not built (...)`` with the reason. Without one, the
    Python code it accelerates runs instead."""
    out = []
    for name, what, hand_written in _OTHER_COMPILED:
        refusal = hand_written_c_refusal() if hand_written else None
        if os.environ.get("CUDAGRAPH_NO_C_ENTRY"):
            status = "off (CUDAGRAPH_NO_C_ENTRY is set)"
        elif refusal is not None:
            status = refusal
        else:
            try:
                importlib.import_module(name)
                status = "loaded"
            except ImportError:
                status = "not built (it needs a C/C++ compiler at install; see setup.py's notes)"
            except Exception as exc:  # built against another cuda-bindings: the Python path runs
                status = f"not loaded ({type(exc).__name__}: {exc})"
        out.append((name, what, status))
    return out


#: (feature, minimum driver version, minimum compute capability, device attribute that must be non-zero)
_FEATURES: tuple[tuple[str, int, tuple[int, int], str | None], ...] = (
    ("conditional if/while nodes", 12030, (0, 0), None),
    ("if/else and switch nodes", 12080, (0, 0), None),
    ("any node kind in conditional bodies", 12040, (0, 0), None),
    ("device-side graph launch", 12000, (0, 0), "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING"),
    ("batch memory operation nodes", 11070, (0, 0), None),
    ("64-bit write/wait value", 11070, (0, 0), "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS"),
    ("graph memory nodes (alloc/free)", 11040, (0, 0), "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED"),
    ("programmatic dependent launch edges", 12030, (9, 0), None),
    ("thread block clusters", 12000, (9, 0), None),
)


def features(drv: Any, version: int, cc: tuple[int, int] | None, device: Any = None) -> list[tuple[str, bool, str]]:
    """Each feature with whether this driver (and GPU, when ``device`` is given) supports it, and why.

    Returns
    -------
    list of (str, bool, str)
        ``(feature, supported, reason)``.
    """
    out = []
    for name, need, need_cc, attr in _FEATURES:
        if version < need:
            out.append((name, False, f"needs a CUDA {fmt_version(need)} driver"))
            continue
        if cc is not None and cc < need_cc:
            out.append((name, False, f"needs compute capability {need_cc[0]}.{need_cc[1]}"))
            continue
        if attr is not None and device is not None:
            try:
                err, value = drv.cuDeviceGetAttribute(getattr(drv.CUdevice_attribute, attr), device)
            except Exception:  # an attribute these bindings do not know
                err, value = 1, 0
            if err or not value:
                out.append((name, False, f"{attr} is 0 on this GPU"))
                continue
        why = f"driver >= {fmt_version(need)}" + (f", sm_{need_cc[0]}{need_cc[1]}+" if need_cc > (0, 0) else "")
        out.append((name, True, why))
    return out


def device_report(drv: Any, version: int) -> list[str]:
    """Lines about every GPU: name, compute capability, supported features."""
    lines = []
    err, count = drv.cuDeviceGetCount()
    for i in range(0 if err else int(count)):
        err, dev = drv.cuDeviceGet(i)
        if err:
            lines.append(f"GPU {i}: cuDeviceGet answered {_name(err)}")
            continue
        err, raw = drv.cuDeviceGetName(256, dev)
        name = raw.split(b"\0", 1)[0].decode(errors="replace") if not err else "unknown"
        attr = drv.CUdevice_attribute
        _, major = drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        _, minor = drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        cc = (int(major), int(minor))
        lines.append(f"GPU {i}: {name} (compute capability {cc[0]}.{cc[1]})")
        for feature, ok, why in features(drv, version, cc, dev):
            lines.append(f"  {feature:<38} {'yes' if ok else 'no ':<4} ({why})")
    return lines


def python_line() -> str:
    """The Python version, for reports."""
    return f"Python {sys.version.split()[0]}"
