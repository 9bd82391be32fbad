/*
 * StreamLauncher: cudagraph.launch on a stream (launch), the stream targets and configurations it has
 * learned, and what Graph.run's runs of kernel nodes (issue, _native_issue.c) share. See _native_launch.c.
 */
#include "_native_launch.h"

/* ------------------------------------------------------------------ StreamLauncher */

static void
launcher_clear_refs(StreamLauncher *self)
{
    Py_CLEAR(self->kernel_type);
    Py_CLEAR(self->node_type);
    Py_CLEAR(self->kernels);
    for (int i = 0; i < NAME_COUNT; i++)
        Py_CLEAR(self->names[i]);
    for (int i = 0; i < self->ntargets; i++)
        Py_CLEAR(self->target_types[i]);
    self->ntargets = 0;
    for (int i = 0; i < CONFIG_CACHE; i++) {
        Py_CLEAR(self->configs[i].config);
        Py_CLEAR(self->configs[i].grid);
        Py_CLEAR(self->configs[i].block);
    }
    cg_simple_clear(&self->simple);
}

static void
launcher_dealloc(StreamLauncher *self)
{
    PyObject_GC_UnTrack(self);
    launcher_clear_refs(self);
    PyMem_Free(self->want);
    PyMem_Free(self->cur);
    cg_issue_batch_free(self->batch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
launcher_traverse(StreamLauncher *self, visitproc visit, void *arg)
{
    Py_VISIT(self->kernel_type);
    Py_VISIT(self->node_type);
    Py_VISIT(self->kernels);
    for (int i = 0; i < self->ntargets; i++)
        Py_VISIT(self->target_types[i]);
    for (int i = 0; i < CONFIG_CACHE; i++) {
        Py_VISIT(self->configs[i].config);
        Py_VISIT(self->configs[i].grid);
        Py_VISIT(self->configs[i].block);
    }
    return cg_simple_visit(&self->simple, visit, arg);
}

static int
launcher_tp_clear(StreamLauncher *self)
{
    launcher_clear_refs(self);
    return 0;
}

static int
launcher_init(StreamLauncher *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"launch", "capture_info", "update_deps", "kernel_type", "node_type",
                             "kernels",  "names",        "limits",      NULL};
    PyObject *launch, *info, *update, *ktype, *ntype, *kernels, *names, *limits;
    if (self->kernel_type != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "StreamLauncher is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!O!O!O!O!", kwlist, &launch, &info, &update, &PyType_Type,
                                     &ktype, &PyType_Type, &ntype, &PyDict_Type, &kernels, &PyTuple_Type, &names,
                                     &PyTuple_Type, &limits))
        return -1;
    void *l, *ci, *ud;
    if (address_of(launch, "launch", &l) < 0 || address_of(info, "capture_info", &ci) < 0 ||
        address_of(update, "update_deps", &ud) < 0)
        return -1;
    if (l == NULL) {
        PyErr_SetString(PyExc_ValueError, "launch must not be NULL");
        return -1;
    }
    if (PyTuple_GET_SIZE(names) != NAME_COUNT || PyTuple_GET_SIZE(limits) != 6) {
        PyErr_Format(PyExc_ValueError, "names must hold %d attribute names and limits 6 ints", NAME_COUNT);
        return -1;
    }
    unsigned long lim[6];
    for (int i = 0; i < 6; i++) {
        lim[i] = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(limits, i));
        if (lim[i] == (unsigned long)-1 && PyErr_Occurred())
            return -1;
        if (lim[i] > 0xFFFFFFFFul) {
            PyErr_SetString(PyExc_ValueError, "limits must fit 32 bits");
            return -1;
        }
    }
    for (int i = 0; i < NAME_COUNT; i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "names must be str");
            return -1;
        }
    }
    cg_kernel_slots kn;
    cg_node_slots nd;
    if (cg_resolve_node_types(ktype, ntype, &kn, &nd) < 0)
        return -1;
    if (self->kernel_type != NULL) { /* by the Python code resolving the slots ran */
        PyErr_SetString(PyExc_RuntimeError, "StreamLauncher is already initialized");
        return -1;
    }
    for (int i = 0; i < NAME_COUNT; i++) {
        PyObject *s = Py_NewRef(PyTuple_GET_ITEM(names, i));
        PyUnicode_InternInPlace(&s);
        self->names[i] = s;
    }
    memcpy(self->limits, lim, sizeof lim);
    self->launch = l;
    self->capture_info = ci != NULL && ud != NULL ? ci : NULL;
    self->update_deps = ud;
    self->kn = kn;
    self->nd = nd;
    self->kernels = Py_NewRef(kernels);
    self->node_type = (PyTypeObject *)Py_NewRef(ntype);
    self->kernel_type = (PyTypeObject *)Py_NewRef(ktype); /* last: ready */
    return 0;
}

