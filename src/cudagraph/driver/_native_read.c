/*
 * Reading driver graphs for lifting: read_nodes (every node's type and kernel parameters) and
 * kernel_args (the argument values behind a kernel node's kernelParams).
 *
 * Python twins (see cudagraph.driver.c_entry): read_nodes, cudagraph.driver.graph_reader.GraphReader.read
 * (per node, through ctypes); kernel_args, cudagraph.materialize.lift._KernelEntry.args.
 */
#include "_native.h"

/* CUresult cuGraphNodeGetType(CUgraphNode, CUgraphNodeType*) */
typedef int (*cg_get_type_fn)(void *, int *);
/* CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*) */
typedef int (*cg_get_kernel_fn)(void *, cg_kernel_params_v3 *);

const char cg_read_nodes_doc[] =
    "read_nodes(get_type, get_kernel, nodes) -> list or (index, CUresult, call)\n\n"
    "The type of every driver node in the list `nodes` (ints) and, for kernel nodes, their\n"
    "parameters, through cuGraphNodeGetType and cuGraphKernelNodeGetParams_v2 (addresses\n"
    "get_type, get_kernel): per node (type, None) or (type, (func, gridDimX, gridDimY,\n"
    "gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, kernelParams, extra, kern)).\n"
    "On a refusal: the position, the CUresult and the name of the call refused.";

PyObject *
cg_read_nodes(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
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
        /* Read at every step: Python code (the collector, a driver that is a Python callback) may shorten it. */
        if (i >= PyList_GET_SIZE(nodes)) {
            PyErr_SetString(PyExc_RuntimeError, "read_nodes: the list of nodes was shortened while it was read");
            goto fail;
        }
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

const char cg_kernel_args_doc[] =
    "kernel_args(address, sizes) -> tuple of bytes, or int\n\n"
    "The argument values behind a kernel node's kernelParams `address` (a void*[n] array),\n"
    "argument i being sizes[i] bytes, copied. An int instead: the index of the first NULL\n"
    "argument pointer, or -1 when `address` itself is NULL.";

PyObject *
cg_kernel_args(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
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
