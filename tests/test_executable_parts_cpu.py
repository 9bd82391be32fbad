"""How the executable layer is put together: its imports, its slots and its one kernel writer.

``Executable`` is assembled from parts (``executable/base.py``, ``binding.py``,
``updating.py``, ``executable.py``); the compiled ``Executable.bind`` reads some
of its slots by name, and every kernel-node update goes through
``ops/kinds/kernel.py`` (``KernelWriter``).
"""

from __future__ import annotations

import types

import import_graph as ig
from cudagraph.executable import base, binding, updating
from cudagraph.executable.executable import Executable
from cudagraph.ops.kinds import kernel as kernel_writer

#: The modules this layer's rules are checked for.
_OWN = ("cudagraph.executable", "cudagraph.ops.node_update")


def _own(module: str) -> bool:
    return module == _OWN[1] or module == _OWN[0] or module.startswith(_OWN[0] + ".")


def test_the_executable_layer_and_node_update_import_only_downward():
    graph = ig.import_graph()
    assert [pair for pair in ig.upward_imports(graph) if _own(pair[0])] == []


def test_no_import_cycle_runs_through_the_executable_layer_or_node_update():
    graph = ig.import_graph()
    # Upward imports of other modules are their layer's to remove (and the layers check's to
    # report); with them left out, a cycle through these modules would be of their own making.
    for importer, imported in ig.upward_imports(graph):
        if not _own(importer):
            graph[importer].discard(imported)
    assert [c for c in ig.cycles(graph) if any(map(_own, c))] == []


def test_the_state_is_declared_once_as_slots_the_compiled_bind_can_read():
    for name in ("_exec", "_exec_addr", "_raw_bound", "_bindings", "_plans", "_lock", "update_calls"):
        assert isinstance(getattr(Executable, name), types.MemberDescriptorType), name
    assert Executable.__slots__ == () and binding.Binding.__slots__ == () and updating.Updating.__slots__ == ()
    assert Executable.__dictoffset__ == 0  # instances have no __dict__: every attribute is a slot
    for part in (binding.Binding, updating.Updating, base.ExecutableBase):
        assert issubclass(Executable, part)


def test_one_kernel_writer_per_executable():
    writer = kernel_writer.KernelWriter("exec")
    # Nothing is made before the first write: a bind never pays for the shared parameters.
    assert writer._p is None and writer._loop is None
    assert {m for m in vars(kernel_writer.KernelWriter) if m.startswith("write")} == {
        "write",
        "write_plan",
        "write_prepared",
    }


def test_the_compiled_methods_are_the_class_bodys_and_carry_the_python_methods_docs():
    """``Executable``'s class body names what ``bind``, ``_bind_many`` and ``launch`` are: the compiled methods
    where the compiled module is built, else the Python methods of ``PythonExecutable``; nothing is set on the
    class after it is made."""
    from cudagraph.driver.c_entry import NATIVE
    from cudagraph.executable import executable

    python = executable.PythonExecutable
    if NATIVE is None:
        assert executable._COMPILED is None
        assert not {"bind", "_bind_many", "launch"} & set(vars(Executable))
        assert Executable.launch is python.launch and Executable.bind is binding.Binding.bind
        return
    bind, many, launch = executable._COMPILED
    assert vars(Executable)["bind"] is bind and vars(Executable)["_bind_many"] is many
    assert vars(Executable)["launch"] is launch
    assert type(bind).__name__ == "BindMethod" and bind.func is python.bind is binding.Binding.bind
    assert type(many).__name__ == "BindManyMethod" and many.func is binding.Binding._bind_many
    assert launch is python.launch or (type(launch).__name__ == "LaunchMethod" and launch.func is python.launch)
    for name in ("bind", "launch"):
        assert getattr(Executable, name).__doc__ == getattr(python, name).__doc__
        assert getattr(Executable, name).__qualname__ == f"Executable.{name}" or name == "launch"


def test_the_api_pages_show_bind_and_launch_with_their_docstrings():
    """The API pages are read from the source (griffe): ``Executable``'s ``bind`` and ``launch`` are the Python
    methods there, with their signatures and docstrings (the class body's assignment of the compiled ones is
    not mistaken for attributes without documentation)."""
    griffe = __import__("pytest").importorskip("griffe")
    from pathlib import Path

    import cudagraph

    src = Path(cudagraph.__file__).parent.parent
    module = griffe.load("cudagraph.executable.executable", search_paths=[str(src)])
    members = module["Executable"].all_members
    for name in ("bind", "launch"):
        assert members[name].kind.value == "function", name
        assert members[name].docstring is not None and members[name].docstring.value, name
