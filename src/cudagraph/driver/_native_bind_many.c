/*
 * BindManyMethod: Executable._bind_many (several names rebound at once) with a compiled path for the
 * per-step case, `exe.launch(stream, x=t1, out=t2)` with fresh memory objects of a known layout.
 *
 * Python twin (see cudagraph.driver.c_entry): cudagraph.executable.binding.Binding._bind_many, the
 * Python method it wraps (its `func` and `__wrapped__`), which every call it does not take goes to.
 *
 * The call is `exe._bind_many(params)` (a dict of at most MAX_NAMES str keys). Each name is decided
 * as the twin decides it, but only where that needs no Python-level check:
 *
 *   - the object bound last (identity against the executable's raw bound values): unchanged;
 *   - a pointer parameter made by Graph.parametrize (its ValueCheck holds a MemoryCheck): an exact int
 *     equal to the address bound, or an object whose type has a reader (bind_checks._READERS) whose
 *     layout key already passed the full check (the reader, Python code, is called: its address);
 *   - another pointer parameter: an exact int in (0, 2**64), or an object of a type in `buffer_types`
 *     whose `handle` is a non-zero 64-bit address;
 *
 * and its address is compared with the one bound (equal: only the raw value is remembered). A scalar
 * parameter, a name without a ValueCheck yet, a value of any other kind, a layout not yet checked, a
 * reader that raises: the whole call goes to the twin, which checks, converts, names errors and makes
 * plans. Then the names that changed select the prepared plan (by the name, or the tuple of names in
 * the call's order, as the twin keys them): a PatchPlan made for the compiled `patch` with no user set
 * from fresh parameters, or a BindPlan made for the compiled `rebind`; no plan yet: the twin.
 *
 * Thread safety and state, as the twin's: the call takes the executable's lock without waiting
 * (`acquire(False)`; held elsewhere: the twin, which waits on it) and holds it to the write-back, the
 * driver calls releasing the GIL as cuda.bindings does. After the lock is taken (the last Python code of
 * the call, with a driver written in C) the state is read again and the decisions checked against it
 * (changed since: the twin), and nothing runs Python code until the bindings, raw values and update
 * count are written: the values replaced are released only after every write and after the lock. A
 * driver refusal leaves the state as the twin does (bindings written, no count added) and the plan's
 * `refused` raises the error naming the node. Every object used is held across the Python code that
 * runs (readers, `int()` of a handle, hashes in lookups, the lock's `acquire` and `release`).
 */
#include "_native.h"

#define MAX_NAMES 8

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func;                 /* the Python _bind_many(self, params): everything the fast path does not take */
    PyTypeObject *cls;              /* Executable */
    PyTypeObject *bind_plan_type;   /* BindPlan (exact type) */
    PyTypeObject *patch_plan_type;  /* PatchPlan (exact type) */
    PyTypeObject *check_type;       /* ValueCheck (exact type) */
    PyTypeObject *memory_type;      /* MemoryCheck (exact type) */
    PyObject *readers;              /* dict: type -> reader(value) -> (address, layout key), or None */
    PyObject *buffer_types;         /* set of types whose `handle` is the address */
    PyObject *torch_reader;         /* bind_checks._torch_tensor, the reader read here in C (NULL or None: none) */
    PyObject *torch_reads;          /* the 7 names it reads (see torch_address) */
    PyObject *cai_readers;          /* (bind_checks._cai, _cai_device), the readers read here in C (see cai_address) */
    PyObject *dict;                 /* __doc__, __name__, __wrapped__ ... (functools.update_wrapper) */
    cg_executable_slots ex;
    cg_bind_plan_slots pl;
    cg_patch_plan_slots pp;
    cg_value_check_slots vc;
    cg_memory_check_slots mc;
    int torch_dlpack; /* read tensors through DLPack's C exchange table where their type has one */
} BindManyMethod;
_Static_assert(offsetof(BindManyMethod, vectorcall) == offsetof(cg_method_head, vectorcall) &&
                   offsetof(BindManyMethod, func) == offsetof(cg_method_head, func) &&
                   (offsetof(BindManyMethod, dict) - offsetof(BindManyMethod, func)) % sizeof(PyObject *) == 0,
               "BindManyMethod starts with cg_method_head");

/* One name of the call. */
typedef struct {
    PyObject *name, *value; /* held */
    PyObject *address;      /* held: the new address (an exact int); NULL: the object bound (unchanged) */
    unsigned long long word;
    int same; /* the address is the one bound: only the raw value is remembered */
} one_name;

