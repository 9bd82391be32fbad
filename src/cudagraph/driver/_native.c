/*
 * cudagraph.driver._native: the compiled hot loops of explicit construction and rebinding.
 *
 * Adding a kernel node (cuGraphAddNode_v2) and setting one in an executable
 * (cuGraphExecKernelNodeSetParams_v2) cost the driver 0.3-0.5 us; calling them
 * from Python through cuda.bindings or ctypes costs 1-1.5 us more. This module
 * makes those calls from C. It links against nothing: the driver's entry
 * points arrive as addresses (resolved by the Python side from libcuda.so.1),
 * and the structures it writes are the driver's ABI, declared below. It reads
 * the definition's nodes through their __slots__ descriptors, resolved once by
 * name. KernelLoop adds (or sets) runs of kernel nodes, packing their
 * arguments by the kinds the Python side learned for each sequence of argument
 * types, and stops at the first node it cannot handle (another node kind,
 * launch attributes, another kernel, arguments of types not seen yet), handing
 * it back to the Python loop, which names any error. Layout compares rebuilt
 * definitions with recorded ones. BindMethod (_native_bind.c) is Executable.bind
 * with the per-step rebinding of one pointer in C.
 *
 * Nothing here raises for a driver failure: the CUresult is returned (or kept
 * in KernelLoop.rc) and the caller raises the typed error naming the node.
 */
#include "_native.h"

/* Where a KernelNode keeps its fields and a Node its predecessors and index (instance offsets). */
typedef struct {
    Py_ssize_t kernel, grid, block, smem, args, attrs, preds, index;
} node_slots;

/* Resolve the slots of `ktype` (KernelNode) and `ntype` (Node, a base of it); -1 with an exception set. */
static int
resolve_slots(PyObject *ktype, PyObject *ntype, node_slots *out)
{
    if (!PyType_IsSubtype((PyTypeObject *)ktype, (PyTypeObject *)ntype)) {
        PyErr_SetString(PyExc_TypeError, "kernel_type must derive from node_type");
        return -1;
    }
    PyTypeObject *kt = (PyTypeObject *)ktype, *nt = (PyTypeObject *)ntype;
    if (slot_offset(kt, "kernel", &out->kernel) < 0 || slot_offset(kt, "grid", &out->grid) < 0 ||
        slot_offset(kt, "block", &out->block) < 0 || slot_offset(kt, "shared_mem", &out->smem) < 0 ||
        slot_offset(kt, "args", &out->args) < 0 || slot_offset(kt, "attrs", &out->attrs) < 0 ||
        slot_offset(nt, "_preds", &out->preds) < 0 || slot_offset(nt, "index", &out->index) < 0)
        return -1;
    return 0;
}


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

/* ------------------------------------------------------------------ KernelLoop */

/* How one argument is packed (the kinds KernelInfo learns per sequence of argument types). */
enum {
    KIND_POINTER = 'P', /* a Python int: a 64-bit address */
    KIND_SCALAR = 'S',  /* a numpy scalar: its bytes (buffer protocol), exactly the parameter's size */
    KIND_BYTES = 'B',   /* bytes: exactly the parameter's size */
    KIND_HANDLE = 'H',  /* an object whose `handle` is the address (a cuda.core Buffer) */
};

#define MAX_PARAMS 256

typedef struct {
    PyObject_HEAD
    int set_mode;       /* 0: cuGraphAddNode_v2 into a graph; 1: cuGraphExecKernelNodeSetParams_v2 */
    void *fn;
    void *target;       /* the CUgraph (add) or the CUgraphExec (set) */
    void *params;       /* the CUgraphNodeParams (add) or CUDA_KERNEL_NODE_PARAMS (set) passed to fn */
    cg_kernel_params_v3 *kp; /* the kernel fields inside `params` */
    PyTypeObject *kernel_type; /* KernelNode (exact type only) */
    PyTypeObject *node_type;   /* Node: every predecessor is one */
    node_slots at;
    PyObject *kernel;  /* the kernel object whose function the params hold */
    PyObject *kinds;   /* dict: tuple of argument types -> bytes of kinds, for `kernel` */
    PyObject *last_key, *last_kinds; /* the last entry of `kinds` used (a run of nodes repeats it) */
    PyObject *args;    /* the argument tuple packed in the scratch buffer */
    PyObject *grid, *block, *smem; /* the objects the dimensions in params came from */
    PyObject *handle_name;
    char *scratch;     /* the kernel's argument buffer (kernelParams points into it) */
    Py_ssize_t nparams;
    Py_ssize_t offsets[MAX_PARAMS], sizes[MAX_PARAMS];
    Py_ssize_t scratch_size;
    void **deps;
    Py_ssize_t deps_cap;
    void *out;
    int rc;
    Py_ssize_t done;
} KernelLoop;

