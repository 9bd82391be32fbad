/*
 * KernelLoop: adding (or setting) runs of kernel nodes in C, and the fills, copies and empty nodes among them.
 *
 * Python twins (see cudagraph.driver.c_entry): adding, cudagraph.materialize.kernel_loop.KernelLoopTwin;
 * setting (set_mode), cudagraph.ops.kinds.kernel.KernelWriter.write on each node.
 *
 * It reads the definition's nodes through their __slots__ (NATIVE_SLOTS "kernel_node" and "node", resolved on
 * the classes given at construction), points the parameters at each node's kernel (a table of the kernels the
 * Python side introduced with use(), _native_kernels.c), packs the arguments by the kinds the Python side
 * learned for each sequence of argument types (cg_pack, _native_pack.c, the packer of stream launches too),
 * writes the parameters of the other kinds made known with simple() (_native_simple.c), and stops at the first
 * node it cannot handle (another kind, launch attributes, a kernel not introduced yet, arguments of types not
 * seen yet, an operand it cannot read), handing it back to the Python loop, which names any error.
 *
 * A loop is configured once and does not re-enter: a call made by Python code it runs (int() of a handle, a driver
 * callback, another thread while run() offers the GIL) raises RuntimeError; its state stays as checked. */
#include "_native.h"

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
    cg_kernel_table kernels;   /* the kernels known (see use()) */
    cg_kernel_entry *cur;      /* the one whose function and buffer the params hold (NULL: none) */
    PyObject *grid, *block, *smem; /* the objects the dimensions in params came from */
    void **deps;
    Py_ssize_t deps_cap;
    void *out;
    int rc;
    Py_ssize_t done;
    cg_simple_kinds simple;            /* fills, copies and empty nodes added in run() (see simple()) */
    cg_graph_node_params simple_params; /* their parameters, written per node */
} KernelLoop;

/* Forget every kernel: the loop stops pointing at the table before the references go (Python code may run). */
static void
loop_drop_kernels(KernelLoop *self)
{
    cg_kernel_table t = self->kernels;
    self->kernels = (cg_kernel_table){NULL, 0, 0};
    self->cur = NULL;
    for (Py_ssize_t i = 0; i < t.capacity; i++) {
        PyObject *refs[CG_ENTRY_REFS];
        cg_entry_refs(&t.slots[i], refs);
        for (int j = 0; j < CG_ENTRY_REFS; j++)
            Py_XDECREF(refs[j]);
    }
    cg_table_free(&t);
}

static void
loop_clear_refs(KernelLoop *self)
{
    Py_CLEAR(self->kernel_type);
    Py_CLEAR(self->node_type);
    Py_CLEAR(self->grid);
    Py_CLEAR(self->block);
    Py_CLEAR(self->smem);
    cg_simple_clear(&self->simple);
    loop_drop_kernels(self);
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
    Py_VISIT(self->grid);
    Py_VISIT(self->block);
    Py_VISIT(self->smem);
    if (cg_simple_visit(&self->simple, visit, arg))
        return -1;
    for (Py_ssize_t i = 0; i < self->kernels.capacity; i++) {
        PyObject *refs[CG_ENTRY_REFS];
        cg_entry_refs(&self->kernels.slots[i], refs);
        for (int j = 0; j < CG_ENTRY_REFS; j++)
            Py_VISIT(refs[j]);
    }
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
    self->rc = 0;
    self->done = 0;
    self->node_type = (PyTypeObject *)Py_NewRef(ntype);
    self->kernel_type = (PyTypeObject *)Py_NewRef(ktype); /* last: the loop is ready */
    return 0;
}

PyDoc_STRVAR(loop_use_doc,
             "use(kernel, kinds, offsets, sizes, scratch, scratch_size, function, library, kernel_params,\n"
             "    owner) -> None\n\n"
             "Know `kernel` (or know it anew) and point the parameters at it. Its arguments go in the buffer\n"
             "at address `scratch` (`scratch_size` bytes; parameter i at offsets[i], sizes[i] bytes);\n"
             "`kernel_params` is the address of its kernelParams array (pointers into that buffer);\n"
             "`function` is the address of its CUkernel (`library` true) or CUfunction, written into the\n"
             "function fields of the parameters whenever a node of it is added; `owner` keeps the buffer and\n"
             "the array alive (the loop holds it). `kinds` maps a tuple of argument types to the bytes of\n"
             "per-argument kinds ('P' int pointer, 'S' numpy scalar, 'B' bytes, 'H' object with an int\n"
             "`handle`) for the argument sequences the loop may pack itself (the loop reads the dict as it\n"
             "grows). Nothing changes when the arguments are refused.");