/* Look `key` up in `d` (held by the caller): the value held, or NULL (declined: no exception set). */
static PyObject *
get_held(PyObject *d, PyObject *key)
{
    PyObject *v = Py_XNewRef(PyDict_GetItemWithError(d, key));
    if (v == NULL)
        PyErr_Clear();
    return v;
}

/* The address of a non-parametrized pointer's `value`, held, or NULL (declined). May run Python code. */
static PyObject *
plain_address(BindManyMethod *m, PyObject *value)
{
    if (PyLong_CheckExact(value))
        return Py_NewRef(value);
    if (PySet_Contains(m->buffer_types, (PyObject *)Py_TYPE(value)) != 1)
        return NULL;
    PyObject *h = PyObject_GetAttr(value, cg_str_handle);
    PyObject *n = h == NULL ? NULL : PyNumber_Long(h);
    Py_XDECREF(h);
    return n;
}

/* Whether the sequences `a` and `b` (tuples, or tuple subclasses such as torch.Size) hold equal exact ints,
 * item by item. Runs no Python code. */
static int
same_ints(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (!PyTuple_Check(a) || !PyTuple_Check(b) || PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b))
        return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(a); k++) {
        PyObject *x = PyTuple_GET_ITEM(a, k), *y = PyTuple_GET_ITEM(b, k);
        if (x != y && (!PyLong_CheckExact(x) || !PyLong_CheckExact(y) || PyObject_RichCompareBool(x, y, Py_EQ) != 1))
            return 0;
    }
    return 1;
}

/* The address of the exact torch.Tensor `t` when the layout key bind_checks._torch_tensor makes of it,
 * (dtype, shape, stride(), is_cuda, get_device()), plus requires_grad where `grad` (_torch_resolved's key, a
 * plain pointer's), is one of the layouts that passed (the dict in `owner`'s slot `passed_at`, read after the
 * reads, as the twin reads it after its reader): read by cg_tensor_read (_native_tensor.c: DLPack's C exchange
 * API where torch has it, else the getters named by torch_reads) and compared item by item with each key
 * (cg_tensor_key_is) instead of built into a tuple, hashed and looked up from a Python frame; equal items make
 * equal tuples, so a match is the twin's `key in passed`. NULL (declined, no exception set) for no match or a
 * read that fails. May run Python code (the reads); the comparisons run none. (bench/rebind_lifted_cpu.py, two
 * torch tensors rebound.) */
static PyObject *
torch_address(BindManyMethod *m, PyObject *t, PyObject *owner, Py_ssize_t passed_at, int grad)
{
    cg_tensor_layout l;
    PyObject *address = NULL;
    /* (no table, or `torch_dlpack` false: read through the getters) */
    if (!cg_tensor_read(m->torch_dlpack ? cg_dlpack_api(Py_TYPE(t)) : NULL, m->torch_reads, t, grad, &l))
        return NULL;
    PyObject *passed = Py_XNewRef(SLOT(owner, passed_at));
    if (passed != NULL && PyDict_CheckExact(passed)) {
        Py_ssize_t pos = 0;
        PyObject *key, *unused;
        while (address == NULL && PyDict_Next(passed, &pos, &key, &unused))
            if (cg_tensor_key_is(key, &l, grad))
                address = Py_NewRef(l.address);
    }
    Py_XDECREF(passed);
    cg_tensor_layout_release(&l);
    return address;
}

/* The names a __cuda_array_interface__ reader reads (made ready with the type). */
enum { CAI_ATTR, CAI_TYPESTR, CAI_SHAPE, CAI_STRIDES, CAI_DATA, CAI_DEVICE, CAI_ID, CAI_U1, CAI_COUNT };
static const char *const cai_names[CAI_COUNT] = {"__cuda_array_interface__", "typestr", "shape", "strides", "data",
                                                 "device", "id", "|u1"};
static PyObject *cai_str[CAI_COUNT];

/* `a` and `b` as equal as Python says, for exact str, exact ints, exact tuples of exact ints and None (else 0,
 * also for a tuple subclass, whose __eq__ the twin's look-up would call: no Python code runs). */
static int
same_plain(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b))
        return PyUnicode_Compare(a, b) == 0;
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b))
        return PyObject_RichCompareBool(a, b, Py_EQ) == 1;
    return PyTuple_CheckExact(a) && PyTuple_CheckExact(b) && same_ints(a, b);
}