/* Begin a call: 1, or 0 when the launcher is busy or not initialized (the caller declines). */
int
cg_launcher_enter(StreamLauncher *self)
{
    if (self->kernel_type == NULL || self->busy)
        return 0;
    self->busy = 1;
    return 1;
}

/* The driver call. An eager launch releases the GIL, as cuda.bindings does: it may wait for room in the
 * launch queue, that is for earlier work, and a host function among it needs the GIL. A launch into a
 * capturing stream only records a node and never waits: it keeps the GIL, as the explicit loop keeps it
 * for cuGraphAddNode, since each release hands it to any other Python thread that is busy, for that
 * thread's whole switch interval (bench/materializers.py: a capture alone and beside a busy thread, against
 * cuda.core's). */
int
cg_launcher_call(StreamLauncher *self, LaunchKernel *lk, const unsigned int *d, unsigned int smem, void *stream,
                 int release)
{
    int rc;
    cg_launch_fn fn = (cg_launch_fn)self->launch;
    void *func = lk->func;
    void **params = lk->pk.n ? lk->ptrs : NULL;
    if (!release)
        return fn(func, d[0], d[1], d[2], d[3], d[4], d[5], smem, stream, params, NULL);
    Py_BEGIN_ALLOW_THREADS
    rc = fn(func, d[0], d[1], d[2], d[3], d[4], d[5], smem, stream, params, NULL);
    Py_END_ALLOW_THREADS
    return rc;
}

/* The LaunchKernel registered for `kernel` (a new reference), or NULL (no exception set). A kernel object is
 * registered under its id() and found by identity; an exact int handle names its kernel by value (each call
 * may pass a new int object): registered under -(handle + 1), which no id() is, and found by value
 * (bench/cpu_overhead.py: a kernel given as a new int handle object per call). */
