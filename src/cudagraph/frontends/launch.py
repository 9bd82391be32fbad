"""One program, every target: free functions whose first argument says where the work goes.

``target`` is one of:

- a **stream** (a ``cuda.core`` ``Stream``, a torch or CuPy stream, anything with ``__cuda_stream__``,
  a ``CUstream`` or an int handle): the work is issued now, eagerly;
- a **stream under capture** (a capture region's stream, a ``cuda.core`` ``GraphBuilder`` while
  building, any stream whose capture is active): the same driver calls, which the capture records;
- a :class:`~cudagraph.Path` of a :class:`~cudagraph.Graph`, or a ``cudagraph.compat.GraphBuilder``
  while building: the work becomes a node after the path's (the builder's) last op, and the node is
  returned.

So a step function written once (``cg.launch``, ``cg.memcpy``, ``cg.fork``, ``cg.join``, ...) runs
eagerly, is recorded by stream capture, and builds an explicit graph, with the same results.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, NoReturn

from ..definition.dims import MAX_BLOCK, MAX_GRID
from ..definition.graph import Graph
from ..definition.node import Node
from ..definition.path import Path
from ..driver import stream_launch
from ..driver.api import (
    event_create,
    event_destroy_quietly,
    event_record,
    stream_create,
    stream_destroy_quietly,
    stream_is_capturing,
    stream_is_capturing_result,
    stream_wait_event,
)
from ..driver.calls import ensure_context, raise_error, require_driver
from ..driver.foreign_kernels import FOREIGN_KERNEL_TYPES, resolve
from ..driver.host_callbacks import retire
from ..driver.kernel_args import PACKING_LOCK
from ..driver.stream_launch import PreparedLaunch, launch_packed, prepared, prepared_already
from ..driver.streams import READ_INT, READ_INT_OF, READ_PROTOCOL, protocol_handle, stream_handle, stream_reading
from ..errors import DefinitionError, ForeignNodeError, HostCallbackError, OperandError
from ..materialize.eager import StreamIssue, issue_node
from ..ops.lower_state import LowerState

__all__ = ["ForkedStream", "fork", "host", "join", "launch", "memcpy", "memset", "record", "wait"]

_SMEM_PLAIN = 48 * 1024

#: The compiled launcher: a stream launch of a target type, configuration and kernel it has learned
#: from the Python path below takes no Python frame but launch()'s own (``None``: the Python path).
_FAST: Any = stream_launch.LAUNCHER


# ------------------------------------------------------------------------------------------------ targets


class ForkedStream:
    """A stream made by :func:`fork` from a stream: ordered after the work queued on its origin so far.

    It has ``__cuda_stream__`` (every library takes it) and ``handle``; the driver stream is
    destroyed when the object is collected (work already queued still completes).

    Attributes
    ----------
    handle : CUstream
        The driver stream.
    """

    __slots__ = ("handle", "__weakref__")

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        """The stream protocol: ``(0, address)``."""
        return (0, int(self.handle))

    def __int__(self) -> int:
        return int(self.handle)

    def __del__(self) -> None:
        try:
            _release(self.handle)
        except Exception:  # interpreter shutdown or no driver: nothing to release
            pass

    def __repr__(self) -> str:
        return f"<ForkedStream {int(self.handle):#x}>"


# Forked streams collected while a capture still held them: destroyed once it has ended.
_PENDING: list[Any] = []


def _release(handle: Any) -> None:
    """Destroy a forked stream, or keep it until the capture it joined has ended."""
    drv = require_driver()
    (err, status) = stream_is_capturing_result(handle)
    if not err and int(status) != int(drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE):
        _PENDING.append(handle)
        return
    stream_destroy_quietly(handle)


def _sweep() -> None:
    if _PENDING:
        pending = list(_PENDING)
        del _PENDING[:]
        for h in pending:
            _release(h)


def _refusal(call: str, target: Any) -> OperandError:
    return OperandError(
        f"cudagraph.{call}: target: expected a stream (cuda.core Stream, torch/CuPy stream, an object with "
        f"__cuda_stream__, a CUstream or an int handle), a stream under capture, or a cudagraph Path; "
        f"got {type(target).__name__}"
    )


def _by_protocol(t: Any) -> int | None:
    proto = t.__cuda_stream__  # (an object of the type may hold the answer itself, as stream_handle takes)
    return protocol_handle(proto() if callable(proto) else proto)


def _by_int(t: int) -> int | None:
    return t if 0 <= t < 1 << 64 else None


#: How a stream handle is read from a target of a learned type (driver.streams.stream_reading);
#: ``None`` for a target of that type that is not a stream handle.
_READERS: dict[int, Callable[[Any], int | None]] = {READ_INT: _by_int, READ_PROTOCOL: _by_protocol, READ_INT_OF: int}

# type -> the function reading an int stream handle from a target of that type (learned on first use,
# and taught to the compiled launcher)
_HANDLE_OF: dict[type, Callable[[Any], int | None]] = {}


def _stream(target: Any, call: str) -> int:
    """The int handle of a stream target, or the typed refusal."""
    get = _HANDLE_OF.get(type(target))
    if get is not None:
        h = get(target)
        if h is None:
            raise _refusal(call, target)
        return h
    if target is None or isinstance(target, (bool, Node, Graph)) or type(target).__name__ == "Path":
        raise _refusal(call, target)
    try:
        h = int(stream_handle(target))
    except OperandError:
        raise _refusal(call, target) from None
    mode = stream_reading(target)
    if mode:
        _HANDLE_OF[type(target)] = _READERS[mode]
        if _FAST is not None:
            _FAST.learn_target(type(target), mode)
    return h


# Types whose objects stand where a Path stands (cudagraph.compat's GraphBuilder): type -> the function
# giving the Path the work goes to, or raising the typed refusal (``call`` names the function).
_PATH_TARGETS: dict[type, Callable[[Any, str], Path]] = {}


def register_path_target(cls: type, to_path: Callable[[Any, str], Path]) -> None:
    """Make objects of ``cls`` targets that add nodes: ``to_path(target, call)`` gives their :class:`Path`."""
    _PATH_TARGETS[cls] = to_path


def _path_of(target: Any, call: str) -> Path | None:
    """The Path ``target`` adds to (a Path, or a registered Path-like target), or ``None``."""
    if type(target) is Path:
        return target
    to_path = _PATH_TARGETS.get(type(target))
    return None if to_path is None else to_path(target, call)


def _capturing(h: int) -> bool:
    drv = require_driver()
    status = stream_is_capturing(h)
    return bool(int(status) != int(drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE))


# ------------------------------------------------------------------------------------------------ configs


def _dims(value: Any, what: str, limits: tuple[int, int, int]) -> tuple[int, int, int]:
    if isinstance(value, (tuple, list)):
        if not 1 <= len(value) <= 3:
            raise DefinitionError(f"{what} must have 1 to 3 dimensions, got {len(value)}")
        items = list(value)
    else:
        items = [value]
    try:
        dims = [operator.index(v) for v in items]
    except TypeError:
        raise OperandError(f"{what} must be an int or a tuple of ints, got {value!r}") from None
    dims += [1] * (3 - len(dims))
    for axis, (d, lim) in enumerate(zip(dims, limits)):
        if not 0 < d <= lim:
            raise DefinitionError(f"{what}[{axis}] = {d} is outside 1..{lim}")
    return (dims[0], dims[1], dims[2])


class _Config:
    """A launch configuration read once: dimensions in blocks, launch attributes."""

    __slots__ = (
        "source",
        "grid_obj",
        "block_obj",
        "grid",
        "block",
        "smem",
        "cluster",
        "cooperative",
        "pdl",
        "plain",
    )

    def __init__(self, source: Any, call: str) -> None:
        self.source = source
        self.grid_obj: Any = None
        self.block_obj: Any = None
        self.cluster: tuple[int, int, int] | None = None
        self.cooperative = False
        self.pdl = False
        if type(source) is tuple or type(source) is list:
            if len(source) != 2:
                raise OperandError(
                    f"cudagraph.{call}: config: expected a cuda.core LaunchConfig or (grid, block), "
                    f"got a sequence of {len(source)}"
                )
            grid, block, smem = source[0], source[1], 0
        elif type(source).__name__ == "LaunchConfig":
            grid, block = source.grid, source.block
            self.grid_obj, self.block_obj = grid, block
            smem = source.shmem_size or 0
            cluster = getattr(source, "cluster", None)
            if cluster is not None:
                self.cluster = _dims(cluster, f"cudagraph.{call}: config.cluster", MAX_BLOCK)
            self.cooperative = bool(getattr(source, "is_cooperative", False))
            self.pdl = bool(getattr(source, "programmatic_stream_serialization", False))
        else:
            raise OperandError(
                f"cudagraph.{call}: config: expected a cuda.core LaunchConfig or (grid, block), "
                f"got {type(source).__name__}"
            )
        if grid is None or block is None:
            raise OperandError(f"cudagraph.{call}: config: grid and block must both be given")
        g = _dims(grid, f"cudagraph.{call}: config.grid", MAX_GRID)
        if self.cluster is not None:  # as in cuda.core: with a cluster, the grid counts clusters
            g = (g[0] * self.cluster[0], g[1] * self.cluster[1], g[2] * self.cluster[2])
            for axis, (d, lim) in enumerate(zip(g, MAX_GRID)):
                if d > lim:
                    raise DefinitionError(
                        f"cudagraph.{call}: config.grid: {grid} clusters of {self.cluster} blocks make "
                        f"{d} blocks on axis {axis}, over the CUDA limit {lim}"
                    )
        self.grid = g
        self.block = _dims(block, f"cudagraph.{call}: config.block", MAX_BLOCK)
        try:
            self.smem = operator.index(smem)
        except TypeError:
            raise OperandError(f"cudagraph.{call}: config.shmem_size must be an int, got {smem!r}") from None
        if self.smem < 0:
            raise DefinitionError(f"cudagraph.{call}: config.shmem_size must be >= 0, got {self.smem}")

        # No launch attribute and no large shared memory: one cuLaunchKernel.
        self.plain = self.cluster is None and not self.cooperative and self.smem <= _SMEM_PLAIN


# id(config) -> _Config of a plain LaunchConfig (the entry holds the config: its id stays its own)
_CONFIGS: dict[int, _Config] = {}


def remembered_config(config: Any) -> _Config | None:
    """The checked configuration ``_config`` remembered for the ``LaunchConfig`` ``config`` (a plain one with
    fixed dimensions), as it was checked last; ``None`` when none is remembered."""
    c = _CONFIGS.get(id(config))
    return c if c is not None and c.source is config else None


def _fixed(dims: Any) -> bool:
    """Whether launch dimensions are an int or a tuple of ints (values that cannot change in place)."""
    return type(dims) is int or (type(dims) is tuple and all(type(d) is int for d in dims))


def _config(config: Any, call: str) -> _Config:
    if type(config) is tuple:
        return _Config(config, call)
    c = _CONFIGS.get(id(config))
    # A LaunchConfig is mutable: an entry is used while it holds the same objects and values.
    if (
        c is not None
        and c.source is config
        and config.grid is c.grid_obj
        and config.block is c.block_obj
        and config.shmem_size == c.smem
        and config.cluster is None
        and not config.is_cooperative
        and bool(getattr(config, "programmatic_stream_serialization", False)) is c.pdl
    ):
        return c
    c = _Config(config, call)
    # Remembered only while its dimensions cannot change in place (a list, an object read by __index__):
    # the entry is then used while the config holds the same objects.
    if c.plain and _fixed(c.grid_obj) and _fixed(c.block_obj) and config.shmem_size == c.smem:
        if len(_CONFIGS) > 1024:
            _CONFIGS.clear()
        _CONFIGS[id(config)] = c
        if _FAST is not None:
            _FAST.remember_config(config, c.grid_obj, c.block_obj, c.smem, c.grid + c.block)
    return c


# ------------------------------------------------------------------------------------------------ kernels


def _kernel(kernel: Any, args: tuple[Any, ...], call: str) -> tuple[Any, tuple[Any, ...]]:
    """``(kernel the machinery takes, arguments)``: foreign kernels converted."""
    if type(kernel).__name__ in FOREIGN_KERNEL_TYPES and type(kernel) is not bool:
        fk = resolve(kernel, args, f"cudagraph.{call}: kernel")
        return fk.kernel, (args if fk.convert is None else fk.convert(args, f"cudagraph.{call}"))
    tname = type(kernel).__name__
    if tname not in ("Kernel", "CUkernel", "CUfunction"):
        raise OperandError(
            f"cudagraph.{call}: kernel: expected a cuda.core Kernel, a CUkernel/CUfunction, a Numba @cuda.jit "
            f"kernel, a CuPy RawKernel/RawModule function or an int CUkernel handle, got {tname}"
        )
    return kernel, args


def _prepared(kernel: Any, call: str) -> PreparedLaunch | None:
    """The prepared launch of ``kernel`` (checked on its first use); ``None`` for a Numba dispatcher,
    which is specialised from each call's arguments."""
    if type(kernel).__name__ == "CUDADispatcher":
        return None
    p = prepared_already(kernel)  # (an int handle by value: each call may pass a new int object)
    if p is not None:
        return p
    _kernel(kernel, (), call)  # the typed refusal of a kernel of the wrong kind
    return prepared(kernel)


