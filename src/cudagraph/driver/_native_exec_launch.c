/*
 * LaunchMethod: Executable.launch with a compiled path for the per-step case.
 *
 * Python twin (see cudagraph.driver.c_entry): cudagraph.executable.executable.Executable.launch, the
 * Python method it wraps (its `func` and `__wrapped__`), which every call it does not take goes to.
 *
 * `exe.launch(s)` through the twin is a Python frame, then cuda.bindings' cuGraphLaunch, which converts
 * both handles: about twice the host cost of cuda.core's compiled Graph.launch (bench/cpu_overhead.py).
 * LaunchMethod is a method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR: `exe.launch(s, x=t)` calls it
 * with `exe` first and the keyword names as a tuple). It takes a call when the stream (positional or
 * `stream=`) is the stream of the executable's last launch, whose handle the twin recorded as an int
 * (`_last_stream_addr`): the very object, or another with that handle (None, an int, or an object
 * whose type has __cuda_stream__, as torch.cuda.current_stream() makes anew at each call); when the
 * executable is open, its exec handle recorded as an int (`_exec_addr`), and no host callback has
 * raised (`_sink` empty). Other keywords are parameters: one goes to the class's `bind`, several to
 * `_bind_many` as a dict, as the twin sends them. Where those are the compiled methods and their fast
 * paths take the call, the launch is made right after their set calls, in the same release of the GIL
 * (a step hands the GIL over once, not twice: beside a busy Python thread each hand-over costs that
 * thread's switch interval). Otherwise the state is read again (the bind ran Python code) and the graph
 * is launched through the driver's cuGraphLaunch with the GIL released, as cuda.bindings calls it (a
 * launch may wait for room in the queue behind a host function that needs the GIL). A refusal goes to
 * the twin's `_launch_failed(code)`, which raises the typed error. Every other call (a new stream, a
 * closed executable, a callback error to raise, two streams) goes to the twin, whole; after a bind, one
 * that no longer qualifies goes to the twin without its parameters, which launches.
 *
 * The executable's state is read through its __slots__ (NATIVE_SLOTS "launch", resolved on the class
 * given at construction). The executable is held by the caller; the objects read are used before any
 * Python code runs, or read again after it.
 */
#include "_native.h"

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func;       /* the Python launch(self, stream=None, **params): everything the fast path does not take */
    PyTypeObject *cls;    /* Executable */
    PyObject *dict;       /* __doc__, __name__, __wrapped__ ... (functools.update_wrapper) */
    cg_launch_slots ls;   /* of cls */
    cg_graph_launch_fn launch; /* the driver's cuGraphLaunch */
} LaunchMethod;
_Static_assert(offsetof(LaunchMethod, vectorcall) == offsetof(cg_method_head, vectorcall) &&
                   offsetof(LaunchMethod, func) == offsetof(cg_method_head, func) &&
                   (offsetof(LaunchMethod, dict) - offsetof(LaunchMethod, func)) % sizeof(PyObject *) == 0,
               "LaunchMethod starts with cg_method_head");

static PyObject *str_stream, *str_bind, *str_bind_many, *str_launch_failed, *str_cuda_stream;

/* The handle of `stream` when it is not the object of the last launch, as the twin's stream_handle reads
 * it: None (0), an exact int, or the answer of its type's __cuda_stream__ method (torch, CuPy and
 * cuda.core streams; a fresh object per call where a library makes one, as torch.cuda.current_stream()
 * does). 1 with the handle in *out, or 0 (decline: the twin reads it). May run Python code. */
