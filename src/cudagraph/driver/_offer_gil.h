/*
 * Offering the GIL from long C loops (_native_loop.c: KernelLoop.run; _native_lift.c: lift_graph).
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

/* Offer the GIL to other threads once it has been held `period` ns (cg_offer_period_ns) since *since (a
 * cg_monotonic_ns() reading the caller keeps): a release and re-acquisition, in which a thread that has asked for
 * it takes it, as between two bytecodes of Python code. Long C loops (adding nodes, lifting) call it at each
 * iteration, between iterations (holding no borrowed reference); the clock is read every CG_OFFER_GIL_CHECK
 * iterations. Without it such a loop holds the GIL for the whole build (tens of ms for 100,000 nodes); with it
 * a build beside a busy thread takes up to about twice its time, as Python code would, and one shorter than the
 * period never offers it (each offer a busy thread takes costs its switch interval). */
#define CG_OFFER_GIL_CHECK 256
static inline void
cg_offer_gil(Py_ssize_t iteration, long long *since, long long period)
{
    if ((iteration & (CG_OFFER_GIL_CHECK - 1)) != CG_OFFER_GIL_CHECK - 1)
        return;
    if (cg_monotonic_ns() - *since < period)
        return;
    Py_BEGIN_ALLOW_THREADS
    Py_END_ALLOW_THREADS
    *since = cg_monotonic_ns();
}

/* The period of cg_offer_gil, in ns: twice sys.getswitchinterval() (10 ms by default). A thread waiting for the
 * GIL asks for it only after a whole interval without a switch, and a release wakes it and restarts that wait:
 * offers at the interval itself could keep it waiting for the whole loop (a 300,000-node lowering over a driver
 * that does nothing: one 30 ms wait at 5 ms, none above 7 ms at twice that). Runs Python code (the sys
 * function): call it before reading anything borrowed. */
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

#endif
