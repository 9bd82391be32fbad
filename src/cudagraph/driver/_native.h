/*
 * Shared by the sources of cudagraph.driver._native: the driver ABI it writes, reading __slots__
 * attributes by offset (names declared in Python), and the entry points each source file defines.
 *
 *   _native.c         module init; the slot list (declare_slots) and resolving it on classes
 *   _native_loop.c    KernelLoop: adding or setting runs of kernel nodes
 *   _native_pack.c    packing a kernel's arguments by learned kinds (KernelLoop and stream launches)
 *   _native_kernels.c the kernels a KernelLoop knows (prepared layouts by kernel)
 *   _native_layout.c  Layout: topology signatures and kernel-node diffs
 *   _native_rebind.c  set_kernel_node, rebind, patch: executable node updates
 *   _native_sets.c    the driver set calls of a rebind or patch, made with the GIL released once
 *   _native_bind.c    BindMethod: Executable.bind with the one-pointer rebind in C
 *   _native_bind_many.c BindManyMethod: Executable._bind_many (several names) with the common case in C
 *   _native_tensor.c  a torch tensor's address and layout key read in C (DLPack's C exchange API, or getters)
 *   _native_exec_launch.c LaunchMethod: Executable.launch, cuGraphLaunch by address (after a rebind's sets)
 *   _native_edges.c   the driver edges of a node (the predecessors another one does not imply)
 *   _native_simple.c  fills, 1-D copies and empty nodes written by a KernelLoop (their parameters from slots)
 *   _native_launch.c  LaunchKernel: a kernel prepared for stream launches (_native_launch.h: shared by
 *   _native_launcher.c, StreamLauncher: cudagraph.launch, _native_issue.c, its Graph.run batches, and
 *   _native_capture.c, its capture)
 *   _offer_gil.h      cg_offer_gil: the adding loop offers the GIL to other threads now and then
 *
 * Memory rules, for every source: a Python object used across a call that can run Python code
 * (attribute access, int(), a type's __hash__ or __eq__ through a dict or set lookup, allocating a
 * GC-tracked object, releasing a reference, a driver entry point that is a Python callback in
 * tests) is held by a strong reference or read again after the call; a length read before such a
 * call is checked again after it; an object is type-checked before an unchecked macro reads it.
 */
#ifndef CUDAGRAPH_NATIVE_H
#define CUDAGRAPH_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_offer_gil.h" /* cg_offer_gil: long loops offer the GIL */

#ifndef Py_T_OBJECT_EX
#include <structmember.h>
#define Py_T_OBJECT_EX T_OBJECT_EX
#define Py_T_INT T_INT
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_READONLY READONLY
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

/* CUDA_MEMSET_NODE_PARAMS_v2 */
typedef struct {
    unsigned long long dst; /* CUdeviceptr */
    size_t pitch;
    unsigned int value, elementSize;
    size_t width, height;
    void *ctx; /* CUcontext */
} cg_memset_params;

/* CUDA_MEMCPY_NODE_PARAMS: flags, reserved, copyCtx, then a CUDA_MEMCPY3D (copy below). */
typedef struct {
    size_t xInBytes, y, z, lod;
    int memoryType; /* CUmemorytype */
    const void *host;
    unsigned long long device; /* CUdeviceptr */
    void *array, *reserved;
    size_t pitch, height;
} cg_memcpy_end;

typedef struct {
    int flags, reserved;
    void *copyCtx;
    cg_memcpy_end src, dst;
    size_t widthInBytes, height, depth;
} cg_memcpy_params;

/* CUgraphNodeType, CUmemorytype and CUpointer_attribute values written or read here. */
enum { CG_NODE_KERNEL = 0, CG_NODE_MEMCPY = 1, CG_NODE_MEMSET = 2, CG_NODE_EMPTY = 5 };
enum { CG_MEMORY_HOST = 1, CG_MEMORY_UNIFIED = 4 };
enum { CG_ATTRIBUTE_MEMORY_TYPE = 2 };

/* CUresult cuPointerGetAttributes(unsigned int, CUpointer_attribute *, void **, CUdeviceptr) */
typedef int (*cg_pointer_attributes_fn)(unsigned int, int *, void **, unsigned long long);