def _scratch_issue(call: str, build: Callable[[Graph], Node], h: int) -> None:
    """Issue one node, built by ``build`` on a scratch graph, on stream ``h`` with its kind's ``issue``."""
    g = Graph(f"cudagraph.{call}")
    node = build(g)
    g._validate_structure()
    ctx = ensure_context()
    with PACKING_LOCK:
        state = LowerState(ctx, eager=True)
        run = StreamIssue({}, _HOST_ERRORS, _HOST_KEYS, state)
        issue_node(node, require_driver().CUstream(h), run)
    _retire_host_keys(h)


def launch(target: Any, config: Any, kernel: Any, *args: Any) -> Node | None:
    """Launch ``kernel(*args)`` on ``target`` with ``config``.

    Parameters
    ----------
    target : stream, stream under capture, Path, or cudagraph.compat GraphBuilder
        Where the launch goes (see :mod:`cudagraph.frontends.launch`).
    config : cuda.core LaunchConfig or (grid, block)
        Grid, block, ``shmem_size``, ``cluster`` (then the grid counts clusters, as in cuda.core),
        ``is_cooperative``; ``programmatic_stream_serialization`` makes the edge from a path's
        previous kernel programmatic (on a stream the launch is ordered normally).
    kernel : cuda.core Kernel, CUkernel, CUfunction, Numba @cuda.jit kernel, CuPy RawKernel / Function, or int
        The kernel (an int is a ``CUkernel`` handle).
    *args
        The kernel arguments (those of :meth:`Graph.kernel <cudagraph.Graph.kernel>`; Numba kernels
        take their Python arguments, arrays included).

    Returns
    -------
    KernelNode or None
        The node added on a Path; ``None`` on a stream.

    Raises
    ------
    OperandError
        ``target``, ``config`` or ``kernel`` of the wrong kind, or bad arguments.
    DefinitionError
        Dimensions the kernel cannot take.
    """
    if _FAST is not None:  # the compiled launcher takes what it has learned (declined: -1)
        rc = _FAST.launch(target, config, kernel, args)
        if rc == 0:
            return None
        if rc > 0:
            _refused(rc, kernel)
    if type(target) is Path:
        return _launch_path(target, config, kernel, args)
    if type(target) in _PATH_TARGETS:
        return _launch_path(_PATH_TARGETS[type(target)](target, "launch"), config, kernel, args)
    _launch_stream(_stream(target, "launch"), _config(config, "launch"), kernel, args)
    return None


