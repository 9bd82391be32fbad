/*
 * cudagraph._driver._native: the compiled hot loops of explicit construction and rebinding.
 *
 * Adding a kernel node (cuGraphAddNode_v2) and setting one in an executable
 * (cuGraphExecKernelNodeSetParams_v2) cost the driver 0.3-0.5 us; calling them
 * from Python through cuda.bindings or ctypes costs 1-1.5 us more. This module
 * makes those calls from C. It links against nothing: the driver's entry
 * points arrive as addresses (resolved by the Python side from libcuda.so.1),
 * and the structures it writes are the driver's ABI, declared below. It reads
 * the definition's KernelNode objects through their __slots__ descriptors,
 * resolved once by name, and stops at the first node it cannot add itself
 * (another node kind, launch attributes, a new kernel or new arguments to
 * pack), handing it back to the Python loop.
 *
 * Nothing here raises for a driver failure: the CUresult is returned (or kept
 * in KernelAdder.rc) and the caller raises the typed error naming the node.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef Py_T_OBJECT_EX
#include <structmember.h>
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif

/* ------------------------------------------------------------------ driver ABI (cuda.h, CUDA 12.3+) */

typedef struct {
    void *func; /* CUfunction */
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    void *kern; /* CUkernel */
    void *ctx;  /* CUcontext */
} cg_kernel_params_v3;

typedef struct {
    int type; /* CUgraphNodeType */
    int reserved0[3];
    union {
        long long reserved1[29];
        cg_kernel_params_v3 kernel;
    } u;
    long long reserved2;
} cg_graph_node_params;

/* CUresult cuGraphAddNode_v2(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
 *                            CUgraphNodeParams*) */
typedef int (*cg_add_node_fn)(void **, void *, void *const *, const void *, size_t, cg_graph_node_params *);
/* CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*) */
typedef int (*cg_set_kernel_fn)(void *, void *, const void *);

_Static_assert(offsetof(cg_graph_node_params, u) == 16, "CUgraphNodeParams layout");
_Static_assert(sizeof(cg_graph_node_params) == 256, "CUgraphNodeParams size");
_Static_assert(offsetof(cg_kernel_params_v3, kernelParams) == 40, "CUDA_KERNEL_NODE_PARAMS layout");

/* ------------------------------------------------------------------ helpers */

static int
address_of(PyObject *obj, const char *what, void **out)
{
    void *p = PyLong_AsVoidPtr(obj);
    if (p == NULL && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "%s must be an address (int)", what);
        return -1;
    }
    *out = p;
    return 0;
}

/* The instance offset of a __slots__ attribute of `tp` (a member descriptor holding an object). */
static int
slot_offset(PyTypeObject *tp, const char *name, Py_ssize_t *out)
{
    PyObject *d = PyObject_GetAttrString((PyObject *)tp, name);
    if (d == NULL)
        return -1;
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ attribute", tp->tp_name, name);
        Py_DECREF(d);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    int ok = m->type == Py_T_OBJECT_EX && m->offset > 0 &&
             m->offset + (Py_ssize_t)sizeof(PyObject *) <= tp->tp_basicsize;
    Py_ssize_t off = m->offset;
    Py_DECREF(d);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", tp->tp_name, name);
        return -1;
    }
    *out = off;
    return 0;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* A (x, y, z) tuple of ints as three unsigned ints; 0 on success, -1 (no exception set) otherwise. */
