/*
 * StreamLauncher.issue: Graph.run's runs of kernel nodes, launched in batches with the GIL released once
 * per batch.
 *
 * Python twin (see cudagraph.driver.c_entry): cudagraph.ops.kinds.kernel.KernelOps.issue, node by node.
 *
 * Each kernel node is prepared as before (cg_run_prepare: its kernel's LaunchKernel taken, its arguments
 * packed into that kernel's buffer), then its packed bytes are copied into the batch with a kernelParams
 * array pointing at the copy, so that the next node of the same kernel may pack into the buffer again.
 * Up to ISSUE_LAUNCHES launches (and ISSUE_BYTES bytes of arguments) are launched together: the GIL is
 * released once around them, as it is around each launch by cuda.bindings (a launch may wait for room
 * in the queue behind a host function that needs the GIL). Beside another thread that runs Python, each
 * release hands the GIL over for that thread's switch interval (5 ms): a batch costs one, not one per
 * kernel (H200, bench/materializers.py: a 200-kernel g.run beside a busy thread 26.5 ms, a
 * cuda.core.launch loop 970 ms; bench/cpu_overhead.py, fake driver: 137 -> 102 ns a kernel alone). The
 * batch holds each launch's LaunchKernel (and so its kernel, whose module the function lives in) and
 * argument tuple until it is launched, since Python code may run in between (packing, a release). A
 * node that is not a kernel the compiled path takes ends the run: the batch is launched first, and
 * the caller issues that node. A refusal stops at its node, as before: the nodes batched after it are
 * not launched.
 */
#include "_native_launch.h"

#define ISSUE_LAUNCHES 64
#define ISSUE_BYTES 8192
#define ISSUE_PTRS 1024

typedef struct {
    void *func;
    unsigned int d[6], smem;
    void **params;         /* into the batch's ptrs; NULL for a kernel without parameters */
    Py_ssize_t index;      /* the node's position in the order */
    PyObject *lk, *args;   /* held until launched */
} issue_launch;

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

/* Launch the batch on `stream`, the GIL released once, and empty it: 0, or the CUresult of the refused
 * launch (the later ones not made) with its node's index in *at. Releases what the batch held last (may
 * run Python code). */
static int
batch_flush(StreamLauncher *self, cg_issue_batch *b, void *stream, Py_ssize_t *at)
{
    int rc = 0, k = 0, count = b->n;
    cg_launch_fn fn = (cg_launch_fn)self->launch;
    if (count) {
        Py_BEGIN_ALLOW_THREADS
        for (; k < count; k++) {
            const issue_launch *l = &b->l[k];
            rc = fn(l->func, l->d[0], l->d[1], l->d[2], l->d[3], l->d[4], l->d[5], l->smem, stream, l->params, NULL);
            if (rc)
                break;
        }
        Py_END_ALLOW_THREADS
    }
    if (rc)
        *at = b->l[k].index;
    b->n = 0;
    b->bytes = b->nptrs = 0;
    PyObject *held[2 * ISSUE_LAUNCHES];
    for (int j = 0; j < count; j++) {
        held[2 * j] = b->l[j].lk;
        held[2 * j + 1] = b->l[j].args;
    }
    for (int j = 0; j < 2 * count; j++) /* (the batch is empty; Python code run here finds the launcher busy) */
        Py_DECREF(held[j]);
    return rc;
}

void
cg_issue_batch_free(cg_issue_batch *b)
{
    PyMem_Free(b); /* (empty whenever no issue() runs) */
}

const char cg_launcher_issue_doc[] =
    "issue(order, start, stream) -> int\n\n"
    "Launch order[start:] on the stream handle `stream`, in order, while each is a KernelNode without\n"
    "launch attributes whose kernel has a LaunchKernel and whose arguments pack by learned kinds, the GIL\n"
    "released once per batch of launches; return the index of the first node not launched. A driver\n"
    "refusal stops at that node with its CUresult in `rc`.";

PyObject *
cg_launcher_issue(StreamLauncher *self, PyObject *const *argv, Py_ssize_t argc)
{
    void *stream;
    Py_ssize_t i;
    if (argc != 3 || !PyList_CheckExact(argv[0]) || !PyLong_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "issue(order: list, start: int, stream: int)");
        return NULL;
    }
    if (cg_run_args(argv, "issue", &i, &stream) < 0)
        return NULL;
    if (self->batch == NULL && (self->batch = PyMem_Calloc(1, sizeof(cg_issue_batch))) == NULL)
        return PyErr_NoMemory();
    if (!cg_launcher_enter(self))
        return PyLong_FromSsize_t(i);
    self->rc = 0;
    cg_issue_batch *b = self->batch;
    PyObject *order = argv[0];
    RunState run = {NULL, NULL, {NULL, 0}};
    Py_ssize_t at = -1;
    int rc = 0;
    for (; i < PyList_GET_SIZE(order) && rc == 0; i++) {
        PyObject *node = Py_NewRef(PyList_GET_ITEM(order, i));
        unsigned int d[6], smem;
        int ok = cg_run_prepare(self, &run, node, d, &smem);
        if (ok && !batch_add(b, &run, d, smem, i)) {
            rc = batch_flush(self, b, stream, &at);
            if (rc == 0 && !batch_add(b, &run, d, smem, i)) { /* larger than a batch: launched alone */
                rc = cg_launcher_call(self, run.lk, d, smem, stream, 1);
                at = i;
            }
        }
        Py_DECREF(node); /* (may run Python code: the node is in the batch, or launched) */
        if (!ok)
            break;
    }
    if (rc == 0) /* (after a refusal the batch is empty: a flush empties it) */
        rc = batch_flush(self, b, stream, &at);
    if (rc) {
        self->rc = rc;
        self->failed = CALL_LAUNCH;
        i = at;
    }
    self->busy = 0;
    cg_run_end(&run);
    return PyLong_FromSsize_t(i);
}
