/*
 * cudagraph.definition._define (_define_ops.c): OpMethod, the compiled path of Graph.memset, Graph.memcpy,
 * Graph.empty and Graph.join for the builders' common case.
 *
 * Python twins: MemoryOpBuilders.memset (cudagraph.definition.kinds.memory_ops), CopyBuilders.memcpy (kinds.copy),
 * StructureBuilders.empty and .join (kinds.structure), the Python methods this wraps (`func`, `__wrapped__`),
 * which every call the compiled path does not take goes to. Their frames (up to ten keywords, a label, the
 * operand reads, the size checks) cost most of a fill's or copy's define time (bench/cpu_overhead.py: compiled vs
 * Python).
 *
 * The path takes a call when
 * - the graph is of a type the placer learned (KernelMethod's graphs table), `after` is None or usable there (a
 *   node or distinct nodes of this graph, cg_after_pass) and `name` is None or an exact str;
 * - every operand is an exact int address in 1..2**64-1, or an object of a type the Python path read as a
 *   cuda.core Buffer before (addresses.BUFFER_TYPES: no instance dict, no attribute hooks, no array interface)
 *   whose `handle` is an exact int or of a type the Python path turned into an address before
 *   (addresses.HANDLE_TYPES), nonzero, and whose `size` is an exact int >= 0; or an exact numpy array whose
 *   memory is contiguous (its buffer: data and length, as its `__array_interface__` gives them; host memory);
 * - memset: `value` an exact int in the range of `element_size` (None or an exact 1, 2 or 4), or a numpy scalar of
 *   1, 2 or 4 bytes of the types handed over (memory_ops.FILL_SCALARS), its bytes the bits, its size the element
 *   size (which `element_size` may repeat); `count` or `width`
 *   (not both) an exact int above 0, or neither and a Buffer `dst` (the count is its size over the element size,
 *   above 0, and the fill is 1-D); `height` an exact int above 0 (default 1); `pitch` None or an exact int above 0
 *   and at least a row, a multiple of the element size when the fill is 2-D; the extent within a Buffer's size;
 * - memcpy: `nbytes` an exact int above 0, or None with a Buffer operand (src's size, else dst's); within each
 *   Buffer's size;
 * - empty: keywords only; join: no `after` (the Python method merges it with the nodes), the nodes joined one
 *   node, one list or tuple of nodes, or several nodes, usable as `after` is.
 * Every size is below 2**63, every product computed without overflow. Anything else returns to the Python method
 * before anything is changed, and its answer (node or error) is the answer; it then reads a Buffer operand this
 * path read before declining once more.
 *
 * The node is the twin's: the address (an int), the value's bits masked to the element size, the sizes as given
 * (the very int objects) or computed, `_keep` holding each Buffer (None for an int). The placing is
 * cg_place_node's (_define_place.c): the state of the graph and of `after` is read after the last Python code
 * (a Buffer's properties, a collection started by an allocation).
 */
#include "_define.h"
#include <limits.h>

enum { OP_MEMSET, OP_MEMCPY, OP_EMPTY, OP_JOIN };
#define OP_ARGS 9  /* the most parameters of a builder (memset's) */
#define OP_SLOTS 7 /* the most own slots of a node (MemsetNode's) */

/* Parameters by builder, in signature order: the first `positional` may be given positionally. */
static const char *const memset_names[] = {"dst",    "value", "count", "element_size", "width",
                                           "height", "pitch", "after", "name"};