static int
dims3(PyObject *t, unsigned int *x, unsigned int *y, unsigned int *z)
{
    if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 3)
        return -1;
    unsigned long v[3];
    for (int i = 0; i < 3; i++) {
        PyObject *item = PyTuple_GET_ITEM(t, i);
        if (!PyLong_CheckExact(item))
            return -1;
        v[i] = PyLong_AsUnsignedLong(item);
        if (v[i] == (unsigned long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        if (v[i] > 0xFFFFFFFFul)
            return -1;
    }
    *x = (unsigned int)v[0];
    *y = (unsigned int)v[1];
    *z = (unsigned int)v[2];
    return 0;
}

/* ------------------------------------------------------------------ KernelAdder */

typedef struct {
    PyObject_HEAD
    cg_add_node_fn add;
    void *graph;
    cg_graph_node_params *params;
    PyTypeObject *kernel_type; /* KernelNode (exact type only) */
    PyTypeObject *node_type;   /* Node: every predecessor is one */
    Py_ssize_t off_kernel, off_grid, off_block, off_smem, off_args, off_attrs, off_preds, off_index;
    PyObject *kernel; /* the kernel object whose function and arguments are in params */
    PyObject *args;   /* the argument tuple packed where params->kernelParams points */
    PyObject *grid, *block, *smem; /* the objects the dimensions in params came from */
    void **deps;
    Py_ssize_t deps_cap;
    void *out;
    int rc;
    Py_ssize_t added;
} KernelAdder;

static void
adder_clear_refs(KernelAdder *self)
{
    Py_CLEAR(self->kernel_type);
    Py_CLEAR(self->node_type);
    Py_CLEAR(self->kernel);
    Py_CLEAR(self->args);
    Py_CLEAR(self->grid);
    Py_CLEAR(self->block);
    Py_CLEAR(self->smem);
}

static void
adder_dealloc(KernelAdder *self)
{
    PyObject_GC_UnTrack(self);
    adder_clear_refs(self);
    PyMem_Free(self->deps);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
adder_traverse(KernelAdder *self, visitproc visit, void *arg)
{
    Py_VISIT(self->kernel_type);
    Py_VISIT(self->node_type);
    Py_VISIT(self->kernel);
    Py_VISIT(self->args);
    Py_VISIT(self->grid);
    Py_VISIT(self->block);
    Py_VISIT(self->smem);
    return 0;
}

static int
adder_tp_clear(KernelAdder *self)
{
    adder_clear_refs(self);
    return 0;
}

static int
adder_init(KernelAdder *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"add_node", "graph", "params", "kernel_type", "node_type", NULL};
    PyObject *fn, *graph, *params, *ktype, *ntype;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!O!", kwlist, &fn, &graph, &params, &PyType_Type, &ktype,
                                     &PyType_Type, &ntype))
        return -1;
    void *p;
    if (address_of(fn, "add_node", &p) < 0)
        return -1;
    if (p == NULL) {
        PyErr_SetString(PyExc_ValueError, "add_node must not be NULL");
        return -1;
    }
    self->add = (cg_add_node_fn)p;
    if (address_of(graph, "graph", &self->graph) < 0 || address_of(params, "params", &p) < 0)
        return -1;
    if (p == NULL) {
        PyErr_SetString(PyExc_ValueError, "params must not be NULL");
        return -1;
    }
    self->params = (cg_graph_node_params *)p;
    if (!PyType_IsSubtype((PyTypeObject *)ktype, (PyTypeObject *)ntype)) {
        PyErr_SetString(PyExc_TypeError, "kernel_type must derive from node_type");
        return -1;
    }
    PyTypeObject *kt = (PyTypeObject *)ktype, *nt = (PyTypeObject *)ntype;
    if (slot_offset(kt, "kernel", &self->off_kernel) < 0 || slot_offset(kt, "grid", &self->off_grid) < 0 ||
        slot_offset(kt, "block", &self->off_block) < 0 || slot_offset(kt, "shared_mem", &self->off_smem) < 0 ||
        slot_offset(kt, "args", &self->off_args) < 0 || slot_offset(kt, "attrs", &self->off_attrs) < 0 ||
        slot_offset(nt, "_preds", &self->off_preds) < 0 || slot_offset(nt, "index", &self->off_index) < 0)
        return -1;
    adder_clear_refs(self);
    Py_INCREF(ktype);
    self->kernel_type = kt;
    Py_INCREF(ntype);
    self->node_type = nt;
    if (self->deps == NULL) {
        self->deps = PyMem_Malloc(8 * sizeof(void *));
        if (self->deps == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->deps_cap = 8;
    }
    self->rc = 0;
    self->added = 0;
    return 0;
}

