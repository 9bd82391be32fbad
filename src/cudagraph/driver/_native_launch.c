/*
 * Stream launches in C: LaunchKernel (one kernel's prepared parameter layout and argument buffer)
 * and StreamLauncher (cudagraph.launch on a stream, Graph.run's runs of kernel nodes, and the
 * capture backend's runs of kernel nodes, each ending in cuLaunchKernel called through its address).
 *
 * Python twins (see cudagraph.driver.c_entry): StreamLauncher.launch, the stream path of
 * cudagraph.frontends.launch.launch; StreamLauncher.issue, cudagraph.ops.kinds.kernel_issue.issue_kernel
 * called on each node; StreamLauncher.capture, the Python loop of cudagraph.materialize.capture.
 *
 * cuda.bindings' cuLaunchKernel converts its eleven arguments on every call (bench/cpu_overhead.py:
 * against cuda.core.launch); here a call is the function pointer. Everything that is not the common case (a target,
 * configuration or kernel not learned yet, arguments whose types have no learned kinds, launch
 * attributes) is declined (-1, or the index of the node) and handled by the Python path, which
 * checks and names every error, learns, and registers what this side reads:
 *
 *   - target types and how to read their stream handle (learn_target), set by the Python path;
 *   - LaunchConfig objects checked plain (remember_config; every use checks that the object still
 *     holds the same values);
 *   - the LaunchKernel of each kernel, in the dict `kernels` (id(kernel) -> LaunchKernel) owned by
 *     the Python side; the argument kinds are the dict KernelInfo learns, packed by cg_pack
 *     (_native_pack.c), the packer of KernelLoop too.
 *
 * A launcher does not re-enter: a call made while one runs (from Python code it runs, or from
 * another thread while the GIL is released around the driver call) is declined and takes the Python
 * path, which packs into other buffers. The GIL is released around each driver call, as cuda.core
 * does (a launch may block when the stream's queue is full). A LaunchKernel's buffer belongs to one
 * call at a time, from its packing to the end of the driver calls that read it (cg_lk_take): a second
 * launcher over the same kernels, or LaunchKernel.pack, declines while it is taken.
 *
 * Python code a call runs (see _native.h) may change the node, arguments or tables being read: what
 * is used across it is held, a node is read again after it, and whatever the call releases (the last
 * reference to a kernel or an argument tuple may run a __del__) is released before that last reading.
 */
#include "_native_launch.h"

/* ------------------------------------------------------------------ LaunchKernel */

static void
lk_dealloc(LaunchKernel *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->kernel);
    cg_packer_clear(&self->pk);
    PyMem_Free(self->pk.offsets); /* (sizes share the allocation) */
    PyMem_Free(self->pk.buf);
    PyMem_Free(self->ptrs);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
lk_traverse(LaunchKernel *self, visitproc visit, void *arg)
{
    Py_VISIT(self->kernel);
    Py_VISIT(self->pk.kinds);
    Py_VISIT(self->pk.last_key);
    Py_VISIT(self->pk.last_kinds);
    return 0;
}

static int
lk_clear(LaunchKernel *self)
{
    Py_CLEAR(self->kernel);
    cg_packer_clear(&self->pk);
    return 0;
}

static int
lk_init(LaunchKernel *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"source", "func", "kinds", "offsets", "sizes", NULL};
    PyObject *kernel, *func, *kinds, *offsets, *sizes;
    if (self->kernel != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "LaunchKernel is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!O!O!", kwlist, &kernel, &func, &PyDict_Type, &kinds,
                                     &PyTuple_Type, &offsets, &PyTuple_Type, &sizes))
        return -1;
    void *f;
    if (address_of(func, "func", &f) < 0)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(offsets);
    if (f == NULL || n != PyTuple_GET_SIZE(sizes) || n > MAX_LAUNCH_PARAMS) {
        PyErr_Format(PyExc_ValueError, "LaunchKernel: func must not be NULL and offsets, sizes of one length <= %d",
                     MAX_LAUNCH_PARAMS);
        return -1;
    }
    Py_ssize_t *at = PyMem_Calloc((size_t)(2 * n + 1), sizeof(Py_ssize_t));
    if (at == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t size = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t off = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
        Py_ssize_t sz = PyLong_AsSsize_t(PyTuple_GET_ITEM(sizes, i));
        if ((off == -1 || sz == -1) && PyErr_Occurred()) {
            PyMem_Free(at);
            return -1;
        }
        if (off < 0 || sz < 0 || off > PY_SSIZE_T_MAX / 2 || sz > PY_SSIZE_T_MAX / 2) {
            PyMem_Free(at);
            PyErr_Format(PyExc_ValueError, "LaunchKernel: parameter %zd has %zd bytes at offset %zd", i, sz, off);
            return -1;
        }
        at[i] = off;
        at[n + i] = sz;
        if (off + sz > size)
            size = off + sz;
    }
    char *buf = PyMem_Calloc((size_t)size, 1);
    void **ptrs = PyMem_Calloc((size_t)(n ? n : 1), sizeof(void *));
    if (buf == NULL || ptrs == NULL) {
        PyMem_Free(at);
        PyMem_Free(buf);
        PyMem_Free(ptrs);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        ptrs[i] = buf + at[i];
    self->func = f;
    self->size = size;
    self->ptrs = ptrs;
    self->pk = (cg_packer){.kinds = Py_NewRef(kinds), .buf = buf, .n = n, .offsets = at, .sizes = at + n};
    self->kernel = Py_NewRef(kernel); /* last: initialized */
    return 0;
}

PyDoc_STRVAR(lk_pack_doc, "pack(args) -> bytes or None\n\n"
                          "Pack `args` by the learned kinds and return the whole argument buffer (None: declined,\n"
                          "the Python packer takes them, or a launch is using the buffer). For tests: launches\n"
                          "pack the same way.");

static PyObject *
lk_pack_method(LaunchKernel *self, PyObject *args)
{
    if (!cg_lk_take(self))
        Py_RETURN_NONE;
    Py_INCREF(args);
    int ok = cg_lk_pack(self, args, NULL, NULL);
    Py_DECREF(args);
    PyObject *out = ok ? PyBytes_FromStringAndSize(self->pk.buf, self->size) : Py_NewRef(Py_None);
    cg_lk_give(self);
    return out;
}

static PyObject *
lk_get_kernel(LaunchKernel *self, void *closure)
{
    return Py_NewRef(self->kernel == NULL ? Py_None : self->kernel);
}

static PyMethodDef lk_methods[] = {
    {"pack", (PyCFunction)lk_pack_method, METH_O, lk_pack_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef lk_getset[] = {
    {"source", (getter)lk_get_kernel, NULL, "The kernel object it was prepared for.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(lk_doc, "LaunchKernel(source, func, kinds, offsets, sizes)\n\n"
                     "The kernel `source` ready for stream launches: its function handle `func` (an address), its\n"
                     "parameter layout (offsets, sizes) and an argument buffer of its own; `kinds` is the\n"
                     "dict of argument kinds its KernelInfo learns (see KernelLoop.use).");

PyTypeObject cg_LaunchKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph.driver._native.LaunchKernel",
    .tp_basicsize = sizeof(LaunchKernel),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = lk_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)lk_init,
    .tp_dealloc = (destructor)lk_dealloc,
    .tp_traverse = (traverseproc)lk_traverse,
    .tp_clear = (inquiry)lk_clear,
    .tp_methods = lk_methods,
    .tp_getset = lk_getset,
};
