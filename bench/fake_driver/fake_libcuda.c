/*
 * A fake CUDA driver (libcuda.so.1) for measuring host-side overhead on a machine without a GPU
 * (bench/cpu_overhead.py builds it and runs under it). Every entry point that cuda.bindings,
 * cuda.core and cudagraph call in the benchmarks succeeds and does (almost) nothing; stream capture
 * is emulated (node handles, dependency sets, events joining streams); every kernel has the layout of
 * inc(float* x, float a, int n). Launches and captured edges can be logged (fake_log_enable) so that
 * two paths can be compared call by call. Not a driver: nothing runs, no memory is real.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long u64;
typedef void *H;

/* ------------------------------------------------------------------ objects */
enum { K_NONE, K_STREAM, K_EVENT, K_GRAPH, K_NODE, K_KERNEL, K_LIB, K_EXEC, K_CTX, K_MEM };
typedef struct {
    int kind;
    int capturing;      /* stream */
    H graph;            /* stream under capture: its graph */
    u64 capture_id;
    H *deps;            /* stream: capture dependencies; event: snapshot */
    size_t ndeps, cap;
    int has_snapshot;   /* event recorded under capture */
    size_t nodes;       /* graph */
    int ntype;          /* node (recorded graphs): its CUgraphNodeType */
    struct KernelCopy *kc; /* kernel node (recorded graphs): its parameters, arguments copied */
    H *members;         /* graph (recorded graphs): its nodes, in the order added */
    size_t nmembers, mcap;
} Obj;

#define MAX_OBJS (1u << 22)
static Obj *objs;
static size_t nobjs = 1;
static u64 next_capture = 1;
static void *joined[4096]; /* streams that joined a capture through an event */
static size_t njoined;

static H new_obj(int kind) {
    if (!objs) objs = calloc(MAX_OBJS, sizeof(Obj));
    if (nobjs >= MAX_OBJS) nobjs = 1 << 16; /* wrap (only for very long runs) */
    Obj *o = &objs[nobjs];
    free(o->deps);
    free(o->kc);
    free(o->members);
    memset(o, 0, sizeof *o);
    o->kind = kind;
    return (H)(uintptr_t)(0x100000 + (nobjs++) * 16);
}
static Obj *get(H h) {
    uintptr_t v = (uintptr_t)h;
    if (!objs || v < 0x100000 || (v - 0x100000) % 16) return NULL;
    size_t i = (v - 0x100000) / 16;
    return i < nobjs ? &objs[i] : NULL;
}
static void set_deps(Obj *o, H const *d, size_t n) {
    if (n > o->cap) { o->cap = 2 * n + 4; o->deps = realloc(o->deps, o->cap * sizeof(H)); }
    if (n) memmove(o->deps, d, n * sizeof(H));
    o->ndeps = n;
}
static void add_deps(Obj *o, H const *d, size_t n) {
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < o->ndeps && o->deps[j] != d[i]) j++;
        if (j < o->ndeps) continue;
        if (o->ndeps + 1 > o->cap) { o->cap = 2 * o->cap + 4; o->deps = realloc(o->deps, o->cap * sizeof(H)); }
        o->deps[o->ndeps++] = d[i];
    }
}
/* Captured edges (from, to), when logging. */
typedef struct { H from, to; } Edge;
static Edge *edges;
static size_t nedges, edges_cap;
static int logging;
size_t fake_edges_count(void) { return nedges; }
const Edge *fake_edges_get(size_t i) { return i < nedges ? &edges[i] : NULL; }
/* Work issued on a stream: under capture, one new node after the stream's dependencies. */
static void issue(H stream) {
    Obj *s = get(stream);
    if (!s || !s->capturing) return;
    H n = new_obj(K_NODE);
    s = get(stream);
    for (size_t i = 0; logging && i < s->ndeps; i++) {
        if (nedges == edges_cap) { edges_cap = 2 * edges_cap + 64; edges = realloc(edges, edges_cap * sizeof *edges); }
        edges[nedges].from = s->deps[i]; edges[nedges++].to = n;
    }
    Obj *g = get(s->graph);
    if (g) g->nodes++;
    set_deps(s, &n, 1);
}