/* Write the node's dimensions into params where they differ from the last node's.
 * 1: written; 0: the node's dimensions are not plain ints (no exception set). */
static int
adder_dims(KernelAdder *self, PyObject *node)
{
    cg_kernel_params_v3 *k = &self->params->u.kernel;
    PyObject *grid = SLOT(node, self->off_grid), *block = SLOT(node, self->off_block);
    PyObject *smem = SLOT(node, self->off_smem);
    if (grid == NULL || block == NULL || smem == NULL)
        return 0;
    if (grid != self->grid) {
        if (dims3(grid, &k->gridDimX, &k->gridDimY, &k->gridDimZ) < 0) {
            Py_CLEAR(self->grid);
            return 0;
        }
        Py_INCREF(grid);
        Py_XSETREF(self->grid, grid);
    }
    if (block != self->block) {
        if (dims3(block, &k->blockDimX, &k->blockDimY, &k->blockDimZ) < 0) {
            Py_CLEAR(self->block);
            return 0;
        }
        Py_INCREF(block);
        Py_XSETREF(self->block, block);
    }
    if (smem != self->smem) {
        if (!PyLong_CheckExact(smem))
            return 0;
        unsigned long v = PyLong_AsUnsignedLong(smem);
        if ((v == (unsigned long)-1 && PyErr_Occurred()) || v > 0xFFFFFFFFul) {
            PyErr_Clear();
            Py_CLEAR(self->smem);
            return 0;
        }
        k->sharedMemBytes = (unsigned int)v;
        Py_INCREF(smem);
        Py_XSETREF(self->smem, smem);
    }
    return 1;
}

/* Gather the driver handles of `node`'s predecessors (from `raw`) into self->deps and its index.
 * 1: done; 0: it must go through Python (no exception set). */
static int
adder_deps(KernelAdder *self, PyObject *node, PyObject *raw, Py_ssize_t *count, Py_ssize_t *at)
{
    PyObject *preds = SLOT(node, self->off_preds), *index = SLOT(node, self->off_index);
    if (preds == NULL || index == NULL || !PyList_CheckExact(preds) || !PyLong_CheckExact(index))
        return 0;
    Py_ssize_t n = PyList_GET_SIZE(preds), size = PyList_GET_SIZE(raw);
    *at = PyLong_AsSsize_t(index);
    if (*at < 0 || *at >= size) {
        PyErr_Clear();
        return 0;
    }
    if (n > self->deps_cap) {
        void **deps = PyMem_Realloc(self->deps, (size_t)(2 * n) * sizeof(void *));
        if (deps == NULL) {
            PyErr_Clear();
            return 0;
        }
        self->deps = deps;
        self->deps_cap = 2 * n;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pred = PyList_GET_ITEM(preds, i);
        if (!PyObject_TypeCheck(pred, self->node_type))
            return 0;
        PyObject *pi = SLOT(pred, self->off_index);
        if (pi == NULL || !PyLong_CheckExact(pi))
            return 0;
        Py_ssize_t j = PyLong_AsSsize_t(pi);
        if (j < 0 || j >= size) {
            PyErr_Clear();
            return 0;
        }
        void *h = PyLong_AsVoidPtr(PyList_GET_ITEM(raw, j));
        if (h == NULL) { /* not built yet, or not an address: Python names the problem */
            PyErr_Clear();
            return 0;
        }
        self->deps[i] = h;
    }
    *count = n;
    return 1;
}

/* Call the driver with the gathered dependencies and `params`; record the new handle at raw[at].
 * Always 1 (a refusal leaves its CUresult in self->rc). */
static int
adder_call(KernelAdder *self, PyObject *raw, Py_ssize_t n, Py_ssize_t at, cg_graph_node_params *params)
{
    self->out = NULL;
    int rc = self->add(&self->out, self->graph, n ? self->deps : NULL, NULL, (size_t)n, params);
    if (rc) {
        self->rc = rc;
        return 1;
    }
    PyObject *h = PyLong_FromVoidPtr(self->out);
    if (h == NULL) {
        PyErr_Clear();
        self->rc = -1;
        return 1;
    }
    PyObject *old = PyList_GET_ITEM(raw, at);
    PyList_SET_ITEM(raw, at, h);
    Py_DECREF(old);
    self->added++;
    return 1;
}

