/*
 * Executable node updates: set_kernel_node (one kernel node), rebind (one parameter in many kernel
 * nodes) and patch (several parameters, pointers at offsets, kernel, copy and fill nodes).
 *
 * Python twins (see cudagraph.driver.c_entry): set_kernel_node, the cuda.bindings call in
 * cudagraph.ops.kinds.kernel.KernelWriter.write; rebind, the cuda.bindings loop over `bindings_groups`
 * in cudagraph.ops.kinds.kernel.KernelWriter.write_plan; patch, cudagraph.executable.patch_plan.run_patches.
 *
 * The addresses handed over (argument buffers, parameter structures) are the caller's to keep alive,
 * and the executable's lock is the caller's to hold: every driver call runs with the GIL released
 * (rebind and patch check every group or entry first, then release it once around all their calls:
 * _native_sets.c). A malformed group or entry is refused before anything is written or set.
 */
#include "_native.h"

/* cuGraphExecKernelNodeSetParams_v2 or cuGraphExecNodeSetParams (the same signature) at `fn`, the GIL
 * released as cuda.bindings releases it: a driver call that waits (under compute-sanitizer, one waits on
 * other threads' launches) must not stop the threads that would let it go on. The caller holds the
 * executable's lock, so no other thread writes the structures while the driver reads them. */
static int
cg_set_released(void *fn, void *exec, void *node, const void *params)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ((cg_set_kernel_fn)fn)(exec, node, params);
    Py_END_ALLOW_THREADS
    return rc;
}

const char cg_set_kernel_node_doc[] = "set_kernel_node(set_params, exec, node, params) -> int\n\n"
                                      "cuGraphExecKernelNodeSetParams_v2 on one driver node; returns the CUresult.";

PyObject *
cg_set_kernel_node(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
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
    return PyLong_FromLong(cg_set_released(fn, exec, node, params));
}

/* Record group `g` of cg_rebind_groups (`t`, held by the caller): its writes, then its calls. */
static int
rebind_group(cg_set_batch *batch, void *fn, PyObject *t, const char *data, Py_ssize_t len, Py_ssize_t g)
{
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
            PyErr_Format(PyExc_ValueError, "rebind: %zd bytes at offset %zd do not fit a buffer of %zd bytes", len,
                         off, size);
            return -1;
        }
        if (cg_batch_write(batch, (char *)buf + off, data, 0, len, g) < 0)
            return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        void *h = PyLong_AsVoidPtr(PyList_GET_ITEM(nodes, i)); /* an int: runs no Python code */
        if ((h == NULL && PyErr_Occurred()) || cg_batch_call(batch, fn, h, params, g, i) < 0)
            return -1;
    }
    return 0;
}

int
cg_rebind_groups(void *fn, void *exec, PyObject *groups, const char *data, Py_ssize_t len, Py_ssize_t *g_out,
                 Py_ssize_t *i_out, cg_then_launch *then)
{
    cg_set_batch batch;
    cg_batch_init(&batch);
    int rc = 0;
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(groups) && rc == 0; g++) {
        PyObject *t = PyList_GET_ITEM(groups, g);
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 5 || !PyTuple_CheckExact(PyTuple_GET_ITEM(t, 2)) ||
            !PyList_CheckExact(PyTuple_GET_ITEM(t, 4))) {
            PyErr_SetString(PyExc_TypeError, "rebind: a group is (buffer, size, offsets: tuple, params, nodes: list)");
            rc = -1;
        } else {
            Py_INCREF(t); /* held while it is read */
            rc = rebind_group(&batch, fn, t, data, len, g);
            Py_DECREF(t);
        }
    }
    if (rc == 0) /* every group checked: nothing was written before */
        rc = cg_batch_run(&batch, exec, g_out, i_out, then);
    cg_batch_free(&batch);
    return rc;
}

const char cg_rebind_doc[] =
    "rebind(set_params, exec, groups, value) -> None or (group, index, CUresult)\n\n"
    "Rebind one parameter in kernel nodes of executable `exec`. Each group is a tuple\n"
    "(buffer, size, offsets, params, nodes): the kernel argument buffer at address `buffer`\n"
    "(`size` bytes) gets `value` at each offset in the tuple `offsets` (an int: a 64-bit\n"
    "little-endian word; bytes: copied as they are), then cuGraphExecKernelNodeSetParams_v2\n"
    "(address set_params) is called on every driver node in the list `nodes` (ints) with the\n"
    "CUDA_KERNEL_NODE_PARAMS at address `params`, which points into that buffer. None when\n"
    "every call succeeded; else where the driver refused and its CUresult (everything before\n"
    "was set, the buffers of the later groups are as they were). A malformed group: nothing\n"
    "written or set.";

