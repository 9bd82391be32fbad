/*
 * cudagraph.definition._define: Graph.kernel with a compiled path for the builders' common case, and the placing
 * of every other builder's node (optional; the algorithms and their Python twins are described in
 * _define_kernel.c and _define_place.c).
 *
 * This file holds the module and the KernelMethod type: a method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR)
 * built over the Python method, the classes whose slots it reads (resolved once, from the slot names the
 * Python side declares in DEFINE_SLOTS) and the Python method's own tables, from which it learns types.
 */
#include "_define.h"
int
cg_slot_offset(PyTypeObject *tp, PyObject *name, Py_ssize_t *out, PyObject **keep)
{
    PyObject *d = _PyType_Lookup(tp, name); /* borrowed; runs no Python code */
    int ok = d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type);
    if (ok) {
        PyMemberDef *md = ((PyMemberDescrObject *)d)->d_member;
        ok = md->type == T_OBJECT_EX && md->offset > 0 &&
             md->offset + (Py_ssize_t)sizeof(PyObject *) <= tp->tp_basicsize && PyType_IsSubtype(tp, PyDescr_TYPE(d));
        *out = md->offset;
    }
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "KernelMethod: %s.%S is not an object slot of the class", tp->tp_name, name);
        return -1;
    }
    if (keep != NULL)
        *keep = Py_NewRef(d);
    return 0;
}

/* Resolve the slot names `slots[role]` (a tuple of `count` str) on `tp`. */
static int
resolve(PyObject *slots, const char *role, PyTypeObject *tp, Py_ssize_t count, Py_ssize_t *at, PyObject **keep,
        const int *kept, int nkept)
{
    PyObject *names = PyDict_GetItemString(slots, role);
    if (names == NULL || !PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != count) {
        PyErr_Format(PyExc_ValueError, "KernelMethod: slots['%s'] must be a tuple of %zd names", role, count);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i), **k = NULL;
        for (int j = 0; j < nkept; j++)
            if (kept[j] == i)
                k = &keep[j];
        if (!PyUnicode_CheckExact(name) || cg_slot_offset(tp, name, &at[i], k) < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "KernelMethod: slots['%s'] must hold str", role);
            return -1;
        }
    }
    return 0;
}

static PyObject *
km_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *func, *knode, *node, *gcore, *slots, *src;
    static char *names[] = {"func", "kernel_node", "node", "graph_core", "slots", "sources", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!O!O!O!:KernelMethod", names, &func, &PyType_Type, &knode,
                                     &PyType_Type, &node, &PyType_Type, &gcore, &PyDict_Type, &slots, &PyTuple_Type,
                                     &src))
        return NULL;
    if (!PyCallable_Check(func)) {
        PyErr_SetString(PyExc_TypeError, "KernelMethod: func must be callable");
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)knode, (PyTypeObject *)node)) {
        PyErr_SetString(PyExc_TypeError, "KernelMethod: kernel_node must derive from node");
        return NULL;
    }
    if (PyTuple_GET_SIZE(src) != S_COUNT || !PyAnySet_CheckExact(PyTuple_GET_ITEM(src, S_KERNELS)) ||
        !PyAnySet_CheckExact(PyTuple_GET_ITEM(src, S_ARG_OK)) ||
        !PyAnySet_CheckExact(PyTuple_GET_ITEM(src, S_ARG_BUFFERS)) ||
        !PyAnySet_CheckExact(PyTuple_GET_ITEM(src, S_ARG_TENSORS)) ||
        !PyAnySet_CheckExact(PyTuple_GET_ITEM(src, S_NODE_CLASSES)) ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(src, S_GRIDS)) || !PyDict_CheckExact(PyTuple_GET_ITEM(src, S_BLOCKS)) ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(src, S_DIMS)) ||
        !PyType_Check(PyTuple_GET_ITEM(src, S_PARAM))) {
        PyErr_SetString(PyExc_TypeError, "KernelMethod: sources must be (kernel types, argument types, buffer types, "
                                         "tensor types, node classes, grids, blocks, dims seen, Param)");
        return NULL;
    }
    KernelMethod *m = (KernelMethod *)type->tp_alloc(type, 0);
    if (m == NULL)
        return NULL;
    m->func = Py_NewRef(func);
    m->knode = (PyTypeObject *)Py_NewRef(knode);
    m->node = (PyTypeObject *)Py_NewRef(node);
    m->gcore = (PyTypeObject *)Py_NewRef(gcore);
    for (int i = 0; i < S_COUNT; i++)
        m->src[i] = Py_NewRef(PyTuple_GET_ITEM(src, i));
    static const int node_kept[2] = {N_GRAPH, N_PREDS}, graph_kept[G_COUNT] = {G_NODES, G_PARAMS, G_TOPO};
    Py_ssize_t unused[N_COUNT];
    if (resolve(slots, "node", (PyTypeObject *)node, N_COUNT, unused, m->node_descr, node_kept, 2) < 0 ||
        resolve(slots, "node", (PyTypeObject *)knode, N_COUNT, m->node_at, NULL, NULL, 0) < 0 ||
        resolve(slots, "kernel_node", (PyTypeObject *)knode, K_COUNT, m->kernel_at, NULL, NULL, 0) < 0 ||
        resolve(slots, "graph", (PyTypeObject *)gcore, G_COUNT, m->graph_at, m->graph_descr, graph_kept, G_COUNT) < 0 ||
        resolve(slots, "param", (PyTypeObject *)m->src[S_PARAM], PARAM_COUNT, m->param_at, NULL, NULL, 0) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    for (int i = 0; i < N_COUNT; i++)
        if (unused[i] != m->node_at[i]) {
            PyErr_SetString(PyExc_TypeError, "KernelMethod: kernel_node moves the slots of node");
            Py_DECREF(m);
            return NULL;
        }
    m->vectorcall = (vectorcallfunc)cg_kernel_vectorcall;
    return (PyObject *)m;
}

