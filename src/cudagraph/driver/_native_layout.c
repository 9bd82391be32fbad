/*
 * Layout: comparing rebuilt definitions with recorded ones, for ExecutableCache and Executable.update.
 *
 * Python twins (see cudagraph.driver.c_entry): signature, cudagraph.definition.diff.topology_signature;
 * diff, cudagraph.definition.diff.diff_states; sinks, cudagraph.definition.graph.Graph.leaves. The nodes
 * are read through their __slots__ (NATIVE_SLOTS "kernel_node" and "node", resolved on the classes given at
 * construction, once).
 *
 * Python code can run in the middle of the loops: an argument type's __hash__ and __eq__ (set lookups in
 * diff) and the collector (allocating a tuple). So the nodes and tuples in use are held across those
 * calls and list lengths are read again after them; where the graph changed under it, the answer is None
 * (the caller compares in Python). signature compares types by identity and runs no Python code.
 */
#include "_native.h"

typedef struct {
    PyObject_HEAD
    PyTypeObject *kernel_type; /* NULL until initialized; then fixed */
    PyTypeObject *node_type;
    cg_kernel_slots kn;
    cg_node_slots nd;
    PyTypeObject *memset_type, *memcpy_type; /* fills and 1-D copies diffed here too (see simple()); NULL: none */
    cg_memset_slots ms;
    cg_memcpy_slots mc;
    PyTypeObject *param_type; /* Param arguments compared here too (see params()); NULL: by the caller */
    Py_ssize_t param_name, param_dtype;
} Layout;

static void
layout_dealloc(Layout *self)
{
    Py_CLEAR(self->kernel_type);
    Py_CLEAR(self->node_type);
    Py_CLEAR(self->memset_type);
    Py_CLEAR(self->memcpy_type);
    Py_CLEAR(self->param_type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
layout_init(Layout *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"kernel_type", "node_type", NULL};
    PyObject *ktype, *ntype;
    if (self->kernel_type != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Layout is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!", kwlist, &PyType_Type, &ktype, &PyType_Type, &ntype))
        return -1;
    cg_kernel_slots kn;
    cg_node_slots nd;
    if (cg_resolve_node_types(ktype, ntype, &kn, &nd) < 0)
        return -1;
    if (self->kernel_type != NULL) { /* by the Python code resolving the slots ran */
        PyErr_SetString(PyExc_RuntimeError, "Layout is already initialized");
        return -1;
    }
    self->kn = kn;
    self->nd = nd;
    self->node_type = (PyTypeObject *)Py_NewRef(ntype);
    self->kernel_type = (PyTypeObject *)Py_NewRef(ktype);
    return 0;
}

/* Whether `obj` is a node (the kernel type first: most are). */
static inline int
is_node(Layout *self, PyObject *obj)
{
    return cg_is_node(self->kernel_type, self->node_type, obj);
}

/* Whether `node` may be read through the node slots, and its predecessors are nodes with an index:
 * the number of predecessors, or -1. Runs no Python code. */
static Py_ssize_t
node_preds(Layout *self, PyObject *node)
{
    if (!is_node(self, node))
        return -1;
    PyObject *preds = SLOT(node, self->nd.preds);
    if (preds == NULL || !PyList_CheckExact(preds))
        return -1;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(preds); j++) {
        PyObject *pred = PyList_GET_ITEM(preds, j);
        if (!is_node(self, pred) || SLOT(pred, self->nd.index) == NULL)
            return -1;
    }
    return PyList_GET_SIZE(preds);
}

PyDoc_STRVAR(layout_signature_doc,
             "signature(nodes, classes) -> bytes or None\n\n"
             "The topology signature of a graph whose nodes (in creation order) are the list `nodes`, as\n"
             "cudagraph.definition.diff.topology_signature makes it for a graph without nested bodies: one native\n"
             "int32 per item, 2 * code + 1 for a node's class (its position in the tuple `classes`, found by\n"
             "identity), 2 * index for each predecessor's index. None when a node's class is not in `classes`\n"
             "(one with nested bodies, or not met yet) or a node is not read through the node slots.");

/* How far ahead of the node read the nodes are prefetched: the nodes of a large graph lie beyond the caches
 * and the loop reads too little of each to hide the wait (bench/construction.py --cpu --big: signature at
 * N = 100,000). */
#define SIGN_AHEAD 8

/* The position of class `t` in the tuple `classes` (by identity: no class's hash or equality runs), or -1. */
static long long
code_of(PyObject *classes, PyTypeObject *t)
{
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(classes) && j < (1 << 30); j++)
        if (PyTuple_GET_ITEM(classes, j) == (PyObject *)t)
            return j;
    return -1;
}

