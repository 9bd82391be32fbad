/*
 * cudagraph.definition._define (_define_launch.c): PathLaunch, the compiled path of a launch after the last op of
 * a builder's path: cudagraph.compat's `launch(builder, config, kernel, *args)` for a GraphBuilder.
 *
 * Python twin: the function it is built over (`fallback`, its `__wrapped__`), which takes every call this path
 * does not: cudagraph.frontends.compat.entry's launch, which adds the node with the same Graph.kernel call.
 *
 * The path takes a call when
 * - `target` is exactly the owner type, its state slot holds the `building` object and its path slot an object of
 *   exactly the path type whose graph is exactly the graph type and whose tail is a list;
 * - `kernel` is of a type taught with remember() (a driver kernel the definition takes as it is);
 * - no argument is of the `skip` type (a condition wrapper the twin converts), a Python bool, float or complex (the
 *   twin passes them as cuda.core does, as a double and a double complex);
 * - `config` was taught with remember() and still holds the same grid and block objects, the same shared memory,
 *   no cluster, not cooperative, no programmatic serialization (read on every call: configurations are mutable).
 * It then calls Graph.kernel (the KernelMethod: its compiled path, else the Python method) exactly as the twin
 * does, `method(graph, kernel, grid, block, args, shared_mem=smem, after=tail)` with the checked grid and block,
 * and makes the new node the path's tail and last op.
 *
 * Safety: the config's attribute reads may run Python code; every object used is held across them and the
 * builder's state, path, graph and tail are read after the last of them. Every allocation that may start a
 * collection comes before the state is read, but the copy of a tail of several nodes (which is what the twin
 * passes), and that copy is made from the held list.
 */
#include "_define.h"
#include "../driver/_two_way.h"

enum { C_GRID, C_BLOCK, C_SMEM, C_CLUSTER, C_COOPERATIVE, C_PDL, C_COUNT };
static const char *const config_names[C_COUNT] = {"grid",           "block",
                                                  "shmem_size",     "cluster",
                                                  "is_cooperative", "programmatic_stream_serialization"};
enum { O_STATE, O_PATH, O_COUNT };
enum { P_GRAPH, P_TAIL, P_LAST, P_COUNT };
#define LAUNCH_CONFIGS 16 /* configurations remembered (by address, two places each; see find_entry) */

typedef struct {
    PyObject *config, *grid_obj, *block_obj, *smem, *grid, *block;
    unsigned long long used; /* the launch count when last taught or taken */
} LaunchEntry;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *method;   /* the KernelMethod */
    PyObject *fallback; /* the Python twin */
    PyTypeObject *owner, *path, *graph, *skip;
    PyObject *building;
    Py_ssize_t owner_at[O_COUNT], path_at[P_COUNT];
    PyObject *names[C_COUNT];
    PyObject *kwnames; /* ("shared_mem", "after") */
    PyObject *dict;
    Py_ssize_t taken;
    unsigned long long clock; /* counts calls taken and configurations taught */
    TypeTable kernels;
    LaunchEntry entries[LAUNCH_CONFIGS];
} PathLaunch;

static int
pl_table_has(const TypeTable *t, PyTypeObject *tp)
{
    for (Py_ssize_t i = 0; i < t->n; i++)
        if (t->t[i] == (PyObject *)tp)
            return 1;
    return 0;
}

static void
entry_clear(LaunchEntry *e)
{
    Py_CLEAR(e->config);
    Py_CLEAR(e->grid_obj);
    Py_CLEAR(e->block_obj);
    Py_CLEAR(e->smem);
    Py_CLEAR(e->grid);
    Py_CLEAR(e->block);
}

/* A configuration's entry (two places by its address, _two_way.h: two configurations of one program that share
 * the first place do not displace each other); NULL when it is not remembered. */
static LaunchEntry *
find_entry(PathLaunch *self, PyObject *config)
{
    return cg_two_way_find(self->entries, sizeof(LaunchEntry), LAUNCH_CONFIGS, offsetof(LaunchEntry, config), config);
}

