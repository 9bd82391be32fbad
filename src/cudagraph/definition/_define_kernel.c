/*
 * cudagraph.definition._define (_define_kernel.c): the compiled path of Graph.kernel for the builders' common case.
 *
 * Python twin: cudagraph.definition.kinds.kernel.KernelBuilders.kernel, the Python method this wraps
 * (its `func` and `__wrapped__`), which every call the compiled path does not take goes to.
 *
 * Pure Python is at its floor for `g.kernel(k, grid, block, (buf, np.float32(2.0), np.int32(n)), after=prev)`:
 * a Python frame with twelve keywords, a type test per argument and the node's eleven slots are most of a node's
 * define time (bench/construction.py --cpu: define). KernelMethod is a method descriptor
 * (Py_TPFLAGS_METHOD_DESCRIPTOR: `g.kernel(...)` calls it with the graph first and the keyword names as a tuple,
 * no bound method, no dict) that builds that node in C when the call is one the Python method takes without a
 * message or a side table:
 *
 * - the graph, the kernel and each argument of an exact type that the Python method already accepted
 *   (types learned from its own tables after it ran: KERNEL_TYPES_SEEN, ARG_TYPES_OK, ARG_BUFFER_TYPES,
 *   ARG_TENSOR_TYPES, NODE_CLASSES; a Buffer type's object also needs `is_device_accessible is True`, a torch
 *   tensor `is_cuda is True`);
 * - grid and block an exact int in GRIDS / BLOCKS, or a 3-tuple of ints in DIMS_SEEN (the interned tuples);
 * - shared_mem 0, no launch attribute (cluster, priority, programmatic, device None; cooperative False);
 * - after None, a node of this graph, or a list or tuple of distinct nodes of this graph; name None or a str;
 * - a Param among the arguments only when it is the one the graph declared under its name.
 *
 * Anything else returns to the Python method before anything is changed, and its answer (node or error) is
 * the answer. After a call the Python method took, the types it accepted are copied into the tables here
 * (learn): each Python table only grows, so a type learned stays accepted.
 *
 * Safety: the only Python code run before the graph is changed is a Buffer's `is_device_accessible` (and
 * whatever a collection started by an allocation runs); the state of the graph and of `after` is read after
 * the last of those, every object used is held, and each node type read through `graph` / `_preds` was
 * checked to have the very slot descriptors of Node. The node is complete (every slot set) before it is
 * appended; its edges are in its own predecessor list only (the successor lists and the edge count are
 * derived from those when read: GraphCore._fold). No Python code runs between
 * reading the node count and appending, so the index is the node's position (the Python method corrects it
 * when another thread got in first; here none can).
 */
#include "_define.h"

const char *const cg_kw_names[KW_COUNT] = {"kernel", "grid", "block", "args", "after", "name", "shared_mem",
                                          "cluster", "cooperative", "priority", "programmatic", "device"};
PyObject *cg_kw_str[KW_COUNT];
PyObject *cg_str_accessible, *cg_str_is_cuda, *cg_zero;

int
cg_table_has(const TypeTable *t, PyTypeObject *tp)
{
    for (Py_ssize_t i = 0; i < t->n; i++)
        if (t->t[i] == (PyObject *)tp)
            return 1;
    return 0;
}

void
cg_table_add(TypeTable *t, PyTypeObject *tp)
{
    if (t->n < TABLE_MAX && !cg_table_has(t, tp))
        t->t[t->n++] = Py_NewRef((PyObject *)tp);
}

void
cg_table_clear(TypeTable *t)
{
    while (t->n > 0) {
        PyObject *tp = t->t[--t->n];
        t->t[t->n] = NULL;
        Py_DECREF(tp);
    }
}

/* Index of keyword `key` in cg_kw_names, or -1. Runs no Python code. */
static int
kw_index(PyObject *key)
{
    for (int i = 0; i < KW_COUNT; i++)
        if (key == cg_kw_str[i])
            return i;
    if (!PyUnicode_CheckExact(key))
        return -1;
    for (int i = 0; i < KW_COUNT; i++)
        if (PyUnicode_CompareWithASCIIString(key, cg_kw_names[i]) == 0)
            return i;
    return -1;
}

