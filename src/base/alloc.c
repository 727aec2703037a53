/* The aborting allocators (alloc.h). */
#include "base/alloc.h"

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
