"""The compiled module's view of Python objects and its Python twins, declared once in ``c_entry``.

``NATIVE_SLOTS`` names every ``__slots__`` attribute the C code reads, by
role; ``SLOT_OWNERS`` the class of each role; ``PYTHON_TWINS`` the Python twin
of each compiled algorithm. These tests hold the declaration to the classes
(a renamed or removed slot fails here, not in C), hold the C sources to the
declaration (no slot name written in them), and check that the compiled types
refuse, with a clear exception, a class that lacks a declared slot.
"""

from __future__ import annotations

import ctypes
import importlib
import inspect
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import cudagraph
from cudagraph.definition.nodes import EmptyNode, KernelNode, Node
from cudagraph.driver import c_entry

native = c_entry.NATIVE
needs_native = pytest.mark.skipif(native is None, reason="cudagraph.driver._native was not built")
DRIVER = Path(c_entry.__file__).resolve().parent


def resolve(path: str) -> Any:
    """The object at ``module:qualified.name``."""
    module, _, name = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def declared_slots(cls: type) -> set[str]:
    """The names in the ``__slots__`` of ``cls`` and of its bases."""
    out: set[str] = set()
    for c in cls.__mro__:
        slots = c.__dict__.get("__slots__", ())
        out.update((slots,) if isinstance(slots, str) else slots)
    return out


def test_every_role_has_an_owner_class():
    assert set(c_entry.NATIVE_SLOTS) == set(c_entry.SLOT_OWNERS)
    for role, names in c_entry.NATIVE_SLOTS.items():
        assert names and len(set(names)) == len(names), role
        assert all(isinstance(n, str) and n.isidentifier() for n in names), role


@pytest.mark.parametrize("role", sorted(c_entry.NATIVE_SLOTS))
def test_each_declared_slot_is_a_slot_of_its_class(role):
    """A slot renamed or removed on its class, and not in NATIVE_SLOTS, fails here."""
    cls = resolve(c_entry.SLOT_OWNERS[role])
    assert isinstance(cls, type)
    for name in c_entry.NATIVE_SLOTS[role]:
        assert name in declared_slots(cls), f"{cls.__qualname__} has no slot {name!r} (NATIVE_SLOTS[{role!r}])"
        descriptor = inspect.getattr_static(cls, name)
        assert isinstance(descriptor, types.MemberDescriptorType), f"{cls.__qualname__}.{name} is not a slot"
        assert issubclass(cls, descriptor.__objclass__)


def test_the_c_sources_write_no_slot_name():
    """The C code reads objects only through the declared list: no slot name as a string in its sources."""
    names = {n for names in c_entry.NATIVE_SLOTS.values() for n in names}
    sources = sorted(DRIVER.glob("_native*.[ch]"))
    assert {p.name for p in sources} >= {"_native.c", "_native.h", "_native_bind.c"}
    for path in sources:
        # (the compiled types' own attributes, PyGetSetDef entries, may share a name with a slot)
        text = re.sub(r'\{"\w+", \(getter\)', "", path.read_text())
        found = [n for n in names if f'"{n}"' in text]
        assert not found, f"{path.name} names slots {found}"


def test_no_c_source_is_over_700_lines():
    for path in DRIVER.glob("_native*.[ch]"):
        assert len(path.read_text().splitlines()) <= 700, path.name


def test_the_twin_table_of_the_docstring_is_the_mapping():
    doc = c_entry.__doc__ or ""
    rows = dict(re.findall(r"^(\S+(?: \S+)*?)\s{2,}(cudagraph\.\S+)$", doc, re.MULTILINE))
    expected = {k: v.replace(":", ".") for k, v in c_entry.PYTHON_TWINS.items()}
    assert rows == expected


@pytest.mark.parametrize("compiled", sorted(c_entry.PYTHON_TWINS))
def test_every_twin_is_importable_python(compiled):
    twin = inspect.unwrap(resolve(c_entry.PYTHON_TWINS[compiled]))  # the compiled bind wraps its twin
    assert inspect.isfunction(twin) or (
        inspect.isclass(twin) and all(inspect.isfunction(getattr(twin, m)) for m in ("run", "use", "put"))
    ), f"the twin of {compiled} is not Python code: {twin!r}"


@needs_native
def test_every_compiled_entry_point_has_a_twin():
    named = {re.split(r"[.(]", key)[0] for key in c_entry.PYTHON_TWINS}
    public = {n for n in dir(native) if not n.startswith("_")} - {"declare_slots"}
    assert public == named | set(c_entry.LIBRARY_TWINS)
    for key in c_entry.PYTHON_TWINS:  # the methods named exist
        if "." in key:
            cls, method = key.split(".")
            assert callable(getattr(getattr(native, cls), method))


# --------------------------------------------------------------------------- refusals

SET_PROTO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
CALLBACK = SET_PROTO(lambda e, n, p: 0)
ADDRESS = ctypes.cast(CALLBACK, ctypes.c_void_p).value


def without(base: type, name: str) -> type:
    """A class like ``base`` (its slots copied) but without the slot ``name``."""
    slots = tuple(s for s in base.__slots__ if s != name)  # type: ignore[attr-defined]
    return type(base.__name__, base.__bases__, {"__slots__": slots})


class Unrelated:
    __slots__ = ("grid",)


