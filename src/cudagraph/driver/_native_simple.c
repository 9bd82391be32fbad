/*
 * Fills, 1-D copies and empty nodes written in C: the parameters a KernelLoop adds them with (and a
 * StreamLauncher issues them by).
 *
 * Python twins: MemsetOps.params, MemcpyOps.params (through fill_endpoints) and EmptyOps.params, which
 * fill a CUgraphNodeParams through cuda.bindings' setters (a few µs a node). Here the node's operands
 * are read through NATIVE_SLOTS["memset_node"] and ["memcpy_node"] and written into a zeroed structure
 * field by field, as those setters write them. An address operand is a plain int, or a parameter (Param,
 * or ParamAt: a Param and a byte offset) whose name the bindings map to a plain int, as
 * ops.operands.pointer_value resolves it; any other operand (a graph allocation, DLPack memory, a
 * parameter without bindings), or a copy endpoint below the lowest address an allocation can have, is
 * left to the Python twin, which resolves it or names the error.
 */
#include "_native.h"

/* `v` (an exact int) as an unsigned value of at most `max`: 1, or 0 (no exception set). */
static int
read_uint(PyObject *v, unsigned long long max, unsigned long long *out)
{
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    unsigned long long x = cg_as_u64(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (x > max)
        return 0;
    *out = x;
    return 1;
}

#define SIZE_MAX_U ((unsigned long long)SIZE_MAX)

/* The address `v` stands for (borrowed, held by the node the caller holds): an exact int, or a parameter
 * bound to one (ParamAt: plus its offset, as ParamAt.value adds it). 1, or 0 (no exception set). Runs no
 * Python code: the bindings are a dict of exact str keys, looked up with an exact str. */
static int
read_address(const cg_simple_kinds *s, PyObject *v, unsigned long long *out)
{
    if (v != NULL && PyLong_CheckExact(v))
        return read_uint(v, UINT64_MAX, out);
    if (v == NULL || s->bindings == NULL)
        return 0;
    unsigned long long offset = 0;
    if (Py_TYPE(v) == s->param_at_type) {
        if (!read_uint(SLOT(v, s->pm.at_offset), UINT64_MAX, &offset))
            return 0;
        v = SLOT(v, s->pm.at_param);
    }
    if (v == NULL || Py_TYPE(v) != s->param_type)
        return 0;
    PyObject *name = SLOT(v, s->pm.name), *bound;
    if (name == NULL || !PyUnicode_CheckExact(name) || (bound = PyDict_GetItemWithError(s->bindings, name)) == NULL) {
        PyErr_Clear();
        return 0;
    }
    unsigned long long base;
    if (!read_uint(bound, UINT64_MAX, &base) || base + offset < base) /* (a sum past 64 bits: Python says) */
        return 0;
    *out = base + offset;
    return 1;
}

/* The memory type of a copy endpoint as MemcpyOps' twin (ops.operands.memory_type) decides it:
 * UNIFIED for memory CUDA knows, HOST for an address it does not know (pageable host memory); 0 for an
 * address below `lowest` (Python raises). */
static int
memory_type(cg_simple_kinds *s, unsigned long long ptr)
{
    for (int i = 0; i < s->seen; i++)
        if (s->seen_ptr[i] == ptr)
            return s->seen_type[i];
    int attr = CG_ATTRIBUTE_MEMORY_TYPE;
    unsigned long long value = 0; /* (a 4-byte attribute fills its low half: little-endian) */
    void *data = &value;
    int rc = s->attributes(1, &attr, &data, ptr);
    int type = rc == 0 && value != 0 ? CG_MEMORY_UNIFIED : ptr < s->lowest ? 0 : CG_MEMORY_HOST;
    if (type != 0) {
        int at = s->seen < CG_SEEN_TYPES ? s->seen++ : s->seen_next;
        s->seen_next = (at + 1) % CG_SEEN_TYPES;
        s->seen_ptr[at] = ptr;
        s->seen_type[at] = type;
    }
    return type;
}

void
cg_simple_forget(cg_simple_kinds *s)
{
    s->seen = s->seen_next = 0;
}

static void
write_end(cg_memcpy_end *e, int type, unsigned long long ptr)
{
    e->memoryType = type;
    if (type == CG_MEMORY_HOST)
        e->host = (const void *)(uintptr_t)ptr;
    else
        e->device = ptr;
}

static int
write_memset(const cg_simple_kinds *s, PyObject *node, cg_memset_params *m)
{
    unsigned long long dst, value, esize, width, height, pitch;
    if (!read_address(s, SLOT(node, s->ms.dst), &dst) ||
        !read_uint(SLOT(node, s->ms.value), 0xFFFFFFFFull, &value) ||
        !read_uint(SLOT(node, s->ms.element_size), 4, &esize) ||
        !read_uint(SLOT(node, s->ms.width), SIZE_MAX_U, &width) ||
        !read_uint(SLOT(node, s->ms.height), SIZE_MAX_U, &height) ||
        !read_uint(SLOT(node, s->ms.pitch), SIZE_MAX_U, &pitch))
        return 0;
    m->dst = dst;
    m->pitch = height > 1 ? (size_t)pitch : 0;
    m->value = (unsigned int)value;
    m->elementSize = (unsigned int)esize;
    m->width = (size_t)width;
    m->height = (size_t)height;
    m->ctx = s->ctx;
    return 1;
}

static int
write_memcpy(cg_simple_kinds *s, PyObject *node, cg_memcpy_params *c)
{
    unsigned long long src, dst, nbytes;
    if (s->attributes == NULL || !read_address(s, SLOT(node, s->mc.src), &src) ||
        !read_address(s, SLOT(node, s->mc.dst), &dst) ||
        !read_uint(SLOT(node, s->mc.nbytes), SIZE_MAX_U, &nbytes))
        return 0;
    int st = memory_type(s, src), dt;
    if (st == 0 || (dt = memory_type(s, dst)) == 0)
        return 0;
    write_end(&c->src, st, src);
    write_end(&c->dst, dt, dst);
    c->widthInBytes = (size_t)nbytes;
    c->height = 1;
    c->depth = 1;
    c->copyCtx = s->ctx;
    return 1;
}

int
cg_simple_is(const cg_simple_kinds *s, PyObject *node)
{
    PyTypeObject *t = Py_TYPE(node);
    return t != NULL && (t == s->memset_type || t == s->memcpy_type || t == s->empty_type);
}

int
cg_simple_write(cg_simple_kinds *s, PyObject *node, cg_graph_node_params *p)
{
    PyTypeObject *t = Py_TYPE(node);
    memset(p, 0, sizeof *p);
    if (t == s->empty_type) {
        p->type = CG_NODE_EMPTY;
        return 1;
    }
    if (t == s->memset_type) {
        p->type = CG_NODE_MEMSET;
        return write_memset(s, node, (cg_memset_params *)&p->u);
    }
    if (t == s->memcpy_type) {
        p->type = CG_NODE_MEMCPY;
        return write_memcpy(s, node, (cg_memcpy_params *)&p->u);
    }
    return 0;
}

/* ------------------------------------------------------------------ knowing the kinds */

static int
exact_type(PyObject *obj, const char *what)
{
    if (!PyType_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "simple: %s must be a type", what);
        return -1;
    }
    return 0;
}

