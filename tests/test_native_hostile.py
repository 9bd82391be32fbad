"""The compiled module against hostile objects: Python code it runs must not make it read freed memory.

The compiled loops call into Python in a few places: ``int()`` of a buffer's
``handle``, a type's ``__hash__``/``__eq__`` in a set or dict lookup, a lock's
``acquire`` and ``release``, the collector when a tuple is allocated, and, in these tests, the
driver itself (a ctypes callback). Each test below makes that Python code change
what the C code was reading (replace a node's arguments, grow its predecessors,
empty a list, replace the executable's state) and then overwrites the memory it
freed, so a borrowed reference kept across the call crashes the interpreter.
They run in a subprocess with ``-X faulthandler``: the failure mode is a crash.
"""

from __future__ import annotations

import pytest

from cudagraph.driver import c_entry
from driver_fakes import run_fresh

needs_native = pytest.mark.skipif(c_entry.NATIVE is None, reason="cudagraph.driver._native was not built")
pytestmark = needs_native


PRELUDE = """
import array, ctypes, gc, random, struct, sys
import cudagraph as cg
from cudagraph.definition.nodes import KernelNode, Node
from cudagraph.driver.c_entry import NATIVE as native, NATIVE_SLOTS

ADD = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                       ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
SET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)

def address(cb):
    return ctypes.cast(cb, ctypes.c_void_p).value

def added(out, graph, deps, edata, n, params):
    out[0] = 0x1000
    return 0

ADDED = ADD(added)
PARAMS = ctypes.create_string_buffer(256)

def adding_loop(fn=ADDED):
    return native.KernelLoop(address(fn), 1, ctypes.addressof(PARAMS), KernelNode, Node)

PTRS = (ctypes.c_void_p * 64)()

def use(loop, kernel, kinds, offsets, sizes, scratch, size):
    # (function 0x70, a CUkernel; the kernelParams array PTRS; no owner to keep alive)
    loop.use(kernel, kinds, offsets, sizes, scratch, size, 0x70, True, ctypes.addressof(PTRS), None)

class CUkernel:  # the definition layer recognises kernels by type name
    pass

K = CUkernel()
JUNK = []

def overwrite(size, count=300, fill=b"A"):
    # Allocate objects of the size just freed: a dangling pointer now reads these bytes.
    JUNK.extend(fill * size for _ in range(count))
"""


def run_script(*parts: str) -> str:
    """Run PRELUDE and ``parts`` in a fresh interpreter with faulthandler on; its stdout (a crash fails)."""
    return run_fresh(PRELUDE, *parts)


def test_packing_holds_the_arguments_while_int_of_a_handle_replaces_them():
    out = run_script(
        """
        g = cg.Graph()
        node = g.kernel(K, 1, 32, (0x9000,))

        class Handle:
            def __int__(self):
                node.args = (1, 2)  # frees the tuple being packed and its buffers
                overwrite(10)
                return 0x9000

        class HBuf:
            __slots__ = ("handle",)
            def __init__(self, h):
                self.handle = h

        scratch = ctypes.create_string_buffer(16)
        loop = adding_loop()
        use(loop, K, {(HBuf, HBuf): b"HH"}, (0, 8), (8, 8), ctypes.addressof(scratch), 16)
        node.args = (HBuf(Handle()), HBuf(Handle()))
        done = loop.run([node], 0, [0])
        gc.collect()
        print(done, type(loop.args[0]).__name__, loop.done)
        """
    )
    assert out.split() == ["0", "HBuf", "0"]  # packed as it was, but the node changed: left to Python


def test_signature_compares_types_by_identity_and_runs_no_python_code():
    out = run_script(
        """
        g = cg.Graph()
        k0 = g.kernel(K, 1, 32, (0x9000,))
        armed = []

        class Meta(type):
            def __hash__(cls):
                armed.append("hash")
                k0._preds.extend([k0] * 200000)
                return 12345

            def __eq__(cls, other):
                armed.append("eq")
                return cls is other

        class Hostile(Node, metaclass=Meta):
            __slots__ = ()

        class Other(Node, metaclass=Meta):
            __slots__ = ()

        h = Hostile.__new__(Hostile)
        h.graph, h.index, h.name, h._preds = g, 1, "h", [k0]
        layout = native.Layout(KernelNode, Node)
        sig = layout.signature([k0, h], (KernelNode, Other, Hostile))
        print(sig == array.array("i", [1, 5, 0]).tobytes(), len(k0._preds), armed)
        print(layout.signature([k0, h], (KernelNode, Other)))
        print(armed)
        """
    )
    assert out.splitlines() == ["True 0 []", "None", "[]"]