/* ------------------------------------------------------------------ launch log */
typedef struct {
    H func, stream;
    unsigned grid[3], block[3], smem;
    unsigned char args[64];
    size_t nargs_bytes;
} LaunchRecord;
static LaunchRecord *launches;
static size_t nlaunches, launches_cap;
void fake_log_enable(int on) { logging = on; nlaunches = 0; nedges = 0; }
size_t fake_log_count(void) { return nlaunches; }
const LaunchRecord *fake_log_get(size_t i) { return i < nlaunches ? &launches[i] : NULL; }
size_t fake_log_record_size(void) { return sizeof(LaunchRecord); }

/* every kernel: inc(float* x, float a, int n) */
static const size_t P_OFF[3] = {0, 8, 12}, P_SIZE[3] = {8, 4, 4};

static void log_launch(H f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned smem, H stream, void **params) {
    if (!logging) return;
    if (nlaunches == launches_cap) {
        launches_cap = 2 * launches_cap + 64;
        launches = realloc(launches, launches_cap * sizeof *launches);
    }
    LaunchRecord *r = &launches[nlaunches++];
    memset(r, 0, sizeof *r);
    r->func = f; r->stream = stream;
    r->grid[0] = gx; r->grid[1] = gy; r->grid[2] = gz;
    r->block[0] = bx; r->block[1] = by; r->block[2] = bz;
    r->smem = smem;
    for (int i = 0; i < 3 && params; i++) memcpy(r->args + P_OFF[i], params[i], P_SIZE[i]);
    r->nargs_bytes = 16;
}

