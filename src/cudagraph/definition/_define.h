/*
 * cudagraph.definition._define: declarations shared by its two sources.
 *
 *   _define.c         the module and the KernelMethod type (construction, slots resolved, tables kept)
 *   _define_kernel.c  the algorithm: the compiled path of Graph.kernel (Python twin:
 *                     cudagraph.definition.kinds.kernel.KernelBuilders.kernel) and learning its types
 *   _define_place.c   placing a new node in its graph (Graph.kernel's path and KernelMethod.place, for the others)
 *   _define_ops.c     OpMethod: the compiled paths of Graph.memset and Graph.memcpy (Python twins:
 *                     MemoryOpBuilders.memset, CopyBuilders.memcpy), placing through _define_place.c
 *   _define_launch.c  PathLaunch: a launch after the last op of a builder's path (cudagraph.compat's launch
 *                     into a GraphBuilder), calling Graph.kernel as its Python twin does
 *   _define_validate.c  KernelMethod.validate: Graph.validate's pass over plain kernel nodes (Python twin:
 *                     cudagraph.definition.graph.Graph._validate_steps)
 *   _define_topology.c  TopologyRecord: a graph's topology written as nodes are placed in C, read by the topology
 *                     signature (twin: cudagraph.definition.diff.topology_signature)
 */
#ifndef CG_DEFINE_H
#define CG_DEFINE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <structmember.h>

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))
#define TABLE_MAX 64 /* types per table; further ones stay on the Python path */
#define PAIRWISE_MAX 32 /* after= lists up to this long are tested for duplicates pairwise */

typedef struct {
    Py_ssize_t n;
    PyObject *t[TABLE_MAX];
} TypeTable;

/* Slot roles, in the order of DEFINE_SLOTS in cudagraph.definition.kinds.kernel. */
enum { N_GRAPH, N_INDEX, N_NAME, N_PREDS, N_COUNT };
enum { K_KERNEL, K_GRID, K_BLOCK, K_SMEM, K_ARGS, K_ATTRS, K_COUNT };
enum { G_NODES, G_PARAMS, G_TOPO, G_COUNT };
enum { PARAM_NAME, PARAM_DTYPE, PARAM_COUNT };
/* Sources, in the order of the tuple handed to KernelMethod. */
enum { S_KERNELS, S_ARG_OK, S_ARG_BUFFERS, S_ARG_TENSORS, S_NODE_CLASSES, S_GRIDS, S_BLOCKS, S_DIMS, S_PARAM, S_COUNT };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func;               /* the Python method (the twin) */
    PyTypeObject *knode, *node, *gcore; /* KernelNode, Node, GraphCore */
    PyObject *src[S_COUNT];       /* the Python method's own tables */
    PyObject *node_descr[2];      /* Node.graph, Node._preds: a subclass must keep them */
    PyObject *graph_descr[G_COUNT]; /* GraphCore._nodes, GraphCore._params, GraphCore._topo */
    PyObject *dict;
    Py_ssize_t node_at[N_COUNT], kernel_at[K_COUNT], graph_at[G_COUNT], param_at[PARAM_COUNT];
    Py_ssize_t taken;             /* calls the compiled path answered */
    Py_ssize_t placed;            /* nodes of other builders placed (place()) */
    PyObject *dim_in[2], *dim_out[2]; /* grid, block: the last size found (an int or a 3-tuple) and its value */
    TypeTable kernels, ok, buffers, tensors, nodes, graphs;
} KernelMethod;

/* Interned keyword names and constants. */

/* Keyword names of Graph.kernel (interned at import) and constants. */
enum { KW_KERNEL, KW_GRID, KW_BLOCK, KW_ARGS, KW_AFTER, KW_NAME, KW_SMEM, KW_CLUSTER, KW_COOPERATIVE,
       KW_PRIORITY, KW_PROGRAMMATIC, KW_DEVICE, KW_COUNT };
extern const char *const cg_kw_names[KW_COUNT];
extern PyObject *cg_kw_str[KW_COUNT];
extern PyObject *cg_str_accessible, *cg_str_is_cuda, *cg_zero;

void cg_table_clear(TypeTable *t);
/* The offset of object slot `name` of `tp` (its descriptor kept in *keep when not NULL); -1 with TypeError. */
int cg_slot_offset(PyTypeObject *tp, PyObject *name, Py_ssize_t *out, PyObject **keep);
extern PyTypeObject cg_kernel_method_type, cg_path_launch_type, cg_op_method_type, cg_topology_record_type;
/* Graph.kernel: the compiled path, else the Python method (then its types are learned). */
PyObject *cg_kernel_vectorcall(KernelMethod *m, PyObject *const *args, size_t nargsf, PyObject *kwnames);

/* The learned-type tables (_define_kernel.c). cg_in_set: membership of `tp` in the Python set `set` (errors
 * cleared: 0; both held meanwhile); may run Python code (a metaclass's hash). cg_in_source: cg_in_set of the
 * Python table `which`. cg_keeps_slots: `tp` reads the names of `descr` through them. */
int cg_table_has(const TypeTable *t, PyTypeObject *tp);
void cg_table_add(TypeTable *t, PyTypeObject *tp);
int cg_in_set(PyObject *set, PyTypeObject *tp);
int cg_in_source(KernelMethod *m, int which, PyTypeObject *tp);
int cg_keeps_slots(PyTypeObject *tp, PyObject *const *descr, int count);

/* Placing a node (_define_place.c). cg_after_pass: `after` (not None) is a usable node or a list or tuple of
 * distinct ones: 1, 0, -1 (no memory); runs no Python code. cg_place_node: give the node `node` (held, its base
 * slots NULL, its own slots set) its base slots and link it into graph `self` after `after` (NULL or None: no
 * predecessor), named `name` (an exact str): 1 placed, 0 declined (nothing changed), -1 error set; runs no
 * Python code but what an allocation's collection runs, before the state is read. cg_learn_links: learn the
 * graph's type and its predecessors' after the Python path placed `node`. cg_km_place: KernelMethod.place. */
int cg_after_pass(KernelMethod *m, PyObject *self, PyObject *after);
int cg_place_node(KernelMethod *m, PyObject *self, PyObject *node, PyObject *after, PyObject *name);
void cg_learn_links(KernelMethod *m, PyObject *self, PyObject *node);
/* _define_topology.c: the new node `node`, at index `i` after `deps` (k of them), in the graph's record. */
void cg_record_place(KernelMethod *m, PyObject *self, PyObject *node, Py_ssize_t i, PyObject **deps, Py_ssize_t k);
PyObject *cg_km_place(KernelMethod *m, PyObject *const *argv, Py_ssize_t argc);
/* Whether the `k` items of `items` are distinct objects: 1, 0, -1 (no memory, error set). Runs no Python code. */
int cg_distinct(PyObject **items, Py_ssize_t k);

/* Whether `a` (an exact Param) is the parameter the graph `self` (of a learned graph type) declared under its name:
 * 1, or 0 (the Python path decides). A lookup by an exact str: no Python code runs, unless the graph declared a
 * parameter under a str subclass whose __eq__ a hash collision calls (the callers read the state after it). */
int cg_param_declared(KernelMethod *m, PyObject *self, PyObject *a);

/* KernelMethod.validate (_define_validate.c). */
PyObject *cg_km_validate(KernelMethod *m, PyObject *const *argv, Py_ssize_t argc);

#endif