def test_diff_holds_the_node_and_arguments_a_hash_frees():
    out = run_script(
        """
        g = cg.Graph()
        node = g.kernel(K, 1, 32, (0x9000,))
        nodes, states = [node], [None]

        class Meta(type):
            def __hash__(cls):
                nodes.clear()
                states.clear()
                node_ref.clear()
                overwrite(90, 500)
                return 1

            def __eq__(cls, other):
                return cls is other

        class Arg(metaclass=Meta):
            pass

        node.args = (Arg(), Arg())
        states[0] = (K, node.grid, node.block, node.shared_mem, (Arg(), Arg()), None)
        node_ref = [node]
        g._nodes.clear()
        del g, node
        changed, suspects = native.Layout(KernelNode, Node).diff(nodes, states, set())
        print([type(x).__name__ for x in changed], suspects)
        """
    )
    assert out.split() == ["[]", "[0]"]


def test_bytes_kind_is_checked_before_the_bytes_are_read():
    out = run_script(
        """
        g = cg.Graph()
        node = g.kernel(K, 1, 32, (0x9000,))
        size = 256 << 20
        scratch = (ctypes.c_char * size)()
        loop = adding_loop()
        use(loop, K, {(float,): b"B"}, (0,), (size,), ctypes.addressof(scratch), size)
        node.args = (struct.unpack("<d", struct.pack("<q", size))[0],)  # a float whose bits read as that size
        print(loop.run([node], 0, [0]))
        """
    )
    assert out.split() == ["0"]


def test_bytes_kind_refuses_an_int_whose_size_field_matches():
    loop_out = run_script(
        """
        g = cg.Graph()
        node = g.kernel(K, 1, 32, (0x9000,))
        scratch = ctypes.create_string_buffer(8)
        loop = adding_loop()
        use(loop, K, {(int,): b"B"}, (0,), (8,), ctypes.addressof(scratch), 8)
        node.args = (1 << (30 * 7),)  # eight digits: its size field reads 8
        print(loop.run([node], 0, [0]), scratch.raw == bytes(8))
        """
    )
    assert loop_out.split() == ["0", "True"]


def test_a_refused_use_leaves_the_loop_as_it_was():
    out = run_script(
        """
        g = cg.Graph()
        node = g.kernel(K, 1, 32, (0x9000,))
        scratch = ctypes.create_string_buffer(16)
        loop = adding_loop()
        kinds = {(int,): b"P"}
        use(loop, K, kinds, (0,), (8,), ctypes.addressof(scratch), 16)
        try:
            use(loop, K, kinds, (1 << 40, 0), (8, -1), ctypes.addressof(scratch), 1 << 41)
        except ValueError as e:
            print("refused")
        print(loop.run([node], 0, [0]), struct.unpack("<Q", scratch.raw[:8])[0] == 0x9000)
        """
    )
    assert out.split() == ["refused", "1", "True"]


BIND_SETUP = """
ExeSlots, PlanSlots = NATIVE_SLOTS["executable"], NATIVE_SLOTS["bind_plan"]
Exe = type("Exe", (), {"__slots__": ExeSlots})
Plan = type("Plan", (), {"__slots__": PlanSlots})
seen = []
SETTER = SET(lambda e, n, p: seen.append(n) or 0)

def python_bind(self, **kw):
    return -1

Exe.bind = native.BindMethod(python_bind, Exe, Plan, set())
BUF = ctypes.create_string_buffer(16)

def make(groups=1):
    e = Exe()
    e._exec, e._exec_addr = 1, 0x4242
    e._raw_bound, e._bindings = {"p": 0x1000}, {"p": 0x1000}
    p = Plan()
    p.pointer_groups = [(ctypes.addressof(BUF), 16, (0,), 0x700, [0x31, 0x32]) for _ in range(groups)]
    p.set_address, p.count = address(SETTER), 2 * groups
    e._plans = {"p": p}
    e.update_calls = 10**15 + 3  # an int of its own, freed when replaced
    return e
"""