LaunchKernel *
cg_launcher_kernel(StreamLauncher *self, PyObject *kernel)
{
    int by_value = PyLong_CheckExact(kernel);
    PyObject *key;
    if (by_value) {
        long long v = PyLong_AsLongLong(kernel); /* an exact int: runs no Python code */
        key = v < 0 || v == LLONG_MAX ? NULL : PyLong_FromLongLong(-v - 1);
    } else {
        key = PyLong_FromVoidPtr(kernel);
    }
    if (key == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *table = Py_NewRef(self->kernels);
    PyObject *lk = PyDict_GetItemWithError(table, key); /* int keys: runs no Python code */
    Py_DECREF(key);
    PyObject *known = lk != NULL && Py_IS_TYPE(lk, &cg_LaunchKernelType) ? ((LaunchKernel *)lk)->kernel : NULL;
    int same = known == kernel ||
               (by_value && known != NULL && PyLong_CheckExact(known) &&
                PyObject_RichCompareBool(known, kernel, Py_EQ) == 1); /* exact ints: runs no Python code */
    if (!same) {
        Py_DECREF(table);
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(lk);
    Py_DECREF(table);
    return (LaunchKernel *)lk;
}

/* ------------------------------------------------------------------ targets and configurations */

/* The stream handle of `target` by the reading learned for its type; 0 or -1 (decline, no exception).
 * May run Python code (__cuda_stream__, __int__); the caller holds `target`. */
static int
target_stream(StreamLauncher *self, PyObject *target, void **out)
{
    int mode = 0;
    for (int i = 0; i < self->ntargets; i++) {
        if ((PyObject *)Py_TYPE(target) == self->target_types[i]) {
            mode = self->target_modes[i];
            break;
        }
    }
    PyObject *v = NULL;
    if (mode == TARGET_INT) {
        v = PyLong_CheckExact(target) ? Py_NewRef(target) : NULL;
    } else if (mode == TARGET_PROTOCOL) {
        v = cg_protocol_handle(target, self->names[NAME_PROTOCOL]);
    } else if (mode == TARGET_LONG) {
        v = PyNumber_Long(target);
    }
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    unsigned long long h = cg_as_u64(v);
    Py_DECREF(v);
    if (h == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    *out = (void *)(uintptr_t)h;
    return 0;
}

/* One launch dimension (an int, or a tuple of 1 to 3 ints) within limits[0:3]; 0 or -1 (decline). */
static int
config_dim(PyObject *v, const unsigned long *limits, unsigned int *d)
{
    PyObject *items[3] = {NULL, NULL, NULL};
    Py_ssize_t n;
    if (PyLong_CheckExact(v)) {
        items[0] = v;
        n = 1;
    } else if (PyTuple_CheckExact(v) && PyTuple_GET_SIZE(v) >= 1 && PyTuple_GET_SIZE(v) <= 3) {
        n = PyTuple_GET_SIZE(v);
        for (Py_ssize_t i = 0; i < n; i++)
            items[i] = PyTuple_GET_ITEM(v, i);
    } else {
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        unsigned long x = 1;
        if (i < n) {
            if (!PyLong_CheckExact(items[i]))
                return -1;
            x = PyLong_AsUnsignedLong(items[i]);
            if (x == (unsigned long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                return -1;
            }
        }
        if (x == 0 || x > limits[i])
            return -1;
        d[i] = (unsigned int)x;
    }
    return 0;
}

/* Whether attribute `name` of `obj` is `expected` (identity); 0 on any doubt. May run Python code. */
static int
attr_is(PyObject *obj, PyObject *name, PyObject *expected)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    int same = v == expected;
    Py_DECREF(v);
    return same;
}

/* The entry remembering `config`, or NULL: two places per config (_two_way.h), so launches that alternate between
 * two configurations sharing a place stay compiled (bench/cpu_overhead.py: two LaunchConfigs in turn). */
static ConfigEntry *
config_entry(StreamLauncher *self, PyObject *config)
{
    return cg_two_way_find(self->configs, sizeof(ConfigEntry), CONFIG_CACHE, offsetof(ConfigEntry, config), config);
}

/* The dimensions and shared memory of a plain configuration: a (grid, block) tuple, or a config
 * remembered plain that still holds the same values. 0 or -1 (decline). May run Python code. */
static int
config_dims(StreamLauncher *self, PyObject *config, unsigned int *d, unsigned int *smem)
{
    if (PyTuple_CheckExact(config)) {
        if (PyTuple_GET_SIZE(config) != 2 || config_dim(PyTuple_GET_ITEM(config, 0), self->limits, d) < 0 ||
            config_dim(PyTuple_GET_ITEM(config, 1), self->limits + 3, d + 3) < 0)
            return -1;
        *smem = 0;
        return 0;
    }
    ConfigEntry *e = config_entry(self, config);
    if (e == NULL)
        return -1;
    e->used = ++self->tick;
    /* Held: the attribute reads below may run code that replaces the entry. */
    PyObject *grid = Py_NewRef(e->grid), *block = Py_NewRef(e->block);
    long want = e->smem;
    unsigned int dims[6];
    memcpy(dims, e->dims, sizeof dims);
    int ok = attr_is(config, self->names[NAME_GRID], grid) && attr_is(config, self->names[NAME_BLOCK], block) &&
             attr_is(config, self->names[NAME_CLUSTER], Py_None) &&
             attr_is(config, self->names[NAME_COOPERATIVE], Py_False);
    Py_DECREF(grid);
    Py_DECREF(block);
    if (ok) {
        PyObject *s = PyObject_GetAttr(config, self->names[NAME_SHMEM]);
        long v = s != NULL && PyLong_CheckExact(s) ? PyLong_AsLong(s) : -1;
        Py_XDECREF(s);
        PyErr_Clear();
        ok = v == want;
    }
    if (!ok)
        return -1;
    memcpy(d, dims, sizeof dims);
    *smem = (unsigned int)want;
    return 0;
}

PyDoc_STRVAR(learn_target_doc,
             "learn_target(type, mode) -> None\n\n"
             "Read the stream handle of targets of exactly `type` by `mode`: 1 the int itself, 2 item 1 of\n"
             "__cuda_stream__(), 3 int(target). Up to 16 types; later ones are not learned.");

static PyObject *
launcher_learn_target(StreamLauncher *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyType_Check(argv[0]) || !PyLong_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "learn_target(type, mode: int)");
        return NULL;
    }
    long mode = PyLong_AsLong(argv[1]);
    if (mode < TARGET_INT || mode > TARGET_LONG) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "learn_target: mode must be 1, 2 or 3");
        return NULL;
    }
    for (int i = 0; i < self->ntargets; i++) {
        if (self->target_types[i] == argv[0]) {
            self->target_modes[i] = (int)mode;
            Py_RETURN_NONE;
        }
    }
    if (self->ntargets < MAX_TARGETS) {
        self->target_types[self->ntargets] = Py_NewRef(argv[0]);
        self->target_modes[self->ntargets++] = (int)mode;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(remember_config_doc,
             "remember_config(config, grid, block, smem, dims) -> None\n\n"
             "`config` was checked plain (no cluster, not cooperative) while it held the objects `grid`\n"
             "and `block` and shared memory `smem`; `dims` are its 6 checked dimensions. A launch takes it\n"
             "while its attributes are still these.");

static PyObject *
launcher_remember_config(StreamLauncher *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 5 || !PyLong_CheckExact(argv[3]) || !PyTuple_CheckExact(argv[4]) || PyTuple_GET_SIZE(argv[4]) != 6) {
        PyErr_SetString(PyExc_TypeError, "remember_config(config, grid, block, smem: int, dims: tuple of 6 ints)");
        return NULL;
    }
    long smem = PyLong_AsLong(argv[3]);
    if ((smem == -1 && PyErr_Occurred()) || smem < 0 || smem > 0xFFFFFFFFl) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "remember_config: smem must be a 32-bit size");
        return NULL;
    }
    unsigned int dims[6];
    for (int i = 0; i < 6; i++) {
        PyObject *x = PyTuple_GET_ITEM(argv[4], i);
        unsigned long v = PyLong_CheckExact(x) ? PyLong_AsUnsignedLong(x) : 0;
        if ((v == (unsigned long)-1 && PyErr_Occurred()) || v == 0 || v > 0xFFFFFFFFul) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "remember_config: dims must be 6 positive 32-bit ints");
            return NULL;
        }
        dims[i] = (unsigned int)v;
    }
    ConfigEntry *e = cg_two_way_place(self->configs, sizeof(ConfigEntry), CONFIG_CACHE, offsetof(ConfigEntry, config),
                                      offsetof(ConfigEntry, used), argv[0]);
    e->used = ++self->tick;
    PyObject *old[3] = {e->config, e->grid, e->block};
    e->config = Py_NewRef(argv[0]);
    e->grid = Py_NewRef(argv[1]);
    e->block = Py_NewRef(argv[2]);
    e->smem = smem;
    memcpy(e->dims, dims, sizeof dims);
    for (int i = 0; i < 3; i++) /* last: releasing may run Python code, and the entry is whole */
        Py_XDECREF(old[i]);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ launch */

