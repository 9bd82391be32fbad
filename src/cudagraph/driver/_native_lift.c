/*
 * Lifting a driver graph into a definition in one call: lift_graph reads the nodes, the edges into each
 * node, every node's type and kernel parameters, orders the nodes (Kahn, first in first out) and adds each
 * kernel node through the definition's Graph.kernel with its argument bytes copied; any other node is handed
 * to a callback.
 *
 * Python twin (see cudagraph.driver.c_entry): cudagraph.materialize.lift._Lifter.into_steps, which makes the
 * same reads through a GraphReader and the same Graph.kernel calls, in the same order.
 *
 * Python code runs in the middle (the driver entry points are ctypes callbacks in tests; Graph.kernel, the
 * callbacks for new kernels and other nodes, the collector): every Python object used across those calls is
 * held by a strong reference, and everything read from the driver is copied into C arrays first.
 */
#include "_native.h"

/* CUresult cuGraphGetNodes(CUgraph, CUgraphNode*, size_t*) */
typedef int (*cg_get_nodes_fn)(void *, void **, size_t *);
/* CUresult cuGraphNodeGetDependencies_v2(CUgraphNode, CUgraphNode*, CUgraphEdgeData*, size_t*) */
typedef int (*cg_node_deps_fn)(void *, void **, void *, size_t *);
/* CUresult cuGraphNodeGetType(CUgraphNode, CUgraphNodeType*) */
typedef int (*cg_node_type_fn)(void *, int *);
/* CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*) */
typedef int (*cg_kernel_read_fn)(void *, cg_kernel_params_v3 *);

#define EDGE_DATA_SIZE 8 /* sizeof(CUgraphEdgeData) */
#define DEPS_INLINE 32  /* dependencies read per node in one call (more: read again with room for twice as many) */

const char cg_lift_graph_doc[] =
    "lift_graph(fns, graph, add_kernel, keywords, kernel_of, other) -> None or (index, CUresult, call)\n\n"
    "Lift the driver graph `graph` (an int) through the entry points `fns` (the addresses of\n"
    "cuGraphGetNodes, cuGraphNodeGetDependencies_v2, cuGraphNodeGetType, cuGraphKernelNodeGetParams_v2):\n"
    "its edges are those into each node in the cuGraphGetNodes order, each node's in the order of its\n"
    "dependencies; its nodes are added in topological order (Kahn, first in first out). A kernel\n"
    "node is added by add_kernel(handle, grid, block, args, **{keywords[0]: shared memory,\n"
    "keywords[1]: after, keywords[2]: name}), where kernel_of(func, kern), asked once per kernel, gives\n"
    "(handle, name, sizes, read_args): the argument values are copied as bytes of those sizes, and\n"
    "read_args(address) makes them (or the error) where they cannot be read. Any other node is made by\n"
    "other(handle, type, after). after: None, the node made for the one predecessor, or a list.\n"
    "Every node is read before the first is added. On a refusal: the position of the node (-1 for the\n"
    "graph's node list), the CUresult and the name of the call refused.";

/* The nodes and edges read, the order and each node's predecessors (CSR: pred_at[i] .. pred_at[i + 1]). */
typedef struct {
    void **nodes;
    void **frm, **to;
    Py_ssize_t n, m;
    Py_ssize_t *pred_at, *preds, *order, norder;
    int *types;
    cg_kernel_params_v3 *params;
} lift_plan;

static void
plan_free(lift_plan *p)
{
    PyMem_Free(p->nodes);
    PyMem_Free(p->frm);
    PyMem_Free(p->to);
    PyMem_Free(p->pred_at);
    PyMem_Free(p->preds);
    PyMem_Free(p->order);
    PyMem_Free(p->types);
    PyMem_Free(p->params);
}

static PyObject *
refused(Py_ssize_t index, int rc, const char *call)
{
    return Py_BuildValue("(nis)", index, rc, call);
}

/* A hash of a handle (handles are aligned: the low bits carry little). */
static inline size_t
handle_hash(void *h)
{
    uint64_t x = (uint64_t)(uintptr_t)h;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* Positions of the edges' ends in p->nodes (the last position of a handle listed twice, as a dict built
 * in order keeps), into ia/ib: 0, or -1 with KeyError set for an end that is not a node of the graph. */
