"""Every builder of a definition, composed from the kinds' mixins (GPU-free).

:class:`Builders` is the one source of the node builders: :class:`~cudagraph.Graph`
derives from it, and :class:`~cudagraph.Path` offers each of its builders
(the methods marked with :func:`~cudagraph.definition.core.builder`) chained
after the path's previous op.
"""

from __future__ import annotations

from typing import Any

from .compiled_kernel import install_compiled_kernel
from .compiled_ops import install_compiled_ops
from .kinds.conditionals import ConditionalBuilders
from .kinds.copy import CopyBuilders
from .kinds.events import EventBuilders
from .kinds.graph_memory import GraphMemoryBuilders
from .kinds.host import HostBuilders
from .kinds.kernel import KernelBuilders
from .kinds.memory_ops import MemoryOpBuilders
from .kinds.structure import StructureBuilders

__all__ = ["COMPILED_KERNEL", "COMPILED_OPS", "Builders", "builder_names"]


class Builders(
    KernelBuilders,
    CopyBuilders,
    MemoryOpBuilders,
    HostBuilders,
    EventBuilders,
    StructureBuilders,
    ConditionalBuilders,
    GraphMemoryBuilders,
):
    """The builders of every node kind, on the storage of :class:`~cudagraph.definition.core.GraphCore`."""

    __slots__ = ()


#: ``Graph.kernel``'s compiled path, or ``None`` (the Python method runs): the common call builds its node
#: in C (bench/construction.py --cpu, user-style chain and dag: define).
COMPILED_KERNEL: Any = install_compiled_kernel()

#: The compiled paths of ``Graph.memset``, ``memcpy``, ``empty`` and ``join`` by name (empty: the Python methods
#: run): the common call builds its node in C (bench/cpu_overhead.py: fills and copies defined, compiled vs Python).
COMPILED_OPS: dict[str, Any] = install_compiled_ops(COMPILED_KERNEL)


def builder_names() -> tuple[str, ...]:
    """The names of the builders of :class:`Builders`, in definition order of the mixins."""
    names: list[str] = []
    for cls in Builders.__mro__:
        for name, value in vars(cls).items():
            if getattr(value, "__cudagraph_builder__", False) and name not in names:
                names.append(name)
    return tuple(names)