/* ------------------------------------------------------------------ entry points */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int ver, u64 flags, int *status) {
    static void *self;
    if (!self) self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *f = self ? dlsym(self, symbol) : NULL;
    if (getenv("FAKE_CUDA_TRACE") && !f) fprintf(stderr, "FAKE missing %s\n", symbol);
    *pfn = f;
    if (status) *status = f ? 0 : 1;
    return 0;
}
CUresult cuInit(unsigned f) { return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuGetErrorString(CUresult e, const char **s) { *s = "fake error"; return 0; }
CUresult cuGetErrorName(CUresult e, const char **s) { *s = "CUDA_ERROR_FAKE"; return 0; }

static H the_ctx;
static H ctx(void) { if (!the_ctx) the_ctx = new_obj(K_CTX); return the_ctx; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int ord) { *d = ord; return ord == 0 ? 0 : 101; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    switch (attr) {
    case 75: *v = 9; break;        /* compute capability major */
    case 76: *v = 0; break;        /* minor */
    case 1: *v = 1024; break;      /* max threads per block */
    case 10: *v = 32; break;       /* warp size */
    case 16: *v = 132; break;      /* multiprocessors */
    case 97: *v = 232448; break;   /* max shared memory per block (opt-in) */
    default: *v = 1; break;
    }
    return 0;
}
CUresult cuDeviceGetName(char *name, int len, int dev) { snprintf(name, (size_t)len, "Fake GPU"); return 0; }
CUresult cuDeviceGetUuid(void *u, int dev) { memset(u, 0, 16); return 0; }
CUresult cuDeviceGetUuid_v2(void *u, int dev) { memset(u, 0, 16); return 0; }
CUresult cuDeviceTotalMem(size_t *b, int dev) { *b = (size_t)1 << 37; return 0; }
CUresult cuDevicePrimaryCtxRetain(H *c, int dev) { *c = ctx(); return 0; }
CUresult cuDevicePrimaryCtxRelease(int dev) { return 0; }
CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) { *flags = 0; *active = 1; return 0; }
CUresult cuCtxGetCurrent(H *c) { *c = ctx(); return 0; }
CUresult cuCtxSetCurrent(H c) { return 0; }
CUresult cuCtxPushCurrent(H c) { return 0; }
CUresult cuCtxPopCurrent(H *c) { if (c) *c = ctx(); return 0; }
CUresult cuCtxGetDevice(int *d) { *d = 0; return 0; }
CUresult cuCtxGetId(H c, u64 *id) { *id = 1; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuCtxGetApiVersion(H c, unsigned *v) { *v = 13000; return 0; }

CUresult cuStreamCreate(H *s, unsigned flags) { *s = new_obj(K_STREAM); return 0; }
CUresult cuStreamCreateWithPriority(H *s, unsigned flags, int prio) { *s = new_obj(K_STREAM); return 0; }
CUresult cuStreamDestroy(H s) { return 0; }
CUresult cuStreamSynchronize(H s) { return 0; }
CUresult cuStreamQuery(H s) { return 0; }
CUresult cuStreamGetCtx(H s, H *c) { *c = ctx(); return 0; }
CUresult cuStreamGetDevice(H s, int *d) { *d = 0; return 0; }
CUresult cuStreamGetId(H s, u64 *id) { *id = (u64)(uintptr_t)s; return 0; }
CUresult cuStreamGetPriority(H s, int *p) { *p = 0; return 0; }
CUresult cuStreamGetFlags(H s, unsigned *f) { *f = 0; return 0; }
CUresult cuStreamIsCapturing(H s, int *status) { Obj *o = get(s); *status = o && o->capturing ? 1 : 0; return 0; }
CUresult cuStreamBeginCapture(H s, int mode) {
    Obj *o = get(s);
    if (!o) return 400;
    if (o->capturing) return 900; /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
    H g = new_obj(K_GRAPH);
    o = get(s);
    o->capturing = 1; o->graph = g; o->capture_id = next_capture++; o->ndeps = 0;
    return 0;
}
CUresult cuStreamEndCapture(H s, H *graph) {
    Obj *o = get(s);
    if (!o || !o->capturing) { *graph = NULL; return 901; }
    *graph = o->graph;
    u64 id = o->capture_id;
    for (size_t i = 0; i < njoined; i++) {
        Obj *j = get(joined[i]);
        if (j && j->capturing && j->capture_id == id) { j->capturing = 0; j->ndeps = 0; }
    }
    njoined = 0;
    o->capturing = 0; o->ndeps = 0;
    return 0;
}
CUresult cuStreamGetCaptureInfo(H s, int *status, u64 *id, H *graph, H const **deps, void const **edata, size_t *n) {
    Obj *o = get(s);
    int cap = o && o->capturing;
    if (status) *status = cap;
    if (id) *id = cap ? o->capture_id : 0;
    if (graph) *graph = cap ? o->graph : NULL;
    if (deps) *deps = cap ? o->deps : NULL;
    static unsigned char *zero_edges;
    static size_t zero_cap;
    if (cap && o->ndeps > zero_cap) { zero_cap = 2 * o->ndeps; free(zero_edges); zero_edges = calloc(zero_cap, 8); }
    if (edata) *edata = cap && o->ndeps ? zero_edges : NULL;
    if (n) *n = cap ? o->ndeps : 0;
    return 0;
}
CUresult cuStreamUpdateCaptureDependencies(H s, H *deps, void const *edata, size_t n, unsigned flags) {
    Obj *o = get(s);
    if (!o || !o->capturing) return 906; /* CUDA_ERROR_STREAM_CAPTURE_ILLEGAL (approx.) */
    if (flags == 1) set_deps(o, deps, n); else add_deps(o, deps, n);
    return 0;
}
CUresult cuStreamWaitEvent(H s, H ev, unsigned flags) {
    Obj *e = get(ev), *o = get(s);
    if (!o) return 0; /* the legacy stream */
    if (e && e->has_snapshot) {
        if (!o->capturing) {
            Obj *src = NULL; /* join the capture of the recorded stream: not tracked; same graph is fine */
            (void)src;
            o->capturing = 1;
            if (njoined < 4096) joined[njoined++] = s;
            o->capture_id = e->capture_id;
            o->graph = e->graph;
            o->ndeps = 0;
        }
        add_deps(o, e->deps, e->ndeps);
    }
    return 0;
}
CUresult cuEventCreate(H *e, unsigned flags) { *e = new_obj(K_EVENT); return 0; }
CUresult cuEventDestroy(H e) { return 0; }
CUresult cuEventQuery(H e) { return 0; }
CUresult cuEventSynchronize(H e) { return 0; }
CUresult cuEventRecord(H e, H s) {
    Obj *o = get(s), *ev = get(e);
    if (!ev) return 400;
    if (o && o->capturing) {
        set_deps(ev, o->deps, o->ndeps);
        ev->has_snapshot = 1; ev->capture_id = o->capture_id; ev->graph = o->graph;
    } else {
        ev->has_snapshot = 0;
    }
    return 0;
}
CUresult cuEventRecordWithFlags(H e, H s, unsigned f) { return cuEventRecord(e, s); }

CUresult cuLibraryLoadData(H *lib, const void *code, void *jo, void *jv, unsigned nj, void *lo, void *lv, unsigned nl) {
    *lib = new_obj(K_LIB); return 0;
}
CUresult cuLibraryUnload(H lib) { return 0; }
CUresult cuLibraryGetKernel(H *k, H lib, const char *name) { *k = new_obj(K_KERNEL); return 0; }
CUresult cuLibraryGetModule(H *m, H lib) { *m = new_obj(K_LIB); return 0; }
CUresult cuKernelGetParamInfo(H k, size_t i, size_t *off, size_t *size) {
    if (i >= 3) return 1;
    *off = P_OFF[i]; *size = P_SIZE[i]; return 0;
}
CUresult cuFuncGetParamInfo(H k, size_t i, size_t *off, size_t *size) { return cuKernelGetParamInfo(k, i, off, size); }
CUresult cuKernelGetParamCount(H k, size_t *n) { *n = 3; return 0; }
CUresult cuFuncGetParamCount(H k, size_t *n) { *n = 3; return 0; }
CUresult cuKernelGetName(const char **name, H k) { *name = "inc"; return 0; }
CUresult cuFuncGetName(const char **name, H k) { *name = "inc"; return 0; }
CUresult cuKernelGetFunction(H *f, H k) { *f = k; return 0; }
CUresult cuKernelGetAttribute(int *v, int attr, H k, int dev) { *v = 0; return 0; }
CUresult cuKernelSetAttribute(int attr, int v, H k, int dev) { return 0; }
CUresult cuFuncGetAttribute(int *v, int attr, H f) { *v = 0; return 0; }
CUresult cuFuncSetAttribute(H f, int attr, int v) { return 0; }
CUresult cuKernelGetLibrary(H *lib, H k) { *lib = NULL; return 0; }

CUresult cuLaunchKernel(H f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, H stream, void **params, void **extra) {
    log_launch(f, gx, gy, gz, bx, by, bz, smem, stream, params);
    issue(stream);
    return 0;
}
typedef struct {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    H hStream;
    void *attrs;
    unsigned numAttrs;
} LaunchConfig;
CUresult cuLaunchKernelEx(const LaunchConfig *c, H f, void **params, void **extra) {
    log_launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
               c->sharedMemBytes, c->hStream, params);
    issue(c->hStream);
    return 0;
}
CUresult cuLaunchHostFunc(H stream, void (*fn)(void *), void *data) {
    Obj *s = get(stream);
    if (s && s->capturing) issue(stream); else fn(data);
    return 0;
}
CUresult cuMemsetD8Async(u64 d, unsigned char v, size_t n, H s) { issue(s); return 0; }
CUresult cuMemsetD16Async(u64 d, unsigned short v, size_t n, H s) { issue(s); return 0; }
CUresult cuMemsetD32Async(u64 d, unsigned v, size_t n, H s) { issue(s); return 0; }
CUresult cuMemcpyAsync(u64 d, u64 src, size_t n, H s) { issue(s); return 0; }
static u64 next_addr = 0x7f0000000000ull;
CUresult cuMemAllocAsync(u64 *p, size_t n, H s) { *p = next_addr; next_addr += (n + 255) & ~255ull; issue(s); return 0; }
CUresult cuMemFreeAsync(u64 p, H s) { issue(s); return 0; }
CUresult cuMemAlloc(u64 *p, size_t n) { *p = next_addr; next_addr += (n + 255) & ~255ull; return 0; }
CUresult cuMemFree(u64 p) { return 0; }
CUresult cuPointerGetAttribute(void *data, int attr, u64 p) { memset(data, 0, 8); if (attr == 2) *(int *)data = 2; return 0; }

