/* The consistent-hash ring (see ring.h). */
#include "sdk/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct point {
    uint64_t h;
    uint32_t member;
} point;

struct pc_ring {
    int refs;
    size_t n;
    char **members; /* sorted, unique */
    point *points;  /* n * PC_RING_VNODES, sorted by (h, member) */
};

uint64_t pc_ring_hash_add(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t pc_ring_hash_finish(uint64_t h)
{
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    return h ^ h >> 31;
}

uint64_t pc_ring_hash(const void *data, size_t n)
{
    return pc_ring_hash_finish(pc_ring_hash_add(PC_RING_HASH_INIT, data, n));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_point(const void *a, const void *b)
{
    const point *x = a, *y = b;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    /* members are sorted by name, so their indices order equal points by name */
    return (x->member > y->member) - (x->member < y->member);
}

pc_ring *pc_ring_new(const char *const *members, size_t n)
{
    pc_ring *r = pc_xcalloc(1, sizeof *r);
    r->refs = 1;
    if (!n) return r;
    char **v = pc_xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = pc_xstrdup(members[i]);
    qsort(v, n, sizeof *v, cmp_str);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && !strcmp(v[k - 1], v[i])) {
            free(v[i]);
            continue;
        }
        v[k++] = v[i];
    }
    r->n = k;
    r->members = v;
    r->points = pc_xmalloc(k * PC_RING_VNODES * sizeof *r->points);
    for (size_t m = 0; m < k; m++) {
        size_t len = strlen(v[m]);
        uint64_t base = pc_ring_hash_add(PC_RING_HASH_INIT, v[m], len);
        for (unsigned vn = 0; vn < PC_RING_VNODES; vn++) {
            char suffix[16];
            int sl = snprintf(suffix, sizeof suffix, "#%u", vn);
            r->points[m * PC_RING_VNODES + vn] = (point){
                pc_ring_hash_finish(pc_ring_hash_add(base, suffix, (size_t)sl)), (uint32_t)m};
        }
    }
    qsort(r->points, k * PC_RING_VNODES, sizeof *r->points, cmp_point);
    return r;
}

pc_ring *pc_ring_ref(pc_ring *r)
{
    if (r) r->refs++;
    return r;
}

void pc_ring_unref(pc_ring *r)
{
    if (!r || --r->refs > 0) return;
    for (size_t i = 0; i < r->n; i++)
        free(r->members[i]);
    free(r->members);
    free(r->points);
    free(r);
}

size_t pc_ring_size(const pc_ring *r)
{
    return r ? r->n : 0;
}

const char *pc_ring_member(const pc_ring *r, size_t i)
{
    return r && i < r->n ? r->members[i] : NULL;
}

size_t pc_ring_find(const pc_ring *r, const char *name)
{
    size_t lo = 0, hi = pc_ring_size(r);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->members[mid], name);
        if (!c) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return PC_RING_NONE;
}

size_t pc_ring_owner(const pc_ring *r, uint64_t k)
{
    if (!r || !r->n) return PC_RING_NONE;
    size_t n = r->n * PC_RING_VNODES, lo = 0, hi = n;
    while (lo < hi) { /* the first point >= k */
        size_t mid = lo + (hi - lo) / 2;
        if (r->points[mid].h < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return r->points[lo == n ? 0 : lo].member;
}
