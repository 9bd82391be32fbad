/*
 * StreamLauncher.capture: runs of kernel nodes, and of the fill, 1-D copy and empty nodes simple() taught,
 * under stream capture, each node's capture dependencies set to its predecessors' driver nodes. Python
 * twin: the loop of cudagraph.materialize.capture._replay. The GIL is kept throughout: a call into a
 * capturing stream only records a node (beside a busy Python thread each release would cost its switch
 * interval, bench/materializers.py).
 */
#include "_native_launch.h"

/* ------------------------------------------------------------------ capture */

static int
cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

static int
grow(void ***arr, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    void **p = PyMem_Realloc(*arr, 2 * n * sizeof(void *));
    if (p == NULL)
        return -1;
    *arr = p;
    *cap = 2 * n;
    return 0;
}

/* Sort and deduplicate a[0:n]; return the new length. */
static size_t
sort_unique(void **a, size_t n)
{
    if (n > 1)
        qsort(a, n, sizeof(void *), cmp_ptr);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || a[m - 1] != a[i])
            a[m++] = a[i];
    return m;
}

/* Append the driver nodes of `t` (a tuple of ints) to self->want at *n; 0, or -1 (no exception set). */
static int
want_add(StreamLauncher *self, PyObject *t, size_t *n)
{
    if (t == NULL || !PyTuple_CheckExact(t) || grow(&self->want, &self->want_cap, *n + (size_t)PyTuple_GET_SIZE(t)) < 0)
        return -1;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(t); j++) {
        void *h = PyLong_AsVoidPtr(PyTuple_GET_ITEM(t, j));
        if (h == NULL) {
            PyErr_Clear();
            return -1;
        }
        self->want[(*n)++] = h;
    }
    return 0;
}

/* The dependencies a captured node must have: the exits of its predecessors (exits[p.index]), or
 * `entry` for a root, sorted, in self->want. Their count, or -1 (decline). Runs no Python code. */
static Py_ssize_t
capture_want(StreamLauncher *self, PyObject *node, PyObject *exits, PyObject *entry)
{
    PyObject *preds = SLOT(node, self->nd.preds);
    if (preds == NULL || !PyList_CheckExact(preds))
        return -1;
    size_t n = 0;
    Py_ssize_t np = PyList_GET_SIZE(preds);
    if (np == 0)
        return want_add(self, entry, &n) < 0 ? -1 : (Py_ssize_t)sort_unique(self->want, n);
    /* The edges another predecessor implies are left out, as explicit construction does (_native_edges.c). */
    cg_edge_types types = {self->kernel_type, self->node_type, &self->kn, &self->nd};
    char few[8];
    char *implied = cg_implied(&types, node, preds, few);
    Py_ssize_t r = -1;
    if (implied == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < np; i++) {
        PyObject *p = PyList_GET_ITEM(preds, i);
        if (!PyObject_TypeCheck(p, self->node_type))
            goto done;
        PyObject *index = SLOT(p, self->nd.index);
        Py_ssize_t at = index != NULL && PyLong_CheckExact(index) ? PyLong_AsSsize_t(index) : -1;
        if (at < 0 || at >= PyList_GET_SIZE(exits)) {
            PyErr_Clear();
            goto done;
        }
        if (!implied[i] && want_add(self, PyList_GET_ITEM(exits, at), &n) < 0)
            goto done;
    }
    r = (Py_ssize_t)sort_unique(self->want, n);
done:
    cg_implied_free(implied, few);
    return r;
}

/* Read the stream's capture dependencies into self->cur (sorted) and, when `out` is given, as a
 * sorted tuple of ints into *out (a new reference) and the single one into *single (NULL otherwise).
 * 0, the CUresult (> 0), or -1 (no memory; no exception set). The driver's array is copied before
 * anything that may run Python code (allocating the tuple may run the collector, whose finalizers may
 * call the driver on this stream, which invalidates the array). */
static int
capture_read(StreamLauncher *self, void *stream, PyObject **out, void **single)
{
    int status = 0;
    unsigned long long id = 0;
    void *graph = NULL;
    void *const *deps = NULL;
    const void *edata = NULL;
    size_t n = 0;
    int rc = ((cg_capture_info_fn)self->capture_info)(stream, &status, &id, &graph, &deps, &edata, &n);
    if (rc)
        return rc;
    if (grow(&self->cur, &self->cur_cap, n ? n : 1) < 0)
        return -1;
    if (n)
        memcpy(self->cur, deps, n * sizeof(void *));
    self->ncur = sort_unique(self->cur, n);
    if (out != NULL) {
        /* (a call made while the tuple is allocated is declined: self->cur stays as it is) */
        Py_ssize_t m = (Py_ssize_t)self->ncur;
        PyObject *t = PyTuple_New(m);
        for (Py_ssize_t j = 0; t != NULL && j < m; j++) {
            PyObject *h = PyLong_FromVoidPtr(self->cur[j]);
            if (h == NULL)
                Py_CLEAR(t);
            else
                PyTuple_SET_ITEM(t, j, h);
        }
        if (t == NULL) {
            PyErr_Clear();
            return -1;
        }
        *out = t;
        *single = n == 1 ? self->cur[0] : NULL;
    }
    return 0;
}

