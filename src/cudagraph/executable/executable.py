"""Instantiated graphs: the :class:`Executable` (launch, check, upload, node views, lifetime) and :func:`instantiate`.

``Executable`` is assembled from its parts: the shared state and node setting
(:mod:`~cudagraph.executable.base`), binding (:mod:`~cudagraph.executable.binding`,
with :mod:`~cudagraph.executable.bind_plan`), updating
(:mod:`~cudagraph.executable.updating`), and the one kernel-node writer they all
use (:mod:`~cudagraph.ops.kinds.kernel`). This module holds the core.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from pathlib import Path
from typing import Any, TypeVar, cast, overload

from ..definition.bindings import resolve_bindings
from ..definition.diff import is_flat
from ..definition.drawing import check_path, mimebundle
from ..definition.edits import watch
from ..definition.graph import Graph
from ..definition.nodes import Node
from ..driver.api import (
    graph_debug_dot_print,
    graph_exec_destroy_quietly,
    graph_launch_entry,
    graph_node_get_enabled,
    graph_node_set_enabled,
    graph_upload,
)
from ..driver.c_entry import NATIVE, c_address
from ..driver.calls import ensure_context, error_name, raise_error, require_driver
from ..driver.driver_holds import release_finished
from ..driver.host_callbacks import prune_retired, unregister
from ..driver.streams import stream_handle
from ..errors import DriverError, HostCallbackError, OperandError
from ..materialize.explicit import LoweredGraph, lower
from ..ops.kinds.kernel import KernelWriter, PreparedKernel
from .base import _UNSET, _instantiate_lowered
from .bind_checks import READERS, TORCH_READS, MemoryCheck, ValueCheck, _cai, _cai_device, _torch_tensor
from .bind_plan import BindPlan
from .binding import BUFFER_TYPES, Binding
from .node_view import ExecutableNode
from .patch_plan import PatchPlan, PreparedNode
from .profile import ProfileResult, profile_executable
from .updating import UpdateResult, Updating

#: The executable's lock: the compiled ``ExecLock`` (a ``threading.Lock`` that the compiled binds take
#: and give back by C calls: bench/cpu_overhead.py, two torch tensors rebound), else ``threading.Lock``, its twin.
_new_lock: Any = NATIVE.ExecLock if NATIVE is not None else threading.Lock

__all__ = ["Executable", "PythonExecutable", "UpdateResult", "instantiate"]

_Self = TypeVar("_Self", bound="PythonExecutable")

_STICKY = {
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_ASSERT",
}


def _destroy(state: list[Any], streams: dict[int, Any], bound: tuple[dict[str, Any], dict[str, Any]]) -> None:
    exec_handle, lowered = state
    try:
        graph_exec_destroy_quietly(exec_handle)  # freed by the driver once no launch is in flight
        # the nodes' operands and the bound values live on until the launches in flight have finished
        lowered.destroy(in_flight_on=streams.values(), keep=(dict(bound[0]), dict(bound[1])))
    except Exception:
        unregister(lowered.host_keys)


def _flags(auto_free_on_launch: bool, device_launch: bool, use_node_priority: bool) -> int:
    drv = require_driver()
    F = drv.CUgraphInstantiate_flags
    flags = 0
    if auto_free_on_launch:
        flags |= int(F.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
    if device_launch:
        flags |= int(F.CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
    if use_node_priority:
        flags |= int(F.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)
    return flags


def instantiate(
    graph: Graph,
    *,
    upload_stream: Any,
    auto_free_on_launch: bool,
    device_launch: bool,
    use_node_priority: bool,
    params: dict[str, Any],
    backend: str = "explicit",
) -> Executable:
    """Validate, build (explicitly or by capture) and instantiate ``graph``; see :meth:`Graph.instantiate`."""
    if type(backend) is not str:  # (compared with == below: an array's answer has no truth value)
        raise OperandError(f"instantiate: backend must be 'explicit' or 'capture', got {type(backend).__name__}")
    if backend == "explicit":
        build = lower
    elif backend == "capture":
        from ..materialize.capture import capture_lower

        build = capture_lower
    else:
        raise OperandError(f"instantiate: backend must be 'explicit' or 'capture', got {backend!r}")
    if graph._ordered and not graph._special and is_flat(graph):
        # What Graph._validate_structure and resolve_bindings find in a graph without nested graphs whose edges
        # all go forward and that has no conditional, graph-memory or late-operand node: no cycle, nothing to
        # check, and the parameters declared on it. Their walks over every node cost more than this test.
        bindings = resolve_bindings(graph, params) if params or graph._params else {}
    else:
        graph._validate_structure()
        bindings = resolve_bindings(graph, params)
    require_driver()
    ensure_context()
    prune_retired()  # (what closed executables kept for launches that have finished since)
    release_finished()  # (handed-out driver graphs the driver has let go of since: their owners, host callbacks)
    flags = _flags(auto_free_on_launch, device_launch, use_node_priority)
    sink: list[Any] = []
    lowered = build(graph, bindings, sink)
    try:
        exec_handle = _instantiate_lowered(lowered, flags, upload_stream)
    except BaseException:
        lowered.destroy()
        raise
    return Executable(graph, lowered, exec_handle, sink, bindings, flags)


class PythonExecutable(Binding, Updating):
    """:class:`Executable`'s state and its methods in Python: the reference implementation.

    :class:`Executable` is this class with, where the compiled module is built, its per-step methods
    (``bind``, ``_bind_many``, ``launch``) compiled: each takes the calls it can and hands every other
    call to the method of this class it wraps (``.func``), whose behaviour, errors and docstring are
    the executable's.
    """

    __slots__ = ()  # the state is declared, in slots, by ExecutableBase

    def __init__(
        self,
        graph: Graph,
        lowered: LoweredGraph,
        exec_handle: Any,
        sink: list[Any],
        bindings: dict[str, Any],
        flags: int = 0,
    ) -> None:
        self.graph = graph
        self._lowered = lowered
        self._exec = exec_handle
        self._sink = sink
        self._bindings = bindings
        self._flags = flags
        self._ctx: Any = None
        self._last_stream: Any = _UNSET
        self._last_handle: Any = None
        self._last_stream_addr: int | None = None  # int(_last_handle) once launched (read by the compiled launch)
        # Not reentrant: no method that holds it calls another that takes it.
        self._lock = _new_lock()
        self._raw_bound: dict[str, Any] = {}
        self._writer = KernelWriter(exec_handle)
        self._updaters: dict[int, PreparedKernel] = {}
        # Kernel nodes with the same kernel, dimensions and argument objects share one prepared
        # structure (see _prepared): key -> (structure, the node whose objects the key names).
        self._shared: dict[tuple[Any, ...], tuple[PreparedKernel, Node]] = {}
        self._plans: dict[str | tuple[str, ...], BindPlan | PatchPlan] = {}
        self._checks: dict[str, ValueCheck] = {}
        self._prepared_nodes: dict[int, PreparedNode | None] = {}
        self._exec_addr = 0  # the exec handle as an int, for the compiled bind (see BindPlan)
        self._overrides: dict[int, Node] = {}
        self._enabled: dict[int, bool] = {}
        # What each top-level node was built with, and the topology, to diff a later update() against
        # (a definition edited in place afterwards must be seen as changed). Most executables are never
        # updated: both are recorded when update() or the cache first needs them, or before the definition
        # is edited in place (definition/edits.py). Bodies can be edited without their parent graph
        # knowing, so a definition with nested graphs is recorded now.
        self._states = None
        self._kept = None
        self._sig = None
        if not is_flat(lowered.definition):  # (the capture backend inlines bodies: lowered.bodies is empty)
            self._record()
        else:
            watch(lowered.definition, weakref.WeakMethod(self._record))
        self.update_calls = 0
        # Streams launched on (by address): host callbacks stay registered
        # until the work queued there has finished, even after close().
        self._streams: dict[int, Any] = {}
        self._state = [exec_handle, lowered]
        # (the bound values and the objects they were read from: a launch in flight reads their memory)
        self._finalizer = weakref.finalize(
            self, _destroy, self._state, self._streams, (self._bindings, self._raw_bound)
        )

    # ------------------------------------------------------------- handles
    @property
    def handle(self) -> Any:
        """The ``CUgraphExec``."""
        self._require_open()
        return self._exec

    @property
    def graph_handle(self) -> Any:
        """The driver ``CUgraph`` it was instantiated from. What its nodes refer to stays alive while the driver
        holds it or a copy made of it (``cuGraphClone``, a child graph node), even after :meth:`close`."""
        self._require_open()
        return self._lowered.hand_out()

    @property
    def bindings(self) -> dict[str, Any]:
        """The current parameter values."""
        return dict(self._bindings)

    @property
    def closed(self) -> bool:
        """``True`` after :meth:`close`."""
        return self._exec is None

    @property
    def is_closed(self) -> bool:
        """:attr:`closed`, by cuda.core's name."""
        return self.closed

    @overload
    def __getitem__(self, node: Node) -> ExecutableNode: ...
    @overload
    def __getitem__(self, node: Any) -> Any: ...
    def __getitem__(self, node: Any) -> Any:
        """A view of ``node`` in this executable (``exe[node].update(...)``, ``.disable()``).

        A key that is not a :class:`~cudagraph.Node` but whose class has an ``_executable_view(exe)``
        method (a :mod:`cudagraph.compat` node) is asked for its own view.

        Raises
        ------
        OperandError
            ``node`` is neither (a ``TypeError`` too).
        NodeNotFoundError
            A node of another definition, or one added since the executable was made.
        """
        if not isinstance(node, Node):
            view = getattr(type(node), "_executable_view", None)
            if view is not None:
                return view(node, self)
            raise OperandError(f"exe[node]: expected a node of Graph {self.graph.name!r}, got {type(node).__name__}")
        self.driver_node(node)
        return ExecutableNode(cast(Executable, self), node)  # (every instance is an Executable)

    # -------------------------------------------------------------- running
    def launch(self, stream: Any = None, **params: Any) -> None:
        """Launch on ``stream``, first rebinding any parameters given.

        Parameters
        ----------
        stream : cuda.core.Stream, object with ``__cuda_stream__``, CUstream, int or None
            Where to launch (``None``: the legacy default stream).
        **params
            New parameter values, as for :meth:`bind`.

        Raises
        ------
        HostCallbackError
            A host callback raised during an earlier launch (the graph is not
            launched; the next call launches normally).
        ExecutableClosedError
            After :meth:`close`.
        DriverError
            The launch failed; a sticky fault says that the context is unusable.
        """
        if self._sink:
            self.check()
        exec_handle = self._exec
        if exec_handle is None:
            self._require_open()
        new_stream = stream is not self._last_stream
        if new_stream:  # (read before any rebind: a stream refused leaves the bindings as they were)
            handle = stream_handle(stream)
        if params:
            if len(params) == 1:
                self.bind(**params)  # the compiled method's case
            else:  # Binding.bind's path for several names, no re-packing (bench/rebind_lifted_cpu.py)
                self._bind_many(params)
        if new_stream:
            self._last_handle = handle
            self._last_stream = stream
            addr = self._last_stream_addr = int(handle)  # (read, with _exec_addr, by the compiled launch)
            if not self._exec_addr:
                self._exec_addr = int(exec_handle)
            if self._lowered.host_keys:
                self._streams[addr] = handle
        (err,) = _LAUNCH(exec_handle, self._last_handle)
        if err:
            self._launch_failed(err)

    def _launch_failed(self, err: Any) -> None:
        """Raise the typed error of a refused ``cuGraphLaunch`` (``err``: its ``CUresult``, or the code as an int)."""
        if type(err) is int:  # from the compiled launch
            err = require_driver().CUresult(err)
        name = error_name(err)
        detail = ""
        if name in _STICKY:
            detail = (
                f"a kernel of Graph {self.graph.name!r} (or earlier work) faulted; the CUDA context is now "
                "unusable and the process must be restarted"
            )
        raise_error(err, "cuGraphLaunch", None, detail)

    def upload(self, stream: Any = None) -> None:
        """Upload the executable to the device on ``stream`` ahead of the first launch."""
        self._require_open()
        graph_upload(self._exec, stream_handle(stream))

    def check(self) -> None:
        """Raise the first exception a host callback raised since the last check.

        Synchronize the stream first to be sure earlier launches have finished.

        Raises
        ------
        HostCallbackError
            With the callback's exception as ``__cause__``.
        """
        if self._sink:
            node, exc = self._sink.pop(0)
            more = len(self._sink)
            self._sink.clear()
            suffix = f" ({more} more callback error(s) dropped)" if more else ""
            raise HostCallbackError(
                f"host callback {node.label} of Graph {self.graph.name!r} raised {type(exc).__name__}: {exc}{suffix}",
                node,
            ) from exc

    def _set_enabled(self, node: Node, enabled: bool) -> None:
        dnode = self.driver_node(node)
        with self._lock:  # an update of the executable, like a rebind
            if self._exec is None:  # closed by another thread meanwhile
                self._require_open()
            graph_node_set_enabled(self._exec, dnode, 1 if enabled else 0, node=node)
            self._enabled[id(node)] = enabled

    def _get_enabled(self, node: Node) -> bool:
        dnode = self.driver_node(node)
        return bool(graph_node_get_enabled(self._exec, dnode, node=node))

    # ----------------------------------------------------------- inspection
    def debug_dot(self, path: str | os.PathLike[str], *, verbose: bool = True) -> Path:
        """Write the driver's own picture of the built graph (``cuGraphDebugDotPrint``) to ``path``.

        Unlike :meth:`Graph.to_dot <cudagraph.Graph.to_dot>`, this is what the
        driver holds: its node handles, kernel names and, with ``verbose``,
        every node's parameters (kernel arguments, copy descriptors).

        Returns
        -------
        pathlib.Path
            The file written.
        """
        check_path(path, "debug_dot: path")
        self._require_open()
        drv = require_driver()
        flags = int(drv.CUgraphDebugDot_flags.CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE) if verbose else 0
        out = Path(path)
        graph_debug_dot_print(self._lowered.handle, os.fsencode(out), flags)
        return out

    def profile(self, stream: Any = None, *, repeats: int = 20) -> ProfileResult:
        """Time every node of the definition (eagerly, with the bound parameters) and this executable's launch.

        See :meth:`Graph.profile <cudagraph.Graph.profile>`; the launches timed
        are launches of this executable.

        Returns
        -------
        ProfileResult
        """
        return profile_executable(cast(Executable, self), stream, repeats)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """Jupyter shows the picture of the definition the executable was made from."""
        graph = self.graph
        return mimebundle(graph.to_dot(), repr(self), graph._picture_nodes())

    # ------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Destroy the executable and its driver graph; idempotent.

        A rebind or update running in another thread finishes first (they hold
        the executable's lock, which ``close`` takes). A launch does not take
        the lock: do not close an executable while another thread launches it.
        Launches already queued still run: the driver frees the executable after
        them, and the nodes' operands, the definition and the bound values (with
        the objects they were read from) are kept until they have finished.
        """
        if self._exec is not None:
            with self._lock:
                if self._exec is not None:
                    self._exec = None
                    self._finalizer()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._exec is None else "open"
        return f"<Executable of Graph {self.graph.name!r}: {len(self._lowered.nodes)} nodes, {state}>"


def _compiled_bind() -> tuple[Any, Any]:
    """The compiled ``bind`` (``_native_bind.c``) and ``_bind_many`` (``_native_bind_many.c``) of
    :class:`Executable`, or ``(None, None)`` where the compiled module is not built.

    ``bind`` rebinds one pointer parameter through a prepared plan in C and calls the Python method
    (:meth:`Binding.bind <cudagraph.executable.binding.Binding.bind>`, its twin) for everything else, so
    behaviour, errors and the docstring are the Python method's. ``_bind_many``, which ``launch`` and
    ``bind`` call for several names, does the same for pointers whose new values need no Python-level
    check (the layout of an array already checked, an address bound, a Buffer), its twin
    ``Binding._bind_many`` taking every other call.
    """
    if NATIVE is None:
        return None, None
    bind = NATIVE.BindMethod(PythonExecutable.bind, PythonExecutable, BindPlan, BUFFER_TYPES)
    functools.update_wrapper(bind, PythonExecutable.bind)
    bind.__qualname__ = "Executable.bind"  # an attribute of Executable (the Python twin is Binding.bind)
    # Several names in C (launch(s, x=, out=)): bench/rebind_lifted_cpu.py, bench/rebind_lifted.py
    many = _bind_many_method()
    functools.update_wrapper(many, Binding._bind_many)
    many.__qualname__ = "Executable._bind_many"
    return bind, many


def _bind_many_method(read_torch: bool = True, torch_dlpack: bool = True) -> Any:
    """The compiled ``_bind_many`` (``read_torch=False``: exact torch tensors read by the Python reader;
    ``torch_dlpack=False``: read in C through torch's getters, not DLPack's C exchange API; as
    ``bench/rebind_lifted_cpu.py`` times them against each other)."""
    in_c: dict[str, Any] = {"torch_reader": _torch_tensor, "torch_reads": TORCH_READS} if read_torch else {}
    # through DLPack's C exchange API, not torch's getters (bench/rebind_lifted_cpu.py)
    in_c["torch_dlpack"] = torch_dlpack
    # tensors read in C (bench/rebind_lifted_cpu.py); fresh __cuda_array_interface__ objects (bench/cpu_overhead.py)
    in_c["cai_readers"] = (_cai, _cai_device)
    return NATIVE.BindManyMethod(
        Binding._bind_many,
        PythonExecutable,
        BindPlan,
        PatchPlan,
        ValueCheck,
        MemoryCheck,
        READERS,
        BUFFER_TYPES,
        **in_c,
    )


def _compiled_launch() -> Any:
    """The compiled ``launch`` of :class:`Executable` (``_native_exec_launch.c``), or ``None`` where the
    compiled module is not built or the driver's ``cuGraphLaunch`` is not found.

    It launches on the stream of the executable's last launch with the driver's ``cuGraphLaunch``
    itself, rebinding parameters first through ``bind`` or ``_bind_many`` as the Python method (its
    twin, ``launch.func``) does, and hands every other call to that method: behaviour, errors and the
    docstring are the Python method's.
    """
    address = c_address("cuGraphLaunch")
    if NATIVE is None or not address:
        return None
    # A launch with no Python frame (bench/cpu_overhead.py: graph launch, against cuda.core and bare cuda.bindings);
    # a rebinding launch releases the GIL once, which bounds what a busy Python thread beside it costs
    # (bench/rebind_lifted.py).
    launch = NATIVE.LaunchMethod(PythonExecutable.launch, PythonExecutable, address)
    functools.update_wrapper(launch, PythonExecutable.launch)
    launch.__qualname__ = "Executable.launch"
    return launch


def _compiled_methods() -> tuple[Any, Any, Any] | None:
    """``(bind, _bind_many, launch)`` of :class:`Executable` where the compiled module is built (``launch``
    the Python method where the driver's ``cuGraphLaunch`` is not found), else ``None``."""
    bind, many = _compiled_bind()
    if bind is None:
        return None
    launch = _compiled_launch()
    return bind, many, PythonExecutable.launch if launch is None else launch


_COMPILED = _compiled_methods()


class Executable(PythonExecutable):
    """An instantiated graph, ready to launch.

    Made by :meth:`Graph.instantiate`. It keeps the definition's nodes (and so
    every operand: buffers, kernels, callables, events) alive until it is
    closed. Use it as a context manager, or call :meth:`close`; it is also
    destroyed when garbage-collected.

    Parameters bound at instantiation can be rebound with :meth:`bind` or
    ``launch(stream, name=value)``: only the nodes that use a changed
    parameter are updated, and a value equal to the bound one costs no driver
    call. ``exe[node]`` is a view of one node (:class:`ExecutableNode`);
    :meth:`update` applies a changed definition of the same topology.

    Binding and updating take a lock, so concurrent calls from several
    threads are serialized; ``launch`` without parameters takes none. A
    rebind makes its driver calls with the GIL released once, around all of
    them: other threads run meanwhile, and a busy one costs the rebind one
    hand-over of the GIL (its switch interval), not one per node. With the
    compiled module, a rebinding ``launch`` on the stream of the last launch
    makes the launch in that same release.

    Attributes
    ----------
    graph : Graph
        The definition it was made from (or last updated from).
    update_calls : int
        Number of driver calls made to update nodes so far (rebinds, node
        updates, whole-graph updates).
    """

    __slots__ = ()

    # The per-step methods compiled where the compiled module is built (see _compiled_methods), else the
    # Python methods of PythonExecutable, which the compiled ones call for every case they do not take.
    # (One tuple assignment: the API pages, read from the source, show the Python methods' signatures and
    # docstrings, which the compiled ones carry.)
    if _COMPILED is not None:
        bind, _bind_many, launch = _COMPILED


try:
    _LAUNCH = graph_launch_entry()
except DriverError:  # pragma: no cover - no cuda-bindings: instantiate() raises first
    _LAUNCH = None