/* Where remember() puts `config`: its entry, else a free one of its two places, else the one of the two used
 * least recently. */
static LaunchEntry *
entry_for(PathLaunch *self, PyObject *config)
{
    return cg_two_way_place(self->entries, sizeof(LaunchEntry), LAUNCH_CONFIGS, offsetof(LaunchEntry, config),
                            offsetof(LaunchEntry, used), config);
}

/* Attribute `name` of `obj` into *v (a new reference): 1; 0 when the read fails with an Exception (cleared: the
 * twin reports it); -1 for an exception that is not an Exception (e.g. KeyboardInterrupt). May run Python code. */
static int
read_attr(PyObject *obj, PyObject *name, PyObject **v)
{
    if ((*v = PyObject_GetAttr(obj, name)) != NULL)
        return 1;
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    PyErr_Clear();
    return 0;
}

/* Whether attribute `name` of `obj` is `want` (identity), or with `as_int` an exact int equal to the exact int
 * `want`: 1, 0, -1 as read_attr. */
static int
attr_is(PyObject *obj, PyObject *name, PyObject *want, int as_int)
{
    PyObject *v;
    int ok = read_attr(obj, name, &v);
    if (ok != 1)
        return ok;
    int same = v == want;
    if (!same && as_int && PyLong_CheckExact(v)) {
        int overflow_a, overflow_b;
        long a = PyLong_AsLongAndOverflow(v, &overflow_a), b = PyLong_AsLongAndOverflow(want, &overflow_b);
        same = !overflow_a && !overflow_b && !PyErr_Occurred() && a == b;
        PyErr_Clear();
    }
    Py_DECREF(v);
    return same;
}

/* The node added, Py_None (new reference) once the path's tail is the node; Py_NotImplemented (new reference) when
 * the twin must answer; NULL with an exception set (Graph.kernel's, or an interrupt). */