static PyObject *
layout_signature(Layout *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyList_CheckExact(argv[0]) || !PyTuple_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "signature(nodes: list, classes: tuple)");
        return NULL;
    }
    if (self->kernel_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Layout is not initialized");
        return NULL;
    }
    PyObject *nodes = argv[0], *codes = argv[1];
    /* One pass over the nodes, each item written as it is read; room for a chain (one predecessor a node) is
     * asked for first. No Python code runs from here to the answer. */
    Py_ssize_t cap = 2 * PyList_GET_SIZE(nodes) + 8, total = 0;
    int32_t *items = PyMem_Malloc((size_t)cap * sizeof(int32_t));
    long long code = -1;
    PyTypeObject *last = NULL;
    if (items == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        if (i + 2 * SIGN_AHEAD < PyList_GET_SIZE(nodes)) {
            /* Two stages: a node's object, then (read from it) its predecessor list and its index. */
            PyObject *far = PyList_GET_ITEM(nodes, i + 2 * SIGN_AHEAD);
            PyObject *next = PyList_GET_ITEM(nodes, i + SIGN_AHEAD);
            __builtin_prefetch(far);
            __builtin_prefetch((char *)far + self->nd.preds);
            if (is_node(self, next)) {
                __builtin_prefetch(SLOT(next, self->nd.preds));
                __builtin_prefetch(SLOT(next, self->nd.index));
            }
        }
        PyObject *node = PyList_GET_ITEM(nodes, i);
        PyTypeObject *t = Py_TYPE(node);
        if (t != last) {
            code = code_of(codes, t);
            last = t;
        }
        if (code < 0)
            goto changed;
        Py_ssize_t n = node_preds(self, node);
        if (n < 0)
            goto changed;
        if (total + 1 + n > cap) {
            Py_ssize_t more = cap + cap / 2 + 1 + n;
            int32_t *grown = PyMem_Realloc(items, (size_t)more * sizeof(int32_t));
            if (grown == NULL) {
                PyMem_Free(items);
                return PyErr_NoMemory();
            }
            items = grown;
            cap = more;
        }
        items[total++] = (int32_t)(2 * code + 1);
        PyObject *preds = SLOT(node, self->nd.preds);
        for (Py_ssize_t j = 0; j < n; j++) {
            long long index = PyLong_AsLongLong(SLOT(PyList_GET_ITEM(preds, j), self->nd.index));
            if (index < 0 || index >= (1LL << 30)) { /* (an int node_preds found: never negative in a graph) */
                PyErr_Clear();
                goto changed;
            }
            items[total++] = (int32_t)(2 * index);
        }
    }
    PyObject *out = PyBytes_FromStringAndSize((const char *)items, total * (Py_ssize_t)sizeof(int32_t));
    PyMem_Free(items);
    return out;
changed: /* a node not read through the slots, or of a class signed in Python */
    PyMem_Free(items);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(layout_sinks_doc,
             "sinks(nodes) -> list or None\n\n"
             "The nodes of the list `nodes` (a graph's nodes in creation order, each at its index) that no node\n"
             "of the list depends on, in order, as cudagraph.definition.graph.Graph.leaves (its twin) answers\n"
             "without reading successor lists. None when an item is not a node read through the node slots,\n"
             "or a predecessor is not the node of the list at its index.");

static PyObject *
layout_sinks(Layout *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 1 || !PyList_CheckExact(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "sinks(nodes: list)");
        return NULL;
    }
    if (self->kernel_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Layout is not initialized");
        return NULL;
    }
    /* No Python code runs from here to the answer (the collector is off while the answer is allocated). */
    PyObject *nodes = argv[0];
    Py_ssize_t count = PyList_GET_SIZE(nodes), sinks = count;
    char *has_succs = PyMem_Calloc((size_t)(count > 0 ? count : 1), 1);
    if (has_succs == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        Py_ssize_t n = node_preds(self, node);
        if (n < 0)
            goto decline;
        PyObject *preds = SLOT(node, self->nd.preds);
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *pred = PyList_GET_ITEM(preds, j), *index = SLOT(pred, self->nd.index);
            Py_ssize_t k = PyLong_CheckExact(index) ? PyLong_AsSsize_t(index) : -1;
            if (k < 0 || k >= count || PyList_GET_ITEM(nodes, k) != pred) {
                PyErr_Clear();
                goto decline;
            }
            sinks -= !has_succs[k];
            has_succs[k] = 1;
        }
    }
    int collecting = PyGC_Disable();
    PyObject *out = PyList_New(sinks);
    if (collecting)
        PyGC_Enable();
    if (out != NULL)
        for (Py_ssize_t i = 0, at = 0; i < count; i++)
            if (!has_succs[i])
                PyList_SET_ITEM(out, at++, Py_NewRef(PyList_GET_ITEM(nodes, i)));
    PyMem_Free(has_succs);
    return out;