_Static_assert(offsetof(cg_graph_node_params, u) == 16, "CUgraphNodeParams layout");
_Static_assert(sizeof(cg_memset_params) == 48 && offsetof(cg_memset_params, width) == 24, "memset layout");
_Static_assert(sizeof(cg_memcpy_end) == 88 && offsetof(cg_memcpy_end, device) == 48, "CUDA_MEMCPY3D layout");
_Static_assert(offsetof(cg_memcpy_params, dst) == 104 && sizeof(cg_memcpy_params) == 216, "memcpy layout");
_Static_assert(sizeof(cg_memcpy_params) <= sizeof(long long[29]), "memcpy params fit the union");
_Static_assert(sizeof(cg_graph_node_params) == 256, "CUgraphNodeParams size");
_Static_assert(offsetof(cg_kernel_params_v3, kernelParams) == 40, "CUDA_KERNEL_NODE_PARAMS layout");

/* ------------------------------------------------------------------ helpers */

static inline int
address_of(PyObject *obj, const char *what, void **out)
{
    void *p = PyLong_AsVoidPtr(obj); /* runs no Python code: an int subclass is read as it is */
    if (p == NULL && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "%s must be an address (int)", what);
        return -1;
    }
    *out = p;
    return 0;
}

/* An int's value as an unsigned 64-bit word: PyLong_AsUnsignedLongLong's value and errors (OverflowError,
 * TypeError for a non-int; no __index__, so no Python code runs). Where unsigned long has 64 bits it is
 * read by PyLong_AsUnsignedLong, which adds the digits up: PyLong_AsUnsignedLongLong goes through
 * _PyLong_AsByteArray for any value of more than one digit (every address), a visible part of the lowering
 * loop under perf (bench/construction.py --cpu: lower). */
static inline unsigned long long
cg_as_u64(PyObject *v)
{
#if ULONG_MAX == 0xFFFFFFFFFFFFFFFFull
    return PyLong_AsUnsignedLong(v);
#else
    return PyLong_AsUnsignedLongLong(v);
#endif
}

/* Whether `obj` is a node: of the kernel node type (most are; tested first, as a subtype test walks the
 * MRO), of the node type, or of a subtype. `kernel_type` is a subtype of `node_type` (checked where the
 * types are resolved, cg_resolve_node_types). */
static inline int
cg_is_node(PyTypeObject *kernel_type, PyTypeObject *node_type, PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    return t == kernel_type || t == node_type || PyType_IsSubtype(t, node_type);
}

