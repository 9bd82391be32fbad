/*
 * cudagraph.driver._native: the compiled hot loops of explicit construction and rebinding.
 *
 * Adding a kernel node (cuGraphAddNode_v2) and setting one in an executable
 * (cuGraphExecKernelNodeSetParams_v2) cost the driver less than calling them
 * from Python through cuda.bindings or ctypes adds (bench/construction.py,
 * bench/updates.py). This module
 * makes those calls from C. It links against nothing: the driver's entry
 * points arrive as addresses (resolved by the Python side from libcuda.so.1),
 * and the structures it writes are the driver's ABI (_native.h).
 *
 * Each algorithm has one Python twin, the reference, named in the table of
 * cudagraph.driver.c_entry; the sources are split by algorithm (see _native.h).
 * This file holds the module and the one place where the compiled code learns
 * how to read Python objects: the slot list that c_entry declares
 * (declare_slots) and its resolution on the classes a type is built over.
 *
 * Nothing here raises for a driver failure: the CUresult is returned (or kept
 * in KernelLoop.rc) and the caller raises the typed error naming the node.
 */
#include "_native.h"

PyObject *cg_str_handle, *cg_str_acquire, *cg_str_release;

/* dict: role -> tuple of slot names (NATIVE_SLOTS as last declared); NULL until declared. */
static PyObject *declared;

PyDoc_STRVAR(declare_slots_doc,
             "declare_slots(slots: dict[str, tuple[str, ...]]) -> None\n\n"
             "The __slots__ names the compiled types read, by role, in the order of the fields of\n"
             "their C structures (cudagraph.driver.c_entry.NATIVE_SLOTS; it calls this at import).\n"
             "Types made afterwards resolve the names on the classes they are given.");

static PyObject *
declare_slots(PyObject *module, PyObject *slots)
{
    if (!PyDict_CheckExact(slots)) {
        PyErr_SetString(PyExc_TypeError, "declare_slots: slots must be a dict of str -> tuple of str");
        return NULL;
    }
    PyObject *copy = PyDict_New();
    if (copy == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *role, *names;
    while (PyDict_Next(slots, &pos, &role, &names)) {
        int ok = PyUnicode_CheckExact(role) && PyTuple_CheckExact(names);
        for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(names); i++)
            ok = PyUnicode_CheckExact(PyTuple_GET_ITEM(names, i));
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "declare_slots: slots must be a dict of str -> tuple of str");
            Py_DECREF(copy);
            return NULL;
        }
        if (PyDict_SetItem(copy, role, names) < 0) { /* exact str keys: runs no Python code */
            Py_DECREF(copy);
            return NULL;
        }
    }
    Py_XSETREF(declared, copy);
    Py_RETURN_NONE;
}

/* The instance offset of the object slot `name` of `tp` (declared for `role`); 0 or -1 with an exception set. */
static int
slot_offset(PyTypeObject *tp, const char *role, PyObject *name, Py_ssize_t *out)
{
    PyObject *d = PyObject_GetAttr((PyObject *)tp, name); /* a metaclass may run Python code here */
    if (d == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_AttributeError,
                         "%s has no attribute %R, which cudagraph.driver.c_entry.NATIVE_SLOTS['%s'] declares as "
                         "one of its __slots__ (the compiled module reads it)",
                         tp->tp_name, name, role);
        }
        return -1;
    }
    int ok = Py_IS_TYPE(d, &PyMemberDescr_Type);
    if (ok) {
        /* A member descriptor of `tp` or of a base: its offset is inside every instance of `tp`. */
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        ok = m->type == Py_T_OBJECT_EX && m->offset > 0 &&
             m->offset + (Py_ssize_t)sizeof(PyObject *) <= tp->tp_basicsize &&
             PyType_IsSubtype(tp, PyDescr_TYPE(d));
        *out = m->offset;
    }
    Py_DECREF(d);
    if (!ok) {
        PyErr_Format(PyExc_TypeError,
                     "%s.%U is not an object slot of the class (cudagraph.driver.c_entry.NATIVE_SLOTS['%s'] declares "
                     "it as one of its __slots__)",
                     tp->tp_name, name, role);
        return -1;
    }
    return 0;
}

