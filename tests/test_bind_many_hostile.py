"""The compiled ``Executable._bind_many`` against hostile values: Python code it runs must not crash it.

``BindManyMethod`` runs Python code in a few places: the readers of new values
(an array's ``__cuda_array_interface__`` property), ``int()`` of a Buffer's
``handle``, the hash and ``__eq__`` of a layout key, the lock's ``acquire``
and ``release``, the release of the values it replaces and, in these tests, the driver itself
(a ctypes callback). Each test makes that code close the executable, replace
its dicts and plans, raise, or free what the C code was reading (then
overwrites the freed memory), in a fresh interpreter with ``-X faulthandler``:
the failure mode is a crash. The executable, plans and checks are classes with
the declared slots (``NATIVE_SLOTS``), and the real ``__cuda_array_interface__``
reader of ``bind_checks``; ``-1`` printed means the call went to the twin.
"""

from __future__ import annotations

import textwrap

import pytest

from test_native_hostile import needs_native, run_script

pytestmark = needs_native

SETUP = """
import ctypes, struct, threading
from cudagraph.executable.bind_checks import _cai

def slotted(name, role, **extra):
    return type(name, (), {"__slots__": NATIVE_SLOTS[role], **extra})

def refuse(self, e, i, rc):
    raise RuntimeError(f"refused {e} {i} {rc}")

Exe = slotted("Exe", "executable")
BPlan = slotted("BPlan", "bind_plan", refused=refuse)
PPlan = slotted("PPlan", "patch_plan", refused=refuse)
Check = slotted("Check", "value_check")
Mem = slotted("Mem", "memory_check")

class Arr:
    def __init__(self, ptr, hook=None, shape=(4,)):
        self.ptr, self.hook, self.shape = ptr, hook, shape

    @property
    def __cuda_array_interface__(self):
        if self.hook is not None:
            self.hook()
        return {"data": (self.ptr, False), "shape": self.shape, "typestr": "<f4", "strides": None}

class HBuf:
    def __init__(self, handle):
        self.handle = handle

READERS = {Arr: _cai}
BUFFERS = {HBuf}
Exe._bind_many = native.BindManyMethod(lambda self, params: -1, Exe, BPlan, PPlan, Check, Mem, READERS, BUFFERS)
seen, refused_nodes = [], set()
SETTER = SET(lambda e, n, p: seen.append(n) or (1 if n in refused_nodes else 0))
BUF = ctypes.create_string_buffer(64)
PARAMS = ctypes.create_string_buffer(256)
WRITES = struct.pack("<qqq", 0, 0, 0) + struct.pack("<qqq", 8, 1, 16)

def make(memory=True):
    e = Exe()
    e._exec, e._exec_addr = 1, 0x4242
    e._raw_bound = {}
    e._bindings = {"x": 0x1000, "out": 0x2000}
    m = Mem()
    m.passed = {(Arr, "<f4", (4,), None): None}
    checks = {}
    for name in ("x", "out"):
        c = checks[name] = Check()
        c.scalar, c.memory = False, m if memory else None
    e._checks = checks
    p = PPlan()
    p.entries = [(address(SETTER), ctypes.addressof(BUF), 64, WRITES, ctypes.addressof(PARAMS), [0x31, 0x32])]
    p.codes, p.general, p.count, p.native = (None, None), [], 2, True
    e._plans = {("x", "out"): p}
    e._lock = threading.Lock()
    e.update_calls = 10**15 + 3  # an int of its own, freed when replaced
    return e

def words():
    return struct.unpack("<QQ", BUF.raw[:16])
"""


def script(body: str, in_c: bool = False) -> list[str]:
    """Run ``body`` after SETUP; ``in_c``: the arrays' ``__cuda_array_interface__`` read by the compiled method
    itself (``cai_readers``), not through the ``_cai`` reader's Python frame."""
    if in_c:
        body = CAI_IN_C + textwrap.dedent(body)
    return run_script(SETUP, body).split()