PyDoc_STRVAR(launch_doc,
             "launch(target, config, kernel, args) -> int\n\n"
             "cudagraph.launch(target, config, kernel, *args) on a stream when every part was learned:\n"
             "0 launched, the CUresult (> 0) of a refused launch, or -1 when declined (the Python path\n"
             "takes the call).");

static PyObject *
launcher_launch(StreamLauncher *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 4) {
        PyErr_SetString(PyExc_TypeError, "launch(target, config, kernel, args: tuple)");
        return NULL;
    }
    if (!PyTuple_CheckExact(argv[3]) || !cg_launcher_enter(self))
        return PyLong_FromLong(-1);
    /* argv is held by the caller for the whole call. */
    int rc = -1;
    void *stream;
    unsigned int d[6], smem;
    LaunchKernel *lk = NULL;
    if (target_stream(self, argv[0], &stream) == 0 && config_dims(self, argv[1], d, &smem) == 0 &&
        (lk = cg_launcher_kernel(self, argv[2])) != NULL && cg_lk_take(lk)) {
        if (cg_lk_pack(lk, argv[3], NULL, NULL))
            rc = cg_launcher_call(self, lk, d, smem, stream, 1);
        cg_lk_give(lk);
    }
    self->busy = 0;
    Py_XDECREF(lk);
    return PyLong_FromLong(rc);
}

