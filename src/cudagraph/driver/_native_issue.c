/*
 * StreamLauncher.issue: Graph.run's runs of kernel, fill, 1-D copy and empty nodes, issued in batches with
 * the GIL released once per batch.
 *
 * Python twins (see cudagraph.driver.c_entry): cudagraph.ops.kinds.kernel.KernelOps.issue, MemsetOps.issue,
 * MemcpyOps.issue and EmptyOps.issue, node by node.
 *
 * Each kernel node is prepared as before (cg_run_prepare: its kernel's LaunchKernel taken, its arguments
 * packed into that kernel's buffer), then its packed bytes are copied into the batch with a kernelParams
 * array pointing at the copy, so that the next node of the same kernel may pack into the buffer again.
 * A fill, a 1-D copy or an empty node of the kinds simple() taught is read from its slots as the
 * compiled construction loop reads it (cg_simple_write: plain int operands, a copy's ends asked their
 * memory type, an address below the lowest an allocation can have left to Python, which names it); a fill
 * becomes its cuMemsetD*Async call, a copy cuMemcpyAsync, an empty node nothing.
 * Up to ISSUE_LAUNCHES calls (and ISSUE_BYTES bytes of arguments) are made together: the GIL is
 * released once around them, as it is around each call by cuda.bindings (a call may wait for room
 * in the queue behind a host function that needs the GIL). Beside another thread that runs Python, each
 * release hands the GIL over for that thread's switch interval (5 ms): a batch costs one, not one per
 * node (bench/materializers.py: g.run beside a busy thread, against a cuda.core.launch loop;
 * bench/cpu_overhead.py: Graph.run alone). The
 * batch holds each launch's LaunchKernel (and so its kernel, whose module the function lives in) and
 * argument tuple until it is launched, since Python code may run in between (packing, a release). A
 * node that is not one the compiled path takes ends the run: the batch is issued first, and the caller
 * issues that node. A refusal stops at its node, as before: the nodes batched after it are not issued.
 */
#include "_native_launch.h"

#define ISSUE_LAUNCHES 64
#define ISSUE_BYTES 8192
#define ISSUE_PTRS 1024

struct cg_issue_batch {
    issue_launch l[ISSUE_LAUNCHES];
    int n;
    Py_ssize_t bytes, nptrs;
    _Alignas(16) char buf[ISSUE_BYTES];
    void *ptrs[ISSUE_PTRS];
};

/* Add the node just prepared (`run`: its LaunchKernel, packed with its argument tuple) at `index`: 1, or 0
 * when the batch has no room for it. Runs no Python code. */
static int
batch_add(cg_issue_batch *b, const RunState *run, const unsigned int *d, unsigned int smem, Py_ssize_t index)
{
    LaunchKernel *lk = run->lk;
    Py_ssize_t n = lk->pk.n, size = (lk->size + 15) & ~(Py_ssize_t)15;
    if (b->n == ISSUE_LAUNCHES || run->packed == NULL ||
        (n && (b->bytes + size > ISSUE_BYTES || b->nptrs + n > ISSUE_PTRS)))
        return 0;
    issue_launch *l = &b->l[b->n++];
    l->op = OP_LAUNCH; /* (the fields of the other ops are not read) */
    l->call = CALL_LAUNCH;
    l->func = lk->func;
    memcpy(l->d, d, sizeof l->d);
    l->smem = smem;
    l->index = index;
    l->params = NULL;
    l->lk = Py_NewRef((PyObject *)lk);
    l->args = Py_NewRef(run->packed);
    if (n) {
        char *dst = b->buf + b->bytes;
        memcpy(dst, lk->pk.buf, (size_t)lk->size);
        l->params = b->ptrs + b->nptrs;
        for (Py_ssize_t j = 0; j < n; j++)
            l->params[j] = dst + lk->pk.offsets[j];
        b->bytes += size;
        b->nptrs += n;
    }
    return 1;
}