def test_bind_reads_the_executable_after_the_lock_is_taken():
    out = run_script(
        BIND_SETUP,
        """
        class Lock:
            def acquire(self, blocking=True):
                e._plans = {}  # frees the plan and its groups
                e.update_calls = 7
                JUNK.extend(b"A" * 7967 for _ in range(50))  # the size of the freed list of groups
                return True

            def release(self):
                pass

        e = make(1000)
        e._lock = Lock()
        print(e.bind(p=0x2000), e.update_calls, len(seen))
        """,
    )
    assert out.split() == ["-1", "7", "0"]  # no plan any more: the Python method


def test_bind_adds_its_updates_to_the_count_as_the_lock_left_it():
    out = run_script(
        BIND_SETUP,
        """
        class Lock:
            def acquire(self, blocking=True):
                e.update_calls = 7
                overwrite(20)
                return True

            def release(self):
                overwrite(20)

        e = make()
        e._lock = Lock()
        print(e.bind(p=0x2000), e.update_calls, e._bindings["p"] == 0x2000, len(seen))
        """,
    )
    assert out.split() == ["2", "9", "True", "2"]


def test_a_driver_that_runs_python_code_cannot_pull_the_lists_from_under_the_loops():
    out = run_script(
        """
        groups = []

        def setter(e, n, p):
            groups.clear()
            overwrite(40)
            return 0

        S = SET(setter)
        buf = ctypes.create_string_buffer(16)
        groups.extend((ctypes.addressof(buf), 16, (0,), 0x700, [0x31 + i, 0x40]) for i in range(4))
        print(native.rebind(address(S), 0x42, groups, 7))
        g = cg.Graph()
        order = [g.kernel(K, 1, 32, (0x9000 + i,)) for i in range(20)]
        raw = [0] * 20

        def shrink(out, graph, deps, edata, n, params):
            raw.clear()
            out[0] = 0x1000
            return 0

        A = ADD(shrink)
        loop = adding_loop(A)
        scratch = ctypes.create_string_buffer(8)
        use(loop, K, {(int,): b"P"}, (0,), (8,), ctypes.addressof(scratch), 8)
        print(loop.run(order, 0, raw), loop.rc)
        """
    )
    assert out.split() == ["None", "0", "-1"]


def test_the_loop_refuses_calls_from_the_code_it_runs():
    out = run_script(
        """
        g = cg.Graph()
        node = g.kernel(K, 1, 32, (0x9000,))
        errors = []
        loop = adding_loop()

        class Handle:
            def __int__(self):
                for call in (lambda: use(loop, K, {}, (), (), 0, 0), lambda: loop.run([node], 0, [0]),
                             lambda: setattr(loop, "args", None), lambda: loop.write_dims(node)):
                    try:
                        call()
                    except RuntimeError as e:
                        errors.append(str(e))
                return 0x9000

        class HBuf:
            handle = Handle()

        scratch = ctypes.create_string_buffer(8)
        use(loop, K, {(HBuf,): b"H"}, (0,), (8,), ctypes.addressof(scratch), 8)
        node.args = (HBuf(),)
        print(loop.run([node], 0, [0]), len(errors), all("running a call" in e for e in errors))
        try:
            loop.__init__(address(ADDED), 1, ctypes.addressof(PARAMS), KernelNode, Node)
        except RuntimeError as e:
            print("again" if "already initialized" in str(e) else e)
        """
    )
    assert out.split() == ["1", "4", "True", "again"]


