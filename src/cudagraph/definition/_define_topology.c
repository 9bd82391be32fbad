/*
 * TopologyRecord: a graph's topology, written as nodes are placed in C (cg_place_node), read by the topology
 * signature (twin: cudagraph.definition.diff.topology_signature, which reads the nodes themselves).
 *
 * The signature of a graph of N nodes reads every node, its predecessor list and each predecessor's index;
 * once a graph outgrows the CPU's caches that walk waits on memory (bench/construction.py --cpu --big: signature
 * per node at N = 100,000 against 1,000). The record keeps, in placement order, the signature's items
 * as 32-bit words: one per node (2 * the position of its class among the record's classes + 1, turned into the
 * class's code by the signature) followed by one per predecessor (2 * its index): 8 bytes a chain node, read
 * sequentially into the answer, touching no node. The record holds a reference to each class.
 *
 * The record speaks for the graph only while it has seen every node (`count` equals the node list's length)
 * and no edit changed an existing node's predecessors or index: add_edge, remove_edge and Graph.remove drop it
 * (the slot becomes None). A node placed by Python code is recorded by TopologyRecord.add (GraphCore._add and
 * the Python Graph.kernel call it); one that is not leaves `count` behind, the signature then reads the nodes
 * and the next C placement drops the record. Python code can neither read nor write its words.
 */
#include "_define.h"

typedef struct {
    PyObject_HEAD
    Py_ssize_t count;  /* nodes recorded */
    Py_ssize_t len;    /* words used: the signature's item count */
    Py_ssize_t cap;    /* words allocated */
    uint32_t *words;   /* 2 * a node's class (its position in `classes`) + 1, then 2 * each predecessor's index */
    PyObject *classes; /* a list of the classes named (each once), or NULL */
    PyTypeObject *last; /* the class appended last, at position `last_at` of `classes` */
    uint32_t last_at;
} TopologyRecord;

static PyObject *
tr_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "TopologyRecord() takes no arguments");
        return NULL;
    }
    return type->tp_alloc(type, 0); /* zeroed: empty */
}