decline:
    PyMem_Free(has_succs);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(layout_diff_doc,
             "diff(nodes, states, identity_types, value_types=()) -> (changed, suspects)\n\n"
             "Compare the list `nodes` with `states`, the recorded node states of the same positions\n"
             "(a list the caller owns: changed in place). A KernelNode whose kernel, grid, block,\n"
             "shared_mem and attrs are the very objects of its 6-tuple state (kernel, grid, block,\n"
             "shared_mem, args, attrs) is unchanged when its arguments are the recorded tuple or a\n"
             "tuple of the very same objects, and changed when another argument differs in type,\n"
             "is of a type in the set `identity_types` (equal only to itself), or is an int, float or bytes\n"
             "of another value; its state then takes the new argument tuple (as\n"
             "cudagraph.definition.diff.diff_states records it). A fill or copy of a kind made known with\n"
             "simple() is decided when each field is the recorded object or both are ints. Returns the nodes\n"
             "found changed (in order), and the positions of every other node (compared by value by the caller).\n"
             "`value_types` (optional): a tuple of (type, size, is_float) for numpy scalar types whose instances\n"
             "hold their value's `size` bytes right after the object header (checked by the packer): two\n"
             "arguments of such a type are compared by those bytes, as == compares them (floats: -0.0 equals\n"
             "0.0, a NaN equals nothing).");

/* A float of `size` bytes (2, 4 or 8) at `p`, little-endian: 1 a zero (either sign), 2 a NaN, else 0. */
static int
float_class(const unsigned char *p, Py_ssize_t size)
{
    unsigned long long bits = 0;
    memcpy(&bits, p, (size_t)size);
    int mant = size == 2 ? 10 : size == 4 ? 23 : 52, expo = size == 2 ? 5 : size == 4 ? 8 : 11;
    unsigned long long m = bits & ((1ull << mant) - 1), e = (bits >> mant) & ((1ull << expo) - 1);
    if (e == 0 && m == 0)
        return 1;
    return e == (1ull << expo) - 1 && m != 0 ? 2 : 0;
}

/* For two distinct numpy scalars `x` and `y` of one type: 1 equal, 0 not (as `x == y` answers), -1 not a type of
 * `value_types` (the caller decides). Runs no Python code. */
static int
value_equal(PyObject *x, PyObject *y, PyObject *value_types)
{
    for (Py_ssize_t k = 0; value_types != NULL && k < PyTuple_GET_SIZE(value_types); k++) {
        PyObject *entry = PyTuple_GET_ITEM(value_types, k);
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3 ||
            PyTuple_GET_ITEM(entry, 0) != (PyObject *)Py_TYPE(x))
            continue;
        Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 1));
        int is_float = PyTuple_GET_ITEM(entry, 2) == Py_True;
        if (size < 1 || size > 8 || (is_float && size != 2 && size != 4 && size != 8) ||
            Py_TYPE(x)->tp_basicsize < (Py_ssize_t)sizeof(PyObject) + size) {
            PyErr_Clear();
            return -1;
        }
        const unsigned char *px = (const unsigned char *)x + sizeof(PyObject);
        const unsigned char *py = (const unsigned char *)y + sizeof(PyObject);
        int same = memcmp(px, py, (size_t)size) == 0;
        if (!is_float)
            return same;
        int cx = float_class(px, size), cy = float_class(py, size);
        if (cx == 2 || cy == 2) /* a NaN equals nothing */
            return 0;
        return same || (cx == 1 && cy == 1);
    }
    return -1;
}

/* For two distinct Params `x` and `y` (exact type): 1 the same slot (the same name, the same dtype object), 0 another
 * name, -1 the caller decides (names not exact str, or dtypes other objects). Runs no Python code. */
