/*
 * cudagraph.definition._define (_define_validate.c): Graph.validate's pass over plain kernel nodes, in C.
 *
 * KernelMethod.validate(graph, nodes, start, seen, kernel_types, arg_types) walks `nodes` (the graph's list)
 * from `start` and answers the index of the first node it does not pass, or the length of the list: the
 * node that Graph._validate_steps (its Python twin) then checks itself, raising the error that names it or
 * learning a type or a memory object, before it hands the next index back here. A node passes here when
 * the Python twin would pass it the same way without learning anything:
 *
 *   - it is a KernelNode (exactly) of `graph`, at its index, without launch attributes, whose kernel's type
 *     is one of the tuple `kernel_types` (KERNEL_TYPES_VALID);
 *   - its predecessors, distinct, are nodes of a type the builders learned (the nodes table) of `graph`;
 *   - its arguments are an exact tuple whose items are of a type of the tuple `arg_types`
 *     (ARG_TYPES_VALID), ints in [0, 2**64), or objects whose id() is in the set `seen` (memory the twin
 *     accepted earlier in the same pass).
 *
 * Types are compared by identity and `seen` holds exact ints: no Python code runs (an int is not collected,
 * so making the key starts no collection), so the list and the nodes cannot change under the loop.
 * Faster than pure Python (bench/construction.py --cpu: validate).
 */
#include "_define.h"

/* Whether `t` is one of the types of the tuple `types` (by identity). */
static int
one_of(PyObject *types, PyTypeObject *t)
{
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(types); k++)
        if (PyTuple_GET_ITEM(types, k) == (PyObject *)t)
            return 1;
    return 0;
}

/* Whether the predecessors of the node (`preds`, its exact list) are distinct learned nodes of `graph`: 1, 0,
 * -1 (no memory, error set). */
static int
preds_pass(KernelMethod *m, PyObject *graph, PyObject *preds)
{
    Py_ssize_t k = PyList_GET_SIZE(preds);
    PyObject **items = ((PyListObject *)preds)->ob_item;
    for (Py_ssize_t j = 0; j < k; j++)
        if (!cg_table_has(&m->nodes, Py_TYPE(items[j])) || SLOT(items[j], m->node_at[N_GRAPH]) != graph)
            return 0;
    return k > 1 ? cg_distinct(items, k) : 1;
}

/* Whether the arguments `args` pass (see above): 1, 0, -1 (error set). `*last` is the last object found in
 * `seen` (compared first: a graph's nodes mostly share their buffers). */
static int
args_pass(PyObject *args, PyObject *seen, PyObject *arg_types, PyObject **last)
{
    if (!PyTuple_CheckExact(args))
        return 0;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(args); j++) {
        PyObject *a = PyTuple_GET_ITEM(args, j);
        if (one_of(arg_types, Py_TYPE(a)))
            continue;
        if (PyLong_CheckExact(a)) { /* a pointer: 0 <= a < 2**64 */
            unsigned long long v = PyLong_AsUnsignedLongLong(a);
            if (v == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear(); /* negative or wider: the twin names it */
                return 0;
            }
            continue;
        }
        if (a == *last)
            continue;
        PyObject *key = PyLong_FromVoidPtr(a); /* id(a) */
        if (key == NULL)
            return -1;
        int found = PySet_Contains(seen, key);
        Py_DECREF(key);
        if (found <= 0)
            return found;
        *last = a;
    }
    return 1;
}

PyObject *
cg_km_validate(KernelMethod *m, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 6 || !PyList_CheckExact(argv[1]) || !PyLong_CheckExact(argv[2]) || !PySet_CheckExact(argv[3]) ||
        !PyTuple_CheckExact(argv[4]) || !PyTuple_CheckExact(argv[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "validate(graph, nodes: list, start: int, seen: set, kernel_types: tuple, arg_types: tuple)");
        return NULL;
    }
    PyObject *graph = argv[0], *nodes = argv[1], *seen = argv[3], *kernel_types = argv[4], *arg_types = argv[5];
    Py_ssize_t i = PyLong_AsSsize_t(argv[2]);
    if (i < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "validate: start must not be negative");
        return NULL;
    }
    PyObject *last = NULL;
    for (; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *n = PyList_GET_ITEM(nodes, i);
        if (Py_TYPE(n) != m->knode || SLOT(n, m->node_at[N_GRAPH]) != graph)
            break;
        PyObject *index = SLOT(n, m->node_at[N_INDEX]), *preds = SLOT(n, m->node_at[N_PREDS]);
        if (index == NULL || !PyLong_CheckExact(index) || PyLong_AsSsize_t(index) != i) {
            if (PyErr_Occurred()) /* wider than an index: the twin names it */
                PyErr_Clear();
            break;
        }
        if (preds == NULL || !PyList_CheckExact(preds))
            break;
        int ok = preds_pass(m, graph, preds);
        if (ok < 0)
            return NULL;
        if (!ok)
            break;
        PyObject *kernel = SLOT(n, m->kernel_at[K_KERNEL]), *args = SLOT(n, m->kernel_at[K_ARGS]);
        if (SLOT(n, m->kernel_at[K_ATTRS]) != Py_None || kernel == NULL || args == NULL ||
            !one_of(kernel_types, Py_TYPE(kernel)))
            break;
        if ((ok = args_pass(args, seen, arg_types, &last)) < 0)
            return NULL;
        if (!ok)
            break;
    }
    return PyLong_FromSsize_t(i);
}