/* ------------------------------------------------------------------ runs of kernel nodes */

/* The grid, block and shared memory of a kernel node: 0, or -1 when not plain ints or more than
 * PLAIN_SMEM bytes of shared memory (runs no Python code). */
static int
node_dims(StreamLauncher *self, PyObject *node, unsigned int *d, unsigned int *smem)
{
    PyObject *grid = SLOT(node, self->kn.grid), *block = SLOT(node, self->kn.block);
    PyObject *s = SLOT(node, self->kn.smem);
    if (grid == NULL || block == NULL || s == NULL || !PyLong_CheckExact(s) ||
        dims3(grid, d, d + 1, d + 2) < 0 || dims3(block, d + 3, d + 4, d + 5) < 0)
        return -1;
    unsigned long v = PyLong_AsUnsignedLong(s);
    if ((v == (unsigned long)-1 && PyErr_Occurred()) || v > PLAIN_SMEM) {
        PyErr_Clear();
        return -1;
    }
    *smem = (unsigned int)v;
    return 0;
}

/* Make node `node` (held by the caller) ready to launch: its LaunchKernel in run->lk (its buffer taken)
 * with its arguments packed, *d and *smem its dimensions. 1, or 0 when the Python path must take it. */
int
cg_run_prepare(StreamLauncher *self, RunState *run, PyObject *node, unsigned int *d, unsigned int *smem)
{
    if (Py_TYPE(node) != self->kernel_type || SLOT(node, self->kn.attrs) != Py_None)
        return 0;
    PyObject *kernel = SLOT(node, self->kn.kernel), *args = SLOT(node, self->kn.args);
    if (kernel == NULL || args == NULL)
        return 0;
    /* Held: what is released below, and packing, may run Python code that changes the node. */
    Py_INCREF(kernel);
    Py_INCREF(args);
    LaunchKernel *old_lk = NULL;
    PyObject *old_packed = NULL;
    int ok = 1;
    if (run->lk == NULL || run->lk->kernel != kernel) {
        LaunchKernel *lk = cg_launcher_kernel(self, kernel);
        if (lk != NULL && !cg_lk_take(lk))
            Py_CLEAR(lk);
        if (lk == NULL) {
            ok = 0;
        } else {
            old_lk = run->lk; /* released below, with the tuple packed in it */
            if (old_lk != NULL)
                cg_lk_give(old_lk);
            run->lk = lk;
            old_packed = run->packed;
            run->packed = NULL;
        }
    }
    if (ok && args != run->packed) {
        PyObject *prev = run->packed; /* (NULL when the kernel changed above) */
        run->packed = NULL;           /* the buffer is being written */
        if (prev != NULL)
            old_packed = prev;
        ok = cg_lk_pack(run->lk, args, &run->memo, &self->simple); /* (the run's bindings: fixed while it runs) */
        if (ok)
            run->packed = Py_NewRef(args);
    }
    /* Releasing may run Python code (the last reference to a kernel or an argument's __del__): done
     * before the node is read again, so that what is launched is the node as it is now. */
    Py_XDECREF(old_packed);
    Py_XDECREF(old_lk);
    ok = ok && Py_TYPE(node) == self->kernel_type && SLOT(node, self->kn.kernel) == kernel &&
         SLOT(node, self->kn.args) == args && SLOT(node, self->kn.attrs) == Py_None && run->lk->kernel == kernel;
    Py_DECREF(kernel);
    Py_DECREF(args);
    /* (when declined, releasing them may run Python code: node_dims is not reached then) */
    return ok && node_dims(self, node, d, smem) == 0;
}