/* Recorded graphs (off by default: adding a node then costs nothing): with fake_record_graphs(1), the nodes
 * added by cuGraphAddNode are kept with their type, dependencies and (kernels) parameters and argument bytes,
 * so that a graph can be read back (cuGraphGetNodes, cuGraphGetEdges_v2, cuGraphNodeGetDependencies_v2,
 * cuGraphNodeGetType, cuGraphKernelNodeGetParams_v2): bench/lift_cpu.py lifts graphs built here. */
static int recording;
void fake_record_graphs(int on) { recording = on; }
struct KernelCopy {
    unsigned char params[72]; /* CUDA_KERNEL_NODE_PARAMS_v2 as given; kernelParams points at argv */
    void *argv[3];
    unsigned char args[16];
};
static void record_node(Obj *g, H n, H const *deps, size_t nd, const unsigned char *params) {
    Obj *node = get(n);
    memcpy(&node->ntype, params, sizeof node->ntype);
    set_deps(node, deps, nd);
    if (node->ntype == 0) { /* a kernel: inc(float* x, float a, int n) */
        struct KernelCopy *k = node->kc = calloc(1, sizeof *k);
        memcpy(k->params, params + 16, sizeof k->params);
        void **given, **mine = NULL;
        memcpy(&given, k->params + 40, sizeof given);
        if (given) {
            for (int i = 0; i < 3; i++) {
                memcpy(k->args + P_OFF[i], given[i], P_SIZE[i]);
                k->argv[i] = k->args + P_OFF[i];
            }
            mine = k->argv;
        }
        memcpy(k->params + 40, &mine, sizeof mine);
    }
    if (g->nmembers == g->mcap) {
        g->mcap = 2 * g->mcap + 64;
        g->members = realloc(g->members, g->mcap * sizeof(H));
    }
    g->members[g->nmembers++] = n;
}