PyObject *
cg_rebind(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
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
        word = cg_as_u64(argv[3]); /* runs no Python code, even for an int subclass */
        if (word == (unsigned long long)-1 && PyErr_Occurred())
            return NULL;
        data = (const char *)&word; /* x86-64 and aarch64 Linux are little-endian */
        len = (Py_ssize_t)sizeof word;
    } else if (PyBytes_CheckExact(argv[3])) {
        data = PyBytes_AS_STRING(argv[3]); /* held by the caller */
        len = PyBytes_GET_SIZE(argv[3]);
    } else {
        PyErr_SetString(PyExc_TypeError, "rebind: value must be an int or bytes");
        return NULL;
    }
    Py_ssize_t g, i;
    int rc = cg_rebind_groups(fn, exec, argv[2], data, len, &g, &i, NULL);
    if (rc < 0)
        return NULL;
    if (rc > 0)
        return Py_BuildValue("(nni)", g, i, rc);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ patch: several values, any node kind */

/* One write of a patch entry: `value[idx] + add` (an int value, as a 64-bit word) or the bytes value[idx]
 * (then add is 0) at byte `off` of the entry's structure. */
typedef struct {
    long long off, idx, add;
} cg_patch_write;

_Static_assert(sizeof(cg_patch_write) == 24, "patch writes are three little-endian int64");

/* Record entry `e` of a patch (`t`, held by the caller): its writes, then its calls; every write is checked
 * before any is recorded. 0, or -1 with an exception set for a malformed entry. */
static int
patch_entry(cg_set_batch *batch, PyObject *t, const cg_patch_value *values, Py_ssize_t nvalues, Py_ssize_t e)
{
    void *fn, *buf, *params;
    if (address_of(PyTuple_GET_ITEM(t, 0), "set_params", &fn) < 0 ||
        address_of(PyTuple_GET_ITEM(t, 1), "structure", &buf) < 0 ||
        address_of(PyTuple_GET_ITEM(t, 4), "params", &params) < 0)
        return -1;
    Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 2));
    if (size < 0 && PyErr_Occurred())
        return -1;
    PyObject *writes = PyTuple_GET_ITEM(t, 3), *nodes = PyTuple_GET_ITEM(t, 5);
    Py_ssize_t nwrites = PyBytes_GET_SIZE(writes) / (Py_ssize_t)sizeof(cg_patch_write);
    if (fn == NULL || params == NULL || (buf == NULL && nwrites) || size < 0 ||
        PyBytes_GET_SIZE(writes) % (Py_ssize_t)sizeof(cg_patch_write)) {
        PyErr_SetString(PyExc_ValueError, "patch: set_params, structure and params must not be NULL, size must be "
                                          "positive and writes whole (offset, index, addend) triples");
        return -1;
    }
    const char *w = PyBytes_AS_STRING(writes);
    for (Py_ssize_t k = 0; k < nwrites; k++) {
        cg_patch_write one;
        memcpy(&one, w + k * (Py_ssize_t)sizeof one, sizeof one); /* little-endian, like the driver ABI */
        if (one.idx < 0 || one.idx >= nvalues) {
            PyErr_Format(PyExc_ValueError, "patch: write %zd names value %lld of %zd", k, one.idx, nvalues);
            return -1;
        }
        const cg_patch_value *v = &values[one.idx];
        Py_ssize_t len = v->data == NULL ? (Py_ssize_t)sizeof v->word : v->len;
        if (one.off < 0 || one.off > (long long)(size - len)) {
            PyErr_Format(PyExc_ValueError, "patch: %zd bytes at offset %lld do not fit a structure of %zd bytes", len,
                         one.off, size);
            return -1;
        }
        if (v->data != NULL && one.add != 0) {
            PyErr_Format(PyExc_ValueError, "patch: write %zd adds %lld to a bytes value", k, one.add);
            return -1;
        }
        /* (a word wraps like the twin's mask; a bytes value has no word) */
        unsigned long long word = v->data == NULL ? v->word + (unsigned long long)one.add : 0;
        if (cg_batch_write(batch, (char *)buf + one.off, v->data, word, len, e) < 0)
            return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        void *h = PyLong_AsVoidPtr(PyList_GET_ITEM(nodes, i)); /* an int: runs no Python code */
        if ((h == NULL && PyErr_Occurred()) || cg_batch_call(batch, fn, h, params, e, i) < 0)
            return -1;
    }
    return 0;
}

