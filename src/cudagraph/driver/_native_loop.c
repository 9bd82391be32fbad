/*
 * KernelLoop: adding (or setting) runs of kernel nodes in C.
 *
 * Python twins (see cudagraph.driver.c_entry): adding, the cuda.bindings branch of
 * cudagraph.materialize.explicit.Lowering.lower_graph; setting (set_mode), the cuda.bindings branch
 * of cudagraph.ops.node_update.KernelParamsWriter.set.
 *
 * It reads the definition's nodes through their __slots__ (NATIVE_SLOTS "kernel_node" and "node",
 * resolved on the classes given at construction), packs their arguments by the kinds the Python
 * side learned for each sequence of argument types, and stops at the first node it cannot handle
 * (another node kind, launch attributes, another kernel, arguments of types not seen yet), handing
 * it back to the Python loop, which names any error.
 *
 * A loop is configured once (__init__ refuses a second call) and does not re-enter: a call made by
 * Python code it runs (int() of a handle, a type's __hash__, a driver callback) raises RuntimeError,
 * so its state stays the one the running call checked.
 */
#include "_native.h"

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
    int busy;           /* a call is running (one that may run Python code): the loop refuses others */
    void *fn;
    void *target;       /* the CUgraph (add) or the CUgraphExec (set) */
    void *params;       /* the CUgraphNodeParams (add) or CUDA_KERNEL_NODE_PARAMS (set) passed to fn */
    cg_kernel_params_v3 *kp; /* the kernel fields inside `params` */
    PyTypeObject *kernel_type; /* KernelNode (exact type only); NULL until initialized */
    PyTypeObject *node_type;   /* Node: every predecessor is one */
    cg_kernel_slots kn;
    cg_node_slots nd;
    PyObject *kernel;  /* the kernel object whose function the params hold */
    PyObject *kinds;   /* dict: tuple of argument types -> bytes of kinds, for `kernel` */
    PyObject *last_key, *last_kinds; /* the last entry of `kinds` used (a run of nodes repeats it) */
    PyObject *args;    /* the argument tuple packed in the scratch buffer */
    PyObject *grid, *block, *smem; /* the objects the dimensions in params came from */
    char *scratch;     /* the kernel's argument buffer (kernelParams points into it; the caller keeps it) */
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

/* Begin a call that may run Python code: 0, or -1 with RuntimeError (not initialized, or re-entered). */
static int
loop_enter(KernelLoop *self)
{
    if (self->kernel_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "KernelLoop is not initialized");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "KernelLoop is running a call: it cannot be used from code that call runs");
        return -1;
    }
    self->busy = 1;
    return 0;
}

static int
loop_init(KernelLoop *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fn", "target", "params", "kernel_type", "node_type", "set_mode", NULL};
    PyObject *fn, *target, *params, *ktype, *ntype;
    int set_mode = 0;
    if (self->kernel_type != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "KernelLoop is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!O!|p", kwlist, &fn, &target, &params, &PyType_Type, &ktype,
                                     &PyType_Type, &ntype, &set_mode))
        return -1;
    void *f, *p, *t;
    if (address_of(fn, "fn", &f) < 0 || address_of(target, "target", &t) < 0 || address_of(params, "params", &p) < 0)
        return -1;
    if (f == NULL || p == NULL) {
        PyErr_SetString(PyExc_ValueError, "fn and params must not be NULL");
        return -1;
    }
    cg_kernel_slots kn;
    cg_node_slots nd;
    if (cg_resolve_node_types(ktype, ntype, &kn, &nd) < 0)
        return -1;
    if (self->kernel_type != NULL) { /* by the Python code resolving the slots ran */
        PyErr_SetString(PyExc_RuntimeError, "KernelLoop is already initialized");
        return -1;
    }
    if (self->deps == NULL) {
        self->deps = PyMem_Malloc(8 * sizeof(void *));
        if (self->deps == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->deps_cap = 8;
    }
    self->set_mode = set_mode;
    self->fn = f;
    self->target = t;
    self->params = p;
    /* (by offset: the caller's address is not dereferenced here, and need not be aligned yet) */
    self->kp = (cg_kernel_params_v3 *)((char *)p + (set_mode ? 0 : offsetof(cg_graph_node_params, u)));
    self->kn = kn;
    self->nd = nd;
    self->scratch = NULL;
    self->nparams = 0;
    self->rc = 0;
    self->done = 0;
    self->node_type = (PyTypeObject *)Py_NewRef(ntype);
    self->kernel_type = (PyTypeObject *)Py_NewRef(ktype); /* last: the loop is ready */
    return 0;
}

