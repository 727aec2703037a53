/* The profilez aggregate's insides, shared by agg.c (aggregating) and query.c (the JSON). */
#ifndef PC_PZ_AGG_IMPL_H
#define PC_PZ_AGG_IMPL_H

#include <stdbool.h>

#include "extensions/profilez/agg.h"

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

/* A label set: (key, value) name ids, sorted by key id, one value per key. Interned with a
 * reference count (a stack holds one); ids 0 (no labels) and PZ_LSET_OVER ("[labels over
 * budget]": a new set found no room under max_label_sets) are never freed. */
typedef struct lset {
    uint32_t *kv; /* 2 n ids; NULL: a free id */
    uint32_t n, refs;
    uint64_t hash;
} lset;

typedef struct lsets {
    lset *v;
    size_t n, cap;
    uint32_t *slots; /* id + 1; 0 empty; LSET_TOMB a removed one */
    size_t nslots, used;
    uint32_t *freeids;
    size_t nfree, capfree;
    size_t live; /* sets but the two permanent ones */
} lsets;
#define PZ_LSET_OVER 1
#define LSET_TOMB    UINT32_MAX

typedef struct stk {
    uint32_t *frames; /* leaf first; NULL = empty slot (a stack of no frames has frames != NULL) */
    uint32_t n;
    uint32_t lset;
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
    lsets ls;
    uint64_t stack_keys[PZ_MAX_DEPTH + 2]; /* agg.c's stack hash: length and set, then frames */
};

uint32_t pz_name_ref(names *nm, const char *s);
void pz_name_unref(names *nm, uint32_t id);
/* The id of s when it is a name already, no reference taken; else PZ_NAME_NONE. */
#define PZ_NAME_NONE UINT32_MAX
uint32_t pz_name_find(const names *nm, const char *s);
/* s as a name keeps it (names.c), copied into out (PZ_MAX_NAME + 1 bytes) */
const char *pz_name_cut(const char *s, char *out);
void pz_names_free(names *nm);

/* query.c: the top table of q's stacks (their total in *total); whether name has term in it */
struct pc_top *pz_top_collect(const pz_agg *a, const series *se, const pz_query *q, int64_t *total);
bool pz_search_hit(const char *name, const char *term);
/* diff.c: a top table's rows against a baseline's (t and bt: pc_top), sorted by change */
void pz_top_diff_json(const pz_query *q, struct pc_top *t, int64_t total, struct pc_top *bt,
                      int64_t btotal, pc_buf *out);

/* labels.c */
void pz_lsets_init(pz_agg *a);
void pz_lsets_free(pz_agg *a);
void pz_lset_retain(pz_agg *a, uint32_t id);
void pz_lset_unref(pz_agg *a, uint32_t id);
/* The label sets of one profile's samples, remembered: samples with the same attribute indices
 * and link have the same set (the resource is the profile's), so most samples of a profile
 * intern no name (perf on bench/run.sh otlp-relay-large --profilez: the label sets were a third
 * of profilez's CPU). Direct-mapped: a collision only recomputes, so hostile input cannot make
 * it cost more than no memo. */
#define PZ_LSET_MEMO 64
typedef struct pz_lset_memo_entry {
    const int32_t *attrs; /* the first sample's indices: the batch outlives the memo */
    size_t n;
    int32_t link;
    bool used;
    uint32_t id; /* one reference held by the memo */
    uint64_t dropped;
} pz_lset_memo_entry;
/* Sample attribute keys by string index, named once a profile (a span id's key is the same for
 * every sample that has one): direct-mapped, the name id with one reference held. */
#define PZ_KEY_MEMO 16
typedef struct pz_key_memo_entry {
    int32_t strindex;
    uint32_t id; /* + 1; 0: empty */
} pz_key_memo_entry;
typedef struct pz_lset_memo {
    pz_lset_memo_entry e[PZ_LSET_MEMO];
    pz_key_memo_entry k[PZ_KEY_MEMO];
} pz_lset_memo;
/* The label set of a sample: its resource's attributes (but service.name), its own attributes
 * and its link's trace_id and span_id (hex), with one reference. m: the profile's memo, all
 * zeros at first, r the same for every call with it; pz_lset_memo_clear drops it. */
uint32_t pz_sample_lset(pz_agg *a, pz_lset_memo *m, const pc_dictionary *d, const pc_resource *r,
                        const pc_sample *s);
void pz_lset_memo_clear(pz_agg *a, pz_lset_memo *m);
/* Whether a stack's label set holds every key=value of the query. */
bool pz_lset_match(const pz_agg *a, uint32_t id, const pz_query *q);

#endif
