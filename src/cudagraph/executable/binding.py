"""Rebinding the parameters of an executable: :meth:`Executable.bind <cudagraph.Executable.bind>`.

One parameter rebound alone goes through its prepared
:class:`~cudagraph.executable.bind_plan.BindPlan` (made on first use, kept until
the executable's nodes change); several at once refresh each user. Kernel nodes
are written by the executable's :class:`~cudagraph.ops.kinds.kernel.KernelWriter`.
With the compiled module, ``Executable.bind`` itself is replaced by the compiled
``BindMethod`` (see ``_install_compiled_bind`` in :mod:`cudagraph.executable.executable`),
which takes the one-pointer case before :meth:`Binding.bind` here, its Python twin.
"""

from __future__ import annotations

from typing import Any

from ..definition.bindings import all_params
from ..definition.diff import same_value
from ..definition.nodes import KernelNode, Node
from ..definition.operands import buffer_like
from ..definition.parametrize import param_memory
from ..driver.kernel_args import _STRUCT_CODES
from ..errors import OperandError
from ..ops.kinds.kernel import PreparedKernel, native_rebind
from .base import _UNSET, ExecutableBase
from .bind_checks import checked_address
from .bind_plan import BindPlan

__all__ = ["Binding"]


class Binding(ExecutableBase):
    """The binding part of :class:`~cudagraph.Executable`: :meth:`bind` and its prepared plans."""

    __slots__ = ()

    def bind(self, **params: Any) -> int:
        """Rebind parameters; update only the nodes that use a changed one.

        A value equal to the bound one (the same object, or an equal address
        or scalar) costs no driver call. All values are checked before any
        node is touched. Each kernel node costs one
        ``cuGraphExecKernelNodeSetParams`` call; nodes built with the same
        kernel, dimensions and argument objects share one prepared parameter
        structure, so a parameter's bytes are written once for all of them.
        With the compiled module, rebinding one pointer parameter to a Buffer or
        an int address (after its first rebind, which prepares the plan) runs in
        C from the call on: no Python frame between the call and the driver.

        Parameters
        ----------
        **params
            ``name=value`` for parameters of the definition.

        Returns
        -------
        int
            The number of node updates made.

        Raises
        ------
        OperandError
            Unknown name, or a value of the wrong kind (nothing is changed).
        DriverError
            The driver refused an update (names the node).
        """
        if len(params) == 1:
            ((name, value),) = params.items()
            return self._bind_one(name, value)
        if self._exec is None:
            self._require_open()
        raw = self._raw_bound
        bound = self._bindings
        changed: dict[str, Any] = {}
        for name, value in params.items():
            v = self._new_value(name, value)
            if v is not _UNSET:
                changed[name] = v
        if not changed:
            return 0
        with self._lock:
            for name, v in changed.items():
                bound[name] = v
                raw[name] = params[name]
            if len(changed) == 1:
                ((name, v),) = changed.items()
                return self._apply_plan(name, v)
            dirty: dict[int, Node] = {}
            for name in changed:
                for node in self._lowered.param_users.get(name, ()):
                    dirty[id(node)] = node
            self._plans.clear()
            for node in dirty.values():
                self._refresh(node, changed)
        return len(dirty)

    def _bind_one(self, name: str, value: Any) -> int:
        """:meth:`bind` of one parameter (the compiled method takes the common case before it)."""
        if self._exec is None:
            self._require_open()
        v = self._new_value(name, value)
        if v is _UNSET:
            return 0
        with self._lock:
            self._bindings[name] = v
            self._raw_bound[name] = value
            return self._apply_plan(name, v)

    def _new_value(self, name: str, value: Any) -> Any:
        """``value`` checked and converted for parameter ``name``; ``_UNSET`` when it equals the bound one.

        Raises
        ------
        OperandError
            Unknown name, or a value of the wrong kind.
        """
        raw = self._raw_bound
        if raw.get(name, _UNSET) is value:
            return _UNSET
        p = self.graph._params.get(name)
        if p is None:
            p = self._param(name)
        if p.dtype is None:
            t = type(value)
            plan = self._plans.get(name)
            memory = param_memory(self.graph).get(name) if plan is None else plan.memory
            if memory is not None:
                v = checked_address(name, memory, value, self.graph.name)
            elif t is int and 0 < value < 1 << 64:
                v = value
            elif t in BUFFER_TYPES:
                v = int(value.handle) or _pointer(p, value)
            else:
                v = _pointer(p, value)
            same = v == self._bindings.get(name)
        else:
            v = p.coerce(value)
            same = same_value(v, self._bindings.get(name, _UNSET))
        if same:
            raw[name] = value  # the same value under another object: remembered, no driver call
            return _UNSET
        return v

    def _apply_plan(self, name: str, value: Any) -> int:
        """Rebind one parameter through its prepared plan (made on first use; see :class:`BindPlan`)."""
        plan = self._plans.get(name)
        if plan is None:
            plan = self._plans[name] = self._make_plan(name)
        for up in plan.shifted:
            up.write_shifted(name, value)
        self._writer.write_plan(plan, value)
        if plan.others:
            bindings = self._bindings
            for node, dnode in plan.others:
                self._set_node(node, dnode, bindings)
        count = plan.count
        self.update_calls += count
        return count

    def _make_plan(self, name: str) -> BindPlan:
        """The users of parameter ``name``, kernel nodes grouped by shared parameter structure."""
        p = self._param(name)
        code = None if p.dtype is None else "<" + _STRUCT_CODES[(p.dtype.kind, p.dtype.itemsize)]
        native = native_rebind()
        if native and not self._exec_addr:
            self._exec_addr = int(self._exec)
        plan = BindPlan(code, native)
        if code is None:
            plan.memory = param_memory(self.graph).get(name)
        for node in self._lowered.param_users.get(name, ()):
            current, dnode, up, _fresh = self._prepared(node)
            if up is None:
                plan.add_other(current, dnode)
            else:
                plan.add_kernel(up, name, current, dnode)
        return plan.finish()

    def _prepared(self, node: Node) -> tuple[Node, Any, PreparedKernel | None, bool]:
        """``(node as the executable has it, driver node, prepared kernel parameters or None, just made)``.

        Kernel nodes with the same kernel, grid, block, shared memory and the very same
        argument objects pack to the same bytes under any bindings: they share one
        prepared structure, so rebinding a parameter rewrites its bytes once for all of them.
        """
        current = self._overrides.get(id(node), node)
        dnode = self._lowered.all_nodes[id(node)][1]
        if type(current) is not KernelNode:
            return current, dnode, None, False
        up = self._updaters.get(id(node))
        if up is not None:
            return current, dnode, up, False
        k: Any = current
        key = (id(k.kernel), k.grid, k.block, k.shared_mem, *map(id, k.args))
        shared = self._shared.get(key)
        if shared is not None:
            up = self._updaters[id(node)] = shared[0]
            return current, dnode, up, False
        up = self._updaters[id(node)] = PreparedKernel(k, self._bindings)
        self._shared[key] = (up, current)  # the node keeps the objects named by the key alive
        return current, dnode, up, True

    def _param(self, name: str) -> Any:
        p = self.graph._params.get(name)
        if p is None:
            params = all_params(self.graph)
            p = params.get(name)
            if p is None:
                raise OperandError(
                    f"the executable of Graph {self.graph.name!r} has no parameter {name!r}; "
                    f"its parameters are {sorted(params) or 'none'}"
                )
        return p

    def _refresh(self, node: Node, changed: dict[str, Any]) -> None:
        """Re-issue one node's parameters after ``changed`` parameters were rebound."""
        current, dnode, up, fresh = self._prepared(node)
        if up is not None and not fresh:
            for name, v in changed.items():
                up.rebind(name, v)
        self._set_node(current, dnode, self._bindings, up)
        self.update_calls += 1


#: Types seen to be ``cuda.core`` Buffer-like (their ``handle`` is the address); the
#: compiled ``Executable.bind`` reads the same set.
BUFFER_TYPES: set[type] = set()


def _pointer(param: Any, value: Any) -> int:
    """A pointer parameter's value as an address (the common cases first)."""
    if buffer_like(value):
        BUFFER_TYPES.add(type(value))
        ptr = int(value.handle)
        if ptr:
            return ptr
    return param.coerce(value)  # type: ignore[no-any-return]