static PyObject *
pl_fast(PathLaunch *self, PyObject *const *argv, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 3 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) || self->method == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *target = argv[0], *config = argv[1], *kernel = argv[2]; /* held by the caller for the call */
    if (Py_TYPE(target) != self->owner || !pl_table_has(&self->kernels, Py_TYPE(kernel)))
        Py_RETURN_NOTIMPLEMENTED;
    for (Py_ssize_t i = 3; i < nargs; i++)
        if (Py_TYPE(argv[i]) == self->skip || PyFloat_CheckExact(argv[i]) || PyComplex_CheckExact(argv[i]) ||
            PyBool_Check(argv[i]))
            Py_RETURN_NOTIMPLEMENTED;
    LaunchEntry *e = find_entry(self, config);
    if (e == NULL || SLOT(target, self->owner_at[O_STATE]) != self->building)
        Py_RETURN_NOTIMPLEMENTED;

    PyObject *r = Py_NewRef(Py_NotImplemented), *method = Py_NewRef(self->method), *kwn = Py_NewRef(self->kwnames);
    PyObject *grid_obj = Py_NewRef(e->grid_obj), *block_obj = Py_NewRef(e->block_obj), *smem = Py_NewRef(e->smem);
    PyObject *grid = Py_NewRef(e->grid), *block = Py_NewRef(e->block);
    PyObject *path = NULL, *graph = NULL, *tail = NULL, *after = NULL, *node = NULL, *newtail = NULL;
    PyObject *args = PyTuple_New(nargs - 3);
    if (args == NULL) {
        Py_CLEAR(r);
        goto done;
    }
    for (Py_ssize_t i = 3; i < nargs; i++)
        PyTuple_SET_ITEM(args, i - 3, Py_NewRef(argv[i]));
    int ok = 1;
    struct {
        int which;
        PyObject *want;
    } checks[] = {{C_GRID, grid_obj},   {C_BLOCK, block_obj},     {C_CLUSTER, Py_None},
                  {C_COOPERATIVE, Py_False}, {C_PDL, Py_False}};
    for (size_t i = 0; ok == 1 && i < sizeof checks / sizeof checks[0]; i++)
        ok = attr_is(config, self->names[checks[i].which], checks[i].want, 0);
    if (ok == 1)
        ok = attr_is(config, self->names[C_SMEM], smem, 1);
    if (ok != 1) {
        if (ok < 0)
            Py_CLEAR(r);
        goto done;
    }
    /* The builder's state, read after the last Python code of the checks. */
    if (SLOT(target, self->owner_at[O_STATE]) != self->building)
        goto done;
    path = Py_XNewRef(SLOT(target, self->owner_at[O_PATH]));
    if (path == NULL || Py_TYPE(path) != self->path)
        goto done;
    graph = Py_XNewRef(SLOT(path, self->path_at[P_GRAPH]));
    tail = Py_XNewRef(SLOT(path, self->path_at[P_TAIL]));
    if (graph == NULL || Py_TYPE(graph) != self->graph || tail == NULL || !PyList_CheckExact(tail))
        goto done;
    Py_ssize_t k = PyList_GET_SIZE(tail);
    if (k == 0)
        after = Py_NewRef(Py_None);
    else if (k == 1)
        after = Py_NewRef(PyList_GET_ITEM(tail, 0)); /* one node: the definition's fast path, as the twin */
    else if ((after = PyList_GetSlice(tail, 0, k)) == NULL) {
        Py_CLEAR(r);
        goto done;
    }
    PyObject *stack[7] = {graph, kernel, grid, block, args, smem, after};
    node = PyObject_Vectorcall(method, stack, 5, kwn);
    if (node == NULL) {
        Py_CLEAR(r);
        goto done;
    }
    if ((newtail = PyList_New(1)) == NULL) { /* the node is in the graph: as the twin, the error is raised */
        Py_CLEAR(r);
        goto done;
    }
    PyList_SET_ITEM(newtail, 0, Py_NewRef(node));
    PyObject *old_tail = SLOT(path, self->path_at[P_TAIL]), *old_last = SLOT(path, self->path_at[P_LAST]);
    SLOT(path, self->path_at[P_TAIL]) = newtail;
    SLOT(path, self->path_at[P_LAST]) = Py_NewRef(node);
    newtail = NULL;
    self->taken++;
    e = find_entry(self, config); /* the checks' Python code may have taught or displaced it: marked if still there */
    if (e != NULL)
        e->used = ++self->clock;
    Py_SETREF(r, Py_NewRef(Py_None));
    Py_XDECREF(old_tail); /* last: releasing may run Python code, and the path is whole */
    Py_XDECREF(old_last);
done:
    Py_XDECREF(newtail);
    Py_XDECREF(node);
    Py_XDECREF(after);
    Py_XDECREF(tail);
    Py_XDECREF(graph);
    Py_XDECREF(path);
    Py_XDECREF(args);
    Py_DECREF(block);
    Py_DECREF(grid);
    Py_DECREF(smem);
    Py_DECREF(block_obj);
    Py_DECREF(grid_obj);
    Py_DECREF(kwn);
    Py_DECREF(method);
    return r;
}

static PyObject *
pl_vectorcall(PathLaunch *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *r = pl_fast(self, args, PyVectorcall_NARGS(nargsf), kwnames);
    if (r != Py_NotImplemented)
        return r;
    Py_DECREF(r);
    PyObject *twin = Py_XNewRef(self->fallback); /* the twin may drop the last other reference to this object */
    if (twin == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "PathLaunch: cleared");
        return NULL;
    }
    r = PyObject_Vectorcall(twin, args, nargsf, kwnames);
    Py_DECREF(twin);
    return r;
}

/* ------------------------------------------------------------------ the type */

