"""Driver entry points called without ``cuda.bindings``, for the hot loops.

The ``cuda.bindings`` wrapper costs more per call than the driver itself (it
converts the dependency list and the parameter object on every call;
``bench/construction.py --cpu`` reports its ``cuGraphAddNode``). Explicit
construction adds thousands of kernel nodes that differ only in a few fields
of one prepared ``CUgraphNodeParams``, and rebinding sets thousands of kernel
nodes of an executable with prepared parameters. Two ways around the wrapper
live here:

- :data:`NATIVE`, the compiled module ``cudagraph.driver._native`` (built by
  ``pip install``; see ``_native.c``), which takes the driver's entry points as
  addresses (:func:`c_address`) and loops over the nodes in C:
  :func:`kernel_loop` for construction and for executable updates of many
  kernel nodes, ``rebind`` for rebinding a parameter, ``patch`` for rebinding
  several (and pointers at offsets, copies and fills), ``StreamLauncher`` for
  stream launches (``stream_launch.py``);
- :func:`c_function`, an exported symbol as a ctypes function (lifting reads
  graphs through these; see ``graph_reader.py``).

Where the module was not built, a symbol cannot be found (an older driver, no
``libcuda.so.1``), or ``CUDAGRAPH_NO_C_ENTRY=1`` is set, these return ``None``
and the callers keep using ``cuda.bindings``.

Compiled code is an accelerator, not a second design: each compiled algorithm
has one Python twin, the reference, which the callers run where the module is
unavailable and which CPU tests compare it with (:data:`PYTHON_TWINS` holds
this table; ``tests/test_native_schema.py`` imports every twin):

=============================  ====================================================================
Compiled (``_native``)         Python twin
=============================  ====================================================================
KernelLoop                     cudagraph.materialize.kernel_loop.KernelLoopTwin
KernelLoop(set_mode=True)      cudagraph.ops.kinds.kernel.KernelWriter.write
KernelLoop.simple              cudagraph.materialize.explicit.Lowering._add_node
set_kernel_node                cudagraph.ops.kinds.kernel.KernelWriter.write
rebind                         cudagraph.ops.kinds.kernel.KernelWriter.write_plan
patch                          cudagraph.executable.patch_plan.run_patches
BindMethod                     cudagraph.executable.binding.Binding.bind
BindManyMethod                 cudagraph.executable.binding.Binding._bind_many
LaunchMethod                   cudagraph.executable.executable.PythonExecutable.launch
Layout.signature               cudagraph.definition.diff.topology_signature
Layout.diff                    cudagraph.definition.diff.diff_states
Layout.sinks                   cudagraph.definition.graph.Graph.leaves
current_context                cudagraph.driver.calls.ensure_context
create_graph                   cudagraph.driver.calls.create_graph
pointer_attribute              cudagraph.driver.calls.pointer_attribute
LaunchKernel.pack              cudagraph.driver.kernel_args.KernelInfo.pack
StreamLauncher.launch          cudagraph.frontends.launch._launch_stream
StreamLauncher.issue           cudagraph.ops.kinds.kernel.KernelOps.issue
StreamLauncher.simple          cudagraph.materialize.eager.issue_node
StreamLauncher.capture         cudagraph.materialize.capture._replay
=============================  ====================================================================

(``KernelLoop``'s twin is the class of the same interface that makes the same
calls through ``cuda.bindings``; ``set_kernel_node``'s is the ``cuda.bindings`` branch of its caller;
``BindMethod`` and ``BindManyMethod`` wrap their twins, the Python methods, as ``__wrapped__``;
``StreamLauncher.issue``'s twin is called on each node it would launch; the fills, 1-D copies and empty
nodes that ``StreamLauncher.simple`` teaches it have their kinds' ``issue`` (``MemsetOps``, ``MemcpyOps``,
``EmptyOps``) as twins, reached through ``issue_node``; the stream launches are set up in
``stream_launch.py``.)

Lifting is compiled in ``cudagraph.driver._reads`` (Cython over ``cuda.bindings.cydriver``), not here:
``lift_graph`` (twin: ``cudagraph.materialize.lift._Lifter.into_steps``) and ``kernel_args`` (twin:
``cudagraph.ops.kinds.kernel.LiftedKernel.args``).

One compiled type stands for a type of the standard library instead (:data:`LIBRARY_TWINS`):
``ExecLock``, an executable's lock, is a ``threading.Lock`` that the compiled binds take and give
back by C calls (``tests/test_exec_lock_cpu.py`` runs both through the same tests).

The compiled module reads Python objects only through the ``__slots__`` named
in :data:`NATIVE_SLOTS`, declared to it once at import (``declare_slots``); a
type built over a class resolves them on the class it is handed, and refuses a
class lacking one.
"""