/* The address of the object `v` whose reader is bind_checks._cai (`device` 0) or _cai_device (1) when the key
 * that reader makes of it, (type(v), typestr, shape, strides[, v.device.id]) read from its exact dict
 * __cuda_array_interface__ with the reader's defaults, is one of the layouts that passed: compared item by
 * item with each key, as torch_address does, instead of a Python frame building, hashing and looking it up
 * (bench/cpu_overhead.py, fresh CAI objects for two names). NULL
 * (declined, no exception set) for no match, an item of another type, or a read that fails. May run Python
 * code (the attribute reads); the comparisons run none. */
static PyObject *
cai_address(BindManyMethod *m, PyObject *v, PyObject *owner, Py_ssize_t passed_at, int device)
{
    PyObject *cai = PyObject_GetAttr(v, cai_str[CAI_ATTR]), *got[4] = {NULL}, *id = NULL, *passed = NULL;
    PyObject *address = NULL;
    /* (a type whose metatype is `type` itself: its == is identity) */
    if (cai == NULL || !PyDict_CheckExact(cai) || !Py_IS_TYPE(Py_TYPE(v), &PyType_Type))
        goto done;
    for (int k = 0; k < 4; k++) { /* typestr, shape, strides, data: str keys of an exact dict, no Python code */
        got[k] = Py_XNewRef(PyDict_GetItemWithError(cai, cai_str[CAI_TYPESTR + k]));
        if (got[k] == NULL && PyErr_Occurred())
            goto done;
    }
    if (got[0] == NULL)
        got[0] = Py_NewRef(cai_str[CAI_U1]);
    if (got[1] == NULL && (got[1] = PyTuple_New(0)) == NULL)
        goto done;
    if (got[2] == NULL)
        got[2] = Py_NewRef(Py_None);
    if (got[3] == NULL || !PyTuple_CheckExact(got[3]) || PyTuple_GET_SIZE(got[3]) != 2 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(got[3], 0)))
        goto done;
    if (device) {
        PyObject *dev = PyObject_GetAttr(v, cai_str[CAI_DEVICE]);
        id = dev == NULL ? NULL : PyObject_GetAttr(dev, cai_str[CAI_ID]);
        Py_XDECREF(dev);
        if (id == NULL || !PyLong_CheckExact(id))
            goto done;
    }
    passed = Py_XNewRef(SLOT(owner, passed_at)); /* read after the attribute reads */
    if (passed == NULL || !PyDict_CheckExact(passed))
        goto done;
    Py_ssize_t pos = 0, size = 4 + device;
    PyObject *key, *unused;
    while (PyDict_Next(passed, &pos, &key, &unused)) {
        if (PyTuple_CheckExact(key) && PyTuple_GET_SIZE(key) == size &&
            PyTuple_GET_ITEM(key, 0) == (PyObject *)Py_TYPE(v) && same_plain(PyTuple_GET_ITEM(key, 1), got[0]) &&
            same_plain(PyTuple_GET_ITEM(key, 2), got[1]) && same_plain(PyTuple_GET_ITEM(key, 3), got[2]) &&
            (!device || same_plain(PyTuple_GET_ITEM(key, 4), id))) {
            address = Py_NewRef(PyTuple_GET_ITEM(got[3], 0));
            break;
        }
    }
done:
    PyErr_Clear();
    Py_XDECREF(passed);
    Py_XDECREF(id);
    for (int k = 0; k < 4; k++)
        Py_XDECREF(got[k]);
    Py_XDECREF(cai);
    return address;
}

/* Which of cai_readers `read` is: 0 (_cai), 1 (_cai_device, cai_address's `device`), or -1 (neither). */
static int
cai_kind(BindManyMethod *m, PyObject *read)
{
    if (m->cai_readers == NULL || read == NULL)
        return -1;
    return read == PyTuple_GET_ITEM(m->cai_readers, 0) ? 0 : read == PyTuple_GET_ITEM(m->cai_readers, 1) ? 1 : -1;
}

/* The address of a parametrized pointer's `value` (`memory` its MemoryCheck, `bound` the address bound,
 * both held), held, or NULL (declined). May run Python code (the reader, the key's hash and __eq__). */
