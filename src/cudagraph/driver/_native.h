/*
 * Shared by the sources of cudagraph.driver._native: the driver ABI it writes,
 * reading __slots__ attributes by offset, and the rebinding loop.
 */
#ifndef CUDAGRAPH_NATIVE_H
#define CUDAGRAPH_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef Py_T_OBJECT_EX
#include <structmember.h>
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif

/* ------------------------------------------------------------------ driver ABI (cuda.h, CUDA 12.3+) */

typedef struct {
    void *func; /* CUfunction */
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    void *kern; /* CUkernel */
    void *ctx;  /* CUcontext */
} cg_kernel_params_v3;

typedef struct {
    int type; /* CUgraphNodeType */
    int reserved0[3];
    union {
        long long reserved1[29];
        cg_kernel_params_v3 kernel;
    } u;
    long long reserved2;
} cg_graph_node_params;

/* CUresult cuGraphAddNode_v2(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
 *                            CUgraphNodeParams*) */
typedef int (*cg_add_node_fn)(void **, void *, void *const *, const void *, size_t, cg_graph_node_params *);
/* CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*) */
typedef int (*cg_set_kernel_fn)(void *, void *, const void *);

_Static_assert(offsetof(cg_graph_node_params, u) == 16, "CUgraphNodeParams layout");
_Static_assert(sizeof(cg_graph_node_params) == 256, "CUgraphNodeParams size");
_Static_assert(offsetof(cg_kernel_params_v3, kernelParams) == 40, "CUDA_KERNEL_NODE_PARAMS layout");

/* ------------------------------------------------------------------ helpers */

static inline int
address_of(PyObject *obj, const char *what, void **out)
{
    void *p = PyLong_AsVoidPtr(obj);
    if (p == NULL && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "%s must be an address (int)", what);
        return -1;
    }
    *out = p;
    return 0;
}

/* The instance offset of a __slots__ attribute of `tp` (a member descriptor holding an object). */
static inline int
slot_offset(PyTypeObject *tp, const char *name, Py_ssize_t *out)
{
    PyObject *d = PyObject_GetAttrString((PyObject *)tp, name);
    if (d == NULL)
        return -1;
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ attribute", tp->tp_name, name);
        Py_DECREF(d);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    int ok = m->type == Py_T_OBJECT_EX && m->offset > 0 &&
             m->offset + (Py_ssize_t)sizeof(PyObject *) <= tp->tp_basicsize;
    Py_ssize_t off = m->offset;
    Py_DECREF(d);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", tp->tp_name, name);
        return -1;
    }
    *out = off;
    return 0;
}

/* The object held by the __slots__ attribute at instance offset `off` (NULL when unset). */
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* Rebind one parameter in kernel nodes of an executable (see rebind_doc in _native.c): write the
 * `len` bytes at `data` into every group's buffer and set its nodes. 0 when every call succeeded;
 * the driver's CUresult (> 0) when it refused, with the group and node positions in *g_out, *i_out
 * (everything before was set); -1 with an exception set for a malformed group. */
int cg_rebind_groups(void *fn, void *exec, PyObject *groups, const char *data, Py_ssize_t len, Py_ssize_t *g_out,
                     Py_ssize_t *i_out);

/* The type of the compiled Executable.bind (_native_bind.c), and making it ready (0, or -1 with an
 * exception set). */
extern PyTypeObject cg_BindMethodType;
int cg_bind_method_ready(void);

#endif