static void
loop_clear_refs(KernelLoop *self)
{
    Py_CLEAR(self->kernel_type);
    Py_CLEAR(self->node_type);
    Py_CLEAR(self->kernel);
    Py_CLEAR(self->kinds);
    Py_CLEAR(self->last_key);
    Py_CLEAR(self->last_kinds);
    Py_CLEAR(self->args);
    Py_CLEAR(self->grid);
    Py_CLEAR(self->block);
    Py_CLEAR(self->smem);
}

static void
loop_dealloc(KernelLoop *self)
{
    PyObject_GC_UnTrack(self);
    loop_clear_refs(self);
    Py_CLEAR(self->handle_name);
    PyMem_Free(self->deps);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
loop_traverse(KernelLoop *self, visitproc visit, void *arg)
{
    Py_VISIT(self->kernel_type);
    Py_VISIT(self->node_type);
    Py_VISIT(self->kernel);
    Py_VISIT(self->kinds);
    Py_VISIT(self->last_key);
    Py_VISIT(self->last_kinds);
    Py_VISIT(self->args);
    Py_VISIT(self->grid);
    Py_VISIT(self->block);
    Py_VISIT(self->smem);
    return 0;
}

static int
loop_tp_clear(KernelLoop *self)
{
    loop_clear_refs(self);
    return 0;
}

static int
loop_init(KernelLoop *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fn", "target", "params", "kernel_type", "node_type", "set_mode", NULL};
    PyObject *fn, *target, *params, *ktype, *ntype;
    int set_mode = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!O!|p", kwlist, &fn, &target, &params, &PyType_Type, &ktype,
                                     &PyType_Type, &ntype, &set_mode))
        return -1;
    void *f, *p;
    if (address_of(fn, "fn", &f) < 0 || address_of(target, "target", &self->target) < 0 ||
        address_of(params, "params", &p) < 0)
        return -1;
    if (f == NULL || p == NULL) {
        PyErr_SetString(PyExc_ValueError, "fn and params must not be NULL");
        return -1;
    }
    if (resolve_slots(ktype, ntype, &self->at) < 0)
        return -1;
    PyTypeObject *kt = (PyTypeObject *)ktype, *nt = (PyTypeObject *)ntype;
    if (self->handle_name == NULL && (self->handle_name = PyUnicode_InternFromString("handle")) == NULL)
        return -1;
    loop_clear_refs(self);
    self->set_mode = set_mode;
    self->fn = f;
    self->params = p;
    self->kp = set_mode ? (cg_kernel_params_v3 *)p : &((cg_graph_node_params *)p)->u.kernel;
    Py_INCREF(ktype);
    self->kernel_type = kt;
    Py_INCREF(ntype);
    self->node_type = nt;
    self->scratch = NULL;
    self->nparams = 0;
    if (self->deps == NULL) {
        self->deps = PyMem_Malloc(8 * sizeof(void *));
        if (self->deps == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->deps_cap = 8;
    }
    self->rc = 0;
    self->done = 0;
    return 0;
}

PyDoc_STRVAR(loop_use_doc,
             "use(kernel, kinds, offsets, sizes, scratch, scratch_size) -> None\n\n"
             "The caller has pointed the parameters at `kernel`'s function, with kernelParams into its\n"
             "argument buffer at address `scratch` (`scratch_size` bytes; parameter i at offsets[i],\n"
             "sizes[i] bytes). `kinds` maps a tuple of argument types to the bytes of per-argument\n"
             "kinds ('P' int pointer, 'S' numpy scalar, 'B' bytes, 'H' object with an int `handle`)\n"
             "for the argument sequences the loop may pack itself. Forgets the packed arguments.");

static PyObject *
loop_use(KernelLoop *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 6 || !PyDict_CheckExact(argv[1]) || !PyTuple_CheckExact(argv[2]) || !PyTuple_CheckExact(argv[3]) ||
        PyTuple_GET_SIZE(argv[2]) != PyTuple_GET_SIZE(argv[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "use(kernel, kinds: dict, offsets: tuple, sizes: tuple, scratch: int, scratch_size: int)");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(argv[2]);
    if (n > MAX_PARAMS) {
        PyErr_Format(PyExc_ValueError, "use: at most %d parameters", MAX_PARAMS);
        return NULL;
    }
    void *scratch;
    if (address_of(argv[4], "scratch", &scratch) < 0)
        return NULL;
    Py_ssize_t size = PyLong_AsSsize_t(argv[5]);
    if (size < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "use: scratch_size must be non-negative");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t off = PyLong_AsSsize_t(PyTuple_GET_ITEM(argv[2], i));
        Py_ssize_t sz = PyLong_AsSsize_t(PyTuple_GET_ITEM(argv[3], i));
        if ((off == -1 || sz == -1) && PyErr_Occurred())
            return NULL;
        if (off < 0 || sz < 0 || off > size - sz || (n && scratch == NULL)) {
            PyErr_Format(PyExc_ValueError, "use: parameter %zd (%zd bytes at %zd) is outside the %zd-byte buffer", i,
                         sz, off, size);
            return NULL;
        }
        self->offsets[i] = off;
        self->sizes[i] = sz;
    }
    self->nparams = n;
    self->scratch = scratch;
    self->scratch_size = size;
    Py_INCREF(argv[0]);
    Py_XSETREF(self->kernel, argv[0]);
    Py_INCREF(argv[1]);
    Py_XSETREF(self->kinds, argv[1]);
    Py_CLEAR(self->last_key);
    Py_CLEAR(self->last_kinds);
    Py_CLEAR(self->args);
    Py_RETURN_NONE;
}

