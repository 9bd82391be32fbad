/*
 * Reading driver graphs for lifting: kernel_args (the argument values behind a kernel node's kernelParams).
 * The nodes themselves are read by lift_graph (_native_lift.c).
 *
 * Python twin (see cudagraph.driver.c_entry): cudagraph.ops.kinds.kernel.LiftedKernel.args.
 */
#include "_native.h"

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