def _launch_stream(h: int, c: _Config, kernel: Any, args: tuple[Any, ...]) -> None:
    """A launch on the stream handle ``h``: the Python twin of the compiled ``StreamLauncher.launch``."""
    p = _prepared(kernel, "launch")
    if p is None or not c.plain:
        _launch_slow(h, c, kernel, args)
        return
    with PACKING_LOCK:
        params = p.info.pack(args, "cudagraph.launch", _NO_BINDINGS)
        err = launch_packed(p, params, c.grid, c.block, c.smem, h)
    if err:
        _refused(err, kernel)


def _refused(err: Any, kernel: Any) -> NoReturn:
    """Raise the typed error of a launch the driver refused."""
    name = prepared(kernel).info.name
    raise_error(require_driver().CUresult(int(err)), "cuLaunchKernel", None, f"cudagraph.launch of kernel {name!r}")


_NO_BINDINGS: dict[str, Any] = {}


def _launch_slow(h: int, c: _Config, kernel: Any, args: tuple[Any, ...]) -> None:
    """A launch with attributes or a foreign kernel: one node on a scratch graph, issued by the kernel ops."""
    k, a = _kernel(kernel, args, "launch")
    _scratch_issue(
        "launch",
        lambda g: g.kernel(
            k,
            c.grid,
            c.block,
            a,
            shared_mem=c.smem,
            cluster=c.cluster,
            cooperative=c.cooperative,
            name="launch",
        ),
        h,
    )