int
cg_run_args(PyObject *const *argv, const char *what, Py_ssize_t *start, void **stream)
{
    if (address_of(argv[2], "stream", stream) < 0)
        return -1;
    *start = PyLong_AsSsize_t(argv[1]);
    if (*start < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: start must be non-negative", what);
        return -1;
    }
    return 0;
}

void
cg_run_end(RunState *run)
{
    LaunchKernel *lk = run->lk;
    PyObject *packed = run->packed, *seen = run->memo.obj;
    run->lk = NULL;
    run->packed = NULL;
    run->memo.obj = NULL;
    if (lk != NULL)
        cg_lk_give(lk);
    Py_XDECREF(packed);
    Py_XDECREF(lk);
    Py_XDECREF(seen);
}

static PyObject *
launcher_get_rc(StreamLauncher *self, void *closure)
{
    return PyLong_FromLong(self->rc);
}

static PyObject *
launcher_get_failed(StreamLauncher *self, void *closure)
{
    static const char *const names[CALL_COUNT] = {
        "cuLaunchKernel",    "cuStreamGetCaptureInfo", "cuStreamUpdateCaptureDependencies",
        "cuMemsetD8Async",   "cuMemsetD16Async",       "cuMemsetD32Async",
        "cuMemsetD2D8Async", "cuMemsetD2D16Async",     "cuMemsetD2D32Async",
        "cuMemcpyAsync"};
    return PyUnicode_FromString(names[self->failed >= 0 && self->failed < CALL_COUNT ? self->failed : 0]);
}

static PyObject *
launcher_get_captures(StreamLauncher *self, void *closure)
{
    return PyBool_FromLong(self->capture_info != NULL);
}

static PyMethodDef launcher_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launcher_launch, METH_FASTCALL, launch_doc},
    {"issue", (PyCFunction)(void (*)(void))cg_launcher_issue, METH_FASTCALL, cg_launcher_issue_doc},
    {"simple", (PyCFunction)(void (*)(void))cg_launcher_simple, METH_FASTCALL, cg_launcher_simple_doc},
    {"capture", (PyCFunction)(void (*)(void))cg_launcher_capture, METH_FASTCALL, cg_launcher_capture_doc},
    {"learn_target", (PyCFunction)(void (*)(void))launcher_learn_target, METH_FASTCALL, learn_target_doc},
    {"remember_config", (PyCFunction)(void (*)(void))launcher_remember_config, METH_FASTCALL, remember_config_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef launcher_getset[] = {
    {"rc", (getter)launcher_get_rc, NULL,
     "The CUresult of the call refused by the last issue() or capture() (0: none; -1: no memory). Callers\n"
     "of those serialize them (PACKING_LOCK); launch() returns its own.",
     NULL},
    {"failed", (getter)launcher_get_failed, NULL,
     "The driver call that `rc` is the answer of (the names the Python twins give).", NULL},
    {"captures", (getter)launcher_get_captures, NULL, "Whether capture() can run (its entry points were given).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(launcher_doc,
             "StreamLauncher(launch, capture_info, update_deps, kernel_type, node_type, kernels, names, limits)\n\n"
             "Stream launches through cuLaunchKernel (address `launch`); capture() also needs\n"
             "cuStreamGetCaptureInfo_v3 and cuStreamUpdateCaptureDependencies_v2 (0: none). `kernels` maps\n"
             "id(kernel) to its LaunchKernel; `names` are the attribute names read on configurations and\n"
             "targets (grid, block, shmem_size, cluster, is_cooperative, __cuda_stream__); `limits` the\n"
             "grid and block limits per axis. The slots read are NATIVE_SLOTS['kernel_node'] of\n"
             "kernel_type and NATIVE_SLOTS['node'] of node_type.");

PyTypeObject cg_StreamLauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph.driver._native.StreamLauncher",
    .tp_basicsize = sizeof(StreamLauncher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = launcher_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)launcher_init,
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_traverse = (traverseproc)launcher_traverse,
    .tp_clear = (inquiry)launcher_tp_clear,
    .tp_methods = launcher_methods,
    .tp_getset = launcher_getset,
};