static const char *const memcpy_names[] = {"dst", "src", "nbytes", "after", "name"};
static const char *const place_names[] = {"after", "name"}; /* empty (keywords only) and join (after *nodes) */
enum { MS_DST, MS_VALUE, MS_COUNT, MS_ESIZE, MS_WIDTH, MS_HEIGHT, MS_PITCH, MS_AFTER, MS_NAME };
enum { MC_DST, MC_SRC, MC_NBYTES, MC_AFTER, MC_NAME };
/* Own slots, in the order of the names handed over (OP_SLOTS in compiled_kernel.py). */
enum { SS_DST, SS_VALUE, SS_ESIZE, SS_WIDTH, SS_HEIGHT, SS_PITCH, SS_KEEP };
enum { SC_DST, SC_SRC, SC_NBYTES, SC_KEEP };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int kind;                 /* OP_MEMSET, OP_MEMCPY, OP_EMPTY, OP_JOIN */
    int nparams, positional;  /* parameters of the builder, of which positional */
    PyObject *func;           /* the Python method (the twin) */
    KernelMethod *km;         /* the placer and its learned graph and node types */
    PyTypeObject *ntype;      /* MemsetNode, MemcpyNode, EmptyNode */
    PyObject *buffer_src, *handle_src; /* addresses.BUFFER_TYPES, addresses.HANDLE_TYPES */
    PyObject *names[OP_ARGS]; /* interned parameter names */
    PyObject *label;          /* the default name: the kind's */
    PyObject *str_handle, *str_size;
    Py_ssize_t at[OP_SLOTS];
    Py_ssize_t taken;
    TypeTable buffers, handles, scalars, arrays; /* learned, learned; fixed: memset's numpy values, host arrays */
    PyObject *dict;
} OpMethod;

/* The value of an exact int in 1..2**63-1, or 0 (not one; no error set). */
static long long
positive(PyObject *v)
{
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    return overflow || x <= 0 ? 0 : x;
}

/* Whether `tp` is in `table`, learning it from the Python set `set` first when it is there. May run Python code. */
static int
learned(TypeTable *table, PyObject *set, PyTypeObject *tp)
{
    if (cg_table_has(table, tp))
        return 1;
    if (!cg_in_set(set, tp))
        return 0;
    cg_table_add(table, tp);
    return 1;
}

/* A property of a Buffer: NULL with no error set when it raised an Exception (the Python path names it); NULL with
 * the error set for anything else, which the Python path lets through too. Runs Python code. */
static PyObject *
property(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_Exception))
        PyErr_Clear();
    return v;
}

/* Operand `obj` (held by the caller) read as the Python path reads an exact int, a pointer parameter the graph
 * `self` declared, or a learned Buffer: 1 with *addr (an exact int, or the parameter; new reference), *keep (the
 * Buffer or None, new reference) and *size (-1 when unknown); 0 when the Python path must read it (nothing set);
 * -1 with an error set. Runs Python code for a Buffer. */
static int
read_operand(OpMethod *m, PyObject *self, PyObject *obj, PyObject **addr, PyObject **keep, long long *size)
{
    /* A pointer parameter: read here, not left to the Python path (bench/cpu_overhead.py times the fills) */
    if ((PyObject *)Py_TYPE(obj) == m->km->src[S_PARAM]) {
        if (SLOT(obj, m->km->param_at[PARAM_DTYPE]) != Py_None || !cg_param_declared(m->km, self, obj))
            return 0;
        *addr = Py_NewRef(obj);
        *keep = Py_NewRef(Py_None);
        *size = -1;
        return 1;
    }
    if (PyLong_CheckExact(obj)) {
        unsigned long long v = PyLong_AsUnsignedLongLong(obj);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear(); /* negative, or 2**64 and above */
            return 0;
        }
        if (v == 0)
            return 0;
        *addr = Py_NewRef(obj);
        *keep = Py_NewRef(Py_None);
        *size = -1;
        return 1;
    }
    if (cg_table_has(&m->arrays, Py_TYPE(obj))) { /* a contiguous numpy array: its data and its bytes */
        Py_buffer view;
        if (PyObject_GetBuffer(obj, &view, PyBUF_ANY_CONTIGUOUS) < 0) {
            PyErr_Clear();
            return 0;
        }
        void *data = view.buf;
        long long n = view.len;
        PyBuffer_Release(&view);
        if (data == NULL || n < 0 || (*addr = PyLong_FromVoidPtr(data)) == NULL) {
            PyErr_Clear();
            return 0;
        }
        *keep = Py_NewRef(obj);
        *size = n;
        return 1;
    }
    if (!learned(&m->buffers, m->buffer_src, Py_TYPE(obj)))
        return 0;
    PyObject *h = property(obj, m->str_handle), *a = NULL, *s = NULL;
    if (h == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (PyLong_CheckExact(h)) {
        a = Py_NewRef(h);
    } else if (learned(&m->handles, m->handle_src, Py_TYPE(h))) {
        a = PyNumber_Long(h); /* int(handle), as the Python path converts it */
        if (a == NULL && PyErr_ExceptionMatches(PyExc_Exception))
            PyErr_Clear();
    }
    Py_DECREF(h);
    if (a == NULL)
        return PyErr_Occurred() ? -1 : 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(a);
    if (v == 0 || (v == (unsigned long long)-1 && PyErr_Occurred())) {
        PyErr_Clear();
        Py_DECREF(a);
        return 0;
    }
    if ((s = property(obj, m->str_size)) == NULL) {
        Py_DECREF(a);
        return PyErr_Occurred() ? -1 : 0;
    }
    int overflow = 0;
    long long n = PyLong_CheckExact(s) ? PyLong_AsLongLongAndOverflow(s, &overflow) : -1;
    Py_DECREF(s);
    if (overflow || n < 0) {
        Py_DECREF(a);
        return 0;
    }
    *addr = a;
    *keep = Py_NewRef(obj);
    *size = n;
    return 1;
}