def _launch_path(p: Path, config: Any, kernel: Any, args: tuple[Any, ...]) -> Node:
    c = _config(config, "launch")
    k, a = _kernel(kernel, args, "launch")
    programmatic = None
    if c.pdl and p.last is not None and p.last.kind == "kernel":
        programmatic = True
    return p.kernel(  # type: ignore[no-any-return]
        k,
        c.grid,
        c.block,
        a,
        shared_mem=c.smem,
        cluster=c.cluster,
        cooperative=c.cooperative,
        programmatic=programmatic,
    )


# ------------------------------------------------------------------------------------------------ other ops


def memcpy(target: Any, dst: Any, src: Any, nbytes: int) -> Node | None:
    """Copy ``nbytes`` bytes from ``src`` to ``dst`` (device or host memory) on ``target``.

    Operands are those of :meth:`Graph.memcpy <cudagraph.Graph.memcpy>`: Buffers, arrays with
    ``__cuda_array_interface__`` or DLPack, numpy arrays (host), int addresses, Params on a Path.

    Returns
    -------
    MemcpyNode or None
        The node added on a Path; ``None`` on a stream.
    """
    p = _path_of(target, "memcpy")
    if p is not None:
        return p.memcpy(dst, src, nbytes)  # type: ignore[no-any-return]
    h = _stream(target, "memcpy")
    _scratch_issue("memcpy", lambda g: g.memcpy(dst, src, nbytes, name="memcpy"), h)
    return None