PyDoc_STRVAR(loop_use_doc,
             "use(kernel, kinds, offsets, sizes, scratch, scratch_size) -> None\n\n"
             "The caller has pointed the parameters at `kernel`'s function, with kernelParams into its\n"
             "argument buffer at address `scratch` (`scratch_size` bytes; parameter i at offsets[i],\n"
             "sizes[i] bytes; the caller keeps the buffer alive). `kinds` maps a tuple of argument types\n"
             "to the bytes of per-argument kinds ('P' int pointer, 'S' numpy scalar, 'B' bytes, 'H' object\n"
             "with an int `handle`) for the argument sequences the loop may pack itself. Forgets the\n"
             "packed arguments. Nothing changes when the arguments are refused.");

static PyObject *
loop_use(KernelLoop *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 6 || !PyDict_CheckExact(argv[1]) || !PyTuple_CheckExact(argv[2]) || !PyTuple_CheckExact(argv[3]) ||
        PyTuple_GET_SIZE(argv[2]) != PyTuple_GET_SIZE(argv[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "use(kernel, kinds: dict, offsets: tuple, sizes: tuple, scratch: int, scratch_size: int)");
        return NULL;
    }
    if (loop_enter(self) < 0)
        return NULL;
    self->busy = 0; /* nothing below runs Python code until the state is written */
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
    /* Check every parameter before writing any: a refused call leaves the loop as it was. */
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t off = PyLong_AsSsize_t(PyTuple_GET_ITEM(argv[2], i));
        Py_ssize_t sz = PyLong_AsSsize_t(PyTuple_GET_ITEM(argv[3], i));
        if ((off == -1 || sz == -1) && PyErr_Occurred())
            return NULL;
        if (off < 0 || sz < 0 || off > size - sz || scratch == NULL) {
            PyErr_Format(PyExc_ValueError, "use: parameter %zd (%zd bytes at %zd) is outside the %zd-byte buffer", i,
                         sz, off, size);
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        self->offsets[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(argv[2], i));
        self->sizes[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(argv[3], i));
    }
    self->nparams = n;
    self->scratch = scratch;
    self->scratch_size = size;
    /* The references replaced are released last: that may run Python code, and the state is whole. */
    PyObject *old[5] = {self->kernel, self->kinds, self->last_key, self->last_kinds, self->args};
    self->kernel = Py_NewRef(argv[0]);
    self->kinds = Py_NewRef(argv[1]);
    self->last_key = self->last_kinds = self->args = NULL;
    for (int i = 0; i < 5; i++)
        Py_XDECREF(old[i]);
    Py_RETURN_NONE;
}

/* The bytes of kinds learned for the types of `args` (a tuple of nparams items), held by
 * self->last_kinds; NULL when none is known (no exception set). May run Python code (the types'
 * __hash__ and __eq__ in the dict lookup): the caller holds `args`. */
static PyObject *
loop_kinds(KernelLoop *self, PyObject *args, Py_ssize_t n)
{
    PyObject *kinds = self->last_kinds; /* the entry of the previous node when its types were these */
    for (Py_ssize_t i = 0; kinds != NULL && i < n; i++) {
        if ((PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i)) != PyTuple_GET_ITEM(self->last_key, i))
            kinds = NULL;
    }
    if (kinds != NULL)
        return kinds;
    PyObject *key = PyTuple_New(n);
    if (key == NULL) {
        PyErr_Clear();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(key, i, Py_NewRef((PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i))));
    kinds = PyDict_GetItemWithError(self->kinds, key); /* borrowed; self->kinds stays (use() is refused) */
    if (kinds == NULL || !PyBytes_CheckExact(kinds) || PyBytes_GET_SIZE(kinds) != n) {
        Py_DECREF(key);
        PyErr_Clear();
        return NULL;
    }
    /* Tuples of types and bytes: releasing the old entry runs no Python code. */
    Py_XSETREF(self->last_kinds, Py_NewRef(kinds));
    Py_XSETREF(self->last_key, key); /* n items: nparams is fixed until the next use() */
    return kinds;
}