/* A new node of m's type whose own slots take the `count` values of `own` (new references, NULL where one could
 * not be made: then no node), each taken (set to NULL) or released; NULL with an error set when there is none. */
static PyObject *
node_of(OpMethod *m, PyObject **own, int count)
{
    PyObject *node = NULL;
    int whole = 1;
    for (int i = 0; i < count; i++)
        whole &= own[i] != NULL;
    if (whole && (node = m->ntype->tp_alloc(m->ntype, 0)) != NULL) {
        for (int i = 0; i < count; i++) { /* the node was NULL everywhere: nothing is released */
            SLOT(node, m->at[i]) = own[i];
            own[i] = NULL;
        }
    }
    for (int i = 0; i < count; i++)
        Py_CLEAR(own[i]);
    if (node == NULL && !PyErr_Occurred())
        PyErr_NoMemory();
    return node;
}

/* The size in bytes of numpy scalar `v` (of a type of the scalars table: 1, 2 or 4 bytes) with its bytes in *bits
 * as a little-endian word, or 0 (no error set). numpy's own buffer of its scalar: runs no Python code. */
static long long
scalar_bits(PyObject *v, unsigned long long *bits)
{
    Py_buffer view;
    if (PyObject_GetBuffer(v, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return 0;
    }
    long long n = view.len == 1 || view.len == 2 || view.len == 4 ? view.len : 0;
    *bits = 0;
    for (long long i = 0; i < n; i++)
        *bits |= (unsigned long long)((const unsigned char *)view.buf)[i] << (8 * i);
    PyBuffer_Release(&view);
    return n;
}

/* The node of `p` (the parameters, borrowed), its own slots set, placed; Py_NotImplemented when the Python path
 * must answer; NULL with an error set. */
static PyObject *
memset_fast(OpMethod *m, PyObject *self, PyObject *const *p)
{
    PyObject *v = p[MS_VALUE], *es_obj = p[MS_ESIZE], *cnt = p[MS_COUNT], *wid = p[MS_WIDTH];
    PyObject *hgt = p[MS_HEIGHT], *pitch = p[MS_PITCH];
    /* An int first: the common value, and the scalars table is scanned only for another type. */
    int scalar = v != NULL && !PyLong_CheckExact(v) && cg_table_has(&m->scalars, Py_TYPE(v));
    if (v == NULL || (!PyLong_CheckExact(v) && !scalar))
        Py_RETURN_NOTIMPLEMENTED;
    long long es = 0;
    if (es_obj != NULL && es_obj != Py_None) {
        es = positive(es_obj);
        if (es != 1 && es != 2 && es != 4)
            Py_RETURN_NOTIMPLEMENTED;
    }
    unsigned long long masked;
    if (scalar) { /* a numpy scalar: its bytes, read as a little-endian word (`value.tobytes()`) */
        long long size = scalar_bits(v, &masked);
        if (size == 0 || (es != 0 && es != size))
            Py_RETURN_NOTIMPLEMENTED;
        es = size;
    } else {
        es = es == 0 ? 1 : es;
        int overflow;
        long long value = PyLong_AsLongLongAndOverflow(v, &overflow), bits = 8 * es;
        if (overflow || value < -(1LL << (bits - 1)) || value > (1LL << bits) - 1)
            Py_RETURN_NOTIMPLEMENTED;
        masked = (unsigned long long)value & ((1ULL << bits) - 1);
    }
    if (cnt == Py_None)
        cnt = NULL;
    if (wid == Py_None)
        wid = NULL;
    if (pitch == Py_None)
        pitch = NULL;
    if (cnt != NULL && wid != NULL)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *w_obj = cnt != NULL ? cnt : wid;
    long long h = hgt == NULL ? 1 : positive(hgt), w = w_obj == NULL ? 0 : positive(w_obj);
    long long pv = pitch == NULL ? 0 : positive(pitch);
    if (h == 0 || (w_obj != NULL && w == 0) || (pitch != NULL && pv == 0) || (w_obj == NULL && h != 1))
        Py_RETURN_NOTIMPLEMENTED;

    /* The operand: the only Python code of the path. */
    PyObject *addr = NULL, *keep = NULL, *r = NULL;
    PyObject *own[OP_SLOTS] = {NULL};
    long long dsize;
    int read = read_operand(m, self, p[MS_DST], &addr, &keep, &dsize);
    if (read <= 0)
        return read < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    r = Py_NewRef(Py_NotImplemented);
    if (w_obj == NULL && (dsize < 0 || (w = dsize / es) == 0))
        goto done;
    if (w > LLONG_MAX / es)
        goto done;
    long long row = w * es, pitch_v = pitch == NULL ? row : pv;
    if (pitch_v < row || (h > 1 && pitch != NULL && pitch_v % es))
        goto done;
    if (h > 1 && (pitch_v > (LLONG_MAX - row) / (h - 1)))
        goto done; /* an extent the Python path computes in big ints */
    long long extent = pitch_v * (h - 1) + row;
    if (dsize >= 0 && extent > dsize)
        goto done;
    own[SS_DST] = Py_NewRef(addr);
    own[SS_VALUE] = PyLong_FromUnsignedLongLong(masked);
    own[SS_ESIZE] = PyLong_FromLongLong(es);
    own[SS_WIDTH] = w_obj != NULL ? Py_NewRef(w_obj) : PyLong_FromLongLong(w);
    own[SS_HEIGHT] = hgt != NULL ? Py_NewRef(hgt) : PyLong_FromLong(1);
    own[SS_PITCH] = pitch != NULL ? Py_NewRef(pitch) : PyLong_FromLongLong(row);
    own[SS_KEEP] = PyTuple_Pack(1, keep);
    Py_SETREF(r, node_of(m, own, OP_SLOTS));
done:
    Py_DECREF(addr);
    Py_DECREF(keep);
    return r;
}

static PyObject *
memcpy_fast(OpMethod *m, PyObject *self, PyObject *const *p)
{
    PyObject *nb = p[MC_NBYTES] == Py_None ? NULL : p[MC_NBYTES];
    long long n = nb == NULL ? 0 : positive(nb);
    if (p[MC_SRC] == NULL || (nb != NULL && n == 0))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *d = NULL, *dkeep = NULL, *s = NULL, *skeep = NULL, *r = NULL;
    PyObject *own[4] = {NULL};
    long long dsize, ssize;
    int read = read_operand(m, self, p[MC_DST], &d, &dkeep, &dsize);
    if (read <= 0)
        return read < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    if ((read = read_operand(m, self, p[MC_SRC], &s, &skeep, &ssize)) <= 0) {
        Py_DECREF(d);
        Py_DECREF(dkeep);
        return read < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    }
    r = Py_NewRef(Py_NotImplemented);
    if (nb == NULL)
        n = ssize >= 0 ? ssize : dsize;
    if (n <= 0 || (ssize >= 0 && n > ssize) || (dsize >= 0 && n > dsize))
        goto done;
    own[SC_DST] = Py_NewRef(d);
    own[SC_SRC] = Py_NewRef(s);
    own[SC_NBYTES] = nb != NULL ? Py_NewRef(nb) : PyLong_FromLongLong(n);
    own[SC_KEEP] = PyTuple_Pack(2, dkeep, skeep);
    Py_SETREF(r, node_of(m, own, 4));
done:
    Py_DECREF(d);
    Py_DECREF(dkeep);
    Py_DECREF(s);
    Py_DECREF(skeep);
    return r;
}

/* The compiled path: the node, a new reference; Py_NotImplemented (new reference) when the Python path must
 * answer; NULL with an exception set. Nothing is changed unless a node is returned. */
static PyObject *
op_fast(OpMethod *m, PyObject *const *argv, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *p[OP_ARGS] = {NULL}; /* borrowed: the caller holds its arguments for the call */
    int join = m->kind == OP_JOIN;
    if (nargs < 1 || (!join && nargs - 1 > m->positional))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *self = argv[0];
    for (Py_ssize_t i = 1; i < nargs && !join; i++)
        p[i - 1] = argv[i];
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        int at = -1;
        for (int j = 0; j < m->nparams && at < 0; j++)
            if (key == m->names[j])
                at = j;
        for (int j = 0; j < m->nparams && at < 0; j++)
            if (PyUnicode_CheckExact(key) && PyUnicode_Compare(key, m->names[j]) == 0)
                at = j;
        if (at < 0 || p[at] != NULL)
            Py_RETURN_NOTIMPLEMENTED;
        p[at] = argv[nargs + i];
    }
    PyObject *after = p[m->nparams - 2], *name = p[m->nparams - 1], *made = NULL;
    if ((m->kind <= OP_MEMCPY && p[0] == NULL) || !cg_table_has(&m->km->graphs, Py_TYPE(self)))
        Py_RETURN_NOTIMPLEMENTED;
    if (name == NULL || name == Py_None || (PyUnicode_CheckExact(name) && PyUnicode_GET_LENGTH(name) == 0))
        name = m->label; /* `name or "memset"` */
    else if (!PyUnicode_CheckExact(name))
        Py_RETURN_NOTIMPLEMENTED;
    if (join) { /* the nodes joined are the predecessors: one node, one list or tuple of them, or several */
        if (after != NULL && after != Py_None)
            Py_RETURN_NOTIMPLEMENTED; /* merged with the nodes by the Python method */
        after = nargs == 1 ? NULL : argv[1];
        if (after == Py_None)
            Py_RETURN_NOTIMPLEMENTED; /* join(None): the Python method's error */
        if (nargs > 2) {
            if ((made = PyTuple_New(nargs - 1)) == NULL)
                return NULL;
            for (Py_ssize_t i = 1; i < nargs; i++)
                PyTuple_SET_ITEM(made, i - 1, Py_NewRef(argv[i]));
            after = made;
        }
    }
    if (after != NULL && after != Py_None) {
        int pass = cg_after_pass(m->km, self, after);
        if (pass <= 0) {
            Py_XDECREF(made);
            return pass < 0 ? NULL : Py_NewRef(Py_NotImplemented);
        }
    }
    /* Held across the operands' Python code: the caller holds the arguments, but not what `after` holds. */
    Py_INCREF(self);
    Py_XINCREF(after);
    PyObject *node = m->kind == OP_MEMSET   ? memset_fast(m, self, p)
                     : m->kind == OP_MEMCPY ? memcpy_fast(m, self, p)
                                            : m->ntype->tp_alloc(m->ntype, 0); /* an empty node: no own slots */
    if (node != NULL && node != Py_NotImplemented) {
        int placed = cg_place_node(m->km, self, node, after, name);
        if (placed <= 0) {
            Py_SETREF(node, placed < 0 ? NULL : Py_NewRef(Py_NotImplemented));
        } else {
            m->taken++;
        }
    }
    Py_XDECREF(after);
    Py_XDECREF(made);
    Py_DECREF(self);
    return node;
}