/* The values of a patch call, read from `values` (a tuple held by the caller) into `out`. 0 or -1. */
static int
patch_values(PyObject *values, cg_patch_value *out)
{
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(values); j++) {
        PyObject *v = PyTuple_GET_ITEM(values, j);
        if (PyLong_Check(v)) {
            out[j].word = cg_as_u64(v); /* runs no Python code, even for an int subclass */
            if (out[j].word == (unsigned long long)-1 && PyErr_Occurred())
                return -1;
            out[j].data = NULL;
            out[j].len = 0;
        } else if (PyBytes_CheckExact(v)) {
            out[j].data = PyBytes_AS_STRING(v);
            out[j].len = PyBytes_GET_SIZE(v);
        } else {
            PyErr_Format(PyExc_TypeError, "patch: value %zd must be an int or bytes", j);
            return -1;
        }
    }
    return 0;
}

int
cg_patch_entries(void *exec, PyObject *entries, const cg_patch_value *vals, Py_ssize_t nvalues, Py_ssize_t *e_out,
                 Py_ssize_t *i_out, cg_then_launch *then)
{
    cg_set_batch batch;
    cg_batch_init(&batch);
    int rc = 0;
    for (Py_ssize_t e = 0; e < PyList_GET_SIZE(entries) && rc == 0; e++) {
        PyObject *t = PyList_GET_ITEM(entries, e);
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 6 || !PyBytes_CheckExact(PyTuple_GET_ITEM(t, 3)) ||
            !PyList_CheckExact(PyTuple_GET_ITEM(t, 5))) {
            PyErr_SetString(PyExc_TypeError,
                            "patch: an entry is (set_params, structure, size, writes: bytes, params, nodes: list)");
            rc = -1;
        } else {
            Py_INCREF(t); /* held while it is read */
            rc = patch_entry(&batch, t, vals, nvalues, e);
            Py_DECREF(t);
        }
    }
    if (rc == 0) /* every entry checked: nothing was written before */
        rc = cg_batch_run(&batch, exec, e_out, i_out, then);
    cg_batch_free(&batch);
    return rc;
}

const char cg_patch_doc[] =
    "patch(exec, entries, values) -> None or (entry, index, CUresult)\n\n"
    "Rebind parameters in nodes of executable `exec`. `values` is a tuple of ints (addresses,\n"
    "written as 64-bit little-endian words) and bytes (packed scalars). Each entry is a tuple\n"
    "(set_params, structure, size, writes, params, nodes): the structure at address `structure`\n"
    "(`size` bytes: a kernel's argument buffer, or a node's CUgraphNodeParams) gets, for each\n"
    "(offset, index, addend) int64 triple of the bytes `writes`, values[index] + addend (bytes:\n"
    "copied, addend 0) at that offset; then the entry point at address `set_params`\n"
    "(cuGraphExecKernelNodeSetParams_v2 or cuGraphExecNodeSetParams) is called on every driver node\n"
    "in the list `nodes` (ints) with the parameters at address `params`. None when every call\n"
    "succeeded; else where the driver refused and its CUresult (everything before was set, the\n"
    "structures of the later entries are as they were). A malformed entry: nothing written or set.";

PyObject *
cg_patch(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 3 || !PyList_CheckExact(argv[1]) || !PyTuple_CheckExact(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "patch(exec: int, entries: list, values: tuple)");
        return NULL;
    }
    void *exec;
    if (address_of(argv[0], "exec", &exec) < 0)
        return NULL;
    PyObject *entries = argv[1], *values = argv[2];
    Py_ssize_t nvalues = PyTuple_GET_SIZE(values);
    cg_patch_value small[8], *vals = small;
    if (nvalues > 8 && (vals = PyMem_New(cg_patch_value, (size_t)nvalues)) == NULL)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    Py_INCREF(entries); /* held across the driver calls, with the values (bytes read in place) */
    Py_INCREF(values);
    if (patch_values(values, vals) == 0) {
        Py_ssize_t e = 0, i = 0;
        int rc = cg_patch_entries(exec, entries, vals, nvalues, &e, &i, NULL);
        if (rc >= 0)
            result = rc > 0 ? Py_BuildValue("(nni)", e, i, rc) : Py_NewRef(Py_None);
    }
    Py_DECREF(values);
    Py_DECREF(entries);
    if (vals != small)
        PyMem_Free(vals);
    return result;
}
