/*
 * Offering the GIL from long C loops (_native_loop.c: KernelLoop.run; the Cython lift, _reads.pyx lift_graph, does
 * the same).
 *
 * A C loop that runs no Python code holds the GIL from its start to its end: the interpreter offers it to
 * other threads only between bytecodes. These loops offer it themselves, as the interpreter would, once they
 * have held it twice the switch interval (see cg_offer_period_ns), so that building a large graph does not
 * stop every other Python thread for the whole build. Included by _native.h, after <Python.h>.
 */
#ifndef CUDAGRAPH_OFFER_GIL_H
#define CUDAGRAPH_OFFER_GIL_H

#include <time.h>

/* A monotonic clock, in ns (for cg_offer_gil; where there is no POSIX clock_gettime, C11's timespec_get, a wall
 * clock: a jump of it only moves one offer of the GIL). */
static inline long long
cg_monotonic_ns(void)
{
    struct timespec t;
#ifdef CLOCK_MONOTONIC
    clock_gettime(CLOCK_MONOTONIC, &t);
#else
    timespec_get(&t, TIME_UTC);
#endif
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The period of cg_offer_gil, in ns: twice sys.getswitchinterval() (10 ms by default). A thread waiting for the
 * GIL asks for it only after a whole interval without a switch, and a release wakes it and restarts that wait:
 * offers at the interval itself could keep it waiting for the whole loop (bench/build_beside_thread.py --cpu:
 * the thread's longest wait). Runs Python code (the sys function). */
static inline long long
cg_offer_period_ns(void)
{
    double interval = 0.005;
    PyObject *get = PySys_GetObject("getswitchinterval"); /* borrowed: held across the call */
    Py_XINCREF(get);
    PyObject *got = get == NULL ? NULL : PyObject_CallNoArgs(get);
    if (got != NULL && PyFloat_Check(got))
        interval = PyFloat_AS_DOUBLE(got);
    Py_XDECREF(got);
    Py_XDECREF(get);
    PyErr_Clear();
    if (!(interval > 0 && interval <= 1))
        interval = 0.005;
    return (long long)(2e9 * interval);
}

/* A loop's offering state: {0, 0} before its first check (nothing read yet). */
typedef struct {
    long long since;  /* cg_monotonic_ns() when the loop last took the GIL (or was first checked) */
    long long period; /* cg_offer_period_ns(), read at the first check */
} cg_gil_offer;

/* Offer the GIL to other threads once the loop has held it `period` ns: a release and re-acquisition, in which a
 * thread that has asked for it takes it, as between two bytecodes of Python code. Long C loops (adding nodes,
 * lifting) call it at each iteration, between iterations (holding no borrowed reference: it may run Python code
 * and let other threads run); the clock is read every CG_OFFER_GIL_CHECK iterations, and the period at the first
 * reading, so a loop of fewer iterations (an update of a few nodes) pays nothing. Without it such a loop holds
 * the GIL for the whole build (tens of ms for 100,000 nodes); with it a build beside a busy thread takes up to
 * about twice its time, as Python code would, and one shorter than the period never offers it (each offer a busy
 * thread takes costs its switch interval). */
#define CG_OFFER_GIL_CHECK 256
static inline void
cg_offer_gil(Py_ssize_t iteration, cg_gil_offer *o)
{
    if ((iteration & (CG_OFFER_GIL_CHECK - 1)) != CG_OFFER_GIL_CHECK - 1)
        return;
    if (o->period == 0) {
        o->period = cg_offer_period_ns();
        o->since = cg_monotonic_ns();
        return;
    }
    if (cg_monotonic_ns() - o->since < o->period)
        return;
    Py_BEGIN_ALLOW_THREADS
    Py_END_ALLOW_THREADS
    o->since = cg_monotonic_ns();
}

#endif