int
cg_issue_prepare(StreamLauncher *self, PyObject *node, issue_launch *op)
{
    cg_graph_node_params p;
    if (!cg_simple_write(&self->simple, node, &p))
        return 0;
    memset(op, 0, sizeof *op);
    op->op = -1;
    if (p.type == CG_NODE_MEMSET) {
        const cg_memset_params *m = (const cg_memset_params *)&p.u;
        int shift = m->elementSize == 1 ? 0 : m->elementSize == 2 ? 1 : m->elementSize == 4 ? 2 : -1;
        if (shift < 0 || (m->elementSize < 4 && m->value >> (8 * m->elementSize)) || m->height == 0)
            return 0;
        op->op = OP_MEMSET;
        op->call = (m->height == 1 ? CALL_MEMSET_D8 : CALL_MEMSET_D2D8) + shift; /* as the twin chooses */
        op->dst = m->dst;
        op->value = m->value;
        op->width = m->width;
        op->height = m->height;
        op->pitch = m->pitch;
    } else if (p.type == CG_NODE_MEMCPY) {
        const cg_memcpy_params *c = (const cg_memcpy_params *)&p.u;
        op->op = OP_MEMCPY;
        op->call = CALL_MEMCPY;
        op->dst = c->dst.memoryType == CG_MEMORY_HOST ? (unsigned long long)(uintptr_t)c->dst.host : c->dst.device;
        op->src = c->src.memoryType == CG_MEMORY_HOST ? (unsigned long long)(uintptr_t)c->src.host : c->src.device;
        op->width = c->widthInBytes;
    } else if (p.type != CG_NODE_EMPTY) {
        return 0;
    }
    return op->op < 0 || self->ops[op->call - CALL_MEMSET_D8] != NULL;
}

/* Add the fill or copy `op` (from cg_issue_prepare) at `index`: 1, or 0 when the batch is full. */
static int
batch_add_op(cg_issue_batch *b, const issue_launch *op, Py_ssize_t index)
{
    if (b->n == ISSUE_LAUNCHES)
        return 0;
    issue_launch *l = &b->l[b->n++];
    *l = *op;
    l->index = index;
    return 1;
}

int
cg_issue_one(StreamLauncher *self, const issue_launch *l, void *stream)
{
    if (l->op == OP_LAUNCH)
        return ((cg_launch_fn)self->launch)(l->func, l->d[0], l->d[1], l->d[2], l->d[3], l->d[4], l->d[5], l->smem,
                                            stream, l->params, NULL);
    void *fn = self->ops[l->call - CALL_MEMSET_D8];
    switch (l->call) {
    case CALL_MEMSET_D8:
        return ((cg_memset8_fn)fn)(l->dst, (unsigned char)l->value, l->width, stream);
    case CALL_MEMSET_D16:
        return ((cg_memset16_fn)fn)(l->dst, (unsigned short)l->value, l->width, stream);
    case CALL_MEMSET_D32:
        return ((cg_memset32_fn)fn)(l->dst, l->value, l->width, stream);
    case CALL_MEMSET_D2D8:
        return ((cg_memset2d8_fn)fn)(l->dst, l->pitch, (unsigned char)l->value, l->width, l->height, stream);
    case CALL_MEMSET_D2D16:
        return ((cg_memset2d16_fn)fn)(l->dst, l->pitch, (unsigned short)l->value, l->width, l->height, stream);
    case CALL_MEMSET_D2D32:
        return ((cg_memset2d32_fn)fn)(l->dst, l->pitch, l->value, l->width, l->height, stream);
    default: /* CALL_MEMCPY */
        return ((cg_memcpy_async_fn)fn)(l->dst, l->src, l->width, stream);
    }
}

/* Make the batch's calls on `stream`, the GIL released once, and empty it: 0, or the CUresult of the refused
 * call (the later ones not made) with its node's index in *at and the call in *call. Releases what the batch
 * held last (may run Python code). */