from __future__ import annotations

import ctypes
import importlib
import os
from types import MappingProxyType, ModuleType
from typing import Any, Final

from ..definition.free_threading import hand_written_c_refusal

__all__ = [
    "LIBRARY_TWINS",
    "NATIVE",
    "NATIVE_SLOTS",
    "PYTHON_TWINS",
    "SLOT_OWNERS",
    "c_address",
    "c_function",
    "kernel_loop",
    "use_kernel",
]

#: The ``__slots__`` the compiled module reads, by role, in the order of the fields of its C
#: structures (``_native.h``): the only place their names are written for it.
NATIVE_SLOTS: Final[MappingProxyType[str, tuple[str, ...]]] = MappingProxyType(
    {
        # KernelLoop and Layout: a kernel node's launch (cg_kernel_slots)
        "kernel_node": ("kernel", "grid", "block", "shared_mem", "args", "attrs"),
        # KernelLoop and Layout: every node's predecessors and position (cg_node_slots)
        "node": ("_preds", "index"),
        # KernelLoop.simple: a fill's and a 1-D copy's operands (cg_memset_slots, cg_memcpy_slots)
        "memset_node": ("dst", "value", "element_size", "width", "height", "pitch"),
        "memcpy_node": ("dst", "src", "nbytes"),
        "parameter": ("name",),
        "parameter_at": ("param", "offset"),
        # Layout.params: a Param's dtype (its name is "parameter"'s), which the diff compares by identity
        "parameter_dtype": ("dtype",),
        # BindMethod, BindManyMethod: the executable's state they read and write (cg_executable_slots)
        "executable": ("_exec", "_exec_addr", "_raw_bound", "_bindings", "_plans", "_lock", "update_calls", "_checks"),
        # BindMethod, BindManyMethod: a prepared rebinding plan of one name (cg_bind_plan_slots)
        "bind_plan": ("pointer_groups", "set_address", "count", "groups"),
        # LaunchMethod: the executable's state its compiled launch reads (cg_launch_slots)
        "launch": ("_exec", "_exec_addr", "_sink", "_last_stream", "_last_stream_addr"),
        # BindManyMethod: a prepared plan of several names (cg_patch_plan_slots)
        "patch_plan": ("entries", "codes", "general", "count", "native"),
        # BindManyMethod: how a parameter's new values are checked (cg_value_check_slots, cg_memory_check_slots)
        "value_check": ("scalar", "memory", "passed"),
        "memory_check": ("passed",),
    }
)

#: The class whose slots each role of :data:`NATIVE_SLOTS` names (``module:qualified name``); the layer
#: owning the class hands it to the compiled type (``kernel_loop`` here, ``executable`` for the others).
SLOT_OWNERS: Final[MappingProxyType[str, str]] = MappingProxyType(
    {
        "kernel_node": "cudagraph.definition.nodes:KernelNode",
        "node": "cudagraph.definition.nodes:Node",
        "memset_node": "cudagraph.definition.nodes:MemsetNode",
        "memcpy_node": "cudagraph.definition.nodes:MemcpyNode",
        "parameter": "cudagraph.definition.param:Param",
        "parameter_dtype": "cudagraph.definition.param:Param",
        "parameter_at": "cudagraph.definition.param_offset:ParamAt",
        "executable": "cudagraph.executable.executable:Executable",
        "launch": "cudagraph.executable.executable:Executable",
        "bind_plan": "cudagraph.executable.bind_plan:BindPlan",
        "patch_plan": "cudagraph.executable.patch_plan:PatchPlan",
        "value_check": "cudagraph.executable.bind_checks:ValueCheck",
        "memory_check": "cudagraph.executable.bind_checks:MemoryCheck",
    }
)