static PyObject *
op_vectorcall(OpMethod *m, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_INCREF(m); /* a Buffer's properties and the Python method may drop the last other reference to it */
    PyObject *r = op_fast(m, args, nargs, kwnames);
    if (r == Py_NotImplemented) {
        Py_DECREF(r);
        r = PyObject_Vectorcall(m->func, args, nargsf, kwnames);
    }
    Py_DECREF(m);
    return r;
}

static PyObject *
op_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *func, *km, *ntype, *slots, *sources;
    const char *kind;
    static char *kwlist[] = {"kind", "func", "kernel_method", "node_type", "slots", "sources", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sOO!O!O!O!:OpMethod", kwlist, &kind, &func,
                                     &cg_kernel_method_type, &km, &PyType_Type, &ntype, &PyTuple_Type, &slots,
                                     &PyTuple_Type, &sources))
        return NULL;
    static const char *const kinds[] = {"memset", "memcpy", "empty", "join"};
    static const int nslots_of[] = {OP_SLOTS, 4, 0, 0}, nparams_of[] = {9, 5, 2, 2};
    int k = -1;
    for (int i = 0; i < 4 && k < 0; i++)
        if (strcmp(kind, kinds[i]) == 0)
            k = i;
    Py_ssize_t nslots = k < 0 ? -1 : nslots_of[k];
    if (k < 0 || !PyCallable_Check(func) || PyTuple_GET_SIZE(slots) != nslots || PyTuple_GET_SIZE(sources) != 4 ||
        !PyAnySet_CheckExact(PyTuple_GET_ITEM(sources, 0)) || !PyAnySet_CheckExact(PyTuple_GET_ITEM(sources, 1)) ||
        !PyTuple_CheckExact(PyTuple_GET_ITEM(sources, 2)) || !PyTuple_CheckExact(PyTuple_GET_ITEM(sources, 3))) {
        PyErr_SetString(PyExc_TypeError, "OpMethod: kind 'memset', 'memcpy', 'empty' or 'join', a callable func, "
                                         "the node's own slot names, sources (BUFFER_TYPES, HANDLE_TYPES, "
                                         "numpy scalar types, host array types)");
        return NULL;
    }
    KernelMethod *placer = (KernelMethod *)km;
    PyTypeObject *nt = (PyTypeObject *)ntype;
    if (!PyType_IsSubtype(nt, placer->node) || !cg_keeps_slots(nt, placer->node_descr, 2)) {
        PyErr_SetString(PyExc_TypeError, "OpMethod: node_type must keep the base slots of the placer's node type");
        return NULL;
    }
    OpMethod *m = (OpMethod *)type->tp_alloc(type, 0);
    if (m == NULL)
        return NULL;
    m->kind = k;
    m->nparams = nparams_of[k];
    m->positional = k <= OP_MEMCPY ? 3 : 0;
    m->func = Py_NewRef(func);
    m->km = (KernelMethod *)Py_NewRef(km);
    m->ntype = (PyTypeObject *)Py_NewRef(ntype);
    m->buffer_src = Py_NewRef(PyTuple_GET_ITEM(sources, 0));
    m->handle_src = Py_NewRef(PyTuple_GET_ITEM(sources, 1));
    for (int which = 2; which < 4; which++) {
        PyObject *types = PyTuple_GET_ITEM(sources, which);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(types); i++)
            if (PyType_Check(PyTuple_GET_ITEM(types, i)))
                cg_table_add(which == 2 ? &m->scalars : &m->arrays, (PyTypeObject *)PyTuple_GET_ITEM(types, i));
    }
    const char *const *names = k == OP_MEMSET ? memset_names : k == OP_MEMCPY ? memcpy_names : place_names;
    for (int i = 0; i < m->nparams; i++)
        if ((m->names[i] = PyUnicode_InternFromString(names[i])) == NULL)
            goto fail;
    if ((m->label = PyUnicode_InternFromString(kind)) == NULL ||
        (m->str_handle = PyUnicode_InternFromString("handle")) == NULL ||
        (m->str_size = PyUnicode_InternFromString("size")) == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < nslots; i++) {
        PyObject *name = PyTuple_GET_ITEM(slots, i);
        if (!PyUnicode_CheckExact(name)) {
            PyErr_SetString(PyExc_TypeError, "OpMethod: slots must hold str");
            goto fail;
        }
        if (cg_slot_offset(nt, name, &m->at[i], NULL) < 0)
            goto fail;
    }
    m->vectorcall = (vectorcallfunc)op_vectorcall;
    return (PyObject *)m;