/* `obj` as an optional exact type (None: NULL): 0, or -1 with a TypeError. */
static int
optional_type(PyObject *obj, const char *what, PyTypeObject **out)
{
    *out = NULL;
    if (obj == Py_None)
        return 0;
    if (exact_type(obj, what) < 0)
        return -1;
    *out = (PyTypeObject *)obj;
    return 0;
}

int
cg_simple_know(cg_simple_kinds *s, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 6 && argc != 7 && argc != 10) {
        PyErr_SetString(PyExc_TypeError, "simple(ctx, attributes, lowest, memset_type, memcpy_type, empty_type, "
                                         "set_fn=0, param_type=None, param_at_type=None, bindings=None)");
        return -1;
    }
    void *ctx, *attributes, *set_fn = NULL;
    if (address_of(argv[0], "ctx", &ctx) < 0 || address_of(argv[1], "attributes", &attributes) < 0 ||
        (argc >= 7 && address_of(argv[6], "set_fn", &set_fn) < 0))
        return -1;
    unsigned long long lowest = cg_as_u64(argv[2]);
    if (lowest == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (exact_type(argv[3], "memset_type") < 0 || exact_type(argv[4], "memcpy_type") < 0 ||
        exact_type(argv[5], "empty_type") < 0)
        return -1;
    PyTypeObject *pt = NULL, *pat = NULL;
    PyObject *bindings = argc == 10 && argv[9] != Py_None ? argv[9] : NULL;
    if (argc == 10 && (optional_type(argv[7], "param_type", &pt) < 0 ||
                       optional_type(argv[8], "param_at_type", &pat) < 0))
        return -1;
    if ((pt == NULL) != (pat == NULL) || (bindings != NULL && !PyDict_CheckExact(bindings))) {
        PyErr_SetString(PyExc_TypeError, "simple: param_type and param_at_type are both types or both None, and "
                                         "bindings a dict or None");
        return -1;
    }
    cg_memset_slots ms;
    cg_memcpy_slots mc;
    cg_param_slots pm = {{0, 0, 0}};
    if (cg_resolve_slots((PyTypeObject *)argv[3], "memset_node", CG_SLOT_COUNT(ms), ms.at) < 0 ||
        cg_resolve_slots((PyTypeObject *)argv[4], "memcpy_node", CG_SLOT_COUNT(mc), mc.at) < 0 ||
        (pt != NULL && (cg_resolve_slots(pt, "parameter", 1, &pm.name) < 0 ||
                        cg_resolve_slots(pat, "parameter_at", 2, &pm.at_param) < 0)))
        return -1;
    cg_simple_kinds old = *s;
    s->ms = ms;
    s->mc = mc;
    s->pm = pm;
    s->ctx = ctx;
    s->attributes = (cg_pointer_attributes_fn)attributes;
    s->lowest = lowest;
    s->set_fn = set_fn;
    s->memset_type = (PyTypeObject *)Py_NewRef(argv[3]);
    s->memcpy_type = (PyTypeObject *)Py_NewRef(argv[4]);
    s->empty_type = (PyTypeObject *)Py_NewRef(argv[5]);
    s->param_type = (PyTypeObject *)Py_XNewRef(pt);
    s->param_at_type = (PyTypeObject *)Py_XNewRef(pat);
    s->bindings = Py_XNewRef(bindings);
    cg_simple_clear(&old);
    return 0;
}