static int
param_same(Layout *self, PyObject *x, PyObject *y)
{
    PyObject *nx = SLOT(x, self->param_name), *ny = SLOT(y, self->param_name);
    if (nx == NULL || ny == NULL || !PyUnicode_CheckExact(nx) || !PyUnicode_CheckExact(ny))
        return -1;
    if (nx != ny && PyUnicode_Compare(nx, ny) != 0) /* (exact str: no Python code, no error) */
        return 0;
    PyObject *dx = SLOT(x, self->param_dtype), *dy = SLOT(y, self->param_dtype);
    return dx != NULL && dx == dy ? 1 : -1;
}

/* 1: same; 0: changed; -1: undecided (the caller compares by value); -2: error.
 * The caller holds `a` and `sa` (a type's __hash__ runs in the set lookup). */
static int
args_compare(Layout *self, PyObject *a, PyObject *sa, PyObject *identity_types, PyObject *value_types)
{
    int undecided = 0;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(a); j++) {
        PyObject *x = PyTuple_GET_ITEM(a, j), *y = PyTuple_GET_ITEM(sa, j);
        if (x == y)
            continue;
        if (Py_TYPE(x) != Py_TYPE(y))
            return 0;
        if (PyLong_CheckExact(x) || PyFloat_CheckExact(x)) {
            int eq = PyObject_RichCompareBool(x, y, Py_EQ); /* int and float: no Python code */
            if (eq < 0)
                return -2;
            if (!eq)
                return 0;
            continue;
        }
        if (Py_TYPE(x) == self->param_type) { /* a rebuilt definition's own Param of the same name */
            int same = param_same(self, x, y);
            if (same == 0)
                return 0;
            if (same < 0)
                undecided = 1;
            continue;
        }
        if (PyBytes_CheckExact(x)) { /* a struct's bytes: equal when they are */
            if (PyBytes_GET_SIZE(x) != PyBytes_GET_SIZE(y) ||
                memcmp(PyBytes_AS_STRING(x), PyBytes_AS_STRING(y), (size_t)PyBytes_GET_SIZE(x)) != 0)
                return 0;
            continue;
        }
        int value = value_equal(x, y, value_types);
        if (value == 0)
            return 0;
        if (value == 1)
            continue;
        int ident = PySet_Contains(identity_types, (PyObject *)Py_TYPE(x));
        if (ident < 0)
            return -2;
        if (ident)
            return 0;
        undecided = 1;
    }
    return undecided ? -1 : 1;
}

static int
append_index(PyObject *list, Py_ssize_t i)
{
    PyObject *at = PyLong_FromSsize_t(i);
    if (at == NULL)
        return -1;
    int r = PyList_Append(list, at);
    Py_DECREF(at);
    return r;
}

/* The verdict on kernel node `node` against its state `s` (items of the caller's lists): 1 same, 0 changed
 * (appended to `changed`), -1 the caller decides, -2 error. Records the node's new arguments in
 * states[i] when it decides on them. */
static int
kernel_verdict(Layout *self, PyObject *node, PyObject *s, PyObject *states, Py_ssize_t i, PyObject *identity,
               PyObject *values, PyObject *changed)
{
    if (!(PyTuple_CheckExact(s) && PyTuple_GET_SIZE(s) == 6 && SLOT(node, self->kn.kernel) == PyTuple_GET_ITEM(s, 0) &&
          SLOT(node, self->kn.grid) == PyTuple_GET_ITEM(s, 1) && SLOT(node, self->kn.block) == PyTuple_GET_ITEM(s, 2) &&
          SLOT(node, self->kn.smem) == PyTuple_GET_ITEM(s, 3) && SLOT(node, self->kn.attrs) == PyTuple_GET_ITEM(s, 5)))
        return -1;
    PyObject *a = SLOT(node, self->kn.args), *sa = PyTuple_GET_ITEM(s, 4);
    if (a == sa)
        return 1;
    if (a == NULL || !PyTuple_CheckExact(a) || !PyTuple_CheckExact(sa) || PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(sa))
        return -1;
    int all_same = 1;
    for (Py_ssize_t j = 0; all_same && j < PyTuple_GET_SIZE(a); j++)
        all_same = PyTuple_GET_ITEM(a, j) == PyTuple_GET_ITEM(sa, j);
    if (all_same)
        return 1; /* the same objects in a new tuple: the recorded state stays */
    /* Held from here: the Python code args_compare and the allocation may run can drop the lists' references. */
    Py_INCREF(node);
    Py_INCREF(s);
    Py_INCREF(a);
    int verdict = args_compare(self, a, sa, identity, values);
    if (verdict >= 0) { /* decided here: record the new arguments */
        PyObject *ns = PyTuple_New(6);
        if (ns == NULL) {
            verdict = -2;
        } else {
            for (Py_ssize_t j = 0; j < 6; j++)
                PyTuple_SET_ITEM(ns, j, Py_NewRef(j == 4 ? a : PyTuple_GET_ITEM(s, j)));
            if (i >= PyList_GET_SIZE(states)) {
                PyErr_SetString(PyExc_RuntimeError, "diff: the list of states was shortened while it was read");
                Py_DECREF(ns);
                verdict = -2;
            } else if (PyList_SetItem(states, i, ns) < 0) {
                verdict = -2;
            }
        }
    }
    if (verdict == 0 && PyList_Append(changed, node) < 0)
        verdict = -2;
    Py_DECREF(a);
    Py_DECREF(s);
    Py_DECREF(node);
    return verdict;
}

