"""Host callbacks: ``HostNode`` (a Python callable run by the driver through one C trampoline) and
``HostFunctionNode`` (a C function and its data pointer, given to the driver as they are)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...definition.nodes import HostFunctionNode, HostNode, Node
from ...driver import api
from ...driver.calls import raise_error, require_driver
from ...driver.host_callbacks import HOST_FN_ADDRESS, callback, launch_host_func, register
from .base import KindOps, Lifter, ParamsEnv, StreamRun

if TYPE_CHECKING:
    from ...definition.graph import Graph

__all__ = ["OPS", "HostFunctionOps", "HostOps"]


class HostOps(KindOps):
    """A host node: the callable is registered under a key the trampoline receives as ``userData``."""

    __slots__ = ()
    capturable = True
    lifts = "CU_GRAPH_NODE_TYPE_HOST"

    def params(self, node: HostNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        p = env.node_params(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_HOST)
        p.host.fn = drv.CUhostFn(HOST_FN_ADDRESS)
        key = register(node.fn, node.args, env.sink, node)
        env.host_keys.append(key)
        p.host.userData = key
        return p

    def issue(self, node: HostNode, stream: Any, run: StreamRun) -> None:
        drv = require_driver()
        key = register(node.fn, node.args, run.sink, node)
        run.host_keys.append(key)
        rc = launch_host_func(stream, key)
        if rc:
            raise_error(drv.CUresult(rc), "cuLaunchHostFunc", node)

    def lift(self, lifter: Lifter, g: Graph, dn: Any, after: Any) -> Node | None:
        """A host node of this library's callbacks, or ``None`` for a foreign host function."""
        hp = api.graph_host_node_get_params(dn)
        entry = callback(int(hp.fn), int(hp.userData))
        if entry is None:
            return None
        fn, fargs = entry
        return g.host(fn, *fargs, after=after)


class HostFunctionOps(KindOps):
    """A C host function: ``CUDA_HOST_NODE_PARAMS`` of its address and data pointer (``cuLaunchHostFunc`` on a
    stream). Lifting a foreign host node stays with :class:`HostOps` (one lifter per driver node type)."""

    __slots__ = ()
    capturable = True

    def params(self, node: HostFunctionNode, env: ParamsEnv) -> Any:
        drv = require_driver()
        p = env.node_params(drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_HOST)
        p.host.fn = drv.CUhostFn(node.fn_address)
        p.host.userData = node.data_address
        return p

    def issue(self, node: HostFunctionNode, stream: Any, run: StreamRun) -> None:
        drv = require_driver()
        api.launch_host_func(stream, drv.CUhostFn(node.fn_address), node.data_address, node=node)


#: The kinds of this family and their ops, read by :mod:`cudagraph.ops.registry`.
OPS: tuple[tuple[type[Node], KindOps], ...] = ((HostNode, HostOps()), (HostFunctionNode, HostFunctionOps()))