CAI_IN_C = """
from cudagraph.executable.bind_checks import _cai_device
Exe._bind_many = native.BindManyMethod(
    lambda self, params: -1, Exe, BPlan, PPlan, Check, Mem, READERS, BUFFERS, cai_readers=(_cai, _cai_device)
)
"""


@pytest.mark.parametrize("in_c", [False, True])
def test_the_plain_case_runs_the_plan_and_writes_the_state(in_c):
    out = script(
        """
        e = make()
        a, b = Arr(0x3000), Arr(0x4000)
        r = e._bind_many({"x": a, "out": b})
        print(r, e.update_calls - 10**15, seen == [0x31, 0x32], words() == (0x3000, 0x4010))
        print(e._bindings == {"x": 0x3000, "out": 0x4000}, e._raw_bound["x"] is a, e._raw_bound["out"] is b)
        print(e._bind_many({"x": a, "out": b}), e._bind_many({"x": Arr(0x3000), "out": Arr(0x4000)}), len(seen))
        print(e._bind_many({"x": Arr(0x5000, shape=(8,)), "out": b}))  # a layout not checked: the twin
        print(e._bind_many({"x": 0x3000, "out": b}), e._bind_many({"x": 0x9000, "out": b}))  # bound / not bound
        e2 = make(memory=False)
        print(e2._bind_many({"x": HBuf(0x7000), "out": 0x8000}), e2._bindings, words() == (0x7000, 0x8010))
        print(e2._bind_many({"x": HBuf(0), "out": 0x8000}), e2._bind_many({"x": -1, "out": 0x8000}))
        print(e2._bind_many({1: 2, "x": 3}), e2._bind_many({f"n{i}": i for i in range(9)}))
        """,
        in_c,
    )
    assert out == (
        ["2", "5", "True", "True", "True", "True", "True", "0", "0", "2", "-1", "0", "-1"]
        + ["2", "{'x':", "28672,", "'out':", "32768}", "True", "-1", "-1", "-1", "-1"]
    )


def test_a_refusal_writes_the_bindings_and_raises_through_the_plan():
    out = script(
        """
        e = make()
        refused_nodes.add(0x32)
        try:
            e._bind_many({"x": Arr(0x3000), "out": Arr(0x4000)})
        except RuntimeError as exc:
            print(exc)
        print(e.update_calls - 10**15, e._bindings == {"x": 0x3000, "out": 0x4000}, seen == [0x31, 0x32])
        """
    )
    assert out == ["refused", "0", "1", "1", "3", "True", "True"]


@pytest.mark.parametrize(
    "mutation",
    [
        "e._exec = None",
        "e._plans = {}; e._checks = {}; overwrite(200)",
        "e._bindings = {'x': 0x3000, 'out': 0x2000}",
        "e._raw_bound = None; e._bindings = 5; overwrite(100)",
        "e._exec_addr = 'no'; e.update_calls = None",
        "raise ValueError('no array today')",
        "M.passed = {}; overwrite(300)",
        "e._lock = None",
    ],
)
@pytest.mark.parametrize("in_c", [False, True])
def test_a_reader_that_changes_the_executable_sends_the_call_to_the_twin(mutation, in_c):
    out = script(
        f"""
        e = make()
        M = e._checks["x"].memory

        def hook():
            {mutation}

        print(e._bind_many({{"x": Arr(0x3000), "out": Arr(0x4000, hook)}}), len(seen))
        """,
        in_c,
    )
    assert out == ["-1", "0"]