/* Write an unsigned 64-bit value from a Python int (no exception set on failure). */
static int
pack_u64(PyObject *v, char *to)
{
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    memcpy(to, &x, sizeof x); /* x86-64 and aarch64 Linux are little-endian */
    return 1;
}

/* Pack `args` into the scratch buffer by the kinds learned for their types.
 * 1: packed; 0: not (no exception set): the caller packs in Python, which also names bad arguments. */
static int
loop_pack(KernelLoop *self, PyObject *args)
{
    if (self->kinds == NULL || !PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != self->nparams)
        return 0;
    Py_ssize_t n = self->nparams;
    PyObject *kinds = self->last_kinds; /* the entry of the previous node when its types were these */
    for (Py_ssize_t i = 0; kinds != NULL && i < n; i++) {
        if ((PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i)) != PyTuple_GET_ITEM(self->last_key, i))
            kinds = NULL;
    }
    if (kinds == NULL) {
        PyObject *key = PyTuple_New(n);
        if (key == NULL) {
            PyErr_Clear();
            return 0;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *t = (PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i));
            Py_INCREF(t);
            PyTuple_SET_ITEM(key, i, t);
        }
        kinds = PyDict_GetItemWithError(self->kinds, key); /* borrowed */
        if (kinds == NULL || !PyBytes_CheckExact(kinds) || PyBytes_GET_SIZE(kinds) != n) {
            Py_DECREF(key);
            PyErr_Clear();
            return 0;
        }
        Py_INCREF(kinds);
        Py_XSETREF(self->last_kinds, kinds);
        Py_XSETREF(self->last_key, key); /* n items: nparams is fixed until the next use() */
    }
    const char *k = PyBytes_AS_STRING(kinds);
    /* From here on the buffer is being overwritten: whatever happens, it no longer holds self->args. */
    Py_CLEAR(self->args);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        char *to = self->scratch + self->offsets[i];
        Py_ssize_t size = self->sizes[i];
        switch (k[i]) {
        case KIND_POINTER:
            if (size != 8 || !pack_u64(a, to))
                return 0;
            break;
        case KIND_SCALAR: {
            Py_buffer view;
            if (PyObject_GetBuffer(a, &view, PyBUF_SIMPLE) < 0) {
                PyErr_Clear();
                return 0;
            }
            int ok = view.len == size;
            if (ok)
                memcpy(to, view.buf, (size_t)size);
            PyBuffer_Release(&view);
            if (!ok)
                return 0;
            break;
        }
        case KIND_BYTES:
            if (PyBytes_GET_SIZE(a) != size)
                return 0;
            memcpy(to, PyBytes_AS_STRING(a), (size_t)size);
            break;
        case KIND_HANDLE: {
            PyObject *h = PyObject_GetAttr(a, self->handle_name);
            if (h == NULL) {
                PyErr_Clear();
                return 0;
            }
            PyObject *v = PyLong_CheckExact(h) ? (Py_INCREF(h), h) : PyNumber_Long(h); /* int(handle), as in Python */
            Py_DECREF(h);
            if (v == NULL) {
                PyErr_Clear();
                return 0;
            }
            int ok = size == 8 && pack_u64(v, to);
            Py_DECREF(v);
            if (!ok)
                return 0;
            break;
        }
        default:
            return 0;
        }
    }
    Py_INCREF(args);
    self->args = args;
    return 1;
}

/* Write the node's dimensions into params where they differ from the last node's.
 * 1: written; 0: the node's dimensions are not plain ints (no exception set). */