/* The verdict on a fill or 1-D copy `node` against its state `s` (items of the caller's lists), which
 * diff_states records as the tuple of its slots in NATIVE_SLOTS order (simple() is told so only then): 1 same,
 * 0 changed (appended to `changed`), -1 the caller decides, -2 error. Decides when every slot is the recorded
 * object or both are ints; records the node's values in states[i] as diff_states does. */
static int
simple_verdict(Layout *self, PyObject *node, PyObject *s, PyObject *states, Py_ssize_t i, PyObject *changed)
{
    const Py_ssize_t *at = Py_TYPE(node) == self->memset_type ? self->ms.at : self->mc.at;
    Py_ssize_t k = Py_TYPE(node) == self->memset_type ? CG_SLOT_COUNT(self->ms) : CG_SLOT_COUNT(self->mc);
    PyObject *seen[CG_SLOT_COUNT(self->ms)]; /* (the larger kind: see cg_memcpy_slots) */
    if (!PyTuple_CheckExact(s) || PyTuple_GET_SIZE(s) != k)
        return -1;
    int identical = 1, same = 1;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *x = seen[j] = SLOT(node, at[j]), *y = PyTuple_GET_ITEM(s, j);
        if (x == y)
            continue;
        identical = 0;
        if (x == NULL || !PyLong_CheckExact(x) || !PyLong_CheckExact(y))
            return -1;
        int eq = PyObject_RichCompareBool(x, y, Py_EQ); /* two ints: runs no Python code */
        if (eq < 0)
            return -2;
        same &= eq;
    }
    if (identical)
        return 1; /* the recorded tuple holds the very objects: it stays */
    Py_INCREF(node);
    PyObject *ns = PyTuple_New(k); /* (a collection may run Python code: the slots are read again after it) */
    int verdict = ns == NULL ? -2 : same;
    for (Py_ssize_t j = 0; ns != NULL && j < k; j++) {
        if (SLOT(node, at[j]) != seen[j]) {
            verdict = -1;
            break;
        }
        PyTuple_SET_ITEM(ns, j, Py_NewRef(seen[j]));
    }
    if (verdict >= 0) {
        if (i >= PyList_GET_SIZE(states)) {
            PyErr_SetString(PyExc_RuntimeError, "diff: the list of states was shortened while it was read");
            verdict = -2;
        } else {
            /* (steals ns; the old state's items are the node's objects or ints: releasing it runs no Python code) */
            PyList_SetItem(states, i, ns);
            ns = NULL;
        }
    }
    Py_XDECREF(ns);
    if (verdict == 0 && PyList_Append(changed, node) < 0)
        verdict = -2;
    Py_DECREF(node);
    return verdict;
}

PyDoc_STRVAR(layout_simple_doc,
             "simple(memset_type, memcpy_type) -> None\n\n"
             "Diff fills and 1-D copies (those exact types) here too: their recorded states must be the tuples of\n"
             "their NATIVE_SLOTS['memset_node'] and ['memcpy_node'] slots, in that order.");

