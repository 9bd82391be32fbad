"""The one seam through which the definition layer reaches the layers above it (GPU-free).

The definition layer never imports a higher layer. Where a definition method
runs something that lives above it (``Graph.instantiate()`` builds an
executable, ``Graph.run()`` runs eagerly, ``Graph.from_cuda_graph()`` lifts a
driver graph, ``g.capture(...)`` records a capture region), it calls one of the
named hooks below. The root package :mod:`cudagraph` wires each hook, once and
explicitly, to a ``module:attribute`` target; the module is imported on the
first call only, so ``import cudagraph`` stays GPU-free.

- :data:`instantiate`, called by ``Graph.instantiate()``, wired to
  ``cudagraph.executable.executable:instantiate``;
- :data:`run`, called by ``Graph.run()``, wired to ``cudagraph.materialize.eager:run``;
- :data:`lift`, called by ``Graph.from_cuda_graph()``, wired to ``cudagraph.materialize.lift:lift``;
- :data:`capture_region`, called by ``g.capture(after=...)``, wired to
  ``cudagraph.materialize.capture_region:CaptureRegion``;
- :data:`capture_function`, called by ``Graph.capture(fn, stream)``, wired to
  ``cudagraph.materialize.capture_region:capture_function``;
- :data:`profile`, called by ``Graph.profile(stream)``, wired to
  ``cudagraph.executable.profile:profile_graph``;
- :data:`kernel_info`, called by the renderings for the name of a ``cuda.core``
  kernel, wired to ``cudagraph.driver.kernel_args:kernel_info``.

A hook called before it is wired raises :class:`UnwiredSeamError`.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import UnwiredSeamError

__all__ = [
    "Seam",
    "capture_function",
    "capture_region",
    "instantiate",
    "kernel_info",
    "lift",
    "profile",
    "run",
]


class Seam:
    """A named upward call: a ``module:attribute`` target, imported on first use.

    The module is kept once imported; the attribute is read at every call, so
    replacing it on the module (a test's monkeypatch) takes effect.

    Parameters
    ----------
    name : str
        The hook's name, used in error messages.
    doc : str
        What the hook does and who calls it.

    Examples
    --------
    >>> hook = Seam("sqrt", "square roots")
    >>> hook.wire("math", "sqrt")
    >>> hook(4.0)
    2.0
    """

    __slots__ = ("name", "doc", "_module", "_attr", "_mod")

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.doc = doc
        self._module: str | None = None
        self._attr: str | None = None
        self._mod: Any = None

    @property
    def target(self) -> str | None:
        """``"module:attribute"``, or ``None`` while unwired."""
        return None if self._module is None else f"{self._module}:{self._attr}"

    def wire(self, module: str, attr: str) -> None:
        """Make the hook call ``module.attr`` (imported lazily, on the first call)."""
        self._module = module
        self._attr = attr
        self._mod = None

    def unwire(self) -> None:
        """Forget the target (calls raise :class:`UnwiredSeamError` again)."""
        self._module = self._attr = None
        self._mod = None

    def resolve(self) -> Any:
        """The callable the hook is wired to, importing its module if needed.

        Raises
        ------
        UnwiredSeamError
            Nothing is wired to the hook.
        """
        mod = self._mod
        if mod is None:
            if self._module is None:
                raise UnwiredSeamError(
                    f"the definition layer's seam {self.name!r} is not wired; import cudagraph (whose __init__ "
                    f"wires it) or call cudagraph.definition.seams.{self.name}.wire(module, attribute)"
                )
            mod = self._mod = importlib.import_module(self._module)
        return getattr(mod, self._attr)  # type: ignore[arg-type]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Seam {self.name!r} -> {self.target or 'unwired'}>"


#: ``instantiate(graph, *, upload_stream, auto_free_on_launch, device_launch, use_node_priority, params, backend)``
#: -> Executable; called by ``Graph.instantiate()``.
instantiate = Seam("instantiate", "Build and instantiate a definition on the driver; called by Graph.instantiate().")
#: ``run(graph, stream, params)``: runs a definition eagerly; called by ``Graph.run()``.
run = Seam("run", "Run a definition eagerly on a stream; called by Graph.run().")
#: ``lift(handle, name)`` -> Graph: reads a driver graph back; called by ``Graph.from_cuda_graph()``.
lift = Seam("lift", "Read a driver graph back into a definition; called by Graph.from_cuda_graph().")
#: ``capture_region(graph, after, name, stream)`` -> CaptureRegion; called by ``g.capture(...)``.
capture_region = Seam("capture_region", "Make a capture region on a graph; called by g.capture(...).")
#: ``capture_function(fn, stream, name)`` -> Graph; called by ``Graph.capture(fn, stream)``.
capture_function = Seam("capture_function", "Capture a function into a new graph; called by Graph.capture(fn).")
#: ``profile(graph, stream, repeats, params)`` -> ProfileResult; called by ``Graph.profile()``.
profile = Seam("profile", "Time every node and the whole launch of a definition; called by Graph.profile().")
#: ``kernel_info(kernel)`` -> an object whose ``name`` is the kernel function's name; called by the renderings.
kernel_info = Seam("kernel_info", "Read a driver kernel's name; called by to_dot() and to_mermaid().")