static PyObject *
checked_address(BindManyMethod *m, PyObject *memory, PyObject *value, PyObject *bound)
{
    if (PyLong_CheckExact(value)) /* the twin takes the address bound without a check; others are checked */
        return PyObject_RichCompareBool(value, bound, Py_EQ) == 1 ? Py_NewRef(value) : NULL;
    PyObject *read = get_held(m->readers, (PyObject *)Py_TYPE(value)), *got = NULL, *passed = NULL;
    PyObject *address = NULL;
    if (read == NULL || read == Py_None)
        goto done;
    if (read == m->torch_reader) {
        address = torch_address(m, value, memory, m->mc.passed, 0);
        goto done;
    }
    int kind = cai_kind(m, read);
    if (kind >= 0) {
        address = cai_address(m, value, memory, m->mc.passed, kind);
        goto done;
    }
    got = PyObject_CallOneArg(read, value);
    if (got == NULL || !PyTuple_CheckExact(got) || PyTuple_GET_SIZE(got) != 2 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(got, 0)))
        goto done;
    passed = Py_XNewRef(SLOT(memory, m->mc.passed)); /* read after the reader ran */
    if (passed != NULL && PyDict_CheckExact(passed) && PyDict_Contains(passed, PyTuple_GET_ITEM(got, 1)) == 1)
        address = Py_NewRef(PyTuple_GET_ITEM(got, 0));
done:
    PyErr_Clear();
    Py_XDECREF(passed);
    Py_XDECREF(got);
    Py_XDECREF(read);
    return address;
}

/* The address of a plain pointer's tensor or array `value` (its reader torch_reader or one of cai_readers)
 * whose layout is one the ValueCheck `check` (held) remembers as resolved (ValueCheck.convert's twin), held, or
 * NULL (declined). May run Python code. (bench/cpu_overhead.py, a fresh array for one g.param name.) */
static PyObject *
plain_array_address(BindManyMethod *m, PyObject *check, PyObject *value)
{
    PyObject *read = get_held(m->readers, (PyObject *)Py_TYPE(value)), *address = NULL;
    int kind = cai_kind(m, read);
    if (read != NULL && read == m->torch_reader)
        address = torch_address(m, value, check, m->vc.passed, 1);
    else if (kind >= 0)
        address = cai_address(m, value, check, m->vc.passed, kind);
    PyErr_Clear();
    Py_XDECREF(read);
    return address;
}

/* Whether the address bound for `name` in `bindings` (held) is `word`: 1, 0, or -1 when it is not an int
 * (declined). Runs no Python code for the executable's own dicts (str keys). */
static int
is_bound(PyObject *bindings, PyObject *name, unsigned long long word)
{
    PyObject *bound = get_held(bindings, name);
    int r = -1;
    if (bound != NULL && PyLong_CheckExact(bound)) {
        unsigned long long b = cg_as_u64(bound);
        r = b == (unsigned long long)-1 && PyErr_Occurred() ? 0 : b == word;
        PyErr_Clear();
    }
    Py_XDECREF(bound);
    return r;
}

/* Decide one name as the twin would (see the top): 1, or 0 (declined, no exception set). May run Python code. */
static int
decide(BindManyMethod *m, PyObject *exe, one_name *n)
{
    PyObject *raw = Py_XNewRef(SLOT(exe, m->ex.raw)), *checks = Py_XNewRef(SLOT(exe, m->ex.checks));
    PyObject *bindings = Py_XNewRef(SLOT(exe, m->ex.bindings));
    PyObject *prev = NULL, *check = NULL, *memory = NULL, *bound = NULL;
    int r = 0;
    if (raw == NULL || !PyDict_CheckExact(raw) || checks == NULL || !PyDict_CheckExact(checks) || bindings == NULL ||
        !PyDict_CheckExact(bindings))
        goto done;
    prev = get_held(raw, n->name);
    if (prev == n->value) { /* the object bound last: nothing to do */
        r = 1;
        goto done;
    }
    check = get_held(checks, n->name);
    bound = get_held(bindings, n->name);
    if (check == NULL || Py_TYPE(check) != m->check_type || SLOT(check, m->vc.scalar) != Py_False || bound == NULL ||
        !PyLong_CheckExact(bound))
        goto done;
    memory = Py_XNewRef(SLOT(check, m->vc.memory));
    if (memory == NULL)
        goto done;
    if (memory == Py_None) {
        n->address = plain_address(m, n->value);
        if (n->address == NULL)
            n->address = plain_array_address(m, check, n->value);
    } else if (Py_TYPE(memory) == m->memory_type)
        n->address = checked_address(m, memory, n->value, bound);
    if (n->address == NULL)
        goto done;
    n->word = cg_as_u64(n->address);
    if (n->word == 0 || (n->word == (unsigned long long)-1 && PyErr_Occurred())) { /* the twin says what it is */
        Py_CLEAR(n->address);
        goto done;
    }
    r = is_bound(bindings, n->name, n->word);
    n->same = r == 1;
    r = r >= 0;
done:
    PyErr_Clear();
    Py_XDECREF(bound);
    Py_XDECREF(memory);
    Py_XDECREF(check);
    Py_XDECREF(prev);
    Py_XDECREF(bindings);
    Py_XDECREF(checks);
    Py_XDECREF(raw);
    return r;
}