CUresult cuGraphCreate(H *g, unsigned flags) { *g = new_obj(K_GRAPH); return 0; }
CUresult cuGraphDestroy(H g) { return 0; }
CUresult cuGraphAddNode(H *n, H g, H const *deps, void const *edata, size_t nd, void *params) {
    *n = new_obj(K_NODE);
    Obj *o = get(g);
    int type;
    memcpy(&type, params, sizeof type);
    if (type == 13) { /* a conditional node: its body graphs, in an array the node owns (CUDA_CONDITIONAL_NODE_PARAMS) */
        unsigned size;
        memcpy(&size, (unsigned char *)params + 28, sizeof size);
        Obj *node = get(*n);
        node->members = calloc(size ? size : 1, sizeof(H));
        for (unsigned i = 0; i < size; i++) node->members[i] = new_obj(K_GRAPH);
        memcpy((unsigned char *)params + 32, &node->members, sizeof(H *));
    }
    if (o) o->nodes++;
    if (o && recording) record_node(o, *n, deps, nd, params);
    return 0;
}
CUresult cuGraphAddNode_v2(H *n, H g, H const *deps, void const *edata, size_t nd, void *params)
    __attribute__((alias("cuGraphAddNode")));
CUresult cuGraphGetNodes(H g, H *nodes, size_t *n) {
    Obj *o = get(g);
    size_t count = !o ? 0 : o->members ? o->nmembers : o->nodes;
    if (nodes && o && o->members) {
        if (count > *n) count = *n;
        memcpy(nodes, o->members, count * sizeof(H));
    }
    *n = count;
    return 0;
}
CUresult cuGraphGetEdges_v2(H g, H *from, H *to, void *edata, size_t *n) {
    Obj *o = get(g);
    size_t k = 0;
    for (size_t i = 0; o && o->members && i < o->nmembers; i++) {
        Obj *m = get(o->members[i]);
        for (size_t j = 0; m && j < m->ndeps; j++, k++) {
            if (!from) continue;
            if (k >= *n) { *n = k; return 0; }
            from[k] = m->deps[j];
            to[k] = o->members[i];
            if (edata) memset((char *)edata + 8 * k, 0, 8);
        }
    }
    *n = k;
    return 0;
}
CUresult cuGraphGetEdges(H g, H *from, H *to, void *edata, size_t *n) __attribute__((alias("cuGraphGetEdges_v2")));
CUresult cuGraphNodeGetDependencies_v2(H n, H *deps, void *edata, size_t *count) {
    Obj *o = get(n);
    size_t k = o ? o->ndeps : 0;
    if (deps) {
        if (k > *count) k = *count;
        if (k) memcpy(deps, o->deps, k * sizeof(H));
        if (edata) memset(edata, 0, 8 * k);
    }
    *count = k;
    return 0;
}
CUresult cuGraphNodeGetDependencies(H n, H *deps, void *edata, size_t *count)
    __attribute__((alias("cuGraphNodeGetDependencies_v2")));