/* Pack `args` into the scratch buffer by the kinds learned for their types.
 * 1: packed; 0: not (no exception set): the caller packs in Python, which also names bad arguments. */
static int
loop_pack(KernelLoop *self, PyObject *args)
{
    if (self->kinds == NULL || !PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != self->nparams)
        return 0;
    Py_ssize_t n = self->nparams;
    Py_INCREF(args); /* the Python code run below (a __hash__, int(handle)) may drop the node's reference */
    PyObject *kinds = loop_kinds(self, args, n);
    if (kinds == NULL) {
        Py_DECREF(args);
        return 0;
    }
    const char *k = PyBytes_AS_STRING(kinds); /* held by self->last_kinds, which only this function changes */
    /* From here on the buffer is being overwritten: whatever happens, it no longer holds self->args. */
    PyObject *old = self->args;
    self->args = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        char *to = self->scratch + self->offsets[i];
        Py_ssize_t size = self->sizes[i];
        switch (k[i]) {
        case KIND_POINTER:
            if (size != 8 || !pack_u64(a, to))
                goto fail;
            break;
        case KIND_SCALAR: {
            Py_buffer view;
            if (PyObject_GetBuffer(a, &view, PyBUF_SIMPLE) < 0) {
                PyErr_Clear();
                goto fail;
            }
            int ok = view.len == size;
            if (ok)
                memcpy(to, view.buf, (size_t)size);
            PyBuffer_Release(&view);
            if (!ok)
                goto fail;
            break;
        }
        case KIND_BYTES:
            if (!PyBytes_CheckExact(a) || PyBytes_GET_SIZE(a) != size)
                goto fail;
            memcpy(to, PyBytes_AS_STRING(a), (size_t)size);
            break;
        case KIND_HANDLE: {
            PyObject *h = PyObject_GetAttr(a, cg_str_handle);
            if (h == NULL) {
                PyErr_Clear();
                goto fail;
            }
            PyObject *v = PyLong_CheckExact(h) ? (Py_INCREF(h), h) : PyNumber_Long(h); /* int(handle), as in Python */
            Py_DECREF(h);
            if (v == NULL) {
                PyErr_Clear();
                goto fail;
            }
            int ok = size == 8 && pack_u64(v, to);
            Py_DECREF(v);
            if (!ok)
                goto fail;
            break;
        }
        default:
            goto fail;
        }
    }
    self->args = args; /* our reference */
    Py_XDECREF(old);
    return 1;
fail:
    Py_DECREF(args);
    Py_XDECREF(old);
    return 0;
}

/* Write the node's dimensions into params where they differ from the last node's.
 * 1: written; 0: the node's dimensions are not plain ints (no exception set). Runs no Python code. */
static int
loop_dims(KernelLoop *self, PyObject *node)
{
    cg_kernel_params_v3 *k = self->kp;
    PyObject *grid = SLOT(node, self->kn.grid), *block = SLOT(node, self->kn.block);
    PyObject *smem = SLOT(node, self->kn.smem);
    if (grid == NULL || block == NULL || smem == NULL)
        return 0;
    if (grid != self->grid) {
        if (dims3(grid, &k->gridDimX, &k->gridDimY, &k->gridDimZ) < 0) {
            Py_CLEAR(self->grid); /* tuples of ints here: releasing them runs no Python code */
            return 0;
        }
        Py_XSETREF(self->grid, Py_NewRef(grid));
    }
    if (block != self->block) {
        if (dims3(block, &k->blockDimX, &k->blockDimY, &k->blockDimZ) < 0) {
            Py_CLEAR(self->block);
            return 0;
        }
        Py_XSETREF(self->block, Py_NewRef(block));
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
        Py_XSETREF(self->smem, Py_NewRef(smem));
    }
    return 1;
}