static int
loop_dims(KernelLoop *self, PyObject *node)
{
    cg_kernel_params_v3 *k = self->kp;
    PyObject *grid = SLOT(node, self->at.grid), *block = SLOT(node, self->at.block);
    PyObject *smem = SLOT(node, self->at.smem);
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

/* The node's index, checked against `raw`; -1 when unusable (no exception set). */
static Py_ssize_t
loop_index(KernelLoop *self, PyObject *node, PyObject *raw)
{
    PyObject *index = SLOT(node, self->at.index);
    if (index == NULL || !PyLong_CheckExact(index))
        return -1;
    Py_ssize_t at = PyLong_AsSsize_t(index);
    if (at < 0 || at >= PyList_GET_SIZE(raw)) {
        PyErr_Clear();
        return -1;
    }
    return at;
}

/* Gather the driver handles of `node`'s predecessors (from `raw`) into self->deps.
 * The count, or -1 when the node must go through Python (no exception set). */
static Py_ssize_t
loop_deps(KernelLoop *self, PyObject *node, PyObject *raw)
{
    PyObject *preds = SLOT(node, self->at.preds);
    if (preds == NULL || !PyList_CheckExact(preds))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(preds), size = PyList_GET_SIZE(raw);
    if (n > self->deps_cap) {
        void **deps = PyMem_Realloc(self->deps, (size_t)(2 * n) * sizeof(void *));
        if (deps == NULL) {
            PyErr_Clear();
            return -1;
        }
        self->deps = deps;
        self->deps_cap = 2 * n;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pred = PyList_GET_ITEM(preds, i);
        if (!PyObject_TypeCheck(pred, self->node_type))
            return -1;
        PyObject *pi = SLOT(pred, self->at.index);
        if (pi == NULL || !PyLong_CheckExact(pi))
            return -1;
        Py_ssize_t j = PyLong_AsSsize_t(pi);
        if (j < 0 || j >= size) {
            PyErr_Clear();
            return -1;
        }
        void *h = PyLong_AsVoidPtr(PyList_GET_ITEM(raw, j));
        if (h == NULL) { /* not built yet, or not an address: Python names the problem */
            PyErr_Clear();
            return -1;
        }
        self->deps[i] = h;
    }
    return n;
}

/* Make the driver call for `node` at raw[at] with `params`: add it (after self->deps[:n]) and record
 * its handle, or set its parameters. Always 1 (a refusal leaves its CUresult in self->rc). */
static int
loop_call(KernelLoop *self, PyObject *raw, Py_ssize_t at, Py_ssize_t n, void *params)
{
    int rc;
    if (self->set_mode) {
        void *h = PyLong_AsVoidPtr(PyList_GET_ITEM(raw, at));
        if (h == NULL) {
            PyErr_Clear();
            self->rc = -1;
            return 1;
        }
        rc = ((cg_set_kernel_fn)self->fn)(self->target, h, params);
        if (rc) {
            self->rc = rc;
            return 1;
        }
    } else {
        self->out = NULL;
        rc = ((cg_add_node_fn)self->fn)(&self->out, self->target, n ? self->deps : NULL, NULL, (size_t)n,
                                        (cg_graph_node_params *)params);
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
    }
    self->done++;
    return 1;
}

/* Add or set the KernelNode `node` with the prepared params (its arguments already packed).
 * 1: done (or refused: self->rc); 0: it must go through Python (no exception set). */
static int
loop_put(KernelLoop *self, PyObject *node, PyObject *raw)
{
    Py_ssize_t at = loop_index(self, node, raw), n = 0;
    if (at < 0)
        return 0;
    if (!self->set_mode && (n = loop_deps(self, node, raw)) < 0)
        return 0;
    if (!loop_dims(self, node))
        return 0;
    return loop_call(self, raw, at, n, self->params);
}

PyDoc_STRVAR(loop_run_doc,
             "run(order, start, raw) -> int\n\n"
             "Add (or set) order[start:], one node after another, while each is a KernelNode without\n"
             "launch attributes whose kernel is `kernel` and whose arguments are the tuple packed last\n"
             "or can be packed by the learned kinds; return the index of the first node not done\n"
             "(len(order) when all were). raw[i] is the driver handle (int) of the node of index i:\n"
             "read for predecessors and written for each node added, or the node to set. A driver\n"
             "failure stops the loop at that node with its CUresult in `rc`.");

static PyObject *
loop_run(KernelLoop *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 3 || !PyList_CheckExact(argv[0]) || !PyLong_CheckExact(argv[1]) || !PyList_CheckExact(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "run(order: list, start: int, raw: list)");
        return NULL;
    }
    if (self->kernel_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "KernelLoop is not initialized");
        return NULL;
    }
    PyObject *order = argv[0], *raw = argv[2];
    Py_ssize_t i = PyLong_AsSsize_t(argv[1]);
    if (i < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "run: start must be non-negative");
        return NULL;
    }
    self->rc = 0;
    if (self->kernel != NULL) {
        for (; i < PyList_GET_SIZE(order); i++) {
            PyObject *node = PyList_GET_ITEM(order, i);
            if (Py_TYPE(node) != self->kernel_type || SLOT(node, self->at.attrs) != Py_None ||
                SLOT(node, self->at.kernel) != self->kernel)
                break;
            PyObject *args = SLOT(node, self->at.args);
            if (args != self->args && (args == NULL || !loop_pack(self, args)))
                break;
            if (!loop_put(self, node, raw) || self->rc)
                break;
        }
    }
    return PyLong_FromSsize_t(i);
}

PyDoc_STRVAR(loop_put_doc,
             "put(node, raw) -> bool\n\n"
             "Add (or set) one KernelNode with the prepared function and the arguments packed by the\n"
             "caller (set `args` first); its dimensions are written here. False when it must go\n"
             "through the general path. `rc` holds the CUresult of a refusal.");