int
cg_resolve_slots(PyTypeObject *tp, const char *role, Py_ssize_t count, Py_ssize_t *offsets)
{
    if (declared == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cudagraph.driver._native: no slot list was declared (importing "
                                             "cudagraph.driver.c_entry declares NATIVE_SLOTS)");
        return -1;
    }
    PyObject *names = PyDict_GetItemString(declared, role);
    if (names == NULL) {
        PyErr_Format(PyExc_RuntimeError, "cudagraph.driver.c_entry.NATIVE_SLOTS declares no '%s'", role);
        return -1;
    }
    if (PyTuple_GET_SIZE(names) != count) {
        PyErr_Format(PyExc_ValueError,
                     "cudagraph.driver.c_entry.NATIVE_SLOTS['%s'] names %zd slots; the compiled module reads %zd",
                     role, PyTuple_GET_SIZE(names), count);
        return -1;
    }
    Py_INCREF(names); /* declare_slots may be called again by the Python code slot_offset can run */
    for (Py_ssize_t i = 0; i < count; i++) {
        if (slot_offset(tp, role, PyTuple_GET_ITEM(names, i), &offsets[i]) < 0) {
            Py_DECREF(names);
            return -1;
        }
    }
    Py_DECREF(names);
    return 0;
}

int
cg_resolve_node_types(PyObject *ktype, PyObject *ntype, cg_kernel_slots *kn, cg_node_slots *nd)
{
    PyTypeObject *kt = (PyTypeObject *)ktype, *nt = (PyTypeObject *)ntype;
    if (!PyType_IsSubtype(kt, nt)) {
        PyErr_SetString(PyExc_TypeError, "kernel_type must derive from node_type");
        return -1;
    }
    if (cg_resolve_slots(kt, "kernel_node", CG_SLOT_COUNT(*kn), kn->at) < 0 ||
        cg_resolve_slots(nt, "node", CG_SLOT_COUNT(*nd), nd->at) < 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ calls that return at once */

/* cuCtxGetCurrent and cuGraphCreate only read or make a handle: called with the GIL held, since
 * cuda.bindings releases it for every call, and each release hands it to any other busy Python thread
 * for its switch interval (5 ms). Twins: the same calls through cuda.bindings (driver/calls.py). */
typedef int (*cg_get_context_fn)(void **);
typedef int (*cg_create_graph_fn)(void **, unsigned int);

/* The entry point at argv[0] (an int address): 0, or -1 with an exception set. */
static int
entry_point(PyObject *const *argv, Py_ssize_t argc, Py_ssize_t want, const char *call, void **fn)
{
    if (argc != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", call, want);
        return -1;
    }
    if (address_of(argv[0], "address", fn) < 0)
        return -1;
    if (*fn == NULL) {
        PyErr_Format(PyExc_ValueError, "%s: the address must not be 0", call);
        return -1;
    }
    return 0;
}

/* The (CUresult, handle) answer of those calls: the handle 0 when the driver refused. */
static PyObject *
handle_result(int rc, void *handle)
{
    return Py_BuildValue("(iK)", rc, (unsigned long long)(uintptr_t)(rc ? NULL : handle));
}

PyObject *
cg_protocol_handle(PyObject *obj, PyObject *name)
{
    PyObject *argv[1] = {obj};
    PyObject *t = PyObject_VectorcallMethod(name, argv, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    PyObject *v = NULL;
    if (t != NULL && PyTuple_CheckExact(t) && PyTuple_GET_SIZE(t) >= 2 && PyLong_CheckExact(PyTuple_GET_ITEM(t, 1)))
        v = Py_NewRef(PyTuple_GET_ITEM(t, 1));
    Py_XDECREF(t);
    if (v == NULL)
        PyErr_Clear();
    return v;
}

PyDoc_STRVAR(current_context_doc,
             "current_context(address) -> (CUresult, int)\n\n"
             "cuCtxGetCurrent at `address`, called with the GIL held: its result and the context handle.");

static PyObject *
current_context(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    void *fn, *ctx = NULL;
    if (entry_point(argv, argc, 1, "current_context", &fn) < 0)
        return NULL;
    int rc = ((cg_get_context_fn)fn)(&ctx); /* (before ctx is read: argument order is unspecified) */
    return handle_result(rc, ctx);
}

PyDoc_STRVAR(create_graph_doc,
             "create_graph(address, flags) -> (CUresult, int)\n\n"
             "cuGraphCreate at `address`, called with the GIL held: its result and the new graph's handle.");

static PyObject *
create_graph(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    void *fn, *graph = NULL;
    if (entry_point(argv, argc, 2, "create_graph", &fn) < 0)
        return NULL;
    unsigned long flags = PyLong_AsUnsignedLong(argv[1]);
    if (flags == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (flags > 0xFFFFFFFFul) {
        PyErr_SetString(PyExc_OverflowError, "create_graph: flags must fit 32 bits");
        return NULL;
    }
    int rc = ((cg_create_graph_fn)fn)(&graph, (unsigned int)flags);
    return handle_result(rc, graph);
}

PyDoc_STRVAR(pointer_attribute_doc,
             "pointer_attribute(address, attribute, ptr) -> (CUresult, int)\n\n"
             "cuPointerGetAttributes at `address` for one attribute of `ptr`, called with the GIL held: its result\n"
             "and the value (at most 8 bytes; 0 where CUDA does not know the address).");

/* One attribute through cuPointerGetAttributes, which answers an unknown address with zeros where
 * cuPointerGetAttribute fails. Through cuda.bindings (twin: ops.operands.pointer_attribute) the call
 * builds lists and objects, twice a copy node (both endpoints' memory types; bench/node_kinds.py: memcpy). */
static PyObject *
pointer_attribute(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    void *fn;
    if (entry_point(argv, argc, 3, "pointer_attribute", &fn) < 0)
        return NULL;
    long attribute = PyLong_AsLong(argv[1]);
    if (attribute == -1 && PyErr_Occurred())
        return NULL;
    if (attribute < 0 || attribute > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "pointer_attribute: not an attribute number");
        return NULL;
    }
    unsigned long long ptr = cg_as_u64(argv[2]);
    if (ptr == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    int attr = (int)attribute;
    unsigned long long value = 0; /* (attributes of 4 bytes fill its low half: little-endian) */
    void *data = &value;
    int rc = ((cg_pointer_attributes_fn)fn)(1, &attr, &data, ptr);
    return Py_BuildValue("(iK)", rc, rc ? 0ull : value);
}

/* ------------------------------------------------------------------ module */

static PyMethodDef native_methods[] = {
    {"declare_slots", (PyCFunction)declare_slots, METH_O, declare_slots_doc},
    {"set_kernel_node", (PyCFunction)(void (*)(void))cg_set_kernel_node, METH_FASTCALL, cg_set_kernel_node_doc},
    {"rebind", (PyCFunction)(void (*)(void))cg_rebind, METH_FASTCALL, cg_rebind_doc},
    {"patch", (PyCFunction)(void (*)(void))cg_patch, METH_FASTCALL, cg_patch_doc},
    {"current_context", (PyCFunction)(void (*)(void))current_context, METH_FASTCALL, current_context_doc},
    {"create_graph", (PyCFunction)(void (*)(void))create_graph, METH_FASTCALL, create_graph_doc},
    {"pointer_attribute", (PyCFunction)(void (*)(void))pointer_attribute, METH_FASTCALL, pointer_attribute_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    "cudagraph.driver._native",
    "The compiled hot loops of explicit construction and rebinding (optional; see _native.c).",
    -1,
    native_methods,
};

static int
add_type(PyObject *m, const char *name, PyTypeObject *type)
{
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC
PyInit__native(void)
{
    cg_str_handle = PyUnicode_InternFromString("handle");
    cg_str_acquire = PyUnicode_InternFromString("acquire");
    cg_str_release = PyUnicode_InternFromString("release");
    if (cg_str_handle == NULL || cg_str_acquire == NULL || cg_str_release == NULL)
        return NULL;
    if (PyType_Ready(&cg_KernelLoopType) < 0 || PyType_Ready(&cg_LayoutType) < 0 || cg_bind_method_ready() < 0 ||
        cg_bind_many_method_ready() < 0 || cg_launch_method_ready() < 0 ||
        PyType_Ready(&cg_LaunchKernelType) < 0 || PyType_Ready(&cg_StreamLauncherType) < 0 ||
        PyType_Ready(&cg_ExecLockType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL)
        return NULL;
    if (add_type(m, "KernelLoop", &cg_KernelLoopType) < 0 || add_type(m, "Layout", &cg_LayoutType) < 0 ||
        add_type(m, "BindMethod", &cg_BindMethodType) < 0 ||
        add_type(m, "BindManyMethod", &cg_BindManyMethodType) < 0 ||
        add_type(m, "LaunchMethod", &cg_LaunchMethodType) < 0 ||
        add_type(m, "LaunchKernel", &cg_LaunchKernelType) < 0 ||
        add_type(m, "StreamLauncher", &cg_StreamLauncherType) < 0 || add_type(m, "ExecLock", &cg_ExecLockType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
