/*
 * The edges explicit construction gives the driver: every edge of a node but those another of its
 * predecessors implies (p -> q -> c orders p before c). The rule, its proof and its figure are in the
 * Python twin, cudagraph.materialize.driver_edges. KernelLoop (_native_loop.c) applies it to each
 * node it adds, StreamLauncher.capture (_native_capture.c) to each node it captures.
 */
#include "_native.h"

/* 1 when `q` is a Node every edge into which is plain: not a kernel node, or an exact KernelNode
 * without launch attributes (twin: cudagraph.materialize.driver_edges.plain_in). 0 for anything else,
 * whose slots are never read. */
static int
plain_in(const cg_edge_types *t, PyObject *q)
{
    PyTypeObject *kt = t->kernel_type;
    if (Py_TYPE(q) == kt)
        return SLOT(q, t->kn->attrs) == Py_None;
    return !PyObject_TypeCheck(q, kt) && PyObject_TypeCheck(q, t->node_type);
}

/* The node index of `q` if it is a Node whose index is an exact int, else -1. */
static Py_ssize_t
index_of(const cg_edge_types *t, PyObject *q)
{
    PyObject *i = cg_is_node(t->kernel_type, t->node_type, q) ? SLOT(q, t->nd->index) : NULL;
    if (i == NULL || !PyLong_CheckExact(i))
        return -1;
    Py_ssize_t at = PyLong_AsSsize_t(i);
    if (at == -1)
        PyErr_Clear();
    return at;
}

/* 1 when the edge from preds[i] is implied by another plain predecessor that comes directly after it
 * (twin: cudagraph.materialize.driver_edges.driver_preds; the rule and its figure are there). For a
 * few predecessors: a scan of each one's predecessors. */
static int
implied_scan(const cg_edge_types *t, PyObject *preds, Py_ssize_t i)
{
    PyObject *p = PyList_GET_ITEM(preds, i);
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(preds); j++) {
        PyObject *q = PyList_GET_ITEM(preds, j);
        if (q == p || !plain_in(t, q))
            continue;
        PyObject *qp = SLOT(q, t->nd->preds);
        if (qp == NULL || !PyList_CheckExact(qp))
            continue;
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(qp); k++)
            if (PyList_GET_ITEM(qp, k) == p)
                return 1;
    }
    return 0;
}

typedef struct {
    Py_ssize_t index, pos; /* a predecessor's node index, its position in the node's predecessors */
} pred_at;

static int
pred_at_cmp(const void *a, const void *b)
{
    Py_ssize_t x = ((const pred_at *)a)->index, y = ((const pred_at *)b)->index;
    return (x > y) - (x < y);
}

/* implied_scan for every one of many predecessors at once (a wide fan-in: the scan would be quadratic):
 * the predecessors sorted by node index, each plain one's own predecessors looked up in them. Marks
 * implied[pos]; 0, or -1 when out of memory (no exception set). Runs no Python code. */
static int
implied_wide(const cg_edge_types *t, PyObject *preds, Py_ssize_t n, char *implied)
{
    pred_at *at = PyMem_Malloc((size_t)n * sizeof *at);
    if (at == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        at[i].index = index_of(t, PyList_GET_ITEM(preds, i));
        at[i].pos = i;
    }
    qsort(at, (size_t)n, sizeof *at, pred_at_cmp);
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *q = PyList_GET_ITEM(preds, j);
        PyObject *qp = plain_in(t, q) ? SLOT(q, t->nd->preds) : NULL;
        if (qp == NULL || !PyList_CheckExact(qp))
            continue;
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(qp); k++) {
            PyObject *r = PyList_GET_ITEM(qp, k);
            pred_at key = {index_of(t, r), 0};
            if (key.index < 0)
                continue;
            pred_at *hit = bsearch(&key, at, (size_t)n, sizeof *at, pred_at_cmp);
            if (hit != NULL && PyList_GET_ITEM(preds, hit->pos) == r)
                implied[hit->pos] = 1;
        }
    }
    PyMem_Free(at);
    return 0;
}

char *
cg_implied(const cg_edge_types *t, PyObject *node, PyObject *preds, char *few)
{
    Py_ssize_t n = PyList_GET_SIZE(preds);
    char *implied = n <= 8 ? memset(few, 0, 8) : PyMem_Calloc((size_t)n, 1);
    if (implied == NULL || n < 2 || !plain_in(t, node))
        return implied;
    if (n > 8) { /* a wide fan-in: the scan would be quadratic */
        if (implied_wide(t, preds, n, implied) < 0) {
            PyMem_Free(implied);
            return NULL;
        }
        return implied;
    }
    for (Py_ssize_t i = 0; i < n; i++) /* the common case (after=[prev, prev2]) */
        implied[i] = (char)implied_scan(t, preds, i);
    return implied;
}

void
cg_implied_free(char *implied, const char *few)
{
    if (implied != few)
        PyMem_Free(implied);
}

Py_ssize_t
cg_keep_driver_deps(const cg_edge_types *t, PyObject *node, PyObject *preds, void **deps, Py_ssize_t n)
{
    char few[8];
    char *implied = cg_implied(t, node, preds, few);
    if (implied == NULL)
        return -1;
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!implied[i])
            deps[kept++] = deps[i];
    cg_implied_free(implied, few);
    return kept;
}