static PyObject *
loop_put_one(KernelLoop *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyList_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "put(node, raw: list)");
        return NULL;
    }
    if (self->kernel_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "KernelLoop is not initialized");
        return NULL;
    }
    self->rc = 0;
    if (Py_TYPE(argv[0]) != self->kernel_type)
        Py_RETURN_FALSE;
    return PyBool_FromLong(loop_put(self, argv[0], argv[1]));
}

PyDoc_STRVAR(loop_add_with_doc,
             "add_with(node, raw, params) -> bool\n\n"
             "Add any node (a Node) with the CUgraphNodeParams at address `params`, after its\n"
             "predecessors; False when it must go through the general path. `rc` holds the CUresult.");

static PyObject *
loop_add_with(KernelLoop *self, PyObject *const *argv, Py_ssize_t argc)
{
    void *params;
    if (argc != 3 || !PyList_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "add_with(node, raw: list, params: int)");
        return NULL;
    }
    if (self->kernel_type == NULL || self->set_mode) {
        PyErr_SetString(PyExc_RuntimeError, "add_with needs a KernelLoop that adds nodes");
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
    Py_ssize_t at = loop_index(self, argv[0], argv[1]), n;
    if (at < 0 || (n = loop_deps(self, argv[0], argv[1])) < 0)
        Py_RETURN_FALSE;
    loop_call(self, argv[1], at, n, params);
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(loop_write_dims_doc,
             "write_dims(node) -> bool\n\n"
             "Write a KernelNode's grid, block and shared memory into the prepared parameters\n"
             "(for a node added through another call); False when they are not plain ints.");

static PyObject *
loop_write_dims(KernelLoop *self, PyObject *node)
{
    if (self->kernel_type == NULL || Py_TYPE(node) != self->kernel_type)
        Py_RETURN_FALSE;
    return PyBool_FromLong(loop_dims(self, node));
}

static PyObject *
loop_get_obj(KernelLoop *self, void *closure)
{
    PyObject *v = *(PyObject **)((char *)self + (Py_ssize_t)closure);
    if (v == NULL)
        Py_RETURN_NONE;
    Py_INCREF(v);
    return v;
}

static int
loop_set_args(KernelLoop *self, PyObject *value, void *closure)
{
    if (value == NULL || value == Py_None) {
        Py_CLEAR(self->args);
        return 0;
    }
    Py_INCREF(value);
    Py_XSETREF(self->args, value);
    return 0;
}

static PyObject *
loop_get_rc(KernelLoop *self, void *closure)
{
    return PyLong_FromLong(self->rc);
}

static PyObject *
loop_get_done(KernelLoop *self, void *closure)
{
    return PyLong_FromSsize_t(self->done);
}

static PyMethodDef loop_methods[] = {
    {"use", (PyCFunction)(void (*)(void))loop_use, METH_FASTCALL, loop_use_doc},
    {"run", (PyCFunction)(void (*)(void))loop_run, METH_FASTCALL, loop_run_doc},
    {"put", (PyCFunction)(void (*)(void))loop_put_one, METH_FASTCALL, loop_put_doc},
    {"add_with", (PyCFunction)(void (*)(void))loop_add_with, METH_FASTCALL, loop_add_with_doc},
    {"write_dims", (PyCFunction)loop_write_dims, METH_O, loop_write_dims_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loop_getset[] = {
    {"kernel", (getter)loop_get_obj, NULL, "The kernel object of the last use() (None: none).",
     (void *)offsetof(KernelLoop, kernel)},
    {"args", (getter)loop_get_obj, (setter)loop_set_args,
     "The argument tuple packed in the kernel's buffer (None: none; set it after packing in Python).",
     (void *)offsetof(KernelLoop, args)},
    {"rc", (getter)loop_get_rc, NULL, "The CUresult of the last refused call (0: none).", NULL},
    {"done", (getter)loop_get_done, NULL, "Nodes added or set so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(loop_doc,
             "KernelLoop(fn, target, params, kernel_type, node_type, set_mode=False)\n\n"
             "Adds nodes to the driver graph `target` through cuGraphAddNode_v2 (address `fn`) with\n"
             "the prepared CUgraphNodeParams at address `params` or, with set_mode, sets kernel nodes\n"
             "of the executable `target` through cuGraphExecKernelNodeSetParams_v2 with the\n"
             "CUDA_KERNEL_NODE_PARAMS at `params`. The caller sets the function fields (see use());\n"
             "dimensions, arguments and dependencies are written here per node.");

static PyTypeObject KernelLoopType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph.driver._native.KernelLoop",
    .tp_basicsize = sizeof(KernelLoop),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = loop_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)loop_init,
    .tp_dealloc = (destructor)loop_dealloc,
    .tp_traverse = (traverseproc)loop_traverse,
    .tp_clear = (inquiry)loop_tp_clear,
    .tp_methods = loop_methods,
    .tp_getset = loop_getset,
};

/* ------------------------------------------------------------------ Layout: signature and diff */

typedef struct {
    PyObject_HEAD
    PyTypeObject *kernel_type;
    PyTypeObject *node_type;
    node_slots at;
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
    if (resolve_slots(ktype, ntype, &self->at) < 0)
        return -1;
    PyTypeObject *kt = (PyTypeObject *)ktype, *nt = (PyTypeObject *)ntype;
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
             "cudagraph.definition.diff.topology_signature makes it). None when a node's type is neither the\n"
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
    Py_ssize_t count = PyList_GET_SIZE(nodes), total = count;
    /* First pass: check every node and count its predecessors (the tuple is made at its size). */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        PyObject *t = (PyObject *)Py_TYPE(node);
        if (t != (PyObject *)self->kernel_type) {
            int known = PySet_Contains(flat, t);
            if (known < 0)
                return NULL;
            if (!known || !PyObject_TypeCheck(node, self->node_type))
                Py_RETURN_NONE;
        }
        PyObject *preds = SLOT(node, self->at.preds);
        if (preds == NULL || !PyList_CheckExact(preds))
            Py_RETURN_NONE;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(preds); j++) {
            PyObject *pred = PyList_GET_ITEM(preds, j);
            if (!PyObject_TypeCheck(pred, self->node_type) || SLOT(pred, self->at.index) == NULL)
                Py_RETURN_NONE;
        }
        total += PyList_GET_SIZE(preds);
    }
    PyObject *out = PyTuple_New(total);
    if (out == NULL)
        return NULL;
    /* Second pass: nothing runs Python code in between, so the nodes are those just checked. */
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        PyObject *t = (PyObject *)Py_TYPE(node);
        Py_INCREF(t);
        PyTuple_SET_ITEM(out, at++, t);
        PyObject *preds = SLOT(node, self->at.preds);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(preds); j++) {
            PyObject *index = SLOT(PyList_GET_ITEM(preds, j), self->at.index);
            Py_INCREF(index);
            PyTuple_SET_ITEM(out, at++, index);
        }
    }
    return out;
}