/* The interned (n, 1, 1) of `value` for `field` ("grid" / "block"), a new reference, or NULL (no error set:
 * the Python path decides). Dict lookups keyed by ints and tuples of ints and strs: no Python code runs. */
static PyObject *
known_dim(KernelMethod *m, PyObject *value, int field)
{
    int f = field == KW_GRID ? 0 : 1;
    /* The last size found, the same object (a launch config's own 3-tuple, or a small int): no key, no hash
     * (bench/compat.py, whose launches give LaunchConfig's 3-tuples; bench/construction.py --cpu, int sizes). */
    if (value == m->dim_in[f])
        return Py_NewRef(m->dim_out[f]);
    PyObject *found = NULL;
    if (PyLong_CheckExact(value)) {
        found = PyDict_GetItemWithError(m->src[field == KW_GRID ? S_GRIDS : S_BLOCKS], value);
    } else if (PyTuple_CheckExact(value) && PyTuple_GET_SIZE(value) == 3 &&
               PyLong_CheckExact(PyTuple_GET_ITEM(value, 0)) && PyLong_CheckExact(PyTuple_GET_ITEM(value, 1)) &&
               PyLong_CheckExact(PyTuple_GET_ITEM(value, 2))) {
        PyObject *key = PyTuple_Pack(2, cg_kw_str[field], value);
        if (key == NULL) {
            PyErr_Clear();
            return NULL;
        }
        found = PyDict_GetItemWithError(m->src[S_DIMS], key);
        Py_DECREF(key);
    }
    if (found == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (PyTuple_CheckExact(found)) {
        /* Exact ints and tuples of them: releasing them runs no Python code. */
        PyObject *old_in = m->dim_in[f], *old_out = m->dim_out[f];
        m->dim_in[f] = Py_NewRef(value);
        m->dim_out[f] = Py_NewRef(found);
        Py_XDECREF(old_in);
        Py_XDECREF(old_out);
    }
    return Py_NewRef(found);
}

/* The argument types pass the Python method's loop without a call to _kernel_field: 1 (*buffers set when
 * a Buffer's is_device_accessible or a torch tensor's is_cuda must still be read, *param when a Param is among
 * them), or 0 (the Python path decides). Runs no Python code. */
static int
arg_types_pass(KernelMethod *m, PyObject *args, int *param, int *buffers)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTypeObject *t = Py_TYPE(PyTuple_GET_ITEM(args, i));
        if (cg_table_has(&m->ok, t))
            *param |= (PyObject *)t == m->src[S_PARAM];
        else if (cg_table_has(&m->buffers, t) || cg_table_has(&m->tensors, t))
            *buffers = 1;
        else
            return 0;
    }
    return 1;
}

/* Every Buffer among the arguments (of a type not in the accepted table) says `is_device_accessible is True`,
 * every torch tensor `is_cuda is True` (the tensor types the Python method learned, ARG_TENSOR_TYPES):
 * 1, 0 (the Python path decides), -1 (an exception that is not an Exception, which the Python method lets
 * through). Runs Python code (a property): called last before the node is built, once every other test passed,
 * so that such code runs no more often than the Python method runs it, but for one case: a Buffer refused after
 * another was read is handed back, and the Python method reads the first one again. */
static int
buffers_pass(KernelMethod *m, PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i); /* held by the tuple, which the caller holds */
        if (cg_table_has(&m->ok, Py_TYPE(a)))
            continue;
        PyObject *v = PyObject_GetAttr(a, cg_table_has(&m->tensors, Py_TYPE(a)) ? cg_str_is_cuda : cg_str_accessible);
        if (v == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_Exception))
                return -1;
            PyErr_Clear(); /* the Python method names the argument */
            return 0;
        }
        int yes = v == Py_True;
        Py_DECREF(v);
        if (!yes)
            return 0;
    }
    return 1;
}

/* Every parameter among the arguments is the one graph `self` (a learned graph type) declared under its name, as
 * the Python method requires before it looks further (GraphCore._kernel_params): 1, or 0 (the Python path
 * decides and names a parameter of another graph). Lookups by exact str (see cg_param_declared). This replaces
 * the Python method's PARAM_GRAPH gate, which sends every call with a parameter to the Python path while
 * several live graphs have parameters (an ExecutableCache holding the last definition while the next one is
 * built: bench/cache_cpu.py, define with a parameter in every node). */