/* Whether the executable's state still gives every name the decision taken (1) or not (0). */
static int
still(PyObject *raw, PyObject *bindings, one_name *names, Py_ssize_t count)
{
    for (Py_ssize_t k = 0; k < count; k++) {
        one_name *n = &names[k];
        PyObject *prev = get_held(raw, n->name);
        int unchanged = prev == n->value;
        Py_XDECREF(prev);
        if (unchanged != (n->address == NULL))
            return 0;
        if (n->address != NULL && is_bound(bindings, n->name, n->word) != n->same)
            return 0;
    }
    return 1;
}

/* Run `plan` (held) with the changed names' words: 0, the driver's refusal (> 0, positions in *g, *i), or
 * -1 (declined: not a plan this path runs, or malformed; no exception set). */
static int
run_plan(BindManyMethod *m, PyObject *plan, void *ex, const cg_patch_value *vals, Py_ssize_t nvals, Py_ssize_t *n,
         Py_ssize_t *g, Py_ssize_t *i, cg_then_launch *then)
{
    int rc = -1;
    if (Py_TYPE(plan) == m->patch_plan_type) {
        PyObject *entries = SLOT(plan, m->pp.entries), *codes = SLOT(plan, m->pp.codes);
        PyObject *general = SLOT(plan, m->pp.general), *count = SLOT(plan, m->pp.count);
        if (entries == NULL || !PyList_CheckExact(entries) || codes == NULL || !PyTuple_CheckExact(codes) ||
            PyTuple_GET_SIZE(codes) != nvals || general == NULL || !PyList_CheckExact(general) ||
            PyList_GET_SIZE(general) != 0 || count == NULL || !PyLong_CheckExact(count) ||
            SLOT(plan, m->pp.native) != Py_True)
            return -1;
        for (Py_ssize_t k = 0; k < nvals; k++)
            if (PyTuple_GET_ITEM(codes, k) != Py_None)
                return -1;
        if ((*n = PyLong_AsSsize_t(count)) < 0)
            goto done;
        Py_INCREF(entries);
        rc = cg_patch_entries(ex, entries, vals, nvals, g, i, then);
        Py_DECREF(entries);
    } else if (Py_TYPE(plan) == m->bind_plan_type && nvals == 1) {
        PyObject *groups = SLOT(plan, m->pl.all_groups), *address = SLOT(plan, m->pl.address);
        PyObject *count = SLOT(plan, m->pl.count);
        if (groups == NULL || !PyList_CheckExact(groups) || PyList_GET_SIZE(groups) == 0 || address == NULL ||
            !PyLong_CheckExact(address) || count == NULL || !PyLong_CheckExact(count))
            return -1;
        void *fn = PyLong_AsVoidPtr(address);
        if (fn == NULL || (*n = PyLong_AsSsize_t(count)) < 0)
            goto done;
        Py_INCREF(groups);
        rc = cg_rebind_groups(fn, ex, groups, (const char *)&vals[0].word, (Py_ssize_t)sizeof vals[0].word, g, i,
                              then);
        Py_DECREF(groups);
    }
done:
    if (rc < 0)
        PyErr_Clear();
    return rc < 0 ? -1 : rc;
}

/* Write the bindings and raw values of `names` into the dicts (held); the values replaced go to `old`
 * (2 per name), held, for the caller to release after every write. 0 or -1 with an exception set. */