/* The node's index, checked against `raw`; -1 when unusable (no exception set). */
static Py_ssize_t
loop_index(KernelLoop *self, PyObject *node, PyObject *raw)
{
    PyObject *index = SLOT(node, self->nd.index);
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
 * The count, or -1 when the node must go through Python (no exception set). Runs no Python code. */
static Py_ssize_t
loop_deps(KernelLoop *self, PyObject *node, PyObject *raw)
{
    PyObject *preds = SLOT(node, self->nd.preds);
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
        PyObject *pi = SLOT(pred, self->nd.index);
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
        if (h == NULL || at >= PyList_GET_SIZE(raw)) { /* (a driver that runs Python code may shrink raw) */
            Py_XDECREF(h);
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

/* Add or set the KernelNode `node` (held by the caller) with the prepared params (its arguments
 * already packed). 1: done (or refused: self->rc); 0: it must go through Python (no exception set). */
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
    PyObject *order = argv[0], *raw = argv[2];
    Py_ssize_t i = PyLong_AsSsize_t(argv[1]);
    if (i < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "run: start must be non-negative");
        return NULL;
    }
    if (loop_enter(self) < 0)
        return NULL;
    PyTypeObject *kt = self->kernel_type;
    self->rc = 0;
    for (; self->kernel != NULL && i < PyList_GET_SIZE(order); i++) {
        PyObject *node = PyList_GET_ITEM(order, i);
        if (Py_TYPE(node) != kt || SLOT(node, self->kn.attrs) != Py_None || SLOT(node, self->kn.kernel) != self->kernel)
            break;
        PyObject *args = SLOT(node, self->kn.args);
        if (args != self->args) {
            Py_INCREF(node); /* packing may run Python code that drops `order`'s reference */
            int ok = args != NULL && loop_pack(self, args);
            /* Packing may have run Python code (int(handle), a type's __hash__): the node is read again.
             * self->args holds `args` when packed, so the last test is not fooled by a reused address. */
            ok = ok && Py_TYPE(node) == kt && SLOT(node, self->kn.attrs) == Py_None &&
                 SLOT(node, self->kn.kernel) == self->kernel && SLOT(node, self->kn.args) == args;
            ok = ok && loop_put(self, node, raw) && !self->rc;
            Py_DECREF(node);
            if (!ok)
                break;
        } else if (!loop_put(self, node, raw) || self->rc) { /* (runs no Python code before the driver call) */
            break;
        }
    }
    self->busy = 0;
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
    if (loop_enter(self) < 0)
        return NULL;
    self->rc = 0;
    int done = Py_TYPE(argv[0]) == self->kernel_type && loop_put(self, argv[0], argv[1]);
    self->busy = 0;
    return PyBool_FromLong(done);
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
    if (self->set_mode) {
        PyErr_SetString(PyExc_RuntimeError, "add_with needs a KernelLoop that adds nodes");
        return NULL;
    }
    if (address_of(argv[2], "params", &params) < 0)
        return NULL;
    if (params == NULL) {
        PyErr_SetString(PyExc_ValueError, "params must not be NULL");
        return NULL;
    }
    if (loop_enter(self) < 0)
        return NULL;
    self->rc = 0;
    Py_ssize_t at = -1, n = -1;
    if (PyObject_TypeCheck(argv[0], self->node_type) && (at = loop_index(self, argv[0], argv[1])) >= 0)
        n = loop_deps(self, argv[0], argv[1]);
    if (n >= 0)
        loop_call(self, argv[1], at, n, params);
    self->busy = 0;
    return PyBool_FromLong(n >= 0);
}

PyDoc_STRVAR(loop_write_dims_doc,
             "write_dims(node) -> bool\n\n"
             "Write a KernelNode's grid, block and shared memory into the prepared parameters\n"
             "(for a node added through another call); False when they are not plain ints.");

static PyObject *
loop_write_dims(KernelLoop *self, PyObject *node)
{
    if (loop_enter(self) < 0)
        return NULL;
    self->busy = 0; /* loop_dims runs no Python code */
    if (Py_TYPE(node) != self->kernel_type)
        Py_RETURN_FALSE;
    return PyBool_FromLong(loop_dims(self, node));
}

static PyObject *
loop_get_obj(KernelLoop *self, void *closure)
{
    PyObject *v = *(PyObject **)((char *)self + (Py_ssize_t)closure);
    return Py_NewRef(v == NULL ? Py_None : v);
}

static int
loop_set_args(KernelLoop *self, PyObject *value, void *closure)
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "KernelLoop is running a call: it cannot be used from code that call runs");
        return -1;
    }
    Py_XSETREF(self->args, value == NULL || value == Py_None ? NULL : Py_NewRef(value));
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
             "dimensions, arguments and dependencies are written here per node. The slots read are\n"
             "NATIVE_SLOTS['kernel_node'] of kernel_type and NATIVE_SLOTS['node'] of node_type.");

PyTypeObject cg_KernelLoopType = {
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