/* Add the KernelNode `node` with the prepared params after its predecessors, whose handles are in `raw`.
 * 1: added (or the driver refused: self->rc is set); 0: it must go through Python (no exception set). */
static int
adder_add(KernelAdder *self, PyObject *node, PyObject *raw)
{
    Py_ssize_t n, at;
    if (!adder_deps(self, node, raw, &n, &at) || !adder_dims(self, node))
        return 0;
    return adder_call(self, raw, n, at, self->params);
}

PyDoc_STRVAR(adder_run_doc,
             "run(order, start, raw) -> int\n\n"
             "Add order[start:], one node after another, while each is a KernelNode without launch\n"
             "attributes whose kernel is `kernel` and whose arguments are the very tuple `args`; return\n"
             "the index of the first node not added (len(order) when all were). raw[i] holds the driver\n"
             "handle (int) of the node of index i, read for predecessors and written for each node added.\n"
             "A driver failure stops the loop at that node with its CUresult in `rc`.");

static PyObject *
adder_run(KernelAdder *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 3 || !PyList_CheckExact(argv[0]) || !PyLong_CheckExact(argv[1]) || !PyList_CheckExact(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "run(order: list, start: int, raw: list)");
        return NULL;
    }
    PyObject *order = argv[0], *raw = argv[2];
    Py_ssize_t i = PyLong_AsSsize_t(argv[1]);
    if (i < 0 && PyErr_Occurred())
        return NULL;
    self->rc = 0;
    PyObject *kernel = self->kernel, *args = self->args;
    if (kernel != NULL && args != NULL) {
        for (; i < PyList_GET_SIZE(order); i++) {
            PyObject *node = PyList_GET_ITEM(order, i);
            if (Py_TYPE(node) != self->kernel_type || SLOT(node, self->off_attrs) != Py_None ||
                SLOT(node, self->off_kernel) != kernel || SLOT(node, self->off_args) != args)
                break;
            if (!adder_add(self, node, raw))
                break;
            if (self->rc)
                break;
        }
    }
    return PyLong_FromSsize_t(i);
}

PyDoc_STRVAR(adder_add_doc,
             "add(node, raw) -> bool\n\n"
             "Add one KernelNode with the prepared function and packed arguments (its dimensions are\n"
             "written here); False when it must go through the general path. `rc` holds the CUresult.");

static PyObject *
adder_add_one(KernelAdder *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyList_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "add(node, raw: list)");
        return NULL;
    }
    self->rc = 0;
    if (Py_TYPE(argv[0]) != self->kernel_type)
        Py_RETURN_FALSE;
    return PyBool_FromLong(adder_add(self, argv[0], argv[1]));
}

PyDoc_STRVAR(adder_add_with_doc,
             "add_with(node, raw, params) -> bool\n\n"
             "Add any node (a Node) with the CUgraphNodeParams at address `params`, after its\n"
             "predecessors; False when it must go through the general path. `rc` holds the CUresult.");

static PyObject *
adder_add_with(KernelAdder *self, PyObject *const *argv, Py_ssize_t argc)
{
    void *params;
    if (argc != 3 || !PyList_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "add_with(node, raw: list, params: int)");
        return NULL;
    }
    if (address_of(argv[2], "params", &params) < 0)
        return NULL;
    if (params == NULL) {
        PyErr_SetString(PyExc_ValueError, "params must not be NULL");
        return NULL;
    }
    self->rc = 0;
    if (!PyObject_TypeCheck(argv[0], self->node_type))
        Py_RETURN_FALSE;
    Py_ssize_t n, at;
    if (!adder_deps(self, argv[0], argv[1], &n, &at))
        Py_RETURN_FALSE;
    adder_call(self, argv[1], n, at, (cg_graph_node_params *)params);
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(adder_write_dims_doc,
             "write_dims(node) -> bool\n\n"
             "Write a KernelNode's grid, block and shared memory into the prepared parameters\n"
             "(for a node added through another call); False when they are not plain ints.");