fail:
    Py_DECREF(m);
    return NULL;
}

static int
op_traverse(OpMethod *m, visitproc visit, void *arg)
{
    Py_VISIT(m->func);
    Py_VISIT(m->km);
    Py_VISIT(m->ntype);
    Py_VISIT(m->buffer_src);
    Py_VISIT(m->handle_src);
    for (Py_ssize_t i = 0; i < m->buffers.n; i++)
        Py_VISIT(m->buffers.t[i]);
    for (Py_ssize_t i = 0; i < m->handles.n; i++)
        Py_VISIT(m->handles.t[i]);
    for (Py_ssize_t i = 0; i < m->scalars.n; i++)
        Py_VISIT(m->scalars.t[i]);
    for (Py_ssize_t i = 0; i < m->arrays.n; i++)
        Py_VISIT(m->arrays.t[i]);
    Py_VISIT(m->dict);
    return 0;
}

static int
op_clear(OpMethod *m)
{
    cg_table_clear(&m->buffers);
    cg_table_clear(&m->handles);
    cg_table_clear(&m->scalars);
    cg_table_clear(&m->arrays);
    Py_CLEAR(m->func);
    Py_CLEAR(m->km);
    Py_CLEAR(m->ntype);
    Py_CLEAR(m->buffer_src);
    Py_CLEAR(m->handle_src);
    Py_CLEAR(m->dict);
    return 0;
}