static void
loop_select(KernelLoop *self, cg_kernel_entry *e)
{
    cg_kernel_params_v3 *k = self->kp;
    k->func = e->func;
    k->kern = e->kern;
    k->kernelParams = e->kernel_params;
    self->cur = e;
}

static PyObject *
loop_use(KernelLoop *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 10 || !PyDict_CheckExact(argv[1]) || !PyTuple_CheckExact(argv[2]) || !PyTuple_CheckExact(argv[3]) ||
        PyTuple_GET_SIZE(argv[2]) != PyTuple_GET_SIZE(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "use(kernel, kinds: dict, offsets: tuple, sizes: tuple, scratch: int, "
                                         "scratch_size: int, function: int, library: bool, kernel_params: int, owner)");
        return NULL;
    }
    if (loop_enter(self) < 0) /* (reading the arguments may run Python code: __index__, __bool__) */
        return NULL;
    void *scratch, *function, *kernel_params;
    int library;
    Py_ssize_t n = PyTuple_GET_SIZE(argv[2]);
    Py_ssize_t *layout = cg_use_layout(argv, &scratch, &function, &kernel_params, &library);
    PyObject *cur = self->cur != NULL ? self->cur->kernel : NULL;
    if (layout == NULL || cg_table_reserve(&self->kernels) < 0) {
        PyMem_Free(layout);
        self->busy = 0;
        return NULL;
    }
    if (cur != NULL) /* (the entries may have moved) */
        self->cur = cg_table_find(&self->kernels, cur);
    cg_kernel_entry *e = cg_table_slot(&self->kernels, argv[0]);
    PyObject *old[CG_ENTRY_REFS];
    cg_entry_refs(e, old);
    Py_ssize_t *old_layout = e->pk.offsets;
    if (e->kernel == NULL)
        self->kernels.used++;
    e->kernel = Py_NewRef(argv[0]);
    e->owner = Py_NewRef(argv[9]);
    e->args = NULL;
    e->func = library ? NULL : function;
    e->kern = library ? function : NULL;
    e->kernel_params = (void **)kernel_params;
    e->pk = (cg_packer){.kinds = Py_NewRef(argv[1]), .buf = scratch, .n = n, .offsets = layout, .sizes = layout + n};
    loop_select(self, e);
    /* The references replaced are released last: that may run Python code, and the state is whole. */
    self->busy = 0;
    PyMem_Free(old_layout);
    for (int i = 0; i < CG_ENTRY_REFS; i++)
        Py_XDECREF(old[i]);
    Py_RETURN_NONE;
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

/* Gather the driver handles of `node`'s predecessors (from `raw`) into self->deps, less the edges
 * another predecessor implies when `node`'s own edges are plain. The count, or -1 when the node must
 * go through Python (no exception set). Runs no Python code. */
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
        if (!cg_is_node(self->kernel_type, self->node_type, pred))
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
    cg_edge_types types = {self->kernel_type, self->node_type, &self->kn, &self->nd};
    return cg_keep_driver_deps(&types, node, preds, self->deps, n); /* -1 out of memory: Python adds it */
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

/* Set the fill, copy or empty node `node` (held by the caller) through cuGraphExecNodeSetParams (see simple()).
 * 1: done (or refused: self->rc); 0: it must go through Python (no exception set). */
static int
loop_set_simple(KernelLoop *self, PyObject *node, PyObject *raw)
{
    if (self->simple.set_fn == NULL || loop_index(self, node, raw) < 0 ||
        !cg_simple_write(&self->simple, node, &self->simple_params))
        return 0;
    Py_ssize_t at = loop_index(self, node, raw); /* (again: the memory-type queries may run Python code in tests) */
    void *h = at < 0 ? NULL : PyLong_AsVoidPtr(PyList_GET_ITEM(raw, at));
    if (h == NULL) {
        PyErr_Clear();
        self->rc = -1;
        return 1;
    }
    int rc = ((cg_set_node_fn)self->simple.set_fn)(self->target, h, &self->simple_params);
    if (rc)
        self->rc = rc;
    else
        self->done++;
    return 1;
}

/* Add the node `node` (held by the caller) with `params`, or (NULL) the fill, copy or empty node (see simple()).
 * 1: done (or refused: self->rc); 0: it must go through Python (no exception set). */
