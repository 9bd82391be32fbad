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
 * (bench/construction.py --cpu, user-style chain of three kernels: lowering 0.81 -> 0.11 us/node above
 * a driver that does nothing).
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
cg_entry_pack(cg_kernel_entry *e, PyObject *args, cg_handle_memo *memo)
{
    Py_INCREF(args); /* the Python code cg_pack may run (a __hash__, int(handle)) may drop the node's reference */
    /* From here on the buffer may be overwritten: whatever happens, it no longer holds e->args (the
     * Python twin forgets it too when it declines). */
    PyObject *old = e->args;
    e->args = NULL;
    int ok = cg_pack(&e->pk, args, memo);
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
