/*
 * Packing a kernel's arguments in C: the one packer of the kernel loop (cg_entry_pack in
 * _native_kernels.c: lowering and setting runs of kernel nodes) and of stream launches (LaunchKernel in
 * _native_launch.c: cudagraph.launch, Graph.run, the capture backend).
 *
 * Python twin: cudagraph.driver.kernel_args.KernelInfo.pack, whose _learn writes the kinds read here
 * (one letter per argument, for each sequence of argument types it packs without its slow path).
 * Anything else is declined (0, no exception set): the Python packer takes the arguments, and names
 * the node and the argument at fault with a typed error from cudagraph.errors.
 *
 * A run of packs (a KernelLoop's run, Graph.run's issue() or capture()) passes its cg_handle_memo: an
 * object whose `handle` was read last is not read again while it comes again (see _native.h).
 *
 * The Python code a call may run (a type's __hash__ or __eq__ in the dict lookup, int() of a handle,
 * releasing the entry used last) may pack with the same packer again: what is used across it (the
 * argument tuple, the bytes of kinds) is held by a strong reference, and the packer's own fields are
 * whole before anything is released.
 */
#include "_native.h"

/* The bytes of kinds learned for the types of `args` (a tuple of p->n items), a new reference; NULL
 * when none is known (no exception set). May run Python code (a type's __hash__ or __eq__, releasing
 * the entry used last). */
static PyObject *
packer_kinds(cg_packer *p, PyObject *args)
{
    Py_ssize_t n = p->n;
    PyObject *kinds = p->last_kinds; /* the entry of the previous call when its types were these */
    for (Py_ssize_t i = 0; kinds != NULL && i < n; i++) {
        if ((PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i)) != PyTuple_GET_ITEM(p->last_key, i))
            kinds = NULL;
    }
    if (kinds != NULL)
        return Py_NewRef(kinds);
    PyObject *key = PyTuple_New(n);
    if (key == NULL) {
        PyErr_Clear();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(key, i, Py_NewRef((PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i))));
    PyObject *table = Py_NewRef(p->kinds); /* (the lookup may run Python code) */
    kinds = PyDict_GetItemWithError(table, key);
    if (kinds == NULL || !PyBytes_CheckExact(kinds) || PyBytes_GET_SIZE(kinds) != n) {
        Py_DECREF(table);
        Py_DECREF(key);
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(kinds); /* ours */
    Py_DECREF(table);
    /* Remember them (n items: the layout is fixed while p is in use); the old entry is released last. */
    PyObject *old_key = p->last_key, *old_kinds = p->last_kinds;
    p->last_key = key;
    p->last_kinds = Py_NewRef(kinds);
    Py_XDECREF(old_key);
    Py_XDECREF(old_kinds);
    return kinds;
}

/* The value bound to Param `a` in `params`' bindings, written as `size` bytes at `to`: a pointer parameter's
 * address (an exact int, 8 bytes) or a scalar parameter's bytes (exact bytes of that size: the Python side's
 * compiled_bindings writes a numpy value so). 1, or 0 (no exception set: no bindings, not the Param type, a
 * name that is not an exact str, unbound, or a value of another kind or size). Runs no Python code (a
 * lookup by an exact str). */
static int
pack_param(PyObject *a, char *to, Py_ssize_t size, const cg_simple_kinds *params)
{
    if (params == NULL || params->param_type == NULL || params->bindings == NULL || Py_TYPE(a) != params->param_type)
        return 0;
    PyObject *name = SLOT(a, params->pm.name);
    if (name == NULL || !PyUnicode_CheckExact(name))
        return 0;
    PyObject *v = PyDict_GetItemWithError(params->bindings, name);
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (PyBytes_CheckExact(v) && PyBytes_GET_SIZE(v) == size) {
        memcpy(to, PyBytes_AS_STRING(v), (size_t)size);
        return 1;
    }
    return size == 8 && PyLong_CheckExact(v) && pack_u64(v, to);
}

/* Write one argument `a` of kind `kind` as `size` bytes at `to`; 1, or 0 (no exception set). May run
 * Python code (reading `handle`, int() of it, releasing the memo's object). */
static int
pack_one(char kind, PyObject *a, char *to, Py_ssize_t size, cg_handle_memo *memo, const cg_simple_kinds *params)
{
    switch (kind) {
    case KIND_PARAM:
        return pack_param(a, to, size, params);
    case KIND_POINTER:
        return size == 8 && PyLong_CheckExact(a) && pack_u64(a, to); /* (an int subclass is not a pointer) */
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
    case KIND_VALUE: /* (the exact type was checked when the kind was learned: kernel_args._value_after_header) */
        if ((size_t)Py_TYPE(a)->tp_basicsize < sizeof(PyObject) + (size_t)size)
            return 0;
        memcpy(to, (char *)a + sizeof(PyObject), (size_t)size);
        return 1;
    case KIND_BYTES:
        if (!PyBytes_CheckExact(a) || PyBytes_GET_SIZE(a) != size)
            return 0;
        memcpy(to, PyBytes_AS_STRING(a), (size_t)size);
        return 1;
    case KIND_HANDLE: {
        if (memo != NULL && memo->obj == a && size == 8) {
            memcpy(to, &memo->word, 8);
            return 1;
        }
        PyObject *h = PyObject_GetAttr(a, cg_str_handle);
        if (h == NULL) {
            PyErr_Clear();
            return 0;
        }
        PyObject *v = PyLong_CheckExact(h) ? Py_NewRef(h) : PyNumber_Long(h); /* int(handle), as in Python */
        Py_DECREF(h);
        if (v == NULL) {
            PyErr_Clear();
            return 0;
        }
        int ok = size == 8 && pack_u64(v, to);
        Py_DECREF(v);
        if (ok && memo != NULL) {
            memcpy(&memo->word, to, 8);
            Py_XSETREF(memo->obj, Py_NewRef(a)); /* (the old one's release may run Python code) */
        }
        return ok;
    }
    case KIND_TENSOR:
        return size == 8 && cg_tensor_pointer(a, to);
    default:
        return 0;
    }
}

int
cg_pack(cg_packer *p, PyObject *args, cg_handle_memo *memo, const cg_simple_kinds *params)
{
    Py_ssize_t n = p->n;
    if (p->kinds == NULL || !PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != n)
        return 0;
    PyObject *kinds = packer_kinds(p, args); /* ours: the code run below may replace p->last_kinds */
    if (kinds == NULL)
        return 0;
    const char *k = PyBytes_AS_STRING(kinds);
    int ok = 1, bound = 0;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        ok = pack_one(k[i], PyTuple_GET_ITEM(args, i), p->buf + p->offsets[i], p->sizes[i], memo, params);
        bound |= k[i] == KIND_PARAM;
    }
    Py_DECREF(kinds);
    return ok && bound ? 2 : ok;
}

void
cg_packer_clear(cg_packer *p)
{
    Py_CLEAR(p->kinds);
    Py_CLEAR(p->last_key);
    Py_CLEAR(p->last_kinds);
}