static int
write_state(PyObject *raw, PyObject *bindings, one_name *names, Py_ssize_t count, PyObject **old)
{
    for (Py_ssize_t k = 0; k < count; k++) {
        one_name *n = &names[k];
        if (n->address == NULL)
            continue;
        if (!n->same) {
            old[2 * k] = Py_XNewRef(PyDict_GetItemWithError(bindings, n->name));
            if (PyErr_Occurred() || PyDict_SetItem(bindings, n->name, n->address) < 0)
                return -1;
        }
        old[2 * k + 1] = Py_XNewRef(PyDict_GetItemWithError(raw, n->name));
        if (PyErr_Occurred() || PyDict_SetItem(raw, n->name, n->value) < 0)
            return -1;
    }
    return 0;
}

/* The rebind of the `size` names `pnames` to `pvalues` (both held by the caller, in the call's order) if the
 * fast path applies: 1 with the number of node updates in *count, 0 for the twin, -1 with an exception set
 * (a driver refusal, or memory). */
static int
bind_many_fast(BindManyMethod *m, PyObject *exe, PyObject *const *pnames, PyObject *const *pvalues, Py_ssize_t size,
               Py_ssize_t *count, cg_then_launch *then)
{
    one_name names[MAX_NAMES];
    PyObject *old[2 * MAX_NAMES] = {NULL};
    Py_ssize_t nnames = 0, nchanged = 0;
    PyObject *key = NULL, *raw = NULL, *bindings = NULL, *plans = NULL, *plan = NULL, *lock = NULL;
    cg_patch_value vals[MAX_NAMES];
    int r = 0, taken = 0;
    PyObject *exec = SLOT(exe, m->ex.exec);
    if (exec == NULL || exec == Py_None || size < 1 || size > MAX_NAMES)
        return 0;
    for (Py_ssize_t k = 0; k < size; k++) { /* held before any Python code runs */
        if (!PyUnicode_CheckExact(pnames[k]))
            goto done;
        names[nnames].name = Py_NewRef(pnames[k]);
        names[nnames].value = Py_NewRef(pvalues[k]);
        names[nnames].address = NULL;
        names[nnames].same = 0;
        nnames++;
    }
    for (Py_ssize_t k = 0; k < nnames; k++) { /* the readers and handles run Python code */
        if (!decide(m, exe, &names[k]))
            goto done;
        if (names[k].address != NULL && !names[k].same)
            vals[nchanged++] = (cg_patch_value){names[k].word, NULL, 0};
    }
    if (nchanged == 1) {
        for (Py_ssize_t k = 0; k < nnames; k++)
            if (names[k].address != NULL && !names[k].same)
                key = Py_NewRef(names[k].name);
    } else if (nchanged > 1) { /* made before the lock test: allocating a tuple may run the collector */
        if ((key = PyTuple_New(nchanged)) == NULL) {
            r = -1;
            goto done;
        }
        for (Py_ssize_t k = 0, j = 0; k < nnames; k++)
            if (names[k].address != NULL && !names[k].same)
                PyTuple_SET_ITEM(key, j++, Py_NewRef(names[k].name));
    }
    lock = Py_XNewRef(SLOT(exe, m->ex.lock));
    if (lock == NULL || !(taken = cg_lock_take(lock))) /* another thread is changing the executable: the twin waits */
        goto done;
    /* The state, read after the last Python code of the call; from here none runs until it is written. */
    raw = Py_XNewRef(SLOT(exe, m->ex.raw));
    bindings = Py_XNewRef(SLOT(exe, m->ex.bindings));
    plans = Py_XNewRef(SLOT(exe, m->ex.plans));
    exec = SLOT(exe, m->ex.exec);
    PyObject *exec_addr = SLOT(exe, m->ex.exec_addr);
    void *ex = exec_addr != NULL && PyLong_CheckExact(exec_addr) ? PyLong_AsVoidPtr(exec_addr) : NULL;
    PyErr_Clear();
    if (exec == NULL || exec == Py_None || ex == NULL || raw == NULL || !PyDict_CheckExact(raw) || bindings == NULL ||
        !PyDict_CheckExact(bindings) || plans == NULL || !PyDict_CheckExact(plans) ||
        !still(raw, bindings, names, nnames))
        goto done;
    Py_ssize_t n = 0, g = 0, i = 0;
    int rc = 0;
    if (key != NULL) {
        if ((plan = get_held(plans, key)) == NULL || (rc = run_plan(m, plan, ex, vals, nchanged, &n, &g, &i, then)) < 0)
            goto done; /* no plan yet, or not one this path runs: the twin (nothing written) */
    }
    if (write_state(raw, bindings, names, nnames, old) < 0) {
        r = -1;
        goto done;
    }
    if (rc > 0) { /* as the twin leaves it: the bindings written, no count added, the node named */
        PyObject *e = PyObject_CallMethod(plan, "refused", "nni", g, i, rc);
        Py_XDECREF(e);
        if (e != NULL)
            PyErr_SetString(PyExc_RuntimeError, "_bind_many: the plan's refused() returned");
        r = -1;
        goto done;
    }
    if (cg_add_calls(exe, m->ex.calls, n) < 0) {
        r = -1;
        goto done;
    }
    *count = n;
    r = 1;
done:
    if (taken)
        r = cg_lock_give(lock, r);
    Py_XDECREF(lock);
    if (r == 0)
        PyErr_Clear();
    Py_XDECREF(plan);
    Py_XDECREF(plans);
    Py_XDECREF(bindings);
    Py_XDECREF(raw);
    Py_XDECREF(key);
    for (Py_ssize_t k = 0; k < nnames; k++) { /* the values replaced last: their release may run Python code */
        Py_XDECREF(old[2 * k]);
        Py_XDECREF(old[2 * k + 1]);
        Py_XDECREF(names[k].address);
        Py_DECREF(names[k].value);
        Py_DECREF(names[k].name);
    }
    return r;
}