#: Each compiled type, function or method (the table above) and its Python twin (``module:qualified name``).
PYTHON_TWINS: Final[MappingProxyType[str, str]] = MappingProxyType(
    {
        "KernelLoop": "cudagraph.materialize.kernel_loop:KernelLoopTwin",
        "KernelLoop(set_mode=True)": "cudagraph.ops.kinds.kernel:KernelWriter.write",
        "KernelLoop.simple": "cudagraph.materialize.explicit:Lowering._add_node",
        "set_kernel_node": "cudagraph.ops.kinds.kernel:KernelWriter.write",
        "rebind": "cudagraph.ops.kinds.kernel:KernelWriter.write_plan",
        "patch": "cudagraph.executable.patch_plan:run_patches",
        "BindMethod": "cudagraph.executable.binding:Binding.bind",
        "BindManyMethod": "cudagraph.executable.binding:Binding._bind_many",
        "LaunchMethod": "cudagraph.executable.executable:PythonExecutable.launch",
        "Layout.signature": "cudagraph.definition.diff:topology_signature",
        "Layout.diff": "cudagraph.definition.diff:diff_states",
        "Layout.sinks": "cudagraph.definition.graph:Graph.leaves",
        "current_context": "cudagraph.driver.calls:ensure_context",
        "create_graph": "cudagraph.driver.calls:create_graph",
        "pointer_attribute": "cudagraph.driver.calls:pointer_attribute",
        "LaunchKernel.pack": "cudagraph.driver.kernel_args:KernelInfo.pack",
        "StreamLauncher.launch": "cudagraph.frontends.launch:_launch_stream",
        "StreamLauncher.issue": "cudagraph.ops.kinds.kernel:KernelOps.issue",
        "StreamLauncher.simple": "cudagraph.materialize.eager:issue_node",
        "StreamLauncher.capture": "cudagraph.materialize.capture:_replay",
    }
)


#: Each compiled type that stands for a type of the standard library, and that type (``module:name``).
LIBRARY_TWINS: Final[MappingProxyType[str, str]] = MappingProxyType({"ExecLock": "threading:Lock"})


def _load_native() -> ModuleType | None:
    if os.environ.get("CUDAGRAPH_NO_C_ENTRY") or hand_written_c_refusal() is not None:
        return None
    try:
        module = importlib.import_module("cudagraph.driver._native")
    except ImportError:
        return None
    declare = getattr(module, "declare_slots", None)
    if declare is None:  # built from older sources, which read slots of their own: not used
        return None
    declare(dict(NATIVE_SLOTS))
    return module


#: The compiled hot loops, or ``None`` where the extension was not built or is turned off.
NATIVE: Any = _load_native()

_FUNCTIONS: dict[str, Any] = {}


def c_function(symbol: str) -> Any:
    """The driver's exported ``symbol`` as a ctypes function returning an int, or ``None``.

    Every argument must be passed as a ctypes object (or ``None``): no
    ``argtypes`` are set, so the call converts nothing by lookup.
    """
    if symbol in _FUNCTIONS:
        return _FUNCTIONS[symbol]
    fn = None
    if not os.environ.get("CUDAGRAPH_NO_C_ENTRY"):
        try:
            lib = ctypes.CDLL("libcuda.so.1")  # the library cuda.bindings already loaded
            fn = getattr(lib, symbol)
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
    _FUNCTIONS[symbol] = fn
    return fn


def c_address(symbol: str) -> int | None:
    """The address of the driver's exported ``symbol`` for :data:`NATIVE`, or ``None``.

    ``None`` also when the compiled module is unavailable: the address is of use only to it.
    """
    if NATIVE is None:
        return None
    fn = c_function(symbol)
    return None if fn is None else ctypes.cast(fn, ctypes.c_void_p).value


def kernel_loop(target: int, params_address: int, set_mode: bool = False) -> Any:
    """A compiled ``KernelLoop``, or ``None`` without the C path.

    It adds nodes to the driver graph ``target`` with the ``CUgraphNodeParams`` at
    ``params_address`` (of kernel type, for kernel nodes) or, with ``set_mode``, sets
    kernel nodes of the executable ``target`` with the ``CUDA_KERNEL_NODE_PARAMS`` at
    ``params_address``.
    """
    fn = c_address("cuGraphExecKernelNodeSetParams_v2" if set_mode else "cuGraphAddNode_v2")
    if fn is None:
        return None
    from ..definition.nodes import KernelNode, Node

    return NATIVE.KernelLoop(fn, target, params_address, KernelNode, Node, set_mode)


def use_kernel(loop: Any, kernel: Any, info: Any) -> None:
    """Introduce ``kernel`` (whose :class:`~cudagraph.driver.kernel_args.KernelInfo` is ``info``) to ``loop``
    and point the loop's parameters at it: its function, its argument buffer and the argument kinds learned.

    The loop (compiled, or its twin) keeps every kernel it was introduced to and switches between them
    itself, node by node; ``info`` stays alive as long as the loop.
    """
    loop.use(
        kernel,
        info._kinds,
        info.offsets,
        info.sizes,
        info._scratch_addr,
        len(info._scratch),
        int(info.handle),
        info.is_library_kernel,
        info.params_address,
        info,
    )