const char cg_launcher_capture_doc[] =
             "capture(order, start, stream, exits, raw, entry, bindings=None) -> int\n\n"
             "Under stream capture on the stream handle `stream`: for order[start:], while each node is\n"
             "one issue() takes, set the stream's capture dependencies to the exits of its predecessors\n"
             "(exits[p.index], tuples of driver node handles; `entry` for a root) unless they are\n"
             "already those, make its stream call (an empty node: none), and record the stream's\n"
             "dependencies after it (sorted) in exits[node.index] and the captured node (the single\n"
             "dependency after a call, else 0) in raw[node.index]. Return the index of the first node\n"
             "not done; `rc` holds the CUresult of a refused call (-1: no memory) and `failed` its name.\n"
             "`bindings` (name -> int) resolves the parameter operands of fills and copies (see issue()).";

PyObject *
cg_launcher_capture(StreamLauncher *self, PyObject *const *argv, Py_ssize_t argc)
{
    void *stream;
    if ((argc != 6 && argc != 7) || !PyList_CheckExact(argv[0]) || !PyLong_CheckExact(argv[1]) ||
        !PyList_CheckExact(argv[3]) || !PyList_CheckExact(argv[4]) || !PyTuple_CheckExact(argv[5]) ||
        (argc == 7 && argv[6] != Py_None && !PyDict_CheckExact(argv[6]))) {
        PyErr_SetString(PyExc_TypeError, "capture(order: list, start: int, stream: int, exits: list, raw: list, "
                                         "entry: tuple, bindings: dict | None = None)");
        return NULL;
    }
    Py_ssize_t i;
    if (cg_run_args(argv, "capture", &i, &stream) < 0)
        return NULL;
    if (self->capture_info == NULL || !cg_launcher_enter(self))
        return PyLong_FromSsize_t(i);
    cg_simple_forget(&self->simple); /* memory may have been freed and allocated again since the last call */
    cg_simple_bind(&self->simple, argc == 7 ? argv[6] : NULL); /* (a dict or None: checked above) */
    PyObject *order = argv[0], *exits = argv[3], *raw = argv[4], *entry = argv[5];
    RunState run = {NULL, NULL, {NULL, 0}};
    int failed = CALL_CAPTURE_INFO;
    int rc = i < PyList_GET_SIZE(order) ? capture_read(self, stream, NULL, NULL) : 0;
    PyObject *node = NULL; /* held until its launch is recorded: releasing it may run Python code */
    for (; !rc && i < PyList_GET_SIZE(order); i++) {
        Py_XSETREF(node, Py_NewRef(PyList_GET_ITEM(order, i)));
        unsigned int d[6], smem;
        Py_ssize_t nw = -1, at = -1;
        issue_launch op;
        int simple = cg_simple_is(&self->simple, node);
        /* (the last code that may run Python code) */
        if (simple ? cg_issue_prepare(self, node, &op) : cg_run_prepare(self, &run, node, d, &smem)) {
            PyObject *index = SLOT(node, self->nd.index);
            at = index != NULL && PyLong_CheckExact(index) ? PyLong_AsSsize_t(index) : -1;
            if (at >= PyList_GET_SIZE(exits) || at >= PyList_GET_SIZE(raw))
                at = -1;
            PyErr_Clear();
            nw = at < 0 ? -1 : capture_want(self, node, exits, entry);
        }
        if (nw < 0)
            break;
        if ((size_t)nw != self->ncur || (nw && memcmp(self->want, self->cur, (size_t)nw * sizeof(void *)))) {
            failed = CALL_UPDATE_DEPS;
            rc = ((cg_update_deps_fn)self->update_deps)(stream, self->want, NULL, (size_t)nw,
                                                         SET_CAPTURE_DEPENDENCIES);
            if (rc)
                break;
        }
        if (!simple) {
            failed = CALL_LAUNCH;
            rc = cg_launcher_call(self, run.lk, d, smem, stream, 0); /* the GIL kept: it only records */
        } else if (op.op >= 0) {
            failed = op.call;
            rc = cg_issue_one(self, &op, stream);
        }
        PyObject *after = NULL;
        void *single = NULL;
        if (!rc) {
            failed = CALL_CAPTURE_INFO;
            rc = capture_read(self, stream, &after, &single);
        }
        if (rc)
            break;
        if (simple && op.op < 0) /* an empty node is captured as nothing: its successors follow its dependencies */
            single = NULL;
        /* The collector may have run (the tuple allocated): the lists are checked again. */
        PyObject *h = PyLong_FromVoidPtr(single);
        if (h == NULL || at >= PyList_GET_SIZE(exits) || at >= PyList_GET_SIZE(raw)) {
            Py_XDECREF(h);
            Py_DECREF(after);
            PyErr_Clear();
            rc = -1;
            break;
        }
        /* Lists of tuples of ints and of ints (from the caller): replacing items runs no Python code
         * unless the caller put other objects there. */
        PyObject *old_exit = PyList_GET_ITEM(exits, at), *old_raw = PyList_GET_ITEM(raw, at);
        PyList_SET_ITEM(exits, at, after);
        PyList_SET_ITEM(raw, at, h);
        Py_XDECREF(old_exit);
        Py_XDECREF(old_raw);
    }
    self->rc = rc;
    self->failed = failed;
    cg_simple_bind(&self->simple, NULL); /* (the caller holds the dict: nothing is released here) */
    self->busy = 0;
    cg_run_end(&run);
    Py_XDECREF(node);
    return PyLong_FromSsize_t(i);
}
