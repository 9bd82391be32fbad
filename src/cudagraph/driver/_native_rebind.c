/*
 * Executable kernel-node updates: set_kernel_node (one node) and rebind (one parameter in many nodes).
 *
 * Python twins (see cudagraph.driver.c_entry): set_kernel_node, the cuda.bindings call in
 * cudagraph.ops.node_update.KernelParamsWriter.set; rebind, the cuda.bindings loop over `bindings_groups`
 * in cudagraph.executable.bind_plan.BindPlan.apply.
 *
 * The addresses handed over (argument buffers, parameter structures) are the caller's to keep alive.
 */
#include "_native.h"

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
    return PyLong_FromLong(((cg_set_kernel_fn)fn)(exec, node, params));
}

/* One group of cg_rebind_groups, `t` held by the caller. */
static int
rebind_group(void *fn, void *exec, PyObject *t, const char *data, Py_ssize_t len, Py_ssize_t *i_out)
{
    void *buf, *params;
    if (address_of(PyTuple_GET_ITEM(t, 0), "buffer", &buf) < 0 || address_of(PyTuple_GET_ITEM(t, 3), "params", &params) < 0)
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
        memcpy((char *)buf + off, data, (size_t)len);
    }
    /* The length is read at every step: a driver entry point that is a Python callback may change the list. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        void *h = PyLong_AsVoidPtr(PyList_GET_ITEM(nodes, i));
        if (h == NULL && PyErr_Occurred())
            return -1;
        int rc = ((cg_set_kernel_fn)fn)(exec, h, params);
        if (rc) {
            *i_out = i;
            return rc;
        }
    }
    return 0;
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
        Py_INCREF(t); /* held across the driver calls */
        int rc = rebind_group(fn, exec, t, data, len, i_out);
        Py_DECREF(t);
        if (rc) {
            *g_out = g;
            return rc;
        }
    }
    return 0;
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
    "was set).";

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
        word = PyLong_AsUnsignedLongLong(argv[3]); /* runs no Python code, even for an int subclass */
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
    int rc = cg_rebind_groups(fn, exec, argv[2], data, len, &g, &i);
    if (rc < 0)
        return NULL;
    if (rc > 0)
        return Py_BuildValue("(nni)", g, i, rc);
    Py_RETURN_NONE;
}