def test_a_table_of_many_kernels_holds_them_while_python_code_runs_and_drops_them_whole():
    """Forty kernels interleaved (the table grows four times), packing code that tries to change the table,
    the definition dropped while the loop holds its kernels, and a kernel whose __del__ uses the loop."""
    out = run_script(
        """
        errors = []

        class Handle:
            def __int__(self):
                for call in (lambda: use(loop, CUkernel(), {}, (), (), 0, 0), lambda: setattr(loop, "args", None)):
                    try:
                        call()
                    except RuntimeError as e:
                        errors.append(str(e))
                overwrite(64)
                return 0x9000

        class HBuf:
            __slots__ = ("handle",)
            def __init__(self):
                self.handle = Handle()

        def dying(self):
            try:
                use(loop, CUkernel(), {}, (), (), 0, 0)  # the loop is being cleared: a fresh table
            except Exception:  # (NameError once the loop is gone)
                pass

        Dying = type("CUkernel", (CUkernel,), {"__del__": dying})

        kernels = [Dying() for _ in range(40)]
        scratch = [ctypes.create_string_buffer(8) for _ in kernels]
        g = cg.Graph()
        order = [g.kernel(kernels[(7 * i) % 40], 1, 32, (0x9000,)) for i in range(120)]
        for node in order:
            node.args = (HBuf(),)  # (not memory the definition layer accepts: set past its checks)
        loop = adding_loop()
        for k, buf in zip(kernels, scratch):
            use(loop, k, {(HBuf,): b"H"}, (0,), (8,), ctypes.addressof(buf), 8)
        del kernels, k, node
        raw = [0] * 120
        print(loop.run(order, 0, raw), loop.done, len(errors), all("running a call" in e for e in errors))
        print(all(struct.unpack("<Q", b.raw)[0] == 0x9000 for b in scratch))
        del order, g
        gc.collect()
        print(type(loop.kernel).__name__)
        holder = [loop]  # a cycle through the loop's table: the collector clears it
        loop.use(Dying(), {}, (), (), 0, 0, 0x70, True, 0, holder)
        del loop, holder
        gc.collect()
        print("cleared")
        """
    )
    assert out.split() == ["120", "120", "240", "True", "True", "CUkernel", "cleared"]