static int
stream_address(PyObject *stream, unsigned long long *out)
{
    if (stream == Py_None) {
        *out = 0;
        return 1;
    }
    PyObject *v = NULL;
    if (PyLong_CheckExact(stream)) {
        v = Py_NewRef(stream);
    } else if (_PyType_Lookup(Py_TYPE(stream), str_cuda_stream) != NULL) {
        v = cg_protocol_handle(stream, str_cuda_stream);
    }
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    *out = cg_as_u64(v);
    Py_DECREF(v);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* Whether `exe`'s state lets the compiled path launch on `stream`: 1 with the handles in *ex and *st, or 0.
 * The stream is the object of the last launch, or (`known`) one whose handle `addr` is that launch's: its
 * handle was recorded then (and, for a graph with host callbacks, the stream kept). Runs no Python code. */
static int
ready(LaunchMethod *m, PyObject *exe, PyObject *stream, int known, unsigned long long addr, void **ex, void **st)
{
    PyObject *exec = SLOT(exe, m->ls.exec), *sink = SLOT(exe, m->ls.sink);
    PyObject *exec_addr = SLOT(exe, m->ls.exec_addr), *stream_addr = SLOT(exe, m->ls.stream_addr);
    if (exec == NULL || exec == Py_None || sink == NULL || !PyList_CheckExact(sink) || PyList_GET_SIZE(sink) != 0 ||
        exec_addr == NULL || !PyLong_CheckExact(exec_addr) || stream_addr == NULL || !PyLong_CheckExact(stream_addr))
        return 0;
    *ex = PyLong_AsVoidPtr(exec_addr);
    *st = PyLong_AsVoidPtr(stream_addr);
    if (*ex == NULL || PyErr_Occurred()) { /* (PyLong_AsVoidPtr of a negative int or one above 2**64) */
        PyErr_Clear();
        return 0;
    }
    return SLOT(exe, m->ls.last_stream) == stream || (known && (uintptr_t)*st == addr);
}

/* Rebind the keyword parameters of the call (their names `kwnames`, `nkw` values at `kwvalues`, the
 * `skip`th keyword being the stream, or -1) as the twin does: through the class's `bind` for one, its
 * `_bind_many` (a dict) for several. Where that is the compiled method, its fast path is asked to make
 * the launch `then` after its set calls, in the same release of the GIL (then->done says whether it
 * did); where it declines, or the class holds another callable, it is called as the twin calls it and
 * launches nothing. 0, or -1 with an exception set. Runs Python code. */
static int
bind_params(PyObject *exe, PyObject *kwnames, PyObject *const *kwvalues, Py_ssize_t nkw, Py_ssize_t skip,
            cg_then_launch *then)
{
    Py_ssize_t nparams = nkw - (skip >= 0), count = 0;
    PyObject *found = _PyType_Lookup(Py_TYPE(exe), nparams == 1 ? str_bind : str_bind_many);
    if (found == NULL) {
        PyErr_Format(PyExc_AttributeError, "%.100s has no method %s", Py_TYPE(exe)->tp_name,
                     nparams == 1 ? "bind" : "_bind_many");
        return -1;
    }
    Py_INCREF(found); /* the lookup's answer is borrowed: the calls below may replace it */
    PyObject *out = NULL;
    int r;
    if (nparams == 1) {
        Py_ssize_t k = skip == 0 ? 1 : 0;
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        r = cg_bind_one_fast(found, exe, name, kwvalues[k], &count, then);
        if (r == 0) {
            PyObject *names = skip < 0 ? Py_NewRef(kwnames) : PyTuple_Pack(1, name);
            if (names != NULL) {
                PyObject *argv[2] = {exe, kwvalues[k]};
                out = PyObject_Vectorcall(found, argv, 1, names);
                Py_DECREF(names);
            }
            r = out == NULL ? -1 : 1;
        }
    } else {
        /* the names and values as the call has them: a dict is made only for the twin (bench/cpu_overhead.py,
         * two torch tensors rebound) */
        r = cg_bind_many_fast(found, exe, kwnames, kwvalues, skip, &count, then);
        if (r == 0) {
            PyObject *params = PyDict_New();
            r = params == NULL ? -1 : 0;
            for (Py_ssize_t k = 0; k < nkw && r == 0; k++)
                if (k != skip)
                    r = PyDict_SetItem(params, PyTuple_GET_ITEM(kwnames, k), kwvalues[k]);
            if (r == 0) {
                PyObject *argv[2] = {exe, params};
                out = PyObject_Vectorcall(found, argv, 2, NULL);
                r = out == NULL ? -1 : 1;
            }
            Py_XDECREF(params);
        }
    }
    Py_DECREF(found);
    Py_XDECREF(out);
    return r < 0 ? -1 : 0;
}

/* Raise the typed error of cuGraphLaunch's refusal `rc` through the executable's _launch_failed(code). */
static PyObject *
launch_failed(PyObject *exe, int rc)
{
    PyObject *code = PyLong_FromLong(rc);
    PyObject *out = code == NULL ? NULL : PyObject_CallMethodOneArg(exe, str_launch_failed, code);
    Py_XDECREF(code);
    if (out != NULL) {
        Py_DECREF(out);
        PyErr_Format(PyExc_RuntimeError, "cuGraphLaunch returned %d and _launch_failed() did not raise", rc);
    }
    return NULL;
}

static PyObject *
launch_vectorcall(LaunchMethod *m, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs < 1 || nargs > 2 || !PyObject_TypeCheck(args[0], m->cls))
        return PyObject_Vectorcall(m->func, args, nargsf, kwnames);
    PyObject *exe = args[0], *stream = nargs == 2 ? args[1] : Py_None;
    Py_ssize_t skip = -1;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        if (name == str_stream || (PyUnicode_Check(name) && PyUnicode_Compare(name, str_stream) == 0)) {
            if (nargs == 2) /* the stream twice: the twin's TypeError */
                return PyObject_Vectorcall(m->func, args, nargsf, kwnames);
            stream = args[nargs + k];
            skip = k;
        }
    }
    PyErr_Clear(); /* (PyUnicode_Compare cannot fail on two str) */
    void *ex, *st;
    unsigned long long addr = 0;
    int known = 0;
    if (SLOT(exe, m->ls.last_stream) != stream) { /* another object: the same stream, if its handle is */
        Py_INCREF(stream); /* __cuda_stream__ runs Python code */
        known = stream_address(stream, &addr);
        Py_DECREF(stream);
    }
    if (!ready(m, exe, stream, known, addr, &ex, &st))
        return PyObject_Vectorcall(m->func, args, nargsf, kwnames);
    if (nkw > (skip >= 0)) {
        cg_then_launch then = {m->launch, ex, st, 0, 0};
        Py_INCREF(stream); /* the bind runs Python code, which may drop the caller's other references */
        int r = bind_params(exe, kwnames, args + nargs, nkw, skip, &then);
        /* changed by the bind (Python code ran): the twin launches */
        if (r == 0 && !then.done && !ready(m, exe, stream, known, addr, &ex, &st)) {
            PyObject *argv[2] = {exe, stream};
            PyObject *out = PyObject_Vectorcall(m->func, argv, 2, NULL);
            Py_DECREF(stream);
            return out;
        }
        Py_DECREF(stream);
        if (then.done) { /* launched after the set calls (a later error of the bind is raised all the same) */
            if (r < 0)
                return NULL;
            if (then.rc != 0)
                return launch_failed(exe, then.rc);
            Py_RETURN_NONE;
        }
        if (r < 0)
            return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = m->launch(ex, st);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return launch_failed(exe, rc);
    Py_RETURN_NONE;
}

