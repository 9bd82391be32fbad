/*
 * The kernels a KernelLoop knows, and packing a node's arguments into its kernel's buffer (cg_pack,
 * _native_pack.c, the packer stream launches use too).
 *
 * Python twin: the table of kernels of cudagraph.materialize.kernel_loop.KernelLoopTwin (packing:
 * cudagraph.driver.kernel_args.KernelInfo.pack, whose learned kinds cg_pack reads).
 *
 * A table maps a kernel object (by address: no __hash__ or __eq__ runs) to its prepared layout:
 * where each parameter goes in the kernel's argument buffer, the function fields the node parameters
 * take for it, and the argument kinds the Python side learned for each sequence of argument types.
 * Explicit construction interleaves kernels freely (a model's layers, a DAG's branches), so a loop
 * looks up the node's kernel instead of handing every change of kernel back to Python
 * (bench/construction.py --cpu, user-style chain of three kernels: lower).
 */
#include "_native.h"

/* ------------------------------------------------------------------ the table */

static size_t
home(const cg_kernel_table *t, PyObject *kernel)
{
    uintptr_t p = (uintptr_t)kernel;
    return (size_t)((p >> 4) ^ (p >> 12)) & (size_t)(t->capacity - 1);
}

cg_kernel_entry *
cg_table_slot(cg_kernel_table *t, PyObject *kernel)
{
    size_t mask = (size_t)(t->capacity - 1), i = home(t, kernel);
    while (t->slots[i].kernel != NULL && t->slots[i].kernel != kernel)
        i = (i + 1) & mask;
    return &t->slots[i];
}

cg_kernel_entry *
cg_table_find(const cg_kernel_table *t, PyObject *kernel)
{
    if (t->capacity == 0)
        return NULL;
    cg_kernel_entry *e = cg_table_slot((cg_kernel_table *)t, kernel);
    return e->kernel != NULL ? e : NULL;
}

int
cg_table_reserve(cg_kernel_table *t)
{
    if (2 * (t->used + 1) <= t->capacity)
        return 0;
    Py_ssize_t cap = t->capacity ? 2 * t->capacity : 8;
    cg_kernel_entry *slots = PyMem_Calloc((size_t)cap, sizeof(cg_kernel_entry));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    cg_kernel_table grown = {slots, cap, t->used};
    for (Py_ssize_t i = 0; i < t->capacity; i++) {
        if (t->slots[i].kernel != NULL)
            *cg_table_slot(&grown, t->slots[i].kernel) = t->slots[i]; /* the references move with it */
    }
    PyMem_Free(t->slots);
    *t = grown;
    return 0;
}

void
cg_table_free(cg_kernel_table *t)
{
    for (Py_ssize_t i = 0; i < t->capacity; i++) {
        PyMem_Free(t->slots[i].pk.offsets); /* (sizes share the allocation) */
    }
    PyMem_Free(t->slots);
    t->slots = NULL;
    t->capacity = t->used = 0;
}

void
cg_entry_refs(cg_kernel_entry *e, PyObject **out)
{
    out[0] = e->kernel;
    out[1] = e->owner;
    out[2] = e->pk.kinds;
    out[3] = e->pk.last_key;
    out[4] = e->pk.last_kinds;
    out[5] = e->args;
}

/* ------------------------------------------------------------------ packing */

int
cg_entry_pack(cg_kernel_entry *e, PyObject *args, cg_handle_memo *memo, const cg_simple_kinds *params)
{
    Py_INCREF(args); /* the Python code cg_pack may run (a __hash__, int(handle)) may drop the node's reference */
    /* From here on the buffer may be overwritten: whatever happens, it no longer holds e->args (the
     * Python twin forgets it too when it declines). */
    PyObject *old = e->args;
    e->args = NULL;
    int ok = cg_pack(&e->pk, args, memo, params);
    if (ok == 2) { /* packed from the bindings: not remembered as these arguments' bytes */
        Py_DECREF(args);
        ok = 1;
    } else if (ok) {
        PyObject *prev = e->args; /* NULL, unless Python code run above packed this kernel too */
        e->args = args;           /* our reference */
        Py_XDECREF(prev);
    } else {
        Py_DECREF(args);
    }
    Py_XDECREF(old);
    return ok;
}

Py_ssize_t *
cg_use_layout(PyObject *const *argv, void **scratch, void **function, void **kernel_params, int *library)
{
    Py_ssize_t n = PyTuple_GET_SIZE(argv[2]), size;
    if (address_of(argv[4], "scratch", scratch) < 0 || address_of(argv[6], "function", function) < 0 ||
        address_of(argv[8], "kernel_params", kernel_params) < 0)
        return NULL;
    size = PyLong_AsSsize_t(argv[5]);
    if (size < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "use: scratch_size must be non-negative");
        return NULL;
    }
    if ((*library = PyObject_IsTrue(argv[7])) < 0)
        return NULL;
    if (n > 0 && *kernel_params == NULL) {
        PyErr_SetString(PyExc_ValueError, "use: kernel_params must not be NULL for a kernel with parameters");
        return NULL;
    }
    Py_ssize_t *layout = PyMem_Malloc((size_t)(2 * n + 1) * sizeof(Py_ssize_t));
    if (layout == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t off = PyLong_AsSsize_t(PyTuple_GET_ITEM(argv[2], i));
        Py_ssize_t sz = PyLong_AsSsize_t(PyTuple_GET_ITEM(argv[3], i));
        if ((off == -1 || sz == -1) && PyErr_Occurred()) {
            PyMem_Free(layout);
            return NULL;
        }
        if (off < 0 || sz < 0 || off > size - sz || *scratch == NULL) {
            PyErr_Format(PyExc_ValueError, "use: parameter %zd (%zd bytes at %zd) is outside the %zd-byte buffer", i,
                         sz, off, size);
            PyMem_Free(layout);
            return NULL;
        }
        layout[i] = off;
        layout[n + i] = sz;
    }
    return layout;
}