static int
km_traverse(KernelMethod *m, visitproc visit, void *arg)
{
    Py_VISIT(m->func);
    Py_VISIT(m->knode);
    Py_VISIT(m->node);
    Py_VISIT(m->gcore);
    for (int i = 0; i < S_COUNT; i++)
        Py_VISIT(m->src[i]);
    for (int i = 0; i < 2; i++)
        Py_VISIT(m->node_descr[i]);
    for (int i = 0; i < G_COUNT; i++)
        Py_VISIT(m->graph_descr[i]);
    TypeTable *tables[] = {&m->kernels, &m->ok, &m->buffers, &m->tensors, &m->nodes, &m->graphs};
    for (int t = 0; t < 6; t++)
        for (Py_ssize_t i = 0; i < tables[t]->n; i++)
            Py_VISIT(tables[t]->t[i]);
    for (int i = 0; i < 2; i++) {
        Py_VISIT(m->dim_in[i]);
        Py_VISIT(m->dim_out[i]);
    }
    Py_VISIT(m->dict);
    return 0;
}

static void
km_forget_all(KernelMethod *m)
{
    cg_table_clear(&m->kernels);
    cg_table_clear(&m->ok);
    cg_table_clear(&m->buffers);
    cg_table_clear(&m->tensors);
    cg_table_clear(&m->nodes);
    cg_table_clear(&m->graphs);
    for (int i = 0; i < 2; i++) {
        Py_CLEAR(m->dim_in[i]);
        Py_CLEAR(m->dim_out[i]);
    }
}

static int
km_clear(KernelMethod *m)
{
    km_forget_all(m);
    Py_CLEAR(m->func);
    Py_CLEAR(m->knode);
    Py_CLEAR(m->node);
    Py_CLEAR(m->gcore);
    for (int i = 0; i < S_COUNT; i++)
        Py_CLEAR(m->src[i]);
    for (int i = 0; i < 2; i++)
        Py_CLEAR(m->node_descr[i]);
    for (int i = 0; i < G_COUNT; i++)
        Py_CLEAR(m->graph_descr[i]);
    Py_CLEAR(m->dict);
    return 0;
}