static int
resolve_slots(PyTypeObject *tp, PyObject *names, Py_ssize_t count, Py_ssize_t *at, const char *what)
{
    if (!PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != count) {
        PyErr_Format(PyExc_TypeError, "PathLaunch: %s must be a tuple of %zd slot names", what, count);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_CheckExact(name)) {
            PyErr_Format(PyExc_TypeError, "PathLaunch: %s must hold str", what);
            return -1;
        }
        if (cg_slot_offset(tp, name, &at[i], NULL) < 0)
            return -1;
    }
    return 0;
}

static PyObject *
pl_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *method, *fallback, *owner, *owner_slots, *building, *path, *path_slots, *graph, *skip;
    static char *names[] = {"method", "fallback", "owner", "owner_slots", "building", "path",
                            "path_slots", "graph", "skip", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OO!OOO!OO!O!:PathLaunch", names, &cg_kernel_method_type,
                                     &method, &fallback, &PyType_Type, &owner, &owner_slots, &building, &PyType_Type,
                                     &path, &path_slots, &PyType_Type, &graph, &PyType_Type, &skip))
        return NULL;
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "PathLaunch: fallback must be callable");
        return NULL;
    }
    PathLaunch *self = (PathLaunch *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (resolve_slots((PyTypeObject *)owner, owner_slots, O_COUNT, self->owner_at, "owner_slots") < 0 ||
        resolve_slots((PyTypeObject *)path, path_slots, P_COUNT, self->path_at, "path_slots") < 0) {
        Py_DECREF(self);
        return NULL;
    }
    for (int i = 0; i < C_COUNT; i++)
        if ((self->names[i] = PyUnicode_InternFromString(config_names[i])) == NULL) {
            Py_DECREF(self);
            return NULL;
        }
    if ((self->kwnames = PyTuple_Pack(2, cg_kw_str[KW_SMEM], cg_kw_str[KW_AFTER])) == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->method = Py_NewRef(method);
    self->fallback = Py_NewRef(fallback);
    self->owner = (PyTypeObject *)Py_NewRef(owner);
    self->path = (PyTypeObject *)Py_NewRef(path);
    self->graph = (PyTypeObject *)Py_NewRef(graph);
    self->skip = (PyTypeObject *)Py_NewRef(skip);
    self->building = Py_NewRef(building);
    self->vectorcall = (vectorcallfunc)pl_vectorcall;
    return (PyObject *)self;
}

static int
pl_traverse(PathLaunch *self, visitproc visit, void *arg)
{
    Py_VISIT(self->method);
    Py_VISIT(self->fallback);
    Py_VISIT(self->owner);
    Py_VISIT(self->path);
    Py_VISIT(self->graph);
    Py_VISIT(self->skip);
    Py_VISIT(self->building);
    Py_VISIT(self->dict);
    for (Py_ssize_t i = 0; i < self->kernels.n; i++)
        Py_VISIT(self->kernels.t[i]);
    for (int i = 0; i < LAUNCH_CONFIGS; i++) {
        LaunchEntry *e = &self->entries[i];
        Py_VISIT(e->config);
        Py_VISIT(e->grid_obj);
        Py_VISIT(e->block_obj);
        Py_VISIT(e->smem);
        Py_VISIT(e->grid);
        Py_VISIT(e->block);
    }
    return 0;
}

static int
pl_clear(PathLaunch *self)
{
    for (int i = 0; i < LAUNCH_CONFIGS; i++)
        entry_clear(&self->entries[i]);
    cg_table_clear(&self->kernels);
    Py_CLEAR(self->method);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->path);
    Py_CLEAR(self->graph);
    Py_CLEAR(self->skip);
    Py_CLEAR(self->building);
    for (int i = 0; i < C_COUNT; i++)
        Py_CLEAR(self->names[i]);
    Py_CLEAR(self->kwnames);
    Py_CLEAR(self->dict);
    return 0;
}