static int
loop_add(KernelLoop *self, PyObject *node, PyObject *raw, void *params)
{
    Py_ssize_t at = loop_index(self, node, raw), n;
    if (at < 0 || (n = loop_deps(self, node, raw)) < 0)
        return 0;
    if (params == NULL) { /* (memory-type queries may run Python code (tests): deps are the loop's; raw is read anew) */
        if (!cg_simple_write(&self->simple, node, &self->simple_params))
            return 0;
        params = &self->simple_params;
    }
    return loop_call(self, raw, at, n, params);
}

PyDoc_STRVAR(loop_run_doc,
             "run(order, start, raw) -> int\n\n"
             "Add (or set) order[start:], one node after another, while each is a KernelNode without\n"
             "launch attributes whose kernel was introduced with use() and whose arguments are the tuple\n"
             "its buffer holds or can be packed by the learned kinds (the parameters are pointed at each\n"
             "node's kernel, which `kernel` names after the call), or a node simple() lets it write;\n"
             "return the index of the first node not done (len(order) when all were). raw[i] is the\n"
             "driver handle (int) of the node of index i: read for predecessors and written for each\n"
             "node added, or the node to set. A driver failure stops the loop there, its CUresult in `rc`.");

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
    cg_handle_memo memo = {NULL, 0};
    cg_gil_offer offer = {0, 0};
    self->rc = 0;
    cg_simple_forget(&self->simple);
    for (Py_ssize_t start = i; i < PyList_GET_SIZE(order); i++) {
        cg_offer_gil(i - start, &offer); /* (the list and the nodes are read after it) */
        PyObject *node = PyList_GET_ITEM(order, i);
        if (Py_TYPE(node) != kt) {
            if (!cg_simple_is(&self->simple, node))
                break;
            Py_INCREF(node); /* (the memory-type queries may run Python code that drops `order`'s reference) */
            int ok = (self->set_mode ? loop_set_simple(self, node, raw) : loop_add(self, node, raw, NULL)) && !self->rc;
            Py_DECREF(node);
            if (!ok)
                break;
            continue;
        }
        if (SLOT(node, self->kn.attrs) != Py_None)
            break;
        PyObject *kernel = SLOT(node, self->kn.kernel);
        cg_kernel_entry *e = self->cur;
        if (e == NULL || kernel != e->kernel) { /* another kernel: the table's, or the caller's to add */
            if ((e = cg_table_find(&self->kernels, kernel)) == NULL)
                break;
            loop_select(self, e);
        }
        PyObject *args = SLOT(node, self->kn.args);
        if (args != e->args) {
            Py_INCREF(node); /* packing may run Python code that drops `order`'s reference */
            int ok = args != NULL && cg_entry_pack(e, args, &memo, &self->simple);
            /* Packing may have run Python code (int(handle), a type's __hash__): the node is read again
             * (the table stays as it is: use() is refused meanwhile). e->args holds `args` when packed,
             * so the last test is not fooled by a reused address. */
            ok = ok && Py_TYPE(node) == kt && SLOT(node, self->kn.attrs) == Py_None &&
                 SLOT(node, self->kn.kernel) == e->kernel && SLOT(node, self->kn.args) == args;
            ok = ok && loop_put(self, node, raw) && !self->rc;
            Py_DECREF(node);
            if (!ok)
                break;
        } else if (!loop_put(self, node, raw) || self->rc) { /* (runs no Python code before the driver call) */
            break;
        }
    }
    self->busy = 0;
    cg_handle_memo_clear(&memo); /* (may run Python code: the loop is free again) */
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
    int done = cg_is_node(self->kernel_type, self->node_type, argv[0]) && loop_add(self, argv[0], argv[1], params);
    self->busy = 0;
    return PyBool_FromLong(done);
}

PyDoc_STRVAR(loop_simple_doc,
             "simple(ctx, attributes, lowest, memset_type, memcpy_type, empty_type, set_fn=0, param_type=None,\n"
             "       param_at_type=None, bindings=None) -> None\n\n"
             "Add (set: through cuGraphExecNodeSetParams at `set_fn`) fills, 1-D copies and empty nodes (those exact\n"
             "types) in run() too while their operands are plain ints or parameters `bindings` binds to ints: on the\n"
             "context `ctx`; a copy's memory types read through cuPointerGetAttributes at `attributes` (0: copies\n"
             "are left to the caller), an endpoint below `lowest` left to the caller.");