static PyObject *
bind_many_vectorcall(BindManyMethod *m, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) == 2 && kwnames == NULL && PyObject_TypeCheck(args[0], m->cls) &&
        PyDict_CheckExact(args[1]) && PyDict_GET_SIZE(args[1]) <= MAX_NAMES) {
        PyObject *names[MAX_NAMES], *values[MAX_NAMES];
        Py_ssize_t n = 0, pos = 0, count;
        while (n < MAX_NAMES && PyDict_Next(args[1], &pos, &names[n], &values[n])) /* borrowed: held by the dict */
            n++;
        int r = bind_many_fast(m, args[0], names, values, n, &count, NULL);
        if (r < 0)
            return NULL;
        if (r > 0)
            return PyLong_FromSsize_t(count);
    }
    return PyObject_Vectorcall(m->func, args, nargsf, kwnames);
}

int
cg_bind_many_arrays(PyObject *method, PyObject *exe, PyObject *const *names, PyObject *const *values, Py_ssize_t n,
                    Py_ssize_t *count, cg_then_launch *then)
{
    BindManyMethod *m = (BindManyMethod *)method;
    if (Py_TYPE(method) != &cg_BindManyMethodType || !PyObject_TypeCheck(exe, m->cls))
        return 0;
    return bind_many_fast(m, exe, names, values, n, count, then);
}

int
cg_bind_many_fast(PyObject *method, PyObject *exe, PyObject *kwnames, PyObject *const *kwvalues, Py_ssize_t skip,
                  Py_ssize_t *count, cg_then_launch *then)
{
    if (!PyTuple_CheckExact(kwnames))
        return 0;
    PyObject *names[MAX_NAMES], *values[MAX_NAMES];
    Py_ssize_t n = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
        if (k == skip)
            continue;
        if (n == MAX_NAMES)
            return 0;
        names[n] = PyTuple_GET_ITEM(kwnames, k);
        values[n++] = kwvalues[k];
    }
    return cg_bind_many_arrays(method, exe, names, values, n, count, then);
}