def memset(target: Any, dst: Any, value: Any, count: int, *, element_size: int | None = None) -> Node | None:
    """Fill ``count`` elements of ``dst`` with ``value`` on ``target``.

    ``value`` is a numpy scalar (its size is the element size: 1, 2 or 4 bytes) or an int with
    ``element_size``, as in :meth:`Graph.memset <cudagraph.Graph.memset>`.

    Returns
    -------
    MemsetNode or None
        The node added on a Path; ``None`` on a stream.
    """
    p = _path_of(target, "memset")
    if p is not None:
        return p.memset(dst, value, count=count, element_size=element_size)  # type: ignore[no-any-return]
    h = _stream(target, "memset")
    _scratch_issue("memset", lambda g: g.memset(dst, value, count=count, element_size=element_size), h)
    return None


# Host callbacks issued on streams: where their exceptions go, and their registry keys until they ran.
_HOST_ERRORS: list[Any] = []
_HOST_KEYS: list[int] = []


def _retire_host_keys(h: int) -> None:
    if not _HOST_KEYS:
        return
    keys = list(_HOST_KEYS)
    _HOST_KEYS.clear()
    if _capturing(h):
        return  # recorded by a capture: the callable stays registered for the graphs made from it
    retire(keys, [require_driver().CUstream(h)])


