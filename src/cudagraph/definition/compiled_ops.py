"""The compiled :meth:`Graph.memset <cudagraph.Graph.memset>`, :meth:`~cudagraph.Graph.memcpy`,
:meth:`~cudagraph.Graph.empty` and :meth:`~cudagraph.Graph.join` (``cudagraph.definition._define.OpMethod``),
when built.

Each builds the node of the common call in C (int addresses, or Buffers of a class the Python method read
before; plain int values and sizes; ``after=`` a node or distinct nodes of the graph) and places it through
the compiled placer (``KernelMethod.place``'s C side); every other call goes to the Python method
(:meth:`MemoryOpBuilders.memset <cudagraph.definition.kinds.memory_ops.MemoryOpBuilders.memset>`,
:meth:`CopyBuilders.memcpy <cudagraph.definition.kinds.copy.CopyBuilders.memcpy>`,
:meth:`StructureBuilders.empty <cudagraph.definition.kinds.structure.StructureBuilders.empty>`, ``.join``), its
twin (``.func``, ``__wrapped__``), which names every error. ``CUDAGRAPH_NO_C_ENTRY=1``, or a build without the
extension, leaves the Python methods in place.
"""

from __future__ import annotations

import functools
from types import MappingProxyType
from typing import Any, Final

from .addresses import BUFFER_TYPES, HANDLE_TYPES, HOST_ARRAYS
from .compiled_kernel import define_module
from .kinds.copy import CopyBuilders, MemcpyNode
from .kinds.memory_ops import FILL_SCALARS, MemoryOpBuilders, MemsetNode
from .kinds.structure import EmptyNode, StructureBuilders

__all__ = ["OP_SLOTS", "install_compiled_ops"]

#: The own ``__slots__`` of the nodes the compiled builders make, by builder, in the order of their C side
#: (``_define_ops.c``).
OP_SLOTS: Final[MappingProxyType[str, tuple[str, ...]]] = MappingProxyType(
    {
        "memset": ("dst", "value", "element_size", "width", "height", "pitch", "_keep"),
        "memcpy": ("dst", "src", "nbytes", "_keep"),
        "empty": (),
        "join": (),
    }
)

_OWNERS: Final = {
    "memset": (MemoryOpBuilders, MemsetNode),
    "memcpy": (CopyBuilders, MemcpyNode),
    "empty": (StructureBuilders, EmptyNode),
    "join": (StructureBuilders, EmptyNode),
}


def install_compiled_ops(kernel_method: Any) -> dict[str, Any]:
    """Make ``memset``, ``memcpy``, ``empty`` and ``join`` the compiled methods over their Python twins, placing
    through ``kernel_method`` (the compiled ``Graph.kernel``, ``None`` when it is not built: nothing changes).

    Returns
    -------
    dict
        The compiled method of each builder installed, by name (empty without the extension).
    """
    module = define_module()
    if module is None or kernel_method is None:
        return {}
    out: dict[str, Any] = {}
    sources = (BUFFER_TYPES, HANDLE_TYPES, FILL_SCALARS, HOST_ARRAYS)
    for kind, (owner, node_type) in _OWNERS.items():
        current = owner.__dict__[kind]
        twin = getattr(current, "func", current)  # installed once: a second call wraps the same Python method
        method = module.OpMethod(kind, twin, kernel_method, node_type, OP_SLOTS[kind], sources)
        functools.update_wrapper(method, twin)
        setattr(owner, kind, method)
        out[kind] = method
    return out