static PyObject *
adder_write_dims(KernelAdder *self, PyObject *node)
{
    if (Py_TYPE(node) != self->kernel_type)
        Py_RETURN_FALSE;
    return PyBool_FromLong(adder_dims(self, node));
}

static PyObject *
adder_get_obj(KernelAdder *self, void *closure)
{
    PyObject *v = *(PyObject **)((char *)self + (Py_ssize_t)closure);
    if (v == NULL)
        Py_RETURN_NONE;
    Py_INCREF(v);
    return v;
}

static int
adder_set_obj(KernelAdder *self, PyObject *value, void *closure)
{
    PyObject **slot = (PyObject **)((char *)self + (Py_ssize_t)closure);
    if (value == Py_None)
        value = NULL;
    Py_XINCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

static PyObject *
adder_get_rc(KernelAdder *self, void *closure)
{
    return PyLong_FromLong(self->rc);
}

static PyObject *
adder_get_added(KernelAdder *self, void *closure)
{
    return PyLong_FromSsize_t(self->added);
}

static PyMethodDef adder_methods[] = {
    {"run", (PyCFunction)(void (*)(void))adder_run, METH_FASTCALL, adder_run_doc},
    {"add", (PyCFunction)(void (*)(void))adder_add_one, METH_FASTCALL, adder_add_doc},
    {"add_with", (PyCFunction)(void (*)(void))adder_add_with, METH_FASTCALL, adder_add_with_doc},
    {"write_dims", (PyCFunction)adder_write_dims, METH_O, adder_write_dims_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef adder_getset[] = {
    {"kernel", (getter)adder_get_obj, (setter)adder_set_obj,
     "The kernel object whose function and arguments the prepared parameters hold (None: none).",
     (void *)offsetof(KernelAdder, kernel)},
    {"args", (getter)adder_get_obj, (setter)adder_set_obj,
     "The argument tuple packed where kernelParams points (None: none; set it after packing).",
     (void *)offsetof(KernelAdder, args)},
    {"rc", (getter)adder_get_rc, NULL, "The CUresult of the last refused add (0: none).", NULL},
    {"added", (getter)adder_get_added, NULL, "Nodes added so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(adder_doc,
             "KernelAdder(add_node, graph, params, kernel_type, node_type)\n\n"
             "Adds kernel nodes to one driver graph through cuGraphAddNode_v2 (its address: add_node)\n"
             "with the prepared CUgraphNodeParams at address `params`, whose function and kernelParams\n"
             "the caller sets; dimensions and dependencies are written here per node.");

static PyTypeObject KernelAdderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph._driver._native.KernelAdder",
    .tp_basicsize = sizeof(KernelAdder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = adder_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)adder_init,
    .tp_dealloc = (destructor)adder_dealloc,
    .tp_traverse = (traverseproc)adder_traverse,
    .tp_clear = (inquiry)adder_tp_clear,
    .tp_methods = adder_methods,
    .tp_getset = adder_getset,
};

/* ------------------------------------------------------------------ Layout: signature and diff */

typedef struct {
    PyObject_HEAD
    PyTypeObject *kernel_type;
    PyTypeObject *node_type;
    Py_ssize_t off_kernel, off_grid, off_block, off_smem, off_args, off_attrs, off_preds, off_index;
} Layout;

static void
layout_dealloc(Layout *self)
{
    Py_CLEAR(self->kernel_type);
    Py_CLEAR(self->node_type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
layout_init(Layout *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"kernel_type", "node_type", NULL};
    PyObject *ktype, *ntype;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!", kwlist, &PyType_Type, &ktype, &PyType_Type, &ntype))
        return -1;
    if (!PyType_IsSubtype((PyTypeObject *)ktype, (PyTypeObject *)ntype)) {
        PyErr_SetString(PyExc_TypeError, "kernel_type must derive from node_type");
        return -1;
    }
    PyTypeObject *kt = (PyTypeObject *)ktype, *nt = (PyTypeObject *)ntype;
    if (slot_offset(kt, "kernel", &self->off_kernel) < 0 || slot_offset(kt, "grid", &self->off_grid) < 0 ||
        slot_offset(kt, "block", &self->off_block) < 0 || slot_offset(kt, "shared_mem", &self->off_smem) < 0 ||
        slot_offset(kt, "args", &self->off_args) < 0 || slot_offset(kt, "attrs", &self->off_attrs) < 0 ||
        slot_offset(nt, "_preds", &self->off_preds) < 0 || slot_offset(nt, "index", &self->off_index) < 0)
        return -1;
    Py_INCREF(ktype);
    Py_XSETREF(self->kernel_type, kt);
    Py_INCREF(ntype);
    Py_XSETREF(self->node_type, nt);
    return 0;
}

PyDoc_STRVAR(layout_signature_doc,
             "signature(nodes, flat_types) -> tuple or None\n\n"
             "The topology signature of a graph whose nodes (in creation order) are the list `nodes`:\n"
             "per node its type, then the index of each predecessor, in one flat tuple (as\n"
             "cudagraph._diff.topology_signature makes it). None when a node's type is neither the\n"
             "kernel type nor in the set `flat_types` (types without nested bodies).");

static PyObject *
layout_signature(Layout *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyList_CheckExact(argv[0]) || !PyAnySet_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "signature(nodes: list, flat_types: set)");
        return NULL;
    }
    if (self->kernel_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Layout is not initialized");
        return NULL;
    }
    PyObject *nodes = argv[0], *flat = argv[1];
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        PyObject *t = (PyObject *)Py_TYPE(node);
        if (t != (PyObject *)self->kernel_type) {
            int known = PySet_Contains(flat, t);
            if (known < 0)
                goto fail;
            if (!known || !PyObject_TypeCheck(node, self->node_type)) {
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
        }
        if (PyList_Append(out, t) < 0)
            goto fail;
        PyObject *preds = SLOT(node, self->off_preds);
        if (preds == NULL || !PyList_CheckExact(preds)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(preds); j++) {
            PyObject *pred = PyList_GET_ITEM(preds, j);
            PyObject *index = PyObject_TypeCheck(pred, self->node_type) ? SLOT(pred, self->off_index) : NULL;
            if (index == NULL) {
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
            if (PyList_Append(out, index) < 0)
                goto fail;
        }
    }
    PyObject *tuple = PyList_AsTuple(out);
    Py_DECREF(out);
    return tuple;
fail:
    Py_DECREF(out);
    return NULL;
}

PyDoc_STRVAR(layout_diff_doc,
             "diff(nodes, states) -> list of int\n\n"
             "Compare the list `nodes` with `states`, the recorded node states of the same positions.\n"
             "A KernelNode whose kernel, grid, block, shared_mem and attrs are the very objects of its\n"
             "6-tuple state (kernel, grid, block, shared_mem, args, attrs), and whose arguments are the\n"
             "recorded tuple or a tuple of the very same objects, is unchanged. Returns the positions\n"
             "of every other node, to be compared by value by the caller.");

static PyObject *
layout_diff(Layout *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyList_CheckExact(argv[0]) || !PyList_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "diff(nodes: list, states: list)");
        return NULL;
    }
    if (self->kernel_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Layout is not initialized");
        return NULL;
    }
    PyObject *nodes = argv[0], *states = argv[1];
    PyObject *suspects = PyList_New(0);
    if (suspects == NULL)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(nodes);
    if (PyList_GET_SIZE(states) < count)
        count = PyList_GET_SIZE(states);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i), *s = PyList_GET_ITEM(states, i);
        int same = 0;
        if (Py_TYPE(node) == self->kernel_type && PyTuple_CheckExact(s) && PyTuple_GET_SIZE(s) == 6 &&
            SLOT(node, self->off_kernel) == PyTuple_GET_ITEM(s, 0) &&
            SLOT(node, self->off_grid) == PyTuple_GET_ITEM(s, 1) &&
            SLOT(node, self->off_block) == PyTuple_GET_ITEM(s, 2) &&
            SLOT(node, self->off_smem) == PyTuple_GET_ITEM(s, 3) &&
            SLOT(node, self->off_attrs) == PyTuple_GET_ITEM(s, 5) && SLOT(node, self->off_kernel) != NULL) {
            PyObject *a = SLOT(node, self->off_args), *sa = PyTuple_GET_ITEM(s, 4);
            if (a == sa) {
                same = 1;
            } else if (a != NULL && PyTuple_CheckExact(a) && PyTuple_CheckExact(sa) &&
                       PyTuple_GET_SIZE(a) == PyTuple_GET_SIZE(sa)) {
                same = 1;
                for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(a); j++) {
                    if (PyTuple_GET_ITEM(a, j) != PyTuple_GET_ITEM(sa, j)) {
                        same = 0;
                        break;
                    }
                }
            }
        }
        if (!same) {
            PyObject *at = PyLong_FromSsize_t(i);
            if (at == NULL || PyList_Append(suspects, at) < 0) {
                Py_XDECREF(at);
                goto fail;
            }
            Py_DECREF(at);
        }
    }
    return suspects;