/* Write an unsigned 64-bit value from a Python int (no exception set on failure; runs no Python code). */
static inline int
pack_u64(PyObject *v, char *to)
{
    unsigned long long x = cg_as_u64(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    memcpy(to, &x, sizeof x); /* x86-64 and aarch64 Linux are little-endian */
    return 1;
}

/* A (x, y, z) tuple of ints as three unsigned ints; 0 on success, -1 (no exception set) otherwise. */
static inline int
dims3(PyObject *t, unsigned int *x, unsigned int *y, unsigned int *z)
{
    if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 3)
        return -1;
    unsigned long v[3];
    for (int i = 0; i < 3; i++) {
        PyObject *item = PyTuple_GET_ITEM(t, i);
        if (!PyLong_CheckExact(item))
            return -1;
        v[i] = PyLong_AsUnsignedLong(item);
        if (v[i] == (unsigned long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        if (v[i] > 0xFFFFFFFFul)
            return -1;
    }
    *x = (unsigned int)v[0];
    *y = (unsigned int)v[1];
    *z = (unsigned int)v[2];
    return 0;
}

/* The object held by the __slots__ attribute at instance offset `off` (NULL when unset). */
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* ------------------------------------------------------------------ the slots read (_native.c)
 *
 * The C structures below are read from Python objects through their __slots__. The names are not
 * written here: cudagraph.driver.c_entry declares them once (NATIVE_SLOTS, a role -> names mapping,
 * handed over by declare_slots() at import), in the order of the fields of each structure. A type
 * built over a class (KernelLoop, Layout, BindMethod) resolves the offsets on the class it is given.
 */

/* NATIVE_SLOTS["kernel_node"]: a KernelNode's launch. */
typedef union {
    struct {
        Py_ssize_t kernel, grid, block, smem, args, attrs;
    };
    Py_ssize_t at[6];
} cg_kernel_slots;

/* NATIVE_SLOTS["node"]: every Node's predecessors and position. */
typedef union {
    struct {
        Py_ssize_t preds, index;
    };
    Py_ssize_t at[2];
} cg_node_slots;

/* NATIVE_SLOTS["memset_node"]: a fill's operands (MemsetNode). */
typedef union {
    struct {
        Py_ssize_t dst, value, element_size, width, height, pitch;
    };
    Py_ssize_t at[6];
} cg_memset_slots;

/* NATIVE_SLOTS["memcpy_node"]: a 1-D copy's operands (MemcpyNode). */
typedef union {
    struct {
        Py_ssize_t dst, src, nbytes;
    };
    Py_ssize_t at[3];
} cg_memcpy_slots;
/* NATIVE_SLOTS["parameter"] (Param: its name) and ["parameter_at"] (ParamAt: the Param and the byte offset into it). */
typedef union {
    struct {
        Py_ssize_t name, at_param, at_offset;
    };
    Py_ssize_t at[3];
} cg_param_slots;

_Static_assert(sizeof(cg_memcpy_slots) <= sizeof(cg_memset_slots),
               "a fill has the most slots: Layout's diff reads either kind into an array of a fill's size");

/* NATIVE_SLOTS["executable"]: the state of an Executable that its compiled binds read and write. */
typedef union {
    struct {
        Py_ssize_t exec, exec_addr, raw, bindings, plans, lock, calls, checks;
    };
    Py_ssize_t at[8];
} cg_executable_slots;

/* NATIVE_SLOTS["bind_plan"]: a prepared BindPlan (groups: its pointer_groups; all_groups: its groups). */
typedef union {
    struct {
        Py_ssize_t groups, address, count, all_groups;
    };
    Py_ssize_t at[4];
} cg_bind_plan_slots;

/* NATIVE_SLOTS["patch_plan"]: a prepared PatchPlan. */
typedef union {
    struct {
        Py_ssize_t entries, codes, general, count, native;
    };
    Py_ssize_t at[5];
} cg_patch_plan_slots;

/* NATIVE_SLOTS["value_check"]: a parameter's ValueCheck. */
typedef union {
    struct {
        Py_ssize_t scalar, memory, passed;
    };
    Py_ssize_t at[3];
} cg_value_check_slots;

/* NATIVE_SLOTS["memory_check"]: a parametrized pointer's MemoryCheck (the layout keys that passed). */
typedef union {
    struct {
        Py_ssize_t passed;
    };
    Py_ssize_t at[1];
} cg_memory_check_slots;

/* NATIVE_SLOTS["launch"]: the state of an Executable that its compiled launch reads. */
typedef union {
    struct {
        Py_ssize_t exec, exec_addr, sink, last_stream, stream_addr;
    };
    Py_ssize_t at[5];
} cg_launch_slots;

#define CG_SLOT_COUNT(u) ((Py_ssize_t)(sizeof(u) / sizeof(Py_ssize_t)))

/* Resolve the slots declared for `role` on `tp` into offsets[0:count] (the instance offsets of its
 * member descriptors). 0, or -1 with an exception set: RuntimeError when nothing was declared,
 * ValueError when the role names another number of slots, AttributeError when `tp` lacks one,
 * TypeError when the attribute is not an object slot of `tp` or a base. May run Python code. */
int cg_resolve_slots(PyTypeObject *tp, const char *role, Py_ssize_t count, Py_ssize_t *offsets);

/* Check that `ktype` and `ntype` are types, the first deriving from the second, and resolve the
 * kernel-node and node slots into *kn and *nd (Layout and KernelLoop take the same pair).
 * 0, or -1 with an exception set (TypeError, or those of cg_resolve_slots). May run Python code. */
int cg_resolve_node_types(PyObject *ktype, PyObject *ntype, cg_kernel_slots *kn, cg_node_slots *nd);

/* ------------------------------------------------------------------ _native_simple.c
 *
 * Fills, 1-D copies and empty nodes whose operands are plain ints (or parameters bound to plain ints), written
 * into a CUgraphNodeParams in C (a KernelLoop adds them in its run, a StreamLauncher issues them). Python twins:
 * the kinds' `params` (cudagraph.ops.kinds.memset, .copy, .structure), through cuda.bindings.
 */

#define CG_SEEN_TYPES 4

typedef struct {
    PyTypeObject *memset_type, *memcpy_type, *empty_type; /* exact types; NULL until known */
    cg_memset_slots ms;
    cg_memcpy_slots mc;
    void *ctx;                            /* the CUcontext of fills and copies */
    cg_pointer_attributes_fn attributes;  /* NULL: copies go through Python (their memory types unread) */
    unsigned long long lowest;            /* below it no allocation lies: a copy from there goes through Python */
    void *set_fn;                         /* cuGraphExecNodeSetParams (a loop that sets nodes); NULL: none */
    PyTypeObject *param_type, *param_at_type; /* Param and ParamAt (exact); NULL: parameter operands go to Python */
    cg_param_slots pm;
    PyObject *bindings; /* dict: a parameter's name -> its address (an exact int), held; NULL: none */
    /* The memory types last read in this run (cg_simple_forget at each run's start): a chain of copies between
     * the same buffers asks the driver once per end, not once per node. */
    unsigned long long seen_ptr[CG_SEEN_TYPES];
    int seen_type[CG_SEEN_TYPES], seen, seen_next;
} cg_simple_kinds;

/* CUresult cuGraphExecNodeSetParams(CUgraphExec, CUgraphNode, CUgraphNodeParams *) */
typedef int (*cg_set_node_fn)(void *, void *, cg_graph_node_params *);

/* Know the kinds from simple()'s arguments (ctx, attributes, lowest, memset_type, memcpy_type, empty_type[,
 * set_fn[, param_type, param_at_type, bindings]]; the last three may be None): 0, or -1 with an exception set.
 * May run Python code (resolving the slots). */
int cg_simple_know(cg_simple_kinds *s, PyObject *const *argv, Py_ssize_t argc);
/* Hold `bindings` (a dict, or NULL / None: none) as the parameters' addresses from now on: 0, or -1 with a
 * TypeError. Releasing the dict held before may run Python code. */
int cg_simple_bind(cg_simple_kinds *s, PyObject *bindings);
/* Release the types held. */
void cg_simple_clear(cg_simple_kinds *s);
/* Forget the memory types read: memory may be freed and allocated again between two runs. */
void cg_simple_forget(cg_simple_kinds *s);
int cg_simple_visit(cg_simple_kinds *s, visitproc visit, void *arg);
/* Whether `node` (held by the caller) is of a known kind. Runs no Python code. */
int cg_simple_is(const cg_simple_kinds *s, PyObject *node);
/* Write the parameters of `node` into *p (zeroed first): 1, or 0 when it must go through Python (an operand
 * that is not a plain int in range, an address below `lowest`); no exception set either way. Runs no Python
 * code but the memory-type queries (a driver call; a Python callback in tests): the caller holds `node`. */
int cg_simple_write(cg_simple_kinds *s, PyObject *node, cg_graph_node_params *p);

/* ------------------------------------------------------------------ driver edges (_native_edges.c) */

/* What the edge rule reads of the definition's nodes. */
typedef struct {
    PyTypeObject *kernel_type; /* KernelNode (exact) */
    PyTypeObject *node_type;   /* Node */
    const cg_kernel_slots *kn;
    const cg_node_slots *nd;
} cg_edge_types;

/* One byte per predecessor of `node` (`preds`, its exact list), 1 where another predecessor implies the
 * edge: `few` (the caller's 8 bytes) for at most eight, else allocated; NULL when out of memory (no
 * exception set). Release it with cg_implied_free. Runs no Python code. */
char *cg_implied(const cg_edge_types *t, PyObject *node, PyObject *preds, char *few);
void cg_implied_free(char *implied, const char *few);

/* Keep in deps[:n] (the driver nodes of `preds`, in order, n == len(preds)) those whose edges reach
 * the driver: the count kept, or -1 when out of memory (no exception set). Runs no Python code. */
Py_ssize_t cg_keep_driver_deps(const cg_edge_types *t, PyObject *node, PyObject *preds, void **deps, Py_ssize_t n);

/* Item 1 of `obj.<name>()` (a stream's __cuda_stream__ answer, (version, handle)) when it is an exact int
 * (a new reference), or NULL with no exception set (any other answer, or the call raised). Runs Python
 * code; the caller holds `obj`. (_native.c) */
PyObject *cg_protocol_handle(PyObject *obj, PyObject *name);

/* Interned attribute names that are not slots: a buffer's `handle` (its address), a lock's `acquire`
 * and `release`. */
extern PyObject *cg_str_handle, *cg_str_acquire, *cg_str_release;

/* Take `lock` (held by the caller) without waiting, `lock.acquire(False)`: 1 when taken, 0 when another
 * thread holds it or the lock could not say (no exception set). Runs Python code, except for an ExecLock
 * (cg_ExecLockType). (_native_bind.c) */
int cg_lock_take(PyObject *lock);

/* `lock.release()` of a lock cg_lock_take took; returns `r`, or -1 with its exception set when the release
 * raised and no exception was set before (one set before is kept). Runs Python code, except for an ExecLock.
 * (_native_bind.c) */
int cg_lock_give(PyObject *lock, int r);

/* The head BindMethod and BindManyMethod share: both are method descriptors (Py_TPFLAGS_METHOD_DESCRIPTOR)
 * with a vectorcall entry and the Python method `func` they hand every call they do not take to. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func;
} cg_method_head;

/* tp_descr_get of those descriptors: themselves on the class, a bound method on an instance. (_native_bind.c) */
PyObject *cg_method_get(PyObject *self, PyObject *obj, PyObject *type);
/* Their attributes: `func` (the Python method) and `__dict__` (functools.update_wrapper). (_native_bind.c) */
extern PyGetSetDef cg_method_getset[];

/* Each of those structs holds its objects in a row from `func` to its last field of them, `dict`: the
 * number of them, for the shared traverse and clear below. */
#define CG_METHOD_HELD(T)                                                                                            \
    ((Py_ssize_t)((offsetof(T, dict) - offsetof(cg_method_head, func)) / sizeof(PyObject *) + 1))
/* tp_traverse and tp_clear over the `held` objects from `func` on; tp_dealloc (through tp_clear). (_native_bind.c) */
int cg_method_visit(PyObject *self, Py_ssize_t held, visitproc visit, void *arg);
int cg_method_clear(PyObject *self, Py_ssize_t held);
void cg_method_dealloc(PyObject *self);
/* tp_new's start: a new object of `type` holding `func` (which must be callable; `what` names the type in
 * the TypeError) and calling `call`, its other objects NULL; NULL with an exception set. (_native_bind.c) */
PyObject *cg_method_alloc(PyTypeObject *type, PyObject *func, vectorcallfunc call, const char *what);

/* The type object of the compiled method whose struct is T (named NAME, documented by DOC, made by NEW):
 * `PyTypeObject cg_BindMethodType = CG_METHOD_TYPE(BindMethod, ...);` after CG_METHOD_GC(BindMethod). */
#define CG_METHOD_GC(T)                                                                                              \
    static int T##_traverse(PyObject *m, visitproc visit, void *arg)                                                \
    {                                                                                                                \
        return cg_method_visit(m, CG_METHOD_HELD(T), visit, arg);                                                    \
    }                                                                                                                \
    static int T##_clear(PyObject *m) { return cg_method_clear(m, CG_METHOD_HELD(T)); }
#define CG_METHOD_TYPE(T, NAME, DOC, NEW)                                                                            \
    {                                                                                                                \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = NAME, .tp_basicsize = sizeof(T),                                   \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_METHOD_DESCRIPTOR |                        \
                    Py_TPFLAGS_HAVE_VECTORCALL,                                                                      \
        .tp_doc = DOC, .tp_new = NEW, .tp_dealloc = cg_method_dealloc, .tp_traverse = T##_traverse,                 \
        .tp_clear = T##_clear, .tp_vectorcall_offset = offsetof(T, vectorcall), .tp_call = PyVectorcall_Call,       \
        .tp_descr_get = cg_method_get, .tp_getset = cg_method_getset, .tp_dictoffset = offsetof(T, dict),           \
        .tp_getattro = PyObject_GenericGetAttr, .tp_setattro = PyObject_GenericSetAttr,                             \
    }

/* Add `n` to the update count in slot `off` of `exe` as it is now: 0, or -1 with an exception set (MemoryError).
 * A count that is not an int of the expected range is left alone. Runs no Python code. (_native_bind.c) */
int cg_add_calls(PyObject *exe, Py_ssize_t off, Py_ssize_t n);

/* ------------------------------------------------------------------ _native_pack.c
 *
 * Packing a kernel's arguments into its argument buffer by the kinds the Python side learned for
 * their types (cudagraph.driver.kernel_args.KernelInfo._learn): the one packer of the kernel loop
 * (cg_entry_pack) and of stream launches (LaunchKernel, _native_launch.h).
 */

/* How one argument is packed (one letter per argument, learned per sequence of argument types). */
enum {
    KIND_POINTER = 'P', /* an int (exactly): a 64-bit address */
    KIND_SCALAR = 'S',  /* a numpy scalar: its bytes (buffer protocol), exactly the parameter's size */
    KIND_VALUE = 'N',   /* a numpy scalar of a type whose value follows the object header: those bytes */
    KIND_PARAM = 'M',   /* a Param (exact type): the address (an int) or the bytes bound to its name */
    KIND_BYTES = 'B',   /* bytes (exactly): exactly the parameter's size */
    KIND_HANDLE = 'H',  /* an object whose `handle` is the address (a cuda.core Buffer) */
    KIND_TENSOR = 'T',  /* a torch.Tensor (exact type): its data pointer, read by cg_tensor_pointer */
};

typedef struct {
    PyObject *kinds;                 /* dict (KernelInfo._kinds): tuple of argument types -> bytes of kinds */
    PyObject *last_key, *last_kinds; /* the entry of `kinds` used last (a run of calls repeats it); NULL */
    char *buf;                       /* the argument buffer */
    Py_ssize_t n;                    /* the number of parameters */
    Py_ssize_t *offsets, *sizes;     /* parameter i: sizes[i] bytes at buf + offsets[i] */
} cg_packer;

/* The address read last in one run of packs (a KernelLoop's run, an issue() or capture() of Graph.run):
 * the object whose `handle` was read (held) and the word it gave, used again while the same object
 * comes again in that run. A cuda.core Buffer makes a new CUdeviceptr object at each read of `handle`,
 * which int() then reads: a part of lowering a user-style chain (bench/construction.py: lower). So a run reads
 * each Buffer's address once, where the Python twin reads it per node: they differ only for a handle
 * that changes in the middle of a run (Python code run by the run itself). Zeroed at the start of a run;
 * cg_handle_memo_clear at its end. */
typedef struct {
    PyObject *obj; /* NULL: none */
    unsigned long long word;
} cg_handle_memo;

/* Release the memo's object (may run Python code: call it last). */
static inline void
cg_handle_memo_clear(cg_handle_memo *m)
{
    Py_CLEAR(m->obj);
}

/* Pack `args` (held by the caller) into p's buffer by the kinds learned for their types. 1: packed;
 * 2: packed, with a Param's bound address among them (bytes that hold only while the bindings do);
 * 0: declined (no exception set: p not set up, not a tuple of n items, types with no learned kinds, or
 * a value that does not fit), and the Python packer, which names the node and argument at fault, takes
 * them. `memo` (NULL: none) is the run's cg_handle_memo; `params` (NULL: none) the Param type, its name's
 * slot and the bindings (name -> address) of the run (a Param is declined without them). May run Python
 * code (a type's __hash__ or __eq__ in the lookup, int() of a handle, releasing the last entry used or the
 * memo's object): the caller keeps p in place with the same buffer and layout meanwhile. */
int cg_pack(cg_packer *p, PyObject *args, cg_handle_memo *memo, const cg_simple_kinds *params);

/* Release the references p holds (kinds, last_key, last_kinds), with Py_CLEAR; may run Python code. */
void cg_packer_clear(cg_packer *p);

/* ------------------------------------------------------------------ _native_kernels.c
 *
 * The kernels a KernelLoop knows: one prepared layout per kernel object, filled on first sight by the
 * Python side (KernelLoop.use) and looked up by the kernel's address, so that one run of the loop adds
 * nodes of any mix of known kernels. Nothing here runs Python code except cg_entry_pack.
 */

typedef struct {
    PyObject *kernel;      /* the key (a strong reference); NULL: a free slot */
    PyObject *owner;       /* keeps the buffer and `kernel_params` alive (the KernelInfo) */
    PyObject *args;        /* the argument tuple the buffer holds (NULL: none known) */
    void *func, *kern;     /* the function fields of the node parameters (CUfunction, CUkernel) */
    void **kernel_params;  /* kernelParams: one pointer into the buffer per parameter */
    cg_packer pk;          /* the buffer (pk.buf), its layout and the learned kinds (the key's KernelInfo) */
} cg_kernel_entry;

typedef struct {
    cg_kernel_entry *slots; /* open addressing on the kernel's address; capacity 0 or a power of 2 */
    Py_ssize_t capacity, used;
} cg_kernel_table;

/* The entry of `kernel`, or NULL. Runs no Python code. */
cg_kernel_entry *cg_table_find(const cg_kernel_table *t, PyObject *kernel);

/* Make room for one more entry (the addresses of entries change). 0, or -1 with MemoryError. */
int cg_table_reserve(cg_kernel_table *t);

/* The entry of `kernel`, or the free slot it goes in (its `kernel` NULL); cg_table_reserve first. */
cg_kernel_entry *cg_table_slot(cg_kernel_table *t, PyObject *kernel);

/* Free the slot array; the references held are the caller's to release first (cg_entry_refs). */
void cg_table_free(cg_kernel_table *t);

/* Read KernelLoop.use()'s layout arguments (argv[2] offsets and argv[3] sizes, exact tuples of one length; argv[4]
 * scratch, argv[5] its size, argv[6] function, argv[7] library, argv[8] kernel_params) into a new array: the
 * offsets, then the sizes (PyMem_Free it). NULL with an exception set. May run Python code (__index__, __bool__). */
Py_ssize_t *cg_use_layout(PyObject *const *argv, void **scratch, void **function, void **kernel_params, int *library);

/* The object references an entry holds (6 of them, some NULL), in the order cg_entry_refs writes. */
#define CG_ENTRY_REFS 6
void cg_entry_refs(cg_kernel_entry *e, PyObject **out);

/* Pack `args` into the entry's buffer by the kinds learned for their types (`params`: as cg_pack); on
 * success the entry holds `args` (unless a Param's address was read: bindings may change between runs).
 * 1: packed; 0: not (no exception set): the caller packs in Python, which names bad arguments.
 * May run Python code (int(handle), a type's __hash__): the caller holds `args` and keeps `e` in place. */
int cg_entry_pack(cg_kernel_entry *e, PyObject *args, cg_handle_memo *memo, const cg_simple_kinds *params);

/* A launch of the executable to make right after the set calls of a rebind, in the same release of the GIL
 * (the compiled Executable.launch asks it of the compiled binds it calls; see _native_exec_launch.c). It is
 * made only when every set call succeeded and `exec` is the executable set: then `done` is 1 and `rc` is
 * cuGraphLaunch's result. */
typedef int (*cg_graph_launch_fn)(void *exec, void *stream);
typedef struct {
    cg_graph_launch_fn fn;
    void *exec, *stream;
    int done, rc;
} cg_then_launch;

/* ------------------------------------------------------------------ the entry points of each source */

/* _native_loop.c, _native_layout.c, _native_bind.c: the types (made ready by cg_*_ready, 0 or -1). */
extern PyTypeObject cg_KernelLoopType, cg_LayoutType, cg_BindMethodType, cg_BindManyMethodType, cg_ExecLockType;
/* _native_launch.c, _native_launcher.c */
extern PyTypeObject cg_LaunchKernelType, cg_StreamLauncherType;
int cg_bind_method_ready(void);
int cg_bind_many_method_ready(void);
/* The fast paths of the compiled Executable.bind (`method` a BindMethod: one name) and _bind_many (a
 * BindManyMethod: the names of the tuple `kwnames` but the `skip`th (-1: none), their values at `kwvalues`,
 * as the twin would have them in its dict), with a launch to make after their set calls (see cg_then_launch):
 * 1 when taken (*count node updates), 0 when the method's Python twin must be called (nothing done,
 * also when `method` is not of that type), -1 with an exception set. May run Python code. */
int cg_bind_one_fast(PyObject *method, PyObject *exe, PyObject *name, PyObject *value, Py_ssize_t *count,
                     cg_then_launch *then);
int cg_bind_many_fast(PyObject *method, PyObject *exe, PyObject *kwnames, PyObject *const *kwvalues, Py_ssize_t skip,
                      Py_ssize_t *count, cg_then_launch *then);
/* The same for the `n` names `names` and their `values` (held by the caller). */
int cg_bind_many_arrays(PyObject *method, PyObject *exe, PyObject *const *names, PyObject *const *values, Py_ssize_t n,
                        Py_ssize_t *count, cg_then_launch *then);
/* ------------------------------------------------------------------ a torch tensor's layout (_native_tensor.c) */
#define CG_TENSOR_DIMS 16
/* What bind_checks._torch_tensor's key holds (plus requires_grad, `grad`), read from a tensor: the objects held. */
typedef struct {
    PyObject *address, *dtype, *is_cuda, *grad; /* an exact int, the dtype, True/False, requires_grad (or NULL) */
    long long device;                           /* get_device() */
    int ndim;
    int64_t shape[CG_TENSOR_DIMS], strides[CG_TENSOR_DIMS];
} cg_tensor_layout;
/* The DLPack C exchange table in `type`'s `__dlpack_c_exchange_api__` capsule (a 1.x table, or one chaining to one,
 * with dltensor_from_py_object_no_sync), or NULL: none. Cached by the capsule's identity (held): read again only
 * when the type holds another capsule. Runs no Python code but a replaced capsule's release. */
const void *cg_dlpack_api(PyTypeObject *type);
/* Read `t`'s layout into `out`: through `api` (cg_dlpack_api's; NULL: through the getters named by `reads`,
 * bind_checks.TORCH_READS), requires_grad where `grad`. 1, or 0 (declined: a read failed or gave an unexpected
 * type; no exception set, nothing held). May run Python code (the getters). */
int cg_tensor_read(const void *api, PyObject *reads, PyObject *t, int grad, cg_tensor_layout *out);
/* Whether the layout key `key` (_torch_tensor's, or _torch_resolved's where `grad`) is the one `l` makes: item by
 * item, the dtype, is_cuda and requires_grad by identity, the rest as exact ints. Runs no Python code. */
int cg_tensor_key_is(PyObject *key, const cg_tensor_layout *l, int grad);
void cg_tensor_layout_release(cg_tensor_layout *l);
/* Write the address of the exact torch.Tensor `t` as 8 bytes at `to` when it is a dense CUDA tensor that does not
 * require grad (0 when it has no elements), read through DLPack's C exchange API (the table of its type, looked up
 * once): 1, or 0 (declined: no table, another tensor, a read that fails; no exception set). May run Python code
 * (the look-up and the requires_grad getter). */
int cg_tensor_pointer(PyObject *t, char *to);

/* _native_exec_launch.c */
extern PyTypeObject cg_LaunchMethodType;
int cg_launch_method_ready(void);

/* _native_rebind.c */
PyObject *cg_set_kernel_node(PyObject *module, PyObject *const *argv, Py_ssize_t argc);
PyObject *cg_rebind(PyObject *module, PyObject *const *argv, Py_ssize_t argc);
extern const char cg_set_kernel_node_doc[], cg_rebind_doc[];

/* Rebind one parameter in kernel nodes of an executable (see cg_rebind_doc): write the `len` bytes
 * at `data` into every group's buffer and set its nodes. 0 when every call succeeded; the driver's
 * CUresult (> 0) when it refused, with the group and node positions in *g_out, *i_out (everything
 * before was set); -1 with an exception set for a malformed group. */
int cg_rebind_groups(void *fn, void *exec, PyObject *groups, const char *data, Py_ssize_t len, Py_ssize_t *g_out,
                     Py_ssize_t *i_out, cg_then_launch *then);

/* _native_sets.c: the driver set calls of a rebind or patch, recorded while the GIL is held, then made with
 * it released once (see the file's comment). */
typedef struct {
    void *fn, *node;
    const void *params;
    Py_ssize_t entry, index; /* the entry (group) and the node's position in it, for a refusal */
} cg_set_call;
typedef struct {
    char *dst;
    const char *src; /* the bytes written; NULL: the 64-bit word `word` */
    unsigned long long word;
    Py_ssize_t len, entry, at; /* at: where the bytes replaced are kept */
} cg_set_write;
#define CG_BATCH_INLINE 8
typedef struct {
    cg_set_call *calls, calls0[CG_BATCH_INLINE];
    cg_set_write *writes, writes0[CG_BATCH_INLINE];
    char *saved, saved0[128];
    Py_ssize_t ncalls, ccalls, nwrites, cwrites, nsaved, csaved;
} cg_set_batch;
void cg_batch_init(cg_set_batch *b);
/* Free what the batch allocated (it is empty again). */
void cg_batch_free(cg_set_batch *b);
/* Record a driver call (the entry point at `fn` on `node` with `params`) or a write of `len` bytes at `dst`
 * (from `src`, or the word when `src` is NULL: the caller keeps `src` alive until the run): 0, or -1 with
 * MemoryError set. Entries are recorded in order, each entry's writes before its calls. */
int cg_batch_call(cg_set_batch *b, void *fn, void *node, const void *params, Py_ssize_t entry, Py_ssize_t index);
int cg_batch_write(cg_set_batch *b, char *dst, const char *src, unsigned long long word, Py_ssize_t len,
                   Py_ssize_t entry);
/* Make the writes, then the calls with the GIL released once (and `then`'s launch after them, if not NULL):
 * 0, or the CUresult of the first refused call with its entry and position in *e_out, *i_out (the writes of
 * the later entries put back, nothing launched). */
int cg_batch_run(cg_set_batch *b, void *exec, Py_ssize_t *e_out, Py_ssize_t *i_out, cg_then_launch *then);

/* Rebind several values in nodes of any kind (see cg_patch_doc). */
PyObject *cg_patch(PyObject *module, PyObject *const *argv, Py_ssize_t argc);
extern const char cg_patch_doc[];

/* One value of a patch: an int as a 64-bit word (data NULL), or `len` bytes at `data` (held by the caller). */
typedef struct {
    unsigned long long word;
    const char *data;
    Py_ssize_t len;
} cg_patch_value;

/* Run the entries of a patch (a list, held by the caller) with `nvalues` values: 0 when every call succeeded;
 * the driver's CUresult (> 0) when it refused, with the entry and node positions in *e_out, *i_out
 * (everything before was set); -1 with an exception set for a malformed entry. */
int cg_patch_entries(void *exec, PyObject *entries, const cg_patch_value *vals, Py_ssize_t nvalues, Py_ssize_t *e_out,
                     Py_ssize_t *i_out, cg_then_launch *then);

#endif
