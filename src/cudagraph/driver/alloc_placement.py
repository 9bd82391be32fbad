"""Where a graph allocation lives: its pool properties, its peers' access, and the pool a stream draws it from.

An :class:`~cudagraph.definition.nodes.AllocNode` says which memory it holds
(``memory_type``: pinned device memory, pinned host memory or managed memory),
on which device (``device``, else the current one) and which other devices may
read and write it (``peer_access``). The same three facts fill a ``MEM_ALLOC``
node's ``poolProps`` and ``accessDescs`` and, for a stream (an eager run, a
capture), choose a memory pool made with those properties (created once per
placement and kept while the process lives, as primary contexts are).
"""

from __future__ import annotations

from typing import Any

from ..errors import UnsupportedError
from .calls import check, require_driver
from .devices import device_count

__all__ = ["check_peers", "fill_alloc_params", "resident_device", "stream_pool"]

#: (memory_type, device, peers) -> CUmemoryPool made for stream allocations of that placement
_POOLS: dict[tuple[str, int, tuple[int, ...]], Any] = {}


def resident_device(node: Any, current: int) -> int:
    """The ordinal of the device ``node``'s memory resides on (``current``: the current device's)."""
    return current if node.device is None else int(node.device)


def _location(node: Any, current: int) -> tuple[Any, Any, int]:
    """``(allocType, location type, location id)`` of ``node``'s memory."""
    drv = require_driver()
    types, where = drv.CUmemAllocationType, drv.CUmemLocationType
    if node.memory_type == "host":
        return types.CU_MEM_ALLOCATION_TYPE_PINNED, where.CU_MEM_LOCATION_TYPE_HOST, 0
    managed = getattr(types, "CU_MEM_ALLOCATION_TYPE_MANAGED", None)
    if node.memory_type == "managed":
        if managed is None:
            raise UnsupportedError(
                f"{node.label} of Graph {node.graph.name!r}: managed graph memory needs cuda.bindings 13 "
                "(CU_MEM_ALLOCATION_TYPE_MANAGED)"
            )
        return managed, where.CU_MEM_LOCATION_TYPE_DEVICE, resident_device(node, current)
    return types.CU_MEM_ALLOCATION_TYPE_PINNED, where.CU_MEM_LOCATION_TYPE_DEVICE, resident_device(node, current)


def _peers(node: Any, current: int) -> list[int]:
    """The peers given access, less the resident device (which has it always)."""
    home = -1 if node.memory_type == "host" else resident_device(node, current)
    return [p for p in node.peer_access if p != home]


def _access_descs(peers: list[int]) -> list[Any]:
    drv = require_driver()
    out = []
    for p in peers:
        d = drv.CUmemAccessDesc()
        d.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        d.location.id = p
        d.flags = drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        out.append(d)
    return out


def check_peers(node: Any, current: int) -> None:
    """Refuse, naming ``node``, a device (resident or peer) the driver lacks, or a peer that cannot access the
    resident device's memory (``cuDeviceCanAccessPeer``).

    Raises
    ------
    UnsupportedError
        The message names the node, the device and why.
    """
    count = device_count()
    where = f"{node.label} of Graph {node.graph.name!r}"
    home = None if node.memory_type == "host" else resident_device(node, current)
    named = [("device", home)] if home is not None else []
    for role, ordinal in named + [("peer_access", p) for p in node.peer_access]:
        if ordinal >= count:
            raise UnsupportedError(
                f"{where}: {role} names device {ordinal}, but the driver has {count} device(s) "
                f"(ordinals 0..{count - 1})"
            )
    if home is None:
        return
    drv = require_driver()
    for p in _peers(node, current):
        dev, peer = check(drv.cuDeviceGet(home), "cuDeviceGet", node), check(drv.cuDeviceGet(p), "cuDeviceGet", node)
        if not check(drv.cuDeviceCanAccessPeer(peer, dev), "cuDeviceCanAccessPeer", node):
            raise UnsupportedError(
                f"{where}: peer_access names device {p}, which cannot access the memory of device {home} "
                "(cuDeviceCanAccessPeer: no peer path between them)"
            )


def fill_alloc_params(a: Any, node: Any, current: int) -> None:
    """Set the ``CUDA_MEM_ALLOC_NODE_PARAMS`` ``a`` (its size, pool properties and access) for ``node``."""
    alloc_type, loc_type, loc_id = _location(node, current)
    a.poolProps.allocType = alloc_type
    a.poolProps.location.type = loc_type
    a.poolProps.location.id = loc_id
    a.bytesize = node.nbytes
    peers = _peers(node, current)
    if peers:
        a.accessDescs = _access_descs(peers)
        a.accessDescCount = len(peers)


def stream_pool(node: Any, current: int) -> Any:
    """The memory pool a stream allocation of ``node`` draws from (``cuMemAllocFromPoolAsync``), or ``None``
    for the current device's default pool (``cuMemAllocAsync``): device memory of the current device with no
    peers.

    A pool of host memory is made accessible to the current device and the peers (by default only the host
    reaches it: a kernel given its address would fault); a device pool to its peers.
    """
    if node.memory_type == "device" and resident_device(node, current) == current and not _peers(node, current):
        return None
    alloc_type, loc_type, loc_id = _location(node, current)
    peers = _peers(node, current)
    if node.memory_type == "host":
        peers = list(dict.fromkeys([current, *peers]))
    key = (node.memory_type, loc_id, tuple(peers))
    pool = _POOLS.get(key)
    if pool is None:
        drv = require_driver()
        props = drv.CUmemPoolProps()
        props.allocType = alloc_type
        props.handleTypes = drv.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
        props.location.type = loc_type
        props.location.id = loc_id
        pool = check(drv.cuMemPoolCreate(props), "cuMemPoolCreate", node)
        if peers:
            descs = _access_descs(peers)
            try:
                check(drv.cuMemPoolSetAccess(pool, descs, len(descs)), "cuMemPoolSetAccess", node)
            except BaseException:
                drv.cuMemPoolDestroy(pool)
                raise
        pool = _POOLS.setdefault(key, pool)
    return pool