fail:
    Py_DECREF(suspects);
    return NULL;
}

static PyMethodDef layout_methods[] = {
    {"signature", (PyCFunction)(void (*)(void))layout_signature, METH_FASTCALL, layout_signature_doc},
    {"diff", (PyCFunction)(void (*)(void))layout_diff, METH_FASTCALL, layout_diff_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(layout_doc,
             "Layout(kernel_type, node_type)\n\n"
             "Reads the definition's nodes through their __slots__ to compare graphs quickly:\n"
             "topology signatures and kernel-node differences, for rebuilt definitions of a known shape.");

static PyTypeObject LayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph._driver._native.Layout",
    .tp_basicsize = sizeof(Layout),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = layout_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)layout_init,
    .tp_dealloc = (destructor)layout_dealloc,
    .tp_methods = layout_methods,
};

/* ------------------------------------------------------------------ executable kernel-node updates */

PyDoc_STRVAR(set_kernel_node_doc,
             "set_kernel_node(set_params, exec, node, params) -> int\n\n"
             "cuGraphExecKernelNodeSetParams_v2 on one driver node; returns the CUresult.");

static PyObject *
set_kernel_node(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 4) {
        PyErr_SetString(PyExc_TypeError, "set_kernel_node(set_params: int, exec: int, node: int, params: int)");
        return NULL;
    }
    void *fn, *exec, *node, *params;
    if (address_of(argv[0], "set_params", &fn) < 0 || address_of(argv[1], "exec", &exec) < 0 ||
        address_of(argv[2], "node", &node) < 0 || address_of(argv[3], "params", &params) < 0)
        return NULL;
    if (fn == NULL || params == NULL) {
        PyErr_SetString(PyExc_ValueError, "set_params and params must not be NULL");
        return NULL;
    }
    return PyLong_FromLong(((cg_set_kernel_fn)fn)(exec, node, params));
}