PyDoc_STRVAR(layout_diff_doc,
             "diff(nodes, states, identity_types) -> (changed, suspects)\n\n"
             "Compare the list `nodes` with `states`, the recorded node states of the same positions\n"
             "(a list the caller owns: changed in place). A KernelNode whose kernel, grid, block,\n"
             "shared_mem and attrs are the very objects of its 6-tuple state (kernel, grid, block,\n"
             "shared_mem, args, attrs) is unchanged when its arguments are the recorded tuple or a\n"
             "tuple of the very same objects, and changed when another argument differs in type,\n"
             "is of a type in the set `identity_types` (equal only to itself), or is an int or float\n"
             "of another value; its state then takes the new argument tuple (as\n"
             "cudagraph.definition.diff.diff_states records it). Returns the nodes found changed (in order),\n"
             "and the positions of every other node (to be compared by value by the caller).");

/* 1: same; 0: changed; -1: undecided (the caller compares by value); -2: error. */
static int
args_compare(PyObject *a, PyObject *sa, PyObject *identity_types)
{
    int undecided = 0;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(a); j++) {
        PyObject *x = PyTuple_GET_ITEM(a, j), *y = PyTuple_GET_ITEM(sa, j);
        if (x == y)
            continue;
        if (Py_TYPE(x) != Py_TYPE(y))
            return 0;
        if (PyLong_CheckExact(x) || PyFloat_CheckExact(x)) {
            int eq = PyObject_RichCompareBool(x, y, Py_EQ);
            if (eq < 0)
                return -2;
            if (!eq)
                return 0;
            continue;
        }
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

static PyObject *
layout_diff(Layout *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 3 || !PyList_CheckExact(argv[0]) || !PyList_CheckExact(argv[1]) || !PyAnySet_Check(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "diff(nodes: list, states: list, identity_types: set)");
        return NULL;
    }
    if (self->kernel_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Layout is not initialized");
        return NULL;
    }
    PyObject *nodes = argv[0], *states = argv[1], *identity = argv[2];
    PyObject *changed = PyList_New(0), *suspects = PyList_New(0);
    if (changed == NULL || suspects == NULL)
        goto fail;
    Py_ssize_t count = PyList_GET_SIZE(nodes);
    if (PyList_GET_SIZE(states) < count)
        count = PyList_GET_SIZE(states);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i), *s = PyList_GET_ITEM(states, i);
        int verdict = -1; /* 1 same, 0 changed, -1 the caller decides */
        if (Py_TYPE(node) == self->kernel_type && PyTuple_CheckExact(s) && PyTuple_GET_SIZE(s) == 6 &&
            SLOT(node, self->at.kernel) == PyTuple_GET_ITEM(s, 0) &&
            SLOT(node, self->at.grid) == PyTuple_GET_ITEM(s, 1) &&
            SLOT(node, self->at.block) == PyTuple_GET_ITEM(s, 2) &&
            SLOT(node, self->at.smem) == PyTuple_GET_ITEM(s, 3) &&
            SLOT(node, self->at.attrs) == PyTuple_GET_ITEM(s, 5)) {
            PyObject *a = SLOT(node, self->at.args), *sa = PyTuple_GET_ITEM(s, 4);
            if (a == sa) {
                verdict = 1;
            } else if (a != NULL && PyTuple_CheckExact(a) && PyTuple_CheckExact(sa) &&
                       PyTuple_GET_SIZE(a) == PyTuple_GET_SIZE(sa)) {
                int all_same = 1;
                for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(a); j++) {
                    if (PyTuple_GET_ITEM(a, j) != PyTuple_GET_ITEM(sa, j)) {
                        all_same = 0;
                        break;
                    }
                }
                if (all_same) {
                    verdict = 1; /* the same objects in a new tuple: the recorded state stays */
                } else {
                    verdict = args_compare(a, sa, identity);
                    if (verdict == -2)
                        goto fail;
                    if (verdict >= 0) { /* decided here: record the new arguments */
                        PyObject *ns = PyTuple_New(6);
                        if (ns == NULL)
                            goto fail;
                        for (Py_ssize_t j = 0; j < 6; j++) {
                            PyObject *v = j == 4 ? a : PyTuple_GET_ITEM(s, j);
                            Py_INCREF(v);
                            PyTuple_SET_ITEM(ns, j, v);
                        }
                        if (PyList_SetItem(states, i, ns) < 0)
                            goto fail;
                    }
                }
            }
        }
        if (verdict == 0 && PyList_Append(changed, node) < 0)
            goto fail;
        if (verdict < 0 && append_index(suspects, i) < 0)
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
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(layout_doc,
             "Layout(kernel_type, node_type)\n\n"
             "Reads the definition's nodes through their __slots__ to compare graphs quickly:\n"
             "topology signatures and kernel-node differences, for rebuilt definitions of a known shape.");

