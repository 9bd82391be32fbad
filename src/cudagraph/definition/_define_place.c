/*
 * cudagraph.definition._define (_define_place.c): placing a new node in its graph, in C.
 *
 * Shared by Graph.kernel's compiled path (_define_kernel.c) and every other builder, through
 * KernelMethod.place (Python twin: GraphCore._deps, _set_base and _add, which GraphCore._place runs when
 * this declines). A builder makes its node and sets its own fields; placing gives it the base slots (graph,
 * index, name, predecessors) and appends it. Its edges are recorded in its predecessor list only: the
 * successor lists and the edge count are derived from those when read (GraphCore._fold).
 * Faster than pure Python (bench/cpu_overhead.py: joins defined, compiled vs Python).
 *
 * The predecessors must be nodes of this graph of a type the Python path accepted as a predecessor
 * (NODE_CLASSES, learned into the nodes table), distinct. Anything else declines before anything is
 * changed, and the Python path answers (and names any error).
 */
#include "_define.h"

/* Whether node `d` (held) may be a predecessor here: a learned node type, of this graph. */
static int
usable_dep(KernelMethod *m, PyObject *self, PyObject *d)
{
    return cg_table_has(&m->nodes, Py_TYPE(d)) && SLOT(d, m->node_at[N_GRAPH]) == self;
}

static int
ptr_order(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (PyObject *const *)a, y = (uintptr_t) * (PyObject *const *)b;
    return x < y ? -1 : x > y;
}

int
cg_distinct(PyObject **items, Py_ssize_t k)
{
    if (k <= PAIRWISE_MAX) {
        for (Py_ssize_t i = 1; i < k; i++)
            for (Py_ssize_t j = 0; j < i; j++)
                if (items[i] == items[j])
                    return 0;
        return 1;
    }
    PyObject **copy = PyMem_Malloc((size_t)k * sizeof *copy);
    if (copy == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(copy, items, (size_t)k * sizeof *copy);
    qsort(copy, (size_t)k, sizeof *copy, ptr_order);
    int ok = 1;
    for (Py_ssize_t i = 1; ok && i < k; i++)
        ok = copy[i] != copy[i - 1];
    PyMem_Free(copy);
    return ok;
}


/* Whether `after` (not None) is a usable node, or a list or tuple of distinct usable nodes; 1, 0, -1 (no memory).
 * Runs no Python code. */
int
cg_after_pass(KernelMethod *m, PyObject *self, PyObject *after)
{
    if (!PyList_CheckExact(after) && !PyTuple_CheckExact(after))
        return usable_dep(m, self, after);
    Py_ssize_t k = Py_SIZE(after);
    PyObject **items = PyList_CheckExact(after) ? ((PyListObject *)after)->ob_item : ((PyTupleObject *)after)->ob_item;
    for (Py_ssize_t i = 0; i < k; i++)
        if (!usable_dep(m, self, items[i]))
            return 0;
    return k > 1 ? cg_distinct(items, k) : 1;
}

int
cg_place_node(KernelMethod *m, PyObject *self, PyObject *node, PyObject *after, PyObject *name)
{
    /* Every allocation that may start a collection (Python code), before the state is read. */
    int single = 0, r = 0;
    Py_ssize_t k = 0;
    if (after != NULL && after != Py_None) {
        if (PyList_CheckExact(after) || PyTuple_CheckExact(after))
            k = Py_SIZE(after);
        else
            k = single = 1;
    }
    PyObject *preds = PyList_New(k), *index = NULL;
    if (preds == NULL) {
        r = -1;
        goto done;
    }
    /* The state, read from here on: no Python code runs until the node is returned. */
    if (single) {
        PyList_SET_ITEM(preds, 0, Py_NewRef(after));
    } else if (k > 0) {
        if (Py_SIZE(after) != k) /* changed by a collection's code meanwhile */
            goto done;
        PyObject **items =
            PyList_CheckExact(after) ? ((PyListObject *)after)->ob_item : ((PyTupleObject *)after)->ob_item;
        for (Py_ssize_t i = 0; i < k; i++)
            PyList_SET_ITEM(preds, i, Py_NewRef(items[i]));
    }
    PyObject **deps = ((PyListObject *)preds)->ob_item;
    for (Py_ssize_t i = 0; i < k; i++)
        if (!usable_dep(m, self, deps[i]))
            goto done;
    if (k > 1) {
        int d = cg_distinct(deps, k);
        if (d <= 0) {
            r = d;
            goto done;
        }
    }
    PyObject *nodes = SLOT(self, m->graph_at[G_NODES]);
    if (nodes == NULL || !PyList_CheckExact(nodes))
        goto done;
    Py_ssize_t i = PyList_GET_SIZE(nodes);
    if ((index = PyLong_FromSsize_t(i)) == NULL) { /* ints are not collected: runs no Python code */
        r = -1;
        goto done;
    }
    /* The node, complete (its base slots were NULL: nothing is released). */
    SLOT(node, m->node_at[N_GRAPH]) = Py_NewRef(self);
    SLOT(node, m->node_at[N_INDEX]) = Py_NewRef(index);
    SLOT(node, m->node_at[N_NAME]) = Py_NewRef(name);
    SLOT(node, m->node_at[N_PREDS]) = Py_NewRef(preds);
    r = PyList_Append(nodes, node) < 0 ? -1 : 1; /* (on an error the caller releases the node whole) */
    if (r == 1)
        cg_record_place(m, self, node, i, deps, k); /* runs no Python code either */
done:
    Py_XDECREF(index);
    Py_XDECREF(preds);
    return r;
}

void
cg_learn_links(KernelMethod *m, PyObject *self, PyObject *node)
{
    PyTypeObject *gt = Py_TYPE(self);
    if (PyType_IsSubtype(gt, m->gcore) && cg_keeps_slots(gt, m->graph_descr, G_COUNT))
        cg_table_add(&m->graphs, gt);
    PyObject *preds = Py_XNewRef(SLOT(node, m->node_at[N_PREDS]));
    if (preds != NULL && PyList_CheckExact(preds)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(preds); i++) {
            PyTypeObject *t = Py_TYPE(PyList_GET_ITEM(preds, i));
            Py_INCREF(t);
            if (PyType_IsSubtype(t, m->node) && cg_keeps_slots(t, m->node_descr, 2) &&
                cg_in_source(m, S_NODE_CLASSES, t))
                cg_table_add(&m->nodes, t);
            Py_DECREF(t);
        }
    }
    Py_XDECREF(preds);
}

