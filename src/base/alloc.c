/* The aborting allocators (alloc.h). */
#include "base/alloc.h"

#include <malloc.h>
#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n)
{
    fprintf(stderr, "profcol: out of memory allocating %zu bytes\n", n);
    abort();
}

void *pc_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *pc_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom(n * size);
    return p;
}

void *pc_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *pc_xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) oom(strlen(s));
    return d;
}

static atomic_ulong activity;
static unsigned long seen;
static int trimmed = 1; /* nothing to give back before anything ran */

void pc_mem_tune(void)
{
    mallopt(M_MMAP_THRESHOLD, (int)PC_MEM_REUSE_MAX);
    mallopt(M_TRIM_THRESHOLD, (int)PC_MEM_KEEP_MAX);
    /* one heap for every thread: malloc_trim gives back the top of the main heap, never of a
     * thread's own (glibc 2.36); the blocks are few and large (arenas, buffers), so the lock
     * costs nothing measurable */
    mallopt(M_ARENA_MAX, 1);
}

void pc_mem_note_activity(void)
{
    atomic_fetch_add_explicit(&activity, 1, memory_order_relaxed);
}

int pc_mem_idle(void)
{
    unsigned long now = atomic_load_explicit(&activity, memory_order_relaxed);
    if (now != seen) {
        seen = now;
        trimmed = 0;
        return 0;
    }
    if (trimmed) return 0;
    trimmed = 1;
    malloc_trim(0);
    return 1;
}