CUresult cuGraphKernelNodeGetParams_v2(H n, void *out) {
    Obj *o = get(n);
    if (!o || !o->kc) return 1; /* CUDA_ERROR_INVALID_VALUE */
    memcpy(out, o->kc->params, sizeof o->kc->params);
    return 0;
}
CUresult cuGraphKernelNodeGetParams(H n, void *out) __attribute__((alias("cuGraphKernelNodeGetParams_v2")));
CUresult cuGraphInstantiateWithParams(H *e, H g, void *p) { *e = new_obj(K_EXEC); return 0; }
CUresult cuGraphInstantiate(H *e, H g, u64 flags) { *e = new_obj(K_EXEC); return 0; }
CUresult cuGraphInstantiateWithFlags(H *e, H g, u64 flags) { *e = new_obj(K_EXEC); return 0; }
CUresult cuGraphExecDestroy(H e) { return 0; }
CUresult cuGraphLaunch(H e, H s) { issue(s); return 0; }
CUresult cuGraphUpload(H e, H s) { return 0; }
CUresult cuGraphExecKernelNodeSetParams(H e, H n, void *p) { return 0; }
CUresult cuGraphExecKernelNodeSetParams_v2(H e, H n, void *p) __attribute__((alias("cuGraphExecKernelNodeSetParams")));
CUresult cuStreamGetCaptureInfo_v3(H s, int *status, u64 *id, H *graph, H const **deps, void const **edata, size_t *n)
    __attribute__((alias("cuStreamGetCaptureInfo")));
CUresult cuStreamUpdateCaptureDependencies_v2(H s, H *deps, void const *edata, size_t n, unsigned flags)
    __attribute__((alias("cuStreamUpdateCaptureDependencies")));
CUresult cuCtxGetStreamPriorityRange(int *lo, int *hi) { *lo = 0; *hi = -5; return 0; }
CUresult cuCtxGetFlags(unsigned *f) { *f = 0; return 0; }
CUresult cuDeviceGetDefaultMemPool(H *p, int dev) { *p = new_obj(K_MEM); return 0; }
CUresult cuDeviceGetMemPool(H *p, int dev) { *p = new_obj(K_MEM); return 0; }
CUresult cuMemPoolCreate(H *p, void *props) { *p = new_obj(K_MEM); return 0; }
CUresult cuMemPoolDestroy(H p) { return 0; }
CUresult cuMemPoolSetAttribute(H p, int a, void *v) { return 0; }
CUresult cuMemPoolGetAttribute(H p, int a, void *v) { memset(v, 0, 8); return 0; }
CUresult cuMemPoolSetAccess(H p, void *d, size_t n) { return 0; }
CUresult cuMemAllocFromPoolAsync(u64 *p, size_t n, H pool, H s) { *p = next_addr; next_addr += (n + 255) & ~255ull; return 0; }
CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, u64 p) {
    for (unsigned i = 0; i < n; i++) if (data[i]) memset(data[i], 0, 8);
    return 0;
}
CUresult cuGraphGetRootNodes(H g, H *nodes, size_t *n) { *n = 0; return 0; }
CUresult cuGraphNodeGetType(H n, int *t) { Obj *o = get(n); *t = o ? o->ntype : 0; return 0; }
CUresult cuGraphDebugDotPrint(H g, const char *p, unsigned f) { return 0; }
CUresult cuGraphExecGetFlags(H e, u64 *f) { *f = 0; return 0; }
CUresult cuGraphGetId(H g, unsigned *id) { *id = 1; return 0; }
CUresult cuGraphExecGetId(H e, unsigned *id) { *id = 1; return 0; }
CUresult cuGraphAddEmptyNode(H *n, H g, H const *deps, size_t nd) { *n = new_obj(K_NODE); return 0; }
CUresult cuGraphAddDependencies(H g, H const *a, H const *b, void const *ed, size_t n) { return 0; }
CUresult cuGraphDestroyNode(H n) { return 0; }
CUresult cuGraphClone(H *c, H g) { *c = new_obj(K_GRAPH); return 0; }
CUresult cuGraphExecUpdate(H e, H g, void *info) { return 0; }
CUresult cuGraphExecNodeSetParams(H e, H n, void *p) { return 0; }
CUresult cuGraphNodeSetParams(H n, void *p) { return 0; }
CUresult cuGraphKernelNodeSetAttribute(H n, int a, void *v) { return 0; }
/* A node launches plainly: every attribute a driver answers for graph kernel nodes reads as unset (the
 * memory synchronization domain map defaults to {0, 1}); the stream-only ids and unknown ones are refused. */