static PyObject *
launch_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *func, *cls, *address;
    static char *kw[] = {"func", "cls", "launch_address", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!:LaunchMethod", kw, &func, &PyType_Type, &cls, &PyLong_Type,
                                     &address))
        return NULL;
    void *fn = PyLong_AsVoidPtr(address);
    if (fn == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "LaunchMethod: launch_address must be a non-zero address");
        return NULL;
    }
    LaunchMethod *m = (LaunchMethod *)cg_method_alloc(type, func, (vectorcallfunc)launch_vectorcall, "LaunchMethod");
    if (m == NULL)
        return NULL;
    if (cg_resolve_slots((PyTypeObject *)cls, "launch", CG_SLOT_COUNT(m->ls), m->ls.at) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    m->cls = (PyTypeObject *)Py_NewRef(cls);
    m->launch = (cg_graph_launch_fn)fn;
    return (PyObject *)m;
}

CG_METHOD_GC(LaunchMethod)

PyDoc_STRVAR(launch_doc,
             "LaunchMethod(func, cls, launch_address)\n\n"
             "A method of `cls` (Executable) called as `exe.launch(stream, **params)`: on the stream of the\n"
             "executable's last launch, open and with no host callback error to raise, it rebinds the\n"
             "parameters through the class's `bind` (one) or `_bind_many` (several) and calls the driver's\n"
             "cuGraphLaunch at `launch_address` itself, with the GIL released; it hands every other call to\n"
             "`func` (the Python method), and a refusal to the executable's `_launch_failed(code)`.");

PyTypeObject cg_LaunchMethodType =
    CG_METHOD_TYPE(LaunchMethod, "cudagraph.driver._native.LaunchMethod", launch_doc, launch_new);

int
cg_launch_method_ready(void)
{
    str_stream = PyUnicode_InternFromString("stream");
    str_bind = PyUnicode_InternFromString("bind");
    str_bind_many = PyUnicode_InternFromString("_bind_many");
    str_launch_failed = PyUnicode_InternFromString("_launch_failed");
    str_cuda_stream = PyUnicode_InternFromString("__cuda_stream__");
    if (str_stream == NULL || str_bind == NULL || str_bind_many == NULL || str_launch_failed == NULL ||
        str_cuda_stream == NULL)
        return -1;
    return PyType_Ready(&cg_LaunchMethodType);
}