def build(role: str, cls: type) -> Any:
    """Make the compiled type that reads ``role``'s slots over ``cls``."""
    if role == "kernel_node":
        return native.KernelLoop(ADDRESS, 1, 1, cls, Node)
    if role == "node":
        return native.Layout(type("K", (cls,), {"__slots__": KernelNode.__slots__}), cls)
    if role == "parameter_dtype":  # Layout.params reads it (and "parameter")
        return native.Layout(KernelNode, Node).params(cls)
    simple = ("memset_node", "memcpy_node", "parameter", "parameter_at")
    if role in simple:  # KernelLoop.simple reads all four
        kinds = {r: cls if r == role else resolve(c_entry.SLOT_OWNERS[r]) for r in simple}
        loop = native.KernelLoop(ADDRESS, 1, 1, KernelNode, Node)
        return loop.simple(
            1,
            0,
            1 << 16,
            kinds["memset_node"],
            kinds["memcpy_node"],
            EmptyNode,
            0,
            *[kinds["parameter"], kinds["parameter_at"]],
            None,
        )
    owners = {r: resolve(c_entry.SLOT_OWNERS[r]) for r in ("executable", "bind_plan")}
    if role in owners:
        owners[role] = cls
        native.BindMethod(lambda self, **kw: 0, owners["executable"], owners["bind_plan"], set())
    # BindManyMethod reads every role but the nodes': (executable, bind_plan, patch_plan, value_check, memory_check)
    order = ("executable", "bind_plan", "patch_plan", "value_check", "memory_check")
    types_ = [cls if r == role else resolve(c_entry.SLOT_OWNERS[r]) for r in order]
    return native.BindManyMethod(lambda self, params: 0, *types_, {}, set())


@needs_native
@pytest.mark.parametrize("role", sorted(c_entry.NATIVE_SLOTS))
def test_a_class_lacking_a_declared_slot_is_refused(role):
    owner = resolve(c_entry.SLOT_OWNERS[role])
    build(role, owner)  # the real class is taken
    for name in c_entry.NATIVE_SLOTS[role]:
        base = next(c for c in owner.__mro__ if name in c.__dict__.get("__slots__", ()))
        if base is not owner:
            continue  # (a slot of a base: every subclass has it)
        lacking = without(owner, name)
        with pytest.raises(AttributeError, match=rf"has no attribute '{name}'.*NATIVE_SLOTS\['{role}'\]"):
            build(role, lacking)


@needs_native
def test_an_attribute_that_is_not_an_object_slot_of_the_class_is_refused():
    class Property(Node):
        __slots__ = tuple(s for s in KernelNode.__slots__ if s != "grid")
        grid = property(lambda self: (1, 1, 1))

    class Borrowed(Node):  # another class's member descriptor: its offset means nothing here
        __slots__ = tuple(s for s in KernelNode.__slots__ if s != "grid")
        grid = Unrelated.__dict__["grid"]

    for cls in (Property, Borrowed):
        with pytest.raises(TypeError, match=r"grid is not an object slot.*NATIVE_SLOTS\['kernel_node'\]"):
            native.KernelLoop(ADDRESS, 1, 1, cls, Node)
        with pytest.raises(TypeError, match="not an object slot"):
            native.Layout(cls, Node)


@needs_native
def test_a_declaration_of_another_shape_is_refused_and_the_module_keeps_working():
    try:
        native.declare_slots({**c_entry.NATIVE_SLOTS, "node": ("_preds",)})
        with pytest.raises(ValueError, match=r"NATIVE_SLOTS\['node'\] names 1 slots; the compiled module reads 2"):
            native.Layout(KernelNode, Node)
        native.declare_slots({k: v for k, v in c_entry.NATIVE_SLOTS.items() if k != "node"})
        with pytest.raises(RuntimeError, match="declares no 'node'"):
            native.KernelLoop(ADDRESS, 1, 1, KernelNode, Node)
        for bad in ([], {"node": ["_preds", "index"]}, {1: ("a",)}, {"node": ("_preds", 2)}):
            with pytest.raises(TypeError, match="declare_slots"):
                native.declare_slots(bad)
    finally:
        native.declare_slots(dict(c_entry.NATIVE_SLOTS))
    native.Layout(KernelNode, Node)


@needs_native
def test_without_a_declaration_the_compiled_types_refuse_to_be_made():
    code = (
        "import cudagraph.driver._native as n\n"
        "from cudagraph.definition.nodes import KernelNode, Node\n"
        "try:\n"
        "    n.Layout(KernelNode, Node)\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(cudagraph.__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "no slot list was declared" in proc.stdout


@needs_native
def test_the_compiled_methods_refuse_a_func_that_is_not_callable():
    owners = {r: resolve(c_entry.SLOT_OWNERS[r]) for r in c_entry.SLOT_OWNERS}
    with pytest.raises(TypeError, match=r"^BindMethod: func must be callable$"):
        native.BindMethod(42, owners["executable"], owners["bind_plan"], set())
    order = ("executable", "bind_plan", "patch_plan", "value_check", "memory_check")
    with pytest.raises(TypeError, match=r"^BindManyMethod: func must be callable$"):
        native.BindManyMethod("nope", *(owners[r] for r in order), {}, set())

    def python(self: Any, params: Any) -> tuple[str, Any, Any]:
        return ("python", self, params)

    made = native.BindManyMethod(python, *(owners[r] for r in order), {}, set())
    assert made.func is python and made("not an executable", {}) == ("python", "not an executable", {})


@needs_native
@pytest.mark.parametrize("compiled", sorted(c_entry.LIBRARY_TWINS))
def test_every_library_twin_resolves_and_the_compiled_type_has_its_methods(compiled):
    twin = resolve(c_entry.LIBRARY_TWINS[compiled])
    assert getattr(twin, "__module__", None) in ("_thread", "threading")
    made, reference = getattr(native, compiled)(), twin()
    for name in ("acquire", "release", "locked", "__enter__", "__exit__"):
        assert callable(getattr(made, name)) and callable(getattr(reference, name))
