/*
 * Fills, 1-D copies and empty nodes written in C: the parameters a KernelLoop adds them with.
 *
 * Python twins: MemsetOps.params, MemcpyOps.params (through fill_endpoints) and EmptyOps.params, which
 * fill a CUgraphNodeParams through cuda.bindings' setters (a few µs a node). Here the node's operands
 * are read through NATIVE_SLOTS["memset_node"] and ["memcpy_node"] and written into a zeroed structure
 * field by field, as those setters write them. Any operand that is not a plain int (a parameter, a graph
 * allocation, DLPack memory), or a copy endpoint below the lowest address an allocation can have, is
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
    if (!read_uint(SLOT(node, s->ms.dst), UINT64_MAX, &dst) ||
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
    if (s->attributes == NULL || !read_uint(SLOT(node, s->mc.src), UINT64_MAX, &src) ||
        !read_uint(SLOT(node, s->mc.dst), UINT64_MAX, &dst) ||
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

int
cg_simple_know(cg_simple_kinds *s, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 6 && argc != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "simple(ctx, attributes, lowest, memset_type, memcpy_type, empty_type, set_fn=0)");
        return -1;
    }
    void *ctx, *attributes, *set_fn = NULL;
    if (address_of(argv[0], "ctx", &ctx) < 0 || address_of(argv[1], "attributes", &attributes) < 0 ||
        (argc == 7 && address_of(argv[6], "set_fn", &set_fn) < 0))
        return -1;
    unsigned long long lowest = cg_as_u64(argv[2]);
    if (lowest == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (exact_type(argv[3], "memset_type") < 0 || exact_type(argv[4], "memcpy_type") < 0 ||
        exact_type(argv[5], "empty_type") < 0)
        return -1;
    cg_memset_slots ms;
    cg_memcpy_slots mc;
    if (cg_resolve_slots((PyTypeObject *)argv[3], "memset_node", CG_SLOT_COUNT(ms), ms.at) < 0 ||
        cg_resolve_slots((PyTypeObject *)argv[4], "memcpy_node", CG_SLOT_COUNT(mc), mc.at) < 0)
        return -1;
    cg_simple_kinds old = *s;
    s->ms = ms;
    s->mc = mc;
    s->ctx = ctx;
    s->attributes = (cg_pointer_attributes_fn)attributes;
    s->lowest = lowest;
    s->set_fn = set_fn;
    s->memset_type = (PyTypeObject *)Py_NewRef(argv[3]);
    s->memcpy_type = (PyTypeObject *)Py_NewRef(argv[4]);
    s->empty_type = (PyTypeObject *)Py_NewRef(argv[5]);
    cg_simple_clear(&old);
    return 0;
}

void
cg_simple_clear(cg_simple_kinds *s)
{
    PyObject *held[3] = {(PyObject *)s->memset_type, (PyObject *)s->memcpy_type, (PyObject *)s->empty_type};
    s->memset_type = s->memcpy_type = s->empty_type = NULL; /* (before the releases, which may run Python code) */
    for (int i = 0; i < 3; i++)
        Py_XDECREF(held[i]);
}

int
cg_simple_visit(cg_simple_kinds *s, visitproc visit, void *arg)
{
    Py_VISIT(s->memset_type);
    Py_VISIT(s->memcpy_type);
    Py_VISIT(s->empty_type);
    return 0;
}
