/*
 * The kernels a KernelLoop knows, and packing a node's arguments into a kernel's buffer.
 *
 * Python twin: the table of kernels of cudagraph.materialize.kernel_loop.KernelLoopTwin (packing:
 * cudagraph.driver.kernel_args.KernelInfo.pack, whose learned kinds this code reads).
 *
 * A table maps a kernel object (by address: no __hash__ or __eq__ runs) to its prepared layout:
 * where each parameter goes in the kernel's argument buffer, the function fields the node parameters
 * take for it, and the argument kinds the Python side learned for each sequence of argument types.
 * Explicit construction interleaves kernels freely (a model's layers, a DAG's branches), so a loop
 * looks up the node's kernel instead of handing every change of kernel back to Python
 * (bench/construction.py --cpu, user-style chain of three kernels: lowering 0.81 -> 0.11 us/node above
 * a driver that does nothing).
 */
#include "_native.h"

/* How one argument is packed (the kinds KernelInfo learns per sequence of argument types). */
enum {
    KIND_POINTER = 'P', /* a Python int: a 64-bit address */
    KIND_SCALAR = 'S',  /* a numpy scalar: its bytes (buffer protocol), exactly the parameter's size */
    KIND_BYTES = 'B',   /* bytes: exactly the parameter's size */
    KIND_HANDLE = 'H',  /* an object whose `handle` is the address (a cuda.core Buffer) */
};

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
        PyMem_Free(t->slots[i].offsets); /* (sizes share the allocation) */
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
    out[2] = e->kinds;
    out[3] = e->last_key;
    out[4] = e->last_kinds;
    out[5] = e->args;
}

/* ------------------------------------------------------------------ packing */

/* The bytes of kinds learned for the types of `args` (a tuple of nparams items), held by
 * e->last_kinds; NULL when none is known (no exception set). May run Python code (the types'
 * __hash__ and __eq__ in the dict lookup): the caller holds `args`. */
static PyObject *
entry_kinds(cg_kernel_entry *e, PyObject *args, Py_ssize_t n)
{
    PyObject *kinds = e->last_kinds; /* the entry of the previous node when its types were these */
    for (Py_ssize_t i = 0; kinds != NULL && i < n; i++) {
        if ((PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i)) != PyTuple_GET_ITEM(e->last_key, i))
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
    PyObject *table = Py_NewRef(e->kinds); /* (the lookup may run Python code) */
    kinds = PyDict_GetItemWithError(table, key);
    if (kinds == NULL || !PyBytes_CheckExact(kinds) || PyBytes_GET_SIZE(kinds) != n) {
        Py_DECREF(table);
        Py_DECREF(key);
        PyErr_Clear();
        return NULL;
    }
    /* Tuples of types and bytes: releasing the old entry runs no Python code. */
    Py_XSETREF(e->last_kinds, Py_NewRef(kinds));
    Py_XSETREF(e->last_key, key); /* n items: nparams is fixed until the entry is replaced */
    Py_DECREF(table);
    return e->last_kinds;
}

/* Write one argument `a` of kind `kind` as `size` bytes at `to`; 1, or 0 (no exception set). May run
 * Python code (int() of a handle). */
static int
pack_one(char kind, PyObject *a, char *to, Py_ssize_t size)
{
    switch (kind) {
    case KIND_POINTER:
        return size == 8 && pack_u64(a, to);
    case KIND_SCALAR: {
        Py_buffer view;
        if (PyObject_GetBuffer(a, &view, PyBUF_SIMPLE) < 0) {
            PyErr_Clear();
            return 0;
        }
        int ok = view.len == size;
        if (ok)
            memcpy(to, view.buf, (size_t)size);
        PyBuffer_Release(&view);
        return ok;
    }
    case KIND_BYTES:
        if (!PyBytes_CheckExact(a) || PyBytes_GET_SIZE(a) != size)
            return 0;
        memcpy(to, PyBytes_AS_STRING(a), (size_t)size);
        return 1;
    case KIND_HANDLE: {
        PyObject *h = PyObject_GetAttr(a, cg_str_handle);
        if (h == NULL) {
            PyErr_Clear();
            return 0;
        }
        PyObject *v = PyLong_CheckExact(h) ? (Py_INCREF(h), h) : PyNumber_Long(h); /* int(handle), as in Python */
        Py_DECREF(h);
        if (v == NULL) {
            PyErr_Clear();
            return 0;
        }
        int ok = size == 8 && pack_u64(v, to);
        Py_DECREF(v);
        return ok;
    }
    default:
        return 0;
    }
}

int
cg_entry_pack(cg_kernel_entry *e, PyObject *args)
{
    if (e->kinds == NULL || !PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != e->nparams)
        return 0;
    Py_ssize_t n = e->nparams;
    Py_INCREF(args); /* the Python code run below (a __hash__, int(handle)) may drop the node's reference */
    PyObject *kinds = entry_kinds(e, args, n);
    if (kinds == NULL) {
        Py_DECREF(args);
        return 0;
    }
    Py_INCREF(kinds); /* e->last_kinds may be replaced by Python code run below (a nested pack) */
    /* From here on the buffer is being overwritten: whatever happens, it no longer holds e->args. */
    PyObject *old = e->args;
    e->args = NULL;
    const char *k = PyBytes_AS_STRING(kinds);
    int ok = 1;
    for (Py_ssize_t i = 0; ok && i < n; i++)
        ok = pack_one(k[i], PyTuple_GET_ITEM(args, i), e->scratch + e->offsets[i], e->sizes[i]);
    Py_DECREF(kinds);
    if (ok) {
        PyObject *prev = e->args; /* NULL, unless Python code run above packed this kernel too */
        e->args = args;           /* our reference */
        Py_XDECREF(prev);
    } else {
        Py_DECREF(args);
    }
    Py_XDECREF(old);
    return ok;
}