static PyObject *
loop_know_simple(KernelLoop *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (loop_enter(self) < 0)
        return NULL;
    int r = cg_simple_know(&self->simple, argv, argc);
    self->busy = 0;
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
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
loop_get_kernel(KernelLoop *self, void *closure)
{
    return Py_NewRef(self->cur == NULL ? Py_None : self->cur->kernel);
}

static PyObject *
loop_get_args(KernelLoop *self, void *closure)
{
    return Py_NewRef(self->cur == NULL || self->cur->args == NULL ? Py_None : self->cur->args);
}

static int
loop_set_args(KernelLoop *self, PyObject *value, void *closure)
{
    if (loop_enter(self) < 0)
        return -1;
    if (value != NULL && value != Py_None) {
        if (self->cur == NULL) {
            self->busy = 0;
            PyErr_SetString(PyExc_RuntimeError, "KernelLoop.args: no kernel is in use (see use())");
            return -1;
        }
        PyObject *old = self->cur->args;
        self->cur->args = Py_NewRef(value);
        self->busy = 0;
        Py_XDECREF(old);
        return 0;
    }
    /* None: every kernel's buffer may hold other arguments now. (Releasing a tuple may run Python code:
     * the loop stays busy, so the table stays where it is.) */
    for (Py_ssize_t i = 0; i < self->kernels.capacity; i++)
        Py_CLEAR(self->kernels.slots[i].args);
    self->busy = 0;
    return 0;
}

static PyMethodDef loop_methods[] = {
    {"use", (PyCFunction)(void (*)(void))loop_use, METH_FASTCALL, loop_use_doc},
    {"run", (PyCFunction)(void (*)(void))loop_run, METH_FASTCALL, loop_run_doc},
    {"put", (PyCFunction)(void (*)(void))loop_put_one, METH_FASTCALL, loop_put_doc},
    {"add_with", (PyCFunction)(void (*)(void))loop_add_with, METH_FASTCALL, loop_add_with_doc},
    {"write_dims", (PyCFunction)loop_write_dims, METH_O, loop_write_dims_doc},
    {"simple", (PyCFunction)(void (*)(void))loop_know_simple, METH_FASTCALL, loop_simple_doc},
    {NULL, NULL, 0, NULL},
};

static PyObject *
loop_get_knows_simple(KernelLoop *self, void *closure)
{
    return PyBool_FromLong(self->simple.memset_type != NULL);
}

static PyObject *
loop_get_bindings(KernelLoop *self, void *closure)
{
    return Py_NewRef(self->simple.bindings != NULL ? self->simple.bindings : Py_None);
}

static int
loop_set_bindings(KernelLoop *self, PyObject *value, void *closure) /* (NULL, a deletion: none) */
{
    return cg_simple_bind(&self->simple, value);
}

static PyGetSetDef loop_getset[] = {
    {"kernel", (getter)loop_get_kernel, NULL, "The kernel whose function and buffer the parameters hold (None: none).",
     NULL},
    {"args", (getter)loop_get_args, (setter)loop_set_args,
     "The argument tuple packed in that kernel's buffer (None: none known). Set it after packing the\n"
     "buffer in Python; set None when other code may have packed any kernel's buffer.",
     NULL},
    {"knows_simple", (getter)loop_get_knows_simple, NULL, "Whether simple() told the loop of other kinds.", NULL},
    {"bindings", (getter)loop_get_bindings, (setter)loop_set_bindings, "Parameters' values: see simple().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef loop_members[] = {
    {"rc", Py_T_INT, offsetof(KernelLoop, rc), Py_READONLY, "The CUresult of the last refused call (0: none)."},
    {"done", Py_T_PYSSIZET, offsetof(KernelLoop, done), Py_READONLY, "Nodes added or set so far."},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(loop_doc,
             "KernelLoop(fn, target, params, kernel_type, node_type, set_mode=False)\n\n"
             "Adds nodes to the driver graph `target` through cuGraphAddNode_v2 (address `fn`) with\n"
             "the prepared CUgraphNodeParams at address `params` or, with set_mode, sets kernel nodes\n"
             "of the executable `target` through cuGraphExecKernelNodeSetParams_v2 with the\n"
             "CUDA_KERNEL_NODE_PARAMS at `params`. The kernels are introduced with use(); function fields,\n"
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
    .tp_members = loop_members,
};