static int
params_declared(KernelMethod *m, PyObject *self, PyObject *args)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if ((PyObject *)Py_TYPE(a) == m->src[S_PARAM] && !cg_param_declared(m, self, a))
            return 0;
    }
    return 1;
}

int
cg_param_declared(KernelMethod *m, PyObject *self, PyObject *a)
{
    PyObject *declared = SLOT(self, m->graph_at[G_PARAMS]), *name = SLOT(a, m->param_at[PARAM_NAME]);
    if (declared == NULL || !PyDict_CheckExact(declared) || name == NULL || !PyUnicode_CheckExact(name))
        return 0;
    PyObject *mine = PyDict_GetItemWithError(declared, name);
    if (mine == NULL)
        PyErr_Clear();
    return mine == a;
}

/* The node, a new reference; Py_NotImplemented (new reference) when the Python path must answer; NULL with
 * an exception set. Nothing is changed unless a node is returned. */
static PyObject *
kernel_fast(KernelMethod *m, PyObject *const *argv, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *p[KW_COUNT] = {NULL}; /* borrowed: the caller holds its arguments for the call */
    if (nargs < 1 || nargs > 5)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *self = argv[0];
    for (Py_ssize_t i = 1; i < nargs; i++)
        p[i - 1] = argv[i];
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        int at = kw_index(PyTuple_GET_ITEM(kwnames, i));
        if (at < 0 || p[at] != NULL)
            Py_RETURN_NOTIMPLEMENTED;
        p[at] = argv[nargs + i];
    }
    if (p[KW_KERNEL] == NULL || p[KW_GRID] == NULL || p[KW_BLOCK] == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    for (int at = KW_CLUSTER; at < KW_COUNT; at++) {
        PyObject *v = p[at];
        if (v != NULL && v != (at == KW_COOPERATIVE ? Py_False : Py_None))
            Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *name = p[KW_NAME], *smem = p[KW_SMEM], *args = p[KW_ARGS], *after = p[KW_AFTER];
    if (!cg_table_has(&m->graphs, Py_TYPE(self)) || !cg_table_has(&m->kernels, Py_TYPE(p[KW_KERNEL])))
        Py_RETURN_NOTIMPLEMENTED;
    if (name == NULL || name == Py_None)
        name = cg_kw_str[KW_KERNEL];
    else if (!PyUnicode_CheckExact(name))
        Py_RETURN_NOTIMPLEMENTED;
    else if (PyUnicode_GET_LENGTH(name) == 0)
        name = cg_kw_str[KW_KERNEL]; /* `name or "kernel"` */
    if (smem == NULL) {
        smem = cg_zero;
    } else {
        int overflow;
        if (!PyLong_CheckExact(smem) || PyLong_AsLongAndOverflow(smem, &overflow) != 0 || overflow)
            Py_RETURN_NOTIMPLEMENTED;
    }
    if (args == NULL)
        args = PyTuple_New(0); /* the shared empty tuple, as the default `()` */
    else if (!PyTuple_CheckExact(args))
        Py_RETURN_NOTIMPLEMENTED;
    else
        Py_INCREF(args);
    if (args == NULL)
        return NULL;

    PyObject *r = Py_NewRef(Py_NotImplemented), *grid = NULL, *block = NULL, *node = NULL;
    int param = 0, buffers = 0, pass;
    if ((grid = known_dim(m, p[KW_GRID], KW_GRID)) == NULL || (block = known_dim(m, p[KW_BLOCK], KW_BLOCK)) == NULL)
        goto done;
    if (!arg_types_pass(m, args, &param, &buffers) || (param && !params_declared(m, self, args)))
        goto done;
    if (after != NULL && after != Py_None && (pass = cg_after_pass(m, self, after)) <= 0) {
        if (pass < 0)
            Py_CLEAR(r);
        goto done;
    }
    /* Last: the only Python code of the caller's run here (and below, code of a collection): the state is
     * read again after it. */
    if (buffers && (pass = buffers_pass(m, args)) <= 0) {
        if (pass < 0)
            Py_CLEAR(r);
        goto done;
    }

    /* The node with its kernel slots (it was NULL everywhere: nothing is released), then placed. */
    if ((node = m->knode->tp_alloc(m->knode, 0)) == NULL) {
        Py_CLEAR(r);
        goto done;
    }
    SLOT(node, m->kernel_at[K_KERNEL]) = Py_NewRef(p[KW_KERNEL]);
    SLOT(node, m->kernel_at[K_GRID]) = Py_NewRef(grid);
    SLOT(node, m->kernel_at[K_BLOCK]) = Py_NewRef(block);
    SLOT(node, m->kernel_at[K_SMEM]) = Py_NewRef(smem);
    SLOT(node, m->kernel_at[K_ARGS]) = Py_NewRef(args);
    SLOT(node, m->kernel_at[K_ATTRS]) = Py_NewRef(Py_None);
    int placed = cg_place_node(m, self, node, after, name);
    if (placed < 0) {
        Py_CLEAR(r);
    } else if (placed) {
        m->taken++;
        Py_SETREF(r, Py_NewRef(node));
    }
done:
    Py_XDECREF(node); /* unplaced: released whole (its slots are released by its type) */
    Py_XDECREF(block);
    Py_XDECREF(grid);
    Py_DECREF(args);
    return r;
}

/* Whether `tp` reads `names` through the very descriptors `descr` (the base's slots). */
int
cg_keeps_slots(PyTypeObject *tp, PyObject *const *descr, int count)
{
    for (int i = 0; i < count; i++) {
        PyObject *name = PyDescr_NAME(descr[i]);
        if (_PyType_Lookup(tp, name) != descr[i])
            return 0;
    }
    return 1;
}

int
cg_in_set(PyObject *set, PyTypeObject *tp)
{
    Py_INCREF(set);
    Py_INCREF(tp);
    int r = PyAnySet_Check(set) ? PySet_Contains(set, (PyObject *)tp) : 0;
    Py_DECREF(tp);
    Py_DECREF(set);
    if (r < 0) {
        PyErr_Clear();
        return 0;
    }
    return r;
}

/* Membership of `tp` in a Python table of the Python method (its errors are cleared: nothing learned). */
int
cg_in_source(KernelMethod *m, int which, PyTypeObject *tp)
{
    return cg_in_set(m->src[which], tp);
}

/* After the Python method made `node` (held) for `self`: copy the types it accepted into the tables. May run
 * Python code (a hostile type's hash); every object is held and each slot is read again after it. */
static void
learn(KernelMethod *m, PyObject *self, PyObject *node)
{
    cg_learn_links(m, self, node);
    PyObject *kernel = Py_XNewRef(SLOT(node, m->kernel_at[K_KERNEL]));
    if (kernel != NULL) {
        if (cg_in_source(m, S_KERNELS, Py_TYPE(kernel)))
            cg_table_add(&m->kernels, Py_TYPE(kernel));
        Py_DECREF(kernel);
    }
    PyObject *args = Py_XNewRef(SLOT(node, m->kernel_at[K_ARGS]));
    if (args != NULL && PyTuple_CheckExact(args)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
            PyTypeObject *t = Py_TYPE(PyTuple_GET_ITEM(args, i));
            Py_INCREF(t);
            if (cg_in_source(m, S_ARG_OK, t))
                cg_table_add(&m->ok, t);
            else if (cg_in_source(m, S_ARG_BUFFERS, t))
                cg_table_add(&m->buffers, t);
            else if (cg_in_source(m, S_ARG_TENSORS, t))
                cg_table_add(&m->tensors, t);
            Py_DECREF(t);
        }
    }
    Py_XDECREF(args);
}

PyObject *
cg_kernel_vectorcall(KernelMethod *m, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *r = kernel_fast(m, args, nargs, kwnames);
    if (r != Py_NotImplemented)
        return r;
    Py_DECREF(r);
    Py_INCREF(m); /* the Python method may drop the last other reference to this object */
    r = PyObject_Vectorcall(m->func, args, nargsf, kwnames);
    if (r != NULL && nargs >= 1 && Py_IS_TYPE(r, m->knode)) {
        PyObject *self = Py_NewRef(args[0]);
        learn(m, self, r);
        Py_DECREF(self);
    }
    Py_DECREF(m);
    return r;
}

