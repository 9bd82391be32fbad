/*
 * Shared by the sources of the stream launches (_native_launch.c: LaunchKernel; _native_launcher.c:
 * StreamLauncher, its targets, configurations, launch() and issue(); _native_capture.c: its capture()).
 * See _native_launch.c for what they do and their Python twins.
 */
#ifndef CUDAGRAPH_NATIVE_LAUNCH_H
#define CUDAGRAPH_NATIVE_LAUNCH_H

#include "_native.h"
#include "_two_way.h"

/* CUresult cuLaunchKernel(CUfunction, gx, gy, gz, bx, by, bz, sharedMemBytes, CUstream, void**, void**) */
typedef int (*cg_launch_fn)(void *, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                            unsigned int, unsigned int, void *, void **, void **);
/* CUresult cuStreamGetCaptureInfo_v3(CUstream, status*, id*, CUgraph*, const CUgraphNode**, const edge**, size_t*) */
typedef int (*cg_capture_info_fn)(void *, int *, unsigned long long *, void **, void *const **, const void **,
                                  size_t *);
/* CUresult cuStreamUpdateCaptureDependencies_v2(CUstream, CUgraphNode*, const CUgraphEdgeData*, size_t, unsigned) */
typedef int (*cg_update_deps_fn)(void *, void **, const void *, size_t, unsigned int);

#define SET_CAPTURE_DEPENDENCIES 1u
/* Dynamic shared memory a launch takes without the kernel's opt-in (more: the Python path decides). */
#define PLAIN_SMEM (48ul * 1024)
#define MAX_LAUNCH_PARAMS 256
#define MAX_TARGETS 16
#define CONFIG_CACHE 8

enum { TARGET_INT = 1, TARGET_PROTOCOL = 2, TARGET_LONG = 3 };
/* The attribute names read on foreign objects, handed over by Python (launcher_init). */
enum { NAME_GRID, NAME_BLOCK, NAME_SHMEM, NAME_CLUSTER, NAME_COOPERATIVE, NAME_PROTOCOL, NAME_COUNT };

typedef struct {
    PyObject_HEAD
    int busy;         /* the buffer is taken by a call (packing, or read by the driver): see cg_lk_take */
    PyObject *kernel; /* the kernel object it was prepared for (compared by identity) */
    void *func;       /* the CUfunction (or CUkernel) handle launched */
    cg_packer pk;     /* the argument buffer (pk.buf), its layout and the learned kinds (KernelInfo._kinds) */
    Py_ssize_t size;  /* of the buffer */
    void **ptrs;      /* kernelParams: ptrs[i] = pk.buf + pk.offsets[i] */
} LaunchKernel;

typedef struct {
    PyObject *config, *grid, *block; /* held; grid and block are the objects the config held */
    long smem;
    unsigned int dims[6];
    unsigned long long used; /* the launcher's tick when last found or remembered */
} ConfigEntry;

/* The driver calls whose refusal StreamLauncher.failed names (rc holds the CUresult); from CALL_MEMSET_D8 on,
 * in the order of the entry points StreamLauncher.simple takes (the stream calls of fills and copies). */
enum {
    CALL_LAUNCH,
    CALL_CAPTURE_INFO,
    CALL_UPDATE_DEPS,
    CALL_MEMSET_D8,
    CALL_MEMSET_D16,
    CALL_MEMSET_D32,
    CALL_MEMSET_D2D8,
    CALL_MEMSET_D2D16,
    CALL_MEMSET_D2D32,
    CALL_MEMCPY,
    CALL_COUNT
};
#define STREAM_OPS (CALL_COUNT - CALL_MEMSET_D8)

/* CUresult cuMemsetD{8,16,32}Async(CUdeviceptr, value, size_t count, CUstream), one type per value width */
typedef int (*cg_memset8_fn)(unsigned long long, unsigned char, size_t, void *);
typedef int (*cg_memset16_fn)(unsigned long long, unsigned short, size_t, void *);
typedef int (*cg_memset32_fn)(unsigned long long, unsigned int, size_t, void *);
/* CUresult cuMemsetD2D{8,16,32}Async(CUdeviceptr, size_t pitch, value, size_t width, size_t height, CUstream) */
typedef int (*cg_memset2d8_fn)(unsigned long long, size_t, unsigned char, size_t, size_t, void *);
typedef int (*cg_memset2d16_fn)(unsigned long long, size_t, unsigned short, size_t, size_t, void *);
typedef int (*cg_memset2d32_fn)(unsigned long long, size_t, unsigned int, size_t, size_t, void *);
/* CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream) */
typedef int (*cg_memcpy_async_fn)(unsigned long long, unsigned long long, size_t, void *);

/* The launches issue() makes together (_native_issue.c). */
typedef struct cg_issue_batch cg_issue_batch;

/* One stream call of issue() or capture(): a kernel launch, a fill or a 1-D copy. */
enum { OP_LAUNCH, OP_MEMSET, OP_MEMCPY };

typedef struct {
    int op, call;          /* OP_* (-1: nothing to call, an empty node), and the CALL_* made */
    Py_ssize_t index;      /* the node's position in the order */
    /* OP_LAUNCH */
    void *func;
    unsigned int d[6], smem;
    void **params;         /* into the batch's ptrs; NULL for a kernel without parameters */
    PyObject *lk, *args;   /* held until launched (NULL for the other ops) */
    /* OP_MEMSET (width elements of height rows, pitch bytes apart) and OP_MEMCPY (width bytes) */
    unsigned long long dst, src;
    size_t width, height, pitch;
    unsigned int value;
} issue_launch;

