r"""``cudagraph.compat``: cuda.core 1.2's graph API, built explicitly on a cudagraph :class:`~cudagraph.Graph`.

Both halves of cuda.core's graph API, so that a program written against cuda.core runs by
changing its imports (``from cudagraph.compat import Device, GraphBuilder, GraphDefinition, launch``):

- **GraphDefinition** (explicit): the same method names (``launch``, ``memcpy``, ``memset``,
  ``allocate``, ``deallocate``, ``record``, ``wait``, ``empty``, ``join``, ``embed``, ``callback``,
  ``create_condition``, ``if_then``, ``if_else``, ``while_loop``, ``switch``, ``instantiate``,
  ``debug_dot_print``, ``nodes``, ``edges``) and node classes with the fluent ``node.launch(...)``
  chaining.
- **GraphBuilder** (cuda.core's stream-capture builder), with no stream capture: made by
  ``Device().create_graph_builder()``; ``begin_building()``, ``launch(gb, config, kernel, *args)``
  (or ``cudagraph.launch/memcpy/memset/host/record/wait(gb, ...)``), ``split(n)``,
  ``GraphBuilder.join(*builders)``, ``create_condition``, ``if_then``, ``if_else``, ``switch`` and
  ``while_loop`` returning the builders of their bodies, ``embed(child)``, ``callback(fn)``,
  ``end_building()``, ``complete(options)``, ``debug_dot_print``, ``graph_definition``. Each op
  becomes a node after the builder's last op (the builder holds a :class:`~cudagraph.Path`).

Nothing touches the driver until ``instantiate()`` / ``complete()`` (or a ``handle``), which builds the graph
explicitly (``cuGraphCreate`` + ``cuGraphAddNode``) and returns an :class:`~cudagraph.Executable`
(cuda.core's executable ``Graph``, exported under that name: ``launch(stream)``, ``upload(stream)``,
``update(definition)``, ``close()``, ``is_closed``, and ``exe[node]``, the views
``ExecutableKernelNode`` ... ``ExecutableChildGraphNode`` whose ``update`` changes the node in the
executable only, kernel / memcpy / memset views with ``enable()``, ``disable()``, ``is_enabled``).
``gd.handle`` and ``node.handle`` build the definition as it is then (explicitly, once per change; every
driver graph built stays valid until the definition is collected). A signature or a use this layer does
not support (``user_data`` beside a Python callable, debug print flags, a capture mode
other than ``"relaxed"``, a builder used before ``begin_building()`` or after ``end_building()``,
builders of different graphs joined) raises :class:`~cudagraph.errors.OperandError` naming the
call and the argument, and adds nothing.
"""

from __future__ import annotations

from .frontends import compat as _implementation
from .frontends.compat import *  # noqa: F403  (the names listed in its __all__)

__all__ = list(_implementation.__all__)
