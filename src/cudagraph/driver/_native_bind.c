/*
 * BindMethod: Executable.bind with a compiled path for the per-step case.
 *
 * Python twin (see cudagraph.driver.c_entry): cudagraph.executable.executable.Executable.bind, the
 * Python method it wraps (its `func` and `__wrapped__`), which every call it does not take goes to.
 *
 * A Python method taking **params costs a dict per call, and the checks and
 * the lock around one rebind add several Python frames: together about as much
 * as the driver call itself. BindMethod is a method descriptor (its type has
 * Py_TPFLAGS_METHOD_DESCRIPTOR, so `exe.bind(p=buf)` calls it with `exe` first
 * and the keyword names as a tuple, no bound method, no dict). When the call is
 * one keyword, its value an int address or an object of a type listed in
 * `buffer_types` (whose `handle` is the address), and the executable already
 * holds a prepared plan for that parameter (a BindPlan whose `pointer_groups`
 * is set), it makes the rebind itself: identity test against the value bound
 * before, comparison of the addresses, one cg_rebind_groups call, the
 * executable's bindings and update count written back. A call it leaves with one
 * keyword is offered to the fast path of the class's compiled _bind_many with that one
 * name (bind_one: a parametrized pointer's tensor or array, a plan of pointers at offsets).
 * Everything else (other values, several keywords, no plan yet, the executable's lock held
 * elsewhere, a driver refusal) goes to the Python function, which checks, plans and names errors.
 *
 * The executable's state is read through its __slots__ (NATIVE_SLOTS "executable" and "bind_plan",
 * resolved on the classes given at construction), after the last call that runs Python code of the
 * caller's (the buffer's `handle`, the lock's `acquire(False)`). The fast path holds the executable's
 * lock, as the Python paths do, from that test to the write-back: the driver calls release the GIL (as
 * cuda.bindings does), and other threads that bind or update wait on the lock meanwhile; taken
 * elsewhere, the Python path waits for it. The raw value replaced is released after the lock. Every
 * object used is held, and the update count is read where it is written, so hostile objects (keys whose
 * __eq__ runs code, a driver callback in Python) cannot make it read freed memory.
 */
#include "_native.h"

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func;         /* the Python bind(self, **params): everything the fast path does not take */
    PyTypeObject *cls;      /* Executable */
    PyTypeObject *plan_type; /* BindPlan (exact type) */
    PyObject *buffer_types; /* set of types whose `handle` is the address */
    PyObject *dict;         /* __doc__, __name__, __wrapped__ ... (functools.update_wrapper) */
    cg_executable_slots ex; /* of cls */
    cg_bind_plan_slots pl;  /* of plan_type */
} BindMethod;
_Static_assert(offsetof(BindMethod, vectorcall) == offsetof(cg_method_head, vectorcall) &&
                   offsetof(BindMethod, func) == offsetof(cg_method_head, func) &&
                   (offsetof(BindMethod, dict) - offsetof(BindMethod, func)) % sizeof(PyObject *) == 0,
               "BindMethod starts with cg_method_head");

/* The address `value` stands for (an exact int, or an object of a listed type through its `handle`);
 * 0 when it is neither or is not a non-zero 64-bit address (the Python path decides). May run Python code. */
static unsigned long long
address_value(BindMethod *m, PyObject *value)
{
    unsigned long long v;
    if (PyLong_CheckExact(value)) {
        v = cg_as_u64(value);
    } else {
        int listed = PySet_Contains(m->buffer_types, (PyObject *)Py_TYPE(value));
        if (listed <= 0) {
            PyErr_Clear();
            return 0;
        }
        PyObject *h = PyObject_GetAttr(value, cg_str_handle);
        PyObject *n = h == NULL ? NULL : PyNumber_Long(h);
        Py_XDECREF(h);
        if (n == NULL) {
            PyErr_Clear();
            return 0;
        }
        v = cg_as_u64(n);
        Py_DECREF(n);
    }
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return v;
}

/* ExecLock: the executable's lock (Executable._lock) where the compiled module is built; the twin is
 * threading.Lock, which the executable holds otherwise. The Python paths use it as `with exe._lock:`
 * (acquire() waits with the GIL released, as threading.Lock's does, waking for signal handlers); the
 * compiled binds take it without waiting and give it back by two C calls, not by the method calls
 * `acquire(False)` and `release()` (an argument parse each): bench/cpu_overhead.py, two torch tensors rebound. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char locked; /* read and written with the GIL held */
} ExecLock;