typedef struct {
    PyObject_HEAD
    int busy, rc, failed; /* rc, failed: the last issue() or capture() (launch() returns its own) */
    void *launch;
    void *capture_info; /* NULL: no capture loop */
    void *update_deps;
    PyTypeObject *kernel_type, *node_type; /* NULL until initialized */
    cg_kernel_slots kn;
    cg_node_slots nd;
    PyObject *kernels; /* dict: id(kernel) -> LaunchKernel */
    PyObject *names[NAME_COUNT];
    unsigned long limits[6]; /* grid x, y, z, block x, y, z */
    PyObject *target_types[MAX_TARGETS];
    int target_modes[MAX_TARGETS];
    int ntargets;
    ConfigEntry configs[CONFIG_CACHE]; /* two places per config (see config_entry), least recently used replaced */
    unsigned long long tick;
    void **want, **cur; /* capture: the dependencies wanted, and the stream's (sorted) */
    size_t want_cap, cur_cap, ncur;
    cg_issue_batch *batch; /* issue(): allocated by its first call */
    cg_simple_kinds simple;     /* the fill, copy and empty node kinds issue() takes (simple(); none before) */
    void *ops[STREAM_OPS];      /* their stream calls, CALL_MEMSET_D8 on (NULL: that call goes through Python) */
} StreamLauncher;

/* The run's state across nodes: the kernel in use, its buffer taken (cg_lk_take), and the argument
 * tuple packed last in it (both held). Released by cg_run_end. */
typedef struct {
    LaunchKernel *lk;
    PyObject *packed;
    cg_handle_memo memo; /* the run's addresses read (see cg_handle_memo) */
} RunState;

/* Pack `args` (held by the caller) into lk's buffer by the learned kinds (cg_pack, the kernel loop's
 * packer too); the caller has taken the buffer (cg_lk_take). `params`: the run's parameters (a Graph.run or
 * capture with bindings; NULL: a Param is declined). 1: packed; 0: declined (no exception set). May run
 * Python code (int(handle), a type's __hash__). */
static inline int
cg_lk_pack(LaunchKernel *lk, PyObject *args, cg_handle_memo *memo, const cg_simple_kinds *params)
{
    return cg_pack(&lk->pk, args, memo, params) != 0;
}

/* Take lk's argument buffer for one call, from packing to the end of the driver calls reading it: 1,
 * or 0 when another call has it (a second launcher, LaunchKernel.pack, or a thread of either while
 * the GIL is released around the driver call: the caller declines). Runs no Python code. */
static inline int
cg_lk_take(LaunchKernel *lk)
{
    if (lk->busy)
        return 0;
    lk->busy = 1;
    return 1;
}

static inline void
cg_lk_give(LaunchKernel *lk)
{
    lk->busy = 0;
}

/* _native_launcher.c */
/* Begin a call: 1, or 0 when the launcher is busy or not initialized (the caller declines). */
int cg_launcher_enter(StreamLauncher *self);
/* cuLaunchKernel of lk's function and buffer with dims d[0:6]; the CUresult. `release`: the GIL is released
 * around it (an eager launch; a launch into a capturing stream keeps it: see _native_launcher.c). */
int cg_launcher_call(StreamLauncher *self, LaunchKernel *lk, const unsigned int *d, unsigned int smem, void *stream,
                     int release);
/* The LaunchKernel registered for `kernel` (a new reference), or NULL (no exception set). Runs no Python code. */
LaunchKernel *cg_launcher_kernel(StreamLauncher *self, PyObject *kernel);
/* Make `node` (held by the caller) ready to launch in `run`: 1, or 0 when the Python path takes it. */
int cg_run_prepare(StreamLauncher *self, RunState *run, PyObject *node, unsigned int *d, unsigned int *smem);
/* Give back the run's buffer and release what it held (may run Python code: call it last). */
void cg_run_end(RunState *run);
/* The start index argv[1] (an exact int, checked by the caller) and the stream handle argv[2] of issue()
 * and capture() (`what` names the call in the errors): 0, or -1 with an exception set. */
int cg_run_args(PyObject *const *argv, const char *what, Py_ssize_t *start, void **stream);

/* _native_issue.c: StreamLauncher.issue, and the freeing of its batch (empty) */
PyObject *cg_launcher_issue(StreamLauncher *self, PyObject *const *argv, Py_ssize_t argc);
extern const char cg_launcher_issue_doc[];
/* The stream call of the fill, copy or empty node `node` (held by the caller, of a kind simple() taught)
 * in *op: 1 (op->op is -1 for an empty node: nothing to call), or 0 when Python issues it (an operand
 * cg_simple_write leaves to Python, a value wider than the fill's elements, a call without its entry
 * point). Runs no Python code but the memory-type queries (a driver call). */
int cg_issue_prepare(StreamLauncher *self, PyObject *node, issue_launch *op);
/* Make the call of `op` (op->op >= 0) on `stream`: its CUresult. Runs no Python code (the GIL is the caller's
 * to release). */
int cg_issue_one(StreamLauncher *self, const issue_launch *op, void *stream);
/* StreamLauncher.simple: the fill, copy and empty node kinds issue() takes, and their stream calls */
PyObject *cg_launcher_simple(StreamLauncher *self, PyObject *const *argv, Py_ssize_t argc);
extern const char cg_launcher_simple_doc[];
void cg_issue_batch_free(cg_issue_batch *b);

/* _native_capture.c: StreamLauncher.capture */
PyObject *cg_launcher_capture(StreamLauncher *self, PyObject *const *argv, Py_ssize_t argc);
extern const char cg_launcher_capture_doc[];

#endif