static PyObject *
bind_many_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *func, *cls, *bp, *pp, *vc, *mc, *readers, *buffer_types, *torch_reader = Py_None, *torch_reads = NULL;
    PyObject *cai_readers = Py_None;
    int torch_dlpack = 1;
    static char *kw[] = {"func",         "cls",          "bind_plan_type", "patch_plan_type", "check_type",
                         "memory_type",  "readers",      "buffer_types",   "torch_reader",    "torch_reads",
                         "cai_readers",  "torch_dlpack", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!O!O!O!O!O!|OO!Op:BindManyMethod", kw, &func, &PyType_Type,
                                     &cls, &PyType_Type, &bp, &PyType_Type, &pp, &PyType_Type, &vc, &PyType_Type,
                                     &mc, &PyDict_Type, &readers, &PySet_Type, &buffer_types, &torch_reader,
                                     &PyTuple_Type, &torch_reads, &cai_readers, &torch_dlpack))
        return NULL;
    if (cai_readers != Py_None && (!PyTuple_CheckExact(cai_readers) || PyTuple_GET_SIZE(cai_readers) != 2)) {
        PyErr_SetString(PyExc_TypeError, "BindManyMethod: cai_readers must be a tuple (_cai, _cai_device) or None");
        return NULL;
    }
    if (torch_reader != Py_None) {
        int ok = torch_reads != NULL && PyTuple_GET_SIZE(torch_reads) == 7;
        for (Py_ssize_t k = 0; ok && k < 7; k++)
            ok = PyUnicode_CheckExact(PyTuple_GET_ITEM(torch_reads, k));
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "BindManyMethod: torch_reader needs torch_reads, a tuple of 7 str");
            return NULL;
        }
    }
    BindManyMethod *m =
        (BindManyMethod *)cg_method_alloc(type, func, (vectorcallfunc)bind_many_vectorcall, "BindManyMethod");
    if (m == NULL)
        return NULL;
    if (cg_resolve_slots((PyTypeObject *)cls, "executable", CG_SLOT_COUNT(m->ex), m->ex.at) < 0 ||
        cg_resolve_slots((PyTypeObject *)bp, "bind_plan", CG_SLOT_COUNT(m->pl), m->pl.at) < 0 ||
        cg_resolve_slots((PyTypeObject *)pp, "patch_plan", CG_SLOT_COUNT(m->pp), m->pp.at) < 0 ||
        cg_resolve_slots((PyTypeObject *)vc, "value_check", CG_SLOT_COUNT(m->vc), m->vc.at) < 0 ||
        cg_resolve_slots((PyTypeObject *)mc, "memory_check", CG_SLOT_COUNT(m->mc), m->mc.at) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    m->cls = (PyTypeObject *)Py_NewRef(cls);
    m->bind_plan_type = (PyTypeObject *)Py_NewRef(bp);
    m->patch_plan_type = (PyTypeObject *)Py_NewRef(pp);
    m->check_type = (PyTypeObject *)Py_NewRef(vc);
    m->memory_type = (PyTypeObject *)Py_NewRef(mc);
    m->readers = Py_NewRef(readers);
    m->buffer_types = Py_NewRef(buffer_types);
    if (torch_reader != Py_None) {
        m->torch_reader = Py_NewRef(torch_reader);
        m->torch_reads = Py_NewRef(torch_reads);
    }
    if (cai_readers != Py_None)
        m->cai_readers = Py_NewRef(cai_readers);
    m->torch_dlpack = torch_dlpack;
    return (PyObject *)m;
}

CG_METHOD_GC(BindManyMethod)

PyDoc_STRVAR(bind_many_doc,
             "BindManyMethod(func, cls, bind_plan_type, patch_plan_type, check_type, memory_type, readers, "
             "buffer_types, torch_reader=None, torch_reads=None, cai_readers=None, torch_dlpack=True)\n\n"
             "A method of `cls` (Executable) called as `exe._bind_many(params)`: it rebinds several pointer\n"
             "parameters whose new values it can decide without Python-level checks (the object bound, an\n"
             "address bound, a layout key that passed, an int or a Buffer for an unchecked pointer) through\n"
             "the prepared plan, in C, and hands every other call to `func` (the Python method). The types are\n"
             "BindPlan, PatchPlan, ValueCheck and MemoryCheck (exact); `readers` maps a value's type to its\n"
             "reader (bind_checks._READERS), `buffer_types` is the set of types whose `handle` is the address.\n"
             "Where a value's reader is `torch_reader` (bind_checks._torch_tensor), what it reads is read here:\n"
             "through DLPack's C exchange API where the tensor's type has one and `torch_dlpack` is true (the\n"
             "dtype and requires_grad through torch's getters), else through the 7 names of `torch_reads`\n"
             "(data_ptr, dtype, shape, stride, is_cuda, get_device, and for a plain pointer requires_grad);\n"
             "where it is one of `cai_readers` (bind_checks._cai, _cai_device), its __cuda_array_interface__\n"
             "is read here.");

PyTypeObject cg_BindManyMethodType =
    CG_METHOD_TYPE(BindManyMethod, "cudagraph.driver._native.BindManyMethod", bind_many_doc, bind_many_new);

int
cg_bind_many_method_ready(void)
{
    for (int k = 0; k < CAI_COUNT; k++)
        if (cai_str[k] == NULL && (cai_str[k] = PyUnicode_InternFromString(cai_names[k])) == NULL)
            return -1;
    return PyType_Ready(&cg_BindManyMethodType);
}
