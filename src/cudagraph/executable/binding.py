"""Rebinding the parameters of an executable: :meth:`Executable.bind <cudagraph.Executable.bind>`.

Each set of names rebound together goes through a prepared plan (made on first
use, kept until the executable's nodes change): one parameter held whole by
kernel arguments through a :class:`~cudagraph.executable.bind_plan.BindPlan`,
run by the executable's :class:`~cudagraph.ops.kinds.kernel.KernelWriter`;
anything else (several names at once, pointers at offsets into a parameter's
memory, copies and fills) through a
:class:`~cudagraph.executable.patch_plan.PatchPlan`. New values are checked and
converted by each parameter's :class:`~cudagraph.executable.bind_checks.ValueCheck`.
With the compiled module, ``Executable.bind`` is the compiled ``BindMethod`` (see
``_compiled_bind`` in :mod:`cudagraph.executable.executable`), which takes the
one-pointer case before :meth:`Binding.bind` here, its Python twin, and
``Executable._bind_many`` is ``BindManyMethod``, which takes the common case of several
names (pointers whose values need no Python-level check, through a prepared plan)
before :meth:`Binding._bind_many`, its twin.
"""

from __future__ import annotations

from typing import Any

from ..definition.bindings import all_params
from ..definition.nodes import Node
from ..definition.parametrize import param_memory
from ..driver.kernel_args import _STRUCT_CODES
from ..errors import OperandError
from ..ops.kinds.kernel import PreparedKernel, native_rebind
from ..ops.registry import LAUNCHES
from .base import _UNSET, ExecutableBase
from .bind_checks import BUFFER_TYPES, ValueCheck, value_check
from .bind_plan import BindPlan
from .patch_plan import PatchPlan, PreparedNode, patch_native, prepare_node

__all__ = ["BUFFER_TYPES", "Binding"]

#: What :meth:`Binding._prepared` gives: ``(node as the executable has it, driver node,
#: prepared kernel parameters or None, just made)``.
_Prepared = tuple[Node, Any, PreparedKernel | None, bool]


def _scalar_code(p: Any) -> str | None:
    """The ``struct`` code (``"<f"``) a rebinding plan writes scalar parameter ``p`` by; ``None`` for a pointer.

    Raises
    ------
    OperandError
        A dtype without one (:func:`~cudagraph.definition.param.param_dtype` refuses them when declared).
    """
    if p.dtype is None:
        return None
    code = _STRUCT_CODES.get((p.dtype.kind, p.dtype.itemsize))
    if code is None:
        raise OperandError(f"param {p.name!r}: a {p.dtype} scalar cannot be rebound (no packing for that dtype)")
    return "<" + code


