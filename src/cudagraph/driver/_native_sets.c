/*
 * The driver set calls of a rebind or patch, made with the GIL released once (cg_set_batch).
 *
 * The caller checks everything first (the GIL held: Python objects are read) and records each write
 * (cg_batch_write) and each driver call (cg_batch_call) in order, entry by entry. Then cg_batch_run makes
 * the writes, keeping the bytes each replaces, releases the GIL, makes every driver call in order, and
 * takes the GIL back. Releasing it once instead of once per node matters beside another busy Python
 * thread: each release hands it over for that thread's whole switch interval (5 ms by default). A
 * driver call still runs with the GIL released, as cuda.bindings runs it (under compute-sanitizer a set
 * call waits on other threads' launches). When the driver refuses a call, the writes of the entries
 * after its entry are put back, in reverse order: the structures are then as a run that stopped at
 * that call leaves them (the entries before it written and set, its own written, the later ones as
 * they were), as the Python twins leave them.
 *
 * A rebinding launch (the compiled Executable.launch through the compiled binds) hands a launch of the
 * executable to make after the calls (cg_then_launch): it is made in the same release, so that a step
 * hands the GIL over once, not twice; and only when every call succeeded.
 */
#include "_native.h"

void
cg_batch_init(cg_set_batch *b)
{
    b->ncalls = b->nwrites = b->nsaved = 0; /* (the inline arrays are filled as they are used) */
    b->calls = b->calls0;
    b->writes = b->writes0;
    b->saved = b->saved0;
    b->ccalls = CG_BATCH_INLINE;
    b->cwrites = CG_BATCH_INLINE;
    b->csaved = (Py_ssize_t)sizeof b->saved0;
}

void
cg_batch_free(cg_set_batch *b)
{
    if (b->calls != b->calls0)
        PyMem_Free(b->calls);
    if (b->writes != b->writes0)
        PyMem_Free(b->writes);
    if (b->saved != b->saved0)
        PyMem_Free(b->saved);
    cg_batch_init(b);
}

/* Room for `need` items of `size` bytes in *items (its capacity *cap, its inline storage `inline_items`):
 * 0, or -1 with MemoryError set. */
static int
batch_room(void **items, Py_ssize_t *cap, Py_ssize_t need, size_t size, void *inline_items)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t grown = *cap * 2 > need ? *cap * 2 : need;
    void *more = PyMem_Malloc((size_t)grown * size);
    if (more == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(more, *items, (size_t)*cap * size);
    if (*items != inline_items)
        PyMem_Free(*items);
    *items = more;
    *cap = grown;
    return 0;
}

int
cg_batch_call(cg_set_batch *b, void *fn, void *node, const void *params, Py_ssize_t entry, Py_ssize_t index)
{
    if (batch_room((void **)&b->calls, &b->ccalls, b->ncalls + 1, sizeof *b->calls, b->calls0) < 0)
        return -1;
    b->calls[b->ncalls++] = (cg_set_call){fn, node, params, entry, index};
    return 0;
}

int
cg_batch_write(cg_set_batch *b, char *dst, const char *src, unsigned long long word, Py_ssize_t len,
               Py_ssize_t entry)
{
    if (batch_room((void **)&b->writes, &b->cwrites, b->nwrites + 1, sizeof *b->writes, b->writes0) < 0 ||
        batch_room((void **)&b->saved, &b->csaved, b->nsaved + len, 1, b->saved0) < 0)
        return -1;
    b->writes[b->nwrites++] = (cg_set_write){dst, src, word, len, entry, b->nsaved};
    b->nsaved += len;
    return 0;
}

int
cg_batch_run(cg_set_batch *b, void *exec, Py_ssize_t *e_out, Py_ssize_t *i_out, cg_then_launch *then)
{
    if (then != NULL && then->exec != exec)
        then = NULL; /* (another executable: the caller launches it) */
    for (Py_ssize_t k = 0; k < b->nwrites; k++) {
        cg_set_write *w = &b->writes[k];
        memcpy(b->saved + w->at, w->dst, (size_t)w->len);
        memcpy(w->dst, w->src != NULL ? w->src : (const char *)&w->word, (size_t)w->len);
    }
    int rc = 0;
    Py_ssize_t k = 0;
    if (b->ncalls || then != NULL) {
        Py_BEGIN_ALLOW_THREADS
        for (; k < b->ncalls; k++) {
            const cg_set_call *c = &b->calls[k];
            if ((rc = ((cg_set_kernel_fn)c->fn)(exec, c->node, c->params)) != 0)
                break;
        }
        if (rc == 0 && then != NULL) {
            then->rc = then->fn(then->exec, then->stream);
            then->done = 1;
        }
        Py_END_ALLOW_THREADS
    }
    if (rc) {
        Py_ssize_t entry = b->calls[k].entry;
        *e_out = entry;
        *i_out = b->calls[k].index;
        for (Py_ssize_t j = b->nwrites - 1; j >= 0 && b->writes[j].entry > entry; j--) {
            cg_set_write *w = &b->writes[j];
            memcpy(w->dst, b->saved + w->at, (size_t)w->len);
        }
    }
    return rc;
}