/* Learn the type of predecessor `d` (held) when the Python path accepted it as one (NODE_CLASSES): a chain of
 * one kind is placed here from its third node on. May run Python code (a type's hash). */
static void
learn_dep(KernelMethod *m, PyObject *d)
{
    PyTypeObject *t = Py_TYPE(d);
    if (cg_table_has(&m->nodes, t))
        return;
    Py_INCREF(t);
    if (PyType_IsSubtype(t, m->node) && cg_keeps_slots(t, m->node_descr, 2) && cg_in_source(m, S_NODE_CLASSES, t))
        cg_table_add(&m->nodes, t);
    Py_DECREF(t);
}

PyObject *
cg_km_place(KernelMethod *m, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 4) {
        PyErr_SetString(PyExc_TypeError, "place(graph, node, after, name)");
        return NULL;
    }
    PyObject *self = argv[0], *node = argv[1], *after = argv[2], *name = argv[3];
    PyTypeObject *gt = Py_TYPE(self), *nt = Py_TYPE(node);
    if (!PyUnicode_CheckExact(name) || !PyType_IsSubtype(nt, m->node) || !cg_keeps_slots(nt, m->node_descr, 2))
        Py_RETURN_FALSE;
    if (!cg_table_has(&m->graphs, gt)) {
        if (!PyType_IsSubtype(gt, m->gcore) || !cg_keeps_slots(gt, m->graph_descr, G_COUNT))
            Py_RETURN_FALSE;
        cg_table_add(&m->graphs, gt);
    }
    if (PyList_CheckExact(after) || PyTuple_CheckExact(after)) {
        Py_INCREF(after); /* (learning may run Python code: the size and the items are read anew each time) */
        for (Py_ssize_t i = 0; i < Py_SIZE(after); i++) {
            PyObject *d = Py_NewRef(PyList_CheckExact(after) ? PyList_GET_ITEM(after, i) : PyTuple_GET_ITEM(after, i));
            learn_dep(m, d);
            Py_DECREF(d);
        }
        Py_DECREF(after);
    } else if (after != Py_None) {
        learn_dep(m, after);
    }
    for (int i = 0; i < N_COUNT; i++)
        if (SLOT(node, m->node_at[i]) != NULL) /* placed before: the Python path says what it makes of it */
            Py_RETURN_FALSE;
    int r = cg_place_node(m, self, node, after, name);
    if (r < 0)
        return NULL;
    m->placed += r;
    return PyBool_FromLong(r);
}