FUZZ = """
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
g = cg.Graph()
order = [g.kernel(K, 1, 32, (0x9000,)) for _ in range(12)]
for i in range(1, 12):
    order[i]._preds.append(order[rng.randrange(i)])
world = {"order": list(order), "raw": [0x100 + i for i in range(12)], "states": [], "groups": [], "nodes": []}
loop = None
active = []  # hostile only while a compiled entry point runs

def mutate():
    if not active:
        return
    what = rng.randrange(12)
    node = rng.choice(order)
    if what == 0:
        rng.choice(list(world.values())).clear()
    elif what == 1:
        node.args = tuple(make_arg() for _ in range(rng.randrange(3)))
    elif what == 2:
        node._preds.extend(rng.choice(order) for _ in range(rng.randrange(1, 200)))
    elif what == 3:
        node._preds = []
    elif what == 4:
        node.grid = rng.choice([(1, 1, 1), None, "x", (1 << 40, 1, 1)])
    elif what == 5:
        raise ValueError("hostile")
    elif what == 6:
        gc.collect()
    elif what == 7 and loop is not None:
        try:
            use(loop, K, {}, (), (), 0, 0)
        except RuntimeError:
            pass
    elif what == 8:
        world["raw"][:] = [make_arg() for _ in range(rng.randrange(4))]
    elif what == 9:
        overwrite(rng.choice([10, 20, 40, 90]), 20)
    elif what == 10:
        node.index = rng.choice([0, 5, -1, 1 << 70, None])
    else:
        node.kernel = rng.choice([K, None])

class Meta(type):
    def __hash__(cls):
        if rng.random() < 0.5:
            mutate()
        return 7

    def __eq__(cls, other):
        if rng.random() < 0.3:
            mutate()
        return cls is other

class Hostile(metaclass=Meta):
    def __int__(self):
        mutate()
        return rng.choice([0x9000, -1, 1 << 70])

    def __index__(self):
        mutate()
        return 0x9000

    def __hash__(self):
        mutate()
        return 7

    def __eq__(self, other):
        mutate()
        return rng.random() < 0.5

class HBuf(metaclass=Meta):
    @property
    def handle(self):
        mutate()
        return rng.choice([Hostile(), 0x9000, "x"])

class HNode(Node, metaclass=Meta):
    __slots__ = ()

def make_arg():
    return rng.choice([Hostile(), HBuf(), 0x9000, b"12345678", 2.5, rng.randrange(1 << 70), None])

def hostile_driver(*args):
    if rng.random() < 0.3:
        try:
            mutate()
        except Exception:
            pass
    if len(args) == 6:
        args[0][0] = 0x2000
    return rng.choice([0, 0, 0, 1])

ADDC, SETC = ADD(hostile_driver), SET(hostile_driver)
scratch = ctypes.create_string_buffer(64)
layout = native.Layout(KernelNode, Node)
Exe = type("Exe", (), {"__slots__": NATIVE_SLOTS["executable"]})
Plan = type("Plan", (), {"__slots__": NATIVE_SLOTS["bind_plan"]})
Exe.bind = native.BindMethod(lambda self, **kw: -1, Exe, Plan, {HBuf})

class Lock:
    def acquire(self, blocking=True):
        mutate()
        return rng.random() >= 0.2

    def release(self):
        mutate()

calls = 0
for step in range(int(sys.argv[2]) if len(sys.argv) > 2 else 300):
    set_mode = rng.random() < 0.3
    loop = native.KernelLoop(address(SETC if set_mode else ADDC), 1, ctypes.addressof(PARAMS), KernelNode, Node,
                             set_mode)
    for node in order:
        if rng.random() < 0.5:
            node.args = tuple(make_arg() for _ in range(rng.randrange(1, 4)))
        node.kernel, node.grid, node.index = K, (1, 1, 1), order.index(node)
    world["order"][:] = order
    world["raw"][:] = [0x100 + i for i in range(12)]
    n = rng.randrange(1, 4)
    kinds = {tuple(rng.choice([Hostile, HBuf, int, bytes, float]) for _ in range(n)):
             bytes(rng.choice(b"PSBHX") for _ in range(n)) for _ in range(6)}
    active.append(1)
    try:
        use(loop, K, kinds, tuple(8 * i for i in range(n)), (8,) * n, ctypes.addressof(scratch), 64)
        for call in range(4):
            calls += 1
            which = rng.randrange(4)
            if which == 0:
                loop.run(world["order"], rng.randrange(3), world["raw"])
            elif which == 1:
                loop.put(rng.choice(order), world["raw"])
            elif which == 2 and not loop.rc:
                loop.add_with(rng.choice(order), world["raw"], ctypes.addressof(PARAMS))
            else:
                loop.write_dims(rng.choice(order))
    except Exception:
        pass
    try:
        h = HNode.__new__(HNode)
        h.graph, h.index, h.name, h._preds = g, 12, "h", [rng.choice(order)]
        world["nodes"][:] = order[: rng.randrange(13)] + [h]
        calls += 1
        layout.signature(world["nodes"], (HNode, Hostile))
        world["states"][:] = [(K, x.grid, x.block, x.shared_mem, tuple(make_arg() for _ in x.args), None)
                              for x in world["nodes"]]
        calls += 1
        layout.diff(world["nodes"], world["states"], {Hostile})
    except Exception:
        pass
    try:
        buf = ctypes.create_string_buffer(64)
        world["groups"][:] = [(ctypes.addressof(buf), 64, (0, 8), 0x700, [0x31, make_arg()]) for _ in range(3)]
        calls += 1
        native.rebind(address(SETC), 0x42, world["groups"], rng.choice([7, b"12345678"]))
        e = Exe()
        e._exec, e._exec_addr, e._lock, e.update_calls = 1, 0x4242, Lock(), rng.choice([0, 5, None])
        e._raw_bound = {rng.choice(["p", Hostile()]): make_arg()}
        e._bindings = {"p": rng.choice([0x9000, make_arg()]), Hostile(): 1}
        p = Plan()
        p.pointer_groups, p.set_address, p.count = world["groups"], address(SETC), 6
        e._plans = {"p": p, Hostile(): p}
        calls += 1
        e.bind(p=rng.choice([0x9000, 0x9100, HBuf(), Hostile()]))
    except Exception:
        pass
    active.clear()
gc.collect()
print("ok", calls)
"""


@pytest.mark.parametrize("seed", range(4))
def test_fuzz_the_entry_points_with_objects_that_mutate_the_graph_or_raise(seed):
    out = run_script(f"sys.argv = ['fuzz', '{seed}', '250']\n", FUZZ)
    assert out.startswith("ok ")