PyDoc_STRVAR(rebind_doc,
             "rebind(set_params, exec, groups, value) -> None or (group, index, CUresult)\n\n"
             "Rebind one parameter in kernel nodes of executable `exec`. Each group is a tuple\n"
             "(buffer, size, offsets, params, nodes): the kernel argument buffer at address `buffer`\n"
             "(`size` bytes) gets `value` at each offset in the tuple `offsets` (an int: a 64-bit\n"
             "little-endian word; bytes: copied as they are), then cuGraphExecKernelNodeSetParams_v2\n"
             "(address set_params) is called on every driver node in the list `nodes` (ints) with the\n"
             "CUDA_KERNEL_NODE_PARAMS at address `params`, which points into that buffer. None when\n"
             "every call succeeded; else where the driver refused and its CUresult (everything before\n"
             "was set).");

static PyObject *
rebind(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 4 || !PyList_CheckExact(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "rebind(set_params: int, exec: int, groups: list, value: int | bytes)");
        return NULL;
    }
    void *fn, *exec;
    if (address_of(argv[0], "set_params", &fn) < 0 || address_of(argv[1], "exec", &exec) < 0)
        return NULL;
    if (fn == NULL) {
        PyErr_SetString(PyExc_ValueError, "set_params must not be NULL");
        return NULL;
    }
    unsigned long long word;
    const char *data;
    Py_ssize_t len;
    if (PyLong_Check(argv[3])) {
        word = PyLong_AsUnsignedLongLong(argv[3]);
        if (word == (unsigned long long)-1 && PyErr_Occurred())
            return NULL;
        data = (const char *)&word; /* x86-64 and aarch64 Linux are little-endian */
        len = (Py_ssize_t)sizeof word;
    } else if (PyBytes_CheckExact(argv[3])) {
        data = PyBytes_AS_STRING(argv[3]);
        len = PyBytes_GET_SIZE(argv[3]);
    } else {
        PyErr_SetString(PyExc_TypeError, "rebind: value must be an int or bytes");
        return NULL;
    }
    PyObject *groups = argv[2];
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(groups); g++) {
        PyObject *t = PyList_GET_ITEM(groups, g);
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 5 || !PyTuple_CheckExact(PyTuple_GET_ITEM(t, 2)) ||
            !PyList_CheckExact(PyTuple_GET_ITEM(t, 4))) {
            PyErr_SetString(PyExc_TypeError, "rebind: a group is (buffer, size, offsets: tuple, params, nodes: list)");
            return NULL;
        }
        void *buf, *params;
        if (address_of(PyTuple_GET_ITEM(t, 0), "buffer", &buf) < 0 ||
            address_of(PyTuple_GET_ITEM(t, 3), "params", &params) < 0)
            return NULL;
        Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 1));
        if (size < 0 && PyErr_Occurred())
            return NULL;
        PyObject *offsets = PyTuple_GET_ITEM(t, 2), *nodes = PyTuple_GET_ITEM(t, 4);
        if ((buf == NULL && PyTuple_GET_SIZE(offsets)) || params == NULL) {
            PyErr_SetString(PyExc_ValueError, "rebind: buffer and params must not be NULL");
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(offsets); i++) {
            Py_ssize_t off = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
            if (off < 0 && PyErr_Occurred())
                return NULL;
            if (off < 0 || off > size - len) {
                PyErr_Format(PyExc_ValueError, "rebind: %zd bytes at offset %zd do not fit a buffer of %zd bytes",
                             len, off, size);
                return NULL;
            }
            memcpy((char *)buf + off, data, (size_t)len);
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
            void *h = PyLong_AsVoidPtr(PyList_GET_ITEM(nodes, i));
            if (h == NULL && PyErr_Occurred())
                return NULL;
            int rc = ((cg_set_kernel_fn)fn)(exec, h, params);
            if (rc)
                return Py_BuildValue("(nni)", g, i, rc);
        }
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef native_methods[] = {
    {"set_kernel_node", (PyCFunction)(void (*)(void))set_kernel_node, METH_FASTCALL, set_kernel_node_doc},
    {"rebind", (PyCFunction)(void (*)(void))rebind, METH_FASTCALL, rebind_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    "cudagraph._driver._native",
    "The compiled hot loops of explicit construction and rebinding (optional; see _native.c).",
    -1,
    native_methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    if (PyType_Ready(&KernelAdderType) < 0 || PyType_Ready(&LayoutType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&KernelAdderType);
    if (PyModule_AddObject(m, "KernelAdder", (PyObject *)&KernelAdderType) < 0) {
        Py_DECREF(&KernelAdderType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&LayoutType);
    if (PyModule_AddObject(m, "Layout", (PyObject *)&LayoutType) < 0) {
        Py_DECREF(&LayoutType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
