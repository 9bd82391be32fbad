"""Build script for the optional compiled modules.

Everything else is declared in ``pyproject.toml``. Each extension is optional: where it cannot be built,
the package installs without it and runs the same code paths in Python.

- ``cudagraph.driver._native`` and ``cudagraph.definition._define`` (C): they link against nothing but the
  Python runtime (the CUDA driver's entry points are handed to ``_native`` as addresses at run time), so
  any C compiler with the Python headers builds them.
- ``cudagraph.driver._reads`` (Cython over ``cuda.bindings.cydriver``, compiled as C++): the compiled
  core's first module (kernel node launch attributes, a graph's lift order; see ``_reads.pyx``), against
  cuda-bindings 13 or later (its ``cuGraphNodeGetDependencies`` takes the edge data). Cython (3.1 or later) generates
  its C++ from ``_reads.pyx`` with the ``cydriver.pxd`` of the installed ``cuda-bindings``, and the C++ is
  compiled with a ``cuda.h`` of that CUDA major and at least its minor (``cydriver.pxd`` names the structs of
  its version). ``[build-system].requires`` brings all three. Without Cython, a ``_reads.cpp`` generated
  before from the same sources (its last line names their hash and the ``cydriver.pxd``'s version) is
  compiled instead: a C++ compiler and ``cuda.h`` are then all it takes. Where something is missing, the
  module is skipped with a note saying what (launch attributes are then read through ctypes).
- ``cudagraph.definition._reach`` and ``cudagraph.definition._ranges`` (Cython compiled as C++, GPU-free: no
  ``cuda.h``, no ``cuda-bindings``): the ancestor queries, the byte ranges and the race check of edges from data
  (see ``_reach.pyx`` and ``_ranges.pyx``; ``_ranges`` cimports ``_reach``). Cython (3.1 or later) generates their
  C++; without Cython, a ``_reach.cpp`` and a ``_ranges.cpp`` generated before from the same sources (their last
  lines name the sources' hash) are compiled. Otherwise both are skipped with a note, and the Python twins run.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent

#: The module (``_native.c``) and one source per compiled algorithm (see ``_native.h``).
_SOURCES = (
    "_native",
    "_native_loop",
    "_native_pack",
    "_native_kernels",
    "_native_layout",
    "_native_rebind",
    "_native_sets",
    "_native_bind",
    "_native_bind_many",
    "_native_tensor",
    "_native_exec_launch",
    "_native_launch",
    "_native_launcher",
    "_native_issue",
    "_native_capture",
    "_native_edges",
    "_native_simple",
)

#: The Cython module's sources (relative to this file) and the C++ that Cython generates from them.
_READS_PYX = "src/cudagraph/driver/_reads.pyx"
_READS_PXD = "src/cudagraph/driver/_reads.pxd"
_READS_CPP = "src/cudagraph/driver/_reads.cpp"
#: The last line of a generated ``_reads.cpp`` (see :func:`_stamp`; Cython's own header stays the first): the hash
#: of the sources it was generated from, and the CUDA version of the ``cydriver.pxd`` it cimported (``cuda.h``
#: must be as new, of that major).
_STAMP = re.compile(r"// cudagraph: _reads\.pyx and _reads\.pxd sha256 ([0-9a-f]{64}), cuda-bindings (\d+)\.(\d+)$")


def _note(text: str) -> None:
    print(f"setup.py: cudagraph.driver._reads {text}", file=sys.stderr)


def _sources_hash() -> str:
    digest = hashlib.sha256()
    for name in (_READS_PYX, _READS_PXD):
        digest.update((HERE / name).read_bytes())
    return digest.hexdigest()


def _stamp(bindings: tuple[int, int]) -> str:
    """The last line of the C++ generated from the current sources with a ``cydriver.pxd`` of ``bindings``."""
    major, minor = bindings
    return f"// cudagraph: _reads.pyx and _reads.pxd sha256 {_sources_hash()}, cuda-bindings {major}.{minor}"


def _last_line(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 400))
            return f.read().decode("utf-8", "replace").rstrip("\n").rsplit("\n", 1)[-1]
    except OSError:
        return ""


def _stamped(cpp: Path) -> tuple[int, int] | None:
    """The CUDA version of the ``cydriver.pxd`` that ``cpp`` was generated with, if from the current sources."""
    m = _STAMP.match(_last_line(cpp))
    return (int(m[2]), int(m[3])) if m is not None and m[1] == _sources_hash() else None


def _bindings_version() -> tuple[int, int] | None:
    """``(major, minor)`` of the installed ``cuda-bindings`` (whose ``cydriver.pxd`` Cython cimports), or ``None``."""
    try:
        spec = importlib.util.find_spec("cuda.bindings")
    except (ImportError, ValueError):
        return None
    if spec is None or not any((Path(p) / "cydriver.pxd").is_file() for p in spec.submodule_search_locations or []):
        return None
    try:
        major, minor = importlib.metadata.version("cuda-bindings").split(".")[:2]
        return int(major), int(minor)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def _cuda_include(need: tuple[int, int]) -> str | None:
    """A directory holding a ``cuda.h`` of CUDA ``need``'s major and at least its minor (``cydriver.pxd`` declares
    the structs of its own version): ``$CUDA_HOME/include``, ``$CUDA_PATH/include``, the include directory of an
    NVIDIA CUDA runtime wheel (``nvidia/cu13``, ``nvidia/cuda_runtime``), or ``/usr/local/cuda/include``."""
    candidates = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        candidates += [Path(root) / f"cu{need[0]}" / "include", Path(root) / "cuda_runtime" / "include"]
    candidates.append(Path("/usr/local/cuda/include"))
    found = []
    for path in candidates:
        try:
            m = re.search(r"^#define CUDA_VERSION (\d+)", (path / "cuda.h").read_text(errors="replace"), re.M)
        except OSError:
            continue
        if m is not None:
            major, minor = int(m[1]) // 1000, int(m[1]) % 1000 // 10
            if major == need[0] and minor >= need[1]:
                return str(path)
            found.append(f"{path} ({major}.{minor})")
    _note(
        f"not built: no cuda.h of CUDA {need[0]}.{need[1]} or a later {need[0]}.x (found: {', '.join(found) or 'none'};"
        " set CUDA_HOME to a directory with include/cuda.h); launch attributes are read through ctypes instead"
    )
    return None


def _reads_extensions() -> list[Extension]:
    """``cudagraph.driver._reads`` to build, or none (with a note saying why)."""
    if not (HERE / _READS_PYX).is_file() or not (HERE / _READS_PXD).is_file():
        return []  # (a tree without the Cython module)
    ext = Extension(
        "cudagraph.driver._reads",
        sources=[_READS_PYX],
        language="c++",
        extra_compile_args=["-O2"],
        optional=True,
    )
    cpp = HERE / _READS_CPP
    generated, bindings = _stamped(cpp), _bindings_version()
    if generated is not None and generated == (bindings or generated):
        # C++ generated before from these very sources against this cuda-bindings (or carried to a machine without
        # it): a compiler will do, Cython is not run again
        include = _cuda_include(generated)
        if include is None:
            return []
        ext.sources, ext.include_dirs = [_READS_CPP], [include]
        return [ext]
    try:
        import Cython
        from Cython.Build import cythonize

        if tuple(int(x) for x in re.findall(r"\d+", Cython.__version__)[:2]) < (3, 1):
            _note(f"not built: Cython {Cython.__version__} is older than 3.1 (freethreading_compatible)")
            return []
    except ImportError:
        _note("not built: no Cython (pip install 'Cython>=3.1') and no _reads.cpp generated from these sources")
        return []
    if bindings is None:
        _note("not built: no cuda-bindings with cuda/bindings/cydriver.pxd to cimport")
        return []
    if bindings[0] < 13:  # (12.x names the call with edge data cuGraphNodeGetDependencies_v2)
        _note(
            f"not built: cuda-bindings {bindings[0]}.{bindings[1]} is older than 13 (graph_order calls cydriver's "
            "cuGraphNodeGetDependencies with edge data); launch attributes and the lift's order are read through ctypes"
        )
        return []
    include = _cuda_include(bindings)
    if include is None:
        return []
    ext.include_dirs = [include]
    stamp = _stamp(bindings)
    if cpp.is_file() and _last_line(cpp) != stamp:
        cpp.unlink()  # generated from other sources or another cydriver.pxd: generated again
    try:
        exts = cythonize([ext], quiet=True)
    except Exception as e:  # a Cython too old, a cydriver.pxd it cannot read: the module is optional
        _note(f"not built: Cython failed ({type(e).__name__}: {e})")
        return []
    if _last_line(cpp) != stamp:
        with cpp.open("a", encoding="utf-8") as f:
            f.write(f"\n{stamp}\n")
    return _optional(exts)


#: The GPU-free Cython modules of edges from data (``_ranges`` cimports ``_reach``): name -> the sources whose hash
#: stamps the C++ that Cython generates (the ``.pyx`` first, then the ``.pxd`` files it reads).
_DEFINITION_CYTHON = {
    "_reach": ("_reach.pyx", "_reach.pxd"),
    "_ranges": ("_ranges.pyx", "_reach.pxd"),
}


def _ranges_extensions() -> list[Extension]:
    """``cudagraph.definition._reach`` and ``_ranges`` to build, or none (with a note saying why): both or neither
    (``_ranges`` cimports ``_reach``)."""
    folder = HERE / "src" / "cudagraph" / "definition"
    if not all((folder / name).is_file() for names in _DEFINITION_CYTHON.values() for name in names):
        return []  # (a tree without the Cython modules)

    def note(text: str) -> None:
        print(
            f"setup.py: cudagraph.definition._reach and _ranges {text}; edges from data run in Python", file=sys.stderr
        )

    def stamp(names: tuple[str, ...]) -> str:
        digest = hashlib.sha256()
        for name in names:
            digest.update((folder / name).read_bytes())
        return f"// cudagraph: {' and '.join(names)} sha256 {digest.hexdigest()}"

    exts = {
        module: Extension(
            f"cudagraph.definition.{module}",
            sources=[f"src/cudagraph/definition/{names[0]}"],
            language="c++",
            extra_compile_args=["-O2"],
            optional=True,
        )
        for module, names in _DEFINITION_CYTHON.items()
    }
    cpps = {module: folder / f"{module}.cpp" for module in exts}
    stamps = {module: stamp(names) for module, names in _DEFINITION_CYTHON.items()}
    try:
        import Cython
        from Cython.Build import cythonize

        if tuple(int(x) for x in re.findall(r"\d+", Cython.__version__)[:2]) < (3, 1):
            raise ImportError(f"Cython {Cython.__version__} is older than 3.1 (cython.pymutex)")
    except ImportError as e:
        # C++ generated before from these very sources (carried to a machine without Cython): a compiler will do
        if any(_last_line(cpps[m]) != stamps[m] for m in exts):
            note(f"not built: {e}, and no .cpp generated from these sources (pip install 'Cython>=3.1')")
            return []
        for module, ext in exts.items():
            ext.sources = [f"src/cudagraph/definition/{module}.cpp"]
        return list(exts.values())
    for module in exts:
        if cpps[module].is_file() and _last_line(cpps[module]) != stamps[module]:
            cpps[module].unlink()  # generated from other sources: generated again
    try:
        built = cythonize(list(exts.values()), quiet=True, include_path=[str(HERE / "src")])
    except Exception as e:  # the modules are optional
        note(f"not built: Cython failed ({type(e).__name__}: {e})")
        return []
    for module in exts:
        if _last_line(cpps[module]) != stamps[module]:
            with cpps[module].open("a", encoding="utf-8") as f:
                f.write(f"\n{stamps[module]}\n")
    return _optional(built)


def _optional(exts: list[Extension]) -> list[Extension]:
    """``exts`` marked optional again: ``cythonize`` makes new extensions and drops the mark, and without it a
    machine with no C++ compiler fails the whole install instead of leaving the module out."""
    for ext in exts:
        ext.optional = True
    return list(exts)


class _OptionalBuildExt(build_ext):
    """``build_ext`` where an optional extension that fails to build, for whatever reason the compiler or the
    tools give, is left out with a note (setuptools' own ``optional`` lets some failures through: a compiler
    that cannot find a header stopped the whole build on one machine)."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:
            if not getattr(ext, "optional", False):
                raise
            print(f"setup.py: {ext.name} not built: {type(e).__name__}: {e}", file=sys.stderr)