static int
batch_flush(StreamLauncher *self, cg_issue_batch *b, void *stream, Py_ssize_t *at, int *call)
{
    int rc = 0, k = 0, count = b->n;
    if (count) {
        Py_BEGIN_ALLOW_THREADS
        for (; k < count; k++) {
            rc = cg_issue_one(self, &b->l[k], stream);
            if (rc)
                break;
        }
        Py_END_ALLOW_THREADS
    }
    if (rc) {
        *at = b->l[k].index;
        *call = b->l[k].call;
    }
    b->n = 0;
    b->bytes = b->nptrs = 0;
    PyObject *held[2 * ISSUE_LAUNCHES];
    for (int j = 0; j < count; j++) {
        held[2 * j] = b->l[j].lk;
        held[2 * j + 1] = b->l[j].args;
    }
    for (int j = 0; j < 2 * count; j++) /* (the batch is empty; Python code run here finds the launcher busy) */
        Py_XDECREF(held[j]);
    return rc;
}

void
cg_issue_batch_free(cg_issue_batch *b)
{
    PyMem_Free(b); /* (empty whenever no issue() runs) */
}

const char cg_launcher_issue_doc[] =
    "issue(order, start, stream, bindings=None) -> int\n\n"
    "Issue order[start:] on the stream handle `stream`, in order, while each is a KernelNode without\n"
    "launch attributes whose kernel has a LaunchKernel and whose arguments pack by learned kinds, or a\n"
    "fill, 1-D copy or empty node of the kinds simple() taught whose operands are plain ints or\n"
    "parameters that `bindings` (name -> int) binds, the GIL released once per batch of calls; return\n"
    "the index of the first node not issued. A driver refusal stops at that node with its CUresult in\n"
    "`rc` and the call in `failed`.";

/* The next node of the run (held by the caller) into the batch: 1, or 0 when the caller issues it. A driver
 * refusal of a batch flushed to make room: its CUresult in *rc (then *at, *call say where). */
static int
issue_node(StreamLauncher *self, RunState *run, PyObject *node, Py_ssize_t i, void *stream, int *rc,
           Py_ssize_t *at, int *call)
{
    cg_issue_batch *b = self->batch;
    if (cg_simple_is(&self->simple, node)) {
        issue_launch op;
        if (!cg_issue_prepare(self, node, &op))
            return 0;
        if (op.op >= 0 && !batch_add_op(b, &op, i) && (*rc = batch_flush(self, b, stream, at, call)) == 0)
            batch_add_op(b, &op, i); /* (an empty batch has room) */
        return 1;
    }
    unsigned int d[6], smem;
    if (!cg_run_prepare(self, run, node, d, &smem))
        return 0;
    if (!batch_add(b, run, d, smem, i) && (*rc = batch_flush(self, b, stream, at, call)) == 0 &&
        !batch_add(b, run, d, smem, i)) { /* larger than a batch: launched alone */
        *rc = cg_launcher_call(self, run->lk, d, smem, stream, 1);
        *at = i;
        *call = CALL_LAUNCH;
    }
    return 1;
}

