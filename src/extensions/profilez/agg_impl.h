/* The profilez aggregate's insides, shared by agg.c (aggregating) and query.c (the JSON). */
#ifndef PC_PZ_AGG_IMPL_H
#define PC_PZ_AGG_IMPL_H

#include <stdbool.h>

#include "extensions/profilez/agg.h"

static inline int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

typedef struct name_ent {
    char *s; /* NULL: dead (its slot in the hash table is a tombstone until the next rebuild) */
    uint64_t hash;
    uint32_t refs;
    bool free_listed;
} name_ent;

typedef struct names {
    name_ent *v;
    size_t n, cap;
    uint32_t *slots; /* id + 1, 0 = empty */
    size_t nslots, used_slots;
    size_t live, dead;
    uint32_t *freeids;
    size_t nfree, capfree;
} names;

typedef struct stk {
    uint32_t *frames; /* leaf first; NULL = empty slot (a stack of no frames has frames != NULL) */
    uint32_t n;
    bool over; /* the slice's "[over budget]" entry: not counted in the budget */
    uint64_t hash;
    int64_t value;
    uint64_t samples;
} stk;

typedef struct slice {
    uint64_t slot; /* now_ms / slice_ms when it was filled */
    bool used;
    stk *tab;
    size_t cap, n;  /* n: entries, the over entry included */
    size_t counted; /* entries counted in the budget */
} slice;

typedef struct series {
    char *service, *type, *unit, *key; /* key: "type:unit" */
    slice *sl;
    size_t n_stacks;
    uint64_t last_ms;
    uint64_t evicted, over_samples;
} series;

struct pz_agg {
    pz_limits l;
    uint64_t slice_ms;
    names nm;
    series **ser;
    size_t n_ser;
    pz_stats st;
    uint32_t id_over, id_trunc;
};

#endif