static void
tr_dealloc(TopologyRecord *self)
{
    Py_XDECREF(self->classes); /* the classes of nodes: no finalizer runs while a node lives */
    PyMem_Free(self->words);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
tr_length(TopologyRecord *self)
{
    return self->count;
}

/* Drop the record of graph `self` (its slot becomes None); runs no Python code. */
static void
drop(KernelMethod *m, PyObject *self)
{
    PyObject *old = SLOT(self, m->graph_at[G_TOPO]);
    SLOT(self, m->graph_at[G_TOPO]) = Py_NewRef(Py_None);
    Py_XDECREF(old); /* the record's classes: the nodes of the graph, still in it, hold them too */
}

/* Room for `n` more words; 0, or -1 without memory (nothing changed). */
static int
reserve(TopologyRecord *r, Py_ssize_t n)
{
    if (r->len + n <= r->cap)
        return 0;
    Py_ssize_t cap = r->cap ? 2 * r->cap : 64;
    while (cap < r->len + n)
        cap *= 2;
    uint32_t *grown = PyMem_Realloc(r->words, (size_t)cap * sizeof(uint32_t));
    if (grown == NULL)
        return -1;
    r->words = grown;
    r->cap = cap;
    return 0;
}

/* Hold class `t` (once) and make it the last; 0, or -1 without memory. */
static int
hold(TopologyRecord *r, PyTypeObject *t)
{
    if (t == r->last)
        return 0;
    if (r->classes == NULL && (r->classes = PyList_New(0)) == NULL)
        return -1;
    Py_ssize_t j = 0, n = PyList_GET_SIZE(r->classes);
    while (j < n && PyList_GET_ITEM(r->classes, j) != (PyObject *)t)
        j++;
    if (j == n && (n >= (1 << 30) || PyList_Append(r->classes, (PyObject *)t) < 0)) /* (a list of classes) */
        return -1;
    r->last = t;
    r->last_at = (uint32_t)j;
    return 0;
}

/* Append a node of the last held class after the predecessors of indices `index[0..k)` (room reserved);
 * 0, or -1 when an index does not fit a word. */
static int
append(TopologyRecord *r, const Py_ssize_t *index, Py_ssize_t k)
{
    for (Py_ssize_t j = 0; j < k; j++)
        if (index[j] >= (Py_ssize_t)1 << 30)
            return -1;
    uint32_t *w = r->words + r->len;
    w[0] = 2u * r->last_at + 1u;
    for (Py_ssize_t j = 0; j < k; j++)
        w[1 + j] = (uint32_t)index[j] << 1;
    r->len += 1 + k;
    r->count += 1;
    return 0;
}

void
cg_record_place(KernelMethod *m, PyObject *self, PyObject *node, Py_ssize_t i, PyObject **deps, Py_ssize_t k)
{
    PyObject *rec = SLOT(self, m->graph_at[G_TOPO]);
    if (rec == NULL || Py_TYPE(rec) != &cg_topology_record_type)
        return; /* dropped already */
    TopologyRecord *r = (TopologyRecord *)rec;
    Py_ssize_t index[PAIRWISE_MAX];
    int usable = r->count == i && k <= PAIRWISE_MAX; /* else a node placed by Python code, or a long list */
    for (Py_ssize_t j = 0; usable && j < k; j++) {
        PyObject *at = SLOT(deps[j], m->node_at[N_INDEX]);
        usable = at != NULL && PyLong_CheckExact(at) && (index[j] = PyLong_AsSsize_t(at)) >= 0;
    }
    if (usable && reserve(r, 1 + k) == 0 && hold(r, Py_TYPE(node)) == 0 && append(r, index, k) == 0)
        return;
    PyErr_Clear(); /* (no memory: the signature reads the nodes) */
    drop(m, self);
}

/* The int `index` attribute of `obj` (>= 0), -1 when it is not one, -2 with an error set. */
static Py_ssize_t
attr_index(PyObject *obj)
{
    PyObject *v = PyObject_GetAttrString(obj, "index");
    if (v == NULL)
        return -2;
    Py_ssize_t i = PyLong_CheckExact(v) ? PyLong_AsSsize_t(v) : -1;
    Py_DECREF(v);
    if (i == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return i < 0 ? -1 : i;
}

PyDoc_STRVAR(tr_add_doc,
             "add(node) -> bool\n\n"
             "Record `node`, just appended to its graph by Python code (its `index` and `_preds` set); False when "
             "the record cannot take it (it has not seen every node before it: the caller drops the record).");

static PyObject *
tr_add(TopologyRecord *self, PyObject *node)
{
    /* Every getattr may run Python code: the record's state is checked again after the last. */
    PyObject *preds = NULL, *answer = NULL;
    Py_ssize_t *index = NULL, k = 0;
    Py_ssize_t i = attr_index(node);
    if (i == -2)
        return NULL;
    if (i != self->count)
        return Py_NewRef(Py_False);
    if ((preds = PyObject_GetAttrString(node, "_preds")) == NULL)
        return NULL;
    if (!PyList_CheckExact(preds)) {
        answer = Py_NewRef(Py_False);
        goto done;
    }
    k = PyList_GET_SIZE(preds);
    if ((index = PyMem_Calloc((size_t)(k > 0 ? k : 1), sizeof(Py_ssize_t))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        if (j >= PyList_GET_SIZE(preds)) {
            answer = Py_NewRef(Py_False);
            goto done;
        }
        PyObject *pred = Py_NewRef(PyList_GET_ITEM(preds, j));
        index[j] = attr_index(pred);
        Py_DECREF(pred);
        if (index[j] == -2)
            goto done;
        if (index[j] < 0) {
            answer = Py_NewRef(Py_False);
            goto done;
        }
    }
    if (PyList_GET_SIZE(preds) != k || self->count != i) {
        answer = Py_NewRef(Py_False);
        goto done;
    }
    if (reserve(self, 1 + k) < 0 || hold(self, Py_TYPE(node)) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    answer = Py_NewRef(append(self, index, k) == 0 ? Py_True : Py_False);
done:
    PyMem_Free(index);
    Py_XDECREF(preds);
    return answer;
}

PyDoc_STRVAR(tr_signature_doc,
             "signature(nodes, classes) -> bytes or None\n\n"
             "The topology signature of the graph whose node list is `nodes`, as "
             "cudagraph.definition.diff.topology_signature makes it for a graph without nested bodies (a class's "
             "code is its position in the tuple `classes`, found by identity), read from the record; None when "
             "the record has not seen every node of the list or a node's class is not in `classes` (the caller "
             "then reads the nodes).");

static PyObject *
tr_signature(TopologyRecord *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyList_CheckExact(argv[0]) || !PyTuple_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "signature(nodes: list, classes: tuple)");
        return NULL;
    }
    if (self->count != PyList_GET_SIZE(argv[0]))
        Py_RETURN_NONE;
    PyObject *classes = argv[1];
    PyObject *out = PyBytes_FromStringAndSize(NULL, self->len * (Py_ssize_t)sizeof(int32_t));
    if (out == NULL)
        return NULL;
    int32_t *w = (int32_t *)PyBytes_AS_STRING(out);
    Py_ssize_t code = -1;
    uint32_t last = 0;
    for (Py_ssize_t i = 0; i < self->len; i++) {
        uint32_t v = self->words[i];
        if (!(v & 1u)) {
            w[i] = (int32_t)v; /* 2 * index (< 2**31) */
            continue;
        }
        if (v != last) { /* the record's class at v / 2, found in `classes` by identity */
            PyObject *t = self->classes != NULL && (Py_ssize_t)(v >> 1) < PyList_GET_SIZE(self->classes)
                              ? PyList_GET_ITEM(self->classes, v >> 1)
                              : NULL;
            code = -1;
            for (Py_ssize_t j = 0; t != NULL && j < PyTuple_GET_SIZE(classes) && j < (1 << 30) && code < 0; j++)
                if (PyTuple_GET_ITEM(classes, j) == t)
                    code = j;
            last = v;
        }
        if (code < 0) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        w[i] = (int32_t)(2 * code + 1);
    }
    return out;
}

static PyMethodDef tr_methods[] = {
    {"signature", (PyCFunction)(void (*)(void))tr_signature, METH_FASTCALL, tr_signature_doc},
    {"add", (PyCFunction)tr_add, METH_O, tr_add_doc},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods tr_as_sequence = {
    .sq_length = (lenfunc)tr_length,
};

PyTypeObject cg_topology_record_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph.definition._define.TopologyRecord",
    .tp_doc = "A graph's topology as its nodes were placed in C (see _define_topology.c); len() is the nodes seen.",
    .tp_basicsize = sizeof(TopologyRecord),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = tr_new,
    .tp_dealloc = (destructor)tr_dealloc,
    .tp_methods = tr_methods,
    .tp_as_sequence = &tr_as_sequence,
};