static void
km_dealloc(KernelMethod *m)
{
    PyObject_GC_UnTrack(m);
    km_clear(m);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyObject *
km_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *
km_get_func(KernelMethod *m, void *closure)
{
    return Py_NewRef(m->func);
}

static PyObject *
km_get_taken(KernelMethod *m, void *closure)
{
    return PyLong_FromSsize_t(m->taken);
}

static PyObject *
km_get_placed(KernelMethod *m, void *closure)
{
    return PyLong_FromSsize_t(m->placed);
}

static PyObject *
km_forget(KernelMethod *m, PyObject *unused)
{
    km_forget_all(m);
    Py_RETURN_NONE;
}

static PyObject *
table_tuple(const TypeTable *t)
{
    PyObject *out = PyTuple_New(t->n);
    if (out != NULL)
        for (Py_ssize_t i = 0; i < t->n; i++)
            PyTuple_SET_ITEM(out, i, Py_NewRef(t->t[i]));
    return out;
}

static PyObject *
km_known(KernelMethod *m, PyObject *unused)
{
    PyObject *k = table_tuple(&m->kernels), *o = table_tuple(&m->ok), *b = table_tuple(&m->buffers),
             *t = table_tuple(&m->tensors), *n = table_tuple(&m->nodes), *g = table_tuple(&m->graphs), *out = NULL;
    if (k && o && b && t && n && g)
        out = Py_BuildValue("{sOsOsOsOsOsO}", "kernels", k, "arguments", o, "buffers", b, "tensors", t, "nodes", n,
                            "graphs", g);
    Py_XDECREF(k);
    Py_XDECREF(o);
    Py_XDECREF(b);
    Py_XDECREF(t);
    Py_XDECREF(n);
    Py_XDECREF(g);
    return out;
}

static PyMethodDef km_methods[] = {
    {"forget", (PyCFunction)km_forget, METH_NOARGS,
     "forget() -> None\n\nEmpty the tables of learned types: the next calls go to the Python method, which fills "
     "them again."},
    {"known", (PyCFunction)km_known, METH_NOARGS,
     "known() -> dict[str, tuple[type, ...]]\n\nThe types learned so far (kernels, arguments, buffers, tensors, nodes, "
     "graphs)."},
    {"place", (PyCFunction)(void (*)(void))cg_km_place, METH_FASTCALL,
     "place(graph, node, after, name) -> bool\n\nGive the new node `node` (its own fields set, its base slots "
     "unset) its base slots and link it into `graph` after `after` (None, a node or distinct nodes of the graph, "
     "of types the Python path accepted), named `name` (a str): True, or False with nothing changed (the Python "
     "path places it then)."},
    {"validate", (PyCFunction)(void (*)(void))cg_km_validate, METH_FASTCALL,
     "validate(graph, nodes, start, seen, kernel_types, arg_types) -> int\n\nThe index of the first node of "
     "`nodes` (the list of `graph`) from `start` that is not a plain kernel node passing Graph.validate's checks "
     "as its Python twin passes them without learning anything (see _define_validate.c), or len(nodes)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef km_getset[] = {
    {"func", (getter)km_get_func, NULL, "The Python method: every call the compiled path does not take goes to it.",
     NULL},
    {"taken", (getter)km_get_taken, NULL, "How many calls the compiled path answered.", NULL},
    {"placed", (getter)km_get_placed, NULL, "How many nodes of other builders place() placed.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(km_doc, "KernelMethod(func, kernel_node, node, graph_core, slots, sources)\n\n"
                     "Graph.kernel: builds the node in C for the common call (see _define.c) and hands every other "
                     "call to `func`, the Python method. `slots` names the slots read, by role ('node', "
                     "'kernel_node', 'graph'); `sources` holds the Python method's own tables. Copy the Python "
                     "method's name and docstring onto it with functools.update_wrapper.");

PyTypeObject cg_kernel_method_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cudagraph.definition._define.KernelMethod",
    .tp_basicsize = sizeof(KernelMethod),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = km_doc,
    .tp_new = km_new,
    .tp_dealloc = (destructor)km_dealloc,
    .tp_traverse = (traverseproc)km_traverse,
    .tp_clear = (inquiry)km_clear,
    .tp_vectorcall_offset = offsetof(KernelMethod, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = km_get,
    .tp_methods = km_methods,
    .tp_getset = km_getset,
    .tp_dictoffset = offsetof(KernelMethod, dict),
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
};

static struct PyModuleDef define_module = {
    PyModuleDef_HEAD_INIT,
    "cudagraph.definition._define",
    "Graph.kernel's, Graph.memset's and Graph.memcpy's compiled paths for the common call, and a launch after a "
    "builder path's last op "
    "(optional; see _define.c).",
    -1,
    NULL,
};

PyMODINIT_FUNC
PyInit__define(void)
{
    for (int i = 0; i < KW_COUNT; i++)
        if (cg_kw_str[i] == NULL && (cg_kw_str[i] = PyUnicode_InternFromString(cg_kw_names[i])) == NULL)
            return NULL;
    if (cg_str_is_cuda == NULL && (cg_str_is_cuda = PyUnicode_InternFromString("is_cuda")) == NULL)
        return NULL;
    if (cg_str_accessible == NULL && (cg_str_accessible = PyUnicode_InternFromString("is_device_accessible")) == NULL)
        return NULL;
    if (cg_zero == NULL && (cg_zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    if (PyType_Ready(&cg_kernel_method_type) < 0 || PyType_Ready(&cg_path_launch_type) < 0 ||
        PyType_Ready(&cg_op_method_type) < 0 || PyType_Ready(&cg_topology_record_type) < 0)
        return NULL;
    PyObject *mod = PyModule_Create(&define_module);
    if (mod == NULL)
        return NULL;
    if (PyModule_AddObjectRef(mod, "KernelMethod", (PyObject *)&cg_kernel_method_type) < 0 ||
        PyModule_AddObjectRef(mod, "PathLaunch", (PyObject *)&cg_path_launch_type) < 0 ||
        PyModule_AddObjectRef(mod, "OpMethod", (PyObject *)&cg_op_method_type) < 0 ||
        PyModule_AddObjectRef(mod, "TopologyRecord", (PyObject *)&cg_topology_record_type) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