static void
op_dealloc(OpMethod *m)
{
    PyObject_GC_UnTrack(m);
    op_clear(m);
    for (int i = 0; i < OP_ARGS; i++)
        Py_CLEAR(m->names[i]);
    Py_CLEAR(m->label);
    Py_CLEAR(m->str_handle);
    Py_CLEAR(m->str_size);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyObject *
op_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *
op_get_func(OpMethod *m, void *closure)
{
    return Py_NewRef(m->func);
}

static PyObject *
op_get_taken(OpMethod *m, void *closure)
{
    return PyLong_FromSsize_t(m->taken);
}

static PyObject *
op_forget(OpMethod *m, PyObject *unused)
{
    cg_table_clear(&m->buffers);
    cg_table_clear(&m->handles);
    Py_RETURN_NONE;
}

static PyMethodDef op_methods[] = {
    {"forget", (PyCFunction)op_forget, METH_NOARGS,
     "forget() -> None\n\nEmpty the tables of learned Buffer and handle types (they are learned again from "
     "addresses.BUFFER_TYPES and HANDLE_TYPES)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef op_getset[] = {
    {"func", (getter)op_get_func, NULL, "The Python method: every call the compiled path does not take goes to it.",
     NULL},
    {"taken", (getter)op_get_taken, NULL, "How many calls the compiled path answered.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(op_doc, "OpMethod(kind, func, kernel_method, node_type, slots, sources)\n\n"
                     "Graph.memset, Graph.memcpy, Graph.empty or Graph.join (`kind`): builds the node in C for the "
                     "common call (see _define_ops.c), placed through `kernel_method` (the KernelMethod), and hands "
                     "every other call to `func`, the Python method. `slots` names the node type's own slots in the "
                     "order of OP_SLOTS; `sources` is (BUFFER_TYPES, HANDLE_TYPES, FILL_SCALARS, HOST_ARRAYS). Copy "
                     "the Python "
                     "method's name and docstring onto it with functools.update_wrapper.");

PyTypeObject cg_op_method_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph.definition._define.OpMethod",
    .tp_basicsize = sizeof(OpMethod),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = op_doc,
    .tp_new = op_new,
    .tp_dealloc = (destructor)op_dealloc,
    .tp_traverse = (traverseproc)op_traverse,
    .tp_clear = (inquiry)op_clear,
    .tp_vectorcall_offset = offsetof(OpMethod, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = op_get,
    .tp_methods = op_methods,
    .tp_getset = op_getset,
    .tp_dictoffset = offsetof(OpMethod, dict),
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
};