static PyTypeObject LayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph.driver._native.Layout",
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

int
cg_rebind_groups(void *fn, void *exec, PyObject *groups, const char *data, Py_ssize_t len, Py_ssize_t *g_out,
                 Py_ssize_t *i_out)
{
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(groups); g++) {
        PyObject *t = PyList_GET_ITEM(groups, g);
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 5 || !PyTuple_CheckExact(PyTuple_GET_ITEM(t, 2)) ||
            !PyList_CheckExact(PyTuple_GET_ITEM(t, 4))) {
            PyErr_SetString(PyExc_TypeError, "rebind: a group is (buffer, size, offsets: tuple, params, nodes: list)");
            return -1;
        }
        void *buf, *params;
        if (address_of(PyTuple_GET_ITEM(t, 0), "buffer", &buf) < 0 ||
            address_of(PyTuple_GET_ITEM(t, 3), "params", &params) < 0)
            return -1;
        Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 1));
        if (size < 0 && PyErr_Occurred())
            return -1;
        PyObject *offsets = PyTuple_GET_ITEM(t, 2), *nodes = PyTuple_GET_ITEM(t, 4);
        if ((buf == NULL && PyTuple_GET_SIZE(offsets)) || params == NULL) {
            PyErr_SetString(PyExc_ValueError, "rebind: buffer and params must not be NULL");
            return -1;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(offsets); i++) {
            Py_ssize_t off = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
            if (off < 0 && PyErr_Occurred())
                return -1;
            if (off < 0 || off > size - len) {
                PyErr_Format(PyExc_ValueError, "rebind: %zd bytes at offset %zd do not fit a buffer of %zd bytes",
                             len, off, size);
                return -1;
            }
            memcpy((char *)buf + off, data, (size_t)len);
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
            void *h = PyLong_AsVoidPtr(PyList_GET_ITEM(nodes, i));
            if (h == NULL && PyErr_Occurred())
                return -1;
            int rc = ((cg_set_kernel_fn)fn)(exec, h, params);
            if (rc) {
                *g_out = g;
                *i_out = i;
                return rc;
            }
        }
    }
    return 0;
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
    Py_ssize_t g, i;
    int rc = cg_rebind_groups(fn, exec, argv[2], data, len, &g, &i);
    if (rc < 0)
        return NULL;
    if (rc > 0)
        return Py_BuildValue("(nni)", g, i, rc);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ reading graphs (lifting) */

/* CUresult cuGraphNodeGetType(CUgraphNode, CUgraphNodeType*) */
typedef int (*cg_get_type_fn)(void *, int *);
/* CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*) */
typedef int (*cg_get_kernel_fn)(void *, cg_kernel_params_v3 *);