static void
pl_dealloc(PathLaunch *self)
{
    PyObject_GC_UnTrack(self);
    pl_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(pl_remember_doc,
             "remember(config, grid_obj, block_obj, smem, grid, block, kernel_type) -> None\n\n"
             "`config` was checked plain (no cluster, not cooperative, no programmatic serialization) while it "
             "held the objects `grid_obj` and `block_obj` and shared memory `smem` (an int); `grid` and `block` "
             "are its checked 3-tuples. Calls with it take the compiled path while its attributes are still these. "
             "`kernel_type` is a kernel type the definition takes as it is.");

static PyObject *
pl_remember(PathLaunch *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 7 || !PyLong_CheckExact(argv[3]) || !PyTuple_CheckExact(argv[4]) || PyTuple_GET_SIZE(argv[4]) != 3 ||
        !PyTuple_CheckExact(argv[5]) || PyTuple_GET_SIZE(argv[5]) != 3 || !PyType_Check(argv[6])) {
        PyErr_SetString(PyExc_TypeError, "remember(config, grid_obj, block_obj, smem: int, grid: 3-tuple, "
                                         "block: 3-tuple, kernel_type: type)");
        return NULL;
    }
    PyTypeObject *kt = (PyTypeObject *)argv[6];
    if (!pl_table_has(&self->kernels, kt) && self->kernels.n < TABLE_MAX)
        self->kernels.t[self->kernels.n++] = Py_NewRef((PyObject *)kt);
    LaunchEntry *e = entry_for(self, argv[0]);
    LaunchEntry old = *e;
    e->config = Py_NewRef(argv[0]);
    e->grid_obj = Py_NewRef(argv[1]);
    e->block_obj = Py_NewRef(argv[2]);
    e->smem = Py_NewRef(argv[3]);
    e->grid = Py_NewRef(argv[4]);
    e->block = Py_NewRef(argv[5]);
    e->used = ++self->clock;
    entry_clear(&old); /* last: releasing may run Python code, and the entry is whole */
    Py_RETURN_NONE;
}

static PyObject *
pl_forget(PathLaunch *self, PyObject *unused)
{
    for (int i = 0; i < LAUNCH_CONFIGS; i++) {
        LaunchEntry old = self->entries[i];
        memset(&self->entries[i], 0, sizeof old);
        entry_clear(&old);
    }
    cg_table_clear(&self->kernels);
    Py_RETURN_NONE;
}

static PyObject *
pl_get_taken(PathLaunch *self, void *closure)
{
    return PyLong_FromSsize_t(self->taken);
}

static PyObject *
pl_get_fallback(PathLaunch *self, void *closure)
{
    return Py_NewRef(self->fallback != NULL ? self->fallback : Py_None);
}

static PyMethodDef pl_methods[] = {
    {"remember", (PyCFunction)(void (*)(void))pl_remember, METH_FASTCALL, pl_remember_doc},
    {"forget", (PyCFunction)pl_forget, METH_NOARGS,
     "forget() -> None\n\nForget every configuration and kernel type: the next calls go to the twin."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef pl_getset[] = {
    {"taken", (getter)pl_get_taken, NULL, "How many calls the compiled path answered.", NULL},
    {"fallback", (getter)pl_get_fallback, NULL, "The Python twin: every call the compiled path does not take.",
     NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(pl_doc, "PathLaunch(method, fallback, owner, owner_slots, building, path, path_slots, graph, skip)\n\n"
                     "launch(target, config, kernel, *args) after the last op of a builder's path: the common call "
                     "in C (see _define_launch.c), every other call to `fallback`, the Python twin. Copy the twin's "
                     "name and docstring onto it with functools.update_wrapper.");

PyTypeObject cg_path_launch_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph.definition._define.PathLaunch",
    .tp_basicsize = sizeof(PathLaunch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = pl_doc,
    .tp_new = pl_new,
    .tp_dealloc = (destructor)pl_dealloc,
    .tp_traverse = (traverseproc)pl_traverse,
    .tp_clear = (inquiry)pl_clear,
    .tp_vectorcall_offset = offsetof(PathLaunch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_methods = pl_methods,
    .tp_getset = pl_getset,
    .tp_dictoffset = offsetof(PathLaunch, dict),
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
};