class Binding(ExecutableBase):
    """The binding part of :class:`~cudagraph.Executable`: :meth:`bind` and its prepared plans."""

    __slots__ = ()

    def bind(self, **params: Any) -> int:
        """Rebind parameters; update only the nodes that use a changed one.

        A value equal to the bound one (the same object, or an equal address
        or scalar) costs no driver call. All values are checked before any
        node is touched. Each node using a changed parameter costs one driver
        call (``cuGraphExecKernelNodeSetParams``, ``cuGraphExecNodeSetParams``
        for copies and fills), however many of its arguments change: the
        writes of each set of names rebound together are prepared once, and
        nodes built with the same kernel, dimensions and argument objects
        share one prepared parameter structure, so a parameter's bytes are
        written once for all of them. With the compiled module, rebinding one
        pointer parameter to a Buffer or an int address (after its first
        rebind, which prepares the plan) runs in C from the call on: no Python
        frame between the call and the driver.

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
        return self._bind_many(params)

    def _bind_one(self, name: str, value: Any) -> int:
        """:meth:`bind` of one parameter (the compiled method takes the common case before it)."""
        if self._exec is None:
            self._require_open()
        v = self._new_value(name, value)
        if v is _UNSET:
            return 0
        with self._lock:
            if self._exec is None:  # closed by another thread meanwhile
                self._require_open()
            plan = self._plans.get(name)
            if plan is None:  # (made before the value is recorded: a plan that cannot be made changes nothing)
                plan = self._plans[name] = self._make_plan((name,))
            replaced = self._raw_bound.get(name)  # noqa: F841 - released after the lock: it may run code that binds
            old = {name: (self._bindings.get(name, _UNSET), self._raw_bound.get(name, _UNSET))}
            self._bindings[name] = v
            self._raw_bound[name] = value
            try:
                return self._run_plan(plan, v)
            except OperandError:  # (a driver's refusal leaves the values bound, as the compiled path does)
                self._restore(plan, old)
                raise

    def _bind_many(self, params: dict[str, Any]) -> int:
        """:meth:`bind` of several parameters (the compiled method takes the common case before it)."""
        if self._exec is None:
            self._require_open()
        names: list[str] = []
        values: list[Any] = []
        for name, value in params.items():
            v = self._new_value(name, value)
            if v is not _UNSET:
                names.append(name)
                values.append(v)
        if not names:
            return 0
        with self._lock:
            if self._exec is None:  # closed by another thread meanwhile
                self._require_open()
            key: str | tuple[str, ...] = names[0] if len(names) == 1 else tuple(names)
            plan = self._plans.get(key)
            if plan is None:  # (made before the values are recorded, as in _bind_one)
                plan = self._plans[key] = self._make_plan(tuple(names))
            bound, raw = self._bindings, self._raw_bound
            replaced = [raw.get(name) for name in names]  # noqa: F841 - released after the lock, as above
            old = {name: (bound.get(name, _UNSET), raw.get(name, _UNSET)) for name in names}
            for name, v in zip(names, values):
                bound[name] = v
                raw[name] = params[name]
            try:
                if len(names) == 1:
                    return self._run_plan(plan, values[0])
                return self._run_patch(plan, values)  # type: ignore[arg-type]
            except OperandError:  # (a driver's refusal leaves the values bound, as the compiled path does)
                self._restore(plan, old)
                raise

    def _restore(self, plan: BindPlan | PatchPlan, old: dict[str, tuple[Any, Any]]) -> None:
        """Undo a rebind that a node refused part way for its operands (a copy's endpoint that is no memory).

        ``old`` holds each rebound name's previous value, as bound and as given. The bindings get them
        back, and the plan runs again with them, so that the nodes set before the refusal hold their
        previous parameters again: the executable is as it was before the call. (Such a refusal comes
        from a node of the general path, which only the Python method runs.)
        """
        bound, raw = self._bindings, self._raw_bound
        for name, (v, given) in old.items():
            if v is _UNSET:
                bound.pop(name, None)
            else:
                bound[name] = v
            if given is _UNSET:
                raw.pop(name, None)
            else:
                raw[name] = given
        if any(v is _UNSET for v, _given in old.values()):
            return  # (a name never bound: nothing was set with it before)
        calls = self.update_calls
        values = [v for v, _given in old.values()]
        if len(values) == 1:
            self._run_plan(plan, values[0])
        else:
            self._run_patch(plan, values)  # type: ignore[arg-type]
        self.update_calls = calls

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
        check = self._checks.get(name)
        if check is None:
            check = self._checks[name] = self._value_check(name)
        bound = self._bindings.get(name, _UNSET)
        v = check.convert(value, bound)
        if check.same(v, bound):
            raw[name] = value  # the same value under another object: remembered, no driver call
            return _UNSET
        return v

    def _value_check(self, name: str) -> ValueCheck:
        p = self._param(name)
        return value_check(p, param_memory(self.graph).get(name), self.graph.name)

    def _run_plan(self, plan: BindPlan | PatchPlan, value: Any) -> int:
        """Rebind one parameter to ``value`` (as bound) through its prepared ``plan`` (see :class:`BindPlan`)."""
        if type(plan) is PatchPlan:
            return self._run_patch(plan, [value])
        self._writer.write_plan(plan, value)  # type: ignore[arg-type]
        count = plan.count
        self.update_calls += count
        return count

    def _run_patch(self, plan: PatchPlan, values: list[Any]) -> int:
        """Rebind ``plan``'s names to ``values`` (as bound, in the plan's order); see :class:`PatchPlan`."""
        addr = self._exec_addr
        if plan.native and not addr:
            addr = self._exec_addr = int(self._exec)
        plan.run(self._exec, addr, values)
        if plan.general:
            bindings = self._bindings
            for node, dnode in plan.general:
                self._set_node(node, dnode, bindings)
        count = plan.count
        self.update_calls += count
        return count

    def _make_plan(self, names: tuple[str, ...]) -> BindPlan | PatchPlan:
        """The users of parameters ``names``, each once, as a :class:`BindPlan` where one will do."""
        users: dict[int, Node] = {}
        for name in names:
            for node in self._lowered.param_users.get(name, ()):
                users.setdefault(id(node), node)
        prepared = [self._prepared(node) for node in users.values()]
        if len(names) == 1:
            name = names[0]
            if all(up is not None and not up.shifted.get(name) for _n, _d, up, _f in prepared):
                return self._bind_plan(name, prepared)
        return self._patch_plan(names, list(users.values()), prepared)

    def _bind_plan(self, name: str, prepared: list[_Prepared]) -> BindPlan:
        """One parameter held whole by kernel arguments, kernel nodes grouped by shared parameter structure."""
        code = _scalar_code(self._param(name))
        native = native_rebind()
        if native and not self._exec_addr:
            self._exec_addr = int(self._exec)
        plan = BindPlan(code, native)
        if code is None:
            plan.memory = param_memory(self.graph).get(name)
        for current, dnode, up, _fresh in prepared:
            assert up is not None
            plan.add_kernel(up, name, current, dnode)
        return plan.finish()

    def _patch_plan(self, names: tuple[str, ...], users: list[Node], prepared: list[_Prepared]) -> PatchPlan:
        """Several parameters, pointers at offsets, copies and fills (``prepared``: of each of ``users``)."""
        codes = [_scalar_code(self._param(name)) for name in names]
        others = [
            (current, dnode, self._prepared_node(node, current))
            for node, (current, dnode, up, _f) in zip(users, prepared)
            if up is None
        ]
        plan = PatchPlan(names, tuple(codes), patch_native(any(pn is not None for _c, _d, pn in others)))
        for current, dnode, up, _fresh in prepared:
            if up is not None:
                plan.add_kernel(up, current, dnode)
        for current, dnode, pn in others:
            if pn is None:
                plan.add_general(current, dnode)
            else:
                plan.add_node(pn, current, dnode)
        return plan.finish()

    def _prepared_node(self, node: Node, current: Node) -> PreparedNode | None:
        """The patchable parameters of ``node`` (``current``: as the executable has it), or ``None``.

        Made once per node and shared by every plan, so that its words always hold the
        bound values; forgotten with the node's kernel structure (``exe[node].update``,
        ``exe.update``).
        """
        cache = self._prepared_nodes
        key = id(node)  # the definition's node, kept alive by the lowered graph
        if key in cache:
            return cache[key]
        lw = self._lowered
        pn = cache[key] = prepare_node(
            current, self._context(), self._bindings, self._sink, lw.host_keys, lw.state, param_memory(self.graph)
        )
        return pn

    def _prepared(self, node: Node) -> _Prepared:
        """``(node as the executable has it, driver node, prepared kernel parameters or None, just made)``.

        Kernel nodes with the same kernel, grid, block, shared memory and the very same
        argument objects pack to the same bytes under any bindings: they share one
        prepared structure, so rebinding a parameter rewrites its bytes once for all of them.
        """
        current = self._overrides.get(id(node), node)
        dnode = self._lowered.all_nodes[id(node)][1]
        if type(current) not in LAUNCHES:
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