static int
edge_positions(lift_plan *p, Py_ssize_t *ia, Py_ssize_t *ib)
{
    size_t cap = 16;
    while (cap < (size_t)p->n * 2)
        cap <<= 1;
    void **keys = PyMem_Calloc(cap, sizeof(void *));
    Py_ssize_t *vals = PyMem_Malloc(cap * sizeof(Py_ssize_t));
    int rc = -1;
    if (keys == NULL || vals == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* A NULL handle (never a node) is kept apart: the empty slots are NULL. */
    Py_ssize_t null_at = -1;
    for (Py_ssize_t i = 0; i < p->n; i++) {
        void *h = p->nodes[i];
        if (h == NULL) {
            null_at = i;
            continue;
        }
        size_t k = handle_hash(h) & (cap - 1);
        while (keys[k] != NULL && keys[k] != h)
            k = (k + 1) & (cap - 1);
        keys[k] = h;
        vals[k] = i;
    }
    for (Py_ssize_t e = 0; e < 2 * p->m; e++) {
        void *h = e < p->m ? p->frm[e] : p->to[e - p->m];
        Py_ssize_t at = -1;
        if (h == NULL) {
            at = null_at;
        } else {
            size_t k = handle_hash(h) & (cap - 1);
            while (keys[k] != NULL && keys[k] != h)
                k = (k + 1) & (cap - 1);
            if (keys[k] == h)
                at = vals[k];
        }
        if (at < 0) {
            PyObject *key = PyLong_FromVoidPtr(h);
            if (key != NULL) {
                PyErr_SetObject(PyExc_KeyError, key);
                Py_DECREF(key);
            }
            goto done;
        }
        (e < p->m ? ia : ib)[e < p->m ? e : e - p->m] = at;
    }
    rc = 0;
done:
    PyMem_Free(keys);
    PyMem_Free(vals);
    return rc;
}

/* The predecessors (in edge order) and a topological order (Kahn: the nodes without predecessors in
 * position order, then each node's successors in edge order as they become free): 0, or -1 with an
 * exception set. */
static int
plan_order(lift_plan *p)
{
    Py_ssize_t n = p->n, m = p->m;
    Py_ssize_t *ia = PyMem_Malloc((size_t)(2 * m + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *succ_at = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    Py_ssize_t *succs = PyMem_Malloc((size_t)(m + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *fill = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *indeg = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    p->pred_at = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    p->preds = PyMem_Malloc((size_t)(m + 1) * sizeof(Py_ssize_t));
    p->order = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    int rc = -1;
    if (ia == NULL || succ_at == NULL || succs == NULL || fill == NULL || indeg == NULL || p->pred_at == NULL ||
        p->preds == NULL || p->order == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t *ib = ia + m;
    if (edge_positions(p, ia, ib) < 0)
        goto done;
    for (Py_ssize_t e = 0; e < m; e++) {
        p->pred_at[ib[e] + 1]++;
        succ_at[ia[e] + 1]++;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        p->pred_at[i + 1] += p->pred_at[i];
        succ_at[i + 1] += succ_at[i];
    }
    for (Py_ssize_t i = 0; i < n; i++)
        fill[i] = p->pred_at[i];
    for (Py_ssize_t e = 0; e < m; e++)
        p->preds[fill[ib[e]]++] = ia[e];
    for (Py_ssize_t i = 0; i < n; i++)
        fill[i] = succ_at[i];
    for (Py_ssize_t e = 0; e < m; e++)
        succs[fill[ia[e]]++] = ib[e];
    Py_ssize_t len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        indeg[i] = p->pred_at[i + 1] - p->pred_at[i];
        if (!indeg[i])
            p->order[len++] = i;
    }
    for (Py_ssize_t k = 0; k < len; k++) { /* the order is also the queue */
        Py_ssize_t i = p->order[k];
        for (Py_ssize_t s = succ_at[i]; s < succ_at[i + 1]; s++)
            if (--indeg[succs[s]] == 0)
                p->order[len++] = succs[s];
    }
    p->norder = len;
    rc = 0;
done:
    PyMem_Free(ia);
    PyMem_Free(succ_at);
    PyMem_Free(succs);
    PyMem_Free(fill);
    PyMem_Free(indeg);
    return rc;
}

/* Room for `need` edges in p->frm and p->to (their capacity *cap): 0, or -1 with MemoryError set. */
static int
edges_room(lift_plan *p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t grown = *cap * 2 > need ? *cap * 2 : need;
    void **frm = PyMem_Realloc(p->frm, grown * sizeof(void *));
    if (frm != NULL)
        p->frm = frm;
    void **to = frm == NULL ? NULL : PyMem_Realloc(p->to, grown * sizeof(void *));
    if (to == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    p->to = to;
    *cap = grown;
    return 0;
}

/* The edges into each node, node by node (one cuGraphNodeGetDependencies_v2 call a node: cuGraphGetEdges_v2
 * takes time quadratic in the graph's size, 0.05 µs a node at 1,000 nodes and 2.5 at 30,000 on an H200,
 * against 0.03-0.07 for this), with their edge data (the driver refuses a query that would drop it). 0;
 * -1 with the refusal triple in *out, or with an exception set. */
static int
read_dependencies(lift_plan *p, cg_node_deps_fn get_deps, PyObject **out, cg_gil_offer *offer)
{
    size_t cap = (size_t)p->n + 1, room = DEPS_INLINE, m = 0;
    void *inline_deps[DEPS_INLINE], **deps = inline_deps;
    char inline_data[DEPS_INLINE * EDGE_DATA_SIZE], *data = inline_data;
    int rc = -1;
    p->frm = PyMem_Malloc(cap * sizeof(void *));
    p->to = PyMem_Malloc(cap * sizeof(void *));
    if (p->frm == NULL || p->to == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < p->n; i++) {
        cg_offer_gil(i, offer); /* (only C arrays in use) */
        size_t got;
        for (;;) {
            got = room;
            int refused_rc = get_deps(p->nodes[i], deps, data, &got);
            if (refused_rc) {
                *out = refused(i, refused_rc, "cuGraphNodeGetDependencies");
                goto done;
            }
            if (got < room)
                break;
            /* as many as there was room for: perhaps more */
            if (deps != inline_deps) {
                PyMem_Free(deps);
                PyMem_Free(data);
            }
            room *= 2;
            deps = PyMem_Malloc(room * sizeof(void *));
            data = PyMem_Malloc(room * EDGE_DATA_SIZE);
            if (deps == NULL || data == NULL) {
                PyErr_NoMemory();
                goto done;
            }
        }
        if (edges_room(p, &cap, m + got) < 0)
            goto done;
        for (size_t k = 0; k < got; k++) {
            p->frm[m + k] = deps[k];
            p->to[m + k] = p->nodes[i];
        }
        m += got;
    }
    p->m = (Py_ssize_t)m;
    rc = 0;
done:
    if (deps != inline_deps) {
        PyMem_Free(deps);
        PyMem_Free(data);
    }
    return rc;
}

/* Read the graph's lists, order them and read every node, offering the GIL as the loop adding the nodes
 * does (`offer`, its state; tests/test_lift_gil_cpu.py: a 20,000-node read of 3 µs a node held it for 65 ms
 * without): NULL with *out = None when done, the refusal triple in *out, or NULL with *out NULL and an
 * exception set. */
static int
plan_read(lift_plan *p, void *const *fns, void *graph, PyObject **out, cg_gil_offer *offer)
{
    *out = NULL;
    size_t count = 0;
    int rc = ((cg_get_nodes_fn)fns[0])(graph, NULL, &count);
    if (rc) {
        *out = refused(-1, rc, "cuGraphGetNodes");
        return -1;
    }
    p->nodes = PyMem_Malloc((count + 1) * sizeof(void *));
    if (p->nodes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (count) {
        size_t got = count;
        if ((rc = ((cg_get_nodes_fn)fns[0])(graph, p->nodes, &got)) != 0) {
            *out = refused(-1, rc, "cuGraphGetNodes");
            return -1;
        }
        count = got < count ? got : count;
    }
    p->n = (Py_ssize_t)count;
    if (read_dependencies(p, (cg_node_deps_fn)fns[1], out, offer) < 0)
        return -1;
    if (plan_order(p) < 0)
        return -1;
    p->types = PyMem_Malloc((count + 1) * sizeof(int));
    p->params = PyMem_Calloc(count + 1, sizeof(cg_kernel_params_v3));
    if (p->types == NULL || p->params == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < p->n; i++) {
        cg_offer_gil(i, offer);
        p->types[i] = -1;
        if ((rc = ((cg_node_type_fn)fns[2])(p->nodes[i], &p->types[i])) != 0) {
            *out = refused(i, rc, "cuGraphNodeGetType");
            return -1;
        }
        if (p->types[i] == CG_NODE_KERNEL && (rc = ((cg_kernel_read_fn)fns[3])(p->nodes[i], &p->params[i])) != 0) {
            *out = refused(i, rc, "cuGraphKernelNodeGetParams");
            return -1;
        }
    }
    return 0;
}

/* What the kernel nodes of one kernel share, as kernel_of gave it (held). */
typedef struct {
    void *func, *kern;
    PyObject *handle, *name, *read_args;
    Py_ssize_t nargs;
    Py_ssize_t *sizes;
} lift_kernel;

typedef struct {
    lift_kernel *items;
    Py_ssize_t count, cap;
} lift_kernels;

static void
kernels_free(lift_kernels *ks)
{
    for (Py_ssize_t k = 0; k < ks->count; k++) {
        Py_XDECREF(ks->items[k].handle);
        Py_XDECREF(ks->items[k].name);
        Py_XDECREF(ks->items[k].read_args);
        PyMem_Free(ks->items[k].sizes);
    }
    PyMem_Free(ks->items);
}

/* The kernel of (func, kern): among those met, else asked of kernel_of. NULL with an exception set. */
static lift_kernel *
kernel_of(lift_kernels *ks, void *func, void *kern, PyObject *ask)
{
    for (Py_ssize_t k = ks->count - 1; k >= 0; k--) /* few kernels a graph: the last ones met first */
        if (ks->items[k].func == func && ks->items[k].kern == kern)
            return &ks->items[k];
    if (ks->count == ks->cap) {
        Py_ssize_t cap = ks->cap ? 2 * ks->cap : 8;
        lift_kernel *more = PyMem_Realloc(ks->items, (size_t)cap * sizeof(lift_kernel));
        if (more == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        ks->items = more;
        ks->cap = cap;
    }
    PyObject *got = PyObject_CallFunction(ask, "KK", (unsigned long long)(uintptr_t)func,
                                          (unsigned long long)(uintptr_t)kern);
    if (got == NULL)
        return NULL;
    if (!PyTuple_CheckExact(got) || PyTuple_GET_SIZE(got) != 4 || !PyTuple_CheckExact(PyTuple_GET_ITEM(got, 2))) {
        PyErr_SetString(PyExc_TypeError, "lift_graph: kernel_of must give (handle, name, sizes: tuple, read_args)");
        Py_DECREF(got);
        return NULL;
    }
    PyObject *sizes = PyTuple_GET_ITEM(got, 2);
    Py_ssize_t n = PyTuple_GET_SIZE(sizes);
    Py_ssize_t *read = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    if (read == NULL) {
        Py_DECREF(got);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t a = 0; a < n; a++) { /* (ints are read without running Python code) */
        read[a] = PyLong_Check(PyTuple_GET_ITEM(sizes, a)) ? PyLong_AsSsize_t(PyTuple_GET_ITEM(sizes, a)) : -1;
        if (read[a] < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "lift_graph: argument sizes must be non-negative ints");
            PyMem_Free(read);
            Py_DECREF(got);
            return NULL;
        }
    }
    lift_kernel *it = &ks->items[ks->count++];
    *it = (lift_kernel){.func = func,
                        .kern = kern,
                        .handle = Py_NewRef(PyTuple_GET_ITEM(got, 0)),
                        .name = Py_NewRef(PyTuple_GET_ITEM(got, 1)),
                        .read_args = Py_NewRef(PyTuple_GET_ITEM(got, 3)),
                        .nargs = n,
                        .sizes = read};
    Py_DECREF(got);
    return it;
}

/* The argument values of a kernel node as a tuple of bytes; where they cannot be read (NULL kernelParams or
 * a NULL argument pointer), read_args(address) says why (it raises) or answers. */
static PyObject *
kernel_node_args(const lift_kernel *k, void **params)
{
    Py_ssize_t n = k->nargs;
    if (n == 0)
        return PyTuple_New(0);
    int readable = params != NULL;
    for (Py_ssize_t a = 0; readable && a < n; a++)
        readable = params[a] != NULL;
    if (!readable)
        return PyObject_CallFunction(k->read_args, "K", (unsigned long long)(uintptr_t)params);
    PyObject *out = PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t a = 0; a < n; a++) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)params[a], k->sizes[a]);
        if (b == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, a, b);
    }
    return out;
}

/* A dimension as Graph.kernel is given it by the twin: x alone when y and z are 1, else (x, y, z). */
static PyObject *
dims(unsigned int x, unsigned int y, unsigned int z)
{
    if (y == 1 && z == 1)
        return PyLong_FromUnsignedLong(x);
    return Py_BuildValue("(III)", x, y, z);
}

/* The node made for position i: add_kernel(...) or other(...); a new reference, or NULL. */
static PyObject *
make_node(const lift_plan *p, Py_ssize_t i, PyObject *after, PyObject *const *cb, lift_kernels *ks)
{
    /* cb: add_kernel, keywords, kernel_of, other */
    if (p->types[i] != CG_NODE_KERNEL) {
        PyObject *h = PyLong_FromVoidPtr(p->nodes[i]), *t = PyLong_FromLong(p->types[i]), *out = NULL;
        if (h != NULL && t != NULL)
            out = PyObject_CallFunctionObjArgs(cb[3], h, t, after, NULL);
        Py_XDECREF(h);
        Py_XDECREF(t);
        return out;
    }
    const cg_kernel_params_v3 *kp = &p->params[i];
    lift_kernel *k = kernel_of(ks, kp->func, kp->kern, cb[2]);
    if (k == NULL)
        return NULL;
    /* (held: Python code below cannot reach this lift's list of kernels, but the reads stay local) */
    PyObject *handle = Py_NewRef(k->handle), *name = Py_NewRef(k->name), *out = NULL;
    PyObject *args = kernel_node_args(k, kp->kernelParams);
    PyObject *grid = dims(kp->gridDimX, kp->gridDimY, kp->gridDimZ);
    PyObject *block = dims(kp->blockDimX, kp->blockDimY, kp->blockDimZ);
    PyObject *smem = PyLong_FromUnsignedLong(kp->sharedMemBytes);
    if (args != NULL && grid != NULL && block != NULL && smem != NULL) {
        PyObject *stack[7] = {handle, grid, block, args, smem, after, name};
        out = PyObject_Vectorcall(cb[0], stack, 4, cb[1]);
    }
    Py_DECREF(handle);
    Py_DECREF(name);
    Py_XDECREF(args);
    Py_XDECREF(grid);
    Py_XDECREF(block);
    Py_XDECREF(smem);
    return out;
}

PyObject *
cg_lift_graph(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 6 || !PyTuple_CheckExact(argv[0]) || PyTuple_GET_SIZE(argv[0]) != 4 || !PyCallable_Check(argv[2]) ||
        !PyTuple_CheckExact(argv[3]) || PyTuple_GET_SIZE(argv[3]) != 3 || !PyCallable_Check(argv[4]) ||
        !PyCallable_Check(argv[5])) {
        PyErr_SetString(PyExc_TypeError, "lift_graph(fns: tuple of 4 addresses, graph: int, add_kernel: callable, "
                                         "keywords: tuple of 3 str, kernel_of: callable, other: callable)");
        return NULL;
    }
    for (int k = 0; k < 3; k++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(argv[3], k))) {
            PyErr_SetString(PyExc_TypeError, "lift_graph: keywords must be 3 str");
            return NULL;
        }
    void *fns[4], *graph;
    static const char *const names[4] = {"get_nodes", "get_deps", "get_type", "get_kernel"};
    for (int k = 0; k < 4; k++) {
        if (address_of(PyTuple_GET_ITEM(argv[0], k), names[k], &fns[k]) < 0)
            return NULL;
        if (fns[k] == NULL) {
            PyErr_Format(PyExc_ValueError, "lift_graph: %s must not be NULL", names[k]);
            return NULL;
        }
    }
    if (address_of(argv[1], "graph", &graph) < 0)
        return NULL;
    PyObject *cb[4] = {Py_NewRef(argv[2]), Py_NewRef(argv[3]), Py_NewRef(argv[4]), Py_NewRef(argv[5])};
    lift_plan p = {0};
    lift_kernels ks = {0};
    PyObject **made = NULL, *out = NULL;
    cg_gil_offer offer = {0, 0};
    if (plan_read(&p, fns, graph, &out, &offer) < 0)
        goto done;
    made = PyMem_Calloc((size_t)p.n + 1, sizeof(PyObject *));
    if (made == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < p.norder; k++) {
        cg_offer_gil(k, &offer); /* (every reference here is held) */
        Py_ssize_t i = p.order[k], first = p.pred_at[i], np = p.pred_at[i + 1] - first;
        PyObject *after;
        if (np == 0) {
            after = Py_NewRef(Py_None);
        } else if (np == 1) {
            after = Py_NewRef(made[p.preds[first]]); /* (made before: the order puts predecessors first) */
        } else {
            if ((after = PyList_New(np)) == NULL)
                goto done;
            for (Py_ssize_t j = 0; j < np; j++)
                PyList_SET_ITEM(after, j, Py_NewRef(made[p.preds[first + j]]));
        }
        made[i] = make_node(&p, i, after, cb, &ks);
        Py_DECREF(after);
        if (made[i] == NULL)
            goto done;
    }
    out = Py_NewRef(Py_None);
done:
    if (made != NULL)
        for (Py_ssize_t i = 0; i < p.n; i++)
            Py_XDECREF(made[i]);
    PyMem_Free(made);
    kernels_free(&ks);
    plan_free(&p);
    for (int k = 0; k < 4; k++)
        Py_DECREF(cb[k]);
    return out;
}