static PyObject *
layout_simple(Layout *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyType_Check(argv[0]) || !PyType_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "simple(memset_type: type, memcpy_type: type)");
        return NULL;
    }
    cg_memset_slots ms;
    cg_memcpy_slots mc;
    if (cg_resolve_slots((PyTypeObject *)argv[0], "memset_node", CG_SLOT_COUNT(ms), ms.at) < 0 ||
        cg_resolve_slots((PyTypeObject *)argv[1], "memcpy_node", CG_SLOT_COUNT(mc), mc.at) < 0)
        return NULL;
    PyTypeObject *old_s = self->memset_type, *old_c = self->memcpy_type;
    self->ms = ms;
    self->mc = mc;
    self->memset_type = (PyTypeObject *)Py_NewRef(argv[0]);
    self->memcpy_type = (PyTypeObject *)Py_NewRef(argv[1]);
    Py_XDECREF(old_s);
    Py_XDECREF(old_c);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(layout_params_doc,
             "params(param_type) -> None\n\n"
             "Compare arguments of the exact type `param_type` (Param) here too: two are the same argument when\n"
             "their names are equal and their dtypes the same object, as cudagraph.definition.diff.same_value\n"
             "answers; another name is a change; other dtype objects are left to the caller.");

static PyObject *
layout_params(Layout *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 1 || !PyType_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "params(param_type: type)");
        return NULL;
    }
    Py_ssize_t name, dtype;
    if (cg_resolve_slots((PyTypeObject *)argv[0], "parameter", 1, &name) < 0 ||
        cg_resolve_slots((PyTypeObject *)argv[0], "parameter_dtype", 1, &dtype) < 0)
        return NULL;
    PyTypeObject *old = self->param_type;
    self->param_name = name;
    self->param_dtype = dtype;
    self->param_type = (PyTypeObject *)Py_NewRef(argv[0]);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *
layout_diff(Layout *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc < 3 || argc > 4 || !PyList_CheckExact(argv[0]) || !PyList_CheckExact(argv[1]) ||
        !PyAnySet_Check(argv[2]) || (argc == 4 && !PyTuple_CheckExact(argv[3]))) {
        PyErr_SetString(PyExc_TypeError,
                        "diff(nodes: list, states: list, identity_types: set, value_types: tuple = ())");
        return NULL;
    }
    if (self->kernel_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Layout is not initialized");
        return NULL;
    }
    PyObject *nodes = argv[0], *states = argv[1], *identity = argv[2], *values = argc == 4 ? argv[3] : NULL;
    PyObject *changed = PyList_New(0), *suspects = PyList_New(0);
    if (changed == NULL || suspects == NULL)
        goto fail;
    /* The lengths are read at every step: the Python code a comparison runs may shorten the lists. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes) && i < PyList_GET_SIZE(states); i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i), *s = PyList_GET_ITEM(states, i);
        int verdict = -1; /* 1 same, 0 changed, -1 the caller decides (every node not a KernelNode) */
        if (Py_TYPE(node) == self->kernel_type) {
            if ((verdict = kernel_verdict(self, node, s, states, i, identity, values, changed)) == -2)
                goto fail;
        } else if (self->memset_type != NULL &&
                   (Py_TYPE(node) == self->memset_type || Py_TYPE(node) == self->memcpy_type)) {
            if ((verdict = simple_verdict(self, node, s, states, i, changed)) == -2)
                goto fail;
        }
        if (verdict == -1 && append_index(suspects, i) < 0)
            goto fail;
    }
    PyObject *out = PyTuple_Pack(2, changed, suspects);
    Py_DECREF(changed);
    Py_DECREF(suspects);
    return out;
fail:
    Py_XDECREF(changed);
    Py_XDECREF(suspects);
    return NULL;
}

static PyMethodDef layout_methods[] = {
    {"signature", (PyCFunction)(void (*)(void))layout_signature, METH_FASTCALL, layout_signature_doc},
    {"diff", (PyCFunction)(void (*)(void))layout_diff, METH_FASTCALL, layout_diff_doc},
    {"params", (PyCFunction)(void (*)(void))layout_params, METH_FASTCALL, layout_params_doc},
    {"simple", (PyCFunction)(void (*)(void))layout_simple, METH_FASTCALL, layout_simple_doc},
    {"sinks", (PyCFunction)(void (*)(void))layout_sinks, METH_FASTCALL, layout_sinks_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(layout_doc,
             "Layout(kernel_type, node_type)\n\n"
             "Reads the definition's nodes through their __slots__ (NATIVE_SLOTS['kernel_node'] of\n"
             "kernel_type, NATIVE_SLOTS['node'] of node_type) to compare graphs quickly: topology\n"
             "signatures and kernel-node differences, for rebuilt definitions of a known shape.");

PyTypeObject cg_LayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph.driver._native.Layout",
    .tp_basicsize = sizeof(Layout),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = layout_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)layout_init,
    .tp_dealloc = (destructor)layout_dealloc,
    .tp_methods = layout_methods,
};