PyObject *
cg_launcher_issue(StreamLauncher *self, PyObject *const *argv, Py_ssize_t argc)
{
    void *stream;
    Py_ssize_t i;
    if ((argc != 3 && argc != 4) || !PyList_CheckExact(argv[0]) || !PyLong_CheckExact(argv[1]) ||
        (argc == 4 && argv[3] != Py_None && !PyDict_CheckExact(argv[3]))) {
        PyErr_SetString(PyExc_TypeError, "issue(order: list, start: int, stream: int, bindings: dict | None = None)");
        return NULL;
    }
    if (cg_run_args(argv, "issue", &i, &stream) < 0)
        return NULL;
    if (self->batch == NULL && (self->batch = PyMem_Calloc(1, sizeof(cg_issue_batch))) == NULL)
        return PyErr_NoMemory();
    if (!cg_launcher_enter(self))
        return PyLong_FromSsize_t(i);
    self->rc = 0;
    cg_simple_forget(&self->simple); /* memory may have been freed and allocated again since the last call */
    cg_simple_bind(&self->simple, argc == 4 ? argv[3] : NULL); /* (a dict or None: checked above) */
    PyObject *order = argv[0];
    RunState run = {NULL, NULL, {NULL, 0}};
    Py_ssize_t at = -1;
    int rc = 0, call = CALL_LAUNCH;
    for (; i < PyList_GET_SIZE(order) && rc == 0; i++) {
        PyObject *node = Py_NewRef(PyList_GET_ITEM(order, i));
        int ok = issue_node(self, &run, node, i, stream, &rc, &at, &call);
        Py_DECREF(node); /* (may run Python code: the node is in the batch, or issued) */
        if (!ok)
            break;
    }
    if (rc == 0) /* (after a refusal the batch is empty: a flush empties it) */
        rc = batch_flush(self, self->batch, stream, &at, &call);
    if (rc) {
        self->rc = rc;
        self->failed = call;
        i = at;
    }
    cg_simple_bind(&self->simple, NULL); /* (the caller holds the dict: nothing is released here) */
    self->busy = 0;
    cg_run_end(&run);
    return PyLong_FromSsize_t(i);
}

const char cg_launcher_simple_doc[] =
    "simple(ops, ctx, attributes, lowest, memset_type, memcpy_type, empty_type, param_type=None,\n"
    "       param_at_type=None) -> None\n\n"
    "Let issue() and capture() take fills, 1-D copies and empty nodes of these exact types (their slots\n"
    "NATIVE_SLOTS['memset_node'] and ['memcpy_node']), read as KernelLoop.simple reads them (`ctx`,\n"
    "`attributes`: cuPointerGetAttributes, `lowest`: see there; parameter operands, Param and ParamAt, by\n"
    "the bindings each call is given). `ops` holds the addresses of cuMemsetD8Async, cuMemsetD16Async,\n"
    "cuMemsetD32Async, cuMemsetD2D8Async, cuMemsetD2D16Async, cuMemsetD2D32Async and cuMemcpyAsync, 0\n"
    "where missing (the nodes needing that call go to Python). Called again, it replaces what it was\n"
    "taught; refused (RuntimeError) while the launcher is busy.";

PyObject *
cg_launcher_simple(StreamLauncher *self, PyObject *const *argv, Py_ssize_t argc)
{
    if ((argc != 7 && argc != 9) || !PyTuple_CheckExact(argv[0]) || PyTuple_GET_SIZE(argv[0]) != STREAM_OPS) {
        PyErr_Format(PyExc_TypeError,
                     "simple(ops: tuple of %d addresses, ctx, attributes, lowest, memset_type, memcpy_type, "
                     "empty_type, param_type=None, param_at_type=None)",
                     STREAM_OPS);
        return NULL;
    }
    void *ops[STREAM_OPS];
    for (int k = 0; k < STREAM_OPS; k++)
        if (address_of(PyTuple_GET_ITEM(argv[0], k), "ops", &ops[k]) < 0)
            return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "simple: the launcher is issuing");
        return NULL;
    }
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL)
        return NULL;
    /* (ctx, attributes, lowest, the three kinds, set_fn 0, the parameter types, no bindings: each call's) */
    PyObject *know[10] = {argv[1], argv[2], argv[3], argv[4], argv[5], argv[6], zero,
                          argc == 9 ? argv[7] : Py_None, argc == 9 ? argv[8] : Py_None, Py_None};
    int r = cg_simple_know(&self->simple, know, 10); /* (may run Python code: before anything is set) */
    Py_DECREF(zero);
    if (r < 0)
        return NULL;
    memcpy(self->ops, ops, sizeof ops);
    Py_RETURN_NONE;
}