static PyObject *
exec_lock_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "ExecLock() takes no arguments");
        return NULL;
    }
    ExecLock *self = (ExecLock *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if ((self->lock = PyThread_allocate_lock()) == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void
exec_lock_dealloc(ExecLock *self)
{
    if (self->lock != NULL) {
        if (self->locked)
            PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* acquire(blocking=True, timeout=-1), as threading.Lock's: the same checks of the arguments and the same waits
 * (the GIL released; a signal's handler run, the wait going on for the time left). */
static PyObject *
exec_lock_acquire(ExecLock *self, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pd:acquire", kw, &blocking, &timeout))
        return NULL;
    if (timeout != timeout) { /* (a NaN would make the deadline undefined) */
        PyErr_SetString(PyExc_ValueError, "Invalid value NaN (not a number)");
        return NULL;
    }
    if (!blocking && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    if (timeout * 1e6 >= (double)PY_TIMEOUT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
        return NULL;
    }
    long long deadline = timeout < 0 ? 0 : cg_monotonic_ns() + (long long)(timeout * 1e9);
    PyLockStatus got = PyThread_acquire_lock_timed(self->lock, 0, 0);
    while (got != PY_LOCK_ACQUIRED && blocking) {
        PY_TIMEOUT_T wait = -1; /* µs */
        if (timeout >= 0) {
            long long left = deadline - cg_monotonic_ns();
            if (left <= 0)
                break;
            wait = (PY_TIMEOUT_T)((left + 999) / 1000);
        }
        Py_BEGIN_ALLOW_THREADS
        got = PyThread_acquire_lock_timed(self->lock, wait, 1);
        Py_END_ALLOW_THREADS
        if (got == PY_LOCK_INTR && Py_MakePendingCalls() < 0) /* a signal handler raised */
            return NULL;
        if (got == PY_LOCK_FAILURE) /* the time is up */
            break;
    }
    if (got == PY_LOCK_ACQUIRED)
        self->locked = 1;
    return PyBool_FromLong(got == PY_LOCK_ACQUIRED);
}

static PyObject *
exec_lock_release(ExecLock *self, PyObject *unused)
{
    if (!self->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    self->locked = 0;
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyObject *
exec_lock_exit(ExecLock *self, PyObject *args)
{
    return exec_lock_release(self, NULL);
}

static PyObject *
exec_lock_locked(ExecLock *self, PyObject *unused)
{
    return PyBool_FromLong(self->locked);
}

static PyObject *
exec_lock_repr(ExecLock *self)
{
    return PyUnicode_FromFormat("<cudagraph ExecLock %s>", self->locked ? "locked" : "unlocked");
}

static PyMethodDef exec_lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))exec_lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool: take the lock, waiting (the GIL released) unless `blocking` is\n"
     "false, at most `timeout` seconds where it is not -1."},
    {"release", (PyCFunction)exec_lock_release, METH_NOARGS, "release(): give the lock back (RuntimeError if free)."},
    {"locked", (PyCFunction)exec_lock_locked, METH_NOARGS, "locked() -> bool: whether the lock is taken."},
    {"__enter__", (PyCFunction)(void (*)(void))exec_lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "Take the lock, waiting."},
    {"__exit__", (PyCFunction)exec_lock_exit, METH_VARARGS, "Give the lock back."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject cg_ExecLockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph.driver._native.ExecLock",
    .tp_basicsize = sizeof(ExecLock),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ExecLock()\n\nThe lock of an executable: threading.Lock's acquire(blocking=True, timeout=-1),\n"
              "release(), locked() and `with`, taken and given back by the compiled binds without a method call.",
    .tp_new = exec_lock_new,
    .tp_dealloc = (destructor)exec_lock_dealloc,
    .tp_repr = (reprfunc)exec_lock_repr,
    .tp_methods = exec_lock_methods,
};

int
cg_lock_take(PyObject *lock)
{
    if (Py_IS_TYPE(lock, &cg_ExecLockType)) { /* runs no Python code */
        ExecLock *l = (ExecLock *)lock;
        if (PyThread_acquire_lock(l->lock, NOWAIT_LOCK) != PY_LOCK_ACQUIRED)
            return 0;
        l->locked = 1;
        return 1;
    }
    Py_INCREF(lock); /* its acquire() may drop the executable's reference */
    PyObject *got = PyObject_CallMethodOneArg(lock, cg_str_acquire, Py_False);
    Py_DECREF(lock);
    if (got == NULL) {
        PyErr_Clear();
        return 0;
    }
    int taken = got == Py_True;
    Py_DECREF(got);
    return taken;
}

int
cg_lock_give(PyObject *lock, int r)
{
    if (Py_IS_TYPE(lock, &cg_ExecLockType)) { /* runs no Python code */
        ExecLock *l = (ExecLock *)lock;
        l->locked = 0;
        PyThread_release_lock(l->lock);
        return r;
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb); /* an exception of the call, kept across release() */
    PyObject *done = PyObject_CallMethodNoArgs(lock, cg_str_release);
    if (done != NULL) {
        Py_DECREF(done);
    } else if (type != NULL) {
        PyErr_Clear();
    } else {
        return -1;
    }
    PyErr_Restore(type, value, tb);
    return r;
}

int
cg_add_calls(PyObject *exe, Py_ssize_t off, Py_ssize_t n)
{
    PyObject *calls = SLOT(exe, off);
    if (calls == NULL || !PyLong_CheckExact(calls))
        return 0;
    Py_ssize_t done = PyLong_AsSsize_t(calls);
    if (done < 0 || done > PY_SSIZE_T_MAX - n) {
        PyErr_Clear();
        return 0;
    }
    PyObject *now = PyLong_FromSsize_t(done + n); /* an int: allocating it runs no Python code */
    if (now == NULL)
        return -1;
    SLOT(exe, off) = now;
    Py_DECREF(calls); /* an int: runs no Python code */
    return 0;
}

/* Rebind parameter `name` of `exe` to `value` if the fast path applies: 1 with the number of node
 * updates in *count, 0 for the Python path, -1 with an exception set. */
static int
bind_fast(BindMethod *m, PyObject *exe, PyObject *name, PyObject *value, Py_ssize_t *count, cg_then_launch *then)
{
    PyObject *raw = SLOT(exe, m->ex.raw), *exec = SLOT(exe, m->ex.exec);
    if (raw == NULL || !PyDict_CheckExact(raw) || exec == NULL || exec == Py_None || !PyUnicode_CheckExact(name))
        return 0;
    Py_INCREF(raw); /* a key's __eq__ may replace it */
    PyObject *prev = PyDict_GetItemWithError(raw, name);
    int same = prev == value, failed = prev == NULL && PyErr_Occurred(); /* `value` is held by the caller */
    Py_DECREF(raw);
    if (same) { /* the object bound last: nothing to do */
        *count = 0;
        return 1;
    }
    if (failed)
        return -1;
    unsigned long long v = address_value(m, value);
    if (v == 0)
        return 0;
    PyObject *lock = Py_XNewRef(SLOT(exe, m->ex.lock));
    if (lock == NULL || !cg_lock_take(lock)) { /* another thread is changing the executable: the Python path waits */
        Py_XDECREF(lock);
        return 0;
    }
    /* The state, read after the caller's Python code ran; every object used below is held. */
    int r = 0;
    PyObject *replaced = NULL; /* the raw value replaced: released after the lock, as it may run code */
    PyObject *plans = Py_XNewRef(SLOT(exe, m->ex.plans)), *bindings = Py_XNewRef(SLOT(exe, m->ex.bindings));
    PyObject *plan = NULL, *groups = NULL, *address_obj = NULL;
    raw = Py_XNewRef(SLOT(exe, m->ex.raw));
    exec = SLOT(exe, m->ex.exec);
    if (exec == NULL || exec == Py_None || plans == NULL || !PyDict_CheckExact(plans) || bindings == NULL ||
        !PyDict_CheckExact(bindings) || raw == NULL || !PyDict_CheckExact(raw))
        goto done;
    plan = Py_XNewRef(PyDict_GetItemWithError(plans, name));
    if (plan == NULL) {
        r = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    if (Py_TYPE(plan) != m->plan_type)
        goto done;
    groups = Py_XNewRef(SLOT(plan, m->pl.groups));
    PyObject *address = SLOT(plan, m->pl.address), *pcount = SLOT(plan, m->pl.count);
    if (groups == NULL || !PyList_CheckExact(groups) || address == NULL || !PyLong_CheckExact(address) ||
        pcount == NULL || !PyLong_CheckExact(pcount))
        goto done;
    void *fn = PyLong_AsVoidPtr(address);
    Py_ssize_t n = PyLong_AsSsize_t(pcount);
    if (fn == NULL || n < 0) {
        PyErr_Clear();
        goto done;
    }
    PyObject *bound = PyDict_GetItemWithError(bindings, name);
    if (bound == NULL && PyErr_Occurred()) {
        r = -1;
        goto done;
    }
    if (bound != NULL && PyLong_CheckExact(bound)) {
        unsigned long long b = cg_as_u64(bound);
        if (b == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
        } else if (b == v) { /* the same address under another object: remembered, no driver call */
            replaced = Py_XNewRef(PyDict_GetItemWithError(raw, name)); /* str keys: runs no Python code */
            r = PyErr_Occurred() || PyDict_SetItem(raw, name, value) < 0 ? -1 : 1;
            *count = 0;
            goto done;
        }
    }
    PyObject *exec_addr = SLOT(exe, m->ex.exec_addr), *calls = SLOT(exe, m->ex.calls);
    void *ex = exec_addr != NULL && PyLong_CheckExact(exec_addr) ? PyLong_AsVoidPtr(exec_addr) : NULL;
    if (ex == NULL || calls == NULL || !PyLong_CheckExact(calls) || PyLong_AsSsize_t(calls) < 0) {
        PyErr_Clear();
        goto done;
    }
    if ((address_obj = PyLong_FromUnsignedLongLong(v)) == NULL) {
        r = -1;
        goto done;
    }
    Py_ssize_t g, i;
    int rc = cg_rebind_groups(fn, ex, groups, (const char *)&v, (Py_ssize_t)sizeof v, &g, &i, then);
    if (rc != 0) { /* a refusal: the Python path makes the same calls again and names the node */
        r = rc > 0 ? 0 : -1;
        goto done;
    }
    replaced = Py_XNewRef(PyDict_GetItemWithError(raw, name));
    if (PyErr_Occurred() || PyDict_SetItem(bindings, name, address_obj) < 0 ||
        cg_add_calls(exe, m->ex.calls, n) < 0 || PyDict_SetItem(raw, name, value) < 0) {
        r = -1;
        goto done;
    }
    *count = n;
    r = 1;
done:
    r = cg_lock_give(lock, r);
    Py_DECREF(lock);
    Py_XDECREF(replaced); /* after the lock: its release may run code that binds again */
    Py_XDECREF(address_obj);
    Py_XDECREF(groups);
    Py_XDECREF(plan);
    Py_XDECREF(plans);
    Py_XDECREF(bindings);
    Py_XDECREF(raw);
    return r;
}

static PyObject *str_bind_many; /* "_bind_many" (interned when the type is made ready) */

/* bind_fast, and where it leaves the value (a parametrized pointer's tensor or array, a plan of pointers at
 * offsets), the fast path of the class's compiled _bind_many with that one name: its twin,
 * Binding._bind_many, does for one name what this method's, Binding._bind_one, does (the same checks,
 * writes and plan) (bench/cpu_overhead.py, one torch tensor rebound). */
static int
bind_one(BindMethod *m, PyObject *exe, PyObject *name, PyObject *value, Py_ssize_t *count, cg_then_launch *then)
{
    int r = bind_fast(m, exe, name, value, count, then);
    if (r != 0)
        return r;
    PyObject *many = Py_XNewRef(_PyType_Lookup(Py_TYPE(exe), str_bind_many)); /* (borrowed: held across the call) */
    if (many == NULL)
        return 0;
    r = cg_bind_many_arrays(many, exe, &name, &value, 1, count, then);
    Py_DECREF(many);
    return r;
}

static PyObject *
bind_vectorcall(BindMethod *m, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs == 1 && kwnames != NULL && PyTuple_GET_SIZE(kwnames) == 1 && PyObject_TypeCheck(args[0], m->cls)) {
        Py_ssize_t count = 0;
        int r = bind_one(m, args[0], PyTuple_GET_ITEM(kwnames, 0), args[1], &count, NULL);
        if (r < 0)
            return NULL;
        if (r > 0)
            return PyLong_FromSsize_t(count);
    }
    return PyObject_Vectorcall(m->func, args, nargsf, kwnames);
}

int
cg_bind_one_fast(PyObject *method, PyObject *exe, PyObject *name, PyObject *value, Py_ssize_t *count,
                 cg_then_launch *then)
{
    BindMethod *m = (BindMethod *)method;
    if (Py_TYPE(method) != &cg_BindMethodType || !PyObject_TypeCheck(exe, m->cls))
        return 0;
    return bind_one(m, exe, name, value, count, then);
}

static PyObject *
bind_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *func, *cls, *plan_type, *buffer_types;
    static char *names[] = {"func", "cls", "plan_type", "buffer_types", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!O!:BindMethod", names, &func, &PyType_Type, &cls,
                                     &PyType_Type, &plan_type, &PySet_Type, &buffer_types))
        return NULL;
    BindMethod *m = (BindMethod *)cg_method_alloc(type, func, (vectorcallfunc)bind_vectorcall, "BindMethod");
    if (m == NULL)
        return NULL;
    PyTypeObject *ct = (PyTypeObject *)cls, *pt = (PyTypeObject *)plan_type;
    if (cg_resolve_slots(ct, "executable", CG_SLOT_COUNT(m->ex), m->ex.at) < 0 ||
        cg_resolve_slots(pt, "bind_plan", CG_SLOT_COUNT(m->pl), m->pl.at) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    m->cls = (PyTypeObject *)Py_NewRef(cls);
    m->plan_type = (PyTypeObject *)Py_NewRef(plan_type);
    m->buffer_types = Py_NewRef(buffer_types);
    return (PyObject *)m;
}

CG_METHOD_GC(BindMethod)

int
cg_method_visit(PyObject *self, Py_ssize_t held, visitproc visit, void *arg)
{
    PyObject **objects = &((cg_method_head *)self)->func;
    for (Py_ssize_t i = 0; i < held; i++)
        Py_VISIT(objects[i]);
    return 0;
}

int
cg_method_clear(PyObject *self, Py_ssize_t held)
{
    PyObject **objects = &((cg_method_head *)self)->func;
    for (Py_ssize_t i = 0; i < held; i++)
        Py_CLEAR(objects[i]);
    return 0;
}

PyObject *
cg_method_alloc(PyTypeObject *type, PyObject *func, vectorcallfunc call, const char *what)
{
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError, "%s: func must be callable", what);
        return NULL;
    }
    cg_method_head *m = (cg_method_head *)type->tp_alloc(type, 0);
    if (m == NULL)
        return NULL;
    m->func = Py_NewRef(func);
    m->vectorcall = call;
    return (PyObject *)m;
}

void
cg_method_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_TYPE(self)->tp_clear(self);
    Py_TYPE(self)->tp_free(self);
}

PyObject *
cg_method_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *
method_func(PyObject *self, void *closure)
{
    return Py_NewRef(((cg_method_head *)self)->func);
}

PyGetSetDef cg_method_getset[] = {
    {"func", method_func, NULL, "The Python method: every call the compiled path does not take goes to it.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(bind_doc,
             "BindMethod(func, cls, plan_type, buffer_types)\n\n"
             "A method of `cls` (Executable) that rebinds one pointer parameter through a prepared plan in C\n"
             "and hands every other call to `func` (the Python method). `plan_type` is BindPlan; `buffer_types`\n"
             "the set of types whose `handle` attribute is the address (shared with the Python side, which adds\n"
             "to it). Copy the Python method's name and docstring onto it with functools.update_wrapper.");

PyTypeObject cg_BindMethodType =
    CG_METHOD_TYPE(BindMethod, "cudagraph.driver._native.BindMethod", bind_doc, bind_new);

int
cg_bind_method_ready(void)
{
    if (str_bind_many == NULL && (str_bind_many = PyUnicode_InternFromString("_bind_many")) == NULL)
        return -1;
    return PyType_Ready(&cg_BindMethodType);
}