CUresult cuGraphKernelNodeGetAttribute(H n, int a, void *v) {
    if (a < 1 || a > 18 || a == 3 || a == 6 || a == 7 || a == 12 || a == 15) return 1; /* CUDA_ERROR_INVALID_VALUE */
    memset(v, 0, 64);
    if (a == 9) ((unsigned char *)v)[1] = 1;
    return 0;
}
CUresult cuThreadExchangeStreamCaptureMode(int *m) { return 0; }
CUresult cuUserObjectCreate(H *o, void *p, void *d, unsigned c, unsigned f) { *o = new_obj(K_MEM); return 0; }
CUresult cuUserObjectRetain(H o, unsigned c) { return 0; }
CUresult cuUserObjectRelease(H o, unsigned c) { return 0; }
CUresult cuGraphRetainUserObject(H g, H o, unsigned c, unsigned f) { return 0; }
CUresult cuGraphReleaseUserObject(H g, H o, unsigned c) { return 0; }
CUresult cuGraphConditionalHandleCreate(u64 *h, H g, H c, unsigned d, unsigned f) { *h = 1; return 0; }
/* Executables (node views, child graph updates), eager 2D/3D fills and copies, graph memory: succeed, do nothing. */
CUresult cuGraphNodeSetEnabled(H e, H n, unsigned on) { return 0; }
CUresult cuGraphNodeGetEnabled(H e, H n, unsigned *on) { *on = 1; return 0; }
CUresult cuGraphExecChildGraphNodeSetParams(H e, H n, H child) { return 0; }
CUresult cuMemcpy3DAsync(void const *copy, H s) { issue(s); return 0; }
CUresult cuMemcpy3DAsync_v2(void const *copy, H s) __attribute__((alias("cuMemcpy3DAsync")));
CUresult cuMemsetD2D8Async(u64 d, size_t pitch, unsigned char v, size_t w, size_t h, H s) { issue(s); return 0; }
CUresult cuMemsetD2D16Async(u64 d, size_t pitch, unsigned short v, size_t w, size_t h, H s) { issue(s); return 0; }
CUresult cuMemsetD2D32Async(u64 d, size_t pitch, unsigned v, size_t w, size_t h, H s) { issue(s); return 0; }
CUresult cuDeviceGetGraphMemAttribute(int dev, int attr, void *v) { memset(v, 0, 8); return 0; }
CUresult cuDeviceGraphMemTrim(int dev) { return 0; }
CUresult cuStreamWaitValue32(H s, u64 addr, unsigned v, unsigned flags) { issue(s); return 0; }
CUresult cuStreamWaitValue32_v2(H s, u64 addr, unsigned v, unsigned flags) __attribute__((alias("cuStreamWaitValue32")));
CUresult cuStreamWaitValue64(H s, u64 addr, u64 v, unsigned flags) { issue(s); return 0; }
CUresult cuStreamWaitValue64_v2(H s, u64 addr, u64 v, unsigned flags) __attribute__((alias("cuStreamWaitValue64")));
CUresult cuStreamWriteValue32(H s, u64 addr, unsigned v, unsigned flags) { issue(s); return 0; }
CUresult cuStreamWriteValue32_v2(H s, u64 addr, unsigned v, unsigned flags) __attribute__((alias("cuStreamWriteValue32")));
CUresult cuStreamWriteValue64(H s, u64 addr, u64 v, unsigned flags) { issue(s); return 0; }
CUresult cuStreamWriteValue64_v2(H s, u64 addr, u64 v, unsigned flags) __attribute__((alias("cuStreamWriteValue64")));
