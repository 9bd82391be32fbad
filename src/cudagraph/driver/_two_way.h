/*
 * A small cache keyed by an object's address, two places per key (its address's, and the next), the least
 * recently used of the two replaced: two live keys whose addresses share a place both stay. Used by the
 * stream launcher's configurations (_native_launcher.c) and PathLaunch's (definition/_define_launch.c).
 *
 * The entries are structures of `stride` bytes in an array of `count`; each holds its key (a pointer) at byte
 * `key_at` and its last use (an unsigned long long the caller advances) at byte `used_at`. Header only: the two
 * extension modules each compile it. Runs no Python code.
 */
#ifndef CUDAGRAPH_TWO_WAY_H
#define CUDAGRAPH_TWO_WAY_H

#include <stddef.h>
#include <stdint.h>

/* The entry holding `key`, or NULL. */
static inline void *
cg_two_way_find(void *table, size_t stride, size_t count, size_t key_at, const void *key)
{
    size_t h = (size_t)(((uintptr_t)key >> 4) % count);
    for (int k = 0; k < 2; k++, h = (h + 1) % count) {
        char *e = (char *)table + h * stride;
        if (*(void **)(e + key_at) == key)
            return e;
    }
    return NULL;
}

/* Where `key` goes: its entry, else a free one of its two places, else the one of the two used least recently. */
static inline void *
cg_two_way_place(void *table, size_t stride, size_t count, size_t key_at, size_t used_at, const void *key)
{
    void *found = cg_two_way_find(table, stride, count, key_at, key);
    if (found != NULL)
        return found;
    size_t h = (size_t)(((uintptr_t)key >> 4) % count);
    char *a = (char *)table + h * stride, *b = (char *)table + ((h + 1) % count) * stride;
    if (*(void **)(a + key_at) == NULL)
        return a;
    if (*(void **)(b + key_at) == NULL)
        return b;
    return *(unsigned long long *)(a + used_at) <= *(unsigned long long *)(b + used_at) ? a : b;
}

#endif