@pytest.mark.parametrize(
    "mutation",
    [
        "e._exec = None",
        "e._plans = {}; e._checks = {}; overwrite(200)",
        "M.passed = {}; overwrite(300)",
        "raise ValueError",
    ],
)
def test_one_name_left_by_the_compiled_bind_goes_to_the_compiled_bind_many_and_survives_its_reader(mutation):
    """``exe.bind(x=a)`` of an array the one-name path leaves: the class's compiled ``_bind_many`` decides it (a
    plan for ``x`` alone runs; none: the twin), and a reader that changes the executable sends it to the twin."""
    out = script(
        f"""
        Exe.bind = native.BindMethod(lambda self, **params: -2, Exe, BPlan, BUFFERS)
        e = make()
        M = e._checks["x"].memory
        p = e._plans["x"] = e._plans[("x", "out")]  # the same entry, writing x alone
        p.entries = [p.entries[0][:3] + (struct.pack("<qqq", 0, 0, 0),) + p.entries[0][4:]]
        p.codes, p.count = (None,), 1
        print(e.bind(x=Arr(0x3000)), e._bindings["x"] == 0x3000, e.bind(out=Arr(0x4000)))  # out: no plan of its own

        def hook():
            {mutation}

        print(e.bind(x=Arr(0x5000, hook)), e._bindings["x"] == 0x3000)
        """,
        True,
    )
    assert out[:3] == ["1", "True", "-2"] and out[3:] == ["-2", "True"]


@pytest.mark.parametrize("in_c", [False, True])
def test_a_key_whose_eq_frees_the_passed_layouts_cannot_make_it_read_freed_memory(in_c):
    out = script(
        """
        class Shape(tuple):
            def __hash__(self):
                return hash((4,))

            def __eq__(self, other):
                M.passed = {}  # frees the dict being searched
                e._plans = {}
                overwrite(300)
                return True

        e = make()
        M = e._checks["x"].memory
        print(e._bind_many({"x": Arr(0x3000), "out": Arr(0x4000, shape=Shape((4,)))}), len(seen))
        """,
        in_c,
    )
    assert out == ["-1", "0"]  # (the layout passed, but the plan is gone: the twin)


def test_a_handle_whose_int_closes_the_executable():
    out = script(
        """
        class Handle:
            def __index__(self):
                e._exec = None
                e._plans = {}
                overwrite(200)
                return 0x7000

        e = make(memory=False)
        print(e._bind_many({"x": HBuf(Handle()), "out": 0x8000}), len(seen))
        """
    )
    assert out == ["-1", "0"]


def test_a_lock_whose_acquire_replaces_the_state():
    out = script(
        """
        class Lock:
            def acquire(self, blocking=True):
                e._plans = {}
                e._bindings = {"x": 0x1000, "out": 0x2000}
                overwrite(300)
                return True

            def release(self):
                overwrite(300)

        e = make()
        e._lock = Lock()
        print(e._bind_many({"x": Arr(0x3000), "out": Arr(0x4000)}), len(seen))
        e = make()
        e._lock = threading.Lock()
        e._lock.acquire()
        print(e._bind_many({"x": Arr(0x3000), "out": Arr(0x4000)}), len(seen))
        """
    )
    assert out == ["-1", "0", "-1", "0"]


def test_a_driver_that_replaces_everything_while_the_plan_runs():
    out = script(
        """
        e = make()
        plan = e._plans[("x", "out")]

        def setter(ex, n, p):
            plan.entries[0][5].clear()
            plan.entries.clear()
            e._plans = {}
            e._bindings = {}
            e._raw_bound = {}
            e.update_calls = 7
            overwrite(300)
            return 0

        cb = SET(setter)
        plan.entries[0] = (address(cb),) + plan.entries[0][1:]
        print(e._bind_many({"x": Arr(0x3000), "out": Arr(0x4000)}), e.update_calls)
        """
    )
    assert out == ["2", "9"]  # the count added to the one the driver left


def test_values_replaced_are_released_after_every_write():
    out = script(
        """
        log = []

        class Old:
            def __del__(self):
                log.append((dict(e._bindings), sorted(e._raw_bound)))
                e._bindings = {}
                overwrite(100)

        e = make()
        e._raw_bound = {"x": Old(), "out": Old()}
        print(e._bind_many({"x": Arr(0x3000), "out": Arr(0x4000)}), e.update_calls - 10**15)
        print(log[0] == ({"x": 0x3000, "out": 0x4000}, ["out", "x"]), len(log))
        """
    )
    assert out == ["2", "5", "True", "2"]