def host(target: Any, fn: Callable[..., Any], *args: Any) -> Node | None:
    """Call ``fn(*args)`` on a driver thread, in order on ``target``.

    The callable must not call CUDA. On a stream, an exception it raises is raised as
    :class:`~cudagraph.errors.HostCallbackError` by the next :func:`host` call on a stream.

    Returns
    -------
    HostNode or None
        The node added on a Path; ``None`` on a stream.
    """
    p = _path_of(target, "host")
    if p is not None:
        return p.host(fn, *args)  # type: ignore[no-any-return]
    h = _stream(target, "host")
    if _HOST_ERRORS:
        node, exc = _HOST_ERRORS.pop(0)
        del _HOST_ERRORS[:]
        raise HostCallbackError(
            f"cudagraph.host: an earlier callback raised {type(exc).__name__}: {exc}", node
        ) from exc
    if not callable(fn):
        raise OperandError(f"cudagraph.host: fn: expected a callable, got {type(fn).__name__}")
    _scratch_issue("host", lambda g: g.host(fn, *args, name="host"), h)
    return None


def record(target: Any, event: Any) -> Node | None:
    """Record ``event`` (a cuda.core Event or CUevent) on ``target``.

    Returns
    -------
    EventRecordNode or None
        The node added on a Path; ``None`` on a stream.
    """
    p = _path_of(target, "record")
    if p is not None:
        return p.record(event)  # type: ignore[no-any-return]
    h = _stream(target, "record")
    _scratch_issue("record", lambda g: g.record(event, name="record"), h)
    return None


def wait(target: Any, event: Any) -> Node | None:
    """Make the work that follows on ``target`` wait for ``event``.

    Returns
    -------
    EventWaitNode or None
        The node added on a Path; ``None`` on a stream.
    """
    p = _path_of(target, "wait")
    if p is not None:
        return p.wait(event)  # type: ignore[no-any-return]
    h = _stream(target, "wait")
    _scratch_issue("wait", lambda g: g.wait(event, name="wait"), h)
    return None


# ------------------------------------------------------------------------------------------------ fork / join


def _event_between(src: int, dst: int) -> None:
    """Order the work queued next on stream ``dst`` after what is queued on ``src`` now."""
    drv = require_driver()
    ev = event_create(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
    try:
        event_record(ev, src)
        stream_wait_event(dst, ev, 0)
    finally:
        event_destroy_quietly(ev)  # released once the wait is done


def fork(target: Any) -> Any:
    """A new target that starts after the work queued on ``target`` so far and runs beside it.

    On a Path: a new :class:`~cudagraph.Path` of the same graph, after the path's last op. On a
    stream (under capture or not): a new :class:`ForkedStream` that waits on an event recorded on
    ``target`` (under capture, it joins the capture).

    Returns
    -------
    Path or ForkedStream
    """
    if type(target) is Path:
        return Path(target.graph, list(target._tail))
    h = _stream(target, "fork")
    ensure_context()
    _sweep()
    drv = require_driver()
    new = stream_create(drv.CUstream_flags.CU_STREAM_NON_BLOCKING)
    forked = ForkedStream(new)
    _event_between(h, int(new))
    return forked


def join(target: Any, other: Any) -> Node | None:
    """Make the work that follows on ``target`` wait for everything queued on ``other``.

    Both are Paths of the same graph (then ``target`` continues after an empty node that depends on
    both, which is returned), or both are streams (an event recorded on ``other`` is waited on by
    ``target``).

    Raises
    ------
    ForeignNodeError
        Paths of two different graphs.
    OperandError
        A Path joined with a stream, or a target of the wrong kind.
    """
    if type(target) is Path or type(other) is Path:
        if type(target) is not Path or type(other) is not Path:
            raise OperandError(
                f"cudagraph.join: target and other must both be Paths or both streams, got "
                f"{type(target).__name__} and {type(other).__name__}"
            )
        if other.graph is not target.graph:
            raise ForeignNodeError(
                f"cudagraph.join: other: a Path of Graph {other.graph.name!r}, but target is a Path of Graph "
                f"{target.graph.name!r}"
            )
        extra = [n for n in other._tail if not any(n is t for t in target._tail)]
        if not extra:
            return None
        return target.join(*extra)  # type: ignore[no-any-return]
    h = _stream(target, "join")
    o = _stream(other, "join")
    ensure_context()
    if o != h:
        _event_between(o, h)
    return None