setup(
    cmdclass={"build_ext": _OptionalBuildExt},
    ext_modules=[
        Extension(
            "cudagraph.driver._native",
            sources=[f"src/cudagraph/driver/{name}.c" for name in _SOURCES],
            depends=[
                "src/cudagraph/driver/_native.h",
                "src/cudagraph/driver/_native_launch.h",
                "src/cudagraph/driver/_two_way.h",
                "src/cudagraph/driver/_offer_gil.h",
            ],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        # Graph.kernel's compiled path (definition layer: no driver, nothing but Python; see _define.h)
        Extension(
            "cudagraph.definition._define",
            sources=[
                "src/cudagraph/definition/_define.c",
                "src/cudagraph/definition/_define_kernel.c",
                "src/cudagraph/definition/_define_place.c",
                "src/cudagraph/definition/_define_launch.c",
                "src/cudagraph/definition/_define_ops.c",
                "src/cudagraph/definition/_define_validate.c",
                "src/cudagraph/definition/_define_topology.c",
            ],
            depends=["src/cudagraph/definition/_define.h", "src/cudagraph/driver/_two_way.h"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        # Kernel node launch attributes, read through cuda.bindings.cydriver (see _reads.pyx)
        *_reads_extensions(),
        # Edges from data and the race check: ancestor queries and byte ranges (GPU-free; see _reach.pyx, _ranges.pyx)
        *_ranges_extensions(),
    ],
)
