"""Build script for the optional compiled hot loops (``cudagraph.driver._native``, ``cudagraph.definition._define``).

Everything else is declared in ``pyproject.toml``. The extension links against
nothing but the Python runtime (the CUDA driver's entry points are handed to it
as addresses at run time), so any C compiler with the Python headers builds it.
It is optional: where it cannot be built, the package installs without it and
runs the same code paths through ``cuda.bindings``.
"""

from setuptools import Extension, setup

#: The module (``_native.c``) and one source per compiled algorithm (see ``_native.h``).
_SOURCES = (
    "_native",
    "_native_loop",
    "_native_pack",
    "_native_kernels",
    "_native_layout",
    "_native_rebind",
    "_native_sets",
    "_native_read",
    "_native_lift",
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

setup(
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
    ]
)