PyDoc_STRVAR(read_nodes_doc,
             "read_nodes(get_type, get_kernel, nodes) -> list or (index, CUresult, call)\n\n"
             "The type of every driver node in the list `nodes` (ints) and, for kernel nodes, their\n"
             "parameters, through cuGraphNodeGetType and cuGraphKernelNodeGetParams_v2 (addresses\n"
             "get_type, get_kernel): per node (type, None) or (type, (func, gridDimX, gridDimY,\n"
             "gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, kernelParams, extra, kern)).\n"
             "On a refusal: the position, the CUresult and the name of the call refused.");

static PyObject *
read_nodes(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 3 || !PyList_CheckExact(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "read_nodes(get_type: int, get_kernel: int, nodes: list)");
        return NULL;
    }
    void *gt, *gk;
    if (address_of(argv[0], "get_type", &gt) < 0 || address_of(argv[1], "get_kernel", &gk) < 0)
        return NULL;
    if (gt == NULL || gk == NULL) {
        PyErr_SetString(PyExc_ValueError, "get_type and get_kernel must not be NULL");
        return NULL;
    }
    PyObject *nodes = argv[2];
    Py_ssize_t n = PyList_GET_SIZE(nodes);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        void *h = PyLong_AsVoidPtr(PyList_GET_ITEM(nodes, i));
        if (h == NULL && PyErr_Occurred())
            goto fail;
        int type = -1;
        int rc = ((cg_get_type_fn)gt)(h, &type);
        if (rc) {
            Py_DECREF(out);
            return Py_BuildValue("(nis)", i, rc, "cuGraphNodeGetType");
        }
        PyObject *item;
        if (type != 0) { /* CU_GRAPH_NODE_TYPE_KERNEL */
            item = Py_BuildValue("(iO)", type, Py_None);
        } else {
            cg_kernel_params_v3 k;
            memset(&k, 0, sizeof k);
            rc = ((cg_get_kernel_fn)gk)(h, &k);
            if (rc) {
                Py_DECREF(out);
                return Py_BuildValue("(nis)", i, rc, "cuGraphKernelNodeGetParams");
            }
            item = Py_BuildValue("(i(KIIIIIIIKKK))", type, (unsigned long long)(uintptr_t)k.func, k.gridDimX,
                                 k.gridDimY, k.gridDimZ, k.blockDimX, k.blockDimY, k.blockDimZ, k.sharedMemBytes,
                                 (unsigned long long)(uintptr_t)k.kernelParams,
                                 (unsigned long long)(uintptr_t)k.extra, (unsigned long long)(uintptr_t)k.kern);
        }
        if (item == NULL)
            goto fail;
        PyList_SET_ITEM(out, i, item);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

PyDoc_STRVAR(kernel_args_doc,
             "kernel_args(address, sizes) -> tuple of bytes, or int\n\n"
             "The argument values behind a kernel node's kernelParams `address` (a void*[n] array),\n"
             "argument i being sizes[i] bytes, copied. An int instead: the index of the first NULL\n"
             "argument pointer, or -1 when `address` itself is NULL.");

static PyObject *
kernel_args(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyTuple_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "kernel_args(address: int, sizes: tuple)");
        return NULL;
    }
    void *address;
    if (address_of(argv[0], "address", &address) < 0)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(argv[1]);
    if (n == 0)
        return PyTuple_New(0);
    if (address == NULL)
        return PyLong_FromLong(-1);
    void *const *ptrs = (void *const *)address;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (ptrs[i] == NULL)
            return PyLong_FromSsize_t(i);
    }
    PyObject *out = PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(argv[1], i));
        if (size < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "kernel_args: sizes must be non-negative");
            Py_DECREF(out);
            return NULL;
        }
        PyObject *b = PyBytes_FromStringAndSize((const char *)ptrs[i], size);
        if (b == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, b);
    }
    return out;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef native_methods[] = {
    {"set_kernel_node", (PyCFunction)(void (*)(void))set_kernel_node, METH_FASTCALL, set_kernel_node_doc},
    {"rebind", (PyCFunction)(void (*)(void))rebind, METH_FASTCALL, rebind_doc},
    {"read_nodes", (PyCFunction)(void (*)(void))read_nodes, METH_FASTCALL, read_nodes_doc},
    {"kernel_args", (PyCFunction)(void (*)(void))kernel_args, METH_FASTCALL, kernel_args_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    "cudagraph.driver._native",
    "The compiled hot loops of explicit construction and rebinding (optional; see _native.c).",
    -1,
    native_methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    if (PyType_Ready(&KernelLoopType) < 0 || PyType_Ready(&LayoutType) < 0 || cg_bind_method_ready() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&KernelLoopType);
    if (PyModule_AddObject(m, "KernelLoop", (PyObject *)&KernelLoopType) < 0) {
        Py_DECREF(&KernelLoopType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&LayoutType);
    if (PyModule_AddObject(m, "Layout", (PyObject *)&LayoutType) < 0) {
        Py_DECREF(&LayoutType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&cg_BindMethodType);
    if (PyModule_AddObject(m, "BindMethod", (PyObject *)&cg_BindMethodType) < 0) {
        Py_DECREF(&cg_BindMethodType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