int
cg_simple_bind(cg_simple_kinds *s, PyObject *bindings)
{
    if (bindings == Py_None)
        bindings = NULL;
    if (bindings != NULL && !PyDict_CheckExact(bindings)) {
        PyErr_SetString(PyExc_TypeError, "bindings must be a dict or None");
        return -1;
    }
    PyObject *old = s->bindings;
    s->bindings = Py_XNewRef(bindings);
    Py_XDECREF(old); /* (after the new one is in place: its release may run Python code) */
    return 0;
}

void
cg_simple_clear(cg_simple_kinds *s)
{
    PyObject *held[6] = {(PyObject *)s->memset_type, (PyObject *)s->memcpy_type,  (PyObject *)s->empty_type,
                         (PyObject *)s->param_type,  (PyObject *)s->param_at_type, s->bindings};
    s->memset_type = s->memcpy_type = s->empty_type = s->param_type = s->param_at_type = NULL;
    s->bindings = NULL; /* (before the releases, which may run Python code) */
    for (int i = 0; i < 6; i++)
        Py_XDECREF(held[i]);
}

int
cg_simple_visit(cg_simple_kinds *s, visitproc visit, void *arg)
{
    Py_VISIT(s->memset_type);
    Py_VISIT(s->memcpy_type);
    Py_VISIT(s->empty_type);
    Py_VISIT(s->param_type);
    Py_VISIT(s->param_at_type);
    Py_VISIT(s->bindings);
    return 0;
}
